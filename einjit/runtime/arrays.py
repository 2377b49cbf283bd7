"""Result and intermediate arrays aligned for the kernels' non-temporal stores.

numpy's large allocations start 16 bytes into a page (malloc's header), so a zmm store to
their first element is not 64-byte aligned, and a BRGEMM asked to stream C (see
einjit.codegen.loop_nest.STREAM_OUT_BYTES) falls back to cached stores. Arrays of
ALIGN_FROM_BYTES and more are carved out of a slightly larger buffer at a 64-byte boundary;
smaller ones are plain np.empty (they never stream, and the view costs a microsecond).
"""

from __future__ import annotations

import math

import numpy as np

ALIGNMENT = 64                  # a cache line, a zmm register
ALIGN_FROM_BYTES = 1 << 20


def aligned_empty(shape, dtype, order: str = "C") -> np.ndarray:
    """np.empty(shape, dtype, order) ("C" or "F"), its data 64-byte aligned when large. On the
    call path of every einsum: math.prod, not np.prod (5 us on a 4x4 result)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < ALIGN_FROM_BYTES:
        return np.empty(shape, dtype, order=order)
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape, order=order)
