"""Element-wise primitives on complex64 and complex128 (interleaved, numpy's layout) against
numpy, bit for bit.

Through the public einjit.unary and einjit.binary with isa=None: the x86-64 kernels of the
host's variant (and AVX2 in the run that forces it), the A64 kernels in the aarch64 lane.
unary zero and identity, plain and transposing (B row-major: B[j + r ld_b] = A[r + j ld_a]);
binary add, sub and mul. Every M and N in 1..20 meets a partner (every remainder of a vector of
either part size), plus shapes past the kernels' blocks; each is called with ld = rows and
with ld > rows. Operands sit in canary-filled buffers (a write outside the sub-matrix, the ld
gaps included, changes a canary's bits; A and B must come back unchanged); a guard page ends
each operand in one test per primitive.

The data mix NaNs with payloads (quiet and signalling, of both signs: a copy must move them
bit for bit), ±inf, ±0, denormals and values near overflow into random parts. zero, identity
and the transposes are compared bit for bit; add, sub and mul bit for bit with numpy's arrays
(a NaN compared as NaN-ness, its payload being the hardware's choice). mul is numpy's array
product: re = fma(ar, br, -(ai bi)), im = fma(ar, bi, ai br), with ai bi and ai br rounded
(numpy's SIMD loop on x86-64 and AArch64; numpy's complex scalars use the unfused textbook
formula instead, and differ in the last bit). test_numpy_array_product_is_the_fused_formula
pins that assumption, so a numpy that changes its loop fails there by name.
"""

import re

import numpy as np
import pytest

import einjit
from einjit.backends import backend, resolve_target
from einjit.errors import KernelParameterError
from einjit.ops import BINARY_OPS as ALL_BINARY_OPS
from einjit.ops import UNARY_OPS as ALL_UNARY_OPS

from support import (
    SPECIALS,
    SPECIALS64,
    assert_well_formed,
    bits,
    canary,
    canary_buffer,
    column_major,
    guarded,
    mixed_data,
    part_dtype,
    run_guarded,
)

DTYPES = ("complex64", "complex128")
PADDING = 7                        # canary elements before and after the output's extent
LD_GAPS = (3, 1, 5)                # ld - rows of the operands when padded
NAN_PAYLOADS = {                   # quiet and signalling NaNs with payloads, both signs
    "complex64": np.array([0x7FC0_1234, 0xFFC0_0042, 0x7F80_0001, 0xFFA0_5000],
                          np.uint32).view(np.float32),
    "complex128": np.array([0x7FF8_0000_0000_1234, 0xFFF8_0000_0000_0042, 0x7FF0_0000_0000_0001,
                            0xFFF4_0000_0000_5000], np.uint64).view(np.float64),
}
PART_SPECIALS = {
    "complex64": np.concatenate([SPECIALS, NAN_PAYLOADS["complex64"]]),
    "complex128": np.concatenate([SPECIALS64, NAN_PAYLOADS["complex128"]]),
}
UNARY_OPS = ("zero", "identity")
BINARY_OPS = ("add", "sub", "mul")
NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _complex(real, imag, dtype):
    """real + i imag, set part by part (1j * inf would be nan+infj)."""
    values = np.empty(np.shape(real), dtype)
    values.real, values.imag = real, imag
    return values


def _values(rng, count, dtype):
    specials = PART_SPECIALS[dtype]
    return _complex(mixed_data(rng, count, specials), mixed_data(rng, count, specials), dtype)


def _same_bits(got, expected):
    """Per element: both parts' bits equal."""
    return (bits(got) == bits(expected)).reshape(*got.shape, 2).all(axis=-1)


def _same_or_nan(got, expected):
    """Per element: each part's bits equal, or both parts NaN."""
    parts = lambda x: x.view(part_dtype(x.dtype)).reshape(*x.shape, 2)   # noqa: E731
    g, e = parts(got), parts(expected)
    return ((bits(g) == bits(e)) | (np.isnan(g) & np.isnan(e))).all(axis=-1)


def _fail_first(wrong, where, describe):
    r, j = np.argwhere(wrong)[0]
    pytest.fail(f"{where}: {int(wrong.sum())} wrong elements; first at row {r}, column {j}: "
                f"{describe(r, j)}")


def _check_canaries(buffer, inside, where):
    outside = np.flatnonzero(~inside & (bits(buffer).reshape(-1, 2) != canary(buffer.dtype))
                             .any(axis=-1))
    assert outside.size == 0, (f"{where}: wrote outside the sub-matrix at buffer offsets "
                               f"{(outside - PADDING)[:10].tolist()}")


