"""Independent small steps run at once (einjit.frontend.concurrency): the grouping rule, the
compiled plans that run by it and the profile that predicts by it."""

from types import SimpleNamespace

import numpy as np
import pytest
from frontend_support import jit_available, numpy_einsum_forbidden

import einjit
from einjit.frontend.concurrency import concurrent_groups


def step(in0, in1, out):
    return SimpleNamespace(sources=(in0, in1, out))


LEAF0, LEAF1, LEAF2, LEAF3 = (("leaf", i) for i in range(4))
# ((0 1) (2 3)): two independent products, then their product into the result
TREE = [step(LEAF0, LEAF1, ("buf", 0)), step(LEAF2, LEAF3, ("buf", 1)),
        step(("buf", 0), ("buf", 1), ("out",))]


def test_independent_steps_within_the_threads_run_at_once():
    assert concurrent_groups(TREE, [1, 1, 1], 2, [True] * 3) == ((0, 1), (2,))
    assert concurrent_groups(TREE, [1, 2, 1], 4, [True] * 3) == ((0, 1), (2,))


def test_a_group_never_holds_more_shares_than_threads():
    assert concurrent_groups(TREE, [1, 2, 1], 2, [True] * 3) == ((0,), (1,), (2,))
    assert concurrent_groups(TREE, [1, 1, 1], 1, [True] * 3) == ((0,), (1,), (2,))


def test_ineligible_steps_run_alone():
    assert concurrent_groups(TREE, [1, 1, 1], 8, [True, False, True]) == ((0,), (1,), (2,))
    assert concurrent_groups(TREE, [1, 1, 1], 8, [False, True, True]) == ((0,), (1,), (2,))


def test_a_step_waits_for_what_it_reads_and_for_writers_of_its_tensor():
    # the result reads both buffers: never with their writers
    chain = [step(LEAF0, LEAF1, ("buf", 0)), step(("buf", 0), LEAF2, ("out",))]
    assert concurrent_groups(chain, [1, 1], 8, [True] * 2) == ((0,), (1,))
    # two parts of one node's sum write the same buffer
    parts = [step(LEAF0, LEAF1, ("buf", 0)), step(LEAF0, LEAF1, ("buf", 0)),
             step(LEAF2, LEAF3, ("buf", 1))]
    assert concurrent_groups(parts, [1, 1, 1], 8, [True] * 3) == ((0,), (1, 2))


native = pytest.mark.skipif(not jit_available(),
                            reason="needs einjit.optimize and einjit.codegen to execute")
EQUATION = "ij,jk,kl,lm->im"
SHAPES = [(64, 64)] * 4     # each product 64³: worth a thread, too small for two


@pytest.mark.native
@native
@pytest.mark.parametrize("threads", [2, 3, 16])
def test_a_plan_runs_its_independent_products_at_once(threads, monkeypatch):
    monkeypatch.setenv("EINJIT_NUM_THREADS", str(threads))
    expr = einjit.contract_expression(EQUATION, *SHAPES, dtype="float32", optimize="optimal")
    plan = expr._prepared.plan
    assert [len(group) for group in plan.groups] == [2, 1]
    rng = np.random.default_rng(threads)
    operands = [rng.integers(-2, 3, s).astype(np.float32) for s in SHAPES]
    expected = np.einsum(EQUATION, *[o.astype(np.float64) for o in operands])
    with numpy_einsum_forbidden():
        results = [expr(*operands) for _ in range(30)]
    for result in results:
        np.testing.assert_array_equal(result, expected.astype(np.float32))
    profile = expr.parallel_profile(threads)
    assert profile.groups == plan.groups and profile.together == "steps 0 + 1"
    busiest = [s.busiest for s in profile.steps]
    assert profile.efficiency == pytest.approx(
        profile.work / threads / (max(busiest[0], busiest[1]) + busiest[2]))
    assert "run at once: steps 0 + 1" in str(profile)


@pytest.mark.native
@native
def test_one_thread_runs_every_step_alone(monkeypatch):
    monkeypatch.setenv("EINJIT_NUM_THREADS", "1")
    expr = einjit.contract_expression(EQUATION, *SHAPES, dtype="float32", optimize="optimal")
    assert expr._prepared.plan.groups == ((0,), (1,), (2,))
    assert expr.parallel_profile(1).together == ""
