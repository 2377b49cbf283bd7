"""TensorOperation benchmarks: JIT'd loop nests, threads, the optimizer.

Every figure is a ratio to a reference measured in the same run: the FMA peak of one core and
of all cores (a JIT'd FMA loop on every thread at once), numpy's transposed copy, numpy's and
torch's einsum on the same contraction, np.matmul's call time. The "seeds" cases are the
sample configuration the project started from (SEEDS: a BRGEMM over 32x32x8x32x32x32 dims),
run as GEMM, BRGEMM and BRGEMM with zero/relu. Each result is checked against numpy before
it is timed; a wrong one goes to the run's verdict.

    python -m benchmarks.tensor_operation [--quick] [--seeds-only]
"""

from __future__ import annotations

import argparse
import sys
import threading
from dataclasses import dataclass

import numpy as np

import einjit
from einjit.backends import resolve_target
from einjit.runtime.threads import default_threads

from .harness import best_seconds, fma_peak_gflops, seconds_per_call, write_result
from .verdict import Verdict, WrongResult

try:
    import torch
except ImportError:     # an optional peer
    torch = None


def all_core_peak_gflops(variant: str, threads: int) -> float:
    """FMA GFLOPS of `threads` cores running the peak loop at once."""
    results = [0.0] * threads

    def run(i):
        results[i] = fma_peak_gflops(variant)
    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(results)


@dataclass
class Case:
    name: str
    op: einjit.TensorOperation
    flops: float
    equation: str            # the same contraction for numpy/torch einsum
    shapes: tuple            # (in0 view shape, in1 view shape, out view shape)


def _views(op, in0, in1, out):
    """Logical einsum views of the operands: one axis per dim (k dims absent from out)."""
    def view(array, strides, skip):
        shape = [d.size for d, s in zip(op.dims, strides) if not skip(d, s)]
        steps = [s * 4 for d, s in zip(op.dims, strides) if not skip(d, s)]
        return np.lib.stride_tricks.as_strided(array, shape, steps)
    letters = "abcdefghijklmnopqrstuvwxyz"
    a = view(in0, [d.stride_in0 for d in op.dims], lambda d, s: s == 0)
    b = view(in1, [d.stride_in1 for d in op.dims], lambda d, s: s == 0)
    c = view(out, [d.stride_out for d in op.dims], lambda d, s: s == 0)

    def sub(pick):
        return "".join(letter for letter, s in zip(letters, pick) if s != 0)
    eq = (f"{sub([d.stride_in0 for d in op.dims])},{sub([d.stride_in1 for d in op.dims])}"
          f"->{sub([d.stride_out for d in op.dims])}")
    return a, b, c, eq


def _buffer(op, stride_name):
    extent = 1 + sum((d.size - 1) * getattr(d, stride_name) for d in op.dims)
    return np.random.default_rng(0).uniform(-1, 1, extent).astype(np.float32)


SEEDS = dict(dim_types=("m", "n", "k", "m", "n", "k"), dim_sizes=(32, 32, 8, 32, 32, 32),
             strides_in0=(8192, 0, 1024, 1, 0, 32), strides_in1=(0, 8192, 1024, 0, 32, 1),
             strides_out=(32768, 1024, 0, 1, 32, 0))
SEEDS_CONFIGS = [
    ("seeds GEMM", "none", "gemm", "none", ("seq", "seq", "seq", "prim", "prim", "prim")),
    ("seeds BRGEMM", "none", "brgemm", "none", ("seq", "seq", "prim", "prim", "prim", "prim")),
    ("seeds BRGEMM zero/relu", "zero", "brgemm", "relu",
     ("seq", "seq", "prim", "prim", "prim", "prim")),
]


