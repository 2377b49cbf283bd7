"""Cache blocking of large contractions (einjit.passes.block): which contractions are large,
their cache blocks on known cores (expected values derived from the Microarch facts), and the
loop order and sharing einjit.optimize gives them."""

import dataclasses
import math

import numpy as np
import pytest

import einjit
from einjit.backends import LINE_BYTES, x86_64
from einjit.backends.aarch64.target import NEON
from einjit.backends.x86_64 import cpu
from einjit.ir import TensorOperation
from einjit.passes import block, identify, reorder, shared, split
from einjit.passes.shared import slabs_of_out

TARGETS = {name: dataclasses.replace(x86_64.VARIANTS["avx512"], micro=cpu.MICROARCHS[name])
           for name in ("zen3", "zen4", "zen5")}
TARGETS["neon"] = NEON
ITEMSIZE = {"float32": 4, "float64": 8}
THREADS = (1, 2, 3, 16)
SMALL_ORDER = {"c": 0, "m": 0, "n": 1, "k": 2}     # a small contraction's loops, outermost first


def gemm(m, n, k, dtype="float32", target="zen4", num_threads=None):
    """out[m, n] = sum_k in0[m, k] in1[k, n], every operand column-major."""
    return TensorOperation(dtype, "none", "gemm", "none", ("m", "n", "k"), None, (m, n, k),
                           (1, 0, m), (0, k, 1), (1, m, 0), isa=TARGETS[target],
                           num_threads=num_threads)


def largest_small_k(m, n, dtype, micro):
    """The longest K whose block row of A (up to split's 128 rows of m; n plays no part)
    fits its budget: a quarter of L2 for a whole m block of rows, all of L2 for fewer."""
    rows = min(m, block.DEFAULT_MAX_SIZE["m"])
    budget = micro.l2_bytes // 4 if rows == block.DEFAULT_MAX_SIZE["m"] else micro.l2_bytes
    return budget // (rows * ITEMSIZE[dtype])


