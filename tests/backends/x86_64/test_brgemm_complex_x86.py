"""The x86-64 complex BRGEMM generator (complex_brgemm.py): its register blocks, both variants
named explicitly (whichever the host defaults to), and accumulate=False."""

import ctypes
import dataclasses
import itertools

import numpy as np
import pytest

from einjit.backends.x86_64 import VARIANTS, cpu, generate_brgemm
from einjit.backends.x86_64.complex_brgemm import (
    PARTS,
    batch_chunks,
    columns_for,
    complex_target,
    k_chunks,
    packs_a,
    plan,
)
from einjit.errors import KernelParameterError
from einjit.runtime.host import host_isa
from einjit.runtime.memory import ExecutableMemory

from support import guarded, run_in_child

DTYPES = ("complex64", "complex128")
_PROTOTYPE = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 8)


def _runnable(variant):
    missing = [name for name in cpu.VARIANTS[variant] if name not in cpu.features()]
    return pytest.param(variant, marks=pytest.mark.skipif(
        host_isa() != "x86_64" or bool(missing), reason="runs x86-64 code of this variant"))


RUNNABLE = [_runnable(variant) for variant in VARIANTS]
# the host's core and one running zmm at full width: on Zen 4 a masked zmm tail takes the
# AVX2 code (complex_target), on Zen 5 it stays masked
MICROS = ("zen4", "zen5")


