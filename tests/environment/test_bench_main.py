"""The main job (python -m benchmarks): what the default run and --full measure, each table
printed once, the closing VERDICT, and an exit status of 1 only for a wrong result. The
sections are stand-ins here: no benchmark runs."""

import pytest

import benchmarks.__main__ as job
from benchmarks import output
from benchmarks.verdict import WrongResult


class Calls:
    """Stand-ins for every section, recording how each was asked to run."""

    def __init__(self, monkeypatch, wrong_in=None, slow=False):
        self.seen = {}
        self.wrong_in, self.slow = wrong_in, slow
        monkeypatch.setattr(job, "host_isa", lambda: "x86_64")
        monkeypatch.setattr(job.cpu, "variant", lambda: "avx512")
        monkeypatch.setattr(job.x86_gemm, "run", self.gemm)
        monkeypatch.setattr(job.x86_eltwise, "run", self.eltwise)
        monkeypatch.setattr(job.aarch64_mca, "report", self.mca)
        monkeypatch.setattr(job.x86_mca, "report", self.x86_mca)
        monkeypatch.setattr(job.tensor_operation, "run", self.tensorop)
        monkeypatch.setattr(job.einsum, "run", self.einsum)
        monkeypatch.setattr(job.matmul, "run", self.matmul)
        monkeypatch.setattr(job.dask_einsum, "run", self.dask)
        monkeypatch.setattr(job.slicing, "run", self.slicing)
        monkeypatch.setattr(job, "_have_dask", lambda: True)
        monkeypatch.setattr(job, "_plots", lambda: None)

    def _table(self, section, verdict, csv="a,b\n1,2\n"):
        if self.wrong_in == section:
            raise WrongResult(f"{section}: einjit's result differs from numpy's")
        verdict.target(f"{section} figure", 50 if self.slow else 95, 90)
        return [f"TABLE-LINE {section}"], csv

    def gemm(self, variant, sizes, k_values, verdict=None, **options):
        self.seen.setdefault("gemm", []).append((variant, tuple(sizes)))
        return self._table(f"gemm {variant}", verdict)

    def eltwise(self, variants, verdict=None, **options):
        self.seen["eltwise"] = list(variants)
        return self._table("eltwise", verdict)

    def mca(self, verdict=None):
        self.seen["mca"] = True
        return "\n".join(self._table("mca", verdict)[0])

    def x86_mca(self):
        self.seen["x86_mca"] = True
        return "TABLE-LINE x86_mca"

    def tensorop(self, quick, seeds_only, verdict):
        self.seen["tensorop"] = (quick, seeds_only)
        return self._table("tensorop", verdict)

    def einsum(self, quick, progress=print, dtype="float32", verdict=None, peer_windows=2):
        self.seen.setdefault("einsum", []).append((quick, dtype, peer_windows))
        progress(f"  einsum {dtype}: 1/1 a case (0 s)")
        return self._table(f"einsum {dtype}", verdict)


    def matmul(self, dtype, shapes, verdict=None, **options):
        self.seen.setdefault("matmul", []).append((dtype, len(shapes)))
        return self._table(f"matmul {dtype}", verdict)

    def dask(self, quick, verdict=None):
        self.seen["dask"] = quick
        return self._table("dask", verdict)

    def slicing(self, progress=print, verdict=None):
        self.seen["slicing"] = True
        return self._table("slicing", verdict)


def _run(tmp_path, *argv):
    return job.main([*argv, "--results", str(tmp_path)])


def test_the_default_run_is_representative(tmp_path, monkeypatch, capsys):
    calls = Calls(monkeypatch)
    assert _run(tmp_path) == 0
    assert calls.seen == {
        "gemm": [("avx512", job.x86_gemm.HEADLINE_SIZES)],
        "eltwise": ["avx512"],
        "tensorop": (False, True),                  # the seeds' configurations alone
        "einsum": [(False, "float32", 1)],         # the peers timed in one window
        "dask": False,
        "slicing": True,
    }
    assert "mca" not in calls.seen and "matmul" not in calls.seen
    assert "x86_mca" not in calls.seen
    out = capsys.readouterr().out
    assert out.startswith("einjit benchmarks (default run): gemm, eltwise, tensorop, einsum, "
                          "dask")


def test_full_runs_everything(tmp_path, monkeypatch, capsys):
    calls = Calls(monkeypatch)
    assert _run(tmp_path, "--full") == 0
    assert calls.seen == {
        "gemm": [("avx512", tuple(range(1, 65))), ("avx2", tuple(range(1, 65)))],
        "eltwise": ["avx512", "avx2"],
        "mca": True,
        "x86_mca": True,
        "tensorop": (False, False),
        "einsum": [(False, "float32", 2), (False, "float64", 2)],
        "matmul": [("float32", len(job.matmul.grid())), ("float64", len(job.matmul.grid()))],
        "dask": False,
        "slicing": True,
    }
    summary = (tmp_path / "summary.txt").read_text()
    assert "(--full run)" in summary and "== VERDICT" in summary


