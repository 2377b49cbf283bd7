"""JIT'd loop nests against numpy: TensorOperation.execute runs the nest einjit generated
for the op (both ISAs: this module runs on the host and in the aarch64 lane) and must give
what the numpy reference executor computes from the strides (itself checked against an
element-by-element oracle in tests/ir), leaving every element it does not own untouched
(the buffers are padded, and gaps between strided elements are compared too), on 1, 2 and 3
threads, without ever touching memory past the operands (guard pages)."""

import dataclasses
import itertools
import os
import platform

import numpy as np
import pytest

import einjit
from einjit.backends.nest_plan import SCRATCH, SCRATCH_B, Prefetch
from einjit.codegen import compile_operation, loop_nest, plan_nest
from einjit.ir import TensorOperation
from einjit.ir.reference import execute_reference
from einjit.ops import BINARY_OPS, UNARY_OPS, lookup
from einjit.runtime import threads

from ir_support import assert_same, buffers, random_operation
from support import bits, guarded, on_thread_with_stack, run_in_child

IN_LANE = platform.machine() == "aarch64"
# the seeds' configurations; under emulation (the aarch64 lane) with 4 x 4 instead of 32 x 32
# output blocks, same strides and kernels
OUTER = 4 if IN_LANE else 32
SEEDS = dict(dim_types=("m", "n", "k", "m", "n", "k"), dim_sizes=(OUTER, OUTER, 8, 32, 32, 32),
             strides_in0=(8192, 0, 1024, 1, 0, 32), strides_in1=(0, 8192, 1024, 0, 32, 1),
             strides_out=(32768, 1024, 0, 1, 32, 0))
SEEDS_CONFIGS = {
    "gemm": ("none", "gemm", "none", ("seq", "seq", "seq", "prim", "prim", "prim")),
    "brgemm": ("none", "brgemm", "none", ("seq", "seq", "prim", "prim", "prim", "prim")),
    "brgemm zero relu": ("zero", "brgemm", "relu", ("seq", "seq", "prim", "prim", "prim", "prim")),
}


def plan_of(op):
    """The nest plan of `op` for its own target."""
    return plan_nest(op, op.target)


def with_core(op, **facts):
    """`op` for its target with some of the core's facts (Microarch fields) changed."""
    micro = dataclasses.replace(op.target.micro, **facts)
    return op.replace(isa=dataclasses.replace(op.target, micro=micro))


def _slope(name, x, spread):
    """The largest |f'| of the touch `name` within `spread` of x (how far an error in its
    input moves its output)."""
    x = np.abs(x)
    if name in ("none", "identity", "relu", "increment", "decrement"):
        return np.ones_like(x)
    if name == "zero":
        return np.zeros_like(x)
    if name == "square":
        return 2 * (x + spread)
    if name == "sigmoid":
        return np.full_like(x, 0.25)
    with np.errstate(divide="ignore"):     # reciprocal
        return np.where(x > spread, 1 / np.maximum(x - spread, 1e-300) ** 2, np.inf)


def assert_matches(op, got, expected, in0, in1, start):
    """Element-wise: bit-exact where every op is exact, else within the ops' stated accuracy.
    Contractions: the sum within the rounding bound of `length` products in any order,
    (length + 2) * eps * (|first_touch(c)| + sum |a| |b|), carried through the last touch by
    its slope, plus the touches' own accuracy (eps of the op's dtype)."""
    eps = np.finfo(op.dtype).eps
    sigmoid_accuracy = lookup("sigmoid").tolerance if op.dtype == "float32" else 1e-15
    if op.kind != "contraction":
        chain = [name for name in (op.prim_first_touch, op.prim_main, op.prim_last_touch)
                 if name != "none"]
        if all(lookup(name).exact for name in chain):
            assert_same(op, got, expected)
        else:   # reciprocal within 1 ulp, sigmoid within its accuracy (README), then exact ops
            np.testing.assert_allclose(got, expected, rtol=8 * eps, atol=2 * sigmoid_accuracy,
                                       equal_nan=True)
        return
    magnitude = start.copy()
    touched = op.replace(prim_last_touch="none", prim_main=op.prim_main)
    plain = op.replace(prim_first_touch="none", prim_last_touch="none")
    if op.prim_first_touch != "none":
        execute_reference(op.replace(prim_main=op.prim_main, prim_last_touch="none"),
                          np.zeros_like(in0), np.zeros_like(in1), magnitude)
    magnitude = np.abs(magnitude)
    execute_reference(plain, np.abs(in0), np.abs(in1), magnitude)
    pre = start.copy()
    execute_reference(touched, in0, in1, pre)
    length = int(np.prod([d.size for d in op.dims if d.type == "k"]))
    bound = (length + 2) * eps * magnitude.astype(np.float64)
    last = op.prim_last_touch
    bound = (_slope(last, pre.astype(np.float64), bound) * bound
             + 4 * eps * np.abs(expected.astype(np.float64))
             + (sigmoid_accuracy if last == "sigmoid" else 0.0) + 1e-300)
    error = np.abs(got.astype(np.float64) - expected)
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    assert np.all(same | (error <= bound)), \
        f"max error {np.max(np.where(same, 0, error))} beyond the rounding bound"


def typed_buffers(op, rng, pad=5):
    """buffers() (float32 values) in the op's dtype."""
    return tuple(values.astype(op.dtype) for values in buffers(op, rng, pad))


