"""AArch64 NEON unary primitive: B := op(A), FP32 or FP64, A column-major M x N.

Kernel ABI: unary(a, b, ld_a, ld_b) in x0..x3, leading dimensions in elements. B is
column-major (B[r + j*ld_b]) or, with trans_b, the transpose (B[j + r*ld_b]).

Ops are VectorOps (see eltwise.py) computing on whole vectors (4s, or 2d in FP64), bit-exact
with numpy: relu = fmax(a, 0) (fmax propagates NaN, unlike fmaxnm), square = a*a,
increment/decrement = a ± 1, reciprocal = 1/a by fdiv (correctly rounded). sigmoid: see the
comment above _sigmoid_compute (FP32) and sigmoid64.py (FP64).

Without trans_b the matrix is streamed column by column (eltwise.ColumnSweep). With trans_b
the transpose is done in registers: FP32 on 4x4 tiles (trn1/trn2 on 4s, then on 2d), see
TransposedSweep; FP64 on 2x2 tiles (trn1/trn2 on 2d), see transpose64.py. zero ignores A, so
its transposed form is the plain zero kernel on N x M.

complex64 and complex128 (zero, identity) run the real kernels of
einjit.backends.complex_eltwise; the complex128 transposing copy is transpose128.py's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from einjit.backends import Target
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler, Label
from einjit.backends.aarch64.eltwise import (
    ARR,
    LOOP_ALIGN,
    VECTOR_REGISTERS,
    ColumnSweep,
    Stream,
    VectorOp,
    apply,
    interleave,
    scale_to_bytes,
)
from einjit.backends.aarch64.sigmoid64 import SIGMOID64
from einjit.backends.aarch64.target import (
    FLOAT32,
    FLOAT64,
    Element,
    check_dtype,
    check_op,
    check_sizes,
    check_target,
)
from einjit.backends.aarch64.transpose64 import TransposedSweep64
from einjit.backends.aarch64.transpose128 import emit_transpose128
from einjit.backends.complex_eltwise import check_complex_op, is_complex, unary_form
from einjit.errors import KernelParameterError

A, B, LD_A, LD_B = 0, 1, 2, 3


def _float_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _no_constants(regs: Sequence[int], scratch: int) -> list[int]:
    return []


def _zero_constant(regs: Sequence[int], scratch: int) -> list[int]:
    return [enc.movi_zero(regs[0])]


def _one_constant(arr: str) -> Callable[[Sequence[int], int], list[int]]:
    def load(regs: Sequence[int], scratch: int) -> list[int]:
        return [enc.fmov_v_imm(regs[0], 1.0, arr)]
    return load


Compute = Callable[[Sequence[int], Sequence[int], Sequence[int]], tuple[list[int], int]]


def _in_place(instruction: Callable[[int, Sequence[int]], int]) -> Compute:
    """compute() of an op that is one instruction: inputs[0] := instruction(inputs[0], consts)."""
    def compute(inputs: Sequence[int], temps: Sequence[int],
                consts: Sequence[int]) -> tuple[list[int], int]:
        return [instruction(inputs[0], consts)], inputs[0]
    return compute


# --- sigmoid
#
# sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, with e = exp(-|x|) in (0, 1]:
# one division, no overflow, and e = 0 gives exactly 1 at +inf and exactly 0 at -inf.
# exp(-u), u = min(|x|, 104): n = round(u / ln 2) by the 1.5 * 2^23 shifter (the fused
# multiply-add rounds to an integer, whose bits are n + bits(shifter)), r = u - n ln 2 (ln 2 in
# two parts), exp(-r) by a degree-5 polynomial fitted on |r| <= ln2/2 (relative error
# 1.1e-7, evaluated by Estrin's scheme for a short dependency chain), times 2^-n. 2^-n is
# applied as two factors 2^-(n>>1) and 2^-(n - n>>1), each a normal float built from its
# exponent bits, so e underflows gracefully into denormals and rounds to 0 for u >= 104.
# fmin propagates NaN (fminnm would not), so NaN flows into e and the division returns NaN.
# The worst error against float64 sigmoid rounded to float32 is 1.2e-7 over all finite inputs.
_SIGMOID_CLAMP = 104.0
_SHIFTER = 12582912.0            # 1.5 * 2^23
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375            # few mantissa bits: n * _LN2_HI is exact
_LN2_LO = -2.12194440e-4         # ln 2 - _LN2_HI
_EXP_NEG_POLY = (-0.9999995231628418, 0.49999141693115234, -0.16668114066123962,
                 0.04189875349402428, -0.00826153252273798)   # c1..c5 of exp(-r) - 1


def _sigmoid_constants(regs: Sequence[int], scratch: int) -> list[int]:
    one, clamp, shifter, packed, c1, c2, c3, c4 = regs
    words = [enc.fmov_v_imm(one, 1.0, ARR)]
    for reg, value in ((clamp, _SIGMOID_CLAMP), (shifter, _SHIFTER), (c1, _EXP_NEG_POLY[0]),
                       (c2, _EXP_NEG_POLY[1]), (c3, _EXP_NEG_POLY[2]), (c4, _EXP_NEG_POLY[3])):
        words += enc.mov_imm(scratch, _float_bits(value))
        words.append(enc.dup_gpr(reg, scratch, ARR))
    # lanes used by element: log2(e), -ln2 high, -ln2 low, c5
    for lane, value in enumerate((_LOG2E, -_LN2_HI, -_LN2_LO, _EXP_NEG_POLY[4])):
        words += enc.mov_imm(scratch, _float_bits(value))
        words.append(enc.ins_gpr(packed, "s", lane, scratch))
    return words


def _sigmoid_compute(inputs: Sequence[int], temps: Sequence[int],
                     consts: Sequence[int]) -> tuple[list[int], int]:
    x = inputs[0]
    r, n, a, b, c = temps
    one, clamp, shifter, packed, c1, c2, c3, c4 = consts
    words = [
        enc.fabs(r, x, ARR),
        enc.fmin(r, r, clamp, ARR),                 # u = min(|x|, 104), NaN stays NaN
        enc.mov_v(n, shifter, "16b"),
        enc.fmla_elem(n, r, packed, 0, ARR),        # shifter + round(u * log2(e))
        enc.fsub(a, n, shifter, ARR),               # n as a float
        enc.sub_v(n, n, shifter, ARR),              # n as an integer
        enc.fmla_elem(r, a, packed, 1, ARR),
        enc.fmla_elem(r, a, packed, 2, ARR),        # r = u - n * ln2
        # exp(-r) = (1 + c1 r) + r^2 ((c2 + c3 r) + r^2 (c4 + c5 r))
        enc.fmul(a, r, r, ARR),
        enc.mov_v(b, c4, "16b"), enc.fmla_elem(b, r, packed, 3, ARR),
        enc.mov_v(c, c2, "16b"), enc.fmla(c, r, c3, ARR),
        enc.fmla(c, a, b, ARR),
        enc.mov_v(b, one, "16b"), enc.fmla(b, r, c1, ARR),
        enc.fmla(b, a, c, ARR),
        # e = p * 2^-(n >> 1) * 2^-(n - (n >> 1)); bits of 2^-k = bits(1.0) - (k << 23)
        enc.ushr_v(r, n, 1, ARR),
        enc.sub_v(n, n, r, ARR),
        enc.shl_v(r, r, 23, ARR),
        enc.sub_v(r, one, r, ARR),
        enc.shl_v(n, n, 23, ARR),
        enc.sub_v(n, one, n, ARR),
        enc.fmul(b, b, r, ARR),
        enc.fmul(b, b, n, ARR),
        # x < 0 (sign bit set): e / (1 + e), else 1 / (1 + e)
        enc.sshr_v(r, x, 31, ARR),
        enc.fadd(n, b, one, ARR),
        enc.bsl(r, b, one, "16b"),
        enc.fdiv(x, r, n, ARR),
    ]
    return words, x


def _zero_compute(inputs: Sequence[int], temps: Sequence[int],
                  consts: Sequence[int]) -> tuple[list[int], int]:
    return [], consts[0]


def _ops(element: Element) -> dict[str, VectorOp]:
    """The unary VectorOps computing on `element`'s full vectors."""
    arr = element.arr
    one = _one_constant(arr)
    return {
        "zero": VectorOp("zero", 0, 0, 1, _zero_constant, _zero_compute),
        "identity": VectorOp("identity", 1, 0, 0, _no_constants,
                             lambda inputs, temps, consts: ([], inputs[0])),
        "relu": VectorOp("relu", 1, 0, 1, _zero_constant,
                         _in_place(lambda x, c: enc.fmax(x, x, c[0], arr))),
        "square": VectorOp("square", 1, 0, 0, _no_constants,
                           _in_place(lambda x, c: enc.fmul(x, x, x, arr))),
        "reciprocal": VectorOp("reciprocal", 1, 0, 1, one,
                               _in_place(lambda x, c: enc.fdiv(x, c[0], x, arr))),
        "increment": VectorOp("increment", 1, 0, 1, one,
                              _in_place(lambda x, c: enc.fadd(x, x, c[0], arr))),
        "decrement": VectorOp("decrement", 1, 0, 1, one,
                              _in_place(lambda x, c: enc.fsub(x, x, c[0], arr))),
        "sigmoid": (VectorOp("sigmoid", 1, 5, 8, _sigmoid_constants, _sigmoid_compute)
                    if element is FLOAT32 else SIGMOID64),
    }


