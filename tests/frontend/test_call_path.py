"""The per-call paths of a compiled expression, of einsum's cached plans and of a one-step
plan: what they take without the general checks (operands and out of the expression's
dtype, shapes and C strides, a writable out overlapping no operand) is computed in place,
and everything else (other strides, dtypes or shapes, a read-only or an overlapping out)
is refused or computed exactly as the general path does."""

import sys

import numpy as np
import pytest
from frontend_support import numpy_einsum_forbidden

import einjit
from einjit.einsum import plan_cache
from einjit.frontend import plan as plan_module
from einjit.frontend.errors import EinsumValueError
from einjit.ir.reference import execute_reference
from einjit.runtime.arrays import data_address

pytestmark = pytest.mark.native

N = 24
einsum_module = sys.modules["einjit.einsum"]     # einjit.einsum is the function


def _operands(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (N, N)).astype(dtype) for _ in range(2)]


def _tolerance(dtype):
    return 1e-5 if np.dtype(dtype) == np.float32 else 1e-12


def _general_path_calls(monkeypatch):
    """The calls that reach the general path (einjit.einsum._run), recorded."""
    calls = []
    general = einsum_module._run

    def recorded(*args, **kwargs):
        calls.append(args)
        return general(*args, **kwargs)
    monkeypatch.setattr(einsum_module, "_run", recorded)
    return calls


def test_a_plain_out_is_written_in_place_without_the_general_path(monkeypatch, dtype):
    a, b = _operands(dtype)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    calls = _general_path_calls(monkeypatch)
    out = np.full((N, N), np.nan, dtype)
    with numpy_einsum_forbidden():
        assert expr(a, b, out=out) is out
        result = expr(a, b)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=_tolerance(dtype),
                               atol=_tolerance(dtype))
    assert result.dtype == dtype and np.array_equal(result, out)
    assert calls == []


@pytest.mark.parametrize("operand", [0, 1])
@pytest.mark.parametrize("shift, overlaps", [(-1, True), (0, False), (1, False),
                                             (-N * N + 1, True)])
def test_out_next_to_or_over_an_operand(monkeypatch, dtype, operand, shift, overlaps):
    """out and one operand in one buffer, out starting `shift` elements after the operand's
    end: where they share an element the result is computed aside (the general path) and
    is what it would be from copies of the operands; where they only touch, in place."""
    a, b = _operands(dtype, seed=1)
    buffer = np.zeros(4 * N * N, dtype)
    start = N * N
    shared = buffer[start:start + N * N].reshape(N, N)
    shared[...] = (a, b)[operand]
    out = buffer[2 * N * N + shift:3 * N * N + shift].reshape(N, N)
    operands = [a, b]
    operands[operand] = shared
    expected = a.astype(np.float64) @ b
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    calls = _general_path_calls(monkeypatch)
    assert expr(*operands, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=_tolerance(dtype), atol=_tolerance(dtype))
    assert len(calls) == overlaps
    assert (buffer[:start] == 0).all()


def test_a_read_only_out_is_refused_and_left_alone(dtype):
    a, b = _operands(dtype)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    out = np.full((N, N), 5, dtype)
    out.flags.writeable = False
    with pytest.raises(EinsumValueError, match="read-only"):
        expr(a, b, out=out)
    assert (out == 5).all()


def test_an_out_of_another_shape_is_refused(dtype):
    a, b = _operands(dtype)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    for shape in [(N, N + 1), (N * N,), (1, N, N)]:
        with pytest.raises(EinsumValueError, match=r"out has shape"):
            expr(a, b, out=np.zeros(shape, dtype))


def test_outs_the_fast_path_does_not_take_are_computed_as_the_general_path_does(dtype):
    a, b = _operands(dtype, seed=2)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    expected = a.astype(np.float64) @ b
    holder = np.zeros((N, 2 * N), dtype)
    other = np.float64 if np.dtype(dtype) == np.float32 else np.complex128
    for out in [np.zeros((N, N), dtype, order="F"), holder[:, ::2], holder[:, N:],
                np.zeros((N, N), other), np.zeros((N, N), np.dtype(dtype).newbyteorder())]:
        assert expr(a, b, out=out) is out
        np.testing.assert_allclose(out.real if out.dtype.kind == "c" else out, expected,
                                   rtol=_tolerance(dtype), atol=_tolerance(dtype))


