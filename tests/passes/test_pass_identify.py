"""Primitive identification (seeds 5.5.1): which dims become prim, the primitive chosen, and
the size-1 stand-ins where no dim fits a kernel role."""

import pytest

from einjit.ir import Dim, TensorOperation
from einjit.passes import identify

from ir_support import BRGEMM, GEMM, build, edit


def test_seeds_gemm_loops_become_the_seeds_brgemm():
    # all six dims undecided: M, N, K are the unit-stride dims, the other k the batch dim
    op = build(edit(GEMM, exec_types=None))
    assert identify(op) == build(BRGEMM)


def test_undefined_gemm_without_a_second_k_stays_gemm():
    op = TensorOperation("float32", "zero", "brgemm", "relu", ("n", "k", "m"), None,
                         (48, 64, 32), (0, 32, 1), (64, 1, 0), (32, 0, 1))
    new = identify(op)
    assert new.prim_main == "gemm"
    assert [(d.type, d.exec_type) for d in new.dims] == [("m", "prim"), ("n", "prim"),
                                                         ("k", "prim")]
    first, main, last = new.kernel_calls
    assert (main.m, main.n, main.k, main.arguments) == (32, 48, 64, (32, 64, 32, 0, 0))


@pytest.mark.parametrize("n", [1, 4])
def test_a_matrix_times_a_vector_takes_no_batch(n):
    """n of 1: a batch would put its k dim's rows of in0 in every call beside K's, each a run
    the prefetchers must follow at once (block.VECTOR_MAX_SIZE keeps K to 16 for them); with
    columns of in1 to share the loads the batch is taken as before."""
    op = TensorOperation("float32", "zero", "brgemm", "none", ("k", "k", "m", "n"), None,
                         (5, 16, 1000, n), (64000, 4000, 1, 0), (16, 1, 0, 80),
                         (0, 0, 1, 1000))
    new = identify(op)
    assert new.prim_main == ("gemm" if n == 1 else "brgemm")
    assert [(d.size, d.exec_type) for d in new.dims if d.type == "k"] == \
        ([(5, "seq"), (16, "prim")] if n == 1 else [(5, "prim"), (16, "prim")])


def test_ops_with_prims_are_kept():
    op = build(GEMM)
    assert identify(op) is op


@pytest.mark.parametrize("t, r, u, s", [(3, 4, 7, 3), (7, 7, 3, 4)])
def test_seeds_permutation(t, r, u, s):
    # trus -> turs: s is contiguous in both (M, no transposition); u has the smallest in0 stride
    op = TensorOperation("float32", "none", "identity", "none", ("c",) * 4, None, (t, r, u, s),
                         (r * u * s, u * s, s, 1), (0,) * 4, (u * r * s, s, r * s, 1))
    new = identify(op)
    assert new.exec_types == ("seq", "seq", "prim", "prim")
    assert [d.size for d in new.dims] == [t, r, u, s]
    (main,) = new.kernel_calls
    assert (main.m, main.n, main.trans_b, main.ld_a, main.ld_b) == (s, u, False, s, r * s)


def test_transposition_uses_trans_b():
    # out (b, a) of in0 (a, b): the unit-stride dim moves
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c"), None, (6, 9),
                         (9, 1), (0, 0), (1, 6))
    (main,) = identify(op).kernel_calls
    assert (main.m, main.n, main.trans_b, main.ld_a, main.ld_b) == (9, 6, True, 9, 6)
    assert main.m_dim is not None and main.n_dim is not None


def test_binary_with_a_broadcast_input():
    # in1 lacks the outer dim (stride 0): it cannot be the kernel's N
    op = TensorOperation("float32", "none", "add", "none", ("c", "c"), None, (5, 8),
                         (8, 1), (0, 1), (8, 1))
    new = identify(op)
    assert new.exec_types == ("seq", "prim")
    (main,) = new.kernel_calls
    assert (main.m, main.n) == (8, 1)


def test_size_one_stand_ins():
    # no dim has unit stride in in0: a size-1 M with the kernel's strides stands in
    op = TensorOperation("float32", "none", "identity", "none", ("c", "c"), None, (4, 6),
                         (12, 2), (0, 0), (6, 1))
    new = identify(op)
    (main,) = new.kernel_calls
    assert main.m == 1 and len(new.dims) == 3
    assert Dim("c", "prim", 1, 1, 0, 1) in new.dims
    # an outer product: no k dim at all, so a k of size 1 stands in
    outer = TensorOperation("float32", "none", "gemm", "none", ("m", "n"), None, (16, 8),
                            (1, 0), (0, 1), (1, 16))
    (main,) = identify(outer).kernel_calls
    assert (main.m, main.n, main.k) == (16, 8, 1)


def test_dims_above_the_kernel_limit_are_left_to_loops():
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c"), None, (3, 4099),
                         (4099, 1), (0, 0), (4099, 1))
    new = identify(op)
    assert all(d.size <= 2048 for d in new.dims if d.exec_type == "prim")
    assert Dim("c", "seq", 4099, 1, 0, 1) in new.dims


def test_shared_dims_stay_shared_in_front():
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c", "c"),
                         ("undefined", "shared", "undefined"), (3, 4, 5), (20, 5, 1), (0, 0, 0),
                         (20, 5, 1))
    new = identify(op)
    assert new.exec_types == ("shared", "prim", "prim")
    assert new.dims[0].size == 4
