"""x86-64 BRGEMM speed against this machine's FMA peak, without Python in the timed loop.

Two small JIT'd functions do the timing work: an FMA loop (24 independent accumulators, so
neither latency nor anything but the FMA ports limits it) gives the peak, and a driver calls
a kernel `count` times with fixed arguments, so one ctypes call covers many kernel calls.
Each figure is the best of several repetitions (the machine is shared and noisy).

    python benchmarks/x86_gemm.py                  # summary: 64x64x64, mean over M, N >= 16
    python benchmarks/x86_gemm.py --variant avx2
    python benchmarks/x86_gemm.py --grid 1-64 --k 1,16,32,64,128 --csv out.csv
"""

import argparse
import ctypes
import csv
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from einjit.backends.x86_64 import cpu, encode as e                     # noqa: E402
from einjit.backends.x86_64.asm import Assembler                        # noqa: E402
from einjit.backends.x86_64.brgemm import generate_brgemm               # noqa: E402
from einjit.backends.x86_64.encode import (RBP, RBX, RCX, RDI, RDX, RSI, RSP, R8,   # noqa: E402
                                           R9, R12, R13, RAX, Mem)
from einjit.runtime.memory import ExecutableMemory                      # noqa: E402

WIDTH = {"avx512": 512, "avx2": 256}
FLOPS_PER_FMA = {"avx512": 32, "avx2": 16}
FMA_CHAINS = 24
FMAS_PER_ITERATION = 48


def _function(code, argument_count):
    memory = ExecutableMemory(code)
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * argument_count)
    return memory, prototype(memory.address)


def fma_peak_loop(variant):
    """peak(count): count iterations of FMAS_PER_ITERATION independent FMAs."""
    asm, width = Assembler(), WIDTH[variant]
    registers = FMA_CHAINS if variant == "avx512" else 12
    asm.prologue([])
    for r in range(registers + 2):
        asm(e.vxorps(r, r, r, 128))     # clears the whole register
    top = asm.label()
    asm.align(32)
    asm.bind(top)
    for i in range(FMAS_PER_ITERATION):
        acc = i % registers
        asm(e.vfmadd231ps(acc, registers, registers + 1, width))
    asm(e.dec(RDI))
    asm.jcc("ne", top)
    asm.epilogue()
    return _function(asm.finish(), 1)


def call_register(register):
    """call register: FF /2 with a register operand, REX.B for r8..r15 (encode.py has no call)."""
    return (b"\x41" if register >= 8 else b"") + bytes((0xFF, 0xD0 | register & 7))


def repeat_driver():
    """repeat(count, kernel, args): call kernel(*args[0:8]) count times (8 integer arguments)."""
    asm = Assembler()
    count, kernel, args = RBX, RBP, R12
    asm.prologue([count, kernel, args, R13])     # 4 pushes + return address: rsp = 8 mod 16
    asm(e.mov_rr(count, RDI), e.mov_rr(kernel, RSI), e.mov_rr(args, RDX), e.sub_ri(RSP, 24))
    top = asm.label()
    asm.bind(top)
    for i, reg in enumerate((RDI, RSI, RDX, RCX, R8, R9)):
        asm(e.mov_rm(reg, Mem(args, disp=8 * i)))
    for i in (6, 7):
        asm(e.mov_rm(RAX, Mem(args, disp=8 * i)), e.mov_mr(Mem(RSP, disp=8 * (i - 6)), RAX))
    asm(call_register(kernel), e.dec(count))
    asm.jcc("ne", top)
    asm(e.add_ri(RSP, 24))
    asm.epilogue()
    return _function(asm.finish(), 3)


def best_seconds(function, repetitions=15):
    best = float("inf")
    for _ in range(repetitions):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def calibrated_count(run, seconds):
    """A repeat count for which run(count) takes about `seconds`."""
    count = 1
    while True:
        elapsed = best_seconds(lambda: run(count), 1)
        if elapsed >= seconds / 4:
            return max(1, int(count * seconds / elapsed))
        count *= 8


def measure_peak(variant, seconds=0.01):
    """FP32 GFLOPS of the JIT'd FMA loop."""
    _memory, peak = fma_peak_loop(variant)
    count = calibrated_count(peak, seconds)
    elapsed = best_seconds(lambda: peak(count), 30)
    return count * FMAS_PER_ITERATION * FLOPS_PER_FMA[variant] / elapsed / 1e9


