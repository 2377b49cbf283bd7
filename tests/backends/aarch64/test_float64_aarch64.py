"""FP64 A64 kernels through the backend generators, run in the aarch64 lane.

Each kernel is generated with dtype="float64", mapped with ExecutableMemory and called through
ctypes on float64 buffers full of canaries: results are compared with numpy (bit for bit for
every exact op, NaN, ±inf, ±0 and denormals included; sigmoid within 1e-15 of a long double
reference; reciprocal exactly, fdiv being correctly rounded; BRGEMM within the rounding bound
of its sum), and every element the kernel must not write keeps its canary. Code generation
checks (no float32 change, errors, one buffer) run on any host.
"""

from __future__ import annotations

import numpy as np
import pytest

from einjit import ops
from einjit.backends import resolve_target
from einjit.backends.aarch64 import (
    emit_binary,
    emit_brgemm,
    emit_unary,
    generate_binary,
    generate_brgemm,
    generate_unary,
)
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler
from einjit.errors import KernelParameterError, KernelParameterTypeError
from einjit.runtime.host import host_isa

from support import guarded, run_code, run_in_child

NEON = resolve_target("aarch64")
F64 = "float64"
CANARY = np.uint64(0x7FF4_DEAD_BEEF_0001)     # a signalling-NaN pattern no arithmetic produces
in_lane = pytest.mark.skipif(host_isa() != "aarch64", reason="runs A64 code (aarch64 lane)")

SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 1e-310,
                     -2.5e-309, 2.2250738585072014e-308, 1.0, -1.0, 0.5, 1.7976931348623157e308,
                     -1.7976931348623157e308, 1e154, 1.3407807929942596e154, 745.2, -745.2,
                     709.8, -709.8, 36.8, -36.8, 1e-17, 3.0], dtype=np.float64)


def canaries(count: int) -> np.ndarray:
    return np.full(count, CANARY, dtype=np.uint64).view(np.float64)


def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(np.uint64)


def mixed(rng: np.random.Generator, count: int, fraction: float = 0.15) -> np.ndarray:
    values = 10.0 ** rng.uniform(-4.0, 2.5, count) * rng.choice((-1.0, 1.0), count)
    special = rng.random(count) < fraction
    values[special] = rng.choice(SPECIALS, int(special.sum()))
    return values


def address(array: np.ndarray) -> int:
    return array.ctypes.data


def matrix(buffer: np.ndarray, rows: int, cols: int, ld: int, offset: int = 0) -> np.ndarray:
    """rows x cols column-major view of buffer[offset:] with leading dimension ld."""
    return np.lib.stride_tricks.as_strided(buffer[offset:], (rows, cols), (8, 8 * ld))


