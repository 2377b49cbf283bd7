"""einjit.optimize: fuse -> split -> identify -> reorder -> shared, and a contraction whose
blocks would leave threads idle split again into smaller ones (einjit.passes.balance).

An op may come with all exec types "undefined" (exec_types=None): the passes decide them. An
op that already has prim dims (and no undefined dim) keeps them; its seq loops are still
fused, reordered and shared.

pass_options: min_size (both fuse and split), fuse_min_size, split_min_size, max_size (split:
an int or {dim type: size}), iterations_per_thread (shared).
"""

from __future__ import annotations

from einjit.errors import OperationTypeError
from einjit.ir import TensorOperation
from einjit.passes.balance import balance, needs_smaller_blocks, smaller_blocks
from einjit.passes.fuse import DEFAULT_MIN_SIZE as FUSE_MIN_SIZE
from einjit.passes.fuse import fuse
from einjit.passes.identify import identify
from einjit.passes.reorder import reorder
from einjit.passes.shared import DEFAULT_ITERATIONS_PER_THREAD, shared
from einjit.passes.split import DEFAULT_MIN_SIZE as SPLIT_MIN_SIZE
from einjit.passes.split import split

OPTIONS = ("min_size", "fuse_min_size", "split_min_size", "max_size", "iterations_per_thread")


def optimize(op: TensorOperation, *, num_threads: int | None = None,
             **pass_options) -> TensorOperation:
    """The optimized operation (a new TensorOperation), ready to execute."""
    if not isinstance(op, TensorOperation):
        raise OperationTypeError(f"optimize() takes a TensorOperation; got {type(op).__name__}")
    unknown = sorted(set(pass_options) - set(OPTIONS))
    if unknown:
        raise OperationTypeError(f"optimize() got unknown pass options {unknown}; expected "
                                 f"some of {OPTIONS}")
    common = pass_options.get("min_size")
    fuse_min = pass_options.get("fuse_min_size",
                                FUSE_MIN_SIZE if common is None else common)
    split_min = pass_options.get("split_min_size",
                                 SPLIT_MIN_SIZE if common is None else common)
    if num_threads is not None:
        op = op.replace(num_threads=num_threads)      # the cache blocks are sized for them
    op = fuse(op, min_size=fuse_min)
    per_thread = pass_options.get("iterations_per_thread", DEFAULT_ITERATIONS_PER_THREAD)

    def blocked(max_size) -> TensorOperation:
        cut = reorder(identify(split(op, max_size=max_size, min_size=split_min)))
        return shared(cut, num_threads, iterations_per_thread=per_thread)

    max_size = pass_options.get("max_size")
    result = blocked(max_size)
    if max_size is None and needs_smaller_blocks(result):
        # blocks for the threads (einjit.passes.balance): the first that are even enough,
        # else the most even (the larger blocks where as even)
        for sizes in smaller_blocks(op):
            candidate = blocked(sizes)
            if balance(candidate) > balance(result):
                result = candidate
            if not needs_smaller_blocks(candidate):
                break
    return result
