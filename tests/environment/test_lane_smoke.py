"""Smoke checks of the test environment itself, above all of the aarch64 lane (scripts/aarch64):
the interpreter really is arm64, numpy works, and A64 code written to memory runs via ctypes."""

import ctypes
import mmap
import os
import platform
import sys
import warnings

import numpy as np
import pytest

from support import IN_LANE

ON_AARCH64_LINUX = sys.platform == "linux" and platform.machine() == "aarch64"

# mov w0, #42 ; ret
A64_RETURN_42 = (0x52800540).to_bytes(4, "little") + (0xD65F03C0).to_bytes(4, "little")


def test_numpy_computes_without_floating_point_warnings():
    # numpy turns the FPU's exception flags into RuntimeWarnings; exact small-integer
    # arithmetic raises none, so any warning here means the emulated FPU reports spurious ones
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert (a @ a.T).tolist() == [[5.0, 14.0], [14.0, 50.0]]
        assert (a / (a + 1)).max() == np.float32(5 / 6)
        assert np.maximum(a - 3, 0).sum() == 3.0


@pytest.mark.skipif(not IN_LANE,
                    reason="only the aarch64 lane promises an arm64 interpreter")
def test_lane_interpreter_is_arm64():
    assert platform.machine() == "aarch64"
    assert os.uname().machine == "aarch64"


@pytest.mark.skipif(not ON_AARCH64_LINUX, reason="executes A64 machine code")
def test_a64_code_runs_from_mmapped_memory():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    clear_cache = ctypes.CDLL("libgcc_s.so.1").__clear_cache
    clear_cache.argtypes = [ctypes.c_void_p, ctypes.c_void_p]

    size = mmap.PAGESIZE
    page = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert page not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    try:
        ctypes.memmove(page, A64_RETURN_42, len(A64_RETURN_42))
        clear_cache(page, page + len(A64_RETURN_42))
        # Never writable and executable at once: flip RW to RX before the call.
        assert libc.mprotect(page, size, mmap.PROT_READ | mmap.PROT_EXEC) == 0, \
            os.strerror(ctypes.get_errno())
        function = ctypes.CFUNCTYPE(ctypes.c_int)(page)
        assert function() == 42
    finally:
        assert libc.munmap(page, size) == 0
