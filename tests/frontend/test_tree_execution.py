"""Bracket-notation trees executed through the public API (contract_expression(EinsumTree)),
LOWER (as written) and OPT (rewritten), against numpy node by node; and the fast call paths
of ContractExpression / einjit.einsum: same results as the checked path, every check a first
call with new arrays needs."""

import numpy as np
import pytest
from conftest import jit_available, random_operands
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
    """The tree, node by node, in float64 with numpy.einsum."""
    def value(node):
        if node.is_leaf:
            return operands[node.operand].astype(np.float64)
        terms = ",".join("".join(LETTERS[d] for d in c.dims) for c in node.children)
        return np.einsum(terms + "->" + "".join(LETTERS[d] for d in node.dims),
                         *[value(c) for c in node.children])
    return value(tree.root)


def leaf_operands(tree, seed):
    rng = np.random.default_rng(seed)
    return random_operands(rng, [[tree.sizes[d] for d in leaf.dims] for leaf in tree.leaves])


CASES = list(zip(COURSE_TREES, SMALL)) + EINSUM_IR_TREES


@pytest.mark.parametrize("optimize", [False, True], ids=["lower", "opt"])
@pytest.mark.parametrize("index", range(len(CASES)))
def test_bracket_trees_through_contract_expression(index, optimize):
    expression, sizes = CASES[index]
    tree = EinsumTree(expression, sizes)
    operands = leaf_operands(tree, index)
    expr = einjit.contract_expression(tree, optimize=optimize)
    assert expr.shapes == tuple(o.shape for o in operands)
    assert expr.shape == tuple(sizes[d] for d in tree.root.dims)
    if not optimize:
        assert expr.tree == tree                  # LOWER: executed as written
    expected = numpy_tree(tree, operands)
    for _ in range(2):                            # the checked first call, then the fast one
        result = expr(*operands)
        assert result.shape == expected.shape and result.dtype == np.float32
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-5)


def test_bracket_tree_with_views_out_and_float64():
    tree = EinsumTree("[[0,1],[1,2]->[0,2]],[2,3]->[0,3]", [6, 5, 7, 4])
    a, b, c = leaf_operands(tree, 3)
    expr = einjit.contract_expression(tree)
    expected = numpy_tree(tree, [a, b, c])
    # transposed and strided views get a plan of their own
    at = np.asfortranarray(a)
    bs = np.zeros((5, 14), np.float32)[:, ::2]
    bs[...] = b
    np.testing.assert_allclose(expr(at, bs, c), expected, rtol=1e-5, atol=1e-6)
    out = np.zeros((4, 6), np.float32).T
    assert expr(a, b, c, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    wide = einjit.contract_expression(tree, dtype="float64")
    result = wide(*[x.astype(np.float64) for x in (a, b, c)])
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, expected, rtol=1e-12)


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
def test_fast_path_results_equal_the_checked_path():
    rng = np.random.default_rng(21)
    a, b = random_operands(rng, [(13, 11), (11, 9)])
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape)
    first = expr(a, b)                               # plain arrays: the fast path
    checked = expr(a, b, out=np.empty((13, 9), np.float32))   # out=: the checked path
    assert np.array_equal(first, checked)
    again = einjit.einsum("ij,jk->ik", a, b)
    cached = einjit.einsum("ij,jk->ik", a, b)        # a plan in the cache: the fast path
    assert np.array_equal(again, cached) and np.array_equal(first, cached)
    assert cached is not again and cached.flags.c_contiguous


def test_fast_path_checks_what_a_new_call_needs():
    rng = np.random.default_rng(22)
    a, b = random_operands(rng, [(6, 7), (7, 5)])
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape)
    expr(a, b)
    with pytest.raises(ValueError, match="operand 0 has shape"):
        expr(a[:5], b)
    # another dtype goes to numpy (its own result dtype), not through float32 kernels
    result = expr(a.astype(np.float64), b)
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, a.astype(np.float64) @ b, rtol=1e-6)
    # a read-only operand, a transposed view, a non-array: same values
    readonly = a.copy()
    readonly.flags.writeable = False
    np.testing.assert_allclose(expr(readonly, b), a @ b, rtol=1e-5, atol=1e-6)
    bt = np.ascontiguousarray(b.T).T
    np.testing.assert_allclose(expr(a, bt), a @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(expr(a.tolist(), b), a @ b, rtol=1e-5, atol=1e-6)


def test_cached_einsum_with_other_strides_or_options_gets_its_own_plan():
    rng = np.random.default_rng(23)
    a, b = random_operands(rng, [(8, 6), (6, 9)])
    einjit.einsum("ij,jk->ik", a, b)
    size = len(plan_cache())
    at = np.asfortranarray(a)
    np.testing.assert_allclose(einjit.einsum("ij,jk->ik", at, b), a @ b, rtol=1e-5, atol=1e-6)
    reversed_rows = a[::-1]                          # negative strides: copied first
    np.testing.assert_allclose(einjit.einsum("ij,jk->ik", reversed_rows, b),
                               reversed_rows @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(einjit.einsum("ij,jk->ik", reversed_rows, b),
                               reversed_rows @ b, rtol=1e-5, atol=1e-6)
    f_order = einjit.einsum("ij,jk->ik", a, b, order="F")
    assert f_order.flags.f_contiguous
    np.testing.assert_allclose(f_order, a @ b, rtol=1e-5, atol=1e-6)
    assert len(plan_cache()) >= min(size + 2, plan_cache().maxsize)
    scalar = einjit.einsum("i,i->", a[0].copy(), a[1].copy())
    assert type(scalar) is np.float32
    assert np.isclose(scalar, np.dot(a[0], a[1]), rtol=1e-5)


def test_out_sharing_memory_with_an_operand_in_another_layout():
    # out overlaps an input: the result is computed aside and copied, in out's layout
    rng = np.random.default_rng(24)
    a = random_operands(rng, [(6, 6)])[0]
    b = random_operands(rng, [(6, 6)])[0]
    expected = a @ b
    out = np.asfortranarray(a)
    a_view = out                                     # same memory as out, Fortran order
    expr = einjit.contract_expression("ij,jk->ik", (6, 6), (6, 6))
    result = expr(a_view, b, out=out)
    assert result is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
