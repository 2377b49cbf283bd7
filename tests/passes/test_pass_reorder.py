"""Loop reordering: in a contraction m (and c) loops outermost, then n, then k; otherwise
larger strides outer; only seq dims move."""

from einjit.ir import TensorOperation
from einjit.passes import reorder

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
