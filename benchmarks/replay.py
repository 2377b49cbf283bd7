"""Many-thread plans replayed on one core: what 16, 48 or 72 cores would do with einjit's
plans, measured on a small machine.

For every einsum case (float32, or --dtype), or with --matmul the matmul section's square
products from its PEAK_FROM up, the plan made for each thread count of --threads (its
parallel profile, einjit.frontend.profile: each step's operation as planned for the count and
each thread's share of its tasks), each step's nest compiled and every share run alone on
this thread, one after another, on operands of the step's extents (random values), best of a
few runs each. On T cores the plan would take, per group of steps that run at once (one step
alone, or independent steps together), its slowest share: the replayed time is their sum. It
gives the plan's GFLOPS on T cores and its share of their FMA peak (one core's, measured in
the run, times T), the one-thread plan replayed the same way beside it, and the profile's
predicted efficiency (plan arithmetic: the shares' work, not their time).

What it leaves out is what the cores share: L3 and memory bandwidth, the hand-over of the
shares to the workers, and clocks that drop with every core busy. A share that copies A or B
runs as the plan runs it, with its copies; every share is timed warm, its operands in the
caches one core has.

    python -m benchmarks.replay [--threads 16,48,72] [--filter TEXT] [--quick] [--matmul]
                                [--dtype float32|float64]
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import time
from dataclasses import dataclass

import numpy as np

import einjit
from einjit.codegen import compile_operation
from einjit.runtime.threads import start_worker_thread

from . import einsum, matmul
from .harness import fma_peak_gflops
from .output import write_result

DEFAULT_THREADS = (16, 48, 72)
COLUMNS = ["case", "gflop", "threads", "replayed_gflops", "share_of_peak",
           "profile_efficiency", "slowest_over_mean_share"]
# a share's run timed this long at least (calls repeated): a short share's call overhead and
# the clock's resolution stay small beside it
SAMPLE_SECONDS = 2e-4
RUNS = 3                                  # best of this many samples per share
LARGE_GFLOP = 1       # the cases the many-cores issue holds to a share of the peak


@dataclass(frozen=True)
class Replay:
    """A plan for `threads` threads replayed on one core."""
    threads: int
    flops: float
    share_seconds: tuple[tuple[float, ...], ...]     # per step, each share's
    groups: tuple[tuple[int, ...], ...]              # the steps that run at once, in order
    efficiency: float                                # the profile's (plan arithmetic)

    @property
    def seconds(self) -> float:
        """The plan's time on `threads` cores: each group's slowest share, summed."""
        return sum(max(max(self.share_seconds[step]) for step in group)
                   for group in self.groups)

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9

    @property
    def slowest_over_mean(self) -> float:
        """The replayed time over what every core kept as busy as the mean would take."""
        return self.seconds * self.threads / sum(map(sum, self.share_seconds))


def operand_addresses(op, buffers: dict, rng: np.random.Generator) -> tuple[int, ...]:
    """The nest's three operand addresses (0 for an operand `op` does not take): buffers of
    their extents, cache-line aligned, random values, taken from `buffers` (keyed by operand,
    extent and dtype: a plan's other thread counts reuse them) or added to it."""
    addresses = []
    for name in ("in0", "in1", "out"):
        if name not in op.operands:
            addresses.append(0)
            continue
        key = (name, op.extent(name), np.dtype(op.dtype))
        if key not in buffers:
            extent, dtype = key[1:]
            raw = np.empty(extent * dtype.itemsize + 64, np.uint8)
            start = -raw.ctypes.data % 64
            buffer = raw[start:start + extent * dtype.itemsize].view(dtype)
            buffer[...] = rng.standard_normal(extent)
            buffers[key] = buffer
        addresses.append(buffers[key].ctypes.data)
    return tuple(addresses)


def share_seconds(function, addresses: tuple[int, ...], share: tuple[int, int]) -> float:
    """One share's best time of RUNS samples, each at least SAMPLE_SECONDS of calls."""
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            function(*addresses, *share)
        if time.perf_counter() - started >= SAMPLE_SECONDS:
            break
        calls *= 4
    best = math.inf
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(calls):
            function(*addresses, *share)
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def replay(expression: einjit.ContractExpression, threads: int, buffers: dict,
           rng: np.random.Generator) -> Replay:
    """`expression`'s plan for `threads` threads, each step's shares timed on this thread
    (operands from `buffers`, see operand_addresses)."""
    profile = expression.parallel_profile(threads)
    seconds = []
    for step in profile.steps:
        compiled = compile_operation(step.op)
        if tuple(compiled.shares) != step.shares:
            raise RuntimeError(f"step {step.step}: the compiled shares {compiled.shares} are "
                               f"not the profile's {step.shares}")
        addresses = operand_addresses(step.op, buffers, rng)
        seconds.append(tuple(share_seconds(compiled.function, addresses, share)
                             for share in step.shares))
    groups = profile.groups or tuple((step.step,) for step in profile.steps)
    return Replay(threads, float(expression.tree.flops()), tuple(seconds), groups,
                  profile.efficiency)


def on_a_large_stack(function, *args):
    """function(*args) on a thread with a native worker's stack (einjit's workers run the
    nests whose copies of A and B the calling thread's stack cannot hold), its exception
    raised here."""
    outcome = []

    def target():
        try:
            outcome.append((function(*args), None))
        except BaseException as caught:       # noqa: BLE001 (raised again on the caller)
            outcome.append((None, caught))
    start_worker_thread(target, (), "einjit-replay").join()
    result, error = outcome[0]
    if error is not None:
        raise error
    return result


def matmul_cases(pattern: str | None = None) -> list[einsum.Case]:
    """The matmul section's square products of PEAK_FROM or more, as einsum cases."""
    return [einsum.Case(shape.name, "matmul", shape.equation, shape.operand_shapes)
            for shape in matmul.grid() if shape.kind == "square"
            and shape.n >= matmul.PEAK_FROM and (pattern is None or pattern in shape.name)]


def run(counts: list[int], pattern: str | None = None, quick: bool = False,
        progress=print, products: bool = False, dtype: str = "float32"
        ) -> tuple[list[str], str]:
    """(the lines, each passed to `progress` as it comes, and the CSV) of every einsum case
    (with `products`, matmul_cases) replayed on one thread and on each of `counts`."""
    cases = matmul_cases(pattern) if products else einsum.cases(quick, pattern)
    if not cases:
        raise ValueError(f"--filter {pattern!r}: no case's name contains it")
    target = einjit.resolve_target(None)
    peak = max(fma_peak_gflops(target.variant, dtype=dtype) for _ in range(2)) \
        if target.isa == "x86_64" else math.nan
    counts = [1] + [count for count in counts if count != 1]
    header = " ".join(f"{f'{count} thr':>14}" for count in counts)
    lines = [f"{'matmul' if products else 'einsum'} {dtype} on {target}: each plan's shares "
             f"replayed on one core; per "
             f"thread count the share of that many cores' FMA peak (one core's "
             f"{peak:.0f} GFLOPS each) and, in brackets, the profile's predicted efficiency",
             f"{'case':<34} {'GFLOP':>7} {header}"]
    for line in lines:
        progress(line)
    table = io.StringIO()
    rows = csv.writer(table)
    rows.writerow(COLUMNS)
    rng = np.random.default_rng(einsum.SEED)
    shares = {count: {} for count in counts}     # of the cases of LARGE_GFLOP or more
    for case in cases:
        cells, buffers = [], {}
        for count in counts:
            expression = case.compile(dtype, threads=count)
            result = on_a_large_stack(replay, expression, count, buffers, rng)
            share = result.gflops / (peak * count)
            if result.flops >= LARGE_GFLOP * 1e9:
                shares[count][case.name] = share
            cells.append(f"{100 * share:6.1f}% ({100 * result.efficiency:4.0f}%)")
            rows.writerow([case.name, f"{result.flops / 1e9:.4f}", count,
                           f"{result.gflops:.6g}", f"{share:.4f}", f"{result.efficiency:.4f}",
                           f"{result.slowest_over_mean:.4f}"])
        line = f"{case.name:<34} {result.flops / 1e9:7.2f} {' '.join(cells)}"
        progress(line)
        lines.append(line)
    for count in counts:
        if shares[count] and not math.isnan(peak):
            lowest = min(shares[count], key=shares[count].get)
            line = (f"{count} thr, cases of {LARGE_GFLOP:g} GFLOP or more: lowest "
                    f"{100 * shares[count][lowest]:.1f}% of the peak ({lowest})")
            progress(line)
            lines.append(line)
    return lines, table.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", metavar="COUNTS", default=",".join(map(str, DEFAULT_THREADS)),
                        help="thread counts to plan for, e.g. 16,48,72 (the default)")
    parser.add_argument("--filter", metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument("--quick", action="store_true",
                        help=f"every case shrunk to about {einsum.QUICK_FLOPS:.0e} flops")
    parser.add_argument("--matmul", action="store_true",
                        help=f"the matmul section's square products of {matmul.PEAK_FROM} "
                             f"and more in place of the einsum cases")
    parser.add_argument("--dtype", choices=einsum.DTYPES, default="float32")
    options = parser.parse_args(argv)
    try:
        counts = sorted({int(part) for part in options.threads.split(",")})
        if counts[0] < 1 or counts[-1] > 1024:
            raise ValueError
    except ValueError:
        parser.error(f"--threads {options.threads!r}: expected counts 1..1024 such as 16,48,72")
    try:
        _, table = run(counts, options.filter, options.quick, products=options.matmul,
                       dtype=options.dtype)
    except ValueError as error:
        parser.error(str(error))
    name = f"replay_{'matmul' if options.matmul else 'einsum'}_{options.dtype}.csv"
    print(f"written: {write_result(name, table)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
