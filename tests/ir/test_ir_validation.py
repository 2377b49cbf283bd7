"""Every validation rule of the TensorOperation contract: the error's type, and a message that
names the offending value. Cases are edits of the seeds' BRGEMM configuration (or of a small
unary/binary op), one table row per rule."""

import numpy as np
import pytest

import einjit
from einjit.errors import (
    EinjitError,
    KernelParameterError,
    OperandError,
    OperandValueError,
    OperationError,
    OperationTypeError,
)
from einjit.ir import Dim, TensorOperation

from ir_support import BINARY, BRGEMM, GEMM, UNARY, build, edit

# (name, params, error type, fragments the message must contain)
CASES = [
    ("lengths", edit(BRGEMM, dim_sizes=(32, 32, 8, 32, 32)), OperationError,
     ["different lengths", "'dim_sizes': 5"]),
    ("no dims", edit(BRGEMM, dim_types=(), exec_types=(), dim_sizes=(), strides_in0=(),
                     strides_in1=(), strides_out=()), OperationError, ["at least one dim"]),
    ("dim type", edit(BRGEMM, dim_types={1: "x"}), OperationError, ["dim_types[1]='x'"]),
    ("exec type", edit(BRGEMM, exec_types={0: "parallel"}), OperationError,
     ["exec_types[0]='parallel'"]),
    ("prim_main", edit(BRGEMM, prim_main="conv"), OperationError, ["prim_main='conv'"]),
    ("last touch", edit(BRGEMM, prim_last_touch="exp"), OperationError,
     ["prim_last_touch='exp'"]),
    ("binary touch", edit(BRGEMM, prim_first_touch="add"), OperationError,
     ["prim_first_touch='add'"]),
    ("prim name type", edit(BRGEMM, prim_main=3), OperationTypeError, ["prim_main", "3"]),
    ("dtype", edit(BRGEMM, dtype="float16"), OperationError,
     ["dtype='float16'", "float32", "float64"]),
    ("dtype int", edit(BRGEMM, dtype="int8"), OperationError, ["dtype='int8'"]),
    ("dtype junk", edit(BRGEMM, dtype="nonsense"), OperationError, ["dtype='nonsense'"]),
    ("size 0", edit(BRGEMM, dim_sizes={2: 0}), OperationError, ["dim_sizes[2]=0", ">= 1"]),
    ("size negative", edit(BRGEMM, dim_sizes={0: -4}), OperationError, ["dim_sizes[0]=-4"]),
    ("negative stride", edit(BRGEMM, strides_in1={1: -1}), OperationError,
     ["strides_in1[1]=-1", ">= 0"]),
    ("bool stride", edit(BRGEMM, strides_out={0: True}), OperationTypeError,
     ["strides_out[0]", "True"]),
    ("float size", edit(BRGEMM, dim_sizes={3: 2.0}), OperationTypeError,
     ["dim_sizes[3]", "2.0"]),
    ("string column", edit(BRGEMM, dim_types="mnkmnk"), OperationTypeError,
     ["dim_types", "'mnkmnk'"]),
    ("k without contraction", edit(UNARY, dim_types={0: "k"}, strides_out={0: 0}),
     OperationError, ["dim 0 (k", "prim_main='identity'", "'gemm' or 'brgemm'"]),
    ("k in out", edit(GEMM, strides_out={2: 5}), OperationError,
     ["dim 2 (k", "stride_out 5"]),
    ("k shared", edit(GEMM, exec_types={0: "shared", 1: "shared", 2: "shared"}), OperationError,
     ["dim 2 (k, shared", "race"]),
    ("out stride 0", edit(GEMM, strides_out={1: 0}), OperationError,
     ["dim 1 (n", "stride_out 0", "same out element"]),
    ("out overlap", edit(GEMM, strides_out={1: 16}), OperationError,
     ["dim 1 (n, seq, size 32", "same out element", "stride_out 16 < 1 * 32"]),
    ("exec order", edit(GEMM, exec_types={1: "prim", 3: "seq"}), OperationError,
     ["dim 2 (k, seq", "comes after dim 1 (n, prim", "'shared' dims first"]),
    ("shared after seq", edit(GEMM, exec_types={1: "shared"}), OperationError,
     ["dim 1 (n, shared", "comes after dim 0 (m, seq"]),
    ("gemm prim count", edit(GEMM, exec_types={2: "prim"}), OperationError,
     ["prim_main='gemm' needs exactly 3 prim dims", "dim 2 (k, prim"]),
    ("brgemm prim count", edit(BRGEMM, exec_types={2: "seq"}), OperationError,
     ["prim_main='brgemm' needs exactly 4 prim dims"]),
    ("gemm m unit", edit(GEMM, strides_in0={3: 2}), OperationError,
     ["dim 3 (m, prim", "stride_in0 2", "expected 1"]),
    ("gemm n in in0", edit(GEMM, strides_in0={4: 7}), OperationError,
     ["dim 4 (n, prim", "stride_in0 7", "expected 0"]),
    ("brgemm no unit k", edit(BRGEMM, strides_in1={5: 2}), OperationError,
     ["neither prim k dim has stride_in1 1", "dim 5 (k"]),
    ("gemm m limit", edit(GEMM, dim_sizes={3: 1100}, strides_in0={0: 10 ** 6, 5: 1100, 2: 10 ** 5},
                          strides_out={0: 10 ** 8, 1: 10 ** 6, 4: 1100}), OperationError,
     ["size 1100 > 1024", "einjit.optimize splits it"]),
    ("batch limit", edit(BRGEMM, dim_sizes={2: 1025}, strides_in0={0: 2 ** 30}), OperationError,
     ["batch-reduce dim", "1025 > 1024", "einjit.optimize splits it"]),
    # an out ld below its bound is caught by the out-overlap rule first
    ("ld_c", edit(GEMM, strides_out={4: 16, 1: 512, 0: 16384}), OperationError,
     ["dim 4 (n, prim", "same out element", "stride_out 16 < 1 * 32"]),
    ("ld_a", edit(GEMM, strides_in0={5: 8}), OperationError, ["ld_a=8", "bound 32"]),
    ("unary prim count", edit(UNARY, exec_types=("prim", "prim", "prim")), OperationError,
     ["needs 1 or 2 prim dims", "got 3"]),
    ("unary no unit in0", edit(UNARY, strides_in0=(35, 2, 10)), OperationError,
     ["no prim dim has stride_in0 1"]),
    ("unary no unit out", edit(UNARY, strides_out=(1, 21, 3)), OperationError,
     ["no prim dim has stride_out 1"]),
    ("unary ld_a", edit(UNARY, strides_in0=(35, 3, 1)), OperationError,
     ["ld_a=3", "bound 7", "stride_in0 of prim dim 1"]),
    ("binary no common unit", edit(BINARY, strides_in1=(35, 1, 5)), OperationError,
     ["no prim dim has stride 1 in in0, in1 and out"]),
    ("binary ld_b", edit(BINARY, strides_in1=(0, 0, 1)), OperationError, ["ld_b=0", "bound 7"]),
    ("eltwise limit", edit(UNARY, dim_sizes=(3, 5, 2100), strides_in0=(10500, 2100, 1),
                           strides_out=(10500, 1, 5)), OperationError,
     ["size 2100 > 2048", "einjit.optimize splits it"]),
    ("none no unit out", edit(UNARY, prim_main="none", prim_first_touch="zero",
                              strides_out=(35, 7, 35 * 3)), OperationError,
     ["prim_main='none': no prim dim has stride_out 1"]),
    ("num_threads", edit(GEMM, num_threads=0), OperationError, ["num_threads=0"]),
    ("num_threads type", edit(GEMM, num_threads="4"), OperationTypeError, ["num_threads", "'4'"]),
    ("isa", edit(GEMM, isa="riscv"), KernelParameterError, ["isa='riscv'"]),
]


