"""AArch64 NEON binary primitive: C := A op B element-wise, FP32 or FP64, all column-major M x N.

Kernel ABI: binary(a, b, c, ld_a, ld_b, ld_c) in x0..x5, leading dimensions in elements.
Each op is one vector instruction, bit-exact with numpy: fadd, fsub, fmul, fdiv, and
fmin/fmax, which propagate NaN like np.minimum/np.maximum (fminnm/fmaxnm would not).
The matrices are streamed column by column by eltwise.ColumnSweep.

complex64 and complex128 run on the real rows of einjit.backends.complex_eltwise: add and sub
are the real ops; mul computes numpy's array product on each pair of lanes, re = fma(ar, br,
-(ai bi)) and im = fma(ar, bi, ai br), the product of the second term rounded: the second
terms as (ai, ai) times b's parts swapped with the real one negated (fneg on the pair, ext,
trn2), then fmla adds (ar, ar) times b, fused. The formula and so the bits of numpy's own SIMD
loop. FMUL and FMLA run on every AArch64 core; FCMLA (Armv8.3) computes the same terms, rot 90
then rot 0, but from an accumulator of +0 it turns a product of -0 into +0.
"""

from __future__ import annotations

from collections.abc import Sequence

from einjit.backends import Target
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler, Label
from einjit.backends.aarch64.eltwise import ColumnSweep, Stream, VectorOp
from einjit.backends.aarch64.target import (
    ELEMENTS,
    FLOAT32,
    Element,
    check_dtype,
    check_op,
    check_sizes,
    check_target,
)
from einjit.backends.complex_eltwise import (
    PART_DTYPES,
    binary_form,
    check_complex_op,
    is_complex,
)

A, B, C, LD_A, LD_B, LD_C = 0, 1, 2, 3, 4, 5

_INSTRUCTIONS = {"add": enc.fadd, "sub": enc.fsub, "mul": enc.fmul, "div": enc.fdiv,
                 "min": enc.fmin, "max": enc.fmax}


def _vector_op(name: str, arr: str) -> VectorOp:
    instruction = _INSTRUCTIONS[name]

    def compute(inputs: Sequence[int], temps: Sequence[int],
                consts: Sequence[int]) -> tuple[list[int], int]:
        a, b = inputs
        return [instruction(a, a, b, arr)], a

    return VectorOp(name, 2, 0, 0, lambda regs, scratch: [], compute)


# dtype -> op name -> VectorOp; OPS are the FP32 ones (every dtype has the same names)
OPS_BY_DTYPE = {dtype: {name: _vector_op(name, element.arr) for name in _INSTRUCTIONS}
                for dtype, element in ELEMENTS.items()}
OPS = OPS_BY_DTYPE[FLOAT32.dtype]


def _complex_product(element: Element) -> VectorOp:
    """a := a b on the interleaved pairs of a vector of `element` (see the module doc)."""
    arr = element.arr

    def compute(inputs: Sequence[int], temps: Sequence[int],
                consts: Sequence[int]) -> tuple[list[int], int]:
        a, b = inputs
        u, s = temps
        if element is FLOAT32:
            swap_conjugate = [enc.ext(u, b, b, 12, "16b"),        # u[2i + 1] = b[2i] = br
                              enc.fneg(s, b, "2d"),               # (br, -bi): the odd sign
                              enc.trn2(s, s, u, arr)]             # (-bi, br)
        else:
            swap_conjugate = [enc.fneg(s, b, arr),                # (-br, -bi)
                              enc.ext(s, s, b, 8, "16b")]         # (-bi, br)
        return swap_conjugate + [
            enc.trn1(u, a, a, arr),                               # (ar, ar)
            enc.trn2(a, a, a, arr),                               # (ai, ai)
            enc.fmul(a, a, s, arr),                               # (-ai bi, ai br), rounded
            enc.fmla(a, u, b, arr),                               # + (ar br, ar bi), fused
        ], a

    return VectorOp("mul", 2, 2, 0, lambda regs, scratch: [], compute)


# complex64/complex128 -> op name -> VectorOp on the real rows of
# einjit.backends.complex_eltwise (add and sub are the real ops)
COMPLEX_OPS_BY_DTYPE = {dtype: {"add": OPS_BY_DTYPE[part]["add"],
                                "sub": OPS_BY_DTYPE[part]["sub"],
                                "mul": _complex_product(ELEMENTS[part])}
                        for dtype, part in PART_DTYPES.items()}


def emit_binary(asm: Assembler, target: Target, op: str, m: int, n: int,
                dtype: str = "float32") -> Label:
    """Emit the function C := A op B for M x N column-major operands of `dtype` (see the
    module docstring) at the current position of `asm`; returns the Label of its entry."""
    check_target(target)
    check_op("binary", op, OPS)
    check_sizes(m=m, n=n)
    suffix, ops, ld_shift = "" if dtype == FLOAT32.dtype else f"_{dtype}", None, 0
    if is_complex(dtype):
        check_complex_op("binary", op, dtype)
        ops = COMPLEX_OPS_BY_DTYPE[dtype]
        form = binary_form(m, n, dtype)
        m, n, dtype, ld_shift = form.m, form.n, form.dtype, form.ld_shift
    element = check_dtype(dtype)
    vector_op = (ops or OPS_BY_DTYPE[dtype])[op]
    sweep = ColumnSweep(vector_op, m, n, [Stream(A, LD_A), Stream(B, LD_B)],
                        Stream(C, LD_C), counters=(6, 7), scratch_gpr=8, element=element,
                        ld_shift=ld_shift)
    entry = asm.label(f"binary_{op}_{m}x{n}{suffix}")
    asm.bind(entry)
    asm.prologue(sweep.general_registers, sweep.vector_registers)
    sweep.emit(asm)
    asm.epilogue()
    return entry


def generate_binary(target: Target, op: str, m: int, n: int, dtype: str = "float32") -> bytes:
    """Machine code of the binary kernel alone (emit_binary into a new Assembler)."""
    asm = Assembler()
    emit_binary(asm, target, op, m, n, dtype)
    return asm.finish()
