"""AArch64 NEON binary primitive: C := A op B element-wise, FP32 or FP64, all column-major M x N.

Kernel ABI: binary(a, b, c, ld_a, ld_b, ld_c) in x0..x5, leading dimensions in elements.
Each op is one vector instruction, bit-exact with numpy: fadd, fsub, fmul, fdiv, and
fmin/fmax, which propagate NaN like np.minimum/np.maximum (fminnm/fmaxnm would not).
The matrices are streamed column by column by eltwise.ColumnSweep.
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
    check_dtype,
    check_op,
    check_sizes,
    check_target,
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


def emit_binary(asm: Assembler, target: Target, op: str, m: int, n: int,
                dtype: str = "float32") -> Label:
    """Emit the function C := A op B for M x N column-major operands of `dtype` (see the
    module docstring) at the current position of `asm`; returns the Label of its entry."""
    check_target(target)
    check_op("binary", op, OPS)
    check_sizes(m=m, n=n)
    element = check_dtype(dtype)
    sweep = ColumnSweep(OPS_BY_DTYPE[dtype][op], m, n, [Stream(A, LD_A), Stream(B, LD_B)],
                        Stream(C, LD_C), counters=(6, 7), scratch_gpr=8, element=element)
    suffix = "" if element is FLOAT32 else f"_{dtype}"
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
