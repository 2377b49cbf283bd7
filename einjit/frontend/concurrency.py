"""Steps of a plan that run at once: independent steps that each leave threads idle.

A step runs its nest in shares, one per thread that gains from one (codegen.thread_shares);
a small step has fewer shares than threads, and alone it leaves the others idle. Steps that
follow one another in the plan, none reading or writing what another of them writes, and
whose shares together fit the threads, run as one group: their shares go out in one hand-over
(codegen.workers.NativePool.run) and the group ends when all have. The compiled plan runs by
this rule and the parallel profile predicts by it.
"""

from __future__ import annotations

from typing import Sequence


def _depends(later, earlier) -> bool:
    """Whether `later` reads what `earlier` writes, or writes the same tensor (parts of one
    node's sum, a buffer's rows): the tensor earlier writes is among later's sources."""
    return earlier.sources[2] in later.sources


def concurrent_groups(steps: Sequence, shares: Sequence[int], threads: int,
                      eligible: Sequence[bool]) -> tuple[tuple[int, ...], ...]:
    """The plan's steps (Step records, in their order) as groups of consecutive indices that
    run at once: a step joins the group before it when it is eligible (as are the group's),
    depends on none of it, and the group's shares with its own stay within `threads`."""
    groups: list[tuple[int, ...]] = []
    current: list[int] = []
    used = 0
    for index, step in enumerate(steps):
        joins = (current and eligible[index] and eligible[current[0]]
                 and used + shares[index] <= threads
                 and not any(_depends(step, steps[other]) for other in current))
        if joins:
            current.append(index)
            used += shares[index]
            continue
        if current:
            groups.append(tuple(current))
        current, used = [index], shares[index]
    if current:
        groups.append(tuple(current))
    return tuple(groups)
