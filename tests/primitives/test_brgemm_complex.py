"""BRGEMM of complex64 and complex128 (C += sum_i A_i B_i, interleaved, column-major) against
numpy in complex128 arithmetic.

Through the public einjit.brgemm with isa=None: on an x86-64 host the kernels of the host's
variant (and AVX2 in the run that forces it), in the aarch64 lane the FCMLA kernels. The
shapes pair every M in 1..40 (every remainder of a vector of either width) and every N in
1..40 with several partners, K up to the limit, batches of 1
and more with strides, leading dimensions past the rows; every operand's gaps and a padding
around C hold a NaN-payload canary (a read of a gap turns C into NaN, a write outside the
M x N sub-matrix changes a canary's bits), and a guard page ends each operand in one test.
"""

import itertools
import re

import numpy as np
import pytest

import einjit
from einjit.errors import KernelParameterError, OperandError
from einjit.runtime.host import host_isa

from brgemm_support import Layout, Problem, case_id, check, sweep
from support import assert_well_formed, from_parts, guarded, run_guarded

DTYPES = ("complex64", "complex128")
PART = {"complex64": np.float32, "complex128": np.float64}
PARTNERS = (1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 40)

runs_here = pytest.mark.skipif(host_isa() not in ("x86_64", "aarch64"),
                               reason="complex BRGEMM kernels run on x86-64 and AArch64 hosts")
x86_only = pytest.mark.skipif(host_isa() != "x86_64", reason="the x86-64 kernel's grouping")
aarch64_only = pytest.mark.skipif(host_isa() != "aarch64", reason="the FCMLA kernel's order")


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sweep("m", 40, PARTNERS), ids=case_id)
def test_every_m(case, dtype):
    check(*case, dtype)


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sweep("n", 40, PARTNERS), ids=case_id)
def test_every_n(case, dtype):
    check(*case, dtype)


@runs_here
@pytest.mark.parametrize("case", [
    (m, n, k, br, padded, False) for (m, n), k, br, padded in itertools.product(
        ((4, 3), (9, 7), (17, 6), (33, 13)), (1, 5, 300, 2048), (1, 2, 5), (False, True))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_k_and_batch_grid(case, dtype):
    check(*case, dtype)


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [(64, 64, 64, 16, True, False), (100, 70, 33, 2, True, True),
                                  (1024, 3, 5, 1, False, False), (5, 1024, 3, 1, True, False),
                                  # tight: A's columns 512 bytes or more apart, its panel copied
                                  (64, 64, 64, 1, False, False), (32, 7, 40, 1, False, True),
                                  (128, 8, 16, 1, False, False), (64, 9, 1000, 1, False, False),
                                  (64, 64, 64, 16, False, False), (32, 9, 20, 3, False, True),
                                  # K in chunks on AVX2
                                  (64, 20, 600, 1, False, False), (17, 7, 512, 1, True, True)],
                         ids=case_id)
def test_large_shapes(case, dtype):
    check(*case, dtype)


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_strides_may_overlap_and_repeat(dtype):
    """A stride of 0 sums the same A (or B) br times; a stride shorter than the matrix
    overlaps the entries."""
    m, n, k, br = 6, 5, 4, 3
    for stride_a, stride_b in ((0, k * n), (m * k, 0), (m, 2)):
        layout = Layout(m, n, k)
        layout.stride_a, layout.stride_b = stride_a, stride_b
        problem = Problem(m, n, k, br, dtype, layout, True, 1)
        problem.call(einjit.brgemm(m, n, k, br, dtype=dtype))
        problem.verify()


# --- special values -----------------------------------------------------------------------

SPECIAL_PARTS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0)


def _with_specials(rng, dtype, fraction):
    """Random complex values, `fraction` of the parts (either, both or neither) specials."""
    def fill(shape):
        parts = rng.uniform(-1.0, 1.0, size=(2, *shape))
        special = rng.random(parts.shape) < fraction
        parts[special] = rng.choice(SPECIAL_PARTS, int(special.sum()))
        return from_parts(parts, dtype)
    return fill


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, k, br, fraction", [
    (1, 1, 1, 1, 0.5), (3, 2, 1, 1, 0.3), (9, 5, 3, 2, 0.1), (17, 7, 16, 3, 0.02),
    (8, 4, 2, 1, 0.2), (33, 6, 5, 2, 0.05)])
