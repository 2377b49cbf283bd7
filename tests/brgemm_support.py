"""One BRGEMM call's operands for the tests of every BRGEMM (real and complex, the public
kernels and raw generated code): A, B and C in canary-filled buffers with gaps (ld > rows,
batch-stride gaps, a padding around C), and the reference in double precision (float64, or
complex128 for the complex dtypes).

A gap read into C turns it into NaN; a write outside C's M x N sub-matrix changes a canary's
bits. Operands of small integers (`integers`) make every partial sum exact in any order, so
C must equal the reference exactly; other values are checked against a first-order bound of
the rounding error of a sum in any order.
"""

import itertools

import numpy as np
import pytest

import einjit

from support import bits, canary, canary_buffer, from_parts, part_dtype, run_code, strided

C_PADDING = 19          # canary elements before and after C's extent (more than a zmm of float32)
UNIT_ROUNDOFF = {np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float64): 2.0 ** -53}
PADDED_GAPS = ((3, 2, 5), (7, 11))      # ld - rows of A, B, C; gaps between batch entries


class Layout:
    """Leading dimensions and batch strides (elements) of one call."""

    def __init__(self, m, n, k, gaps=(0, 0, 0), stride_gaps=(0, 0)):
        self.ld_a, self.ld_b, self.ld_c = m + gaps[0], k + gaps[1], m + gaps[2]
        self.stride_a = self.ld_a * k + stride_gaps[0]
        self.stride_b = self.ld_b * n + stride_gaps[1]

    @classmethod
    def of(cls, m, n, k, padded):
        """Tight, or with the tests' usual gaps."""
        return cls(m, n, k, *PADDED_GAPS) if padded else cls(m, n, k)


def random_values(rng, shape, dtype, integers):
    """Uniform in [-1, 1), or small integers (every partial sum exact); complex: each part."""
    complex_ = np.dtype(dtype).kind == "c"
    full = (2, *shape) if complex_ else shape
    if integers:
        values = rng.integers(-4, 5, size=full).astype(np.float64)
    else:
        values = rng.uniform(-1.0, 1.0, size=full)
    return from_parts(values, dtype) if complex_ else values.astype(dtype)


def wide(dtype):
    """The reference's dtype: float64, or complex128 for a complex dtype."""
    return np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)


class Problem:
    """Operands of one call and the reference. accumulate=False: C starts as NaN and must be
    set to the product alone. values: a function of a shape giving the operands' values
    (default: random_values)."""

    def __init__(self, m, n, k, br, dtype, layout=None, integers=False, seed=0,
                 allocate=canary_buffer, c_after=C_PADDING, values=None, accumulate=True):
        rng = np.random.default_rng(seed)
        self.m, self.n, self.k, self.br = m, n, k, br
        self.dtype, self.integers = np.dtype(dtype), integers
        self.layout = lay = layout or Layout(m, n, k)
        self.a = allocate((br - 1) * lay.stride_a + (k - 1) * lay.ld_a + m, dtype)
        self.b = allocate((br - 1) * lay.stride_b + (n - 1) * lay.ld_b + k, dtype)
        c_extent = (n - 1) * lay.ld_c + m
        self.c_buffer = allocate(C_PADDING + c_extent + c_after, dtype)
        self.c = self.c_buffer[C_PADDING:C_PADDING + c_extent]
        a_view = strided(self.a, (br, m, k), (lay.stride_a, 1, lay.ld_a))
        b_view = strided(self.b, (br, k, n), (lay.stride_b, 1, lay.ld_b))
        c_view = self.c_view()
        fill = values or (lambda shape: random_values(rng, shape, dtype, integers))
        a_view[...], b_view[...] = fill((br, m, k)), fill((br, k, n))
        c_view[...] = fill((m, n)) if accumulate else np.nan
        exact = wide(dtype)
        a_wide, b_wide = a_view.astype(exact), b_view.astype(exact)
        start = c_view.astype(exact) if accumulate else np.zeros((m, n), exact)
        # complex: no BLAS, the products one by one as the textbook formula has them (where
        # special values go); real: numpy's fast path
        optimize = exact.kind != "c"
        with np.errstate(invalid="ignore", over="ignore"):
            self.expected = start + np.einsum("imk,ikn->mn", a_wide, b_wide, optimize=optimize)
            size = (lambda z: np.abs(z.real) + np.abs(z.imag)) if exact.kind == "c" else np.abs
            magnitude = size(start) + np.einsum("imk,ikn->mn", size(a_wide), size(b_wide),
                                                optimize=optimize)
        # first-order bound of the rounding error of each (part's) sum in any order: a complex
        # product is two real ones; the float64 reference's own error counts once more
        part = part_dtype(dtype)
        products = 2 if exact.kind == "c" else 1
        sums = 2 if part == np.float64 else 1
        self.tolerance = sums * (products * (k * br + 1) + 1) * UNIT_ROUNDOFF[part] * magnitude
        self.in_c = np.zeros(self.c_buffer.size, dtype=bool)
        strided(self.in_c[C_PADDING:], (m, n), (1, lay.ld_c))[...] = True

    def c_view(self):
        return strided(self.c, (self.m, self.n), (1, self.layout.ld_c))

    def call(self, kernel):
        """Through a public kernel (einjit.brgemm), on the arrays."""
        lay = self.layout
        kernel(self.a, self.b, self.c, lay.ld_a, lay.ld_b, lay.ld_c, lay.stride_a, lay.stride_b)

    def addresses(self):
        """The arguments of raw generated code: addresses, leading dims, batch strides."""
        lay = self.layout
        return (self.a.ctypes.data, self.b.ctypes.data, self.c.ctypes.data, lay.ld_a, lay.ld_b,
                lay.ld_c, lay.stride_a, lay.stride_b)

    def got(self):
        return self.c_view().astype(wide(self.dtype))

    def verify(self, same_bits=False):
        """Canaries intact, C equal to the reference (integers; same_bits: bit for bit, signed
        zeros included) or within the rounding bound."""
        words = bits(self.c_buffer).reshape(self.c_buffer.size, -1)
        touched = np.flatnonzero(~self.in_c & (words != canary(self.dtype)).any(axis=1))
        assert touched.size == 0, (
            f"wrote outside the {self.m}x{self.n} sub-matrix of C (ld_c={self.layout.ld_c}) at "
            f"element offsets {(touched - C_PADDING)[:10].tolist()}")
        got = self.got()
        parts = ("real", "imag") if self.dtype.kind == "c" else (None,)
        for part in parts:
            have, want = ((got, self.expected) if part is None else
                          (getattr(got, part), getattr(self.expected, part)))
            if same_bits:
                wrong = np.argwhere(bits(np.ascontiguousarray(have)) != bits(want))
            elif self.integers:
                wrong = np.argwhere(have != want)
            else:
                wrong = np.argwhere(~(np.abs(have - want) <= self.tolerance))
            if wrong.size:
                r, j = wrong[0]
                what = "elements" if part is None else f"{part} parts"
                pytest.fail(f"{wrong.shape[0]} wrong {what} of C; first at row {r}, column {j}: "
                            f"got {got[r, j]!r}, expected {self.expected[r, j]!r}")