@pytest.mark.parametrize("name, params, error, fragments", CASES, ids=[c[0] for c in CASES])
def test_validation(name, params, error, fragments):
    with pytest.raises(error) as info:
        build(params)
    assert isinstance(info.value, EinjitError)
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"


@pytest.mark.parametrize("params", [BRGEMM, GEMM, UNARY, BINARY,
                                    edit(UNARY, exec_types=("undefined",) * 3),
                                    edit(GEMM, exec_types=None)])
def test_valid_operations_build(params):
    op = build(params)
    assert op.dims[0] == Dim(params["dim_types"][0],
                             (params["exec_types"] or ("undefined",))[0],
                             params["dim_sizes"][0], params["strides_in0"][0],
                             params["strides_in1"][0], params["strides_out"][0])


def test_undefined_skips_prim_rules_but_not_the_others():
    # prim-fit rules wait for the optimizer; the out-overlap rule does not
    build(edit(GEMM, exec_types={3: "undefined"}))
    with pytest.raises(OperationError, match="same out element"):
        build(edit(GEMM, exec_types={3: "undefined"}, strides_out={1: 0}))


@pytest.mark.parametrize("field, value, error, fragment", [
    ("type", "z", OperationError, "Dim type='z'"),
    ("exec_type", "later", OperationError, "Dim exec_type='later'"),
    ("size", 0, OperationError, "Dim size=0"),
    ("stride_in1", -2, OperationError, "Dim stride_in1=-2"),
    ("stride_out", 1.5, OperationTypeError, "Dim stride_out must be an integer; got 1.5"),
])
def test_dim_validation(field, value, error, fragment):
    fields = dict(type="m", exec_type="seq", size=4, stride_in0=1, stride_in1=0, stride_out=1)
    fields[field] = value
    with pytest.raises(error, match=fragment.replace("(", r"\(")):
        Dim(**fields)