def run_and_check(op, seed=0):
    rng = np.random.default_rng(seed)
    in0, in1, out = typed_buffers(op, rng)
    start, expected = out.copy(), out.copy()
    execute_reference(op, in0, in1, expected)
    op.execute(in0, in1 if op.kind == "binary" or op.kind == "contraction" else None, out)
    assert_matches(op, out, expected, in0, in1, start)


DTYPES = ("float32", "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(SEEDS_CONFIGS))
@pytest.mark.parametrize("placement", ["seq", "shared m", "shared m n"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_seeds_configurations(name, placement, threads, dtype, every_share_threaded):
    first, main, last, exec_types = SEEDS_CONFIGS[name]
    shared = {"seq": 0, "shared m": 1, "shared m n": 2}[placement]
    exec_types = ("shared",) * shared + exec_types[shared:]
    op = TensorOperation(dtype, first, main, last, exec_types=exec_types,
                         num_threads=threads, **SEEDS)
    run_and_check(op, seed=threads)
    assert len(compile_operation(op)._shares) == (min(threads, OUTER ** shared) if shared else 1)


@pytest.mark.parametrize("rows, threaded", [(16, False), (256, True)])
def test_an_element_wise_nest_gets_a_second_thread_for_enough_elements(rows, threaded):
    """Element-wise work is counted in elements (MIN_WORK_PER_THREAD), not in flops: an add
    of 2 x rows x 256 elements over a shared dim of 2 on two threads."""
    from einjit.codegen.compile import MIN_WORK_PER_THREAD
    op = TensorOperation("float32", "none", "add", "none", ("c", "c", "c"),
                         ("shared", "prim", "prim"), (2, rows, 256), (rows * 256, 256, 1),
                         (rows * 256, 256, 1), (rows * 256, 256, 1), num_threads=2)
    assert (2 * rows * 256 >= 2 * MIN_WORK_PER_THREAD) == threaded
    assert len(compile_operation(op)._shares) == (2 if threaded else 1)
    run_and_check(op)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t, r, u, s", list(itertools.product((3, 4, 7), repeat=4)))
def test_seeds_permutation_trus_to_turs(t, r, u, s, dtype):
    op = TensorOperation(dtype, "none", "identity", "none", ("c",) * 4,
                         ("shared", "seq", "prim", "prim"), (t, r, u, s),
                         (r * u * s, u * s, s, 1), (0,) * 4, (u * r * s, s, r * s, 1),
                         num_threads=2)
    a = np.random.default_rng(t * r * u * s).uniform(-10, 10, t * r * u * s).astype(dtype)
    out = np.full(t * r * u * s, np.nan, dtype)
    op.execute(a, None, out)
    np.testing.assert_array_equal(out.reshape(t, u, r, s),
                                  a.reshape(t, r, u, s).transpose(0, 2, 1, 3))


def test_k_loops_outside_the_output_loops_touch_each_block_once():
    """First touch (zero) before a block's first update and last touch (relu) after its last,
    with seq k dims outer to seq m/n dims: the nest decides on the k indices."""
    op = TensorOperation("float32", "zero", "gemm", "relu", ("k", "m", "k", "n", "m", "n", "k"),
                         ("seq", "seq", "seq", "seq", "prim", "prim", "prim"),
                         (3, 2, 2, 3, 8, 4, 5),
                         (5 * 8 * 2, 8, 5 * 8 * 2 * 3, 0, 1, 0, 16),
                         (5 * 4 * 3, 0, 5 * 4 * 3 * 3, 5 * 4, 0, 5, 1),
                         (0, 8, 0, 8 * 2 * 4, 1, 16, 0))
    run_and_check(op)


def _executable_cases(dtype="float32"):
    """Ops covering every unary and binary op as main and as touches, placements with
    shared/seq/prim dims, transposed and plain unary outputs, gaps in every tensor."""
    cases = []
    for i, main in enumerate(UNARY_OPS + BINARY_OPS):
        first, last = UNARY_OPS[i % len(UNARY_OPS)], UNARY_OPS[(i + 3) % len(UNARY_OPS)]
        binary = main in BINARY_OPS
        # dims (c shared 3, c seq 5, c prim M 7 or 19, c prim N 6); in0 column-major with gaps
        for rows, transposed in ((7, False), (19, False), (7, True)):
            sizes = (3, 5, rows, 6)
            ld_a = rows + 2
            in0 = (ld_a * 6 * 5 + 3, ld_a * 6, 1, ld_a)
            in1 = (ld_a * 6 * 5 + 1, ld_a * 6, 1, ld_a) if binary else (0,) * 4
            if transposed and not binary:
                out = ((7 * rows + 2) * 5, 7 * rows + 2, 7, 1)        # N unit stride
            else:
                out = ((rows + 1) * 6 * 5, (rows + 1) * 6, 1, rows + 1)
            if transposed and binary:
                continue
            cases.append(TensorOperation(dtype, first, main, last, ("c",) * 4,
                                         ("shared", "seq", "prim", "prim"), sizes, in0, in1,
                                         out, num_threads=2))
    for first, last in zip(("none",) + UNARY_OPS, UNARY_OPS + ("none",)):
        cases.append(TensorOperation(dtype, first, "none", last, ("c", "c", "c"),
                                     ("seq", "prim", "prim"), (4, 9, 3), (0,) * 3, (0,) * 3,
                                     (9 * 3 + 5, 1, 9 + 1)))
    return cases


@pytest.mark.parametrize("op", _executable_cases() + _executable_cases("float64"),
                         ids=lambda op: f"{op.dtype}-{op.prim_first_touch}-{op.prim_main}-"
                         f"{op.prim_last_touch}-{op.dims[2].size}")
def test_elementwise_mains_and_touches(op, every_share_threaded):
    run_and_check(op)


def test_plans_skip_size_one_loops_and_call_each_kernel_once():
    op = TensorOperation("float32", "zero", "gemm", "zero", ("m", "n", "k", "m", "n", "k"),
                         ("shared", "seq", "seq", "prim", "prim", "prim"), (1, 3, 1, 4, 5, 6),
                         (0, 0, 0, 1, 0, 4), (0, 30, 0, 0, 6, 1), (0, 20, 0, 1, 4, 0))
    plan = plan_of(op)
    assert [dim.size for dim in plan.loops] == [3]
    # the size-1 k dims leave no k loop: the first touch's zero folds into the GEMM (it sets
    # C), the last touch's zero stays; brgemm params: m, n, k, batch, accumulate, stream, ld_b,
    # far_c (0: C is near)
    assert plan.kernels == (("brgemm", (4, 5, 6, 1, False, False, 6, 0, None), "float32"),
                            ("unary", ("zero", 4, 5, False), "float32"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_gemm_tells_its_kernel_the_pitch_of_b(dtype):
    """B's columns 8 KiB apart (they share an L1 set): the kernel is generated for that ld_b
    (it blocks for it) and the nest computes the contraction."""
    pitch = 8192 // np.dtype(dtype).itemsize
    op = TensorOperation(dtype, "none", "gemm", "none", ("n", "m", "n", "k"),
                         ("seq", "prim", "prim", "prim"), (3, 37, 20, 24),
                         (0, 1, 0, 37), (20 * pitch, 0, pitch, 1), (37 * 20, 1, 37, 0))
    plan = plan_of(op)
    assert plan.main.params[6] == pitch == plan.main.integers[1]
    run_and_check(op)


def _conflicting_a_gemm(dtype, first="none", last="none", exec_outer="seq", in0_inner=False,
                        ld_a=None, k=24):
    """A GEMM of 2 x 37 rows and 3 x 20 columns whose A columns lie 512 bytes apart (or
    ld_a elements); the innermost loop runs over N (in0 stays) unless in0_inner."""
    ld_a = ld_a or 512 // np.dtype(dtype).itemsize
    m_loop, n_loop = ("m", 2, 37, 0, 37), ("n", 3, 0, 20 * k, 20 * 74)
    loops = [n_loop, m_loop] if in0_inner else [m_loop, n_loop]
    prim = [("m", 37, 1, 0, 1), ("n", 20, 0, k, 74), ("k", k, ld_a, 1, 0)]
    dims = loops + prim
    return TensorOperation(dtype, first, "gemm", last, [d[0] for d in dims],
                           (exec_outer, "seq", "prim", "prim", "prim"), [d[1] for d in dims],
                           [d[2] for d in dims], [d[3] for d in dims], [d[4] for d in dims],
                           num_threads=2)


def _assert_same_bits_as_in_place(op, seed, operand="a"):
    """op's nest (copying A's or B's block) gives C bit for bit as the nest reading it in
    place (the same op for a core that allows no such copy)."""
    rng = np.random.default_rng(seed)
    in0, in1, copied = typed_buffers(op, rng)
    in_place = copied.copy()
    op.execute(in0, in1, copied)
    reading = with_core(op, **({"pack_max_bytes": 0} if operand == "a" else {"l2_bytes": 0}))
    assert getattr(plan_of(reading), f"pack_{operand}") is None
    reading.execute(in0, in1, in_place)
    np.testing.assert_array_equal(bits(copied), bits(in_place))


def _conflicting_a_brgemm(dtype, gap=0):
    """_conflicting_a_gemm's blocks as a batch of 4 entries of K = 24, A's entries 24 columns
    apart (plus `gap` elements), the innermost loop over N."""
    ld_a = 512 // np.dtype(dtype).itemsize
    dims = [("m", 2, 37, 0, 37), ("n", 3, 0, 4 * 24 * 20, 20 * 74),
            ("k", 4, 24 * ld_a + gap, 24 * 20, 0), ("m", 37, 1, 0, 1), ("n", 20, 0, 24, 74),
            ("k", 24, ld_a, 1, 0)]
    return TensorOperation(dtype, "none", "brgemm", "none", [d[0] for d in dims],
                           ("shared", "seq", "prim", "prim", "prim", "prim"),
                           [d[1] for d in dims], [d[2] for d in dims], [d[3] for d in dims],
                           [d[4] for d in dims], num_threads=2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_conflicting_batch_of_a_blocks_is_copied_as_one_matrix(dtype, every_share_threaded):
    """A batch whose A entries follow one another (K columns apart) at a 512-byte pitch is
    copied as one M x (K x batch) matrix; the BRGEMM reads its entries K copied columns apart.
    Results as numpy's, bit for bit those of the nest reading in place; entries further apart
    are read in place."""
    op = _conflicting_a_brgemm(dtype)
    plan = plan_of(op)
    ld = plan.main.integers[0]
    assert plan.main.params[3] == 4 and plan.pack_a.copy.params == ("identity", 37, 96, False)
    assert plan.main.integers[3] == 24 * ld and plan.main.pointers[0] == SCRATCH
    run_and_check(op)
    _assert_same_bits_as_in_place(op, seed=2)
    assert plan_of(_conflicting_a_brgemm(dtype, gap=8)).pack_a is None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first, last, exec_outer", [("none", "none", "seq"),
                                                     ("zero", "relu", "shared"),
                                                     ("square", "none", "shared")])
def test_a_conflicting_a_block_is_copied_once_per_block(dtype, first, last, exec_outer,
                                                        every_share_threaded):
    """A's columns 512 bytes apart and the innermost loop over N: the nest copies A's block
    into its frame (the unary identity) when in0 moves and its GEMM reads the copy, whose
    leading dim is whole lines and not a multiple of 512 bytes; results as numpy's, bit for
    bit those of the nest reading A in place (on 1 and 2 threads, each with its own copy)."""
    op = _conflicting_a_gemm(dtype, first, last, exec_outer)
    plan = plan_of(op)
    itemsize = np.dtype(dtype).itemsize
    ld = plan.main.integers[0]
    assert plan.pack_a is not None and plan.main.pointers == (SCRATCH, 1, 2)
    assert plan.pack_a.copy.params == ("identity", 37, 24, False)
    assert plan.pack_a.copy.integers == (512 // itemsize, ld)
    assert ld >= 37 and ld * itemsize % 64 == 0 and ld * itemsize % 512
    assert plan.pack_a.bytes == ld * 24 * itemsize
    run_and_check(op)
    _assert_same_bits_as_in_place(op, seed=1)


def test_a_blocks_are_copied_only_where_the_innermost_loop_reuses_them():
    """No copy where the innermost loop moves in0, where A's pitch is not a multiple of 512
    bytes (the seeds' batch: 128 bytes) or where the copy would outgrow the core's
    pack_max_bytes."""
    assert plan_of(_conflicting_a_gemm("float32")).pack_a is not None
    assert plan_of(_conflicting_a_gemm("float32", in0_inner=True)).pack_a is None
    assert plan_of(_conflicting_a_gemm("float32", ld_a=136)).pack_a is None
    k = einjit.resolve_target(None).micro.pack_max_bytes // (48 * 4) + 1
    assert plan_of(_conflicting_a_gemm("float32", k=k)).pack_a is None
    batched = TensorOperation("float32", "none", "brgemm", "none", exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), **SEEDS)
    assert plan_of(batched).pack_a is None


def _panel_gemm(dtype, first="none", last="none", exec_outer="seq", n=20, ld_a=74,
                m_inner=True):
    """A GEMM walked as a large contraction's panels (n, then k, then m innermost: in1 stays
    for the m blocks): 2 x 37 rows, 3 x `n` columns, 2 x 24 k, B's columns 512 bytes apart,
    A's `ld_a` elements."""
    ld_b = 512 // np.dtype(dtype).itemsize
    n_loop, k_loop = ("n", 3, 0, ld_b * n, n * 74), ("k", 2, 24 * ld_a, 24, 0)
    m_loop = ("m", 2, 37, 0, 37)
    loops = [n_loop, k_loop, m_loop] if m_inner else [n_loop, m_loop, k_loop]
    prim = [("m", 37, 1, 0, 1), ("n", n, 0, ld_b, 74), ("k", 24, ld_a, 1, 0)]
    dims = loops + prim
    return TensorOperation(dtype, first, "gemm", last, [d[0] for d in dims],
                           (exec_outer, "seq", "seq", "prim", "prim", "prim"),
                           [d[1] for d in dims], [d[2] for d in dims], [d[3] for d in dims],
                           [d[4] for d in dims], num_threads=2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first, last, exec_outer", [("none", "none", "seq"),
                                                     ("zero", "relu", "shared")])
def test_a_conflicting_b_panel_is_copied_once_for_the_m_blocks(dtype, first, last, exec_outer,
                                                               every_share_threaded):
    """B's columns 512 bytes apart and the m loop innermost: the nest copies B's block into
    its frame when in1 moves, and the GEMM (generated for the copy's leading dim: whole
    lines, not a multiple of 512 bytes) reads it; results as numpy's, bit for bit those of
    the nest reading B in place."""
    op = _panel_gemm(dtype, first, last, exec_outer)
    plan = plan_of(op)
    itemsize = np.dtype(dtype).itemsize
    ld = plan.main.integers[1]
    assert plan.pack_a is None and plan.pack_b is not None
    assert plan.main.pointers == (0, SCRATCH_B, 2) and plan.main.params[6] == ld
    assert plan.pack_b.copy.params == ("identity", 24, 20, False)
    assert plan.pack_b.copy.integers == (512 // itemsize, ld)
    assert ld >= 24 and ld * itemsize % 64 == 0 and ld * itemsize % 512
    assert plan.pack_b.bytes == ld * 20 * itemsize
    run_and_check(op)
    _assert_same_bits_as_in_place(op, seed=3, operand="b")


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_wide_call_copies_a_and_b(dtype, every_share_threaded):
    """A call of 128 columns or more copies A's block on every call (A's columns 512 bytes
    apart) besides B's panel: both copies in the frame, results as numpy's."""
    op = _panel_gemm(dtype, "zero", "none", "shared", n=128, ld_a=512 // np.dtype(dtype).itemsize)
    plan = plan_of(op)
    assert plan.pack_a is not None and plan.pack_b is not None
    assert plan.main.pointers == (SCRATCH, SCRATCH_B, 2)
    run_and_check(op)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first, last, exec_outer", [("none", "none", "seq"),
                                                     ("zero", "relu", "shared")])
def test_a_panel_walk_tells_its_kernel_that_c_comes_from_afar(dtype, first, last, exec_outer,
                                                              every_share_threaded, monkeypatch):
    """k chunks around the m blocks (a large contraction's walk): each C block comes back
    only after the other m blocks, and the BRGEMM is told so and C's ld (far_c);
    results as numpy's, bit for bit those of the nest without the hint (K whole in both).
    The k loop innermost (the same C block again) or a kernel that sets C: no hint."""
    op = _panel_gemm(dtype, first, last, exec_outer, n=23)
    plan = plan_of(op)
    assert plan.main.params[7] == plan.main.integers[2] == 74
    assert plan_of(_panel_gemm(dtype, first, last, m_inner=False)).main.params[7] == 0
    run_and_check(op)
    rng = np.random.default_rng(5)
    in0, in1, hinted = typed_buffers(op, rng)
    plain = hinted.copy()
    op.execute(in0, in1, hinted)
    monkeypatch.setattr(loop_nest, "_far_c", lambda main, op, loops: False)
    unhinted = with_core(op, stream_out_bytes=op.target.micro.stream_out_bytes + 1)
    assert plan_of(unhinted).main.params[7] == 0
    unhinted.execute(in0, in1, plain)
    np.testing.assert_array_equal(bits(hinted), bits(plain))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first, n", [("none", 1), ("zero", 1), ("none", 2)])
def test_a_matrix_times_a_vector_keeps_c_near(dtype, first, n, every_share_threaded):
    """The same walk for n of 1 (a matrix times a vector: k blocks around its m blocks): its
    C, one column, stays near, so no far_c hint; with two columns the hint comes back.
    Results as numpy's."""
    k_loop, m_loop = ("k", 4, 16 * 74, 16, 0), ("m", 2, 37, 0, 37)
    prim = [("m", 37, 1, 0, 1), ("n", n, 0, 64, 74), ("k", 16, 74, 1, 0)]
    dims = [k_loop, m_loop] + prim
    op = TensorOperation(dtype, first, "gemm", "none", [d[0] for d in dims],
                         ("seq", "seq", "prim", "prim", "prim"), [d[1] for d in dims],
                         [d[2] for d in dims], [d[3] for d in dims], [d[4] for d in dims],
                         num_threads=2)
    main = plan_of(op).main
    assert main.params[4] and main.params[7] == (0 if n == 1 else 74)
    run_and_check(op)


def _next_blocks(plan):
    """Per input, the stride of the innermost loop that moves it (0 where the call reads a
    copy of it); for out, the innermost loop's."""
    inputs = tuple(next((loop.strides[operand] for loop in reversed(plan.loops)
                         if loop.strides[operand]), 0)
                   if plan.main.pointers[operand] == operand else 0 for operand in range(2))
    return inputs + (plan.loops[-1].strides[2],)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_nest_beyond_l2_tells_its_kernel_where_the_next_call_is(dtype, every_share_threaded):
    """Operands that outgrow L2 (a core with small caches here): the BRGEMM is told the next
    call's blocks (next_call), per operand the stride of the innermost loop that moves it;
    A's and B's only where in0 and in1 outgrow the last-level cache's share, none for a
    matrix times a vector, none within L2 or on a core without the prefetch (every core is
    given it here: the A64 kernels take the hint and ignore it). Results as numpy's, bit for
    bit those of the nest without the hint."""
    shapes = ((6, 37, 24), (6, 24, 150))       # bij, bjk: a tail in the rows, n in blocks
    expr = einjit.contract_expression("bij,bjk->bik", *shapes, dtype=dtype)
    op = expr._prepared.shown.steps[0].lowered.op
    small = with_core(op, l2_bytes=4096, llc_bytes=8 * 4096, prefetch_next_call=True)
    plan = plan_of(small)
    assert plan.main.params[8] == _next_blocks(plan) and all(plan.main.params[8][1:])
    only_c = plan_of(with_core(op, l2_bytes=4096, prefetch_next_call=True)).main.params[8]
    assert only_c[:2] == (0, 0) and only_c[2]
    assert plan_of(with_core(op, prefetch_next_call=True)).main.params[8] is None
    without = with_core(op, l2_bytes=4096, llc_bytes=8 * 4096, prefetch_next_call=False)
    assert plan_of(without).main.params[8] is None
    run_and_check(small)
    rng = np.random.default_rng(7)
    in0, in1, hinted = typed_buffers(small, rng)
    plain = hinted.copy()
    small.execute(in0, in1, hinted)
    without.execute(in0, in1, plain)
    np.testing.assert_array_equal(bits(hinted), bits(plain))
    thin = einjit.contract_expression("ij,jk->ik", (64, 4096), (4096, 64), dtype=dtype)
    nest = plan_of(with_core(thin._prepared.shown.steps[0].lowered.op, l2_bytes=4096,
                             prefetch_next_call=True))
    assert nest.loops[-1].reduction and nest.main.params[8] in (None, (0, 0, 0)), \
        "a k loop innermost: the next C block may be another thread's"
    vector = einjit.contract_expression("ij,j->i", (300, 200), (200,), dtype=dtype)
    for step in vector._prepared.shown.steps:
        nest = plan_of(with_core(step.lowered.op, l2_bytes=4096, llc_bytes=8 * 4096,
                                 prefetch_next_call=True))
        assert nest.main.params[8] is None or nest.main.params[8][:2] == (0, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_products_with_remainders_match_numpy(dtype):
    """Products large enough for the cache blocks (einjit.passes.block) on an L2 of up to
    2 MiB, far_c kernels in their nests: blocks of 128 or 100 rows (a tail in the kernel's
    vectors), 100 or 110 k-steps and panels of 505 columns or of 53 or 265 (a narrower last
    register block), the operands column slices of wider arrays (leading dims past their
    rows); as numpy's."""
    rng = np.random.default_rng(11)
    m, k, n = (1010, 1100, 300) if dtype == "float32" else (530, 550, 300)
    a = rng.uniform(-1, 1, (m, k + 9)).astype(dtype)[:, 3:k + 3]
    b = rng.uniform(-1, 1, (k, n + 5)).astype(dtype)[:, :n]
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    plan = expr._prepared.shown
    assert any(step.lowered.op.kind == "contraction"
               and (nest := plan_of(step.lowered.op)).main.kind == "brgemm"
               and nest.main.params[7] for step in plan.steps)
    got = expr(a, b)
    # float64 holds float32's error bound; longdouble is software arithmetic on aarch64
    wide = np.float64 if dtype == "float32" else np.longdouble
    exact = a.astype(wide) @ b.astype(wide)
    eps = np.finfo(dtype).eps
    bound = (k + 2) * eps * (np.abs(a).astype(wide) @ np.abs(b).astype(wide))
    assert np.all(np.abs(got - exact) <= bound)


def test_b_blocks_are_copied_only_where_the_m_loop_reuses_them():
    """No copy of B where the innermost loop moves in1, where B's pitch is not a multiple of
    512 bytes, or where the copy would outgrow L2."""
    assert plan_of(_panel_gemm("float32")).pack_b is not None
    assert plan_of(_panel_gemm("float32", m_inner=False)).pack_b is None
    assert plan_of(with_core(_panel_gemm("float32"), l2_bytes=2048)).pack_b is None
    assert plan_of(_conflicting_a_gemm("float32")).pack_b is None


def test_a_zero_first_touch_folds_into_a_brgemm():
    """Without a k loop each out block gets one update right after its zeroing: the kernel
    sets C (accumulate False), no zero kernel runs and C is not prefetched (it is not read).
    With a seq k loop no zero kernel runs either: at the loop's first index the main kernel's
    setting form (first_main, far_c kept) sets C, the main kernel adds at the others."""
    brgemm = TensorOperation("float32", "zero", "brgemm", "relu", exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), **SEEDS)
    plan = plan_of(brgemm)
    assert plan.first_touch is None
    assert plan.main.params == (32, 32, 32, 8, False, False, 32, 0, None)
    assert plan.prefetch_out is None and plan.last_touch.params[0] == "relu"
    k_loop_outside = TensorOperation(
        "float32", "zero", "gemm", "relu", ("k", "m", "n", "m", "n", "k"),
        ("seq", "seq", "seq", "prim", "prim", "prim"), (8, OUTER, OUTER, 32, 32, 32),
        (1024, 8192, 0, 1, 0, 32), (1024, 0, 8192, 0, 32, 1), (0, 32768, 1024, 1, 32, 0))
    plan = plan_of(k_loop_outside)
    assert plan.first_touch is None
    assert plan.main.params == (32, 32, 32, 1, True, False, 32, 32, None)   # far_c: k outermost
    assert plan.first_main == dataclasses.replace(
        plan.main, params=(32, 32, 32, 1, False, False, 32, 32, None))
    assert plan.first_main.kernel in plan.kernels and plan.main.kernel in plan.kernels
    no_touch = TensorOperation("float32", "none", "brgemm", "none", exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), **SEEDS)
    plan = plan_of(no_touch)
    assert plan.main.params[4] is True and plan.prefetch_out is not None
    assert plan.first_main is None
    square = TensorOperation("float32", "square", "brgemm", "none", exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), **SEEDS)
    assert plan_of(square).main.params[4] is True


def test_a_brgemm_reading_c_prefetches_the_next_block_or_its_own_under_a_k_loop():
    """C is prefetched one innermost-loop stride ahead (the next call's block, into L2), or at
    the block itself (into L1) when the innermost loop is a k loop over the same block; every
    column's lines, from the column's start."""
    no_touch = TensorOperation("float32", "none", "brgemm", "none", exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), **SEEDS)
    assert plan_of(no_touch).prefetch_out == Prefetch(lines=3, columns=32, pitch=128,
                                                        ahead=1024 * 4)
    k_inner = _seeds_gemm("float64", (0, 1, 2), k_size=40)      # 40 k blocks: too big a batch
    plan = plan_of(k_inner)
    assert plan.seq[-1].reduction and plan.prefetch_out == Prefetch(5, 32, 256, 0)


