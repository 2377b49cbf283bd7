"""benchmarks.replay: a many-thread plan's shares timed one by one on this core."""

import csv
import io
import math

import numpy as np
import pytest

import einjit
from benchmarks import matmul, replay
from benchmarks.harness import einjit_threads
from einjit.runtime.host import host_isa


@pytest.mark.native
@pytest.mark.parametrize("threads", [1, 3, 16])
def test_a_replayed_product_runs_every_share_over_the_whole_output(threads):
    m, k, n = 288, 200, 192
    with einjit_threads(threads):
        expression = einjit.contract_expression("ij,jk->ik", (m, k), (k, n))
    buffers = {}
    result = replay.on_a_large_stack(replay.replay, expression, threads, buffers,
                                     np.random.default_rng(0))
    profile = expression.parallel_profile(threads)
    (step,) = profile.steps
    assert len(result.share_seconds) == 1 and len(result.share_seconds[0]) == step.threads
    assert all(seconds > 0 for seconds in result.share_seconds[0])
    assert result.seconds == max(result.share_seconds[0])
    assert result.efficiency == profile.efficiency
    assert result.gflops == pytest.approx(2 * m * k * n / result.seconds / 1e9)
    assert result.slowest_over_mean >= 1 - 1e-12
    # the output the shares wrote is the product of the random inputs: no share was left out
    # (the buffer started random too)
    by_name = {name: buffer for (name, _, _), buffer in buffers.items()}
    a = by_name["in1"].reshape(m, k)       # the plan's in0 is the right-hand operand
    b = by_name["in0"].reshape(k, n)
    np.testing.assert_allclose(by_name["out"].reshape(m, n),
                               a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-3)


@pytest.mark.native
def test_a_tree_of_steps_replays_each_group_at_its_slowest_share():
    with einjit_threads(4):
        expression = einjit.contract_expression("ab,bc,cd,de->ae", (64, 96), (96, 80),
                                                (80, 72), (72, 40))
    result = replay.on_a_large_stack(replay.replay, expression, 4, {},
                                     np.random.default_rng(1))
    profile = expression.parallel_profile(4)
    assert [len(seconds) for seconds in result.share_seconds] == \
        [step.threads for step in profile.steps]
    steps = sorted(number for group in result.groups for number in group)
    assert steps == list(range(len(profile.steps)))
    assert result.seconds == pytest.approx(sum(
        max(max(result.share_seconds[number]) for number in group) for group in result.groups))


@pytest.mark.native
def test_the_table_and_its_csv(monkeypatch):
    monkeypatch.setattr(replay, "LARGE_GFLOP", 0)     # the quick case counts as large
    seen = []
    lines, table = replay.run([2, 16], "matrix chain", quick=True, progress=seen.append)
    assert seen == lines
    assert "1 thr" in lines[1] and "2 thr" in lines[1] and "16 thr" in lines[1]
    assert lines[2].startswith("matrix chain ij,jk,kl,lm")
    rows = list(csv.DictReader(io.StringIO(table)))
    summaries = [line for line in lines if "or more: lowest" in line]
    if host_isa() == "x86_64":
        assert [line.split(",")[0] for line in summaries] == ["1 thr", "2 thr", "16 thr"]
        # the CSV's share, to its four digits
        stated = summaries[2].split("lowest ")[1]
        assert stated.endswith("% of the peak (matrix chain ij,jk,kl,lm)")
        assert float(stated.split("%")[0]) == pytest.approx(
            100 * float(rows[2]["share_of_peak"]), abs=0.06)
    else:               # no FMA peak measured: no shares of it
        assert summaries == []
    assert list(rows[0]) == replay.COLUMNS
    assert [int(row["threads"]) for row in rows] == [1, 2, 16]
    for row in rows:
        assert float(row["replayed_gflops"]) > 0
        assert 0 < float(row["profile_efficiency"]) <= 1
        share = float(row["share_of_peak"])
        assert 0 < share < 1.5 if host_isa() == "x86_64" else math.isnan(share)


@pytest.mark.parametrize("text", ["0,2", "16,x", "2000"])
def test_bad_thread_counts_are_named(text, capsys):
    with pytest.raises(SystemExit):
        replay.main(["--threads", text])
    assert repr(text) in capsys.readouterr().err


def test_an_unknown_case_is_named(capsys):
    with pytest.raises(SystemExit):
        replay.main(["--filter", "no such case", "--quick"])
    assert "no such case" in capsys.readouterr().err


def test_the_matmul_cases_are_the_square_products_from_peak_from():
    cases = replay.matmul_cases()
    sizes = [case.shapes[0][0] for case in cases]
    assert sizes == [n for n in matmul.SQUARE_SIZES if n >= matmul.PEAK_FROM]
    for case in cases:
        n = case.shapes[0][0]
        assert case.equation == "ij,jk->ik" and case.shapes == [(n, n), (n, n)]
    assert [case.name for case in replay.matmul_cases("1024")] == ["1024x1024x1024"]
