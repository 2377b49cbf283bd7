"""Static throughput of the generated x86-64 BRGEMM inner loops on Intel and AMD server cores,
and a check of the model against this host.

Our machines are AMD, so an Intel core's speed is judged with LLVM's machine-code analyser,
as benchmarks.aarch64_mca judges A64: for each core in CPUS the kernels are generated as
einjit generates them there (its Microarch record), each K loop of a C register block is cut
out of the code and handed to llvm-mca for that core, and its predicted FMAs per cycle are
set against the model's peak, measured in the same run on a block of independent FMAs of the
same width and dtype. Both code variants (AVX-512, whose blocks may be zmm or ymm, and AVX2)
and both dtypes; zmm code only for cores with AVX-512. Each core is modelled by the newest
installed llvm-mca that knows it; a core none knows is said so, not modelled.

Printed: the kernels of SHAPES (one row per block shape, a column per core), then every
distinct K loop of the kernels M x GRID_N x GRID_K for M in GRID_M (mean, minimum and the
worst per core). Then this host's core, modelled, against a measurement: the kernel of its
main block (one block, K as long as L1 holds) timed here as a share of the FMA peak measured
in the same run (benchmarks.x86_gemm's timer); a WARNING where the two differ by more than
THRESHOLD points.

    python -m benchmarks.x86_mca        # prints the tables, writes benchmarks/results/
    python -m benchmarks x86_mca        # the same as a section of the main job
"""

from __future__ import annotations

import csv
import io
import re
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, replace

from einjit.backends import resolve_target
from einjit.backends.x86_64 import VARIANTS, cpu, generate_brgemm
from einjit.backends.x86_64.block_registers import BlockRegisters
from einjit.backends.x86_64.blocking import choose
from einjit.backends.x86_64.precision import precision
from einjit.runtime.host import host_isa

from . import llvm_mca
from .harness import write_result
from .x86_gemm import GemmTimer

TRIPLE = "x86_64"
HEADER = ".intel_syntax noprefix\n"         # capstone writes Intel syntax
# llvm-mca's -mcpu -> the einjit core (cpu.MICROARCHS) whose code it models
CPUS = {"skylake-avx512": "skylake-sp", "icelake-server": "icelake-sp",
        "sapphirerapids": "sapphirerapids", "znver3": "zen3", "znver4": "zen4"}
WITHOUT_AVX512 = ("znver3",)
# einjit's host core -> the llvm-mca core that models it (Zen 5: llvm-mca has no znver5 here)
HOST_CPUS = {"skylake-sp": "skylake-avx512", "icelake-sp": "icelake-server",
             "sapphirerapids": "sapphirerapids", "zen3": "znver3", "zen4": "znver4",
             "zen5": "znver4"}
VARIANT_ORDER = ("avx512", "avx2")
DTYPES = ("float32", "float64")
# (m, n, k, batch): the kernels timed on a Sapphire Rapids core for issue-sized BRGEMMs
SHAPES = [(64, 64, 64, 1), (64, 64, 64, 16), (48, 48, 64, 16), (32, 32, 32, 32),
          (25, 25, 64, 16), (16, 16, 64, 32), (128, 64, 256, 4)]
GRID_M, GRID_N, GRID_K = range(1, 65), 64, 64
THRESHOLD = 10                  # points between the model and the measurement on this host
MEASURE_ROUNDS, MEASURE_SECONDS = 10, 0.002
FMA = re.compile(r"vfn?m(add|sub)\d{3}[ps][sd] ")
REGISTER_BITS = {"zmm": 512, "ymm": 256, "xmm": 128}
PEAK_FMAS = 48                  # the peak block: 48 FMAs on 24 (zmm) or 12 chains
WIDTHS = {"avx512": (512, 256), "avx2": (256,)}    # the FMA widths of a variant's code