def test_operands_the_fast_path_does_not_take(dtype):
    a, b = _operands(dtype, seed=3)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    expected = a.astype(np.float64) @ b
    read_only = a.copy()
    read_only.flags.writeable = False
    wider = np.float64 if np.dtype(dtype) == np.float32 else np.longdouble
    cases = [(np.asfortranarray(a), b), (a, np.ascontiguousarray(b.T).T),
             (np.pad(a, ((0, 0), (0, 3)))[:, :N], b), (read_only, b),
             (a.astype(np.dtype(dtype).newbyteorder()), b), (a.view(_Subclass), b)]
    for x, y in cases:
        result = expr(x, y)
        assert result.dtype == dtype and type(result) is np.ndarray
        np.testing.assert_allclose(result, expected, rtol=_tolerance(dtype),
                                   atol=_tolerance(dtype))
    for x, wide in [(a.astype(wider), wider), (a.tolist(), np.float64)]:
        promoted = expr(x, b)      # computed in numpy's promotion of the dtypes
        assert promoted.dtype == np.result_type(wide, dtype)
        np.testing.assert_allclose(promoted, expected, rtol=_tolerance(dtype),
                                   atol=_tolerance(dtype))
    for shapes in [((N, N + 1), (N, N)), ((N, N), (N - 1, N)), ((N * N,), (N, N))]:
        x, y = (np.zeros(shape, dtype) for shape in shapes)
        with pytest.raises(EinsumValueError, match="was compiled for"):
            expr(x, y)
    with pytest.raises(EinsumValueError, match="takes 2 operands"):
        expr(a)


class _Subclass(np.ndarray):
    pass


def test_einsums_cached_plans_are_kept_apart_by_strides(dtype):
    """Operands of the same shapes with other strides: a plan of their own, each result
    right (a plan used with the wrong strides would read the wrong elements)."""
    a, b = _operands(dtype, seed=4)
    layouts = [(a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b)),
               (np.asfortranarray(a), np.asfortranarray(b)), (a, b)]
    with numpy_einsum_forbidden():
        for _ in range(2):
            for x, y in layouts:
                misses = plan_cache().misses
                result = einjit.einsum("ij,jk->ik", x, y)
                np.testing.assert_allclose(result, a.astype(np.float64) @ b,
                                           rtol=_tolerance(dtype), atol=_tolerance(dtype))
                hit = einjit.einsum("ij,jk->ik", x, y)
                assert plan_cache().misses == misses or plan_cache().misses == misses + 1
                assert np.array_equal(hit, result)


ONE_STEP = [("ij,jk->ik", [(9, 7), (7, 5)]), ("i,i->", [(13,), (13,)]),
            ("ij->i", [(6, 11)]), ("ij->j", [(6, 11)]), ("ij->ji", [(6, 11)])]


@pytest.mark.parametrize("equation, shapes", ONE_STEP)
def test_one_step_plans_run_on_arrays_and_on_addresses(equation, shapes, dtype):
    rng = np.random.default_rng(5)
    operands = [rng.uniform(-1, 1, shape).astype(dtype) for shape in shapes]
    expr = einjit.contract_expression(equation, *shapes, dtype=dtype)
    plan = expr._prepared.plan
    assert len(plan.steps) == 1 and plan._direct is not None
    expected = np.einsum(equation, *[x.astype(np.float64) for x in operands])
    on_arrays = np.full(expected.shape, np.nan, dtype)
    plan.run(operands, on_arrays)
    on_addresses = np.full(expected.shape, np.nan, dtype)
    plan.run_addresses([data_address(x) for x in operands], data_address(on_addresses))
    np.testing.assert_allclose(on_arrays, expected, rtol=_tolerance(dtype),
                               atol=_tolerance(dtype))
    assert np.array_equal(on_addresses, on_arrays)


def test_a_one_step_plan_split_over_threads(monkeypatch, dtype):
    """A product large enough for two threads: its one step runs its shares on the
    workers, from run() on arrays and from the expression's out= path on addresses."""
    monkeypatch.setenv("EINJIT_NUM_THREADS", "2")
    rng = np.random.default_rng(6)
    a, b = (rng.uniform(-1, 1, (256, 256)).astype(dtype) for _ in range(2))
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    plan = expr._prepared.plan
    compiled = plan._program[0][0][0].__self__
    assert len(compiled._shares) == 2 and compiled.single is None
    expected = a.astype(np.float64) @ b
    out = np.full((256, 256), np.nan, dtype)
    for result in (expr(a, b), expr(a, b, out=out)):
        np.testing.assert_allclose(result, expected, rtol=10 * _tolerance(dtype),
                                   atol=10 * _tolerance(dtype))


def test_the_reference_executor_still_runs_one_step_plans(monkeypatch, dtype):
    """A plan's executor swapped in (the tests' numpy reference): every path of a call
    goes through it, none straight to the compiled step."""
    steps = []

    def recorded(op, *arrays):
        steps.append(op)
        return execute_reference(op, *arrays)
    a, b = _operands(dtype, seed=7)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    einjit.einsum("ij,jk->ik", a, b)
    monkeypatch.setattr(plan_module, "EXECUTOR", recorded)
    out = np.zeros((N, N), dtype)
    results = [expr(a, b), expr(a, b, out=out), einjit.einsum("ij,jk->ik", a, b)]
    assert len(steps) == 3
    for result in results:
        np.testing.assert_allclose(result, a.astype(np.float64) @ b, rtol=_tolerance(dtype),
                                   atol=_tolerance(dtype))


