"""A persistent pool of worker threads that run JIT'd loop nests in parallel.

Each task is one ctypes call (which releases the GIL), so the workers run truly in parallel
and a Python-level dispatch costs a few tens of microseconds, once per operation: never per
block. The caller runs the first share itself and waits for the rest.

The default thread count is the number of CPUs this process may run on
(os.sched_getaffinity), overridden by the EINJIT_NUM_THREADS environment variable.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable, Sequence

from ..errors import KernelParameterError
from .settings import int_setting

THREADS_ENV = "EINJIT_NUM_THREADS"


def default_threads() -> int:
    """EINJIT_NUM_THREADS if set, else the CPUs this process may run on."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        usable = os.cpu_count() or 1
    return int_setting(THREADS_ENV, usable, 1, KernelParameterError)


def check_threads(num_threads) -> int:
    """A validated thread count: None means default_threads()."""
    if num_threads is None:
        return default_threads()
    if (not isinstance(num_threads, int) or isinstance(num_threads, bool)
            or not 1 <= num_threads <= 1024):
        raise KernelParameterError(f"num_threads={num_threads!r}: expected an integer "
                                   f"1..1024 or None")
    return num_threads


def split_range(total: int, parts: int) -> list[tuple[int, int]]:
    """[0, total) in `parts` contiguous shares whose sizes differ by at most one (no empty
    share unless total < parts, whose empty shares are dropped)."""
    parts = max(1, min(parts, total))
    base, extra = divmod(total, parts)
    shares, begin = [], 0
    for i in range(parts):
        end = begin + base + (i < extra)
        shares.append((begin, end))
        begin = end
    return shares


class _Latch:
    """Counts finished tasks; wait() returns when all are done, re-raising the first error."""

    def __init__(self, count: int):
        self._count = count
        self._error: BaseException | None = None
        self._done = threading.Condition()

    def finish(self, error: BaseException | None = None) -> None:
        with self._done:
            self._count -= 1
            if error is not None and self._error is None:
                self._error = error
            if self._count == 0:
                self._done.notify_all()

    def wait(self) -> None:
        with self._done:
            while self._count:
                self._done.wait()
        if self._error is not None:
            raise self._error


class WorkerPool:
    """Daemon worker threads, started on first need and kept for the process."""

    def __init__(self):
        self._queues: list[queue.SimpleQueue] = []
        self._lock = threading.Lock()
        # a forked child has none of the parent's threads: start its own on first need
        os.register_at_fork(after_in_child=self._forget_workers)

    def _forget_workers(self) -> None:
        self._queues = []
        self._lock = threading.Lock()

    def _ensure(self, workers: int) -> None:
        with self._lock:
            while len(self._queues) < workers:
                tasks: queue.SimpleQueue = queue.SimpleQueue()
                thread = threading.Thread(target=self._work, args=(tasks,),
                                          name=f"einjit-worker-{len(self._queues)}", daemon=True)
                thread.start()
                self._queues.append(tasks)

    @staticmethod
    def _work(tasks: queue.SimpleQueue) -> None:
        while True:
            function, args, latch = tasks.get()
            try:
                function(*args)
            except BaseException as error:   # handed to the waiting caller
                latch.finish(error)
            else:
                latch.finish()

    def run(self, function: Callable, argument_lists: Sequence[tuple]) -> None:
        """Call function(*args) for every args, the first on this thread, the others on
        workers, and return when all have returned."""
        if len(argument_lists) == 1:
            function(*argument_lists[0])
            return
        self._ensure(len(argument_lists) - 1)
        latch = _Latch(len(argument_lists) - 1)
        for tasks, args in zip(self._queues, argument_lists[1:]):
            tasks.put((function, args, latch))
        try:
            function(*argument_lists[0])
        finally:
            latch.wait()


pool = WorkerPool()
