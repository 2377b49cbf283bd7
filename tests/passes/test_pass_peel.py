"""Peeling: contractions whose kernel dims split cannot cut into large blocks run as a main
part and remainders; the parts cover the operation exactly and each gets large blocks."""

import dataclasses
from math import prod

import numpy as np
import pytest

from einjit.backends import backend, x86_64
from einjit.backends.x86_64 import cpu
from einjit.ir import TensorOperation
from einjit.passes import fuse, optimize
from einjit.passes.block import ROWS_K_MULTIPLE, is_large
from einjit.passes.peel import POOR_BLOCK_SHARE, peel
from einjit.passes.split import gives_up_occupancy, max_sizes

ZEN4 = dataclasses.replace(x86_64.VARIANTS["avx512"], micro=cpu.MICROARCHS["zen4"])
AVX2 = dataclasses.replace(x86_64.VARIANTS["avx2"], micro=cpu.MICROARCHS["zen4"])


def gemm(m, n, k, first="zero", last="none", dtype="float32", isa=ZEN4, ld_pad=0):
    """C (m x n, column-major) = A (m x k) B (k x n), leading dims padded by ld_pad."""
    lda, ldb, ldc = m + ld_pad, k + ld_pad, m + ld_pad
    return TensorOperation(dtype, first, "gemm", last, ("n", "k", "m"), None, (n, k, m),
                           (0, lda, 1), (ldb, 1, 0), (ldc, 0, 1), isa=isa, num_threads=1)


def kernel_sizes(op):
    return {d.type: d.size for d in optimize(op, num_threads=1).dims if d.exec_type == "prim"}


def test_well_split_ops_are_one_part():
    op = gemm(1920, 1920, 1920)
    parts = peel(op, 1)
    assert len(parts) == 1 and parts[0].op == fuse(op) and parts[0].offsets == (0, 0, 0)


@pytest.mark.parametrize("sizes", [(1999, 1999, 1999), (2039, 64, 2039), (64, 2018, 1009),
                                   (4099, 33, 700), (131, 4111, 2017)])
def test_parts_cover_the_operation_with_large_blocks(sizes):
    op = gemm(*sizes)
    parts = peel(op, 1)
    assert 2 <= len(parts) <= 8
    assert sum(prod(d.size for d in part.op.dims) for part in parts) == prod(sizes)
    for part in parts:
        # every kernel dim of every part: its whole size, or a block of at least a quarter of
        # the part's own maximum
        limits = max_sizes(part.op, None)
        got = kernel_sizes(part.op)
        whole = {d.type: d.size for d in part.op.dims}
        for kind in "mnk":
            assert got[kind] == whole[kind] or POOR_BLOCK_SHARE * got[kind] >= limits[kind], \
                (part, got)


def test_a_k_remainder_adds_to_the_main_part():
    parts = peel(gemm(256, 256, 1999), 1)
    firsts = [part.op.prim_first_touch for part in parts]
    assert firsts == ["zero", "none"]
    k_offsets = [part.offsets[1] for part in parts]
    assert k_offsets[0] == 0 and k_offsets[1] == parts[0].op.dims[1].size


def test_a_last_touch_keeps_k_whole():
    parts = peel(gemm(256, 256, 1999, last="relu"), 1)
    assert all(d.size in (256, 1999) for part in parts for d in part.op.dims if d.type == "k")


def run_parts(op, a, b, c):
    """Execute each part on flat views of a, b, c from its offsets."""
    for part in peel(op, 1):
        o0, o1, o2 = part.offsets
        optimize(part.op, num_threads=1).execute(a[o0:], b[o1:], c[o2:])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sizes, pad", [((1999, 67, 521), 0), ((131, 523, 1031), 3),
                                        ((257, 1031, 67), 5), ((2000, 64, 601), 3)])
def test_parts_compute_the_product_bit_for_bit(sizes, pad, dtype):
    check_parts(sizes, pad, dtype)


def test_k_chunks_peeled_compute_the_product_bit_for_bit():
    # float64 K = 521, prime: a large contraction's k chunks (of 128 or, on a 48 KiB L1, 192)
    # peeled into a main part and the rest
    check_parts((256, 64, 521), 3, "float64")


def check_parts(sizes, pad, dtype, peeled=True):
    """The peeled parts of an m x n x k GEMM (leading dims padded by `pad`) against numpy, on
    integer data (exact sums), the padding rows never written. peeled: whether the host's
    plan must have several parts (None: either)."""
    m, n, k = sizes
    rng = np.random.default_rng(sum(sizes))
    lda, ldb, ldc = m + pad, k + pad, m + pad
    a = rng.integers(-3, 4, lda * k).astype(dtype)        # integer data: exact sums
    b = rng.integers(-3, 4, ldb * n).astype(dtype)
    c = np.full(ldc * n, np.nan, dtype)
    op = gemm(m, n, k, dtype=dtype, isa=None, ld_pad=pad)
    assert peeled is None or len(peel(op, 1)) > 1
    run_parts(op, a, b, c)
    A = a.reshape(k, lda).T[:m]
    B = b.reshape(n, ldb).T[:k]
    C = c.reshape(n, ldc).T
    np.testing.assert_array_equal(C[:m], A.astype(np.float64) @ B)
    assert np.isnan(C[m:]).all()            # the padding rows are never written


