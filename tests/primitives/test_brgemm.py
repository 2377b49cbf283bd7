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

from brgemm_support import (
    BATCH_VALUES,
    K_VALUES,
    Layout,
    Problem,
    case_id,
    check,
    random_values,
    sweep,
)
from support import assert_well_formed, guarded, run_guarded

DTYPES = ("float32", "float64")
PARTNERS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 23, 31, 33, 47, 64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sweep("m", 64, PARTNERS), ids=case_id)
def test_every_m(case, dtype):
    check(*case, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sweep("n", 64, PARTNERS), ids=case_id)
def test_every_n(case, dtype):
    check(*case, dtype)


GRID_SHAPES = ((16, 6), (15, 5), (33, 13), (7, 64))


@pytest.mark.parametrize("case", [
    (m, n, k, br, (k + br) % 2 == 0, br != 3)
    for (m, n), k, br in itertools.product(GRID_SHAPES, K_VALUES, BATCH_VALUES)], ids=case_id)
@pytest.mark.parametrize("dtype", DTYPES)
def test_k_and_batch_grid(case, dtype):
    check(*case, dtype)


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
@pytest.mark.parametrize("case", _limit_sample(), ids=case_id)
def test_sizes_up_to_the_limits(case, dtype):
    check(*case, dtype, seed=7)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_strides_may_overlap_and_repeat(dtype):
    """Stride 0 reuses one A and one B for every batch element."""
    m, n, k, br = 9, 7, 5, 4
    rng = np.random.default_rng(3)
    a = np.asfortranarray(random_values(rng, (m, k), dtype, True))
    b = np.asfortranarray(random_values(rng, (k, n), dtype, True))
    c = np.asfortranarray(random_values(rng, (m, n), dtype, True))
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
    problems = [Problem(m, n, k, br, dtype, Layout(m, n, k), True, seed, allocate=guarded,
                        c_after=0)
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
