"""Long reductions are summed in chunks (einjit.frontend.long_sums): their error grows with
log(n), not n, in every layout (contiguous, strided, broadcast, sizes without divisors) and
every kind of node (sums over one operand's dims, dot products, GEMMs with a long K).

Constant operands are the hard case: every rounding of a sequential sum errs the same way, so
its error grows with n (the tests show the bound they use fails for a sequential sum)."""

import math

import numpy as np
import pytest
from frontend_support import jit_available

import einjit
from einjit.frontend.long_sums import (
    CHUNK,
    LONG_CHAIN,
    LONG_SUM,
    accumulation_chain,
    row_chunks,
)

pytestmark = pytest.mark.skipif(not jit_available(),
                                reason="needs einjit.optimize and einjit.codegen to execute")


def _bound(n: int, dtype) -> float:
    """The relative error allowed a sum of n terms: a few eps per halving of n."""
    return 8 * math.log2(n) * np.finfo(dtype).eps


def _sequential_error(value, n: int, dtype) -> float:
    """The relative error of summing n copies of `value` one after the other in `dtype`."""
    total = np.cumsum(np.full(n, value, dtype))[-1]
    exact = float(np.asarray(value, dtype)) * n
    return abs(float(total) - exact) / exact


@pytest.mark.native
@pytest.mark.parametrize("num", [10**6, 10**7])
def test_numpys_chunking_precision_case(num):
    """numpy's test_einsum_chunking_precision (numpy/_core/tests/test_einsum.py)."""
    value = 1. + np.finfo(np.float64).eps * 8196
    result = einjit.einsum("i->", np.broadcast_to(np.array(value), num)) / num
    np.testing.assert_almost_equal(result, value, decimal=15)
    contiguous = einjit.einsum("i->", np.full(num, value)) / num
    np.testing.assert_almost_equal(contiguous, value, decimal=15)


LAYOUTS = {
    "broadcast": lambda v, n, dtype: np.broadcast_to(np.asarray(v, dtype), n),
    "contiguous": lambda v, n, dtype: np.full(n, v, dtype),
    "strided": lambda v, n, dtype: np.full(3 * n, v, dtype)[::3],
}


@pytest.mark.native
@pytest.mark.parametrize("n", [10**6, 1_000_003, 3 * 2**19 + 1])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f4", "f8"])
def test_constant_sums_and_dots(n, layout, dtype):
    value = 0.1
    x = LAYOUTS[layout](value, n, dtype)
    exact = float(np.asarray(value, dtype)) * n
    bound = _bound(n, dtype)
    assert _sequential_error(value, n, np.float32) > _bound(n, np.float32)   # bound bites
    assert abs(float(einjit.einsum("i->", x)) - exact) / exact < bound
    square = float(np.asarray(value, dtype)) ** 2 * n
    assert abs(float(einjit.einsum("i,i->", x, x)) - square) / square < bound
    expression = einjit.contract_expression("i->", (n,), dtype=np.dtype(dtype).name)
    assert abs(float(expression(np.ascontiguousarray(x))) - exact) / exact < bound


def _exact(equation, *arrays):
    """The result in long double from exact float64 products (float32 operands), else long
    double products."""
    wide = [a.astype(np.longdouble) for a in arrays]
    return np.einsum(equation, *wide)


def _relative_error(result, equation, arrays):
    exact = _exact(equation, *arrays)
    magnitude = _exact(equation, *[np.abs(a) for a in arrays])
    return float(np.max(np.abs(np.asarray(result, np.longdouble) - exact) / magnitude))


# (equation, shapes, terms summed into each output element)
CASES = [
    ("i->", [(2_000_003,)], 2_000_003),
    ("i,i->", [(1_000_003,), (1_000_003,)], 1_000_003),
    ("ij->j", [(300_007, 3)], 300_007),
    ("ij->i", [(3, 300_007)], 300_007),
    ("ijk->", [(101, 103, 107)], 101 * 103 * 107),
    ("ik,kj->ij", [(4, 200_003), (200_003, 3)], 200_003),
    ("ik,jk->ij", [(3, 400_009), (2, 400_009)], 400_009),
    ("bi,bi->b", [(2, 500_009), (2, 500_009)], 500_009),
]


