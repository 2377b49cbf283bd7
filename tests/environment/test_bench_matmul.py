"""The matmul benchmark on a tiny grid, through the code path of the real run: the peers'
processes, the checks against numpy, the CSV with the ratios of this run, the verdict's
targets and the picture (slow: the peers' processes import torch)."""

import csv
import io
import math
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import matmul
from benchmarks.verdict import Verdict, WrongResult

TINY = [matmul.Shape(8, 8, 8), matmul.Shape(40, 3, 24), matmul.Shape(6, 5, 7, batch=3)]


@pytest.fixture(scope="module")
def tiny_run():
    verdict = Verdict()
    lines, table = matmul.run("float64", TINY, threads=(1, 2), verdict=verdict,
                              progress=lambda line: None)
    return lines, list(csv.DictReader(io.StringIO(table))), verdict


@pytest.mark.slow
def test_the_csv_has_a_row_per_shape_and_thread_count_with_its_columns(tiny_run):
    _, rows, _ = tiny_run
    expected = ["dtype", "shape", "kind", "batch", "m", "k", "n", "threads", "gflop",
                "einjit_s", "einjit_gflops", "numpy_s", "numpy_gflops"]
    expected += ["torch_s", "torch_gflops"] if matmul.HAVE_TORCH else []
    expected += ["ratio_vs_numpy", "percent_of_peak", "rel_error"]
    assert list(rows[0]) == expected
    assert [(r["shape"], r["kind"], r["threads"]) for r in rows] == [
        (s.name, kind, t) for t in ("1", "2")
        for s, kind in zip(TINY, ("square", "skinny", "batched"))]
    assert {r["dtype"] for r in rows} == {"float64"}


@pytest.mark.slow
def test_the_ratios_and_rates_come_from_the_times_of_this_run(tiny_run):
    _, rows, _ = tiny_run
    for r in rows:
        einjit_s, numpy_s = float(r["einjit_s"]), float(r["numpy_s"])
        assert einjit_s > 0 and numpy_s > 0
        assert float(r["ratio_vs_numpy"]) == pytest.approx(numpy_s / einjit_s, rel=2e-3)
        flops = 2 * max(int(r["batch"]), 1) * int(r["m"]) * int(r["k"]) * int(r["n"])
        assert float(r["einjit_gflops"]) == pytest.approx(flops / einjit_s / 1e9, rel=1e-2)
        assert float(r["rel_error"]) < matmul.TOLERANCES["float64"]


@pytest.mark.slow
def test_the_verdict_records_each_thread_counts_targets(tiny_run):
    lines, _, verdict = tiny_run
    names = [t.name for t in verdict.targets]
    assert len(names) == 4 and not verdict.wrong_results
    assert any(n.startswith("matmul float64 1 thread, lowest einjit / numpy @") for n in names)
    assert "matmul float64 2 threads, geomean einjit / numpy @" in names
    assert all(t.goal == matmul.TARGET_RATIO for t in verdict.targets)
    assert any(line.startswith("2 threads: einjit / numpy @ geomean") for line in lines)
    assert any(line.startswith("peers: numpy ") for line in lines)


def test_the_grid_names_m_k_n_and_its_flops():
    shapes = {s.name: s for s in matmul.grid(large=True)}
    assert "4096x4096x4096" in shapes and "4096x4096x4096" not in {
        s.name for s in matmul.grid()}
    skinny = shapes["64x4096x64"]
    assert (skinny.m, skinny.k, skinny.n, skinny.kind) == (64, 4096, 64, "skinny")
    assert skinny.operand_shapes == [(64, 4096), (4096, 64)]
    vector = shapes["1x4096x4096"]
    assert vector.operand_shapes == [(1, 4096), (4096, 4096)] and vector.flops == 2.0 * 4096 ** 2
    batched = shapes["64 x 128x128x128"]
    assert batched.equation == "bij,bjk->bik" and batched.flops == 2.0 * 64 * 128 ** 3



def test_shapes_named_on_the_command_line_replace_the_grid(monkeypatch, capsys):
    shapes = matmul._shapes("1x1024x1024, 64x128x32,8x16x24x40")
    assert [s.name for s in shapes] == ["1x1024x1024", "64x128x32", "8 x 16x24x40"]
    assert shapes[2].operand_shapes == [(8, 16, 24), (8, 24, 40)]
    for bad in ("64x64", "64x0x64", "ax2x3", "1x2x3x4x5"):
        with pytest.raises(Exception, match=repr(bad)):
            matmul._shapes(f"8x8x8,{bad}")
    ran = []

    def run(dtype, grid, threads, verdict):
        ran.append((dtype, [s.name for s in grid], threads))
        return [], "shape\n"
    monkeypatch.setattr(matmul, "run", run)
    monkeypatch.setattr(matmul, "write_result", lambda name, table: name)
    assert matmul.main(["--dtype", "float64", "--threads", "2", "--shapes", "100x7x3"]) == 0
    assert ran == [("float64", ["100x7x3"], (2,))]
    with pytest.raises(SystemExit):
        matmul.main(["--shapes", "100x7"])
    assert "'100x7' is not a product" in capsys.readouterr().err

