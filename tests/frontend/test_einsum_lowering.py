"""einjit.einsum's plans (tree, rewrite, lowering) against numpy.einsum, each step run by the
IR's numpy reference executor (the `reference` fixture), for float32 and float64 (the `dtype`
fixture), plus: every lowered operation fits its primitive when its innermost dims become
the prim dims."""

import threading

import numpy as np
import pytest
from frontend_support import WIDER, assert_close, numpy_einsum_forbidden, random_operands

import einjit
from einjit.einsum import _dense, _Prepared
from einjit.ir import Dim, TensorOperation

# (equation, shapes): opt_einsum-style table; every feature of numpy's einsum
EQUATIONS = [
    # matrix products, all transposition combinations, odd sizes
    ("ij,jk->ik", [(3, 5), (5, 7)]), ("ij,kj->ik", [(3, 5), (7, 5)]),
    ("ji,jk->ik", [(5, 3), (5, 7)]), ("ji,kj->ik", [(5, 3), (7, 5)]),
    ("ij,jk->ki", [(3, 5), (5, 7)]), ("ij,kj->ki", [(13, 17), (19, 17)]),
    ("ij,jk", [(1, 5), (5, 1)]), ("ij,jk", [(33, 1), (1, 31)]),
    # matrix-vector, vector-matrix, dot, outer
    ("ij,j->i", [(7, 9)]*1 + [(9,)]), ("j,jk->k", [(9,), (9, 11)]),
    ("ij,i->j", [(7, 9), (7,)]), ("i,i->", [(17,), (17,)]), ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(6,), (7,)]), ("i,j->ji", [(6,), (7,)]), ("ij,k->ijk", [(2, 3), (4,)]),
    ("ij,k->kji", [(2, 3), (4,)]), ("i,jk->jik", [(3,), (4, 5)]),
    # Hadamard and broadcasting multiplies
    ("ij,ij->ij", [(5, 6), (5, 6)]), ("ij,ji->ij", [(5, 6), (6, 5)]),
    ("ij,ij->ji", [(5, 6), (5, 6)]), ("ij,j->ij", [(5, 6), (6,)]), ("ij,i->ij", [(5, 6), (5,)]),
    ("ijk,ijk->ijk", [(2, 3, 4), (2, 3, 4)]), ("i,i->i", [(9,), (9,)]),
    # batch dims (c) in every position
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)]), ("ijb,jkb->ikb", [(4, 5, 3), (5, 6, 3)]),
    ("ibj,jbk->bik", [(4, 3, 5), (5, 3, 6)]), ("bij,bjk->kib", [(3, 4, 5), (3, 5, 6)]),
    ("bi,bi->b", [(4, 7), (4, 7)]), ("bij,bij->b", [(2, 3, 4), (2, 3, 4)]),
    ("abij,abjk->abik", [(2, 3, 4, 5), (2, 3, 5, 2)]),
    # several contracted dims (BRGEMM candidates)
    ("ijk,jkl->il", [(3, 4, 5), (4, 5, 6)]), ("ikj,kjl->il", [(3, 5, 4), (5, 4, 6)]),
    ("abc,bcd->ad", [(7, 3, 9), (3, 9, 5)]), ("acb,cbd->da", [(7, 3, 9), (3, 9, 5)]),
    # reductions over one operand, traces, diagonals
    ("ij->i", [(5, 6)]), ("ij->j", [(5, 6)]), ("ij->", [(5, 6)]), ("ijk->j", [(3, 4, 5)]),
    ("ijk->ki", [(3, 4, 5)]), ("ijk->", [(3, 4, 5)]), ("i->", [(11,)]),
    ("ii->i", [(5, 5)]), ("ii", [(5, 5)]), ("ii->", [(5, 5)]), ("iij->j", [(4, 4, 3)]),
    ("iij->ji", [(4, 4, 3)]), ("iji->j", [(4, 3, 4)]), ("iii->i", [(3, 3, 3)]),
    ("ij,jj->i", [(3, 4), (4, 4)]), ("ii,ij->j", [(3, 3), (3, 4)]),
    ("ij,kj->", [(3, 4), (5, 4)]), ("ij,jk->", [(3, 4), (4, 5)]),
    ("ij,k->", [(3, 4), (5,)]), ("ij,jk->i", [(3, 4), (4, 5)]), ("ij,jk->k", [(3, 4), (4, 5)]),
    ("ijk,k->", [(2, 3, 4), (4,)]),
    # permutations, identity
    ("ij->ji", [(5, 6)]), ("ij->ij", [(5, 6)]), ("ijk->kji", [(2, 3, 4)]),
    ("ijk->jki", [(2, 3, 4)]), ("abcd->dcba", [(2, 3, 4, 5)]), ("i", [(7,)]), ("ji", [(3, 4)]),
    # implicit output: letters used once, ASCII order (upper case first)
    ("ba", [(3, 4)]), ("bA", [(3, 4)]), ("ij,jk,kl", [(2, 3), (3, 4), (4, 5)]),
    ("Ab,bC", [(2, 3), (3, 4)]),
    # ellipsis and broadcasting
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(3, 4), (2, 4, 5)]), ("...,...", [(2, 3), (3,)]),
    ("i...->...", [(3, 2, 4)]), ("...i->...", [(3, 2, 4)]),
    ("ij...,jk...->ik...", [(2, 3, 4), (3, 5, 4)]),
    ("...ii->...i", [(2, 3, 3)]), ("a...,a...->...", [(3, 2, 1), (3, 1, 4)]),
    ("...", [(2, 3)]), ("...,...", [(), (3,)]),
    # size-1 dims (broadcast per numpy)
    ("ij,jk->ik", [(3, 1), (4, 5)]), ("ij,jk->ik", [(3, 4), (1, 5)]),
    ("ij,ij->ij", [(3, 1), (1, 4)]),
    ("ij,ij->", [(1, 4), (3, 1)]), ("ij,jk->ik", [(1, 1), (1, 1)]), ("i,i->i", [(1,), (4,)]),
    ("bij,bjk->bik", [(1, 3, 4), (5, 4, 2)]), ("ijk->ik", [(3, 1, 5)]), ("ij->", [(1, 1)]),
    # 0-d operands
    (",->", [(), ()]), (",i->i", [(), (4,)]), ("i,->i", [(4,), ()]), ("->", [()]), ("", [()]),
    (",ij,->ji", [(), (2, 3), ()]),
    # many operands
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 6)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("af,fbg,gch,hdi,ie->abcde", [(3, 4), (4, 2, 5), (5, 3, 2), (2, 4, 3), (3, 2)]),
    ("ea,fb,abcd,gc,hd->efgh", [(3, 4), (2, 5), (4, 5, 3, 2), (4, 3), (3, 2)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 3)]), ("i,i,i->i", [(5,), (5,), (5,)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]), ("ij,jk,ki->", [(3, 4), (4, 5), (5, 3)]),
    ("abcd,dcba->", [(2, 3, 4, 5), (5, 4, 3, 2)]),
    ("ijk,jil,kl->", [(2, 3, 4), (3, 2, 5), (4, 5)]),
    ("ab,cd,ef->abcdef", [(2, 2), (2, 3), (3, 2)]), ("ab,bc,ca->abc", [(2, 3), (3, 4), (4, 2)]),
    ("ij,jk,kl,lm,mn,no,op,pq->iq",
     [(2, 3), (3, 2), (2, 3), (3, 2), (2, 3), (3, 2), (2, 3), (3, 2)]),
]


