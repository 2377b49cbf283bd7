"""Native worker threads: a step's shares handed over through memory in one native call.

Each worker is a Python thread whose only Python is its start: its target is one ctypes call
of the backend's generated worker_loop over the worker's slot (einjit.backends.worker_slot),
which runs until it reads function 0. A step's tasks (Tasks: each a function and its
arguments, the nest's shares or calls of different functions) are records built once; one
ctypes call of the generated run_tasks (GIL released) writes each worker's task into its slot
and posts the slot's next sequence number (a store, and a futex wake only where the worker
has gone to sleep), runs the caller's own task, runs each task no worker has taken yet
(worker_slot's TAKEN) and polls the done word of the others. The worker, polling its
sequence word, takes its task, calls the function, stores the number as done, and wakes the
caller only if it sleeps. Both sides poll for about SPIN_SECONDS before they sleep in
the kernel, so operations that follow each other closely hand over with no thread wake-up
(each poll yields the core, in case the other side is queued for it). The poll count comes
from timing the backend's spin, the same poll, once per process.

A worker serves one caller at a time: callers take idle workers (the most recently used
first: it is likeliest still polling) and start new ones when none is idle, so concurrent
callers never share a slot. Slots and the dispatch code are never freed: a worker polls or
sleeps in them until the process ends. Where the host cannot run the generated dispatch (not
Linux: the futex is Linux's), NestShares.run falls back to the Python pool
(einjit.runtime.threads).
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from array import array
from collections.abc import Callable, Sequence

from ..backends import LINE_BYTES, Target, backend, place_code
from ..backends.worker_slot import (
    ARGUMENT_COUNT,
    CLAIM_BOUNDS,
    CLAIM_END,
    CLAIM_FUNCTION,
    CLAIM_NEXT,
    CLAIM_SHARES,
    OPERAND_COUNT,
    SLOT_BYTES,
    SPINS,
    TASK_BYTES,
)
from ..runtime.threads import pool as python_pool
from ..runtime.threads import start_worker_thread

# polling this long before sleeping covers the gap between the operations of a chain of
# calls and between a caller's calls with some Python work between them; an idle worker
# still gives its core back soon, and every poll yields it to whoever else is runnable
SPIN_SECONDS = 1e-3
_CALIBRATION_SECONDS = 200e-6   # the spin timed at least this long: well above a call's cost

_WORD = ctypes.c_uint64
# a generated function's argument, a machine word passed as a Python int: ctypes converts an
# int to a pointer in about half the time it takes for an integer type
CALL_WORD = ctypes.c_void_p
_libc = ctypes.CDLL(None)
_libc.posix_memalign.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                 ctypes.c_size_t)
_LOOP = ctypes.CFUNCTYPE(None, CALL_WORD)             # ctypes releases the GIL for the call
_RUN_TASKS = ctypes.CFUNCTYPE(None, *[CALL_WORD] * 5)
_SPIN = ctypes.CFUNCTYPE(None, CALL_WORD, CALL_WORD)


class _Code:
    """The backend's dispatch functions for one ISA, placed and callable."""

    def __init__(self, target: Target):
        module = backend(target.isa)
        self._blocks = [place_code(target, generate(target)) for generate in (
            module.generate_worker_loop, module.generate_run_tasks, module.generate_spin,
            module.generate_claim)]
        for block in self._blocks:      # the workers sleep in this code until the process ends
            block.pin()
        loop, run_tasks, spin, claim = (block.address for block in self._blocks)
        self.worker_loop, self.run_tasks = _LOOP(loop), _RUN_TASKS(run_tasks)
        self.spin = _SPIN(spin)
        self.claim = claim              # a task's function: claim(in0, in1, out, table, line)
        self.spins = _polls_in(self.spin, SPIN_SECONDS)


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


def _words(values: Sequence[int]) -> array:
    """uint64 words in a buffer of their own (array: cheaper to build than a ctypes array)."""
    return array("Q", values)


class Tasks:
    """Calls to hand out in one run, as the records run_tasks reads (worker_slot): each calls
    function(operands[first], operands[first + 1], operands[first + 2], begin, end), operands
    being the words a run passes. Built once for a step: a run adds only its operands."""

    def __init__(self, calls: Sequence[tuple[int, int, int, int]]):
        """calls: (function, first, begin, end) per task, at least one; function 0 ends the
        worker that takes it."""
        if not calls:
            raise ValueError("Tasks: no calls; expected at least one")
        for call in calls:
            if len(call) != 4 or not all(isinstance(word, int) and 0 <= word < 1 << 64
                                         for word in call):
                raise ValueError(f"task {call!r}: expected (function, first, begin, end), "
                                 f"each a uint64")
        self.count = len(calls)
        # the operand words a run must pass: every task reads OPERAND_COUNT from its first
        self.operand_words = max(first for _, first, _, _ in calls) + OPERAND_COUNT
        self._records = _words([word for function, first, begin, end in calls
                                for word in (function, 8 * first, begin, end)])
        self.address = self._records.buffer_info()[0]


