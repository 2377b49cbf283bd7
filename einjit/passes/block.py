"""Cache blocking of a large contraction: the sizes that split cuts it to and the order that
reorder walks it in. (A matrix times a vector, n of 1, reads A once: its blocks are long runs
of few columns instead, VECTOR_MAX_SIZE, fewer from beyond the last-level cache or at a pitch
that crowds L1's sets; a vector times a matrix beyond L2, m of 1, reads a few long rows of it
a call, ROWS_MAX_SIZE, K in whole vectors: peel.)

Walked m-outermost (reorder's order), a contraction keeps one block row of A, the kernel's
rows over the whole of K, in L2 while every n block passes it. The contraction is large when
that block row outgrows a quarter of L2 (the rest is left to B's and C's blocks and to what
the hardware prefetchers bring ahead; docs/measurements.md): its rows are those of A's
unit-stride m dim, as many as split leaves in one block. That holds where the blocked loops
get full blocks: rows of a whole m block and kernel calls of at least a k chunk (the k dims
contiguous in B, kernel_k). Where they cannot (a tensor's 25 rows before a strided m dim, a
16-long k dim before a strided one), their short calls cost more than the block row held in
L2 (docs/measurements.md), and the contraction is large only once that row outgrows L2.
The m-outermost walk reads the whole of B once per block row of A: where the last-level
cache lies across a mesh (Microarch.far_llc), a B that outgrows L2 comes from there for
every block row at a higher cost than the blocked walk's, and the contraction is large too
unless its C outgrows the last-level cache (the blocked walk reads C once per k chunk, from
memory there; docs/measurements.md, "B beyond L2 on a far last-level cache").
A large contraction runs instead as the loops of a GotoBLAS GEMM, the kernel's own loops
inside:

    for each panel of nc columns of n:           (outermost; each thread gets panels)
      for each chunk of kc along k:
        for each block of mc rows of m:          (innermost loop of the nest)
          BRGEMM mc x nc x kc                    (register blocks of A's rows, B's columns)

B's panel, kc x nc, stays in L2 while every block of A's rows passes it; within a call a
block row of A, kc columns, stays in L1 while the kernel sweeps the panel's columns.

- kc: two lines of each of kc columns fill half of L1 (a block row of A, two vectors high,
  holds two lines of every column it reads), a third where the core's full-width zmm FMAs
  read A's block row faster than L2 refills L1 (Microarch.k_chunk_l1_parts);
- nc: B's panel, at the half-L1 chunk's k (panel_k), fills at most a quarter of L2 (a
  larger one leaves too little of it to A's block and C's, docs/measurements.md), at least
  split's default; where A's columns lie a conflict pitch apart, so that every panel copies
  A's blocks again, up to half of L2 while a quarter holds fewer than PANEL_LEAST_COLUMNS
  columns;
- mc: split's default.
The sizes are maxima: split takes the largest divisor of each dim within them (n's of any
size), and peel cuts m into whole blocks and a rest where that makes fewer blocks.

On several threads each thread takes tiles of C, a panel's columns by a group of the m
blocks, each walked as above over the whole of K: the panels are shared and, where they are
fewer than the threads, the m loop by an outer part (einjit.passes.shared). A tile's copies
of A's blocks (once per call, over the panel's columns) and of B's panel (once per k chunk,
over the tile's rows) cost it about as much as TILE_EDGE_COST more columns and rows: thin
panels of many threads lose to them what the busiest thread gains (tile_cost). The panels
and groups are those of the least tile_cost among the tilings that keep MIN_BALANCE of the
threads' time busy (thread_tiles); where none does, the panels are a multiple of the threads
in number, each thread taking whole ones, and einjit.passes.balance cuts finer blocks. On
one thread: the widest panels, the whole m.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from math import isqrt

import numpy as np

from einjit.backends import LINE_BYTES
from einjit.limits import BRGEMM_LIMITS
from einjit.runtime.threads import default_threads

DEFAULT_MAX_SIZE = {"m": 128, "n": 64, "k": 512, "c": None}      # split's, for a contraction
# a matrix times a vector (n of 1): long runs of each of a few columns of A, read once, so
# that the hardware prefetchers follow them (docs/measurements.md); C's block stays in L1
VECTOR_MAX_SIZE = {"m": BRGEMM_LIMITS["m"], "n": 1, "k": 16, "c": None}
# ... and half as many columns at once where the matrix fills three quarters of the
# last-level cache or more (what else runs takes the rest: it comes from memory): streams from
# memory outrun the prefetchers sooner; or where A's columns lie at a pitch that puts more of
# VECTOR_MAX_SIZE's columns in one of L1's sets than it has ways (a multiple of 4 KiB puts all
# of them in one), each k-step's lines evicting the next block's (docs/measurements.md)
VECTOR_FROM_MEMORY_K = 8

# a vector times a matrix beyond L2, read along K (m of 1: sums and products of rows): dot
# products of a few long rows at a time, each a run the hardware prefetchers follow (more at
# once outrun them, and at a pitch of a power of two share the caches' sets), K in whole
# vectors of ROWS_K_MULTIPLE (the kernels take such dot products a vector of K at a time)
ROWS_MAX_SIZE = {"m": 1, "n": 16, "k": BRGEMM_LIMITS["k"], "c": None}
ROWS_K_MULTIPLE = 16


def block_rows(op) -> int:
    """The rows of one block of A, at most split's default: the rows contiguous in in0 and
    out along its m dims, from the unit-stride one on (the kernel's M, which split may have
    cut into parts: the outer part continues the inner one)."""
    rows, grown = 1, True
    while grown:
        grown = False
        for dim in op.dims:
            if dim.type == "m" and dim.size > 1 and dim.stride_in0 == dim.stride_out == rows:
                rows *= dim.size
                grown = True
    return min(rows, DEFAULT_MAX_SIZE["m"])


def kernel_k(op) -> int:
    """The k steps one kernel call can take: the k dims contiguous in in1 from its unit-stride
    one on, each continuing the one before in in0 too (split may have cut them into parts)."""
    steps, column, grown = 1, None, True
    while grown:
        grown = False
        for dim in op.dims:
            if dim.type == "k" and dim.size > 1 and dim.stride_in1 == steps and \
                    (column is None or dim.stride_in0 == column * steps):
                column = dim.stride_in0 if column is None else column
                steps *= dim.size
                grown = True
    return steps


# a thread's tile of C costs about as much as one this many rows and columns larger would
# without copies: A's blocks copied per call, B's panel per k chunk (docs/measurements.md,
# "Threads' tiles of a large contraction")
TILE_EDGE_COST = 16
#: the least share of the threads' time a plan keeps busy (einjit.passes.balance cuts finer
#: blocks where it is not; tiles of C are taken only where they keep it)
MIN_BALANCE = 0.9


def share_balance(tasks: int, threads: int) -> float:
    """The share of `threads` threads' time that `tasks` equal tasks, split in contiguous
    shares that differ by one task at most, keep busy (1: even shares)."""
    return tasks / (threads * -(-tasks // threads))


# every panel copies A's blocks again where their columns lie a conflict pitch apart (the
# copy, from L3 or memory, is not hidden behind the kernel's work as a prefetched stream is):
# a panel of fewer columns spends more on those copies than a panel of up to half of L2 loses
# to B's lines crowding it (docs/measurements.md)
PANEL_LEAST_COLUMNS = 512


def _divisors(size: int) -> list[int]:
    return sorted({d for low in range(1, isqrt(size) + 1) if size % low == 0
                   for d in (low, size // low)})


def tile_cost(panels: int, groups: int, threads: int, columns: int, rows: int) -> float:
    """The busiest thread's time, in units of the contraction's work, where `threads` share
    panels x groups tiles of C (`columns` and `rows` cut into that many) in runs of
    consecutive tiles: its tiles' share of the work, their edges' cost added."""
    tiles = panels * groups
    return -(-tiles // threads) / tiles * (1 + TILE_EDGE_COST * (panels / columns +
                                                                  groups / rows))


@lru_cache(maxsize=1024)
def _tiles(threads: int, columns: int, rows: int, panel_counts: tuple[int, ...], blocks: int
           ) -> tuple[int, int] | None:
    """(panels, m groups) of the least tile_cost among `columns` cut into each of
    `panel_counts` and the `blocks` m blocks into groups of a divisor, of those that keep
    MIN_BALANCE of the threads' time only (the fewest groups, then panels, where equal); None
    where none does."""
    balanced = [(panels, groups) for panels in panel_counts for groups in _divisors(blocks)
                if share_balance(panels * groups, threads) >= MIN_BALANCE]
    if not balanced:
        return None
    return min(balanced, key=lambda tile: (round(tile_cost(*tile, threads, columns, rows), 9),
                                           tile[1], tile[0]))


def thread_tiles(op) -> tuple[int, int] | None:
    """A large contraction's tiles of C for its threads (see the module doc): (nc, the number
    of groups its m blocks are shared in; their count estimated as whole blocks of split's
    default), None on one thread or where no tiling keeps MIN_BALANCE (the threads then take
    whole panels of the widest width that shares evenly, and balance cuts finer blocks)."""
    threads = op.num_threads or default_threads()
    if threads == 1 or not is_large(op):
        return None
    n, m = op.total("n"), op.total("m")
    least = min(DEFAULT_MAX_SIZE["n"], n)
    counts = tuple(n // width for width in reversed(_divisors(n))
                   if least <= width <= _widest_panel(op))
    tiles = _tiles(threads, n, m, counts, -(-m // DEFAULT_MAX_SIZE["m"]))
    return None if tiles is None else (n // tiles[0], tiles[1])


def m_groups(op, panels: int, blocks: int) -> int | None:
    """The groups a large contraction's threads share its `blocks` m blocks in (a divisor),
    `panels` n panels shared outside them: the least tile_cost that keeps MIN_BALANCE, None
    where none does (see thread_tiles)."""
    tiles = _tiles(op.num_threads or default_threads(), op.total("n"), op.total("m"),
                   (panels,), blocks)
    return None if tiles is None else tiles[1]


def _widest_panel(op) -> int:
    """nc at most: B's kc x nc panel a quarter of L2; where A's columns lie a multiple of the
    core's conflict pitch apart (the nest copies A's block for every call), up to half of it
    while a quarter holds fewer than PANEL_LEAST_COLUMNS; at least split's default."""
    micro = op.target.micro
    column_bytes = panel_k(micro) * np.dtype(op.dtype).itemsize
    widest = micro.l2_bytes // 4 // column_bytes
    if micro.crowds(_a_pitch_bytes(op)):
        widest = max(widest, min(PANEL_LEAST_COLUMNS, micro.l2_bytes // 2 // column_bytes))
    return max(DEFAULT_MAX_SIZE["n"], widest)


def _a_pitch_bytes(op) -> int:
    """The bytes between A's columns: the least in0 stride of the op's k dims (0: none)."""
    return np.dtype(op.dtype).itemsize * min(
        (d.stride_in0 for d in op.dims if d.type == "k" and d.stride_in0), default=0)


def _l1_chunk(micro, parts: int) -> int:
    """The columns whose two lines each fill one of `parts` parts of L1."""
    return micro.l1_bytes // (parts * 2 * LINE_BYTES)


def k_chunk(micro) -> int:
    """kc: two lines of each of kc columns fill one of the core's k_chunk_l1_parts of L1."""
    return _l1_chunk(micro, micro.k_chunk_l1_parts)


def panel_k(micro) -> int:
    """The k chunk B's panel is sized by: two lines of each of its columns fill half of L1
    (where k_chunk is shorter, the panel keeps that width: wider ones measured slower,
    docs/measurements.md, "kc on Sapphire Rapids")."""
    return _l1_chunk(micro, 2)


def vector_rows(op) -> int:
    """The rows of a matrix times a vector's blocks: VECTOR_MAX_SIZE's, or on several threads
    the largest divisor of the kernel's m dim within it whose blocks the threads share evenly
    (each thread reads its rows in long runs, einjit.passes.shared), at least a tenth of it."""
    most = VECTOR_MAX_SIZE["m"]
    threads = op.num_threads or default_threads()
    rows = max((d.size for d in op.dims if d.type == "m" and d.stride_in0 == d.stride_out == 1),
               default=0)
    if threads == 1 or rows <= most:
        return most
    return next((b for b in range(most, most // 10, -1)
                 if rows % b == 0 and rows // b % threads == 0), most)


def _crowds_l1_sets(micro, pitch_bytes: int, columns: int) -> bool:
    """Whether `columns` columns pitch_bytes apart put more lines in one of L1's sets than it
    has ways."""
    lines = {j * pitch_bytes // LINE_BYTES for j in range(columns)}
    sets = Counter(line % micro.l1_sets for line in lines)
    return max(sets.values()) > micro.l1_ways


def is_large(op) -> bool:
    """Whether a contraction is blocked for the caches (see the module doc)."""
    if op.kind != "contraction":
        return False
    micro = op.target.micro
    rows = block_rows(op)
    itemsize = np.dtype(op.dtype).itemsize
    row_bytes = rows * op.total("k") * itemsize
    full_blocks = rows == DEFAULT_MAX_SIZE["m"] and kernel_k(op) >= k_chunk(micro)
    if not full_blocks:
        return row_bytes > micro.l2_bytes
    b_bytes = op.total("k") * op.total("n") * itemsize
    c_bytes = op.total("m") * op.total("n") * itemsize
    return row_bytes > micro.l2_bytes // 4 or (
        micro.far_llc and b_bytes > micro.l2_bytes and c_bytes <= micro.llc_bytes)


def is_along_rows(op) -> bool:
    """Whether a contraction is a matrix times a vector whose out runs along the matrix's rows
    (n of 1, the innermost m dim unit-stride in in0): its m loops inside its k loops read the
    matrix row after row (einjit.passes.reorder)."""
    rows = [d for d in op.dims if d.type == "m" and d.size > 1]
    return op.is_matrix_vector and bool(rows) and min(d.stride_in0 for d in rows) == 1


def is_rows(op) -> bool:
    """Whether a contraction is a vector times a matrix beyond L2 (see ROWS_MAX_SIZE)."""
    if op.kind != "contraction":
        return False
    matrix = op.total("n") * op.total("k") * np.dtype(op.dtype).itemsize
    return op.total("m") == 1 < op.total("n") and matrix > op.target.micro.l2_bytes


def max_sizes(op) -> dict[str, int | None]:
    """The largest block of each dim type a contraction is split into: VECTOR_MAX_SIZE for a
    matrix times a vector (k VECTOR_FROM_MEMORY_K from 3/4 of llc_bytes), ROWS_MAX_SIZE for a
    vector times a matrix beyond L2, split's defaults, or for a large one its cache blocks
    (see the module doc)."""
    if op.is_matrix_vector:
        micro = op.target.micro
        matrix = op.total("m") * op.total("k") * np.dtype(op.dtype).itemsize
        few = (4 * matrix > 3 * micro.llc_bytes
               or _crowds_l1_sets(micro, _a_pitch_bytes(op), VECTOR_MAX_SIZE["k"]))
        k = VECTOR_FROM_MEMORY_K if few else VECTOR_MAX_SIZE["k"]
        return dict(VECTOR_MAX_SIZE, m=vector_rows(op), k=k)
    if is_rows(op):
        return dict(ROWS_MAX_SIZE)
    if not is_large(op):
        return dict(DEFAULT_MAX_SIZE)
    threads = op.num_threads or default_threads()
    tiles = thread_tiles(op)
    if tiles is None:       # panels a multiple of the threads in number
        n = op.total("n")
        panels = -(-n // (_widest_panel(op) * threads)) * threads
        nc = max(DEFAULT_MAX_SIZE["n"], n // panels)
    else:
        nc = tiles[0]
    return {"m": DEFAULT_MAX_SIZE["m"], "n": nc, "k": k_chunk(op.target.micro), "c": None}