@pytest.mark.native
@pytest.mark.parametrize("equation, shapes, terms", CASES, ids=[c[0] for c in CASES])
def test_long_sums_of_positive_terms(equation, shapes, terms, dtype):
    """Positive terms (no cancellation): the error relative to the sum of magnitudes."""
    rng = np.random.default_rng(len(equation) + len(shapes))
    arrays = [rng.uniform(0.5, 1.5, s).astype(dtype) for s in shapes]
    bound = _bound(terms, dtype)
    assert _relative_error(einjit.einsum(equation, *arrays), equation, arrays) < bound
    transposed = [np.asfortranarray(a) for a in arrays]
    assert _relative_error(einjit.einsum(equation, *transposed), equation, arrays) < bound


def _steps(equation, *shapes, dtype="float64"):
    return einjit.contract_expression(equation, *shapes, dtype=dtype)._prepared.plan.steps


@pytest.mark.parametrize("equation, shapes, terms", CASES, ids=[c[0] for c in CASES])
def test_long_sum_plans_chain_few_terms(equation, shapes, terms):
    assert terms > LONG_SUM
    steps = _steps(equation, *shapes)
    assert len(steps) > 1
    assert any(step.part for step in steps)
    assert all(accumulation_chain(step.lowered.op) <= LONG_CHAIN for step in steps)


def test_a_sum_with_short_chains_keeps_its_single_step(monkeypatch):
    """Past LONG_SUM a GEMM whose K blocks already keep the chains short runs as it did;
    an ordinary sum (up to LONG_SUM terms) too (on one thread: with more, a GEMM whose out
    is too small for them is summed in chunks, test_a_starved_gemm_is_summed_in_chunks)."""
    monkeypatch.setenv("EINJIT_NUM_THREADS", "1")
    (step,) = _steps("ik,kj->ij", (64, 89_600), (89_600, 64))
    assert not step.part and accumulation_chain(step.lowered.op) <= LONG_CHAIN
    (step,) = _steps("i->", (LONG_SUM,))
    assert not step.part
    (step,) = _steps("ij,jk->ik", (256, 1600), (1600, 256))
    assert not step.part


def test_describe_names_the_parts():
    text = str(einjit.contract_expression("i->", (1_000_003,), dtype="float64"))
    assert "partial sums of chunks" in text and "the last, shorter chunk" in text
    assert "the sum of the partial sums" in text


@pytest.mark.parametrize("n", [CHUNK * 40 + 7, LONG_SUM * 3 + 1])
def test_chunked_plans_on_the_reference_executor(n, reference, dtype):
    """The same plans run by the IR's numpy executor: offsets and buffers are wired right
    (the last chunk's offset reads, the partial sums buffer's rows)."""
    rng = np.random.default_rng(n)
    a = rng.standard_normal(3 * n).astype(dtype)[::3]
    b = rng.standard_normal((n, 2)).astype(dtype)
    for equation, arrays in (("i->", [a]), ("i,ij->j", [a, b]), ("ij->j", [b])):
        expected = np.einsum(equation, *[x.astype(np.float64) for x in arrays])
        result = einjit.einsum(equation, *arrays)
        np.testing.assert_allclose(result, expected, rtol=1e-4 if dtype == np.float32 else 1e-12,
                                   atol=1e-3 if dtype == np.float32 else 1e-10)