def check(m, n, k, br, padded, integers, dtype, seed=0):
    """One call of the public kernel on one problem."""
    problem = Problem(m, n, k, br, dtype, Layout.of(m, n, k, padded), integers, seed)
    problem.call(einjit.brgemm(m, n, k, br, dtype=dtype))
    problem.verify()


K_VALUES = (1, 2, 3, 16, 17, 64)
BATCH_VALUES = (1, 3, 16)


def sweep(dimension, top, partners):
    """Every value 1..top of `dimension` ("m" or "n"), each paired with three partners for the
    other dimension and rotating K, batch size, layout and data: (m, n, k, br, padded,
    integers) cases."""
    cases = []
    for value, offset in itertools.product(range(1, top + 1), range(3)):
        turn = 3 * value + offset
        partner = partners[(7 * value + 5 * offset) % len(partners)]
        m, n = (value, partner) if dimension == "m" else (partner, value)
        cases.append((m, n, K_VALUES[turn % 6], BATCH_VALUES[turn // 6 % 3],
                      turn // 2 % 2 == 1, turn // 4 % 4 != 0))
    return cases


def case_id(case):
    m, n, k, br, padded, integers = case
    return (f"m{m}-n{n}-k{k}-br{br}-{'padded' if padded else 'tight'}-"
            f"{'int' if integers else 'float'}")


def check_code(code_for, m, n, k, br, dtype, gaps=(0, 0, 0), stride_gaps=(0, 0), seed=0,
               accumulate=True):
    """Raw generated code (code_for(m, n, k, br, dtype, accumulate) -> bytes) on one problem
    of small integers: C += the batch's product (accumulate=False: C := it, C starting as NaN,
    the bits of adding it to +0: signed zeros included), bit for bit."""
    problem = Problem(m, n, k, br, dtype, Layout(m, n, k, gaps, stride_gaps), integers=True,
                      seed=seed, accumulate=accumulate)
    run_code(code_for(m, n, k, br, dtype, accumulate), *problem.addresses())
    problem.verify(same_bits=True)


def pair_sweep(sizes, partners, k_rotation, gaps):
    """Every M and every N in `sizes`, each with two partners for the other, rotating K, the
    batch size (1..3) and the gaps: sorted (m, n, k, br, gaps) cases."""
    cases = set()
    for value, turn in itertools.product(sizes, range(2)):
        partner = partners[(5 * value + 7 * turn) % len(partners)]
        for m, n in ((value, partner), (partner, value)):
            index = 3 * m + 5 * n + turn
            cases.add((m, n, k_rotation[index % len(k_rotation)], 1 + index % 3,
                       gaps[index % len(gaps)]))
    return sorted(cases)
