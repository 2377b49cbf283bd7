"""Matrix products: einjit's `ij,jk->ik` (batched: `bij,bjk->bik`) against numpy's `@` and
torch.matmul, on a grid of shapes, on 1 and 2 threads, in float32 and float64.

The grid (M x K x N, so that A is M x K and B is K x N): square n in SQUARE_SIZES (LARGE_SIZE
as well with large=True), the skinny products of SKINNY (matrix-vector products among them)
and the batched one of BATCHED.
einjit runs in this process with EINJIT_NUM_THREADS set while each expression is compiled
(the thread count is fixed then). numpy and torch each run in a child process of their own
(their thread pools would starve einjit's and each other's on a small machine) with
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / torch.set_num_threads at the thread count, and
without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which some hosts set for old OpenBLAS builds
and which slow a current numpy. Every result, einjit's and the peers', is checked against
numpy in float64 before it is timed; einjit and the peers are timed in two windows each,
alternating, each keeping its best of several warm calls.

Per shape and thread count: GFLOPS of each, einjit / numpy `@`, and einjit's share of the FMA
peak of the threads used (x86-64: measured in the run). The targets, recorded in the run's
verdict: einjit at least TARGET_RATIO times numpy's `@` on every shape (the lowest ratio and
the geomean, per thread count), and at least PEAK_PERCENT % of the one-thread FMA peak on the
square shapes with n >= PEAK_FROM on one thread.

    python -m benchmarks matmul [--dtype float32|float64] [--large]
    python -m benchmarks.matmul [--dtype float32|float64] [--large] [--quick] [--threads 1,2]
                                [--shapes MxKxN,BxMxKxN,...]    # these products alone
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

import einjit
from einjit.backends import resolve_target

from .einsum import DTYPES, ROOT, SEED, TOLERANCES, _first, geomean, interleaved, relative_error
from .harness import einjit_threads, fma_peak_gflops, one_blas_thread, warm_memory, write_result
from .progress import progress_bar
from .tensor_operation import all_core_peak_gflops
from .verdict import Verdict, WrongResult, plural

HAVE_TORCH = importlib.util.find_spec("torch") is not None
# 100, 300, 1000: sizes a user types, no power of two; 1999: a prime
SQUARE_SIZES = (64, 100, 128, 256, 300, 512, 768, 1000, 1024, 1999, 2048)
LARGE_SIZE = 4096                         # too slow for a 2-core machine unless asked for
# M x K x N: K small, K large, a matrix times a vector and a vector times a matrix (64 MiB in
# float32: from memory; 4 MiB: from L3, rows 4 KiB apart), and K small between sizes no
# power of two divides far
SKINNY = ((4096, 64, 4096), (64, 4096, 64), (4096, 4096, 1), (1, 4096, 4096),
          (1024, 1024, 1), (1, 1024, 1024), (2000, 64, 700), (700, 100, 3000), (1000, 32, 3000))
BATCHED = ((64, 128, 128, 128),)                     # batch x M x K x N
THREADS = (1, 2)
TARGET_RATIO = 1.1                        # einjit / numpy's @, every shape, every thread count
#: peaks measured before and after a thread count's run further apart than this share: the
#: machine's other tenants took cores during it
BUSY_PEAK_SHARE = 0.8
PEAK_PERCENT, PEAK_FROM = 90, 512         # % of the one-thread FMA peak, square n >= PEAK_FROM
# environment variables some hosts set for old OpenBLAS builds; they slow a current numpy
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


@dataclass(frozen=True)
class Shape:
    """One product: `batch` products of an M x K by a K x N matrix (batch 0: no batch axis)."""

    m: int
    k: int
    n: int
    batch: int = 0

    @property
    def kind(self) -> str:
        return "batched" if self.batch else "square" if self.m == self.k == self.n else "skinny"

    @property
    def name(self) -> str:
        core = f"{self.m}x{self.k}x{self.n}"
        return f"{self.batch} x {core}" if self.batch else core

    @property
    def equation(self) -> str:
        return "bij,bjk->bik" if self.batch else "ij,jk->ik"

    @property
    def operand_shapes(self) -> list[tuple[int, ...]]:
        lead = (self.batch,) if self.batch else ()
        return [lead + (self.m, self.k), lead + (self.k, self.n)]

    @property
    def flops(self) -> float:
        return 2.0 * max(self.batch, 1) * self.m * self.k * self.n


def grid(large: bool = False) -> list[Shape]:
    """The benchmark's shapes: square, then skinny, then batched."""
    sizes = SQUARE_SIZES + ((LARGE_SIZE,) if large else ())
    return ([Shape(n, n, n) for n in sizes] + [Shape(*mkn) for mkn in SKINNY]
            + [Shape(m, k, n, batch) for batch, m, k, n in BATCHED])