@pytest.mark.parametrize("shape, threaded", [((128, 8, 64), False), ((128, 16, 64), False),
                                             ((256, 16, 64), False), ((256, 16, 256), True),
                                             ((256, 256, 256), True)])
def test_a_product_gets_a_second_thread_only_for_enough_flops(monkeypatch, dtype, shape,
                                                               threaded):
    """Two threads asked for, products of several shared iterations: those under twice
    MIN_FLOPS_PER_THREAD run on the calling thread alone, the larger ones in two shares;
    every result right."""
    from einjit.codegen.compile import MIN_FLOPS_PER_THREAD
    monkeypatch.setenv("EINJIT_NUM_THREADS", "2")
    m, k, n = shape
    rng = np.random.default_rng(8)
    a, b = rng.uniform(-1, 1, (m, k)).astype(dtype), rng.uniform(-1, 1, (k, n)).astype(dtype)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    (compiled,) = [step[0].__self__ for step in expr._prepared.plan._program[0]]
    assert compiled.plan.shared_iterations >= 2
    assert (2 * m * k * n >= 2 * MIN_FLOPS_PER_THREAD) == threaded
    assert len(compiled._shares) == (2 if threaded else 1)
    np.testing.assert_allclose(expr(a, b), a.astype(np.float64) @ b, rtol=_tolerance(dtype),
                               atol=_tolerance(dtype) * k)


def test_the_plan_cache_keeps_shortcuts_apart_from_plans_and_forgets_them_together():
    from einjit.plan_cache import PlanCache
    cache = PlanCache(3)
    cache.remember("ij,jk->ik", "run it")
    assert cache.shortcut("ij,jk->ik") == "run it" and cache.shortcut("other") is None
    assert len(cache) == 0 and cache.hits == 0
    cache.hit("the plan's key")
    assert cache.hits == 1
    for name in ("a", "b"):
        cache.remember(name, name)
    assert cache.shortcut("ij,jk->ik") == "run it"
    cache.remember("ij,jk->ik", "again")                 # the same signature: replaced
    assert cache.shortcut("ij,jk->ik") == "again" and cache.shortcut("a") == "a"
    cache.remember("c", "c")                             # a fourth: the three are forgotten
    assert [cache.shortcut(name) for name in ("ij,jk->ik", "a", "b", "c")] == \
        [None, None, None, "c"]
    cache.clear()
    assert cache.shortcut("c") is None and cache.hits == 0


def test_einsum_runs_the_plan_its_subscripts_ran_last_through_its_array_call(dtype):
    """The second call of a signature remembers its plan's array call; calls with other
    shapes, strides or dtypes miss it and take the plan cache (which then remembers theirs),
    and every result is right."""
    rng = np.random.default_rng(4)
    shapes = [((6, 7), (7, 8)), ((5, 7), (7, 8)), ((6, 7), (7, 8))]
    other = np.float64 if np.dtype(dtype) == np.float32 else np.float32
    with numpy_einsum_forbidden():
        for _ in range(3):
            for first, second in shapes:
                a, b = rng.standard_normal(first).astype(dtype), \
                    rng.standard_normal(second).astype(dtype)
                for x, y in [(a, b), (np.asfortranarray(a), b), (a.astype(other),
                                                                  b.astype(other))]:
                    for _ in range(2):
                        result = einjit.einsum("ij,jk->ik", x, y)
                        assert result.dtype == x.dtype
                        np.testing.assert_allclose(result, a.astype(np.float64) @ b,
                                                   rtol=1e-5, atol=1e-5)
                    call, allocate, key = plan_cache().shortcut(
                        ("ij,jk->ik", True, 3, einsum_module.threads_setting()))
                    out = allocate("K")
                    if key[1] != ((x.shape, x.strides), (y.shape, y.strides)):
                        # a plan of more steps has no array call: the last one refuses these
                        assert x.flags.f_contiguous and call(id(x), id(y), id(out)) == 1
                        continue
                    assert call(id(x), id(y), id(out)) == 0
                    np.testing.assert_array_equal(out, einjit.einsum("ij,jk->ik", x, y))
                    assert call(id(y), id(x), id(out)) == 1


def test_a_shortcut_hit_counts_as_a_plan_cache_hit_and_numpys_calls_take_none():
    a, b = _operands(np.float32)
    einjit.einsum("ij,jk->ik", a, b)
    einjit.einsum("ij,jk->ik", a, b)
    hits = plan_cache().hits
    einjit.einsum("ij,jk->ik", a, b)
    assert plan_cache().hits == hits + 1
    ints = [np.arange(4).reshape(2, 2)] * 2
    for _ in range(2):
        np.testing.assert_array_equal(einjit.einsum("ij,jk->ik", *ints), ints[0] @ ints[1])
