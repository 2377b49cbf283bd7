"""TensorOperations in complex64 and complex128: random operations of every op that takes
complex (contractions with a zero first touch, permutes, add, sub, mul), optimized for 1..3
threads and run by the JIT'd nests on the default and the AVX2 x86-64 variant, against the
reference executor and the independent oracle (complex128 sums); the seeds' BRGEMM and GEMM
shapes with remainders, padded leading dims and batches; a large out that a real kernel
would stream; and the errors for ops and backends that do not take complex."""

import dataclasses

import numpy as np
import pytest

import einjit
from einjit.backends import backend
from einjit.backends.x86_64 import missing_features
from einjit.codegen import plan_nest
from einjit.errors import OperationError
from einjit.ir import TensorOperation
from einjit.ir.reference import execute_reference
from einjit.runtime.host import host_isa

from ir_support import BRGEMM, GEMM, buffers, build, edit, oracle, random_operation

pytestmark = pytest.mark.native

COMPLEX = ("complex64", "complex128")
# a complex multiply-add sums two real products per part: twice float32's/float64's bounds
TOLERANCE = {"complex64": 4e-5, "complex128": 1e-13}
MAINS = ("gemm", "brgemm", "identity", "add", "sub", "mul", "none")
TOUCHES = ("none", "zero", "identity")


def _variants():
    """The host's x86-64 variants that run here (the default, and AVX2 where it differs)."""
    if host_isa() != "x86_64":
        return [None]
    found = [None]
    if not missing_features("avx2"):
        found.append("x86_64:avx2")
    return found


VARIANTS = _variants()


def check(op, got, expected):
    """Contractions within the complex dtype's tolerance; element-wise ops bit for bit."""
    if op.kind == "contraction":
        np.testing.assert_allclose(got, expected, rtol=TOLERANCE[op.dtype],
                                   atol=TOLERANCE[op.dtype])
    else:
        np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


def run(op, rng, threads=None):
    """`op` optimized and executed on random buffers, checked against the reference executor
    and the oracle; returns the result."""
    optimized = einjit.optimize(op, num_threads=threads)
    in0, in1, out = buffers(op, rng)
    expected = out.copy()
    execute_reference(op, in0, in1, expected)
    check(op, oracle(op, in0, in1, out), expected)
    optimized.execute(in0, in1 if op.kind in ("contraction", "binary") else None, out)
    check(op, out, expected)
    return out


@pytest.mark.parametrize("isa", VARIANTS, ids=lambda v: v or "default")
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("seed", range(24))
def test_random_complex_operations_execute(seed, dtype, isa):
    rng = np.random.default_rng(700 + seed)
    main = MAINS[seed % len(MAINS)]
    first = str(rng.choice(TOUCHES))
    last = str(rng.choice(TOUCHES))
    op = random_operation(rng, main, first, last, dtype=dtype)
    if isa is not None:
        op = op.replace(isa=isa)
    run(op, rng, threads=1 + seed % 3)


SHAPES = [
    # (m, n, k, batch, pad of the leading dims)
    (32, 32, 32, 8, 0),          # the seeds' BRGEMM
    (37, 5, 19, 3, 0),           # remainders in every dim
    (17, 23, 9, 1, 3),           # ld > rows
    (1, 7, 40, 2, 1),            # a row vector
    (50, 1, 13, 4, 5),           # a column vector
]


@pytest.mark.parametrize("isa", VARIANTS, ids=lambda v: v or "default")
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("m, n, k, batch, pad", SHAPES)
@pytest.mark.parametrize("first, main", [("zero", "brgemm"), ("none", "brgemm"),
                                         ("zero", "gemm")])
def test_brgemm_shapes(m, n, k, batch, pad, dtype, isa, first, main):
    """One prim BRGEMM (or a GEMM inside a seq k loop) over padded column-major blocks, with
    two shared column blocks around it."""
    ld_a, ld_b, ld_c = m + pad, k + pad, m + pad
    exec_k = "prim" if main == "brgemm" else "seq"
    op = TensorOperation(dtype, first, main, "none", ("n", "k", "m", "n", "k"),
                         ("shared", exec_k, "prim", "prim", "prim"), (2, batch, m, n, k),
                         (0, ld_a * k, 1, 0, ld_a), (ld_b * n, ld_b * n * 2, 0, ld_b, 1),
                         (ld_c * n, 0, 1, ld_c, 0), isa=isa, num_threads=2)
    run(op, np.random.default_rng(m * n + k))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_seeds_configurations_in_complex(dtype):
    rng = np.random.default_rng(3)
    for params in (BRGEMM, GEMM, edit(BRGEMM, prim_first_touch="zero")):
        op = build(edit(params, dtype=dtype))
        in0, in1, out = buffers(op, rng)
        expected = out.copy()
        execute_reference(op, in0, in1, expected)
        op.execute(in0, in1, out)
        check(op, out, expected)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_threads_give_identical_bits(dtype):
    """2 and 3 threads, run twice each: the same bits every run (each out block is summed by
    one thread in one order)."""
    rng = np.random.default_rng(11)
    op = TensorOperation(dtype, "zero", "gemm", "none", ("n", "m", "n", "k"),
                         ("undefined",) * 4, (6, 40, 16, 70), (0, 1, 0, 40),
                         (70 * 16, 0, 70, 1), (40 * 16, 1, 40, 0))
    in0, in1, out = buffers(op, rng)
    results = []
    for threads in (2, 3, 2, 3):
        got = out.copy()
        einjit.optimize(op, num_threads=threads).execute(in0, in1, got)
        results.append(got.view(np.uint8).copy())
    assert np.array_equal(results[0], results[2]) and np.array_equal(results[1], results[3])


