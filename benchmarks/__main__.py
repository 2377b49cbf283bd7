"""einjit's main job: benchmark the primitives and einsum against their peers on this host.

On x86-64: the FMA peak and numpy's bandwidth as references, GEMM/BRGEMM over the full size
grid for each code variant the host runs, unary/binary bandwidth against numpy. On any host:
the static (llvm-mca) throughput of the generated A64 BRGEMM loops and generation times,
TensorOperations (benchmarks/tensor_operation.py: the seeds' configurations, optimize,
permutations, call overhead) and einsum (benchmarks/einsum.py) against numpy, opt_einsum,
torch and TBLIS, in float32 and then float64, the same cases at the same sizes (--dtype for
one of them). Sections can be named to run only those (`python -m benchmarks einsum`,
`python -m benchmarks einsum --dtype float64`).
Every table is written under benchmarks/results/ (git-ignored; --results DIR for another
folder); the summary is printed at the end. The figures the README quotes are a committed
copy, benchmarks/reference/<date>-<machine>/, that only --update-reference writes.

    python -m benchmarks [SECTION ...] [--quick] [--dtype float32|float64] [--results DIR]
                         [--update-reference]
"""

import argparse
import datetime
import os
import sys
import time

from einjit.backends.x86_64 import cpu
from einjit.runtime.host import host_isa

from . import aarch64_mca, einsum, tensor_operation, x86_eltwise, x86_gemm
from .output import RESULTS_ENV, machine_name, results_dir, update_reference, write_result


def _x86_variants():
    best = cpu.variant()
    return [best] + (["avx2"] if best != "avx2" else [])


def _plots():
    """PNG/SVG figures of the CSVs and summary.md beside them (needs matplotlib: the "plots"
    extra that scripts/setup installs)."""
    try:
        import matplotlib  # noqa: F401

        from . import plots
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install -e '.[plots]')")
        return
    written = plots.write_plots(results_dir())
    print(f"written: {written[-1]} with {len(written) - 1} figure files")


SECTIONS = ("gemm", "eltwise", "mca", "tensorop", "einsum")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sections", nargs="*", metavar="SECTION",
                        help=f"run only these sections, of {', '.join(SECTIONS)} (default: all; "
                             f"summary.txt is then written as summary-<sections>.txt)")
    parser.add_argument("--quick", action="store_true",
                        help="a coarse GEMM grid (M, N in 16,32,48,64) instead of 1..64")
    parser.add_argument("--dtype", choices=einsum.DTYPES,
                        help="einsum section: only this dtype (default: float32, then "
                             "float64, at the sizes --quick picks)")
    parser.add_argument("--results", metavar="DIR",
                        help="write the result files here (default: benchmarks/results/, "
                             "git-ignored)")
    parser.add_argument("--update-reference", action="store_true",
                        help="after the run, copy the results to the committed reference "
                             "benchmarks/reference/<date>-<machine>/ (the README's figures)")
    options = parser.parse_args(argv)
    unknown = [name for name in options.sections if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown sections {unknown}; expected some of {', '.join(SECTIONS)}")
    chosen = set(options.sections or SECTIONS)
    if options.update_reference and (options.quick or chosen != set(SECTIONS)):
        parser.error("--update-reference needs the full run, not --quick or some sections")
    if options.results:
        os.environ[RESULTS_ENV] = options.results
    started = time.perf_counter()
    summary = []

    def section(title, lines):
        print(f"\n== {title}", flush=True)
        print("\n".join(lines), flush=True)
        summary.extend([f"== {title}", *lines])

    if host_isa() == "x86_64" and "gemm" in chosen:
        sizes = [16, 32, 48, 64] if options.quick else list(range(1, 65))
        for variant in _x86_variants():
            print(f"\n== x86-64 GEMM grid, {variant} ({len(sizes)}x{len(sizes)} sizes x "
                  f"{len(x86_gemm.K_VALUES)} K values)", flush=True)
            lines, table = x86_gemm.run(variant, sizes, x86_gemm.K_VALUES)
            write_result(f"x86_gemm_{variant}.csv", table)
            section(f"x86-64 GEMM/BRGEMM ({variant})", lines)
    if host_isa() == "x86_64" and "eltwise" in chosen:
        print("\n== x86-64 unary/binary bandwidth against numpy (about a minute)", flush=True)
        lines, table = x86_eltwise.run(_x86_variants())
        write_result("x86_eltwise.csv", table)
        section("x86-64 unary/binary bandwidth, GiB/s (read + written)", lines)
    if "mca" in chosen:
        section("AArch64 BRGEMM, static throughput (llvm-mca) and generation time",
                aarch64_mca.report().splitlines())
    if "tensorop" in chosen:
        print("\n== TensorOperation: the seeds' configurations, optimize, permutations, overhead",
              flush=True)
        lines, table = tensor_operation.run(options.quick)
        write_result("tensor_operation.csv", table)
        section("TensorOperation (JIT'd loop nests, threads, optimizer)", lines)
    if "einsum" in chosen:
        # the same cases in each dtype: at --quick sizes a tree case's fixed order can cost
        # several times the flops of the path its peers choose, so quick figures are no
        # measure of einjit against them
        quick = options.quick
        for dtype in [options.dtype] if options.dtype else list(einsum.DTYPES):
            # measured on 2 Zen 4 cores, peers timed in two windows
            took = "three minutes" if quick else \
                "eight minutes" if dtype == "float32" else "thirteen minutes"
            print(f"\n== {dtype} einsum against its peers "
                  f"({'--quick: small sizes, ' if quick else ''}about {took} on 2 cores; "
                  f"a line per case)", flush=True)
            lines, table = einsum.run(quick, progress=lambda line: print(line, flush=True),
                                      dtype=dtype)
            write_result(einsum.csv_name(dtype), table)
            section(f"einsum {dtype}{' (quick sizes)' if quick else ''}: einjit against numpy, "
                    f"opt_einsum, torch, TBLIS", lines)
    summary.append(f"total time {time.perf_counter() - started:.0f} s")
    name = "summary.txt" if chosen == set(SECTIONS) else \
        f"summary-{'-'.join(s for s in SECTIONS if s in chosen)}.txt"
    path = write_result(name, "\n".join(summary) + "\n")
    print(f"\nwritten: {path} and the tables beside it")
    _plots()
    if options.update_reference:
        reference = update_reference(results_dir(), datetime.date.today().isoformat(),
                                     machine_name())
        print(f"reference updated: {reference} (review, update the README's figures, commit)")


if __name__ == "__main__":
    sys.exit(main())