def _ids():
    return [f"{eq}-{'x'.join(map(str, sum(map(list, shapes), [])))}" for eq, shapes in EQUATIONS]


def numpy_view(expected, operands) -> bool:
    """numpy.einsum answered with a view of its one operand (nothing summed; a 0-d operand's
    view comes back as a scalar)."""
    return len(operands) == 1 and (np.ndim(operands[0]) == 0 or (
        isinstance(expected, np.ndarray) and np.shares_memory(expected, operands[0])))


def check(equation, operands, **options):
    """einjit.einsum on einjit's kernels (numpy.einsum forbidden) against numpy: shape, dtype,
    scalar type, and values within the dtype's tolerance of a wider reference. Where numpy
    returns a view of the operand, einjit.einsum returns numpy's view, and the kernels compute
    the equation through contract_expression."""
    expected = np.einsum(equation, *operands)
    if numpy_view(expected, operands):
        view = einjit.einsum(equation, *operands, **options)
        assert type(view) is type(expected)
        if isinstance(expected, np.ndarray):
            assert np.shares_memory(view, operands[0]) and view.strides == expected.strides
        np.testing.assert_array_equal(view, expected)
        expr = einjit.contract_expression(equation, *[np.shape(o) for o in operands],
                                          optimize=options.get("optimize", "auto"),
                                          dtype=np.asarray(operands[0]).dtype)
        with numpy_einsum_forbidden():
            result = expr(*operands)
    else:
        with numpy_einsum_forbidden():
            result = einjit.einsum(equation, *operands, **options)
    kind = np.asarray(expected).dtype
    wide = np.einsum(equation, *[np.asarray(o).astype(WIDER[kind]) for o in operands],
                     optimize=True)
    assert np.shape(result) == np.shape(expected)
    assert np.asarray(result).dtype == kind
    assert type(result) is type(expected)
    summed = max([int(np.prod(np.shape(o))) for o in operands] + [1])
    assert_close(result, wide, kind, summed)
    return result


