"""memory_limit=: contractions whose intermediates exceed the limit run in slices
(einjit.frontend.slicing) and give numpy's result, within the limit, with the flops overhead
they report; slices run a thread each where memory allows, the same bits on every run."""

import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import opt_einsum
import pytest

import einjit
from benchmarks.slicing import regular_network
from einjit.frontend.errors import EinsumTypeError, EinsumValueError
from einjit.frontend.tree import EinsumTree

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _operands(shapes, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, shape).astype(dtype) for shape in shapes]


def _assert_close(got, want):
    """float64 to rounding: relative to the largest element (sums that cancel lose digits)."""
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def _numpy(equation, *operands):
    """numpy.einsum in float64 along opt_einsum's path (numpy's own optimize=True keeps its
    intermediates to the largest operand's size: slow on these networks)."""
    operands = [a.astype(np.float64) for a in operands]
    path = opt_einsum.contract_path(equation, *operands)[0]
    return np.einsum(equation, *operands, optimize=["einsum_path", *path])


def _whole_peak(equation, shapes, dtype="float64"):
    expression = einjit.contract_expression(equation, *shapes, dtype=dtype)
    return expression._prepared.whole.memory().peak_bytes


def _slice_flops(expression):
    """Every slice's tree flops, counted slice by slice from its index ranges."""
    slicing = expression.slicing
    tree = expression.tree
    total = 0
    for number in range(slicing.count):
        sizes = list(tree.sizes)
        for dim, (start, stop) in slicing.slice(number).ranges.items():
            sizes[dim] = stop - start
        total += EinsumTree(tree.root, sizes).flops()
    return total


def _network(tensors, degree, bond, seed):
    """A random regular graph's network (benchmarks.slicing) with two open indices: the
    first operand's first and the second's last (each also in another operand)."""
    equation, shapes = regular_network(tensors, degree, bond, seed)
    terms = equation[:-2].split(",")
    return equation[:-2] + "->" + "".join(sorted({terms[0][0], terms[1][-1]})), shapes


# random regular networks: (tensors, degree, bond, seed, the whole peak over the limit);
# each limit still holds twice the largest operand (a slice may copy one)
NETWORKS = [(6, 3, 6, 1, 7), (8, 3, 6, 1, 12), (8, 4, 4, 0, 17), (9, 4, 4, 0, 17),
            (10, 4, 3, 0, 10), (7, 4, 5, 1, 25), (12, 3, 4, 2, 6), (11, 3, 5, 0, 5),
            (7, 4, 5, 0, 38)]


@pytest.mark.native
@pytest.mark.parametrize("tensors,degree,bond,seed,ratio", NETWORKS)
def test_random_networks_sliced_are_numpys(tensors, degree, bond, seed, ratio):
    equation, shapes = _network(tensors, degree, bond, seed)
    peak = _whole_peak(equation, shapes)
    limit = peak // ratio
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit=limit)
    slicing = expression.slicing
    assert slicing is not None and slicing.count > 1
    assert slicing.unsliced_peak_bytes == peak
    assert slicing.peak_bytes <= limit < peak
    # the flops reported: the tree's, per slice, counted independently
    assert slicing.unsliced_flops == expression.tree.flops()
    assert slicing.flops == _slice_flops(expression)
    assert slicing.overhead == pytest.approx(slicing.flops / slicing.unsliced_flops)
    operands = _operands(shapes, seed=seed)
    want = _numpy(equation, *operands)
    got = expression(*operands)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert "sliced: " in str(expression) and f"{slicing.count} slices" in str(expression)


@pytest.mark.native
@pytest.mark.parametrize("tensors,degree,bond,seed,ratio", NETWORKS[:4])
def test_random_networks_sliced_in_float32(tensors, degree, bond, seed, ratio):
    equation, shapes = _network(tensors, degree, bond, seed)
    limit = _whole_peak(equation, shapes, "float32") // ratio
    operands = _operands(shapes, "float32", seed)
    got = einjit.einsum(equation, *operands, memory_limit=limit)
    assert got.dtype == np.float32
    want = _numpy(equation, *operands)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_a_sliced_output_dim_writes_parts_and_an_uneven_chunk_ends_it():
    # i and l, each in both contractions (on either path) and the output, cost no extra
    # flops and no accumulator
    equation, shapes = "ij,jk,kl->il", [(203, 10), (10, 300), (300, 50)]
    limit = _whole_peak(equation, shapes) // 5
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit=limit)
    slicing = expression.slicing
    assert not slicing.summed and set(slicing.letters) <= {"i", "l"}
    assert slicing.overhead == 1.0
    assert any(size % chunk for size, chunk in zip(slicing.sizes, slicing.chunks))
    operands = _operands(shapes)
    _assert_close(expression(*operands), _numpy(equation, *operands))


