"""BRGEMM (C += sum_i A_i B_i, FP32 and FP64, column-major) against numpy.

Everything goes through the public einjit.brgemm with isa=None, so the same tests check the
x86-64 kernels on the host and the A64 kernels in the aarch64 lane. Every kernel is generated
once per parameter set (einjit caches), and the pairings are chosen so that every M and every N
in 1..64 meets several values of the other dimension, of K and of the batch size.

Each check fills the gaps of the operands (ld gap rows, batch stride gaps) and a padding around
C with a NaN-payload canary: a read of a gap that reaches C turns it into NaN, and a write
outside the M×N sub-matrix changes a canary's bits. The guard-page test puts each operand
right before a no-access page, so a read past its last element faults. Every test runs for
both dtypes.
"""

import itertools
import re

import numpy as np
import pytest

import einjit

from support import assert_well_formed, bits, canary, canary_buffer, guarded, run_guarded, strided

C_PADDING = 19                    # canary elements before and after C's extent
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}
DTYPES = ("float32", "float64")

K_VALUES = (1, 2, 3, 16, 17, 64)
BATCH_VALUES = (1, 3, 16)
PARTNERS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 23, 31, 33, 47, 64)


class Layout:
    """Leading dimensions and batch strides (elements) of one call."""

    def __init__(self, m, n, k, padded):
        gap = (3, 2, 5) if padded else (0, 0, 0)
        self.ld_a, self.ld_b, self.ld_c = m + gap[0], k + gap[1], m + gap[2]
        stride_gap = (7, 11) if padded else (0, 0)
        self.stride_a = self.ld_a * k + stride_gap[0]
        self.stride_b = self.ld_b * n + stride_gap[1]




def _random(rng, shape, integers, dtype):
    if integers:   # small integers: every partial sum is exact
        return rng.integers(-4, 5, size=shape).astype(dtype)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


class Problem:
    """Operands of one BRGEMM call in canary-filled buffers, and the float64 reference."""

    def __init__(self, m, n, k, br, layout, integers, seed, allocate=canary_buffer,
                 c_after=C_PADDING, dtype="float32"):
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
        a_view[...] = _random(rng, (br, m, k), integers, dtype)
        b_view[...] = _random(rng, (br, k, n), integers, dtype)
        c_view[...] = _random(rng, (m, n), integers, dtype)
        a64, b64 = a_view.astype(np.float64), b_view.astype(np.float64)
        c64 = c_view.astype(np.float64)
        self.expected = c64 + np.einsum("imk,ikn->mn", a64, b64, optimize=True)
        # first-order bound on the rounding error of the sum in any order (float64: the
        # reference's own error counts once more)
        magnitude = np.abs(c64) + np.einsum("imk,ikn->mn", np.abs(a64), np.abs(b64),
                                            optimize=True)
        sums = 2 if dtype == "float64" else 1
        self.tolerance = sums * (k * br + 2) * UNIT_ROUNDOFF[dtype] * magnitude
        self.in_c = np.zeros(self.c_buffer.size, dtype=bool)
        strided(self.in_c[C_PADDING:], (m, n), (1, lay.ld_c))[...] = True

    def call(self, kernel):
        lay = self.layout
        kernel(self.a, self.b, self.c, lay.ld_a, lay.ld_b, lay.ld_c, lay.stride_a, lay.stride_b)

    def verify(self):
        outside = np.flatnonzero(~self.in_c & (bits(self.c_buffer) != canary(self.dtype)))
        assert outside.size == 0, (
            f"wrote outside the {self.m}x{self.n} sub-matrix of C (ld_c={self.layout.ld_c}) at "
            f"buffer offsets {(outside - C_PADDING)[:10].tolist()}")
        got = strided(self.c, (self.m, self.n), (1, self.layout.ld_c)).astype(np.float64)
        if self.integers:
            wrong = np.argwhere(got != self.expected)
        else:
            wrong = np.argwhere(~(np.abs(got - self.expected) <= self.tolerance))
        if wrong.size:
            r, j = wrong[0]
            pytest.fail(f"{wrong.shape[0]} wrong elements of C; first at row {r}, column {j}: "
                        f"got {got[r, j]!r}, expected {self.expected[r, j]!r}")


def check(m, n, k, br, padded, integers, seed=0, dtype="float32"):
    problem = Problem(m, n, k, br, Layout(m, n, k, padded), integers, seed, dtype=dtype)
    problem.call(einjit.brgemm(m, n, k, br, dtype=dtype))
    problem.verify()


def _case_id(case):
    m, n, k, br, padded, integers = case
    return (f"m{m}-n{n}-k{k}-br{br}-{'padded' if padded else 'tight'}-"
            f"{'int' if integers else 'float'}")


