"""Loop reordering: in a contraction m (and c) loops outermost, then n, then k; otherwise
larger strides outer; only seq dims move."""

from einjit.ir import TensorOperation
from einjit.passes import block, reorder

from ir_support import BRGEMM, build, edit


def test_contraction_loops_run_m_then_n_then_k():
    # seq loops: k0 (outermost), n0, m0; prims as the seeds' BRGEMM minus the batch dim
    op = build(edit(BRGEMM, prim_main="gemm",
                    exec_types=("seq", "seq", "seq", "prim", "prim", "prim"),
                    dim_types=("k", "n", "m", "m", "n", "k"),
                    strides_in0=(1024, 0, 8192, 1, 0, 32), strides_in1=(1024, 8192, 0, 0, 32, 1),
                    strides_out=(0, 1024, 32768, 1, 32, 0), dim_sizes=(8, 32, 32, 32, 32, 32)))
    new = reorder(op)
    assert [(d.type, d.exec_type) for d in new.dims[:3]] == [("m", "seq"), ("n", "seq"),
                                                             ("k", "seq")]
    assert new.dims[3:] == op.dims[3:]


def test_only_seq_dims_move():
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c", "c", "c"),
                         ("shared", "seq", "seq", "prim"), (2, 3, 4, 5),
                         (5, 10, 30, 1), (0, 0, 0, 0), (5, 10, 30, 1))
    new = reorder(op)
    assert new.dims[0] == op.dims[0] and new.dims[3] == op.dims[3]
    assert [d.stride_out for d in new.dims[1:3]] == [30, 10]


def test_a_matrix_times_a_vector_along_its_rows_runs_its_m_loops_inside_its_k_loops():
    """n of 1, m unit-stride in in0 (numpy's x @ A): the matrix is read row after row, whole;
    with n above 1 the same loops keep m outermost."""
    vector = dict(BRGEMM, prim_main="gemm", exec_types=("seq", "seq", "prim", "prim", "prim"),
                  dim_types=("m", "k", "m", "n", "k"), dim_sizes=(4, 64, 1024, 1, 8),
                  strides_in0=(1024, 32768, 1, 0, 4096), strides_in1=(0, 8, 0, 8, 1),
                  strides_out=(1024, 0, 1, 1024, 0))
    op = build(vector)
    assert block.is_along_rows(op) and not block.is_large(op)
    assert [d.type for d in reorder(op).dims[:2]] == ["k", "m"]
    gemm = build(edit(vector, dim_sizes=(4, 64, 1024, 2, 8), strides_out=(1024, 0, 1, 4096, 0),
                      strides_in1=(0, 16, 0, 8, 1)))
    assert not block.is_along_rows(gemm)
    assert [d.type for d in reorder(gemm).dims[:2]] == ["m", "k"]
