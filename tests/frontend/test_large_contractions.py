"""Large contractions (einjit.passes.block: n panels, k chunks, m blocks) through einjit.einsum
and contract_expression against numpy: block sizes that leave partial vectors and register
blocks, operand views, a batch, a chain whose intermediate is large, one and two threads.

Sizes are kept small (a block row of A just past a quarter of a 2 MiB L2) so that the aarch64
lane runs them too.
Each case runs twice: on small integers, whose every partial sum is exact in float32, the
result equals numpy's bit for bit whatever the order of the sums; on uniform values it is
held to the dot product's forward error bound, K x eps x (|A| @ |B|) for each of einjit's
result and numpy's float64 one, so the tolerance scales with the summed length."""

import math

import numpy as np
import pytest
from frontend_support import jit_available, numpy_einsum_forbidden

import einjit
from einjit.einsum import plan_cache
from einjit.passes import block

pytestmark = [pytest.mark.native,
              pytest.mark.skipif(not jit_available(),
                                 reason="needs einjit.optimize and einjit.codegen to execute")]

DTYPES = (np.float32, np.float64)
PRIME = 1163
BLOCKED_ORDER = "cnkm"      # a large contraction's loops, outermost first


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request, monkeypatch):
    """The thread count plans are made for (EINJIT_NUM_THREADS, read when a plan is made and
    part of einsum's cache key)."""
    monkeypatch.setenv("EINJIT_NUM_THREADS", str(request.param))
    return request.param


def operands(shapes, dtype, seed, exact):
    """Uniform values in [-1, 1), or (exact) integers in [-2, 2]."""
    rng = np.random.default_rng(seed)
    if exact:
        return [rng.integers(-2, 3, size=s).astype(dtype) for s in shapes]
    return [rng.uniform(-1, 1, size=s).astype(dtype) for s in shapes]


def assert_within_bound(result, equation, arrays, summed):
    """`result` against numpy's float64 einsum, within twice the forward error bound of sums
    of `summed` terms in result's dtype (numpy's rounding and einjit's)."""
    wide = [np.asarray(a, np.float64) for a in arrays]
    expected = np.einsum(equation, *wide, optimize=True)
    magnitude = np.einsum(equation, *[np.abs(a) for a in wide], optimize=True)
    bound = 2 * summed * np.finfo(result.dtype).eps * magnitude
    assert result.shape == expected.shape and result.dtype == arrays[0].dtype
    error = np.abs(result.astype(np.float64) - expected)
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    assert np.all(error <= bound), (f"{equation}: error {error[worst]:.3g} past the bound "
                                    f"{bound[worst]:.3g} at {worst}")


def check(run, equation, shapes, dtype, summed, seed, view=lambda *arrays: arrays):
    """run(*operands) -> results (einjit's kernels only), on view(*arrays) of exact and of
    uniform operands of `shapes` (see the module doc)."""
    for exact in (True, False):
        arrays = operands(shapes, dtype, seed, exact)
        with numpy_einsum_forbidden():
            results = run(*view(*arrays))
        for result in results:
            if exact:
                expected = np.einsum(equation, *[a.astype(np.float64) for a in arrays],
                                     optimize=True)
                assert result.dtype == dtype
                np.testing.assert_array_equal(result, expected.astype(dtype))
            else:
                assert_within_bound(result, equation, arrays, summed)


def large_ops(prepared, threads):
    """The plan's large contractions, each checked for the blocked loop order: the shared
    loops first, then c, n, k, m outermost first (prim dims aside), made for `threads`, never
    a k loop shared, m only where the n panels are fewer than the threads (the threads' tiles
    of C, einjit.passes.block.thread_tiles; tests/passes/test_pass_shared.py)."""
    ops = [step.lowered.op for step in prepared.plan.steps if block.is_large(step.lowered.op)]
    for op in ops:
        loops = [d for d in op.dims if d.exec_type != "prim"]
        shown = [(d.type, d.exec_type, d.size) for d in op.dims]
        kinds = [d.exec_type for d in loops]
        assert kinds == sorted(kinds, key=lambda kind: kind != "shared"), shown
        groups = [BLOCKED_ORDER.index(d.type) for d in loops if d.exec_type != "shared"]
        assert groups == sorted(groups), shown
        assert op.num_threads == threads
        shared = {d.type for d in loops if d.exec_type == "shared"}
        assert bool(shared) == (threads > 1)
        assert "k" not in shared
        if "m" in shared:
            panels = math.prod(d.size for d in loops if d.type == "n" and d.exec_type == "shared")
            assert panels < threads, shown
    return ops


def assert_in_cache_blocks(op, k):
    """The main kernel's k within the cache block kc (a prime K: its main part's,
    einjit.passes.peel)."""
    (main,) = [call for call in op.kernel_calls if call.role == "main"]
    assert main.k <= block.max_sizes(op)["k"] < k


def last_einsum_plan():
    """The plan einjit.einsum ran last (its most recently used cache entry)."""
    return next(reversed(plan_cache()._items.values()))[0]


