"""The vector registers of one BRGEMM register block: which register holds which role
(accumulators, A's vectors, B's broadcast, packed B, masks, lane indices, quads), where each
vector of a block column sits, and the code that moves a block's accumulators to and from C."""
from __future__ import annotations

from einjit.backends import Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64 import instructions as ins
from einjit.backends.x86_64.blocking import (
    DOT_LANE_BYTES,
    PAIR_STEPS,
    TailMode,
    dot_steps,
    share_lanes,
)
from einjit.backends.x86_64.encode import Mem, Reg
from einjit.backends.x86_64.precision import FLOAT32, Precision


class BlockRegisters:
    """Vector register roles of one block: accumulators from register 0 up (per column, then
    the packed tail vectors), A's vectors, the broadcast B element, the packed B vector, the
    AVX-512 lane indices or the AVX2 mask vector from the top down (AVX2 code in 32
    registers: roles from 15 down, accumulators in what they leave and ymm16 up); and where
    the vectors sit.

    In blocks of two or more vectors the tail vector ends at the last tail row (the t rows
    are its top t lanes), so its span never reaches into the next column: a load that
    overlaps the span of a pending masked store waits until the store reaches the cache,
    and the next block's first load of C would do so. In a packed
    vector the column s places before the end of its group has the t lanes that end share*s
    lanes below the top, so a group's last column ends its span at its last row too; the
    others reach into the following column of the same block, whose loads come first.

    An overlapping tail vector (AVX2, `overlap`) is loaded, added to C and stored whole at
    the same place: its lower lanes repeat rows of the block's last full vector with the same
    A, B and order of FMAs, so they hold the same bits, and both vectors read C before either
    is stored. No mask, and no microcoded vmaskmovps store.

    A dot tail (see dot_tail_share) keeps each column's last accumulator for its tail rows, in
    lanes of k-steps; A's tail rows come from the frame (a_tail) instead of a vector of A,
    and the rows of C it adds and stores start right after the full vectors.

    A block in step pairs (see PAIR_STEPS) keeps two accumulators a column and two vectors of
    A; after sum_pairs the first holds the column's vector of C. Its tail in pairs has a
    packed accumulator a group and A's tail rows of both steps in a_tail; sum_pairs leaves
    it as a packed tail's vector, moved by add_packed and store_packed."""

    def __init__(self, target: Target, vectors: int, cols: int, tail_rows: int, mode: TailMode,
                 elements: Precision = FLOAT32, bank: int = 0, carried: bool = False,
                 widest: frozenset[int] = frozenset()):
        group, overlap, quads, dot, pairs = (mode.group, mode.overlap, mode.quads, mode.dot,
                                             mode.pairs)
        self.p, self.overlap, self.dot, self.pairs = elements, overlap, dot, pairs
        self.width, self.lanes = target.vector_bits, target.lanes(elements.bytes)
        self.vector_bytes = self.width // 8
        self.vectors, self.cols, self.tail_rows, self.group = vectors, cols, tail_rows, group
        # a packed tail's, or a tail in step pairs (which the update makes a packed one)
        packs = group > 1 or (pairs and tail_rows > 0)
        self.share = share_lanes(target, tail_rows, elements.bytes) if packs else 0
        self.dwords = self.width // 32       # AVX2 packing works in 32-bit lanes
        own = vectors - 1 if group > 1 else vectors     # vectors with accumulators per column
        if pairs:                                       # rows {0, 1, 4, 5} and {2, 3, 6, 7}
            own = 2
        # a dot tail's B and A registers come first: VEX-encodable (vbroadcastf128, and VEX
        # broadcast loads, which Zen 4 runs faster than EVEX ones) with 32 registers too
        first = 2 if dot else 0
        self.column_vectors = 1 if pairs else own     # vectors of C a column's own hold
        # AVX2 code keeps its roles below 16 (vblendps, vmaskmovps are VEX only); with 32
        # registers (step pairs on an AVX-512 core, see PAIR_STEPS) accumulators go above
        top = (target.registers if target.masks else min(target.registers, 16)) - 1
        a_vectors = 2 if pairs else vectors - 1 if dot else vectors
        self.a = list(range(top, top - a_vectors, -1))
        top -= a_vectors
        self.broadcast = self.packed_b = self.indices = self.mask_vector = None
        self.a_tail = None
        self.dot_share = dot
        self.dot_steps = dot_steps(dot) if dot else 0
        if dot:
            self.broadcast, self.a_tail = 0, 1
        elif group > 1 or not (target.masks and vectors == 1):
            self.broadcast, top = top, top - 1
        if group > 1:
            self.packed_b, top = top, top - 1
            if target.masks:
                self.indices, top = top, top - 1
        elif tail_rows and not target.masks and not (overlap or dot or pairs):
            self.mask_vector, top = top, top - 1
        if pairs and tail_rows:                 # the tail rows of A's two steps
            self.a_tail, top = top, top - 1
        # the last `quads` columns' B quads (see quad_limit)
        self.quads = quads
        self.quad_of = {cols - quads + q: top - q for q in range(quads)}
        top -= quads
        pool = [*range(first, top + 1), *range(max(top + 1, 16), target.registers)]
        packed = -(-cols // group) if packs else 0
        assert len(pool) >= cols * own + packed, "block does not fit the register file"
        self.acc = [pool[j * own:(j + 1) * own] for j in range(cols)]
        self.packed_acc = pool[cols * own:cols * own + packed]
        # the update of C's scratch registers: once K is done, the broadcast register and A's
        # first (a dot tail's, its A register). An update carried into the next block's K
        # loop (see schedule.emit_pipelined) takes the registers of the two lowest
        # accumulators, which neither set then uses: the lower set's move to the top two
        # upper registers no accumulator of an upper set holds (`widest`: the accumulators of
        # the sequence's widest block, whose registers every narrower one's are a prefix
        # of). So both scratch registers stay VEX-encodable (vblendps, vbroadcastf128).
        self.gathered = self.broadcast
        self.spare = self.a[0] if self.a and not dot else self.a_tail
        if carried:
            held = sorted(self.accumulators())
            free = [16 + r for r in range(16) if r not in held and r not in widest]
            assert len(free) >= 2 and held[-1] < 16, "no spare registers for a carried update"
            self.gathered, self.spare = held[:2]
            if not bank:
                moved = dict(zip(held[:2], free[-2:]))
                self.acc = [[moved.get(acc, acc) for acc in accs] for accs in self.acc]
                self.packed_acc = [moved.get(acc, acc) for acc in self.packed_acc]
        if bank:               # the second set of a pipelined run
            self.acc = [[acc + bank for acc in accs] for accs in self.acc]
            self.packed_acc = [acc + bank for acc in self.packed_acc]
        # bytes the tail vector starts before the end of the full vectors
        self.tail_back = (elements.bytes * (self.lanes - tail_rows)
                          if tail_rows and vectors > 1 and not dot else 0)

    def quad_columns(self) -> list[tuple[int, int]]:
        """(column, its quad register) of the quad columns."""
        return sorted(self.quad_of.items())

    def accumulators(self) -> list[int]:
        return [acc for accs in self.acc for acc in accs] + self.packed_acc

    def _tail(self, i: int) -> bool:
        return self.tail_rows and i == self.vectors - 1

    def _masked(self, i: int) -> bool:
        return self._tail(i) and not self.overlap

    def offset(self, i: int) -> int:
        """Byte offset of vector i within a column of the block."""
        return i * self.vector_bytes - (self.tail_back if self._tail(i) else 0)

    def packed_position(self, j: int) -> tuple[int, int]:
        """(packed vector, places before its group's end) of column j."""
        q, jj = divmod(j, self.group)
        size = min(self.group, self.cols - q * self.group)
        return q, size - 1 - jj

    def packed_offset(self, s: int) -> int:
        """Byte offset within its column of the span whose lanes of column s are the tail."""
        return self.offset(self.vectors - 1) + 4 * self.share * s

    def load(self, dst: int, mem: Mem, i: int) -> bytes:
        """Vector i of a block column: rows past M read as 0 without touching memory; a packed
        AVX2 tail: the column's last `share` rows in every share."""
        if self._masked(i) and self.share and self.indices is None:
            return ins.broadcast_rows(dst, mem.offset(4 * (self.dwords - self.share)), self.share)
        return ins.load(dst, mem, self.width, self._masked(i), self.mask_vector, self.p)

    def blend(self, s: int) -> bytes:
        """The lanes of the column s places before its group's end of the packed B := the
        broadcast element (in step pairs: B's pair, over twice the share)."""
        if self.indices is not None:
            return ins.blend(self.packed_b, self.broadcast, self.width, 1 + s)
        steps = PAIR_STEPS if self.pairs else 1
        return ins.blend_lanes(self.packed_b, self.broadcast, self.width,
                            self._share_lanes(s, steps))

    def add(self, acc: int, mem: Mem, i: int) -> bytes:
        """acc += vector i of a block column (A's registers are free to help once K is done;
        a dot tail's: its summed lanes += its rows of C)."""
        if self.dot and self._tail(i):
            rows = ins.load_column(self.gathered, mem, self._tail_dwords(), self.spare)
            width = 256 if self.tail_rows > 4 else 128
            return rows + self.p.add(acc, acc, self.gathered, width)
        return ins.add(acc, mem, self.width, self._masked(i), self.mask_vector, self.spare, self.p)

    def store(self, src: int, mem: Mem, i: int) -> bytes:
        """Vector i of a block column: rows past M are not written."""
        if self.dot and self._tail(i):
            return ins.store_column(mem, src, self._tail_dwords(), self.gathered)
        return ins.store(src, mem, self.width, self._masked(i), self.mask_vector, self.p)

    def sum_pairs(self, columns: range) -> list[bytes]:
        """Each of `columns` of a block in step pairs (whole groups of a packed tail; every
        column where the tail has a vector a column): its rows 0..7 in order in its first
        accumulator, each the sum of its two steps' lanes (the second is scratch after)."""
        code = [op for j in columns for op in self._sum_steps(*self.acc[j])]
        if self.group == 1 and self.packed_acc:
            return code + self._sum_pair_rows(columns)
        # a tail's: share c's row r (lanes 2(pc + r) + q) summed into lane pc + r of its xmm,
        # where add_packed and store_packed take it; halves' sums at lanes 0, 1 first
        for tail in self.packed_acc[columns.start // self.group:
                                    -(-columns.stop // self.group)]:
            code += [*self._sum_steps(tail, tail),
                     enc.vextractf128(self.gathered, tail, 1),
                     enc.vunpcklpd(tail, tail, self.gathered, 128)]
        return code

    def _sum_pair_rows(self, columns: range) -> list[bytes]:
        """A tail in pairs of a vector a column (its last 4 rows, lane 2r + q): each of
        `columns`' rows in order in its xmm, two columns at once (their even and odd steps
        shuffled out of both, summed, the halves interleaved back per column; a last odd
        column with itself)."""
        code, gathered = [], self.gathered
        tails = self.packed_acc[columns.start:columns.stop]
        for first, second in zip(tails[::2], [*tails[1::2], None]):
            code += [*self._sum_steps(first, second or first),   # rows 0, 1 | 2, 3 each
                     enc.vextractf128(gathered, first, 1)]
            if second is not None:
                code.append(enc.vunpckhpd(second, first, gathered, 128))
            code.append(enc.vunpcklpd(first, first, gathered, 128))
        return code

    def _sum_steps(self, low: int, high: int) -> list[bytes]:
        """low := step k's lanes of low and high (vshufps' even lanes) + step k + 1's (odd)."""
        return [enc.vshufps(self.gathered, low, high, 0x88, 256),    # step k
                enc.vshufps(low, low, high, 0xDD, 256),              # step k + 1
                enc.vaddps(low, low, self.gathered, 256)]

    def _tail_dwords(self) -> int:
        """The 32-bit lanes a dot tail's rows of C take (see ins.load_column)."""
        return self.tail_rows * self.p.bytes // DOT_LANE_BYTES

    def sum_dot_lanes(self) -> list[bytes]:
        """Each column's dot accumulator summed over its k-steps: row r's sum in lane r."""
        spare, sums = self.gathered, [accs[-1] for accs in self.acc]
        steps = self.dot_steps
        code = []
        if steps == 1:                          # a vector of rows: nothing to sum
            return code
        if self.p.bytes == 8:                   # one row's 4 steps: halves, then neighbours
            for acc in sums:
                code += [enc.vextractf128(spare, acc, 1), enc.vaddpd(acc, acc, spare, 128),
                         enc.vunpckhpd(spare, acc, acc, 128), enc.vaddpd(acc, acc, spare, 128)]
            return code
        for acc in sums:
            if steps == 8:                  # halves, then quarters, then neighbours
                code += [enc.vextractf128(spare, acc, 1), enc.vaddps(acc, acc, spare, 128)]
                for move in (0x0E, 0x01):
                    code += [enc.vshufps(spare, acc, acc, move, 128),
                             enc.vaddps(acc, acc, spare, 128)]
                continue
            for move in ((0xB1,) if steps == 2 else (0x4E, 0xB1)):   # within a row's lanes
                code += [enc.vshufps(spare, acc, acc, move, 256),
                         enc.vaddps(acc, acc, spare, 256)]
            code.append(enc.vextractf128(spare, acc, 1))   # rows 2, 3 (steps 2) or 1 (4)
            code.append(enc.vshufps(acc, acc, spare, 0x88, 128) if steps == 2
                        else enc.vunpcklps(acc, acc, spare, 128))
        return code

    def stream(self, src: int, mem: Mem, i: int) -> bytes:
        """As store, non-temporal where vector i is whole and vector-aligned in its column
        (a tail is masked or overlaps: it stays a cached store)."""
        if self._tail(i) or self.offset(i) % self.vector_bytes:
            return self.store(src, mem, i)
        return self.p.stream(mem, src, self.width)

    def _share_lanes(self, s: int, steps: int = 1) -> int:
        """Lane bits of the whole share of the column s places before its group's end
        (`steps` k-steps a share)."""
        lanes = self.share * steps
        return ((1 << lanes) - 1) << (self.dwords - lanes * (s + 1))

    def add_packed(self, walker: Reg, q: int, s: int) -> bytes:
        """The lanes of the column s places before its group's end += C's tail rows of that
        column. AVX-512: a masked add. AVX2: the column's last `share` rows of C are gathered
        into their lanes (shares of 4 lanes: a broadcast or insert of 16 bytes; of 1 or 2:
        see _add_lane), added to the packed vector at the group's last column: no masked
        access at all. A share's rows above the tail (share > t) belong to the block's full
        vectors and hold the same sums there (same A rows, same B element, same order), and
        every load of C comes before the first store, so storing them twice is harmless."""
        acc = self.packed_acc[q]
        if self.indices is not None:
            return ins.add_lanes(acc, Mem(walker, disp=self.packed_offset(s)), self.width, 1 + s)
        mem, gathered = Mem(walker, disp=self.share_offset()), self.gathered
        if self.pairs and self.group == 1:          # the column's rows in order in an xmm
            return self.p.add(acc, acc, mem, 128)
        if self.share < 4:
            return self._add_lane(acc, mem, q, s)
        code = (enc.vbroadcastf128(gathered, mem) if s == self._group_size(q) - 1 else
                enc.vinsertf128(gathered, gathered, mem, 1 if s == 0 else 0))
        if s == 0:
            code += self.p.add(acc, acc, gathered, 256)
        return code

    def store_packed(self, walker: Reg, q: int, s: int) -> bytes:
        """The column s places before its group's end's lanes to its tail rows of C. AVX2:
        its share moved to the bottom of an xmm and stored whole (16, 8 or 4 bytes)."""
        acc = self.packed_acc[q]
        if self.indices is not None:
            return ins.store_lanes(acc, Mem(walker, disp=self.packed_offset(s)), self.width, 1 + s)
        mem, spare = Mem(walker, disp=self.share_offset()), self.spare
        if self.pairs and self.group == 1:
            return enc.vmovups_store(mem, acc, 128)
        lane = self._lane(s)
        if self.share == 4:
            return enc.vextractf128(mem, acc, lane // 4)
        code, source = b"", acc
        if lane >= 4:            # the upper half, in spare from its group's first column on
            if lane == max(4, self._lane(self._group_size(q) - 1)):
                code = enc.vextractf128(spare, acc, 1)
            source = spare
        within = lane % 4
        if self.share == 2:
            return code + (enc.vmovhps_store(mem, source) if within
                           else enc.vmovsd_store(mem, source))
        return code + (enc.vextractps(mem, source, within) if within
                       else enc.vmovss_store(mem, source))

    def _lane(self, s: int) -> int:
        """AVX2: the lowest 32-bit lane of the column s places before its group's end (after
        sum_pairs a tail in step pairs is an xmm)."""
        return (4 if self.pairs else self.dwords) - self.share * (s + 1)

    def _group_size(self, q: int) -> int:
        return min(self.group, self.cols - q * self.group)

    def _add_lane(self, acc: int, mem: Mem, q: int, s: int) -> bytes:
        """add_packed for shares of 1 or 2 lanes: each column's rows of C loaded into its lanes
        of an xmm (the lower half's in gathered, the upper's in spare; a half's first column
        by a broadcast, the others by a lane insert), the halves joined and added to the
        packed vector at the group's last column."""
        lane, lowest = self._lane(s), self._lane(self._group_size(q) - 1)
        half = self.gathered if lane < 4 else self.spare
        if lane == (lowest if lane < 4 else max(4, lowest)):
            code = (enc.vbroadcastss(half, mem, 128) if self.share == 1
                    else enc.vmovddup(half, mem))
        else:
            code = (enc.vinsertps(half, half, mem, lane % 4 << 4) if self.share == 1
                    else enc.vmovhps_load(half, half, mem))
        if s:
            return code
        if self._lane(0) < 4:                           # a tail in step pairs: one xmm
            return code + self.p.add(acc, acc, self.gathered, 128)
        below = self.gathered if lowest < 4 else self.spare     # no lower lane: a copy
        return (code + enc.vinsertf128(self.gathered, below, self.spare, 1)
                + self.p.add(acc, acc, self.gathered, 256))

    def share_offset(self) -> int:
        """AVX2: byte offset within its column of the last `share` rows of the block."""
        return self.offset(self.vectors - 1) + 4 * (self.dwords - self.share)
