"""LLVM's machine-code analyser (llvm-mca) on loops cut out of generated code: the shared tools
of the static throughput sections (aarch64_mca for A64, x86_mca for x86-64).

A loop is cut out of the disassembly (einjit.disasm) as text: the instructions from a
backward branch's target up to the branch, which then jumps to a local label. llvm-mca runs
it ITERATIONS times, and its report's "Total Cycles" over the iterations is the predicted
steady-state cost of one pass.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from einjit.disasm import disassemble

ITERATIONS = 300
LABEL = "loop"

# per ISA: a branch's mnemonic, and its target at the end of the operands (capstone writes
# A64 targets as #imm, small ones in decimal; x86-64 ones as a bare hex offset)
BRANCH = {"aarch64": re.compile(r"(b\.|cbn?z|tbn?z|b )"), "x86_64": re.compile(r"j[a-z]+ ")}
CONDITIONAL = {"aarch64": re.compile(r"(b\.|cbn?z|tbn?z)"), "x86_64": BRANCH["x86_64"]}
TARGET = {"aarch64": re.compile(r"#(-?(?:0x[0-9a-f]+|\d+))$"),
          "x86_64": re.compile(r" (0x[0-9a-f]+)$")}


@dataclass(frozen=True)
class Report:
    """What llvm-mca predicted for a loop body run `iterations` times; `model` names its
    scheduling model by the prefix of its first resource (SKX, ICX, Zn3, Zn4, ...)."""
    iterations: int
    instructions: int
    cycles: int
    model: str

    @property
    def cycles_per_iteration(self) -> float:
        return self.cycles / self.iterations


def parse(text: str) -> Report:
    """The figures of one llvm-mca report (its default text output)."""
    def field(name):
        found = re.search(rf"^{name}:\s+(\d+)", text, re.M)
        if found is None:
            raise ValueError(f"llvm-mca output without a {name!r} line:\n{text[:400]}")
        return int(found.group(1))
    return Report(field("Iterations"), field("Instructions"), field("Total Cycles"),
                  model_name(text))


def model_name(text: str) -> str:
    """The scheduling model of a report: its first resource's prefix (SKXDivider: SKX,
    Zn4AGU0: Zn4), the whole name where it has none, "?" without a resource list."""
    resource = re.search(r"^Resources:\n\[[\d.]+\]\s+-\s+(\S+)", text, re.M)
    if resource is None:
        return "?"
    prefix = re.match(r"[A-Z]{2,}(?=[A-Z][a-z])|[A-Z][a-z]+\d+", resource.group(1))
    return prefix.group(0) if prefix else resource.group(1)


def run(command: list[str], asm_text: str) -> Report:
    """llvm-mca `command` (the tool and its options) on `asm_text`, ITERATIONS times."""
    done = subprocess.run([*command, f"-iterations={ITERATIONS}"], input=asm_text,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed on:\n{asm_text}\n{done.stderr}")
    return parse(done.stdout)


def cycles_per_iteration(command: list[str], body: list[str], header: str = "") -> float:
    """Predicted cycles of one pass through a loop body (one instruction per line, after
    `header`: an assembler directive such as x86's .intel_syntax)."""
    return run(command, header + "\n".join(body) + "\n").cycles_per_iteration


def innermost_loops(code: bytes, isa: str, containing: str) -> list[list[str]]:
    """The bodies (lists of instruction texts, from LABEL: to the branch back to it) of the
    innermost loops of `code` holding an instruction that starts with `containing`.

    A loop is a backward branch to an earlier offset; it is innermost when no other
    conditional branch lies inside it."""
    lines = []
    for line in disassemble(code, isa).splitlines():
        offset, _, text = line.split(None, 2)
        lines.append((int(offset.rstrip(":"), 16), text))
    loops = []
    for offset, text in lines:
        target = TARGET[isa].search(text)
        if not (BRANCH[isa].match(text) and target and int(target.group(1), 0) < offset):
            continue
        start = int(target.group(1), 0)
        body = [t for o, t in lines if start <= o < offset]
        inner = any(CONDITIONAL[isa].match(t) for t in body)
        if not inner and any(t.startswith(containing) for t in body):
            loops.append([f"{LABEL}:", *body, text[:target.start(1)].rstrip("#") + LABEL])
    return loops


def tools() -> list[str]:
    """The llvm-mca programs on the PATH by name, newest LLVM first (llvm-mca-16,
    llvm-mca-14, then a plain llvm-mca that links to none of them: its version unknown)."""
    found = {}          # the program (a plain llvm-mca links to a versioned one) -> name
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        for path in sorted(glob.glob(os.path.join(folder, "llvm-mca*"))):
            version = re.fullmatch(r"llvm-mca(?:-(\d+))?", os.path.basename(path))
            if version and os.access(path, os.X_OK):
                name = (int(version.group(1) or 0), os.path.basename(path))
                program = os.path.realpath(path)
                found[program] = max(found.get(program, name), name)
    return [name for _, name in sorted(found.values(), reverse=True)]


def knows(tool: str, triple: str, cpu: str) -> bool:
    """Whether `tool` has `cpu` for `triple` (an unknown one it only warns about and
    ignores, modelling a generic core instead)."""
    return _knows(shutil.which(tool) or tool, triple, cpu)


@functools.cache
def _knows(program: str, triple: str, cpu: str) -> bool:
    done = subprocess.run([program, f"-mtriple={triple}", f"-mcpu={cpu}", "-iterations=1"],
                          input="nop\n", capture_output=True, text=True)
    return done.returncode == 0 and "not a recognized processor" not in done.stderr


def newest_knowing(triple: str, cpu: str, installed: list[str] | None = None) -> str | None:
    """The newest installed llvm-mca that knows `cpu`, or None."""
    return next((tool for tool in (tools() if installed is None else installed)
                 if knows(tool, triple, cpu)), None)


def map_parallel(function, items: list, progress=None, what: str = "llvm-mca") -> list:
    """[function(item) for item in items], spread over the cores (each llvm-mca is a
    subprocess); `progress` gets a line as each finishes."""
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        jobs = [pool.submit(function, item) for item in items]
        results = []
        for index, job in enumerate(jobs):
            results.append(job.result())
            if progress:
                progress(f"{what} {index + 1}/{len(jobs)}")
    return results


def terminal_progress(line: str) -> None:
    """One progress line on a terminal, overwritten in place (nothing elsewhere)."""
    if sys.stderr.isatty():
        print(f"\r{line}\033[K", end="", file=sys.stderr, flush=True)