def panel_budget_bytes(micro, dtype, m):
    """The most bytes of B's kc x nc panel for a column-major A of m rows: a quarter of L2;
    where A's columns lie a multiple of the conflict pitch apart, up to half of it while a
    quarter holds fewer than PANEL_LEAST_COLUMNS columns."""
    column_bytes = block.panel_k(micro) * ITEMSIZE[dtype]
    quarter = micro.l2_bytes // 4
    if m * ITEMSIZE[dtype] % micro.conflict_pitch_bytes:
        return quarter
    return max(quarter, min(block.PANEL_LEAST_COLUMNS * column_bytes, micro.l2_bytes // 2))


def loops(op):
    """(type, exec type) of the op's loops, outermost first, and the types of its prim dims."""
    outer = [(d.type, d.exec_type) for d in op.dims if d.exec_type != "prim"]
    return outer, [d.type for d in op.dims if d.exec_type == "prim"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m, n", [(1600, 1600), (130, 70), (40, 24), (1031, 5)])
def test_large_just_past_its_budget_of_l2(target, dtype, m, n):
    k = largest_small_k(m, n, dtype, TARGETS[target].micro)
    assert k >= block.k_chunk(TARGETS[target].micro)
    assert not block.is_large(gemm(m, n, k, dtype, target))
    assert block.is_large(gemm(m, n, k + 1, dtype, target))


def short_k_calls(k_inner, k_outer, dtype="float32", target="zen4", m=1600, n=1600):
    """A GEMM whose K is a k dim of k_inner contiguous in in1 and an outer one that does not
    continue it there (in1 holds the n columns between them): kernel calls of k_inner."""
    return TensorOperation(dtype, "none", "gemm", "none", ("m", "n", "k", "k"), None,
                           (m, n, k_inner, k_outer), (1, 0, m, m * k_inner),
                           (0, k_inner, 1, k_inner * n), (1, m, 0, 0), isa=TARGETS[target])


def test_kernel_k_is_the_k_contiguous_in_both_inputs():
    assert block.kernel_k(gemm(64, 64, 1600)) == 1600
    assert block.kernel_k(short_k_calls(16, 32)) == 16
    cut = split(gemm(64, 64, 1600), max_size={"m": 64, "n": 64, "k": 100})
    assert len([d for d in cut.dims if d.type == "k"]) == 2 and block.kernel_k(cut) == 1600


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernel_calls_shorter_than_a_k_chunk_keep_m_outermost_within_l2(target, dtype):
    """Their blocked loops would re-read C every few k steps: the block row may fill L2."""
    micro = TARGETS[target].micro
    inner = 16
    assert inner < block.k_chunk(micro)
    fits = micro.l2_bytes // (128 * ITEMSIZE[dtype] * inner)
    assert 128 * inner * fits * ITEMSIZE[dtype] > micro.l2_bytes // 4
    assert not block.is_large(short_k_calls(inner, fits, dtype, target))
    assert block.is_large(short_k_calls(inner, fits + 1, dtype, target))


def test_the_threshold_on_zen4():
    # a 128-row block of in0 over K within a quarter of 1 MiB = 262144 bytes: K <= 512 in
    # float32 (x 4 bytes), K <= 256 in float64 (x 8)
    assert not block.is_large(gemm(1600, 1600, 512))
    assert block.is_large(gemm(1600, 1600, 513))
    assert not block.is_large(gemm(1600, 1600, 256, "float64"))
    assert block.is_large(gemm(1600, 1600, 257, "float64"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_on_a_far_last_level_cache_a_b_beyond_l2_makes_it_large(dtype):
    """Where the last-level cache lies across a mesh, the m-outermost walk's B (read once per
    block row of A) must fit in L2: with a block row well within its budget, B just past L2
    is large, unless C outgrows the last-level cache; on the same caches near their L2 it is
    not."""
    far = cpu.MICROARCHS["sapphirerapids"]
    assert far.far_llc
    near = dataclasses.replace(far, far_llc=False)
    k = largest_small_k(1600, 1600, dtype, far) // 2
    assert k >= block.k_chunk(far)
    fits = far.l2_bytes // (k * ITEMSIZE[dtype])
    c_rows = far.llc_bytes // ((fits + 1) * ITEMSIZE[dtype])
    for m, n, large in ((1600, fits, False), (1600, fits + 1, True), (c_rows, fits + 1, True),
                        (c_rows + 1, fits + 1, False)):
        op = gemm(m, n, k, dtype)
        assert block.is_large(op.replace(isa=dataclasses.replace(op.target, micro=far))) == \
            large, (m, n, k)
        assert not block.is_large(op.replace(isa=dataclasses.replace(op.target, micro=near)))


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_product_large_by_its_b_alone_computes_numpys_product(dtype):
    """On the host's code with a far last-level cache and an L2 of 128 Ki elements: K = 256
    keeps the block row of A within a quarter of L2, 513 columns put B just past L2; blocked,
    the product is numpy's on integers (exact sums) with remainders in m and n."""
    host = einjit.resolve_target()
    micro = dataclasses.replace(host.micro, far_llc=True, l2_bytes=ITEMSIZE[dtype] << 17)
    m, n, k = 300, 513, 256
    op = TensorOperation(dtype, "zero", "gemm", "none", ("m", "n", "k"), None, (m, n, k),
                         (1, 0, m), (0, k, 1), (1, m, 0),
                         isa=dataclasses.replace(host, micro=micro), num_threads=1)
    assert block.is_large(op)
    assert not block.is_large(op.replace(isa=dataclasses.replace(
        host, micro=dataclasses.replace(micro, far_llc=False))))
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (k, m)).astype(dtype)      # in0: m contiguous, k columns
    b = rng.integers(-3, 4, (n, k)).astype(dtype)      # in1: k contiguous, n columns
    out = np.full((n, m), np.nan, dtype)
    einjit.optimize(op, num_threads=1).execute(a, b, out)
    np.testing.assert_array_equal(out, b.astype(np.float64) @ a.astype(np.float64))


def test_k_chunks_fill_a_third_of_l1_where_zmm_fmas_run_at_full_width():
    """kc: two lines of each column fill half of L1 on the AMD cores (as before
    k_chunk_l1_parts was a field), a third on Intel's server cores; B's panel keeps the
    half-L1 chunk's width, so a 1920^3 product on Sapphire Rapids gets k chunks of 128 and
    the panels it had."""
    for name in ("zen3", "zen4", "zen5", "generic"):
        micro = cpu.MICROARCHS[name]
        assert block.k_chunk(micro) == block.panel_k(micro) == micro.l1_bytes // 256, name
    for name in ("skylake-sp", "icelake-sp", "sapphirerapids"):
        micro = cpu.MICROARCHS[name]
        assert block.k_chunk(micro) == micro.l1_bytes // 3 // 128, name
        assert block.panel_k(micro) == micro.l1_bytes // 256, name
    spr = dataclasses.replace(x86_64.VARIANTS["avx512"], micro=cpu.MICROARCHS["sapphirerapids"])
    half = dataclasses.replace(spr, micro=dataclasses.replace(spr.micro, k_chunk_l1_parts=2))
    sizes = {}
    for target in (spr, half):
        op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), None,
                             (1920,) * 3, (1, 0, 1920), (0, 1920, 1), (1, 1920, 0), isa=target,
                             num_threads=1)
        assert block.is_large(op)
        sizes[target.micro.k_chunk_l1_parts] = block.max_sizes(op)
    assert sizes[3]["k"] == 128 and sizes[2]["k"] == 192
    assert sizes[3]["n"] == sizes[2]["n"]


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_product_in_a_third_of_l1_chunks_computes_numpys_product(dtype):
    """On the host's code with k chunks a third of L1 (and an L2 of 128 Ki elements, so that
    K = 1000 is large): the plan's chunks are shorter than at half of L1 and do not divide
    K, and the product is numpy's on integers, with remainders in m and n."""
    host = einjit.resolve_target()
    micro = dataclasses.replace(host.micro, l2_bytes=ITEMSIZE[dtype] << 17)
    m, n, k = 300, 517, 1000
    ops = {parts: TensorOperation(dtype, "zero", "gemm", "none", ("m", "n", "k"), None,
                                  (m, n, k), (1, 0, m), (0, k, 1), (1, m, 0),
                                  isa=dataclasses.replace(host, micro=dataclasses.replace(
                                      micro, k_chunk_l1_parts=parts)), num_threads=1)
           for parts in (3, 2)}
    assert all(block.is_large(op) for op in ops.values())
    third, half = (block.max_sizes(op)["k"] for op in ops.values())
    assert third < half and k % third
    rng = np.random.default_rng(6)
    a = rng.integers(-3, 4, (k, m)).astype(dtype)      # in0: m contiguous, k columns
    b = rng.integers(-3, 4, (n, k)).astype(dtype)      # in1: k contiguous, n columns
    out = np.full((n, m), np.nan, dtype)
    einjit.optimize(ops[3], num_threads=1).execute(a, b, out)
    np.testing.assert_array_equal(out, b.astype(np.float64) @ a.astype(np.float64))


@pytest.mark.parametrize("target", TARGETS)
def test_float64_is_large_at_half_the_k(target):
    micro = TARGETS[target].micro
    k32 = largest_small_k(1600, 1600, "float32", micro)
    assert k32 % 2 == 0 and largest_small_k(1600, 1600, "float64", micro) == k32 // 2
    assert block.is_large(gemm(1600, 1600, k32 // 2 + 1, "float64", target))
    assert not block.is_large(gemm(1600, 1600, k32 // 2 + 1, "float32", target))


def test_element_wise_ops_are_never_large():
    n = 1 << 14
    add = TensorOperation("float64", "none", "add", "none", ("m", "n"), None, (n, n), (1, n),
                          (1, n), (1, n), isa=TARGETS["zen3"])
    copy = TensorOperation("float64", "none", "identity", "none", ("c", "c"), None, (n, n),
                           (1, n), (0, 0), (n, 1), isa=TARGETS["zen3"])
    for op in (add, copy):
        assert op.kind != "contraction" and not block.is_large(op)


@pytest.mark.parametrize("target", TARGETS)
def test_a_small_contraction_keeps_splits_defaults(target):
    op = gemm(1600, 1600, 200, "float32", target, num_threads=16)
    assert not block.is_large(op)
    assert block.max_sizes(op) == {"m": 128, "n": 64, "k": 512, "c": None}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("n", [130, 777, 1600, 3840, 10000])
def test_cache_blocks(target, dtype, threads, n):
    micro = TARGETS[target].micro
    itemsize = ITEMSIZE[dtype]
    op = gemm(1600, n, 4096, dtype, target, num_threads=threads)
    assert block.is_large(op)
    sizes = block.max_sizes(op)
    # kc: two lines of each of kc columns fill half of L1
    kc = sizes["k"]
    assert kc * 4 * LINE_BYTES == micro.l1_bytes
    assert sizes["m"] == block.DEFAULT_MAX_SIZE["m"] and sizes["c"] is None
    nc = sizes["n"]
    assert nc >= block.DEFAULT_MAX_SIZE["n"]
    budget = panel_budget_bytes(micro, dtype, 1600)
    tiles = block.thread_tiles(op)
    if tiles is not None:
        # tiles of C for several threads: whole panels of a divisor of n that fit the panel's
        # budget of L2, times groups of m blocks, that keep the threads busy
        assert threads > 1 and tiles[0] == nc and n % nc == 0
        assert nc * kc * itemsize <= budget
        tasks = n // nc * tiles[1]
        assert tasks / (threads * -(-tasks // threads)) >= block.MIN_BALANCE
        return
    if nc == block.DEFAULT_MAX_SIZE["n"]:
        # the floor: each thread's share of n in panels that fit the budget is narrower
        panels = threads * -(-n * kc * itemsize // (budget * threads))
        assert n // panels <= nc
        return
    panels = n // nc
    # whole panels for every thread; each fits the budget
    assert panels % threads == 0
    assert nc * kc * itemsize <= budget
    # as few panels as that allows: one fewer round of panels for the threads would not fit
    if panels > threads:
        assert -(-n // (panels - threads)) * kc * itemsize > budget


@pytest.mark.parametrize("target, dtype, threads, expected", [
    # Zen 3: kc = 32 KiB / (4 x 64) = 128; B's panel in a quarter of its 512 KiB L2: 128 KiB
    # / (128 x 4 bytes) = 256 columns: 1600 in 7 panels of 228 (8 for 2 threads: 200)
    ("zen3", "float32", 1, {"k": 128, "n": 228}),
    ("zen3", "float32", 2, {"k": 128, "n": 200}),
    # Zen 4: 1 MiB L2: 512 float32 columns of 128 -> 4 panels of 400; float64's quarter holds
    # 256 columns, but 1600 rows lie a conflict pitch apart (12800 bytes: 25 x 512): up to half
    # of L2, 512 columns -> 4 panels of 400 too; 16 threads: 16 panels of 100 either way
    ("zen4", "float32", 2, {"k": 128, "n": 400}),
    ("zen4", "float64", 1, {"k": 128, "n": 400}),
    ("zen4", "float64", 16, {"k": 128, "n": 100}),
    # Zen 5: 48 KiB L1 -> kc = 192; 256 KiB / (192 x 4) = 341 columns -> 5 panels of 320
    ("zen5", "float32", 1, {"k": 192, "n": 320}),
    # the NEON target's generic core: Zen 4's caches; 3 threads: no count of whole panels
    # (a divisor of 1600 within 512 columns) shares evenly, so tiles of 5 panels of 320 by
    # groups of the m blocks (thread_tiles)
    ("neon", "float32", 3, {"k": 128, "n": 320}),
])
def test_cache_blocks_of_1600(target, dtype, threads, expected):
    sizes = block.max_sizes(gemm(1600, 1600, 1600, dtype, target, num_threads=threads))
    assert (sizes["k"], sizes["n"]) == (expected["k"], expected["n"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", [1024, 1536, 2048, 1600, 1000])
def test_a_copied_a_widens_the_panel(target, dtype, m):
    """Where A's columns lie a multiple of the conflict pitch apart (the nest copies A's
    block for every call), B's panel may fill up to half of L2 while a quarter of it holds
    fewer than PANEL_LEAST_COLUMNS; elsewhere a quarter."""
    micro = TARGETS[target].micro
    itemsize = ITEMSIZE[dtype]
    column_bytes = block.panel_k(micro) * itemsize
    quarter, half = micro.l2_bytes // 4 // column_bytes, micro.l2_bytes // 2 // column_bytes
    copied = m * itemsize % micro.conflict_pitch_bytes == 0
    bound = max(quarter, min(block.PANEL_LEAST_COLUMNS, half)) if copied else quarter
    nc = block.max_sizes(gemm(m, 8192, 4096, dtype, target, num_threads=1))["n"]
    # the fewest panels within the bound: one fewer would make them wider than it
    panels = 8192 // nc
    assert nc <= bound and (panels == 1 or -(-8192 // (panels - 1)) > bound)


@pytest.mark.parametrize("target, dtype, m, expected", [
    # Zen 4: kc 128, 1 MiB L2: float64's quarter holds 256 columns; at a conflict pitch (1024
    # rows: 8 KiB) up to half, 512; float32's quarter already holds 512
    ("zen4", "float64", 1024, 512), ("zen4", "float64", 1000, 256),
    ("zen4", "float32", 1024, 512),
    # Zen 3: 512 KiB L2: float32 256 columns -> 512 (half), float64 128 -> 256
    ("zen3", "float32", 2048, 512), ("zen3", "float64", 2048, 256), ("zen3", "float32", 2000, 256),
])
def test_panel_widths_at_a_conflict_pitch(target, dtype, m, expected):
    assert block.max_sizes(gemm(m, 8192, 4096, dtype, target, num_threads=1))["n"] == expected


def test_a_panel_is_never_narrower_than_splits_default():
    # 130 columns over 16 threads would be 8 columns a panel
    assert block.max_sizes(gemm(1600, 130, 4096, num_threads=16))["n"] == 64


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", THREADS)
def test_a_large_contraction_runs_n_then_k_then_m(target, dtype, threads):
    op = gemm(1600, 1600, 1600, dtype, target, num_threads=threads)
    new = einjit.optimize(op, num_threads=threads)
    outer, prims = loops(new)
    # one loop of each, n panels outermost (shared by several threads), k chunks, m blocks
    assert [t for t, _ in outer] == ["n", "k", "m"]
    assert outer == [("n", "shared" if threads > 1 else "seq"), ("k", "seq"), ("m", "seq")]
    assert sorted(prims) == ["k", "m", "n"]
    sizes = block.max_sizes(op)
    (main,) = new.kernel_calls
    assert main.n <= sizes["n"] and main.k <= sizes["k"] and main.m <= sizes["m"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("threads", THREADS)
def test_a_batched_large_contraction_runs_c_then_n_k_m(target, threads):
    c, n = 4, 1600
    op = TensorOperation("float32", "none", "gemm", "none", ("c", "m", "n", "k"), None,
                         (c, n, n, n), (n * n, 1, 0, n), (n * n, 0, n, 1), (n * n, 1, n, 0),
                         isa=TARGETS[target], num_threads=threads)
    assert block.is_large(op)
    outer, _ = loops(einjit.optimize(op, num_threads=threads))
    assert [t for t, _ in outer] == ["c", "n", "k", "m"]
    assert all(e == "seq" for t, e in outer if t in "km")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("m, n, k", [(1600, 1600, 200), (256, 256, 200), (2048, 1024, 128)])
def test_a_small_contraction_keeps_m_outermost_and_k_innermost(target, threads, m, n, k):
    op = gemm(m, n, k, "float32", target, num_threads=threads)
    assert not block.is_large(op)
    new = einjit.optimize(op, num_threads=threads)
    outer, _ = loops(new)
    assert all(e == "seq" for t, e in outer if t == "k")
    seq = [SMALL_ORDER[d.type] for d in new.dims if d.exec_type == "seq"]
    assert seq == sorted(seq)
    if threads > 1 and slabs_of_out(op):
        # in0 within half of L2: the threads take slabs of out, n blocks before m blocks
        strides = [d.stride_out for d in new.dims if d.exec_type == "shared"]
        assert strides and strides == sorted(strides, reverse=True)
        assert outer[0][0] == "n"
    else:
        groups = [SMALL_ORDER[t] for t, _ in outer]
        assert groups == sorted(groups)
        assert outer and outer[0][0] == "m"


@pytest.mark.parametrize("threads", [2, 3, 16])
@pytest.mark.parametrize("m, n, k", [(1024, 1024, 1), (1024, 1024, 32), (1000, 3000, 32)])
def test_threads_write_slabs_of_out_no_other_thread_writes(threads, m, n, k):
    # the outermost shared loop walks n blocks: a thread's share covers whole columns of out,
    # not a part of every column, where in0 sits in half of L2
    op = gemm(m, n, k, "float32", "zen4", num_threads=threads)
    assert slabs_of_out(op)
    new = einjit.optimize(op, num_threads=threads)
    shared_dims = [d for d in new.dims if d.exec_type == "shared"]
    assert shared_dims[0].type == "n"


def test_in0_beyond_half_of_l2_keeps_m_shared_first():
    # 1600 x 200 float32 rows of in0 (1.25 MB) would come back from L3 for every n block
    op = gemm(1600, 1600, 200, "float32", "zen4", num_threads=2)
    assert not block.is_large(op) and not slabs_of_out(op)
    new = einjit.optimize(op, num_threads=2)
    shared_dims = [d for d in new.dims if d.exec_type == "shared"]
    assert shared_dims[0].type == "m"


@pytest.mark.parametrize("target", TARGETS)
def test_m_blocks_the_panels_leave_whole_stay_inside_the_k_loop(target):
    # `ij,bjk->bik` of 7 x 1000 by 2 x 1000 x 257 as split blocks it: b (an m dim of out) and
    # two m blocks of 128 inside k chunks; on two threads b's two iterations share best
    # (block.m_groups of 1), the m blocks stay in their place inside k
    op = TensorOperation("float32", "zero", "gemm", "none", ("k", "m", "m", "m", "n", "k"),
                         ("seq", "seq", "seq", "prim", "prim", "prim"), (10, 2, 2, 128, 7, 100),
                         (25700, 257000, 128, 1, 0, 257), (100, 0, 0, 0, 1000, 1),
                         (0, 1799, 128, 1, 257, 0), isa=TARGETS[target], num_threads=2)
    assert block.is_large(op) and block.m_groups(op, 2, 2) == 1
    new = shared(op, 2)
    assert [(d.type, d.exec_type, d.size) for d in new.dims] == [
        ("m", "shared", 2), ("k", "seq", 10), ("m", "seq", 2), ("m", "prim", 128),
        ("n", "prim", 7), ("k", "prim", 100)]

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("n", [130, 520, 1600])
def test_threads_share_whole_n_panels_and_m_blocks_only_past_the_panels(target, threads, n):
    # the loops past the k loop are shared only where the n panels are fewer than the threads
    op = gemm(3200, n, 2048, "float32", target, num_threads=threads)
    assert block.is_large(op)
    new = einjit.optimize(op, num_threads=threads)
    assert new.num_threads == threads
    outer, _ = loops(new)
    shared_types = [t for t, e in outer if e == "shared"]
    assert "k" not in shared_types
    panels = math.prod(d.size for d in new.dims if d.type == "n" and d.exec_type != "prim")
    if "m" in shared_types and ("k", "seq") in outer:      # m moved out of the k loop
        assert panels < threads and set(shared_types) == {"n", "m"} or panels == 1
    elif "m" not in shared_types:
        assert ("m", "seq") in outer
    assert bool(shared_types) == (threads > 1)


def test_shared_stops_at_the_k_loop_of_a_large_contraction():
    op = reorder(identify(split(gemm(3200, 1600, 2048, num_threads=16))))
    outer, _ = loops(op)
    assert [t for t, _ in outer] == ["n", "k", "m"]
    # 16 threads want 64 shared iterations; the 16 n panels give fewer, but one for each
    # thread: m (beyond k) is not taken
    new = shared(op, 16)
    assert loops(new)[0] == [("n", "shared"), ("k", "seq"), ("m", "seq")]
    assert 16 <= new.dims[0].size < 64
    # 32 threads: the panels are too few, and m's blocks are shared too, moved out of k
    more = shared(op, 32)
    assert loops(more)[0] == [("n", "shared"), ("m", "shared"), ("k", "seq")]
    assert more.dims[0].size * more.dims[1].size >= 32


def test_optimizes_thread_count_sizes_the_panels(monkeypatch):
    monkeypatch.setenv("EINJIT_NUM_THREADS", "16")
    op = gemm(1600, 1600, 1600)
    assert op.num_threads is None
    # 2 threads on Zen 4: 4 panels of 400 (test_cache_blocks_of_1600), not 16 threads' 100
    new = einjit.optimize(op, num_threads=2)
    assert [(d.type, d.size) for d in new.dims[:1]] == [("n", 4)]


@pytest.mark.parametrize("m, n, k", [(1600, 1600, 1031)])
def test_without_a_k_loop_the_threads_may_share_m_blocks(m, n, k):
    """K whole in the kernel (a prime): no k loop keeps B's panel for the m blocks, so the
    threads may take them too."""
    op = gemm(m, n, k, num_threads=2)
    assert block.is_large(op)
    new = einjit.optimize(op, num_threads=2)
    assert not any(d.type == "k" and d.exec_type == "seq" for d in new.dims)
    shared = [d.type for d in new.dims if d.exec_type == "shared"]
    assert shared[0] == "n" and set(shared) == {"n", "m"}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m, k", [(2000, 1024), (2000, 333), (1600, 64), (1000, 2000)])
def test_a_matrix_times_a_vector_reads_long_runs_of_few_columns(target, dtype, m, k):
    """n = 1 within the last-level cache, A's columns at a pitch that spreads them over L1's
    sets: blocks of up to the kernel's most rows and VECTOR_MAX_SIZE's k, whatever the size,
    the large contraction's cache blocks aside."""
    op = gemm(m, 1, k, dtype, target, num_threads=1)
    sizes = block.max_sizes(op)
    assert sizes == block.VECTOR_MAX_SIZE
    prims = {d.type: d.size for d in split(op).dims if d.size > 1}
    assert prims.get("m") == max(s for s in range(1, 1025) if m % s == 0)
    assert prims.get("k", 1) <= sizes["k"] or k <= sizes["k"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m, k", [(4096, 4096), (8192, 1200), (600, 16000), (2048, 2048),
                                  (4000, 2000), (1024, 1024), (2048, 333), (512, 600),
                                  (1536, 64)])
def test_a_matrix_times_a_vector_reads_fewer_columns_from_memory_or_at_a_crowding_pitch(
        target, dtype, m, k):
    """n = 1 with the matrix in three quarters of the last-level cache or more, or with A's
    columns a multiple of 4 KiB apart (float32 1024, 2048, 4096 rows, float64 512 and up:
    VECTOR_MAX_SIZE's columns would all share one L1 set, past its ways):
    VECTOR_FROM_MEMORY_K columns a call. A pitch of 2 KiB (float32 512 rows: 8 columns a set)
    or 6 KiB (float32 1536: two sets) keeps 16 where L1 has 8 ways or more."""
    op = gemm(m, 1, k, dtype, target, num_threads=1)
    assert op.target.micro.l1_ways >= 8
    beyond = 4 * m * k * ITEMSIZE[dtype] > 3 * op.target.micro.llc_bytes
    crowded = m * ITEMSIZE[dtype] % 4096 == 0      # all of A's columns in one L1 set
    expected = (block.VECTOR_FROM_MEMORY_K if beyond or crowded
                else block.VECTOR_MAX_SIZE["k"])
    assert block.max_sizes(op) == dict(block.VECTOR_MAX_SIZE, k=expected)
    prims = {d.type: d.size for d in split(op).dims if d.exec_type != "seq" and d.size > 1}
    assert prims.get("k", 1) <= expected


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, k", [(4096, 4096), (2000, 4000), (1999, 1999), (300, 300)])
def test_a_vector_times_a_matrix_beyond_l2_reads_a_few_long_rows(target, dtype, n, k):
    """m = 1 (sums and products of rows): beyond L2, ROWS_MAX_SIZE's few rows of up to the
    kernel's longest K a call; within L2, split's defaults. (A prime n, which split keeps
    whole, is peel's to cut: tests/passes/test_pass_peel.py.)"""
    op = gemm(1, n, k, dtype, target)
    beyond = n * k * ITEMSIZE[dtype] > op.target.micro.l2_bytes
    assert block.is_rows(op) == beyond
    assert block.max_sizes(op) == (block.ROWS_MAX_SIZE if beyond else block.DEFAULT_MAX_SIZE)
    if beyond and n % block.ROWS_MAX_SIZE["n"] == 0:
        prims = {d.type: d.size for d in split(op).dims if d.exec_type != "seq"}
        assert prims["n"] <= block.ROWS_MAX_SIZE["n"]
        assert prims["k"] == max(s for s in range(1, block.ROWS_MAX_SIZE["k"] + 1)
                                 if k % s == 0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1500, 2500, 1998, 3000])
def test_a_panel_takes_the_largest_divisor_within_its_block(target, dtype, n):
    # 1500 float64 columns on Zen 4: panels of at most 250; the multiples of 4 that divide
    # 1500 stop at 100, a panel of 2.5 times the B reloads
    op = gemm(1600, n, 4096, dtype, target, num_threads=1)
    nc = block.max_sizes(op)["n"]
    panel = next(d.size for d in einjit.optimize(op, num_threads=1).dims
                 if d.type == "n" and d.exec_type == "prim")
    assert panel == max(d for d in range(1, nc + 1) if n % d == 0), (panel, nc)


@pytest.mark.parametrize("m, threads, rows", [
    (3000, 1, 1024), (3000, 2, 750), (3000, 3, 1000), (4096, 2, 1024), (4096, 4, 1024),
    (4096, 3, 1024), (1031, 2, 1024), (1000, 2, 1024), (8000, 2, 1000)])
def test_a_matrix_times_a_vector_on_threads_takes_rows_they_share_evenly(m, threads, rows):
    """n = 1: blocks of the largest divisor of m within the kernel's rows whose count the
    threads share evenly (none within a tenth of them, 4096 on 3 threads: the kernel's most;
    m within them: one block, which the threads cannot share in any case)."""
    op = gemm(m, 1, 512, num_threads=threads)
    assert block.vector_rows(op) == rows
    assert block.max_sizes(op)["m"] == rows
    if threads > 1 and m > rows and m // rows % threads == 0:
        new = einjit.optimize(op, num_threads=threads)
        assert [d.size for d in new.dims if d.type == "m" and d.exec_type == "prim"] == [rows]
        assert new.dims[0].type == "m" and new.dims[0].exec_type == "shared"
