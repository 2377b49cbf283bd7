"""An einsum compiler that generates its own machine code.

einjit plans an einsum as a tree of tensor operations and runs each one on kernels it
generates at run time (x86-64 AVX2/FMA or AVX-512, AArch64 NEON), called through ctypes.
float32 and float64 run on these kernels; other dtypes are computed by numpy.einsum.

einsum:       einsum, contract_expression, ContractExpression, EinsumTree,
              einsum_path, tensordot, transpose (numpy's signatures)
IR:           TensorOperation, Dim, optimize (the optimizer's passes: einjit.passes)
kernels:      brgemm, unary, binary, Kernel, UNARY_OPS, BINARY_OPS
targets:      Target, resolve_target, host_isa
errors:       EinjitError, the base of every error einjit raises, each also the builtin
              a caller would catch (ValueError, TypeError, RuntimeError): EncodingError,
              KernelParameterError, KernelParameterTypeError, OperandError,
              OperandValueError, IsaMismatchError, UnsupportedCpuError, EinsumSyntaxError,
              EinsumValueError, EinsumTypeError, EinsumPathError
warnings:     SettingWarning (a bad EINJIT_* setting: the default is used)
dask arrays:  einjit.dask (einsum, register, unregister), imported on its own: the dask extra
__version__:  the installed version

README.md shows each in use; docs/architecture.md describes the layers.
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
from .numpy_api import einsum_path, tensordot, transpose
from .ops import BINARY_OPS, UNARY_OPS
from .passes import optimize
from .primitives import binary, brgemm, unary
from .runtime.host import host_isa
from .settings import SettingWarning
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
    "einsum_path", "tensordot", "transpose",
    "EinsumSyntaxError", "EinsumValueError", "EinsumTypeError", "EinsumPathError",
    "SettingWarning", "__version__",
]