def _seeds_gemm(dtype, order, first="none", last="none", k_size=8):
    """The seeds' GEMM config with its three seq dims in `order` (indices into m, n, k)."""
    seq = [("m", OUTER, 8192, 0, 32768), ("n", OUTER, 0, 8192, 1024),
           ("k", k_size, 1024, 1024, 0)]
    prim = [("m", 32, 1, 0, 1), ("n", 32, 0, 32, 32), ("k", 32, 32, 1, 0)]
    dims = [seq[i] for i in order] + prim
    return TensorOperation(dtype, first, "gemm", last, [d[0] for d in dims],
                           ("seq",) * 3 + ("prim",) * 3, [d[1] for d in dims],
                           [d[2] for d in dims], [d[3] for d in dims], [d[4] for d in dims])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first, last", [("none", "none"), ("zero", "relu"), ("square", "none")])
def test_a_gemm_runs_its_innermost_k_loop_as_one_brgemm_batch(dtype, first, last):
    """The k loop innermost: one BRGEMM call over it, its strides the batch strides, the
    touches kept around it (a zero first touch then folds too). One batch call and a call
    per k round differently (the kernels add C to their sums at the end): both are checked
    against numpy."""
    folded = _seeds_gemm(dtype, (0, 1, 2), first, last)
    kept = _seeds_gemm(dtype, (2, 0, 1), first, last)
    plan = plan_of(folded)
    assert [dim.size for dim in plan.seq] == [OUTER, OUTER]
    assert plan.main.params == (32, 32, 32, 8, first != "zero", False, 32, 0, None)
    assert plan.main.integers == (32, 32, 32, 1024, 1024)
    assert (plan.first_touch is None) == (first in ("none", "zero"))
    assert (plan.last_touch is None) == (last == "none")
    assert plan_of(kept).main.params[3] == 1 and len(plan_of(kept).seq) == 3
    run_and_check(folded)
    run_and_check(kept)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("last", ["none", "relu"])