def test_a_sliced_contracted_dim_is_summed():
    # x, contracted in every node, costs no extra flops; a and d are too small to suffice
    equation, shapes = "xab,xbc,xcd->ad", [(64, 2, 40), (64, 40, 40), (64, 40, 2)]
    limit = _whole_peak(equation, shapes) // 8
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit=limit)
    slicing = expression.slicing
    assert slicing.summed and "x" in slicing.letters
    assert slicing.overhead == 1.0
    operands = _operands(shapes)
    _assert_close(expression(*operands), _numpy(equation, *operands))


@pytest.mark.native
def test_strided_and_transposed_operands_and_out():
    equation, shapes = _network(8, 3, 6, 1)
    operands = _operands(shapes, seed=3)
    # each operand a transposed view of a strided array
    views = []
    for a in operands:
        big = np.zeros(tuple(2 * n for n in a.shape[::-1]))
        big[tuple(slice(None, None, 2) for _ in a.shape)] = a.T
        views.append(big[tuple(slice(None, None, 2) for _ in a.shape)].T)
    limit = _whole_peak(equation, shapes) // 10
    want = _numpy(equation, *operands)
    got = einjit.einsum(equation, *views, memory_limit=limit)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    # out=: a transposed view into a larger array, written in place
    store = np.full((2 * want.shape[1], want.shape[0]), 7.0)
    out = store[::2].T
    result = einjit.einsum(equation, *views, out=out, memory_limit=limit)
    assert result is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert np.all(store[1::2] == 7.0)
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit=limit)
    out = np.empty(want.shape[::-1]).T
    assert expression(*operands, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.native
@pytest.mark.parametrize("threads", ("2", "4"))
@pytest.mark.parametrize("equation,shapes,ratio", [
    ("xab,xbc,xcd->ad", [(64, 2, 40), (64, 40, 40), (64, 40, 2)], 8),        # summed
    ("ij,jk,kl->il", [(203, 10), (10, 300), (300, 50)], 5),                  # written
])
def test_slices_on_threads_are_repeatable(monkeypatch, threads, equation, shapes, ratio):
    monkeypatch.setenv("EINJIT_NUM_THREADS", threads)
    limit = _whole_peak(equation, shapes) // ratio
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit=limit)
    slicing = expression.slicing
    assert slicing.workers == int(threads) and slicing.count >= slicing.workers
    assert slicing.peak_bytes <= limit
    operands = _operands(shapes)
    first = expression(*operands)
    want = np.einsum(equation, *operands)
    np.testing.assert_allclose(first, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    for _ in range(4):
        np.testing.assert_array_equal(expression(*operands), first)
    assert f"{threads} at once, one per thread" in str(expression)


def test_a_limit_out_of_reach_names_both_numbers():
    equation, shapes = "xab,xbc,xcd->ad", [(16, 20, 30), (16, 30, 40), (16, 40, 10)]
    # an intermediate of one element is 8 bytes: 4 is out of reach
    with pytest.raises(EinsumValueError, match=r"memory_limit=4 bytes .* smallest peak "
                                               r"reached is \d+ bytes"):
        einjit.contract_expression(equation, *shapes, dtype="float64", memory_limit=4)
    with pytest.raises(EinsumValueError, match="memory_limit=4 bytes"):
        einjit.einsum(equation, *_operands(shapes), memory_limit=4)


def test_memory_limit_values():
    equation, shapes = "ab,bc,cd->ad", [(30, 40), (40, 50), (50, 60)]
    operands = _operands(shapes)
    want = np.einsum(equation, *operands)
    for limit in ("max_input", 2e4, np.int64(20000), 10 ** 9):
        _assert_close(einjit.einsum(equation, *operands, memory_limit=limit), want)
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit="max_input")
    assert expression.slicing is None or expression.slicing.limit_bytes == 50 * 60 * 8
    for bad, error in ((-1, EinsumValueError), ("lots", EinsumTypeError),
                       (True, EinsumTypeError), (1.5, EinsumTypeError)):
        with pytest.raises(error, match="memory_limit"):
            einjit.einsum(equation, *operands, memory_limit=bad)


def test_no_limit_and_a_large_limit_plan_alike():
    for equation, shapes in [("ab,bc,cd->ad", [(30, 40), (40, 50), (50, 60)]),
                             _network(8, 3, 6, 1), ("ij,jk->ik", [(64, 64), (64, 64)])]:
        plain = einjit.contract_expression(equation, *shapes, dtype="float64")
        roomy = einjit.contract_expression(equation, *shapes, dtype="float64",
                                           memory_limit=1 << 40)
        assert roomy.slicing is None and plain.slicing is None
        assert str(plain) == str(roomy)


