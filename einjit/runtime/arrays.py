"""Result and intermediate arrays: aligned for the kernels' non-temporal stores, and large
ones reused from a pool of freed buffers.

Alignment: numpy's large allocations start 16 bytes into a page (malloc's header), so a zmm
store to their first element is not 64-byte aligned, and a BRGEMM asked to stream C (an out
of the core's stream_out_bytes, einjit.codegen.loop_nest) falls back to cached stores.
Arrays of ALIGN_FROM_BYTES and more are carved out of a slightly larger buffer at a 64-byte
boundary; smaller ones are plain np.empty (they never stream, and the view costs a
microsecond).

Reuse: a fresh buffer of POOL_FROM_BYTES or more comes from the operating system as untouched
pages, and the first write to each page faults and has the kernel zero it, a large share of
a call that writes a large result (docs/measurements.md). So when the last array viewing such
a buffer goes, the buffer is kept for the next request of the same size instead of being
unmapped. Idle buffers are kept up to BUFFER_POOL.limit bytes in all (the environment
variable EINJIT_POOL_BYTES, read at import; default an eighth of physical memory; 0 turns
reuse off; another value warns and keeps the default), the least recently freed dropped
first; BUFFER_POOL.clear() releases them.
A reused buffer holds old data, as np.empty's may: every caller writes what it reads.

data_address: the data pointer of any ndarray, the kernels' operand, read on every call.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

from einjit.settings import at_import, int_setting

from ..errors import EinjitError

ALIGNMENT = 64                  # a cache line, a zmm register
ALIGN_FROM_BYTES = 1 << 20
# malloc maps blocks this large afresh (its mmap threshold), so their pages fault again on
# every call: a tree's intermediates of a few MiB cost more in faults than in flops on many cores
POOL_FROM_BYTES = 1 << 20
POOL_ENV = "EINJIT_POOL_BYTES"


class PoolSizeError(EinjitError, ValueError):
    """EINJIT_POOL_BYTES that is not a non-negative integer."""


def pool_bytes(environ: dict | None = None) -> int:
    """EINJIT_POOL_BYTES if set, else an eighth of physical memory."""
    default = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8
    return int_setting(POOL_ENV, default, 0, PoolSizeError, environ)


class BufferPool:
    """Idle raw buffers (uint8 arrays) by size, at most `limit` bytes in all; thread-safe."""

    def __init__(self, limit: int):
        self.limit = limit
        self._idle: list[np.ndarray] = []      # least recently freed first
        self._lock = threading.Lock()

    @property
    def idle_bytes(self) -> int:
        with self._lock:
            return sum(raw.nbytes for raw in self._idle)

    def take(self, nbytes: int) -> np.ndarray:
        """An idle buffer of exactly `nbytes`, else a new one."""
        with self._lock:
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i].nbytes == nbytes:
                    return self._idle.pop(i)
        return np.empty(nbytes, np.uint8)

    def give(self, raw: np.ndarray) -> None:
        """Keep `raw` for reuse, dropping the least recently freed beyond the limit."""
        if raw.nbytes > self.limit:
            return
        with self._lock:
            self._idle.append(raw)
            total = sum(buffer.nbytes for buffer in self._idle)
            dropped = []
            while total > self.limit:
                dropped.append(self._idle.pop(0))
                total -= dropped[-1].nbytes
        del dropped          # unmapped here, outside the lock

    def clear(self) -> None:
        with self._lock:
            self._idle.clear()


BUFFER_POOL = BufferPool(at_import(pool_bytes, pool_bytes({})))


class _Lease:
    """The base of arrays carved from a pooled buffer: numpy keeps it alive while any view
    of it lives, and when the last one goes the buffer returns to the pool."""

    def __init__(self, raw: np.ndarray, start: int, nbytes: int):
        self.raw = raw
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "version": 3,
                                    "data": (raw.ctypes.data + start, False)}

    def __del__(self):
        try:
            BUFFER_POOL.give(self.raw)
        except (AttributeError, TypeError):      # interpreter shutdown: module state gone
            pass


def aligned_empty(shape, dtype, order: str = "C") -> np.ndarray:
    """np.empty(shape, dtype, order) ("C" or "F"), its data 64-byte aligned when large, and
    its buffer reused from BUFFER_POOL when very large. On the call path of every einsum:
    math.prod, not np.prod (numpy's costs microseconds on a small shape)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < ALIGN_FROM_BYTES:
        return np.empty(shape, dtype, order=order)
    pooled = nbytes >= POOL_FROM_BYTES and BUFFER_POOL.limit
    size = nbytes + ALIGNMENT
    raw = BUFFER_POOL.take(size) if pooled else np.empty(size, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    flat = np.asarray(_Lease(raw, start, nbytes)) if pooled else raw[start:start + nbytes]
    return flat.view(dtype).reshape(shape, order=order)


def _address_from_numpy(array: np.ndarray) -> int:
    """An array's data pointer as numpy reports it: the buffer protocol's view where it takes
    the array (writable, C-ordered, not empty: cheaper than numpy's interface), else that
    interface."""
    try:
        return ctypes.addressof(ctypes.c_byte.from_buffer(array))
    except (TypeError, ValueError, BufferError):
        return array.__array_interface__["data"][0]


def _data_field_offset() -> int | None:
    """Where an ndarray keeps its data pointer, counted from the object's address: numpy's
    array struct is the object header, then that pointer, and CPython's id() is the
    object's address. None where probes of every kind (offset, read-only, strided, F-ordered,
    broadcast, 0-d) disagree with numpy's own report: another interpreter or layout."""
    if sys.implementation.name != "cpython":
        return None
    offset = object.__basicsize__
    base = np.arange(24.0).reshape(4, 6)
    read_only = base.copy()
    read_only.flags.writeable = False
    probes = (base, base[1:, 2:], base[:, ::2], read_only, np.asfortranarray(base),
              np.broadcast_to(base[0], (3, 6)), np.array(2.0, np.float32), np.empty(0))
    for probe in probes:
        if _read_word(id(probe) + offset).value != probe.__array_interface__["data"][0]:
            return None
    return offset


_read_word = ctypes.c_size_t.from_address
#: an ndarray's data pointer lies this many bytes into the object (None: not probed so)
DATA_FIELD = _data_field_offset()


@dataclass(frozen=True)
class ArrayFields:
    """Where an ndarray keeps what a generated check reads, in bytes from the object's
    address: its type (the object header's last word), data pointer, ndim (a C int, the low
    half of an 8-byte word), the pointers to its shape and strides (ndim words each), its
    dtype (the descr object) and its flags (a C int, the low half of a word; WRITEABLE_FLAG
    set where it may be written)."""
    type: int
    data: int
    nd: int
    dims: int
    strides: int
    descr: int
    flags: int


WRITEABLE_FLAG = 0x0400       # numpy's NPY_ARRAY_WRITEABLE


def _array_fields() -> ArrayFields | None:
    """numpy's array struct as it lays the fields out (PyArrayObject_fields: data, nd,
    dimensions, strides, base, descr, flags, one word apart from DATA_FIELD on), checked on
    probes of every kind; None where a probe disagrees or DATA_FIELD was not probed."""
    if DATA_FIELD is None or ctypes.sizeof(ctypes.c_void_p) != 8 or \
            ctypes.sizeof(ctypes.c_int) != 4 or sys.byteorder != "little":
        return None
    fields = ArrayFields(type=DATA_FIELD - 8, data=DATA_FIELD, nd=DATA_FIELD + 8,
                         dims=DATA_FIELD + 16, strides=DATA_FIELD + 24, descr=DATA_FIELD + 40,
                         flags=DATA_FIELD + 48)
    base = np.arange(24.0).reshape(4, 6)
    read_only = base.copy()
    read_only.flags.writeable = False
    probes = (base, base[1:, 2:], base[:, ::2], np.asfortranarray(base), read_only,
              np.broadcast_to(base[0], (3, 6)), np.array(2.0, np.float32),
              np.empty((2, 0, 3), np.int8), np.ones((1, 2, 3, 4, 5), np.complex64))

    def words(address: int, count: int) -> tuple[int, ...]:
        return tuple((ctypes.c_int64 * count).from_address(address)) if count else ()
    for probe in probes:
        at = id(probe)
        nd = probe.ndim
        if (_read_word(at + fields.type).value != id(type(probe))
                or _read_word(at + fields.descr).value != id(probe.dtype)
                or ctypes.c_int.from_address(at + fields.nd).value != nd
                or words(_read_word(at + fields.dims).value, nd) != probe.shape
                or words(_read_word(at + fields.strides).value, nd) != probe.strides
                or ctypes.c_int.from_address(at + fields.flags).value != probe.flags.num
                or bool(probe.flags.num & WRITEABLE_FLAG) != probe.flags.writeable):
            return None
    return fields


#: where an ndarray keeps its type, data, ndim, shape, strides, dtype and flags (None: not
#: probed so)
ARRAY_FIELDS = _array_fields()


def data_address(array: np.ndarray) -> int:
    """The address of an ndarray's first element (any ndarray: read-only, strided or empty
    alike), read from the array's struct, a fraction of the cost of asking numpy; numpy's
    own report where the struct's layout is not the one probed at import. The caller
    guarantees `array` is an ndarray (another object's memory would be read)."""
    if DATA_FIELD is None:
        return _address_from_numpy(array)
    return _read_word(id(array) + DATA_FIELD).value