def test_from_dims_rejects_non_dims():
    with pytest.raises(OperationTypeError, match=r"dims\[1\] must be an einjit.ir.Dim; got 7"):
        TensorOperation.from_dims("float32", "none", "identity", "none",
                                  [Dim("c", "prim", 4, 1, 0, 1), 7])


# -- execute(): operand checks (they run before any code is generated) -------------------

def gemm_op():
    return build(GEMM)


def operands(op, **changes):
    arrays = {name: np.zeros(op.extent(name), np.float32) for name in ("in0", "in1", "out")}
    arrays.update(changes)
    return arrays["in0"], arrays["in1"], arrays["out"]


def readonly(size):
    array = np.zeros(size, np.float32)
    array.flags.writeable = False
    return array


OPERAND_CASES = [
    ("dtype", dict(in0=np.zeros(8 * 2 ** 17, np.float64)), OperandError,
     ["operand in0 has dtype float64", "float32"]),
    ("too small", dict(in1=np.zeros(1000, np.float32)), OperandValueError,
     ["operand in1 has 1000 elements", f"reach {32 * 8192} elements"]),
    ("read-only out", dict(out=readonly(32 ** 4)), OperandValueError,
     ["operand out is read-only"]),
    ("not contiguous", dict(in0=np.zeros(2 * 8 * 2 ** 17, np.float32)[::2]), OperandValueError,
     ["operand in0 must be a contiguous array"]),
    ("low address", dict(out=16), OperandValueError, ["operand out: address 0x10"]),
    ("high address", dict(in0=2 ** 48 - 64), OperandValueError, ["operand in0: address"]),
    ("missing in1", dict(in1=None), OperandError, ["operand in1 is None",
                                                   "prim_main='gemm'"]),
    ("wrong type", dict(in0=[1.0, 2.0]), OperandError, ["operand in0", "got list"]),
    ("bool address", dict(in0=True), OperandError, ["operand in0", "got bool"]),
]


@pytest.mark.native
@pytest.mark.parametrize("name, changes, error, fragments", OPERAND_CASES,
                         ids=[c[0] for c in OPERAND_CASES])
