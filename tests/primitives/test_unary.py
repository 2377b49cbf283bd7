"""Unary primitives (B := op(A), FP32 and FP64, A column-major) against numpy, in both layouts.

Everything goes through the public einjit.unary with isa=None, so the same tests check the
x86-64 kernels on the host and the A64 kernels in the aarch64 lane. Each kernel is generated
once per parameter set (einjit caches it) and called with ld = rows and with ld > rows.

Inputs mix NaN, ±inf, ±0, denormals and values up to ±1e38 into random data. B sits in a
canary-filled buffer with padding before and after, so a write outside the sub-matrix (the ld
gap included) changes a canary's bits; A's ld gaps hold canaries too and A must come back
unchanged. The guard-page test puts A and B right before a no-access page, so a read or write
past the last element faults.

Semantics (the kernel contract): bit-exact with numpy for zero, identity, relu
(np.maximum(a, 0), NaN propagating; the sign of a zero result for a zero input is free),
square, increment, decrement; reciprocal within 1 ulp of 1/a; sigmoid within 1e-6 absolute of
the float64 sigmoid for finite inputs, exactly 0 at -inf and 1 at +inf, NaN for NaN. float64
kernels: the same, with sigmoid within 1e-15 absolute of a long double reference (80-bit on
x86-64, 128-bit on AArch64). Every test runs for both dtypes.
"""

import re

import numpy as np
import pytest

import einjit

from eltwise_support import UnaryProblem
from support import SPECIALS as BASE_SPECIALS
from support import SPECIALS64, assert_well_formed, bits, guarded, run_guarded

OPS = ("zero", "identity", "relu", "square", "reciprocal", "increment", "decrement",
       "sigmoid")
LD_GAPS = (3, 5)                  # ld - rows of A and B when padded
SIGMOID_TOLERANCE = {"float32": 1e-6, "float64": 1e-15}
DTYPES = ("float32", "float64")

SPECIALS = {
    "float32": np.concatenate([BASE_SPECIALS, np.array(
        [16.6, -16.6, 88.7, -88.7, 103.9, -103.9, 104.5, -104.5, 1e6, -1e6], np.float32)]),
    # around exp's cutoff (-708), its underflow (-745) and the overflow of exp(x) (709.8)
    "float64": np.concatenate([SPECIALS64, np.array(
        [36.8, -36.8, 707.9, -707.9, 708.1, -708.1, 709.8, -709.8, 745.2, -745.2, 1e6, -1e6],
        np.float64)]),
}





def _ordered(x):
    """float bits mapped to integers in the order of the values (for ulp distances)."""
    if x.dtype == np.float64:
        raw = x.view(np.int64)
        return np.where(raw < 0, -(raw & 0x7FFF_FFFF_FFFF_FFFF), raw)
    raw = x.view(np.int32).astype(np.int64)
    return np.where(raw < 0, -(raw & 0x7FFF_FFFF), raw)


def _expected_bits_mismatch(op, a, got):
    """Boolean mask of wrong results for the ops checked bit-exactly or within 1 ulp."""
    one, zero = a.dtype.type(1), a.dtype.type(0)
    with np.errstate(all="ignore"):
        expected = {
            "zero": np.zeros_like(a),
            "identity": a,
            "relu": np.maximum(a, zero),
            "square": a * a,
            "reciprocal": one / a,
            "increment": a + one,
            "decrement": a - one,
        }[op]
    both_nan = np.isnan(got) & np.isnan(expected)
    if op == "reciprocal":
        close = np.abs(_ordered(got) - _ordered(expected)) <= 1
        return ~(close & (np.isnan(got) == np.isnan(expected)) | both_nan), expected
    same = bits(got) == bits(expected)
    if op == "relu":   # max(±0, 0): either zero
        same |= (a == 0) & (got == 0)
    return ~(same | both_nan), expected


def _sigmoid_mismatch(a, got):
    """float32: against the float64 sigmoid; float64: against long double (more precise)."""
    wide = np.float64 if a.dtype == np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        reference = 1 / (1 + np.exp(-a.astype(wide)))
    expected = reference.astype(a.dtype)
    finite = np.isfinite(a)
    close = np.abs(got.astype(wide) - reference) <= SIGMOID_TOLERANCE[a.dtype.name]
    ok = np.where(finite, close,
                  np.where(np.isnan(a), np.isnan(got),
                           got == np.where(a > 0, a.dtype.type(1), a.dtype.type(0))))
    return ~ok, expected


def _mismatch(op):
    """The check of op's results: (a, got) -> (mask of wrong elements, expected)."""
    if op == "sigmoid":
        return _sigmoid_mismatch
    return lambda a, got: _expected_bits_mismatch(op, a, got)


def _problem(op, m, n, trans_b, padded, seed, dtype, **buffers):
    return UnaryProblem(op, m, n, trans_b, padded, seed, dtype, SPECIALS[dtype], _mismatch(op),
                        LD_GAPS, **buffers)


def check(op, m, n, trans_b, seed=0, dtype="float32"):
    kernel = einjit.unary(op, m, n, trans_b=trans_b, dtype=dtype)
    for padded in (False, True):
        problem = _problem(op, m, n, trans_b, padded, seed, dtype)
        problem.call(kernel)
        problem.verify()


