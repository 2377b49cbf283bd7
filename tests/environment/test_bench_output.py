"""The benchmarks leave the checkout clean: a run writes only under the git-ignored
benchmarks/results/; the committed reference changes only through --update-reference."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import output

REPO = Path(__file__).resolve().parents[2]


def _git(*args):
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


needs_git = pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(),
    reason="needs a git checkout of the project")


@needs_git
def test_a_run_writes_only_ignored_files(monkeypatch):
    monkeypatch.delenv(output.RESULTS_ENV, raising=False)
    path = output.write_result("test-bench-output.txt", "written by a test\n")
    try:
        assert path.parent == output.RESULTS
        status = _git("status", "--porcelain", "--untracked-files=all", "--", str(path))
        assert status.returncode == 0 and status.stdout == "", status.stdout
        assert _git("check-ignore", "-q", str(path)).returncode == 0
    finally:
        path.unlink()


@needs_git
def test_no_result_file_is_tracked():
    tracked = _git("ls-files", "--", "benchmarks/results").stdout.split()
    assert tracked == []
    references = _git("ls-files", "--", "benchmarks/reference").stdout.split()
    assert any(name.endswith("/summary.txt") for name in references)


def test_update_reference_copies_a_run(tmp_path, monkeypatch):
    monkeypatch.setenv(output.RESULTS_ENV, str(tmp_path / "results"))
    output.write_result("summary.txt", "total time 1 s\n")
    output.write_result("table.csv", "m,n\n1,2\n")
    reference = output.update_reference(output.results_dir(), "2026-01-02", "testbox",
                                        reference_root=tmp_path / "reference")
    assert reference == tmp_path / "reference" / "2026-01-02-testbox"
    assert sorted(p.name for p in reference.iterdir()) == ["summary.txt", "table.csv"]
    assert (reference / "summary.txt").read_text() == "total time 1 s\n"
    (output.results_dir() / "table.csv").unlink()           # a later run replaces it whole
    output.update_reference(output.results_dir(), "2026-01-02", "testbox",
                            reference_root=tmp_path / "reference")
    assert sorted(p.name for p in reference.iterdir()) == ["summary.txt"]


def test_one_generation_time_target():
    """Every generation-time target the benchmarks print or state is the same."""
    text = "\n".join(p.read_text() for p in (REPO / "benchmarks").glob("*.py"))
    targets = set(re.findall(r"target[^\n]*?(?:under|<)\s*(\d+(?:\.\d+)?)\s*ms", text))
    generation = set(re.findall(r"generation[^\n]*?(?:under|<)\s*(\d+(?:\.\d+)?)\s*ms", text))
    assert targets | generation == {"2"}, targets | generation
