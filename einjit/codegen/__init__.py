"""From a TensorOperation to running machine code: the ISA-neutral nest plan (loop_nest; its
records are einjit.backends.nest_plan's) and its compilation through the op's backend
(compile)."""

from .compile import CompiledOperation, compile_operation, thread_shares, worth_a_thread
from .loop_nest import plan_nest

__all__ = ["CompiledOperation", "compile_operation", "plan_nest", "thread_shares",
           "worth_a_thread"]