def test_a_set_c_streams_when_out_is_large_and_nothing_reads_it_back(dtype, last):
    """A zero first touch folded into the BRGEMM, out over the core's stream_out_bytes and no
    last touch: the kernel streams C (x86: non-temporal stores when C is aligned); results as
    numpy's, bit for bit those of the cached nest, nothing outside out written."""
    seeds = TensorOperation(dtype, "zero", "brgemm", last, exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), num_threads=2, **SEEDS)
    out_bytes = (1 + sum((d.size - 1) * d.stride_out for d in seeds.dims)) * \
        np.dtype(dtype).itemsize
    below = with_core(seeds, stream_out_bytes=out_bytes + 1)
    assert not plan_of(below).streams
    cached = compile_operation(below)
    op = with_core(seeds, stream_out_bytes=out_bytes)
    assert plan_of(op).streams == (last == "none")
    assert plan_of(op).main.params[4:6] == (False, last == "none")
    for misalign in (0, 1):
        rng = np.random.default_rng(misalign)
        in0, in1, out = typed_buffers(op, rng)
        raw = np.empty(out.size + 64, out.dtype)
        start = (-raw.ctypes.data % 64) // out.itemsize + misalign * 3
        aligned = raw[start:start + out.size]
        aligned[...] = out
        expected, other = out.copy(), out.copy()
        execute_reference(op, in0, in1, expected)
        op.execute(in0, in1, aligned)
        assert_matches(op, aligned, expected, in0, in1, out)
        cached.run(in0.ctypes.data, in1.ctypes.data, other.ctypes.data)
        np.testing.assert_array_equal(bits(aligned), bits(other))


