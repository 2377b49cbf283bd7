"""Instruction-cache maintenance for code an AArch64 host is to run: its instruction fetch is
not coherent with data stores, so freshly written code is cleaned to the point of unification
and the instruction cache invalidated over it before it runs (the code arena calls this when
it makes pages executable)."""

from __future__ import annotations

import ctypes
import functools
import sys

from einjit.errors import EinjitError


@functools.cache
def _flusher():
    """The system's function(start, end) over a range of freshly written code."""
    if sys.platform == "darwin":
        sys_icache_invalidate = ctypes.CDLL(None).sys_icache_invalidate
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


def flush_icache(start: int, end: int) -> None:
    """Make the code written to [start, end) visible to instruction fetch."""
    _flusher()(start, end)
