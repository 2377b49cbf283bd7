"""TensorOperation -> CompiledOperation: the JIT'd loop nest, mapped and ready to run.

compile_operation plans the nest for the op's target (loop_nest.plan_nest), asks the op's
backend for its code (generate_loop_nest: the nest and its kernels in one buffer), puts it
behind the backend's entry guard (guard_entry: the caller's FP exception flags survive), maps
it executable (backends.place_code) and wraps the entry nest(in0, in1, out, begin, end) in
a ctypes function; place_array_call maps a plan's checked array call
(einjit.backends.array_call), which reads numpy's arrays itself. The flattened shared
iterations are split into one contiguous share per thread (runtime.threads.split_range),
whose task records for the native workers (codegen.workers.NestShares) are built with the
operation; run() hands all shares but its own to the workers in one native call. Where each
share holds several chunks of enough work (claim_chunks), the threads claim chunks instead,
their own share's first, so that a slowed thread takes fewer.
Operations too small to gain from threads run on the calling thread; a nest that copies A or
B into its frame (Pack) runs on the workers alone where the calling thread's stack is too
small for it. Compiled operations are cached per op (ops are immutable and hashable).
"""

from __future__ import annotations

import ctypes
import time
from functools import lru_cache
from typing import Any, Callable

from ..backends import backend, place_code, why_not_runnable
from ..backends.array_call import MAX_ARGUMENTS, ArrayCall
from ..backends.nest_plan import IN1, NestPlan
from ..disasm import disassemble
from ..errors import IsaMismatchError
from ..log import nest_generated
from ..ops import multiply_add_flops
from ..runtime.threads import check_threads, split_range, stack_suffices
from .loop_nest import plan_nest
from .workers import CALL_WORD, NestShares

CACHE_SIZE = 256                 # compiled operations kept (LRU)
# the work a share must hold to gain more than handing it to a worker costs: elements of an
# element-wise nest, flops of a GEMM nest (docs/measurements.md, "Work per thread")
MIN_WORK_PER_THREAD = 1 << 16
MIN_FLOPS_PER_THREAD = 1 << 19
# stack a nest that copies A needs beside the copy: its kernels' frames (under 64 KiB) and the
# frames the calling thread already holds
NEST_STACK_MARGIN_BYTES = 256 << 10
# chunks a thread's share is cut into where the threads claim a nest's iterations: a thread
# slowed to half speed then ends about a chunk after the others; each chunk holds at least
# this many times a share's least work, so that the nest's entry stays a small part of it
CLAIMS_PER_THREAD = 8
CLAIM_LEAST_SHARES = 4

_ENTRY = ctypes.CFUNCTYPE(None, *[CALL_WORD] * 5)
# an array call of each argument count: the operands' ids, then the result's
_ARRAY_CALLS = {count: ctypes.CFUNCTYPE(ctypes.c_int, *[CALL_WORD] * count)
                for count in range(2, MAX_ARGUMENTS + 1)}


def _least_work_per_thread(plan: NestPlan) -> int:
    """A share's least work (in _work_per_iteration's unit) for a thread of its own."""
    if plan.main is not None and plan.main.kind == "brgemm":
        return MIN_FLOPS_PER_THREAD
    return MIN_WORK_PER_THREAD


def _work_per_iteration(plan: NestPlan) -> int:
    """Real flops of a GEMM nest's iteration, elements of an element-wise one's."""
    if plan.main is None:
        return plan.first_touch.params[1] * plan.first_touch.params[2] if plan.first_touch else 1
    params = plan.main.params
    if plan.main.kind == "brgemm":
        m, n, k, batch = params[:4]
        return multiply_add_flops(plan.main.dtype) * m * n * k * batch
    return params[1] * params[2]


def worth_a_thread(plan: NestPlan) -> bool:
    """Whether the whole nest holds the work of one thread's share (_least_work_per_thread):
    enough to gain from running beside another on a thread of its own."""
    work = _work_per_iteration(plan) * plan.seq_iterations * plan.shared_iterations
    return work >= _least_work_per_thread(plan)


def thread_shares(plan: NestPlan, threads: int) -> list[tuple[int, int]]:
    """The [begin, end) shares of the nest's flattened shared iterations that `threads`
    threads run: as many threads as gain from their share (_least_work_per_thread), one
    contiguous share each."""
    work = _work_per_iteration(plan) * plan.seq_iterations
    total = plan.shared_iterations
    least = _least_work_per_thread(plan)
    worth = work * total // least if least > 0 else total
    return split_range(total, min(threads, max(1, worth)))


