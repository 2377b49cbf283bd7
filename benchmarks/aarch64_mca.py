"""Static throughput of the generated A64 BRGEMM inner loops (FP32, FP64, complex64 and
complex128), and kernel generation times.

Our machines only emulate AArch64, so A64 speed is judged with LLVM's machine-code analyser:
each innermost loop of a generated BRGEMM (the K loop of one C block shape) is handed to
`llvm-mca-16 -mcpu=neoverse-v2`, and its predicted FMLA per cycle is compared with the
model's peak, measured in the same run on a block of independent FMLAs of the same
arrangement (4s for FP32, 2d for FP64: half the FLOPs per instruction, the same FMLA rate).

Then every BRGEMM size M, N in 1..64 at K = 64, FP32 and FP64 (grid()): the useful FLOPs of
C over the predicted cycles of the steady-state K loop of each of its C blocks (llvm-mca runs
once per distinct block shape, about 100 of them, in parallel), as a share of the model's peak
in full-vector FLOPs: lanes computed beyond M count as lost. Printed: the mean, the minimum,
the worst sizes and the mean over N for each M.

    python -m benchmarks.aarch64_mca        # prints the tables, writes benchmarks/results/
    python -m benchmarks mca                # the same as a section of the main job

LLVM 16 models neoverse-v2 with its Neoverse N2 scheduling tables (two 128-bit FP pipes),
so the model's peak is about 2 FMLA/cycle; the real V2 has four pipes.

The complex kernels (FCMLA, complex_brgemm.py) are judged the same way on the Neoverse V1
and V2 models (COMPLEX_CPUS): FCMLA per cycle of each K loop against 32 independent FCMLAs of
the same form (by element for complex64, vector .2d for complex128), and the grid's useful
complex multiply-adds (one FCMLA #0 and #90 pair per complex lane) at K = 64.
"""

import itertools
import re
import sys

from einjit.backends import aarch64
from einjit.backends.aarch64 import brgemm, complex_brgemm
from einjit.backends.aarch64.target import check_dtype

from . import llvm_mca
from .harness import best_seconds, cold_ms, write_result
from .verdict import Verdict

MCA = ["llvm-mca-16", "-mtriple=aarch64", "-mcpu=neoverse-v2"]

# (m, n, k, batch): the main 16x6 microkernel, then every kind of remainder block.
SHAPES = [(64, 64, 64, 1), (64, 60, 256, 16), (12, 6, 64, 1), (8, 6, 64, 1), (4, 6, 64, 1),
          (3, 6, 64, 1), (2, 6, 64, 1), (1, 6, 64, 1), (16, 5, 64, 1), (16, 4, 64, 1),
          (16, 3, 64, 1), (16, 2, 64, 1), (16, 1, 64, 1), (31, 11, 64, 1), (1, 1, 64, 1)]
# FP64: the main 8x6 microkernel, then its remainder blocks (rows 6, 4, 2 and an odd one).
SHAPES64 = [(64, 64, 64, 1), (64, 60, 256, 16), (8, 6, 64, 1), (7, 6, 64, 1), (6, 6, 64, 1),
            (4, 6, 64, 1), (2, 6, 64, 1), (1, 6, 64, 1), (8, 5, 64, 1), (8, 3, 64, 1),
            (8, 1, 64, 1), (31, 11, 64, 1), (1, 1, 64, 1)]


# complex: the main block (4 q registers by 6 columns), then its remainder blocks (q pieces,
# complex64's odd last row as a d piece, fewer columns)
COMPLEX_SHAPES = {
    "complex64": [(64, 64, 64, 1), (64, 60, 256, 16), (8, 6, 64, 1), (7, 6, 64, 1),
                  (6, 6, 64, 1), (2, 6, 64, 1), (1, 6, 64, 1), (8, 5, 64, 1), (8, 3, 64, 1),
                  (8, 1, 64, 1), (31, 11, 64, 1), (1, 1, 64, 1)],
    "complex128": [(64, 64, 64, 1), (64, 60, 256, 16), (4, 6, 64, 1), (3, 6, 64, 1),
                   (2, 6, 64, 1), (1, 6, 64, 1), (4, 5, 64, 1), (4, 3, 64, 1), (4, 1, 64, 1),
                   (31, 11, 64, 1), (1, 1, 64, 1)],
}
COMPLEX_CPUS = ("neoverse-v1", "neoverse-v2")


