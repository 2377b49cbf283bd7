"""einjit.dask on the threaded (and, for register(), the processes) scheduler: results against
numpy.einsum on chunked operands whose chunks split free and contracted indices, with uneven
last chunks; numpy's keywords; the bad inputs; dask.array.einsum through register()."""

import subprocess
import sys
import threading

import numpy as np
import pytest

pytest.importorskip("dask.array", reason="this interpreter has no dask (the aarch64 lane's "
                                         "python): einjit.dask is tested on the host")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
from dask.array.dispatch import einsum_lookup  # noqa: E402

import einjit.dask as ed  # noqa: E402
from einjit.einsum import plan_cache  # noqa: E402

# equation, operand shapes, operand chunks: every case splits some index into uneven chunks
CASES = [
    ("ij,jk->ik", [(37, 50), (50, 23)], [(16, 20), (20, 9)]),       # matmul, j split
    ("ij,jk", [(37, 50), (50, 23)], [(16, 20), (20, 9)]),           # implicit output
    ("bij,bjk->bik", [(5, 12, 30), (5, 30, 7)], [(2, 5, 8), (2, 8, 3)]),   # batched
    ("ij,jk,kl->il", [(20, 30), (30, 25), (25, 10)], [(7, 11), (11, 9), (9, 4)]),
    ("ii", [(30, 30)], [(8, 8)]),                                    # trace
    ("ii->i", [(30, 30)], [(8, 8)]),                                 # diagonal
    ("iij->j", [(12, 12, 9)], [(5, 5, 4)]),                          # diagonal, then summed
    ("i,j->ij", [(17,), (13,)], [(5,), (4,)]),                       # outer
    ("ij->", [(30, 20)], [(7, 6)]),                                  # everything summed
    ("ij->ji", [(30, 20)], [(7, 6)]),                                # a transpose (a view)
    ("...ij,...jk->...ik", [(3, 4, 10, 12), (4, 12, 6)], [(2, 3, 4, 5), (3, 5, 4)]),
    ("...ij,...jk->...ik", [(3, 1, 10, 12), (4, 12, 6)], [(2, 1, 4, 5), (3, 5, 4)]),  # size 1
    ("abc,cd->abd", [(6, 9, 40), (40, 5)], [(4, 5, 9), (9, 5)]),    # c split in 5 chunks
]
TOLERANCE = {np.float32: 2e-6, np.float64: 1e-14}


