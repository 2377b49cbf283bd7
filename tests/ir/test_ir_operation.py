"""TensorOperation as a value: dims, equality and hashing, replace, str, and the kernel calls
its prim dims describe (the seeds' setup: M, N, K, batch dim, leading dimensions, trans_b)."""

import pytest

from einjit.errors import OperationError, OperationTypeError
from einjit.ir import Dim, TensorOperation

from ir_support import BINARY, BRGEMM, GEMM, UNARY, build, edit


def test_dims_in_loop_order():
    op = build(BRGEMM)
    assert op.dims == tuple(Dim(*row) for row in zip(
        BRGEMM["dim_types"], BRGEMM["exec_types"], BRGEMM["dim_sizes"], BRGEMM["strides_in0"],
        BRGEMM["strides_in1"], BRGEMM["strides_out"]))
    assert op.dim_sizes == BRGEMM["dim_sizes"] and op.strides_out == BRGEMM["strides_out"]
    assert op.dtype == "float32" and op.prim_main == "brgemm" and op.num_threads is None


def test_exec_types_none_means_undefined():
    op = build(edit(GEMM, exec_types=None))
    assert op.exec_types == ("undefined",) * 6
    assert not op.is_defined and op.kernel_calls == ()


def test_value_semantics():
    a, b = build(BRGEMM), build(BRGEMM)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != build(GEMM) and a != build(edit(BRGEMM, num_threads=2))
    with pytest.raises(AttributeError, match="immutable"):
        a.prim_main = "gemm"


def test_numpy_integers_and_lists_are_accepted():
    import numpy as np
    op = build(edit(BRGEMM, dim_sizes=list(np.array(BRGEMM["dim_sizes"])), dtype=np.float32))
    assert op == build(BRGEMM)


def test_from_dims_round_trip():
    op = build(BRGEMM)
    again = TensorOperation.from_dims("float32", "none", "brgemm", "none", op.dims)
    assert again == op


def test_replace():
    op = build(BRGEMM)
    touched = op.replace(prim_first_touch="zero", prim_last_touch="relu", num_threads=3)
    assert (touched.prim_first_touch, touched.prim_last_touch, touched.num_threads) == \
           ("zero", "relu", 3)
    assert touched.dims == op.dims and op.prim_first_touch == "none"
    assert op.replace(dims=op.dims) == op
    gemm = op.replace(prim_main="gemm", exec_types=("seq", "seq", "seq", "prim", "prim", "prim"))
    assert gemm == build(GEMM)
    with pytest.raises(OperationError, match="prim_main='gemm' needs exactly 3"):
        op.replace(prim_main="gemm")               # validation runs again
    with pytest.raises(OperationTypeError, match=r"unknown parameters \['sizes'\]"):
        op.replace(sizes=(1,))


@pytest.mark.native
def test_str_is_a_table_with_the_kernels():
    text = str(build(edit(BRGEMM, prim_first_touch="zero", prim_last_touch="relu")))
    lines = text.splitlines()
    assert "first touch zero | main brgemm | last touch relu" in lines[1]
    assert lines[2].split() == ["dim", "type", "exec", "size", "stride_in0", "stride_in1",
                                "stride_out"]
    assert lines[3].split() == ["0", "m", "seq", "32", "8192", "0", "32768"]
    assert lines[8].split() == ["5", "k", "prim", "32", "32", "1", "0"]
    assert "main: brgemm brgemm 32x32x32 batch 8" in text
    assert "br_stride_a=1024, br_stride_b=1024" in text
    assert "first_touch: unary zero 32x32 on (out, out) ld_a=32, ld_b=32" in text
    assert "not decided" in str(build(edit(GEMM, exec_types=None)))


def test_kernel_calls_of_the_seeds_brgemm():
    first, main, last = build(edit(BRGEMM, prim_first_touch="zero",
                                   prim_last_touch="relu")).kernel_calls
    assert (main.kind, main.op, main.m, main.n, main.k, main.br_size) == \
           ("brgemm", "brgemm", 32, 32, 32, 8)
    assert main.arguments == (32, 32, 32, 1024, 1024)
    assert (main.m_dim, main.n_dim, main.k_dim, main.br_dim) == (3, 4, 5, 2)
    assert (first.role, first.op, first.operands, first.arguments) == \
           ("first_touch", "zero", ("out", "out"), (32, 32))
    assert (last.role, last.op) == ("last_touch", "relu")


def test_batch_dim_is_the_outer_of_two_unit_stride_k_dims():
    # both prim k dims have stride_in1 1 (in1 reads overlap, which is allowed)
    op = build(edit(BRGEMM, strides_in1={2: 1}))
    (main,) = op.kernel_calls
    assert (main.br_dim, main.k_dim, main.br_stride_b) == (2, 5, 1)


def test_gemm_kernel_call_and_size_one_ld():
    (main,) = build(GEMM).kernel_calls
    assert (main.kind, main.op, main.br_size, main.arguments) == \
           ("brgemm", "gemm", 1, (32, 32, 32, 0, 0))
    # a size-1 prim n: its strides do not matter; ld_b/ld_c carry the kernel's bounds
    op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"),
                         ("prim", "prim", "prim"), (8, 1, 4), (1, 0, 8), (0, 0, 1), (1, 0, 0))
    (main,) = op.kernel_calls
    assert (main.n, main.ld_a, main.ld_b, main.ld_c) == (1, 8, 4, 8)


def test_unary_transposed_and_plain():
    (main,) = build(UNARY).kernel_calls       # out is contiguous in dim 1: transposed
    assert (main.m, main.n, main.trans_b, main.ld_a, main.ld_b) == (7, 5, True, 7, 5)
    plain = build(edit(UNARY, strides_out=(35, 7, 1), prim_last_touch="relu"))
    main, last = plain.kernel_calls
    assert (main.trans_b, main.arguments, last.arguments) == (False, (7, 7), (7, 7))
    # after a transposed main, the touches walk out column-major: rows = out's unit dim
    main, last = build(edit(UNARY, prim_last_touch="relu")).kernel_calls
    assert (last.m, last.n, last.ld_a, last.m_dim) == (5, 7, 5, 1)


def test_binary_and_none_kernel_calls():
    (main,) = build(BINARY).kernel_calls
    assert (main.kind, main.m, main.n, main.arguments) == ("binary", 7, 5, (7, 7, 7))
    calls = build(edit(UNARY, prim_main="none", prim_first_touch="zero",
                       prim_last_touch="square", strides_out=(35, 7, 1))).kernel_calls
    assert [(c.role, c.op, c.m, c.n) for c in calls] == [("first_touch", "zero", 7, 5),
                                                         ("last_touch", "square", 7, 5)]