ELTWISE = [("unary", ("identity", 2048, 2048, False)), ("unary", ("relu", 2048, 2048, False)),
           ("unary", ("sigmoid", 2048, 2048, False)), ("unary", ("identity", 2048, 2048, True)),
           ("unary", ("relu", 2048, 2048, True)), ("unary", ("sigmoid", 2048, 2048, True)),
           ("binary", ("add", 2048, 2048)), ("binary", ("max", 2048, 2048))]


def cycles_per_iteration(body):
    """Predicted cycles of one pass through a loop body (one instruction per line)."""
    return llvm_mca.cycles_per_iteration(MCA, body)


def fmla_per_cycle(body):
    return sum(line.startswith("fmla") for line in body) / cycles_per_iteration(body)


def mca_command(cpu):
    return ["llvm-mca-16", "-mtriple=aarch64", f"-mcpu={cpu}"]


def fcmla_per_cycle(body, cpu):
    return (sum(line.startswith("fcmla") for line in body)
            / llvm_mca.cycles_per_iteration(mca_command(cpu), body))


def fcmla_peak(dtype, cpu):
    """FCMLA/cycle of 32 independent FCMLAs in the kernel's form: by element (4s) for
    complex64, vector (2d) for complex128."""
    if dtype == "complex64":
        body = [f"fcmla v{i}.4s, v{(i + 1) % 32}.4s, v{(i + 2) % 32}.s[0], #0"
                for i in range(32)]
    else:
        body = [f"fcmla v{i}.2d, v{(i + 1) % 32}.2d, v{(i + 2) % 32}.2d, #0" for i in range(32)]
    return fcmla_per_cycle(body, cpu)


def complex_rows(dtype, cpu, peak):
    """(name, FCMLA/iter, insns/iter, FCMLA/cycle, of peak) of each shape's distinct K loops
    on `cpu`'s model."""
    rows = []
    for shape in COMPLEX_SHAPES[dtype]:
        seen = set()
        for body in innermost_loops(generate("brgemm", *shape, dtype), "fcmla"):
            fcmlas = sum(t.startswith("fcmla") for t in body)
            if fcmlas in seen:
                continue
            seen.add(fcmlas)
            rate = fcmla_per_cycle(body, cpu)
            rows.append((f"{shape[0]}x{shape[1]}x{shape[2]} br{shape[3]}", fcmlas,
                         len(body) - 1, rate, rate / peak))
    return rows


def complex_grid(dtype, cpu, peak, progress=None):
    """{(m, n): predicted share of the model's peak} at K = GRID_K, as grid() has it: the
    useful complex multiply-adds (m * n per k step) over the cycles of every C block's
    steady-state K loop at `peak` FCMLA/cycle, two FCMLAs a full register of complex lanes."""
    lanes = complex_brgemm.complex_element(dtype).lanes
    counts = {(m, n): complex_brgemm.block_counts(m, n, dtype)
              for m in GRID_SIZES for n in GRID_SIZES}
    shapes = sorted({shape for blocks in counts.values() for shape in blocks}, key=str)

    def cycles_per_step(shape):
        code, steps = complex_brgemm.k_loop_code(*shape, GRID_K, dtype)
        (body,) = innermost_loops(code, "fcmla")
        return llvm_mca.cycles_per_iteration(mca_command(cpu), body) / steps
    steps = llvm_mca.map_parallel(cycles_per_step, shapes, progress,
                                  f"{dtype} on {cpu}: llvm-mca on block shape")
    cycles = dict(zip(shapes, steps))
    return {size: size[0] * size[1] / (peak / 2 * lanes * sum(count * cycles[shape]
                                                              for shape, count in blocks.items()))
            for size, blocks in counts.items()}