@pytest.mark.parametrize("optimize", [True, False, "optimal", "dp"])
@pytest.mark.parametrize("equation, shapes", EQUATIONS, ids=_ids())
def test_equation_table(reference, equation, shapes, optimize, dtype):
    rng = np.random.default_rng(abs(hash((equation, str(shapes)))) % 2**32)
    check(equation, random_operands(rng, shapes, dtype), optimize=optimize)


def fits(lowered) -> TensorOperation:
    """The op with its `prims` innermost dims as prim dims and the rest seq: construction
    runs the IR's prim-fit validation."""
    op = lowered.op
    count = len(op.dims)
    dims = [Dim(d.type, "prim" if i >= count - lowered.prims else "seq", d.size, d.stride_in0,
                d.stride_in1, d.stride_out) for i, d in enumerate(op.dims)]
    return TensorOperation.from_dims(op.dtype, op.prim_first_touch, op.prim_main,
                                     op.prim_last_touch, dims)


@pytest.mark.parametrize("equation, shapes", EQUATIONS, ids=_ids())
def test_every_lowered_op_fits_its_primitive(equation, shapes, dtype):
    prepared = _Prepared(equation, shapes, [_dense(s, "C") for s in shapes], None, "auto", "C",
                         optimize_ops=False, dtype=dtype)
    for step in prepared.plan.steps:
        assert step.lowered.op.dtype == dtype.name
        fits(step.lowered)


@pytest.mark.native
def test_matrix_product_is_one_gemm_without_copies(dtype):
    prepared = _Prepared("ij,jk->ik", [(30, 40), (40, 50)], [(40, 1), (50, 1)], None, "auto",
                         "C", optimize_ops=False, dtype=dtype)
    (step,) = prepared.plan.steps
    op = step.lowered.op
    assert op.prim_main == "gemm" and step.sources[2] == ("out",) and op.dtype == dtype.name
    prims = {d.type: d for d in op.dims[-3:]}
    # out[i,k] row-major: k has unit stride, so k is m, taken from operand 1 (in0)
    assert prims["m"].size == 50 and prims["m"].stride_in0 == 1 and prims["m"].stride_out == 1
    assert prims["k"].size == 40 and prims["k"].stride_in1 == 1
    assert prims["n"].size == 30
    assert step.sources[0] == ("leaf", 1) and step.sources[1] == ("leaf", 0)


def test_transposed_operands_cost_no_copy(reference, dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 30)).astype(dtype)
    b = rng.standard_normal((50, 40)).astype(dtype)
    prepared = _Prepared("ij,jk->ik", [(30, 40), (40, 50)],
                         [(1, 30), (1, 40)], None, "auto", "K", optimize_ops=False)
    kinds = [s.lowered.op.prim_main for s in prepared.plan.steps]
    assert kinds == ["gemm"]
    check("ij,jk->ik", [a.T, b.T])


@pytest.mark.parametrize("equation, shapes", [
    ("ij,j->i", [(30, 40), (40,)]), ("j,ij->i", [(40,), (30, 40)]),
    ("bij,bj->bi", [(3, 30, 40), (3, 40)]), ("ijk,jk->i", [(7, 5, 40), (5, 40)])])
