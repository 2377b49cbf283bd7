"""Einsum benchmarks: einjit against the einsum peers on the same machine, in the same run.

Cases: einsum trees of tensor decompositions in bracket notation (tensor train tt, fully
connected tensor network fctn, generalized tensor decomposition getd: each as a tree written
for lowering ("LOWER") and as a cheaper contraction order ("OPT")), the einsum_ir samples
(tensor decompositions tt/fctn/getd/tw, tensor layers fc/trn, a synthetic tree; bracket trees
as the Einsum Trees artifact states them, with explicit permutation nodes), the sample
TensorOperation configuration of benchmarks/tensor_operation.py written as einsum ("seeds",
the name of the configuration the project started from), and tensor-train / matrix-chain /
batched products in numpy notation (planned by einjit with opt_einsum's path).

Peers: numpy.einsum(optimize=True), opt_einsum (numpy backend; torch backend and torch.einsum
when torch is installed), TBLIS (pytblis) when installed; `pip install -e ".[bench]"` (what
scripts/bench does) installs them. Each family of peers runs in a process of its own (thread
pools of different libraries in one process starve each other on a small machine); a peer
whose own contraction path costs over PATH_LIMIT times opt_einsum's is left out and named.
Every einjit result is checked against numpy before it is timed (a wrong one goes to the
run's verdict, and the case is not timed); einjit and the peers are then timed in two windows
each, alternating, each keeping its best. Per case: einjit's GFLOPS
(the flops of its tree), its speed over the best peer, and the percentage of the all-core FMA
peak (measured before every case; the best of them is the reference); then the geomean
over the cases, the call overhead on a 4x4 matrix product and the cold contract_expression
of the tensor train. Each stated target is recorded in the run's verdict. Beside them, per
case, what the parallel plan does: einjit's speed-up over its own plan on one thread,
measured and as the plan's parallel profile predicts it (expr.parallel_profile, plan
arithmetic), and the predicted efficiency of the plans for 16, 48 and 72 threads, which a
small machine cannot measure.

--dtype float64 runs the same cases with float64 operands for einjit and every peer (the
percentage is of the FP64 peak, half the FP32 FMA flops), written to einsum_float64.csv.
--dtype complex64 and complex128 likewise with complex operands (both parts uniform in
[-1, 1)) for einjit and every peer (TBLIS takes complex too): a complex multiply-add counts as
8 real flops, and the percentage is of the FMA peak of the real part's dtype.

    python -m benchmarks einsum [--quick] [--filter TEXT] [--dtype DTYPE]
    python -m benchmarks.einsum [--quick] [--filter TEXT] [--dtype DTYPE]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import opt_einsum

import einjit
from einjit.backends import resolve_target
from einjit.runtime.threads import default_threads

from .harness import (
    cold_ms,
    einjit_threads,
    one_blas_thread,
    seconds_per_call,
    warm_memory,
    write_result,
)
from .progress import progress_bar
from .tensor_operation import all_core_peak_gflops
from .verdict import Verdict, WrongResult, plural

# Each peer family (numpy + opt_einsum, torch, TBLIS) is timed in a process of its own: thread
# pools of different libraries in one process (OpenBLAS, OpenMP, TBLIS's) spin or sleep while
# the others run, and on a small machine that starves them all.
HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_TBLIS = importlib.util.find_spec("pytblis") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
QUICK_FLOPS = 2e8        # --quick: every case's sizes shrunk to about this many flops
DTYPES = ("float32", "float64")           # a --full run's (and the matmul section's)
COMPLEX_DTYPES = ("complex64", "complex128")
ALL_DTYPES = DTYPES + COMPLEX_DTYPES      # what --dtype may name
# relative Frobenius-norm error against numpy in float64 (complex128), per dtype of the operands
TOLERANCES = {"float32": 1e-4, "float64": 1e-10, "complex64": 1e-4, "complex128": 1e-10}
# real flops per flop the tree counts (2 a multiply-add): a complex multiply-add is 4 real
# multiplies and 4 real adds, 8 flops
REAL_FLOPS = {"complex64": 4, "complex128": 4}
# the real dtype whose all-core FMA peak a dtype's percentages are of (a complex number's part)
PEAK_DTYPE = {"float32": "float32", "float64": "float64", "complex64": "float32",
              "complex128": "float64"}
LARGE_FLOPS = 1e9        # "large" cases, for the share-of-peak figure
# the targets: geomean speed over the best peer, no case below LOWEST_RATIO, large cases'
# share of the all-core peak, call overhead against np.einsum, the cold tensor train
GEOMEAN_TARGET, LOWEST_RATIO, LARGE_PERCENT = 1.5, 0.8, 60
EXPR_OVERHEAD, EINSUM_OVERHEAD, COLD_MS = 2, 3, 100
SHORT_WINDOW = 0.25      # seconds of rounds a timing window of short calls aims at
SEED = 7                 # operands: uniform in [-1, 1) from this seed (TBLIS's process too)
# the servers' thread counts whose plans' predicted parallel efficiency every case prints
PROFILE_THREADS = (16, 48, 72)

# -- the cases ---------------------------------------------------------------------------------
# the sizes of each decomposition's dims, by dim id (the einsum-tree examples' sizes)
TT_SIZES = [100, 72, 128, 128, 3, 71, 305, 32, 3]
FCTN_SIZES = [60, 60, 20, 20, 8, 8, 8, 8, 8, 8]
GETD_SIZES = [40, 40, 40, 40, 40, 25, 25, 25, 25, 25]

# (name, group, bracket tree, sizes by dim id)
TREES = [
    ("tt LOWER", "decompositions",
     "[[8,4],[7,3,8]->[7,3,4]],[[[2,6,7],[1,5,6]->[1,2,5,7]],[0,5]->[0,1,2,7]]->[0,1,2,3,4]",
     TT_SIZES),
    ("fctn LOWER", "decompositions",
     "[[[[3,6,8,9]->[8,6,9,3]],[[2,5,7,9]->[7,5,2,9]]->[7,8,5,6,2,3]],[0,4,5,6]->[0,4,7,8,2,3]],"
     "[1,4,7,8]->[0,1,2,3]", FCTN_SIZES),
    ("tt OPT", "decompositions",
     "[[7,3,8],[8,4]->[7,3,4]],[[0,5],[[5,1,6],[6,2,7]->[5,1,2,7]]->[0,1,2,7]]->[0,1,2,3,4]",
     TT_SIZES),
    ("fctn OPT", "decompositions",
     "[1,4,7,8],[[0,4,5,6],[[2,5,7,9],[3,6,8,9]->[2,5,7,3,6,8]]->[0,4,2,7,3,8]]->[0,1,2,3]",
     FCTN_SIZES),
    ("getd OPT", "decompositions",
     "[[2,7,3],[3,8,4]->[2,7,8,4]],[[4,9,0],[[0,5,1],[1,6,2]->[0,5,6,2]]->[4,9,5,6,2]]"
     "->[5,6,7,8,9]", GETD_SIZES),
    # einsum_ir samples (samples/tensor_decomp, tensor_layers, einsum_benchmark: *_et.cfg)
    ("tt (einsum_ir tree)", "einsum_ir",
     "[[8,4],[7,3,8]->[7,3,4]],[[[[6,2,7]->[2,6,7]],[[5,1,6]->[1,5,6]]->[1,2,5,7]],[0,5]"
     "->[0,1,2,7]]->[0,1,2,3,4]", TT_SIZES),
    ("getd (einsum_ir tree)", "einsum_ir",
     "[[[4,9,0]->[0,4,9]],[[[0,5,1]->[5,1,0]],[[1,6,2]->[6,2,1]]->[5,6,2,0]]->[5,6,2,4,9]],"
     "[[[3,8,4]->[8,3,4]],[[2,7,3]->[7,2,3]]->[7,2,8,4]]->[5,6,7,8,9]", GETD_SIZES),
    ("tw (einsum_ir tree)", "einsum_ir",
     "[[[[[3,7,4,11]->[4,11,7,3]],[[2,6,7,10]->[6,10,2,7]]->[6,4,10,11,2,3]],"
     "[[8,9,10,11]->[9,8,10,11]]->[9,6,8,4,2,3]],[[0,4,5,8]->[0,5,8,4]]->[0,9,5,6,2,3]],"
     "[[1,5,6,9]->[1,9,5,6]]->[0,1,2,3]", [40, 40, 20, 20, 6, 6, 6, 6, 4, 4, 4, 4]),
    ("trn layer (einsum_ir tree)", "einsum_ir",
     "[[[[[8,13,14]->[13,14,8]],[4,12,13]->[4,12,14,8]],[[3,11,12],[2,9,11]->[3,2,9,12]]"
     "->[3,2,4,9,14,8]],[[[[7,14,15]->[7,15,14]],[[6,15,16]->[6,16,15]]->[6,7,16,14]],"
     "[[5,10,16],[1,9,10]->[5,1,9,16]]->[5,1,9,6,7,14]]->[5,1,3,2,4,6,7,8]],"
     "[[0,1,2,3,4]->[1,0,3,2,4]]->[0,5,6,7,8]",
     [128, 4, 7, 4, 7, 3, 4, 5, 5, 50, 50, 50, 50, 50, 50, 50, 50]),
    ("synthetic (einsum_ir tree)", "einsum_ir",
     "[[[8,0,9,4]->[0,9,4,8]],[[2,8,6,9]->[6,2,9,8]]->[6,2,0,4,8]],[[[[3,2,1,0]->[3,1,2,0]],"
     "[[1,5]->[5,1]]->[5,3,2,0]],[[3,7]->[7,3]]->[7,5,2,0]]->[7,6,5,4,8]",
     [24, 48, 12, 56, 32, 64, 8, 84, 8, 72]),
]

# (name, group, numpy subscripts, size of each letter)
SUBSCRIPTS = [
    # the sample TensorOperation configuration (m, n, k, m, n, k = 32, 32, 8, 32, 32, 32):
    # in0 [m0, k0, k1, m1], in1 [n0, k0, n1, k1], out [m0, n0, n1, m1] in row-major notation
    ("seeds BRGEMM config", "seeds", "akbc,dkeb->adec",
     dict(a=32, d=32, k=8, c=32, e=32, b=32)),
    ("seeds config x4 (m0, n0 = 64)", "seeds", "akbc,dkeb->adec",
     dict(a=64, d=64, k=8, c=32, e=32, b=32)),
    # einsum_ir tensor_layers/fc.cfg: [n2,m2,n1,m1] = [m2,k2,k1,m1] x [n2,k2,n1,k1]
    ("fc layer 64,32,16,128,64,32", "einsum_ir", "aKkm,NKnk->Nanm",
     dict(a=64, K=32, k=16, m=128, N=64, n=32)),
    ("fc layer 256,8,32,64,128,16", "einsum_ir", "aKkm,NKnk->Nanm",
     dict(a=256, K=8, k=32, m=64, N=128, n=16)),
    # tensor train in numpy notation, the tree cases' sizes (einsum_ir tensor_decomp/tt.cfg)
    ("tensor train af,fbg,gch,hdi,ie", "public", "af,fbg,gch,hdi,ie->abcde",
     dict(zip("abcdefghi", TT_SIZES))),
    ("matrix chain ij,jk,kl,lm", "public", "ij,jk,kl,lm->im",
     dict(i=1024, j=512, k=2048, l=256, m=1024)),
    ("batched matmul bij,bjk", "public", "bij,bjk->bik", dict(b=64, i=192, j=160, k=224)),
    ("tucker core abc,ai,bj,ck", "public", "abc,ia,jb,kc->ijk",
     dict(a=96, b=96, c=96, i=128, j=128, k=128)),
]


@dataclass
class Case:
    name: str
    group: str
    equation: str                 # numpy subscripts the peers evaluate
    shapes: list[tuple[int, ...]]
    tree: einjit.EinsumTree | None = None    # bracket cases: einjit runs this tree

    def compile(self, dtype: str = "float32",
                threads: int | None = None) -> einjit.ContractExpression:
        """einjit's expression, planned for `threads` threads (default: the process's)."""
        with contextlib.nullcontext() if threads is None else einjit_threads(threads):
            if self.tree is not None:
                return einjit.contract_expression(self.tree, dtype=dtype)
            return einjit.contract_expression(self.equation, *self.shapes, dtype=dtype)


def tree_equation(tree: einjit.EinsumTree) -> str:
    """The one einsum equal to the tree: leaves -> root. Valid when every dim a node sums
    occurs nowhere outside that node's subtree (true of every tree here; checked)."""
    if len(tree.sizes) > len(LETTERS):
        raise ValueError(f"{len(tree.sizes)} dims; numpy's einsum takes {len(LETTERS)}")

    nodes = list(tree.root.nodes())
    for node in nodes:
        if node.is_leaf:
            continue
        inside = {id(n) for n in node.nodes()}
        summed = set().union(*(c.dims for c in node.children)) - set(node.dims)
        outside = set().union(*(n.dims for n in nodes if id(n) not in inside))
        if summed & outside:
            raise ValueError(f"{tree}: dims {sorted(summed & outside)} are summed in a node "
                             f"and occur outside it; no single einsum equals this tree")
    leaves = ",".join("".join(LETTERS[d] for d in leaf.dims) for leaf in tree.leaves)
    return leaves + "->" + "".join(LETTERS[d] for d in tree.root.dims)


