"""op.execute end to end: random operations, optimized by einjit.optimize for 1..3 threads,
run by the JIT'd loop nests (einjit.codegen) and compared with the reference executor on the
unoptimized op — bit-exact where every op involved is exact, else within the ops' stated
accuracy (reciprocal 1 ulp, sigmoid 1e-6); contractions within a float32 tolerance."""

import numpy as np
import pytest

import einjit
from einjit.ir import TensorOperation
from einjit.ir.reference import execute_reference
from einjit.ops import BINARY_OPS, UNARY_OPS, lookup

from ir_support import buffers, random_operation

EXACT_UNARY = tuple(op for op in UNARY_OPS if lookup(op).exact)
INEXACT_UNARY = tuple(op for op in UNARY_OPS if not lookup(op).exact)
MAINS = ("gemm", "brgemm", "none") + UNARY_OPS + BINARY_OPS


def check(op, got, expected):
    names = {op.prim_main, op.prim_first_touch, op.prim_last_touch}
    if op.kind == "contraction":
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)
    elif "sigmoid" in names:
        np.testing.assert_allclose(got, expected, rtol=0, atol=1.5e-6)
    elif "reciprocal" in names:
        np.testing.assert_allclose(got, expected, rtol=2.5e-7, atol=0)
    else:
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def case(seed):
    """(main, first, last): exact ops anywhere; an inexact op only as the last one applied."""
    rng = np.random.default_rng(seed)
    main = str(rng.choice(MAINS))
    first = str(rng.choice(("none",) + EXACT_UNARY))
    last = str(rng.choice(("none",) + EXACT_UNARY + (INEXACT_UNARY if main in
                                                        ("gemm", "brgemm") else ())))
    if main in INEXACT_UNARY:
        last = "none"
    elif rng.random() < 0.25 and main not in ("gemm", "brgemm"):
        last = str(rng.choice(INEXACT_UNARY))
    if main in ("gemm", "brgemm") and last == "reciprocal":
        last = "sigmoid"       # 1/x of a sum near 0 magnifies the sums' rounding
    return rng, main, first, last


@pytest.mark.parametrize("seed", range(60))
def test_optimized_random_operations_execute(seed):
    rng, main, first, last = case(seed)
    op = random_operation(rng, main, first, last)
    optimized = einjit.optimize(op, num_threads=1 + seed % 3)
    in0, in1, out = buffers(op, rng)
    expected = out.copy()
    execute_reference(op, in0, in1, expected)
    optimized.execute(in0, in1 if op.kind in ("contraction", "binary") else None, out)
    check(op, out, expected)


def test_addresses_and_seeds_brgemm():
    op = TensorOperation("float32", "zero", "brgemm", "relu", ("m", "n", "k", "m", "n", "k"),
                         ("seq", "seq", "prim", "prim", "prim", "prim"),
                         (4, 3, 8, 32, 32, 32), (8192, 0, 1024, 1, 0, 32),
                         (0, 8192, 1024, 0, 32, 1), (3072, 1024, 0, 1, 32, 0))
    rng = np.random.default_rng(0)
    in0, in1, out = buffers(op, rng, pad=0)
    expected = out.copy()
    execute_reference(op, in0, in1, expected)
    op.execute(in0.ctypes.data, in1.ctypes.data, out.ctypes.data)
    check(op, out, expected)
