"""einjit.einsum and einjit.contract_expression: numpy's einsum, computed by einjit's kernels.

float32, float64, complex64 and complex128 (complex where the host's backend generates every complex
primitive a plan calls) run on einjit's JIT'd primitives: parse -> contraction tree (opt_einsum
order) -> tree optimization -> one TensorOperation per node, in the dtype numpy would compute in:
`dtype=` if given, else the operands' (and out's) promoted dtype, so float32 mixed with float64
computes in float64, float64 with complex64 in complex128 (the other operands converted first, as
numpy casts them). The casting rule is numpy's: inputs must cast to that dtype, and the result to
out's, under `casting`, checked before any work. Integers, float16 and every other dtype einjit has
no kernels for (as operand, dtype= or out=), zero-size operands, a cast the rule forbids, an invalid
numpy option, and the calls numpy answers with a view of the operand (one operand, nothing summed)
are handed to numpy.einsum with exactly the caller's arguments (optimize= only if the caller gave
it), so results, views, result dtypes and errors are numpy's and no precision is silently lost. The
rules themselves are in einjit.frontend.numpy_rules.

Operands are read in place through their strides (transposes, slices, diagonals and size-1
broadcasting are views); only operands with negative strides or strides that are not a whole
number of elements are copied first.

contract_expression also takes an `EinsumTree` (the bracket notation with its sizes): its
operands are the tree's leaves, left to right, its result has the root's dims.

Call cost: a plan is checked and compiled once; a call whose operands have the shapes, strides
and dtype the plan was made for (checked in a few comparisons per operand) runs each step's
JIT'd code on the operands' addresses (Plan.run_addresses): a plan of one step is one call
of its nest. A call of an expression whose steps all run on the calling thread makes one
native call that does the checks and runs every step (Plan.array_call), and falls back to
the Python checks where one fails; so does a repeated einjit.einsum call with default
options, through the array call of the plan its subscripts ran last (the plan cache's
shortcut)."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from einjit.backends import backend
from einjit.backends.array_call import ArrayLayout
from einjit.frontend import plan as plan_module
from einjit.frontend.errors import EinsumTypeError, EinsumValueError
from einjit.frontend.lower import PRIMITIVES
from einjit.frontend.numpy_rules import (
    any_order_layout,
    casting_rule,
    computing_dtype,
    is_view,
    order_letter,
    with_dlpack_converted,
)
from einjit.frontend.parser import check_subscripts, from_sublists
from einjit.frontend.plan import Plan
from einjit.frontend.rewrite import dense_strides, optimize_tree
from einjit.frontend.slicing import check_memory_limit, limit_bytes, slice_plan
from einjit.frontend.subscripts import Resolved, resolve
from einjit.frontend.tree import EinsumTree
from einjit.log import sliced_plan
from einjit.ops import COMPLEX_DTYPES, DTYPES
from einjit.plan_cache import PlanCache
from einjit.runtime.arrays import ALIGN_FROM_BYTES, aligned_empty, data_address
from einjit.runtime.host import host_isa
from einjit.runtime.threads import threads_setting

_PLANS = PlanCache()
_FLOAT32 = np.dtype(np.float32)
_HOST = host_isa()


def _kernel_dtypes(isa: str | None) -> tuple[np.dtype, ...]:
    """The dtypes a plan computes in on `isa`'s kernels: einjit.ops.DTYPES, and the complex
    ones where the backend generates each primitive a plan calls in complex (its
    COMPLEX_PRIMITIVES); elsewhere complex calls are numpy's, as for any other dtype."""
    dtypes = [np.dtype(name) for name in DTYPES]
    if isa is not None and set(PRIMITIVES) <= set(backend(isa).COMPLEX_PRIMITIVES):
        dtypes += [np.dtype(name) for name in COMPLEX_DTYPES]
    return tuple(dtypes)


_NATIVE = _kernel_dtypes(_HOST)     # the dtypes einjit's kernels compute on this host


def kernel_dtypes() -> tuple[str, ...]:
    """The dtypes einjit's kernels compute in on this host; einsum hands the others to
    numpy.einsum."""
    return tuple(dtype.name for dtype in _NATIVE)


class _NotGiven:
    """A keyword the caller left out: einjit applies `meaning`; a call handed to numpy.einsum
    leaves the keyword out there too (numpy's optimized path treats casting="safe" given
    differently from casting left out)."""

    def __init__(self, meaning: str):
        self.meaning = meaning

    def __repr__(self) -> str:
        return f"<not given: {self.meaning}>"


_EINJITS_CHOICE = _NotGiven("einjit's choice of path")
_SAFE = _NotGiven("'safe'")
_PLAIN_OPTIMIZE = (bool, str, _NotGiven)   # optimize= values the fast path takes as keys
_LAYOUT = operator.attrgetter("shape", "strides")   # an operand's part of a plan's key
_NOT_MADE = object()                                # a prepared plan's array call, not yet made


