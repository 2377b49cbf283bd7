"""einsum on dask arrays, each block computed by einjit (the optional extra einjit[dask]).

einsum(subscripts, *arrays, **numpy_kwargs) returns a lazy dask array: one task per
combination of blocks runs einjit.einsum on them (its plan cache holds one compiled plan per
block shape and layout, in each worker process: nothing compiled is ever pickled, only this
module's functions and numpy blocks travel); where a contracted index is split into several
chunks, each block task leaves a partial sum and the partials are added in a tree (dask's
reduction with split_every), each step adding its inputs into one new array, never stacking
them. Any dask scheduler runs it: threads, processes, a dask.distributed Client.

register() makes dask.array.einsum itself call einjit for its numpy blocks (dask's
einsum_lookup dispatch), in this process, in the processes scheduler's workers and, given a
Client, on its workers; unregister() puts back what was there.

Chunks of one index that differ between operands are rechunked to common chunks, as
dask.array.blockwise does (unify_chunks); an operand with unknown (nan) chunk sizes is refused
with its number and axis.

contract_sliced(subscripts, *arrays, memory_limit=, client=) contracts numpy operands whose
intermediates outgrow one worker: the contraction is sliced as einjit.einsum's memory_limit
slices it (einjit.frontend.slicing), and groups of slices run as tasks on a dask.distributed
Client, each worker contracting its slices with einjit; the slices of one part of the result
are added in a fixed tree on the cluster, and the parts written into the result as they come.
"""

from __future__ import annotations

import functools
import math
import string
from typing import Any

try:
    import dask
    import dask.array as da
    from dask.array.core import unify_chunks
    from dask.array.dispatch import einsum_lookup
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError as error:     # an optional extra
    raise ImportError(f'einjit.dask needs dask.array and dask.distributed ({error}): '
                      f'pip install "einjit[dask]"') from error

import numpy as np

from einjit.einsum import einsum as _einjit_einsum
from einjit.frontend.errors import EinsumTypeError, EinsumValueError
from einjit.frontend.parser import check_subscripts, from_sublists
from einjit.frontend.subscripts import resolve
from einjit.numpy_api import einsum_path

__all__ = ["einsum", "register", "unregister", "registered", "contract_sliced"]

_LETTERS = string.ascii_letters
# the numpy keywords passed on to each block's einsum, when given
_BLOCK_OPTIONS = ("dtype", "casting", "optimize", "order")
_PLUGIN_NAME = "einjit-dask-einsum"
_INITIALIZER_KEY = "multiprocessing.initializer"


def _unwrap(block: Any) -> Any:
    """A contracted index of one chunk reaches the task as a list of one block
    (blockwise's concatenate=False): that block, not copied."""
    while isinstance(block, list):
        if len(block) != 1:
            raise AssertionError(f"expected one block of a contracted index, got {len(block)}")
        block = block[0]
    return block


def _block_einsum(*blocks: np.ndarray, subscripts: str, partial_axes: int,
                  options: dict) -> np.ndarray:
    """One task: einjit.einsum on the blocks, with a size-1 axis per split contracted index
    (where this block's partial sum sits)."""
    result = np.asarray(_einjit_einsum(subscripts, *map(_unwrap, blocks), **options))
    return result.reshape(result.shape + (1,) * partial_axes)


def _flat(blocks: Any) -> list:
    if isinstance(blocks, (list, tuple)):
        return [b for item in blocks for b in _flat(item)]
    return [blocks]


def _add(blocks: Any, axis: tuple, keepdims: bool) -> np.ndarray:
    """The sum of partial blocks, in one new array (the inputs may be held by the scheduler
    for a retry, so none is written)."""
    parts = _flat(blocks)
    total = parts[0] + parts[1] if len(parts) > 1 else parts[0].copy()
    for part in parts[2:]:
        np.add(total, part, out=total)
    if keepdims:
        return total
    return total.reshape(tuple(n for a, n in enumerate(total.shape) if a not in axis))


def _as_is(block: np.ndarray, axis: tuple, keepdims: bool) -> np.ndarray:
    return block


