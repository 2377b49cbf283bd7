"""Dimension splitting: cut dims too large for a kernel block into an outer and an inner dim.

A dim larger than the maximum size of its type is split into an outer dim of size s0 and an
inner dim of size s1 (s0·s1 = size; the outer dim's strides are s1 times the inner's), so the
inner part stays a large block the primitive can take. The inner size is the largest multiple
of a preferred divisor (m: 16, 12, 8, 4, 2 — full vector registers; n and k: 4, 2; then 1) that
divides the size, is at most the maximum, and leaves both parts at least `min_size`; without
such a split, the largest divisor <= the maximum. Example: 1600 with maximum 1024 and
min_size 16 gives 20 x 80 (not 2 x 800, a 2-iteration loop), and with maximum 32 (or up to
63) 50 x 32. In a contraction the outer part only needs 2 (CONTRACTION_OUTER_MIN_SIZE): 1600
gives 4 x 400 for k, 256 2 x 128 for m.

A contraction's m dim (the rows the kernel vectorizes) instead takes a divisor whose kernel
computes in the target's full width, then the one that fills the most of its vectors at the
core's full-rate width (occupancy_split; a core whose full rate is 256 bits holds 8 float32
rows a vector): 980 gives 14 x 70, not 35 x 28, whose 28-row blocks leave vectors part empty
(docs/measurements.md, "m split by vector occupancy").

The outer part is inserted before the dim (before the first prim dim when the dim is prim, as
a "seq" dim; an undefined dim's outer part stays "undefined"); shared dims are not split. A
size with no divisor <= the maximum (a large prime) stays whole: primitive identification
then leaves it to a seq loop.

Default maxima (elements) give the kernels large blocks within their limits
(einjit.limits.BRGEMM_LIMITS, ELTWISE_LIMITS): contractions m 128, n 64, k 512, a large one
its cache blocks (einjit.passes.block; c dims of a contraction are never prim: not split);
element-wise ops 1024 for every type. A large contraction's n panel takes the largest divisor
within its cache block, of any size (the kernel sweeps whatever N it is given).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from math import prod

import numpy as np

from einjit.backends import backend
from einjit.errors import OperationError, OperationTypeError
from einjit.ir import Dim, TensorOperation
from einjit.ir.dims import DIM_TYPES, check_int
from einjit.passes import block

ELTWISE_MAX_SIZE = {"c": 1024, "m": 1024, "n": 1024, "k": None}
DEFAULT_MIN_SIZE = 16
# the outer part of a contraction's dim may be short: a few iterations of large blocks beat
# many of small ones, and the shared pass finds the threads their iterations across several
# dims (docs/measurements.md, "Short outer parts of contraction dims")
CONTRACTION_OUTER_MIN_SIZE = 2
DIVISORS = {"m": (16, 12, 8, 4, 2, 1), "n": (4, 2, 1), "k": (4, 2, 1), "c": (16, 8, 4, 2, 1)}


def largest_multiple_split(divisor: int, size: int, max_size: int, min_size: int,
                           outer_min_size: int | None = None) -> tuple[int, int] | None:
    """(size // s1, s1) for the largest multiple s1 of `divisor` with s1 <= max_size that
    divides `size` and leaves the inner part >= min_size and the outer part >= outer_min_size
    (default: min_size); None if there is none."""
    least = max(min_size, 2)      # a part of size 1 is no split
    outer_least = least if outer_min_size is None else max(outer_min_size, 2)
    if divisor > max_size or size < least:
        return None
    for inner in range(max_size // divisor * divisor, 0, -divisor):
        if size % inner == 0 and size // inner >= outer_least and inner >= least:
            return size // inner, inner
    return None


def best_split(size: int, max_size: int, dim_type: str, min_size: int = DEFAULT_MIN_SIZE,
               outer_min_size: int | None = None) -> tuple[int, int] | None:
    """(outer, inner) sizes for a dim of `size` > max_size, or None if no divisor fits; the
    outer part at least outer_min_size (default: min_size)."""
    for divisor in DIVISORS[dim_type]:
        found = largest_multiple_split(divisor, size, max_size, min_size, outer_min_size)
        if found:
            return found
    return largest_multiple_split(1, size, max_size, 1)


def occupancy_split(size: int, max_size: int, lanes: int, min_size: int,
                    outer_min_size: int, full_width: Callable[[int], bool] = lambda rows: True
                    ) -> tuple[int, int] | None:
    """(outer, inner) for a contraction's m dim: the divisor of `size` in [min_size, max_size]
    (outer part >= outer_min_size) whose kernel computes in the target's full width
    (`full_width(rows)`), then the one that fills the most of its vectors of `lanes` rows,
    then the largest. Zen 4 runs an M with a tail in AVX2 code, which in a loop nest is slower
    than smaller blocks of AVX-512 code (docs/measurements.md, "m split by vector
    occupancy"): 1000 rows of float32 give 8 x 125, not 25 x 40; 400 of float64 5 x 80, not
    4 x 100. 980 gives 14 x 70 (70 rows in 9 vectors of 8: 97%) where the divisor rule's
    multiple of 4 gives 35 x 28 (28 rows in 4 vectors: 88%)."""
    least, outer_least = max(min_size, 2), max(outer_min_size, 2)
    inner = [s for s in range(least, min(max_size, size // outer_least) + 1) if size % s == 0]
    if not inner:
        return None
    best = max(inner, key=lambda s: (full_width(s), occupancy(s, lanes), s))
    return size // best, best


def occupancy(rows: int, lanes: int) -> float:
    """The share of the lanes of its vectors of `lanes` rows that a block of `rows` fills."""
    return rows / (lanes * -(-rows // lanes))


def max_sizes(op: TensorOperation, max_size: int | Mapping | None) -> dict:
    """The maximum size per dim type: defaults by the op's kind, overridden by an int (every
    type) or a mapping {type: size or None}."""
    sizes = block.max_sizes(op) if op.kind == "contraction" else dict(ELTWISE_MAX_SIZE)
    if max_size is None:
        return sizes
    if isinstance(max_size, Mapping):
        for key, value in max_size.items():
            if key not in DIM_TYPES:
                raise OperationError(f"max_size key {key!r} is not a dim type; expected one of "
                                     f"{DIM_TYPES}")
            sizes[key] = None if value is None else check_int(f"max_size[{key!r}]", value, 1)
        return sizes
    if isinstance(max_size, bool) or not isinstance(max_size, int):
        raise OperationTypeError(f"max_size must be an int, a mapping of dim type to int, or "
                                 f"None; got {max_size!r}")
    value = check_int("max_size", max_size, 1)
    return {key: value for key in DIM_TYPES}


def full_width(op: TensorOperation, rows: int) -> bool:
    """Whether a BRGEMM kernel of `rows` rows computes in the op's target's full vector width
    (Zen 4 runs an M with a tail in AVX2 code)."""
    target = op.target
    k = prod(d.size for d in op.dims if d.type == "k")
    return backend(target.isa).brgemm_vector_bits(target, rows, k, op.dtype) >= target.vector_bits


def m_lanes(op: TensorOperation) -> int:
    """The rows one vector holds where the core runs it at full rate (Microarch.full_rate_bits)."""
    target = op.target
    return max(1, min(target.vector_bits, target.micro.full_rate_bits)
               // (8 * np.dtype(op.dtype).itemsize))


def gives_up_occupancy(op: TensorOperation, dim: Dim) -> bool:
    """Whether split's blocks of a contraction's m dim fill their vectors less than another
    divisor's would: it took a block in the target's full width over them (peel can have
    both: blocks of the maximum and a rest)."""
    limit, lanes = max_sizes(op, None)["m"], m_lanes(op)
    if limit is None or dim.size <= limit:
        return False
    fullest = occupancy_split(dim.size, limit, lanes, DEFAULT_MIN_SIZE,
                              CONTRACTION_OUTER_MIN_SIZE)
    return fullest is not None and \
        occupancy(block_size(op, dim), lanes) < occupancy(fullest[1], lanes)


def _cut(op: TensorOperation, dim: Dim, limit: int | None,
         min_size: int) -> tuple[int, int] | None:
    """(outer, inner) sizes split cuts `dim` of `op` into under `limit`, None: kept whole."""
    if limit is None or dim.size <= limit or dim.exec_type == "shared":
        return None
    outer_min_size = CONTRACTION_OUTER_MIN_SIZE if op.kind == "contraction" else None
    vector = op.is_matrix_vector
    if dim.type == "m" and op.kind == "contraction" and not vector:
        found = occupancy_split(dim.size, limit, m_lanes(op), min_size, outer_min_size,
                                lambda rows: full_width(op, rows))
        if found is not None:
            return found
    if dim.type == "n" and op.kind == "contraction" and block.is_large(op) or \
            dim.type == "m" and vector:
        # a large contraction's panel of B (the kernel sweeps any N) and a matrix times a
        # vector's rows (read once: long blocks count, not full vectors) take the largest
        # divisor within their block
        found = largest_multiple_split(1, dim.size, limit, min_size, outer_min_size)
        if found is not None:
            return found
    return best_split(dim.size, limit, dim.type, min_size, outer_min_size)


def block_size(op: TensorOperation, dim: Dim) -> int:
    """The size of `dim`'s blocks in `op` once split with the default sizes: its inner part,
    or the whole dim where split keeps it whole (within its maximum, or no divisor fits)."""
    found = _cut(op, dim, max_sizes(op, None)[dim.type], DEFAULT_MIN_SIZE)
    return dim.size if found is None else found[1]


def split(op: TensorOperation, max_size: int | Mapping | None = None,
          min_size: int = DEFAULT_MIN_SIZE) -> TensorOperation:
    """A new op whose dims larger than their type's maximum are split (see the module doc)."""
    limits = max_sizes(op, max_size)
    min_size = check_int("min_size", min_size, 1)
    dims = list(op.dims)
    index = 0
    while index < len(dims):
        dim = dims[index]
        found = _cut(op, dim, limits[dim.type], min_size)
        if found is None:
            index += 1
            continue
        outer_size, inner_size = found
        outer = Dim(dim.type, "seq" if dim.exec_type == "prim" else dim.exec_type, outer_size,
                    *(stride * inner_size for stride in dim.strides))
        dims[index] = dim.with_(size=inner_size)
        if dim.exec_type == "prim":
            position = next(i for i, d in enumerate(dims) if d.exec_type == "prim")
        else:
            position = index
        dims.insert(position, outer)
        # the outer part is looked at again (it may still be too large); the inner fits
        index = position
    return op.replace(dims=dims)
