"""A tensor network larger than its memory limit: einjit sliced against einjit whole and
against opt_einsum + numpy.

The network: a random 4-regular graph of 12 tensors with bond dimension 8, every index
contracted (a scalar result): inputs of a few hundred kB, intermediates of a few hundred
MB on the path opt_einsum finds. einjit contracts it whole and under memory_limit = 1/8 of
the whole plan's peak; opt_einsum (which cannot slice) runs the same path with numpy and its
peak memory is traced. Goal: the sliced contraction within SLICED_TIME of the whole one's
time at <= 1/MEMORY_FRACTION of its memory.

    python -m benchmarks.slicing      (also a part of the benchmarks' dask section)
"""

from __future__ import annotations

import csv
import io
import random
import tracemalloc
from typing import Callable

import numpy as np
import opt_einsum

import einjit
from einjit.runtime.arrays import BUFFER_POOL
from einjit.runtime.threads import default_threads

from .harness import best_seconds, one_blas_thread
from .output import write_result
from .verdict import Verdict, WrongResult

#: the network: tensors, degree, bond dimension, the graph's seed
NETWORK = (12, 4, 8, 0)
MEMORY_FRACTION = 8          # the limit: the whole plan's peak over this
SLICED_TIME = 1.3            # goal: sliced time over whole time at most this
DTYPE = "float64"
CSV_NAME = "slicing.csv"


def regular_network(tensors: int, degree: int, bond: int, seed: int
                    ) -> tuple[str, list[tuple[int, ...]]]:
    """Subscripts and shapes of a random `degree`-regular graph's tensor network (one tensor
    per vertex, one index of size `bond` per edge, all contracted)."""
    rng = random.Random(seed)
    while True:
        stubs = [v for v in range(tensors) for _ in range(degree)]
        rng.shuffle(stubs)
        edges = list(zip(stubs[::2], stubs[1::2]))
        if all(a != b for a, b in edges) and len(set(map(frozenset, edges))) == len(edges):
            break
    terms = [""] * tensors
    for number, (a, b) in enumerate(edges):
        letter = opt_einsum.get_symbol(number)
        terms[a] += letter
        terms[b] += letter
    return ",".join(terms) + "->", [(bond,) * len(term) for term in terms]


def _traced_peak(function: Callable[[], object]) -> tuple[object, int]:
    """function()'s result and the most bytes it held at once beyond what it returned
    (tracemalloc: numpy's allocations are traced; einjit's buffer pool is off meanwhile, so
    that every buffer is a traced allocation rather than one kept from an earlier call)."""
    limit = BUFFER_POOL.limit
    BUFFER_POOL.limit = 0
    BUFFER_POOL.clear()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = function()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        BUFFER_POOL.limit = limit
    return result, peak - before


