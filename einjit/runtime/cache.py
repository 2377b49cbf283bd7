"""A bounded, thread-safe cache of generated objects (kernels), least recently used out first.

`BoundedCache.get(key, create)` returns the cached value or calls `create()` to make it.
No lock is held while `create()` runs, so a generator may itself ask the cache for another
entry (a loop nest asking for its primitives) without deadlocking. Concurrent requests for
the same key wait on that key's pending entry: the value is created once and every caller
gets the same object. If `create()` raises, every waiting caller gets that exception and
nothing is cached.

The primitives' kernel cache holds KERNEL_CACHE_SIZE kernels: 1024 unless the environment
variable EINJIT_KERNEL_CACHE_SIZE, read at import, sets another non-negative integer (0 turns
caching off; another value warns and keeps the default). An evicted kernel stays valid for
whoever still holds it; its executable code is released when the last reference goes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable

from einjit.settings import int_setting

from ..errors import EinjitError

DEFAULT_KERNEL_CACHE_SIZE = 1024


class CacheSizeError(EinjitError, ValueError):
    """A cache size that is not a non-negative integer."""


class RecursiveCreationError(EinjitError, RuntimeError):
    """A value's create() asked the cache for that same key (it would wait for itself)."""


def _check_capacity(capacity, what: str) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise CacheSizeError(f"{what}={capacity!r} is not a valid cache size; expected an "
                             f"integer >= 0")
    return capacity


def kernel_cache_size(environ: dict | None = None) -> int:
    """The kernel cache size: EINJIT_KERNEL_CACHE_SIZE if set, else 1024."""
    return int_setting("EINJIT_KERNEL_CACHE_SIZE", DEFAULT_KERNEL_CACHE_SIZE, 0, CacheSizeError,
                       environ)


class _Pending:
    """A value being created by one thread; others wait on `done`."""
    __slots__ = ("owner", "done", "value", "error")

    def __init__(self):
        self.owner = threading.get_ident()
        self.done = threading.Event()
        self.value = None
        self.error = None


class BoundedCache:
    """At most `capacity` entries, least recently used evicted first (see module docstring)."""

    def __init__(self, capacity: int):
        self._capacity = _check_capacity(capacity, "capacity")
        self._lock = threading.Lock()
        self._entries: OrderedDict = OrderedDict()
        self._pending: dict = {}
        self.hits = 0
        self.misses = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def resize(self, capacity: int) -> None:
        """Change the bound, evicting the least recently used entries beyond it."""
        capacity = _check_capacity(capacity, "capacity")
        with self._lock:
            self._capacity = capacity
            evicted = self._evict()
        del evicted  # dropped outside the lock: freeing kernels releases their code

    def get(self, key: Hashable, create: Callable[[], object]) -> object:
        """The value for `key`, made by `create()` on a miss (once, however many threads ask)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
            pending = self._pending.get(key)
            mine = pending is None
            if mine:
                self.misses += 1
                pending = self._pending[key] = _Pending()
        if not mine:
            if pending.owner == threading.get_ident():
                raise RecursiveCreationError(f"creating {key!r} asked for {key!r} itself")
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value
        try:
            value = create()
        except BaseException as exc:
            with self._lock:
                del self._pending[key]
            pending.error = exc
            pending.done.set()
            raise
        with self._lock:
            del self._pending[key]
            self._entries[key] = value
            evicted = self._evict()
        pending.value = value
        pending.done.set()
        del evicted
        return value

    def _evict(self) -> list:
        """With the lock held: drop entries beyond the capacity, oldest first; returns them
        so the caller frees them after letting go of the lock."""
        evicted = []
        while len(self._entries) > self._capacity:
            evicted.append(self._entries.popitem(last=False))
        return evicted

    def keys(self) -> list:
        """The cached keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            entries = self._entries
            self._entries = OrderedDict()
        del entries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries
