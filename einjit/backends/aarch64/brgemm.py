"""AArch64 NEON BRGEMM generator: C += sum_i A_i B_i, FP32 or FP64, column-major.

Kernel ABI: brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) in x0..x7, leading
dimensions and batch strides in elements. M, N, K and the batch size are baked into the code.

Blocking: C is tiled into blocks of four q-registers of rows by 6 columns: 16x6 in FP32 (four
lanes per register), 8x6 in FP64 (two). For each k, a column of the block's A rows sits in four
q-registers and each of the six B elements is loaded into lane 0 of a register and used by
element, so a step is 24 FMLAs into 24 accumulators. The accumulators stay in registers for the
whole K loop and the whole batch loop: each C block is loaded once and stored once.

Rows left over (M % 16, or M % 8 in FP64) are covered by q-registers for full vectors, then a
d-register for two FP32 rows (one FP64 row) and an s-register for one FP32 row, so no load or
store touches a row past M. Columns left over
(N % 6) run the same microkernel with fewer columns. Loops over the row blocks, the column
blocks, the batch and K keep the code small at every size; K is unrolled K_UNROLL times, with B
read at immediate offsets from one pointer per column. Blocks too small to hide the FMLA latency
with their own accumulators alternate between several zeroed copies over k and sum them at the
end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from einjit.backends import Target
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler, Label
from einjit.backends.aarch64.target import Element, check_dtype, check_sizes, check_target

BLOCK_COLS = 6
K_UNROLL = 4
# Loop heads are not padded (align=4 is a no-op): the kernels' code stays as measured.
LOOP_ALIGN = 4

# General registers. x0..x7 hold the arguments; x1 and x2 advance to the current column block.
A_MATRIX, B_COLUMN_BLOCK, C_COLUMN_BLOCK = 0, 1, 2
LD_A, LD_B, LD_C, BR_STRIDE_A, BR_STRIDE_B = 3, 4, 5, 6, 7
N_COUNT, M_COUNT, BATCH_COUNT, K_COUNT = 8, 9, 10, 11
C_BLOCK, A_BLOCK, A_BATCH, B_BATCH = 12, 13, 14, 15
WALK = 16                              # the A column in the K loop, the C column on load/store
B_COLUMNS = (17, 19, 20, 21, 22, 23)   # one pointer per B column; x18 is the platform register
LD_B_BLOCK, LD_C_BLOCK = 24, 25        # BLOCK_COLS * ld_b, BLOCK_COLS * ld_c

# Vector registers: A rows, B elements (rotating; renaming overlaps their reuse), accumulators
# from v16 up, reaching into the callee-saved v8..v15 only when a block needs more than 16.
A_REGS = (0, 1, 2, 3)
B_REGS = (4, 5, 6, 7)
ACC_REGS = tuple(range(16, 32)) + tuple(range(8, 16))

# A "piece" is the part of a C column held in one register: a full vector (q), 8 bytes (d) or
# 4 bytes (s) of rows; the piece's size in the tuples below is its row count.
PIECE_SIZE = {16: "q", 8: "d", 4: "s"}            # bytes -> register size letter
MAX_PIECES = len(A_REGS)
FMA_CHAINS = 16   # independent accumulators that hide FMLA latency (4 cycles x up to 4 pipes)


def _block_rows(element: Element) -> int:
    return MAX_PIECES * element.lanes


def _arrangement(element: Element, rows: int) -> str:
    """The FMLA arrangement of a piece of `rows` rows (only its low `rows` lanes are stored)."""
    if element.lanes == 2:
        return "2d"
    return "4s" if rows == 4 else "2s"


def _row_pieces(rows: int, element: Element) -> tuple[int, ...]:
    """The register pieces covering `rows` (< one block) rows: full vectors first, then halves
    of the remaining lanes (FP32: a 2, then a 1)."""
    pieces = (element.lanes,) * (rows // element.lanes)
    part = element.lanes // 2
    while part:
        if rows & part:
            pieces += (part,)
        part //= 2
    return pieces


def _row_groups(m: int, element: Element) -> list[tuple[int, tuple[int, ...]]]:
    """[(repeat count, pieces)] covering the M rows: full blocks, then the remainder in at most
    two groups so that no group needs more than MAX_PIECES registers per column."""
    groups = []
    block_rows = _block_rows(element)
    if m >= block_rows:
        groups.append((m // block_rows, (element.lanes,) * MAX_PIECES))
    rest = _row_pieces(m % block_rows, element)
    if len(rest) > MAX_PIECES:
        quads = rest.count(element.lanes)
        groups += [(1, rest[:quads]), (1, rest[quads:])]
    elif rest:
        groups.append((1, rest))
    return groups


def _transfer(single: Callable[..., int], pair: Callable[..., int], pieces: Sequence[int],
              regs: Sequence[int], base: int, element: Element) -> list[int]:
    """Words moving one column of pieces between `regs` and memory at [base]; adjacent
    q-pieces go as a pair."""
    words = []
    offset = index = 0
    full = element.lanes
    while index < len(pieces):
        rows = pieces[index]
        if rows == full and index + 1 < len(pieces) and pieces[index + 1] == full:
            words.append(pair("q", regs[index], regs[index + 1], base, offset))
            offset, index = offset + 32, index + 2
        else:
            words.append(single(PIECE_SIZE[element.size * rows], regs[index], base, offset))
            offset, index = offset + element.size * rows, index + 1
    return words


def _accumulator_sets(per_set: int, k: int) -> int:
    """How many copies of the C block to accumulate into, alternating over k.

    One FMLA chain per accumulator is latency-bound when a block has few registers; extra sets
    (zeroed, summed into the C block after the batch loop) give at least FMA_CHAINS independent
    chains within the register budget.
    """
    sets = 1
    while (sets < K_UNROLL and sets < k and sets * per_set < FMA_CHAINS
           and (sets + 1) * per_set <= len(ACC_REGS)):
        sets += 1
    return sets


class _Microkernel:
    """Code for one C block shape: `pieces` per column times `ncols` columns, all K, all batches.

    Expects the block's C at C_BLOCK, its A rows (batch 0) at A_BLOCK, its B columns (batch 0)
    at B_COLUMN_BLOCK.
    """

    def __init__(self, pieces: tuple[int, ...], ncols: int, k: int, br_size: int,
                 element: Element):
        self.pieces, self.ncols, self.k, self.br_size = pieces, ncols, k, br_size
        self.element = element
        count = len(pieces)
        per_set = count * ncols
        self.sets = [[ACC_REGS[s * per_set + j * count:s * per_set + (j + 1) * count]
                      for j in range(ncols)]
                     for s in range(_accumulator_sets(per_set, k))]
        self.vregs = (set(A_REGS[:count]) | set(B_REGS[:ncols])
                      | set(ACC_REGS[:per_set * len(self.sets)]))
        # The A loads and FMLAs of a K step do not depend on the step; only B offsets do.
        self.load_a = _transfer(enc.ldr_v, enc.ldp_v, pieces, A_REGS, WALK, element)
        self.load_a.append(enc.add_reg(WALK, WALK, LD_A))
        self.fmlas = [[[enc.fmla_elem(acc, A_REGS[p], B_REGS[j % len(B_REGS)], 0,
                                      _arrangement(element, rows))
                        for p, (acc, rows) in enumerate(zip(column, pieces))]
                       for j, column in enumerate(accumulators)]
                      for accumulators in self.sets]

    def emit(self, asm: Assembler) -> None:
        self._walk_c(asm, enc.ldr_v, enc.ldp_v)
        asm([enc.movi_zero(reg) for extra in self.sets[1:] for column in extra for reg in column])
        batched = self.br_size > 1
        if batched:     # the batch walks copies of the block's A and B pointers
            asm(enc.mov_reg(A_BATCH, A_BLOCK), enc.mov_reg(B_BATCH, B_COLUMN_BLOCK))
        a_source, b_source = (A_BATCH, B_BATCH) if batched else (A_BLOCK, B_COLUMN_BLOCK)
        with asm.counted_loop(BATCH_COUNT, self.br_size, align=LOOP_ALIGN):
            asm(enc.mov_reg(WALK, a_source), enc.mov_reg(B_COLUMNS[0], b_source))
            for j in range(1, self.ncols):
                asm(enc.add_reg(B_COLUMNS[j], B_COLUMNS[j - 1], LD_B))
            self._k_loop(asm)
            if batched:
                asm(enc.add_reg(A_BATCH, A_BATCH, BR_STRIDE_A),
                    enc.add_reg(B_BATCH, B_BATCH, BR_STRIDE_B))
        for extra in self.sets[1:]:
            for total, column in zip(self.sets[0], extra):
                asm([enc.fadd(t, t, e, _arrangement(self.element, rows))
                     for t, e, rows in zip(total, column, self.pieces)])
        self._walk_c(asm, enc.str_v, enc.stp_v)

    def _walk_c(self, asm: Assembler, single: Callable[..., int],
                pair: Callable[..., int]) -> None:
        asm(enc.mov_reg(WALK, C_BLOCK))
        for j, regs in enumerate(self.sets[0]):
            if j:
                asm(enc.add_reg(WALK, WALK, LD_C))
            asm(_transfer(single, pair, self.pieces, regs, WALK, self.element))

    def _k_loop(self, asm: Assembler) -> None:
        iterations, rest = divmod(self.k, K_UNROLL)
        if iterations < 2:  # short K: straight-line, B offsets just keep growing
            self._steps(asm, self.k)
            return
        with asm.counted_loop(K_COUNT, iterations, align=LOOP_ALIGN):
            self._steps(asm, K_UNROLL)
            asm([enc.add_imm(reg, reg, self.element.size * K_UNROLL)
                 for reg in B_COLUMNS[:self.ncols]])
        self._steps(asm, rest)

    def _steps(self, asm: Assembler, count: int) -> None:
        size, letter = self.element.size, self.element.letter
        for step in range(count):
            fmlas = self.fmlas[step % len(self.sets)]
            asm(self.load_a)
            for j in range(self.ncols):
                asm(enc.ldr_v(letter, B_REGS[j % len(B_REGS)], B_COLUMNS[j], size * step),
                    fmlas[j])


def _column_block(asm: Assembler, groups: list[tuple[int, tuple[int, ...]]], ncols: int,
                  microkernels: dict[tuple[tuple[int, ...], int], _Microkernel],
                  element: Element) -> None:
    """All row blocks of one column block of `ncols` columns."""
    asm(enc.mov_reg(C_BLOCK, C_COLUMN_BLOCK), enc.mov_reg(A_BLOCK, A_MATRIX))
    for index, (count, pieces) in enumerate(groups):
        more_follow = index + 1 < len(groups)
        with asm.counted_loop(M_COUNT, count, align=LOOP_ALIGN):
            microkernels[pieces, ncols].emit(asm)
            if count > 1 or more_follow:
                block_bytes = element.size * sum(pieces)
                asm(enc.add_imm(C_BLOCK, C_BLOCK, block_bytes),
                    enc.add_imm(A_BLOCK, A_BLOCK, block_bytes))


def emit_brgemm(asm: Assembler, target: Target, m: int, n: int, k: int, br_size: int,
                dtype: str = "float32") -> Label:
    """Emit the function C += sum_i A_i B_i with C m×n, A_i m×k, B_i k×n of `dtype` (see the
    module docstring) at the current position of `asm`; returns the Label of its entry."""
    check_target(target)
    check_sizes(m=m, n=n, k=k, br_size=br_size)
    element = check_dtype(dtype)
    groups = _row_groups(m, element)
    column_blocks, column_rest = divmod(n, BLOCK_COLS)
    column_shapes = ([BLOCK_COLS] if column_blocks else []) + ([column_rest] if column_rest else [])
    advances_columns = column_blocks > 1 or (column_blocks == 1 and column_rest > 0)
    microkernels = {(pieces, ncols): _Microkernel(pieces, ncols, k, br_size, element)
                    for _, pieces in groups for ncols in column_shapes}
    gprs = set(range(0, WALK + 1)) | set(B_COLUMNS[:max(column_shapes)])
    if advances_columns:
        gprs |= {LD_B_BLOCK, LD_C_BLOCK}
    vregs = set().union(*(kernel.vregs for kernel in microkernels.values()))

    suffix = "" if element.dtype == "float32" else f"_{element.dtype}"
    entry = asm.label(f"brgemm_{m}x{n}x{k}_br{br_size}{suffix}")
    asm.bind(entry)
    asm.prologue(gprs, vregs)
    # leading dimensions and strides arrive in elements
    asm([enc.lsl_imm(reg, reg, element.shift)
         for reg in (LD_A, LD_B, LD_C, BR_STRIDE_A, BR_STRIDE_B)])
    if column_blocks:
        if advances_columns:
            for block, ld in ((LD_B_BLOCK, LD_B), (LD_C_BLOCK, LD_C)):
                asm(enc.add_reg(block, ld, ld, lsl=1), enc.lsl_imm(block, block, 1))
        with asm.counted_loop(N_COUNT, column_blocks, align=LOOP_ALIGN):
            _column_block(asm, groups, BLOCK_COLS, microkernels, element)
            if advances_columns:
                asm(enc.add_reg(B_COLUMN_BLOCK, B_COLUMN_BLOCK, LD_B_BLOCK),
                    enc.add_reg(C_COLUMN_BLOCK, C_COLUMN_BLOCK, LD_C_BLOCK))
    if column_rest:
        _column_block(asm, groups, column_rest, microkernels, element)
    asm.epilogue()
    return entry


def generate_brgemm(target: Target, m: int, n: int, k: int, br_size: int,
                    dtype: str = "float32") -> bytes:
    """Machine code of the BRGEMM kernel alone (emit_brgemm into a new Assembler)."""
    asm = Assembler()
    emit_brgemm(asm, target, m, n, k, br_size, dtype)
    return asm.finish()
