"""Where the benchmarks write their figures.

Every run writes under benchmarks/results/, which git ignores, so running the benchmarks
never changes the checkout. The figures the README quotes live in a committed, dated
reference folder, benchmarks/reference/<date>-<machine>/, that only a deliberate
`scripts/bench --update-reference` writes (then review and commit it).
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
    """A short name of this machine for reference folders, e.g. "x86_64-amd-epyc"."""
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


def update_reference(results: Path, date: str, machine: str,
                     reference_root: Path = REFERENCE) -> Path:
    """Copy the result files of a run into reference_root/<date>-<machine>/ (replacing an
    older copy of the same name) and return that folder."""
    files = sorted(p for p in Path(results).iterdir() if p.is_file())
    if not files:
        raise FileNotFoundError(f"no result files in {results} to make a reference from")
    target = Path(reference_root) / f"{date}-{machine}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in files:
        shutil.copy2(path, target / path.name)
    return target