QUICK_GRID = [Shape(64, 64, 64), Shape(128, 128, 128), Shape(256, 16, 256),
              Shape(16, 256, 16), Shape(24, 20, 28, batch=4)]


def operands_of(shape: Shape, dtype: str) -> list[np.ndarray]:
    """Uniform in [-1, 1) from SEED, in `dtype`: the same operands in every process."""
    rng = np.random.default_rng(SEED)
    return [rng.uniform(-1, 1, s).astype(dtype) for s in shape.operand_shapes]


def checked_error(who: str, result, operands: list[np.ndarray], shape: Shape,
                  dtype: str) -> float:
    """The relative error of `result` against numpy's product in float64; WrongResult where
    it is beyond the dtype's tolerance or of another dtype or shape."""
    reference = np.matmul(*[o.astype(np.float64) for o in operands])
    result = np.asarray(result)
    error = relative_error(result, reference)
    if result.dtype != dtype or not error < TOLERANCES[dtype]:
        raise WrongResult(f"matmul {dtype} {shape.name}: {who}'s result ({result.dtype}, "
                          f"shape {result.shape}) differs from numpy's (relative error "
                          f"{error:.2e}, tolerance {TOLERANCES[dtype]:.0e})")
    return error


# -- the peers, each family in a process of its own ---------------------------------------------
def peer_function(family: str, operands: list[np.ndarray]) -> Callable:
    a, b = operands
    if family == "numpy":
        return lambda: a @ b
    import torch
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return lambda: torch.matmul(ta, tb)