def operands(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def assert_close(result, reference, dtype):
    """Within a few roundings of the largest element: the block partial sums add in another
    order than numpy's loop."""
    reference = np.asarray(reference)
    scale = max(float(np.abs(reference).max(initial=0.0)), 1.0)
    assert np.asarray(result).shape == reference.shape
    np.testing.assert_allclose(result, reference, rtol=0, atol=50 * TOLERANCE[dtype] * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("equation, shapes, chunks", CASES, ids=[c[0] + str(i) for i, c in
                                                                 enumerate(CASES)])
def test_against_numpy_threaded(equation, shapes, chunks, dtype):
    arrays = operands(shapes, dtype)
    lazy = ed.einsum(equation, *[da.from_array(a, chunks=c) for a, c in zip(arrays, chunks)])
    reference = np.einsum(equation, *arrays)
    assert isinstance(lazy, da.Array)
    assert lazy.dtype == reference.dtype and lazy.shape == reference.shape
    result = lazy.compute(scheduler="threads")
    assert result.dtype == reference.dtype
    assert_close(result, reference, dtype)


def test_result_keeps_the_operands_chunks_of_free_indices():
    a, b = operands([(37, 50), (50, 23)], np.float32)
    lazy = ed.einsum("ij,jk->ik", da.from_array(a, chunks=(16, 20)),
                     da.from_array(b, chunks=(20, 9)))
    assert lazy.chunks == ((16, 16, 5), (9, 9, 5))


def test_partial_sums_add_in_a_tree():
    """j in 8 chunks with split_every=2: adding layers in the graph, and the same sums."""
    a, b = operands([(16, 64), (64, 8)], np.float64)
    A, B = da.from_array(a, chunks=(16, 8)), da.from_array(b, chunks=(8, 8))
    flat = ed.einsum("ij,jk->ik", A, B, split_every=8)
    tree = ed.einsum("ij,jk->ik", A, B, split_every=2)
    assert len(tree.__dask_graph__()) > len(flat.__dask_graph__())
    assert_close(tree.compute(scheduler="threads"), a @ b, np.float64)
    assert_close(flat.compute(scheduler="threads"), a @ b, np.float64)


def test_numpy_operands_mixed_in_and_sublists():
    a, b = operands([(20, 30), (30, 10)], np.float64)
    A = da.from_array(a, chunks=(6, 7))
    assert_close(ed.einsum("ij,jk->ik", A, b).compute(scheduler="threads"), a @ b, np.float64)
    assert_close(ed.einsum(A, [0, 1], b, [1, 2], [0, 2]).compute(scheduler="threads"), a @ b,
                 np.float64)


def test_a_scalar_operand_and_zero_size_operands():
    a = operands([(5, 6)], np.float64)[0]
    A = da.from_array(a, chunks=2)
    assert_close(ed.einsum("ij,->ij", A, 3.0).compute(scheduler="threads"), 3.0 * a, np.float64)
    empty = ed.einsum("ij,jk->ik", da.zeros((0, 4), chunks=2), da.ones((4, 3), chunks=2))
    assert empty.compute(scheduler="threads").shape == (0, 3)
    assert_close(ed.einsum(A, [Ellipsis, 0], [Ellipsis]).compute(scheduler="threads"),
                 a.sum(axis=1), np.float64)


def test_numpy_keywords_reach_each_block():
    a, b = operands([(20, 30), (30, 10)], np.float32)
    A, B = da.from_array(a, chunks=(6, 7)), da.from_array(b, chunks=(7, 4))
    wide = ed.einsum("ij,jk->ik", A, B, dtype=np.float64)
    assert wide.dtype == np.float64
    result = wide.compute(scheduler="threads")
    assert result.dtype == np.float64
    assert_close(result, np.einsum("ij,jk->ik", a, b, dtype=np.float64), np.float64)
    c = operands([(10, 5)], np.float32, seed=3)[0]
    greedy = ed.einsum("ij,jk,kl->il", A, B, da.from_array(c, chunks=4), optimize="greedy")
    assert_close(greedy.compute(scheduler="threads"), a @ b @ c, np.float32)
    fortran = ed.einsum("ij,jk->ik", A, B, order="F").compute(scheduler="threads")
    assert_close(fortran, a @ b, np.float32)


def test_casting_is_checked_when_the_graph_is_built():
    a, b = operands([(20, 30), (30, 10)], np.float64)
    A, B = da.from_array(a, chunks=7), da.from_array(b, chunks=7)
    with pytest.raises(TypeError, match="cannot be cast|could not be cast"):
        ed.einsum("ij,jk->ik", A, B, dtype=np.float32, casting="safe")


def test_a_bad_path_is_refused_when_the_graph_is_built():
    A = da.ones((10, 10), chunks=4)
    with pytest.raises(ValueError, match="'bogus' is not a path name"):
        ed.einsum("ij,jk->ik", A, A, optimize="bogus")
    with pytest.raises(ValueError, match="path step"):
        ed.einsum("ij,jk->ik", A, A, optimize=[(0, 1), (0, 1)])


def test_integers_go_to_numpy_per_block_exactly():
    rng = np.random.default_rng(5)
    a, b = rng.integers(-9, 9, (20, 30)), rng.integers(-9, 9, (30, 10))
    result = ed.einsum("ij,jk->ik", da.from_array(a, chunks=7), da.from_array(b, chunks=7))
    assert result.dtype == a.dtype
    np.testing.assert_array_equal(result.compute(scheduler="threads"), a @ b)


def test_out_is_refused():
    A = da.ones((4, 4), chunks=2)
    with pytest.raises(TypeError, match="out= has no meaning for dask arrays"):
        ed.einsum("ij,jk->ik", A, A, out=np.empty((4, 4)))


def test_disagreeing_chunks_are_rechunked_to_common_ones():
    a, b = operands([(37, 50), (50, 23)], np.float64)
    A = da.from_array(a, chunks=(16, (20, 20, 10)))
    B = da.from_array(b, chunks=((25, 25), 9))
    assert_close(ed.einsum("ij,jk->ik", A, B).compute(scheduler="threads"), a @ b, np.float64)
    # a diagonal over two axes chunked differently (dask.array.einsum refuses this one)
    square = da.from_array(a[:, :37], chunks=(16, 9))
    assert_close(ed.einsum("ii->i", square).compute(scheduler="threads"),
                 np.diagonal(a[:, :37]), np.float64)


def test_unknown_chunk_sizes_name_the_operand():
    x = da.from_array(np.arange(10.0), chunks=5)
    unknown = x[x > 3]
    with pytest.raises(ValueError, match=r"operand 1 has unknown chunk sizes along axis 0"):
        ed.einsum("i,i->", x, unknown)


def test_mismatched_sizes_name_the_subscript():
    with pytest.raises(ValueError, match="'j'"):
        ed.einsum("ij,jk->ik", da.ones((4, 5), chunks=2), da.ones((6, 3), chunks=2))


def test_a_failing_block_fails_the_whole_compute(monkeypatch):
    """One block task raises: compute raises that error and returns nothing."""
    real = ed._einjit_einsum
    calls, lock = [], threading.Lock()

    def failing_third(*args, **kwargs):
        with lock:
            calls.append(1)
            third = len(calls) == 3
        if third:
            raise RuntimeError("block 3 failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(ed, "_einjit_einsum", failing_third)
    a, b = operands([(37, 50), (50, 23)], np.float64)
    lazy = ed.einsum("ij,jk->ik", da.from_array(a, chunks=(16, 20)),
                     da.from_array(b, chunks=(20, 9)))
    result = None
    with pytest.raises(RuntimeError, match="block 3 failed"):
        result = lazy.compute(scheduler="threads")
    assert result is None and len(calls) >= 3


def test_importing_einjit_imports_no_dask():
    done = subprocess.run([sys.executable, "-c", "import sys, einjit; "
                           "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dask'))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_dask_the_import_error_says_what_to_install():
    done = subprocess.run([sys.executable, "-c", "import sys; sys.modules['dask'] = None; "
                           "import einjit.dask"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "ImportError" in done.stderr and 'pip install "einjit[dask]"' in done.stderr


@pytest.fixture
def registered():
    ed.register()
    try:
        yield
    finally:
        ed.unregister()


def test_register_makes_dask_einsum_use_einjit(registered):
    assert ed.registered()
    assert einsum_lookup.dispatch(np.ndarray) is ed._numpy_blocks_einsum
    a, b, c = operands([(20, 30), (30, 25), (25, 10)], np.float32)
    dask_operands = [da.from_array(x, chunks=c) for x, c in
                     zip((a, b, c), [(7, 10), (10, 9), (9, 4)])]
    before = plan_cache().hits + plan_cache().misses
    result = da.einsum("ij,jk,kl->il", *dask_operands).compute(scheduler="threads")
    assert plan_cache().hits + plan_cache().misses > before    # einjit.einsum ran the blocks
    assert_close(result, np.einsum("ij,jk,kl->il", a, b, c), np.float32)
    trace = da.einsum("ii", da.from_array(b[:25], chunks=6)).compute(scheduler="threads")
    assert_close(trace, np.trace(b[:25]), np.float32)


def test_unregister_restores_numpy():
    ed.register()
    ed.register()             # twice: one unregister still restores numpy
    ed.unregister()
    assert not ed.registered()
    assert einsum_lookup.dispatch(np.ndarray) is np.einsum
    assert dask.config.get("multiprocessing.initializer", None) is None
    a, b = operands([(20, 30), (30, 10)], np.float64)
    before = plan_cache().hits + plan_cache().misses
    result = da.einsum("ij,jk->ik", da.from_array(a, chunks=7), da.from_array(b, chunks=7))
    assert_close(result.compute(scheduler="threads"), a @ b, np.float64)
    assert plan_cache().hits + plan_cache().misses == before


@pytest.mark.slow
def test_processes_scheduler_both_paths(registered):
    """Worker processes register through dask's multiprocessing initializer."""
    assert dask.delayed(ed.registered)().compute(scheduler="processes", num_workers=2)
    a, b = operands([(37, 50), (50, 23)], np.float64)
    A, B = da.from_array(a, chunks=(16, 20)), da.from_array(b, chunks=(20, 9))
    assert_close(da.einsum("ij,jk->ik", A, B).compute(scheduler="processes", num_workers=2),
                 a @ b, np.float64)
    assert_close(ed.einsum("ij,jk->ik", A, B).compute(scheduler="processes", num_workers=2),
                 a @ b, np.float64)
