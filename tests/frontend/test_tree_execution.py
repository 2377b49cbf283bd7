"""Bracket-notation trees executed through the public API (contract_expression(EinsumTree)),
LOWER (as written) and OPT (rewritten), against numpy node by node; and the fast call paths
of ContractExpression / einjit.einsum: same results as the checked path, every check a first
call with new arrays needs. Each for float32 and float64 (the `dtype` fixture), with
numpy.einsum forbidden where einjit's kernels must compute."""

import numpy as np
import pytest
from frontend_support import (
    WIDER,
    assert_close,
    jit_available,
    numpy_einsum_forbidden,
    random_operands,
)
from test_grammar import COURSE_TREES
from test_tree import SMALL

import einjit
from einjit import EinsumTree
from einjit.einsum import plan_cache

pytestmark = pytest.mark.skipif(not jit_available(),
                                reason="needs einjit.optimize and einjit.codegen to execute")

# the einsum_ir samples' trees (explicit permutation nodes), at small sizes
EINSUM_IR_TREES = [
    ("[[8,4],[7,3,8]->[7,3,4]],[[[[6,2,7]->[2,6,7]],[[5,1,6]->[1,5,6]]->[1,2,5,7]],[0,5]"
     "->[0,1,2,7]]->[0,1,2,3,4]", [5, 4, 3, 6, 3, 7, 5, 4, 3]),
    ("[[[4,9,0]->[0,4,9]],[[[0,5,1]->[5,1,0]],[[1,6,2]->[6,2,1]]->[5,6,2,0]]->[5,6,2,4,9]],"
     "[[[3,8,4]->[8,3,4]],[[2,7,3]->[7,2,3]]->[7,2,8,4]]->[5,6,7,8,9]",
     [4, 5, 3, 4, 3, 5, 3, 4, 5, 3]),
    ("[[[8,0,9,4]->[0,9,4,8]],[[2,8,6,9]->[6,2,9,8]]->[6,2,0,4,8]],[[[[3,2,1,0]->[3,1,2,0]],"
     "[[1,5]->[5,1]]->[5,3,2,0]],[[3,7]->[7,3]]->[7,5,2,0]]->[7,6,5,4,8]",
     [3, 5, 2, 6, 4, 7, 2, 9, 2, 8]),
    # reductions inside the tree and a permutation at the root
    ("[[[0,1,2]->[0,2]],[2,3]->[0,3]]->[3,0]", [7, 5, 6, 9]),
]
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def numpy_tree(tree, operands):
    """The tree, node by node, with numpy.einsum in a dtype wider than the operands'."""
    wide = WIDER[np.dtype(operands[0].dtype)]

    def value(node):
        if node.is_leaf:
            return operands[node.operand].astype(wide)
        terms = ",".join("".join(LETTERS[d] for d in c.dims) for c in node.children)
        return np.einsum(terms + "->" + "".join(LETTERS[d] for d in node.dims),
                         *[value(c) for c in node.children])
    return value(tree.root)


