"""One element-wise call's operands for the tests of the unary and binary primitives, real and
complex: inputs of random values mixed with special values in canary-filled buffers (ld >=
rows), the output in a canary-filled buffer with a padding around it.

Every check asserts that nothing outside the output's sub-matrix was written (the ld gaps
included) and that the inputs come back bit for bit; what the output must hold is the
caller's: a `mismatch(a, got)` for a unary op, numpy's `reference(a, b)` for a binary one.
"""

import numpy as np
import pytest

from support import bits, canary, canary_buffer, column_major, from_parts, mixed_data, part_dtype

PADDING = 19                      # canary elements before and after the output's extent


def mixed_values(rng, count, specials, dtype):
    """`count` values of mixed_data in `dtype`; complex: each part (the real one first) drawn
    from the specials of the part's dtype."""
    if np.dtype(dtype).kind == "c":
        return from_parts(np.stack([mixed_data(rng, count, specials),
                                    mixed_data(rng, count, specials)]), dtype)
    return mixed_data(rng, count, specials).astype(dtype)


def parts(array):
    """A contiguous array's elements as rows of their parts (one part for a real dtype)."""
    array = np.ascontiguousarray(array)
    return array.view(part_dtype(array.dtype)).reshape(*array.shape, -1)


def same_bits(got, expected):
    """Per element: every part's bits equal."""
    return (bits(parts(got)) == bits(parts(expected))).all(axis=-1)


def same_or_nan(got, expected):
    """Per element: every part's bits equal, or that part NaN in both (a NaN's payload is
    the hardware's choice)."""
    g, e = parts(got), parts(expected)
    return ((bits(g) == bits(e)) | (np.isnan(g) & np.isnan(e))).all(axis=-1)


def part_hex(value):
    """A value's parts' bits, for messages."""
    return [hex(x) for x in bits(parts(np.asarray(value)[None])).ravel()]


def _untouched_outside(buffer, inside, where):
    words = bits(buffer).reshape(buffer.size, -1)
    outside = np.flatnonzero(~inside & (words != canary(buffer.dtype)).any(axis=1))
    assert outside.size == 0, (f"{where}: wrote outside the output's sub-matrix at buffer "
                               f"offsets {(outside - PADDING)[:10].tolist()}")


def _fail_first(wrong, where, describe):
    r, j = np.argwhere(wrong)[0]
    pytest.fail(f"{where}: {int(wrong.sum())} wrong elements; first at row {r}, column {j}: "
                f"{describe(r, j)}")


class UnaryProblem:
    """B := op(A), B transposed where trans_b (B row-major: B[j + r ld_b] = A[r + j ld_a])."""

    def __init__(self, op, m, n, trans_b, padded, seed, dtype, specials, mismatch, gaps=(3, 5),
                 allocate=canary_buffer, b_after=PADDING):
        """mismatch(a, got) -> (mask of wrong elements, the expected values)."""
        self.op, self.m, self.n, self.trans_b, self.dtype = op, m, n, trans_b, dtype
        self.mismatch = mismatch
        gap_a, gap_b = gaps if padded else (0, 0)
        self.b_rows, self.b_cols = (n, m) if trans_b else (m, n)
        self.ld_a, self.ld_b = m + gap_a, self.b_rows + gap_b
        self.a = allocate((n - 1) * self.ld_a + m, dtype)
        values = mixed_values(np.random.default_rng(seed), m * n, specials, dtype)
        column_major(self.a, m, n, self.ld_a)[...] = values.reshape(m, n)
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
        _untouched_outside(self.b_buffer, self.in_b, where)
        assert np.array_equal(bits(self.a), self.a_bits), f"{where}: A was modified"
        a = np.ascontiguousarray(column_major(self.a, self.m, self.n, self.ld_a))
        got = column_major(self.b, self.b_rows, self.b_cols, self.ld_b)
        got = np.ascontiguousarray(got.T if self.trans_b else got)
        wrong, expected = self.mismatch(a, got)
        if wrong.any():
            _fail_first(wrong, where, lambda r, j: (
                f"op({a[r, j]!r}) gave {got[r, j]!r} (bits {part_hex(got[r, j])}), "
                f"expected {expected[r, j]!r} (bits {part_hex(expected[r, j])})"))


class BinaryProblem:
    """C := A op B. A tenth of B's elements equal A's (x - x, a special against itself), a
    twentieth are -A (±0 sums, inf - inf)."""

    def __init__(self, op, m, n, padded, seed, dtype, specials, reference, either_zero=False,
                 gaps=(3, 1, 6), allocate=canary_buffer, c_after=PADDING):
        """C must be numpy's reference(a, b) bit for bit, NaN compared as NaN-ness;
        either_zero: a zero result of two zero operands may have either sign (min, max)."""
        self.op, self.m, self.n, self.dtype = op, m, n, dtype
        self.reference, self.either_zero = reference, either_zero
        self.ld_a, self.ld_b, self.ld_c = (m + gap for gap in (gaps if padded else (0, 0, 0)))
        rng = np.random.default_rng(seed)
        a = mixed_values(rng, m * n, specials, dtype)
        b = mixed_values(rng, m * n, specials, dtype)
        same = rng.random(m * n) < 0.1
        b[same] = a[same]
        negated = rng.random(m * n) < 0.05
        b[negated] = -a[negated]
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
        _untouched_outside(self.c_buffer, self.in_c, where)
        assert np.array_equal(bits(self.a), self.input_bits[0]), f"{where}: A changed"
        assert np.array_equal(bits(self.b), self.input_bits[1]), f"{where}: B changed"
        a = np.ascontiguousarray(column_major(self.a, self.m, self.n, self.ld_a))
        b = np.ascontiguousarray(column_major(self.b, self.m, self.n, self.ld_b))
        got = np.ascontiguousarray(column_major(self.c, self.m, self.n, self.ld_c))
        with np.errstate(all="ignore"):
            expected = self.reference(a, b)
        same = same_or_nan(got, expected)
        if self.either_zero:
            same |= (a == 0) & (b == 0) & (got == 0)
        if not same.all():
            _fail_first(~same, where, lambda r, j: (
                f"{a[r, j]!r} {self.op} {b[r, j]!r} gave {got[r, j]!r} (bits "
                f"{part_hex(got[r, j])}), expected {expected[r, j]!r}"))
