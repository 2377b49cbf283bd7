"""Native worker threads: a loop nest's shares handed over through memory, not the GIL.

Each worker is a Python thread whose only Python is its start: its target is one ctypes call
of the backend's generated worker_loop over the worker's slot (einjit.backends.worker_slot),
which runs until it reads function 0. To hand a share over, the caller writes the nest's
entry and arguments to the slot and posts the next sequence number (generated post: a store,
and a futex wake only if the worker has gone to sleep); the worker, polling the sequence
word, calls the nest, stores the number as done, and wakes the caller only if it sleeps. The
caller runs its own share meanwhile, then waits for each worker's done word (generated wait,
GIL released). Both sides poll for about SPIN_SECONDS before they sleep in the kernel, so
operations that follow each other closely hand over with no thread wake-up (each poll
yields the core, in case the other side is queued for it). The poll count comes from
timing the backend's spin, the same poll, once per process.

A worker serves one caller at a time: callers take idle workers (the most recently used
first: it is likeliest still polling) and start new ones when none is idle, so concurrent
callers never share a slot. Slots and the dispatch code are never freed: a worker polls or
sleeps in them until the process ends. Where the host cannot run the generated dispatch (not
Linux: the futex is Linux's), run_shares falls back to the Python pool
(einjit.runtime.threads).
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence

from ..backends import LINE_BYTES, Target, backend, place_code
from ..backends.worker_slot import (
    ARGUMENT_COUNT,
    ARGUMENTS,
    FUNCTION,
    FUTEX_VALUES,
    SLOT_BYTES,
    SPINS,
)
from ..runtime.threads import pool as python_pool
from ..runtime.threads import start_worker_thread

# polling this long before sleeping covers the gap between the operations of a chain of
# calls and between a caller's calls with some Python work between them; an idle worker
# still gives its core back soon, and every poll yields it to whoever else is runnable
SPIN_SECONDS = 1e-3
_CALIBRATION_SECONDS = 200e-6   # the spin timed at least this long: well above a call's cost

_WORD = ctypes.c_uint64
_libc = ctypes.CDLL(None)
_libc.posix_memalign.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                 ctypes.c_size_t)
# the task's words, FUNCTION then ARGUMENTS, written by one call
_TASK = struct.Struct(f"<{1 + ARGUMENT_COUNT}Q")
assert ARGUMENTS == FUNCTION + 8
_LOOP = ctypes.CFUNCTYPE(None, _WORD)                 # ctypes releases the GIL for the call
_WAIT = ctypes.CFUNCTYPE(None, _WORD, _WORD, _WORD)
_SPIN = ctypes.CFUNCTYPE(None, _WORD, _WORD)
_POST = ctypes.PYFUNCTYPE(None, _WORD, _WORD)         # a store and a syscall: keeps the GIL


class _Code:
    """The backend's dispatch functions for one ISA, placed and callable."""

    def __init__(self, target: Target):
        module = backend(target.isa)
        self._blocks = [place_code(target, generate(target)) for generate in (
            module.generate_worker_loop, module.generate_wait, module.generate_post,
            module.generate_spin)]
        for block in self._blocks:      # the workers sleep in this code until the process ends
            block.pin()
        loop, wait, post, spin = (block.address for block in self._blocks)
        self.worker_loop, self.wait, self.post = _LOOP(loop), _WAIT(wait), _POST(post)
        self.spins = _polls_in(_SPIN(spin), SPIN_SECONDS)


def _polls_in(spin: Callable, seconds: float) -> int:
    """How many polls of `spin` take `seconds` on this core (at least 1)."""
    word = (_WORD * 1)()
    address = ctypes.addressof(word)
    count = 1024
    while True:
        started = time.perf_counter()
        spin(address, count)
        elapsed = time.perf_counter() - started
        if elapsed >= _CALIBRATION_SECONDS:
            return max(1, round(seconds * count / elapsed))
        count *= 4


def _slot_memory() -> int:
    """A zeroed slot, cache-line aligned, from the C heap and never freed: a worker polls or
    sleeps on it for as long as the process lives, past the objects' teardown at exit."""
    address = ctypes.c_void_p()
    if _libc.posix_memalign(ctypes.byref(address), LINE_BYTES, SLOT_BYTES) != 0:
        raise MemoryError(f"posix_memalign of a {SLOT_BYTES}-byte worker slot failed")
    ctypes.memset(address.value, 0, SLOT_BYTES)
    return address.value