def test_named_sections_and_dtype(tmp_path, monkeypatch):
    calls = Calls(monkeypatch)
    assert _run(tmp_path, "einsum", "--dtype", "float64", "--quick") == 0
    assert calls.seen == {"einsum": [(True, "float64", 1)]}
    assert (tmp_path / "summary-einsum.txt").exists()
    assert not (tmp_path / "summary.txt").exists()


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_a_complex_dtype_runs_the_einsum_section_alone(tmp_path, monkeypatch, dtype):
    calls = Calls(monkeypatch)
    assert _run(tmp_path, "einsum", "matmul", "--dtype", dtype, "--quick") == 0
    assert calls.seen == {"einsum": [(True, dtype, 1)]}
    assert (tmp_path / f"einsum_{dtype}.csv").exists()


def test_each_table_is_printed_once_and_the_verdict_closes_the_run(tmp_path, monkeypatch,
                                                                     capsys):
    Calls(monkeypatch, slow=True)
    assert _run(tmp_path, "--full") == 0                # slow is reported, not fatal
    out = capsys.readouterr().out
    for section in ("gemm avx512", "gemm avx2", "eltwise", "mca", "tensorop",
                    "einsum float32", "einsum float64", "matmul float32", "matmul float64",
                    "dask", "slicing"):
        assert out.count(f"TABLE-LINE {section}\n") == 1, section
        assert f"  MISSED {section} figure: 50.0% (target >= 90%)" in out
    assert out.count("TABLE-LINE x86_mca\n") == 1          # it states no target
    verdict = out[out.rindex("== VERDICT"):].splitlines()
    assert verdict[1] == ("0 of 11 targets met, 11 missed; every result checked against numpy "
                          "is right")
    assert verdict[-1].startswith("total time") and len(verdict) == 2 + 11 + 1
    assert out.count("einsum float64: 1/1 a case") == 1


def test_a_wrong_result_and_only_that_exits_1(tmp_path, monkeypatch, capsys):
    Calls(monkeypatch, wrong_in="tensorop")
    assert _run(tmp_path) == 1
    out = capsys.readouterr().out
    assert "WRONG: tensorop: einjit's result differs from numpy's; the section stopped" in out
    assert "  WRONG  tensorop: einjit's result differs from numpy's" in out
    assert "TABLE-LINE einsum float32" in out          # the sections after it still ran
    assert "1 WRONG result (exit status 1)" in out


def test_update_reference_needs_the_whole_full_run(tmp_path, monkeypatch, capsys):
    Calls(monkeypatch)
    for argv in ([], ["einsum", "--full"], ["--full", "--dtype", "float32"], ["--quick"]):
        with pytest.raises(SystemExit) as stop:
            _run(tmp_path, *argv, "--update-reference")
        assert stop.value.code == 2
        assert "--update-reference needs the whole --full run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _run(tmp_path, "--full", "--quick")


def test_update_reference_replaces_this_machine_kinds_folder(tmp_path, monkeypatch):
    Calls(monkeypatch)
    root = tmp_path / "reference"
    (root / "testbox").mkdir(parents=True)
    (root / "testbox" / "old.png").write_text("an earlier run\n")

    def update(results, machine):
        return output.update_reference(results, machine, reference_root=root)
    monkeypatch.setattr(job, "update_reference", update)
    monkeypatch.setattr(job, "machine_name", lambda: "testbox")
    results = tmp_path / "results"
    assert job.main(["--full", "--update-reference", "--results", str(results)]) == 0
    assert sorted(p.name for p in (root / "testbox").iterdir()) == ["summary.txt"]
    assert "== VERDICT" in (root / "testbox" / "summary.txt").read_text()


def test_the_matmul_section_runs_when_named_with_large_and_dtype(tmp_path, monkeypatch):
    calls = Calls(monkeypatch)
    assert _run(tmp_path, "matmul", "--large", "--dtype", "float64") == 0
    assert calls.seen == {"matmul": [("float64", len(job.matmul.grid(large=True)))]}
    assert len(job.matmul.grid(large=True)) == len(job.matmul.grid()) + 1
    assert (tmp_path / "summary-matmul.txt").exists()
    assert (tmp_path / "matmul_float64.csv").read_text() == "a,b\n1,2\n"


def test_the_x86_mca_section_runs_when_named(tmp_path, monkeypatch, capsys):
    calls = Calls(monkeypatch)
    assert _run(tmp_path, "x86_mca") == 0
    assert calls.seen == {"x86_mca": True}
    assert "== x86-64 BRGEMM inner loops" in capsys.readouterr().out
    assert (tmp_path / "summary-x86_mca.txt").exists()


def test_the_dask_section_runs_when_named_and_says_when_dask_is_missing(tmp_path, monkeypatch,
                                                                       capsys):
    calls = Calls(monkeypatch)
    assert _run(tmp_path, "dask", "--quick") == 0
    # the sliced network under memory_limit is part of the section
    assert calls.seen == {"dask": True, "slicing": True}
    assert (tmp_path / "dask.csv").read_text() == "a,b\n1,2\n"
    assert (tmp_path / "slicing.csv").read_text() == "a,b\n1,2\n"
    calls = Calls(monkeypatch)
    monkeypatch.setattr(job, "_have_dask", lambda: False)
    assert _run(tmp_path, "dask") == 0
    assert calls.seen == {"slicing": True}       # slicing needs no dask
    assert "skipped: dask is not installed" in capsys.readouterr().out