@dataclass(frozen=True)
class Loop:
    """One K loop: the C register block it computes ("rows x cols", as the plan has it) and
    its body (llvm_mca.innermost_loops)."""
    block: str
    body: tuple[str, ...]

    @property
    def fmas(self) -> int:
        return len(self.fma_registers())

    def fma_registers(self) -> list[tuple[str, str]]:
        """(the register written, the first factor's) of each FMA (a write mask left out)."""
        operands = [line.split(None, 1)[1].split(", ") for line in self.body if FMA.match(line)]
        return [(ops[0].split()[0], ops[1].split()[0]) for ops in operands]

    @property
    def width(self) -> int:
        """The widest vector its FMAs use, in bits."""
        return max(REGISTER_BITS[name] for line in self.body if FMA.match(line)
                   for name in re.findall(r"\b([xyz]mm)\d+", line))

    @property
    def accumulators(self) -> int:
        """The registers its FMAs write."""
        return len({written for written, _ in self.fma_registers()})

    @property
    def factor_uses(self) -> tuple[int, ...]:
        """How many of its FMAs take each register as their first factor (a plain block's
        vectors of A, each once a column), in increasing order."""
        uses = Counter(factor for _, factor in self.fma_registers())
        return tuple(sorted(uses.values()))

    def signature(self) -> tuple:
        """What label_loops matches against a run of the plan (see block_runs)."""
        return self.accumulators, len(self.factor_uses), self.factor_uses, self.a_reach

    @property
    def a_reach(self) -> int:
        """The largest displacement its loads of those factors take (bytes past A's pointer;
        an overlapped or masked tail vector ends at the block's last row)."""
        factors = {factor for _, factor in self.fma_registers()}
        found = [re.search(r"\[[^]]*?(?: ([+-]) (0x[0-9a-f]+|\d+))?\]", line)
                 for line in self.body[1:-1]
                 if len(line.split()) > 1 and line.split()[1].rstrip(",") in factors]
        return max((int(f"{m.group(1)}{m.group(2)}", 0) if m.group(1) else 0
                    for m in found if m), default=0)

    @property
    def shape(self) -> str:
        """Its block with the register width, e.g. "zmm 32x13"."""
        return f"{'xyz'[self.width // 256]}mm {self.block}"


def core_target(variant: str, mca_cpu: str):
    """The Target einjit generates `variant`'s code with on the core llvm-mca calls `mca_cpu`."""
    return replace(VARIANTS[variant], micro=cpu.MICROARCHS[CPUS[mca_cpu]])


def block_runs(target, m: int, n: int, k: int, br: int,
               dtype: str) -> list[tuple[str, tuple]]:
    """("rows x cols", signature) of each run of register blocks of the kernel's plan, in the
    order its code computes them; the signature as Loop.signature has it: accumulators,
    vectors of A, the FMAs of each (a column each, a packed tail one each packed accumulator),
    the byte offset of A's last vector."""
    chosen, panels = choose(m, n, k, br, target, dtype)
    elements = precision(dtype)
    lanes = chosen.lanes(elements.bytes)
    runs = []
    for panel in panels:
        rows = panel.vectors * lanes - (lanes - panel.tail_rows if panel.tail_rows else 0)
        for _, cols in panel.runs():
            # a run narrower than the panel's quads holds fewer (as Microkernel.registers)
            mode = replace(panel.mode, quads=min(panel.mode.quads, cols))
            registers = BlockRegisters(chosen, panel.vectors, cols, panel.tail_rows, mode,
                                       elements)
            own = len(registers.acc[0]) if registers.acc else 0
            uses = [cols] * own + ([len(registers.packed_acc)] if registers.packed_acc else [])
            runs.append((f"{rows}x{cols}", (len(registers.accumulators()), len(registers.a),
                                            tuple(sorted(uses)),
                                            registers.offset(panel.vectors - 1))))
    return runs


def label_loops(bodies: list[list[str]], runs: list[tuple[str, tuple]]) -> list[Loop]:
    """Each loop body with the block of its run: the next run in code order (else an earlier
    one: skewed runs interleave) whose signature is the loop's; failing that, whose
    signature's first three, two, or one entries are ("?" where no run has as many
    accumulators). Dot and paired tails use their registers otherwise than the signature
    counts: they match on fewer entries."""
    loops, position = [], 0
    for body in bodies:
        loop = Loop("?", tuple(body))
        order = [*range(position, len(runs)), *range(position)]
        seen = loop.signature()
        found = next((i for size in (4, 3, 2, 1) for i in order
                      if runs[i][1][:size] == seen[:size]), None)
        if found is not None:
            position = found
            loop = Loop(runs[found][0], loop.body)
        loops.append(loop)
    return loops


def kernel_loops(target, m: int, n: int, k: int, br: int, dtype: str) -> list[Loop]:
    """The distinct K loops of a generated BRGEMM (loops alike but for their registers, such
    as a pipelined run's two register sets, once)."""
    code = generate_brgemm(target, m, n, k, br, dtype=dtype)
    bodies = llvm_mca.innermost_loops(code, "x86_64", "vfmadd")
    seen, loops = set(), []
    for loop in label_loops(bodies, block_runs(target, m, n, k, br, dtype)):
        key = (loop.block, tuple(re.sub(r"\b([xyz]mm|k)\d+\b", r"\1", t) for t in loop.body))
        if key not in seen:
            seen.add(key)
            loops.append(loop)
    return loops


