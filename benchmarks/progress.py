"""A progress bar for long benchmark loops, naming the case being measured.

    with progress_bar(total, "GEMM avx512") as bar:
        for case in cases:
            bar.step(f"{m}x{n}x{k}")      # before measuring it
            ...

tqdm draws it on stderr when installed (the "plots" extra that scripts/bench installs) and
stderr is a terminal or EINJIT_BENCH_PROGRESS=1; otherwise nothing is drawn (the benchmarks'
own lines still report each section). Lines printed meanwhile go through bar.write so they
do not tear the bar.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

try:
    from tqdm import tqdm
except ImportError:     # an optional extra: no bar then
    tqdm = None


class _Bar:
    def __init__(self, total: int, description: str, enabled: bool | None):
        if enabled is None:
            enabled = sys.stderr.isatty() or os.environ.get("EINJIT_BENCH_PROGRESS") == "1"
        self._bar = tqdm(total=total, desc=description, unit="case", leave=False,
                         dynamic_ncols=True, file=sys.stderr) \
            if enabled and tqdm is not None else None
        self.count = 0

    def step(self, case: str) -> None:
        """One case started: advance the bar and show its name."""
        self.count += 1
        if self._bar is not None:
            self._bar.set_postfix_str(case, refresh=False)
            self._bar.update(1)

    def write(self, line: str, fallback: Callable[[str], None] | None = None) -> None:
        """Print `line` above the bar; with no bar drawn, hand it to `fallback` (or print)."""
        if self._bar is not None:
            self._bar.write(line)
        elif fallback is not None:
            fallback(line)
        else:
            print(line, flush=True)

    def __enter__(self) -> "_Bar":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()


def progress_bar(total: int, description: str, enabled: bool | None = None) -> _Bar:
    """A bar over `total` cases (see the module docstring); enabled=None decides by stderr."""
    return _Bar(total, description, enabled)
