"""Executable memory for generated code.

Code is copied into a fresh anonymous mapping that is writable but not executable, then the
mapping is switched to read+execute: it is never writable and executable at once. On AArch64
the instruction cache is flushed for the range, since it is not coherent with data writes.
The mapping is released when the ExecutableMemory object is garbage collected.
"""

import ctypes
import functools
import mmap
import sys
import weakref

from ..errors import EinjitError
from .host import host_isa

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype = ctypes.c_int
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_JIT = 0x800  # macOS: required for JIT pages under the hardened runtime


@functools.cache
def _icache_flusher():
    """A function(start, end) that makes freshly written code visible to instruction fetch,
    or None where the hardware keeps them coherent."""
    if host_isa() != "aarch64":
        return None  # x86 keeps instruction fetch coherent with stores
    if sys.platform == "darwin":
        sys_icache_invalidate = _libc.sys_icache_invalidate
        sys_icache_invalidate.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        sys_icache_invalidate.restype = None
        return lambda start, end: sys_icache_invalidate(start, end - start)
    # libgcc exports __clear_cache (dc cvau / ic ivau over the range, then barriers)
    try:
        clear_cache = ctypes.CDLL("libgcc_s.so.1").__clear_cache
    except (OSError, AttributeError) as exc:
        raise EinjitError("running JIT code on AArch64 Linux needs libgcc_s.so.1 (its "
                          f"__clear_cache flushes the instruction cache): {exc}") from exc
    clear_cache.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    clear_cache.restype = None
    return clear_cache


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise EinjitError(f"{what} failed: errno {errno}")


class ExecutableMemory:
    """A read+execute copy of `code`; `address` is where it starts."""

    def __init__(self, code: bytes):
        if not code:
            raise EinjitError("cannot map empty code")
        self.size = -(-len(code) // mmap.PAGESIZE) * mmap.PAGESIZE
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        if sys.platform == "darwin":
            flags |= _MAP_JIT
        address = _libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0)
        if address in (None, _MAP_FAILED):
            raise EinjitError(f"mmap of {self.size} bytes failed: errno {ctypes.get_errno()}")
        self._finalizer = weakref.finalize(self, _libc.munmap, address, self.size)
        ctypes.memmove(address, code, len(code))
        _check(_libc.mprotect(address, self.size, mmap.PROT_READ | mmap.PROT_EXEC), "mprotect RX")
        flush = _icache_flusher()
        if flush is not None:
            flush(address, address + len(code))
        self.address = address

    def release(self):
        """Unmap now instead of at garbage collection (calls through it must have ended)."""
        self._finalizer()
