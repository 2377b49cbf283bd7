"""A64 complex BRGEMM (FCMLA): the block plan and the code on any host, every block shape run
for real in the aarch64 lane against numpy.

The choices (einjit/backends/aarch64/complex_brgemm.py): blocks of 4 q registers of rows (8
complex64, 4 complex128) by 6 columns; remainder rows as q pieces and, for an odd complex64
count, the last row along k (DOT: two k steps a register); column remainders 1..5;
accumulator sets over k for small blocks (the real kernel's rule). Operands hold small
integers in both parts, so every partial sum is exact in any order and C must equal numpy's
result bit for bit; gaps (ld > rows, batch stride gaps) and a padding around C hold
NaN-payload canaries.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from einjit.backends import resolve_target
from einjit.backends.aarch64 import brgemm, complex_brgemm, generate_brgemm
from einjit.disasm import disassemble
from einjit.errors import KernelParameterError
from einjit.runtime.host import host_isa

from brgemm_support import check_code, pair_sweep

NEON = resolve_target("aarch64")
DTYPES = ("complex64", "complex128")
PART = {"complex64": np.float32, "complex128": np.float64}
in_lane = pytest.mark.skipif(host_isa() != "aarch64", reason="runs A64 code (aarch64 lane)")
SIZES = range(1, 21)


def element(dtype):
    return complex_brgemm.complex_element(dtype)


# ---- the plan and the code (any host)

@pytest.mark.parametrize("dtype", DTYPES)
def test_blocks_tile_c_exactly_one_register_per_column_and_lane_pair(dtype):
    """Full q pieces only: complex64's last row of an odd M is a DOT row, which fills both
    pairs of its registers with two k steps."""
    lanes = element(dtype).lanes
    for m, n in itertools.product(range(1, 65), range(1, 65)):
        blocks = complex_brgemm.block_counts(m, n, dtype)
        assert sum(brgemm._rows(pieces) * ncols * count
                   for (pieces, ncols), count in blocks.items()) == m * n, (m, n)
        for pieces, ncols in blocks:
            assert 1 <= ncols <= brgemm.BLOCK_COLS
            kernel = complex_brgemm._microkernel(pieces, ncols, 64, 1, element(dtype))
            if pieces == brgemm.DOT:
                assert dtype == "complex64" and m % 2 == 1
                assert ncols * (len(kernel.sets) + 1) <= len(brgemm.ACC_REGS)
                continue
            assert 1 <= len(pieces) <= brgemm.MAX_PIECES and set(pieces) == {lanes}
            assert len(pieces) * ncols * len(kernel.sets) <= len(brgemm.ACC_REGS)
        registers = sum(len(pieces) * count for (pieces, _), count in
                        complex_brgemm.block_counts(m, 1, dtype).items() if pieces != brgemm.DOT)
        assert registers == m // lanes, (m, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (2, 1), (1, 3), (3, 2), (9, 7), (8, 6), (16, 12),
                                 (17, 13), (64, 64), (35, 11)])
def test_the_kernels_k_loops_are_the_blocks_k_loops(m, n, dtype):
    """The static benchmark analyses k_loop_code per block: the kernel contains exactly it,
    two FCMLAs (#0, #90) per piece, column and k step, B's element loaded whole."""
    code = generate_brgemm(NEON, m, n, 64, 1, dtype)
    for pieces, ncols in complex_brgemm.block_counts(m, n, dtype):
        loop, steps = complex_brgemm.k_loop_code(pieces, ncols, 64, dtype)
        assert loop in code and 64 % steps < steps <= 64, (pieces, ncols)
        text = disassemble(loop, "aarch64")
        emitted = steps + 64 % steps            # the loop's steps, then the rest's
        if pieces == brgemm.DOT:     # a register of two k steps: A's zipped, B's one q
            loads, letter = emitted // 2, "q"
            assert len(re.findall(r"\bzip1 v\d+\.2d", text)) == loads
        else:
            loads, letter = emitted, "d" if dtype == "complex64" else "q"
        for rotation in ("0", "0x5a"):
            assert len(re.findall(rf"\bfcmla\b.*#{rotation}$", text, re.M)) == \
                (1 if pieces == brgemm.DOT else len(pieces)) * ncols * loads
        assert not re.search(r"\bfml[as]\b", text)
        assert len(re.findall(rf"\bldr {letter}\d+, \[x(17|19|2[0-3])", text)) == \
            ncols * loads


def test_an_odd_complex64_row_runs_along_k_and_moves_64_bits_of_c():
    """M = 3: a q piece, then the last row as DOT: C's row element by ldr d / str d (x16
    walks C), its two pairs added before the store, vector FCMLAs (no by-element ones)."""
    text = disassemble(generate_brgemm(NEON, 3, 2, 4, 1, "complex64"), "aarch64")
    dot = text[text.index("add x12, x12, #0x10"):]        # C_BLOCK on to the third row
    loaded = [int(r) for r in re.findall(r"\bldr d(\d+), \[x16\]", dot)]
    stored = [int(r) for r in re.findall(r"\bstr d(\d+), \[x16\]", dot)]
    # C into accumulators (v8 up; x16 also walks A, into v0..v7), and out of the same
    assert [r for r in loaded if r >= 8] == stored and len(stored) == 2
    assert not re.search(r"\b(ldr|str|ldp|stp|ldur|stur) q\d+, \[x16", dot)
    assert re.search(r"\bext v\d+\.16b, v\d+\.16b, v\d+\.16b, #8", dot)
    assert re.search(r"\bfcmla v\d+\.4s, v\d+\.4s, v\d+\.4s, #0x5a", dot)
    assert not re.search(r"\.s\[0\]", dot)


@pytest.mark.parametrize("dtype", DTYPES)
def test_code_decodes_without_x18(dtype):
    for (m, n, k), accumulate in itertools.product([(7, 5, 33), (19, 1, 70), (3, 2, 17),
                                                    (1, 1, 64), (63, 64, 9)], (True, False)):
        text = disassemble(generate_brgemm(NEON, m, n, k, 3, dtype, accumulate), "aarch64")
        assert ".byte" not in text and not re.search(r"\b[xw]18\b", text)
        assert text.splitlines()[-1].split()[-1] == "ret"


def test_a_real_dtype_is_not_a_complex_element():
    with pytest.raises(KernelParameterError, match="dtype='float64' is not complex"):
        complex_brgemm.complex_element("float64")


# ---- in the lane: every block shape against numpy

def check(m, n, k, br, dtype, gaps=(0, 0, 0), stride_gaps=(0, 0), seed=0, accumulate=True):
    check_code(lambda *shape: generate_brgemm(NEON, *shape), m, n, k, br, dtype, gaps,
               stride_gaps, seed, accumulate)


K_ROTATION = (64, 1, 17, 3, 33, 16, 70, 5, 32, 15, 300)
GAPS = ((0, 0, 0), (3, 2, 5), (1, 7, 1))


def _sweep():
    """Every M and every N in 1..20, each with two partners, K around every unroll and up
    to 300, batches 1..3, tight and padded leading dimensions and batch strides."""
    return pair_sweep(SIZES, (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 20), K_ROTATION, GAPS)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_m_and_n(dtype):
    for m, n, k, br, gaps in _sweep():
        check(m, n, k, br, dtype, gaps, stride_gaps=(gaps[0], gaps[2]), seed=m * 65 + n)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_small_blocks_at_every_k_around_their_unroll(dtype):
    """1..3 accumulators per k step (16, 8, 6 sets; 4 or 2 A pointers): straight-line K, the
    loop with every rest, batches."""
    for (m, n), k in itertools.product([(1, 1), (2, 1), (1, 2), (1, 3), (3, 1), (4, 1),
                                        (2, 3), (5, 1), (1, 6), (3, 5)],
                                       [1, 2, 7, 15, 16, 17, 31, 32, 33, 48, 64, 70, 71]):
        check(m, n, k, 1 + k % 3, dtype, gaps=(k % 4, k % 3, 1), seed=k)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_setting_c_never_reads_it(dtype):
    """accumulate=False for every block shape: B's zeros times negative A parts make -0
    products, which must sum onto +0 (C starts as NaN: a read of it shows)."""
    for m, n, k, br, gaps in _sweep()[::2]:
        check(m, n, k, br, dtype, gaps, stride_gaps=(gaps[0], gaps[2]), seed=m * 65 + n,
              accumulate=False)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_blocks_and_batches(dtype):
    for m, n, k, br in [(64, 64, 64, 4), (33, 25, 130, 2), (17, 19, 257, 1), (40, 6, 8, 16)]:
        check(m, n, k, br, dtype, gaps=(2, 1, 3), stride_gaps=(5, 3), seed=m + n)