def run(progress: Callable[[str], None] = print,
        verdict: Verdict | None = None) -> tuple[list[str], str]:
    """The network whole and sliced with einjit, and with opt_einsum + numpy: (summary lines,
    CSV text). The goal goes to `verdict`; a result that differs from numpy's raises
    WrongResult."""
    verdict = verdict or Verdict()
    equation, shapes = regular_network(*NETWORK)
    rng = np.random.default_rng(NETWORK[3])
    # entries near 1 in size keep the scalar far from under- or overflow
    operands = [rng.uniform(0.5, 1.0, shape).astype(DTYPE) / NETWORK[2] for shape in shapes]
    threads = default_threads()
    progress(f"  slicing: planning {equation} ({len(shapes)} tensors)")
    whole = einjit.contract_expression(equation, *shapes, dtype=DTYPE)
    whole_peak = whole._prepared.whole.memory().peak_bytes
    limit = whole_peak // MEMORY_FRACTION
    sliced = einjit.contract_expression(equation, *shapes, dtype=DTYPE, memory_limit=limit)
    slicing = sliced.slicing
    if slicing is None:
        raise WrongResult(f"memory_limit={limit} left {equation} unsliced (peak {whole_peak})")
    path = opt_einsum.contract_path(equation, *operands, optimize="auto")[0]

    def opt_einsum_numpy():
        return opt_einsum.contract(equation, *operands, optimize=path, backend="numpy")

    with one_blas_thread():
        reference = np.einsum(equation, *operands, optimize=["einsum_path", *path])
    results = {"einjit whole": whole(*operands), "einjit sliced": sliced(*operands)}
    peer, peer_peak = _traced_peak(opt_einsum_numpy)
    results["opt_einsum + numpy"] = peer
    for name, value in results.items():
        error = abs(float(value) - float(reference)) / abs(float(reference))
        if error > 1e-10:
            raise WrongResult(f"slicing benchmark: {name} gives {float(value)!r}, numpy "
                              f"{float(reference)!r} (relative error {error:.1e})")
    _, sliced_traced = _traced_peak(lambda: sliced(*operands))
    progress("  slicing: timing")
    seconds = {"einjit whole": best_seconds(lambda: whole(*operands), 3),
               "einjit sliced": best_seconds(lambda: sliced(*operands), 3),
               "opt_einsum + numpy": best_seconds(opt_einsum_numpy, 3)}
    ratio = seconds["einjit sliced"] / seconds["einjit whole"]
    memory = slicing.peak_bytes / whole_peak
    lines = [
        f"tensor network: a random {NETWORK[1]}-regular graph of {NETWORK[0]} tensors, bond "
        f"{NETWORK[2]}, {DTYPE}, {threads} threads: {equation}",
        f"memory_limit = whole peak / {MEMORY_FRACTION} = {limit} bytes; "
        + slicing.text().replace("\n", "; "),
        f"einjit whole:  {seconds['einjit whole']:.3f} s, intermediates peak {whole_peak} bytes",
        f"einjit sliced: {seconds['einjit sliced']:.3f} s = {ratio:.2f}x the whole time, peak "
        f"{slicing.peak_bytes} bytes = 1/{whole_peak / max(slicing.peak_bytes, 1):.1f} of the "
        f"whole (traced: {sliced_traced} bytes), flops overhead {slicing.overhead:.3f}x",
        f"opt_einsum + numpy (same path as opt_einsum's 'auto'): "
        f"{seconds['opt_einsum + numpy']:.3f} s, traced peak {peer_peak} bytes",
    ]
    met = ratio <= SLICED_TIME and memory <= 1 / MEMORY_FRACTION
    lines.append(f"goal: sliced within {SLICED_TIME}x the whole time at <= 1/{MEMORY_FRACTION} "
                 f"of its memory: {'met' if met else 'MISSED'}")
    verdict.target(f"sliced contraction time / whole, memory_limit = peak/{MEMORY_FRACTION}",
                   ratio, SLICED_TIME, "x", at_most=True, digits=2)
    verdict.target(f"sliced contraction peak / whole peak (goal 1/{MEMORY_FRACTION})",
                   memory, 1 / MEMORY_FRACTION, "", at_most=True, digits=3)
    table = io.StringIO()
    rows = csv.writer(table, lineterminator="\n")
    rows.writerow(["run", "seconds", "peak_bytes", "flops", "slices", "sliced_dims", "chunks"])
    rows.writerow(["einjit whole", f"{seconds['einjit whole']:.6f}", whole_peak,
                   slicing.unsliced_flops, 1, "", ""])
    rows.writerow(["einjit sliced", f"{seconds['einjit sliced']:.6f}", slicing.peak_bytes,
                   slicing.flops, slicing.count, " ".join(slicing.letters),
                   " ".join(map(str, slicing.chunks))])
    rows.writerow(["opt_einsum + numpy", f"{seconds['opt_einsum + numpy']:.6f}", peer_peak,
                   "", 1, "", ""])
    return lines, table.getvalue()


def main() -> int:
    verdict = Verdict()
    lines, table = run(verdict=verdict)
    print("\n".join(lines))
    print(f"written: {write_result(CSV_NAME, table)}")
    print("\n".join(verdict.lines()))
    return verdict.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
