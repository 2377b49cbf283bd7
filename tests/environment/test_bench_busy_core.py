"""benchmarks.busy_core: einjit on every core beside a process that keeps one busy, claimed
chunks against fixed shares (the timed child processes replaced by fixed figures where only
the table is under test; the pinning and the measuring run in a forked child, whose threads
they pin)."""

import csv
import io
import os
import threading
import time

import pytest

from benchmarks import busy_core, einsum
from benchmarks.verdict import WrongResult
from einjit.codegen import compile as compile_module

from support import run_in_child


def test_the_table_puts_each_busy_figure_over_the_idle_one(monkeypatch):
    figures = {False: iter([{"a": [2.0, 200.0], "b": [1.0, 100.0]},        # idle
                            {"a": [2.0, 150.0], "b": [1.0, 40.0]}]),       # busy, claimed
               True: iter([{"a": [2.0, 100.0], "b": [1.0, 50.0]}])}        # busy, fixed
    spinners = []

    def child(pattern, quick, fixed):
        spinners.append(_spinners(least=len(spinners) > 0))
        return next(figures[fixed])

    monkeypatch.setattr(busy_core, "_child", child)
    monkeypatch.setattr(einsum, "cases", lambda quick, pattern: ["a case"])
    lines, table = busy_core.run(progress=lambda line: None)
    assert spinners == [0, 1, 1]                   # the spinner runs for the busy runs only
    rows = {row["case"]: row for row in csv.DictReader(io.StringIO(table))}
    assert float(rows["a"]["claimed_over_idle"]) == pytest.approx(0.75)
    assert float(rows["a"]["fixed_over_idle"]) == pytest.approx(0.5)
    assert float(rows["b"]["claimed_over_idle"]) == pytest.approx(0.4)
    assert float(rows["b"]["busy_fixed_gflops"]) == pytest.approx(50.0)
    cores = len(os.sched_getaffinity(0))
    assert f"at most {(cores - 0.5) / cores:.0%}" in lines[0]
    assert lines[-1] == "claimed over fixed shares beside the spinner: geomean 1.10x, " \
                        "lowest 0.80x"


def _spinners(least=0):
    """How many processes run the spinner's code, waiting up to 5 s for `least` of them (a
    process just started shows its command line a moment after)."""
    deadline = time.monotonic() + 5
    while True:
        count = 0
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    count += busy_core.SPINNER.encode() in file.read()
            except (OSError, ValueError):
                continue
        if count >= least or time.monotonic() > deadline:
            return count
        time.sleep(0.01)


def test_threads_are_pinned_one_to_a_core():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("one core: nothing to pin apart")
    own, pinned = run_in_child(lambda note: _pinned_on(cores[:2]))
    assert own == {cores[0]} and pinned == [{cores[1]}] * 3


def _pinned_on(cores):
    threads = [threading.Thread(target=threading.Event().wait, args=(5,), daemon=True,
                                name=f"{busy_core.WORKER_PREFIX}{number}")
               for number in range(3)]
    for thread in threads:
        thread.start()
    busy_core.pin_threads(cores)
    return os.sched_getaffinity(0), [os.sched_getaffinity(thread.native_id)
                                     for thread in threads]


@pytest.mark.native
def test_a_fixed_shares_measure_turns_claims_off_and_times_every_matching_case():
    """In a child: the measure sets CLAIMS_PER_THREAD to 0 for the process it runs in."""
    def child(note):
        figures = busy_core.measure("batched", quick=True, fixed=True)
        return figures, compile_module.CLAIMS_PER_THREAD

    figures, claims = run_in_child(child)
    case = einsum.cases(quick=True, pattern="batched")[0]
    flops = case.compile("float32", threads=len(os.sched_getaffinity(0))).tree.flops()
    assert list(figures) == [case.name] and claims == 0
    assert figures[case.name][0] == pytest.approx(flops / 1e9) and figures[case.name][1] > 0


@pytest.mark.native
def test_a_wrong_result_stops_the_measure(monkeypatch):
    monkeypatch.setattr(einsum, "relative_error", lambda result, reference: 1.0)
    with pytest.raises(WrongResult, match="busy_core batched matmul"):
        busy_core.measure("batched", quick=True, fixed=False)


def test_no_case_matching_the_filter_is_an_error():
    with pytest.raises(ValueError, match="'no such case'"):
        busy_core.run("no such case", quick=True, progress=lambda line: None)