@functools.lru_cache(maxsize=512)
def _resolved(subscripts: str, shapes: tuple[tuple[int, ...], ...]) -> Resolved:
    """resolve() of numpy subscripts over operands of `shapes` (cached: a call that is not
    planned, a view numpy returns, resolves its subscripts on every call)."""
    return resolve(check_subscripts(subscripts), shapes)


def plan_cache() -> PlanCache:
    """The plan cache einjit.einsum uses (bounded LRU, see einjit.plan_cache)."""
    return _PLANS


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def _usable(array: np.ndarray) -> bool:
    """Readable in place: non-negative strides, each a whole number of elements."""
    item = array.itemsize
    return all(s >= 0 and s % item == 0 for s in array.strides)


def _element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)


def _axes(array: np.ndarray) -> list[tuple[int, int]]:
    """(|stride| in bytes, length) of each axis longer than 1, the shortest stride first."""
    return sorted((abs(s), n) for s, n in zip(array.strides, array.shape) if n > 1)


def _axes_nest(array: np.ndarray) -> bool:
    """Each axis's stride reaches past the shorter ones' span: no two elements aliased (the
    sufficient test, true of every array numpy allocates and of its views)."""
    reach = array.itemsize
    for stride, size in _axes(array):
        if stride < reach:
            return False
        reach = stride * size
    return True


def _aliases_elements(array: np.ndarray) -> bool:
    """Whether two of the array's elements are one in memory (an as_strided view). Exact: where
    the axes do not nest, it counts the distinct addresses."""
    if _axes_nest(array):
        return False
    offsets = np.zeros(1, dtype=np.int64)
    for stride, size in _axes(array):
        offsets = (offsets[:, None] + stride * np.arange(size, dtype=np.int64)).ravel()
    return np.unique(offsets).size < offsets.size


def _writable_in_place(out: np.ndarray) -> bool:
    """`out` can be the root's memory: writable, element strides, axes that nest."""
    return out.flags.writeable and _usable(out) and _axes_nest(out)


