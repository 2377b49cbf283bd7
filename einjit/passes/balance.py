"""Blocks for the threads: a contraction whose blocks give its threads uneven shares is cut
into smaller ones.

The threads split a nest's shared iterations (its tasks, each one block of the output) into
contiguous shares that differ by one task at most, so T threads on n tasks keep
n / (T * ceil(n / T)) of their time busy: 32 tasks on 48 threads two thirds of it, 5 on 2
threads five sixths. Where that balance is below MIN_BALANCE, optimize plans the
contraction again with smaller m and n blocks (halving the larger of the two, down to
FLOOR_SIZES) until it is not, or, where none is, keeps the most even blocks tried (the
larger where as even): smaller blocks cost the kernel a little of its speed, idle threads
cost all of theirs. The threads counted
are those the compiled nest would start (codegen: only threads that gain from a share). A
cache-blocked contraction (einjit.passes.block) keeps its k chunks; its m blocks and n panels
get smaller alike.
"""

from __future__ import annotations

from math import prod
from typing import Iterator

from einjit.codegen.compile import MIN_FLOPS_PER_THREAD
from einjit.ir import TensorOperation
from einjit.ops import multiply_add_flops
from einjit.passes import block
from einjit.passes.block import MIN_BALANCE

#: the smallest m and n blocks balance cuts to: two AVX-512 vectors of float32 rows, and
#: enough columns for a full register block of the kernels
FLOOR_SIZES = {"m": 32, "n": 16}


def working_threads(op: TensorOperation) -> int:
    """The threads a contraction's nest would run on: its num_threads, fewer where a thread
    would get less than codegen's MIN_FLOPS_PER_THREAD."""
    flops = multiply_add_flops(op.dtype) * prod(dim.size for dim in op.dims)
    return max(1, min(op.num_threads or 1, flops // MIN_FLOPS_PER_THREAD))


def balance(op: TensorOperation) -> float:
    """The share of its threads' time (those its nest runs on) an optimized contraction
    keeps busy (1: even shares)."""
    threads = working_threads(op)
    return block.share_balance(prod(dim.size for dim in op.dims if dim.exec_type == "shared"),
                               threads)


def needs_smaller_blocks(op: TensorOperation) -> bool:
    """Whether an optimized contraction's blocks leave too many of its threads idle."""
    return op.kind == "contraction" and working_threads(op) > 1 and balance(op) < MIN_BALANCE


def smaller_blocks(op: TensorOperation) -> Iterator[dict]:
    """Split's maxima for `op` with ever smaller m and n blocks: the larger one (relative to
    its floor) halved each time, until both are at their floors."""
    sizes = block.max_sizes(op)
    while True:
        room = {kind: sizes[kind] / FLOOR_SIZES[kind] for kind in FLOOR_SIZES}
        kind = max(room, key=room.get)
        if room[kind] <= 1:
            return
        sizes = dict(sizes, **{kind: max(FLOOR_SIZES[kind], sizes[kind] // 2)})
        yield sizes
