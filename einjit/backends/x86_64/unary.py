"""x86-64 unary kernels: B := op(A) for column-major FP32 A, B column- or row-major.

Kernel ABI (System V): unary(a, b, ld_a, ld_b) in rdi, rsi, rdx, rcx, leading dimensions in
elements. M, N, the op and the layout of B are compile-time.

Non-transposed B: a column sweep (eltwise.ColumnSweep), each vector loaded, op applied in
place, stored. Row-major B (trans_b): eltwise.TransposedSweep, the op applied to A's columns
before the in-register transpose. `zero` never reads A; its transposed form is the plain zero
kernel on B's own shape. Large outputs get a streaming path (see eltwise).

Semantics are numpy's: relu is vmaxps(0, a), which returns its second source a when a is NaN;
reciprocal is an exact 1/a division. sigmoid(x) = num / (1 + e) with e = exp(-|x|) and
num = 1 for x >= 0 (or NaN), e for x < 0, so e never overflows. e = p(r) * 2**n with
n = round(-|x| log2(e)), r = -|x| - n ln 2 (two-constant Cody-Waite with FMA) and p a degree-5
fit of exp on [-ln2/2, ln2/2] (relative error 2e-7); 2**n is added to p's exponent bits, and
e is forced to 0 below -87 where that would leave the normal range (the true e < 2e-38 there).
A NaN passes every step as NaN: the cutoff compare is unordered-true and the final division
sees 1 + NaN.

float64 (precision.FLOAT64) runs the same ops with the packed-double instructions; its
sigmoid has the same shape with an exp accurate to double precision: n = round(-|x| log2 e)
by adding 1.5 * 2**52 (the integer lands in the low mantissa bits, shifted to the exponent
field to make 2**n), the Cody-Waite split of ln 2 into two doubles, and the degree-13 Taylor
polynomial of exp on [-ln2/2, ln2/2] (truncation below 5e-18 relative); e = p(r) * 2**n is a
multiplication (a NaN stays NaN), forced to 0 below -708 where 2**n would leave the normal
range (the true e < 4e-308 there).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from einjit.backends import Target
from einjit.backends.complex_eltwise import check_complex_op, is_complex, unary_form
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.eltwise import (
    COLUMN_STREAM_MIN_BYTES,
    LINE_MASK,
    MAX_UNROLL,
    MEMORY_BOUND_WIDTH,
    STREAM_GROUP_COLUMNS,
    ColumnRegisters,
    ColumnSweep,
    Const,
    Slot,
    TransposedSweep,
    TransposeRegisters,
    Vector,
    double_bits,
    float_bits,
)
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
)
from einjit.backends.x86_64.precision import FLOAT32, precision
from einjit.backends.x86_64.transpose128 import emit_transpose128

GREATER_EQUAL_OR_NAN = 0x15   # NLT_UQ: not (a < b), true for unordered

ONE = Const("one", float_bits(1.0))
ZERO = Const("zero", 0)
SIGN = Const("sign", 0x8000_0000)
LOG2E = Const("log2e", float_bits(1.4426950408889634))
LN2_HI = 0.6931471824645996                       # float32(ln 2)
NEG_LN2_HI = Const("-ln2_hi", float_bits(-LN2_HI))
NEG_LN2_LO = Const("-ln2_lo", float_bits(-(0.6931471805599453 - LN2_HI)))
EXP_CUTOFF = Const("cutoff", float_bits(-87.0))   # exp(x) for x < cutoff is taken as 0
EXP_POLYNOMIAL = tuple(Const(f"c{i}", float_bits(c)) for i, c in enumerate((
    1.00000007104746, 0.9999996660956033, 0.49998898890983146, 0.16667662927161625,
    0.041915049474499096, 0.00829171966080362)))
EXPONENT_SHIFT = 23

# float64 constants (see the module doc)
ONE64 = Const("one", double_bits(1.0), 8)
ZERO64 = Const("zero", 0, 8)
SIGN64 = Const("sign", 0x8000_0000_0000_0000, 8)
LOG2E64 = Const("log2e", double_bits(1.4426950408889634), 8)
ROUNDER64 = Const("1.5*2**52", double_bits(6755399441055744.0), 8)
LN2_HI64 = 0.6931471805599453                       # float64(ln 2)
NEG_LN2_HI64 = Const("-ln2_hi", double_bits(-LN2_HI64), 8)
NEG_LN2_LO64 = Const("-ln2_lo", double_bits(-2.3190468138462996e-17), 8)  # ln 2 - LN2_HI64
EXP_CUTOFF64 = Const("cutoff", double_bits(-708.0), 8)
EXP_POLYNOMIAL64 = tuple(Const(f"c{i}", double_bits(1.0 / math.factorial(i)), 8)
                         for i in range(14))
EXPONENT_SHIFT64 = 52


@dataclass(frozen=True)
class UnaryOp:
    """How one op transforms a vector register x in place.

    emit(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
     constant: int | None, masks: Sequence[int]) -> None: `scratch` are `temps` free vector
    registers, `constant` the register holding `register_constant` (None if the op needs
    none) and `masks` free mask registers (AVX-512); frame constants (`frame_constants`) are
    used as memory operands. Ops that are not compute_bound run the plain sweep with
    MEMORY_BOUND_WIDTH vectors."""
    name: str
    emit: Callable
    temps: int = 0
    register_constant: Const | None = None
    frame_constants: tuple = ()
    reads_input: bool = True
    compute_bound: bool = False


def _nothing(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
             constant: int | None, masks: Sequence[int]) -> None:
    pass


def _relu(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
          constant: int | None, masks: Sequence[int]) -> None:
    asm(vector.precision.max(x, constant, x, vector.width))  # second source: NaN in x returned


def _square(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
            constant: int | None, masks: Sequence[int]) -> None:
    asm(vector.precision.mul(x, x, x, vector.width))


def _reciprocal(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
                constant: int | None, masks: Sequence[int]) -> None:
    asm(vector.precision.div(x, constant, x, vector.width))


def _increment(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
               constant: int | None, masks: Sequence[int]) -> None:
    asm(vector.precision.add(x, x, constant, vector.width))


def _decrement(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
               constant: int | None, masks: Sequence[int]) -> None:
    asm(vector.precision.sub(x, x, constant, vector.width))


def _sigmoid(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
             constant: int | None, masks: Sequence[int]) -> None:
    a, n, p, q = scratch
    op = vector.op
    asm(op(enc.vorps, a, x, SIGN),                          # a = -|x|
        op(enc.vmulps, n, a, LOG2E))
    if vector.masks:
        keep, nonnegative = masks[:2]                     # keep: a >= cutoff, or NaN
        asm(enc.vrndscaleps(n, n, 0, vector.width),
            op(enc.vcmpps, keep, a, EXP_CUTOFF, GREATER_EQUAL_OR_NAN, evex=True))
    else:
        keep = q
        asm(enc.vroundps(n, n, 0, vector.width),
            op(enc.vcmpps, keep, a, EXP_CUTOFF, GREATER_EQUAL_OR_NAN))
    asm(op(enc.vfmadd231ps, a, n, NEG_LN2_HI),              # r = a - n ln2
        op(enc.vfmadd231ps, a, n, NEG_LN2_LO),
        vector.broadcast(p, EXP_POLYNOMIAL[-1]))
    for coefficient in reversed(EXP_POLYNOMIAL[:-1]):
        asm(op(enc.vfmadd213ps, p, a, coefficient))         # p = p r + c
    asm(enc.vcvtps2dq(n, n, vector.width),
        enc.vpslld_ri(n, n, EXPONENT_SHIFT, vector.width))
    if vector.masks:
        asm(enc.vpaddd(p, p, n, vector.width, mask=keep, zeroing=True),   # e = p 2**n, or 0
            op(enc.vcmpps, nonnegative, x, ZERO, GREATER_EQUAL_OR_NAN, evex=True),
            op(enc.vaddps, q, p, ONE),                                    # 1 + e
            op(enc.vblendmps, p, p, ONE, mask=nonnegative))               # x >= 0: 1, else e
        asm(enc.vdivps(x, p, q, vector.width))
    else:
        asm(enc.vpaddd(p, p, n, vector.width),
            enc.vandps(p, p, keep, vector.width),
            vector.broadcast(q, ONE),
            enc.vblendvps(q, q, p, x, vector.width),        # x < 0 (sign set): e, else 1
            op(enc.vaddps, p, p, ONE))
        asm(enc.vdivps(x, q, p, vector.width))


def _sigmoid64(asm: Assembler, vector: Vector, x: int, scratch: Sequence[int],
               constant: int | None, masks: Sequence[int]) -> None:
    """sigmoid of doubles (see the module doc): a = -|x|, t = 1.5*2**52 + n, r = a - n ln2,
    e = p(r) * 2**n."""
    a, t, p, q = scratch
    op = vector.op
    asm(op(enc.vorpd, a, x, SIGN64))                        # a = -|x|
    if vector.masks:
        keep, nonnegative = masks[:2]                     # keep: a >= cutoff, or NaN
        asm(op(enc.vcmppd, keep, a, EXP_CUTOFF64, GREATER_EQUAL_OR_NAN, evex=True))
    else:
        keep = q
        asm(op(enc.vcmppd, keep, a, EXP_CUTOFF64, GREATER_EQUAL_OR_NAN))
    asm(vector.broadcast(t, ROUNDER64),
        op(enc.vfmadd231pd, t, a, LOG2E64),                # t = 1.5*2**52 + round(a log2 e)
        op(enc.vsubpd, p, t, ROUNDER64),                   # n
        op(enc.vfmadd231pd, a, p, NEG_LN2_HI64),           # r = a - n ln2
        op(enc.vfmadd231pd, a, p, NEG_LN2_LO64),
        enc.vpsllq_ri(t, t, EXPONENT_SHIFT64, vector.width),
        op(enc.vpaddq, t, t, ONE64),                       # 2**n
        vector.broadcast(p, EXP_POLYNOMIAL64[-1]))
    for coefficient in reversed(EXP_POLYNOMIAL64[:-1]):
        asm(op(enc.vfmadd213pd, p, a, coefficient))        # p = p r + c
    if vector.masks:
        asm(enc.vmulpd(p, p, t, vector.width, mask=keep, zeroing=True),  # e = p 2**n, or 0
            op(enc.vcmppd, nonnegative, x, ZERO64, GREATER_EQUAL_OR_NAN, evex=True),
            op(enc.vaddpd, q, p, ONE64),                                  # 1 + e
            op(enc.vblendmpd, p, p, ONE64, mask=nonnegative))             # x >= 0: 1, else e
        asm(enc.vdivpd(x, p, q, vector.width))
    else:
        asm(enc.vmulpd(p, p, t, vector.width),
            enc.vandpd(p, p, keep, vector.width),
            vector.broadcast(q, ONE64),
            enc.vblendvpd(q, q, p, x, vector.width),        # x < 0 (sign set): e, else 1
            op(enc.vaddpd, p, p, ONE64))
        asm(enc.vdivpd(x, q, p, vector.width))


UNARY_OPS = {op.name: op for op in (
    UnaryOp("zero", _nothing, reads_input=False),
    UnaryOp("identity", _nothing),
    UnaryOp("relu", _relu, register_constant=ZERO),
    UnaryOp("square", _square),
    UnaryOp("reciprocal", _reciprocal, register_constant=ONE),
    UnaryOp("increment", _increment, register_constant=ONE),
    UnaryOp("decrement", _decrement, register_constant=ONE),
    UnaryOp("sigmoid", _sigmoid, temps=4, compute_bound=True,
            frame_constants=(ONE, ZERO, SIGN, LOG2E, NEG_LN2_HI, NEG_LN2_LO, EXP_CUTOFF)
            + EXP_POLYNOMIAL),
)}

# the same ops on doubles: 64-bit constants, sigmoid64
UNARY_OPS64 = {op.name: op for op in (
    UnaryOp("zero", _nothing, reads_input=False),
    UnaryOp("identity", _nothing),
    UnaryOp("relu", _relu, register_constant=ZERO64),
    UnaryOp("square", _square),
    UnaryOp("reciprocal", _reciprocal, register_constant=ONE64),
    UnaryOp("increment", _increment, register_constant=ONE64),
    UnaryOp("decrement", _decrement, register_constant=ONE64),
    UnaryOp("sigmoid", _sigmoid64, temps=4, compute_bound=True,
            frame_constants=(ONE64, ZERO64, SIGN64, LOG2E64, ROUNDER64, NEG_LN2_HI64,
                             NEG_LN2_LO64, EXP_CUTOFF64) + EXP_POLYNOMIAL64),
)}

# Transposed kernels stream B (eltwise.TransposedSweep) when its rows can be aligned and it
# is large (TRANSPOSED_STREAM_ALWAYS_BYTES), or, from TRANSPOSED_STREAM_MIN_BYTES, when ld_b
# is a multiple of 512: then B's rows fight over a few cache sets, and streaming is faster
# even for cached sizes (docs/measurements.md, "Element-wise streaming")
TRANSPOSED_STREAM_ALWAYS_BYTES = 4 << 20
TRANSPOSED_STREAM_MIN_BYTES = 256 << 10
CONFLICTING_STRIDE_MASK = 2047
PLAIN_REGISTERS = ColumnRegisters(column_counter=R10, row_counter=RAX, row_index=R11, start=R8,
                                  groups=R9, singles=RBX, scratch=RAX)
TRANSPOSE_REGISTERS = TransposeRegisters(
    a=RDI, b=RSI, ld_a=RDX, ld_b=RCX, ld_a3=R8, ld_b3=R9, group_a=R10, group_b=R11,
    a_rows=RBX, b_rows=R12, row_counter=R13, panel_counter=R14, count=R15, scratch=RAX)


def _load_register_constant(asm: Assembler, vector: Vector, op: UnaryOp,
                            reg: int | None) -> None:
    if not op.reads_input:                       # zero: the register stored everywhere
        asm(vector.zero(reg))
    elif op.register_constant in (ZERO, ZERO64):
        asm(vector.zero(reg))
    elif op.register_constant is not None:
        asm(vector.set_constant(reg, op.register_constant))


def _plain(asm: Assembler, vector: Vector, op: UnaryOp, m: int,
           n: int) -> tuple[ColumnSweep, int | None]:
    """Column sweep: B[:, j] := op(A[:, j]) (for zero: B[:, j] := 0, A untouched).

    Registers what the frame needs; returns the sweep and the register that must hold the
    op's constant before it runs (None: no constant)."""
    streaming = (m >= vector.line_elements
                 and vector.precision.bytes * m * n >= COLUMN_STREAM_MIN_BYTES)
    spare = list(range(vector.registers))
    mask_count = ColumnSweep.mask_count(vector, streaming)
    masks = [1 + i if vector.masks else spare.pop() for i in range(mask_count)]
    free_masks = tuple(range(mask_count + 1, vector.masks + 1))
    constant = spare.pop() if op.register_constant is not None or not op.reads_input else None
    per_vector = 1 + op.temps
    streams = ((RDI, RDX), (RSI, RCX)) if op.reads_input else ((RSI, RCX),)

    def process(slots: list[Slot]) -> None:
        registers = [spare[i * per_vector:(i + 1) * per_vector] for i in range(len(slots))]
        if not op.reads_input:
            asm(slot.store(vector, slot.mems[0], constant) for slot in slots)
            return
        asm(vector.load(x[0], slot.mems[0], slot.tail) for x, slot in zip(registers, slots))
        for x in registers:
            op.emit(asm, vector, x[0], x[1:], constant, free_masks)
        asm(slot.store(vector, slot.mems[1], x[0]) for x, slot in zip(registers, slots))

    sweep = ColumnSweep(asm, vector, m, n, streams, min(MAX_UNROLL, len(spare) // per_vector),
                        process, gprs=PLAIN_REGISTERS, masks=masks, temp=spare[0],
                        streaming=streaming)
    return sweep, constant


def _stream_stride_mask(m: int, n: int, element_bytes: int = 4) -> int | None:
    """Which ld_b (in bytes) get the streaming path: those with no bit of the mask set."""
    size = element_bytes * m * n
    if n < 2 * STREAM_GROUP_COLUMNS or size < TRANSPOSED_STREAM_MIN_BYTES:
        return None
    return LINE_MASK if size >= TRANSPOSED_STREAM_ALWAYS_BYTES else CONFLICTING_STRIDE_MASK


def _transposed(asm: Assembler, vector: Vector, op: UnaryOp, m: int,
                n: int) -> tuple[TransposedSweep, int | None]:
    """B := op(A)^T through in-register transposes (see eltwise.TransposedSweep).

    Registers what the frame needs; returns the sweep and the register that must hold the
    op's constant before it runs (None: no constant)."""
    if not vector.masks:
        for rest in {m % vector.lanes, n % vector.lanes} - {0}:
            vector.frame.add_mask_vector(rest)
    spare = list(range(vector.registers))
    masks = (1, 2) if vector.masks else (spare.pop(), spare.pop())
    constant = spare.pop() if op.register_constant is not None else None

    def apply(registers: list[int], free: list[int]) -> None:   # k3 on are free
        for x in registers:
            op.emit(asm, vector, x, free[:op.temps], constant, (3, 4))

    sweep = TransposedSweep(asm, vector, m, n, apply, spare, row_mask=masks[0],
                            column_mask=masks[1], gprs=TRANSPOSE_REGISTERS,
                            stream_stride_mask=_stream_stride_mask(m, n,
                                                                   vector.precision.bytes))
    return sweep, constant


def emit_unary(asm: Assembler, target: Target, op: str, m: int, n: int,
               trans_b: bool, dtype: str = "float32") -> Label:
    """Emit the function unary(a, b, ld_a, ld_b) at the current position of `asm` and return
    its entry: B := op(A), A column-major m x n of `dtype`; B column-major, or row-major
    (B[j + r ld_b] = op(A[r + j ld_a])) if trans_b. Complex dtypes (zero, identity) run the
    real kernel of einjit.backends.complex_eltwise, or transpose128's copy."""
    if not is_complex(dtype):
        return _emit_real(asm, target, op, m, n, trans_b, dtype, 0)
    check_complex_op("unary", op, dtype)
    form = unary_form(op, m, n, trans_b, dtype)
    if form is None:
        return emit_transpose128(asm, target, m, n, _stream_stride_mask(m, n, 16))
    return _emit_real(asm, target, op, form.m, form.n, form.trans_b, form.dtype, form.ld_shift)


def _emit_real(asm: Assembler, target: Target, op: str, m: int, n: int, trans_b: bool,
               dtype: str, ld_shift: int) -> Label:
    """emit_unary on real elements; the leading dimensions count 2**ld_shift of them."""
    elements = precision(dtype)
    kernel = (UNARY_OPS if elements is FLOAT32 else UNARY_OPS64)[op]
    transposed = trans_b and kernel.reads_input
    if trans_b and not transposed:   # zero: B is simply an n x m column-major matrix
        m, n = n, m
    vector = Vector(target, 0 if transposed or kernel.compute_bound else MEMORY_BOUND_WIDTH,
                    elements)
    for const in kernel.frame_constants:
        vector.frame.add_constant(const)
    if transposed:
        sweep, constant = _transposed(asm, vector, kernel, m, n)
        gprs = (RAX, RBX, RCX, RDX, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15)
    else:
        sweep, constant = _plain(asm, vector, kernel, m, n)
        gprs = (RAX, RBX, RCX, RDX, RSI, RDI, R8, R9, R10, R11)
    entry = asm.entry(f"unary_{op}")
    asm.prologue(gprs + ((RBP,) if not vector.frame.empty else ()))
    vector.frame.enter(asm)
    shift = elements.shift + ld_shift                                       # ld in bytes
    asm(enc.shl_ri(RDX, shift), enc.shl_ri(RCX, shift))
    _load_register_constant(asm, vector, kernel, constant)
    sweep.emit()
    vector.frame.leave(asm)
    asm.epilogue()
    return entry


def generate_unary(target: Target, op: str, m: int, n: int, trans_b: bool,
                   dtype: str = "float32") -> bytes:
    """The code of emit_unary as a buffer of its own."""
    asm = Assembler()
    emit_unary(asm, target, op, m, n, trans_b, dtype)
    return asm.finish()
