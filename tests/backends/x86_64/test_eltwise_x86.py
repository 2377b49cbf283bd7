"""x86-64 specifics of the unary/binary kernels, run for both code variants explicitly.

tests/test_unary.py and tests/test_binary.py check the semantics on the host's default variant
(set EINJIT_X86_VARIANT=avx2 to run them on the other). Here every test runs on AVX-512 (if the
host has it) and on AVX2, and covers what is x86-specific: NaN on either side of min/max
(vminps/vmaxps return their second source), every remainder 1..40 of the in-register
transposes, the streaming paths (taken at run time for large outputs whose rows or columns can
be 64-byte aligned: every alignment of B, ld multiples of 16 or not), and concurrent calls.

Outputs sit in canary-filled buffers, so any write outside the sub-matrix is caught.
"""

import threading

import numpy as np
import pytest

import einjit
from einjit.backends.x86_64.eltwise import COLUMN_STREAM_MIN_BYTES
from einjit.backends.x86_64.unary import TRANSPOSED_STREAM_ALWAYS_BYTES
from einjit.runtime.host import host_isa

import support

pytestmark = pytest.mark.skipif(host_isa() != "x86_64", reason="runs x86-64 code natively")

PADDING = 16                       # canary elements before and after each output
STREAMED_COLUMNS = [(2048, 1536), (1801, 1800)]   # outputs past COLUMN_STREAM_MIN_BYTES
NAN_PATTERNS = np.array([np.nan, 1.0, np.nan, -np.inf, np.inf, -0.0, 0.0, -np.nan, 2.5],
                        dtype=np.float32)


@pytest.fixture(params=["avx512", "avx2"])
def variant(request, monkeypatch):
    """Select the x86-64 code variant for the kernels the test asks einjit for."""
    from einjit.backends.x86_64 import cpu
    if not set(cpu.VARIANTS[request.param]) <= cpu.features():
        pytest.skip(f"the host CPU has no {request.param}")
    monkeypatch.setenv(cpu.VARIANT_ENV, request.param)
    return request.param


