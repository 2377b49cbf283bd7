"""Contraction order: the one module that imports opt_einsum.

`contraction_path` turns `optimize=` (numpy's and opt_einsum's spellings) into a list of steps,
each a tuple of positions in the current operand list (opt_einsum's convention: the operands of
a step are removed and their result appended at the end)."""

from __future__ import annotations

from typing import Any, Sequence

import opt_einsum

from einjit.frontend.errors import EinsumPathError, EinsumPathNameError, EinsumTypeError

#: names accepted by optimize= besides True/False and explicit paths
PATH_NAMES = tuple(sorted(set(opt_einsum.paths._PATH_OPTIONS) | {"auto", "auto-hq"}))

#: up to this many operands, True and "auto" also run opt_einsum's dynamic programming search
#: (a few ms at 12) and keep the cheaper of its path and the greedy one: on the tensor train
#: af,fbg,gch,hdi,ie greedy costs 5.5x the flops of the best order.
EXHAUSTIVE_OPERANDS = 12


def _symbols(dims: Sequence[int]) -> str:
    return "".join(opt_einsum.get_symbol(d) for d in dims)


def _explicit(path: Sequence[Any], count: int) -> list[tuple[int, ...]]:
    steps = list(path)
    if steps and steps[0] == "einsum_path":     # numpy's np.einsum_path()[0] form
        steps = steps[1:]
    result = []
    remaining = count
    for step in steps:
        if isinstance(step, (str, bytes)) or not hasattr(step, "__iter__"):
            raise EinsumTypeError(f"each step of an explicit path must be a tuple of operand "
                                  f"positions, got {step!r}")
        positions = tuple(step)
        for p in positions:
            if isinstance(p, bool) or not hasattr(p, "__index__"):
                raise EinsumTypeError(f"path step {positions!r}: positions must be integers")
        positions = tuple(p.__index__() for p in positions)
        if not positions or len(set(positions)) != len(positions) or \
                not all(0 <= p < remaining for p in positions):
            raise EinsumPathError(
                f"path step {positions!r} must name distinct positions in [0, {remaining})")
        result.append(positions)
        remaining -= len(positions) - 1
    if remaining != 1:
        raise EinsumPathError(f"the explicit path {list(path)!r} leaves {remaining} operands, "
                               f"expected it to contract all {count} into one")
    return result


def contraction_path(inputs: Sequence[Sequence[int]], output: Sequence[int],
                     sizes: Sequence[int], optimize: Any) -> list[tuple[int, ...]]:
    """Steps contracting `inputs` (dim ids per operand) down to one operand.

    optimize: False or None (operand order, left to right); True or "auto" (einjit's choice: the
    cheaper in flops of opt_einsum's "auto" and, up to EXHAUSTIVE_OPERANDS operands, its "dp");
    another opt_einsum path name ("greedy", "optimal", "dp", "branch-2", ...), taken as
    given, optionally with numpy's memory limit (("greedy", 10**6): intermediates of at most that
many elements); or an explicit path (list of tuples, optionally numpy's ["einsum_path", ...]
form).
    The order changes only rounding, never the result's shape or dtype."""
    count = len(inputs)
    if optimize is False or optimize is None:
        return [(0, 1)] + [(0, count - 1 - i) for i in range(1, count - 1)] if count > 1 else []
    if optimize is True:
        optimize = "auto"
    memory_limit = None
    if _is_limited(optimize):
        optimize, memory_limit = optimize[0], int(optimize[1])
    if isinstance(optimize, str):
        if optimize not in PATH_NAMES:
            raise EinsumPathNameError(f"optimize={optimize!r} is not a path name; expected True, "
                                      f"False, an explicit path or one of "
                                      f"{', '.join(PATH_NAMES)}")
        if count <= 1:
            return [(0,)] if count == 1 else []
        if memory_limit is not None and memory_limit < 1:
            return [tuple(range(count))]     # no intermediate fits: one step, as numpy
        equation = ",".join(_symbols(t) for t in inputs) + "->" + _symbols(output)
        shapes = [tuple(sizes[d] for d in t) for t in inputs]
        candidates = ["auto", "dp"] if optimize == "auto" and count <= EXHAUSTIVE_OPERANDS \
            else [optimize]
        paths = [opt_einsum.contract_path(equation, *shapes, shapes=True, optimize=name,
                                          memory_limit=memory_limit)
                 for name in candidates]
        path, _ = min(paths, key=lambda p: p[1].opt_cost)
        return [tuple(step) for step in path]
    if isinstance(optimize, (list, tuple)):
        return _explicit(optimize, count)
    raise EinsumTypeError(f"optimize must be a bool, a path name or an explicit path, "
                          f"got {optimize!r}")


def _is_limited(optimize: Any) -> bool:
    """numpy's (path name, memory limit in elements) form of optimize=."""
    return isinstance(optimize, (list, tuple)) and len(optimize) == 2 \
        and isinstance(optimize[0], str) and optimize[0] != "einsum_path" \
        and isinstance(optimize[1], (int, float)) and not isinstance(optimize[1], bool)