def _sweep(dimension):
    """Every value 1..64 of `dimension` ("m" or "n"), each paired with three partners for the
    other dimension and rotating K, batch size, layout and data."""
    cases = []
    for value, offset in itertools.product(range(1, 65), range(3)):
        turn = 3 * value + offset
        partner = PARTNERS[(7 * value + 5 * offset) % len(PARTNERS)]
        m, n = (value, partner) if dimension == "m" else (partner, value)
        cases.append((m, n, K_VALUES[turn % 6], BATCH_VALUES[turn // 6 % 3],
                      turn // 2 % 2 == 1, turn // 4 % 4 != 0))
    return cases


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _sweep("m"), ids=_case_id)
def test_every_m(case, dtype):
    check(*case, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _sweep("n"), ids=_case_id)
def test_every_n(case, dtype):
    check(*case, dtype=dtype)


GRID_SHAPES = ((16, 6), (15, 5), (33, 13), (7, 64))


@pytest.mark.parametrize("case", [
    (m, n, k, br, (k + br) % 2 == 0, br != 3)
    for (m, n), k, br in itertools.product(GRID_SHAPES, K_VALUES, BATCH_VALUES)], ids=_case_id)
@pytest.mark.parametrize("dtype", DTYPES)
def test_k_and_batch_grid(case, dtype):
    check(*case, dtype=dtype)


def _limit_sample():
    """Sizes up to the limits: each limit reached once, then seeded random shapes, kept to a
    few million multiply-adds each so the suite stays fast under emulation."""
    cases = [(1024, 1024, 1, 1), (1024, 9, 2048, 1), (13, 1024, 300, 2), (5, 3, 2048, 40),
             (17, 19, 3, 1024), (1, 1, 1, 1024), (1023, 1, 1, 1), (1, 1023, 2, 1)]
    rng = np.random.default_rng(2024)
    while len(cases) < 16:
        m, n = (int(x) for x in np.exp(rng.uniform(0, np.log(1024), size=2)).round())
        k = int(np.exp(rng.uniform(0, np.log(2048))).round())
        br = int(np.exp(rng.uniform(0, np.log(1024))).round())
        if m * n * k * br <= 4_000_000 and (m * k + k * n) * br <= 2_000_000:
            cases.append((m, n, k, br))
    return [(m, n, k, br, i % 2 == 1, False) for i, (m, n, k, br) in enumerate(cases)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _limit_sample(), ids=_case_id)
def test_sizes_up_to_the_limits(case, dtype):
    check(*case, seed=7, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_strides_may_overlap_and_repeat(dtype):
    """Stride 0 reuses one A and one B for every batch element."""
    m, n, k, br = 9, 7, 5, 4
    rng = np.random.default_rng(3)
    a = np.asfortranarray(_random(rng, (m, k), True, dtype))
    b = np.asfortranarray(_random(rng, (k, n), True, dtype))
    c = np.asfortranarray(_random(rng, (m, n), True, dtype))
    expected = c.astype(np.float64) + br * (a.astype(np.float64) @ b.astype(np.float64))
    einjit.brgemm(m, n, k, br, dtype=dtype)(a, b, c, m, k, m, 0, 0)
    np.testing.assert_array_equal(c, expected)


# --- guard pages: no read or write past the last element of an operand -------------------

GUARD_CASES = [(m, n, 1 + (m + n) % 5, 2) for m, n in itertools.product(range(1, 18), (1, 5, 7))]


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_access_past_the_last_element_of_any_operand(dtype):
    """A, B and C each end right before a no-access page (tight layouts, so the last element
    of the last column is the last element of the buffer). The kernels run in a forked child,
    so a fault is reported as a failure of the case that caused it."""
    problems = [Problem(m, n, k, br, Layout(m, n, k, False), True, seed, allocate=guarded,
                        c_after=0, dtype=dtype)
                for seed, (m, n, k, br) in enumerate(GUARD_CASES)]
    kernels = [einjit.brgemm(m, n, k, br, dtype=dtype) for m, n, k, br in GUARD_CASES]
    run_guarded(GUARD_CASES, problems, kernels, lambda case: f"kernel (m, n, k, br_size) = {case}")


# --- parameter validation and the A64 code, inspected on any host ---------------------------

@pytest.mark.parametrize("name, value", [
    ("m", 0), ("m", 1025), ("n", 0), ("n", 1025), ("k", 0), ("k", 2049),
    ("br_size", 0), ("br_size", 1025)])
def test_out_of_range_sizes_raise_value_error_naming_the_parameter(name, value):
    sizes = {"m": 4, "n": 4, "k": 4, "br_size": 1, name: value}
    with pytest.raises(ValueError, match=re.escape(f"{name}={value}")):
        einjit.brgemm(**sizes)


SHAPES_TO_INSPECT = [(1, 1, 1, 1), (16, 6, 4, 1), (15, 5, 17, 3), (31, 11, 15, 2),
                     (64, 64, 64, 16), (1024, 1024, 2048, 1024)]
FMA = {("aarch64", "float32"): r"\bfmla\b.*\.[24]s", ("aarch64", "float64"): r"\bfmla\b.*\.2d",
       ("x86_64", "float32"): r"\bvfmadd231ps\b", ("x86_64", "float64"): r"\bvfmadd231pd\b"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("isa", ("aarch64", "x86_64"))
@pytest.mark.parametrize("shape", SHAPES_TO_INSPECT, ids=lambda s: "x".join(map(str, s)))
def test_code_decodes_uses_fma_and_stays_small(isa, shape, dtype):
    kernel = einjit.brgemm(*shape, dtype=dtype, isa=isa)
    assert_well_formed(kernel)
    assert re.search(FMA[isa, dtype], kernel.disassemble())
    assert len(kernel.code) < 16 * 1024, "loops, not unrolling, must keep the code small"