def claim_chunks(plan: NestPlan, shares: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """The chunks, each share cut into up to CLAIMS_PER_THREAD, that the threads claim one at
    a time (codegen.workers.NestShares), each of at least CLAIM_LEAST_SHARES shares' least
    work; None where each thread runs its share: one thread, fewer than two chunks a share,
    or a nest that copies B's panel and whose innermost shared loop leaves in1 where it is
    (a share's m blocks reading one panel: each chunk would copy it again; a shared loop
    that moves in1, a batch's, copies a panel per iteration anyway)."""
    if len(shares) < 2 or plan.pack_b is not None and plan.shared[-1].strides[IN1] == 0:
        return None
    size = min(end - begin for begin, end in shares)
    count = min(size, CLAIMS_PER_THREAD)
    least = CLAIM_LEAST_SHARES * _least_work_per_thread(plan)
    if least:
        count = min(count, _work_per_iteration(plan) * plan.seq_iterations * size // least)
    if count < 2:
        return None
    return [(begin + offset, begin + end) for begin, stop in shares
            for offset, end in split_range(stop - begin, count)]


class CompiledOperation:
    """A TensorOperation's machine code and how to run it on the operands' addresses."""

    def __init__(self, op):
        self.target = op.target
        started = time.perf_counter()
        self.plan = plan_nest(op, self.target)
        module = backend(self.target.isa)
        self.code = module.generate_loop_nest(self.target, self.plan)
        nest_generated(op, len(self.code), time.perf_counter() - started)
        self.threads = check_threads(op.num_threads)
        self._shares = thread_shares(self.plan, self.threads)
        self.worth_a_thread = worth_a_thread(self.plan)
        total = self.plan.shared_iterations
        # stack the calling thread needs to run a share; 0: the frame is small, no check
        packed = self.plan.pack_bytes
        self.stack_bytes = packed + NEST_STACK_MARGIN_BYTES if packed else 0
        self._not_runnable = why_not_runnable(self.target)
        self._block = None
        self._entry = None
        self.function = None
        self._nest_shares: NestShares | None = None
        # runnable here on any calling thread alone: nest(in0, in1, out, 0, single)
        self.single = None
        if self._not_runnable is None:
            # the nest behind the entry guard (the caller's FP exception flags survive a run);
            # shares pages with other placed code
            self._block = place_code(self.target, module.guard_entry(self.target, self.code))
            self._entry = self._block.address
            self.function = _ENTRY(self._entry)
            self._nest_shares = NestShares(self.target, self._entry, self.function,
                                           self._shares, claim_chunks(self.plan, self._shares))
            self.single = total if len(self._shares) == 1 and not self.stack_bytes else None

    @property
    def shares(self) -> tuple[tuple[int, int], ...]:
        """The [begin, end) shares of the nest's shared iterations, one per thread."""
        return tuple(self._shares)

    @property
    def address(self) -> int | None:
        """The entry: the guard, which calls `code` (the nest as generated) behind it."""
        return self._entry

    def run(self, in0: int, in1: int, out: int) -> None:
        """Execute on validated operand addresses (no checks here: TensorOperation.execute
        validates)."""
        single = self.single
        if single is not None:
            self.function(in0, in1, out, 0, single)
            return
        if self.function is None:
            raise IsaMismatchError(f"this operation was compiled for {self.target} and cannot "
                                   f"run here: {self._not_runnable}")
        on_caller = not self.stack_bytes or stack_suffices(self.stack_bytes)
        if on_caller and len(self._shares) == 1:
            self.function(in0, in1, out, *self._shares[0])
            return
        self._nest_shares.run(in0, in1, out, on_caller)

    def disassemble(self) -> str:
        return disassemble(self.code, self.target.isa)


@lru_cache(maxsize=CACHE_SIZE)
def compile_operation(op) -> CompiledOperation:
    """The CompiledOperation of a validated TensorOperation (cached)."""
    return CompiledOperation(op)


def place_array_call(call: ArrayCall, target, keep: Any) -> Callable[..., int]:
    """An ArrayCall (einjit.backends.array_call) mapped to run: f(id(a), ..., id(out)) -> 0
    (it ran) or 1 (an argument differs, nothing ran). `keep`: what its code calls (the
    compiled nests, vectors of ones), alive as long as it is."""
    code, entry = backend(target.isa).array_call(target, call)
    block = place_code(target, code)
    function = _ARRAY_CALLS[len(call.arguments) + 1](block.address + entry)
    function.keep = (block, keep)
    return function
