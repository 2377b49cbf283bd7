"""Print what handing a step's shares to the native workers costs the calling thread.

For T = 2, 4, 8, 16 tasks (T - 1 on workers: past 2, more threads than this machine's cores
where it has 2), two figures, each the median of ROUNDS calls, best of REPEATS:

- post: from entering NativePool.run_tasks (its operand array built first, as
  NestShares.run does) to the caller's own task starting. The own task is libc's
  clock_gettime, which writes the time it starts; the workers' tasks are libc's abs (no
  work), so the figure is the posting alone.
- full: the whole call, the workers' waits included.

Then CompiledOperation.run of a float32 add of T shares of a 4 x 4 block, num_threads=T
(MIN_WORK_PER_THREAD 0, so that every share is its own task): einjit's own path, mean over
ROUNDS calls, best of REPEATS.

    PYTHONPATH=$PWD .venv/bin/python scripts/dispatch_cost.py
"""

from __future__ import annotations

import ctypes
import statistics
import time
from array import array

import numpy as np

from einjit.backends import resolve_target
from einjit.codegen import compile as compile_module
from einjit.codegen import compile_operation, workers
from einjit.ir import TensorOperation

ROUNDS, REPEATS = 2000, 7
COUNTS = (2, 4, 8, 16)
CLOCK = time.CLOCK_MONOTONIC


def _address(function) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value


def posting(pool: workers.NativePool, count: int) -> tuple[float, float]:
    """(post, full) in µs for `count` tasks."""
    libc = ctypes.CDLL(None)
    stamp = (ctypes.c_int64 * 2)()
    tasks = workers.Tasks([(_address(libc.clock_gettime), 0, 0, 0)]
                          + [(_address(libc.abs), 0, 0, 0)] * (count - 1))
    now, stamp_address = time.clock_gettime_ns, ctypes.addressof(stamp)
    posts, fulls = [], []
    for _ in range(REPEATS):
        post, full = [], []
        for _ in range(ROUNDS):
            started = now(CLOCK)
            pool.run_tasks(tasks, array("Q", (CLOCK, stamp_address, 0)))
            finished = now(CLOCK)
            post.append(stamp[0] * 10**9 + stamp[1] - started)
            full.append(finished - started)
        posts.append(statistics.median(post))
        fulls.append(statistics.median(full))
    return min(posts) / 1e3, min(fulls) / 1e3


def operation_run(count: int) -> float:
    """CompiledOperation.run of `count` shares in µs."""
    op = TensorOperation("float32", "none", "add", "none", ("c", "c", "c"),
                         ("shared", "prim", "prim"), (count, 4, 4), (16, 1, 4), (16, 1, 4),
                         (16, 1, 4), num_threads=count)
    compiled = compile_operation(op)
    assert len(compiled._shares) == count
    operands = [np.ones(16 * count, np.float32) for _ in range(3)]
    addresses = [operand.ctypes.data for operand in operands]
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(ROUNDS):
            compiled.run(*addresses)
        best = min(best, (time.perf_counter() - started) / ROUNDS)
    return best * 1e6


def main() -> None:
    pool = workers.native_pool(resolve_target())
    for count in COUNTS:
        post, full = posting(pool, count)
        print(f"T={count:2d}  post {post:6.2f} µs  full {full:6.2f} µs")
    compile_module.MIN_WORK_PER_THREAD = 0
    compile_module.compile_operation.cache_clear()
    for count in COUNTS:
        print(f"T={count:2d}  CompiledOperation.run {operation_run(count):6.2f} µs")


if __name__ == "__main__":
    main()
