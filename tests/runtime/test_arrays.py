"""aligned_empty: np.empty's shape, dtype and order; large arrays start on a 64-byte line;
very large ones reuse the buffers of dropped arrays (BUFFER_POOL), never one still viewed.
data_address: numpy's data pointer for every kind of array."""

import platform

import numpy as np
import pytest

import einjit
from einjit.runtime import arrays
from einjit.runtime.arrays import (
    ALIGN_FROM_BYTES,
    ALIGNMENT,
    POOL_FROM_BYTES,
    BufferPool,
    PoolSizeError,
    aligned_empty,
    data_address,
    pool_bytes,
)

LARGE = (POOL_FROM_BYTES // 4 + 5,)      # float32 elements: a pooled size


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(), (0,), 7, (3, 5), (ALIGN_FROM_BYTES // 8 + 3,),
                                   (513, 3, 171), (POOL_FROM_BYTES // 16, 3)])
def test_aligned_empty_is_np_empty_aligned_when_large(shape, order, dtype):
    got, like = aligned_empty(shape, dtype, order), np.empty(shape, dtype, order=order)
    assert (got.shape, got.dtype, got.strides) == (like.shape, like.dtype, like.strides)
    assert got.flags.writeable and got.flags["C_CONTIGUOUS" if order == "C" else "F_CONTIGUOUS"]
    if got.nbytes >= ALIGN_FROM_BYTES:
        assert got.ctypes.data % ALIGNMENT == 0
    got[...] = 1             # every byte is its own: writing it all stays inside the buffer
    assert got.sum() == got.size


@pytest.fixture
def pool(monkeypatch):
    """A fresh pool of 4 large buffers' room in place of the process's."""
    fresh = BufferPool(4 * (POOL_FROM_BYTES + 64))
    monkeypatch.setattr(arrays, "BUFFER_POOL", fresh)
    return fresh


def test_a_dropped_large_buffer_is_reused_and_a_viewed_one_is_not(pool):
    first = aligned_empty(LARGE, "float32")
    address = first.ctypes.data
    view = first[10:20]
    del first
    second = aligned_empty(LARGE, "float32")            # `view` still holds the first
    assert second.ctypes.data != address and pool.idle_bytes == 0
    del view
    assert pool.idle_bytes == LARGE[0] * 4 + ALIGNMENT
    third = aligned_empty(LARGE, "float32")
    assert third.ctypes.data == address and pool.idle_bytes == 0
    other = aligned_empty((LARGE[0] + 16,), "float32")  # another size: a new buffer
    assert other.ctypes.data not in (address, second.ctypes.data)


def test_the_pool_keeps_at_most_its_limit_dropping_the_least_recently_freed():
    pool = BufferPool(limit=250)
    buffers = [np.empty(100, np.uint8) for _ in range(3)]
    addresses = [b.ctypes.data for b in buffers]
    for raw in buffers:
        pool.give(raw)
    assert pool.idle_bytes == 200                        # the first one was dropped
    assert pool.take(100).ctypes.data == addresses[2]    # the most recently freed first
    assert pool.take(100).ctypes.data == addresses[1]
    assert pool.take(100).ctypes.data not in addresses
    pool.give(np.empty(300, np.uint8))                   # above the limit: not kept
    assert pool.idle_bytes == 0


def test_a_zero_pool_reuses_nothing(monkeypatch):
    monkeypatch.setattr(arrays, "BUFFER_POOL", BufferPool(0))
    first = aligned_empty(LARGE, "float32")
    assert first.ctypes.data % ALIGNMENT == 0
    del first
    assert arrays.BUFFER_POOL.idle_bytes == 0


@pytest.mark.parametrize("value", ["-1", "lots", "1.5"])
def test_pool_size_from_the_environment_is_checked(value):
    with pytest.raises(PoolSizeError, match=f"EINJIT_POOL_BYTES={value!r}"):
        pool_bytes({"EINJIT_POOL_BYTES": value})
    assert pool_bytes({"EINJIT_POOL_BYTES": "0"}) == 0
    assert pool_bytes({}) > 0


def test_einsum_results_in_a_reused_buffer_are_whole(pool):
    """A result lands in the buffer of a dropped one full of NaN: every element is written
    anew (a contraction that adds into its out block would keep the NaN)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((LARGE[0] // 1024 + 1, 64)).astype(np.float32)
    b = rng.standard_normal((64, 1024)).astype(np.float32)
    first = einjit.einsum("ik,kj->ij", a, b)
    address = first.ctypes.data
    first[...] = np.nan
    del first
    again = einjit.einsum("ik,kj->ij", a, b)
    assert again.ctypes.data == address
    np.testing.assert_allclose(again, a @ b, rtol=1e-5, atol=1e-4)


class _Subclass(np.ndarray):
    pass


def _arrays_of_every_kind():
    base = np.arange(60.0).reshape(6, 10)
    read_only = base.copy()
    read_only.flags.writeable = False
    return [base, base[2:, 3:], base[::2, ::3], base.T, base[:, 7], read_only, read_only[1:],
            np.asfortranarray(base), np.broadcast_to(base[1], (4, 10)), np.array(3.0),
            np.empty((0, 4)), np.ones(5, np.float32)[1:], base[1:].view(_Subclass),
            np.frombuffer(bytes(64), np.float64)]


@pytest.mark.parametrize("index", range(len(_arrays_of_every_kind())))
def test_data_address_is_numpys_data_pointer(index):
    array = _arrays_of_every_kind()[index]
    expected = array.__array_interface__["data"][0]
    assert data_address(array) == expected
    assert arrays._address_from_numpy(array) == expected     # where the struct is not read


def test_data_address_reads_the_array_struct_on_cpython():
    """The probes at import found the layout: data_address does not fall back to numpy."""
    if platform.python_implementation() != "CPython":
        pytest.skip("the struct is read on CPython only")
    assert arrays.DATA_FIELD == object.__basicsize__


def test_the_array_fields_are_numpys_on_cpython(monkeypatch):
    """The probes at import found numpy's struct one word apart from the data pointer on, and
    a layout the probes contradict is refused."""
    if platform.python_implementation() != "CPython":
        pytest.skip("the struct is read on CPython only")
    base = object.__basicsize__
    assert arrays.ARRAY_FIELDS == arrays.ArrayFields(type=base - 8, data=base, nd=base + 8,
                                                     dims=base + 16, strides=base + 24,
                                                     descr=base + 40, flags=base + 48)
    monkeypatch.setattr(arrays, "DATA_FIELD", base + 8)
    assert arrays._array_fields() is None
    monkeypatch.setattr(arrays, "DATA_FIELD", None)
    assert arrays._array_fields() is None