def untouched(buffer: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    """Mask of the elements outside the rows x cols column-major matrix."""
    mask = np.ones(buffer.size, bool)
    for j in range(cols):
        mask[j * ld:j * ld + rows] = False
    return mask


def assert_same(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Bit-exact equality, any NaN matching any NaN."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
    bad = np.flatnonzero((bits(got) != bits(expected)).ravel() & ~nan.ravel())
    assert bad.size == 0, (f"{what}: {bad.size} elements differ, first at {bad[0]}: "
                           f"{got.ravel()[bad[0]]!r} vs {expected.ravel()[bad[0]]!r}")


# ---- generation (any host)

def test_float32_is_the_default_and_float64_differs():
    assert generate_brgemm(NEON, 17, 7, 9, 2) == generate_brgemm(NEON, 17, 7, 9, 2, "float32")
    assert generate_unary(NEON, "sigmoid", 9, 5, True) == \
        generate_unary(NEON, "sigmoid", 9, 5, True, dtype="float32")
    assert generate_binary(NEON, "add", 9, 5) == generate_binary(NEON, "add", 9, 5, "float32")
    assert generate_brgemm(NEON, 17, 7, 9, 2, F64) != generate_brgemm(NEON, 17, 7, 9, 2)
    for op in ops.UNARY_OPS:
        for trans_b in (False, True):
            assert generate_unary(NEON, op, 9, 5, trans_b, F64) != \
                generate_unary(NEON, op, 9, 5, trans_b)


@pytest.mark.parametrize("dtype, error", [("float16", KernelParameterError),
                                          ("int64", KernelParameterError),
                                          (np.float64, KernelParameterTypeError),
                                          (8, KernelParameterTypeError)])
def test_dtype_errors_name_the_value(dtype, error):
    for make in (lambda: generate_brgemm(NEON, 4, 4, 4, 1, dtype),
                 lambda: generate_unary(NEON, "relu", 4, 4, False, dtype),
                 lambda: generate_binary(NEON, "add", 4, 4, dtype)):
        with pytest.raises(error, match="dtype="):
            make()


def test_float64_functions_in_one_buffer_equal_the_standalone_code():
    asm = Assembler()
    entries = [emit_brgemm(asm, NEON, 13, 7, 5, 2, F64),
               emit_unary(asm, NEON, "sigmoid", 13, 7, True, F64),
               emit_binary(asm, NEON, "min", 7, 13, dtype=F64)]
    code = asm.finish()
    alone = [generate_brgemm(NEON, 13, 7, 5, 2, F64),
             generate_unary(NEON, "sigmoid", 13, 7, True, F64),
             generate_binary(NEON, "min", 7, 13, F64)]
    for entry, standalone in zip(entries, alone):
        assert code[entry.position:entry.position + len(standalone)] == standalone


def test_float64_brgemm_microkernel_is_8x6_with_24_fmlas_per_k():
    from einjit.disasm import disassemble
    text = disassemble(generate_brgemm(NEON, 8, 6, 1, 1, F64), "aarch64")
    fmlas = [line for line in text.splitlines() if "fmla" in line]
    assert len(fmlas) == 24 and all(".2d" in line and ".d[0]" in line for line in fmlas)


# ---- BRGEMM in the lane

BRGEMM_SHAPES = [(m, n, k, br) for m in (1, 2, 3, 7, 8, 9, 16, 17, 23)
                 for n, k, br in ((1, 1, 1), (6, 4, 1), (5, 9, 2), (7, 3, 3), (13, 12, 1))]
BRGEMM_SHAPES += [(64, 64, 64, 1), (40, 18, 70, 2), (31, 11, 17, 16), (1, 25, 8, 4)]


def brgemm_case(rng, m, n, k, br, gaps=(0, 0, 0), stride_gaps=(0, 0)):
    ld_a, ld_b, ld_c = m + gaps[0], k + gaps[1], m + gaps[2]
    stride_a, stride_b = ld_a * k + stride_gaps[0], ld_b * n + stride_gaps[1]
    a = canaries(stride_a * (br - 1) + ld_a * k + 3)
    b = canaries(stride_b * (br - 1) + ld_b * n + 3)
    c = canaries(ld_c * n + 3)
    for i in range(br):
        matrix(a, m, k, ld_a, i * stride_a)[...] = rng.uniform(-1, 1, (m, k))
        matrix(b, k, n, ld_b, i * stride_b)[...] = rng.uniform(-1, 1, (k, n))
    matrix(c, m, n, ld_c)[...] = rng.uniform(-1, 1, (m, n))
    return a, b, c, (ld_a, ld_b, ld_c, stride_a, stride_b)


def check_brgemm(a, b, c, c0, m, n, k, br, lds):
    ld_a, ld_b, ld_c, stride_a, stride_b = lds
    products = [matrix(a, m, k, ld_a, i * stride_a) @ matrix(b, k, n, ld_b, i * stride_b)
                for i in range(br)]
    magnitude = np.abs(matrix(c0, m, n, ld_c)) + sum(
        np.abs(matrix(a, m, k, ld_a, i * stride_a)) @ np.abs(matrix(b, k, n, ld_b, i * stride_b))
        for i in range(br))
    expected = matrix(c0, m, n, ld_c) + sum(products)
    error = np.abs(matrix(c, m, n, ld_c) - expected)
    # each result is a sum of k*br + 1 terms rounded k*br times (fused) + the summing of sets
    bound = (k * br + 4) * 2.0 ** -52 * magnitude + 1e-300
    assert np.all(error <= bound), f"max error {error.max()!r}, bound {bound.min()!r}"
    # (numpy's float64 sum rounds too: the bound covers both)
    outside = untouched(c, m, n, ld_c)
    assert np.array_equal(bits(c)[outside], bits(c0)[outside]), "wrote outside C"


@in_lane
@pytest.mark.parametrize("m,n,k,br", BRGEMM_SHAPES)
def test_brgemm_float64(m, n, k, br):
    rng = np.random.default_rng(m * 7919 + n * 104729 + k * 31 + br)
    a, b, c, lds = brgemm_case(rng, m, n, k, br)
    a0, b0, c0 = a.copy(), b.copy(), c.copy()
    run_code(generate_brgemm(NEON, m, n, k, br, F64), address(a), address(b), address(c), *lds)
    assert np.array_equal(bits(a), bits(a0)) and np.array_equal(bits(b), bits(b0))
    check_brgemm(a, b, c, c0, m, n, k, br, lds)


@in_lane
@pytest.mark.parametrize("m,n,k,br,gaps,stride_gaps", [
    (9, 7, 5, 3, (3, 2, 5), (7, 1)), (17, 13, 6, 2, (1, 1, 1), (0, 9)),
    (8, 6, 4, 4, (8, 0, 16), (13, 5)), (3, 1, 70, 2, (5, 3, 1), (1, 1))])
def test_brgemm_float64_leading_dimension_and_batch_stride_gaps(m, n, k, br, gaps, stride_gaps):
    rng = np.random.default_rng(m + 100 * n)
    a, b, c, lds = brgemm_case(rng, m, n, k, br, gaps, stride_gaps)
    c0 = c.copy()
    run_code(generate_brgemm(NEON, m, n, k, br, F64), address(a), address(b), address(c), *lds)
    check_brgemm(a, b, c, c0, m, n, k, br, lds)


@in_lane
def test_brgemm_float64_special_values_propagate_like_numpy():
    """One special in A or B: the C entries it reaches are what IEEE gives (NaN or ±inf)."""
    m, n, k = 9, 7, 5
    rng = np.random.default_rng(5)
    for special in (np.nan, np.inf, -np.inf):
        a = np.asfortranarray(rng.uniform(0.5, 1, (m, k)))
        b = np.asfortranarray(rng.uniform(0.5, 1, (k, n)))
        a[4, 2] = special
        c = np.zeros((m, n), order="F")
        run_code(generate_brgemm(NEON, m, n, k, 1, F64), address(a), address(b), address(c),
                 m, k, m, 0, 0)
        with np.errstate(invalid="ignore"):
            expected = a @ b
        assert_same(c[4], expected[4], f"row reached by {special}")    # all NaN or ±inf
        assert np.all(np.isinf(expected[4]) | np.isnan(expected[4]))
        others = np.arange(m) != 4
        np.testing.assert_allclose(c[others], expected[others], rtol=1e-14)


# ---- unary and binary in the lane

def unary_expected(op: str, a: np.ndarray) -> np.ndarray:
    if op == "sigmoid":
        with np.errstate(over="ignore"):
            wide = a.astype(np.longdouble)
            return (1 / (1 + np.exp(-wide))).astype(np.float64)
    return ops.UNARY[op].reference(a)


def check_unary(op: str, got: np.ndarray, expected: np.ndarray, what: str) -> None:
    if op == "sigmoid":
        nan = np.isnan(expected)
        assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
        error = np.abs(got[~nan] - expected[~nan])
        assert error.max(initial=0) <= ops.FLOAT64_TOLERANCE["sigmoid"], \
            f"{what}: sigmoid error {error.max()!r}"
    else:
        assert_same(got, expected, what)   # reciprocal too: fdiv rounds correctly


UNARY_SHAPES = [(1, 1), (2, 3), (3, 2), (7, 5), (8, 8), (9, 1), (17, 13), (33, 6), (64, 3),
                (65, 9), (130, 7)]


@in_lane
@pytest.mark.parametrize("op", ops.UNARY_OPS)
@pytest.mark.parametrize("trans_b", [False, True])
def test_unary_float64_sizes_gaps_and_specials(op, trans_b):
    rng = np.random.default_rng(len(op) * 31 + trans_b)
    for index, (m, n) in enumerate(UNARY_SHAPES):
        gap_a, gap_b = index % 3, (index * 2) % 5
        ld_a = m + gap_a
        ld_b = (n if trans_b else m) + gap_b
        a = canaries(ld_a * n + 2)
        values = mixed(rng, m * n).reshape(m, n)
        matrix(a, m, n, ld_a)[...] = values
        b = canaries((m if trans_b else n) * ld_b + 2)
        a0, b0 = a.copy(), b.copy()
        run_code(generate_unary(NEON, op, m, n, trans_b, F64), address(a), address(b), ld_a, ld_b)
        assert np.array_equal(bits(a), bits(a0)), "A changed"
        rows, cols = (n, m) if trans_b else (m, n)
        got = matrix(b, rows, cols, ld_b)
        expected = unary_expected(op, values)
        check_unary(op, got.T if trans_b else got, expected, f"{op} {m}x{n} trans={trans_b}")
        outside = untouched(b, rows, cols, ld_b)
        assert np.array_equal(bits(b)[outside], bits(b0)[outside]), \
            f"{op} {m}x{n}: wrote outside B"


@in_lane
@pytest.mark.parametrize("op", ops.UNARY_OPS)
def test_unary_float64_every_special_value(op):
    a = np.asfortranarray(SPECIALS.reshape(-1, 2))
    m, n = a.shape
    for trans_b in (False, True):
        b = np.full((n, m) if trans_b else (m, n), np.nan, order="F")
        run_code(generate_unary(NEON, op, m, n, trans_b, F64), address(a), address(b), m,
                 n if trans_b else m)
        check_unary(op, b.T if trans_b else b, unary_expected(op, a), f"{op} specials")


@in_lane
def test_sigmoid_float64_accuracy_over_its_whole_range():
    """Dense inputs over [-750, 750], around 0 and at the underflow edge, against a long
    double reference (quad precision on aarch64): within 1e-15, exact at the extremes."""
    rng = np.random.default_rng(1)
    x = np.concatenate([np.linspace(-750, 750, 20011), rng.uniform(-40, 40, 20000),
                        rng.uniform(-1e-3, 1e-3, 2000), np.linspace(-746, -700, 2001),
                        [-1e300, 1e300, np.inf, -np.inf]])
    x = np.asfortranarray(x.reshape(-1, 1))
    y = np.empty_like(x)
    run_code(generate_unary(NEON, "sigmoid", x.shape[0], 1, False, F64), address(x), address(y),
             x.shape[0], x.shape[0])
    error = np.abs(y - unary_expected("sigmoid", x))
    assert error.max() <= 1e-15, f"max error {error.max()!r} at x = {x.ravel()[error.argmax()]}"
    assert y[-4, 0] == 0.0 and y[-3, 0] == 1.0 and y[-2, 0] == 1.0 and y[-1, 0] == 0.0
    assert np.all((y >= 0) & (y <= 1))


BINARY_SHAPES = [(1, 1), (2, 2), (3, 5), (7, 4), (16, 3), (17, 9), (33, 2), (70, 5)]


@in_lane
@pytest.mark.parametrize("op", ops.BINARY_OPS)
def test_binary_float64_sizes_gaps_and_specials(op):
    rng = np.random.default_rng(len(op))
    for index, (m, n) in enumerate(BINARY_SHAPES):
        gaps = (index % 2, index % 3, (index + 1) % 4)
        lds = [m + gap for gap in gaps]
        buffers = [canaries(ld * n + 2) for ld in lds]
        values = [mixed(rng, m * n).reshape(m, n) for _ in range(2)]
        for buffer, ld, value in zip(buffers, lds, values):
            matrix(buffer, m, n, ld)[...] = value
        a0, b0, c0 = (buffer.copy() for buffer in buffers)
        run_code(generate_binary(NEON, op, m, n, F64), *map(address, buffers), *lds)
        assert np.array_equal(bits(buffers[0]), bits(a0))
        assert np.array_equal(bits(buffers[1]), bits(b0))
        assert_same(matrix(buffers[2], m, n, lds[2]), ops.BINARY[op].reference(*values),
                    f"{op} {m}x{n}")
        outside = untouched(buffers[2], m, n, lds[2])
        assert np.array_equal(bits(buffers[2])[outside], bits(c0)[outside]), "wrote outside C"


@in_lane
@pytest.mark.parametrize("op", ops.BINARY_OPS)
def test_binary_float64_every_pair_of_special_values(op):
    a = np.asfortranarray(np.repeat(SPECIALS[:, None], SPECIALS.size, axis=1))
    b = np.asfortranarray(a.T)
    c = np.empty_like(a)
    m, n = a.shape
    run_code(generate_binary(NEON, op, m, n, F64), address(a), address(b), address(c), m, m, m)
    assert_same(c, ops.BINARY[op].reference(a, b), f"{op} special pairs")


@in_lane
def test_binary_float64_in_place():
    rng = np.random.default_rng(3)
    a = np.asfortranarray(mixed(rng, 35).reshape(7, 5))
    expected = a * a
    run_code(generate_binary(NEON, "mul", 7, 5, F64), address(a), address(a), address(a), 7, 7, 7)
    assert_same(a, expected, "mul in place")


# ---- guard pages: operands end right before a no-access page

def guarded64(count: int) -> np.ndarray:
    """`count` float64 canaries ending at a no-access page (shared with a forked child)."""
    array = guarded(2 * count).view(np.float64)
    array.view(np.uint64)[...] = CANARY
    return array


@in_lane
def test_float64_kernels_never_read_or_write_past_their_operands():
    shapes = [(1, 1, 1, 1), (3, 5, 3, 2), (9, 7, 5, 1), (17, 13, 6, 3), (8, 6, 4, 1)]
    cases = []
    for m, n, k, br in shapes:
        a, b, c = guarded64(m * k * br), guarded64(k * n * br), guarded64(m * n)
        a[...] = 1.0
        b[...] = 2.0
        c[...] = 0.0
        cases.append(("brgemm", (m, n, k, br), (a, b, c), (m, k, m, m * k, k * n)))
        for op in ("identity", "sigmoid"):
            for trans_b in (False, True):
                x, y = guarded64(m * n), guarded64(m * n)
                x[...] = 0.25
                cases.append(("unary", (op, m, n, trans_b), (x, y), (m, n if trans_b else m)))
        x, y, z = guarded64(m * n), guarded64(m * n), guarded64(m * n)
        x[...], y[...] = 3.0, 4.0
        cases.append(("binary", ("add", m, n), (x, y, z), (m, m, m)))

    def work(note):
        generators = {"brgemm": generate_brgemm, "unary": generate_unary,
                      "binary": generate_binary}
        for kind, params, arrays, integers in cases:
            note(f"{kind} {params}")
            run_code(generators[kind](NEON, *params, F64), *map(address, arrays), *integers)
        return True

    assert run_in_child(work)
    for kind, params, arrays, _ in cases:
        out = arrays[-1]
        if kind == "brgemm":
            assert np.all(out == 2.0 * params[2] * params[3]), params
        elif kind == "binary":
            assert np.all(out == 7.0), params
        elif params[0] == "identity":
            assert np.all(out == 0.25), params
        else:
            assert np.all(np.abs(out - 1 / (1 + np.exp(-0.25))) <= 1e-15), params


@in_lane
def test_float64_caller_and_two_kernels_in_one_buffer():
    """A caller bl's an FP64 BRGEMM before it and an FP64 transposing sigmoid after it (as a
    loop nest does); results equal the standalone kernels' bit for bit."""
    m, n, k, br = 13, 7, 5, 2
    asm = Assembler()
    gemm = emit_brgemm(asm, NEON, m, n, k, br, F64)
    asm.align(16)
    caller = asm.label("caller")
    asm.bind(caller)
    asm.prologue([19, 20, 29, 30], [])
    asm(enc.mov_reg(19, 2), enc.mov_reg(20, 3))            # caller(a, b, c, d)
    asm(enc.mov_imm(3, m), enc.mov_imm(4, k), enc.mov_imm(5, m), enc.mov_imm(6, m * k),
        enc.mov_imm(7, k * n))
    asm.bl(gemm)
    sigmoid = asm.label("sigmoid")
    asm(enc.mov_reg(0, 19), enc.mov_reg(1, 20), enc.mov_imm(2, m), enc.mov_imm(3, n))
    asm.bl(sigmoid)
    asm.epilogue()
    asm.align(64)
    asm.bind(sigmoid)
    emit_unary(asm, NEON, "sigmoid", m, n, True, F64)
    code = asm.finish()

    rng = np.random.default_rng(11)
    a, b = rng.uniform(-1, 1, br * m * k), rng.uniform(-1, 1, br * k * n)
    c0 = rng.uniform(-1, 1, m * n)
    c, d = c0.copy(), np.full(m * n, np.nan)
    run_code(code, address(a), address(b), address(c), address(d), entry=caller.position)
    expected_c, expected_d = c0.copy(), np.full(m * n, np.nan)
    run_code(generate_brgemm(NEON, m, n, k, br, F64), address(a), address(b), address(expected_c),
             m, k, m, m * k, k * n)
    run_code(generate_unary(NEON, "sigmoid", m, n, True, F64), address(expected_c),
             address(expected_d), m, n)
    assert_same(c, expected_c, "C")
    assert_same(d, expected_d, "D")
    product = sum(a[i * m * k:(i + 1) * m * k].reshape(k, m).T
                  @ b[i * k * n:(i + 1) * k * n].reshape(n, k).T for i in range(br))
    np.testing.assert_allclose(c.reshape(n, m).T, c0.reshape(n, m).T + product, rtol=1e-13,
                               atol=1e-14)
    assert np.all(np.abs(d.reshape(m, n) - 1 / (1 + np.exp(-c.reshape(n, m).T))) <= 1e-15)