def contraction_cases(threads: int, quick: bool, seeds_only: bool = False
                      ) -> list[tuple[str, einjit.TensorOperation]]:
    """The seeds' configurations on 1 and `threads` threads, then (unless seeds_only) the
    optimizer's cases."""
    cases = []
    for name, first, main, last, exec_types in SEEDS_CONFIGS:
        for t in sorted({1, threads}):
            shared = exec_types if t == 1 else ("shared", "shared") + exec_types[2:]
            cases.append((f"{name}, {t} thread{'s' * (t > 1)}", einjit.TensorOperation(
                "float32", first, main, last, exec_types=shared, num_threads=t, **SEEDS)))
    size = 800 if quick else 1600
    for t in sorted({1, threads}) if not seeds_only else ():
        plain = einjit.TensorOperation(
            "float32", "none", "gemm", "none", ("m", "n", "k"), None, (size,) * 3,
            (1, 0, size), (0, size, 1), (1, size, 0), num_threads=t)
        cases.append((f"optimize {size}^3 matmul, {t} thread{'s' * (t > 1)}",
                      einjit.optimize(plain, num_threads=t)))
        # 1000 rows: the divisors that fill 8-row vectors (40) leave an AVX-512 core that
        # runs zmm in halves (Zen 4) a tail of M in AVX2 code; optimize alone cannot peel
        m, k, n = 1000, 500, 640
        rows = einjit.TensorOperation(
            "float32", "zero", "gemm", "none", ("n", "k", "m"), None, (n, k, m),
            (0, m, 1), (k, 1, 0), (m, 0, 1), num_threads=t)
        cases.append((f"optimize {m}x{k}x{n} matmul, {t} thread{'s' * (t > 1)}",
                      einjit.optimize(rows, num_threads=t)))
        # (64, 25, 64, 25, 64, 25): m, m, n, n, k, k with awkward sizes, tensors interleaving
        # their dims (A: m0 k0 m1 k1, B: k0 n0 k1 n1, C: m0 n0 m1 n1), so nothing fuses
        sizes = (64, 25, 64, 25, 64, 25)
        b0 = 64 * 64
        awkward = einjit.TensorOperation(
            "float32", "none", "gemm", "none", ("m", "m", "n", "n", "k", "k"), None, sizes,
            (1, b0, 0, 0, 64, b0 * 25), (0, 0, 64, b0 * 25, 1, b0),
            (1, b0, 64, b0 * 25, 0, 0), num_threads=t)
        cases.append((f"optimize (64,25)x3 m/n/k interleaved, {t} thread{'s' * (t > 1)}",
                      einjit.optimize(awkward, num_threads=t)))
    return cases


def _peers(equation, a, b):
    peers = {"np.einsum": lambda: np.einsum(equation, a, b, optimize=True)}
    if torch is not None:
        ta = torch.from_numpy(np.ascontiguousarray(a))
        tb = torch.from_numpy(np.ascontiguousarray(b))
        peers["torch.einsum"] = lambda: torch.einsum(equation, ta, tb)
    return peers


ROUNDS = 4       # paired rounds of peak and case per contraction
ROUND_SECONDS = 0.05
MAX_CALLS = 25


