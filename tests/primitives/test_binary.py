"""Binary primitives (C := A op B element-wise, FP32 and FP64, column-major) against numpy.

Everything goes through the public einjit.binary with isa=None, so the same tests check the
x86-64 kernels on the host and the A64 kernels in the aarch64 lane. Each kernel is generated
once per parameter set (einjit caches it) and called with ld = rows and with ld > rows.

Inputs mix NaN, ±inf, ±0, denormals and values up to ±1e38 into random data, and some
positions hold equal values or the same special in A and B (x - x, x / x, min/max of zeros,
inf - inf, 0 / 0). C sits in a canary-filled buffer with padding before and after, so a write
outside the sub-matrix (the ld gap included) changes a canary's bits; A and B must come back
unchanged. The guard-page test puts A, B and C right before a no-access page, so a read or
write past the last element faults.

Semantics (the kernel contract): bit-exact with numpy (NaN compared as NaN-ness), min/max
NaN-propagating like np.minimum/np.maximum; the sign of a zero that min/max return when both
operands are zeros is free. Every test runs for both dtypes.
"""

import re

import numpy as np
import pytest

import einjit

from eltwise_support import BinaryProblem
from support import SPECIALS as BASE_SPECIALS
from support import SPECIALS64, assert_well_formed, bits, guarded, run_guarded

OPS = ("add", "sub", "mul", "div", "min", "max")
NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
         "min": np.minimum, "max": np.maximum}
LD_GAPS = (3, 1, 6)               # ld - rows of A, B and C when padded

DTYPES = ("float32", "float64")
SPECIALS = {
    "float32": np.concatenate([BASE_SPECIALS, np.array([1e-20, -1e-20], np.float32)]),
    "float64": np.concatenate([SPECIALS64, np.array([1e-160, -1e-160, 1e160], np.float64)]),
}



def _problem(op, m, n, padded, seed, dtype, **buffers):
    return BinaryProblem(op, m, n, padded, seed, dtype, SPECIALS[dtype], NUMPY[op],
                         op in ("min", "max"), LD_GAPS, **buffers)


def check(op, m, n, seed=0, dtype="float32"):
    kernel = einjit.binary(op, m, n, dtype=dtype)
    for padded in (False, True):
        problem = _problem(op, m, n, padded, seed, dtype)
        problem.call(kernel)
        problem.verify()


def _small_pairs(shift):
    """33 (m, n) pairs in 1..33 in which every m and every n appears once; `shift` rotates
    the partner so that different ops meet different pairs."""
    return [(m, (14 * m + shift) % 33 + 1) for m in range(1, 34)]


SMALL_CASES = [(op, m, n) for index, op in enumerate(OPS) for m, n in _small_pairs(7 * index)]
# past the blocks of the kernels (32-row column steps) and at the limits
MEDIUM_SHAPES = ((32, 5), (33, 8), (63, 3), (64, 9), (95, 4), (131, 17), (40, 70))
EDGE_SHAPES = ((2048, 1), (1, 2048), (2047, 3), (6, 2048))
LARGE_CASES = [("add", 2048, 2048), ("div", 1031, 1025), ("max", 1000, 37), ("min", 37, 1000),
               ("mul", 513, 300), ("sub", 300, 513)]


def _case_id(case):
    op, m, n = case
    return f"{op}-m{m}-n{n}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SMALL_CASES, ids=_case_id)
def test_every_m_and_n_up_to_33(case, dtype):
    check(*case, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [(op, m, n) for op in OPS
                                  for m, n in MEDIUM_SHAPES + EDGE_SHAPES], ids=_case_id)
def test_block_boundaries_and_limits(case, dtype):
    check(*case, seed=3, dtype=dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", LARGE_CASES, ids=_case_id)
def test_large(case, dtype):
    check(*case, seed=5, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_pair_of_specials(dtype):
    """Each op on the full cross product of the special values (one kernel call per op)."""
    specials = SPECIALS[dtype]
    a, b = (x.ravel() for x in np.meshgrid(specials, specials, indexing="ij"))
    m = specials.size
    for op in OPS:
        c = np.empty_like(a)
        einjit.binary(op, m, m, dtype=dtype)(a, b, c, m, m, m)
        with np.errstate(all="ignore"):
            expected = NUMPY[op](a, b)
        same = (bits(c) == bits(expected)) | (np.isnan(c) & np.isnan(expected))
        if op in ("min", "max"):
            same |= (a == 0) & (b == 0) & (c == 0)
        assert same.all(), (f"{op}: {a[~same][:4].tolist()} op {b[~same][:4].tolist()} gave "
                            f"{c[~same][:4].tolist()}, expected {expected[~same][:4].tolist()}")


def test_kernels_are_generated_once():
    assert einjit.binary("add", 7, 9) is einjit.binary("add", 7, 9)
    assert einjit.binary("sub", 7, 9) is not einjit.binary("add", 7, 9)


# --- guard pages: no read or write past the last element of an operand -------------------

GUARD_CASES = [("add", m, n) for m in range(1, 40) for n in (1, 2, 5)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_access_past_the_last_element_of_any_operand(dtype):
    """A, B and C each end right before a no-access page (tight layouts). The kernels run in a
    forked child, so a fault is reported as a failure of the case that caused it."""
    problems = [_problem(*case, False, seed, dtype, allocate=guarded, c_after=0)
                for seed, case in enumerate(GUARD_CASES)]
    kernels = [einjit.binary(*case, dtype=dtype) for case in GUARD_CASES]
    run_guarded(GUARD_CASES, problems, kernels, lambda case: f"binary{case}")


# --- parameter validation and code generation for every ISA on any host -----------------

@pytest.mark.parametrize("kwargs, named", [
    ({"op": "pow"}, "pow"), ({"op": "relu"}, "relu"),
    ({"m": 0}, "m=0"), ({"m": 2049}, "m=2049"), ({"n": 0}, "n=0"), ({"n": 2049}, "n=2049")])
def test_invalid_parameters_raise_value_error_naming_them(kwargs, named):
    args = {"op": "add", "m": 4, "n": 4, **kwargs}
    with pytest.raises(ValueError, match=re.escape(named)):
        einjit.binary(args["op"], args["m"], args["n"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("isa", ("aarch64", "x86_64"))
def test_code_for_every_op_is_generated_for_every_isa(isa, dtype):
    for op in OPS:
        for m, n in ((1, 1), (3, 7), (2048, 2048)):
            assert_well_formed(einjit.binary(op, m, n, dtype=dtype, isa=isa))