def _operands(operands: tuple) -> tuple[str, list]:
    if len(operands) == 0 or (not isinstance(operands[0], str) and len(operands) < 2):
        raise EinsumValueError("must provide at least an operand and a subscripts list to einsum")
    if isinstance(operands[0], str):
        return operands[0], list(operands[1:])
    return from_sublists(operands)


def _check_known_chunks(arrays: list) -> None:
    for index, array in enumerate(arrays):
        for axis, chunks in enumerate(array.chunks):
            if any(math.isnan(c) for c in chunks):
                raise EinsumValueError(
                    f"operand {index} has unknown chunk sizes along axis {axis} (shape "
                    f"{array.shape}): its blocks cannot be matched with the other operands'; "
                    f"call .compute_chunk_sizes() on it first")


def _diagonal_chunks_agree(array: da.Array, indices: tuple) -> da.Array:
    """An operand read along a diagonal (an index on several of its axes) with those axes'
    chunks rechunked to the first one's: blockwise pairs their blocks one to one
    (unify_chunks lines up only different operands)."""
    first: dict = {}
    changes = {}
    for axis, index in enumerate(indices):
        if index in first and array.chunks[axis] != array.chunks[first[index]]:
            changes[axis] = array.chunks[first[index]]
        first.setdefault(index, axis)
    return array.rechunk(changes) if changes else array


def _block_indices(arrays: list, axes: tuple, sizes: tuple) -> list[tuple[int, ...]]:
    """Per operand axis its block-level index: the resolved dim, or for a size-1 axis that
    broadcasts against a longer one, an index of its own (summed over, of size 1), so that
    blockwise never pairs its single block with the other operand's many."""
    next_dim = len(sizes)
    indices = []
    for array, dims in zip(arrays, axes):
        mine = []
        for axis_size, dim in zip(array.shape, dims):
            if axis_size == 1 and sizes[dim] != 1:
                mine.append(next_dim)
                next_dim += 1
            else:
                mine.append(dim)
        indices.append(tuple(mine))
    return indices


def _checked_dtype(block_subscripts: str, arrays: list, aligned: list, options: dict) -> Any:
    """The result's dtype, numpy's (its checks of dtype= and casting= run on blocks of size
    1), after einjit's check of optimize= on the first blocks' shapes: bad keywords fail when
    the graph is built, not in a task."""
    tiny = [np.ones((1,) * a.ndim, a.dtype) for a in arrays]
    dtype = np.einsum(block_subscripts, *tiny,
                      **{k: v for k, v in options.items() if k != "optimize"}).dtype
    if "optimize" in options:
        shapes = [tuple(c[0] for c in a.chunks) for a in aligned]
        einsum_path(block_subscripts, *[np.broadcast_to(np.float32(0), s) for s in shapes],
                    optimize=options["optimize"])
    return dtype