def test_specials_land_where_numpy_puts_them(dtype, m, n, k, br, fraction):
    """±0, ±inf and NaN in either part: every NaN and every infinity (with its sign) of C is
    where numpy's complex128 result has it (the kernel's four separate sums hold the same
    infinities as numpy's products, so they cancel into NaN alike), the finite parts within
    the rounding bound; zeros compare equal whatever their sign (docs/brgemm.md)."""
    for seed in range(4):
        rng = np.random.default_rng(seed + 100 * m)
        problem = Problem(m, n, k, br, dtype, Layout.of(m, n, k, seed % 2 == 1), False, seed,
                          values=_with_specials(rng, dtype, fraction))
        problem.call(einjit.brgemm(m, n, k, br, dtype=dtype))
        got, want = problem.got(), problem.expected
        for part in ("real", "imag"):
            have, expected = getattr(got, part), getattr(want, part)
            assert np.array_equal(np.isnan(have), np.isnan(expected)), (
                f"seed {seed}: NaN {part} parts at {np.argwhere(np.isnan(have))[:5].tolist()}, "
                f"numpy's at {np.argwhere(np.isnan(expected))[:5].tolist()}")
            infinite = np.isinf(expected)
            assert np.array_equal(np.isinf(have), infinite), f"seed {seed}: {part} infinities"
            assert np.array_equal(have[infinite], expected[infinite]), f"seed {seed}: inf signs"
            finite = np.isfinite(expected) & np.isfinite(problem.tolerance)
            assert np.all(np.abs(have[finite] - expected[finite])
                          <= problem.tolerance[finite]), f"seed {seed}: finite {part} parts"


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
def test_textbook_products_of_infinities(dtype):
    """One product each, C = 0, as numpy's textbook formula has them (not C99 Annex G's
    recovery of infinities): inf * (0+1j) is nan+infj (inf * 0 in the real part), (inf+infj)
    * 1 is nan+nanj (inf * 0 in both parts), (1+1j) * (inf+0j) is inf+infj."""
    cases = [(np.inf, 1j, (np.nan, np.inf)), (complex(np.inf, np.inf), 1.0, (np.nan, np.nan)),
             (1 + 1j, complex(np.inf, 0.0), (np.inf, np.inf)),
             (complex(0.0, np.inf), 1j, (-np.inf, np.nan)), (complex(np.nan, 0.0), 2.0,
                                                              (np.nan, np.nan))]
    kernel = einjit.brgemm(1, 1, 1, 1, dtype=dtype)
    for a, b, (real, imag) in cases:
        c = np.zeros(1, dtype)
        kernel(np.array([a], dtype), np.array([b], dtype), c, 1, 1, 1, 0, 0)
        with np.errstate(invalid="ignore"):
            numpy_product = np.complex128(a) * np.complex128(b)
        for have, want, numpy_part in ((c[0].real, real, numpy_product.real),
                                       (c[0].imag, imag, numpy_product.imag)):
            assert (np.isnan(have) and np.isnan(want)) or have == want, (a, b, c[0])
            assert (np.isnan(numpy_part) and np.isnan(want)) or numpy_part == want


# --- guard pages -----------------------------------------------------------------------------

GUARD_CASES = [(m, n, 1 + (m + n) % 5, 2) for m, n in itertools.product(range(1, 18), (1, 5, 7))]


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
def test_no_access_past_the_last_element_of_any_operand(dtype):
    """A, B and C each end right before a no-access page (tight layouts); the kernels run in
    a forked child, so a fault fails the case that caused it."""
    problems = [Problem(m, n, k, br, dtype, Layout(m, n, k), True, seed, allocate=guarded,
                        c_after=0)
                for seed, (m, n, k, br) in enumerate(GUARD_CASES)]
    kernels = [einjit.brgemm(m, n, k, br, dtype=dtype) for m, n, k, br in GUARD_CASES]
    run_guarded(GUARD_CASES, problems, kernels, lambda case: f"kernel (m, n, k, br_size) = {case}")


# --- the code, and the dtypes other kernels refuse ----------------------------------------