class _Prepared:
    """A plan for one call signature: resolved subscripts, the optimized tree and its steps,
    in one dtype (float32 or float64; strides are in its elements)."""

    def __init__(self, subscripts: str, shapes: Sequence[tuple[int, ...]],
                 strides: Sequence[tuple[int, ...]], out_strides: tuple[int, ...] | None,
                 optimize: Any, order: str, optimize_ops: bool = True,
                 dtype: np.dtype = _FLOAT32, memory_limit: Any = None):
        self.dtype = np.dtype(dtype)
        resolved = _resolved(subscripts, tuple(shapes))
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
        root = {d: out_strides[p] for p, d in enumerate(resolved.full_output) if sizes[d] > 1}
        plan = Plan(self.tree, leaf_strides, root, optimize_ops=optimize_ops,
                    dtype=self.dtype.name, compile=memory_limit is None)
        self._finish(plan, out_strides, memory_limit, shapes, resolved.axes, resolved.full_output)

    @classmethod
    def for_tree(cls, tree: EinsumTree, strides: Sequence[tuple[int, ...]],
                 out_strides: tuple[int, ...] | None, optimize: bool,
                 dtype: np.dtype = _FLOAT32, memory_limit: Any = None) -> "_Prepared":
        """The plan of a bracket-notation tree: operands are its leaves (strides per leaf in
        its dims order), the result has the root's dims (dense row-major unless out_strides).
        optimize: rewrite the tree for the primitives first (OPT), or lower it as written
        (LOWER)."""
        self = cls.__new__(cls)
        self.dtype = np.dtype(dtype)
        self.resolved = None
        sizes = tree.sizes
        self.shape = tuple(sizes[d] for d in tree.root.dims)
        self.free = False
        leaf_strides = {leaf.operand: dict(zip(leaf.dims, s))
                        for leaf, s in zip(tree.leaves, strides)}
        if out_strides is None:
            out_strides = _dense(self.shape, "C")
        root = {d: s for d, s in zip(tree.root.dims, out_strides)}
        self.tree = optimize_tree(tree, leaf_strides=leaf_strides, out_strides=root) \
            if optimize else tree
        plan = Plan(self.tree, leaf_strides, root, dtype=self.dtype.name,
                    compile=memory_limit is None)
        leaves = [leaf.dims for leaf in tree.leaves]
        self._finish(plan, out_strides, memory_limit, [[sizes[d] for d in dims] for dims in leaves],
                     leaves, tree.root.dims)
        return self

    def _finish(self, plan: Plan, out_strides: tuple[int, ...], memory_limit: Any = None,
                shapes: Sequence[Sequence[int]] = (), operand_axes: Sequence[Sequence[int]] = (),
                output_axes: Sequence[int] = ()) -> None:
        # plan: what runs (a SlicedPlan where the limit asks for slices); whole: the plan of
        # the whole contraction; shown: the plan str(expr) and the displays show
        self.whole = self.shown = plan
        self.slicing = None
        if memory_limit is not None:
            limit = limit_bytes(memory_limit, shapes, self.dtype.itemsize)
            sliced = slice_plan(plan, limit, operand_axes, shapes, output_axes)
            if sliced is None:
                # compiled, steps that run at once hold their buffers together
                plan.finish()
                sliced = slice_plan(plan, limit, operand_axes, shapes, output_axes)
            if sliced is not None:
                plan, self.slicing, self.shown = sliced, sliced.slicing, sliced.shown
                sliced_plan(self.slicing)
        self.plan = plan
        self.out_strides = tuple(out_strides)
        # how a result is allocated: C order, else a buffer viewed with strides
        self.c_order = self.out_strides == _dense(self.shape, "C")
        self.byte_strides = tuple(s * self.dtype.itemsize for s in self.out_strides)
        self.size = max(int(np.prod(self.shape)), 1)
        # results from ALIGN_FROM_BYTES on start on a cache line (streamed stores need it);
        # small ones skip aligned_empty's checks (on the call path of every tiny einsum)
        large = self.size * self.dtype.itemsize >= ALIGN_FROM_BYTES
        self.empty = aligned_empty if large else np.empty
        self._array_call = _NOT_MADE

    def array_call(self, layouts: Callable[[], Sequence[ArrayLayout]]) -> Any:
        """The plan's checked array call (Plan.array_call) for operands of the layouts
        `layouts()` gives (the ones this plan was made for), made on first use; None where
        the plan offers none."""
        if self._array_call is _NOT_MADE:
            self._array_call = self.plan.array_call(layouts())
        return self._array_call

    def allocate(self, order: str) -> np.ndarray:
        """A new result array laid out as this plan writes it (order: the caller's C/F/K)."""
        dtype = self.dtype
        if self.free:
            if self.c_order:
                return self.empty(self.shape, dtype)
            return np.ndarray(self.shape, dtype, buffer=self.empty(self.size, dtype),
                              strides=self.byte_strides)
        return self.empty(self.shape, dtype, order="F" if order == "F" else "C")

    def describe(self, ops: Sequence[Any] | None = None) -> str:
        """The dims' legend and the plan (Plan.describe; `ops`: each step's operation as
        made for another target)."""
        if self.resolved is None:
            legend = ", ".join(f"{d}({size})" for d, size in enumerate(self.tree.sizes))
        else:
            letters = self.resolved.letters
            legend = ", ".join(f"{d}={name}({size})" for d, (name, size) in
                               enumerate(zip(letters, self.resolved.sizes)))
        sliced = "" if self.slicing is None else \
            f"{self.slicing.text()}\neach slice (the first shown):\n"
        return f"dims: {legend}\n{sliced}{self.shown.describe(ops)}"

    def __str__(self) -> str:
        return self.describe()


def _dense(shape: tuple[int, ...], order: str) -> tuple[int, ...]:
    strides, step = [0] * len(shape), 1
    axes = range(len(shape)) if order == "F" else reversed(range(len(shape)))
    for axis in axes:
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


def _in_place(out: np.ndarray | None, arrays: Sequence[np.ndarray], dtype: np.dtype) -> bool:
    """Whether a plan in `dtype` may write straight into `out` (else a result is copied
    there)."""
    return out is not None and out.dtype == dtype and _writable_in_place(out) and not any(
        np.may_share_memory(out, a) for a in arrays)


def _run(prepared: _Prepared, arrays: Sequence[np.ndarray], out: np.ndarray | None,
         order: str) -> np.ndarray:
    """Compute into `out` when prepared was made for out's dtype and strides and nothing
    overlaps it, else into a new array (copied into `out`, cast to its dtype, if given: the
    caller checked the cast against the casting rule)."""
    if _in_place(out, arrays, prepared.dtype) and _element_strides(out) == prepared.out_strides:
        target = out
    else:
        target = prepared.allocate(order)
    prepared.plan.run(arrays, target)
    if out is not None and target is not out:
        np.copyto(out, target, casting="unsafe")
        return out
    return target


def _native(arrays: Sequence[np.ndarray], out: Any, dtype: Any, order: str | None,
            casting: Any) -> np.dtype | None:
    """The dtype einjit's kernels compute this call in, as numpy.einsum would: `dtype`, else
    the promoted dtype of the operands and out. None: numpy.einsum takes the call (a dtype
    without kernels, zero-size operands, an invalid option or a cast `casting` forbids, for
    which numpy raises its own error; an out whose elements alias each other, where the sums
    land as numpy's order of writes adds them). `order`: order_letter's."""
    if not all(a.dtype in _NATIVE for a in arrays) or any(a.size == 0 for a in arrays):
        return None
    rule = casting_rule(casting)
    if order is None or rule is None:
        return None
    if out is not None and (not isinstance(out, np.ndarray) or out.dtype not in _NATIVE
                            or _aliases_elements(out)):
        return None
    compute = computing_dtype(arrays, out, dtype, rule)
    if compute is None or compute not in _NATIVE:
        return None
    return _NATIVE[_NATIVE.index(compute)]     # the one dtype object the fast paths compare


