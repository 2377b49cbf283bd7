"""numpy functions beside einsum, with numpy's signatures, computed by einjit: einsum_path,
tensordot and transpose.

With einsum, tensordot and transpose at the package's top level, `einjit` is a backend for
libraries that dispatch by module name: opt_einsum's `contract(..., backend="einjit")`, and
through autoray (`autoray.do("tensordot", x, y, like="einjit")`) cotengra and quimb.

Operands einjit's kernels do not compute (other dtypes than einsum computes, zero-size) get
numpy's own functions, so results and errors are numpy's."""

from __future__ import annotations

import math
import string
from typing import Any, Sequence

import numpy as np

from einjit.einsum import _NATIVE, einsum
from einjit.frontend.errors import EinsumValueError
from einjit.frontend.parser import check_subscripts, from_sublists
from einjit.frontend.paths import contraction_path
from einjit.frontend.subscripts import resolve
from einjit.frontend.tree import EinsumTree, summed_leaves

_COMPUTED = _NATIVE      # the dtypes the kernels compute on this host (complex included)
_LETTERS = string.ascii_letters


def _computed_by_einjit(arrays: Sequence[np.ndarray]) -> bool:
    return all(a.dtype in _COMPUTED and a.size > 0 for a in arrays)


def _subscripts_and_operands(operands: Sequence[Any]) -> tuple[str, list[np.ndarray]]:
    """numpy's two call forms: a subscripts string then the operands, or interleaved
    operands and sublists."""
    if len(operands) == 0 or (not isinstance(operands[0], str) and len(operands) < 2):
        raise EinsumValueError("must provide at least an operand and a subscripts list")
    if isinstance(operands[0], str):
        subscripts, raw = operands[0], operands[1:]
    else:
        subscripts, raw = from_sublists(operands)
    return subscripts, [np.asarray(a) for a in raw]


def _flop_count(labels: set[str], inner: bool, terms: int, sizes: dict[str, int]) -> int:
    """numpy's count for one einsum over `labels`: one flop a term beyond the first, one
    for the sum where some label is summed."""
    return math.prod(sizes[c] for c in labels) * max(terms - 1 + int(inner), 1)


def _report(terms: list[str], output: str, sizes: dict[str, int],
            path: list[tuple[int, ...]], flops: int) -> str:
    """numpy.einsum_path's printed report for `path`, with einjit's flop count."""
    labels = set("".join(terms))
    inner = sum(len(set(t)) for t in terms) - len(labels) > 0
    naive = _flop_count(labels, inner, len(terms), sizes)
    current, sets = list(terms), [set(t) for t in terms]
    rows, largest = [], 0
    for number, step in enumerate(path):
        positions = sorted(step, reverse=True)
        chosen = [current.pop(p) for p in positions]
        union = set().union(*(sets.pop(p) for p in positions))
        kept = union & set(output).union(*sets)
        if number == len(path) - 1:
            result = output
        else:     # numpy's naming of an intermediate: its labels by size, then letter
            result = "".join(sorted(kept, key=lambda c: (sizes[c], c)))
        current.append(result)
        sets.append(kept)
        largest = max(largest, math.prod(sizes[c] for c in kept))
        rows.append((len(union), ",".join(chosen) + "->" + result,
                     ",".join(current) + "->" + output))
    lines = [f"  Complete contraction:  {','.join(terms)}->{output}",
             f"         Naive scaling:  {len(labels)}",
             "     Optimized scaling:  %d" % max((r[0] for r in rows), default=0),
             f"      Naive FLOP count:  {naive:.3e}",
             f"  Optimized FLOP count:  {flops:.3e}",
             f"   Theoretical speedup:  {naive / max(flops, 1):3.3f}",
             f"  Largest intermediate:  {largest:.3e} elements",
             "-" * 74,
             "%6s %24s %40s" % ("scaling", "current", "remaining"),
             "-" * 74]
    return "\n".join(lines + ["%4d    %24s %40s" % row for row in rows])


