"""The dask benchmark (benchmarks/dask.py) on small operands: both sides computed on the same
blocks, the figures and the target printed, the CSV row written, and a wrong result caught."""

import csv
import io

import pytest

pytest.importorskip("dask.array", reason="this interpreter has no dask (the aarch64 lane's "
                                         "python): the dask benchmark runs on the host")

from benchmarks import dask as bench  # noqa: E402
from benchmarks.verdict import Verdict, WrongResult  # noqa: E402

SMALL = ((4, 64, 256), (256, 16))
SMALL_CHUNKS = ((2, 64, 64), (64, 16))


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(bench, "QUICK_SHAPES", SMALL)
    monkeypatch.setattr(bench, "CHUNKS", SMALL_CHUNKS)
    monkeypatch.setattr(bench, "REPETITIONS", {"numpy": 1, "einjit": 1, "blas": 1})


def test_a_small_run_states_its_target_and_writes_its_row(small):
    verdict = Verdict()
    lines, table = bench.run(quick=True, verdict=verdict)
    (target,) = verdict.targets
    assert target.goal == bench.GOAL and target.unit == "x" and target.value > 0
    assert any("c split in 4" in line for line in lines)
    assert any(line.strip() == target.line() for line in lines)
    header, row = csv.reader(io.StringIO(table))
    assert header[:4] == ["equation", "shapes", "chunks", "gbytes"]
    assert row[:3] == ["abc,cd->abd", "4x64x256 256x16", "2x64x64 64x16"]
    assert float(row[-1]) < bench.TOLERANCE       # the relative error


def test_a_wrong_einjit_result_raises(small, monkeypatch):
    import einjit.dask
    real = einjit.dask.einsum
    monkeypatch.setattr(einjit.dask, "einsum", lambda *args: real(*args) * 1.001)
    with pytest.raises(WrongResult, match="einjit.dask.einsum differs from dask.array.einsum"):
        bench.run(quick=True)