def _converted(arrays: Sequence[np.ndarray], dtype: np.dtype) -> list[np.ndarray]:
    """The operands in the computing dtype: those of another dtype cast once, before any
    contraction (numpy's cast, which the casting rule allowed: float32 to float64, a real
    operand to complex), the rest as they are."""
    return [a if a.dtype == dtype else a.astype(dtype) for a in arrays]


def _split(operands: Sequence[Any]) -> tuple[str, list[Any]]:
    if len(operands) == 0 or (not isinstance(operands[0], str) and len(operands) < 2):
        raise EinsumValueError("must provide at least an operand and a subscripts list to einsum")
    if isinstance(operands[0], str):
        return operands[0], list(operands[1:])
    return from_sublists(operands)


def _result(result: np.ndarray, out: np.ndarray | None) -> Any:
    if out is None and result.ndim == 0:
        return result[()]
    return result


def _numpy_einsum(operands: Sequence[Any], out: Any, optimize: Any, dtype: Any, order: Any,
                  casting: Any) -> Any:
    """numpy.einsum called with exactly the caller's arguments: optimize= and casting= only if
    given (numpy's default is optimize=False); out=None, dtype=None and order="K" are
    numpy's defaults."""
    given = {name: value for name, value in (("optimize", optimize), ("casting", casting))
             if not isinstance(value, _NotGiven)}
    return np.einsum(*operands, out=out, dtype=dtype, order=order, **given)


