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

from eltwise_support import (
    PADDING,
    BinaryProblem,
    UnaryProblem,
    mixed_values,
    same_bits,
    same_or_nan,
)
from support import (
    SPECIALS,
    SPECIALS64,
    assert_well_formed,
    bits,
    canary,
    canary_buffer,
    column_major,
    from_parts,
    guarded,
    run_guarded,
)

DTYPES = ("complex64", "complex128")
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


def _values(rng, count, dtype):
    return mixed_values(rng, count, PART_SPECIALS[dtype], dtype)


def _unary(op, m, n, trans_b, padded, seed, dtype, **buffers):
    expect = (lambda a: np.zeros_like(a)) if op == "zero" else (lambda a: a)
    return UnaryProblem(op, m, n, trans_b, padded, seed, dtype, PART_SPECIALS[dtype],
                        lambda a, got: (~same_bits(got, expect(a)), expect(a)), LD_GAPS[:2],
                        **buffers)


def _binary(op, m, n, padded, seed, dtype, **buffers):
    return BinaryProblem(op, m, n, padded, seed, dtype, PART_SPECIALS[dtype], NUMPY[op],
                         gaps=LD_GAPS, **buffers)


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
        problem = _unary(op, m, n, trans_b, padded, m * 31 + n, dtype)
        problem.call(kernel)
        problem.verify()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", BINARY_CASES, ids=lambda c: f"{c[0]}-m{c[1]}-n{c[2]}")
def test_binary(case, dtype):
    op, m, n = case
    kernel = einjit.binary(op, m, n, dtype=dtype)
    for padded in (False, True):
        problem = _binary(op, m, n, padded, m * 31 + n, dtype)
        problem.call(kernel)
        problem.verify()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_pair_of_special_values(dtype):
    """add, sub and mul on the cross product of complex numbers whose parts are specials (±0,
    ±inf, NaN, denormals, near-overflow: inf * (0+1j), 0 * inf, inf - inf, overflowing
    products), one kernel call per op, against numpy's arrays."""
    specials = PART_SPECIALS[dtype][::2]
    real, imag = (x.ravel() for x in np.meshgrid(specials, specials, indexing="ij"))
    values = from_parts(np.stack([real, imag]), dtype)
    a, b = (x.ravel() for x in np.meshgrid(values, values, indexing="ij"))
    m = values.size
    for op in BINARY_OPS:
        c = np.empty_like(a)
        einjit.binary(op, m, m, dtype=dtype)(a, b, c, m, m, m)
        with np.errstate(all="ignore"):
            expected = NUMPY[op](a, b)
        same = same_or_nan(c, expected)
        assert same.all(), (f"{op}: {a[~same][:3].tolist()} op {b[~same][:3].tolist()} gave "
                            f"{c[~same][:3].tolist()}, expected {expected[~same][:3].tolist()}")


def test_numpy_array_product_is_the_fused_formula():
    """numpy's complex64 array product is re = fma(ar, br, -(ai bi)), im = fma(ar, bi, ai br)
    with ai bi and ai br rounded to float32: float64 holds a product of two float32 exactly,
    and its sum with one float32 rounds to float32 as the fused operation does on these
    values (no double-rounding tie among them, or the equality would fail here)."""
    rng = np.random.default_rng(7)
    a, b = (from_parts(rng.standard_normal((2, 4096)), "complex64")
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
        wrong = ~same_bits(got, values)
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
    problems = [_unary(*case, False, seed, dtype, allocate=guarded, b_after=0)
                for seed, case in enumerate(UNARY_GUARD_CASES)]
    kernels = [einjit.unary(op, m, n, trans_b=trans_b, dtype=dtype)
               for op, m, n, trans_b in UNARY_GUARD_CASES]
    run_guarded(UNARY_GUARD_CASES, problems, kernels, lambda case: f"unary{case} {dtype}")
    problems = [_binary(*case, False, seed, dtype, allocate=guarded, c_after=0)
                for seed, case in enumerate(BINARY_GUARD_CASES)]
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
