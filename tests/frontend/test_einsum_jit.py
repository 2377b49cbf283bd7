"""The public path: einjit.einsum / contract_expression executing each TensorOperation with
op.execute (einjit.optimize + the JIT'd loop nests) against numpy.einsum, for float32 and
float64 (the `dtype` fixture), and the equation tables and random equations in complex64 and
complex128 too (`any_dtype`); `check` forbids numpy.einsum during einjit's call, so every
case here ran on einjit's kernels."""

import threading

import numpy as np
import pytest
from frontend_support import assert_close, jit_available, numpy_einsum_forbidden, random_operands
from test_einsum_lowering import EQUATIONS, VIEWS, _ids, _random_equation, check

import einjit
from einjit.einsum import plan_cache

pytestmark = pytest.mark.skipif(not jit_available(),
                                reason="needs einjit.optimize and einjit.codegen to execute")


@pytest.mark.parametrize("equation, shapes", EQUATIONS, ids=_ids())
def test_equation_table(equation, shapes, any_dtype):
    rng = np.random.default_rng(abs(hash((equation, str(shapes)))) % 2**32)
    check(equation, random_operands(rng, shapes, any_dtype))


@pytest.mark.parametrize("index", range(len(VIEWS)))
def test_views_and_transposes(index, dtype):
    equation, make = VIEWS[index]
    rng = np.random.default_rng(index)
    a = rng.standard_normal((12, 10)).astype(dtype)
    b = rng.standard_normal((10, 14)).astype(dtype)
    check(equation, list(make(a, b)))


@pytest.mark.parametrize("seed", range(30))
def test_random_equations(seed, any_dtype):
    rng = np.random.default_rng(5000 + seed)
    equation, shapes = _random_equation(rng)
    check(equation, random_operands(rng, shapes, any_dtype),
          optimize=["greedy", "optimal", "dp"][seed % 3])


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(67, 45), (45, 33)]), ("bij,bjk->bik", [(3, 40, 31), (3, 31, 29)]),
    ("abc,cd,de->abe", [(9, 10, 11), (11, 12), (12, 13)]),
    ("af,fbg,gch,hdi,ie->abcde", [(7, 8), (8, 5, 9), (9, 6, 8), (8, 5, 7), (7, 6)]),
    ("ijk,jkl->il", [(20, 17, 19), (17, 19, 23)]),
])
def test_larger_contractions(equation, shapes, any_dtype):
    rng = np.random.default_rng(9)
    check(equation, random_operands(rng, shapes, any_dtype))


def test_plans_are_cached(dtype):
    rng = np.random.default_rng(8)
    a, b = random_operands(rng, [(6, 7), (7, 8)], dtype)
    with numpy_einsum_forbidden():
        einjit.einsum("ij,jk->ik", a, b)
        hits = plan_cache().hits
        for _ in range(3):
            result = einjit.einsum("ij,jk->ik", a, b)
            assert result.dtype == dtype
            assert_close(result, a.astype(np.longdouble) @ b, dtype, 7)
    assert plan_cache().hits == hits + 3
    assert len(plan_cache()) <= plan_cache().maxsize


def test_plans_of_each_dtype_are_kept_apart():
    # same subscripts, shapes and element strides: one plan per dtype, each computing in it
    rng = np.random.default_rng(10)
    a, b = random_operands(rng, [(9, 7), (7, 8)], np.float64)
    with numpy_einsum_forbidden():
        for _ in range(2):
            for dtype in (np.float32, np.float64, np.float32):
                x, y = a.astype(dtype), b.astype(dtype)
                result = einjit.einsum("ij,jk->ik", x, y)
                assert result.dtype == dtype
                assert_close(result, x.astype(np.longdouble) @ y, dtype, 7)


def test_concurrent_calls_from_four_threads(dtype):
    equations = [("ij,jk->ik", [(16, 17), (17, 15)]), ("bij,bjk->bik", [(2, 9, 8), (2, 8, 7)]),
                 ("ij->ji", [(15, 19)]), ("af,fbg,gch->abch", [(3, 4), (4, 2, 5), (5, 3, 2)])]
    rng = np.random.default_rng(6)
    cases = [(eq, random_operands(rng, shapes, dtype)) for eq, shapes in equations]
    expected = {eq: np.einsum(eq, *[o.astype(np.longdouble) for o in ops]) for eq, ops in cases}
    expr = einjit.contract_expression("ij,jk->ik", (16, 17), (17, 15), dtype=dtype)
    errors = []

    def work(offset):
        try:
            for i in range(40):
                eq, ops = cases[(i + offset) % len(cases)]
                result = einjit.einsum(eq, *ops) if i % 2 else \
                    (expr(*ops) if eq == "ij,jk->ik" else einjit.einsum(eq, *ops))
                assert result.dtype == dtype
                assert_close(result, expected[eq], dtype, 17)
        except Exception as error:   # reported in the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_contract_expression_course_tensor_train(dtype):
    shapes = [(6, 5), (5, 4, 7), (7, 3, 6), (6, 4, 5), (5, 6)]
    expr = einjit.contract_expression("af,fbg,gch,hdi,ie->abcde", *shapes, dtype=dtype)
    rng = np.random.default_rng(12)
    operands = random_operands(rng, shapes, dtype)
    with numpy_einsum_forbidden():
        result = expr(*operands)
    assert result.dtype == dtype
    assert_close(result, np.einsum("af,fbg,gch,hdi,ie->abcde",
                                   *[o.astype(np.longdouble) for o in operands]), dtype, 100)