def _small_pairs(shift):
    """33 (m, n) pairs in 1..33 in which every m and every n appears once; `shift` rotates
    the partner so that different ops and layouts meet different pairs."""
    return [(m, (14 * m + shift) % 33 + 1) for m in range(1, 34)]


SMALL_CASES = [(op, m, n, trans_b)
               for index, op in enumerate(OPS) for trans_b in (False, True)
               for m, n in _small_pairs(5 * index + 11 * trans_b)]

# past the blocks of the kernels: 8-column groups, 64-row blocks, 32-row column steps
MEDIUM_SHAPES = ((64, 8), (65, 16), (67, 23), (128, 12), (131, 17), (40, 70), (97, 129))
EDGE_SHAPES = ((2048, 1), (1, 2048), (2047, 3), (6, 2048))
LARGE_CASES = [("identity", 2048, 2048, True), ("sigmoid", 2048, 2048, False),
               ("relu", 1031, 1025, True), ("reciprocal", 1000, 37, False),
               ("square", 37, 1000, True), ("increment", 513, 300, True),
               ("decrement", 300, 513, False), ("zero", 2048, 2048, True)]


def _case_id(case):
    op, m, n, trans_b = case
    return f"{op}-m{m}-n{n}-{'trans' if trans_b else 'plain'}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SMALL_CASES, ids=_case_id)
def test_every_m_and_n_up_to_33(case, dtype):
    check(*case, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [(op, m, n, trans_b)
                                  for op in OPS for trans_b in (False, True)
                                  for m, n in MEDIUM_SHAPES + EDGE_SHAPES], ids=_case_id)
def test_block_boundaries_and_limits(case, dtype):
    check(*case, seed=3, dtype=dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", LARGE_CASES, ids=_case_id)
def test_large(case, dtype):
    check(*case, seed=5, dtype=dtype)


def _dense_values(dtype):
    """float32: every 1009th float32 in [-120, 120]; float64: 2**20 points spread evenly
    over [-760, 760] and, densely, over [-40, 40] (where sigmoid is neither 0 nor 1)."""
    if dtype == "float32":
        low, high = np.float32(-120).view(np.uint32), np.float32(120).view(np.uint32)
        return np.concatenate([np.arange(0, high, 1009, dtype=np.uint32),
                               np.arange(0x8000_0000, low, 1009, dtype=np.uint32)]
                              ).view(np.float32)
    rng = np.random.default_rng(11)
    return np.concatenate([np.linspace(-760.0, 760.0, 1 << 19),
                           rng.uniform(-40.0, 40.0, 1 << 19)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_accuracy_over_a_dense_range(dtype):
    """A dense sample plus the specials against the wider-precision sigmoid."""
    values = np.concatenate([_dense_values(dtype), SPECIALS[dtype]])
    m = 2048
    values = np.resize(values, (-(-values.size // m)) * m)
    n = values.size // m
    b = np.empty_like(values)
    einjit.unary("sigmoid", m, n, dtype=dtype)(values, b, m, m)
    wrong, expected = _sigmoid_mismatch(values, b)
    assert not wrong.any(), (f"sigmoid{values[wrong][:5].tolist()} = {b[wrong][:5].tolist()}, "
                             f"expected {expected[wrong][:5].tolist()}")


def test_kernels_are_generated_once():
    assert einjit.unary("relu", 7, 9) is einjit.unary("relu", 7, 9)
    assert einjit.unary("relu", 7, 9, trans_b=True) is not einjit.unary("relu", 7, 9)


# --- guard pages: no read or write past the last element of an operand -------------------

GUARD_CASES = [(op, m, n, trans_b) for op in ("identity", "sigmoid", "zero")
               for trans_b in (False, True) for m in range(1, 10) for n in (1, 3, 6, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_access_past_the_last_element_of_any_operand(dtype):
    """A and B each end right before a no-access page (tight layouts). The kernels run in a
    forked child, so a fault is reported as a failure of the case that caused it."""
    problems = [_problem(*case, False, seed, dtype, allocate=guarded, b_after=0)
                for seed, case in enumerate(GUARD_CASES)]
    kernels = [einjit.unary(op, m, n, trans_b=trans_b, dtype=dtype)
               for op, m, n, trans_b in GUARD_CASES]
    run_guarded(GUARD_CASES, problems, kernels, lambda case: f"unary{case}")


# --- parameter validation and code generation for every ISA on any host -----------------

@pytest.mark.parametrize("kwargs, named", [
    ({"op": "tanh"}, "tanh"), ({"op": "add"}, "add"),
    ({"m": 0}, "m=0"), ({"m": 2049}, "m=2049"), ({"n": 0}, "n=0"), ({"n": 2049}, "n=2049")])
def test_invalid_parameters_raise_value_error_naming_them(kwargs, named):
    args = {"op": "relu", "m": 4, "n": 4, **kwargs}
    with pytest.raises(ValueError, match=re.escape(named)):
        einjit.unary(args["op"], args["m"], args["n"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("isa", ("aarch64", "x86_64"))
@pytest.mark.parametrize("trans_b", (False, True))
def test_code_for_every_op_is_generated_for_every_isa(isa, trans_b, dtype):
    for op in OPS:
        for m, n in ((1, 1), (3, 7), (2048, 2048)):
            assert_well_formed(einjit.unary(op, m, n, trans_b=trans_b, dtype=dtype, isa=isa))
