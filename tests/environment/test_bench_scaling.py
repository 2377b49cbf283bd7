"""benchmarks.scaling: einjit on several thread counts beside the best peer on the most (the
peers replaced by a fixed time: only einjit's side and the table are under test)."""

import csv
import io
import math

import pytest

from benchmarks import einsum, scaling
from benchmarks.verdict import WrongResult
from einjit.runtime.host import host_isa


def test_thread_counts_default_to_one_four_and_every_core():
    assert scaling.thread_counts(None, 16) == [1, 4, 16]
    assert scaling.thread_counts(None, 2) == [1, 2]
    assert scaling.thread_counts(None, 1) == [1]
    assert scaling.thread_counts("16,1,4,4", 2) == [1, 4, 16]


@pytest.mark.parametrize("text", ["0,2", "1,x", ""])
def test_bad_thread_counts_are_named(text):
    with pytest.raises(ValueError, match=repr(text)):
        scaling.thread_counts(text, 2)


@pytest.mark.native
def test_a_case_on_one_and_two_threads(monkeypatch):
    peer_seconds = 1e-3
    monkeypatch.setattr(einsum, "peer_seconds",
                        lambda *args: ({"np.einsum": 1.0, "torch.einsum": peer_seconds}, []))
    lines, table = scaling.run([1, 2], "matrix chain", quick=True, progress=lambda line: None)
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [int(row["threads"]) for row in rows] == [1, 2]
    one, two = rows
    case = einsum.cases(quick=True, pattern="matrix chain")[0]
    flops = case.compile("float32", threads=2).tree.flops()
    assert float(one["gflop"]) == pytest.approx(flops / 1e9, rel=1e-3)
    assert float(one["speedup_measured"]) == 1.0
    assert float(two["speedup_measured"]) == pytest.approx(
        float(two["gflops"]) / float(one["gflops"]), rel=1e-2)
    assert float(two["speedup_predicted"]) == pytest.approx(
        2 * case.compile("float32", threads=2).parallel_profile(2).efficiency, rel=1e-3)
    assert two["best_peer"] == "torch.einsum"
    assert float(two["best_peer_gflops"]) == pytest.approx(flops / peer_seconds / 1e9, rel=1e-3)
    assert float(two["einjit_over_best_peer"]) == pytest.approx(
        float(two["gflops"]) / float(two["best_peer_gflops"]), rel=1e-2)
    share = float(two["share_of_all_core_peak"])      # of the FMA peak timed on x86-64 only
    assert 0 < share < 1.5 if host_isa() == "x86_64" else math.isnan(share)
    assert "1 thr" in lines[1] and "2 thr" in lines[1]
    assert lines[2].startswith("matrix chain ij,jk,kl,lm")
    assert "torch.einsum" in lines[2]


@pytest.mark.native
def test_a_wrong_result_stops_the_run(monkeypatch):
    monkeypatch.setattr(einsum, "peer_seconds", lambda *args: ({"np.einsum": 1.0}, []))
    monkeypatch.setattr(einsum, "relative_error", lambda result, reference: 1.0)
    with pytest.raises(WrongResult, match="matrix chain .* on 1 thread:"):
        scaling.run([1], "matrix chain", quick=True, progress=lambda line: None)


def test_no_case_matching_the_filter_is_an_error():
    with pytest.raises(ValueError, match="'no such case'"):
        scaling.run([1], "no such case", quick=True, progress=lambda line: None)