def complex_lines(verdict, progress=None):
    """The complex kernels' tables on each of COMPLEX_CPUS; the 64x64x64 targets to
    `verdict`."""
    lines = []
    for cpu, dtype in itertools.product(COMPLEX_CPUS, tuple(COMPLEX_SHAPES)):
        peak = fcmla_peak(dtype, cpu)
        rows = complex_rows(dtype, cpu, peak)
        lines += ["", f"{dtype} (FCMLA #0 and #90 per complex lane), llvm-mca-16 -mcpu={cpu}: "
                  f"model peak {peak:.2f} FCMLA/cycle (32 independent FCMLAs)",
                  f"{'kernel':<22}{'FCMLA/iter':>11}{'insns/iter':>11}{'FCMLA/cycle':>12}"
                  f"{'of peak':>9}"]
        lines += [f"{name:<22}{fcmlas:>11}{insns:>11}{rate:>12.2f}{ratio:>9.1%}"
                  for name, fcmlas, insns, rate, ratio in rows]
        shares = complex_grid(dtype, cpu, peak, progress=progress)
        values = sorted(shares.values())
        worst = sorted(shares, key=shares.get)[:8]
        lines += [f"every M, N in 1..64 at K = {GRID_K}: mean "
                  f"{sum(values) / len(values):.1%} of the peak, min {values[0]:.1%}; "
                  f">= 90%: {sum(v >= 0.9 for v in values)} sizes",
                  "  worst (MxN): " + ", ".join(f"{m}x{n} {shares[m, n]:.0%}" for m, n in worst)]
        main = rows[0]
        verdict.target(f"A64 {dtype} BRGEMM {main[0]} K loop (llvm-mca {cpu}), % of the "
                       f"FCMLA peak", 100 * main[4], 90)
    return lines


def stored_bytes(body):
    """Bytes written by the stores of a loop body (q/d/s registers, st1 register lists)."""
    sizes = {"q": 16, "d": 8, "s": 4, "4s": 16, "2s": 8}
    total = 0
    for line in body:
        if re.match(r"(str|stp|stur|st1)\b", line):
            operands = line.split("[")[0]
            total += sum(sizes[r] for r in re.findall(r"\b([qds])\d+\b", operands))
            total += sum(sizes[r] for r in re.findall(r"\bv\d+\.(4s|2s)\b", operands))
    return total


def model_peak(arr="4s"):
    """FMLA/cycle of 32 independent vector FMLAs by element (arr 4s or 2d): the model's FP
    pipe throughput."""
    lane = arr[-1]
    body = [f"fmla v{i}.{arr}, v{(i + 1) % 32}.{arr}, v{(i + 2) % 32}.{lane}[0]"
            for i in range(32)]
    return fmla_per_cycle(body)


def innermost_loops(code, containing="fmla"):
    """The bodies of the innermost loops of A64 `code` holding an instruction starting with
    `containing` (see llvm_mca.innermost_loops)."""
    return llvm_mca.innermost_loops(code, "aarch64", containing)


NEON = aarch64.VARIANTS["neon"]


def generate(kind, *params):
    """The A64 code of primitive `kind` with `params` (after the target)."""
    return getattr(aarch64, f"generate_{kind}")(NEON, *params)


def generation_ms(kind, *params):
    """(first generation in a fresh process, later generations) in milliseconds."""
    cold = cold_ms("from einjit.backends import aarch64",
                   f"aarch64.generate_{kind}(aarch64.VARIANTS['neon'], *{params!r})")
    return cold, 1e3 * best_seconds(lambda: generate(kind, *params), 10)