class UnaryProblem:
    def __init__(self, op, m, n, trans_b, padded, seed, dtype, allocate=canary_buffer,
                 b_after=PADDING):
        self.op, self.m, self.n, self.trans_b, self.dtype = op, m, n, trans_b, dtype
        gap_a, gap_b = LD_GAPS[:2] if padded else (0, 0)
        self.b_rows, self.b_cols = (n, m) if trans_b else (m, n)
        self.ld_a, self.ld_b = m + gap_a, self.b_rows + gap_b
        self.a = allocate((n - 1) * self.ld_a + m, dtype)
        column_major(self.a, m, n, self.ld_a)[...] = _values(
            np.random.default_rng(seed), m * n, dtype).reshape(m, n)
        self.a_bits = bits(self.a).copy()
        extent = (self.b_cols - 1) * self.ld_b + self.b_rows
        self.b_buffer = allocate(PADDING + extent + b_after, dtype)
        self.b = self.b_buffer[PADDING:PADDING + extent]
        self.in_b = np.zeros(self.b_buffer.size, dtype=bool)
        column_major(self.in_b[PADDING:], self.b_rows, self.b_cols, self.ld_b)[...] = True

    def call(self, kernel):
        kernel(self.a, self.b, self.ld_a, self.ld_b)

    def verify(self):
        where = (f"unary {self.op} {self.dtype} m={self.m} n={self.n} trans_b={self.trans_b} "
                 f"ld_a={self.ld_a} ld_b={self.ld_b}")
        _check_canaries(self.b_buffer, self.in_b, where)
        assert np.array_equal(bits(self.a), self.a_bits), f"{where}: A was modified"
        a = np.ascontiguousarray(column_major(self.a, self.m, self.n, self.ld_a))
        got = column_major(self.b, self.b_rows, self.b_cols, self.ld_b)
        got = np.ascontiguousarray(got.T if self.trans_b else got)
        expected = np.zeros_like(a) if self.op == "zero" else a
        wrong = ~_same_bits(got, expected)
        if wrong.any():
            _fail_first(wrong, where, lambda r, j: f"got {got[r, j]!r} (bits "
                        f"{[hex(x) for x in bits(got[r, j:j + 1])]}), expected "
                        f"{expected[r, j]!r} (bits {[hex(x) for x in bits(expected[r, j:j + 1])]})")


class BinaryProblem:
    def __init__(self, op, m, n, padded, seed, dtype, allocate=canary_buffer,
                 c_after=PADDING):
        self.op, self.m, self.n, self.dtype = op, m, n, dtype
        gaps = LD_GAPS if padded else (0, 0, 0)
        self.ld_a, self.ld_b, self.ld_c = (m + gap for gap in gaps)
        rng = np.random.default_rng(seed)
        a, b = _values(rng, m * n, dtype), _values(rng, m * n, dtype)
        same = rng.random(m * n) < 0.1           # x - x, specials against themselves
        b[same] = a[same]
        negated = rng.random(m * n) < 0.05       # ±0 sums, inf - inf
        b[negated] = _complex(-a[negated].real, -a[negated].imag, dtype)
        self.a = allocate((n - 1) * self.ld_a + m, dtype)
        self.b = allocate((n - 1) * self.ld_b + m, dtype)
        column_major(self.a, m, n, self.ld_a)[...] = a.reshape(m, n)
        column_major(self.b, m, n, self.ld_b)[...] = b.reshape(m, n)
        self.input_bits = (bits(self.a).copy(), bits(self.b).copy())
        extent = (n - 1) * self.ld_c + m
        self.c_buffer = allocate(PADDING + extent + c_after, dtype)
        self.c = self.c_buffer[PADDING:PADDING + extent]
        self.in_c = np.zeros(self.c_buffer.size, dtype=bool)
        column_major(self.in_c[PADDING:], m, n, self.ld_c)[...] = True

    def call(self, kernel):
        kernel(self.a, self.b, self.c, self.ld_a, self.ld_b, self.ld_c)

    def verify(self):
        where = (f"binary {self.op} {self.dtype} m={self.m} n={self.n} ld_a={self.ld_a} "
                 f"ld_b={self.ld_b} ld_c={self.ld_c}")
        _check_canaries(self.c_buffer, self.in_c, where)
        assert np.array_equal(bits(self.a), self.input_bits[0]), f"{where}: A changed"
        assert np.array_equal(bits(self.b), self.input_bits[1]), f"{where}: B changed"
        a = np.ascontiguousarray(column_major(self.a, self.m, self.n, self.ld_a))
        b = np.ascontiguousarray(column_major(self.b, self.m, self.n, self.ld_b))
        got = np.ascontiguousarray(column_major(self.c, self.m, self.n, self.ld_c))
        with np.errstate(all="ignore"):
            expected = NUMPY[self.op](a, b)
        wrong = ~_same_or_nan(got, expected)
        if wrong.any():
            _fail_first(wrong, where, lambda r, j: f"{a[r, j]!r} {self.op} {b[r, j]!r} gave "
                        f"{got[r, j]!r}, expected {expected[r, j]!r}")


