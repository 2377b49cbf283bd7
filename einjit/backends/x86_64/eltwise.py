"""Shared machinery of the x86-64 element-wise kernels (unary and binary).

Vector: the target's vector shape and the memory accesses every kernel needs — full vectors,
and tails of fewer lanes that touch nothing past the operand (targets with opmask registers,
AVX-512: a k-register write mask, fault-suppressing on loads; AVX2: vmaskmovps with a mask
vector, which neither reads nor writes the masked lanes).

Frame: 32-bit constants, AVX2 mask vectors and lane-number vectors live in a 64-byte aligned
stack frame, written once at entry (qword immediates) and then used as memory operands:
constants on AVX-512 with an embedded {1to16} broadcast of one dword, on AVX2 as eight copies.

ColumnSweep: the loop nest of the non-transposed kernels (columns outside, rows inside in
groups of `unroll` vectors, then leftover vectors and one tail), with a streaming variant.

TransposedSweep: B := op(A)^T in V x V blocks (V = 16 or 8 lanes): V columns of A loaded, op
applied, transposed in registers (transpose), stored as V rows of B; remainders with masked
loads (rows) and masked stores (columns); large outputs are streamed.

Both streaming variants exist because regular stores of a power-of-two-strided transpose put
B's rows into a few cache sets, and because non-temporal stores of whole aligned lines beat
cached stores on outputs far larger than the caches (docs/measurements.md, "Element-wise
streaming").
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from einjit.backends import Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.encode import RAX, RBP, RSP, Mem, Reg
from einjit.backends.x86_64.precision import FLOAT32, Precision

FRAME_ALIGNMENT = 64
LINE_MASK = 63                # cache lines are 64 bytes
LINE_FLOATS = 16              # float32 elements in a cache line (Vector.line_elements)
MAX_UNROLL = 4                # vectors per row group: enough to keep the load ports busy
# Column sweeps stream outputs this large (when they can be aligned): below it cached stores
# win (docs/measurements.md, "Element-wise streaming")
COLUMN_STREAM_MIN_BYTES = 12 << 20
# Memory-bound column sweeps use 256-bit vectors on AVX-512 too: an input whose alignment
# differs from the output's makes every zmm load straddle two cache lines (docs/measurements.md,
# "Element-wise vector width")
MEMORY_BOUND_WIDTH = 256


def float_bits(value: float) -> int:
    """The IEEE binary32 bits of `value` (rounded to float32)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def double_bits(value: float) -> int:
    """The IEEE binary64 bits of `value`."""
    return struct.unpack("<Q", struct.pack("<d", value))[0]


@dataclass(frozen=True)
class Const:
    """A constant of one element (32 bits, or 64 with size=8) kept in the frame; `Vector.op`
    turns it into a memory operand."""
    name: str
    bits: int
    size: int = 4


@dataclass(frozen=True)
class Tail:
    """The first `lanes` lanes of a vector (None: a count set at run time), selected by `mask`
    (a k register on AVX-512, a vector register holding the mask on AVX2)."""
    lanes: int | None
    mask: int


