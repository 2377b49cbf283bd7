"""Shared-loop selection (seeds 5.5.3): enough iterations per thread, never a k dim, shared
dims in front, the thread count recorded on the op."""

import math

import numpy as np
import pytest

import einjit
from einjit.errors import OperationError
from einjit.ir import TensorOperation
from einjit.passes import shared

from ir_support import BRGEMM, build, edit


@pytest.mark.native
def test_seeds_brgemm_on_two_threads():
    new = shared(build(BRGEMM), 2)
    # the outer m loop alone has 32 >= 4 * 2 iterations
    assert new.exec_types == ("shared", "seq", "prim", "prim", "prim", "prim")
    assert new.num_threads == 2


def test_enough_iterations_for_many_threads():
    new = shared(build(BRGEMM), 16)          # needs 64 iterations: m (32) and n (32)
    assert new.exec_types[:2] == ("shared", "shared")


def test_the_shared_loops_grow_past_the_target_while_their_shares_are_uneven():
    op = build(edit(BRGEMM, dim_sizes=(200, 32, 8, 32, 32, 32)))
    # m alone has 200 >= 4 * 48 iterations, but shares of 4 and 5 keep 83% of 48 threads busy
    assert shared(op, 48).exec_types[:2] == ("shared", "shared")
    # ... and of 50 threads, shares of 4, all of them
    assert shared(op, 50).exec_types[:2] == ("shared", "seq")
    assert shared(op, 2).exec_types[:2] == ("shared", "seq")


def test_nearly_even_shares_are_not_even_enough():
    op = build(edit(BRGEMM, dim_sizes=(625, 32, 8, 32, 32, 32)))
    # shares of 13 and 14 keep 93% of 48 threads busy: n is shared too
    assert shared(op, 48).exec_types[:2] == ("shared", "shared")
    # shares of 25 on 25 threads, of 312 and 313 (99.8%) on 2
    assert shared(op, 25).exec_types[:2] == ("shared", "seq")
    assert shared(op, 2).exec_types[:2] == ("shared", "seq")


def test_never_a_k_dim_and_shared_dims_move_to_the_front():
    op = build(edit(BRGEMM, prim_main="gemm", dim_types=("k", "n", "m", "m", "n", "k"),
                    exec_types=("seq", "seq", "seq", "prim", "prim", "prim"),
                    dim_sizes=(8, 2, 32, 32, 32, 32),
                    strides_in0=(1024, 0, 8192, 1, 0, 32), strides_in1=(1024, 8192, 0, 0, 32, 1),
                    strides_out=(0, 1024, 32768, 1, 32, 0)))
    new = shared(op, 4)
    assert [(d.type, d.exec_type, d.size) for d in new.dims[:3]] == [
        ("n", "shared", 2), ("m", "shared", 32), ("k", "seq", 8)]


def test_one_thread_adds_no_shared_loop():
    new = shared(build(BRGEMM), 1)
    assert "shared" not in new.exec_types and new.num_threads == 1


def test_num_threads_from_the_op_and_the_environment(monkeypatch):
    monkeypatch.setenv("EINJIT_NUM_THREADS", "3")
    assert shared(build(BRGEMM)).num_threads == 3
    assert shared(build(edit(BRGEMM, num_threads=5))).num_threads == 5
    monkeypatch.setenv("EINJIT_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="EINJIT_NUM_THREADS='many'"):
        shared(build(BRGEMM))
    monkeypatch.delenv("EINJIT_NUM_THREADS")
    import os
    assert shared(build(BRGEMM)).num_threads == len(os.sched_getaffinity(0))


def test_size_one_dims_are_not_shared():
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c", "c"),
                         ("seq", "seq", "prim"), (1, 3, 8), (0, 8, 1), (0, 0, 0), (0, 8, 1))
    assert shared(op, 2).exec_types == ("shared", "seq", "prim")
    assert shared(op, 2).dims[0].size == 3


def test_bad_thread_count():
    with pytest.raises(OperationError, match="num_threads=0"):
        shared(build(BRGEMM), 0)


@pytest.mark.parametrize("m, threads, dtype", [(8192, 2, "float32"), (8192, 4, "float32"),
                                               (3000, 2, "float32"), (3000, 2, "float64"),
                                               (8000, 2, "float64")])