def test_a_matrix_times_a_vector_reads_the_matrix_in_place(reference, equation, shapes, dtype):
    """Every element of the matrix enters one product: one GEMM reads it as in1 (its
    unit-stride dim as k), no permutation copies it first."""
    strides = [tuple(int(np.prod(s[i + 1:])) for i in range(len(s))) for s in shapes]
    prepared = _Prepared(equation, shapes, strides, None, "auto", "C", optimize_ops=False,
                         dtype=dtype)
    (step,) = prepared.plan.steps
    matrix = max(range(2), key=lambda i: len(shapes[i]))
    assert step.lowered.op.prim_main == "gemm" and step.sources[1] == ("leaf", matrix)
    rng = np.random.default_rng(len(equation))
    check(equation, [rng.standard_normal(s).astype(dtype) for s in shapes])


@pytest.mark.parametrize("equation, shapes", [
    ("ij,ij->j", [(40, 30)] * 2), ("bij,bij->bj", [(3, 20, 30)] * 2),
    ("ijk,ijk->k", [(5, 6, 30)] * 2)])
def test_a_sum_of_products_along_the_unit_dim_is_a_product_then_a_sum(reference, equation,
                                                                        shapes, dtype):
    """out's unit dim, at unit stride in both operands: their Hadamard product walks it in
    vectors, then a GEMM against ones sums it (no 1 x 1 dot product per element of out)."""
    strides = [tuple(int(np.prod(s[i + 1:])) for i in range(len(s))) for s in shapes]
    prepared = _Prepared(equation, shapes, strides, None, "auto", "C", optimize_ops=False,
                         dtype=dtype)
    assert [s.lowered.op.prim_main for s in prepared.plan.steps] == ["mul", "gemm"]
    rng = np.random.default_rng(len(equation))
    check(equation, [rng.standard_normal(s).astype(dtype) for s in shapes])


def test_diagonal_is_read_by_strides_not_copied(dtype):
    prepared = _Prepared("iij->ji", [(6, 6, 5)], [(30, 5, 1)], None, "auto", "C",
                         optimize_ops=False, dtype=dtype)
    (step,) = prepared.plan.steps
    assert step.sources[0] == ("leaf", 0)
    strides = sorted(d.stride_in0 for d in step.lowered.op.dims if d.size > 1)
    assert strides == [1, 35]


VIEWS = [
    ("ij,jk->ik", lambda a, b: (a[::2], b[:, 1::3])),
    ("ij,jk->ik", lambda a, b: (a.T.copy().T, b.T.copy().T)),
    ("ij,jk->ik", lambda a, b: (a[::-1], b)),            # negative strides: copied first
    ("ij,jk", lambda a, b: (a[:, :1], b[:1])),
    ("ij,jk->ki", lambda a, b: (a[1:, 2:], b[2:, 1:])),
    ("ii,ij->j", lambda a, b: (a[:10, :10], b[:10])),
    ("ij,ij->ij", lambda a, b: (a[:, :4], np.broadcast_to(b[:1, :4], a[:, :4].shape))),
]


@pytest.mark.parametrize("index", range(len(VIEWS)))
def test_views_and_transposes_as_operands(reference, index, dtype):
    equation, make = VIEWS[index]
    rng = np.random.default_rng(index)
    a = rng.standard_normal((12, 10)).astype(dtype)
    b = rng.standard_normal((10, 14)).astype(dtype)
    x, y = make(a, b)
    check(equation, [x, y])


def _random_equation(rng):
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGH"
    count = int(rng.integers(1, 9))
    pool = list(letters[: int(rng.integers(2, 10))])
    sizes = {c: int(rng.choice([1, 2, 3, 5, 7])) for c in pool}
    terms = []
    for _ in range(count):
        k = int(rng.integers(0, 4))
        term = list(rng.choice(pool, size=k, replace=True)) if k else []
        terms.append("".join(term))
    used = sorted(set("".join(terms)))
    out = [c for c in used if rng.random() < 0.4]
    rng.shuffle(out)
    equation = ",".join(terms) + "->" + "".join(out)
    shapes = [tuple(sizes[c] for c in term) for term in terms]
    return equation, shapes


@pytest.mark.parametrize("seed", range(60))
def test_random_equations(reference, seed, dtype):
    rng = np.random.default_rng(1000 + seed)
    equation, shapes = _random_equation(rng)
    operands = random_operands(rng, shapes, dtype)
    check(equation, operands, optimize=["greedy", "optimal", True, False][seed % 4])