class _Worker:
    """One native worker thread and its slot."""

    def __init__(self, code: _Code, name: str):
        self._code = code
        self.slot = _slot_memory()
        self._task = (ctypes.c_char * _TASK.size).from_address(self.slot + FUNCTION)
        _WORD.from_address(self.slot + SPINS).value = code.spins
        self._sequence = 0
        self.thread = start_worker_thread(code.worker_loop, (self.slot,), name)

    def post(self, function: int, arguments: Sequence[int]) -> None:
        """Hand function(*arguments) over; `function` 0 makes the worker return."""
        _TASK.pack_into(self._task, 0, function, *arguments)
        self._sequence = (self._sequence + 1) % FUTEX_VALUES
        self._code.post(self.slot, self._sequence)

    def wait(self) -> None:
        """Return once the worker has finished what was posted last."""
        self._code.wait(self.slot, self._sequence, self._code.spins)


class NativePool:
    """Native workers for code of one ISA, started on first need and kept for the process."""

    def __init__(self, target: Target):
        self._target = target
        self._code: _Code | None = None
        self._idle: list[_Worker] = []
        self._started = 0
        self._lock = threading.Lock()
        # a forked child has none of the parent's threads: start its own on first need
        os.register_at_fork(after_in_child=self._forget_workers)

    def _forget_workers(self) -> None:
        self._idle = []
        self._started = 0
        self._lock = threading.Lock()

    @property
    def started(self) -> int:
        """Worker threads started in this process."""
        return self._started

    def _take(self, count: int) -> list[_Worker]:
        with self._lock:
            idle = self._idle
            rest = len(idle) - count
            if rest >= 0:                   # the common case: enough idle, most recent first
                taken = idle[rest:][::-1]
                del idle[rest:]
                return taken
            if self._code is None:
                self._code = _Code(self._target)
            taken = idle[::-1]
            idle.clear()
            while len(taken) < count:
                taken.append(_Worker(self._code, f"einjit-native-worker-{self._started}"))
                self._started += 1
            return taken

    def _give_back(self, workers: list[_Worker]) -> None:
        with self._lock:
            self._idle.extend(reversed(workers))

    def run(self, address: int, function: Callable, argument_lists: Sequence[tuple],
            on_caller: bool = True) -> None:
        """Run the nest at `address` on every argument tuple (in0, in1, out, begin, end): the
        first through `function` (its ctypes wrapper) on this thread unless on_caller is
        False, the others on workers; return when all have returned."""
        if len(argument_lists) == 1 and on_caller:
            function(*argument_lists[0])
            return
        handed = argument_lists[1:] if on_caller else argument_lists
        workers = self._take(len(handed))
        posted = []
        try:
            for worker, arguments in zip(workers, handed):
                worker.post(address, arguments)
                posted.append(worker)
            if on_caller:
                function(*argument_lists[0])
        finally:
            for worker in posted:
                worker.wait()
            self._give_back(workers)

    def shutdown(self) -> None:
        """End the idle workers' threads (the next run starts new ones)."""
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in workers:
            worker.post(0, (0,) * ARGUMENT_COUNT)
        for worker in workers:
            worker.thread.join()


_pools: dict[str, NativePool] = {}
_pools_lock = threading.Lock()


def native_pool(target: Target) -> NativePool | None:
    """The native pool for code of `target` (a runnable one), None where the host cannot run
    the generated dispatch."""
    if not sys.platform.startswith("linux"):
        return None
    pool = _pools.get(target.isa)
    if pool is None:
        with _pools_lock:
            if target.isa not in _pools:
                _pools[target.isa] = NativePool(target)
            pool = _pools[target.isa]
    return pool


def run_shares(target: Target, address: int, function: Callable,
               argument_lists: Sequence[tuple], on_caller: bool = True) -> None:
    """Run a nest's shares in parallel (NativePool.run), or on the Python pool where the
    native one is not available."""
    pool = native_pool(target)
    if pool is None:
        python_pool.run(function, argument_lists, on_caller)
    else:
        pool.run(address, function, argument_lists, on_caller)
