"""Where the benchmarks write their figures.

Every run writes under benchmarks/results/, which git ignores, so running the benchmarks
never changes the checkout. The figures the README quotes live in a committed reference
folder per machine kind, benchmarks/reference/<machine kind>/ (the summary and the einsum
and GEMM pictures of a full run), that only a deliberate `scripts/bench --full
--update-reference` replaces (then review and commit it).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"            # git-ignored: written by every run
REFERENCE = ROOT / "reference"        # committed: <date>-<machine>/ folders
RESULTS_ENV = "EINJIT_BENCH_RESULTS"  # another folder for the results of a run


def results_dir() -> Path:
    """The folder this run writes to: $EINJIT_BENCH_RESULTS, or benchmarks/results/."""
    return Path(os.environ.get(RESULTS_ENV) or RESULTS)


def write_result(name: str, text: str) -> Path:
    """Write one result file into results_dir() and return its path."""
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def machine_name() -> str:
    """This machine's kind for its reference folder: "x86_64-zen4" where einjit knows the
    core, else the architecture and the first words of the CPU's model name."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        from einjit.backends.x86_64 import cpu
        core = cpu.microarch().name
        if core != "generic":
            return f"x86_64-{core}"
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("model name", "Model", "CPU part")):
                    model = line.split(":", 1)[1]
                    break
    except OSError:
        pass
    words = re.sub(r"\(.*?\)|processor|\d+-core|cpu\b|@.*", " ", model.lower())
    slug = "-".join(re.findall(r"[a-z0-9]+", words)[:3])
    return "-".join(filter(None, [platform.machine().lower(), slug]))


# what a reference keeps of a run: its summary and the einsum and GEMM pictures
REFERENCE_FILES = ("summary.txt", "einsum*.png", "x86_gemm_*.png")


def update_reference(results: Path, machine: str, reference_root: Path = REFERENCE) -> Path:
    """Replace reference_root/<machine>/ with the REFERENCE_FILES of a run in `results`
    and return that folder."""
    results = Path(results)
    files = sorted({p for pattern in REFERENCE_FILES for p in results.glob(pattern)
                    if p.is_file()})
    if not (results / "summary.txt").is_file():
        raise FileNotFoundError(f"no summary.txt in {results} to make a reference from")
    target = Path(reference_root) / machine
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in files:
        shutil.copy2(path, target / path.name)
    return target
