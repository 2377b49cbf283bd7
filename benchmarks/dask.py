"""einsum on dask arrays: einjit.dask.einsum against dask.array.einsum, on the same chunks and
the same scheduler (dask's threads, one per core).

The case: a float32 tensor of more than 4 GB, held in memory as 32 blocks (persisted before
the timing), projected on a small matrix along its last index, which the chunks split in
four, so both sides add partial sums across blocks. dask.array.einsum calls numpy.einsum per
block with dask's default optimize=False (numpy's own loops); the target is einjit at least
GOAL times faster. dask.array.einsum with optimize=True (numpy hands each block to BLAS, one
BLAS thread per dask thread) is timed too, for reference, with no target. Every result is
checked against dask's own (relative error).

    python -m benchmarks dask [--quick]
"""

from __future__ import annotations

import csv
import io
import math
import resource
import time
from typing import Callable

import numpy as np

from .einsum import relative_error
from .harness import GIB, one_blas_thread
from .progress import progress_bar
from .verdict import Verdict, WrongResult

EQUATION = "abc,cd->abd"
SHAPES = ((64, 4096, 4096), (4096, 64))
QUICK_SHAPES = ((8, 4096, 4096), (4096, 64))
CHUNKS = ((8, 4096, 1024), (1024, 64))         # c in 4 chunks: partial sums to add
GOAL = 2.0                                     # einjit over dask's own, same chunks
TOLERANCE = 1e-4                               # float32 partial sums in another order
REPETITIONS = {"numpy": 2, "einjit": 3, "blas": 2}
CSV_NAME = "dask.csv"


def operands(shapes, chunks, seed: int = 0):
    """The operands as persisted dask arrays (computed once, held in memory in blocks)."""
    import dask.array as da
    rng = da.random.default_rng(seed)
    return [(rng.random(shape, chunks=c, dtype=np.float32) - np.float32(0.5))
            .persist(scheduler="threads") for shape, c in zip(shapes, chunks)]


def timed(compute: Callable, repetitions: int, step: Callable[[str], None], name: str):
    """(best seconds, last result) of `repetitions` calls of compute()."""
    best, result = math.inf, None
    for index in range(repetitions):
        step(f"{name} {index + 1}/{repetitions}")
        start = time.perf_counter()
        result = compute()
        best = min(best, time.perf_counter() - start)
    return best, result


def peak_rss_gib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB


def run(quick: bool = False, verdict: Verdict | None = None,
        progress: Callable[[str], None] = print) -> tuple[list[str], str]:
    """(summary lines, CSV text) of the dask einsum case; its target and any wrong result go
    to `verdict` (a wrong result raises WrongResult)."""
    import dask
    import dask.array as da

    import einjit.dask

    verdict = verdict or Verdict()
    shapes = QUICK_SHAPES if quick else SHAPES
    steps = 1 + sum(REPETITIONS.values())
    with progress_bar(steps, "dask einsum") as bar:
        bar.step("operands")
        started = time.perf_counter()
        a, b = operands(shapes, CHUNKS)
        made = time.perf_counter() - started
        with dask.config.set(scheduler="threads"):
            numpy_lazy = da.einsum(EQUATION, a, b)
            einjit_lazy = einjit.dask.einsum(EQUATION, a, b)
            blas_lazy = da.einsum(EQUATION, a, b, optimize=True)
            if numpy_lazy.chunks != einjit_lazy.chunks:
                raise WrongResult(f"dask einsum: dask rechunked to {numpy_lazy.chunks}, einjit "
                                  f"kept {einjit_lazy.chunks}: not the same blocks")
            numpy_s, reference = timed(numpy_lazy.compute, REPETITIONS["numpy"], bar.step,
                                       "dask.array.einsum")
            einjit_s, result = timed(einjit_lazy.compute, REPETITIONS["einjit"], bar.step,
                                     "einjit.dask.einsum")
            with one_blas_thread():
                blas_s, blas_result = timed(blas_lazy.compute, REPETITIONS["blas"], bar.step,
                                            "dask.array.einsum optimize=True")
    error = relative_error(result, reference)
    blas_error = relative_error(blas_result, reference)
    if not error < TOLERANCE:
        raise WrongResult(f"dask einsum {EQUATION}: einjit.dask.einsum differs from "
                          f"dask.array.einsum (relative error {error:.2e}, tolerance "
                          f"{TOLERANCE:.0e})")
    if not blas_error < TOLERANCE:
        raise WrongResult(f"dask einsum {EQUATION}: dask.array.einsum optimize=True differs "
                          f"from optimize=False (relative error {blas_error:.2e})")
    nbytes = sum(math.prod(s) for s in shapes) * 4
    speedup, over_blas = numpy_s / einjit_s, blas_s / einjit_s
    flops = 2 * math.prod(shapes[0]) * shapes[1][1]
    blocks = math.prod(len(c) for c in a.chunks)
    split = len(a.chunks[2])
    describe = " ".join("x".join(map(str, s)) for s in shapes)
    lines = [
        f"{EQUATION} float32: {describe} ({nbytes / 1e9:.2f} GB of operands; A in {blocks} "
        f"blocks of {'x'.join(map(str, CHUNKS[0]))}, c split in {split}); dask's threads "
        f"scheduler; operands made and persisted in {made:.1f} s",
        f"  dask.array.einsum (numpy.einsum per block, optimize=False): {numpy_s:7.2f} s "
        f"{flops / numpy_s / 1e9:7.1f} GFLOPS",
        f"  einjit.dask.einsum:                                         {einjit_s:7.2f} s "
        f"{flops / einjit_s / 1e9:7.1f} GFLOPS  {speedup:.2f}x dask's own",
        f"  dask.array.einsum optimize=True (BLAS per block, 1 thread): {blas_s:7.2f} s "
        f"{flops / blas_s / 1e9:7.1f} GFLOPS  (einjit {over_blas:.2f}x; no target)",
        f"  relative error against dask.array.einsum: einjit {error:.1e}, optimize=True "
        f"{blas_error:.1e}; peak resident memory of this process so far "
        f"{peak_rss_gib():.1f} GiB",
    ]
    target = verdict.target(f"dask einsum {EQUATION} ({nbytes / 1e9:.1f} GB): einjit.dask over "
                            f"dask.array.einsum, same chunks", speedup, GOAL, unit="x",
                            digits=2)
    lines.append(f"  {target.line()}")
    table = io.StringIO()
    rows = csv.writer(table, lineterminator="\n")
    rows.writerow(["equation", "shapes", "chunks", "gbytes", "gflop", "dask_numpy_s",
                   "einjit_s", "speedup", "dask_blas_s", "einjit_over_blas", "rel_error"])
    rows.writerow([EQUATION, describe, " ".join("x".join(map(str, c)) for c in CHUNKS),
                   f"{nbytes / 1e9:.3f}", f"{flops / 1e9:.2f}", f"{numpy_s:.4f}",
                   f"{einjit_s:.4f}", f"{speedup:.3f}", f"{blas_s:.4f}", f"{over_blas:.3f}",
                   f"{error:.2e}"])
    del a, b, result, reference, blas_result
    return lines, table.getvalue()