def target(variant, micro):
    return dataclasses.replace(VARIANTS[variant], micro=cpu.MICROARCHS[micro])


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_masked_zmm_tail_takes_the_avx2_code_on_a_half_rate_core(dtype):
    per_vector = 8 if dtype == "complex64" else 4
    for m in range(1, 70):
        zen4 = complex_target(target("avx512", "zen4"), m, dtype)
        tail = m % per_vector
        avx2 = tail and (tail <= per_vector // 2 or m < 2 * per_vector)
        assert (zen4.vector_bits, zen4.masks) == ((256, 0) if avx2 else (512, 7)), m
        assert complex_target(target("avx512", "zen5"), m, dtype).vector_bits == 512
        assert complex_target(target("avx2", "zen4"), m, dtype) == target("avx2", "zen4")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_blocks_fit_the_register_file_and_cover_m_and_n(variant, dtype):
    target = VARIANTS[variant]
    per_vector = target.lanes(PARTS[dtype].bytes) // 2
    for m, n in itertools.product(range(1, 70), (1, 2, 3, 7, 16, 64)):
        rows = 0
        for blocks, block, runs in plan(m, n, target, dtype):
            broadcasts = 0 if block.vectors == 1 and target.registers == 32 else 2
            # accumulators of re(b) and im(b), A's vectors, B's broadcasts
            assert 2 * block.vectors * block.cols + block.vectors + broadcasts \
                <= target.registers, (m, n, block)
            assert sum(count * cols for count, cols in runs) == n
            assert 0 <= block.tail < per_vector
            rows += blocks * block.vectors * per_vector - (per_vector - block.tail
                                                           if block.tail else 0)
        assert rows == m, (m, n)


def test_the_widest_blocks_fill_the_register_file():
    assert columns_for(4, 32) == 3 and columns_for(2, 32) == 7 and columns_for(1, 32) == 15
    assert columns_for(2, 16) == 3 and columns_for(1, 16) == 6


class Case:
    """One call's operands with ld > rows and batch gaps, C padded by canaries."""

    PAD = 5

    def __init__(self, m, n, k, br, dtype, seed, ld_a=None):
        rng = np.random.default_rng(seed)
        self.shape, self.dtype = (m, n, k, br), dtype
        self.ld_a, self.ld_b, self.ld_c = ld_a or m + 2, k + 1, m + 3
        self.stride_a, self.stride_b = self.ld_a * k + 3, self.ld_b * n + 1

        def values(count):
            return (rng.uniform(-1, 1, count) + 1j * rng.uniform(-1, 1, count)).astype(dtype)
        self.a = values((br - 1) * self.stride_a + (k - 1) * self.ld_a + m)
        self.b = values((br - 1) * self.stride_b + (n - 1) * self.ld_b + k)
        self.c_buffer = values(2 * self.PAD + (n - 1) * self.ld_c + m)

    def matrices(self):
        m, n, k, br = self.shape
        item = self.a.itemsize
        view = np.lib.stride_tricks.as_strided
        a = view(self.a, (br, m, k), (self.stride_a * item, item, self.ld_a * item))
        b = view(self.b, (br, k, n), (self.stride_b * item, item, self.ld_b * item))
        c = view(self.c_buffer[self.PAD:], (m, n), (item, self.ld_c * item))
        return a, b, c

    def call(self, code):
        memory = ExecutableMemory(code)
        _PROTOTYPE(memory.address)(self.a.ctypes.data, self.b.ctypes.data,
                                   self.c_buffer[self.PAD:].ctypes.data, self.ld_a, self.ld_b,
                                   self.ld_c, self.stride_a, self.stride_b)


# batches whose rows run in chunks (batch_chunks): many entries, a prime count, a tail; and
# (AVX2) long K in chunks (k_chunks), with a tail too
CHUNKED = [(64, 64, 64, 16), (40, 9, 64, 3), (17, 20, 100, 5), (9, 11, 300, 4)]
K_CHUNKED = [(64, 20, 600, 1), (40, 9, 256, 1), (17, 7, 512, 1)]
SHAPES = ([(m, 1 + m % 7, 1 + m % 4, 1 + m % 3) for m in range(1, 34)] + [(16, 16, 16, 2)]
          + CHUNKED + K_CHUNKED)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_chunked_shapes_run_their_batch_or_k_in_chunks(variant, dtype):
    """On Zen 4's 32 KiB L1, which the shapes were chosen for (the chunks follow L1's size;
    the tests below run them on Zen 4's and Zen 5's code)."""
    zen4 = target(variant, "zen4")
    element = 2 * PARTS[dtype].bytes
    for m, n, k, br in CHUNKED + (K_CHUNKED if variant == "avx2" else []):
        assert any(batch_chunks(zen4, block, runs, k, br, element) > 1
                   or k_chunks(zen4, block, runs, k, br, element) > 1
                   for _, block, runs in plan(m, n, zen4, dtype)), (m, n, k, br)


# A's columns a multiple of the conflict pitch apart (1024 and 512 bytes): rows copy A's panel
PACKED = [((64, 20, 33, 1), 128), ((32, 9, 16, 1), 64), ((16, 9, 8, 1), 32),
          ((64, 20, 33, 4), 128), ((32, 9, 16, 3), 64), ((64, 64, 64, 16), 64),
          ((64, 20, 600, 1), 128)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_packed_shapes_copy_a_panel(dtype):
    target = VARIANTS["avx2"]
    element = 2 * PARTS[dtype].bytes
    for shape, _ in PACKED:
        m, n, k, br = shape
        assert any(packs_a(target, block, runs,
                           br // batch_chunks(target, block, runs, k, br, element),
                           k // k_chunks(target, block, runs, k, br, element))
                   for _, block, runs in plan(m, n, target, dtype)), shape


def _match_numpy(variant, micro, dtype, shape, ld_a=None):
    case = Case(*shape, dtype, seed=sum(shape), ld_a=ld_a)
    a, b, c = case.matrices()
    expected = c.astype(np.complex128) + np.einsum(
        "imk,ikn->mn", a.astype(np.complex128), b.astype(np.complex128))
    before = case.c_buffer.copy()
    case.call(generate_brgemm(target(variant, micro), *shape, dtype=dtype))
    tolerance = (2 * shape[2] * shape[3] + 3) * (2.0 ** -22 if dtype == "complex64"
                                                 else 2.0 ** -51) * (1 + np.abs(expected))
    assert np.all(np.abs(c - expected) <= tolerance), shape
    outside = np.ones(case.c_buffer.size, bool)
    outside[case.PAD:][np.arange(shape[0])[:, None] + case.ld_c * np.arange(shape[1])] = False
    assert np.array_equal(case.c_buffer[outside].view(np.uint8),
                          before[outside].view(np.uint8)), f"{shape}: wrote outside C"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", RUNNABLE)
@pytest.mark.parametrize("micro", MICROS)
def test_each_variant_matches_numpy(variant, micro, dtype):
    for shape in SHAPES:
        _match_numpy(variant, micro, dtype, shape)
    for shape, ld_a in PACKED:
        _match_numpy(variant, micro, dtype, shape, ld_a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", RUNNABLE)
@pytest.mark.parametrize("micro", MICROS)
def test_setting_c_gives_the_bits_of_adding_to_a_zeroed_c(variant, micro, dtype):
    """accumulate=False: C := the sum without reading C (it starts as NaN), bit for bit what
    C += gives on a zeroed C."""
    for shape in SHAPES:
        setting, adding = (Case(*shape, dtype, seed=sum(shape)) for _ in range(2))
        setting.matrices()[2][...] = np.nan
        adding.matrices()[2][...] = 0
        setting.call(generate_brgemm(target(variant, micro), *shape, dtype=dtype,
                                     accumulate=False))
        adding.call(generate_brgemm(target(variant, micro), *shape, dtype=dtype))
        assert np.array_equal(setting.c_buffer.view(np.uint8), adding.c_buffer.view(np.uint8)), \
            f"{shape}: the set C differs from the added one"


def test_streaming_a_complex_c_is_refused_naming_the_dtype():
    with pytest.raises(KernelParameterError, match="stream=True is not supported for dtype "
                                                   "complex64"):
        generate_brgemm(VARIANTS["avx2"], 8, 8, 8, 1, dtype="complex64", accumulate=False,
                        stream=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant, micro", [pytest.param("avx512", "zen5", marks=RUNNABLE[0].marks),
                                            pytest.param("avx2", "zen4", marks=RUNNABLE[1].marks)])
def test_no_access_past_the_last_element_of_any_operand(variant, micro, dtype):
    """A, B and C (tight layouts) each end right before a no-access page; the calls run in a
    forked child (a fault fails the test naming the shape), then match numpy. With Zen 5's
    facts the AVX-512 tails stay masked zmm (on the host they may take the AVX2 code)."""
    part = PARTS[dtype].dtype
    shapes = [(m, n, 1 + (m + n) % 5, 2) for m in range(1, 18) for n in (1, 5)]
    rng = np.random.default_rng(7)
    calls = []
    for m, n, k, br in shapes:
        operands = []
        for size in (br * m * k, br * k * n, m * n):
            array = guarded(2 * size, part).view(dtype)
            array[...] = rng.uniform(-1, 1, size) + 1j * rng.uniform(-1, 1, size)
            operands.append(array)
        a, b, c = operands
        expected = c.astype(np.complex128).reshape(n, m).T + np.einsum(
            "imk,ikn->mn", a.reshape(br, k, m).transpose(0, 2, 1).astype(np.complex128),
            b.reshape(br, n, k).transpose(0, 2, 1).astype(np.complex128))
        code = generate_brgemm(target(variant, micro), m, n, k, br, dtype=dtype)
        calls.append(((m, n, k, br), code, operands, expected))

    def work(note):
        for shape, code, (a, b, c), _ in calls:
            note(f"{variant} {micro} {dtype} (m, n, k, br) = {shape}")
            memory = ExecutableMemory(code)
            m, n, k, br = shape
            _PROTOTYPE(memory.address)(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, k, m,
                                       m * k, k * n)
    run_in_child(work)
    for shape, _, (_, _, c), expected in calls:
        m, n, k, br = shape
        got = c.reshape(n, m).T
        assert np.all(np.abs(got - expected) <= 1e-5 * (1 + np.abs(expected))), shape