def test_the_plan_takes_its_thresholds_from_the_target_it_is_given():
    """One op planned for cores that differ in one fact: the copy of A, the batch of the
    innermost k loop and the streaming of C follow the core of the target plan_nest gets."""
    def core(op, **facts):
        return dataclasses.replace(op.target, micro=dataclasses.replace(op.target.micro,
                                                                        **facts))

    copied = _conflicting_a_gemm("float32")
    assert plan_nest(copied, copied.target).pack_a is not None
    assert plan_nest(copied, core(copied, pack_max_bytes=0)).pack_a is None
    folded = _seeds_gemm("float32", (0, 1, 2))
    assert plan_nest(folded, folded.target).main.params[3] == 8
    assert plan_nest(folded, core(folded, batch_block_bytes=0)).main.params[3] == 1
    zeroed = TensorOperation("float32", "zero", "brgemm", "none", exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), **SEEDS)
    assert not plan_nest(zeroed, zeroed.target).streams
    assert plan_nest(zeroed, core(zeroed, stream_out_bytes=1)).streams


def test_a_k_loop_stays_a_loop_when_its_batch_would_not_fit_in_l2():
    """1024 k blocks of 32x32x32 floats are 8 MiB: separate GEMM calls keep each block small."""
    plan = plan_of(_seeds_gemm("float32", (0, 1, 2), k_size=1024))
    assert plan.main.params[3] == 1 and [dim.size for dim in plan.seq] == [OUTER, OUTER, 1024]


