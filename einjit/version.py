"""einjit.__version__: the installed distribution's version, else (a source checkout run
without installing) the version its pyproject.toml gives."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

UNKNOWN = "0+unknown"


def pyproject_version(path: Path) -> str | None:
    """The [project] table's version in the pyproject.toml at `path` (None if absent)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = table and re.search(r'^version\s*=\s*["\']([^"\']+)["\']', table.group(1), re.M)
    return found.group(1) if found else None


def einjit_version() -> str:
    try:
        return metadata.version("einjit")
    except metadata.PackageNotFoundError:
        pass
    return pyproject_version(Path(__file__).resolve().parents[1] / "pyproject.toml") or UNKNOWN
