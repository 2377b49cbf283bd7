"""The TensorOperation IR: dims, operations, validation, printing and a
numpy reference executor.

A TensorOperation is a loop nest over `Dim`s (type c/m/n/k, exec type shared/seq/prim/
undefined, size, element strides in in0, in1, out) around up to three primitive kernels:
first touch, main (gemm, brgemm, a unary or binary op, or none), last touch. Read
tensor_operation.py for the semantics, verify.py for the rules that map prim dims onto the
kernels, reference.py for the oracle, and einjit.passes for the optimizer.
"""

from einjit.errors import OperationError, OperationTypeError
from einjit.ir.dims import DIM_TYPES, EXEC_TYPES, Dim
from einjit.ir.tensor_operation import PRIM_MAINS, PRIM_TOUCHES, TensorOperation
from einjit.ir.verify import KernelCall

__all__ = ["Dim", "TensorOperation", "KernelCall", "DIM_TYPES", "EXEC_TYPES", "PRIM_MAINS",
           "PRIM_TOUCHES", "OperationError", "OperationTypeError"]