class GemmBench:
    """Times one kernel through the repeat driver."""

    def __init__(self, variant):
        self.variant = variant
        self._driver_memory, self._repeat = repeat_driver()

    def gflops(self, m, n, k, br=1, seconds=0.002, repetitions=15):
        code = generate_brgemm(m, n, k, br, variant=self.variant)
        memory, _ = _function(code, 8)
        rng = np.random.default_rng(0)
        a = rng.uniform(-1, 1, br * m * k).astype(np.float32)
        b = rng.uniform(-1, 1, br * k * n).astype(np.float32)
        c = np.zeros(m * n, np.float32)
        args = (ctypes.c_int64 * 8)(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, k, m,
                                    m * k, k * n)
        def run(count):
            self._repeat(count, memory.address, ctypes.addressof(args))

        count = calibrated_count(run, seconds)
        elapsed = best_seconds(lambda: run(count), repetitions)
        return count * 2.0 * m * n * k * br / elapsed / 1e9


def generation_ms(m, n, k, br, variant, repetitions=20):
    return 1e3 * best_seconds(lambda: generate_brgemm(m, n, k, br, variant=variant), repetitions)


def _sizes(text):
    if "-" in text:
        low, high = map(int, text.split("-"))
        return list(range(low, high + 1))
    return [int(x) for x in text.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default=None, help="avx512 or avx2 (default: the host's)")
    parser.add_argument("--grid", default=None, help="M and N values, e.g. 1-64 or 16,32,64")
    parser.add_argument("--k", default="64,128", help="K values of the grid")
    parser.add_argument("--br", type=int, default=1, help="batch size of the grid")
    parser.add_argument("--csv", default=None, help="write the grid to this CSV file")
    options = parser.parse_args()
    variant = options.variant or cpu.variant()
    start = time.perf_counter()
    generate_brgemm(64, 64, 64, 1, variant=variant)
    first_generation_ms = 1e3 * (time.perf_counter() - start)
    peak_before = measure_peak(variant)
    bench = GemmBench(variant)
    headline_sizes = ((64, 1), (64, 16), (32, 1), (16, 1))
    headline = [bench.gflops(size, size, size, br) for size, br in headline_sizes]
    if options.grid is None:
        sizes, ks = list(range(16, 65, 4)), (64,)
    else:
        sizes, ks = _sizes(options.grid), _sizes(options.k)
    rows = []
    for k in ks:
        for m in sizes:
            for n in sizes:
                g = bench.gflops(m, n, k, options.br, seconds=0.001, repetitions=7)
                rows.append((m, n, k, options.br, g))
    # other work on a shared machine steals cycles for a while: the peak and the headline
    # figures are the best of a measurement before and one after the grid
    peak = max(peak_before, measure_peak(variant))
    headline = [max(g, bench.gflops(size, size, size, br))
                for g, (size, br) in zip(headline, headline_sizes)]
    rows = [(m, n, k, br, g, 100 * g / peak) for m, n, k, br, g in rows]
    print(f"variant {variant}: FMA peak {peak:.1f} GFLOPS; 64x64x64 generated in "
          f"{first_generation_ms:.2f} ms the first time in this process")
    for (size, br), g in zip(headline_sizes, headline):
        print(f"  {size}x{size}x{size} br={br}: {g:6.1f} GFLOPS = {100 * g / peak:5.1f}% of peak, "
              f"generated again in {generation_ms(size, size, size, br, variant):.2f} ms")
    big = [row[5] for row in rows if row[0] >= 16 and row[1] >= 16 and row[2] >= 64]
    if big:
        print(f"  mean over M, N >= 16, K >= 64 ({len(big)} sizes): "
              f"{statistics.mean(big):.1f}% of peak, min {min(big):.1f}%")
    if options.csv:
        with open(options.csv, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(("m", "n", "k", "br", "gflops", "percent_of_peak"))
            writer.writerows((m, n, k, br, f"{g:.2f}", f"{p:.1f}") for m, n, k, br, g, p in rows)


if __name__ == "__main__":
    main()