def brgemm_rows(shapes, peak, dtype):
    """(name, FMLA/iter, insns/iter, FMLA/cycle, of peak) of each shape's distinct K loops."""
    rows = []
    for shape in shapes:
        code = generate("brgemm", *shape, dtype)
        seen = set()
        for body in innermost_loops(code):
            fmlas = sum(t.startswith("fmla") for t in body)
            if fmlas in seen:
                continue  # same block shape again (e.g. one loop per column block)
            seen.add(fmlas)
            rate = fmla_per_cycle(body)
            rows.append((f"{shape[0]}x{shape[1]}x{shape[2]} br{shape[3]}", fmlas, len(body) - 1,
                         rate, rate / peak))
    return rows


GRID_SIZES = range(1, 65)
GRID_K = 64


def block_cycles_per_step(pieces, ncols, dtype, k=GRID_K):
    """Predicted cycles of one k step of a C block's steady-state K loop."""
    code, steps = brgemm.k_loop_code(pieces, ncols, k, dtype)
    (body,) = innermost_loops(code)
    return cycles_per_iteration(body) / steps


def grid(dtype, peak, sizes=GRID_SIZES, progress=None):
    """{(m, n): predicted share of the model's peak} at K = GRID_K: the useful FLOPs of C
    (m * n per k step) over the cycles of every C block's steady-state K loop (the C loads and
    stores around it, once per block and batch, are left out) at `peak` FMLA/cycle of full
    vectors. Lanes a block computes beyond M count as lost."""
    lanes = check_dtype(dtype).lanes
    counts = {(m, n): brgemm.block_counts(m, n, dtype) for m in sizes for n in sizes}
    shapes = sorted({shape for blocks in counts.values() for shape in blocks}, key=str)
    steps = llvm_mca.map_parallel(lambda shape: block_cycles_per_step(*shape, dtype), shapes,
                                  progress, f"{dtype}: llvm-mca on block shape")
    cycles = dict(zip(shapes, steps))
    return {size: size[0] * size[1] / (peak * lanes * sum(count * cycles[shape]
                                                          for shape, count in blocks.items()))
            for size, blocks in counts.items()}


def grid_lines(dtype, peak, progress=None):
    """Mean, min, the worst sizes and the mean per M of grid(dtype)."""
    shares = grid(dtype, peak, progress=progress)
    values = sorted(shares.values())
    worst = sorted(shares, key=shares.get)[:10]
    lines = [f"{dtype}, every M, N in 1..64 at K = {GRID_K} ({len(values)} kernels): mean "
             f"{sum(values) / len(values):.1%} of the model's peak, min {values[0]:.1%}; "
             f">= 90%: {sum(v >= 0.9 for v in values)} sizes",
             "  worst (MxN): " + ", ".join(f"{m}x{n} {shares[m, n]:.0%}" for m, n in worst),
             "  mean over N, by M:"]
    means = [sum(shares[m, n] for n in GRID_SIZES) / len(GRID_SIZES) for m in GRID_SIZES]
    for start in range(0, len(means), 16):
        lines.append(f"  M {start + 1:>2}..{start + 16:<2}" +
                     "".join(f"{v:>5.0%}" for v in means[start:start + 16]))
    return lines