def test_only_a_remainder_makes_parts(monkeypatch):
    """A dim whose poor split still leaves whole blocks of the peeling size is not cut into
    an empty remainder."""
    import einjit.passes.peel as peel_module
    monkeypatch.setattr(peel_module, "block_size", lambda op, dim: 1)     # every split poor
    op = gemm(256, 256, 1024)             # 1024 = 2 x 512: whole blocks of every maximum
    assert [p.op for p in peel(op, 1)] == [fuse(op)]


@pytest.mark.parametrize("k", [1999, 4099, 2000])
def test_a_vector_times_a_matrix_has_k_in_whole_vectors(k):
    """m = 1 beyond L2: the main part's K a multiple of ROWS_K_MULTIPLE (the kernels' dot
    products take K a vector at a time), the rest added to it; K already such: one part."""
    op = gemm(1, 3000, k)
    parts = peel(op, 1)
    if k % ROWS_K_MULTIPLE == 0:
        assert len(parts) == 1
        return
    ks = [part.op.dims[1].size for part in parts]
    assert ks[0] == k // ROWS_K_MULTIPLE * ROWS_K_MULTIPLE and sum(set(ks)) == k
    assert [part.op.prim_first_touch for part in parts][:2] in (["zero", "zero"],
                                                                 ["zero", "none"])
    assert sum(prod(d.size for d in part.op.dims) for part in parts) == 3000 * k


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", [1000, 2000, 1500, 2500, 1920, 3000])
def test_a_large_contraction_takes_the_fewest_m_blocks(size, dtype):
    # each m block rereads B's panel: a main part of whole blocks and a rest run where that
    # makes fewer of them than split's divisor would
    op = gemm(size, size, size, dtype=dtype)
    assert is_large(op)
    parts = peel(op, 1)
    assert sum(prod(d.size for d in part.op.dims) for part in parts) == size ** 3
    limits = max_sizes(op, None)
    main = kernel_sizes(parts[0].op)
    whole = limits["m"] // 16 * 16
    assert main["m"] == whole or -(-size // whole) >= size // main["m"], main


def test_rows_in_short_blocks_run_as_whole_blocks_and_a_rest():
    # 1000 float32 rows: split's 8 blocks of 125 (full width, 3 of 128 lanes empty) against
    # 7 of 128 and a rest, which fill their vectors more
    parts = peel(gemm(1000, 1000, 1000), 1)
    assert kernel_sizes(parts[0].op)["m"] == 128
    assert sorted({part.op.dims[2].size for part in parts}) == [104, 896]
    # 130 rows where every kernel computes in the core's own vectors: 2 blocks of 65, as
    # many as 128 and a rest of 2 would take
    parts = peel(gemm(130, 1000, 1000, isa=AVX2), 1)
    assert all(part.op.dims[2].size == 130 for part in parts)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows", [130, 300, 700, 980, 1000, 3000])
def test_rows_whose_blocks_take_narrower_code_run_as_whole_blocks_and_a_rest(rows, dtype):
    # Zen 4 computes a block of rows with a tail in AVX2 code: in the nest it runs slower
    # than whole AVX-512 vectors, so the rows run as blocks of 128 and a rest, as they do
    # where split's blocks in full width leave more of their vectors empty than others would
    x86 = backend("x86_64")
    op = gemm(rows, 2000, 64, dtype=dtype)
    block = kernel_sizes(op)["m"]
    narrow = x86.brgemm_vector_bits(ZEN4, block, 64, dtype) < 512 or \
        gives_up_occupancy(op, op.dims[2])
    parts = peel(op, 1)
    assert sum(prod(d.size for d in part.op.dims) for part in parts) == rows * 2000 * 64
    if not narrow:
        assert len(parts) == 1
        return
    sizes = [part.op.dims[2].size for part in parts]
    assert sizes == [rows // 128 * 128, rows % 128]
    assert kernel_sizes(parts[0].op)["m"] == 128


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sizes, pad", [((700, 300, 64), 3), ((130, 257, 100), 0),
                                        ((1000, 96, 33), 5), ((400, 40, 144), 2)])
def test_peeled_rows_compute_the_product_bit_for_bit(sizes, pad, dtype):
    # peeled on this host where its kernels take narrower code for split's blocks (Zen 4)
    check_parts(sizes, pad, dtype, peeled=None)


def test_k_chunks_below_half_of_kc_run_as_whole_chunks_and_a_rest():
    # float64 K = 305 = 5 x 61: a large contraction's chunks of 61 each reread C's blocks
    op = gemm(1024, 1024, 305, dtype="float64")
    assert is_large(op)
    assert sorted(part.op.dims[1].size for part in peel(op, 1)) == [49, 256]
    # chunks of 100 of a kc of 128 stay
    assert len(peel(gemm(1024, 1024, 2000, dtype="float64"), 1)) == 1