def test_the_plan_cache_keys_the_limit(caplog):
    equation, shapes = "xab,xbc,xcd->ad", [(15, 20, 30), (15, 30, 40), (15, 40, 10)]
    operands = _operands(shapes)
    limit = _whole_peak(equation, shapes) // 4
    want = np.einsum(equation, *operands)
    with caplog.at_level(logging.INFO, logger="einjit"):
        _assert_close(einjit.einsum(equation, *operands), want)
        assert not any("sliced:" in r.getMessage() for r in caplog.records)
        _assert_close(einjit.einsum(equation, *operands, memory_limit=limit), want)
        assert any("sliced:" in r.getMessage() for r in caplog.records)


def test_plan_memory_walks_the_steps():
    equation, shapes = _network(9, 4, 4, 0)
    plan = einjit.contract_expression(equation, *shapes, dtype="float64")._prepared.whole
    memory = plan.memory()
    sizes = [8 * n for n in plan.buffer_sizes]
    assert memory.largest_bytes == max(sizes)
    assert max(sizes) <= memory.peak_bytes <= sum(sizes)
    # the walk by hand: a buffer lives from its first write to the step freeing it
    live, peak, written = 0, 0, set()
    for step in plan.steps:
        target = step.sources[2]
        if target[0] == "buf" and target[1] not in written:
            written.add(target[1])
            live += sizes[target[1]]
        peak = max(peak, live)
        live -= sum(sizes[b] for b in step.frees)
    if all(len(group) == 1 for group in plan.groups):
        assert memory.peak_bytes == peak
    assert memory.peak_bytes >= peak


def test_each_slice_by_its_ranges_rebuilds_the_result():
    """The slices' index ranges, as another engine (dask) would run them: numpy per slice."""
    for equation, shapes, ratio in [("xab,xbc,xcd->ad", [(9, 20, 30), (9, 30, 40),
                                                         (9, 40, 10)], 4),
                                    ("ij,jk,kl->il", [(203, 10), (10, 300), (300, 50)], 5),
                                    (*_network(8, 3, 6, 1), 12)]:
        limit = _whole_peak(equation, shapes) // ratio
        expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                                memory_limit=limit)
        slicing = expression.slicing
        operands = _operands(shapes)
        result = np.zeros(expression.shape)
        for number in range(slicing.count):
            piece = slicing.slice(number)
            part = opt_einsum.contract(equation, *(a[i] for a, i in zip(operands,
                                                                        piece.operands)))
            if piece.summed:
                result[piece.output] += part
            else:
                result[piece.output] = part
        np.testing.assert_allclose(result, _numpy(equation, *operands),
                                   rtol=1e-12, atol=1e-12)
        with pytest.raises(EinsumValueError, match="slice"):
            slicing.slice(slicing.count)


def test_a_tree_expression_and_a_diagonal_are_sliced():
    tree = EinsumTree("[[0,1],[1,2]->[0,2]],[2,3]->[0,3]", [30, 40, 50, 20])
    limit = 30 * 50 * 8 // 4
    expression = einjit.contract_expression(tree, dtype="float64", memory_limit=limit)
    assert expression.slicing is not None and expression.slicing.peak_bytes <= limit
    operands = _operands([(30, 40), (40, 50), (50, 20)])
    want = np.einsum("ab,bc,cd->ad", *operands)
    np.testing.assert_allclose(expression(*operands), want, rtol=1e-12,
                               atol=1e-12 * np.abs(want).max())
    # a diagonal (ii) and a size-1 broadcast axis read through the slices
    a, b, c = _operands([(40, 40, 30), (30, 50), (1, 50, 20)])
    want = np.einsum("iik,kl,xlm->im", a, b, c)
    limit = _whole_peak("iik,kl,xlm->im", [a.shape, b.shape, c.shape]) // 4
    expression = einjit.contract_expression("iik,kl,xlm->im", a.shape, b.shape, c.shape,
                                            dtype="float64", memory_limit=limit)
    assert expression.slicing is not None
    np.testing.assert_allclose(expression(a, b, c), want, rtol=1e-12,
                               atol=1e-12 * np.abs(want).max())


def test_the_displays_show_the_slicing():
    equation, shapes = "xab,xbc,xcd->ad", [(16, 20, 30), (16, 30, 40), (16, 40, 10)]
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit=_whole_peak(equation, shapes) // 4)
    html = expression._repr_html_()
    assert "einjit-slicing" in html and "slices" in html
    text = str(expression)
    slicing = expression.slicing
    assert f"peak {slicing.peak_bytes} bytes (unsliced {slicing.unsliced_peak_bytes}" in text
    assert "overhead" in text and "each slice" in text