# dtype -> op name -> VectorOp; OPS are the FP32 ones (every dtype has the same names)
OPS_BY_DTYPE = {FLOAT32.dtype: _ops(FLOAT32), FLOAT64.dtype: _ops(FLOAT64)}
OPS = OPS_BY_DTYPE[FLOAT32.dtype]


def emit_unary(asm: Assembler, target: Target, op: str, m: int, n: int, trans_b: bool,
               dtype: str = "float32") -> Label:
    """Emit the function B := op(A) for an M x N column-major A of `dtype` (see the module
    docstring) at the current position of `asm`; returns the Label of its entry."""
    check_target(target)
    check_op("unary", op, OPS)
    check_sizes(m=m, n=n)
    if trans_b not in (True, False):
        raise KernelParameterError(f"trans_b={trans_b!r}: expected True or False")
    ld_shift, suffix = 0, "" if dtype == FLOAT32.dtype else f"_{dtype}"
    if is_complex(dtype):
        check_complex_op("unary", op, dtype)
        form = unary_form(op, m, n, trans_b, dtype)
        if form is None:
            return emit_transpose128(asm, target, m, n)
        m, n, trans_b, dtype, ld_shift = form.m, form.n, form.trans_b, form.dtype, form.ld_shift
    element = check_dtype(dtype)
    vector_op = OPS_BY_DTYPE[dtype][op]
    entry = asm.label(f"unary_{op}_{m}x{n}{'_t' if trans_b else ''}{suffix}")
    if op == "zero" and trans_b:
        m, n = n, m
    sweep: ColumnSweep | TransposedSweep | TransposedSweep64
    if trans_b and op != "zero":
        sweep = (TransposedSweep(vector_op, m, n) if element is FLOAT32
                 else TransposedSweep64(vector_op, m, n))
    else:
        inputs = [Stream(A, LD_A)] if vector_op.arity else []
        sweep = ColumnSweep(vector_op, m, n, inputs, Stream(B, LD_B), counters=(4, 5),
                            scratch_gpr=6, element=element, ld_shift=ld_shift)
    asm.bind(entry)
    asm.prologue(sweep.general_registers, sweep.vector_registers)
    sweep.emit(asm)
    asm.epilogue()
    return entry


