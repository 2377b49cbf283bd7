"""einjit's main job: benchmark the primitives and einsum against their peers on this host.

By default a representative run (about ten minutes on 2 cores): on x86-64 the GEMM/BRGEMM
headline sizes (HEADLINE_SIZES, every K) of the host's best code variant against the FMA
peak and the element-wise kernels against numpy's bandwidth; on any host the seeds'
TensorOperation configurations with the call overhead, and every einsum case in float32
against numpy, opt_einsum, torch and TBLIS (the peers timed in one window), and an einsum on
dask arrays of more than 4 GB against dask.array.einsum (the dask extra) and a tensor network
contracted in slices under memory_limit = its peak / 8 (the "dask" section). --full runs
everything: the whole GEMM grid (M, N in 1..64) for each code variant the host runs, the
static (llvm-mca) throughput of the generated A64 kernels and of the x86-64 BRGEMM inner
loops on Intel and AMD cores (checked against this host), the TensorOperation optimizer and
permutation cases, einsum in float32 and float64 (einjit and the peers each timed in two
windows), and the matrix products against numpy's @ and torch.matmul on 1 and 2 threads in
float32 and float64 (--large adds n = 4096). --quick: a coarse GEMM grid, small einsum sizes
and a tiny matmul grid, to try the job.
Sections can be named to run only those (`python -m benchmarks einsum --dtype float64`).

Each table is printed once, after its section; a closing VERDICT lists every stated target
met or missed and every result that failed its check against numpy. The exit status is 1
only where a result was wrong (slow is reported, not fatal). Every table and a picture of
each CSV are written under benchmarks/results/ (git-ignored; --results DIR for another
folder). --update-reference (a --full run) replaces benchmarks/reference/<machine kind>/
with the run's summary and its einsum and GEMM pictures.

    python -m benchmarks [SECTION ...] [--full | --quick] [--dtype DTYPE]
                         [--large] [--results DIR] [--update-reference]
"""

import argparse
import os
import sys
import time

from einjit.backends.x86_64 import cpu
from einjit.runtime.host import host_isa

from . import aarch64_mca, einsum, matmul, slicing, tensor_operation, x86_eltwise, x86_gemm, x86_mca
from . import dask as dask_einsum
from .output import RESULTS_ENV, machine_name, results_dir, update_reference, write_result
from .verdict import Verdict, WrongResult

SECTIONS = ("gemm", "eltwise", "mca", "x86_mca", "tensorop", "einsum", "matmul", "dask")
FULL_ONLY = ("mca", "x86_mca", "matmul")   # the default run leaves these out
QUICK_SIZES = (16, 32, 48, 64)


def _x86_variants(full):
    """The host's best variant; with `full`, AVX2 as well where the best is AVX-512."""
    best = cpu.variant()
    return [best] + (["avx2"] if full and best != "avx2" else [])


def _plots():
    """PNG/SVG figures of the CSVs and summary.md beside them (needs matplotlib: the "plots"
    extra that scripts/setup installs)."""
    try:
        import matplotlib  # noqa: F401

        from . import plots
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install -e '.[plots]')")
        return
    written = plots.write_plots(results_dir(), progress=lambda line: None)
    print(f"written: {written[-1]} with {len(written) - 1} figure files")


def _have_dask():
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def chosen_sections(names, full):
    """The sections a run takes: those named, else every one (the default run: all but
    FULL_ONLY)."""
    if names:
        return [s for s in SECTIONS if s in names]
    return [s for s in SECTIONS if full or s not in FULL_ONLY]