class _Worker:
    """One native worker thread and its slot."""

    def __init__(self, code: _Code, name: str):
        self.slot = _slot_memory()
        _WORD.from_address(self.slot + SPINS).value = code.spins
        self.thread = start_worker_thread(code.worker_loop, (self.slot,), name)


class NativePool:
    """Native workers for code of one ISA, started on first need and kept for the process."""

    def __init__(self, target: Target):
        self._target = target
        self._code: _Code | None = None
        self._forget_workers()
        # a forked child has none of the parent's threads: start its own on first need
        os.register_at_fork(after_in_child=self._forget_workers)

    def _forget_workers(self) -> None:
        self._idle: list[_Worker] = []
        self._started = 0
        self._lock = threading.Lock()
        # the slots' addresses of the workers taken last (a caller takes the same again)
        self._team: tuple[list[_Worker], array] = ([], _words(()))

    @property
    def started(self) -> int:
        """Worker threads started in this process."""
        return self._started

    def _take(self, count: int) -> list[_Worker]:
        with self._lock:
            idle = self._idle
            rest = len(idle) - count
            if rest >= 0:                   # the common case: enough idle, most recent first
                taken = idle[rest:]
                del idle[rest:]
                taken.reverse()
                return taken
            code = self._ready_code()
            taken = idle[::-1]
            idle.clear()
            while len(taken) < count:
                taken.append(_Worker(code, f"einjit-native-worker-{self._started}"))
                self._started += 1
            return taken

    def _ready_code(self) -> _Code:
        """The dispatch code, generated on first need (call with the lock held)."""
        if self._code is None:
            self._code = _Code(self._target)
        return self._code

    def _give_back(self, workers: list[_Worker]) -> None:
        with self._lock:
            self._idle.extend(reversed(workers))

    def _slots(self, workers: list[_Worker]) -> array:
        """The workers' slot addresses, in order."""
        team = self._team
        if team[0] == workers:
            return team[1]
        slots = _words([worker.slot for worker in workers])
        self._team = (workers, slots)
        return slots

    @property
    def claim(self) -> int:
        """The address of the backend's claim (generated on first need)."""
        code = self._code
        if code is None:
            with self._lock:
                code = self._ready_code()
        return code.claim

    def run_tasks(self, tasks: Tasks, operands: array, on_caller: bool = True) -> None:
        """Run every task, the first on this thread unless on_caller is False, the others on
        workers, in one native call; return when all have returned. operands: the words the
        tasks' records point into, at least tasks.operand_words."""
        if len(operands) < tasks.operand_words:
            raise ValueError(f"{len(operands)} operand words; these tasks read "
                             f"{tasks.operand_words}")
        code = self._code
        if code is None:
            with self._lock:
                code = self._ready_code()
        address = tasks.address
        workers = self._take(tasks.count - 1 if on_caller else tasks.count)
        try:
            # slots held here: another caller may replace the cached array meanwhile
            slots = self._slots(workers)
            if on_caller:
                code.run_tasks(address + TASK_BYTES, len(workers), slots.buffer_info()[0],
                               operands.buffer_info()[0], address)
            else:
                code.run_tasks(address, len(workers), slots.buffer_info()[0],
                               operands.buffer_info()[0], 0)
        finally:
            self._give_back(workers)

    def run(self, calls: Sequence[tuple[int, ...]], on_caller: bool = True) -> None:
        """Run every call (function address, then its ARGUMENT_COUNT arguments), the first on
        this thread unless on_caller is False, the others on workers; return when all have
        returned."""
        for call in calls:
            if len(call) != 1 + ARGUMENT_COUNT:
                raise ValueError(f"call {call!r}: expected a function and {ARGUMENT_COUNT} "
                                 f"arguments")
        operands = _words([word for call in calls for word in call[1:1 + OPERAND_COUNT]])
        tasks = Tasks([(call[0], OPERAND_COUNT * index, *call[1 + OPERAND_COUNT:])
                       for index, call in enumerate(calls)])
        self.run_tasks(tasks, operands, on_caller)

    def shutdown(self) -> None:
        """End the idle workers' threads (the next run starts new ones)."""
        with self._lock:
            workers, self._idle = self._idle, []
        if workers:                     # their start generated the code
            ends = Tasks([(0, 0, 0, 0)] * len(workers))
            slots = _words([worker.slot for worker in workers])
            self._code.run_tasks(ends.address, len(workers), slots.buffer_info()[0],
                                 _words((0,) * OPERAND_COUNT).buffer_info()[0], 0)
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


