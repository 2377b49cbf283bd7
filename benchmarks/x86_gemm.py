"""x86-64 GEMM and BRGEMM speed against this machine's FMA peak, measured in the same run.

For every M, N of a size grid (1..64 in the full run) and K in {1, 16, 32, 64, 128}, plus
BRGEMMs with batch 16, it times the generated kernel through the JIT'd repeat driver and
reports GFLOPS and the percentage of the peak of a JIT'd FMA loop, measured before each row
of N (the machine may be shared: two passes, or --passes, each shape's best, against the
best peak). K = 1 (outer products) is set against a store-bandwidth bound timed in
alternation with it: a JIT'd function called like the kernel, on the same C, that only
stores C's n * ceil(m/lanes) whole vectors (vmovups) where the kernel stores them. Operands
sit at fixed places (see PAGE), and one line times SPLIT_SHAPE with a column of C across a
page boundary. Targets (each recorded in the run's verdict): 64x64x64 >= 90% of peak; mean
over M, N >= 16 with K >= 64 >= 75%; M, N in 8..64 with K in {16, 64}: mean >= 90%, none
below 75%; K = 1 >= 80% of the store bound; generation of a kernel under 2 ms. With float32
the FP64 figures follow (64^3 and the mean over M, N >= 16, K >= 64 against the FP64 peak of
a JIT'd vfmadd231pd loop, each shape paired with a peak measured right before it), then the
complex BRGEMMs 64x64x64, batch 1 and 16, complex64 and complex128, against the FMA peak of
their parts' dtype (target >= 85%; --complex-only: these alone).

    python -m benchmarks.x86_gemm [--variant avx2] [--sizes 8-64] [--k 1,16,64] [--dtype float64]
                                  [--passes 4] [--complex-only]

--dtype float64 times the FP64 kernels against the FP64 peak over the whole grid.
"""

import argparse
import csv
import io
import statistics
import sys
import time

import numpy as np

from einjit.backends import LINE_BYTES
from einjit.backends.x86_64 import VARIANTS, cpu, generate_brgemm
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.blocking import unmasked_target

from .harness import (
    JitFunction,
    RepeatDriver,
    best_seconds,
    cold_ms,
    fma_peak_gflops,
    placed,
    write_result,
)
from .progress import progress_bar
from .verdict import Verdict

K_VALUES = (1, 16, 32, 64, 128)
AWKWARD = (8, 12, 20, 24, 25, 40, 50)      # sizes off the vector width: a table at K = 64
SMALL = range(8, 65)                       # small shapes: every M, N in 8..64 ...
SMALL_K = (16, 64)                         # ... at these K
# the main job's grid (the full run: every M, N in 1..64): the awkward sizes and multiples of 16
HEADLINE_SIZES = tuple(sorted(set(AWKWARD) | {16, 32, 48, 64}))
FP64_SIZES = range(16, 65, 8)              # FP64 mean over M, N >= 16 (paired shapes)
FP64_K = (64, 128)
BATCH_SHAPES = [(16, 16, 16), (32, 32, 32), (64, 64, 64), (64, 64, 128), (48, 24, 64)]
# Operands sit at the same place in every run (harness.placed): 16 bytes past a page boundary,
# where numpy's allocator starts large arrays, A and B a quarter and a half page further on
# (their loads then share no page offset with C's stores): a vector store split over two pages
# is slow, so where the allocator put C would otherwise decide the grid's minimum. That cost
# is measured apart, on SPLIT_SHAPE with a column of C across a page boundary.
PAGE = 4096
C_OFFSET, A_OFFSET, B_OFFSET = 16, 16 + PAGE // 4, 16 + PAGE // 2
SPLIT_SHAPE = (9, 8, 16)
# A's pitch (see blocking.packs_a): a block of C of an einsum over a tall operand, A's columns
# 512 bytes, 1 and 4 KiB apart, against 8 elements more (not a multiple of 512 bytes)
PITCH_SHAPE, PITCH_LD_A, PITCH_STEP = (128, 64, 256), (128, 256, 1024), 8
# a large contraction's call as a 2048^3 matmul makes it (einjit.passes.block: M and K blocks
# of 128, N panels of FAR_C_N), C at a pitch of 2048 elements, against FAR_C_STEP more
FAR_C_SHAPE, FAR_C_LD, FAR_C_STEP = (128, 128), 2048, 16
FAR_C_N = {"float32": 512, "float64": 256}
# A line-aligned against A_OFFSET (16 bytes past a line, where numpy puts large arrays, so
# that every full vector of A straddles two lines): what split loads cost the kernel
A_LINE_SHAPES = ((64, 64, 64, 1), (64, 64, 64, 16), (128, 64, 256, 4))


