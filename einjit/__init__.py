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
from .frontend.errors import EinsumPathError, EinsumSyntaxError, EinsumTypeError, EinsumValueError
from .frontend.tree import EinsumTree
from .ir import Dim, TensorOperation
from .kernel import Kernel
from .ops import BINARY_OPS, UNARY_OPS
from .passes import optimize
from .primitives import binary, brgemm, unary
from .runtime.host import host_isa
from .runtime.settings import SettingWarning
from .version import einjit_version

__version__ = einjit_version()

__all__ = [
    "brgemm", "unary", "binary", "Kernel", "Target", "resolve_target", "host_isa",
    "UNARY_OPS", "BINARY_OPS",
    "EinjitError", "EncodingError", "KernelParameterError", "KernelParameterTypeError",
    "OperandError", "OperandValueError",
    "IsaMismatchError", "UnsupportedCpuError",
    "TensorOperation", "Dim", "optimize",
    "einsum", "contract_expression", "ContractExpression", "EinsumTree",
    "EinsumSyntaxError", "EinsumValueError", "EinsumTypeError", "EinsumPathError",
    "SettingWarning", "__version__",
]