def run_contractions(threads, quick, variant, lines, rows, seeds_only=False, verdict=None):
    """Every case timed, then every case's peers: numpy's BLAS threads, once woken, would spin
    on the cores of the einjit timing that followed."""
    verdict = verdict or Verdict()
    timed = []
    for name, op in contraction_cases(threads, quick, seeds_only):
        in0, in1 = _buffer(op, "stride_in0"), _buffer(op, "stride_in1")
        out = np.zeros(1 + sum((d.size - 1) * d.stride_out for d in op.dims), np.float32)
        flops = 2.0 * np.prod([d.size for d in op.dims], dtype=np.float64)
        a, b, c, equation = _views(op, in0, in1, out)
        op.execute(in0, in1, out)            # once into zeros: checked before it is timed
        expected = np.einsum(equation, a.astype(np.float64), b.astype(np.float64))
        if op.prim_last_touch == "relu":
            expected = np.maximum(expected, 0)
        scale = np.einsum(equation, np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
        if np.any(np.abs(c - expected) > 1e-5 * scale + 1e-30):
            verdict.wrong(f"TensorOperation {name}: einjit's result differs from numpy's")
            lines.append(f"{name:<40} WRONG: the result differs from numpy's; not timed")
            continue
        # rounds of (the peak of as many cores as the case uses, then the case), each side
        # keeping its best: a neighbour on the shared machine must then slow every round of
        # one side to move the ratio
        # calls a round: about ROUND_SECONDS of them, at least 3 (a short case then gets as
        # many chances as a long one to miss the neighbours' busy spells; peers alike)
        calls = max(3, min(MAX_CALLS, int(ROUND_SECONDS / best_seconds(
            lambda: op.execute(in0, in1, out), 1))))
        peaks, seconds = [], float("inf")
        for _ in range(ROUNDS):
            peaks.append(fma_peak_gflops(variant) if op.num_threads == 1
                         else all_core_peak_gflops(variant, op.num_threads))
            seconds = min(seconds, best_seconds(lambda: op.execute(in0, in1, out), calls))
        timed.append((name, flops / seconds / 1e9, seconds, max(peaks), equation, a, b, calls))
    for name, gflops, seconds, peak, equation, a, b, calls in timed:
        peer_seconds = {peer: best_seconds(function, calls)
                        for peer, function in _peers(equation, a, b).items()}
        best_peer = min(peer_seconds.values())
        lines.append(f"{name:<40} {gflops:8.1f} GFLOPS {100 * gflops / peak:5.1f}% of "
                     f"{peak:.0f}; "
                     + ", ".join(f"vs {p} {s / seconds:5.2f}x" for p, s in peer_seconds.items()))
        rows.append(f"{name},{gflops:.2f},{100 * gflops / peak:.1f},{best_peer / seconds:.3f}")


def run_permutations(threads, quick, lines, rows):
    t, r, u, s = (64, 64, 64, 64) if not quick else (32, 32, 64, 64)  # 64 MiB at full size
    a = np.random.default_rng(1).uniform(-1, 1, (t, r, u, s)).astype(np.float32)
    cases = {
        "trus -> turs": (0, 2, 1, 3),
        "trus -> stru (unit-stride dim moves)": (3, 0, 1, 2),
    }
    for name, axes in cases.items():
        out = np.empty([a.shape[i] for i in axes], np.float32)
        out_strides = [st // 4 for st in out.strides]
        # dims in a's order (t, r, u, s); out stride of input axis i is out's stride at its position
        position = {axis: p for p, axis in enumerate(axes)}
        plain = einjit.TensorOperation(
            "float32", "none", "identity", "none", ("c",) * 4, None, a.shape,
            [st // 4 for st in a.strides], (0,) * 4,
            [out_strides[position[i]] for i in range(4)], num_threads=threads)
        op = einjit.optimize(plain, num_threads=threads)
        op.execute(a, None, out)
        if not np.array_equal(out, a.transpose(axes)):
            raise WrongResult(f"TensorOperation permutation {name}: einjit's result differs "
                              f"from numpy's")
        moved = 2 * a.nbytes
        # interleaved rounds (einjit, numpy, einjit, ...), each side its best: a busy spell
        # of the machine's other tenants hits both alike
        times = seconds_per_call({"einjit": lambda: op.execute(a, None, out),
                                  "numpy": lambda: np.copyto(out, a.transpose(axes))},
                                 round_seconds=0.1, rounds=7)
        ours, numpy = times["einjit"], times["numpy"]
        lines.append(f"{name:<40} {moved / ours / 2**30:6.1f} GiB/s, numpy "
                     f"{moved / numpy / 2**30:6.1f} GiB/s: {numpy / ours:5.2f}x numpy "
                     f"({threads} threads)")
        rows.append(f"permutation {name},{moved / ours / 2**30:.2f},,{numpy / ours:.3f}")


def run_overhead(lines, rows):
    op = einjit.TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"),
                                ("prim",) * 3, (4, 4, 4), (1, 0, 4), (0, 4, 1), (1, 4, 0),
                                num_threads=1)
    a, b = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
    c = np.zeros((4, 4), np.float32)
    times = seconds_per_call({"execute": lambda: op.execute(a, b, c),
                              "np.matmul": lambda: np.matmul(a, b, out=c)})
    ratio = times["execute"] / times["np.matmul"]
    lines.append(f"execute of a 4x4x4 GEMM: {1e6 * times['execute']:.2f} us, np.matmul "
                 f"{1e6 * times['np.matmul']:.2f} us: {ratio:.2f}x numpy's call time")
    rows.append(f"overhead 4x4x4,{1e6 * times['execute']:.3f},,{ratio:.3f}")


def run(quick: bool = False, seeds_only: bool = False, verdict: Verdict | None = None
        ) -> tuple[list[str], str]:
    """The contractions (seeds_only: the seeds' configurations alone), the permutations
    (not with seeds_only) and the call overhead; (summary lines, CSV text)."""
    verdict = verdict or Verdict()
    target = resolve_target(None)
    threads = default_threads()
    lines, rows = [], ["case,gflops_or_gibs,percent_of_peak,speedup_vs_best_peer"]
    if target.isa == "x86_64":
        peak1 = fma_peak_gflops(target.variant)
        peak_all = all_core_peak_gflops(target.variant, threads)
        lines.append(f"FMA peak ({target}): 1 core {peak1:.1f} GFLOPS, {threads} cores "
                     f"{peak_all:.1f} GFLOPS")
        run_contractions(threads, quick, target.variant, lines, rows, seeds_only, verdict)
    if not seeds_only:
        try:
            run_permutations(threads, quick, lines, rows)
        except WrongResult as error:
            verdict.wrong(str(error))
            lines.append(f"permutations: WRONG: {error}")
    run_overhead(lines, rows)
    return lines, "\n".join(rows) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--seeds-only", action="store_true",
                        help="the seeds' configurations and the call overhead alone")
    options = parser.parse_args(argv)
    verdict = Verdict()
    lines, table = run(options.quick, options.seeds_only, verdict)
    print("\n".join(lines + ["", "VERDICT"] + verdict.lines()))
    print(f"written: {write_result('tensor_operation.csv', table)}")
    return verdict.exit_code()


if __name__ == "__main__":
    sys.exit(main())