class Output:
    """A rows x cols column-major output with leading dimension ld, starting `shift` elements
    past a 64-byte boundary, in a canary-filled buffer."""

    def __init__(self, rows, cols, ld, shift=0, dtype=np.float32):
        self.rows, self.cols, self.ld = rows, cols, ld
        extent = (cols - 1) * ld + rows
        size = np.dtype(dtype).itemsize
        line = 64 // size
        self.canary = support.canary(dtype)
        self.buffer = np.full(extent + 2 * PADDING + line, self.canary,
                              dtype=np.uint32 if size == 4 else np.uint64)
        start = PADDING + (-(self.buffer.ctypes.data // size + PADDING) % line) + shift
        self.array = self.buffer[start:start + extent].view(dtype)
        self.inside = np.zeros(self.buffer.size, dtype=bool)
        offsets = start + np.arange(rows)[:, None] + ld * np.arange(cols)[None, :]
        self.inside[offsets.ravel()] = True

    def matrix(self):
        """The sub-matrix, after checking that nothing outside it was written."""
        outside = np.flatnonzero(~self.inside & (self.buffer != self.canary))
        assert outside.size == 0, f"wrote outside the output at buffer offsets {outside[:8]}"
        return support.column_major(self.array, self.rows, self.cols, self.ld)


def column_major(rng, rows, cols, ld=None, dtype=np.float32):
    """A random rows x cols column-major operand with leading dimension ld (data, view)."""
    ld = ld or rows
    data = rng.standard_normal((cols - 1) * ld + rows).astype(dtype)
    return data, support.column_major(data, rows, cols, ld)


def sigmoid_reference(a):
    with np.errstate(all="ignore"):
        return 1.0 / (1.0 + np.exp(-a.astype(np.float64)))


# ---------------------------------------------------------------- min / max and NaN

@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("m", [1, 7, 8, 9, 15, 16, 17, 33, 64])
def test_min_max_propagate_nan_from_either_side(variant, op, m):
    n = 9
    rng = np.random.default_rng(m)
    a_data, a = column_major(rng, m, n)
    b_data, b = column_major(rng, m, n)
    for j in range(n):   # every pair of the patterns, and the pattern against random data
        a[:, j] = np.resize(NAN_PATTERNS, m)
        if j % 2:
            b[:, j] = np.roll(np.resize(NAN_PATTERNS, m), j)
    c = Output(m, n, m)
    einjit.binary(op, m, n)(a_data, b_data, c.array, m, m, m)
    expected = (np.minimum if op == "min" else np.maximum)(a, b)
    got = c.matrix()
    assert np.array_equal(np.isnan(got), np.isnan(expected)), f"{op}: NaN lost or invented"
    same = (got == expected) | np.isnan(expected) | ((got == 0) & (expected == 0))
    assert same.all(), f"{op}({a[~same][:4]}, {b[~same][:4]}) = {got[~same][:4]}"


@pytest.mark.parametrize("shift", [1, 4, 12])
def test_min_max_nan_in_the_rows_before_the_aligned_ones(variant, shift):
    """Streaming path: rows above the first 64-byte aligned row of C are stored masked; a NaN
    there must still propagate (their mask register must survive min/max's own masks)."""
    m, n = STREAMED_COLUMNS[0]
    rng = np.random.default_rng(shift)
    a_data, a = column_major(rng, m, n)
    b_data, b = column_major(rng, m, n)
    a[:16:3, ::2] = np.nan
    b[1:16:4, 1::2] = np.nan
    for op, reference in (("max", np.maximum), ("min", np.minimum)):
        c = Output(m, n, m, shift)
        einjit.binary(op, m, n)(a_data, b_data, c.array, m, m, m)
        assert np.array_equal(c.matrix(), reference(a, b), equal_nan=True), op


def test_relu_keeps_nan_and_infinities(variant):
    a = np.resize(NAN_PATTERNS, 37 * 5).astype(np.float32)
    for trans_b in (False, True):
        out = Output(5, 37, 5) if trans_b else Output(37, 5, 37)
        einjit.unary("relu", 37, 5, trans_b=trans_b)(a, out.array, 37, out.ld)
        got = out.matrix().T if trans_b else out.matrix()
        expected = np.maximum(a.reshape(5, 37).T, np.float32(0))
        assert np.array_equal(got, expected, equal_nan=True)


# ---------------------------------------------------------------- transposes

def test_transposed_identity_every_remainder(variant):
    """Every m and n in 1..40: full 16 x 16 / 8 x 8 blocks and every row/column remainder."""
    rng = np.random.default_rng(0)
    for m in range(1, 41):
        for n in range(1, 41):
            a_data, a = column_major(rng, m, n, m + 3)
            b = Output(n, m, n + 2)
            einjit.unary("identity", m, n, trans_b=True)(a_data, b.array, m + 3, n + 2)
            assert np.array_equal(b.matrix(), a.T), f"m={m} n={n}"


@pytest.mark.parametrize("op", ["relu", "sigmoid", "reciprocal", "zero"])
def test_transposed_ops_with_remainders(variant, op):
    rng = np.random.default_rng(1)
    for m, n in ((1, 1), (3, 17), (16, 16), (17, 15), (31, 33), (40, 9)):
        a_data, a = column_major(rng, m, n)
        b = Output(n, m, n)
        einjit.unary(op, m, n, trans_b=True)(a_data, b.array, m, n)
        with np.errstate(all="ignore"):
            expected = {"relu": np.maximum(a, np.float32(0)), "reciprocal": np.float32(1) / a,
                        "zero": np.zeros_like(a), "sigmoid": sigmoid_reference(a)}[op].T
        if op == "sigmoid":
            assert np.abs(b.matrix() - expected).max() <= 1e-6, f"m={m} n={n}"
        else:
            assert np.array_equal(b.matrix(), expected), f"m={m} n={n}"


STREAMED_TRANSPOSES = [(1024, 1024), (2048, 513), (1031, 1025), (2047, 541)]


@pytest.mark.parametrize("m, n", STREAMED_TRANSPOSES)
def test_streamed_transpose_every_alignment_of_b(variant, m, n):
    """Large transposes stream B when its rows can be 64-byte aligned (ld_b % 16 == 0): the
    columns before the first aligned one, and the last ones, go through masked panels."""
    assert 4 * m * n >= TRANSPOSED_STREAM_ALWAYS_BYTES, "too small to stream at every ld_b"
    rng = np.random.default_rng(m + n)
    a_data, a = column_major(rng, m, n)
    for extra, shifts in ((0, range(16)), (16, (0, 7)), (5, (0, 3))):   # ld_b % 16 == 0 or not
        ld_b = -(-n // 16) * 16 + extra
        for shift in shifts:
            b = Output(n, m, ld_b, shift)
            einjit.unary("identity", m, n, trans_b=True)(a_data, b.array, m, ld_b)
            assert np.array_equal(b.matrix(), a.T), f"ld_b={ld_b} shift={shift}"


@pytest.mark.parametrize("ld_extra", [0, 16, 1])
def test_mid_size_transpose_streams_only_conflicting_strides(variant, ld_extra):
    """512 x 512 streams when ld_b is a multiple of 512, and takes the cached path otherwise;
    both must give the same result, with the op (sigmoid) applied."""
    m = n = 512
    rng = np.random.default_rng(ld_extra)
    a_data, a = column_major(rng, m, n)
    for shift in (0, 5):
        b = Output(n, m, n + ld_extra, shift)
        einjit.unary("sigmoid", m, n, trans_b=True)(a_data, b.array, m, n + ld_extra)
        assert np.abs(b.matrix() - sigmoid_reference(a).T).max() <= 1e-6


# ---------------------------------------------------------------- streamed plain outputs

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, n", STREAMED_COLUMNS)
def test_streamed_columns_every_alignment(variant, m, n, dtype):
    """Large plain outputs stream the whole cache lines from their first 64-byte aligned row
    (ld a multiple of a line): at every shift past a line the peel, the streamed lines and
    the cached rest (whole vectors and a tail) write each element once, and nothing else."""
    size = np.dtype(dtype).itemsize
    line = 64 // size
    assert size * m * n >= COLUMN_STREAM_MIN_BYTES, "too small to reach the streaming path"
    rng = np.random.default_rng(m)
    a_data, a = column_major(rng, m, n, dtype=dtype)
    b_data, b = column_major(rng, m, n, dtype=dtype)
    name = np.dtype(dtype).name
    for extra in (0, line, 3):
        ld = -(-m // line) * line + extra
        for shift in sorted({0, 1, line // 2, line // 2 + 1, line - 1}):
            out = Output(m, n, ld, shift, dtype)
            einjit.unary("identity", m, n, dtype=name)(a_data, out.array, m, ld)
            assert np.array_equal(out.matrix(), a), f"identity ld={ld} shift={shift}"
            out = Output(m, n, ld, shift, dtype)
            einjit.binary("sub", m, n, dtype=name)(a_data, b_data, out.array, m, m, ld)
            assert np.array_equal(out.matrix(), a - b), f"sub ld={ld} shift={shift}"
        out = Output(m, n, ld, line // 2 + 1, dtype)
        einjit.unary("zero", m, n, dtype=name)(a_data, out.array, m, ld)
        assert not out.matrix().any()


# ---------------------------------------------------------------- threads

def test_concurrent_calls_from_threads(variant):
    """Kernels run without the GIL: several threads call shared kernels at once."""
    cases = [("unary", "sigmoid", 300, 200, False), ("unary", "identity", 257, 300, True),
             ("binary", "max", 129, 400, None), ("unary", "relu", 1024, 1024, True),
             ("binary", "add", 1024, 1024, None), ("unary", "decrement", 64, 33, False)]
    kernels = {case: (einjit.binary(case[1], case[2], case[3]) if case[0] == "binary" else
                      einjit.unary(case[1], case[2], case[3], trans_b=case[4]))
               for case in cases}
    failures = []

    def work(seed):
        try:
            check(seed)
        except Exception as error:   # an exception in a thread would not fail the test
            failures.append(repr(error))

    def check(seed):
        rng = np.random.default_rng(seed)
        for round_ in range(3):
            kind, op, m, n, trans_b = cases[(seed + round_) % len(cases)]
            kernel = kernels[kind, op, m, n, trans_b]
            a_data, a = column_major(rng, m, n)
            if kind == "binary":
                b_data, b = column_major(rng, m, n)
                out = Output(m, n, m)
                kernel(a_data, b_data, out.array, m, m, m)
                expected = np.maximum(a, b) if op == "max" else a + b
            else:
                out = Output(n, m, n) if trans_b else Output(m, n, m)
                kernel(a_data, out.array, m, out.ld)
                with np.errstate(all="ignore"):
                    expected = {"sigmoid": sigmoid_reference(a), "identity": a,
                                "relu": np.maximum(a, np.float32(0)),
                                "decrement": a - np.float32(1)}[op]
                expected = expected.T if trans_b else expected
            got = out.matrix()
            if not np.allclose(got, expected, rtol=0, atol=1e-6 if op == "sigmoid" else 0):
                failures.append((kind, op, m, n, trans_b))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, f"wrong results from concurrent calls: {failures}"
