"""The numpy reference executor against np.einsum written out by hand (the seeds' three
configurations, the seeds' trus -> turs permutation) and against an oracle that gathers every
element by its offset (random operations of every kind, every unary/binary op as main and as
touch)."""

import itertools

import numpy as np
import pytest

from einjit.errors import OperandError, OperandValueError
from einjit.ir import TensorOperation
from einjit.ir.reference import execute_reference
from einjit.ops import BINARY_OPS, UNARY_OPS

from ir_support import BRGEMM, GEMM, assert_same, buffers, build, edit, oracle, random_operation

SEEDS = {
    "gemm": GEMM,
    "brgemm": BRGEMM,
    "brgemm zero relu": edit(BRGEMM, prim_first_touch="zero", prim_last_touch="relu"),
}


@pytest.mark.parametrize("name", list(SEEDS))
def test_seeds_configurations(name):
    op = build(SEEDS[name])
    rng = np.random.default_rng(5)
    in0, in1, out = buffers(op, rng, pad=0)
    start = out.copy()
    execute_reference(op, in0, in1, out)
    # in0 (m0, k0, k1, m1) row-major, in1 (n0, k0, n1, k1), out (m0, n0, n1, m1)
    a = in0.reshape(32, 8, 32, 32).astype(np.float64)
    b = in1.reshape(32, 8, 32, 32).astype(np.float64)
    c = start.reshape(32, 32, 32, 32).astype(np.float64)
    if op.prim_first_touch == "zero":
        c = np.zeros_like(c)
    expected = c + np.einsum("akxm,bkyx->abym", a, b)
    if op.prim_last_touch == "relu":
        expected = np.maximum(expected, 0)
    np.testing.assert_allclose(out.reshape(32, 32, 32, 32), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("t, r, u, s", list(itertools.product((3, 4, 7), repeat=4)))
def test_seeds_permutation_trus_to_turs(t, r, u, s):
    op = TensorOperation("float32", "none", "identity", "none", ("c", "c", "c", "c"),
                         ("seq", "seq", "prim", "prim"), (t, r, u, s),
                         (r * u * s, u * s, s, 1), (0, 0, 0, 0), (u * r * s, s, r * s, 1))
    a = np.random.default_rng(t * 1000 + r * 100 + u * 10 + s).uniform(
        -10, 10, t * r * u * s).astype(np.float32)
    out = np.full(t * r * u * s, np.nan, np.float32)
    execute_reference(op, a, None, out)
    expected = a.reshape(t, r, u, s).transpose(0, 2, 1, 3)     # trus -> turs
    np.testing.assert_array_equal(out.reshape(t, u, r, s), expected)


CASES = ([("gemm", "none", "none"), ("brgemm", "zero", "relu"), ("gemm", "square", "sigmoid")]
         + [(op, "none", last) for op, last in zip(UNARY_OPS, UNARY_OPS[::-1])]
         + [(op, "none", last) for op, last in zip(BINARY_OPS, UNARY_OPS)]
         + [("none", first, last) for first, last in zip(UNARY_OPS, UNARY_OPS[2:] + UNARY_OPS[:2])])


@pytest.mark.parametrize("main, first, last", CASES)
@pytest.mark.parametrize("seed", range(3))
def test_random_operations_against_the_oracle(main, first, last, seed):
    rng = np.random.default_rng(seed * 7919 + len(main) * 31 + len(last))
    op = random_operation(rng, main, first, last)
    in0, in1, out = buffers(op, rng)
    expected = oracle(op, in0, in1, out)
    execute_reference(op, in0, in1, out)
    assert_same(op, out, expected)


def test_exec_types_do_not_change_results():
    rng = np.random.default_rng(1)
    defined = build(GEMM)
    undefined = defined.replace(exec_types=None)
    in0, in1, out = buffers(defined, rng)
    out2 = out.copy()
    execute_reference(defined, in0, in1, out)
    execute_reference(undefined, in0, in1, out2)
    np.testing.assert_array_equal(out, out2)


@pytest.mark.native
def test_out_gaps_are_untouched():
    # out with gaps between columns: the gap elements keep their values
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c"), ("prim", "prim"),
                         (3, 4), (1, 3), (0, 0), (1, 5))
    out = np.full(op.extent("out") + 2, 7.0, np.float32)
    execute_reference(op, -np.arange(12, dtype=np.float32), None, out)
    untouched = np.ones(out.size, bool)
    untouched[[i + 5 * j for i in range(3) for j in range(4)]] = False
    assert (out[untouched] == 7.0).all() and (out[~untouched] == 0.0).all()


@pytest.mark.native
def test_operand_checks():
    op = build(GEMM)
    small = np.zeros(10, np.float32)
    with pytest.raises(OperandValueError, match="operand in1 has 10 elements"):
        execute_reference(op, np.zeros(op.extent("in0"), np.float32), small,
                          np.zeros(op.extent("out"), np.float32))
    with pytest.raises(OperandError, match="operand in0 has dtype float64"):
        execute_reference(op, np.zeros(op.extent("in0")), small, small)
