"""FP64 unary with a transposed result: B := op(A)^T, B row-major (B[j + r*ld_b]).

Kernel ABI as unary.py: unary(a, b, ld_a, ld_b) in x0..x3, leading dimensions in elements.

A q register holds two rows of one A column, so the transpose works on 2x2 tiles: for a pair
of A columns j, j+1, trn1/trn2 on 2d turn the two column vectors (rows r, r+1) into the two B
rows r and r+1, each holding [A[r, j], A[r, j+1]], stored as one q at B + r*ld_b + j.

Loop nest: row blocks of ROW_BLOCK rows (the B rows a block writes stay in the cache until
their lines are full), inside them the column pairs, inside those steps of STEP_ROWS rows: one
ld1 of four q registers per column (post-incremented), op on the eight vectors, four 2x2
transposes, eight q stores walking down B with a register post-index (ld_b bytes). Rows left
over in a block are loaded as q pieces (2 rows) and a last d piece (1 row) at immediate
offsets; a last unpaired column is stored element by element (st1 of one d lane per B row).
Lanes that are not loaded hold zeros or garbage that is never stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler
from einjit.backends.aarch64.eltwise import LOOP_ALIGN, VectorOp, apply
from einjit.backends.aarch64.encode import Reg

ARR = "2d"
ROW_BLOCK = 64
VECTORS = 4                          # q registers per column and step
STEP_ROWS = 2 * VECTORS

A, B, LD_A, LD_B = 0, 1, 2, 3        # LD_A, LD_B in bytes after the prologue
GROUP_A, GROUP_B = 4, 5              # first A column / B row of the current column pair
TILE_A = (6, 7)                      # the A pointers of the pair's two columns
WALK = 8                             # B row pointer, advanced by ld_b per stored row
BLOCK_COUNT, PAIR_COUNT, STEP_COUNT = 9, 10, 11
LD_A2 = 12                           # 2 * ld_a bytes: the next column pair
CONSTANT_SCRATCH = 13
LD_B_BLOCK = 14                      # ROW_BLOCK * ld_b bytes: the next row block's B

# Two groups of four consecutive registers for ld1 (the pair's columns), the rest for the
# op's constants and scratch; callee-saved v8..v15 last.
COLUMN_REGS = (tuple(range(24, 28)), tuple(range(28, 32)))
OTHER_REGS = tuple(range(0, 8)) + tuple(range(16, 24)) + tuple(range(8, 16))


class TransposedSweep64:
    """B := op(A) with B row-major, FP64 (see the module docstring)."""

    def __init__(self, op: VectorOp, m: int, n: int):
        self.op, self.m, self.n = op, m, n
        pool = list(OTHER_REGS)
        self.consts, pool = pool[:op.constant_count], pool[op.constant_count:]
        # at least 32 - 8 - 11 (sigmoid's constants) = 13: enough for the transpose's 2 and
        # for op.temps
        self.temps = pool

    @property
    def general_registers(self) -> list[int]:
        return list(range(0, 15))

    @property
    def vector_registers(self) -> list[int]:
        used = self.consts + self.temps[:max(2, self.op.temps * len(COLUMN_REGS) * VECTORS)]
        return used + [reg for regs in COLUMN_REGS for reg in regs]

    def emit(self, asm: Assembler) -> None:
        asm(enc.lsl_imm(LD_A, LD_A, 3), enc.lsl_imm(LD_B, LD_B, 3),
            enc.lsl_imm(LD_A2, LD_A, 1))
        asm(self.op.load_constants(self.consts, CONSTANT_SCRATCH))
        full_blocks, last_rows = divmod(self.m, ROW_BLOCK)
        if full_blocks:
            asm(enc.lsl_imm(LD_B_BLOCK, LD_B, ROW_BLOCK.bit_length() - 1))
            with asm.counted_loop(BLOCK_COUNT, full_blocks, align=LOOP_ALIGN):
                self._row_block(asm, ROW_BLOCK, advance=full_blocks > 1 or last_rows > 0)
        if last_rows:
            self._row_block(asm, last_rows, advance=False)

    def _row_block(self, asm: Assembler, rows: int, advance: bool) -> None:
        asm(enc.mov_reg(GROUP_A, A), enc.mov_reg(GROUP_B, B))
        pairs, single = divmod(self.n, 2)
        if pairs:
            with asm.counted_loop(PAIR_COUNT, pairs, align=LOOP_ALIGN):
                self._columns(asm, 2, rows)
                if pairs > 1 or single:
                    asm(enc.add_reg(GROUP_A, GROUP_A, LD_A2), enc.add_imm(GROUP_B, GROUP_B, 16))
        if single:
            self._columns(asm, 1, rows)
        if advance:
            asm(enc.add_imm(A, A, 8 * ROW_BLOCK), enc.add_reg(B, B, LD_B_BLOCK))

    def _columns(self, asm: Assembler, width: int, rows: int) -> None:
        """`width` (1 or 2) A columns from GROUP_A, `rows` rows, into B from GROUP_B."""
        asm(enc.mov_reg(TILE_A[0], GROUP_A), enc.mov_reg(WALK, GROUP_B))
        if width == 2:
            asm(enc.add_reg(TILE_A[1], GROUP_A, LD_A))
        steps, rest = divmod(rows, STEP_ROWS)
        if steps:
            with asm.counted_loop(STEP_COUNT, steps, align=LOOP_ALIGN):
                asm([enc.ld1(COLUMN_REGS[c], ARR, TILE_A[c], post=16 * VECTORS)
                     for c in range(width)])
                self._compute_and_store(asm, width, [2] * VECTORS)
        if rest:
            pieces = [2] * (rest // 2) + [1] * (rest % 2)
            for c in range(width):
                for v, rows_in_piece in enumerate(pieces):
                    size = "q" if rows_in_piece == 2 else "d"
                    asm(enc.ldr_v(size, COLUMN_REGS[c][v], TILE_A[c], 16 * v))
            self._compute_and_store(asm, width, pieces)

    def _compute_and_store(self, asm: Assembler, width: int, pieces: Sequence[int]) -> None:
        """op on the loaded vectors, then the B rows they hold, stored from WALK down."""
        vectors = [[COLUMN_REGS[c][v]] for c in range(width) for v in range(len(pieces))]
        words, results = apply(self.op, vectors, self.temps, self.consts)
        asm(words)
        columns = [results[c * len(pieces):(c + 1) * len(pieces)] for c in range(width)]
        step = Reg(LD_B)
        if width == 1:
            for v, rows_in_piece in enumerate(pieces):
                for lane in range(rows_in_piece):
                    asm(enc.st1_lane(columns[0][v], "d", lane, WALK, post=step))
            return
        low, high = self.temps[0], self.temps[1]
        for v, rows_in_piece in enumerate(pieces):
            left, right = columns[0][v], columns[1][v]
            asm(enc.trn1(low, left, right, ARR))
            if rows_in_piece == 2:
                asm(enc.trn2(high, left, right, ARR))
            asm(enc.st1(low, ARR, WALK, post=step))
            if rows_in_piece == 2:
                asm(enc.st1(high, ARR, WALK, post=step))