def einsum_path(*operands: Any, optimize: Any = "greedy",
                einsum_call: bool = False) -> tuple[list, Any]:
    """numpy.einsum_path's signature and output: (['einsum_path', step, ...], report), the
    order einjit.einsum contracts in with this `optimize` (a path name, True, False or an
    explicit path, as einjit.einsum takes them) and the flops of einjit's plan (a multiply-add
    counts 2; the naive count is numpy's). The path is valid for numpy.einsum(optimize=path)
    and einjit.einsum(optimize=path). Operands einjit hands to numpy (other dtypes, zero-size)
    get numpy.einsum_path's answer; einsum_call=True returns numpy's internal contraction
    list for einjit's path."""
    subscripts, arrays = _subscripts_and_operands(operands)
    if not _computed_by_einjit(arrays):
        return np.einsum_path(*operands, optimize=optimize, einsum_call=einsum_call)
    resolved = resolve(check_subscripts(subscripts), [a.shape for a in arrays])
    leaves = summed_leaves(resolved.inputs, resolved.output)
    path = contraction_path([n.dims for n in leaves], resolved.output, resolved.sizes, optimize)
    if not path:            # one operand: einjit still runs one step on it
        path = [(0,)]
    path = [tuple(int(p) for p in step) for step in path]
    if einsum_call:
        return np.einsum_path(*operands, optimize=["einsum_path", *path], einsum_call=True)
    # one letter a dim: ellipsis dims get letters the subscripts do not use
    spare = iter(c for c in _LETTERS if c not in resolved.letters)
    chars = [name if len(name) == 1 else next(spare) for name in resolved.letters]
    terms = ["".join(chars[d] for d in axes) for axes in resolved.axes]
    output = "".join(chars[d] for d in resolved.full_output)
    sizes = {chars[d]: size for d, size in enumerate(resolved.sizes)}
    tree = EinsumTree.from_dims(resolved.inputs, resolved.output, resolved.sizes, path)
    return ["einsum_path", *path], _report(terms, output, sizes, path, tree.flops())


def _axis_list(axes: Any) -> list[Any]:
    try:
        return list(axes)
    except TypeError:
        return [axes]


def _tensordot_dims(axes: Any, a: np.ndarray, b: np.ndarray) -> tuple[list[int], list[int]] | None:
    """The contracted axes of a and b (non-negative, pairwise of equal sizes), or None where
    numpy.tensordot raises (it then gives the caller its own error)."""
    try:
        iter(axes)
    except TypeError:
        try:
            count = axes.__index__()
        except (AttributeError, TypeError):
            return None
        if count < 0 or count > min(a.ndim, b.ndim):
            return None
        pairs = (list(range(a.ndim - count, a.ndim)), list(range(count)))
    else:
        try:
            first, second = axes
        except (TypeError, ValueError):
            return None
        pairs = (_axis_list(first), _axis_list(second))
    result = []
    for listed, ndim in zip(pairs, (a.ndim, b.ndim)):
        chosen = []
        for axis in listed:
            if isinstance(axis, bool) or not hasattr(axis, "__index__"):
                return None
            axis = axis.__index__()
            if not -ndim <= axis < ndim:
                return None
            chosen.append(axis % ndim)
        if len(set(chosen)) != len(chosen):
            return None
        result.append(chosen)
    axes_a, axes_b = result
    if len(axes_a) != len(axes_b) or any(a.shape[i] != b.shape[j]
                                         for i, j in zip(axes_a, axes_b)):
        return None
    return axes_a, axes_b


def tensordot(a: Any, b: Any, axes: Any = 2) -> np.ndarray:
    """numpy.tensordot: the sum of products over `axes` (an int N: a's last N axes with b's
    first N; or a pair of axis sequences, negative axes counted from the end), the result's
    axes a's free ones then b's, C-contiguous. float32/float64 operands are contracted by
    einjit.einsum; any other dtype, zero-size operands and axes numpy refuses get
    numpy.tensordot (its result and errors)."""
    a, b = np.asarray(a), np.asarray(b)
    contracted = _tensordot_dims(axes, a, b)
    if contracted is None or not _computed_by_einjit((a, b)) or a.ndim + b.ndim > len(_LETTERS):
        return np.tensordot(a, b, axes)
    axes_a, axes_b = contracted
    letters = iter(_LETTERS)
    term_a = [next(letters) for _ in range(a.ndim)]
    term_b = [term_a[axes_a[axes_b.index(j)]] if j in axes_b else next(letters)
              for j in range(b.ndim)]
    output = [c for i, c in enumerate(term_a) if i not in axes_a] + \
        [c for j, c in enumerate(term_b) if j not in axes_b]
    subscripts = "".join(term_a) + "," + "".join(term_b) + "->" + "".join(output)
    return np.asarray(einsum(subscripts, a, b, order="C"))


def transpose(a: Any, axes: Sequence[int] | None = None) -> np.ndarray:
    """numpy.transpose: a view of `a` with its axes permuted (reversed when axes is None;
    negative axes count from the end). A view moves no data: einjit's kernels read such
    operands in place through their strides."""
    return np.transpose(a, axes)