def leaf_operands(tree, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return random_operands(rng, [[tree.sizes[d] for d in leaf.dims] for leaf in tree.leaves],
                           dtype)


CASES = list(zip(COURSE_TREES, SMALL)) + EINSUM_IR_TREES


@pytest.mark.parametrize("optimize", [False, True], ids=["lower", "opt"])
@pytest.mark.parametrize("index", range(len(CASES)))
def test_bracket_trees_through_contract_expression(index, optimize, dtype):
    expression, sizes = CASES[index]
    tree = EinsumTree(expression, sizes)
    operands = leaf_operands(tree, index, dtype)
    expr = einjit.contract_expression(tree, optimize=optimize, dtype=dtype)
    assert expr.shapes == tuple(o.shape for o in operands)
    assert expr.shape == tuple(sizes[d] for d in tree.root.dims)
    if not optimize:
        assert expr.tree == tree                  # LOWER: executed as written
    expected = numpy_tree(tree, operands)
    with numpy_einsum_forbidden():
        for _ in range(2):                        # the checked first call, then the fast one
            result = expr(*operands)
            assert result.shape == expected.shape and result.dtype == dtype
            assert_close(result, expected, dtype, 200)


def test_bracket_tree_with_views_and_out(dtype):
    tree = EinsumTree("[[0,1],[1,2]->[0,2]],[2,3]->[0,3]", [6, 5, 7, 4])
    a, b, c = leaf_operands(tree, 3, dtype)
    expr = einjit.contract_expression(tree, dtype=dtype)
    expected = numpy_tree(tree, [a, b, c])
    # transposed and strided views get a plan of their own
    at = np.asfortranarray(a)
    bs = np.zeros((5, 14), dtype)[:, ::2]
    bs[...] = b
    out = np.zeros((4, 6), dtype).T
    with numpy_einsum_forbidden():
        assert_close(expr(at, bs, c), expected, dtype, 35)
        assert expr(a, b, c, out=out) is out
    assert_close(out, expected, dtype, 35)


def test_bracket_tree_with_mixed_dtypes_computes_in_float64():
    tree = EinsumTree("[[0,1],[1,2]->[0,2]],[2,3]->[0,3]", [6, 5, 7, 4])
    a, b, c = leaf_operands(tree, 4, np.float64)
    expected = numpy_tree(tree, [a, b, c])
    narrow = einjit.contract_expression(tree)                    # float32
    wide = einjit.contract_expression(tree, dtype="float64")
    with numpy_einsum_forbidden():
        # a float64 operand promotes a float32 expression (a float64 plan of its own)
        result = narrow(a.astype(np.float32), b, c.astype(np.float32))
        assert result.dtype == np.float64
        assert_close(result, numpy_tree(tree, [a.astype(np.float32).astype(np.float64), b,
                                               c.astype(np.float32).astype(np.float64)]),
                     np.float64, 35)
        # float32 operands of a float64 expression are converted; float64 out of either
        for expr in (narrow, wide):
            out = np.empty((6, 4))
            assert expr(a, b, c, out=out) is out
            assert_close(out, expected, np.float64, 35)
        result = wide(*[x.astype(np.float32) for x in (a, b, c)])
        assert result.dtype == np.float64
    # a float32 out cannot take the float64 result under the rule 'safe'
    with pytest.raises(TypeError, match="safe"):
        wide(a, b, c, out=np.empty((6, 4), np.float32))
    # dtypes without kernels: numpy, node by node, in the promoted dtype (exact here)
    ints = [x.astype(np.int64) for x in (a * 10, b * 10, c * 10)]
    result = wide(*ints)
    assert result.dtype == np.float64
    assert np.array_equal(result, numpy_tree(tree, [x.astype(np.float64) for x in ints]))


def test_bracket_tree_errors():
    tree = EinsumTree("[0,1],[1,2]->[0,2]", [3, 4, 5])
    expr = einjit.contract_expression(tree)
    a, b = leaf_operands(tree, 1)
    with pytest.raises(ValueError, match="operand 1 has shape"):
        expr(a, b.T)
    with pytest.raises(ValueError, match="takes 2 operands"):
        expr(a)
    with pytest.raises(ValueError, match="differ from the tree's"):
        einjit.contract_expression(tree, (3, 4), (4, 6))
    assert einjit.contract_expression(tree, (3, 4), (4, 5)).shapes == ((3, 4), (4, 5))
    with pytest.raises(TypeError, match="str or an EinsumTree"):
        einjit.contract_expression(42, (3, 4))


def test_str_of_a_tree_expression_names_each_step():
    tree = EinsumTree(COURSE_TREES[0], SMALL[0])
    text = str(einjit.contract_expression(tree))
    assert "step 0" in text and "flops" in text and "0(5)" in text


# -- the fast paths: identical results, the checks a new call needs ----------------------------
def test_fast_path_results_equal_the_checked_path(dtype):
    rng = np.random.default_rng(21)
    a, b = random_operands(rng, [(13, 11), (11, 9)], dtype)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    with numpy_einsum_forbidden():
        first = expr(a, b)                           # plain arrays: the fast path
        checked = expr(a, b, out=np.empty((13, 9), dtype))   # out=: the checked path
        assert np.array_equal(first, checked) and first.dtype == dtype
        again = einjit.einsum("ij,jk->ik", a, b)
        cached = einjit.einsum("ij,jk->ik", a, b)    # a plan in the cache: the fast path
    assert np.array_equal(again, cached) and np.array_equal(first, cached)
    assert cached is not again and cached.flags.c_contiguous and cached.dtype == dtype


def test_fast_path_checks_what_a_new_call_needs(dtype):
    rng = np.random.default_rng(22)
    a, b = random_operands(rng, [(6, 7), (7, 5)], dtype)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
    expected = a.astype(np.longdouble) @ b
    expr(a, b)
    with pytest.raises(ValueError, match="operand 0 has shape"):
        expr(a[:5], b)
    # the other float dtype: promoted as numpy promotes (float64 result), on the kernels
    other = np.float64 if dtype == np.float32 else np.float32
    with numpy_einsum_forbidden():
        result = expr(a.astype(other), b)
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, a.astype(other).astype(np.float64) @ b, rtol=1e-6)
    # a dtype without kernels: numpy's result and result dtype
    ints = np.arange(42).reshape(6, 7)
    result = expr(ints, np.ones((7, 5), np.int64))
    assert result.dtype == np.int64 and np.array_equal(result, ints @ np.ones((7, 5), np.int64))
    # a read-only operand, a transposed view, a non-array: same values
    readonly = a.copy()
    readonly.flags.writeable = False
    bt = np.ascontiguousarray(b.T).T
    with numpy_einsum_forbidden():
        assert_close(expr(readonly, b), expected, dtype, 7)
        assert_close(expr(a, bt), expected, dtype, 7)
        listed = expr(a.tolist(), b)            # a list: numpy makes it float64
    assert listed.dtype == np.float64
    np.testing.assert_allclose(listed, expected.astype(np.float64), rtol=1e-5, atol=1e-6)


