"""einjit.einsum and einjit.contract_expression: numpy's einsum, computed by einjit's kernels.

float32 operands (with dtype None or float32 and a float32 `out`, if any) run on einjit's
JIT'd primitives: parse -> contraction tree (opt_einsum order) -> tree optimization ->
one TensorOperation per node. Every other dtype, a mix of dtypes, zero-size operands or an
invalid numpy option are handed to numpy.einsum with the same arguments, so results, result
dtypes and errors are numpy's and no precision is silently lost.

Operands are read in place through their strides (transposes, slices, diagonals and size-1
broadcasting are views); only operands with negative strides or strides that are not a whole
number of elements are copied first."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from einjit.frontend.errors import EinsumTypeError, EinsumValueError
from einjit.frontend.parser import check_subscripts, from_sublists
from einjit.frontend.plan import ITEMSIZE, Plan
from einjit.frontend.rewrite import dense_strides, optimize_tree
from einjit.frontend.subscripts import Resolved, resolve
from einjit.frontend.tree import EinsumTree
from einjit.plan_cache import PlanCache

_PLANS = PlanCache()
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
_FLOAT32 = np.dtype(np.float32)


def plan_cache() -> PlanCache:
    """The plan cache einjit.einsum uses (bounded LRU, see einjit.plan_cache)."""
    return _PLANS


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def _usable(array: np.ndarray) -> bool:
    """Readable in place: non-negative strides, each a whole number of elements."""
    return all(s >= 0 and s % ITEMSIZE == 0 for s in array.strides)


def _writable_in_place(out: np.ndarray) -> bool:
    """`out` can be the root's memory: writable, element strides, no two elements aliased."""
    if not out.flags.writeable or not _usable(out):
        return False
    axes = sorted((s, n) for s, n in zip(out.strides, out.shape) if n > 1)
    reach = ITEMSIZE
    for stride, size in axes:
        if stride < reach:
            return False
        reach = stride * size
    return True


class _Prepared:
    """A plan for one call signature: resolved subscripts, the optimized tree and its steps."""

    def __init__(self, subscripts: str, shapes: Sequence[tuple[int, ...]],
                 strides: Sequence[tuple[int, ...]], out_strides: tuple[int, ...] | None,
                 optimize: Any, order: str, optimize_ops: bool = True):
        resolved = resolve(check_subscripts(subscripts), shapes)
        self.resolved = resolved
        self.shape = tuple(resolved.sizes[d] for d in resolved.full_output)
        sizes = resolved.sizes
        leaf_strides = {}
        for index, element_strides in enumerate(strides):
            view = resolved.view_strides(index, element_strides)
            leaf_strides[index] = dict(zip(resolved.inputs[index], view))
        tree = EinsumTree.from_dims(resolved.inputs, resolved.output, sizes, optimize,
                                    letters=resolved.letters)
        # order "K" without out=: the result's layout is chosen with the tree (as numpy's "K"
        # follows the operands), so transposed operands need no permutation
        self.free = out_strides is None and order == "K"
        if self.free:
            self.tree = optimize_tree(tree, leaf_strides=leaf_strides, free_root=True)
            dense = dense_strides(self.tree.root.dims, sizes)
            out_strides = tuple(dense.get(d, 0) for d in resolved.full_output)
        else:
            if out_strides is None:
                out_strides = _dense(self.shape, order)
            root = {d: out_strides[p] for p, d in enumerate(resolved.full_output) if sizes[d] > 1}
            self.tree = optimize_tree(tree, leaf_strides=leaf_strides, out_strides=root)
        self.out_strides = out_strides
        root = {d: out_strides[p] for p, d in enumerate(resolved.full_output) if sizes[d] > 1}
        self.plan = Plan(self.tree, leaf_strides, root, optimize_ops=optimize_ops)

    def __str__(self) -> str:
        letters = self.resolved.letters
        legend = ", ".join(f"{d}={name}({size})" for d, (name, size) in
                           enumerate(zip(letters, self.resolved.sizes)))
        return f"dims: {legend}\n{self.plan.describe()}"