def peak_body(width: int, dtype: str) -> tuple[str, ...]:
    """PEAK_FMAS independent FMAs of `width` bits on 24 (zmm) or 12 accumulators, as
    harness.fma_peak_gflops runs them."""
    name = {512: "zmm", 256: "ymm", 128: "xmm"}[width]
    chains = 24 if width == 512 else 12
    op = "vfmadd231ps" if dtype == "float32" else "vfmadd231pd"
    return tuple(f"{op} {name}{i % chains}, {name}{chains}, {name}{chains + 1}"
                 for i in range(PEAK_FMAS))


class Models:
    """llvm-mca for each core of CPUS: the newest installed one that knows it."""

    def __init__(self, installed: list[str] | None = None):
        self.installed = llvm_mca.tools() if installed is None else installed
        self.tool = {c: llvm_mca.newest_knowing(TRIPLE, c, self.installed) for c in CPUS}
        self.reports: dict[tuple[str, tuple[str, ...]], llvm_mca.Report] = {}

    def command(self, mca_cpu: str) -> list[str]:
        return [self.tool[mca_cpu], f"-mtriple={TRIPLE}", f"-mcpu={mca_cpu}"]

    def known(self) -> list[str]:
        return [c for c in CPUS if self.tool[c]]

    def run_all(self, jobs: set[tuple[str, tuple[str, ...]]], progress=None) -> None:
        """llvm-mca on each (cpu, body) not yet run, in parallel."""
        todo = sorted(job for job in jobs if job not in self.reports)

        def one(job):
            mca_cpu, body = job
            return llvm_mca.run(self.command(mca_cpu), HEADER + "\n".join(body) + "\n")
        self.reports.update(zip(todo, llvm_mca.map_parallel(one, todo, progress)))

    def fma_per_cycle(self, mca_cpu: str, body: tuple[str, ...]) -> float:
        return Loop("", body).fmas / self.reports[mca_cpu, body].cycles_per_iteration

    def peak(self, mca_cpu: str, width: int, dtype: str) -> float:
        return self.fma_per_cycle(mca_cpu, peak_body(width, dtype))

    def share(self, mca_cpu: str, loops: list[Loop], dtype: str) -> float:
        """The loops' FMAs over their predicted cycles (each run once), as a share of the peak
        at their width."""
        cycles = sum(self.reports[mca_cpu, loop.body].cycles_per_iteration for loop in loops)
        peak = self.peak(mca_cpu, max(loop.width for loop in loops), dtype)
        return sum(loop.fmas for loop in loops) / cycles / peak

    def model(self, mca_cpu: str) -> str:
        """The scheduling model llvm-mca used for the core (any of its reports names it)."""
        found = [r.model for (c, _), r in self.reports.items() if c == mca_cpu]
        return found[0] if found else "?"


def configurations(models: Models) -> list[tuple[str, str, list[str]]]:
    """(variant, dtype, the llvm-mca cores modelling it) of each table."""
    return [(variant, dtype, [c for c in models.known()
                              if variant != "avx512" or c not in WITHOUT_AVX512])
            for variant in VARIANT_ORDER for dtype in DTYPES]