def einsum(*operands: Any, dtype: Any = None, casting: Any = None, optimize: Any = None,
           order: str = "K", split_every: Any = None, out: Any = None) -> da.Array:
    """numpy.einsum's semantics (subscripts string or interleaved sublists, implicit output,
    ellipsis broadcasting, diagonals; dtype=, casting=, optimize=, order= passed to each
    block's einjit.einsum when given) on dask arrays; numpy arrays and array-likes among the
    operands are wrapped with dask.array.asarray. Returns a lazy dask array whose blocks are
    the operands' blocks along the free indices. split_every: the fan-in of the tree that adds
    the partial sums of split contracted indices (dask's reduction keyword). out= is refused:
    a dask result is a new lazy array (store it with dask.array.store)."""
    if out is not None:
        raise EinsumTypeError("out= has no meaning for dask arrays: einjit.dask.einsum returns a "
                              "new lazy dask array (write it somewhere with dask.array.store)")
    subscripts, raw = _operands(operands)
    arrays = [a if isinstance(a, da.Array) else da.asarray(a) for a in raw]
    _check_known_chunks(arrays)
    resolved = resolve(check_subscripts(subscripts), [a.shape for a in arrays])
    indices = _block_indices(arrays, resolved.axes, resolved.sizes)
    used = {d for mine in indices for d in mine}     # 0, 1, ...: a letter each
    if len(used) > len(_LETTERS):
        raise EinsumValueError(f"{subscripts!r} needs {len(used)} distinct indices per block; "
                               f"einsum names at most {len(_LETTERS)}")
    output = tuple(resolved.full_output)
    contracted = sorted(used - set(output))
    arrays = [_diagonal_chunks_agree(a, mine) for a, mine in zip(arrays, indices)]
    terms = ["".join(_LETTERS[d] for d in mine) for mine in indices]
    out_term = "".join(_LETTERS[d] for d in output)
    chunkss, aligned = unify_chunks(*[x for pair in zip(arrays, terms) for x in pair])
    split = "".join(_LETTERS[d] for d in contracted if len(chunkss[_LETTERS[d]]) > 1)
    block_subscripts = ",".join(terms) + "->" + out_term
    given = {"dtype": dtype, "casting": casting, "optimize": optimize,
             "order": None if order == "K" else order}
    options = {name: value for name, value in given.items() if value is not None}
    result_dtype = _checked_dtype(block_subscripts, arrays, aligned, options)
    partials = da.blockwise(
        _block_einsum, out_term + split, *[x for pair in zip(aligned, terms) for x in pair],
        adjust_chunks=dict.fromkeys(split, 1), dtype=result_dtype, concatenate=False,
        meta=np.empty((0,) * (len(output) + len(split)), result_dtype),
        subscripts=block_subscripts, partial_axes=len(split), options=options)
    if not split:
        return partials
    return da.reduction(partials, chunk=_as_is, combine=_add, aggregate=_add,
                        axis=tuple(range(len(output), len(output) + len(split))),
                        keepdims=False, dtype=result_dtype, split_every=split_every,
                        concatenate=False, meta=np.empty((0,) * len(output), result_dtype),
                        name="einjit-einsum-sum")


# -- dask.array.einsum through einjit ------------------------------------------------------


def _numpy_blocks_einsum(*operands: Any, **kwargs: Any) -> Any:
    """What dask.array.einsum calls per block once registered: einjit.einsum (numpy's
    signature; dask passes dtype= and optimize= always)."""
    return _einjit_einsum(*operands, **kwargs)


_previous: list = []     # what einsum_lookup held for numpy blocks before register()


def registered() -> bool:
    """Whether dask.array.einsum computes numpy blocks with einjit in this process."""
    return einsum_lookup.dispatch(np.ndarray) is _numpy_blocks_einsum


def _register_here() -> None:
    if not registered():
        _previous.append(einsum_lookup.dispatch(np.ndarray))
        einsum_lookup.register(np.ndarray, _numpy_blocks_einsum)


def _unregister_here() -> None:
    if registered():
        einsum_lookup.register(np.ndarray, _previous.pop() if _previous else np.einsum)


def _initialize_process(previous: Any = None) -> None:
    """The processes scheduler's worker initializer while registered: register, then run
    the initializer that was configured before."""
    _register_here()
    if previous is not None:
        previous()


class _WorkerRegistration(WorkerPlugin):
    """A dask.distributed worker plugin: each worker (those that join later too) registers
    on setup and unregisters when the plugin is removed."""

    name = _PLUGIN_NAME

    def setup(self, worker: Any) -> None:
        _register_here()

    def teardown(self, worker: Any) -> None:
        _unregister_here()


def register(client: Any = None) -> None:
    """Make dask.array.einsum compute numpy blocks with einjit.einsum: in this process
    (the threaded and synchronous schedulers), in the processes scheduler's worker
    processes (through dask's "multiprocessing.initializer" setting, chained with any set
    before), and, given a dask.distributed Client, on its workers, present and future (a
    worker plugin)."""
    _register_here()
    current = dask.config.get(_INITIALIZER_KEY, None)
    if not (isinstance(current, functools.partial) and current.func is _initialize_process):
        dask.config.set({_INITIALIZER_KEY: functools.partial(_initialize_process, current)})
    if client is not None:
        client.register_plugin(_WorkerRegistration(), name=_PLUGIN_NAME)


def unregister(client: Any = None) -> None:
    """Undo register(): dask.array.einsum computes numpy blocks as before (numpy.einsum by
    default), here, in the processes scheduler's workers and, given a Client, on its
    workers."""
    _unregister_here()
    current = dask.config.get(_INITIALIZER_KEY, None)
    if isinstance(current, functools.partial) and current.func is _initialize_process:
        dask.config.set({_INITIALIZER_KEY: current.args[0] if current.args else None})
    if client is not None:
        client.unregister_worker_plugin(_PLUGIN_NAME)


