"""A64 BRGEMM block shapes: every choice the block-shape code makes, run for real in the
aarch64 lane against numpy, and the plan checked on any host.

The choices (einjit/backends/aarch64/brgemm.py): 16x6 (FP32) / 8x6 (FP64) blocks; row
remainders as q, d and s pieces, or (FP32) one full vector overlapping the piece before it for
3 leftover rows, with M = 16a + 3 split as 15 + 4 rows; column remainders of 1..5; up to 16
accumulator sets alternating over k for small blocks, with K unrolled to a multiple of them;
2 or 4 pointers walking A for blocks of fewer than 4 FMLAs per k step; the last single rows
(FP32: M % 4 == 1, or 2 and 3 with more than 3 columns; FP64: M odd) computed along k, B
read as q-registers of k.

Operands hold small integers, so every partial sum is exact in either dtype and any summation
order: C must equal numpy's result bit for bit. Gaps (ld > rows, batch stride gaps) and a
padding around C hold NaN-payload canaries: a gap read into C makes a NaN, a write outside the
M x N sub-matrix changes a canary.
"""

from __future__ import annotations

import itertools
import re

import pytest

from einjit.backends import resolve_target
from einjit.backends.aarch64 import brgemm, generate_brgemm
from einjit.backends.aarch64.target import check_dtype
from einjit.runtime.host import host_isa

from brgemm_support import check_code, pair_sweep

NEON = resolve_target("aarch64")
DTYPES = ("float32", "float64")
in_lane = pytest.mark.skipif(host_isa() != "aarch64", reason="runs A64 code (aarch64 lane)")
SIZES = range(1, 65)


# ---- the plan (any host)

@pytest.mark.parametrize("dtype", DTYPES)
def test_blocks_tile_c_exactly_within_the_register_budget(dtype):
    lanes = check_dtype(dtype).lanes
    for m, n in itertools.product(SIZES, SIZES):
        blocks = brgemm.block_counts(m, n, dtype)
        assert sum(brgemm._rows(pieces) * ncols * count
                   for (pieces, ncols), count in blocks.items()) == m * n, (m, n)
        for pieces, ncols in blocks:
            assert 1 <= ncols <= brgemm.BLOCK_COLS
            if pieces == brgemm.DOT:
                kernel = brgemm._DotMicrokernel(ncols, 64, 1, check_dtype(dtype))
                assert ncols * (len(kernel.sets) + 1) <= len(brgemm.ACC_REGS)
                continue
            assert 1 <= len(pieces) <= brgemm.MAX_PIECES
            assert all(1 <= rows <= lanes for rows in pieces)
            # a piece that is not a full vector or a power-of-two part of one overlaps the
            # piece before it, so it needs a full vector right before it
            for index, rows in enumerate(pieces):
                if rows & (rows - 1):
                    assert index > 0 and pieces[index - 1] == lanes, (m, pieces)
            kernel = brgemm._Microkernel(pieces, ncols, 64, 1, check_dtype(dtype))
            registers = len(pieces) * ncols * len(kernel.sets)
            assert registers <= len(brgemm.ACC_REGS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_register_per_column_for_every_four_rows(dtype):
    """The last single rows are DOT blocks (M % lanes == 1; FP32 with more than 3 columns
    also M % 4 == 2 and M = 3, else a d piece); the other rows take ceil(rows / lanes)
    registers per C column (FP32: 3 rows after a vector are one)."""
    lanes = check_dtype(dtype).lanes
    for m, ncols in itertools.product(SIZES, range(1, 7)):
        blocks = brgemm.block_counts(m, ncols, dtype)
        singles = m % lanes if m % lanes < 3 else 0
        if lanes == 4 and m == 3:
            singles = 3 if ncols > 3 else 1
        elif lanes == 4 and singles == 2 and ncols <= 3:
            singles = 0
        assert blocks.get((brgemm.DOT, ncols), 0) == singles, (m, ncols, blocks)
        registers = sum(len(pieces) * count for (pieces, _), count in blocks.items()
                        if pieces != brgemm.DOT)
        assert registers == -(-(m - singles) // lanes), (m, ncols, blocks)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (2, 1), (1, 3), (4, 1), (3, 2), (7, 1), (15, 6),
                                 (19, 13), (64, 64), (35, 11), (51, 5)])
def test_the_kernels_k_loops_are_the_blocks_k_loops(m, n, dtype):
    """The static benchmark analyses k_loop_code per block: the kernel contains exactly it."""
    code = generate_brgemm(NEON, m, n, 64, 1, dtype)
    for pieces, ncols in brgemm.block_counts(m, n, dtype):
        loop, steps = brgemm.k_loop_code(pieces, ncols, 64, dtype)
        assert loop in code and 64 % steps < steps <= 64, (pieces, ncols)