def einsum_dtypes(dtype, full):
    return [dtype] if dtype else list(einsum.DTYPES) if full else ["float32"]


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sections", nargs="*", metavar="SECTION",
                        help=f"run only these sections, of {', '.join(SECTIONS)} (default: all "
                             f"but {', '.join(FULL_ONLY)}; --full: all)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true",
                      help="everything: the whole GEMM grid for each variant, llvm-mca, every "
                           "TensorOperation case, einsum in float32 and float64")
    mode.add_argument("--quick", action="store_true",
                      help=f"a coarse GEMM grid (M, N in {QUICK_SIZES}), small einsum sizes")
    parser.add_argument("--dtype", choices=einsum.ALL_DTYPES,
                        help="einsum and matmul sections: only this dtype (default: einsum "
                             "float32, matmul both; --full: float32, then float64; "
                             "complex64, complex128: the einsum section only)")
    parser.add_argument("--large", action="store_true",
                        help=f"matmul section: add n = {matmul.LARGE_SIZE} to the grid")
    parser.add_argument("--results", metavar="DIR",
                        help="write the result files here (default: benchmarks/results/, "
                             "git-ignored)")
    parser.add_argument("--update-reference", action="store_true",
                        help="with --full and every section: replace the committed "
                             "benchmarks/reference/<machine kind>/ with this run's summary "
                             "and pictures")
    options = parser.parse_args(argv)
    unknown = [name for name in options.sections if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown sections {unknown}; expected some of {', '.join(SECTIONS)}")
    if options.update_reference and not (options.full and not options.sections
                                         and not options.dtype):
        parser.error("--update-reference needs the whole --full run (no sections, no --dtype)")
    return options


def main(argv=None):
    options = parse(argv)
    full, quick = options.full, options.quick
    chosen = chosen_sections(options.sections, full)
    if options.results:
        os.environ[RESULTS_ENV] = options.results
    started = time.perf_counter()
    summary, verdict = [], Verdict()
    mode = "--full" if full else "--quick" if quick else "default"
    print(f"einjit benchmarks ({mode} run): {', '.join(chosen)}", flush=True)

    def section(title, measure):
        """Run measure() -> lines; print the title, then the lines once, when done."""
        print(f"\n== {title}", flush=True)
        try:
            lines = measure()
        except WrongResult as error:
            verdict.wrong(str(error))
            lines = [f"WRONG: {error}; the section stopped"]
        print("\n".join(lines), flush=True)
        summary.extend([f"== {title}", *lines])

    def written(name, lines_and_table):
        lines, table = lines_and_table
        write_result(name, table)
        return lines

    x86 = host_isa() == "x86_64"
    if x86 and "gemm" in chosen:
        sizes = list(range(1, 65)) if full else QUICK_SIZES if quick else x86_gemm.HEADLINE_SIZES
        grid = "1..64" if full else ", ".join(map(str, sizes))
        for variant in _x86_variants(full):
            section(f"x86-64 GEMM/BRGEMM, {variant} (M, N in {grid}; K in "
                    f"{', '.join(map(str, x86_gemm.K_VALUES))})",
                    lambda variant=variant: written(
                        f"x86_gemm_{variant}.csv",
                        x86_gemm.run(variant, list(sizes), x86_gemm.K_VALUES, verdict=verdict)))
    if x86 and "eltwise" in chosen:
        section("x86-64 unary/binary bandwidth against numpy, GiB/s (read + written)",
                lambda: written("x86_eltwise.csv",
                                x86_eltwise.run(_x86_variants(full), verdict=verdict)))
    if "mca" in chosen:
        section("AArch64 BRGEMM, static throughput (llvm-mca) and generation time",
                lambda: aarch64_mca.report(verdict).splitlines())
    if "x86_mca" in chosen:
        section("x86-64 BRGEMM inner loops on Intel and AMD cores, static throughput "
                "(llvm-mca), against this host",
                lambda: x86_mca.report().splitlines())
    if "tensorop" in chosen:
        seeds_only = not full
        section("TensorOperation: " + ("the seeds' configurations and the call overhead"
                                       if seeds_only else "the seeds' configurations, "
                                       "optimize, permutations, call overhead"),
                lambda: written("tensor_operation.csv",
                                tensor_operation.run(quick, seeds_only, verdict)))
    if "einsum" in chosen:
        for dtype in einsum_dtypes(options.dtype, full):
            # quick sizes: a tree's fixed order can cost several times the flops of the path
            # its peers choose, so quick figures are no measure of einjit against them
            section(f"einsum {dtype}{' (quick sizes)' if quick else ''}: einjit against "
                    f"numpy, opt_einsum, torch, TBLIS",
                    lambda dtype=dtype: written(
                        einsum.csv_name(dtype),
                        einsum.run(quick, progress=lambda line: print(line, flush=True),
                                   dtype=dtype, verdict=verdict,
                                   peer_windows=2 if full else 1)))
    if "matmul" in chosen:
        shapes = matmul.QUICK_GRID if quick else matmul.grid(options.large)
        # a complex --dtype is the einsum section's alone (matmul times the real dtypes)
        for dtype in [d for d in ([options.dtype] if options.dtype else matmul.DTYPES)
                      if d in matmul.DTYPES]:
            section(f"matmul {dtype}{' (quick sizes)' if quick else ''}: einjit against "
                    f"numpy's @ and torch.matmul, 1 and 2 threads",
                    lambda dtype=dtype: written(
                        matmul.csv_name(dtype),
                        matmul.run(dtype, shapes, verdict=verdict,
                                   progress=lambda line: print(line, flush=True))))
    if "dask" in chosen:
        section("einsum on dask arrays: einjit.dask.einsum against dask.array.einsum, same "
                "chunks, dask's threads" + (" (quick sizes)" if quick else ""), lambda:
                written(dask_einsum.CSV_NAME, dask_einsum.run(quick, verdict=verdict))
                if _have_dask() else ["skipped: dask is not installed (pip install -e "
                                      "'.[dask]'; scripts/setup installs it)"])
        section("a tensor network under memory_limit = its peak / 8: einjit sliced against "
                "einjit whole and opt_einsum + numpy", lambda: written(
                    slicing.CSV_NAME, slicing.run(lambda line: print(line, flush=True),
                                                  verdict=verdict)))
    closing = ["", "== VERDICT", *verdict.lines(),
               f"total time {time.perf_counter() - started:.0f} s ({mode} run)"]
    summary.extend(closing)
    name = "summary.txt" if not options.sections else \
        f"summary-{'-'.join(chosen)}.txt"
    path = write_result(name, "\n".join(summary) + "\n")
    print(f"\nwritten: {path} and the tables beside it")
    _plots()
    if options.update_reference:
        reference = update_reference(results_dir(), machine_name())
        print(f"reference replaced: {reference} (review, update the README's figures, commit)")
    print("\n".join(closing), flush=True)
    return verdict.exit_code()


if __name__ == "__main__":
    sys.exit(main())