class _ClaimTable:
    """The table the backend's claim reads (worker_slot's CLAIM_*) for a nest at `address`
    whose shares are cut into `chunks`: its address (a cache line's start in a buffer of
    words), the address of each share's line, and what a run resets (each share's next
    number to its first chunk's). The bounds follow the shares' lines."""

    def __init__(self, address: int, shares: Sequence[tuple[int, int]],
                 chunks: Sequence[tuple[int, int]]):
        starts = [begin for begin, _ in chunks]
        try:
            firsts = [starts.index(begin) for begin, _ in shares]
        except ValueError:
            firsts = []
        spans_follow = all(end == begin for (_, end), (begin, _) in zip(chunks, chunks[1:]))
        if not firsts or firsts[0] != 0 or not spans_follow or chunks[-1][1] != shares[-1][1]:
            raise ValueError(f"chunks {list(chunks)!r}: expected spans one after another over "
                             f"the shares' iterations {list(shares)!r}, each share's first "
                             f"one starting it")
        line = LINE_BYTES // 8
        bounds = starts + [chunks[-1][1]]
        lines = line * (1 + len(shares))
        self.words = _words([0] * (lines + len(bounds) + line))  # room to start on a line
        base = self.words.buffer_info()[0]
        first = -base % LINE_BYTES // 8
        self.address = base + 8 * first
        self.lines = [self.address + LINE_BYTES * (1 + share) for share in range(len(shares))]
        header = (address, len(shares), self.address + 8 * lines)
        for offset, value in zip((CLAIM_FUNCTION, CLAIM_SHARES, CLAIM_BOUNDS), header):
            self.words[first + offset // 8] = value
        self.words[first + lines:first + lines + len(bounds)] = _words(bounds)
        ends = firsts[1:] + [len(chunks)]
        self._next = slice(first + line + CLAIM_NEXT // 8, first + lines, line)
        self._reset = _words(firsts)
        self.words[self._next] = self._reset
        self.words[first + line + CLAIM_END // 8:first + lines:line] = _words(ends)
        self.chunks = len(chunks)

    def reset(self) -> None:
        """Each share's next number back at its first chunk (before a run)."""
        self.words[self._next] = self._reset


class NestShares:
    """A loop nest's shares, fixed for a compiled operation: their task records are built
    once, so that a run passes only the operands. Given chunks (each share cut into some),
    each thread instead claims chunks one at a time, its own share's in order and then those
    left in the others' (the backend's claim over a table of them), so that a thread slowed
    by another process or a slower core takes fewer: one run at a time (a run that finds the
    table in use runs the shares)."""

    def __init__(self, target: Target, address: int, function: Callable,
                 shares: Sequence[tuple[int, int]],
                 chunks: Sequence[tuple[int, int]] | None = None):
        """address: the nest's entry nest(in0, in1, out, begin, end); function: its ctypes
        wrapper (for the Python pool); shares: the [begin, end) of each; chunks: the
        [begin, end) of each chunk to claim, one after another over the same iterations, each
        share's first starting it, or None."""
        self._pool = native_pool(target)
        self._function = function
        self._shares = tuple(shares)
        self._tasks = Tasks([(address, 0, begin, end) for begin, end in shares])
        self._claims = None
        if chunks is not None and self._pool is not None:
            table = _ClaimTable(address, self._shares, tuple(chunks))
            tasks = Tasks([(self._pool.claim, 0, table.address, line) for line in table.lines])
            self._claims = (table, tasks, threading.Lock())

    @property
    def chunks(self) -> int:
        """How many chunks the threads claim (0: each runs its share)."""
        return 0 if self._claims is None else self._claims[0].chunks

    def run(self, in0: int, in1: int, out: int, on_caller: bool = True) -> None:
        """Run the shares in parallel (the first on this thread unless on_caller is False),
        on the native pool or, where it is not available, the Python pool."""
        pool = self._pool
        if pool is None:
            python_pool.run(self._function, [(in0, in1, out, begin, end)
                                             for begin, end in self._shares], on_caller)
            return
        claims = self._claims
        if claims is not None and claims[2].acquire(blocking=False):
            table, tasks, lock = claims
            try:
                table.reset()
                pool.run_tasks(tasks, _words((in0, in1, out)), on_caller)
            finally:
                lock.release()
            return
        pool.run_tasks(self._tasks, _words((in0, in1, out)), on_caller)