@pytest.mark.native
def test_out_and_orders_with_a_long_sum(dtype):
    rng = np.random.default_rng(4)
    a = rng.uniform(0.5, 1.5, (5, 100_003)).astype(dtype)
    b = rng.uniform(0.5, 1.5, (100_003, 3)).astype(dtype)
    expected = _exact("ik,kj->ij", a, b)
    out = np.empty((3, 5), dtype).T
    assert einjit.einsum("ik,kj->ij", a, b, out=out) is out
    magnitude = _exact("ik,kj->ij", np.abs(a), np.abs(b))
    assert np.max(np.abs(out - expected) / magnitude) < _bound(100_003, dtype)
    for order in ("C", "F"):
        result = einjit.einsum("ik,kj->ij", a, b, order=order)
        assert np.max(np.abs(result - expected) / magnitude) < _bound(100_003, dtype)


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_starved_gemm_is_summed_in_chunks(monkeypatch, dtype):
    """A GEMM whose out, in the smallest blocks (einjit.passes.balance), gives fewer shared
    iterations than threads, with work enough for each thread: its sum in chunks (a batch
    the threads share), then the partial sums summed."""
    shapes = (16, 32768), (32768, 32)
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(shape).astype(dtype) for shape in shapes)
    want = a.astype(np.float64) @ b
    for threads, chunked in (("1", False), ("2", True), ("3", True)):
        monkeypatch.setenv("EINJIT_NUM_THREADS", threads)
        steps = _steps("ik,kj->ij", *shapes, dtype=dtype)
        assert any(step.part for step in steps) == chunked
        if chunked:
            shared = [d.size for d in steps[0].lowered.op.dims if d.exec_type == "shared"]
            assert int(np.prod(shared)) >= int(threads)
        got = einjit.contract_expression("ik,kj->ij", *shapes, dtype=dtype)(a, b)
        tolerance = 1e-4 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * 128)
    # too little work for two threads: one step
    monkeypatch.setenv("EINJIT_NUM_THREADS", "2")
    assert not any(step.part for step in _steps("ik,kj->ij", (8, 4096), (4096, 8),
                                                 dtype=dtype))


def _in_chunks(steps) -> bool:
    return any("partial sums" in step.part for step in steps)


def _shared(step) -> list[tuple[str, int]]:
    return [(d.type, d.size) for d in step.lowered.op.dims if d.exec_type == "shared"]


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_vector_times_a_matrix_whose_threads_would_cut_its_rows_sums_whole_rows(
        monkeypatch, dtype):
    """x @ A on threads that would each read a short run of every row of A: its sum in
    row_chunks chunks of whole rows (and a last, shorter one: K is odd), the only shared dim,
    then their partial sums summed. Integers: numpy's product bit for bit, on any count of
    threads (more than this host has too), and the same bits on every call."""
    k, n = 8191, 1024
    rng = np.random.default_rng(7)
    x = rng.integers(-4, 5, (1, k)).astype(dtype)
    a = rng.integers(-4, 5, (k, n)).astype(dtype)
    want = (x.astype(np.float64) @ a).astype(dtype)
    monkeypatch.setenv("EINJIT_NUM_THREADS", "1")
    assert not _in_chunks(_steps("ij,jk->ik", x.shape, a.shape, dtype=dtype))
    for threads in (2, 3, 8):
        monkeypatch.setenv("EINJIT_NUM_THREADS", str(threads))
        steps = _steps("ij,jk->ik", x.shape, a.shape, dtype=dtype)
        assert "partial sums of chunks" in steps[0].part
        assert _shared(steps[0]) == [("c", row_chunks(threads))]
        assert steps[-1].part.startswith("the sum of the partial sums")
        expression = einjit.contract_expression("ij,jk->ik", x.shape, a.shape, dtype=dtype)
        np.testing.assert_array_equal(expression(x, a), want)
    floats = [rng.standard_normal(shape).astype(dtype) for shape in (x.shape, a.shape)]
    first = expression(*floats)
    np.testing.assert_array_equal(expression(*floats), first)
    np.testing.assert_allclose(first, floats[0].astype(np.float64) @ floats[1],
                               rtol=1e-4 if dtype == "float32" else 1e-12, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_products_whose_threads_read_long_runs_are_not_summed_in_chunks(monkeypatch, dtype):
    """On two threads: a matrix times a vector (each thread takes whole rows), a vector times
    a matrix whose half rows are 16 KiB long, and one with too little work; on 16 threads, one
    whose chunks would be too short for a cheap sum of their partial sums: no chunks."""
    monkeypatch.setenv("EINJIT_NUM_THREADS", "2")
    long_half = (16 << 10) * 2 // np.dtype(dtype).itemsize
    for shapes in (((4096, 4096), (4096, 1)), ((1, 2048), (2048, long_half)),
                   ((1, 1024), (1024, 128))):
        assert not _in_chunks(_steps("ij,jk->ik", *shapes, dtype=dtype)), shapes
    shapes = (1, 4096), (4096, 1024)
    assert _in_chunks(_steps("ij,jk->ik", *shapes, dtype=dtype))
    monkeypatch.setenv("EINJIT_NUM_THREADS", "16")
    assert not _in_chunks(_steps("ij,jk->ik", *shapes, dtype=dtype))