def openblas_core() -> str | None:
    """The kernel set OpenBLAS runs in this process (None where numpy does not use OpenBLAS or
    does not say): through threadpoolctl where installed, else OpenBLAS's own corename call
    in the library numpy loaded."""
    try:
        import threadpoolctl
    except ImportError:
        pass
    else:
        for pool in threadpoolctl.threadpool_info():
            if pool.get("internal_api") == "openblas":
                return pool.get("architecture")
        return None
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.lower()
                 and line.split()[-1].endswith(".so")}
    for path in sorted(paths):
        library = ctypes.CDLL(path)
        for name in ("openblas_get_corename", "scipy_openblas_get_corename64_",
                     "scipy_openblas_get_corename"):
            function = getattr(library, name, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                return function().decode()
    return None


def peer_library(family: str) -> str:
    """The peer's library as this process runs it: numpy's version and OpenBLAS kernel set,
    torch's version."""
    if family == "numpy":
        core = openblas_core()
        return f"numpy {np.__version__}" + (f" (OpenBLAS {core} kernels)" if core else "")
    import torch
    return f"torch {torch.__version__}"


def measure_peer(family: str, dtype: str, threads: int, shapes: list[list[int]]) -> dict:
    """In a peer's process: {"times": {shape name: best seconds}, "library": what ran} of
    `family` on every shape, each result checked against numpy first (a wrong one raises)."""
    if family == "torch":
        import torch
        torch.set_num_threads(threads)
    times = {}
    for values in shapes:
        shape = Shape(*values)
        operands = operands_of(shape, dtype)
        function = peer_function(family, operands)
        result, first = _first(function)
        checked_error(family, np.asarray(result), operands, shape, dtype)
        del result
        times[shape.name] = interleaved({family: function}, {family: first})[family]
    return {"times": times, "library": peer_library(family)}


def peer_environment(threads: int) -> dict[str, str]:
    """A peer process's environment: `threads` for OpenBLAS and OpenMP, no OpenBLAS core
    overrides."""
    env = {name: value for name, value in os.environ.items() if name not in OPENBLAS_OVERRIDES}
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    return env


def peer_seconds(family: str, dtype: str, threads: int, shapes: Sequence[Shape]) -> dict:
    """measure_peer's answer from a process of the peer's own."""
    argument = json.dumps([family, dtype, threads,
                           [[s.m, s.k, s.n, s.batch] for s in shapes]])
    done = subprocess.run([sys.executable, "-m", "benchmarks.matmul", "--peer", argument],
                          capture_output=True, text=True, cwd=ROOT,
                          env=peer_environment(threads))
    if done.returncode != 0:
        if "WrongResult" in done.stderr:
            raise WrongResult(done.stderr.strip().splitlines()[-1])
        raise RuntimeError(f"the {family} matmul peer failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peer_names() -> list[str]:
    return ["numpy"] + (["torch"] if HAVE_TORCH else [])


# -- einjit ----------------------------------------------------------------------------------
def compiled(shape: Shape, dtype: str, threads: int) -> einjit.ContractExpression:
    """einjit's expression for `shape`, compiled for `threads` threads."""
    with einjit_threads(threads):
        return einjit.contract_expression(shape.equation, *shape.operand_shapes, dtype=dtype)


def einjit_window(expressions: dict, operands: dict, best: dict) -> None:
    """Time every expression once more (warm), keeping each one's best seconds in `best`."""
    for name, expression in expressions.items():
        def function(expression=expression, arrays=operands[name]):
            return expression(*arrays)
        best[name] = min(best[name], interleaved({name: function}, {name: best[name]})[name])


def peak_gflops(dtype: str, threads: int) -> float | None:
    """The FMA peak of `threads` cores in `dtype` (x86-64 alone; None elsewhere)."""
    target = resolve_target(None)
    if target.isa != "x86_64":
        return None
    if threads == 1:
        return fma_peak_gflops(target.variant, dtype=dtype)
    return all_core_peak_gflops(target.variant, threads) / (2 if dtype == "float64" else 1)


def csv_name(dtype: str = "float32") -> str:
    return "matmul.csv" if dtype == "float32" else f"matmul_{dtype}.csv"


def run(dtype: str = "float32", shapes: Sequence[Shape] | None = None,
        threads: Sequence[int] = THREADS, verdict: Verdict | None = None,
        progress: Callable[[str], None] = print) -> tuple[list[str], str]:
    """Every shape on every thread count in `dtype`: (table lines, CSV text). Targets and
    wrong results go to `verdict` (a wrong einjit result stops the section: WrongResult)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {DTYPES}")
    verdict = verdict or Verdict()
    shapes = list(shapes if shapes is not None else grid())
    names = peer_names()
    warm_memory(1 << 30)
    rows, libraries = [], {}
    with progress_bar(len(threads) * len(shapes), f"matmul {dtype}") as bar:
        for count in threads:
            peaks = [peak_gflops(dtype, count)]
            operands, expressions, best, errors = {}, {}, {}, {}
            for shape in shapes:
                bar.step(f"{shape.name}, {plural(count, 'thread')}")
                operands[shape.name] = operands_of(shape, dtype)
                expressions[shape.name] = expression = compiled(shape, dtype, count)
                result, best[shape.name] = _first(lambda: expression(*operands[shape.name]))
                with one_blas_thread():
                    errors[shape.name] = checked_error("einjit", result, operands[shape.name],
                                                       shape, dtype)
                del result
            # two windows each, alternating: a busy spell of the machine's other tenants must
            # cover both windows of one side to slow it down
            peers = {family: {} for family in names}
            for _ in range(2):
                einjit_window(expressions, operands, best)
                for family in names:
                    answer = peer_seconds(family, dtype, count, shapes)
                    libraries[family] = answer["library"]
                    for name, seconds in answer["times"].items():
                        peers[family][name] = min(seconds, peers[family].get(name, math.inf))
            peaks.append(peak_gflops(dtype, count))
            peak = None if peaks[0] is None else max(peaks)
            bar.write(f"  matmul {dtype}: {plural(count, 'thread')} done", progress)
            for shape in shapes:
                seconds = best[shape.name]
                gflops = shape.flops / seconds / 1e9
                rows.append(dict(
                    shape=shape, threads=count, seconds=seconds, gflops=gflops,
                    peers={f: peers[f][shape.name] for f in names},
                    ratio=peers["numpy"][shape.name] / seconds, error=errors[shape.name],
                    percent=None if peak is None else 100 * gflops / peak, peak=peak,
                    peak_low=None if peak is None else min(peaks)))
    return _report(rows, dtype, names, verdict, libraries)


def _report(rows: list[dict], dtype: str, names: list[str], verdict: Verdict,
            libraries: dict[str, str]) -> tuple[list[str], str]:
    target = resolve_target(None)
    peaks = sorted({(r["threads"], r["peak"]) for r in rows if r["peak"] is not None})
    lines = [f"{dtype} matmul: einjit on {target} against "
             + ", ".join(n if n == "numpy" else f"{n}.matmul" for n in names).replace(
                 "numpy", "numpy @") + ("" if HAVE_TORCH else " (torch not installed)"),
             "FMA peak: " + ("; ".join(f"{plural(t, 'thread')} {p:.1f} GFLOPS" for t, p in peaks)
                             if peaks else "not measured on this ISA"),
             "peers: " + "; ".join(libraries[n] for n in names),
             f"{'shape (M x K x N)':<22} {'threads':>7} {'dtype':>8} {'einjit':>8} "
             f"{'numpy':>8}" + (f" {'torch':>8}" if HAVE_TORCH else "")
             + f" {'ej/np':>6} {'% peak':>7}   (GFLOPS)"]
    header = ["dtype", "shape", "kind", "batch", "m", "k", "n", "threads", "gflop",
              "einjit_s", "einjit_gflops", "numpy_s", "numpy_gflops"]
    if HAVE_TORCH:
        header += ["torch_s", "torch_gflops"]
    header += ["ratio_vs_numpy", "percent_of_peak", "rel_error"]
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(header)
    for r in rows:
        shape = r["shape"]
        rates = {f: shape.flops / r["peers"][f] / 1e9 for f in names}
        percent = "" if r["percent"] is None else f"{r['percent']:.1f}"
        lines.append(f"{shape.name:<22} {r['threads']:>7} {dtype:>8} {r['gflops']:8.1f} "
                     f"{rates['numpy']:8.1f}"
                     + (f" {rates['torch']:8.1f}" if HAVE_TORCH else "")
                     + f" {r['ratio']:6.2f} {percent:>7}")
        values = [dtype, shape.name, shape.kind, shape.batch, shape.m, shape.k, shape.n,
                  r["threads"], f"{shape.flops / 1e9:.6g}", f"{r['seconds']:.6g}",
                  f"{r['gflops']:.5g}", f"{r['peers']['numpy']:.6g}", f"{rates['numpy']:.5g}"]
        if HAVE_TORCH:
            values += [f"{r['peers']['torch']:.6g}", f"{rates['torch']:.5g}"]
        values += [f"{r['ratio']:.4g}", percent, f"{r['error']:.1e}"]
        writer.writerow(values)
    for count in sorted({r["threads"] for r in rows}):
        mine = [r for r in rows if r["threads"] == count]
        low, high = mine[0]["peak_low"], mine[0]["peak"]
        if high is not None and low < BUSY_PEAK_SHARE * high:
            lines.append(f"WARNING: the machine was busy during the {plural(count, 'thread')} "
                         f"run (its FMA peak measured {low:.1f} and {high:.1f} GFLOPS before "
                         f"and after): its ratios compare runs that met different loads")
        worst = min(mine, key=lambda r: r["ratio"])
        mean = geomean([r["ratio"] for r in mine])
        lines.append(f"{plural(count, 'thread')}: einjit / numpy @ geomean {mean:.2f}x, lowest "
                     f"{worst['ratio']:.2f}x ({worst['shape'].name}); target >= "
                     f"{TARGET_RATIO}x on every shape")
        verdict.target(f"matmul {dtype} {plural(count, 'thread')}, lowest einjit / numpy @ "
                       f"({worst['shape'].name})", worst["ratio"], TARGET_RATIO, "x", digits=2)
        verdict.target(f"matmul {dtype} {plural(count, 'thread')}, geomean einjit / numpy @", mean,
                       TARGET_RATIO, "x", digits=2)
    large = [r for r in rows if r["threads"] == 1 and r["shape"].kind == "square"
             and r["shape"].n >= PEAK_FROM and r["percent"] is not None]
    if large:
        worst = min(large, key=lambda r: r["percent"])
        lines.append(f"1 thread, square n >= {PEAK_FROM}: lowest {worst['percent']:.1f}% of "
                     f"the one-thread FMA peak ({worst['shape'].name}); target >= "
                     f"{PEAK_PERCENT}%")
        verdict.target(f"matmul {dtype} 1 thread, square n >= {PEAK_FROM}, lowest % of the "
                       f"one-thread FMA peak ({worst['shape'].name})", worst["percent"],
                       PEAK_PERCENT)
    return lines, table.getvalue()


def _thread_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of thread counts such as 1,2,16")
    return counts


def _shapes(text: str) -> list[Shape]:
    """--shapes: products named as the table names them, M x K x N (a batch B in front:
    B x M x K x N), comma-separated."""
    shapes = []
    for part in text.split(","):
        try:
            sizes = [int(size) for size in part.replace(" ", "").split("x")]
        except ValueError:
            sizes = []
        if len(sizes) not in (3, 4) or min(sizes) < 1:
            raise argparse.ArgumentTypeError(
                f"{part!r} is not a product such as 1024x64x512 (M x K x N) or 8x64x64x64 "
                f"(a batch of 8)")
        shapes.append(Shape(*sizes) if len(sizes) == 3 else Shape(*sizes[1:], batch=sizes[0]))
    return shapes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", metavar="JSON", help=argparse.SUPPRESS)  # a peer's process
    parser.add_argument("--dtype", choices=DTYPES,
                        help="only this dtype (default: float32, then float64)")
    parser.add_argument("--large", action="store_true", help=f"add n = {LARGE_SIZE}")
    parser.add_argument("--quick", action="store_true", help="a tiny grid, to try the job")
    parser.add_argument("--threads", type=_thread_counts, default=THREADS, metavar="T,T,...",
                        help="the thread counts (default: %(default)s)")
    parser.add_argument("--shapes", type=_shapes, metavar="MxKxN,...",
                        help="these products in place of the grid (a batch B as BxMxKxN)")
    options = parser.parse_args(argv)
    if options.peer:
        print(json.dumps(measure_peer(*json.loads(options.peer))))
        return 0
    verdict = Verdict()
    for dtype in [options.dtype] if options.dtype else DTYPES:
        shapes = options.shapes or (QUICK_GRID if options.quick else grid(options.large))
        lines, table = run(dtype, shapes,
                           threads=options.threads, verdict=verdict)
        print("\n".join(lines))
        print(f"written: {write_result(csv_name(dtype), table)}")
    print("\n".join(["", "VERDICT"] + verdict.lines()))
    return verdict.exit_code()


if __name__ == "__main__":
    sys.exit(main())