def test_out_argument(reference, dtype):
    rng = np.random.default_rng(3)
    a, b = random_operands(rng, [(4, 5), (5, 6)], dtype)
    out = np.full((4, 6), np.nan, dtype)
    with numpy_einsum_forbidden():
        result = einjit.einsum("ij,jk->ik", a, b, out=out)
    assert result is out
    assert_close(out, a.astype(np.longdouble) @ b, dtype, 5)
    # a strided, transposed out is written in place
    big = np.zeros((12, 9), dtype)
    view = big[::2, 1:5].T                      # shape (4, 6), strides (1, 18) elements
    c, d = random_operands(rng, [(5, 4), (6, 5)], dtype)
    with numpy_einsum_forbidden():
        result = einjit.einsum("ij,jk->ik", c.T, d.T, out=view)
    assert result is view
    assert_close(view, c.T.astype(np.longdouble) @ d.T, dtype, 5)
    assert np.all(big[1::2] == 0) and np.all(big[:, 5:] == 0) and np.all(big[:, :1] == 0)


def test_order_f_gives_fortran_result(reference, dtype):
    rng = np.random.default_rng(4)
    a, b = random_operands(rng, [(4, 5), (5, 6)], dtype)
    with numpy_einsum_forbidden():
        result = einjit.einsum("ij,jk->ik", a, b, order="F")
    assert result.flags.f_contiguous and result.dtype == dtype
    assert_close(result, a.astype(np.longdouble) @ b, dtype, 5)


@pytest.mark.native
def test_sublist_form(reference, dtype):
    rng = np.random.default_rng(5)
    a, b = random_operands(rng, [(4, 5), (5, 6)], dtype)
    with numpy_einsum_forbidden():
        result = einjit.einsum(a, [0, 1], b, [1, 2], [0, 2])
        ellipsis = einjit.einsum(a, [Ellipsis, 1], b, [1, 2])
    assert result.dtype == dtype
    assert_close(result, a.astype(np.longdouble) @ b, dtype, 5)
    assert_close(ellipsis, np.einsum(a.astype(np.longdouble), [Ellipsis, 1], b, [1, 2]), dtype,
                 5)


def test_concurrent_calls_from_four_threads(reference, dtype):
    equations = [("ij,jk->ik", [(6, 7), (7, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                 ("ij->ji", [(5, 9)]), ("af,fbg,gch->abch", [(3, 4), (4, 2, 5), (5, 3, 2)])]
    rng = np.random.default_rng(6)
    cases = [(eq, random_operands(rng, shapes, dtype)) for eq, shapes in equations]
    errors = []

    def work(offset):
        try:
            for i in range(40):
                eq, ops = cases[(i + offset) % len(cases)]
                result = einjit.einsum(eq, *ops)
                assert result.dtype == dtype
                assert_close(result, np.einsum(eq, *[o.astype(np.longdouble) for o in ops]),
                             dtype, 20)
        except Exception as error:   # reported in the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_contract_expression(reference, dtype):
    rng = np.random.default_rng(7)
    shapes = [(3, 4), (4, 2, 5), (5, 3, 2), (2, 4, 3), (3, 2)]
    expr = einjit.contract_expression("af,fbg,gch,hdi,ie->abcde", *shapes, dtype=dtype)
    operands = random_operands(rng, shapes, dtype)
    expected = np.einsum("af,fbg,gch,hdi,ie->abcde",
                         *[o.astype(np.longdouble) for o in operands])
    with numpy_einsum_forbidden():
        result = expr(*operands)
        assert result.dtype == dtype
        assert_close(result, expected, dtype, 40)
        # other strides than planned: a plan of their own, same result
        transposed = [np.asfortranarray(o) for o in operands]
        assert_close(expr(*transposed), expected, dtype, 40)
        out = np.empty(expected.shape, dtype)
        assert expr(*operands, out=out) is out
        assert_close(out, expected, dtype, 40)
    text = str(expr)
    assert str(expr.tree) in text and "TensorOperation" in text and "flops" in text
    assert f"dtype: {dtype}" in text and f"TensorOperation {dtype}" in text
    assert isinstance(expr.tree, einjit.EinsumTree)
    with pytest.raises(ValueError):
        expr(*operands[:-1])
    with pytest.raises(ValueError):
        expr(*operands[:-1], operands[-1].T)
