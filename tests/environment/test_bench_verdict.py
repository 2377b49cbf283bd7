"""The main job's verdict: every stated target listed met or missed, judged on the value as
printed; a wrong result (and only that) makes the exit status 1; counts read in plural."""

import pytest

from benchmarks import einsum
from benchmarks.verdict import Target, Verdict, WrongResult, plural


def test_plural():
    assert plural(0, "case") == "0 cases"
    assert plural(1, "case") == "1 case"
    assert plural(2, "case") == "2 cases"
    assert plural(1, "WRONG result") == "1 WRONG result"
    assert plural(3, "mouse", "mice") == "3 mice"


@pytest.mark.parametrize("value, goal, at_most, met", [
    (90.0, 90, False, True), (89.96, 90, False, True), (89.94, 90, False, False),
    (2.004, 2, True, True), (2.01, 2, True, False), (75.0, 80, False, False),
])
def test_a_target_is_judged_on_the_value_as_printed(value, goal, at_most, met):
    digits = 2 if at_most else 1
    target = Target("a figure", value, goal, "%", at_most, digits)
    assert target.met is met
    line = target.line()
    assert line.startswith("met   " if met else "MISSED")
    assert f"{round(value, digits):.{digits}f}%" in line
    assert f"(target {'<=' if at_most else '>='} {goal:g}%)" in line


def test_missed_targets_are_listed_but_do_not_fail_the_run():
    verdict = Verdict()
    verdict.target("GEMM 64x64x64: % of peak", 80.9, 90)
    verdict.target("generation 64x64x64", 3.51, 2, " ms", at_most=True, digits=2)
    verdict.target("einsum geomean", 1.71, 1.5, "x", digits=2)
    lines = verdict.lines()
    assert lines[0] == ("1 of 3 targets met, 2 missed; every result checked against numpy "
                        "is right")
    assert lines[1] == "  MISSED GEMM 64x64x64: % of peak: 80.9% (target >= 90%)"
    assert lines[2] == "  MISSED generation 64x64x64: 3.51 ms (target <= 2 ms)"
    assert lines[3] == "  met    einsum geomean: 1.71x (target >= 1.5x)"
    assert [t.name for t in verdict.missed] == ["GEMM 64x64x64: % of peak",
                                                "generation 64x64x64"]
    assert verdict.exit_code() == 0


def test_a_wrong_result_fails_the_run():
    verdict = Verdict()
    verdict.target("fast", 95, 90)
    verdict.wrong("einsum float32 tt OPT: einjit's result differs from numpy's")
    assert verdict.exit_code() == 1
    lines = verdict.lines()
    assert lines[0].startswith("1 of 1 target met, 0 missed; 1 WRONG result (exit status 1)")
    assert lines[-1] == "  WRONG  einsum float32 tt OPT: einjit's result differs from numpy's"
    assert issubclass(WrongResult, AssertionError)


class _Case:
    def __init__(self, name):
        self.name = name


def _results(ratios):
    return [dict(case=_Case(f"case {i}"), ratio=r) for i, r in enumerate(ratios)]


def test_einsum_ratio_line_agrees_with_itself_and_its_verdict():
    """A lowest ratio printed as 0.80x is not counted below 0.8x, and counts are plural."""
    verdict = Verdict()
    (line,) = einsum._ratio_lines(_results([0.797, 2.0, 1.5]), "float32", verdict)
    assert "lowest 0.80x (case 0; target >= 0.8x); 0 cases below 0.8x" in line
    assert "over 3 cases" in line
    geomean, lowest = verdict.targets
    assert lowest.met and lowest.line().startswith("met    einsum float32 lowest")
    assert geomean.shown == round((0.797 * 2.0 * 1.5) ** (1 / 3), 2)

    verdict = Verdict()
    (line,) = einsum._ratio_lines(_results([0.79, 2.0]), "float64", verdict)
    assert "lowest 0.79x" in line and line.endswith("1 case below 0.8x")
    assert not verdict.targets[1].met

    (line,) = einsum._ratio_lines(_results([0.5, 0.7]), "float32", Verdict())
    assert line.endswith("2 cases below 0.8x") and "over 2 cases" in line


def test_einsum_records_a_wrong_case_and_goes_on(monkeypatch):
    """A case whose result differs from numpy's is named in the verdict and the table, once,
    and the other cases are still measured."""
    picked = [_Case("good one"), _Case("bad one"), _Case("good two")]

    def run_case(case, peer_cache, threads, dtype, peer_windows):
        if case.name == "bad one":
            raise WrongResult(f"einsum {dtype} bad one: einjit's result differs from numpy's")
        case.group, case.equation, case.shapes = "g", "ij->i", [(2, 2)]
        return dict(case=case, flops=2e9, seconds=0.01, gflops=200.0, error=0.0,
                    peers={"np.einsum": 0.02}, best="np.einsum", ratio=2.0, skipped=[],
                    scaling=dict(measured=1.0, predicted=1.0,
                                 efficiency=dict.fromkeys(einsum.PROFILE_THREADS, 1.0)))

    monkeypatch.setattr(einsum, "cases", lambda quick, pattern: picked)
    monkeypatch.setattr(einsum, "run_case", run_case)
    monkeypatch.setattr(einsum, "warm_memory", lambda: None)
    monkeypatch.setattr(einsum, "all_core_peak_gflops", lambda variant, threads: 250.0)
    monkeypatch.setattr(einsum, "call_overhead", lambda dtype: {
        "np.einsum": 1e-6, "expr": 1.5e-6, "einjit.einsum": 4e-6})
    monkeypatch.setattr(einsum, "cold_tensor_train_ms", lambda dtype, parser_cache=True: 50.0)
    progress, verdict = [], Verdict()
    lines, table = einsum.run(progress=progress.append, verdict=verdict)
    assert verdict.wrong_results == ["einsum float32 bad one: einjit's result differs from "
                                     "numpy's"]
    assert verdict.exit_code() == 1
    assert sum("bad one" in line and "WRONG" in line for line in lines) == 1
    assert sum(line.startswith("good") for line in lines) == 2
    assert "good one" in table and "bad one" not in table
    names = [t.name for t in verdict.targets]
    assert "einsum float32 geomean einjit / best peer" in names
    missed = [t.name for t in verdict.missed]
    assert missed == ["einsum float32 call overhead, einjit.einsum / np.einsum"]   # 4x > 3x
    # progress names each case, the table's figures are left to the summary
    assert [p.split(": ", 1)[1].split(" (")[0] for p in progress if "/3" in p] == [
        "1/3 good one", "2/3 bad one", "3/3 good two"]
    assert not any("GFLOPS" in p for p in progress)
