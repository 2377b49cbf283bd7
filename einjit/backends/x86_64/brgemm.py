"""x86-64 BRGEMM generator: C += sum_i A_i B_i for column-major FP32, AVX-512 or AVX2/FMA.

Kernel ABI (System V): brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b), leading
dimensions and batch strides in elements; M, N, K and the batch size are compile-time.

C is cut into register blocks of `vectors` column vectors (16 or 8 rows each) × `cols`
columns. A block's accumulators stay in registers across the whole K and batch loops: each
k-step loads `vectors` vectors of A's column k and, for every column j of the block, brings
B[k, j] to all lanes (AVX-512 with one vector: an embedded {1to16} broadcast inside the FMA;
otherwise one vbroadcastss shared by the column's FMAs). The accumulators start at zero and
are added to C at the end of the block. Rows past M in the last vector are masked (AVX-512:
k1; AVX2: vmaskmovps with a mask vector), so no access leaves the operands; in blocks of two
or more vectors that tail vector ends at the last row instead of starting after the full
vectors (see _VectorRegisters).

A masked last vector of few rows wastes most of its FMA lanes. In blocks of two or more
vectors the tail rows of up to `group` columns therefore share one vector, each column owning
a share of `share` lanes whose top t lanes are its tail rows, and one FMA serves the whole
group. B's elements are blended into their lanes out of the broadcasts the full vectors use
anyway. A's tail rows are repeated across the shares: AVX-512 (t <= 8 rows, share t, group
min(16 // t, 7), one mask register k1..k7 a column) by one vpermps per k-step; AVX2 (t <= 4,
share 1, 2 or 4 lanes, the narrowest broadcast load that holds t rows, group 8 // share) by
broadcasting the column's last `share` rows straight from memory (rows a full vector holds too
when share > t: in bounds, their lanes are never stored). The C update reads and writes each
column's tail rows with their lane mask (AVX2: a mask vector loaded from a window slid over
the stored tail mask and zeros), at an address moved so that those lanes meet the column's
tail rows; masked lanes are never accessed, and the moved span starts inside the column (its
full vectors lie before the tail).

The blocking is chosen per (M, N, K, batch) by a small cost model of this loop (FMA,
shuffle and L1 throughput, FMA latency, the update of C, per-block overhead), see `plan`;
packing is one of its choices. Blocks of one shape are repeated by runtime loops over M and
N, so code size does not grow with the matrix.

Columns of B are addressed from base pointers 5 columns apart: base, base+L, base+2L,
base+3L (through a register holding 3L) and base+4L, where L is ld_b in bytes.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from einjit.backends import Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.encode import (
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    RAX,
    RBP,
    RBX,
    RCX,
    RDI,
    RDX,
    RSI,
    RSP,
    Mem,
    Reg,
)
from einjit.backends.x86_64.precision import FLOAT32, Precision, precision

COLUMNS_PER_BASE = 5          # B columns reachable from one base pointer (see module doc)
MAX_COLS = 25                 # general registers left for B base pointers: 5 bases
MAX_VECTORS = 6               # taller blocks leave too few columns to amortize A's loads
AVX2_SHARES = (1, 2, 4)       # rows one broadcast load repeats: vbroadcastss, sd, f128


# ---------------------------------------------------------------- blocking plan

@dataclass(frozen=True)
class Panel:
    """`blocks` register blocks stacked along M, each `vectors` vectors tall (the last one of
    each block holding only `tail_rows` rows if tail_rows > 0, packed `group` columns to a
    vector if group > 1), swept along N in `n_blocks` blocks of `cols` columns plus one block
    of `n_tail` columns."""
    blocks: int
    vectors: int
    tail_rows: int
    cols: int
    n_blocks: int
    n_tail: int
    group: int = 1


def share_lanes(target: Target, tail_rows: int) -> int:
    """Lanes a column owns in a packed tail vector (see the module doc)."""
    if target.masks:
        return tail_rows
    return next((share for share in AVX2_SHARES if share >= tail_rows), target.lanes())


def pack_group(target: Target, vectors: int, tail_rows: int) -> int:
    """Most columns whose tail rows can share one vector (1: no packing). Packing pays where
    full vectors broadcast B anyway (alone, a tail vector is bound by its loads, not by FMAs);
    it needs those full rows (the AVX2 tail broadcast may read some of them) and, on AVX-512,
    a mask register per column."""
    if vectors < 2 or not tail_rows:
        return 1
    most = target.masks or target.lanes()       # AVX-512: a mask register (k1..k7) per column
    return min(target.lanes() // share_lanes(target, tail_rows), most)


def _accumulators(vectors: int, cols: int, group: int) -> int:
    if group == 1:
        return vectors * cols
    return (vectors - 1) * cols + -(-cols // group)


def _max_cols(target: Target, vectors: int, tail_rows: int, group: int) -> int:
    spare = target.registers - vectors                     # A's vectors
    if group > 1:                                       # broadcast, packed B, AVX-512: indices
        spare -= 3 if target.masks else 2
    elif not (target.masks and vectors == 1):   # embedded broadcast needs no register
        spare -= 1
    if tail_rows and not target.masks and group == 1:  # vmaskmovps mask vector
        spare -= 1
    cols = 0
    while cols < MAX_COLS and _accumulators(vectors, cols + 1, group) <= spare:
        cols += 1
    return cols


def max_cols(target: Target, vectors: int, tail_rows: int) -> int:
    """Most columns a block of `vectors` vectors can have with the registers left over."""
    return max(_max_cols(target, vectors, tail_rows, group)
               for group in {1, pack_group(target, vectors, tail_rows)})


# L1 accesses of a full vector of A or C at an address of unknown alignment: it mostly
# straddles two cache lines (64 bytes: 15 times in 16, 32 bytes: 7 in 16), and the L1 serves
# two lines a cycle (measured: a 16-row block of 13 columns runs 7% faster on an aligned A;
# loading, adding to and storing misaligned C vectors takes 2 cycles each, aligned ones 1)
SPLIT_ACCESSES = {512: 2.0, 256: 1.5}       # by vector width in bits


def _step_counts(target: Target, vectors: int, cols: int, tail_rows: int,
                 group: int) -> tuple[int, int, float]:
    """(FMAs, all vector instructions, L1 accesses) of one k-step."""
    full = vectors - (1 if tail_rows else 0)
    fmas = _accumulators(vectors, cols, group)
    shuffles = 0 if group == 1 else cols - -(-cols // group)       # blends of B
    if group > 1 and target.masks:                         # vpermps of A
        shuffles += 1
    loads = full * SPLIT_ACCESSES[target.vector_bits] + (1 if tail_rows else 0) + cols
    return fmas, fmas + shuffles, loads


def _block_cycles(target: Target, vectors: int, cols: int, tail_rows: int, group: int, k: int,
                  br: int) -> float:
    """One register block: k-steps of 2 FMAs a cycle, 4 vector instructions a cycle (FMAs on
    two of the four pipes), 4 cycles of FMA latency per accumulator chain, 2 L1 accesses a
    cycle shared with the update of C (a load and a store per vector of C), which the next
    block's FMAs overlap; plus the batch loop and the block's set-up, and for a packed tail
    the latency only a long K hides: AVX-512's vpermps (5 cycles) before the first FMA, and
    the shares of a group's columns added to their vector one after another (AVX-512: masked
    adds, 2 cycles each; AVX2: adds of masked loads, 3 cycles each, with each column's mask
    loaded for its load and for its store)."""
    fmas, vector_ops, loads = _step_counts(target, vectors, cols, tail_rows, group)
    full = vectors - (1 if tail_rows else 0)
    tail_update = (4 if group > 1 and not target.masks else 2) if tail_rows else 0
    update = cols * (2 * full * SPLIT_ACCESSES[target.vector_bits] + tail_update)
    steps = k * br
    compute = steps * max(fmas / 2, vector_ops / 4, 4.0)
    memory = (steps * loads + update) / 2
    if group == 1:
        latency = 0
    elif target.masks:
        latency = 5 + 2 * min(group, cols)
    else:
        latency = 3 * min(group, cols)
    return max(compute, memory) + 4 * br + 12 + latency


def _sweep_n(target: Target, vectors: int, tail_rows: int, n: int, k: int,
             br: int, packable: bool = True) -> tuple[float, int, int, int, int]:
    """Best (cycles, cols, n_blocks, n_tail, group) for one block row of `vectors` vectors;
    on a tie the tail is not packed (no lane shuffles for nothing). float64 tails are never
    packed (packing is derived for 32-bit lanes)."""
    best = None
    groups = {1, pack_group(target, vectors, tail_rows)} if packable else {1}
    for group in sorted(groups):
        widest = _max_cols(target, vectors, tail_rows, group)
        fewest = -(-n // widest)
        for cols in range(-(-n // fewest), min(widest, n) + 1):
            n_blocks, n_tail = divmod(n, cols)
            cycles = n_blocks * _block_cycles(target, vectors, cols, tail_rows, group, k, br)
            if n_tail:
                cycles += _block_cycles(target, vectors, n_tail, tail_rows, group, k, br)
            if best is None or cycles < best[0]:
                best = (cycles, cols, n_blocks, n_tail, group)
    return best


def _row_partitions(total: int) -> Iterator[tuple[int, ...]]:
    """Ways to cut `total` vectors into blocks: greedy by a height, and evenly balanced."""
    seen = set()
    for height in range(1, min(MAX_VECTORS, total) + 1):
        full, rest = divmod(total, height)
        greedy = (height,) * full + ((rest,) if rest else ())
        count = -(-total // height)
        small, extra = divmod(total, count)
        balanced = (small + 1,) * extra + (small,) * (count - extra)
        for heights in (greedy, balanced):
            if heights not in seen:
                seen.add(heights)
                yield heights


def plan(m: int, n: int, k: int, br: int, target: Target,
         dtype: str = "float32") -> tuple[Panel, ...]:
    """The cheapest blocking of an M×N C by the cost model, as panels in row order (vectors
    of target.lanes(element bytes) elements: 8 doubles a zmm, 4 a ymm)."""
    elements = precision(dtype)
    lanes = target.lanes(elements.bytes)
    vectors_total = -(-m // lanes)
    tail_rows = m % lanes
    sweeps = {}
    best = None
    for heights in _row_partitions(vectors_total):
        groups = []                      # [height, count, masked], consecutive equal heights
        for height in heights:
            if groups and groups[-1][0] == height:
                groups[-1][1] += 1
            else:
                groups.append([height, 1, False])
        if tail_rows:                    # the last block carries the masked rows
            height, count, _ = groups[-1]
            groups[-1:] = ([[height, count - 1, False]] if count > 1 else []) + [[height, 1, True]]
        cycles, panels = 0.0, []
        for height, count, masked in groups:
            rows = tail_rows if masked else 0
            key = (height, rows)
            if key not in sweeps:
                sweeps[key] = _sweep_n(target, height, rows, n, k, br,
                                       packable=elements is FLOAT32)
            sweep_cycles, cols, n_blocks, n_tail, group = sweeps[key]
            cycles += count * sweep_cycles
            panels.append(Panel(count, height, rows, cols, n_blocks, n_tail, group))
        if best is None or cycles < best[0]:
            best = (cycles, tuple(panels))
    return best[1]


# ---------------------------------------------------------------- code generation

# general registers: arguments as they arrive, then a pool for the other roles
A_PTR, B_BASE, C_PTR, LDA, LDB, LDC = RDI, RSI, RDX, RCX, R8, R9
POOL = (RAX, R10, R11, RBX, RBP, R12, R13, R14, R15)

# red-zone slots below rsp (a leaf function may use 128 bytes there without moving rsp)
A_ROW, C_ROW, B_ORIGIN, B_COL, N_COUNT, M_COUNT = (Mem(RSP, disp=-8 * i) for i in range(1, 7))
# AVX2: the tail mask vector, 32 bytes, then (packed tails) 32 zero bytes: the 32-byte window
# 4*share*s bytes on holds the lanes of the column s places before its group's end
MASK_SLOT = Mem(RSP, disp=-128)
INDEX_SLOT = Mem(RSP, disp=-128)    # AVX-512 packed tail: vpermps lane indices, 64 bytes


class _Generator:
    def __init__(self, asm: Assembler, target: Target, m: int, n: int, k: int, br: int,
                 elements: Precision = FLOAT32) -> None:
        self.asm, self.target, self.k, self.br = asm, target, k, br
        self.p = elements
        self.panels = plan(m, n, k, br, target, elements.dtype)
        widest = max(max(p.cols, p.n_tail) for p in self.panels)
        pool = list(POOL)
        self.counter = pool.pop(0)                 # K counter, scratch between blocks
        self.ldb3 = pool.pop(0) if widest > 3 else None
        self.batch = (pool.pop(0), pool.pop(0), pool.pop(0)) if br > 1 else None
        bases = -(-widest // COLUMNS_PER_BASE)
        self.bases = (B_BASE,) + tuple(pool[:bases - 1])

    # -- whole kernel

    def emit(self) -> Label:
        """The whole function; returns its entry."""
        asm = self.asm
        used = [self.counter, *self.bases, *(self.batch or ())]
        if self.ldb3 is not None:
            used.append(self.ldb3)
        entry = asm.entry("brgemm")
        asm.prologue(used)
        shift = self.p.shift
        asm(enc.shl_ri(LDA, shift), enc.shl_ri(LDB, shift), enc.shl_ri(LDC, shift))
        if self.ldb3 is not None:
            asm(enc.lea(self.ldb3, Mem(LDB, LDB, 2)))
        if self.batch is not None:
            _, a_step, b_step = self.batch
            # the K loop leaves A moved by K*ld_a and the B bases by K elements
            asm.stack_arg(6, a_step)
            asm.stack_arg(7, b_step)
            asm(enc.shl_ri(a_step, shift), enc.shl_ri(b_step, shift),
                enc.imul_rri(self.counter, LDA, self.k), enc.sub_rr(a_step, self.counter),
                enc.sub_ri(b_step, self.p.bytes * self.k))
        asm(enc.mov_mr(A_ROW, A_PTR), enc.mov_mr(C_ROW, C_PTR), enc.mov_mr(B_ORIGIN, B_BASE))
        self._set_tail_masks()
        for panel in self.panels:
            self._panel(panel)
        asm.epilogue()
        return entry

    def _set_tail_masks(self) -> None:
        """The masks of the tail rows (see _VectorRegisters for where they sit). AVX-512: k1,
        and for a packed tail k1+s for the lanes of the column s places from a group's end,
        plus the lane indices that repeat A's tail rows in INDEX_SLOT. AVX2: the mask vector
        in MASK_SLOT, followed by zeros for a packed tail. Each slot is written by one vector
        store: a vector load from one equal store is forwarded, one from several narrower
        stores waits for them to reach the cache (measured: 36x3x16 ran 25% slower; a packed
        tail's mask windows straddle two stores, but the first is loaded after a whole block's
        K loop)."""
        tail_panel = next((p for p in self.panels if p.tail_rows), None)
        if tail_panel is None:
            return
        asm, scratch, lanes = self.asm, self.counter, self.target.lanes(self.p.bytes)
        tail, group = tail_panel.tail_rows, tail_panel.group
        first = lanes - tail if tail_panel.vectors > 1 else 0     # lane of the first tail row
        if self.target.masks:
            if group > 1:
                self._store_lane_indices([first + (lane - lanes) % tail for lane in range(lanes)])
            for s in range(group):
                lanes_of_s = ((1 << tail) - 1) << (first - tail * s)
                asm(enc.mov_ri(scratch, lanes_of_s), enc.kmovw_kr(1 + s, scratch))
            return
        # AVX2: sign bits from one set dword: lanes 0..count-1 in register (count - 1) % 4;
        # a double's sign is in the second of its two dwords: both are set
        pairs = self.p.dword_pairs
        count, first = (first or tail) * pairs, first * pairs
        asm(enc.mov_ri(scratch, -1), enc.vmovd_xr(0, scratch),   # 0: lane 0
            enc.vunpcklps(1, 0, 0, 128),                        # 1: lanes 0-1
            enc.vunpcklpd(2, 1, 0, 128),                        # 2: lanes 0-2
            enc.vunpcklpd(3, 1, 1, 128))                        # 3: lanes 0-3
        if count > 4:
            asm(enc.vinsertf128(count - 5, 3, count - 5, 1))    # lanes 0-3 and 4..count-1
        mask = (count - 1) % 4
        if first:                                             # the lanes from `first` on
            asm(enc.vpcmpeqd(4, 4, 4, 256), enc.vxorps(mask, mask, 4, 256))
        asm(enc.vmovups_store(MASK_SLOT, mask, self.target.vector_bits))
        if group > 1:
            asm(_zero(5), enc.vmovups_store(MASK_SLOT.offset(32), 5, self.target.vector_bits))

    def _store_lane_indices(self, indices: list[int]) -> None:
        """INDEX_SLOT := indices (one per lane), built in zmm0 by masked broadcasts."""
        asm, scratch, width = self.asm, self.counter, self.target.vector_bits
        asm(enc.mov_ri(scratch, indices[0]), enc.vpbroadcastd_gpr(0, scratch, width))
        for value in sorted(set(indices) - {indices[0]}):
            lanes = sum(1 << lane for lane, index in enumerate(indices) if index == value)
            asm(enc.mov_ri(scratch, lanes), enc.kmovw_kr(1, scratch), enc.mov_ri(scratch, value),
                enc.vpbroadcastd_gpr(0, scratch, width, mask=1))
        asm(enc.vmovups_store(INDEX_SLOT, 0, width))

    # -- loops over blocks (their counters live in red-zone slots: no register is left)

    def _panel(self, panel: Panel) -> None:
        asm, scratch = self.asm, self.counter
        row_bytes = panel.vectors * self.target.vector_bits // 8
        has_next = panel.n_blocks > 1 or panel.n_tail
        with asm.counted_loop(M_COUNT, panel.blocks, align=1, scratch=scratch):
            asm(enc.mov_rm(scratch, B_ORIGIN), enc.mov_mr(B_COL, scratch),
                enc.mov_rm(C_PTR, C_ROW))
            if panel.n_blocks:
                with asm.counted_loop(N_COUNT, panel.n_blocks, align=1, scratch=scratch):
                    self._block(panel, panel.cols)
                    if has_next:
                        self._next_columns(panel.cols)
            if panel.n_tail:
                self._block(panel, panel.n_tail)
            for slot in (A_ROW, C_ROW):
                asm(enc.mov_rm(scratch, slot), enc.add_ri(scratch, row_bytes),
                    enc.mov_mr(slot, scratch))

    def _next_columns(self, cols: int) -> None:
        """Move B_COL and C_PTR `cols` columns on (A_PTR is free here: it is a scratch)."""
        scratch = self.counter
        self.asm(enc.mov_rm(A_PTR, B_COL), enc.imul_rri(scratch, LDB, cols),
                 enc.add_rr(A_PTR, scratch), enc.mov_mr(B_COL, A_PTR),
                 enc.imul_rri(scratch, LDC, cols), enc.add_rr(C_PTR, scratch))

    # -- one register block

    def _block(self, panel: Panel, cols: int) -> None:
        asm, target = self.asm, self.target
        regs = _VectorRegisters(target, panel.vectors, cols, panel.tail_rows, panel.group,
                                self.p)
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_rm(B_BASE, B_COL))
        bases = self.bases[:-(-cols // COLUMNS_PER_BASE)]
        for previous, base in zip(bases, bases[1:]):
            asm(enc.lea(base, Mem(previous, LDB, 4)), enc.add_rr(base, LDB))
        if regs.mask_vector is not None:
            asm(enc.vmovups_load(regs.mask_vector, MASK_SLOT, target.vector_bits))
        if regs.indices is not None:
            asm(enc.vmovups_load(regs.indices, INDEX_SLOT, target.vector_bits))
        asm(_zero(acc) for acc in regs.accumulators())
        if self.batch is None:
            self._k_loop(regs, bases)
        else:
            batch_counter, a_step, b_step = self.batch
            with asm.counted_loop(batch_counter, self.br):
                self._k_loop(regs, bases)
                asm(enc.add_rr(A_PTR, a_step), *(enc.add_rr(base, b_step) for base in bases))
        self._update_c(regs)

    def _update_c(self, regs: _VectorRegisters) -> None:
        """C += the accumulators. They start at zero rather than at C so that no FMA chain
        waits for C: the next block's FMAs overlap this block's update (32x32x32: +8% of
        peak). Every load of C comes before the first store: a load overlapping the span of
        an earlier masked store (a packed column's reaches into the next column) would wait
        for it."""
        walker = self.counter
        next_column = enc.add_rr(walker, LDC)
        code = []
        for move, move_packed in ((regs.add, regs.add_packed), (regs.store, regs.store_packed)):
            code.append(enc.mov_rr(walker, C_PTR))
            for j, accs in enumerate(regs.acc):
                if j:
                    code.append(next_column)
                code.extend(move(acc, Mem(walker, disp=regs.offset(i)), i)
                            for i, acc in enumerate(accs))
                if regs.group > 1:
                    q, s = regs.packed_position(j)
                    mem = Mem(walker, disp=regs.packed_offset(s))
                    code.append(move_packed(regs.packed_acc[q], mem, s))
        self.asm(code)

    def _k_loop(self, regs: _VectorRegisters, bases: tuple[Reg, ...]) -> None:
        """K k-steps; measured: unrolling K gains nothing on Zen 4/5, so the loop body is one k."""
        with self.asm.counted_loop(self.counter, self.k):
            self.asm(self._k_step(regs, bases),
                     (enc.add_ri(base, self.p.bytes) for base in bases))

    def _k_step(self, regs: _VectorRegisters, bases: tuple[Reg, ...]) -> bytes:
        """One k: load A's column and move A on, then every column's FMAs."""
        width, p = self.target.vector_bits, self.p
        code = [regs.load(a_reg, Mem(A_PTR, disp=regs.offset(i)), i)
                for i, a_reg in enumerate(regs.a)]
        code.append(enc.add_rr(A_PTR, LDA))
        if regs.indices is not None:
            code.append(_permute(regs.a[-1], regs.indices, width))
        for j in range(regs.cols):
            b_mem = self._b_address(bases, j)
            accs = regs.acc[j]
            if regs.group > 1:
                q, s = regs.packed_position(j)
                first, last = j % regs.group == 0, s == 0
                # a group's first element goes straight into the packed B vector
                b_reg = regs.packed_b if first else regs.broadcast
                code.append(_broadcast(b_reg, b_mem, width, p))
                code.extend(_fma(acc, a_reg, b_reg, width, False, p)
                            for acc, a_reg in zip(accs, regs.a))
                if not first:
                    code.append(regs.blend(s))
                if last:
                    code.append(_fma(regs.packed_acc[q], regs.a[-1], regs.packed_b, width, False,
                                     p))
            elif regs.broadcast is None:
                code.append(_fma(accs[0], regs.a[0], b_mem, width, True, p))
            else:
                code.append(_broadcast(regs.broadcast, b_mem, width, p))
                code.extend(_fma(acc, a_reg, regs.broadcast, width, False, p)
                            for acc, a_reg in zip(accs, regs.a))
        return b"".join(code)

    def _b_address(self, bases: tuple[Reg, ...], j: int) -> Mem:
        base, offset = bases[j // COLUMNS_PER_BASE], j % COLUMNS_PER_BASE
        if offset == 0:
            return Mem(base)
        if offset == 3:
            return Mem(base, self.ldb3)
        return Mem(base, LDB, offset)


class _VectorRegisters:
    """Vector register roles of one block: accumulators from register 0 up (per column, then
    the packed tail vectors), A's vectors, the broadcast B element, the packed B vector, the
    AVX-512 lane indices or the AVX2 mask vector from the top down; and where the vectors sit.

    In blocks of two or more vectors the tail vector ends at the last tail row (the t rows
    are its top t lanes), so its span never reaches into the next column: a load that
    overlaps the span of a pending masked store waits until the store reaches the cache
    (measured: 14 cycles), and the next block's first load of C would do so. In a packed
    vector the column s places before the end of its group has the t lanes that end share*s
    lanes below the top, so a group's last column ends its span at its last row too; the
    others reach into the following column of the same block, whose loads come first."""

    def __init__(self, target: Target, vectors: int, cols: int, tail_rows: int, group: int,
                 elements: Precision = FLOAT32):
        self.p = elements
        self.width, self.lanes = target.vector_bits, target.lanes(elements.bytes)
        self.vector_bytes = self.width // 8
        self.vectors, self.cols, self.tail_rows, self.group = vectors, cols, tail_rows, group
        self.share = share_lanes(target, tail_rows) if group > 1 else 0
        own = vectors - 1 if group > 1 else vectors     # vectors with accumulators per column
        self.acc = [list(range(j * own, (j + 1) * own)) for j in range(cols)]
        packed = -(-cols // group) if group > 1 else 0
        self.packed_acc = list(range(cols * own, cols * own + packed))
        top = target.registers - 1
        self.a = list(range(top, top - vectors, -1))
        top -= vectors
        self.broadcast = self.packed_b = self.indices = self.mask_vector = None
        if group > 1 or not (target.masks and vectors == 1):
            self.broadcast, top = top, top - 1
        if group > 1:
            self.packed_b, top = top, top - 1
            if target.masks:
                self.indices, top = top, top - 1
        elif tail_rows and not target.masks:
            self.mask_vector, top = top, top - 1
        assert top >= cols * own + packed - 1, "block does not fit the register file"
        # bytes the tail vector starts before the end of the full vectors
        self.tail_back = (elements.bytes * (self.lanes - tail_rows)
                          if tail_rows and vectors > 1 else 0)

    def accumulators(self) -> list[int]:
        return [acc for accs in self.acc for acc in accs] + self.packed_acc

    def _masked(self, i: int) -> bool:
        return self.tail_rows and i == self.vectors - 1

    def offset(self, i: int) -> int:
        """Byte offset of vector i within a column of the block."""
        return i * self.vector_bytes - (self.tail_back if self._masked(i) else 0)

    def packed_position(self, j: int) -> tuple[int, int]:
        """(packed vector, places before its group's end) of column j."""
        q, jj = divmod(j, self.group)
        size = min(self.group, self.cols - q * self.group)
        return q, size - 1 - jj

    def packed_offset(self, s: int) -> int:
        """Byte offset within its column of the span whose lanes of column s are the tail."""
        return self.offset(self.vectors - 1) + 4 * self.share * s

    def _lanes_of(self, s: int) -> int:
        """Lane bits of the tail rows of the column s places before its group's end."""
        return ((1 << self.tail_rows) - 1) << (self.lanes - self.tail_rows - self.share * s)

    def load(self, dst: int, mem: Mem, i: int) -> bytes:
        """Vector i of a block column: rows past M read as 0 without touching memory; a packed
        AVX2 tail: the column's last `share` rows in every share."""
        if self._masked(i) and self.share and self.indices is None:
            return _broadcast_rows(dst, mem.offset(4 * (self.lanes - self.share)), self.share)
        return _load(dst, mem, self.width, self._masked(i), self.mask_vector, self.p)

    def blend(self, s: int) -> bytes:
        """The lanes of the column s places before its group's end of the packed B := the
        broadcast element."""
        if self.indices is not None:
            return _blend(self.packed_b, self.broadcast, self.width, 1 + s)
        return _blend_lanes(self.packed_b, self.broadcast, self.width, self._lanes_of(s))

    def add(self, acc: int, mem: Mem, i: int) -> bytes:
        """acc += vector i of a block column (A's registers are free to help once K is done)."""
        return _add(acc, mem, self.width, self._masked(i), self.mask_vector, self.a[0], self.p)

    def store(self, src: int, mem: Mem, i: int) -> bytes:
        """Vector i of a block column: rows past M are not written."""
        return _store(src, mem, self.width, self._masked(i), self.mask_vector, self.p)

    def _packed_mask(self, s: int) -> bytes:
        """AVX2: the broadcast register := the mask vector of the column s places before its
        group's end (the broadcast and A's registers are free once K is done)."""
        return _mask_window(self.broadcast, MASK_SLOT.offset(4 * self.share * s), self.width)

    def add_packed(self, acc: int, mem: Mem, s: int) -> bytes:
        """The lanes of the column s places before its group's end += C's tail rows of that
        column (AVX2: the other lanes += 0)."""
        if self.indices is not None:
            return _add_lanes(acc, mem, self.width, 1 + s)
        return self._packed_mask(s) + _add(acc, mem, self.width, True, self.broadcast, self.a[0])

    def store_packed(self, src: int, mem: Mem, s: int) -> bytes:
        if self.indices is not None:
            return _store_lanes(src, mem, self.width, 1 + s)
        return self._packed_mask(s) + _store(src, mem, self.width, True, self.broadcast)


# the same few hundred instructions recur in every kernel: encode each once per process

@lru_cache(maxsize=8192)
def _fma(acc: int, a: int, b: int | Mem, width: int, bcst: bool,
         p: Precision = FLOAT32) -> bytes:
    return p.fmadd231(acc, a, b, width, bcst=bcst)


@lru_cache(maxsize=8192)
def _broadcast(dst: int, mem: Mem, width: int, p: Precision = FLOAT32) -> bytes:
    return p.broadcast(dst, mem, width)


@lru_cache(maxsize=1024)
def _blend(packed: int, broadcast: int, width: int, mask: int) -> bytes:
    """The lanes of mask register `mask` of `packed` := the broadcast element."""
    return enc.vblendmps(packed, packed, broadcast, width, mask=mask)


@lru_cache(maxsize=1024)
def _blend_lanes(packed: int, broadcast: int, width: int, lanes: int) -> bytes:
    """The lanes (bits) of `packed` := the broadcast element (AVX2)."""
    return enc.vblendps(packed, packed, broadcast, lanes, width)


@lru_cache(maxsize=1024)
def _broadcast_rows(dst: int, mem: Mem, rows: int) -> bytes:
    """ymm dst := the `rows` (1, 2 or 4) floats at mem, repeated."""
    if rows == 1:
        return enc.vbroadcastss(dst, mem, 256)
    if rows == 2:
        return enc.vbroadcastsd(dst, mem, 256)
    return enc.vbroadcastf128(dst, mem)


@lru_cache(maxsize=1024)
def _mask_window(dst: int, mem: Mem, width: int) -> bytes:
    return enc.vmovups_load(dst, mem, width)


@lru_cache(maxsize=1024)
def _permute(reg: int, indices: int, width: int) -> bytes:
    return enc.vpermps(reg, indices, reg, width)


@lru_cache(maxsize=8192)
def _load(dst: int, mem: Mem, width: int, masked: bool, mask_vector: int | None,
          p: Precision = FLOAT32) -> bytes:
    if not masked:
        return p.load(dst, mem, width)
    if mask_vector is not None:
        return p.mask_load(dst, mask_vector, mem, width)
    return p.load(dst, mem, width, mask=1, zeroing=True)


@lru_cache(maxsize=8192)
def _add(acc: int, mem: Mem, width: int, masked: bool, mask_vector: int | None,
         spare: int, p: Precision = FLOAT32) -> bytes:
    if not masked:
        return p.add(acc, acc, mem, width)
    if mask_vector is not None:
        return (p.mask_load(spare, mask_vector, mem, width)
                + p.add(acc, acc, spare, width))
    return p.add(acc, acc, mem, width, mask=1)     # masked lanes are not read


@lru_cache(maxsize=8192)
def _add_lanes(acc: int, mem: Mem, width: int, mask: int) -> bytes:
    return enc.vaddps(acc, acc, mem, width, mask=mask)


@lru_cache(maxsize=8192)
def _store_lanes(src: int, mem: Mem, width: int, mask: int) -> bytes:
    return enc.vmovups_store(mem, src, width, mask=mask)


@lru_cache(maxsize=8192)
def _zero(reg: int) -> bytes:
    """reg := 0 in all lanes (a 128-bit write clears the rest of the register)."""
    return enc.vxorps(reg, reg, reg, 128)


@lru_cache(maxsize=8192)
def _store(src: int, mem: Mem, width: int, masked: bool, mask_vector: int | None,
           p: Precision = FLOAT32) -> bytes:
    if not masked:
        return p.store(mem, src, width)
    if mask_vector is not None:
        return p.mask_store(mem, mask_vector, src, width)
    return p.store(mem, src, width, mask=1)


def emit_brgemm(asm: Assembler, target: Target, m: int, n: int, k: int, br_size: int,
                dtype: str = "float32") -> Label:
    """Emit the function brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) at the
    current position of `asm` and return its entry: C (m×n) += sum over br_size of
    A_i (m×k) B_i (k×n), column-major `dtype` (float32 or float64). A leaf function: it keeps
    data in the red zone."""
    return _Generator(asm, target, m, n, k, br_size, precision(dtype)).emit()


def generate_brgemm(target: Target, m: int, n: int, k: int, br_size: int,
                    dtype: str = "float32") -> bytes:
    """The code of emit_brgemm as a buffer of its own."""
    asm = Assembler()
    emit_brgemm(asm, target, m, n, k, br_size, dtype)
    return asm.finish()
