"""einjit.optimize on operations given without exec types: the seeds' configurations, the
seeds' trus -> turs permutation, a 1600^3 matmul, and its options."""

import dataclasses
import itertools

import numpy as np
import pytest

import einjit
from einjit.backends import x86_64
from einjit.backends.x86_64 import cpu
from einjit.errors import OperationError, OperationTypeError
from einjit.ir import TensorOperation
from einjit.ir.reference import execute_reference

from ir_support import BRGEMM, GEMM, assert_same, buffers, build, edit

SEEDS = {"gemm": GEMM, "brgemm": BRGEMM,
         "brgemm zero relu": edit(BRGEMM, prim_first_touch="zero", prim_last_touch="relu")}


@pytest.mark.parametrize("name", list(SEEDS))
@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_seeds_configurations_without_exec_types(name, num_threads):
    op = build(edit(SEEDS[name], exec_types=None))
    new = einjit.optimize(op, num_threads=num_threads)
    assert new.is_defined and new.num_threads == num_threads
    assert new.prim_main == "brgemm"                  # the k of size 8 becomes the batch dim
    main = [call for call in new.kernel_calls if call.role == "main"][0]
    assert main.m * main.n * main.k * main.br_size >= 32 * 32 * 32 * 8
    assert ("shared" in new.exec_types) == (num_threads > 1)
    # the index space (2^28 points) is too large for the gather oracle: compare with the
    # unoptimized op, which tests/ir checks against np.einsum on these configurations
    rng = np.random.default_rng(num_threads)
    in0, in1, out = buffers(op, rng, pad=0)
    expected = out.copy()
    execute_reference(op, in0, in1, expected)
    execute_reference(new, in0, in1, out)
    assert_same(op, out, expected)


@pytest.mark.parametrize("t, r, u, s", list(itertools.product((3, 4, 7), repeat=4)))
def test_seeds_permutation(t, r, u, s):
    op = TensorOperation("float32", "none", "identity", "none", ("c",) * 4, None, (t, r, u, s),
                         (r * u * s, u * s, s, 1), (0,) * 4, (u * r * s, s, r * s, 1))
    new = einjit.optimize(op, num_threads=2)
    a = np.random.default_rng(t + r + u + s).standard_normal(t * r * u * s).astype(np.float32)
    out = np.full(a.size, np.nan, np.float32)
    execute_reference(new, a, None, out)
    np.testing.assert_array_equal(out.reshape(t, u, r, s),
                                  a.reshape(t, r, u, s).transpose(0, 2, 1, 3))


@pytest.mark.native
def test_matmul_1600():
    n = 1600
    zen4 = dataclasses.replace(x86_64.VARIANTS["avx512"], micro=cpu.MICROARCHS["zen4"])
    op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), None, (n, n, n),
                         (1, 0, n), (0, n, 1), (1, n, 0), isa=zen4)
    new = einjit.optimize(op, num_threads=2)
    (main,) = new.kernel_calls
    # large (1600 x (128 + 64) x 4 bytes of in0 and in1 for one out block, past the 384 KiB
    # budget): cache blocks that divide 1600, m filling its vectors of 8 (Zen 4); kc <= 128
    # (two lines of each of 128 columns fill half of Zen 4's 32 KiB L1); nc <= 512 (B's 128 x
    # 512 float32 panel fills a quarter of its 1 MiB L2), as 4 panels of 400 for 2 threads;
    # the n panels outermost and shared, then k, then m
    assert (main.op, main.m, main.n, main.k) == ("gemm", 80, 400, 100)
    assert [(d.type, d.exec_type, d.size) for d in new.dims[:3]] == [
        ("n", "shared", 4), ("k", "seq", 16), ("m", "seq", 20)]


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m, k, pad", [(1000, 64, 0), (1800, 33, 3), (552, 100, 1),
                                       (2262, 32, 0), (495, 17, 2)])