def _dense(shape: tuple[int, ...], order: str) -> tuple[int, ...]:
    strides, step = [0] * len(shape), 1
    axes = range(len(shape)) if order == "F" else reversed(range(len(shape)))
    for axis in axes:
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


def _run(prepared: _Prepared, arrays: Sequence[np.ndarray], out: np.ndarray | None,
         order: str) -> np.ndarray:
    target = out if out is not None and _writable_in_place(out) and not any(
        np.may_share_memory(out, a) for a in arrays) else None
    if target is None and prepared.free:
        memory = np.empty(max(int(np.prod(prepared.shape)), 1), _FLOAT32)
        target = np.lib.stride_tricks.as_strided(
            memory, prepared.shape, [s * ITEMSIZE for s in prepared.out_strides])
    elif target is None:
        target = np.empty(prepared.shape, _FLOAT32, order="F" if order == "F" else "C")
    prepared.plan.run(arrays, target)
    if out is not None and target is not out:
        np.copyto(out, target)
        return out
    return target


def _native(arrays: Sequence[np.ndarray], out: Any, dtype: Any, order: Any,
            casting: Any) -> bool:
    """Whether einjit's float32 kernels compute this call (else numpy.einsum does)."""
    if not all(a.dtype == _FLOAT32 for a in arrays) or any(a.size == 0 for a in arrays):
        return False
    if not isinstance(order, str) or order.upper() not in ("C", "F", "A", "K"):
        return False
    if casting not in _CASTINGS:
        return False
    try:
        if dtype is not None and np.dtype(dtype) != _FLOAT32:
            return False
    except TypeError:
        return False
    if out is not None and (not isinstance(out, np.ndarray) or out.dtype != _FLOAT32):
        return False
    return True


def _split(operands: Sequence[Any]) -> tuple[str, list[Any]]:
    if len(operands) == 0 or (not isinstance(operands[0], str) and len(operands) < 2):
        raise EinsumValueError("must provide at least an operand and a subscripts list to einsum")
    if isinstance(operands[0], str):
        return operands[0], list(operands[1:])
    return from_sublists(operands)