def generate_unary(target: Target, op: str, m: int, n: int, trans_b: bool,
                   dtype: str = "float32") -> bytes:
    """Machine code of the unary kernel alone (emit_unary into a new Assembler)."""
    asm = Assembler()
    emit_unary(asm, target, op, m, n, trans_b, dtype)
    return asm.finish()


# --- transposed layout
#
# A tile is 4 rows x up to 4 columns of A: one vector per A column (lanes = rows). After op,
# trn1/trn2 on 4s pair up rows of neighbouring columns, trn1/trn2 on 2d finish the 4x4
# transpose, and each result vector is a B column (lanes = A columns) stored at
# B + row * ld_b + column. Partial tiles load/store 2-row (d), 1-row (s) and 3-row (d + s)
# pieces; lanes that are not loaded hold garbage that is never stored.
#
# Loop nest, cache friendly for big matrices: row blocks of ROW_BLOCK rows (so a group's
# stores go to ROW_BLOCK B columns that stay in the cache and TLB until their lines are full),
# inside them column groups of 8 A columns (two tiles side by side: 32 bytes per B column
# and step), then a group of 4, then the last 1..3 columns; inside a group, 4 rows per step.

ROW_BLOCK = 64
GROUP_COLUMNS = 8

LD_A2, LD_A3, LD_A4 = 4, 5, 6             # 2, 3, 4 x ld_a in bytes
LD_B2, LD_B3, LD_B4 = 7, 8, 9             # 2, 3, 4 x ld_b in bytes
GROUP_A, GROUP_B = 10, 11                 # first A column / B row of the current group
TILE_A = (12, 13)                         # A pointer of each tile of a group (row r)
TILE_B = (14, 15)                         # B pointer of each tile (column r)
BLOCK_COUNT, GROUP_COUNT, ROW_COUNT = 16, 17, 19
TILE_SCRATCH = (20, 21)                   # address + 8 for 3-row loads / 3-column stores
CONSTANT_SCRATCH = 16                     # free while the constants are built

