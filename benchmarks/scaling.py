"""einjit on 1, a few and all of this machine's cores, beside the best peer on all of them.

For a many-core server (the issue "Many cores"): every einsum case of the einsum section,
float32, einjit's plan for each thread count of --threads (default 1, 4 and every core) timed
in this process, its result checked against numpy's; the peers (numpy, opt_einsum, torch,
TBLIS where installed) on every core, each family in a process of its own and timed in one
window; the all-core FMA peak measured first. Per case it prints GFLOPS at each count, the
speed-up of the most threads over one, measured and as the parallel profile predicts it, the
share of the all-core peak and einjit over the best peer. A shared machine moves between
runs: compare figures of one run only.

    python -m benchmarks.scaling [--threads 1,4,16] [--filter TEXT] [--quick]
"""

import argparse
import csv
import io
import math
import os
import sys

import einjit

from . import einsum
from .harness import best_seconds, einjit_threads, one_blas_thread
from .output import write_result
from .tensor_operation import all_core_peak_gflops
from .verdict import WrongResult, plural

COLUMNS = ["case", "gflop", "threads", "gflops", "speedup_measured", "speedup_predicted",
           "share_of_all_core_peak", "best_peer", "best_peer_gflops", "einjit_over_best_peer"]


def thread_counts(text: str | None, cores: int) -> list[int]:
    """The counts of --threads (default 1, 4 and `cores`), sorted, each named once."""
    if text is None:
        return sorted({1, min(4, cores), cores})
    try:
        counts = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise ValueError(f"--threads {text!r}: expected counts such as 1,4,16") from None
    if counts[0] < 1:
        raise ValueError(f"--threads {text!r}: every count must be 1 or more")
    return counts


def measure_case(case: einsum.Case, counts: list[int]) -> dict:
    """einjit's GFLOPS on each thread count (best of a few calls; each plan's result checked
    against numpy's) and the best peer's on the most threads."""
    operands = einsum.operands_of(case.shapes, "float32")
    expressions = {count: case.compile("float32", threads=count) for count in counts}
    expression = expressions[counts[-1]]
    flops = float(expression.tree.flops())
    with one_blas_thread():
        expected = einsum.reference(case, operands, flops, math.prod(expression.shape))
    gflops = {}
    for count, expression in expressions.items():
        error = einsum.relative_error(expression(*operands), expected)
        if not error < einsum.TOLERANCES["float32"]:
            raise WrongResult(f"scaling {case.name} on {plural(count, 'thread')}: einjit's result "
                              f"differs from numpy's (relative error {error:.2e})")
        seconds = best_seconds(lambda: expression(*operands), 3 if count == 1 else 5)
        gflops[count] = flops / seconds / 1e9
    most = counts[-1]
    times, _ = einsum.peer_seconds(case.equation, operands, most)
    best = min(times, key=times.get)
    return dict(case=case, flops=flops, gflops=gflops, best=best,
                best_gflops=flops / times[best] / 1e9,
                predicted=most * expression.parallel_profile(most).efficiency)


def case_line(result: dict, counts: list[int], peak: float) -> str:
    gflops, most = result["gflops"], counts[-1]
    columns = " ".join(f"{gflops[count]:7.0f}" for count in counts)
    return (f"{result['case'].name:<34} {result['flops'] / 1e9:7.2f} {columns} "
            f"{gflops[most] / gflops[counts[0]]:6.1f}x {result['predicted']:6.1f}x "
            f"{100 * gflops[most] / peak:5.0f}% {result['best_gflops']:7.0f} "
            f"{result['best']:>16} {gflops[most] / result['best_gflops']:6.2f}x")


def run(counts: list[int], pattern: str | None = None, quick: bool = False,
        progress=print) -> tuple[list[str], str]:
    """(the lines, each passed to `progress` as it comes, and the CSV) of every case on
    `counts` threads."""
    cases = einsum.cases(quick, pattern)
    if not cases:
        raise ValueError(f"--filter {pattern!r}: no einsum case's name contains it")
    target = einjit.resolve_target(None)
    most = counts[-1]
    peak = max(all_core_peak_gflops(target.variant, most) for _ in range(2)) \
        if target.isa == "x86_64" else math.nan
    header = " ".join(f"{f'{count} thr':>7}" for count in counts)
    lines = [f"einsum float32 on {target} ({os.cpu_count()} cores); GFLOPS of each case's "
             f"nominal flops; all-core FMA peak on {most} cores: {peak:.0f} GFLOPS",
             f"{'case':<34} {'GFLOP':>7} {header} {f'{most}/{counts[0]}':>7} "
             f"{'profile':>7} {'% peak':>6} {'peer':>7} {f'best peer, {most} thr':>16} "
             f"{'ratio':>7}"]
    for line in lines:
        progress(line)
    table = io.StringIO()
    rows = csv.writer(table)
    rows.writerow(COLUMNS)
    for case in cases:
        with einjit_threads(most):
            result = measure_case(case, counts)
        line = case_line(result, counts, peak)
        progress(line)
        lines.append(line)
        for count in counts:
            rows.writerow([case.name, f"{result['flops'] / 1e9:.4f}", count,
                           f"{result['gflops'][count]:.6g}",
                           f"{result['gflops'][count] / result['gflops'][counts[0]]:.4g}",
                           f"{result['predicted']:.4g}" if count == most else "",
                           f"{result['gflops'][count] / peak:.4f}", result["best"],
                           f"{result['best_gflops']:.6g}" if count == most else "",
                           f"{result['gflops'][count] / result['best_gflops']:.4g}"
                           if count == most else ""])
    return lines, table.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", metavar="COUNTS",
                        help="thread counts, e.g. 1,4,16 (default 1, 4 and every core)")
    parser.add_argument("--filter", metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument("--quick", action="store_true",
                        help=f"every case shrunk to about {einsum.QUICK_FLOPS:.0e} flops")
    options = parser.parse_args(argv)
    try:
        counts = thread_counts(options.threads, os.cpu_count() or 1)
        _, table = run(counts, options.filter, options.quick)
    except ValueError as error:
        parser.error(str(error))
    except WrongResult as error:
        print(f"WRONG: {error}")
        return 1
    print(f"written: {write_result('scaling.csv', table)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