SMALL_STACK_BYTES = 128 << 10           # musl's default for a new thread


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_nest_whose_copy_of_a_outgrows_the_calling_threads_stack_runs_on_the_workers():
    """A nest copying 192 KiB of A into its frame, executed from a thread of 128 KiB of
    stack (musl's default): it runs on the workers (which have their own stacks) and gives
    numpy's results; from the main thread it runs there."""
    op = _conflicting_a_gemm("float32", k=1024)
    compiled = compile_operation(op)
    assert compiled.plan.pack_a.bytes > SMALL_STACK_BYTES

    def work(note):
        def check():
            assert not threads.stack_suffices(compiled.stack_bytes)
            run_and_check(op, seed=3)
        note("the nest from a thread of 128 KiB of stack")
        on_thread_with_stack(SMALL_STACK_BYTES, check)
        note("the nest from the main thread")
        assert threads.stack_suffices(compiled.stack_bytes)
        run_and_check(op, seed=4)
        return True

    assert run_in_child(work)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_nest_whose_frame_outgrows_its_thread_dies_of_sigsegv():
    """The same nest called directly (no stack check) on a thread of 128 KiB of stack (the
    least AArch64's glibc allows): its frame reaches past the stack and the process dies of
    SIGSEGV rather than the call returning. (That it faults on the guard page itself, not
    on whatever lies below, is the probes' job: the reserve_stack tests of both assemblers
    pin them.) glibc may hand a new thread a cached stack up to 4 times the size asked (the
    other tests start none such in this process), so the thread checks what it got."""
    import signal
    op = _conflicting_a_gemm("float32", k=1024)
    compiled = compile_operation(op)
    in0, in1, out = typed_buffers(op, np.random.default_rng(5))
    addresses = [array.ctypes.data for array in (in0, in1, out)]

    def call():
        if threads.thread_stack_bytes() >= compiled.plan.pack_a.bytes:
            os._exit(3)                     # a cached stack larger than asked: no test
        compiled.function(*addresses, 0, 1)

    pid = os.fork()
    if pid == 0:
        try:
            on_thread_with_stack(SMALL_STACK_BYTES, call)
        except BaseException:
            os._exit(4)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    assert exit_code != 3, "the thread's stack was larger than asked"
    assert exit_code != 4, "the thread could not start, or raised"
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV, status


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_nests_never_touch_memory_past_the_operands():
    """Each tensor ends right before a no-access page; a fault fails the case it hit."""
    ops = _executable_cases()[::3] + [
        TensorOperation("float32", first, main, last, exec_types=("shared",) * 2 + types[2:],
                        num_threads=2, **SEEDS)
        for first, main, last, types in SEEDS_CONFIGS.values()] + [
        _conflicting_a_gemm("float32", "zero", "none", "shared"),       # A copied in the frame
        _conflicting_a_brgemm("float32"),
        _panel_gemm("float32", "zero", "relu", "shared"),                # B copied
        _panel_gemm("float32", "zero", "none", "shared", n=128, ld_a=128)]     # A and B

    def work(note):
        results = []
        for index, op in enumerate(ops):
            note(f"op {index}: {op.prim_first_touch}/{op.prim_main}/{op.prim_last_touch}")
            rng = np.random.default_rng(index)
            in0, in1, out = (guarded(op.extent(name)) for name in ("in0", "in1", "out"))
            for array, source in zip((in0, in1, out), buffers(op, rng, pad=0)):
                array[...] = source
            start, expected = out.copy(), out.copy()
            execute_reference(op, in0, in1, expected)
            op.execute(in0, in1 if op.kind in ("binary", "contraction") else None, out)
            assert_matches(op, out, expected, in0, in1, start)
            results.append(True)
        return results

    assert run_in_child(work) == [True] * len(ops)