@pytest.mark.slow
def test_a_wrong_einjit_result_stops_the_section(monkeypatch):
    real = matmul.compiled

    def off_by_a_little(shape, dtype, threads):
        expression = real(shape, dtype, threads)
        return lambda *operands: expression(*operands) * (1 + 1e-6)
    monkeypatch.setattr(matmul, "compiled", off_by_a_little)
    with pytest.raises(WrongResult, match=r"matmul float64 8x8x8: einjit's result"):
        matmul.run("float64", TINY[:1], threads=(1,), progress=lambda line: None)


def test_a_wrong_peer_result_is_caught_in_its_process():
    operands = matmul.operands_of(TINY[0], "float32")
    right = np.matmul(*operands)
    assert matmul.checked_error("numpy", right, operands, TINY[0], "float32") < 1e-6
    with pytest.raises(WrongResult, match="numpy's result"):
        matmul.checked_error("numpy", right + 1e-2, operands, TINY[0], "float32")
    with pytest.raises(WrongResult, match="float64"):      # the dtype is checked too
        matmul.checked_error("numpy", right.astype(np.float64), operands, TINY[0], "float32")


def test_the_peers_run_without_the_openblas_core_overrides(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "524288")
    env = matmul.peer_environment(2)
    assert "OPENBLAS_CORETYPE" not in env and "OPENBLAS_L2_SIZE" not in env
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "2"


@pytest.mark.slow
def test_the_csv_becomes_a_picture_titled_with_its_dtype_and_reference(tiny_run, tmp_path):
    pytest.importorskip("matplotlib", reason="the plots extra (scripts/setup installs it)")
    from benchmarks import plots
    lines, rows, _ = tiny_run
    table = io.StringIO()
    writer = csv.DictWriter(table, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = tmp_path / matmul.csv_name("float64")
    path.write_text(table.getvalue())
    titles = []
    save = plots._save

    def capture(fig, folder, stem):
        titles.append(fig._suptitle.get_text())
        return save(fig, folder, stem)
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as patch:
        patch.setattr(plots, "_save", capture)
        written = plots.write_plots(tmp_path, progress=lambda line: None)
    assert tmp_path / "matmul_float64.png" in written
    assert (tmp_path / "matmul_float64.png").stat().st_size > 5000
    assert "float64" in titles[0] and "numpy's @" in titles[0] and "float32" not in titles[0]
    ratios = [float(r["ratio_vs_numpy"]) for r in rows]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert f"geomean {geomean:.2f}× numpy's @" in (tmp_path / "summary.md").read_text()


@pytest.mark.slow
def test_the_peer_process_runs_the_kernels_openblas_picks_itself(monkeypatch):
    if matmul.openblas_core() is None:
        pytest.skip("numpy does not run on OpenBLAS here")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")     # a core without AVX: never ours
    overridden = subprocess.run(
        [sys.executable, "-c", "from benchmarks import matmul; print(matmul.openblas_core())"],
        capture_output=True, text=True, check=True, cwd=matmul.ROOT).stdout.strip()
    answer = matmul.peer_seconds("numpy", "float32", 1, TINY[:1])
    assert "OpenBLAS" in answer["library"] and f"OpenBLAS {overridden} " not in answer["library"]
    assert answer["times"][TINY[0].name] > 0


def test_a_peak_that_moved_during_a_run_is_reported(monkeypatch):
    peaks = iter([100.0, 50.0])
    monkeypatch.setattr(matmul, "peak_gflops", lambda dtype, threads: next(peaks))
    lines, _ = matmul.run("float64", TINY[:1], threads=(1,), progress=lambda line: None)
    assert any(line.startswith("WARNING: the machine was busy during the 1 thread run")
               and "50.0 and 100.0" in line for line in lines)


def test_the_reference_products_run_numpys_blas_on_one_thread():
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="installed with the plots extra")
    from benchmarks.harness import one_blas_thread
    np.ones((64, 64)) @ np.ones((64, 64))           # numpy's BLAS loaded and started
    with one_blas_thread():
        blas = [pool for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]
        assert blas and all(pool["num_threads"] == 1 for pool in blas)
