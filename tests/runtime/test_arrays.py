"""aligned_empty: np.empty's shape, dtype and order; large arrays start on a 64-byte line."""

import numpy as np
import pytest

from einjit.runtime.arrays import ALIGN_FROM_BYTES, ALIGNMENT, aligned_empty


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(), (0,), 7, (3, 5), (ALIGN_FROM_BYTES // 8 + 3,),
                                   (513, 3, 171)])
def test_aligned_empty_is_np_empty_aligned_when_large(shape, order, dtype):
    got, like = aligned_empty(shape, dtype, order), np.empty(shape, dtype, order=order)
    assert (got.shape, got.dtype, got.strides) == (like.shape, like.dtype, like.strides)
    assert got.flags.writeable and got.flags["C_CONTIGUOUS" if order == "C" else "F_CONTIGUOUS"]
    if got.nbytes >= ALIGN_FROM_BYTES:
        assert got.ctypes.data % ALIGNMENT == 0
    got[...] = 1             # every byte is its own: writing it all stays inside the buffer
    assert got.sum() == got.size
