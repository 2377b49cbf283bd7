"""AArch64 NEON binary primitive: C := A op B element-wise, FP32, all column-major M x N.

Kernel ABI: binary(a, b, c, ld_a, ld_b, ld_c) in x0..x5, leading dimensions in elements.
Each op is one vector instruction, bit-exact with numpy: fadd, fsub, fmul, fdiv, and
fmin/fmax, which propagate NaN like np.minimum/np.maximum (fminnm/fmaxnm would not).
The matrices are streamed column by column by eltwise.ColumnKernel.
"""

from . import encode as enc
from .asm import Assembler
from .eltwise import ARR, ColumnKernel, Stream, VectorOp

A, B, C, LD_A, LD_B, LD_C = 0, 1, 2, 3, 4, 5

_INSTRUCTIONS = {"add": enc.fadd, "sub": enc.fsub, "mul": enc.fmul, "div": enc.fdiv,
                 "min": enc.fmin, "max": enc.fmax}


def _vector_op(name):
    instruction = _INSTRUCTIONS[name]

    def compute(inputs, temps, consts):
        a, b = inputs
        return [instruction(a, a, b, ARR)], a

    return VectorOp(name, 2, 0, 0, lambda regs, scratch: [], compute)


OPS = {name: _vector_op(name) for name in _INSTRUCTIONS}


def generate_binary(op, m, n):
    """Machine code of C := A op B for M x N column-major operands (see the module docstring)."""
    kernel = ColumnKernel(OPS[op], m, n, [Stream(A, LD_A), Stream(B, LD_B)], Stream(C, LD_C),
                          counters=(6, 7), scratch_gpr=8)
    asm = Assembler()
    asm.prologue(kernel.general_registers, kernel.vector_registers)
    kernel.emit(asm)
    asm.epilogue()
    return asm.finish()