A_OFFSETS = (None, LD_A, LD_A2, LD_A3)    # column c of a tile at A pointer + A_OFFSETS[c]
B_OFFSETS = (None, LD_B, LD_B2, LD_B3)    # row i of a tile at B pointer + B_OFFSETS[i]
PIECE = {4: "q", 2: "d", 1: "s"}


def _access(load: bool, size: str, vt: int, base: int, offset: int | None) -> int:
    if offset is None:
        return (enc.ldr_v if load else enc.str_v)(size, vt, base)
    return (enc.ldr_v_reg if load else enc.str_v_reg)(size, vt, base, offset)


class TransposedSweep:
    """B := op(A) with B row-major (the transpose of a column-major M x N result)."""

    def __init__(self, op: VectorOp, m: int, n: int):
        self.op, self.m, self.n = op, m, n
        pool = list(VECTOR_REGISTERS)
        self.consts, pool = pool[:op.constant_count], pool[op.constant_count:]
        self.tiles = [pool[0:4], pool[4:8]]       # the 4 column vectors of each tile
        # scratch: op temps (for up to 8 vectors at once), later the transpose's 2 x 4
        wanted = max(8, op.temps * 2 * len(self.tiles[0]))
        self.temps = pool[8:8 + wanted]

    @property
    def general_registers(self) -> list[int]:
        """The general registers the code writes, so that prologue() saves exactly those."""
        registers = list(range(4, 18))
        if any(rows // 4 > 1 for rows in self._row_block_sizes()):
            registers.append(ROW_COUNT)
        if self.m % 4 == 3 or self.n % 4 == 3:
            registers.append(TILE_SCRATCH[0])
            if self.m % 4 == 3 and self.n >= GROUP_COLUMNS:
                registers.append(TILE_SCRATCH[1])
        return registers

    def _row_block_sizes(self) -> list[int]:
        full_blocks, last_rows = divmod(self.m, ROW_BLOCK)
        return [ROW_BLOCK] * min(full_blocks, 1) + [last_rows] * (last_rows > 0)

    @property
    def vector_registers(self) -> list[int]:
        return self.consts + self.tiles[0] + self.tiles[1] + self.temps

    def emit(self, asm: Assembler) -> None:
        asm(scale_to_bytes(LD_A), scale_to_bytes(LD_B),
            enc.lsl_imm(LD_A2, LD_A, 1), enc.add_reg(LD_A3, LD_A2, LD_A),
            enc.lsl_imm(LD_A4, LD_A, 2),
            enc.lsl_imm(LD_B2, LD_B, 1), enc.add_reg(LD_B3, LD_B2, LD_B),
            enc.lsl_imm(LD_B4, LD_B, 2))
        asm(self.op.load_constants(self.consts, CONSTANT_SCRATCH))
        full_blocks, last_rows = divmod(self.m, ROW_BLOCK)
        if full_blocks:
            with asm.counted_loop(BLOCK_COUNT, full_blocks, align=LOOP_ALIGN):
                self._row_block(asm, ROW_BLOCK, advance=True)
        if last_rows:
            self._row_block(asm, last_rows, advance=False)

    def _row_block(self, asm: Assembler, rows: int, advance: bool) -> None:
        """All N columns of A for `rows` rows starting at A (row r0) and B (column r0)."""
        asm(enc.mov_reg(GROUP_A, A), enc.mov_reg(GROUP_B, B))
        groups, rest = divmod(self.n, GROUP_COLUMNS)
        if groups:
            with asm.counted_loop(GROUP_COUNT, groups, align=LOOP_ALIGN):
                self._group(asm, GROUP_COLUMNS, rows)
                asm(enc.add_reg(GROUP_A, GROUP_A, LD_A4, lsl=1),
                    enc.add_imm(GROUP_B, GROUP_B, 32))
        if rest >= 4:
            self._group(asm, 4, rows)
            asm(enc.add_reg(GROUP_A, GROUP_A, LD_A4), enc.add_imm(GROUP_B, GROUP_B, 16))
        if rest % 4:
            self._group(asm, rest % 4, rows)
        if advance:
            # next row block: A row r0 + ROW_BLOCK, B column r0 + ROW_BLOCK
            asm(enc.add_imm(A, A, 4 * ROW_BLOCK),
                enc.add_reg(B, B, LD_B4, lsl=(ROW_BLOCK // 4).bit_length() - 1))

    def _group(self, asm: Assembler, columns: int, rows: int) -> None:
        """`columns` (8, or 1..4) A columns from GROUP_A, `rows` rows, into B from GROUP_B."""
        tile_count = 2 if columns == 8 else 1
        width = min(columns, 4)
        asm(enc.mov_reg(TILE_A[0], GROUP_A), enc.mov_reg(TILE_B[0], GROUP_B))
        if tile_count == 2:
            asm(enc.add_reg(TILE_A[1], GROUP_A, LD_A4), enc.add_imm(TILE_B[1], GROUP_B, 16))
        steps, last = divmod(rows, 4)
        if steps:
            with asm.counted_loop(ROW_COUNT, steps, align=LOOP_ALIGN):
                self._step(asm, tile_count, width, 4, advance=True)
        if last:
            self._step(asm, tile_count, width, last, advance=False)

    def _step(self, asm: Assembler, tile_count: int, width: int, height: int,
              advance: bool) -> None:
        """One tile per tile_count: `height` rows x `width` columns, op, transpose, store."""
        tiles = self.tiles[:tile_count]
        for t, regs in enumerate(tiles):
            asm(self._load_tile(t, regs, width, height, advance))
        vectors = [[regs[c]] for regs in tiles for c in range(width)]
        words, _ = apply(self.op, vectors, self.temps, self.consts)
        asm(words)
        asm(interleave([self._transpose(regs, width, self.temps[4 * t:4 * t + 4])
                        for t, regs in enumerate(tiles)]))
        for t, regs in enumerate(tiles):
            asm(self._store_tile(t, regs, width, height))
            if advance:
                asm(enc.add_reg(TILE_B[t], TILE_B[t], LD_B4))

    def _load_tile(self, t: int, regs: Sequence[int], width: int, height: int,
                   advance: bool) -> list[int]:
        base, scratch = TILE_A[t], TILE_SCRATCH[t]
        words = []
        if height == 3:
            words.append(enc.add_imm(scratch, base, 8))
        # column 0 last: with advance it post-increments the pointer the others are based on
        for c in list(range(1, width)) + [0]:
            offset = A_OFFSETS[c]
            if height == 4 and advance and offset is None:
                words.append(enc.ldr_v_post("q", regs[c], base, 16))
            elif height == 3:
                lane_reg = self.temps[c]
                words += [_access(True, "d", regs[c], base, offset),
                          _access(True, "s", lane_reg, scratch, offset),
                          enc.ins_elem(regs[c], "s", 2, lane_reg, 0)]
            else:
                words.append(_access(True, PIECE[height], regs[c], base, offset))
        return words

    @staticmethod
    def _transpose(regs: Sequence[int], width: int, temps: Sequence[int]) -> list[int]:
        """regs[c] = column c (lanes = rows) becomes regs[i] = row i (lanes = columns)."""
        a = [regs[c] if c < width else regs[0] for c in range(4)]
        t0, t1, t2, t3 = temps
        return [enc.trn1(t0, a[0], a[1], "4s"), enc.trn2(t1, a[0], a[1], "4s"),
                enc.trn1(t2, a[2], a[3], "4s"), enc.trn2(t3, a[2], a[3], "4s"),
                enc.trn1(regs[0], t0, t2, "2d"), enc.trn1(regs[1], t1, t3, "2d"),
                enc.trn2(regs[2], t0, t2, "2d"), enc.trn2(regs[3], t1, t3, "2d")]

    def _store_tile(self, t: int, regs: Sequence[int], width: int, height: int) -> list[int]:
        base, scratch = TILE_B[t], TILE_SCRATCH[t]
        words = []
        if width == 3:
            words.append(enc.add_imm(scratch, base, 8))
        for i in range(height):
            offset = B_OFFSETS[i]
            if width == 3:
                lane_reg = self.temps[i]
                words += [_access(False, "d", regs[i], base, offset),
                          enc.dup_scalar("s", lane_reg, regs[i], 2),
                          _access(False, "s", lane_reg, scratch, offset)]
            else:
                words.append(_access(False, PIECE[width], regs[i], base, offset))
        return words