# (M, K, N) of M x K @ K x N: out's columns are the kernels' m (blocks of up to 128 rows, so
# 200 = 2 x 100, 130 = 2 x 65: partial vectors; 128 of them over K = 1163 or 1100 make a block
# row past a quarter of a 2 MiB L2), its rows n (520: more than one float32 panel on one thread,
# and more than one float64 panel); K in chunks (1100 = 11 x 100) or, prime, peeled: chunks of
# its main part (1152: 9 chunks of 128, or 6 of 192 on a 48 KiB L1; past the budget either
# way), then the rest (11) added; N = 128 puts the kernels' A columns a conflict pitch apart
# (512 bytes in float32, 1024 in float64): the nest copies A's blocks and float64's panels
# widen to half of L2 (einjit.passes.block)
MATMULS = [(130, 1100, 200), (70, PRIME, 130), (520, 1100, 130), (520, 1100, 128)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("m, k, n", MATMULS)
def test_matmul(m, k, n, dtype, threads):
    expr = einjit.contract_expression("ij,jk->ik", (m, k), (k, n), dtype=dtype)
    (op,) = large_ops(expr._prepared, threads)
    assert_in_cache_blocks(op, k)
    check(lambda a, b: (expr(a, b), einjit.einsum("ij,jk->ik", a, b)), "ij,jk->ik",
          [(m, k), (k, n)], dtype, k, m + k + n)
    (op,) = large_ops(last_einsum_plan(), threads)
    assert_in_cache_blocks(op, k)


def test_the_matmuls_are_large_just_past_the_budget():
    """Each case of MATMULS is large in float32 (so in float64) by its own sizes: a block row
    of A (up to 128 of out's columns) over K, or over the main part of a K peeled into whole
    cache blocks, outgrows a quarter of L2."""
    micro = einjit.resolve_target().micro
    chunk = block.k_chunk(micro)
    for m, k, n in MATMULS:
        main = k - k % chunk if k == PRIME else k
        assert main * min(n, 128) * 4 > micro.l2_bytes // 4


M, K, N = 130, 1100, 140      # both ways round, a block row of 128
VIEWS = {
    # leading dims past the rows: slices of larger arrays
    "sliced": lambda a, b: (np.pad(a, ((0, 3), (0, 5)))[:M, :K],
                            np.pad(b, ((0, 7), (0, 9)))[:K, :N]),
    "transposed": lambda a, b: (a.T.copy().T, b.T.copy().T),
    # negative strides (einjit copies such an operand first)
    "reversed": lambda a, b: (a[::-1].copy()[::-1], b[:, ::-1].copy()[:, ::-1]),
    "every other": lambda a, b: (np.repeat(a, 2, axis=1)[:, ::2],
                                 np.repeat(b, 3, axis=0)[::3]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("view", VIEWS)
def test_operand_views(view, dtype, monkeypatch):
    monkeypatch.setenv("EINJIT_NUM_THREADS", "1")
    a_view, b_view = VIEWS[view](*operands([(M, K), (K, N)], dtype, 3, False))
    assert not (a_view.flags.c_contiguous or b_view.flags.c_contiguous)
    if view == "reversed":
        assert a_view.strides[0] < 0 and b_view.strides[1] < 0
    expr = einjit.contract_expression("ij,jk->ik", (M, K), (K, N), dtype=dtype)
    check(lambda a, b: (expr(a, b), einjit.einsum("ij,jk->ik", a, b)), "ij,jk->ik",
          [(M, K), (K, N)], dtype, K, 3, VIEWS[view])
    (op,) = large_ops(last_einsum_plan(), 1)
    assert_in_cache_blocks(op, K)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_batched(dtype, threads):
    shapes = [(2, 70, 1100), (2, 1100, 130)]
    expr = einjit.contract_expression("bij,bjk->bik", *shapes, dtype=dtype)
    (op,) = large_ops(expr._prepared, threads)
    assert [d.type for d in op.dims if d.exec_type != "prim"][0] == "c"
    check(lambda a, b: (expr(a, b), einjit.einsum("bij,bjk->bik", a, b)), "bij,bjk->bik",
          shapes, dtype, 1100, 5)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("shapes", [[(7, 1000), (2, 1000, 257)], [(7, 2048), (2, 2048, 1031)]])
def test_a_matrix_times_a_batch_whose_m_blocks_stay_whole_inside_k(shapes, count, dtype,
                                                                  monkeypatch):
    """The batch b is an m dim of out (A has none); a large product whose n panels alone
    share best keeps its inner m blocks whole inside the k loop (block.m_groups of 1): that
    path of the shared pass raised TypeError on two threads once."""
    monkeypatch.setenv("EINJIT_NUM_THREADS", str(count))
    expr = einjit.contract_expression("ij,bjk->bik", *shapes, dtype=dtype)
    check(lambda a, b: (expr(a, b), einjit.einsum("ij,bjk->bik", a, b)), "ij,bjk->bik",
          shapes, dtype, shapes[0][1], 7)

@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_chain_with_a_large_intermediate(dtype, threads):
    # (A B) first: 70 x 1163 x 130 then 70 x 130 x 90 multiply-adds, against 1163 x 130 x 90
    # then 70 x 1163 x 90 for A (B C); A B sums 1163 terms
    shapes = [(70, PRIME), (PRIME, 130), (130, 90)]
    expr = einjit.contract_expression("ij,jk,kl->il", *shapes, dtype=dtype)
    steps = expr._prepared.plan.steps
    assert len({id(step.node) for step in steps}) == 2
    (op,) = large_ops(expr._prepared, threads)
    (large,) = [s for s in steps if s.lowered.op is op]
    assert large.node is not expr.tree.root
    # the prime K: a main part in cache blocks, then the rest added (einjit.passes.peel;
    # another dim may be peeled too, by the core's block sizes)
    firsts = [s.lowered.op.prim_first_touch for s in steps if s.node is large.node]
    assert firsts[0] == "zero" and firsts.count("zero") == firsts.count("none") >= 1
    assert_in_cache_blocks(op, PRIME)
    # every term of the result went through a sum of 1163 and one of 130
    check(lambda a, b, c: (expr(a, b, c), einjit.einsum("ij,jk,kl->il", a, b, c)),
          "ij,jk,kl->il", shapes, dtype, PRIME + 130, 7)


@pytest.mark.native
def test_einsum_makes_new_plans_when_the_thread_count_changes(monkeypatch):
    a, b = operands([(64, 777), (777, 130)], "float32", 9, exact=True)
    for count in (1, 2, 1):
        monkeypatch.setenv("EINJIT_NUM_THREADS", str(count))
        np.testing.assert_array_equal(einjit.einsum("ij,jk->ik", a, b), a @ b)
        ops = [step.lowered.op for step in last_einsum_plan().plan.steps]
        assert {op.num_threads for op in ops} == {count}


# (M, K, N, the specials: (row, column) of A's NaN and infinity, of B's -infinity and NaN)
SPECIALS = {
    # a blocked product: B's panel copied, K in chunks
    "blocked": (*MATMULS[0], ((3, 17), (40, 600)), ((900, 5), (1099, 150))),
    # peeled (K = 1163 and N = 257 prime): the specials in the remainders of K, M and N
    "peeled": (67, PRIME, 257, ((3, PRIME - 4), (66, 12)), ((PRIME - 1, 256), (5, 255))),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("case", SPECIALS)
def test_special_values_as_numpy(case, dtype, threads):
    """NaN and infinities in the operands of a blocked or a peeled product reach the elements
    numpy's reach: NaN where numpy's result is NaN, the same infinity where it is infinite,
    the rest as in test_matmul."""
    m, k, n, (nan_a, inf_a), (inf_b, nan_b) = SPECIALS[case]
    a, b = operands([(m, k), (k, n)], dtype, 11, exact=True)
    a[nan_a], a[inf_a] = np.nan, np.inf
    b[inf_b], b[nan_b] = -np.inf, np.nan
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    if case == "blocked":
        (op,) = large_ops(expr._prepared, threads)
    else:
        assert sum(s.part.startswith("part ") for s in expr._prepared.plan.steps) > 1
    with np.errstate(invalid="ignore"):
        expected = a.astype(np.float64) @ b.astype(np.float64)
        got = expr(a, b)
    assert got.dtype == dtype
    special = ~np.isfinite(expected)
    assert special.any() and np.isnan(expected).any() and np.isinf(expected).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[np.isinf(expected)], expected[np.isinf(expected)])
    np.testing.assert_array_equal(got[~special], expected[~special].astype(dtype))


# dims with no divisor near their blocks, primes and twice a prime: each such kernel dim is
# peeled into a main part and the rest (einjit.passes.peel); (equation, shapes, terms summed)
PEELED = [
    ("ij,jk->ik", [(67, PRIME), (PRIME, 257)], PRIME),          # K and M (257 > 128) prime
    ("ij,jk->ik", [(2 * 521, 64), (64, 131)], 64),                # N twice a prime
    ("bij,bjk->bik", [(2, 131, PRIME), (2, PRIME, 67)], PRIME),
    ("ij->i", [(67, 4099)], 4099),                                # a sum against ones
    ("ij,j->i", [(131, 4099), (4099,)], 4099),
    ("ij->i", [(1031, 1999)], 1999),                              # rows beyond L2, K odd
    ("ij,j->i", [(257, 4099), (4099,)], 4099),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("equation, shapes, summed", PEELED)
def test_peeled_dims(equation, shapes, summed, dtype, threads):
    expr = einjit.contract_expression(equation, *shapes, dtype=dtype)
    parts = [step.part for step in expr._prepared.plan.steps]
    assert sum(part.startswith("part ") for part in parts) > 1, parts
    check(lambda *arrays: (expr(*arrays), einjit.einsum(equation, *arrays)), equation, shapes,
          dtype, summed, summed + len(shapes))
