"""Plans for more threads than this machine has cores (EINJIT_NUM_THREADS=16, 48): the
benchmark's einsum trees (at small sizes) and products whose sums the threads share in chunks
give numpy's result, the same bits on every run for a thread count."""

import numpy as np
import pytest

import einjit
from benchmarks import einsum as bench
from einjit.display import plan_of

THREADS = ("16", "48")
CASES = bench.cases(quick=True)


def _operands(shapes, dtype, seed=5):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, shape).astype(dtype) for shape in shapes]


@pytest.mark.native
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_benchmark_trees_on_many_threads(monkeypatch, case, threads):
    monkeypatch.setenv("EINJIT_NUM_THREADS", threads)
    operands = _operands(case.shapes, "float32")
    expression = case.compile("float32")
    first = expression(*operands)
    expected = bench.reference(case, operands, expression.tree.flops(), first.size)
    assert bench.relative_error(first, expected) < bench.TOLERANCES["float32"]
    np.testing.assert_array_equal(expression(*operands), first)


@pytest.mark.native
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("shapes", [((40, 30000), (30000, 24)), ((1000, 1000), (1000, 96)),
                                    ((96, 2048), (2048, 2048))])
def test_products_on_many_threads_are_numpys_and_repeatable(monkeypatch, threads, dtype,
                                                            shapes):
    monkeypatch.setenv("EINJIT_NUM_THREADS", threads)
    a, b = _operands(shapes, dtype)
    expression = einjit.contract_expression("ik,kj->ij", *shapes, dtype=dtype)
    first = expression(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tolerance = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(first, want, rtol=tolerance,
                               atol=tolerance * np.sqrt(shapes[0][1]))
    for _ in range(3):
        np.testing.assert_array_equal(expression(a, b), first)
    # the thread count is the plan's: every step planned for it
    assert {step.lowered.op.num_threads for step in plan_of(expression).steps} == {int(threads)}


@pytest.mark.native
def test_a_sum_shared_in_chunks_is_close_to_the_serial_one(monkeypatch):
    shapes = (16, 65536), (65536, 32)
    a, b = _operands(shapes, "float32")
    results = {}
    for threads in ("1", "4"):
        monkeypatch.setenv("EINJIT_NUM_THREADS", threads)
        expression = einjit.contract_expression("ik,kj->ij", *shapes)
        results[threads] = expression(a, b)
        if threads == "4":
            assert any(step.part for step in plan_of(expression).steps)
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    for result in results.values():
        assert np.max(np.abs(result - want) / scale) < 1e-5
    np.testing.assert_allclose(results["4"], results["1"], rtol=1e-4, atol=1e-3)