def _broadcasts_into(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> bool:
    """Whether a result of `shape` is not out's but numpy writes it there broadcast: as
    many axes, the differing ones of size 1 in the result."""
    return shape != out_shape and len(shape) == len(out_shape) and \
        all(size in (1, other) for size, other in zip(shape, out_shape))


def _check_out(out: np.ndarray, shape: tuple[int, ...], subscripts: str,
               arrays: Sequence[np.ndarray]) -> None:
    if out.shape != shape:
        raise EinsumValueError(
            f"out has shape {out.shape} but {subscripts!r} on operands of shapes "
            f"{[a.shape for a in arrays]} gives shape {shape}")
    if not out.flags.writeable:
        raise EinsumValueError("out is read-only; einsum writes its result there")


def einsum(*operands: Any, out: np.ndarray | None = None, optimize: Any = _EINJITS_CHOICE,
           dtype: Any = None, order: Any = "K", casting: Any = _SAFE,
           memory_limit: Any = None) -> Any:
    """numpy.einsum's signature and semantics (subscripts string or interleaved sublists,
    ellipsis broadcasting, diagonals, implicit output, out=, dtype=, order=, casting=).

    optimize: False (operand order), True (einjit's choice: the cheaper in flops of opt_einsum's
    "auto" and "dp"; numpy's True is greedy, the order changes only rounding), a path name
    ("greedy", "optimal", "dp", "auto", "branch-2", ...), numpy's (name, memory limit) or an
    explicit path; left out, einjit chooses (as True). casting left out is numpy's "safe".
    float32, float64, complex64 and complex128 (and their mixes, computed in numpy's promoted
    dtype) run on einjit's kernels with a cached plan, after numpy's checks of dtype=,
    casting= and out=. Every other call goes to
    numpy.einsum with exactly the caller's arguments (optimize= only if given): other dtypes,
    zero-size operands, casts the casting rule refuses (numpy raises its error), an out= the
    result broadcasts into (size-1 axes of the result where out's are longer), and the calls
    numpy answers with a view (one operand, nothing summed: "ii->i", "ij->ji").

    memory_limit: bytes (or "max_input": the largest operand's) that einjit's intermediates
    may hold at once (operands and result not counted); where the plan would exceed it, the
    contraction runs in slices (einjit.frontend.slicing). None: no limit."""
    path = True if optimize is _EINJITS_CHOICE else optimize
    # the common repeated call: float32 or float64 arrays of one dtype, default options, a
    # plan in the cache
    if out is None and dtype is None and order == "K" and casting is _SAFE \
            and memory_limit is None and len(operands) > 1 and type(operands[0]) is str \
            and type(optimize) in _PLAIN_OPTIMIZE and type(operands[1]) is np.ndarray:
        # the plan these subscripts ran last, where its array call finds the operands its own
        signature = (operands[0], path, len(operands), threads_setting())
        shortcut = _PLANS.shortcut(signature)
        if shortcut is not None and plan_module.EXECUTOR is None:
            call, allocate, key = shortcut
            result = allocate("K")
            if not (call(id(operands[1]), id(operands[2]), id(result)) if len(operands) == 3
                    else call(*map(id, operands[1:]), id(result))):
                _PLANS.hit(key)
                return result if result.ndim else result[()]
        arrays = operands[1:]
        kind = arrays[0].dtype
        for a in arrays:
            if type(a) is not np.ndarray or a.dtype is not kind:
                break
        else:
            key = (operands[0], tuple(map(_LAYOUT, arrays)), type(path).__name__, path, "K",
                   _HOST, kind, threads_setting())
            entry = _PLANS.get(key) if kind in _NATIVE else None
            if entry is not None:
                prepared, copies = entry
                if copies:
                    arrays = [np.ascontiguousarray(a) if c else a for a, c in zip(arrays, copies)]
                else:
                    call = prepared.array_call(lambda: [
                        ArrayLayout(id(np.ndarray), id(kind), kind.itemsize, a.shape, a.strides)
                        for a in arrays])
                    if call is not None:
                        _PLANS.remember(signature, (call, prepared.allocate, key))
                result = prepared.allocate("K")
                prepared.plan.run(arrays, result)
                return result if result.ndim else result[()]
    memory_limit = check_memory_limit(memory_limit)
    operands = with_dlpack_converted(operands)
    subscripts, raw = _split(operands)
    arrays = [np.asarray(a) for a in raw]
    letter = order_letter(order)
    compute = _native(arrays, out, dtype, letter, "safe" if casting is _SAFE else casting)
    if compute is None:
        return _numpy_einsum(operands, out, optimize, dtype, order, casting)
    shapes = tuple(a.shape for a in arrays)
    resolved = _resolved(subscripts, shapes)
    if out is None and is_view(resolved):
        return _numpy_einsum(operands, out, optimize, dtype, order, casting)
    if out is not None:
        shape = tuple(resolved.sizes[d] for d in resolved.full_output)
        if _broadcasts_into(shape, out.shape):
            return _numpy_einsum(operands, out, optimize, dtype, order, casting)
        _check_out(out, shape, subscripts, arrays)
    if letter == "A":
        letter = any_order_layout(resolved, arrays)
    # operands of the other float dtype: converted first (fresh C-contiguous arrays), then
    # the plan is the one such arrays get
    arrays = _converted(arrays, compute)
    originals = arrays
    copies = tuple(not _usable(a) for a in arrays)
    arrays = [np.ascontiguousarray(a) if c else a for a, c in zip(arrays, copies)]
    strides = tuple(_element_strides(a) for a in arrays)
    # plans are made for the thread count: a changed EINJIT_NUM_THREADS makes new ones; the
    # path's type too: optimize=1 equals True, but is refused, not True's plan
    key = (subscripts, tuple(zip(shapes, (a.strides for a in originals))), type(path).__name__,
           _hashable(path), letter, _HOST, compute, threads_setting())
    if memory_limit is not None:
        key += (("memory_limit", memory_limit),)
    try:
        hash(key)
    except TypeError:
        raise EinsumTypeError(f"optimize must be a bool, a path name or an explicit path, "
                              f"got {optimize!r}") from None
    prepared, _ = _PLANS.get_or_build(key, lambda: (_Prepared(
        subscripts, shapes, strides, None, path, letter, dtype=compute,
        memory_limit=memory_limit), copies if any(copies) else None))
    if out is not None and _in_place(out, arrays, compute):
        out_strides = _element_strides(out)
        if out_strides != prepared.out_strides:
            prepared, _ = _PLANS.get_or_build(key + (out_strides,), lambda: (_Prepared(
                subscripts, shapes, strides, out_strides, path, letter, dtype=compute,
                memory_limit=memory_limit), None))
    return _result(_run(prepared, arrays, out, letter), out)


def _tree_numpy(tree: EinsumTree, arrays: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """A tree evaluated node by node with numpy.einsum (dtypes einjit's kernels do not take)."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if len(tree.sizes) > len(letters):
        raise EinsumValueError(f"the tree has {len(tree.sizes)} dimension ids; numpy's einsum "
                               f"(used for dtype {dtype}) takes at most {len(letters)}")

    def value(node):
        if node.is_leaf:
            return arrays[node.operand].astype(dtype, copy=False)
        terms = ",".join("".join(letters[d] for d in c.dims) for c in node.children)
        return np.einsum(terms + "->" + "".join(letters[d] for d in node.dims),
                         *[value(c) for c in node.children], optimize=True)
    return np.asarray(value(tree.root))


def _operand_shape(entry: Any, index: int) -> tuple[int, ...]:
    """One of contract_expression's shapes: a sequence of integer sizes (Python or numpy
    integers), or an array (anything with .shape and .dtype: numpy, a torch tensor), which
    stands for its own shape."""
    if hasattr(entry, "shape") and hasattr(entry, "dtype"):
        entry = entry.shape
    if isinstance(entry, (str, bytes)) or not hasattr(entry, "__iter__"):
        raise EinsumTypeError(f"operand {index}'s shape must be a sequence of integer sizes "
                              f"(or an array, which stands for its shape), got {entry!r}")
    sizes = tuple(entry)
    shape = []
    for size in sizes:
        try:
            if isinstance(size, (bool, np.bool_)):
                raise TypeError
            shape.append(operator.index(size))
        except TypeError:
            raise EinsumTypeError(f"operand {index}'s shape {sizes!r}: size {size!r} is not "
                                  f"an integer") from None
        if shape[-1] < 0:
            raise EinsumValueError(f"operand {index}'s shape {sizes!r}: size {size!r} is "
                                   f"negative")
    return tuple(shape)


class ContractExpression:
    """A compiled einsum for fixed operand shapes: `expr(*arrays, out=None)`.

    Made from numpy subscripts and shapes, or from an EinsumTree (operands = its leaves, left
    to right, each shaped by its dims' sizes; result = the root's dims). `expr.tree` is the
    optimized contraction tree; `str(expr)` the plan (tree, each node's TensorOperation,
    flops and intermediate sizes). Arrays with other strides than the C-contiguous ones the
    plan assumed get their own plan (cached).

    dtype float32, float64, complex64 or complex128: the expression computes on einjit's kernels in
    its dtype promoted with the operands' and out's as numpy promotes (float32 operands of a float64
    expression are converted; a float64 operand or out makes a float32 expression compute in
    float64, with a plan of its own); out must take that dtype under numpy's "safe" rule (TypeError,
    checked before any work). Other dtypes (of the expression, an operand or out) and shapes with a
    zero size evaluate with numpy (a zero-size expression has no tree and no generated code)."""

    def __init__(self, subscripts: str | EinsumTree, shapes: Sequence[Sequence[int]],
                 optimize: Any, dtype: Any, memory_limit: Any = None):
        self.memory_limit = check_memory_limit(memory_limit)
        self._source = subscripts if isinstance(subscripts, EinsumTree) else None
        self.subscripts = str(subscripts)
        shapes = tuple(_operand_shape(s, i) for i, s in enumerate(shapes))
        if self._source is not None:
            sizes = self._source.sizes
            tree_shapes = tuple(tuple(sizes[d] for d in leaf.dims) for leaf in self._source.leaves)
            if shapes and shapes != tree_shapes:
                raise EinsumValueError(f"shapes {list(shapes)} differ from the tree's operand "
                                       f"shapes {list(tree_shapes)}")
            shapes = tree_shapes
        self.shapes = shapes
        self.optimize = optimize
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            raise EinsumTypeError(f"dtype must name a numpy dtype, got {dtype!r}") from None
        # zero-size operands: numpy evaluates the expression (einjit's trees need sizes >= 1)
        self.empty = any(0 in s for s in self.shapes)
        # the kernels' dtype: the expression's, or float32 for the plan that shows the tree of
        # an expression numpy evaluates
        native = self.dtype in _NATIVE and not self.empty
        self._kind = _NATIVE[_NATIVE.index(self.dtype)] if native else None
        strides = tuple(_dense(s, "C") for s in self.shapes)
        self._c_strides = strides
        self._variants = PlanCache(32)
        self._fast = None
        self._array_call = None
        if self.empty:
            resolved = _resolved(self.subscripts, self.shapes)     # checks the subscripts
            self._prepared = None
            self._shape = tuple(resolved.sizes[d] for d in resolved.full_output)
            return
        self._prepared = self._plan(strides, None, self._kind or _FLOAT32)
        self._shape = self._prepared.shape
        # the plain call: arrays of the expression's dtype, exactly these shapes and C
        # strides; out=, if given, of that dtype, the result's shape and C strides
        item = self.dtype.itemsize
        if native:
            self._fast = tuple(zip(self.shapes, (tuple(item * x for x in s) for s in strides)))
            # each operand's bytes: with C strides, exactly the memory it spans
            self._fast_bytes = tuple(math.prod(shape) * item for shape in self.shapes)
            self._fast_out = (self._shape, tuple(item * x for x in _dense(self._shape, "C")),
                              math.prod(self._shape) * item)
            # the same checks and every step in one native call, where the plan offers it
            layouts = [ArrayLayout(id(np.ndarray), id(self._kind), item, shape, strides)
                       for shape, strides in self._fast]
            self._array_call = self._prepared.array_call(lambda: layouts)
            self._arity = len(self.shapes)
            self._result_of_call = (self._prepared.empty, self._prepared.shape, self._kind)
            # out= given: checked too, writable, sharing no byte with an operand
            self._out_call = self._prepared.plan.array_call(layouts, ArrayLayout(
                id(np.ndarray), id(self._kind), item, *self._fast_out[:2]))

    def _plan(self, strides: tuple, out_strides: tuple | None, dtype: np.dtype) -> _Prepared:
        if self._source is not None:
            return _Prepared.for_tree(self._source, strides, out_strides,
                                      optimize=self.optimize is not False, dtype=dtype,
                                      memory_limit=self.memory_limit)
        return _Prepared(self.subscripts, self.shapes, strides, out_strides, self.optimize, "C",
                         dtype=dtype, memory_limit=self.memory_limit)

    @property
    def tree(self) -> EinsumTree:
        if self._prepared is None:
            raise EinsumValueError(f"{self!r} has no contraction tree: an operand has a "
                                   f"zero-size dimension, and numpy evaluates it")
        return self._prepared.tree

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def slicing(self) -> Any:
        """How memory_limit= sliced the contraction (einjit.frontend.slicing.Slicing: the
        sliced dims, chunks, slice count, peak bytes, flops overhead, each slice's index
        ranges), None where it runs whole."""
        return None if self._prepared is None else self._prepared.slicing

    def __call__(self, *arrays: Any, out: np.ndarray | None = None) -> Any:
        call = self._array_call
        if call is not None and len(arrays) == self._arity and plan_module.EXECUTOR is None:
            if out is None:
                empty, shape, kind = self._result_of_call
                result = empty(shape, kind)
                if not (call(id(arrays[0]), id(arrays[1]), id(result)) if len(arrays) == 2
                        else call(*map(id, arrays), id(result))):
                    return result if shape else result[()]
            elif not (self._out_call(id(arrays[0]), id(arrays[1]), id(out)) if len(arrays) == 2
                      else self._out_call(*map(id, arrays), id(out))):
                return out
        fast = self._fast
        if fast is not None and len(arrays) == len(fast):
            kind = self._kind
            for a, (shape, strides) in zip(arrays, fast):
                if type(a) is not np.ndarray or a.dtype is not kind or a.shape != shape \
                        or a.strides != strides:
                    break
            else:
                prepared = self._prepared
                if out is None:
                    result = prepared.empty(prepared.shape, kind)
                    prepared.plan.run(arrays, result)
                    return result if result.ndim else result[()]
                shape, strides, nbytes = self._fast_out
                if type(out) is np.ndarray and out.dtype is kind and out.shape == shape and \
                        out.strides == strides and out.flags.writeable:
                    # written in place unless its memory meets an operand's (numpy's
                    # may_share_memory: the bounds of each, exact for these C strides)
                    start = data_address(out)
                    end = start + nbytes
                    addresses = []
                    for a, size in zip(arrays, self._fast_bytes):
                        first = data_address(a)
                        if first < end and start < first + size:
                            break
                        addresses.append(first)
                    else:
                        prepared.plan.run(arrays, out, (addresses, start))
                        return out
        if len(arrays) != len(self.shapes):
            raise EinsumValueError(f"this expression takes {len(self.shapes)} operands "
                                   f"({self.subscripts!r}), got {len(arrays)}")
        arrays = [np.asarray(a) for a in with_dlpack_converted(arrays)]
        for index, (array, shape) in enumerate(zip(arrays, self.shapes)):
            if array.shape != shape:
                raise EinsumValueError(f"operand {index} has shape {array.shape}; the expression "
                                       f"was compiled for {shape}")
        if out is not None and not isinstance(out, np.ndarray):
            raise EinsumTypeError(f"out must be a numpy array, got {type(out).__name__}")
        compute = self._compute(arrays, out)
        if out is not None:
            self._check_out(out, self._numpy_dtype(arrays) if compute is None else compute)
        if compute is None:
            return self._numpy(arrays, out)
        arrays = [a if _usable(a) else np.ascontiguousarray(a)
                  for a in _converted(arrays, compute)]
        strides = tuple(_element_strides(a) for a in arrays)
        prepared = self._prepared
        out_strides = None
        if out is not None and _in_place(out, arrays, compute):
            out_strides = _element_strides(out)
        if compute != self._kind or strides != self._c_strides or \
                (out_strides is not None and out_strides != prepared.out_strides):
            prepared = self._variants.get_or_build(
                (compute, strides, out_strides),
                lambda: self._plan(strides, out_strides, compute))
        return _result(_run(prepared, arrays, out, "C"), out)

    def _promoted(self, arrays: Sequence[np.ndarray], out: np.ndarray | None) -> np.dtype:
        """numpy's promotion of the expression's dtype, the operands' and out's."""
        return np.result_type(self.dtype, *arrays, *([] if out is None else [out]))

    def _numpy_dtype(self, arrays: Sequence[np.ndarray]) -> np.dtype:
        """The dtype numpy computes a call in that the kernels do not take: numpy.einsum's on
        the operands; a tree's nodes in the expression's dtype promoted with theirs."""
        if self._source is not None:
            return np.result_type(self.dtype, *arrays)
        return np.result_type(*arrays)

    def _check_out(self, out: np.ndarray, compute: np.dtype) -> None:
        """out= as the expression takes it, checked before any work (`compute`: the dtype
        the call computes in)."""
        if not np.can_cast(compute, out.dtype, "safe"):
            raise EinsumTypeError(f"the expression computes in {compute}; out's dtype "
                                  f"{out.dtype} cannot take it under the rule 'safe'")
        if out.shape != self.shape:
            raise EinsumValueError(f"out has shape {out.shape}; the expression gives "
                                   f"{self.shape}")
        if not out.flags.writeable:
            raise EinsumValueError("out is read-only; the expression writes its result there")

    def _compute(self, arrays: Sequence[np.ndarray], out: Any) -> np.dtype | None:
        """The dtype the kernels compute this call in (numpy's promotion of the expression's
        dtype, the operands' and out's), or None: numpy evaluates it."""
        if self._kind is None or not all(a.dtype in _NATIVE for a in arrays) or \
                (out is not None and out.dtype not in _NATIVE):
            return None
        # promotion is safe for the operands; out's cast is checked (_check_out)
        return _native(arrays, out, self._promoted(arrays, out), "K", "unsafe")

    def _numpy(self, arrays: Sequence[np.ndarray], out: np.ndarray | None) -> Any:
        if self._source is not None:
            result = _tree_numpy(self._source, arrays, self._numpy_dtype(arrays))
            if out is None:
                return _result(result, None)
            np.copyto(out, result, casting="same_kind")
            return out
        optimize = self.optimize if not isinstance(self.optimize, str) or self.optimize in \
            ("greedy", "optimal") else True
        return np.einsum(self.subscripts, *arrays, out=out, optimize=optimize)

    def parallel_profile(self, num_threads: int | None = None) -> Any:
        """What `num_threads` threads (default: this process's count) would do with this
        expression's plan, planned for that count: per step its work, tasks, threads busy,
        busiest thread over the mean and bytes, and `.efficiency`, the plan's predicted
        parallel efficiency (einjit.frontend.profile). Plan arithmetic only: any count can
        be inspected on any machine."""
        if self._prepared is None:
            raise EinsumValueError(f"{self!r} has no plan to profile: an operand has a "
                                   f"zero-size dimension, and numpy evaluates it")
        from einjit.frontend.profile import profile_plan
        from einjit.runtime.threads import default_threads
        return profile_plan(self._prepared.shown,
                            default_threads() if num_threads is None else num_threads,
                            repr(self.subscripts))

    def describe(self, ops: Sequence[Any] | None = None) -> str:
        """str(expr); `ops`: each step's operation as made for another target (the plan
        shown as it would run there)."""
        head = f"ContractExpression({self.subscripts!r}, shapes {list(self.shapes)})\n"
        if self._prepared is None:
            return head + (f"numpy.einsum evaluates it (an operand has a zero-size dimension): "
                           f"no contraction tree, no generated code; result shape {self.shape}")
        if self._kind is None:      # the plan was made in float32 for its tree alone
            head += (f"numpy.einsum evaluates it in {self.dtype} (einjit has no kernels for "
                     f"that dtype); the plan below is float32's, shown for its tree\n")
        return head + self._prepared.describe(ops)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"<ContractExpression {self.subscripts!r} shapes={list(self.shapes)}>"

    def _repr_html_(self) -> str:
        """Jupyter's picture of the plan (einjit.display.expression_html)."""
        if self._prepared is None:
            import html
            return f"<pre>{html.escape(str(self))}</pre>"
        from einjit.display import expression_html
        return expression_html(self)


