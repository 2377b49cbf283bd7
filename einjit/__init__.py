"""einjit: an einsum compiler that generates its own machine code (AArch64 NEON, x86-64 AVX).

Public API so far: the JIT primitives and the objects they return.
"""

from .backends import Target, resolve_target
from .einsum import ContractExpression, contract_expression, einsum
from .errors import (
                     EinjitError,
                     EncodingError,
                     IsaMismatchError,
                     KernelParameterError,
                     KernelParameterTypeError,
                     OperandError,
                     OperandValueError,
                     UnsupportedCpuError,
)
from .frontend.errors import EinsumSyntaxError, EinsumTypeError, EinsumValueError
from .frontend.tree import EinsumTree
from .ir import Dim, TensorOperation
from .kernel import Kernel
from .numpy_api import einsum_path, tensordot, transpose
from .ops import BINARY_OPS, UNARY_OPS
from .passes import optimize
from .primitives import binary, brgemm, unary
from .runtime.host import host_isa

__all__ = [
    "brgemm", "unary", "binary", "Kernel", "Target", "resolve_target", "host_isa",
    "UNARY_OPS", "BINARY_OPS",
    "EinjitError", "EncodingError", "KernelParameterError", "KernelParameterTypeError",
    "OperandError", "OperandValueError",
    "IsaMismatchError", "UnsupportedCpuError",
    "TensorOperation", "Dim", "optimize",
    "einsum", "contract_expression", "ContractExpression", "EinsumTree",
    "einsum_path", "tensordot", "transpose",
    "EinsumSyntaxError", "EinsumValueError", "EinsumTypeError",
]
