"""A bounded, thread-safe LRU map for einsum plans (einjit.einsum's plan cache).

Plans are built outside the lock: two threads missing on the same key both build, the later
insert wins, and both results are correct (a plan is immutable once built).

Beside the plans, the cache remembers a shortcut per call signature (a key cheaper to build
than a plan's: einsum's subscripts and options without the operands' layouts): what a caller
needs to run the plan that signature ran last, checking the operands itself. A shortcut that
ran counts as a hit of its plan's key; clear() forgets the shortcuts with the plans."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

from einjit.log import cache_hit, cache_miss

#: default number of plans einjit.einsum keeps
DEFAULT_SIZE = 256


class PlanCache:
    def __init__(self, maxsize: int = DEFAULT_SIZE):
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self._shortcuts: dict[Hashable, Any] = {}      # at most maxsize; read without the lock

    def get(self, key: Hashable) -> Any:
        """The value for `key` (a hit, made most recent), or None without counting a miss
        (the caller goes on to get_or_build)."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
                self.hits += 1
        if value is not None:
            cache_hit("plan", key)          # logs at DEBUG only (EINJIT_VERBOSE=2)
        return value

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        with self._lock:
            hit = key in self._items
            if hit:
                self._items.move_to_end(key)
                self.hits += 1
                value = self._items[key]
            else:
                self.misses += 1
        if hit:
            cache_hit("plan", key)
            return value
        cache_miss("plan", key)
        value = build()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value

    def shortcut(self, signature: Hashable) -> Any:
        """What remember() stored for `signature`, or None."""
        return self._shortcuts.get(signature)

    def remember(self, signature: Hashable, value: Any) -> None:
        """Keep `value` as the shortcut for `signature` (all of them forgotten when maxsize are
        kept: a shortcut only saves a lookup)."""
        shortcuts = self._shortcuts
        if len(shortcuts) >= self.maxsize and signature not in shortcuts:
            shortcuts.clear()
        shortcuts[signature] = value

    def hit(self, key: Hashable) -> None:
        """Count and log a hit of `key` served through a shortcut (counted without the lock,
        which costs more than the shortcut saves: threads hitting at once may count one)."""
        self.hits += 1
        cache_hit("plan", key)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._shortcuts.clear()
            self.hits = self.misses = 0
