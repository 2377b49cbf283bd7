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

from support import assert_well_formed, canary, guarded, run_guarded, strided

DTYPES = ("complex64", "complex128")
PART = {"complex64": np.float32, "complex128": np.float64}
UNIT_ROUNDOFF = {"complex64": 2.0 ** -24, "complex128": 2.0 ** -53}
C_PADDING = 7                     # canary elements before and after C's extent

K_VALUES = (1, 2, 3, 16, 17, 64)
BATCH_VALUES = (1, 3, 16)
PARTNERS = (1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 40)

runs_here = pytest.mark.skipif(host_isa() not in ("x86_64", "aarch64"),
                               reason="complex BRGEMM kernels run on x86-64 and AArch64 hosts")
x86_only = pytest.mark.skipif(host_isa() != "x86_64", reason="the x86-64 kernel's grouping")
aarch64_only = pytest.mark.skipif(host_isa() != "aarch64", reason="the FCMLA kernel's order")


def canary_buffer(size, dtype):
    """`size` complex elements whose parts are all the canary."""
    part = np.dtype(PART[dtype])
    words = np.full(2 * size, canary(part), dtype=np.uint64 if part.itemsize == 8 else np.uint32)
    return words.view(part).view(dtype)


def guarded_buffer(size, dtype):
    """`size` complex canaries ending right before a no-access page."""
    return guarded(2 * size, PART[dtype]).view(dtype)


def part_bits(array):
    parts = array.view(PART[array.dtype.name])
    return parts.view(np.uint64 if parts.itemsize == 8 else np.uint32)


class Layout:
    def __init__(self, m, n, k, padded):
        gap = (3, 2, 5) if padded else (0, 0, 0)
        self.ld_a, self.ld_b, self.ld_c = m + gap[0], k + gap[1], m + gap[2]
        stride_gap = (7, 11) if padded else (0, 0)
        self.stride_a = self.ld_a * k + stride_gap[0]
        self.stride_b = self.ld_b * n + stride_gap[1]


def _random(rng, shape, integers, dtype):
    if integers:   # small integer parts: every partial sum is exact, in any order
        parts = rng.integers(-4, 5, size=(2, *shape)).astype(np.float64)
    else:
        parts = rng.uniform(-1.0, 1.0, size=(2, *shape))
    return _complex(parts, dtype)


def _complex(parts, dtype):
    """parts[0] + i parts[1], set part by part (1j * inf would be nan+infj)."""
    values = np.empty(parts.shape[1:], dtype)
    values.real, values.imag = parts
    return values