def test_m_blocks_of_optimize_alone_compute_the_product_bit_for_bit(m, k, pad, dtype):
    """optimize() without peel: rows whose m blocks in the target's full width leave vectors
    part empty (on Zen 4: 1000 as 8 x 125, 1800 as 40 x 45) against numpy, on integer data
    (exact sums); the padding rows are never written."""
    n = 70
    rng = np.random.default_rng(m + k)
    lda, ldb, ldc = m + pad, k + pad, m + pad
    a = rng.integers(-3, 4, lda * k).astype(dtype)
    b = rng.integers(-3, 4, ldb * n).astype(dtype)
    c = np.full(ldc * n, np.nan, dtype)
    op = TensorOperation(dtype, "zero", "gemm", "none", ("n", "k", "m"), None, (n, k, m),
                         (0, lda, 1), (ldb, 1, 0), (ldc, 0, 1))
    einjit.optimize(op, num_threads=2).execute(a, b, c)
    A, B, C = a.reshape(k, lda).T[:m], b.reshape(n, ldb).T[:k], c.reshape(n, ldc).T
    np.testing.assert_array_equal(C[:m], A.astype(np.float64) @ B)
    assert np.isnan(C[m:]).all()


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", [2, 3, 16])
@pytest.mark.parametrize("m, n, k, pad", [(1024, 1024, 1, 0), (1000, 997, 7, 3),
                                          (257, 1031, 32, 1), (130, 70, 5, 2)])
def test_slabs_of_out_compute_the_product_bit_for_bit(m, n, k, pad, threads, dtype):
    """Threads sharing a small contraction by out's strides (shared.slabs_of_out: n blocks
    first) against numpy, on integer data (exact sums), with remainders in every block dim
    and ld > rows; the padding rows are never written."""
    rng = np.random.default_rng(m * n + k)
    lda, ldb, ldc = m + pad, k + pad, m + pad
    a = rng.integers(-3, 4, lda * k).astype(dtype)
    b = rng.integers(-3, 4, ldb * n).astype(dtype)
    c = np.full(ldc * n, np.nan, dtype)
    op = TensorOperation(dtype, "zero", "gemm", "none", ("m", "n", "k"), None, (m, n, k),
                         (1, 0, lda), (0, ldb, 1), (1, ldc, 0))
    einjit.optimize(op, num_threads=threads).execute(a, b, c)
    A, B, C = a.reshape(k, lda).T[:m], b.reshape(n, ldb).T[:k], c.reshape(n, ldc).T
    np.testing.assert_array_equal(C[:m], A.astype(np.float64) @ B)
    assert np.isnan(C[m:]).all()


def test_a_batch_within_the_block_budget_stays():
    n = 256
    op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), None, (n, n, 1024),
                         (1, 0, n), (0, n, 1), (1, n, 0))
    (main,) = einjit.optimize(op, num_threads=1).kernel_calls
    # 1024 x (128 + 64) x 4 bytes = 768 KiB > 384 KiB: a large contraction, k in cache
    # blocks and no batch
    assert main.op == "gemm" and main.k < 1024
    op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k", "k"), None,
                         (64, 64, 4, 64), (1, 0, 64 * 65, 64), (0, 256, 64, 1), (1, 64, 0, 0))
    (main,) = einjit.optimize(op, num_threads=1).kernel_calls
    # two k dims that do not fuse (in0 has a gap); 4 x 64 x (64 + 64) x 4 bytes = 128 KiB:
    # the batch stays
    assert (main.op, main.br_size, main.k) == ("brgemm", 4, 64)


def test_contiguous_elementwise_op_becomes_large_blocks():
    op = TensorOperation("float32", "none", "add", "none", ("c",) * 3, None, (64, 50, 40),
                         (2000, 40, 1), (2000, 40, 1), (2000, 40, 1))
    new = einjit.optimize(op, num_threads=1)
    (main,) = new.kernel_calls
    assert main.m * main.n == 64 * 50 * 40 and main.m <= 1024


@pytest.mark.native
def test_options():
    op = build(edit(GEMM, exec_types=None))
    small = einjit.optimize(op, num_threads=1, max_size=16, min_size=4)
    assert all(d.size <= 16 for d in small.dims)
    with pytest.raises(OperationTypeError, match=r"unknown pass options \['fast'\]"):
        einjit.optimize(op, fast=True)
    with pytest.raises(OperationTypeError, match="takes a TensorOperation; got str"):
        einjit.optimize("gemm")
    with pytest.raises(OperationError, match="num_threads=0"):
        einjit.optimize(op, num_threads=0)