def report(verdict=None):
    """The report text (also written to benchmarks/results/aarch64_mca.txt); the targets go
    to `verdict`."""
    verdict = verdict or Verdict()
    peak, peak64 = model_peak(), model_peak("2d")
    rows = brgemm_rows(SHAPES, peak, "float32")
    rows64 = brgemm_rows(SHAPES64, peak64, "float64")
    gen = [(f"brgemm {m}x{n}x{k} br{br}", generation_ms("brgemm", m, n, k, br))
           for m, n, k, br in [(64, 64, 64, 1), (16, 6, 1, 1), (1024, 1024, 2048, 1024)]]
    gen += [(f"brgemm 64x64x64 br1 {dtype}", generation_ms("brgemm", 64, 64, 64, 1, dtype))
            for dtype in ("float64", *tuple(COMPLEX_SHAPES))]
    gen += [(f"unary {op} 2048x2048{' trans' if t else ''}",
             generation_ms("unary", op, 2048, 2048, t))
            for op, t in [("identity", False), ("identity", True), ("sigmoid", True)]]
    gen += [("binary max 2048x2048", generation_ms("binary", "max", 2048, 2048))]

    lines = [f"llvm-mca-16 -mcpu=neoverse-v2: model peak {peak:.2f} FMLA/cycle "
             f"(32 independent FMLAs)", "",
             f"{'kernel':<22}{'FMLA/iter':>10}{'insns/iter':>11}{'FMLA/cycle':>11}{'of peak':>9}"]
    lines += [f"{name:<22}{fmlas:>10}{insns:>11}{rate:>11.2f}{ratio:>9.1%}"
              for name, fmlas, insns, rate, ratio in rows]
    note = ("(FMLAs of any width: the loops of single rows along k ({rows}) issue fewer, "
            "full-width FMLAs plus zips; the grid below counts useful FLOPs)")
    lines.append(note.format(rows="1xN, 2xN, 3xN and the last one or two rows of other M"))
    lines += ["", f"FP64 (8x6 microkernel, fmla .2d by element): model peak {peak64:.2f} "
              f"FMLA/cycle (32 independent .2d FMLAs); target >= 90% on the main microkernel",
              f"{'kernel':<22}{'FMLA/iter':>10}{'insns/iter':>11}{'FMLA/cycle':>11}{'of peak':>9}"]
    lines += [f"{name:<22}{fmlas:>10}{insns:>11}{rate:>11.2f}{ratio:>9.1%}"
              for name, fmlas, insns, rate, ratio in rows64]
    lines.append(note.format(rows="1xN and the last row of odd M"))
    lines += ["", f"Every BRGEMM size: useful FLOPs over the predicted cycles of each C block's "
              f"K loop (the model's peak = {peak:.2f} full-vector FMLA/cycle)"]
    for dtype, dtype_peak in (("float32", peak), ("float64", peak64)):
        lines += grid_lines(dtype, dtype_peak, progress=llvm_mca.terminal_progress)
    lines += complex_lines(verdict, progress=llvm_mca.terminal_progress)
    lines += ["", "element-wise kernels, 2048x2048: their main (most storing) inner loop",
              f"{'kernel':<26}{'insns/iter':>11}{'cycles/iter':>12}{'stored B/cycle':>15}"]
    for kind, params in ELTWISE:
        body = max(innermost_loops(generate(kind, *params), "st"),
                   key=stored_bytes)
        cycles = cycles_per_iteration(body)
        name = f"{kind} {params[0]}" + (" trans" if params[-1] is True else "")
        lines.append(f"{name:<26}{len(body) - 1:>11}{cycles:>12.1f}"
                     f"{stored_bytes(body) / cycles:>15.1f}")
    lines += ["", f"{'generation, CPython on this host (ms)':<38}{'fresh process':>14}{'after':>8}"]
    lines += [f"{name:<38}{cold:>14.2f}{warm:>8.2f}" for name, (cold, warm) in gen]
    lines.append("target: brgemm 64x64x64 under 2 ms (both ISAs)")
    for name, (cold, _) in gen:
        if name.startswith("brgemm 64x64x64 br1"):
            verdict.target(f"A64 generation {name}, fresh process", cold, 2, " ms",
                           at_most=True, digits=2)
    main64 = next((r for r in rows64 if r[0] == "8x6x64 br1"), None)
    if main64 is not None:
        verdict.target("A64 FP64 8x6 microkernel (llvm-mca), % of the model's peak",
                       100 * main64[4], 90)
    text = "\n".join(lines)
    write_result("aarch64_mca.txt", text + "\n")
    return text


def main():
    print(report())


if __name__ == "__main__":
    sys.exit(main())
