"""Every pass, and optimize, keeps what an operation computes: on random operations (2..7
dims of every type mix, sizes 1..40, strides with gaps, broadcast inputs, every unary and
binary op as main and as first/last touch) the transformed op and the original give the same
result through the reference executor (bit-exact for element-wise ops, a tolerance for the
reordered k sums), and both agree with the np.einsum oracle built from the strides."""

import numpy as np
import pytest

from einjit.ir.reference import execute_reference
from einjit.ops import BINARY_OPS, UNARY_OPS
from einjit.passes import fuse, identify, optimize, reorder, shared, split

from ir_support import assert_same, buffers, oracle, random_operation

PASSES = {
    "fuse": lambda op: fuse(op),
    "fuse all": lambda op: fuse(op, min_size=10 ** 9),
    "split": lambda op: split(op, max_size=6, min_size=2),
    "identify": identify,
    "reorder": lambda op: reorder(identify(op)),
    "shared": lambda op: shared(identify(op), 3),
    "optimize": lambda op: optimize(op, num_threads=2),
    "optimize small blocks": lambda op: optimize(op, num_threads=3, max_size=8, min_size=2),
}

# (main, first touch, last touch): every op as main, and every unary op as a touch
CASES = ([("gemm", "none", "none"), ("brgemm", "zero", "relu"), ("gemm", "square", "sigmoid"),
          ("brgemm", "increment", "decrement"), ("gemm", "identity", "reciprocal")]
         + [(op, "none", last) for op, last in zip(UNARY_OPS, UNARY_OPS[::-1])]
         + [(op, "none", last) for op, last in zip(BINARY_OPS, UNARY_OPS)]
         + [("none", first, last) for first, last in zip(UNARY_OPS, UNARY_OPS[3:] + UNARY_OPS[:3])])


@pytest.mark.parametrize("pass_name", list(PASSES))
@pytest.mark.parametrize("main, first, last", CASES)
def test_pass_keeps_results(pass_name, main, first, last):
    for seed in range(2):
        rng = np.random.default_rng([seed, len(main), len(first), len(last), len(pass_name)])
        op = random_operation(rng, main, first, last, gaps=seed == 1)
        new = PASSES[pass_name](op)
        if pass_name in ("identify", "reorder", "shared") or pass_name.startswith("optimize"):
            assert new.is_defined and new.kernel_calls, str(new)
        in0, in1, out = buffers(op, rng)
        expected = oracle(op, in0, in1, out)
        got_original, got_new = out.copy(), out.copy()
        execute_reference(op, in0, in1, got_original)
        execute_reference(new, in0, in1, got_new)
        assert_same(op, got_original, expected)
        assert_same(op, got_new, expected)
        if op.kind != "contraction":
            assert_same(op, got_new, got_original)
