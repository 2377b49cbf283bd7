"""A plan's parallel profile for any thread count: plan arithmetic, no timing, so that a small
machine shows what 16, 48 or 72 threads would do with a plan.

The plan is made again for the count (Plan.for_threads: cache blocks, shared loops and sums in
chunks all follow it), and each step's nest is planned as it would run: its shared iterations
(the tasks) split into one contiguous share per thread that gains from one
(codegen.thread_shares, the rule the compiled code runs by). The steps run one after another,
but for independent small steps that run at once, as a group (frontend.concurrency, the rule
the compiled plan runs by), so the plan's predicted efficiency is

    (total work / T) / (sum over the groups of their busiest thread's work)

1 when every step keeps all T threads equally busy. Work is flops for a contraction step
(a multiply-add counts 2) and one per element iterated for any other step (a copy, a sum);
every task of a step does the same work (split cuts a dim into equal blocks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from einjit.codegen import plan_nest, thread_shares, worth_a_thread
from einjit.frontend.concurrency import concurrent_groups
from einjit.frontend.errors import EinsumValueError
from einjit.frontend.plan import Plan
from einjit.ir import TensorOperation


@dataclass(frozen=True)
class StepProfile:
    """One step of a plan on `num_threads` threads."""
    step: int
    node: str            # the node's dims, e.g. "[a,b,d]", and which part of its sum if any
    kind: str            # the step's operation kind: contraction, unary, ...
    work: int            # flops of a contraction step, elements iterated otherwise
    flops: int           # the tree's flops this step computes (0 for copies and sums)
    tasks: int           # the nest's shared iterations, each the same work
    threads: int         # threads that get a share
    busiest: int         # the work of the thread with the largest share
    bytes: int           # bytes the operands span (inputs and output)
    num_threads: int
    # the step's operation as planned for num_threads, and each thread's [begin, end) of the
    # tasks (left out of the repr: the numbers above say what a reader looks for)
    op: TensorOperation = field(repr=False)
    shares: tuple[tuple[int, int], ...] = field(repr=False)

    @property
    def balance(self) -> float:
        """The busiest thread's work over the mean of the threads that work (1: even)."""
        return self.busiest * self.threads / self.work

    @property
    def efficiency(self) -> float:
        """The step's work spread over all threads, over the busiest thread's."""
        return self.work / self.num_threads / self.busiest


@dataclass(frozen=True)
class ParallelProfile:
    """A plan's steps on `num_threads` threads and its predicted efficiency."""
    title: str
    num_threads: int
    steps: tuple[StepProfile, ...]
    # the steps' numbers as groups that run at once, in order (one step: alone)
    groups: tuple[tuple[int, ...], ...] = ()

    @property
    def _groups(self) -> tuple[tuple[int, ...], ...]:
        return self.groups or tuple((step.step,) for step in self.steps)

    @property
    def work(self) -> int:
        return sum(step.work for step in self.steps)

    @property
    def flops(self) -> int:
        """The tree's flops (sums of partial sums and copies excluded)."""
        return sum(step.flops for step in self.steps)

    @property
    def efficiency(self) -> float:
        """(total work / T) / (sum over the groups of their busiest thread's work)."""
        busiest = {step.step: step.busiest for step in self.steps}
        return self.work / self.num_threads / sum(
            max(busiest[number] for number in group) for group in self._groups)

    @property
    def together(self) -> str:
        """The groups of more than one step, as text ("" where every step runs alone)."""
        return ", ".join("steps " + " + ".join(map(str, group)) for group in self._groups
                         if len(group) > 1)

    def __str__(self) -> str:
        from einjit.display import bytes_text, flops_text
        header = (f"{'step':>4}  {'node':<30} {'kind':<11} {'work':>12} {'tasks':>7} "
                  f"{'threads':>7} {'busiest/mean':>12} {'efficiency':>10} {'bytes':>10}")
        lines = [f"parallel profile of {self.title} on {self.num_threads} threads: predicted "
                 f"efficiency {100 * self.efficiency:.1f}%", header]
        for step in self.steps:
            work = flops_text(step.work) if step.kind == "contraction" else \
                f"{step.work} elem"
            lines.append(f"{step.step:>4}  {step.node:<30} {step.kind:<11} {work:>12} "
                         f"{step.tasks:>7} {step.threads:>7} {step.balance:>12.2f} "
                         f"{100 * step.efficiency:>9.1f}% {bytes_text(step.bytes):>10}")
        if self.together:
            lines.append(f"run at once: {self.together}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from einjit.display import profile_html
        return profile_html(self)


def profile_plan(plan: Plan, num_threads: int, title: str = "the plan") -> ParallelProfile:
    """The parallel profile of `plan`'s tree planned for `num_threads` threads."""
    if (not isinstance(num_threads, (int, np.integer)) or isinstance(num_threads, bool)
            or not 1 <= num_threads <= 1024):
        raise EinsumValueError(f"num_threads={num_threads!r}: expected an integer 1..1024")
    num_threads = int(num_threads)
    planned = plan.for_threads(num_threads)
    undefined = [n for n, step in enumerate(planned.steps) if not step.lowered.op.is_defined]
    if undefined:
        raise EinsumValueError(f"steps {undefined} of this plan are not optimized (no "
                               f"optimizer): their threads are not decided")
    names = plan.tree.letters
    steps = []
    counts, eligible = [], []
    for number, step in enumerate(planned.steps):
        op = step.lowered.op
        work = prod(dim.size for dim in op.dims) * (2 if op.kind == "contraction" else 1)
        nest = plan_nest(op, op.target)
        shares = thread_shares(nest, num_threads)
        counts.append(len(shares))
        # a nest with copies runs alone (the stack they need)
        eligible.append(worth_a_thread(nest) and not nest.pack_bytes)
        tasks = nest.shared_iterations
        largest = max(end - begin for begin, end in shares)
        spanned = sum(op.extent(name) for name in op.operands)
        dims = ",".join(names[d] if names is not None and d < len(names) else str(d)
                        for d in step.node.dims)
        label = f"[{dims}]" + (f" ({step.part})" if step.part else "")
        # a product of two of the tree's tensors, not a sum against a vector of ones
        flops = work if len(step.node.children) == 2 and op.kind == "contraction" and \
            not any(source[:1] == ("ones",) for source in step.sources) else 0
        steps.append(StepProfile(number, label, op.kind, work, flops, tasks, len(shares),
                                 work * largest // tasks, spanned * plan.itemsize,
                                 num_threads, op, tuple(shares)))
    groups = concurrent_groups(planned.steps, counts, num_threads, eligible)
    return ParallelProfile(title, num_threads, tuple(steps), groups)