def test_compiled_nest_ends_in_ret_and_calls_its_kernels():
    op = TensorOperation("float32", "zero", "brgemm", "relu", exec_types=(
        "shared", "seq", "prim", "prim", "prim", "prim"), **SEEDS)
    compiled = compile_operation(op)
    lines = compiled.disassemble().splitlines()
    calls = [line for line in lines if line.split()[2:3] in (["call"], ["bl"])]
    assert len(calls) == 2          # the BRGEMM (setting C: the zero touch folded in), relu
    assert any(line.split()[-1] == "ret" for line in lines)
    assert compiled is compile_operation(op)          # cached per op


def test_code_for_the_other_isa_is_inspectable_not_runnable():
    other = "aarch64" if einjit.host_isa() == "x86_64" else "x86_64"
    op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), ("prim",) * 3,
                         (4, 4, 4), (1, 0, 4), (0, 4, 1), (1, 4, 0), isa=other)
    compiled = compile_operation(op)
    assert compiled.code and compiled.address is None
    with pytest.raises(einjit.IsaMismatchError, match=other):
        compiled.run(4096, 4096, 4096)


RANDOM_MAINS = ("gemm", "brgemm") + UNARY_OPS + BINARY_OPS + ("none",)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("main", RANDOM_MAINS)
def test_random_operations_optimized_then_executed(main, threads, dtype, every_share_threaded):
    """Random operations (2..7 dims of every type mix, sizes 1..40, strides with gaps, each op
    as main and as touches) with all exec types undefined: einjit.optimize places them, the
    nest runs them, and the result is the reference executor's on the unoptimized op."""
    rng = np.random.default_rng(RANDOM_MAINS.index(main) * 10 + threads)
    for case in range(4 if IN_LANE else 12):
        first = "none" if case % 3 == 0 else UNARY_OPS[int(rng.integers(len(UNARY_OPS)))]
        last = "none" if case % 4 == 1 else UNARY_OPS[int(rng.integers(len(UNARY_OPS)))]
        if main == "none" and first == last == "none":
            first = "zero"
        plain = random_operation(rng, "gemm" if main == "brgemm" else main, first, last,
                                 max_elements=3000 if IN_LANE else 20000).replace(dtype=dtype)
        op = einjit.optimize(plain.replace(num_threads=threads), num_threads=threads)
        in0, in1, out = typed_buffers(plain, rng)
        start, expected = out.copy(), out.copy()
        execute_reference(plain, in0, in1, expected)
        op.execute(in0, in1 if op.kind in ("binary", "contraction") else None, out)
        assert_matches(op, out, expected, in0, in1, start)