# a complex kernel's FMA peak is its part's; a complex multiply-add counts 8 real flops
REAL_PART = {"complex64": "float32", "complex128": "float64"}
COMPLEX_SHAPES = ((64, 64, 64, 1), (64, 64, 64, 16))


class GemmTimer:
    """GFLOPS of generated BRGEMM kernels on random operands."""

    def __init__(self, variant, dtype="float32"):
        self.variant, self.dtype = variant, dtype
        self.driver = RepeatDriver()
        self.rng = np.random.default_rng(0)
        self.flops_per_step = 8 if dtype in REAL_PART else 2

    def peak(self, seconds=0.02):
        return fma_peak_gflops(self.variant, seconds=seconds,
                               dtype=REAL_PART.get(self.dtype, self.dtype))

    def gflops(self, m, n, k, br=1, seconds=0.001, repetitions=3, c_offset=C_OFFSET,
               ld_a=None, ld_b=None, ld_c=None, far_c=False, a_offset=A_OFFSET):
        """far_c: the kernel told that C comes from beyond L2 (generate_brgemm's far_c, at
        ld_c), as a large contraction's calls are; ld_b, where given, is generated in;
        a_offset: A's bytes past a page boundary."""
        hints = {"ld_b": ld_b} if ld_b else {}
        if far_c:
            hints["far_c"] = ld_c or m
        if self.dtype == "float32":    # the generator's float32 form, as every caller uses it
            code = generate_brgemm(VARIANTS[self.variant], m, n, k, br, **hints)
        else:
            code = generate_brgemm(VARIANTS[self.variant], m, n, k, br, dtype=self.dtype,
                                   **hints)
        kernel = JitFunction(code, 8)
        operands, args = self._operands(m, n, k, br, c_offset, ld_a, ld_b, ld_c, a_offset)
        per_call = self.driver.seconds_per_call(kernel.memory.address, args, seconds, repetitions)
        return self.flops_per_step * m * n * k * br / per_call / 1e9

    def _operands(self, m, n, k, br, c_offset=C_OFFSET, ld_a=None, ld_b=None, ld_c=None,
                  a_offset=A_OFFSET):
        """Random A and B and a zero C, each placed past a page boundary (see PAGE); the
        columns of A, B and C ld_a, ld_b and ld_c elements apart (default M, K and M)."""
        ld_a, ld_b, ld_c = ld_a or m, ld_b or k, ld_c or m
        a = placed(self._random(br * ld_a * k), a_offset, PAGE)
        b = placed(self._random(br * ld_b * n), B_OFFSET, PAGE)
        c = placed(np.zeros(ld_c * n, self.dtype), c_offset, PAGE)
        return (a, b, c), (a.ctypes.data, b.ctypes.data, c.ctypes.data, ld_a, ld_b, ld_c,
                           ld_a * k, ld_b * n)

    def _random(self, count):
        values = self.rng.uniform(-1, 1, count)
        if self.dtype in REAL_PART:
            values = values + 1j * self.rng.uniform(-1, 1, count)
        return values.astype(self.dtype)

    def store_percent(self, m, n, seconds=0.001, repetitions=3):
        """M x N x 1 against the store bound: a JIT'd function with the kernels' arguments
        that only stores C's columns in whole vectors (ceil(m/lanes) a column, the last one
        ending at the column's last row, as the kernels place it; the same C, alignment and
        call overhead), timed in alternation with the kernel: the percentage of the
        kernel's time that storing C alone takes."""
        size = np.dtype(self.dtype).itemsize
        width = unmasked_target(VARIANTS[self.variant], m, size, 1).vector_bits   # the kernel's
        lanes = width // 8 // size
        vectors = -(-m // lanes)
        starts = [min(v * lanes, max(m - lanes, 0)) for v in range(vectors)]
        stores = Assembler()
        stores(enc.vxorps(0, 0, 0, 256))
        stores((enc.vmovups_store(enc.Mem(enc.RDX, disp=(j * m + row) * size), 0, width)
                for j in range(n) for row in starts), enc.vzeroupper(), enc.ret())
        store_only = JitFunction(stores.finish(), 8)
        kernel = JitFunction(generate_brgemm(VARIANTS[self.variant], m, n, 1, 1,
                                             dtype=self.dtype), 8)
        # C gets room for a whole last vector when m < lanes: the store loop writes it whole
        operands, args = self._operands(m, n + lanes, 1, 1)
        best = {}
        for _ in range(repetitions):
            for name, function in (("stores", store_only), ("kernel", kernel)):
                t = self.driver.seconds_per_call(function.memory.address, args, seconds, 1)
                best[name] = min(best.get(name, t), t)
        return 100 * best["stores"] / best["kernel"]


def paired_percent(timer, m, n, k, br, rounds=5, c_offset=C_OFFSET, **layout):
    """The kernel's best GFLOPS over `rounds` rounds as a percentage of the best FMA peak
    measured in the same rounds, each right before the kernel: the machine is shared, and a
    busy spell only ever slows a measurement down. layout: GemmTimer.gflops's ld_a, ld_b,
    ld_c, far_c, a_offset."""
    peaks, kernels = [], []
    for _ in range(rounds):
        peaks.append(timer.peak())
        kernels.append(timer.gflops(m, n, k, br, seconds=0.01, repetitions=5,
                                    c_offset=c_offset, **layout))
    return 100 * max(kernels) / max(peaks)


def generation_ms(m, n, k, br, variant):
    """(first generation in a fresh process, later generations) in milliseconds."""
    cold = cold_ms("from einjit.backends.x86_64 import VARIANTS, generate_brgemm",
                   f"generate_brgemm(VARIANTS[{variant!r}], {m}, {n}, {k}, {br})")
    warm = 1e3 * best_seconds(lambda: generate_brgemm(VARIANTS[variant], m, n, k, br), 20)
    return cold, warm


def measure_grid(timer, sizes, k_values, progress=print, passes=2):
    """({(m, n, k): (percent of peak, GFLOPS, percent of the store bound or None)}, the FMA
    peaks). Each shape's GFLOPS is the best of `passes` passes over the grid, minutes apart (a
    burst of load from other processes on the shared machine otherwise drags down a run of
    neighbouring shapes); the FMA peak is measured before every row of N, interleaved with
    the kernels, and the best of them all is the reference: load only ever slows a
    measurement down. K = 1 is also timed against its store bound, shape by shape."""
    gflops, peaks, to_store = {}, [], {}
    start = time.perf_counter()
    with progress_bar(passes * len(k_values) * len(sizes) ** 2, f"GEMM {timer.variant}") as bar:
        for sweep in range(1, passes + 1):
            for k in k_values:
                for m in sizes:
                    peaks.append(timer.peak(seconds=0.01))
                    for n in sizes:
                        bar.step(f"pass {sweep}/{passes} {m}x{n}x{k}")
                        gflops[m, n, k] = max(gflops.get((m, n, k), 0.0), timer.gflops(m, n, k))
                        if k == 1:
                            to_store[m, n] = max(to_store.get((m, n), 0.0),
                                                 timer.store_percent(m, n))
                progress(f"  {timer.variant}: pass {sweep}/{passes}, K={k} done "
                         f"({time.perf_counter() - start:.0f} s)")
    peak = max(peaks)
    best = {(m, n, k): (100 * g / peak, g, to_store.get((m, n)) if k == 1 else None)
            for (m, n, k), g in gflops.items()}
    return best, peaks


def small_sizes_lines(best, verdict=None, label=""):
    """The small shapes' figures from the grid: every measured M, N in 8..64 at K in {16, 64}
    (and M below a vector beside them), the table of the awkward sizes at K = 64 and K = 1
    against the store bound; their targets go to `verdict` (names prefixed by `label`)."""
    verdict = verdict or Verdict()
    lines = []
    small = [v[0] for (m, n, k), v in best.items() if m in SMALL and n in SMALL and k in SMALL_K]
    if small:
        low = min((v[0], key) for key, v in best.items()
                  if key[0] in SMALL and key[1] in SMALL and key[2] in SMALL_K)
        lines.append(f"  M, N in 8..64, K in {{16, 64}} ({len(small)} shapes): mean "
                     f"{statistics.mean(small):.1f}% of peak, min {low[0]:.1f}% at "
                     f"{'x'.join(map(str, low[1]))} (targets: mean >= 90%, min >= 75%)")
        verdict.target(f"{label}M, N in 8..64, K in {{16, 64}}, mean % of peak",
                       statistics.mean(small), 90)
        verdict.target(f"{label}M, N in 8..64, K in {{16, 64}}, min % of peak "
                       f"({'x'.join(map(str, low[1]))})", low[0], 75)
        for k in SMALL_K:
            row = [v[0] for (m, n, kk), v in best.items() if m in SMALL and n in SMALL and kk == k]
            if row:
                lines.append(f"    K={k}: mean {statistics.mean(row):.1f}%, min {min(row):.1f}%")
    tiny = {k: [v[0] for (m, n, kk), v in best.items() if m < min(SMALL) and n in SMALL
                and kk == k] for k in SMALL_K}
    if all(tiny.values()):              # M of less than a vector: dot tails, masked EVEX ymm
        lines.append("  M = 1..7, N in 8..64: mean " + ", ".join(
            f"K={k} {statistics.mean(row):.1f}%" for k, row in tiny.items()) + " of peak")
    if all((m, n, 64) in best for m in AWKWARD for n in AWKWARD):
        lines.append("  % of peak at K=64, M down, N across (sizes off the vector width):")
        lines.append("     M\\N" + "".join(f"{n:7d}" for n in AWKWARD))
        lines += [f"  {m:6d}" + "".join(f"{best[m, n, 64][0]:7.1f}" for n in AWKWARD)
                  for m in AWKWARD]
    ones = [(v[2], m, n) for (m, n, k), v in best.items()
            if k == 1 and m in SMALL and n in SMALL and v[2] is not None]
    if ones:
        lines.append(f"  K=1, M, N in 8..64 ({len(ones)} shapes): mean "
                     f"{statistics.mean(v for v, _, _ in ones):.1f}% of the store bound, min "
                     f"{min(ones)[0]:.1f}% at {min(ones)[1]}x{min(ones)[2]}x1 (target >= 80%; "
                     f"bound: a JIT'd function storing C's n*ceil(m/lanes) vectors, same call)")
        verdict.target(f"{label}K=1, M, N in 8..64, mean % of the store bound",
                       statistics.mean(v for v, _, _ in ones), 80)
    return lines


def page_split_lines(timer):
    """SPLIT_SHAPE placed as the grid places it and with C's column 1 starting 16 bytes
    before a page boundary (its first vector store split over two pages), each paired."""
    m, n, k = SPLIT_SHAPE
    split_offset = PAGE - 16 - m * np.dtype(timer.dtype).itemsize
    as_grid = paired_percent(timer, m, n, k, 1)
    split = paired_percent(timer, m, n, k, 1, c_offset=split_offset)
    return [f"  {m}x{n}x{k} with a column of C across a page boundary: {split:.1f}% of peak, "
            f"{as_grid:.1f}% placed as in the grid (paired; see PAGE)"]


def pitch_lines(timer):
    """PITCH_SHAPE with A's columns a multiple of 512 bytes apart (the kernel copies A's
    panel first, see blocking.packs_a) and PITCH_STEP elements further (A read in place),
    each paired."""
    m, n, k = PITCH_SHAPE
    lines = []
    for ld_a in PITCH_LD_A:
        copied = paired_percent(timer, m, n, k, 1, ld_a=ld_a)
        in_place = paired_percent(timer, m, n, k, 1, ld_a=ld_a + PITCH_STEP)
        lines.append(f"  {m}x{n}x{k} at ld_a = {ld_a} ({ld_a * np.dtype(timer.dtype).itemsize} "
                     f"bytes a column, A copied): {copied:.1f}% of peak; at ld_a = "
                     f"{ld_a + PITCH_STEP} (read in place): {in_place:.1f}% (paired)")
    return lines


def a_line_lines(timer):
    """A_LINE_SHAPES with A line-aligned and at A_OFFSET, each paired."""
    aligned = A_OFFSET - A_OFFSET % LINE_BYTES
    lines = []
    for m, n, k, br in A_LINE_SHAPES:
        line, split = (paired_percent(timer, m, n, k, br, a_offset=offset)
                       for offset in (aligned, A_OFFSET))
        lines.append(f"  {m}x{n}x{k} batch {br} with A line-aligned: {line:.1f}% of peak; "
                     f"{A_OFFSET % LINE_BYTES} bytes past a line (A's vectors across lines): "
                     f"{split:.1f}% (paired)")
    return lines


def far_c_lines(timer):
    """A large contraction's call (FAR_C_SHAPE and FAR_C_N, A and B read from copies at a
    pitch of M plus a line, as the nest makes them, C from beyond L2: far_c), the same C
    block each call, at a power-of-two ld_c, whose lines share few of L2's sets, and
    FAR_C_STEP elements further, paired: what C's pitch costs the nest's kernel."""
    m, k = FAR_C_SHAPE
    n, copies = FAR_C_N[timer.dtype], m + LINE_BYTES // np.dtype(timer.dtype).itemsize
    figures = [paired_percent(timer, m, n, k, 1, ld_a=copies, ld_b=copies, ld_c=ld_c,
                              far_c=True) for ld_c in (FAR_C_LD, FAR_C_LD + FAR_C_STEP)]
    return [f"  {m}x{n}x{k}, a large contraction's call (C from beyond L2): at ld_c = "
            f"{FAR_C_LD}: {figures[0]:.1f}% of peak; at ld_c = {FAR_C_LD + FAR_C_STEP}: "
            f"{figures[1]:.1f}% (paired)"]


def fp64_lines(variant, verdict=None):
    """The FP64 figures: 64^3 and the mean over M, N >= 16, K >= 64, each shape the best of
    rounds against the FP64 peak measured right before it; their targets go to `verdict`."""
    verdict = verdict or Verdict()
    timer = GemmTimer(variant, "float64")
    headline = paired_percent(timer, 64, 64, 64, 1)
    shapes = [(m, n, k) for k in FP64_K for m in FP64_SIZES for n in FP64_SIZES]
    percents = [paired_percent(timer, m, n, k, 1, rounds=3) for m, n, k in shapes]
    low = min(zip(percents, shapes))
    verdict.target(f"GEMM {variant} FP64 64x64x64, % of the FP64 peak", headline, 90)
    verdict.target(f"GEMM {variant} FP64 mean over M, N >= 16, K >= 64, % of the FP64 peak",
                   statistics.mean(percents), 75)
    return [f"  FP64 GEMM 64x64x64: {headline:.1f}% of the FP64 peak (JIT'd vfmadd231pd loop, "
            f"paired; target >= 90%)",
            f"  FP64 mean over M, N in {FP64_SIZES.start}..{FP64_SIZES.stop - 1} step "
            f"{FP64_SIZES.step}, K in {FP64_K} ({len(shapes)} shapes, each paired): "
            f"{statistics.mean(percents):.1f}%, min {low[0]:.1f}% at {'x'.join(map(str, low[1]))} "
            f"(target >= 75%)"]


def complex_lines(variant, verdict=None, rounds=7):
    """The complex BRGEMMs (COMPLEX_SHAPES, complex64 and complex128): GFLOPS, a complex
    multiply-add counted as 8 flops, as a percentage of the FMA peak of the real part's
    dtype, each the best of `rounds` rounds against the best peak measured right before each
    (the machine is shared); their targets go to `verdict`."""
    verdict = verdict or Verdict()
    lines = []
    for dtype in REAL_PART:
        timer = GemmTimer(variant, dtype)
        for m, n, k, br in COMPLEX_SHAPES:
            percent = paired_percent(timer, m, n, k, br, rounds=rounds)
            name = f"{dtype} BRGEMM {m}x{n}x{k} batch {br}"
            lines.append(f"  {name}: {percent:.1f}% of the {REAL_PART[dtype]} FMA peak "
                         f"(8 flops a complex multiply-add; best of {rounds} paired rounds; "
                         f"target >= 85%)")
            verdict.target(f"GEMM {variant} {name}, % of the FMA peak", percent, 85)
    return lines


def run(variant, sizes, k_values, progress=print, dtype="float32", fp64=True, passes=2,
        verdict=None):
    """Measure the grid; return (summary lines, CSV text). The targets go to `verdict`."""
    verdict = verdict or Verdict()
    timer = GemmTimer(variant, dtype)
    best, peaks = measure_grid(timer, sizes, k_values, progress, passes)
    grid = [(m, n, k, 1, g, percent, bound) for (m, n, k), (percent, g, bound) in best.items()]
    batched = [(m, n, k, paired_percent(timer, m, n, k, 16)) for m, n, k in BATCH_SHAPES]
    headline = paired_percent(timer, 64, 64, 64, 1)
    split = page_split_lines(timer)
    pitches = pitch_lines(timer) + a_line_lines(timer) + far_c_lines(timer)
    peak = max(peaks)

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(("m", "n", "k", "br", "gflops", "percent_of_peak", "percent_of_store_bound"))
    writer.writerows((m, n, k, br, f"{g:.2f}", f"{percent:.1f}",
                      "" if store is None else f"{store:.1f}")
                     for m, n, k, br, g, percent, store in grid)
    writer.writerows((m, n, k, 16, "", f"{percent:.1f}") for m, n, k, percent in batched)
    big = [percent for m, n, k, br, g, percent, _ in grid if m >= 16 and n >= 16 and k >= 64]
    precision = "FP64" if dtype == "float64" else "FP32"
    label = f"GEMM {variant} {precision} "
    lines = [f"{variant} {precision} on {cpu.microarch().name}: FMA peak {min(peaks):.1f} to "
             f"{peak:.1f} GFLOPS over the run (JIT'd "
             f"{'vfmadd231pd' if dtype == 'float64' else 'vfmadd231ps'} loop, one core; the "
             f"grid is divided by the highest)"]
    lines.append(f"  GEMM 64x64x64: {headline:.1f}% of peak (best of 5 rounds against the best "
                 f"peak measured right before each; target >= 90%)")
    verdict.target(f"{label}64x64x64, % of peak", headline, 90)
    if big:
        lines.append(f"  mean over M, N >= 16, K >= 64 ({len(big)} sizes): "
                     f"{statistics.mean(big):.1f}% of peak, min {min(big):.1f}% (target >= 75%)")
        verdict.target(f"{label}mean over M, N >= 16, K >= 64, % of peak",
                       statistics.mean(big), 75)
    for k in k_values:
        row = [percent for m, n, kk, br, g, percent, _ in grid if kk == k]
        lines.append(f"  K={k:<4} mean over the {len(row)} sizes: {statistics.mean(row):5.1f}%")
    lines += small_sizes_lines(best, verdict, label)
    lines += split + pitches
    lines += [f"  BRGEMM {m}x{n}x{k} batch 16: {percent:.1f}% of peak (paired as above)"
              for m, n, k, percent in batched]
    if dtype == "float32" and fp64:
        lines += fp64_lines(variant, verdict)
        lines += complex_lines(variant, verdict)
    for shape in ((64, 64, 64, 1), (1024, 1024, 2048, 1024)) if dtype == "float32" else ():
        cold, warm = generation_ms(*shape, variant)
        name = f"{'x'.join(map(str, shape[:3]))} batch {shape[3]}"
        lines.append(f"  generation {name}: {cold:.2f} ms in a fresh process, {warm:.2f} ms "
                     f"after (target < 2 ms)")
        verdict.target(f"generation {variant} {name}, fresh process", cold, 2, " ms",
                       at_most=True, digits=2)
    return lines, out.getvalue()


def _values(text):
    if "-" in text:
        low, high = map(int, text.split("-"))
        return list(range(low, high + 1))
    return [int(x) for x in text.split(",")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=("avx512", "avx2"), default=None,
                        help="code variant (default: the host's best)")
    parser.add_argument("--sizes", default="1-64", help="M and N values, e.g. 1-64 or 16,32")
    parser.add_argument("--k", default=",".join(map(str, K_VALUES)), help="K values")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--no-fp64", action="store_true",
                        help="float32: skip the FP64 and complex figures (about a minute)")
    parser.add_argument("--complex-only", action="store_true",
                        help="only the complex BRGEMM figures (64x64x64, batch 1 and 16)")
    parser.add_argument("--passes", type=int, default=2,
                        help="passes over the grid, each shape's best kept (a noisy machine: 4)")
    options = parser.parse_args(argv)
    variant = options.variant or cpu.variant()
    if options.passes < 1:
        parser.error(f"--passes {options.passes}: expected 1 or more")
    if options.complex_only:
        print(f"{variant} complex BRGEMM on {cpu.microarch().name}:")
        print("\n".join(complex_lines(variant)))
        return 0
    lines, table = run(variant, _values(options.sizes), _values(options.k), dtype=options.dtype,
                       fp64=not options.no_fp64, passes=options.passes)
    print("\n".join(lines))
    suffix = "" if options.dtype == "float32" else "_float64"
    print(f"  written: {write_result(f'x86_gemm_{variant}{suffix}.csv', table)}")
    if options.dtype == "float64":
        summary = "\n".join(lines) + "\n"
        print(f"  written: {write_result(f'x86_gemm_{variant}{suffix}.txt', summary)}")


if __name__ == "__main__":
    sys.exit(main())
