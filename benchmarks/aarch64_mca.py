"""Static throughput of the generated A64 BRGEMM inner loops (FP32 and FP64), and kernel
generation times.

Our machines only emulate AArch64, so A64 speed is judged with LLVM's machine-code analyser:
each innermost loop of a generated BRGEMM (the K loop of one C block shape) is handed to
`llvm-mca-16 -mcpu=neoverse-v2`, and its predicted FMLA per cycle is compared with the
model's peak, measured in the same run on a block of independent FMLAs of the same
arrangement (4s for FP32, 2d for FP64: half the FLOPs per instruction, the same FMLA rate).

    python -m benchmarks.aarch64_mca        # prints a table, writes benchmarks/results/

LLVM 16 models neoverse-v2 with its Neoverse N2 scheduling tables (two 128-bit FP pipes),
so the model's peak is about 2 FMLA/cycle; the real V2 has four pipes.
"""

import re
import subprocess
import sys

from einjit.backends import aarch64
from einjit.disasm import disassemble

from .harness import best_seconds, cold_ms, write_result

MCA = ["llvm-mca-16", "-mtriple=aarch64", "-mcpu=neoverse-v2", "-iterations=300"]

# (m, n, k, batch): the main 16x6 microkernel, then every kind of remainder block.
SHAPES = [(64, 64, 64, 1), (64, 60, 256, 16), (12, 6, 64, 1), (8, 6, 64, 1), (4, 6, 64, 1),
          (3, 6, 64, 1), (2, 6, 64, 1), (1, 6, 64, 1), (16, 5, 64, 1), (16, 4, 64, 1),
          (16, 3, 64, 1), (16, 2, 64, 1), (16, 1, 64, 1), (31, 11, 64, 1), (1, 1, 64, 1)]
# FP64: the main 8x6 microkernel, then its remainder blocks (rows 6, 4, 2 and an odd one).
SHAPES64 = [(64, 64, 64, 1), (64, 60, 256, 16), (8, 6, 64, 1), (7, 6, 64, 1), (6, 6, 64, 1),
            (4, 6, 64, 1), (2, 6, 64, 1), (1, 6, 64, 1), (8, 5, 64, 1), (8, 3, 64, 1),
            (8, 1, 64, 1), (31, 11, 64, 1), (1, 1, 64, 1)]


ELTWISE = [("unary", ("identity", 2048, 2048, False)), ("unary", ("relu", 2048, 2048, False)),
           ("unary", ("sigmoid", 2048, 2048, False)), ("unary", ("identity", 2048, 2048, True)),
           ("unary", ("relu", 2048, 2048, True)), ("unary", ("sigmoid", 2048, 2048, True)),
           ("binary", ("add", 2048, 2048)), ("binary", ("max", 2048, 2048))]


def mca(asm_text):
    """(instructions, total cycles) predicted by llvm-mca for the given loop body."""
    out = subprocess.run(MCA, input=asm_text, capture_output=True, text=True, check=True).stdout
    instructions = int(re.search(r"^Instructions:\s+(\d+)", out, re.M).group(1))
    cycles = int(re.search(r"^Total Cycles:\s+(\d+)", out, re.M).group(1))
    return instructions, cycles


def cycles_per_iteration(body):
    """Predicted cycles of one pass through a loop body (one instruction per line)."""
    iterations = int(MCA[-1].split("=")[1])
    _, cycles = mca("\n".join(body) + "\n")
    return cycles / iterations


def fmla_per_cycle(body):
    return sum(line.startswith("fmla") for line in body) / cycles_per_iteration(body)


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
    """The bodies (lists of instruction texts) of the innermost loops containing an
    instruction starting with `containing`.

    A loop is a backward branch to an earlier offset; it is innermost when no other backward
    branch lies inside it. Branch targets are replaced by a local label for llvm-mca.
    """
    lines = []
    for line in disassemble(code, "aarch64").splitlines():
        offset, _, text = line.split(None, 2)
        lines.append((int(offset.rstrip(":"), 16), text))
    loops = []
    for index, (offset, text) in enumerate(lines):
        target = re.search(r"#(-?0x[0-9a-f]+)$", text)
        is_branch = re.match(r"(b\.|cbn?z|tbn?z|b )", text)
        if not (is_branch and target and int(target.group(1), 16) < offset):
            continue
        start = int(target.group(1), 16)
        body = [t for o, t in lines if start <= o < offset]
        inner = any(re.match(r"(b\.|cbn?z|tbn?z)", t) for t in body)
        if not inner and any(t.startswith(containing) for t in body):
            loops.append(body + [re.sub(r"#-?0x[0-9a-f]+$", "1b", text)])
    return [["1:"] + body for body in loops]


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


def report():
    """The report text (also written to benchmarks/results/aarch64_mca.txt)."""
    peak, peak64 = model_peak(), model_peak("2d")
    rows = brgemm_rows(SHAPES, peak, "float32")
    rows64 = brgemm_rows(SHAPES64, peak64, "float64")
    gen = [(f"brgemm {m}x{n}x{k} br{br}", generation_ms("brgemm", m, n, k, br))
           for m, n, k, br in [(64, 64, 64, 1), (16, 6, 1, 1), (1024, 1024, 2048, 1024)]]
    gen += [("brgemm 64x64x64 br1 float64", generation_ms("brgemm", 64, 64, 64, 1, "float64"))]
    gen += [(f"unary {op} 2048x2048{' trans' if t else ''}",
             generation_ms("unary", op, 2048, 2048, t))
            for op, t in [("identity", False), ("identity", True), ("sigmoid", True)]]
    gen += [("binary max 2048x2048", generation_ms("binary", "max", 2048, 2048))]

    lines = [f"llvm-mca-16 -mcpu=neoverse-v2: model peak {peak:.2f} FMLA/cycle "
             f"(32 independent FMLAs)", "",
             f"{'kernel':<22}{'FMLA/iter':>10}{'insns/iter':>11}{'FMLA/cycle':>11}{'of peak':>9}"]
    lines += [f"{name:<22}{fmlas:>10}{insns:>11}{rate:>11.2f}{ratio:>9.1%}"
              for name, fmlas, insns, rate, ratio in rows]
    lines += ["", f"FP64 (8x6 microkernel, fmla .2d by element): model peak {peak64:.2f} "
              f"FMLA/cycle (32 independent .2d FMLAs); target >= 90% on the main microkernel",
              f"{'kernel':<22}{'FMLA/iter':>10}{'insns/iter':>11}{'FMLA/cycle':>11}{'of peak':>9}"]
    lines += [f"{name:<22}{fmlas:>10}{insns:>11}{rate:>11.2f}{ratio:>9.1%}"
              for name, fmlas, insns, rate, ratio in rows64]
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
    text = "\n".join(lines)
    write_result("aarch64_mca.txt", text + "\n")
    return text


def main():
    print(report())


if __name__ == "__main__":
    sys.exit(main())