def _pairs(shift, top=20):
    """(m, n) pairs in 1..top in which every m and every n appears once."""
    return [(m, (7 * m + shift) % top + 1) for m in range(1, top + 1)]


# past the kernels' blocks (real rows are 2M: 64-row blocks, 8-column groups, column steps)
MEDIUM_SHAPES = ((32, 8), (33, 9), (64, 5), (67, 23), (131, 17), (40, 70))
EDGE_SHAPES = ((2048, 1), (1, 2048), (1023, 3))

UNARY_CASES = [(op, m, n, trans_b) for index, op in enumerate(UNARY_OPS)
               for trans_b in (False, True)
               for m, n in _pairs(3 * index + 5 * trans_b) + list(MEDIUM_SHAPES + EDGE_SHAPES)]
BINARY_CASES = [(op, m, n) for index, op in enumerate(BINARY_OPS)
                for m, n in _pairs(4 * index) + list(MEDIUM_SHAPES + EDGE_SHAPES)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", UNARY_CASES,
                         ids=lambda c: f"{c[0]}-m{c[1]}-n{c[2]}-{'trans' if c[3] else 'plain'}")
def test_unary(case, dtype):
    op, m, n, trans_b = case
    kernel = einjit.unary(op, m, n, trans_b=trans_b, dtype=dtype)
    for padded in (False, True):
        problem = UnaryProblem(op, m, n, trans_b, padded, seed=m * 31 + n, dtype=dtype)
        problem.call(kernel)
        problem.verify()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", BINARY_CASES, ids=lambda c: f"{c[0]}-m{c[1]}-n{c[2]}")
def test_binary(case, dtype):
    op, m, n = case
    kernel = einjit.binary(op, m, n, dtype=dtype)
    for padded in (False, True):
        problem = BinaryProblem(op, m, n, padded, seed=m * 31 + n, dtype=dtype)
        problem.call(kernel)
        problem.verify()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_pair_of_special_values(dtype):
    """add, sub and mul on the cross product of complex numbers whose parts are specials (±0,
    ±inf, NaN, denormals, near-overflow: inf * (0+1j), 0 * inf, inf - inf, overflowing
    products), one kernel call per op, against numpy's arrays."""
    specials = PART_SPECIALS[dtype][::2]
    real, imag = (x.ravel() for x in np.meshgrid(specials, specials, indexing="ij"))
    values = _complex(real, imag, dtype)
    a, b = (x.ravel() for x in np.meshgrid(values, values, indexing="ij"))
    m = values.size
    for op in BINARY_OPS:
        c = np.empty_like(a)
        einjit.binary(op, m, m, dtype=dtype)(a, b, c, m, m, m)
        with np.errstate(all="ignore"):
            expected = NUMPY[op](a, b)
        same = _same_or_nan(c, expected)
        assert same.all(), (f"{op}: {a[~same][:3].tolist()} op {b[~same][:3].tolist()} gave "
                            f"{c[~same][:3].tolist()}, expected {expected[~same][:3].tolist()}")


def test_numpy_array_product_is_the_fused_formula():
    """numpy's complex64 array product is re = fma(ar, br, -(ai bi)), im = fma(ar, bi, ai br)
    with ai bi and ai br rounded to float32: float64 holds a product of two float32 exactly,
    and its sum with one float32 rounds to float32 as the fused operation does on these
    values (no double-rounding tie among them, or the equality would fail here)."""
    rng = np.random.default_rng(7)
    a, b = (_complex(rng.standard_normal(4096), rng.standard_normal(4096), "complex64")
            for _ in range(2))
    ar, ai, br, bi = (x.astype(np.float64) for x in (a.real, a.imag, b.real, b.imag))
    f32 = np.float32
    product = a * b
    assert np.array_equal(product.real, f32(ar * br - f32(ai * bi)))
    assert np.array_equal(product.imag, f32(ar * bi + f32(ai * br)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, ld_b", [(64, 300, 384), (65, 301, 384), (300, 129, 256),
                                        (520, 600, 604)])