# (m, n, k, batch) of the kernels whose code is read on every host
CODE_SHAPES = [(1, 1, 1, 1), (9, 5, 3, 2), (64, 64, 64, 16), (1024, 1024, 2048, 1024)]

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", CODE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_x86_code_decodes_and_combines_the_sums_once(shape, dtype):
    kernel = einjit.brgemm(*shape, dtype=dtype, isa="x86_64")
    assert_well_formed(kernel)
    text = kernel.disassemble()
    suffix = "ps" if dtype == "complex64" else "pd"
    assert re.search(rf"\bvfmadd231{suffix}\b", text)
    assert re.search(rf"\bvfmaddsub213{suffix}\b", text)
    assert len(kernel.code) < 16 * 1024, "loops, not unrolling, must keep the code small"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", CODE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_aarch64_code_decodes_and_multiplies_with_both_rotations(shape, dtype):
    kernel = einjit.brgemm(*shape, dtype=dtype, isa="aarch64")
    assert_well_formed(kernel)
    text = kernel.disassemble()
    # complex64: by element in the blocks, the vector form in an odd M's last row (along k)
    operand = r"v\d+\.(s\[0\]|4s)" if dtype == "complex64" else r"v\d+\.2d"
    arrangement = "4s" if dtype == "complex64" else "2d"
    for rotation in ("0", "0x5a"):
        assert re.search(rf"\bfcmla v\d+\.{arrangement}, v\d+\.{arrangement}, {operand}, "
                         rf"#{rotation}$", text, re.M), rotation
    assert not re.search(r"\bfcmla .*#0x(b4|10e)$", text, re.M), "only the rotations #0 and #90"
    assert len(kernel.code) < 16 * 1024, "loops, not unrolling, must keep the code small"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("make", [lambda dtype: einjit.unary("relu", 4, 4, dtype=dtype),
                                  lambda dtype: einjit.binary("div", 4, 4, dtype=dtype)],
                         ids=["unary", "binary"])
def test_element_wise_kernels_refuse_complex_naming_it(make, dtype):
    """Element-wise ops without a complex form (test_eltwise_complex.py has those with one)."""
    with pytest.raises(KernelParameterError, match=f"does not take {dtype}"):
        make(dtype)


@runs_here
def test_a_complex_kernel_takes_only_arrays_of_its_dtype():
    kernel = einjit.brgemm(2, 2, 2, dtype="complex64")
    a = np.zeros(4, np.complex128)
    with pytest.raises(OperandError, match="has dtype complex128; expected complex64"):
        kernel(a, a, a, 2, 2, 2, 0, 0)


@x86_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_zero_sum_is_positive_where_numpy_keeps_minus_zero(dtype):
    """The documented difference in signed zeros: C = -0-0j, A = -1, B = 0: numpy's
    c + a*b keeps re(C) = -0 (-0 + -0), the kernel's sums start at +0 (+0 + -0 = +0)."""
    a, b = np.array([-1 + 0j], dtype), np.zeros(1, dtype)
    c = np.array([complex(-0.0, -0.0)], dtype)
    numpy_result = c + a * b
    einjit.brgemm(1, 1, 1, 1, dtype=dtype)(a, b, c, 1, 1, 1, 0, 0)
    assert np.signbit(numpy_result[0].real) and not np.signbit(c[0].real)
    assert c[0] == numpy_result[0]


@aarch64_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_single_product_keeps_numpys_signed_zeros(dtype):
    """FCMLA adds re a * re b, then -im a * im b, into C itself: with one product the sum is
    -0 exactly where numpy's c + a*b is (every term -0), so every sign of zero agrees."""
    values = np.array([0.0, -0.0])
    for bits in itertools.product(values, repeat=6):
        c = np.array([complex(bits[0], bits[1])], dtype)
        a = from_parts(np.array([[bits[2]], [bits[3]]]), dtype)
        b = from_parts(np.array([[bits[4]], [bits[5]]]), dtype)
        numpy_result = c + a * b
        einjit.brgemm(1, 1, 1, 1, dtype=dtype)(a, b, c, 1, 1, 1, 0, 0)
        assert np.array_equal(np.signbit(c.view(PART[dtype])),
                              np.signbit(numpy_result.view(PART[dtype]))), bits


@aarch64_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_fcmla_adds_to_c_before_the_cross_term(dtype):
    """The documented overflow difference: C = big, A = big + big i, B = 1 + 1j: numpy's
    re(a*b) = big - big = 0 leaves C finite; FCMLA adds big to C first (inf), then -big."""
    big = np.finfo(PART[dtype]).max / 2 * 1.5
    a, b = np.array([complex(big, big)], dtype), np.array([1 + 1j], dtype)
    c = np.array([complex(big, 0.0)], dtype)
    with np.errstate(over="ignore"):
        numpy_result = c + a * b
    einjit.brgemm(1, 1, 1, 1, dtype=dtype)(a, b, c, 1, 1, 1, 0, 0)
    assert np.isfinite(numpy_result[0].real) and c[0].real == np.inf
    assert numpy_result[0].imag == c[0].imag == np.inf