def main_block(target, dtype: str) -> tuple[int, int, int]:
    """(m, n, k) of a kernel of one main register block (that of M = N = GRID_N) whose A, B
    and C fill at most half of the core's L1: K as long as that allows, a multiple of 16."""
    chosen, panels = choose(GRID_N, GRID_N, GRID_K, 1, target, dtype)
    size = precision(dtype).bytes
    rows, cols = panels[0].vectors * chosen.lanes(size), panels[0].cols
    budget = target.micro.l1_bytes // 2 - rows * cols * size
    return rows, cols, max(16, budget // ((rows + cols) * size) // 16 * 16)


def measured_percent(variant: str, dtype: str, m: int, n: int, k: int,
                     rounds: int = MEASURE_ROUNDS) -> float:
    """This host's GFLOPS for the kernel as a % of the FMA peak measured in the same rounds:
    the best kernel over the best peak, each round timing both for about MEASURE_SECONDS a
    batch (benchmarks.x86_gemm's timer), short and alike: on a shared machine another
    process cuts a longer batch more often, which would favour the shorter one."""
    timer = GemmTimer(variant, dtype)
    peaks, kernels = [], []
    for _ in range(rounds):
        peaks.append(timer.peak(seconds=MEASURE_SECONDS))
        kernels.append(timer.gflops(m, n, k, 1, seconds=MEASURE_SECONDS, repetitions=7))
    return 100 * max(kernels) / max(peaks)


def disagreement_lines(rows: list[tuple[str, float, float]],
                       threshold: float = THRESHOLD) -> list[str]:
    """A line per (kernel, model %, measured %): a WARNING where they differ by more than
    `threshold` points."""
    lines = []
    for name, model, measured in rows:
        gap = measured - model
        line = f"{name}: model {model:.1f}%, measured {measured:.1f}% ({gap:+.1f} points)"
        lines.append(f"  WARNING {line}: the model and this host disagree by more than "
                     f"{threshold} points" if abs(gap) > threshold else f"  {line}")
    return lines


def host_cpu() -> str | None:
    """The llvm-mca core modelling this host's core (einjit's record of it), or None."""
    if host_isa() != "x86_64":
        return None
    return HOST_CPUS.get(resolve_target("x86_64").micro.name)


def host_variants() -> list[str]:
    best = cpu.variant()
    return [best] + (["avx2"] if best != "avx2" else [])


def host_lines(models: Models, measure=measured_percent, progress=None) -> list[str]:
    """This host's core: the model of each main-block kernel against its measurement."""
    mca_cpu = host_cpu()
    core = resolve_target("x86_64").micro.name if host_isa() == "x86_64" else host_isa()
    if mca_cpu is None:
        return [f"this host ({core}): no llvm-mca core models it; nothing compared"]
    if not models.tool[mca_cpu]:
        return [f"this host ({core} -> {mca_cpu}): no installed llvm-mca knows {mca_cpu}; "
                f"nothing compared"]
    kernels = []
    for variant in host_variants():
        for dtype in DTYPES:
            m, n, k = main_block(VARIANTS[variant], dtype)
            kernels.append((variant, dtype, (m, n, k),
                            kernel_loops(VARIANTS[variant], m, n, k, 1, dtype)))
    models.run_all({(mca_cpu, loop.body) for *_, loops in kernels for loop in loops}
                   | {(mca_cpu, peak_body(w, d)) for v in host_variants() for w in WIDTHS[v]
                      for d in DTYPES},
                   progress)
    rows = []
    for variant, dtype, (m, n, k), loops in kernels:
        blocks = ", ".join(sorted({loop.shape for loop in loops}))
        rows.append((f"{variant} {dtype} {m}x{n}x{k} ({blocks})",
                     100 * models.share(mca_cpu, loops, dtype), measure(variant, dtype, m, n, k)))
    return [f"this host ({core} -> {mca_cpu}, {models.tool[mca_cpu]}): each main block's "
            f"kernel in L1, modelled (its K loop) and measured here (the best of "
            f"{MEASURE_ROUNDS} rounds against the best FMA peak of the same rounds)",
            *disagreement_lines(rows)]


def shape_name(m, n, k, br):
    return f"{m}x{n}x{k} br{br}"


def table_lines(models: Models, variant: str, dtype: str, cpus: list[str],
                shape_loops: dict) -> list[str]:
    """SHAPES: a row per kernel and block shape, a column per core (the blocks of the code
    generated for it): the share of the peak of the block's loops together, and the FMAs of
    one iteration of its first."""
    lines = [f"{'kernel':<17}{'block':<12}" + "".join(f"{c:>16}" for c in cpus)]
    for shape in SHAPES:
        per_cpu = {c: shape_loops[variant, dtype, c][shape] for c in cpus}
        blocks = list(dict.fromkeys(loop.shape for c in cpus for loop in per_cpu[c]))
        for index, block in enumerate(blocks):
            cells = []
            for c in cpus:
                loops = [loop for loop in per_cpu[c] if loop.shape == block]
                cells.append(f"{models.share(c, loops, dtype):.1%} ({loops[0].fmas})"
                             if loops else "-")
            name = shape_name(*shape) if index == 0 else ""
            lines.append(f"{name:<17}{block:<12}" + "".join(f"{cell:>16}" for cell in cells))
    return lines


def grid_lines(models: Models, dtype: str, cpus: list[str], grid: dict) -> list[str]:
    """Every distinct K loop of the grid's kernels, per core: mean, minimum, worst."""
    lines = []
    for c in cpus:
        shares = sorted((models.share(c, [loop], dtype), m, loop.shape) for m, loop in grid[c])
        values = [s for s, _, _ in shares]
        worst = ", ".join(f"M={m} {shape} {s:.0%}" for s, m, shape in shares[:3])
        lines.append(f"  {c:<15}{len(values):>3} loops: mean {statistics.mean(values):.1%}, "
                     f"min {values[0]:.1%}, >= 90%: {sum(v >= 0.9 for v in values)}; worst: "
                     f"{worst}")
    return lines


def csv_rows(models: Models, variant, dtype, mca_cpu, kind, kernel, loops):
    for loop in loops:
        report = models.reports[mca_cpu, loop.body]
        yield (variant, dtype, mca_cpu, models.tool[mca_cpu], report.model, kind, kernel,
               loop.shape, loop.fmas, len(loop.body) - 2,
               f"{report.cycles_per_iteration:.2f}",
               f"{100 * models.share(mca_cpu, [loop], dtype):.1f}")


def report(models: Models | None = None, measure=measured_percent, progress=None) -> str:
    """The report text (also written to benchmarks/results/x86_mca.txt, every loop to
    x86_mca.csv)."""
    models = models or Models()
    progress = progress or llvm_mca.terminal_progress
    if not models.installed:
        text = "x86-64 llvm-mca: no llvm-mca is installed (Debian: apt-get install llvm-16)"
        write_result("x86_mca.txt", text + "\n")
        return text
    lines = ["llvm-mca of each core (the newest installed that knows it; model: its "
             "scheduling tables):"]
    unknown = [c for c in CPUS if not models.tool[c]]
    for tool in models.installed:
        known = [c for c in CPUS if llvm_mca.knows(tool, TRIPLE, c)]
        lines.append(f"  {tool} knows {', '.join(known) or 'none of them'}"
                     + (f"; not {', '.join(c for c in CPUS if c not in known)}"
                        if len(known) < len(CPUS) else ""))
    if unknown:
        lines.append(f"  unknown to every installed llvm-mca, not modelled: {', '.join(unknown)}")
    configs = configurations(models)
    shape_loops, grids, jobs = {}, {}, set()
    for variant, dtype, cpus in configs:
        for c in cpus:
            target = core_target(variant, c)
            shape_loops[variant, dtype, c] = {
                shape: kernel_loops(target, *shape, dtype) for shape in SHAPES}
            grid, seen = [], set()
            for m in GRID_M:
                for loop in kernel_loops(target, m, GRID_N, GRID_K, 1, dtype):
                    if loop.body not in seen:
                        seen.add(loop.body)
                        grid.append((m, loop))
            grids[variant, dtype, c] = grid
            progress(f"generated {variant} {dtype} for {c}")
            jobs |= {(c, loop.body) for loops in shape_loops[variant, dtype, c].values()
                     for loop in loops} | {(c, loop.body) for _, loop in grid}
            jobs |= {(c, peak_body(width, dtype)) for width in WIDTHS[variant]}
    models.run_all(jobs, progress)
    if models.known():
        lines.append("  " + ", ".join(f"{c}: {models.tool[c]} ({models.model(c)})"
                                      for c in models.known()))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(("variant", "dtype", "cpu", "llvm_mca", "model", "kind", "kernel", "block",
                     "fmas_per_iter", "insns_per_iter", "cycles_per_iter", "percent_of_peak"))
    for variant, dtype, cpus in configs:
        if not cpus:
            continue
        peaks = ", ".join(f"{c} " + "/".join(f"{models.peak(c, width, dtype):.2f}"
                                             for width in WIDTHS[variant]) for c in cpus)
        widths = "/".join(f"{'xyz'[width // 256]}mm" for width in WIDTHS[variant])
        lines += ["", f"{variant} {dtype}: % of the model's FMA peak (FMAs an iteration); "
                  f"peak {widths} FMA/cycle: {peaks}"]
        lines += table_lines(models, variant, dtype, cpus, shape_loops)
        lines.append(f"every distinct K loop of M x {GRID_N} x {GRID_K}, M in "
                     f"{GRID_M.start}..{GRID_M.stop - 1}:")
        lines += grid_lines(models, dtype, cpus, {c: grids[variant, dtype, c] for c in cpus})
        for c in cpus:
            for shape, loops in shape_loops[variant, dtype, c].items():
                writer.writerows(csv_rows(models, variant, dtype, c, "shape", shape_name(*shape),
                                          loops))
            for m, loop in grids[variant, dtype, c]:
                writer.writerows(csv_rows(models, variant, dtype, c, "grid",
                                          shape_name(m, GRID_N, GRID_K, 1), [loop]))
    lines += [""] + host_lines(models, measure, progress)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    text = "\n".join(lines)
    write_result("x86_mca.txt", text + "\n")
    write_result("x86_mca.csv", out.getvalue())
    return text


def main():
    print(report())


if __name__ == "__main__":
    sys.exit(main())
