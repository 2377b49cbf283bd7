"""einjit on every core while another process keeps one of them busy.

Where a nest's threads claim its chunks (einjit.codegen.workers.NestShares), the thread that
shares its core takes fewer of them and the others take the rest; with fixed shares the whole
step waits for that thread. Every einsum case of the einsum section (float32) is planned for
every core, each of einjit's threads pinned to a core of its own (as on a server whose cores
einjit's threads fill: nothing moves them off the busy one), and timed as the median of a few
calls, each configuration in a process of its own:

- idle: the machine as it is, claimed chunks (einjit's default);
- busy: a process spinning on the last core, claimed chunks;
- busy, fixed shares: the same plans with no chunks to claim (CLAIMS_PER_THREAD = 0).

Per case it prints GFLOPS of each and each busy figure over the idle one. A core shared with
the spinner gives einjit about half of itself, so (cores - 1/2) / cores of the idle speed is
the most a busy run can keep; fixed shares keep about 1/2 of it on two cores, and
(cores - 1) / cores at best on more.

    python -m benchmarks.busy_core [--filter TEXT] [--quick]
"""

import argparse
import csv
import io
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time

import einjit

from . import einsum
from .harness import einjit_threads, one_blas_thread
from .output import write_result
from .verdict import WrongResult

CALLS = 7                           # timed calls per case; the median is reported
SPINNER = "while True: pass"
WORKER_PREFIX = "einjit-native-worker-"
COLUMNS = ["case", "gflop", "idle_gflops", "busy_claimed_gflops", "busy_fixed_gflops",
           "claimed_over_idle", "fixed_over_idle"]


def pin_threads(cores: list[int]) -> None:
    """This thread on the first of `cores`, einjit's native workers one on each of the rest in
    turn (Linux: a thread's id names it to sched_setaffinity)."""
    os.sched_setaffinity(0, {cores[0]})
    workers = sorted((thread for thread in threading.enumerate()
                      if thread.name.startswith(WORKER_PREFIX)),
                     key=lambda thread: int(thread.name[len(WORKER_PREFIX):]))
    for index, thread in enumerate(workers):
        os.sched_setaffinity(thread.native_id, {cores[1 + index % (len(cores) - 1)]})


def measure(pattern: str | None, quick: bool, fixed: bool) -> dict[str, list[float]]:
    """Each case's [GFLOP, median GFLOPS] on every core, each thread on a core of its own (in
    the process that calls it: it pins this process's threads)."""
    if fixed:
        from einjit.codegen import compile as compile_module
        compile_module.CLAIMS_PER_THREAD = 0
    cores = sorted(os.sched_getaffinity(0))
    results = {}
    for case in einsum.cases(quick, pattern):
        with einjit_threads(len(cores)):
            expression = case.compile("float32", threads=len(cores))
        operands = einsum.operands_of(case.shapes, "float32")
        flops = float(expression.tree.flops())
        with one_blas_thread():
            expected = einsum.reference(case, operands, flops, math.prod(expression.shape))
        error = einsum.relative_error(expression(*operands), expected)
        if not error < einsum.TOLERANCES["float32"]:
            raise WrongResult(f"busy_core {case.name}: einjit's result differs from numpy's "
                              f"(relative error {error:.2e})")
        if len(cores) > 1:
            pin_threads(cores)
        seconds = []
        for _ in range(CALLS):
            start = time.perf_counter()
            expression(*operands)
            seconds.append(time.perf_counter() - start)
        results[case.name] = [flops / 1e9, flops / statistics.median(seconds) / 1e9]
        os.sched_setaffinity(0, cores)
    return results


def _child(pattern: str | None, quick: bool, fixed: bool) -> dict[str, list[float]]:
    command = [sys.executable, "-m", "benchmarks.busy_core", "--child"]
    command += ["--filter", pattern] if pattern else []
    command += ["--quick"] if quick else []
    command += ["--fixed-shares"] if fixed else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise WrongResult(done.stdout.strip().splitlines()[-1] if done.stdout.strip()
                          else done.stderr.strip())
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(pattern: str | None = None, quick: bool = False, progress=print
        ) -> tuple[list[str], str]:
    """(the lines, each passed to `progress` as it comes, and the CSV)."""
    if not einsum.cases(quick, pattern):
        raise ValueError(f"--filter {pattern!r}: no einsum case's name contains it")
    cores = sorted(os.sched_getaffinity(0))
    progress(f"einsum float32 on {einjit.resolve_target(None)}, {len(cores)} threads, each "
             f"pinned to a core; busy: a process spinning on core {cores[-1]}")
    progress("timing on the idle machine ...")
    idle = _child(pattern, quick, fixed=False)
    spinner = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity("
                                f"0, {{{cores[-1]}}})\n{SPINNER}"])
    try:
        progress("timing beside the spinner: claimed chunks ...")
        claimed = _child(pattern, quick, fixed=False)
        progress("timing beside the spinner: fixed shares ...")
        fixed = _child(pattern, quick, fixed=True)
    finally:
        spinner.kill()
        spinner.wait()
    best = (len(cores) - 0.5) / len(cores)
    lines = [f"GFLOPS, median of {CALLS} calls; busy over idle at most {best:.0%} "
             f"((cores - 1/2) / cores)",
             f"{'case':<34} {'GFLOP':>7} {'idle':>7} {'claimed':>8} {'fixed':>7} "
             f"{'claimed/idle':>13} {'fixed/idle':>11}"]
    table = io.StringIO()
    rows = csv.writer(table)
    rows.writerow(COLUMNS)
    for name, (gflop, idle_gflops) in idle.items():
        busy, still = claimed[name][1], fixed[name][1]
        lines.append(f"{name:<34} {gflop:7.2f} {idle_gflops:7.0f} {busy:8.0f} {still:7.0f} "
                     f"{busy / idle_gflops:12.0%} {still / idle_gflops:10.0%}")
        rows.writerow([name, f"{gflop:.4f}", f"{idle_gflops:.6g}", f"{busy:.6g}",
                       f"{still:.6g}", f"{busy / idle_gflops:.4g}", f"{still / idle_gflops:.4g}"])
    ratios = [claimed[name][1] / fixed[name][1] for name in idle]
    lines.append(f"claimed over fixed shares beside the spinner: geomean "
                 f"{einsum.geomean(ratios):.2f}x, lowest {min(ratios):.2f}x")
    for line in lines:
        progress(line)
    return lines, table.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument("--quick", action="store_true",
                        help=f"every case shrunk to about {einsum.QUICK_FLOPS:.0e} flops")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fixed-shares", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    try:
        if options.child:
            print(json.dumps(measure(options.filter, options.quick, options.fixed_shares)))
            return 0
        _, table = run(options.filter, options.quick)
    except ValueError as error:
        parser.error(str(error))
    except WrongResult as error:
        print(f"WRONG: {error}")
        return 1
    print(f"written: {write_result('busy_core.csv', table)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