def test_execute_operands(name, changes, error, fragments):
    op = gemm_op()
    with pytest.raises(error) as info:
        op.execute(*operands(op, **changes))
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"


def test_execute_refuses_overlapping_out_of_a_contraction():
    op = gemm_op()
    shared = np.zeros(max(op.extent("in0"), op.extent("out")), np.float32)
    with pytest.raises(OperandValueError, match="operand out overlaps operand in0"):
        op.execute(shared, np.zeros(op.extent("in1"), np.float32), shared)


class _Subclass(np.ndarray):
    pass


def test_execute_refuses_an_overlapping_out_of_an_ndarray_subclass():
    def view(array):
        return array.view(_Subclass)

    op = gemm_op()
    shared = np.zeros(max(op.extent("in0"), op.extent("out")), np.float32)
    with pytest.raises(OperandValueError, match="operand out overlaps operand in0"):
        op.execute(shared, np.zeros(op.extent("in1"), np.float32), view(shared))
    copy = einjit.optimize(TensorOperation("float32", "none", "identity", "none", ("c", "c"),
                                           None, (4, 64), (64, 1), (0, 0), (64, 1)))
    buffer = np.arange(320, dtype=np.float32)
    with pytest.raises(OperandValueError, match="operand out overlaps operand in0"):
        copy.execute(buffer[:256], None, view(buffer[64:320]))
    assert np.array_equal(buffer, np.arange(320, dtype=np.float32))


@pytest.mark.native
def test_an_unused_operand_is_checked_on_every_call():
    # the repeated-call path must not take an array for an operand the last call left None
    op = einjit.optimize(TensorOperation("float32", "none", "identity", "none", ("c",), None,
                                         (4,), (1,), (0,), (1,)))
    a, out, wrong = np.ones(4, np.float32), np.zeros(4, np.float32), np.zeros(3, np.int8)
    for _ in range(2):
        op.execute(a, None, out)
        with pytest.raises(OperandError, match="operand in1 has dtype int8"):
            op.execute(a, wrong, out)
    assert np.array_equal(out, a)


def test_execute_refuses_undefined_exec_types():
    op = build(edit(GEMM, exec_types=None))
    with pytest.raises(OperationError, match=r"dims \[0, 1, 2, 3, 4, 5\] have exec_type "
                                             r"'undefined'; run einjit.optimize"):
        op.execute(*operands(op))


def test_array_extent_is_the_highest_offset_plus_one():
    op = gemm_op()
    # in0 reaches (32-1)*8192 + (8-1)*1024 + (32-1)*1 + (32-1)*32 + 1 elements
    assert op.extent("in0") == 31 * 8192 + 7 * 1024 + 31 + 31 * 32 + 1
    one_short = np.zeros(op.extent("in0") - 1, np.float32)
    with pytest.raises(OperandValueError, match="operand in0 has"):
        op.execute(*operands(op, in0=one_short))


def test_total_is_the_product_of_a_dim_types_sizes():
    op = gemm_op()
    assert [op.total(kind) for kind in ("c", "m", "n", "k")] == [1, 32 * 32, 32 * 32, 8 * 32]
    with pytest.raises(OperationError, match="dim_type='x' is not known"):
        op.total("x")


@pytest.mark.parametrize("n_sizes, expected", [
    ((32, 32), False), ((1, 1), True), ((1, 2), False), ((2, 1), False)])
def test_a_matrix_times_a_vector_is_a_contraction_whose_n_dims_are_all_one(n_sizes, expected):
    op = build(edit(BRGEMM, dim_sizes=dict(zip((1, 4), n_sizes))))
    assert op.is_matrix_vector is expected


def test_an_elementwise_operation_is_no_matrix_times_a_vector():
    op = build(UNARY)           # no n dims: their product is 1
    assert op.total("n") == 1 and not op.is_matrix_vector


def test_public_names():
    assert einjit.TensorOperation is TensorOperation
    assert einjit.Dim is Dim
