"""einsum in complex64 and complex128 on einjit's kernels: numpy's promotion (float32 with
complex64, float64 with complex64, a real operand converted once), out= of a wider complex
dtype, casting errors as numpy's, contract_expression(dtype="complex64"), special values
where the complex product formula and numpy agree, and identical bits run to run on 2 and 3
threads. (The equation tables and random equations run in complex through the `any_dtype`
fixture, test_einsum_jit.py.)"""

import numpy as np
import pytest
from frontend_support import (
    assert_close,
    jit_available,
    numpy_einsum_calls,
    numpy_einsum_forbidden,
    random_operands,
)

import einjit
from einjit.einsum import _NATIVE

pytestmark = [pytest.mark.native,
              pytest.mark.skipif(not jit_available() or np.dtype(np.complex64) not in _NATIVE,
                                 reason="this host's backend has no complex kernels")]

COMPLEX = (np.complex64, np.complex128)


def _complex(rng, shape, dtype):
    return random_operands(rng, [shape], dtype)[0]


@pytest.mark.parametrize("real, cplx, expected", [
    (np.float32, np.complex64, np.complex64), (np.float64, np.complex64, np.complex128),
    (np.float32, np.complex128, np.complex128), (np.float64, np.complex128, np.complex128)])
def test_real_and_complex_operands_compute_in_numpys_promoted_dtype(real, cplx, expected):
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (13, 11)).astype(real)
    b, c = (_complex(rng, shape, cplx) for shape in ((11, 9), (9, 5)))
    with numpy_einsum_forbidden():
        result = einjit.einsum("ij,jk,kl->il", a, b, c)
    theirs = np.einsum("ij,jk,kl->il", a, b, c)
    assert result.dtype == theirs.dtype == expected
    wide = np.clongdouble
    assert_close(result, np.einsum("ij,jk,kl->il", *(x.astype(wide) for x in (a, b, c))),
                 expected, 11 * 9)


def _wide_reference(operands):
    """The tensor train in clongdouble, pairwise: one loop over all nine indices is 25 M
    steps of software quad arithmetic on aarch64, minutes under the lane's qemu."""
    return np.einsum("af,fbg,gch,hdi,ie->abcde", *[o.astype(np.clongdouble) for o in operands],
                     optimize=True)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_contract_expression_in_complex(dtype):
    rng = np.random.default_rng(2)
    shapes = [(7, 8), (8, 5, 9), (9, 6, 8), (8, 5, 7), (7, 6)]
    expr = einjit.contract_expression("af,fbg,gch,hdi,ie->abcde", *shapes, dtype=dtype)
    assert "dtype: " + np.dtype(dtype).name in str(expr)
    operands = random_operands(rng, shapes, dtype)
    with numpy_einsum_forbidden():
        result = expr(*operands)
        again = expr(*operands)
    assert result.dtype == dtype and np.array_equal(result, again)
    assert_close(result, _wide_reference(operands), dtype, 100)
    # a real operand of a complex expression is converted, as numpy casts it
    real = [o.real.copy() if i == 0 else o for i, o in enumerate(operands)]
    with numpy_einsum_forbidden():
        mixed = expr(*real)
    assert mixed.dtype == dtype
    assert_close(mixed, _wide_reference(real), dtype, 100)


def test_out_of_complex128_for_complex64_operands_computes_in_complex128():
    """numpy's einsum promotes out's dtype with the operands': complex64 operands into a
    complex128 out compute in complex128 (written in place)."""
    rng = np.random.default_rng(3)
    a, b = (_complex(rng, s, np.complex64) for s in ((20, 30), (30, 10)))
    out = np.zeros((20, 10), np.complex128)
    with numpy_einsum_forbidden():
        assert einjit.einsum("ij,jk->ik", a, b, out=out) is out
    exact = a.astype(np.clongdouble) @ b.astype(np.clongdouble)
    assert_close(out, exact, np.complex128, 30)
    # a complex64 computation would be off by float32's rounding: this one is float64's
    assert np.abs(out - exact).max() < 1e-12


def test_complex_results_into_a_complex64_out_need_a_casting_that_allows_it():
    rng = np.random.default_rng(4)
    a, b = (_complex(rng, s, np.complex128) for s in ((4, 5), (5, 3)))
    out = np.zeros((4, 3), np.complex64)
    with pytest.raises(TypeError):
        np.einsum("ij,jk->ik", a, b, out=out)
    with pytest.raises(TypeError):
        einjit.einsum("ij,jk->ik", a, b, out=out)
    with numpy_einsum_forbidden():
        einjit.einsum("ij,jk->ik", a, b, out=out, casting="same_kind")
    np.testing.assert_allclose(out, (a @ b).astype(np.complex64), rtol=1e-6)


