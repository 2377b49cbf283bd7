"""Peeling: a contraction whose kernel dims split cannot cut into large blocks becomes
several operations, a main part whose dims split well and the remainders.

split cuts a dim only into equal blocks, a divisor of its size. A dim with no large divisor
(a prime such as 1999, twice a prime) would leave the kernel tiny blocks (1 x 1 x 1999 GEMMs
for a 1999³ product) or one block far larger than the caches. Such a dim, one of the three
the kernel will cover (identify: m with unit stride in in0 and out, k with unit stride in
in1, the n with the smallest stride in out), is cut instead into

    main: the largest multiple of its block (its maximum size, to whole vectors or quads)
    rest: the remainder, smaller than one block, as one block

and each part is peeled again where another of its dims splits badly (at most 8 parts). Badly:
into blocks below a quarter of the dim's maximum; for the m dim, into blocks whose kernel
computes in narrower vectors than the target has (the backend's brgemm_vector_bits: Zen 4
takes AVX2 code for an M with a tail, which in a nest runs far slower than whole AVX-512
vectors, docs/measurements.md), or that fill their vectors less than another divisor's
would (split took the full width over them: split.gives_up_occupancy): 700 rows of float32
run as 5 blocks of 128 and a rest of 60 rather than 10 blocks of 70, 1000 as 7 blocks of 128
and a rest of 104 rather than 8 blocks of 125; for the m dim of a large contraction
(block.is_large), whose every block rereads B's panel, into more blocks than the parts would
take (130 rows stay 2 blocks of 65 where their kernels take the target's vectors); for its k
dim, whose every chunk rereads C's blocks, into chunks below half of kc (a K of 305 runs as
256 and 49, not 5 chunks of 61). The k dim of a vector times a matrix beyond L2
(block.is_rows) is peeled to whole vectors of block.ROWS_K_MULTIPLE (its kernels take K a
vector at a time), whatever its blocks. The parts
are the same operation over a range of that dim, reading and writing from offsets. An m or n
dim's parts write disjoint blocks of out; a k dim's rest adds to what its main part wrote
(first touch "none"), so the parts run in their order.
"""

from __future__ import annotations

from dataclasses import dataclass

from einjit.ir import Dim, TensorOperation
from einjit.passes.block import ROWS_K_MULTIPLE, is_large, is_rows
from einjit.passes.fuse import fuse
from einjit.passes.split import DIVISORS, block_size, full_width, gives_up_occupancy, max_sizes

#: a dim is peeled where split's blocks of it would be smaller than its maximum over this
POOR_BLOCK_SHARE = 4
#: the same for the k chunks of a large contraction (block.is_large), each of which rereads
#: C's blocks
LARGE_POOR_K_SHARE = 2


@dataclass(frozen=True)
class Part:
    """One operation of a peeled one and the element offsets of its in0, in1 and out from
    the whole operation's."""
    op: TensorOperation
    offsets: tuple[int, int, int] = (0, 0, 0)


def _kernel_dims(op: TensorOperation) -> list[int]:
    """The positions of the dims identify will give the kernel's m, k and n (those it finds)."""
    dims = op.dims
    m = [i for i, d in enumerate(dims) if d.type == "m" and d.stride_in0 == d.stride_out == 1]
    k = [i for i, d in enumerate(dims) if d.type == "k" and d.stride_in1 == 1]
    n = [i for i, d in enumerate(dims) if d.type == "n" and d.stride_in0 == 0]
    largest = lambda i: (-dims[i].size, -i)        # noqa: E731 (identify's order)
    chosen = [min(m, key=largest)] if m else []
    chosen += [min(k, key=largest)] if k else []
    chosen += [min(n, key=lambda i: (dims[i].stride_out, -dims[i].size))] if n else []
    return chosen


def _poor(op: TensorOperation, dim: Dim) -> int | None:
    """The block to peel `dim` by where split would cut it into poor blocks (or keep it whole
    beyond its maximum), else None."""
    limit = max_sizes(op, None)[dim.type]
    if dim.type == "k" and dim.exec_type == "undefined" and is_rows(op) and \
            dim.size % ROWS_K_MULTIPLE and dim.size > ROWS_K_MULTIPLE:
        return ROWS_K_MULTIPLE          # the main part's K in whole vectors
    if limit is None or dim.size <= limit or dim.exec_type != "undefined":
        return None
    block = block_size(op, dim)
    multiple = DIVISORS[dim.type][0]
    whole = max(multiple, limit // multiple * multiple)
    if block > limit:
        return whole
    if dim.type == "m" and not op.is_matrix_vector and (
            not full_width(op, block) or gives_up_occupancy(op, dim)):
        return whole        # whole blocks in full vectors, the rest alone in narrower ones
    if dim.type == "m" and is_large(op):
        # each m block rereads B's panel: peeled where that makes fewer of them
        return whole if -(-dim.size // whole) < dim.size // block else None
    share = LARGE_POOR_K_SHARE if dim.type == "k" and is_large(op) else POOR_BLOCK_SHARE
    return None if block * share >= limit else whole


def _range(op: TensorOperation, index: int, start: int, size: int, accumulate: bool) -> Part:
    """`op` over [start, start + size) of its dim at `index`."""
    dim = op.dims[index]
    dims = list(op.dims)
    dims[index] = dim.with_(size=size)
    first = "none" if accumulate else op.prim_first_touch
    return Part(op.replace(dims=dims, prim_first_touch=first),
                tuple(start * stride for stride in dim.strides))


def _shifted(part: Part, offsets: tuple[int, int, int]) -> Part:
    return Part(part.op, tuple(a + b for a, b in zip(part.offsets, offsets)))


def peel(op: TensorOperation, num_threads: int | None = None) -> tuple[Part, ...]:
    """The parts of `op` (fused, not yet optimized) in the order they run: one, itself
    (fused), where no kernel dim splits badly (see the module doc)."""
    if num_threads is not None:
        op = op.replace(num_threads=num_threads)      # the cache blocks are sized for them
    op = fuse(op)
    if op.kind != "contraction":
        return (Part(op),)
    # a k dim's parts add up in out: only where nothing reads out between them
    summable = op.prim_first_touch in ("zero", "none") and op.prim_last_touch == "none"
    for index in _kernel_dims(op):
        dim = op.dims[index]
        block = _poor(op, dim)
        if block is None or dim.type == "k" and not summable:
            continue
        main = dim.size // block * block
        if main == dim.size:            # whole blocks after all: nothing to peel
            continue
        accumulate = dim.type == "k" and op.prim_first_touch != "none"
        pieces = (_range(op, index, 0, main, False),
                  _range(op, index, main, dim.size - main, accumulate))
        return tuple(_shifted(inner, piece.offsets)
                     for piece in pieces for inner in peel(piece.op))
    return (Part(op),)