def test_transposes_past_the_streaming_thresholds(m, n, ld_b, dtype):
    """Outputs large enough for the transposed kernels' streaming path (ld_b a multiple of 2048
    bytes, or the output past 4 MiB), with B at every element offset in a cache line: the
    columns before the first line-aligned row start, the streamed groups and the columns
    after them, in every width."""
    kernel = einjit.unary("identity", m, n, trans_b=True, dtype=dtype)
    ld_a = m + 1
    a = canary_buffer((n - 1) * ld_a + m, dtype)
    values = _values(np.random.default_rng(m + n), m * n, dtype).reshape(m, n)
    column_major(a, m, n, ld_a)[...] = values
    itemsize = np.dtype(dtype).itemsize
    extent = (m - 1) * ld_b + n
    for offset in range(64 // itemsize):
        buffer = canary_buffer(extent + 2 * 64 // itemsize + PADDING, dtype)
        start = (-buffer.ctypes.data % 64) // itemsize + offset
        kernel(a, buffer[start:start + extent], ld_a, ld_b)
        inside = np.zeros(buffer.size, dtype=bool)
        column_major(inside[start:], n, m, ld_b)[...] = True
        where = f"identity {dtype} {m}x{n} transposed, ld_b={ld_b}, B at element {offset}"
        outside = np.flatnonzero(~inside & (bits(buffer).reshape(-1, 2) != canary(dtype))
                                 .any(axis=-1))
        assert outside.size == 0, f"{where}: wrote outside B at {outside[:10].tolist()}"
        got = np.ascontiguousarray(column_major(buffer[start:], n, m, ld_b).T)
        wrong = ~_same_bits(got, values)
        assert not wrong.any(), f"{where}: {int(wrong.sum())} wrong elements"


def test_kernels_are_generated_once():
    assert einjit.binary("mul", 7, 9, dtype="complex64") is \
        einjit.binary("mul", 7, 9, dtype="complex64")
    assert einjit.binary("mul", 7, 9, dtype="complex64") is not \
        einjit.binary("mul", 7, 9, dtype="complex128")
    assert einjit.unary("identity", 7, 9, dtype="complex64") is not einjit.unary("identity", 7, 9)


# --- guard pages: no read or write past the last element of an operand -------------------

UNARY_GUARD_CASES = [(op, m, n, trans_b) for op in UNARY_OPS for trans_b in (False, True)
                     for m in range(1, 10) for n in (1, 3, 5)]
BINARY_GUARD_CASES = [(op, m, n) for op in ("add", "mul") for m in range(1, 12)
                      for n in (1, 2, 5)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_access_past_the_last_element_of_any_operand(dtype):
    """Every operand ends right before a no-access page (tight layouts); the kernels run in a
    forked child, so a fault fails the case that caused it."""
    problems = [UnaryProblem(*case, padded=False, seed=seed, dtype=dtype, allocate=guarded,
                             b_after=0) for seed, case in enumerate(UNARY_GUARD_CASES)]
    kernels = [einjit.unary(op, m, n, trans_b=trans_b, dtype=dtype)
               for op, m, n, trans_b in UNARY_GUARD_CASES]
    run_guarded(UNARY_GUARD_CASES, problems, kernels, lambda case: f"unary{case} {dtype}")
    problems = [BinaryProblem(*case, padded=False, seed=seed, dtype=dtype, allocate=guarded,
                              c_after=0) for seed, case in enumerate(BINARY_GUARD_CASES)]
    kernels = [einjit.binary(*case, dtype=dtype) for case in BINARY_GUARD_CASES]
    run_guarded(BINARY_GUARD_CASES, problems, kernels, lambda case: f"binary{case} {dtype}")


# --- the ops that take no complex dtype, and code for every ISA on any host ---------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("primitive, op", [
    *(("unary", op) for op in ALL_UNARY_OPS if op not in UNARY_OPS),
    *(("binary", op) for op in ALL_BINARY_OPS if op not in BINARY_OPS)])
def test_ops_without_a_complex_form_raise_naming_op_and_dtype(primitive, op, dtype):
    with pytest.raises(ValueError, match=re.escape(f"{primitive} {op} does not take {dtype}")):
        getattr(einjit, primitive)(op, 4, 4, dtype=dtype)


@pytest.mark.parametrize("isa", ("aarch64", "x86_64:avx2"))
def test_backends_refuse_ops_without_a_complex_form(isa):
    target = resolve_target(isa)
    module = backend(target.isa)
    with pytest.raises(KernelParameterError, match="unary relu does not take complex64"):
        module.generate_unary(target, "relu", 3, 3, False, dtype="complex64")
    with pytest.raises(KernelParameterError, match="binary div does not take complex128"):
        module.generate_binary(target, "div", 3, 3, dtype="complex128")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("isa", ("aarch64", "x86_64:avx2", "x86_64:avx512"))
def test_code_for_every_complex_op_is_generated_for_every_isa(isa, dtype):
    for m, n in ((1, 1), (3, 7), (2048, 2048)):
        for op in UNARY_OPS:
            for trans_b in (False, True):
                assert_well_formed(einjit.unary(op, m, n, trans_b=trans_b, dtype=dtype,
                                                isa=isa))
        for op in BINARY_OPS:
            assert_well_formed(einjit.binary(op, m, n, dtype=dtype, isa=isa))