class Problem:
    """Operands of one call in canary-filled buffers, and the complex128 reference."""

    def __init__(self, m, n, k, br, layout, integers, seed, dtype, allocate=canary_buffer,
                 c_after=C_PADDING, values=None):
        rng = np.random.default_rng(seed)
        self.m, self.n, self.k, self.br, self.layout = m, n, k, br, layout
        self.integers, self.dtype = integers, dtype
        lay = layout
        self.a = allocate((br - 1) * lay.stride_a + (k - 1) * lay.ld_a + m, dtype)
        self.b = allocate((br - 1) * lay.stride_b + (n - 1) * lay.ld_b + k, dtype)
        c_extent = (n - 1) * lay.ld_c + m
        self.c_buffer = allocate(C_PADDING + c_extent + c_after, dtype)
        self.c = self.c_buffer[C_PADDING:C_PADDING + c_extent]
        a_view = strided(self.a, (br, m, k), (lay.stride_a, 1, lay.ld_a))
        b_view = strided(self.b, (br, k, n), (lay.stride_b, 1, lay.ld_b))
        c_view = strided(self.c, (m, n), (1, lay.ld_c))
        fill = values or (lambda shape: _random(rng, shape, integers, dtype))
        a_view[...], b_view[...], c_view[...] = fill((br, m, k)), fill((br, k, n)), fill((m, n))
        a128, b128 = a_view.astype(np.complex128), b_view.astype(np.complex128)
        c128 = c_view.astype(np.complex128)
        with np.errstate(invalid="ignore", over="ignore"):
            # no BLAS: the products one by one, as the textbook formula has them
            self.expected = c128 + np.einsum("imk,ikn->mn", a128, b128, optimize=False)
            # first-order bound of each part's rounding error, summed in any order (complex128:
            # the reference's own error counts once more)
            size = lambda z: np.abs(z.real) + np.abs(z.imag)     # noqa: E731
            magnitude = size(c128) + np.einsum("imk,ikn->mn", size(a128), size(b128))
        sums = 2 if dtype == "complex128" else 1
        self.tolerance = sums * (2 * k * br + 3) * UNIT_ROUNDOFF[dtype] * magnitude
        self.in_c = np.zeros(self.c_buffer.size, dtype=bool)
        strided(self.in_c[C_PADDING:], (m, n), (1, lay.ld_c))[...] = True

    def call(self, kernel):
        lay = self.layout
        kernel(self.a, self.b, self.c, lay.ld_a, lay.ld_b, lay.ld_c, lay.stride_a, lay.stride_b)

    def got(self):
        return strided(self.c, (self.m, self.n), (1, self.layout.ld_c)).astype(np.complex128)

    def verify(self):
        words = part_bits(self.c_buffer).reshape(-1, 2)
        touched = np.flatnonzero(~self.in_c & (words != canary(PART[self.dtype])).any(axis=1))
        assert touched.size == 0, (
            f"wrote outside the {self.m}x{self.n} sub-matrix of C (ld_c={self.layout.ld_c}) at "
            f"element offsets {(touched - C_PADDING)[:10].tolist()}")
        got = self.got()
        for part in ("real", "imag"):
            have, want = getattr(got, part), getattr(self.expected, part)
            if self.integers:
                wrong = np.argwhere(have != want)
            else:
                wrong = np.argwhere(~(np.abs(have - want) <= self.tolerance))
            if wrong.size:
                r, j = wrong[0]
                pytest.fail(f"{wrong.shape[0]} wrong {part} parts of C; first at row {r}, "
                            f"column {j}: got {got[r, j]!r}, expected {self.expected[r, j]!r}")


def check(m, n, k, br, padded, integers, dtype, seed=0):
    problem = Problem(m, n, k, br, Layout(m, n, k, padded), integers, seed, dtype)
    problem.call(einjit.brgemm(m, n, k, br, dtype=dtype))
    problem.verify()


def _sweep(dimension):
    """Every value 1..40 of `dimension`, each with three partners for the other dimension and
    rotating K, batch size, layout and data."""
    cases = []
    for value in range(1, 41):
        for turn in range(3):
            index = 3 * value + turn
            other = PARTNERS[index % len(PARTNERS)]
            m, n = (value, other) if dimension == "m" else (other, value)
            cases.append((m, n, K_VALUES[index % len(K_VALUES)],
                          BATCH_VALUES[(index // 2) % len(BATCH_VALUES)], index % 2 == 0,
                          index % 3 == 0))
    return cases


def _case_id(case):
    m, n, k, br, padded, integers = case
    return (f"m{m}-n{n}-k{k}-br{br}-{'padded' if padded else 'tight'}-"
            f"{'int' if integers else 'float'}")


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _sweep("m"), ids=_case_id)
def test_every_m(case, dtype):
    check(*case, dtype)


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _sweep("n"), ids=_case_id)
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
                         ids=_case_id)
def test_large_shapes(case, dtype):
    check(*case, dtype)


@runs_here
@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_strides_may_overlap_and_repeat(dtype):
    """A stride of 0 sums the same A (or B) br times; a stride shorter than the matrix
    overlaps the entries."""
    m, n, k, br = 6, 5, 4, 3
    for stride_a, stride_b in ((0, k * n), (m * k, 0), (m, 2)):
        layout = Layout(m, n, k, False)
        layout.stride_a, layout.stride_b = stride_a, stride_b
        problem = Problem(m, n, k, br, layout, True, 1, dtype)
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
        return _complex(parts, dtype)
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
        problem = Problem(m, n, k, br, Layout(m, n, k, seed % 2 == 1), False, seed, dtype,
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
    problems = [Problem(m, n, k, br, Layout(m, n, k, False), True, seed, dtype,
                        allocate=guarded_buffer, c_after=0)
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
        a = _complex(np.array([[bits[2]], [bits[3]]]), dtype)
        b = _complex(np.array([[bits[4]], [bits[5]]]), dtype)
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