def contract_expression(subscripts: str | EinsumTree, *shapes: Any,
                        optimize: Any = "auto", dtype: Any = "float32",
                        memory_limit: Any = None) -> ContractExpression:
    """Plan `subscripts` once for operands of `shapes` (opt_einsum's contract_expression),
    generating all code now. Each shape is a sequence of integer sizes (Python or numpy
    integers; 2.5 is refused with a TypeError naming it), or an array, which stands for its
    own shape (contract_expression("ij,jk->ik", a, b) plans for a.shape and b.shape).
    dtype float32, float64, complex64 or complex128 runs on einjit's kernels (see
    ContractExpression for mixed dtypes); any other dtype, and shapes with a zero size,
    evaluate with numpy.

    `subscripts` may be an EinsumTree (e.g. EinsumTree("[[8,4],[7,3,8]->[7,3,4]],...",
    sizes)): shapes are then the leaves' (optional; if given they must match), and
    optimize=False runs the tree as written, anything else rewrites it for the primitives
    first (einjit.frontend.rewrite).

    memory_limit: bytes, or "max_input" (the largest operand's bytes), that the intermediates
    may hold at once; a plan over it is sliced (expr.slicing says how; einjit.einsum)."""
    if not isinstance(subscripts, (str, EinsumTree)):
        raise EinsumTypeError(f"subscripts must be a str or an EinsumTree, got "
                              f"{type(subscripts).__name__}")
    return ContractExpression(subscripts, shapes, optimize, dtype, memory_limit)
