"""Blocks for the threads (einjit.passes.balance): a contraction whose default blocks leave
threads idle is planned again with smaller ones, never below the floors, never where the
default blocks already keep the threads busy; the smaller blocks compute numpy's result."""

import math

import numpy as np
import pytest

import einjit
from einjit.ir import TensorOperation
from einjit.passes import balance, identify, reorder, shared, split
from einjit.passes.block import is_large

THREADS = (2, 3, 16, 48, 72)
SHAPES = [(1024, 256, 512), (300, 128, 784), (64, 4096, 64), (200, 96, 300), (2048, 2048, 256),
          (96, 80, 4000), (1000, 1000, 64)]


def gemm(m, n, k, num_threads, dtype="float32"):
    """out[m, n] = sum_k in0[m, k] in1[k, n], every operand column-major."""
    return TensorOperation(dtype, "none", "gemm", "none", ("m", "n", "k"), None, (m, n, k),
                           (1, 0, m), (0, k, 1), (1, m, 0), num_threads=num_threads)


def default_plan(op, threads):
    """The plan without balance: split's default blocks."""
    return shared(reorder(identify(split(op))), threads)


def blocks(op, kind):
    """The prim (kernel) block of a dim type."""
    return math.prod(d.size for d in op.dims if d.type == kind and d.exec_type == "prim")


def test_balance_is_the_busy_share_of_the_threads():
    op = default_plan(gemm(1024, 256, 512, 48), 48)
    tasks = math.prod(d.size for d in op.dims if d.exec_type == "shared")
    threads = balance.working_threads(op)
    assert threads == 48
    assert balance.balance(op) == tasks / (48 * math.ceil(tasks / 48))


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_threads_get_balanced_shares_or_the_blocks_reach_their_floors(m, n, k, threads):
    op = gemm(m, n, k, threads)
    before = default_plan(op, threads)
    after = einjit.optimize(op, num_threads=threads)
    if not balance.needs_smaller_blocks(before):
        assert after == before              # nothing to mend: the default plan stands
        return
    assert balance.balance(after) > balance.balance(before)
    assert blocks(after, "m") * blocks(after, "n") < blocks(before, "m") * blocks(before, "n")
    if balance.needs_smaller_blocks(after):      # still idle threads: blocks at their floors
        smaller = list(balance.smaller_blocks(op))
        assert smaller and all(smaller[-1][kind] == floor
                               for kind, floor in balance.FLOOR_SIZES.items())


def test_where_no_blocks_are_even_enough_the_most_even_stand():
    op = gemm(160, 300, 300, 48)
    tried = [default_plan(op, 48)] + [shared(reorder(identify(split(op, max_size=sizes))), 48)
                                      for sizes in balance.smaller_blocks(op)]
    evenness = [balance.balance(plan) for plan in tried]
    assert max(evenness) < balance.MIN_BALANCE
    assert evenness[-1] < max(evenness)      # the floors are not the most even here
    assert balance.balance(einjit.optimize(op, num_threads=48)) == max(evenness)


@pytest.mark.parametrize("m, n, k", SHAPES)
def test_one_thread_plans_are_left_alone(m, n, k):
    op = gemm(m, n, k, 1)
    assert einjit.optimize(op, num_threads=1) == default_plan(op, 1)


def test_a_gemm_of_too_few_blocks_for_48_threads_gets_enough():
    op = gemm(1024, 256, 512, 48)
    assert not is_large(op)
    assert balance.balance(default_plan(op, 48)) < balance.MIN_BALANCE
    assert balance.balance(einjit.optimize(op, num_threads=48)) >= balance.MIN_BALANCE


def test_smaller_blocks_halve_the_larger_block_down_to_the_floors():
    sizes = list(balance.smaller_blocks(gemm(1024, 256, 512, 48)))
    assert [(s["m"], s["n"]) for s in sizes] == [(64, 64), (64, 32), (32, 32), (32, 16)]
    assert all(s["k"] == sizes[0]["k"] for s in sizes)


@pytest.mark.native
@pytest.mark.parametrize("threads", (3, 48))
@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("m, n, k", [(300, 128, 784), (1000, 250, 77), (97, 190, 333),
                                     (36, 4100, 500)])
def test_smaller_blocks_compute_numpys_result(monkeypatch, threads, dtype, m, n, k):
    monkeypatch.setenv("EINJIT_NUM_THREADS", str(threads))
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = einjit.contract_expression("ik,kj->ij", a.shape, b.shape, dtype=dtype)(a, b)
    tolerance = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * math.sqrt(k))
