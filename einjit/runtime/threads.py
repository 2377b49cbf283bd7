"""What parallel loop nests need of threads, whatever the instruction set: how many threads
(default_threads, check_threads), the split of the shared iterations into shares
(split_range), worker threads with enough stack (start_worker_thread), the calling thread's
stack (thread_stack_bytes), and a Python pool of worker threads (WorkerPool).

A loop nest's shares normally run on native workers (einjit.codegen.workers: generated code
polls a slot in memory, so no handover takes the GIL or a kernel wake-up while the threads
are busy). WorkerPool is the portable form, used where that code cannot run: each task is a
Python call (for a nest, one ctypes call, which releases the GIL) handed over through a
queue, so each handover costs a thread wake-up.

The default thread count is the number of CPUs this process may run on
(os.sched_getaffinity), or fewer where a cgroup CPU quota allows fewer (a container's --cpus,
a Kubernetes CPU limit: the affinity still lists every core of the host, and more threads
than the quota's CPUs queue behind one another), overridden by the EINJIT_NUM_THREADS
environment variable.

A loop nest may copy a block of A into its stack frame (the core's pack_max_bytes at most,
einjit.backends.Microarch), so the workers get at least WORKER_STACK_BYTES of stack whatever
threading.stack_size says (musl gives a thread 128 KiB), and a nest that needs more than its
calling thread has runs on the workers alone (thread_stack_bytes, WorkerPool.run's
on_caller).
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import queue
import threading
from typing import Callable, Sequence

from einjit.settings import int_setting

from ..errors import KernelParameterError

THREADS_ENV = "EINJIT_NUM_THREADS"
CGROUP_ROOT = "/sys/fs/cgroup"       # where Linux mounts the cgroup hierarchies
WORKER_STACK_BYTES = 8 << 20        # glibc's usual default; only the pages touched cost memory


# os.environ's own mapping (CPython keeps it in step with every change through os.environ):
# a lookup there costs a fraction of os.environ.get's, which einsum pays on every call
_ENVIRON_DATA = getattr(os.environ, "_data", None)
_ENCODE_KEY = getattr(os.environ, "encodekey", None)
_THREADS_KEY = _ENCODE_KEY(THREADS_ENV) if _ENCODE_KEY else None


def threads_setting() -> object:
    """EINJIT_NUM_THREADS as set now, unparsed (None where unset): cheap enough for a key
    that must change when the setting does."""
    if _ENVIRON_DATA is None or _ENCODE_KEY is None:
        return os.environ.get(THREADS_ENV)
    return _ENVIRON_DATA.get(_THREADS_KEY)


def default_threads() -> int:
    """EINJIT_NUM_THREADS if set, else the CPUs this process may run on (its affinity, at
    most its cgroup quota's CPUs)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        usable = os.cpu_count() or 1
    quota = _process_quota_cpus()
    return int_setting(THREADS_ENV, min(usable, quota or usable), 1, KernelParameterError)


@functools.cache
def _process_quota_cpus() -> int | None:
    return quota_cpus()


def quota_cpus(root: str = CGROUP_ROOT, membership: str = "/proc/self/cgroup") -> int | None:
    """The CPUs the cgroup CPU quotas of this process and its ancestor groups allow, the
    tightest quota over its period rounded up, or None where none is set or readable:
    cgroup v2's cpu.max ("max 100000": none; "250000 100000": 3), v1's cpu.cfs_quota_us over
    cpu.cfs_period_us (-1: none). `membership` lists the process's groups (hierarchy,
    controllers and path on each line, as /proc/self/cgroup); `root` is where the
    hierarchies are mounted."""
    try:
        with open(membership) as groups:
            lines = groups.read().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and controllers == "":
            base, read = root, _v2_quota
        elif "cpu" in controllers.split(","):
            base, read = os.path.join(root, "cpu"), _v1_quota
        else:
            continue
        group = path or "/"
        while True:             # the group and each of its ancestors up to the root
            limit = read(os.path.join(base, group.lstrip("/")))
            if limit is not None:
                limits.append(limit)
            if group in ("/", ""):
                break
            group = os.path.dirname(group.rstrip("/")) or "/"
    return max(1, math.ceil(min(limits))) if limits else None


def _words(path: str) -> list[str] | None:
    try:
        with open(path) as file:
            return file.read().split()
    except OSError:
        return None


def _v2_quota(group: str) -> float | None:
    words = _words(os.path.join(group, "cpu.max"))
    try:
        return int(words[0]) / int(words[1])
    except (TypeError, ValueError, IndexError, ZeroDivisionError):    # "max": no quota
        return None


def _v1_quota(group: str) -> float | None:
    quota = _words(os.path.join(group, "cpu.cfs_quota_us"))
    period = _words(os.path.join(group, "cpu.cfs_period_us"))
    try:
        limit = int(quota[0]) / int(period[0])
    except (TypeError, ValueError, IndexError, ZeroDivisionError):    # absent or malformed
        return None
    return limit if limit > 0 else None         # -1: no quota


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


_PTHREAD_ATTR_BYTES = 256            # room for pthread_attr_t (56 bytes on x86-64 glibc)
_stack = threading.local()


def _query_stack_bytes() -> int | None:
    try:
        libc = ctypes.CDLL(None)
        get_attributes = libc.pthread_getattr_np
    except (OSError, AttributeError):          # not glibc or musl
        return None
    libc.pthread_self.restype = ctypes.c_void_p
    get_attributes.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    attributes = ctypes.create_string_buffer(_PTHREAD_ATTR_BYTES)
    if get_attributes(libc.pthread_self(), attributes) != 0:
        return None
    size = ctypes.c_size_t()
    libc.pthread_attr_getstacksize.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    found = libc.pthread_attr_getstacksize(attributes, ctypes.byref(size)) == 0
    libc.pthread_attr_destroy.argtypes = (ctypes.c_void_p,)
    libc.pthread_attr_destroy(attributes)
    return size.value if found else None


def thread_stack_bytes() -> int | None:
    """The calling thread's stack size (pthread_getattr_np; the main thread's is its rlimit),
    None where the C library cannot tell. Asked once per thread."""
    try:
        return _stack.bytes
    except AttributeError:
        _stack.bytes = _query_stack_bytes()
        return _stack.bytes


def stack_suffices(needed: int) -> bool:
    """Whether the calling thread's stack holds `needed` bytes (assumed so where unknown)."""
    size = thread_stack_bytes()
    return size is None or size >= needed


def start_worker_thread(target: Callable, args: tuple, name: str) -> threading.Thread:
    """A started daemon thread running target(*args) with at least WORKER_STACK_BYTES of
    stack; threading's setting, which is process-wide, is put back after the start."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    before = threading.stack_size()
    threading.stack_size(max(before, WORKER_STACK_BYTES))
    try:
        thread.start()
    finally:
        threading.stack_size(before)
    return thread


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
                start_worker_thread(self._work, (tasks,), f"einjit-worker-{len(self._queues)}")
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

    def run(self, function: Callable, argument_lists: Sequence[tuple],
            on_caller: bool = True) -> None:
        """Call function(*args) for every args, the first on this thread (unless on_caller
        is False: then all on workers), the others on workers, and return when all have
        returned."""
        if len(argument_lists) == 1 and on_caller:
            function(*argument_lists[0])
            return
        handed = argument_lists[1:] if on_caller else argument_lists
        self._ensure(len(handed))
        latch = _Latch(len(handed))
        for tasks, args in zip(self._queues, handed):
            tasks.put((function, args, latch))
        try:
            if on_caller:
                function(*argument_lists[0])
        finally:
            latch.wait()


pool = WorkerPool()
