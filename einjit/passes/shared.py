"""Shared-memory parallelization: mark outer loops "shared" so that threads
split their iterations.

Starting from the outermost loop, seq dims become shared until the shared iterations reach
`iterations_per_thread` x num_threads (default 4 per thread, so that a flattened range split
into equal slices loses at most a quarter of a slice to imbalance) in shares that keep
SHARE_BALANCE (99%) of the threads' time busy (625 iterations on 48 threads, shares of 13 and
14, keep 93%: the next loop is shared too), or no candidate is left.
In a small contraction whose in0 fits in half of L2 (slabs_of_out) the candidates go by out's
stride instead, the largest first: each thread writes a slab of out whose pages no other
thread writes (n blocks before m blocks; m first would give each thread a part of every column).
Never a k dim (threads would race on the same out elements), never a dim of size 1 or with out
stride 0. In a large contraction (einjit.passes.block) the threads take whole n panels; where
there are fewer panels than threads, the m loop inside the k loop is shared by an outer part
(block.m_groups: each thread's tiles of C keep their m blocks inside the k loop, passing B's
panel in L2), or whole, moved out of the k loop, where that costs least. A matrix times a
vector (n of 1) shares a loop inside its k loop by an outer part only, as few iterations as
give every thread as many (a divisor of its size, where it has one): each thread then reads
its rows of the matrix in runs as long as one thread does, not in blocks. Shared dims move
to the front, keeping their order. The op records num_threads.

num_threads None means the op's num_threads, else the runtime's default
(einjit.runtime.threads.default_threads: EINJIT_NUM_THREADS, else the CPUs this process may
run on).
"""

from __future__ import annotations

import numpy as np

from einjit.ir import Dim, TensorOperation
from einjit.ir.dims import check_int
from einjit.passes import block
from einjit.runtime.threads import default_threads

DEFAULT_ITERATIONS_PER_THREAD = 4
# Sharing one more loop costs next to nothing (each thread takes one contiguous share of the
# flattened range), unlike the smaller blocks balance cuts for MIN_BALANCE: demand more.
SHARE_BALANCE = 0.99


def shared(op: TensorOperation, num_threads: int | None = None, *,
           iterations_per_thread: int = DEFAULT_ITERATIONS_PER_THREAD) -> TensorOperation:
    """A new op whose outer non-k seq loops are shared among `num_threads` threads."""
    if num_threads is None:
        num_threads = op.num_threads if op.num_threads is not None else default_threads()
    num_threads = check_int("num_threads", num_threads, 1)
    iterations_per_thread = check_int("iterations_per_thread", iterations_per_thread, 1)
    dims = list(op.dims)
    blocked = block.is_large(op)
    op = op.replace(num_threads=num_threads)
    tiled = blocked and block.thread_tiles(op) is not None
    vector = op.is_matrix_vector
    iterations = 1
    for dim in dims:
        if dim.exec_type == "shared":
            iterations *= dim.size
    target = iterations_per_thread * num_threads if num_threads > 1 else 1
    order = list(range(len(dims)))
    if slabs_of_out(op):
        order.sort(key=lambda index: -dims[index].stride_out)
    placed, inside_k, done = [], False, False
    for position in order:
        dim = dims[position]
        even = block.share_balance(iterations, num_threads) >= SHARE_BALANCE
        done = done or iterations >= target and even or (
            (dim.type == "k" or inside_k and vector) and blocked and iterations >= num_threads)
        if (not done and dim.exec_type == "seq" and dim.type != "k" and dim.size > 1
                and dim.stride_out != 0):
            outer = None
            if inside_k and vector:
                wanted = -(-(num_threads if blocked else target) // iterations)
                outer = _threads_part(dim.size, wanted, num_threads, iterations)
            elif inside_k and blocked and dim.type == "m" and tiled:
                outer = block.m_groups(op, iterations, dim.size)
                if outer == 1:          # the panels alone share best: m stays whole
                    placed.append((position, dim))
                    continue
                outer = None if outer == dim.size else outer
            if outer is None:
                dim = dim.with_(exec_type="shared")
                iterations *= dim.size
            else:
                placed.append((position, Dim(dim.type, "shared", outer, *(
                    stride * (dim.size // outer) for stride in dim.strides))))
                dim = dim.with_(size=dim.size // outer)
                iterations *= outer
        inside_k = inside_k or dim.type == "k" and dim.exec_type == "seq"
        placed.append((position, dim))
    # the shared dims in the order they were taken, the others where reorder put them
    dims = [d for _, d in placed if d.exec_type == "shared"] + \
           [d for _, d in sorted(placed, key=lambda pair: pair[0]) if d.exec_type != "shared"]
    return op.replace(dims=dims)


def slabs_of_out(op: TensorOperation) -> bool:
    """Whether the threads share a contraction's loops by out's strides, the largest first,
    each thread then writing a slab of out whose pages no other thread writes: where in0 is
    within half of L2, so that a thread's n blocks reread it from there (not a large
    contraction, not a matrix times a vector: their own rules). Elsewhere the loops are
    shared in reorder's order, m before n, each m block's rows of in0 serving every n block."""
    if op.kind != "contraction" or block.is_large(op) or op.is_matrix_vector:
        return False
    in0_bytes = op.total("m") * op.total("k") * np.dtype(op.dtype).itemsize
    return in0_bytes <= op.target.micro.l2_bytes // 2


def _threads_part(size: int, wanted: int, threads: int, iterations: int) -> int | None:
    """The outer part to share of a loop of `size` inside a k loop, `iterations` shared
    outside it: its smallest divisor of at least `wanted` iterations that leaves an inner part
    and gives every thread as many; None where there is none."""
    return next((d for d in range(wanted, size)
                 if size % d == 0 and d * iterations % threads == 0), None)
