"""einjit: an einsum compiler that generates its own machine code (AArch64 NEON, x86-64 AVX).

Public API so far: the JIT primitives and the objects they return.
"""

from .errors import (EinjitError, EncodingError, IsaMismatchError, KernelParameterError,
                     OperandError, UnsupportedCpuError)
from .kernel import Kernel
from .primitives import BINARY_OPS, UNARY_OPS, binary, brgemm, unary
from .runtime.host import host_isa

__all__ = [
    "brgemm", "unary", "binary", "Kernel", "host_isa", "UNARY_OPS", "BINARY_OPS",
    "EinjitError", "EncodingError", "KernelParameterError", "OperandError",
    "IsaMismatchError", "UnsupportedCpuError",
]