# -- a sliced contraction's slices as tasks on a cluster ------------------------------------

#: groups of slices per worker thread: enough tasks to balance uneven workers, few enough
#: that each carries many slices
TASKS_PER_THREAD = 4


def _contract_slices(subscripts: str, path: list, dtype: np.dtype, slicing: Any,
                     numbers: list[int], *arrays: np.ndarray) -> np.ndarray:
    """One task: the sum of slices `numbers` (all of one part of the result), each an
    einjit.einsum on the operands' views along the contraction order the client planned."""
    total = None
    for number in numbers:
        piece = slicing.slice(number)
        part = np.asarray(_einjit_einsum(
            subscripts, *(a[index] for a, index in zip(arrays, piece.operands)),
            optimize=path, dtype=dtype))
        total = part if total is None else np.add(total, part, out=total)
    return total


def _sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two partial sums in a new array (the scheduler may hold either for a retry)."""
    return a + b


def contract_sliced(subscripts: str, *operands: Any, memory_limit: Any, client: Any = None,
                    optimize: Any = True, dtype: Any = None) -> np.ndarray:
    """numpy.einsum(subscripts, *operands) of numpy operands, computed on a dask.distributed
    cluster in slices whose intermediates stay under `memory_limit` bytes (or "max_input")
    per task, as einjit.einsum(..., memory_limit=) slices on one machine: each task
    contracts a group of slices with einjit on a worker, the operands sent to every worker
    once. Returns the result as a numpy array. client: the Client to use (default: the
    current one, distributed.get_client()). dtype: the computing dtype (default numpy's
    promotion of the operands), one einjit's kernels take (einjit.einsum.kernel_dtypes()).
    A slice that fails, or a worker that dies, raises dask's error: no partial result is
    returned."""
    from distributed import as_completed, get_client

    from einjit.einsum import contract_expression, kernel_dtypes
    client = client if client is not None else get_client()
    arrays = [np.asarray(a) for a in operands]
    compute = np.dtype(dtype) if dtype is not None else np.result_type(*arrays)
    if compute.name not in kernel_dtypes():
        raise EinsumTypeError(f"contract_sliced computes in one of {kernel_dtypes()}; the "
                              f"operands (or dtype=) give {compute}")
    expression = contract_expression(subscripts, *arrays, optimize=optimize, dtype=compute,
                                     memory_limit=memory_limit)
    path = einsum_path(subscripts, *[a.astype(compute, copy=False) for a in arrays],
                       optimize=optimize)[0]
    slicing = expression.slicing
    # keys of their own (hash=False): a call with the same operands right after another
    # would share the keys that call's futures are releasing
    scattered = client.scatter(arrays, broadcast=True, hash=False)
    if slicing is None:           # the whole contraction fits: one task
        future = client.submit(_einjit_einsum, subscripts, *scattered, optimize=path,
                               dtype=compute, pure=False)
        return np.asarray(future.result())
    # the slices of each part of the result (consecutive numbers: output dims vary slowest)
    parts: dict[tuple, tuple] = {}
    for number in range(slicing.count):
        output = slicing.slice(number).output
        key = tuple((index.start, index.stop) for index in output)
        parts.setdefault(key, (output, []))[1].append(number)
    threads = sum(client.nthreads().values())
    per_task = max(1, math.ceil(slicing.count / (TASKS_PER_THREAD * threads)))
    pending = {}
    for output, numbers in parts.values():
        futures = [client.submit(_contract_slices, subscripts, path, compute, slicing,
                                 numbers[start:start + per_task], *scattered, pure=False)
                   for start in range(0, len(numbers), per_task)]
        while len(futures) > 1:          # a fixed pairing: the same sums on every run
            futures = [client.submit(_sum, *futures[i:i + 2], pure=False)
                       if i + 1 < len(futures) else futures[i]
                       for i in range(0, len(futures), 2)]
        pending[futures[0]] = output
    result = np.empty(expression.shape, compute)
    for future in as_completed(list(pending)):
        result[pending[future]] = future.result()
    return result