def einsum(*operands: Any, out: np.ndarray | None = None, optimize: Any = True,
           dtype: Any = None, order: str = "K", casting: str = "safe") -> Any:
    """numpy.einsum's signature and semantics (subscripts string or interleaved sublists,
    ellipsis broadcasting, diagonals, implicit output, out=, dtype=, order=, casting=).

    optimize: False (operand order), True (= "greedy", as numpy), an opt_einsum path name
    ("greedy", "optimal", "dp", "auto", "branch-2", ...) or an explicit path.
    float32 runs on einjit's kernels with a cached plan; other dtypes on numpy.einsum."""
    subscripts, raw = _split(operands)
    arrays = [np.asarray(a) for a in raw]
    if not _native(arrays, out, dtype, order, casting):
        return np.einsum(*operands, out=out, optimize=optimize, dtype=dtype, order=order,
                         casting=casting)
    order = order.upper()
    originals = arrays
    arrays = [a if _usable(a) else np.ascontiguousarray(a) for a in arrays]
    strides = tuple(tuple(s // ITEMSIZE for s in a.strides) for a in arrays)
    shapes = tuple(a.shape for a in arrays)
    target_order = order if order in ("C", "F") else "K"
    key = (subscripts, shapes, strides, _hashable(optimize), target_order)
    try:
        hash(key)
    except TypeError:
        raise EinsumTypeError(f"optimize must be a bool, a path name or an explicit path, "
                              f"got {optimize!r}") from None
    from einjit.runtime.host import host_isa
    key += (host_isa(),)
    prepared = _PLANS.get_or_build(key, lambda: _Prepared(subscripts, shapes, strides, None,
                                                          optimize, target_order))
    if out is not None:
        if out.shape != prepared.shape:
            raise EinsumValueError(
                f"out has shape {out.shape} but {subscripts!r} on operands of shapes "
                f"{[a.shape for a in originals]} gives shape {prepared.shape}")
        if not out.flags.writeable:
            raise EinsumValueError("out is read-only; einsum writes its result there")
    if out is not None and _writable_in_place(out) and not any(
            np.may_share_memory(out, a) for a in arrays):
        out_strides = tuple(s // ITEMSIZE for s in out.strides)
        if out_strides != prepared.out_strides:
            prepared = _PLANS.get_or_build(key + (out_strides,), lambda: _Prepared(
                subscripts, shapes, strides, out_strides, optimize, target_order))
    result = _run(prepared, arrays, out, target_order)
    if out is None and result.ndim == 0:
        return result[()]
    return result


class ContractExpression:
    """A compiled einsum for fixed operand shapes: `expr(*arrays, out=None)`.

    `expr.tree` is the optimized contraction tree; `str(expr)` the plan (tree, each node's
    TensorOperation, flops and intermediate sizes). Arrays with other strides than the
    C-contiguous ones the plan assumed get their own plan (cached)."""

    def __init__(self, subscripts: str, shapes: Sequence[Sequence[int]], optimize: Any,
                 dtype: Any):
        self.subscripts = subscripts
        self.shapes = tuple(tuple(int(n) for n in s) for s in shapes)
        self.optimize = optimize
        self.dtype = np.dtype(dtype)
        strides = tuple(_dense(s, "C") for s in self.shapes)
        self._prepared = _Prepared(subscripts, self.shapes, strides, None, optimize, "C")
        self._variants = PlanCache(32)
        self._optimize_key = _hashable(optimize)

    @property
    def tree(self) -> EinsumTree:
        return self._prepared.tree

    @property
    def shape(self) -> tuple[int, ...]:
        return self._prepared.shape

    def __call__(self, *arrays: Any, out: np.ndarray | None = None) -> Any:
        if len(arrays) != len(self.shapes):
            raise EinsumValueError(f"this expression takes {len(self.shapes)} operands "
                                   f"({self.subscripts!r}), got {len(arrays)}")
        arrays = [np.asarray(a) for a in arrays]
        for index, (array, shape) in enumerate(zip(arrays, self.shapes)):
            if array.shape != shape:
                raise EinsumValueError(f"operand {index} has shape {array.shape}; the expression "
                                       f"was compiled for {shape}")
        if self.dtype != _FLOAT32 or not _native(arrays, out, None, "K", "safe"):
            return np.einsum(self.subscripts, *arrays, out=out, optimize=self.optimize
                             if not isinstance(self.optimize, str) or self.optimize in
                             ("greedy", "optimal") else True)
        arrays = [a if _usable(a) else np.ascontiguousarray(a) for a in arrays]
        strides = tuple(tuple(s // ITEMSIZE for s in a.strides) for a in arrays)
        prepared = self._prepared
        out_strides = None
        if out is not None:
            if out.shape != prepared.shape:
                raise EinsumValueError(f"out has shape {out.shape}; the expression gives "
                                       f"{prepared.shape}")
            if not out.flags.writeable:
                raise EinsumValueError("out is read-only; the expression writes its result there")
            if _writable_in_place(out):
                out_strides = tuple(s // ITEMSIZE for s in out.strides)
        if strides != tuple(_dense(s, "C") for s in self.shapes) or \
                (out_strides is not None and out_strides != prepared.out_strides):
            prepared = self._variants.get_or_build((strides, out_strides), lambda: _Prepared(
                self.subscripts, self.shapes, strides, out_strides, self.optimize, "C"))
        result = _run(prepared, arrays, out, "C")
        if out is None and result.ndim == 0:
            return result[()]
        return result

    def __str__(self) -> str:
        return f"ContractExpression({self.subscripts!r}, shapes {list(self.shapes)})\n" + \
            str(self._prepared)

    def __repr__(self) -> str:
        return f"<ContractExpression {self.subscripts!r} shapes={list(self.shapes)}>"


def contract_expression(subscripts: str, *shapes: Sequence[int], optimize: Any = "auto",
                        dtype: Any = "float32") -> ContractExpression:
    """Plan `subscripts` once for operands of `shapes` (opt_einsum's contract_expression).
    dtype other than float32: the expression evaluates with numpy.einsum."""
    if not isinstance(subscripts, str):
        raise EinsumTypeError(f"subscripts must be a str, got {type(subscripts).__name__}")
    return ContractExpression(subscripts, shapes, optimize, dtype)