def _tree_flops(expression: str, sizes: Sequence[int]) -> int:
    return einjit.EinsumTree(expression, sizes).flops()


def _subscript_flops(equation: str, sizes: dict) -> float:
    shapes = _shapes(equation, sizes)
    return float(opt_einsum.contract_path(equation, *shapes, shapes=True)[1].opt_cost)


def _shapes(equation: str, sizes: dict) -> list[tuple[int, ...]]:
    return [tuple(sizes[c] for c in term) for term in equation.split("->")[0].split(",")]


def _shrink(sizes: dict | list, flops: Callable, limit: float) -> dict | list:
    """Halve the largest sizes (down to 2) until flops(sizes) <= limit."""
    sizes = dict(sizes) if isinstance(sizes, dict) else list(sizes)
    keys = list(sizes.keys()) if isinstance(sizes, dict) else list(range(len(sizes)))
    while flops(sizes) > limit:
        key = max(keys, key=lambda k: sizes[k])
        if sizes[key] <= 2:
            break
        sizes[key] = max(2, sizes[key] // 2)
    return sizes


def cases(quick: bool = False, pattern: str | None = None) -> list[Case]:
    result = []
    for name, group, expression, sizes in TREES:
        if pattern and pattern.lower() not in name.lower():
            continue
        if quick:
            sizes = _shrink(sizes, lambda s, e=expression: _tree_flops(e, s), QUICK_FLOPS)
        tree = einjit.EinsumTree(expression, sizes)
        result.append(Case(name, group, tree_equation(tree),
                           [tuple(tree.sizes[d] for d in leaf.dims) for leaf in tree.leaves],
                           tree))
    for name, group, equation, sizes in SUBSCRIPTS:
        if pattern and pattern.lower() not in name.lower():
            continue
        if quick:
            sizes = _shrink(sizes, lambda s, e=equation: _subscript_flops(e, s), QUICK_FLOPS)
        result.append(Case(name, group, equation, _shapes(equation, sizes)))
    return result


# -- the peers -----------------------------------------------------------------------------------
def peer_names() -> list[str]:
    names = ["np.einsum", "opt_einsum"]
    if HAVE_TORCH:
        names += ["opt_einsum+torch", "torch.einsum"]
    if HAVE_TBLIS:
        names.append("tblis")
    return names


PATH_LIMIT = 8.0     # a peer whose own path costs more times opt_einsum's is not run


def numpy_path_flops(equation: str, operands: list[np.ndarray]) -> float:
    """The flop count of the path np.einsum(optimize=True) (and pytblis, which asks numpy
    for its path) would take."""
    text = np.einsum_path(equation, *operands, optimize=True)[1]
    return float(text.split("Optimized FLOP count:")[1].split()[0])


def good_path(equation: str, operands: list[np.ndarray]) -> list:
    """opt_einsum's path ("auto"), in the form np.einsum's optimize= takes."""
    return ["einsum_path", *opt_einsum.contract_path(equation, *operands)[0]]


def family_peers(family: str, equation: str, operands: list[np.ndarray],
                 numpy_ok: bool) -> dict[str, Callable]:
    """The peers of one family as callables on these operands: opt_einsum's path is planned
    once, as einjit's is (contract_expression); numpy, TBLIS and torch plan per call, as
    users call them. numpy's greedy path can cost orders of magnitude more than opt_einsum's
    (and take gigabytes): with numpy_ok False, np.einsum and TBLIS (which takes numpy's path)
    are left out."""
    expression = opt_einsum.contract_expression(equation, *[o.shape for o in operands])
    result: dict[str, Callable] = {}
    if family == "numpy":
        if numpy_ok:
            result["np.einsum"] = lambda: np.einsum(equation, *operands, optimize=True)
        result["opt_einsum"] = lambda: expression(*operands, backend="numpy")
    elif family == "torch":
        import torch
        tensors = [torch.from_numpy(o) for o in operands]
        result["opt_einsum+torch"] = lambda: expression(*tensors, backend="torch")
        result["torch.einsum"] = lambda: torch.einsum(equation, *tensors)
    elif family == "tblis" and numpy_ok:
        import pytblis
        result["tblis"] = lambda: pytblis.einsum(equation, *operands, optimize=True)
    return result


def operands_of(shapes: Sequence[tuple[int, ...]], dtype: str) -> list[np.ndarray]:
    """The benchmark's operands: uniform in [-1, 1) from SEED (complex: each part), in
    `dtype`."""
    rng = np.random.default_rng(SEED)
    if np.dtype(dtype).kind == "c":
        return [(rng.uniform(-1, 1, s) + 1j * rng.uniform(-1, 1, s)).astype(dtype)
                for s in shapes]
    return [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]


def measure_family(family: str, equation: str, shapes: list, threads: int,
                   numpy_ok: bool, dtype: str = "float32") -> dict[str, float]:
    """In a peers' process: best seconds of each peer of `family` on the benchmark's
    operands (same seed as einjit's)."""
    if family == "torch":
        import torch
        torch.set_num_threads(threads)
    elif family == "tblis":
        import pytblis
        pytblis.set_num_threads(threads)
    operands = operands_of(shapes, dtype)
    functions = family_peers(family, equation, operands, numpy_ok)
    if not functions:
        return {}
    first = {name: _first(function)[1] for name, function in functions.items()}
    return interleaved(functions, first)


def peer_seconds(equation: str, operands: list[np.ndarray], threads: int
                 ) -> tuple[dict[str, float], list[str]]:
    """Best seconds of every installed peer (one process per family) and the peers left out
    because their path is far worse than opt_einsum's."""
    info = opt_einsum.contract_path(equation, *operands)[1]
    numpy_ok = numpy_path_flops(equation, operands) <= PATH_LIMIT * max(float(info.opt_cost), 1)
    families = ["numpy"] + ["torch"] * HAVE_TORCH + ["tblis"] * HAVE_TBLIS
    times: dict[str, float] = {}
    for family in families:
        argument = json.dumps([family, equation, [list(o.shape) for o in operands], threads,
                               numpy_ok, operands[0].dtype.name])
        done = subprocess.run([sys.executable, "-m", "benchmarks.einsum", "--peer", argument],
                              capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"the {family} peers failed on {equation}:\n{done.stderr}")
        times.update(json.loads(done.stdout.strip().splitlines()[-1]))
    skipped = [] if numpy_ok else [n for n in ("np.einsum", "tblis") if n in peer_names()]
    return times, skipped


# -- measuring ---------------------------------------------------------------------------------
def relative_error(result, reference) -> float:
    """|result - reference| / |reference| in float64 (complex128), numpy's BLAS on one thread:
    its other threads, once woken, would spin on the cores of the timing that follows."""
    wide = np.promote_types(np.asarray(result).dtype, np.float64)    # complex128 for complex
    result = np.asarray(result, wide)
    reference = np.asarray(reference, wide)
    if result.shape != reference.shape:
        return math.inf
    with one_blas_thread():
        scale = np.linalg.norm(reference.ravel())
        return float(np.linalg.norm((result - reference).ravel()) / max(scale, 1e-30))


def interleaved(functions: dict[str, Callable], first: dict[str, float]) -> dict[str, float]:
    """Best seconds of each function over a few rounds, every round calling each function
    once (a busy spell on the shared machine hits all of them alike). Fewer rounds when one
    call is long, but always one after the first call (`first`: each function's first
    call), which alone pays for faulting in its result's pages: on a machine whose memory is
    fragmented, the kernel's compaction for huge pages can make that call several times
    slower. Short calls get rounds
    for about SHORT_WINDOW seconds (7 to 25): more chances to meet a quiet spell of the
    machine, for einjit and its peers alike."""
    longest = max(first.values())
    rounds = 1 if longest > 1.0 else 2 if longest > 0.3 else 3 if longest > 0.05 else \
        min(25, max(7, int(SHORT_WINDOW / max(longest, 1e-9))))
    best = dict(first) if rounds == 1 else dict.fromkeys(functions, math.inf)
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def _first(function: Callable) -> tuple[object, float]:
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def reference(case: Case, operands: list[np.ndarray], flops: float, elements: int):
    """numpy's result (along opt_einsum's path): in float64 (complex128) where cheap, else in
    the operands' dtype."""
    path = good_path(case.equation, operands)
    if flops < 2e9 and elements < 2 ** 25:
        return np.einsum(case.equation, *[o.astype(np.promote_types(o.dtype, np.float64))
                                          for o in operands], optimize=path)
    return np.einsum(case.equation, *operands, optimize=path)


def run_case(case: Case, peer_cache: dict, threads: int = 1, dtype: str = "float32",
             peer_windows: int = 2) -> dict:
    """One case checked against numpy, then timed against its peers in `peer_windows` (1 or
    2) windows (its percentage of the peak is left to the caller, who knows the run's best
    peak)."""
    operands = operands_of(case.shapes, dtype)
    expression = case.compile(dtype)
    flops = float(expression.tree.flops()) * REAL_FLOPS.get(dtype, 1)
    result, first = _first(lambda: expression(*operands))
    with one_blas_thread():
        expected = reference(case, operands, flops, int(np.size(result)))
    error = relative_error(result, expected)
    if result.dtype != dtype:
        raise WrongResult(f"einsum {dtype} {case.name}: einjit's result is {result.dtype}, "
                          f"not {dtype}")
    del result
    if not error < TOLERANCES[dtype]:
        raise WrongResult(f"einsum {dtype} {case.name}: einjit's result differs from numpy's "
                          f"(relative error {error:.2e}, tolerance {TOLERANCES[dtype]:.0e})")
    # the plan on one thread, for the measured speed-up over it (the profile predicts it)
    single = None
    if threads > 1:
        single = case.compile(dtype, threads=1)
        result, single_first = _first(lambda: single(*operands))
        single_error = relative_error(result, expected)
        del result
        if not single_error < TOLERANCES[dtype]:
            raise WrongResult(f"einsum {dtype} {case.name} on one thread: einjit's result "
                              f"differs from numpy's (relative error {single_error:.2e})")
    del expected
    # Two windows each, alternating: einjit, the peers, einjit, the peers; everyone keeps
    # their best. A busy spell of the machine's other tenants must then cover both windows
    # of one side to slow it down. The same einsum (trees: the LOWER/OPT/einsum_ir variants)
    # has its peers timed in the windows of its first case only.
    timed = {"einjit": lambda: expression(*operands)}
    key = (case.equation, tuple(case.shapes))
    new_equation = key not in peer_cache
    seconds = interleaved(timed, {"einjit": first})["einjit"]
    if new_equation:
        peer_cache[key] = peer_seconds(case.equation, operands, threads)
    seconds = min(seconds, interleaved(timed, {"einjit": seconds})["einjit"])
    if new_equation and peer_windows > 1:
        again, _ = peer_seconds(case.equation, operands, threads)
        times, skipped = peer_cache[key]
        peer_cache[key] = ({name: min(t, again[name]) for name, t in times.items()}, skipped)
    times, skipped = peer_cache[key]
    best = min(times, key=times.get)
    gflops = flops / seconds / 1e9
    scaling = dict(measured=1.0, predicted=1.0)
    if single is not None:
        one = interleaved({"one thread": lambda: single(*operands)},
                          {"one thread": single_first})["one thread"]
        scaling = dict(measured=one / seconds,
                       predicted=threads * expression.parallel_profile(threads).efficiency)
    scaling["efficiency"] = {count: expression.parallel_profile(count).efficiency
                             for count in PROFILE_THREADS}
    return dict(case=case, flops=flops, seconds=seconds, gflops=gflops, error=error,
                peers=times, best=best, ratio=times[best] / seconds, skipped=skipped,
                scaling=scaling)


def call_overhead(dtype: str = "float32") -> dict[str, float]:
    """Seconds per call on a 4x4 `ij,jk->ik`: a compiled expression and einjit.einsum with a
    cached plan, against numpy.einsum on the same arrays."""
    rng = np.random.default_rng(3)
    a, b = (rng.uniform(-1, 1, (4, 4)).astype(dtype) for _ in range(2))
    expression = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    for value in (expression(a, b), einjit.einsum("ij,jk->ik", a, b)):
        if not np.allclose(value, a @ b, rtol=1e-5, atol=1e-6):
            raise WrongResult(f"einsum {dtype} 4x4 ij,jk->ik: einjit's result differs from "
                              f"numpy's")
    return seconds_per_call({
        "np.einsum": lambda: np.einsum("ij,jk->ik", a, b),
        "expr": lambda: expression(a, b),
        "einjit.einsum": lambda: einjit.einsum("ij,jk->ik", a, b),
    })


TENSOR_TRAIN_SHAPES = _shapes("af,fbg,gch,hdi,ie->abcde", dict(zip("abcdefghi", TT_SIZES)))


def cold_tensor_train_ms(dtype: str = "float32", parser_cache: bool = True) -> float:
    """contract_expression of the tensor train with the tree cases' sizes in a fresh process:
    parsing, opt_einsum's path, tree rewrite, lowering, passes and all code generation;
    lark's parser loaded from the user's cache (the best of 3 processes: the first writes
    it), or without the cache, built as in a user's first process."""
    shapes = ", ".join(map(str, TENSOR_TRAIN_SHAPES))
    return cold_ms("import numpy, einjit",
                   f"einjit.contract_expression('af,fbg,gch,hdi,ie->abcde', {shapes}, "
                   f"dtype={dtype!r})",
                   environment=None if parser_cache else {"EINJIT_CACHE_DIR": ""})


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def csv_name(dtype: str = "float32") -> str:
    """The result table's file name: einsum.csv for float32, einsum_<dtype>.csv otherwise."""
    return "einsum.csv" if dtype == "float32" else f"einsum_{dtype}.csv"


def _case_line(r: dict, peak: float | None) -> str:
    percent = "" if peak is None else f" {100 * r['gflops'] / peak:5.1f}% peak"
    return (f"{r['case'].name:<32} {r['flops'] / 1e9:8.2f} GFLOP {r['gflops']:7.1f} GFLOPS"
            f"{percent}  {r['ratio']:5.2f}x {r['best']}"
            + (f" ({', '.join(r['skipped'])}: path > {PATH_LIMIT:.0f}x the flops, not run)"
               if r["skipped"] else ""))


def run(quick: bool = False, pattern: str | None = None,
        progress: Callable[[str], None] = print, dtype: str = "float32",
        verdict: Verdict | None = None, peer_windows: int = 2) -> tuple[list[str], str]:
    """Every case, then the call overhead and the cold tensor train; (summary lines, CSV
    text). Progress lines name the cases as they finish; the table is in the summary lines
    alone, printed once by the caller with the run's best peak. Targets and wrong results
    go to `verdict`. The peers are timed in `peer_windows` windows (1: the main job's default
    run, which trades some protection from a busy machine for half the peers' time)."""
    if dtype not in ALL_DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {ALL_DTYPES}")
    verdict = verdict or Verdict()
    target = resolve_target(None)
    threads = default_threads()

    # x86-64: the all-core FMA peak (float64: the same loop in packed doubles, as many
    # instructions, half the flops each; complex: their part's) is measured before every
    # case and the best of them
    # all is the reference: a busy spell of the machine's other tenants only ever slows a
    # measurement down
    peaks = []

    def measure_peak():
        if target.isa == "x86_64":
            peaks.append(all_core_peak_gflops(target.variant, threads)
                         / (2 if PEAK_DTYPE[dtype] == "float64" else 1))
    measure_peak()
    names = peer_names()
    lines = [f"{dtype} einsum: einjit on {target}, {threads} threads; "
             f"peers ({plural(peer_windows, 'timing window')} each): {', '.join(names)}"
             + ("" if HAVE_TORCH else " (torch not installed)")
             + ("" if HAVE_TBLIS else " (pytblis not installed)")]
    header = ["case", "group", "equation", "shapes", "gflop", "einjit_s", "einjit_gflops",
              "percent_of_peak", "best_peer", "speedup_vs_best_peer", "rel_error"] + \
        [f"{n}_s" for n in names] + \
        [f"over_1_thread_{kind}" for kind in ("measured", "predicted")] + \
        [f"predicted_efficiency_{count}_threads" for count in PROFILE_THREADS]
    table = io.StringIO()
    rows = csv.writer(table, lineterminator="\n")
    rows.writerow(header)
    results, wrong, peer_cache = [], [], {}
    warm_memory()        # the largest case's working set (the tensor train's)
    chosen = cases(quick, pattern)
    started = time.perf_counter()
    with progress_bar(len(chosen), f"einsum {dtype}") as bar:
        for index, case in enumerate(chosen, 1):
            bar.step(case.name)
            measure_peak()
            try:
                results.append(run_case(case, peer_cache, threads, dtype, peer_windows))
            except WrongResult as error:
                verdict.wrong(str(error))
                wrong.append(f"{case.name:<32} WRONG: {error}")
            bar.write(f"  einsum {dtype}: {index}/{len(chosen)} {case.name} "
                      f"({time.perf_counter() - started:.0f} s)", progress)
    peak = max(peaks, default=None)
    if peak is not None:
        lines.append(f"all-core {PEAK_DTYPE[dtype]} FMA peak ({threads} cores, the best of "
                     f"{len(peaks)} measurements, one before each case): {peak:.1f} GFLOPS "
                     f"(lowest {min(peaks):.1f})")
    for r in results:
        r["percent"] = None if peak is None else 100 * r["gflops"] / peak
        case = r["case"]
        lines.append(_case_line(r, peak))
        rows.writerow([
            case.name, case.group, case.equation,
            " ".join("x".join(map(str, s)) for s in case.shapes),
            f"{r['flops'] / 1e9:.4f}", f"{r['seconds']:.6f}", f"{r['gflops']:.2f}",
            "" if r["percent"] is None else f"{r['percent']:.1f}", r["best"],
            f"{r['ratio']:.3f}", f"{r['error']:.1e}"] +
            [f"{r['peers'][n]:.6f}" if n in r["peers"] else "" for n in names] +
            [f"{r['scaling'][kind]:.3f}" for kind in ("measured", "predicted")] +
            [f"{r['scaling']['efficiency'][count]:.3f}" for count in PROFILE_THREADS])
    lines += _scaling_lines(results, threads)
    lines += wrong
    if results:
        lines += _ratio_lines(results, dtype, verdict)
        large = [r for r in results if r["flops"] >= LARGE_FLOPS and r["percent"] is not None]
        if large:
            lowest = min(r["percent"] for r in large)
            lines.append(f"cases >= 1 GFLOP: {lowest:.1f}% to "
                         f"{max(r['percent'] for r in large):.1f}% of the all-core peak "
                         f"(target >= {LARGE_PERCENT}%)")
            verdict.target(f"einsum {dtype} cases >= 1 GFLOP, lowest % of the all-core peak",
                           lowest, LARGE_PERCENT)
    blank = [""] * (len(header) - 10)
    try:
        overhead = call_overhead(dtype)
    except WrongResult as error:
        verdict.wrong(str(error))
        lines.append(f"call overhead: WRONG: {error}")
    else:
        numpy_time = overhead["np.einsum"]
        expr, cached = (overhead[name] / numpy_time for name in ("expr", "einjit.einsum"))
        lines.append(f"call overhead, 4x4 ij,jk->ik: np.einsum {1e6 * numpy_time:.2f} us; "
                     f"expr(a, b) {1e6 * overhead['expr']:.2f} us = {expr:.2f}x (target <= "
                     f"{EXPR_OVERHEAD}x); einjit.einsum (cached plan) "
                     f"{1e6 * overhead['einjit.einsum']:.2f} us = {cached:.2f}x (target <= "
                     f"{EINSUM_OVERHEAD}x)")
        verdict.target(f"einsum {dtype} call overhead, expr(a, b) / np.einsum", expr,
                       EXPR_OVERHEAD, "x", at_most=True, digits=2)
        verdict.target(f"einsum {dtype} call overhead, einjit.einsum / np.einsum", cached,
                       EINSUM_OVERHEAD, "x", at_most=True, digits=2)
        for name in ("expr", "einjit.einsum"):
            rows.writerow([f"overhead {name} 4x4", "", "", "", "", f"{overhead[name]:.9f}", "",
                           "", "np.einsum", f"{numpy_time / overhead[name]:.3f}"] + blank)
    cold = cold_tensor_train_ms(dtype)
    building = cold_tensor_train_ms(dtype, parser_cache=False)
    lines.append(f"cold contract_expression, tensor train af,fbg,gch,hdi,ie->abcde, fresh "
                 f"process: {cold:.1f} ms (target <= {COLD_MS} ms); a user's first process, "
                 f"building lark's parser: {building:.1f} ms")
    verdict.target(f"einsum {dtype} cold contract_expression, tensor train", cold, COLD_MS,
                   " ms", at_most=True)
    for name, ms in (("cold contract_expression tensor train", cold),
                     ("cold contract_expression tensor train, parser built", building)):
        rows.writerow([name, "", "", "", "", f"{ms / 1e3:.6f}", "", "", "", ""] + blank)
    return lines, table.getvalue()


def _scaling_lines(results: list[dict], threads: int) -> list[str]:
    """Per case: the speed-up of `threads` threads over one, measured and as the parallel
    profile predicts it, and the profile's predicted efficiency on PROFILE_THREADS threads."""
    if not results:
        return []
    counts = " / ".join(map(str, PROFILE_THREADS))
    lines = [f"parallel plans: {threads} threads over 1, measured and predicted (plan "
             f"arithmetic: expr.parallel_profile); predicted efficiency on {counts} threads"]
    for r in results:
        scaling = r["scaling"]
        efficiency = " / ".join(f"{100 * scaling['efficiency'][count]:3.0f}%"
                                for count in PROFILE_THREADS)
        lines.append(f"  {r['case'].name:<32} {scaling['measured']:5.2f}x "
                     f"{scaling['predicted']:5.2f}x   {efficiency}")
    return lines


def _ratio_lines(results: list[dict], dtype: str, verdict: Verdict) -> list[str]:
    """The geomean over the cases and the lowest case against the best peer, each a target;
    the count below LOWEST_RATIO is of the ratios as printed (two decimals)."""
    ratios = [r["ratio"] for r in results]
    worst = min(results, key=lambda r: r["ratio"])
    below = sum(round(x, 2) < LOWEST_RATIO for x in ratios)
    verdict.target(f"einsum {dtype} geomean einjit / best peer", geomean(ratios),
                   GEOMEAN_TARGET, "x", digits=2)
    verdict.target(f"einsum {dtype} lowest einjit / best peer ({worst['case'].name})",
                   worst["ratio"], LOWEST_RATIO, "x", digits=2)
    return [f"{dtype} geomean einjit / best peer over {plural(len(results), 'case')}: "
            f"{geomean(ratios):.2f}x (target >= {GEOMEAN_TARGET}x); lowest {worst['ratio']:.2f}x "
            f"({worst['case'].name}; target >= {LOWEST_RATIO}x); "
            f"{plural(below, 'case')} below {LOWEST_RATIO}x"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", metavar="JSON", help=argparse.SUPPRESS)  # a peers' process
    parser.add_argument("--quick", action="store_true",
                        help=f"every case shrunk to about {QUICK_FLOPS:.0e} flops")
    parser.add_argument("--filter", metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument("--dtype", choices=ALL_DTYPES, default="float32",
                        help="the operands' dtype for einjit and every peer (default float32)")
    options = parser.parse_args(argv)
    if options.peer:
        print(json.dumps(measure_family(*json.loads(options.peer))))
        return 0
    verdict = Verdict()
    lines, table = run(options.quick, options.filter, dtype=options.dtype, verdict=verdict)
    print("\n".join(lines + ["", "VERDICT"] + verdict.lines()))
    print(f"written: {write_result(csv_name(options.dtype), table)}")
    return verdict.exit_code()


if __name__ == "__main__":
    sys.exit(main())
