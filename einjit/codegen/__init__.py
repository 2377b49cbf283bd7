"""From a TensorOperation to running machine code: the ISA-neutral nest plan (loop_nest)
and its compilation through the op's backend (compile)."""

from .compile import CompiledOperation, compile_operation
from .loop_nest import KernelCall, LoopDim, NestPlan, plan_nest

__all__ = ["CompiledOperation", "compile_operation", "KernelCall", "LoopDim", "NestPlan",
           "plan_nest"]