def test_a_matrix_times_a_vector_shares_the_outer_part_of_its_rows_loop(m, threads, dtype):
    """n = 1 with a k loop around the m loop: the threads take ranges of the m blocks, each
    walked inside the k loop (long runs of the matrix's rows), not the m loop moved out.
    (8192 rows: 8 blocks of 1024; 3000: 4 of 750; 8000: 8 of 1000.)"""
    k = 1040      # a large contraction (block.is_large) on an L2 of up to 2 MiB, K in chunks
    op = TensorOperation(dtype, "zero", "gemm", "none", ("m", "n", "k"), None, (m, 1, k),
                         (1, 0, m), (0, k, 1), (1, m, 0), num_threads=threads)
    new = einjit.optimize(op, num_threads=threads)
    loops = [(d.type, d.exec_type, d.size) for d in new.dims if d.exec_type != "prim"]
    assert loops[0] == ("m", "shared", threads)
    first_k = next(i for i, (t, _, _) in enumerate(loops) if t == "k")
    assert any(t == "m" and e == "seq" for t, e, _ in loops[first_k:]), loops
    assert math.prod(d.size for d in new.dims if d.type == "m") == m
    a = np.random.default_rng(0).integers(-2, 3, size=(m, k)).astype(dtype)
    x = np.random.default_rng(1).integers(-2, 3, size=k).astype(dtype)
    out = np.full(m, np.nan, dtype)
    new.execute(a.T.copy(), x, out)   # in0: column-major m x k (m contiguous)
    np.testing.assert_array_equal(out, (a.astype(np.float64) @ x).astype(dtype))


def test_a_gemm_moves_its_m_blocks_out_of_the_k_loop_when_short_of_panels():
    """n > 1 (fewer n panels than threads): the m loop is shared whole, moved out of the k
    loop, each block keeping its C across it."""
    op = TensorOperation("float32", "zero", "gemm", "none", ("m", "n", "k"), None,
                         (3200, 64, 2048), (1, 0, 3200), (0, 2048, 1), (1, 3200, 0),
                         num_threads=2)
    new = einjit.optimize(op, num_threads=2)
    loops = [(d.type, d.exec_type) for d in new.dims if d.exec_type != "prim"]
    assert ("m", "shared") in loops and ("m", "seq") not in loops, loops


@pytest.mark.parametrize("m, n, k, threads", [(1024, 1024, 1040, 16), (1024, 768, 1040, 16),
                                              (768, 1024, 1536, 12),
                                              # blocks of 113 rows, 11 chunks of 100 k
                                              (904, 768, 1100, 6)])
def test_a_large_gemm_on_many_threads_takes_tiles_of_panels_by_groups_of_m_blocks(m, n, k,
                                                                                  threads):
    """Panels fewer than the threads: each thread takes tiles of C, a panel by a group of m
    blocks, whose blocks stay inside the k loop; the results are numpy's to rounding."""
    def gemm(num_threads):
        return TensorOperation("float32", "zero", "gemm", "none", ("m", "n", "k"), None,
                               (m, n, k), (1, 0, m), (0, k, 1), (1, m, 0),
                               num_threads=num_threads)
    op = gemm(threads)
    tiles = einjit.passes.block.thread_tiles(op)
    new = einjit.optimize(op, num_threads=threads)
    outer = [(d.type, d.exec_type) for d in new.dims if d.exec_type != "prim"]
    assert tiles is not None and tiles[1] > 1
    assert outer == [("n", "shared"), ("m", "shared"), ("k", "seq"), ("m", "seq")], outer
    panels, groups = (d.size for d in new.dims[:2])
    tasks = panels * groups
    assert tasks / (threads * -(-tasks // threads)) >= einjit.passes.block.MIN_BALANCE
    # cheaper than a panel for each thread, the m blocks whole
    old = einjit.passes.block.tile_cost(threads, 1, threads, n, m)
    assert einjit.passes.block.tile_cost(panels, groups, threads, n, m) < old
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((k, m)).astype(np.float32)     # in0: m contiguous, k columns
    b = rng.standard_normal((n, k)).astype(np.float32)     # in1: k contiguous, n columns
    out = np.full((n, m), np.nan, np.float32)
    new.execute(a, b, out)
    np.testing.assert_allclose(out, b.astype(np.float64) @ a.astype(np.float64), rtol=1e-4,
                               atol=1e-3)
