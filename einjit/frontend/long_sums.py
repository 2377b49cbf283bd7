"""Long reductions summed in chunks, for accuracy.

A kernel adds the terms of one output element one after the other into an accumulator, and a
loop over the rest of the reduction adds each kernel call's sum into the output: a sum of n
terms then carries rounding errors growing with n (a stride-0 or strided reduced dim adds one
term a call). numpy.einsum sums at most a buffer's length into a fresh accumulator; einjit
does better: a node that sums more than LONG_SUM terms into each output element, and whose
own operation (einjit.optimize's blocking) would chain more than LONG_CHAIN of them, becomes

    partials[chunk, out...] = the sum of one chunk of at most CHUNK terms (a fresh sum each)
    out = the sum of partials over its chunks (chunked again when more than CHUNK)

so that no accumulation chain is longer than CHUNK terms at any level and the error grows
with the number of levels, log(n) / log(CHUNK), rather than with n. The chunks are whole
reduced dims (the outermost in memory) and, where those do not fit, one reduced dim cut into
pieces of `length` indices; its last, shorter piece is a step of its own, reading the
operands from an offset and writing the last row of the partials.

The same chunks give threads work where a contraction's output is too small to (`starved`):
its chunks' partial sums are a batch the threads share, then summed. And a matrix times a
vector along the matrix's rows (n of 1, numpy's `x @ A`: block.is_along_rows), whose threads
would each read a short run of every row (`rows_cut`), is summed in chunks of whole rows,
as many as the threads share (`row_chunks`: the shared pass's iterations,
einjit.passes.shared).

The partial sums buffer holds at most PARTIALS_LIMIT elements (chunks are longer where the
output is large); a node whose output alone is that large keeps its single step (its kernels'
K blocks and the blocked sums of a GEMM are its chunks)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from einjit.frontend.lower import Tensor
from einjit.frontend.rewrite import dense_strides
from einjit.ir import TensorOperation
from einjit.passes.balance import MIN_BALANCE, balance
from einjit.passes.block import is_along_rows
from einjit.passes.shared import DEFAULT_ITERATIONS_PER_THREAD

#: a node summing more terms than this into each output element (numpy.einsum's buffer
#: length) is summed in chunks where its own operation has chains longer than LONG_CHAIN
LONG_SUM = 1 << 13
LONG_CHAIN = 1 << 10
#: terms one accumulation chain of a chunked sum sums at most (the chunk length)
CHUNK = 1 << 9
#: elements of the partial sums buffer at most
PARTIALS_LIMIT = 1 << 22
#: flops per thread below which a starved contraction stays as it is (its sums in chunks
#: cost a partial sums buffer and one more step)
STARVED_MIN_FLOPS = 1 << 22
#: a thread's run of each row of a matrix times a vector shorter than this is read slower
#: than whole rows (the hardware prefetchers follow a short run only so far)
ROW_RUN_BYTES = 16 << 10
#: flops per thread below which a matrix times a vector keeps its rows cut: the partial sums
#: cost a buffer and one more step
ROWS_MIN_FLOPS = 1 << 18
#: rows a chunk of a matrix times a vector sums at least, per thread: the sum of the partial
#: sums, which may run on one thread, then reads at most an eighth of what each thread reads
#: of the matrix
CHUNK_ROWS_PER_THREAD = 8


def starved(op: TensorOperation, threads: int) -> bool:
    """Whether an optimized contraction for `threads` threads leaves too many of them idle
    (its blocks at their smallest, einjit.passes.balance), with work enough for each."""
    if threads < 2 or op.kind != "contraction":
        return False
    flops = 2 * math.prod(d.size for d in op.dims)
    return balance(op) < MIN_BALANCE and flops >= threads * STARVED_MIN_FLOPS


def rows_cut(op: TensorOperation, threads: int) -> bool:
    """Whether the threads of an optimized matrix times a vector along its rows
    (einjit.passes.block.is_along_rows) each read runs of every row
    shorter than ROW_RUN_BYTES, with work enough for a sum in chunks and chunks long enough
    for a cheap sum of their partial sums (CHUNK_ROWS_PER_THREAD)."""
    if threads < 2 or op.kind != "contraction" or not is_along_rows(op):
        return False
    rows = [d for d in op.dims if d.type == "m" and d.size > 1]
    shares = math.prod(d.size for d in rows if d.exec_type == "shared")
    if shares < 2:
        return False
    run = math.prod(d.size for d in rows) // shares * np.dtype(op.dtype).itemsize
    flops = 2 * math.prod(d.size for d in op.dims)
    chunk_rows = op.total("k") // row_chunks(threads)
    return (run < ROW_RUN_BYTES and flops >= threads * ROWS_MIN_FLOPS
            and chunk_rows >= CHUNK_ROWS_PER_THREAD * threads)


def row_chunks(threads: int) -> int:
    """The chunks of a matrix times a vector whose rows the threads would cut (rows_cut): as
    many as the shared pass shares iterations, so that it shares the chunks alone."""
    return DEFAULT_ITERATIONS_PER_THREAD * threads


@dataclass(frozen=True)
class Part:
    """One step of a chunked sum: `inputs` (the node's children, re-dimmed) into `out`
    (the partial sums buffer), each read or written from an element offset."""
    inputs: tuple[Tensor, ...]
    out: Tensor
    input_offsets: tuple[int, ...]
    out_offset: int


@dataclass(frozen=True)
class Chunked:
    """A long sum as `parts` writing the partial sums buffer (`partials`, dense, of
    `partials_size` elements), then `partials` summed into the node's output. Dim ids past
    the node's sizes are new: `sizes` gives every dim's size."""
    sizes: tuple[int, ...]
    parts: tuple[Part, ...]
    partials: Tensor
    partials_size: int


def summed_terms(children: Sequence[Tensor], out: Tensor, sizes: Sequence[int]) -> int:
    """Terms summed into each output element: the product of the reduced dims' sizes."""
    reduced = {d for c in children for d in c.dims if d not in out.dims}
    return math.prod(sizes[d] for d in reduced)


def accumulation_chain(op: TensorOperation) -> int:
    """Terms an accumulator of `op` sums one after the other: a kernel call's k dims (batch
    included), plus one a call along the loops over the other k dims (each call adds its sum
    into the output)."""
    inside = math.prod(d.size for d in op.dims if d.type == "k" and d.exec_type == "prim")
    calls = math.prod(d.size for d in op.dims if d.type == "k" and d.exec_type != "prim")
    return inside + calls - 1


def chunked(children: Sequence[Tensor], out: Tensor, sizes: Sequence[int],
            longest: int = LONG_SUM, pieces: int = 0) -> Chunked | None:
    """The chunked form of a node summing `children` into `out`, or None where its sums are
    short (at most `longest` terms: LONG_SUM for a node, CHUNK for the sum of its partial
    sums) or its output too large for a partial sums buffer. Chunks are CHUNK terms long, or
    where `pieces` is given as long as makes that many of them at most (and a last, shorter
    one where they do not divide the sum)."""
    sizes = tuple(sizes)
    total = summed_terms(children, out, sizes)
    out_size = math.prod(sizes[d] for d in out.dims)
    most = PARTIALS_LIMIT // max(out_size, 1)      # partial sums per output element at most
    if total <= longest or most < 2:
        return None
    chunk = CHUNK
    if pieces:          # at most `pieces` chunks: the floor's where its rest is shorter
        chunk = total // pieces if total % pieces < total // pieces else -(-total // pieces)
    chunk = max(chunk, -(-total // most))
    reduced = [d for d in dict.fromkeys(d for c in children for d in c.dims)
               if d not in out.dims and sizes[d] > 1]
    # outermost in memory first: whole outer dims become partials, an inner dim may be cut
    reduced.sort(key=lambda d: -max(c.stride(d) for c in children))
    whole: list[int] = []
    cut = None
    inner = total
    for dim in reduced:
        if inner <= chunk:
            break
        below = inner // sizes[dim]
        if below >= chunk:
            whole.append(dim)
            inner = below
        else:
            cut = (dim, chunk // below)
            break
    # the partials buffer: the chunk dims (outer), then out's dims from its largest stride
    out_order = sorted(out.dims, key=lambda d: -out.stride(d))
    if cut is None:
        dims = tuple(whole) + tuple(out_order)
        strides = dense_strides(dims, sizes)
        partials = Tensor(dims, tuple(strides[d] for d in dims))
        return Chunked(sizes, (Part(tuple(children), partials, (0,) * len(children), 0),),
                       partials, math.prod(sizes[d] for d in dims))
    dim, length = cut
    count, rest = divmod(sizes[dim], length)
    # new dims: the pieces (all of them, and those the main part computes), a piece's indices,
    # the last, shorter piece's indices
    pieces, computed, inside, tail = range(len(sizes), len(sizes) + 4)
    sizes = sizes + (count + (1 if rest else 0), count, length, max(rest, 1))
    dims = tuple(whole) + (pieces,) + tuple(out_order)
    strides = dense_strides(dims, sizes)
    partials = Tensor(dims, tuple(strides[d] for d in dims))
    main_out = Tensor(tuple(computed if d == pieces else d for d in dims),
                      tuple(strides[d] for d in dims))
    parts = [Part(tuple(_cut(c, dim, computed, inside, length) for c in children), main_out,
                  (0,) * len(children), 0)]
    if rest:        # the last piece: its own step, from offsets, into the last row
        tail_out = Tensor(tuple(d for d in dims if d != pieces),
                          tuple(strides[d] for d in dims if d != pieces))
        parts.append(Part(tuple(_renamed(c, dim, tail) for c in children), tail_out,
                          tuple(count * length * c.stride(dim) for c in children),
                          count * strides[pieces]))
    return Chunked(sizes, tuple(parts), partials, math.prod(sizes[d] for d in dims))


def _cut(tensor: Tensor, dim: int, pieces: int, inside: int, length: int) -> Tensor:
    """`tensor` with `dim` read as pieces of `length` indices: dims (pieces, inside)."""
    if dim not in tensor.dims:
        return tensor
    dims, strides = [], []
    for d, s in zip(tensor.dims, tensor.strides):
        if d == dim:
            dims += [pieces, inside]
            strides += [s * length, s]
        else:
            dims.append(d)
            strides.append(s)
    return Tensor(tuple(dims), tuple(strides))


def _renamed(tensor: Tensor, dim: int, new: int) -> Tensor:
    return Tensor(tuple(new if d == dim else d for d in tensor.dims), tensor.strides)