class Frame:
    """Data the kernel keeps on its stack: constants, mask and lane-number vectors."""

    def __init__(self, vector: Vector) -> None:
        self._vector = vector
        self._blobs: list[bytes] = []
        self._offsets: dict[object, int] = {}
        self._size = 0

    def _add(self, key: object, blob: bytes) -> int:
        if key not in self._offsets:
            self._offsets[key] = self._size
            self._blobs.append(blob)
            self._size += -(-len(blob) // 8) * 8
        return self._offsets[key]

    def add_constant(self, const: Const) -> None:
        copies = 1 if self._vector.masks else self._vector.lanes   # EVEX: {1toN} broadcast
        self._add(const, struct.pack("<Q" if const.size == 8 else "<I", const.bits) * copies)

    def add_vector(self, key: object, values: Sequence[int]) -> None:
        """A full vector of the given integers, one per lane (32 or 64 bits as the elements)."""
        code = "q" if self._vector.precision.bytes == 8 else "i"
        self._add(key, struct.pack(f"<{len(values)}{code}", *values))

    def add_mask_vector(self, lanes: int) -> None:
        """An AVX2 mask selecting the first `lanes` lanes (sign bit set)."""
        if self._vector.precision.bytes == 8:
            self._add(("mask", lanes), struct.pack("<4q", *([-1] * lanes + [0] * (4 - lanes))))
            return
        self._add(("mask", lanes), struct.pack("<8i", *([-1] * lanes + [0] * (8 - lanes))))

    def mem(self, key: object) -> Mem:
        return Mem(RSP, disp=self._offsets[key])

    @property
    def empty(self) -> bool:
        return not self._blobs

    def enter(self, asm: Assembler) -> None:
        """Set up the aligned frame (rbp keeps the caller's rsp) and write the data into it.

        Needs rbp among the registers the prologue saved; rax is clobbered."""
        if self.empty:
            return
        size = -(-self._size // FRAME_ALIGNMENT) * FRAME_ALIGNMENT
        asm(enc.mov_rr(RBP, RSP))
        asm.reserve_stack(size)
        asm(enc.and_ri(RSP, -FRAME_ALIGNMENT))
        data = b"".join(blob + bytes(-len(blob) % 8) for blob in self._blobs)
        for offset in range(0, len(data), 8):
            qword = int.from_bytes(data[offset:offset + 8], "little")
            asm(enc.mov_ri(RAX, qword), enc.mov_mr(Mem(RSP, disp=offset), RAX))

    def leave(self, asm: Assembler) -> None:
        if not self.empty:
            asm(enc.mov_rr(RSP, RBP))


@dataclass
class Vector:
    """A target's vectors of `width` bits (at most the target's): loads, stores and operands,
    full or masked to a Tail. Targets with opmask registers (AVX-512) mask tails with k
    registers and use EVEX forms (embedded broadcasts, compares into masks) at any width."""
    target: Target
    width: int = 0      # bits; 0: the target's full width
    precision: Precision = FLOAT32
    frame: Frame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.width = min(self.width or self.target.vector_bits, self.target.vector_bits)
        self.frame = Frame(self)

    @property
    def lanes(self) -> int:
        return self.width // (8 * self.precision.bytes)

    @property
    def line_elements(self) -> int:
        """Elements in a 64-byte cache line."""
        return (LINE_MASK + 1) // self.precision.bytes

    @property
    def registers(self) -> int:
        return self.target.registers

    @property
    def masks(self) -> int:
        """Opmask registers usable as write masks (0: none, masks are vectors)."""
        return self.target.masks

    @property
    def bytes(self) -> int:
        return self.width // 8

    def load(self, dst: int, mem: Mem, tail: Tail | None = None) -> bytes:
        p = self.precision
        if tail is None:
            return p.load(dst, mem, self.width)
        if self.masks:
            return p.load(dst, mem, self.width, mask=tail.mask, zeroing=True)
        return p.mask_load(dst, tail.mask, mem, self.width)

    def store(self, mem: Mem, src: int, tail: Tail | None = None) -> bytes:
        p = self.precision
        if tail is None:
            return p.store(mem, src, self.width)
        if self.masks:
            return p.store(mem, src, self.width, mask=tail.mask)
        return p.mask_store(mem, tail.mask, src, self.width)

    def stream(self, mem: Mem, src: int) -> bytes:
        """Non-temporal store of a full vector (mem aligned to the vector size)."""
        return self.precision.stream(mem, src, self.width)

    def op(self, instruction: Callable, *operands, **options) -> bytes:
        """`instruction(*operands, width, **options)` with Const operands turned into frame
        memory operands (AVX-512: embedded broadcast)."""
        resolved = []
        for operand in operands:
            if isinstance(operand, Const):
                operand = self.frame.mem(operand)
                if self.masks:
                    options["bcst"] = True
            resolved.append(operand)
        return instruction(*resolved, self.width, **options)

    def broadcast(self, dst: int, const: Const) -> bytes:
        """dst := const in every lane (from the frame)."""
        return self.precision.broadcast(dst, self.frame.mem(const), self.width)

    def set_constant(self, dst: int, const: Const) -> bytes:
        """dst := const in every lane, through rax (no frame needed)."""
        p = self.precision
        if self.masks:
            return enc.mov_ri(RAX, const.bits) + p.broadcast_gpr(dst, RAX, self.width)
        return (enc.mov_ri(RAX, const.bits) + p.move_to_xmm(dst, RAX)
                + p.broadcast(dst, dst, self.width))

    def zero(self, dst: int) -> bytes:
        return enc.vxorps(dst, dst, dst, self.width if self.masks else 128)

    def set_tail(self, asm: Assembler, lanes: int, mask: int) -> Tail:
        """Load the mask selecting the first `lanes` lanes into `mask` (clobbers rax)."""
        if self.masks:
            asm(enc.mov_ri(RAX, (1 << lanes) - 1), enc.kmovw_kr(mask, RAX))
        else:
            asm(enc.vmovups_load(mask, self.frame.mem(("mask", lanes)), self.width))
        return Tail(lanes, mask)

    def set_runtime_mask(self, asm: Assembler, mask: int, count: int, temp: int, *,
                         from_end: bool) -> None:
        """mask := the first (or, from_end, the last) `count` lanes, count in a general
        register (<= 0: none, >= lanes: all); temp is a free vector register. Needs the frame
        vectors "iota" and "reverse iota" (lane numbers ascending and descending)."""
        lane_numbers = self.frame.mem("reverse iota" if from_end else "iota")
        p = self.precision
        if self.masks:
            asm(p.broadcast_gpr(temp, count, self.width))
        else:
            asm(p.move_to_xmm(temp, count), p.int_broadcast(temp, temp, self.width))
        asm(p.int_greater(mask, temp, lane_numbers, self.width,   # count > lane number
                          evex=bool(self.masks)))


# ---------------------------------------------------------------- non-transposed sweep

@dataclass(frozen=True)
class Slot:
    """One vector of a column group: its memory operand in each stream, its tail (if any), and
    whether its store may stream (non-temporal, mem aligned to the vector size)."""
    mems: tuple
    tail: Tail | None
    stream: bool = False

    def store(self, vector: Vector, mem: Mem, reg: int) -> bytes:
        return vector.stream(mem, reg) if self.stream else vector.store(mem, reg, self.tail)


@dataclass(frozen=True)
class ColumnRegisters:
    """General registers of ColumnSweep: column and row-group counters, the row byte index,
    and (streaming path) the byte offset of the first aligned row, the counts of unrolled
    groups and of single vectors after the peel, and a scratch register (may be the same as
    row_counter)."""
    column_counter: Reg
    row_counter: Reg
    row_index: Reg
    start: Reg
    groups: Reg
    singles: Reg
    scratch: Reg


def emit_streaming_or_static(asm: Assembler, streaming: bool,
                             emit_streaming: Callable[[Label], None],
                             emit_static: Callable[[], None]) -> None:
    """The static sweep, preceded (when the output is large) by the streaming sweep, which
    branches to the static one when the run-time operands cannot be streamed."""
    done = asm.label("done")
    if streaming:
        static = asm.label("static")
        emit_streaming(static)
        asm.jmp(done)
        asm.bind(static)
    emit_static()
    asm.bind(done)


class ColumnSweep:
    """For each of n columns, call process(slots) on groups of at most `unroll` vectors.

    streams: (pointer, ld_bytes) general-register pairs, the last one the output; each pointer
    starts at its matrix's first column and is advanced by its ld after each column.
    process(slots) loads, computes and stores the slots (storing through Slot.store).

    Static path: the rows of a column are m // lanes full vectors and a tail of m % lanes lanes
    (masked). Full groups run in a loop over a byte index when there are at least two of
    them; the leftover vectors and the tail follow as straight-line code.

    Streaming path (streaming=True, m >= a line's elements L: 16 floats, 8 doubles): taken
    at run time when the output's ld is a multiple of L and its pointer element-aligned, so
    every output column reaches a 64-byte boundary at the same row q < L. Rows 0..L-1 are
    processed first with their stores masked to the rows below q, then from row q whole
    cache lines with non-temporal stores (no read-for-ownership, no cache pollution: worth
    it for outputs much larger than the caches), then the rest of the column with cached
    stores (whole vectors, a masked tail); the counts are computed at run time, once (the
    rest's vectors once a column). No line is written partly by non-temporal stores: a line
    shared with the next column's first rows, streamed, costs far more than it saves
    (docs/measurements.md, "Element-wise streaming").

    masks: the mask registers to use, 1 for the static path, 1 + L // lanes with streaming;
    temp: a vector register free while the sweep sets its masks up.
    """

    def __init__(self, asm: Assembler, vector: Vector, m: int, n: int,
                 streams: tuple[tuple[Reg, Reg], ...], unroll: int,
                 process: Callable[[list[Slot]], None], *, gprs: ColumnRegisters,
                 masks: list[int], temp: int, streaming: bool) -> None:
        self.asm, self.vector, self.m, self.n = asm, vector, m, n
        self.streams, self.unroll, self.process = streams, unroll, process
        self.g, self.masks, self.temp, self.streaming = gprs, masks, temp, streaming
        rest = m % vector.lanes
        if rest and not vector.masks:
            vector.frame.add_mask_vector(rest)
        if streaming:
            vector.frame.add_vector("iota", range(vector.lanes))

    @staticmethod
    def mask_count(vector: Vector, streaming: bool) -> int:
        """How many mask registers the sweep needs: the tail's, and the peel's if streaming."""
        return 1 + (vector.line_elements // vector.lanes if streaming else 0)

    def _slot(self, offset: int, index: int | None, tail: Tail | None,
              stream: bool = False) -> Slot:
        return Slot(tuple(Mem(pointer, index=index, disp=offset) for pointer, _ in self.streams),
                    tail, stream)

    def _next_column(self) -> None:
        self.asm(*(enc.add_rr(pointer, ld) for pointer, ld in self.streams))

    def emit(self) -> None:
        emit_streaming_or_static(self.asm, self.streaming, self._streaming, self._static)

    def _static(self) -> None:
        asm, vector, unroll, g = self.asm, self.vector, self.unroll, self.g
        full, rest = divmod(self.m, vector.lanes)
        tail = vector.set_tail(asm, rest, self.masks[0]) if rest else None
        groups = full // unroll if full // unroll >= 2 else 0
        looped_bytes = groups * unroll * vector.bytes
        leftover = [self._slot(looped_bytes + i * vector.bytes, None, None)
                    for i in range(full - groups * unroll)]
        if rest:
            leftover.append(self._slot(full * vector.bytes, None, tail))
        with asm.counted_loop(g.column_counter, self.n):
            if groups:
                asm(enc.xor_rr(g.row_index, g.row_index))
                with asm.counted_loop(g.row_counter, groups):
                    self.process([self._slot(i * vector.bytes, g.row_index, None)
                                  for i in range(unroll)])
                    asm(enc.add_ri(g.row_index, unroll * vector.bytes))
            for start in range(0, len(leftover), unroll):
                self.process(leftover[start:start + unroll])
            self._next_column()

    def _streaming(self, static: Label) -> None:
        asm, vector, g = self.asm, self.vector, self.g
        unroll = 1 << (self.unroll.bit_length() - 1)     # a power of two: counts by shifts
        lanes, out, ld_out = vector.lanes, self.streams[-1][0], self.streams[-1][1]
        asm(enc.mov_rr(g.scratch, ld_out), enc.and_ri(g.scratch, LINE_MASK))
        asm.jcc("ne", static)
        shift = vector.precision.shift
        asm(enc.mov_rr(g.scratch, out), enc.and_ri(g.scratch, vector.precision.bytes - 1))
        asm.jcc("ne", static)
        tail_mask, peel_masks = self.masks[0], self.masks[1:]
        # start := bytes before the first row on a cache line (the same in every column)
        asm(enc.mov_rr(g.start, out), enc.neg(g.start), enc.and_ri(g.start, LINE_MASK))
        for index, mask in enumerate(peel_masks):   # rows index*lanes.. below q
            asm(enc.mov_rr(g.scratch, g.start), enc.shr_ri(g.scratch, shift),
                enc.sub_ri(g.scratch, index * lanes))
            vector.set_runtime_mask(asm, mask, g.scratch, self.temp, from_end=False)
        line = vector.line_elements

        def rows_from_q() -> None:                    # scratch := m - q
            asm(enc.mov_rr(g.scratch, g.start), enc.shr_ri(g.scratch, shift),
                enc.neg(g.scratch), enc.add_ri(g.scratch, self.m))
        # whole lines from q on are streamed, in groups of `unroll` vectors and single ones
        rows_from_q()
        asm(enc.and_ri(g.scratch, -line),
            enc.mov_rr(g.groups, g.scratch),
            enc.shr_ri(g.groups, (lanes * unroll).bit_length() - 1),
            enc.mov_rr(g.singles, g.scratch), enc.shr_ri(g.singles, lanes.bit_length() - 1),
            enc.and_ri(g.singles, unroll - 1))
        rows_from_q()
        asm(enc.and_ri(g.scratch, lanes - 1))
        vector.set_runtime_mask(asm, tail_mask, g.scratch, self.temp, from_end=False)
        with asm.counted_loop(g.column_counter, self.n):
            self.process([self._slot(i * vector.bytes, None, Tail(None, mask))
                          for i, mask in enumerate(peel_masks)])
            asm(enc.mov_rr(g.row_index, g.start))
            for count, per_step in ((g.groups, unroll), (g.singles, 1))[:2 if unroll > 1 else 1]:
                with asm.counted_loop(g.row_counter, count):
                    self.process([self._slot(i * vector.bytes, g.row_index, None, stream=True)
                                  for i in range(per_step)])
                    asm(enc.add_ri(g.row_index, per_step * vector.bytes))
            # the rows after the last whole line: cached stores, whole vectors then the tail
            if line > lanes:
                rows_from_q()
                asm(enc.and_ri(g.scratch, line - 1), enc.shr_ri(g.scratch, lanes.bit_length() - 1))
                with asm.counted_loop(g.row_counter, g.scratch):
                    self.process([self._slot(0, g.row_index, None)])
                    asm(enc.add_ri(g.row_index, vector.bytes))
            self.process([self._slot(0, g.row_index, Tail(None, tail_mask))])
            self._next_column()
        asm(enc.sfence())


# ---------------------------------------------------------------- in-register transpose

Pair = Callable[..., None]    # (dst, a, b, low=bool): one of a pair's two results into dst

def _pairwise(asm: Assembler, regs: list[int], pairs: list[tuple[int, int]], emit_pair: Pair,
              free: list[int]) -> None:
    """Replace regs[i], regs[j] by (lo, hi) = emit_pair results for each (i, j) in pairs.

    lo goes to a free register, hi overwrites regs[i] (the instruction reads it first), and
    regs[j] becomes free: one spare register is enough for any number of pairs."""
    for i, j in pairs:
        lo = free.pop()
        a, b = regs[i], regs[j]
        emit_pair(lo, a, b, low=True)
        emit_pair(a, a, b, low=False)
        regs[i], regs[j] = lo, a
        free.append(b)


def transpose(asm: Assembler, vector: Vector, regs: list[int], free: list[int]) -> list[int]:
    """Transpose the lanes x lanes matrix whose row c is register regs[c] (lanes 0..lanes-1).

    Returns the registers holding the rows of the transpose: out[r][c] = in[c][r]. Uses the
    registers in `free` (at least one) as scratch; regs and free are updated in place."""
    width = vector.width
    regs = list(regs)
    quads = vector.lanes // 4

    def unpack_ps(dst: int, a: int, b: int, low: bool) -> None:
        asm((enc.vunpcklps if low else enc.vunpckhps)(dst, a, b, width))

    def unpack_pd(dst: int, a: int, b: int, low: bool) -> None:
        asm((enc.vunpcklpd if low else enc.vunpckhpd)(dst, a, b, width))

    # within each 128-bit lane: 4 x 4 transposes of rows 4g..4g+3
    _pairwise(asm, regs, [(c, c + 1) for c in range(0, vector.lanes, 2)], unpack_ps, free)
    # now, per 128-bit lane L: regs[c] = (in[c][4L], in[c+1][4L], in[c][4L+1], in[c+1][4L+1])
    # for even c, and the same with 4L+2, 4L+3 for odd c
    _pairwise(asm, regs, [(4 * g + d, 4 * g + d + 2) for g in range(quads) for d in (0, 1)],
              unpack_pd, free)
    # now, for each group g of 4 rows, regs[4g + q'] holds, in 128-bit lane L, element
    # 4L + q of rows 4g..4g+3, with q' = (0, 2, 1, 3)[q]
    order = (0, 2, 1, 3)
    if vector.width == 512:
        def shuffle_pairs(dst: int, a: int, b: int, low: bool) -> None:
            asm(enc.vshuff32x4(dst, a, b, 0x44 if low else 0xEE, 512))

        def shuffle_evens(dst: int, a: int, b: int, low: bool) -> None:
            asm(enc.vshuff32x4(dst, a, b, 0x88 if low else 0xDD, 512))

        out = [None] * 16
        for q in range(4):
            group = [regs[4 * g + order[q]] for g in range(4)]
            # 4 x 4 transpose of 128-bit lanes across the groups
            _pairwise(asm, group, [(0, 1), (2, 3)], shuffle_pairs, free)
            # group = [s0L01|s1L01, s0L23|s1L23, s2L01|s3L01, s2L23|s3L23]
            _pairwise(asm, group, [(0, 2), (1, 3)], shuffle_evens, free)
            # group[order[L]] holds 128-bit lane L of every group: row 4L + q of the result
            for lane in range(4):
                out[4 * lane + q] = group[order[lane]]
        return out

    def swap_halves(dst: int, a: int, b: int, low: bool) -> None:
        asm(enc.vperm2f128(dst, a, b, 0x20 if low else 0x31))

    out = [None] * 8
    for q in range(4):
        group = [regs[order[q]], regs[4 + order[q]]]
        _pairwise(asm, group, [(0, 1)], swap_halves, free)
        out[q], out[4 + q] = group
    return out


def transpose64(asm: Assembler, vector: Vector, regs: list[int], free: list[int]) -> list[int]:
    """transpose() for 64-bit elements: the lanes x lanes (8 or 4) matrix of doubles whose row
    c is regs[c]. Within each 128-bit lane, 2 x 2 transposes of row pairs (vunpck[lh]pd);
    then the 128-bit lanes move across the pairs as in transpose() (zmm: vshuff64x2 twice;
    ymm: vperm2f128)."""
    width = vector.width
    regs = list(regs)

    def unpack_pd(dst: int, a: int, b: int, low: bool) -> None:
        asm((enc.vunpcklpd if low else enc.vunpckhpd)(dst, a, b, width))

    _pairwise(asm, regs, [(c, c + 1) for c in range(0, vector.lanes, 2)], unpack_pd, free)
    # now regs[c] (c even) holds (in[c][2L], in[c+1][2L]) in 128-bit lane L and regs[c + 1]
    # the same with 2L + 1: row pair c of the transpose's 2L-th and 2L+1-th rows
    if width == 512:
        def shuffle_pairs(dst: int, a: int, b: int, low: bool) -> None:
            asm(enc.vshuff64x2(dst, a, b, 0x44 if low else 0xEE, 512))

        def shuffle_evens(dst: int, a: int, b: int, low: bool) -> None:
            asm(enc.vshuff64x2(dst, a, b, 0x88 if low else 0xDD, 512))

        order = (0, 2, 1, 3)
        out = [None] * 8
        for parity in range(2):
            group = [regs[2 * q + parity] for q in range(4)]   # lane L: rows 2L + parity
            _pairwise(asm, group, [(0, 1), (2, 3)], shuffle_pairs, free)
            _pairwise(asm, group, [(0, 2), (1, 3)], shuffle_evens, free)
            # group[order[L]] holds 128-bit lane L of each pair: row 2L + parity
            for lane in range(4):
                out[2 * lane + parity] = group[order[lane]]
        return out

    def swap_halves(dst: int, a: int, b: int, low: bool) -> None:
        asm(enc.vperm2f128(dst, a, b, 0x20 if low else 0x31))

    out = [None] * 4
    for parity in range(2):
        group = [regs[parity], regs[2 + parity]]
        _pairwise(asm, group, [(0, 1)], swap_halves, free)
        out[parity], out[2 + parity] = group
    return out


# ---------------------------------------------------------------- transposed sweep

Store = Callable[[Mem, int], bytes]     # the store of a transposed row: (mem, register) -> code

STREAM_GROUP_COLUMNS = 32     # columns of A per streaming step: 128-byte runs of each B row


def strided(asm: Assembler, base: Reg, ld: Reg, ld3: Reg, group: Reg,
            count: int) -> Iterator[Mem]:
    """Yield Mem(base + i ld) for i < count, ld and ld3 = 3 ld in general registers.

    Every fourth address starts a new group base, computed into `group` by an lea as it is
    reached: consume the operands in order and use each before asking for the next."""
    group_base = base
    for i in range(count):
        quad, k = divmod(i, 4)
        if k == 0 and quad:
            asm(enc.lea(group, Mem(group_base, index=ld, scale=4)))
            group_base = group
        if k == 0:
            yield Mem(group_base)
        elif k == 3:
            yield Mem(group_base, index=ld3)
        else:
            yield Mem(group_base, index=ld, scale=k)


@dataclass(frozen=True)
class TransposeRegisters:
    """General registers of TransposedSweep. a, b, ld_a, ld_b hold the arguments (ld in
    bytes); a and b are moved along the columns of A panel by panel. The others are scratch:
    ld_a3/ld_b3 (3 ld), group_a/group_b (strided addressing), a_rows/b_rows (walking down a
    panel), two loop counters, `count` (a runtime column count) and `scratch`."""
    a: Reg
    b: Reg
    ld_a: Reg
    ld_b: Reg
    ld_a3: Reg
    ld_b3: Reg
    group_a: Reg
    group_b: Reg
    a_rows: Reg
    b_rows: Reg
    row_counter: Reg
    panel_counter: Reg
    count: Reg
    scratch: Reg


class TransposedSweep:
    """B[j + r ld_b] := op(A[r + j ld_a]) for r < m, j < n, in lanes x lanes blocks.

    A block: `lanes` columns of A loaded (rows past m masked off), op applied in place by
    apply(data, free), transposed in registers, stored as up to `lanes` rows of B. A panel:
    the blocks of `lanes` (or fewer) columns of A from the top row down, so each column of A
    is read sequentially. The static path sweeps n // lanes panels plus one whose stores are
    masked to the n % lanes remaining columns.

    With stream_stride_mask (a multiple of 64, minus 1; n >= 2 STREAM_GROUP_COLUMNS) the
    kernel first tries the streaming path, taken at run time when ld_b in bytes has no bit of
    the mask set and b is 4-byte aligned, so every row of B can start 64-byte aligned: the
    columns before the first aligned one are written by masked panels over columns 0..15,
    then panels of STREAM_GROUP_COLUMNS columns store with non-temporal stores (whole cache
    lines, no read-for-ownership, no cache pollution: on power-of-two leading dimensions B's
    rows otherwise fight over a few cache sets), and the remaining columns are written by
    masked panels over the last STREAM_GROUP_COLUMNS columns (rewriting identical values).
    """

    def __init__(self, asm: Assembler, vector: Vector, m: int, n: int,
                 apply: Callable[[list[int], list[int]], None], registers: list[int], *,
                 row_mask: int, column_mask: int, gprs: TransposeRegisters,
                 stream_stride_mask: int | None) -> None:
        self.asm, self.vector, self.m, self.n = asm, vector, m, n
        self.apply, self.registers = apply, registers
        self.row_mask, self.column_mask, self.g = row_mask, column_mask, gprs
        self.stream_stride_mask = stream_stride_mask
        if stream_stride_mask is not None:
            lanes = vector.lanes
            vector.frame.add_vector("iota", range(lanes))
            vector.frame.add_vector("reverse iota", range(lanes - 1, -1, -1))

    def emit(self) -> None:
        asm, g, lanes = self.asm, self.g, self.vector.lanes
        asm(enc.lea(g.ld_a3, Mem(g.ld_a, index=g.ld_a, scale=2)),
            enc.lea(g.ld_b3, Mem(g.ld_b, index=g.ld_b, scale=2)))
        self.row_tail = (self.vector.set_tail(asm, self.m % lanes, self.row_mask)
                         if self.m % lanes else None)
        emit_streaming_or_static(asm, self.stream_stride_mask is not None, self._streaming,
                                 self._static)

    # ---- building blocks

    def _row_step(self, blocks: int, columns_last: int, rows: Tail | None,
                  store: Store) -> None:
        """`blocks` blocks side by side at (a_rows, b_rows), the last one `columns_last` wide."""
        asm, vector, g, lanes = self.asm, self.vector, self.g, self.vector.lanes
        a_columns = strided(asm, g.a_rows, g.ld_a, g.ld_a3, g.group_a,
                            (blocks - 1) * lanes + columns_last)
        for index in range(blocks):
            columns = lanes if index < blocks - 1 else columns_last
            data, free = self.registers[:lanes], self.registers[lanes:]
            for reg in data[:columns]:
                asm(vector.load(reg, next(a_columns), rows))
            self.apply(data[:columns], free)
            transposer = transpose if vector.precision.bytes == 4 else transpose64
            out = transposer(asm, vector, data, free)
            count = rows.lanes if rows else lanes
            for reg, mem in zip(out, strided(asm, g.b_rows, g.ld_b, g.ld_b3, g.group_b, count)):
                asm(store(mem.offset(index * vector.bytes), reg))

    def _panel(self, blocks: int, columns_last: int, store: Store) -> None:
        """All rows of the panel at (a, b); a and b are left unchanged."""
        asm, vector, g, lanes = self.asm, self.vector, self.g, self.vector.lanes
        asm(enc.mov_rr(g.a_rows, g.a), enc.mov_rr(g.b_rows, g.b))
        if self.m >= lanes:
            with asm.counted_loop(g.row_counter, self.m // lanes):
                self._row_step(blocks, columns_last, None, store)
                asm(enc.add_ri(g.a_rows, vector.bytes))
                for _ in range(lanes // 8):
                    asm(enc.lea(g.b_rows, Mem(g.b_rows, index=g.ld_b, scale=8)))
                if lanes % 8:                   # 4 doubles a ymm
                    asm(enc.lea(g.b_rows, Mem(g.b_rows, index=g.ld_b, scale=lanes % 8)))
        if self.row_tail:
            self._row_step(blocks, columns_last, self.row_tail, store)

    def _advance(self, columns: int) -> None:
        """Move a and b `columns` (a multiple of 4) columns of A on."""
        g = self.g
        for _ in range(columns // 8):
            self.asm(enc.lea(g.a, Mem(g.a, index=g.ld_a, scale=8)))
        if columns % 8:
            self.asm(enc.lea(g.a, Mem(g.a, index=g.ld_a, scale=columns % 8)))
        self.asm(enc.add_ri(g.b, self.vector.precision.bytes * columns))

    def _advance_by(self, columns: Reg) -> None:
        """Move a and b by the signed column count in general register `columns`."""
        g = self.g
        self.asm(enc.mov_rr(g.scratch, columns), enc.imul_rr(g.scratch, g.ld_a),
                 enc.add_rr(g.a, g.scratch),
                 enc.lea(g.b, Mem(g.b, index=columns, scale=self.vector.precision.bytes)))

    def _plain_store(self, mem: Mem, reg: int) -> bytes:
        return self.vector.store(mem, reg)

    def _masked_store(self, mem: Mem, reg: int) -> bytes:
        return self.vector.store(mem, reg, Tail(None, self.column_mask))

    # ---- column partitions

    def _static(self) -> None:
        asm, vector, lanes = self.asm, self.vector, self.vector.lanes
        full, rest = divmod(self.n, lanes)
        if full:
            with asm.counted_loop(self.g.panel_counter, full):
                self._panel(1, lanes, self._plain_store)
                self._advance(lanes)
        if rest:
            vector.set_tail(asm, rest, self.column_mask)
            self._panel(1, rest, self._masked_store)

    def _masked_panel(self, lanes_stored: int, from_end: bool) -> None:
        """A one-block panel storing min(scratch + lanes_stored, lanes) lanes (first or last
        ones), skipped if that is <= 0; then a and b move one block on."""
        asm, vector, g = self.asm, self.vector, self.g
        skip = asm.label("skip")
        asm(enc.add_ri(g.scratch, lanes_stored))
        asm.jcc("le", skip)
        vector.set_runtime_mask(asm, self.column_mask, g.scratch, self.registers[0],
                                from_end=from_end)
        self._panel(1, vector.lanes, self._masked_store)
        asm.bind(skip)
        self._advance(vector.lanes)

    def _streaming_store(self, mem: Mem, reg: int) -> bytes:
        return self.vector.stream(mem, reg)

    def _streaming(self, static: Label) -> None:
        asm, g, lanes = self.asm, self.g, self.vector.lanes
        p, line = self.vector.precision, self.vector.line_elements
        group = STREAM_GROUP_COLUMNS
        asm(enc.mov_rr(g.scratch, g.ld_b), enc.and_ri(g.scratch, self.stream_stride_mask))
        asm.jcc("ne", static)
        asm(enc.mov_rr(g.scratch, g.b), enc.and_ri(g.scratch, p.bytes - 1))
        asm.jcc("ne", static)
        # count := columns before the first one whose B rows start on a cache line
        asm(enc.mov_rr(g.count, g.b), enc.neg(g.count), enc.shr_ri(g.count, p.shift),
            enc.and_ri(g.count, line - 1))
        for start in range(0, line, lanes):             # store lanes < count - start
            asm(enc.mov_rr(g.scratch, g.count))
            self._masked_panel(-start, from_end=False)
        asm(enc.sub_ri(g.count, line))
        self._advance_by(g.count)                       # to column count
        asm(enc.add_ri(g.count, line - self.n), enc.neg(g.count),   # n - count
            enc.mov_rr(g.panel_counter, g.count),
            enc.shr_ri(g.panel_counter, group.bit_length() - 1),
            enc.and_ri(g.count, group - 1))               # the rest: count < group columns
        with asm.counted_loop(g.panel_counter, g.panel_counter):
            self._panel(group // lanes, lanes, self._streaming_store)
            self._advance(group)
        finished = asm.label("finished")
        asm(enc.test_rr(g.count, g.count))
        asm.jcc("e", finished)
        asm(enc.sub_ri(g.count, group))
        self._advance_by(g.count)                       # back to column n - group
        asm(enc.add_ri(g.count, group))
        for start in range(0, group, lanes):            # store the last count columns
            asm(enc.mov_rr(g.scratch, g.count))
            self._masked_panel(start + lanes - group, from_end=True)
        asm.bind(finished)
        asm(enc.sfence())