@pytest.mark.parametrize("operands, options", [
    ([np.ones((2, 3), np.complex64), np.ones((3, 4))], {"out": np.zeros((2, 4))}),
    ([np.ones((2, 3), np.complex128), np.ones((3, 4))], {"dtype": np.float64}),
    ([np.ones((2, 3), np.complex128), np.ones((3, 4))], {"dtype": np.complex64}),
])
def test_casts_numpy_refuses_raise_numpys_error(operands, options):
    with pytest.raises(TypeError) as theirs:
        np.einsum("ij,jk->ik", *operands, **options)
    with numpy_einsum_calls() as calls, pytest.raises(TypeError) as ours:
        einjit.einsum("ij,jk->ik", *operands, **options)
    assert len(calls) == 1 and str(ours.value) == str(theirs.value)


# the complex calls einjit once handed to numpy (test_errors, test_numpy_dropin): now on the
# kernels, numpy's dtype and shape, values within the dtype's tolerance
COMPUTED = [
    ("ij->i", [np.ones((2, 3), np.complex64)], {}),
    ("ij,jk->ik", [np.ones((2, 3)), np.ones((3, 4), np.complex128)], {}),
    ("ij,jk", [np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)],
     {"dtype": np.complex128}),
    ("ij,jk", [np.ones((2, 3)), np.ones((3, 4))], {"out": np.zeros((2, 4), np.complex128)}),
    ("ij,jk->ik", [np.arange(12.).reshape(3, 4) * (1 + 1j), np.arange(8.).reshape(4, 2) - 2j],
     {}),
    ("i->", [np.linspace(0, 1, 4097) * (1 + 1j)], {}),
]


@pytest.mark.parametrize("equation, operands, kwargs", COMPUTED)
def test_complex_calls_run_on_the_kernels(equation, operands, kwargs):
    theirs = np.einsum(equation, *operands, **dict(kwargs))
    with numpy_einsum_forbidden():
        ours = einjit.einsum(equation, *operands, **dict(kwargs))
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    assert np.shape(ours) == np.shape(theirs) and type(ours) is type(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6 if theirs.dtype == np.complex64
                               else 1e-14, atol=1e-6)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(9, 6), (6, 7)]),             # a contraction
    ("ij,ij->ij", [(9, 6), (9, 6)]),             # a Hadamard product (binary mul)
    ("bij,bjk->bki", [(3, 9, 6), (3, 6, 7)]),    # a batch, the result transposed
])
def test_special_values_as_numpy_where_the_formula_agrees(dtype, equation, shapes):
    """±0, inf and NaN in either part of products: NaN where numpy's result is NaN, and every
    other part equal to numpy's (the same terms: a product's parts are ar br - ai bi and
    ar bi + ai br, in both). Reductions of one operand are products with a ones vector
    (1 + 0j): there an inf or NaN part makes the other part NaN, where numpy's plain sum keeps
    it (README, complex); they are not among these cases, nor are chains of three operands,
    whose grouping decides where inf - inf meets, in real arithmetic too."""
    rng = np.random.default_rng(6)
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0]
    for trial in range(12):
        operands = random_operands(rng, shapes, dtype)
        for array in operands:
            for _ in range(2):
                index = tuple(int(rng.integers(s)) for s in array.shape)
                value = specials[int(rng.integers(len(specials)))]
                part = array.real if rng.random() < 0.5 else array.imag
                part[index] = value
        if equation == "ij,ij->ij":
            operands[1] = operands[0][::-1].copy()
        with np.errstate(all="ignore"):
            theirs = np.einsum(equation, *operands)
            with numpy_einsum_forbidden():
                ours = einjit.einsum(equation, *operands)
        for part in ("real", "imag"):
            mine, numpys = getattr(ours, part), getattr(theirs, part)
            assert np.array_equal(np.isnan(mine), np.isnan(numpys)), (trial, part)
            finite = np.isfinite(numpys)
            assert np.array_equal(mine[~finite & ~np.isnan(numpys)],
                                  numpys[~finite & ~np.isnan(numpys)]), (trial, part)
            tolerance = 1e-5 if dtype == np.complex64 else 1e-13
            np.testing.assert_allclose(mine[finite], numpys[finite], rtol=tolerance,
                                       atol=tolerance)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_threads_give_identical_bits_run_to_run(dtype, monkeypatch):
    rng = np.random.default_rng(7)
    shapes = [(30, 40, 8), (40, 8, 50), (50, 20)]
    operands = random_operands(rng, shapes, dtype)
    for threads in ("2", "3"):
        monkeypatch.setenv("EINJIT_NUM_THREADS", threads)
        with numpy_einsum_forbidden():
            runs = [einjit.einsum("abc,bcd,de->ae", *operands) for _ in range(3)]
        assert all(r.tobytes() == runs[0].tobytes() for r in runs[1:]), threads
        assert_close(runs[0], np.einsum("abc,bcd,de->ae",
                                        *[o.astype(np.clongdouble) for o in operands]),
                     dtype, 320)
