"""The parallel profile (einjit.frontend.profile): plan arithmetic for any thread count that
agrees with what the compiled plan runs, whose flops add up to the tree's, and whose predicted
efficiency is the formula over its steps."""

from math import ceil

import numpy as np
import pytest

import einjit
from einjit.codegen import compile_operation
from einjit.display import plan_of
from einjit.errors import EinjitError

CASES = [
    ("ij,jk->ik", [(512, 384), (384, 640)]),
    ("ij,jk->ik", [(64, 4096), (4096, 64)]),                       # few out blocks: chunks of K
    ("ij,jk->ik", [(1536, 1536), (1536, 1536)]),                   # cache-blocked
    ("bij,bjk->bik", [(12, 96, 80), (12, 80, 72)]),
    ("abcd,cdef,efgh->abgh", [(16, 12, 16, 12), (16, 12, 16, 12), (16, 12, 16, 12)]),
    ("ab,bc,cd,de->ae", [(96, 200), (200, 48), (48, 300), (300, 30)]),
    ("ijk->ki", [(64, 48, 33)]),
]
THREADS = (1, 2, 3, 16, 48, 72)


def expression(subscripts, shapes):
    return einjit.contract_expression(subscripts, *shapes)


@pytest.mark.parametrize("subscripts,shapes", CASES)
@pytest.mark.parametrize("threads", THREADS)
def test_flops_add_up_to_the_trees_and_efficiency_is_the_formula(subscripts, shapes, threads):
    expr = expression(subscripts, shapes)
    profile = expr.parallel_profile(threads)
    assert profile.num_threads == threads
    assert profile.flops == expr.tree.flops()
    busiest = 0
    for step in profile.steps:
        assert 1 <= step.threads <= min(threads, step.tasks)
        # shares of whole tasks differing by at most one task
        assert step.busiest * step.tasks == step.work * ceil(step.tasks / step.threads)
        assert step.busiest * threads >= step.work
        assert 0 < step.efficiency <= 1 and step.balance >= 1
        busiest += step.busiest
    assert profile.efficiency == pytest.approx(profile.work / threads / busiest)
    assert 0 < profile.efficiency <= 1
    if threads == 1:
        assert profile.efficiency == 1


@pytest.mark.parametrize("subscripts,shapes", CASES)
@pytest.mark.parametrize("threads", (2, 3, 16))
def test_the_profile_is_what_the_compiled_plan_runs(subscripts, shapes, threads, monkeypatch):
    monkeypatch.setenv("EINJIT_NUM_THREADS", str(threads))
    expr = expression(subscripts, shapes)
    steps = plan_of(expr).steps
    profile = expr.parallel_profile(threads)
    assert len(profile.steps) == len(steps)
    for row, step in zip(profile.steps, steps):
        compiled = compile_operation(step.lowered.op)
        assert row.tasks == compiled.plan.shared_iterations
        assert row.threads == len(compiled._shares)
        assert row.kind == step.lowered.op.kind
        # each step carries the operation and the shares the compiled plan runs
        assert row.op == step.lowered.op and row.shares == compiled.shares
    arrays = [np.random.default_rng(1).standard_normal(s).astype(np.float32) for s in shapes]
    expected = np.einsum(subscripts, *[a.astype(np.float64) for a in arrays])
    np.testing.assert_allclose(expr(*arrays), expected, rtol=1e-4,
                               atol=1e-5 * np.abs(expected).max())


def test_a_count_above_the_machines_cores_is_planned_for_that_count():
    expr = expression("ij,jk->ik", [(1536, 1536), (1536, 1536)])
    few, many = expr.parallel_profile(2), expr.parallel_profile(48)
    assert max(s.threads for s in many.steps) > max(s.threads for s in few.steps)
    assert max(s.tasks for s in many.steps) >= 48 // 2


def test_text_and_html_name_every_step():
    expr = expression("ab,bc,cd,de->ae", [(96, 200), (200, 48), (48, 300), (300, 30)])
    profile = expr.parallel_profile(16)
    text = str(profile)
    assert f"on 16 threads: predicted efficiency {100 * profile.efficiency:.1f}%" in text
    assert len(text.splitlines()) == 2 + len(profile.steps)
    for step in profile.steps:
        assert step.node in text
    html = profile._repr_html_()
    assert html.count("<tr>") == 1 + len(profile.steps)
    assert "&#x27;ab,bc,cd,de-&gt;ae&#x27;" in html
    # the repr (what a REPL shows) names each step's numbers, not its operation and shares
    shown = repr(profile)
    assert "TensorOperation" not in shown and "shares=" not in shown
    assert shown.count("StepProfile(") == len(profile.steps) and "busiest=" in shown


@pytest.mark.parametrize("bad", [0, -3, 1025, 2.5, True, "4"])
def test_a_bad_thread_count_is_refused_by_name(bad):
    expr = expression("ij,jk->ik", [(64, 64), (64, 64)])
    with pytest.raises(EinjitError, match=f"num_threads={bad!r}") as info:
        expr.parallel_profile(bad)
    assert isinstance(info.value, ValueError)


def test_a_zero_size_expression_has_no_profile():
    expr = expression("ij,jk->ik", [(0, 4), (4, 5)])
    with pytest.raises(ValueError, match="zero-size"):
        expr.parallel_profile(4)
