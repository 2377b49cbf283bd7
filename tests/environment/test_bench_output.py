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


def test_update_reference_replaces_the_machine_kinds_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(output.RESULTS_ENV, str(tmp_path / "results"))
    output.write_result("summary.txt", "total time 1 s\n")
    for name in ("table.csv", "einsum.png", "einsum_float64.png", "x86_gemm_avx2.png",
                 "x86_eltwise.png", "einsum.svg"):
        output.write_result(name, "data\n")
    root = tmp_path / "reference"
    (root / "otherbox").mkdir(parents=True)                 # another kind's folder stays
    (root / "otherbox" / "summary.txt").write_text("other\n")
    reference = output.update_reference(output.results_dir(), "testbox", reference_root=root)
    assert reference == root / "testbox"
    assert sorted(p.name for p in reference.iterdir()) == [
        "einsum.png", "einsum_float64.png", "summary.txt", "x86_gemm_avx2.png"]
    assert (reference / "summary.txt").read_text() == "total time 1 s\n"
    (reference / "stale.png").write_text("from an earlier run\n")
    (output.results_dir() / "einsum_float64.png").unlink()  # a later run replaces it whole
    output.update_reference(output.results_dir(), "testbox", reference_root=root)
    assert sorted(p.name for p in reference.iterdir()) == [
        "einsum.png", "summary.txt", "x86_gemm_avx2.png"]
    assert sorted(p.name for p in root.iterdir()) == ["otherbox", "testbox"]
    assert (root / "otherbox" / "summary.txt").read_text() == "other\n"


def test_update_reference_needs_a_summary(tmp_path):
    (tmp_path / "einsum.png").write_text("data\n")
    with pytest.raises(FileNotFoundError, match="no summary.txt"):
        output.update_reference(tmp_path, "testbox", reference_root=tmp_path / "reference")
    assert not (tmp_path / "reference").exists()


def test_the_committed_reference_is_one_summary_per_machine_kind():
    """benchmarks/reference/: a README and, per machine kind, a summary and pictures only."""
    root = output.REFERENCE
    kinds = sorted(p for p in root.iterdir() if p.is_dir())
    assert kinds and sorted(p.name for p in root.iterdir() if p.is_file()) == ["README.md"]
    for kind in kinds:
        assert re.fullmatch(r"(x86_64|aarch64)-[a-z0-9-]+", kind.name), kind.name
        names = sorted(p.name for p in kind.iterdir())
        assert "summary.txt" in names, kind
        assert all(p.is_file() for p in kind.iterdir()), kind
        assert {n for n in names if n != "summary.txt"} <= {
            n for n in names if re.fullmatch(r"(einsum(_float64)?|x86_gemm_\w+)\.png", n)}, names


def test_machine_name_names_the_core_on_x86(monkeypatch):
    if output.platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the core's name is read on x86-64 hosts")
    monkeypatch.setenv("EINJIT_X86_MICROARCH", "zen3")
    assert output.machine_name() == "x86_64-zen3"


def test_one_generation_time_target():
    """Every generation-time target the benchmarks print or state is the same."""
    text = "\n".join(p.read_text() for p in (REPO / "benchmarks").glob("*.py"))
    targets = set(re.findall(r"target[^\n]*?(?:under|<)\s*(\d+(?:\.\d+)?)\s*ms", text))
    generation = set(re.findall(r"generation[^\n]*?(?:under|<)\s*(\d+(?:\.\d+)?)\s*ms", text))
    assert targets | generation == {"2"}, targets | generation