@pytest.mark.parametrize("dtype", COMPLEX)
def test_a_large_set_out_is_never_streamed_in_complex(dtype):
    """Where a real kernel would store C non-temporally (out over the core's
    stream_out_bytes, nothing reading it back), the complex BRGEMM, which has no streaming
    stores, sets C through the caches; its float counterpart streams."""
    dims = dict(dim_types=("n", "m", "n", "k"), exec_types=("shared", "prim", "prim", "prim"),
                dim_sizes=(4, 64, 32, 16), strides_in0=(0, 1, 0, 64),
                strides_in1=(512, 0, 16, 1), strides_out=(2048, 1, 64, 0))
    part = {"complex64": "float32", "complex128": "float64"}[dtype]
    for name, streams in ((dtype, False), (part, True)):
        op = TensorOperation(name, "zero", "gemm", "none", **dims, num_threads=2)
        micro = dataclasses.replace(op.target.micro, stream_out_bytes=1)
        op = op.replace(isa=dataclasses.replace(op.target, micro=micro))
        plan = plan_nest(op, op.target)
        assert plan.main.params[4] is False and plan.streams == streams
        if name == dtype:
            run(op, np.random.default_rng(5))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("role, name", [("prim_main", "relu"), ("prim_main", "div"),
                                        ("prim_main", "max"), ("prim_last_touch", "sigmoid"),
                                        ("prim_first_touch", "square")])
def test_ops_without_a_complex_form_are_refused(dtype, role, name):
    params = dict(dtype=dtype, prim_first_touch="none", prim_main="identity",
                  prim_last_touch="none", dim_types=("c",), exec_types=None, dim_sizes=(4,),
                  strides_in0=(1,), strides_in1=(1,), strides_out=(1,))
    params[role] = name
    with pytest.raises(OperationError, match=rf"{role}='{name}' does not take dtype {dtype}"):
        build(params)


def test_dtypes_without_kernels_are_refused():
    for dtype in ("float16", "int32", "complex256", "clongdouble"):
        with pytest.raises(OperationError, match="is not supported"):
            build(edit(BRGEMM, dtype=dtype))


@pytest.mark.parametrize("isa", ["x86_64", "aarch64"])
def test_a_backend_without_a_complex_primitive_is_named(isa):
    """Where a backend generates a primitive in complex, the op is made; where not, the error
    names the primitive and the ISA."""
    offered = backend(isa).COMPLEX_PRIMITIVES
    for main, primitive in (("brgemm", "brgemm"), ("identity", "unary"), ("add", "binary")):
        params = edit(BRGEMM, dtype="complex64", isa=isa) if main == "brgemm" else dict(
            dtype="complex64", prim_first_touch="none", prim_main=main, prim_last_touch="none",
            dim_types=("c",), exec_types=None, dim_sizes=(4,), strides_in0=(1,),
            strides_in1=(1,), strides_out=(1,), isa=isa)
        if primitive in offered:
            assert build(params).dtype == "complex64"
        else:
            with pytest.raises(OperationError, match=f"complex {primitive} kernel, which the "
                                                     f"{isa} backend does not generate"):
                build(params)


def test_a_complex_contraction_counts_its_real_flops_for_threads():
    """A complex multiply-add is 8 real flops: an op too small for a second thread in float64
    gets one in complex128 (codegen's least flops per thread), and its nest runs on both."""
    from einjit.codegen.compile import MIN_FLOPS_PER_THREAD, worth_a_thread
    from einjit.passes.balance import working_threads
    size = MIN_FLOPS_PER_THREAD // 4          # 2 x size real flops: half a thread's least
    shape = dict(dim_types=("n", "m", "n", "k"), exec_types=("shared", "prim", "prim", "prim"),
                 dim_sizes=(size // (64 * 16 * 16), 64, 16, 16), strides_in0=(0, 1, 0, 64),
                 strides_in1=(256, 0, 16, 1), strides_out=(1024, 1, 64, 0), num_threads=2)
    real = TensorOperation("float64", "zero", "gemm", "none", **shape)
    cplx = TensorOperation("complex128", "zero", "gemm", "none", **shape)
    assert working_threads(real) == 1 and working_threads(cplx) == 2
    assert not worth_a_thread(plan_nest(real, real.target))
    assert worth_a_thread(plan_nest(cplx, cplx.target))
    run(cplx, np.random.default_rng(9), threads=2)