def test_small_blocks_get_16_chains_and_several_a_pointers():
    element = check_dtype("float32")
    expectations = {(1, 1): (16, 4, 16), (2, 1): (8, 2, 8), (3, 1): (6, 2, 6),
                    (4, 1): (4, 1, 4), (4, 6): (1, 1, 4), (1, 6): (3, 1, 4)}
    for (count, ncols), (sets, walks, unroll) in expectations.items():
        kernel = brgemm._Microkernel((4,) * count, ncols, 64, 1, element)
        assert (len(kernel.sets), len(kernel.walks), kernel.unroll) == (sets, walks, unroll)
    # few k steps: no more sets than steps
    assert len(brgemm._Microkernel((4,), 1, 5, 1, element).sets) == 5


def test_pairwise_sums_add_every_set_once_into_set_0():
    for count in range(1, 17):
        totals = [{index} for index in range(count)]
        for total, addend in brgemm._pairwise_sums(count):
            assert totals[addend], "an addend was already summed away"
            totals[total] |= totals[addend]
            totals[addend] = set()
        assert totals[0] == set(range(count))


def test_code_decodes():
    pytest.importorskip("capstone")
    from einjit.disasm import disassemble
    for dtype, (m, n, k) in itertools.product(DTYPES, [(7, 5, 33), (19, 1, 70), (3, 2, 17),
                                                       (1, 1, 64), (63, 64, 9)]):
        text = disassemble(generate_brgemm(NEON, m, n, k, 3, dtype), "aarch64")
        assert ".byte" not in text and not re.search(r"\b[xw]18\b", text)
        if dtype == "float32" and m % 4 == 3 and m > 4:
            assert "ldur q" in text and "stur q" in text    # the overlapping pieces


# ---- in the lane: every block-shape choice against numpy

def check(m, n, k, br, dtype, gaps=(0, 0, 0), stride_gaps=(0, 0), seed=0, accumulate=True):
    check_code(lambda *shape: generate_brgemm(NEON, *shape), m, n, k, br, dtype, gaps,
               stride_gaps, seed, accumulate)


K_ROTATION = (64, 1, 17, 3, 33, 16, 70, 5, 32, 15)
GAPS = ((0, 0, 0), (3, 2, 5), (1, 7, 1))


def _sweep():
    """Every M and every N in 1..64, each with two partners, K around every unroll (4, 6, 8,
    16) and its rests, batches 1..3, tight and padded leading dimensions and batch strides."""
    return pair_sweep(SIZES, (1, 2, 3, 4, 5, 6, 7, 11, 13, 19, 35, 51, 64), K_ROTATION, GAPS)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_m_and_n(dtype):
    for m, n, k, br, gaps in _sweep():
        check(m, n, k, br, dtype, gaps, stride_gaps=(gaps[0], gaps[2]), seed=m * 65 + n)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_small_blocks_at_every_k_around_their_unroll(dtype):
    """1..3 FMLAs per k step (16, 8, 6 sets; 4 or 2 A pointers) and single rows along k (DOT:
    chunks of lanes k steps, up to 8 sets): straight-line K, the loop with every rest of
    chunks and of steps, batches."""
    for (m, n), k in itertools.product([(1, 1), (2, 1), (1, 2), (1, 3), (3, 1), (4, 1),
                                        (2, 3), (8, 1), (4, 3), (5, 1), (1, 6), (3, 5)],
                                       [1, 2, 7, 15, 16, 17, 24, 31, 32, 33, 47, 48, 64, 70,
                                        71, 100]):
        check(m, n, k, 1 + k % 3, dtype, gaps=(k % 4, k % 3, 1), seed=k)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_remainder_rows_with_every_column_remainder(dtype):
    """Overlapping pieces (M = 4q + 3), the 15 + 4 split (M = 16a + 3), d/s pieces, against
    every N remainder, with leading dimensions beyond the rows and batch stride gaps."""
    for m, n in itertools.product([3, 7, 11, 15, 19, 23, 27, 31, 35, 47, 51, 63, 17, 18, 33,
                                   49, 62], range(1, 13)):
        check(m, n, 9 + n, 2, dtype, gaps=(n % 3 + 1, 2, n % 4), stride_gaps=(3, 1),
              seed=m * 13 + n)


@in_lane
@pytest.mark.parametrize("dtype", DTYPES)
def test_setting_c_never_reads_it(dtype):
    """accumulate=False for every block-shape choice (the sweep's shapes, DOT rows included):
    B's zeros times negative A elements make -0 products, which must sum onto +0."""
    for m, n, k, br, gaps in _sweep()[::2]:
        check(m, n, k, br, dtype, gaps, stride_gaps=(gaps[0], gaps[2]), seed=m * 65 + n,
              accumulate=False)