_TRACED = textwrap.dedent("""
    import json, sys, tracemalloc
    import numpy as np
    import opt_einsum
    import einjit
    from benchmarks.slicing import regular_network
    tensors, degree, bond, seed, ratio = map(int, sys.argv[1:6])
    equation, shapes = regular_network(tensors, degree, bond, seed)
    terms = equation[:-2].split(",")
    equation = equation[:-2] + "->" + "".join(sorted({terms[0][0], terms[1][-1]}))
    rng = np.random.default_rng(seed)
    operands = [rng.uniform(-1, 1, s) for s in shapes]
    whole = einjit.contract_expression(equation, *shapes, dtype="float64")
    limit = whole._prepared.whole.memory().peak_bytes // ratio
    expression = einjit.contract_expression(equation, *shapes, dtype="float64",
                                            memory_limit=limit)
    out = np.empty(expression.shape)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    whole(*operands, out=out)
    whole_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    expression(*operands, out=out)
    sliced_peak = tracemalloc.get_traced_memory()[1] - base
    path = ["einsum_path", *opt_einsum.contract_path(equation, *operands)[0]]
    want = np.einsum(equation, *operands, optimize=path)
    print(json.dumps(dict(limit=limit, whole=whole_peak, sliced=sliced_peak,
                          result=int(out.nbytes), right=bool(np.allclose(out, want)))))
""")


@pytest.mark.slow
@pytest.mark.parametrize("network", [(12, 4, 6, 0, 8), (8, 4, 8, 1, 20)])
def test_traced_memory_stays_under_the_limit(network):
    """In a child (EINJIT_POOL_BYTES=0: every buffer a fresh, traced allocation): the
    sliced call's peak allocations stay under the limit plus the result, where the whole
    plan's exceed it."""
    env = dict(os.environ, EINJIT_POOL_BYTES="0", PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-c", _TRACED, *map(str, network)], env=env,
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures["right"]
    # Python's own objects of a call (views, lists) are a few kB
    assert figures["sliced"] <= figures["limit"] + figures["result"] + (64 << 10), figures
    assert figures["whole"] > figures["limit"], figures


def test_a_long_sums_partial_sums_are_sliced_too():
    """A long reduction's partial sums (frontend.long_sums) are its plan's intermediates: the
    slicer cuts the dims they grow with."""
    rng = np.random.default_rng(4)
    for equation, shape, ratio in (("ij->i", (64, 200000), 2), ("i->", (3 * 10 ** 6,), 4)):
        peak = _whole_peak(equation, [shape])
        assert peak > 0
        expression = einjit.contract_expression(equation, shape, dtype="float64",
                                                memory_limit=peak // ratio)
        slicing = expression.slicing
        assert slicing is not None and slicing.peak_bytes <= peak // ratio
        a = rng.uniform(-1, 1, shape)
        want = a.sum(axis=-1)
        np.testing.assert_allclose(expression(a), want, rtol=1e-12,
                                   atol=1e-12 * np.abs(a).sum(axis=-1).max())


def test_a_broadcast_operand_is_read_whole_along_its_size_1_axis():
    a, b, c, d = _operands([(1, 300), (200, 300), (300, 100), (100, 2)])
    equation = "ij,ij,jk,kl->il"
    limit = _whole_peak(equation, [a.shape, b.shape, c.shape, d.shape]) // 6
    expression = einjit.contract_expression(equation, a.shape, b.shape, c.shape, d.shape,
                                            dtype="float64", memory_limit=limit)
    slicing = expression.slicing
    assert slicing is not None
    for number in range(slicing.count):
        assert slicing.slice(number).operands[0][0] == slice(None)
    want = _numpy(equation, a, b, c, d)
    np.testing.assert_allclose(expression(a, b, c, d), want, rtol=1e-12,
                               atol=1e-12 * np.abs(want).max())


@pytest.mark.native
@pytest.mark.parametrize("threads", ("1", "2"))
@pytest.mark.parametrize("equation", ["ab,bc,->ac", ",ab,bc->ac", "ab,,bc->ab", "ab,bc,->"])
def test_a_0d_operand_is_sliced_as_a_view(monkeypatch, threads, equation):
    # a slice's view of a 0-d operand (or result) must stay an array: a[()] is a scalar
    monkeypatch.setenv("EINJIT_NUM_THREADS", threads)
    x, y = _operands([(60, 70), (70, 50)])
    terms = equation.split("->")[0].split(",")
    operands = [3.0 if not term else (x if term == "ab" else y) for term in terms]
    want = _numpy(equation, *map(np.asarray, operands))
    limit = _whole_peak(equation, [np.shape(a) for a in operands]) // 4
    expression = einjit.contract_expression(equation, *[np.shape(a) for a in operands],
                                            dtype="float64", memory_limit=limit)
    assert expression.slicing is not None
    _assert_close(expression(*operands), want)
    operands[terms.index("")] = np.array(3.0)
    _assert_close(einjit.einsum(equation, *operands, memory_limit=limit), want)