def test_cached_einsum_with_other_strides_or_options_gets_its_own_plan(dtype):
    rng = np.random.default_rng(23)
    a, b = random_operands(rng, [(8, 6), (6, 9)], dtype)
    expected = a.astype(np.longdouble) @ b
    with numpy_einsum_forbidden():
        einjit.einsum("ij,jk->ik", a, b)
        size = len(plan_cache())
        at = np.asfortranarray(a)
        assert_close(einjit.einsum("ij,jk->ik", at, b), expected, dtype, 6)
        reversed_rows = a[::-1]                      # negative strides: copied first
        for _ in range(2):
            assert_close(einjit.einsum("ij,jk->ik", reversed_rows, b), expected[::-1], dtype, 6)
        f_order = einjit.einsum("ij,jk->ik", a, b, order="F")
        assert f_order.flags.f_contiguous
        assert_close(f_order, expected, dtype, 6)
        assert len(plan_cache()) >= min(size + 2, plan_cache().maxsize)
        scalar = einjit.einsum("i,i->", a[0].copy(), a[1].copy())
    assert type(scalar) is dtype.type
    assert_close(scalar, np.dot(a[0].astype(np.longdouble), a[1]), dtype, 6)


def test_out_sharing_memory_with_an_operand_in_another_layout(dtype):
    # out overlaps an input: the result is computed aside and copied, in out's layout
    rng = np.random.default_rng(24)
    a, b = random_operands(rng, [(6, 6), (6, 6)], dtype)
    expected = a.astype(np.longdouble) @ b
    out = np.asfortranarray(a)
    a_view = out                                     # same memory as out, Fortran order
    expr = einjit.contract_expression("ij,jk->ik", (6, 6), (6, 6), dtype=dtype)
    with numpy_einsum_forbidden():
        result = expr(a_view, b, out=out)
    assert result is out
    assert_close(out, expected, dtype, 6)
