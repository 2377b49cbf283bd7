"""EinsumTree: bracket notation with sizes, str round trips, opt_einsum paths, the tree
rewrite, and the course's einsum trees (lowering and optimization examples, at small sizes)
computed through the plan with the IR's reference executor."""

import numpy as np
import pytest
from frontend_support import WIDER, assert_close, numpy_einsum_forbidden, random_operands
from test_grammar import COURSE_TREES

import einjit
from einjit import EinsumTree
from einjit.frontend.plan import Plan
from einjit.frontend.rewrite import dense_strides

COURSE_SIZES = [
    [100, 72, 128, 128, 3, 71, 305, 32, 3], [60, 60, 20, 20, 8, 8, 8, 8, 8, 8],
    [100, 72, 128, 128, 3, 71, 305, 32, 3], [60, 60, 20, 20, 8, 8, 8, 8, 8, 8],
    [40, 40, 40, 40, 40, 25, 25, 25, 25, 25],
]
SMALL = [[5, 4, 3, 6, 3, 7, 5, 4, 3], [6, 5, 4, 3, 3, 2, 3, 2, 4, 3],
         [5, 4, 3, 6, 3, 7, 5, 4, 3], [6, 5, 4, 3, 3, 2, 3, 2, 4, 3],
         [4, 5, 3, 4, 3, 5, 3, 4, 5, 3]]


@pytest.mark.parametrize("expression, sizes", list(zip(COURSE_TREES, COURSE_SIZES)))
def test_course_trees_round_trip(expression, sizes):
    tree = EinsumTree(expression, sizes)
    assert str(tree) == expression
    assert EinsumTree(str(tree), sizes) == tree
    optimized = tree.optimize()
    assert EinsumTree(str(optimized), sizes) == optimized
    assert tree.num_operands == {0: 5, 1: 4, 2: 5, 3: 4, 4: 5}[COURSE_TREES.index(expression)]


def test_flops_of_the_first_course_tree():
    tree = EinsumTree(COURSE_TREES[0], COURSE_SIZES[0])
    s = COURSE_SIZES[0]
    expected = 2 * (s[7] * s[3] * s[4] * s[8] + s[1] * s[2] * s[5] * s[6] * s[7]
                    + s[0] * s[1] * s[2] * s[5] * s[7] + s[0] * s[1] * s[2] * s[3] * s[4] * s[7])
    assert tree.flops() == expected


def evaluate(tree: EinsumTree, operands, optimize=True):
    """The tree computed by its plan (reference executor) in the operands' dtype and by numpy
    in a wider one, node by node."""
    leaf_strides = {leaf.operand: dense_strides(leaf.dims, tree.sizes) for leaf in tree.leaves}
    planned = tree.optimize() if optimize else tree
    out_strides = dense_strides(tree.root.dims, tree.sizes)
    dtype = operands[0].dtype
    plan = Plan(planned, leaf_strides, out_strides, optimize_ops=False, dtype=dtype.name)
    out = np.empty([tree.sizes[d] for d in tree.root.dims], dtype)
    plan.run(operands, out)
    return out, numpy_tree(tree, operands)


def numpy_tree(tree: EinsumTree, operands):
    """The tree computed node by node by numpy, in a wider dtype than the operands'."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    wider = WIDER[operands[0].dtype]

    def numpy_node(node):
        if node.is_leaf:
            return operands[node.operand].astype(wider)
        values = [numpy_node(c) for c in node.children]
        equation = ",".join("".join(letters[d] for d in c.dims) for c in node.children)
        return np.einsum(equation + "->" + "".join(letters[d] for d in node.dims), *values)
    return numpy_node(tree.root)


@pytest.mark.parametrize("optimize", [False, True], ids=["lower", "opt"])
@pytest.mark.parametrize("index", range(len(COURSE_TREES)))
def test_course_trees_compute(reference, index, optimize, dtype):
    tree = EinsumTree(COURSE_TREES[index], SMALL[index])
    rng = np.random.default_rng(index)
    operands = random_operands(rng, [[tree.sizes[d] for d in leaf.dims] for leaf in tree.leaves],
                               dtype)
    out, expected = evaluate(tree, operands, optimize)
    assert_close(out, expected, dtype, 100)


def _gemm_fit(tree: EinsumTree):
    """Contractions whose left child provides the output's unit dim as m at unit stride, and
    whose right child has a k dim at unit stride (leaves dense row-major)."""
    good = total = 0
    for node in tree.root.nodes():
        if len(node.children) != 2:
            continue
        total += 1
        left, right = node.children
        unit = node.dims[-1]
        k = [d for d in left.dims if d in right.dims and d not in node.dims]
        if unit in left.dims and unit not in right.dims and left.dims[-1] == unit and \
                (not k or right.dims[-1] in k):
            good += 1
    return good, total


@pytest.mark.parametrize("index", range(len(COURSE_TREES)))
def test_optimized_course_trees_map_onto_gemm(index):
    optimized = EinsumTree(COURSE_TREES[index], COURSE_SIZES[index]).optimize()
    good, total = _gemm_fit(optimized)
    assert good == total, optimized.pretty()


def _in0_layouts(tree: EinsumTree):
    """For each contraction: (in0's dims, the m block: the trailing dims of the node that only
    in0 has, k dims: those both children have and the node does not)."""
    for node in tree.root.nodes():
        if len(node.children) != 2:
            continue
        left, right = node.children
        block = []
        for d in reversed(node.dims):
            if d not in left.dims or d in right.dims:
                break
            block.insert(0, d)
        yield node, left.dims, block, set(left.dims) & set(right.dims) - set(node.dims)


@pytest.mark.parametrize("index", range(len(COURSE_TREES)))
def test_in0_is_laid_out_with_its_k_dims_next_to_the_m_block(index):
    """An A block of the GEMM is contiguous: in0 ends with the k dims, then the m block; m
    dims the block cannot take (out has n dims between them) come before the k dims."""
    optimized = EinsumTree(COURSE_TREES[index], COURSE_SIZES[index]).optimize()
    for node, in0, block, k in _in0_layouts(optimized):
        if node.children[0].is_leaf or not block:
            continue
        assert list(in0[len(in0) - len(block):]) == block, optimized.pretty()
        assert set(in0[len(in0) - len(block) - len(k):len(in0) - len(block)]) == k, \
            optimized.pretty()


def test_getd_root_reads_contiguous_a_blocks():
    """getd's root writes [5,6,7,8,9]: its m block is 9 alone (7 and 8 are n dims), so in0
    (m 5, 6, 9 and k 2, 4) is laid out [5,6,...,2/4...,9], not [2,4,5,6,9] (ld_a 25, not
    25^3: an A block 25 x 400 spread over 400 pages)."""
    optimized = EinsumTree(COURSE_TREES[4], COURSE_SIZES[4]).optimize()
    ((in0, block, k),) = [(in0, block, k) for node, in0, block, k in _in0_layouts(optimized)
                          if node is optimized.root]
    assert block == [9] and k == {2, 4}
    assert set(in0[:2]) == {5, 6} and set(in0[2:4]) == {2, 4} and in0[4] == 9


TRN = ("[[[[[8,13,14]->[13,14,8]],[4,12,13]->[4,12,14,8]],[[3,11,12],[2,9,11]->[3,2,9,12]]"
       "->[3,2,4,9,14,8]],[[[[7,14,15]->[7,15,14]],[[6,15,16]->[6,16,15]]->[6,7,16,14]],"
       "[[5,10,16],[1,9,10]->[5,1,9,16]]->[5,1,9,6,7,14]]->[5,1,3,2,4,6,7,8]],"
       "[[0,1,2,3,4]->[1,0,3,2,4]]->[0,5,6,7,8]")


def _gemm_rows(tree: EinsumTree, dims: set) -> int:
    """GEMM m of the contraction whose output has `dims`: its trailing dims that one child
    alone has."""
    (node,) = [n for n in tree.root.nodes() if set(n.dims) == dims and len(n.children) == 2]
    left, right = node.children
    side = left if node.dims[-1] in left.dims else right
    rows = 1
    for d in reversed(node.dims):
        if d not in side.dims or d in (right if side is left else left).dims:
            break
        rows *= tree.sizes[d]
    return rows


def test_a_contraction_left_few_rows_by_its_parent_takes_its_own_layout():
    """The einsum_ir trn layer: the root reads [5,1,3,2,4,6,7,8] with 8 (5 rows) at unit
    stride; computing that node with the dims only its left child has last (980 rows) and
    permuting its result costs less than a 5-row GEMM over 75% of the tree's flops."""
    sizes = [128, 4, 7, 4, 7, 3, 4, 5, 5] + [50] * 8
    tree = EinsumTree(TRN, sizes)
    optimized = tree.optimize()
    assert _gemm_rows(optimized, {5, 1, 3, 2, 4, 6, 7, 8}) == 4 * 7 * 7 * 5
    permutations = [n for n in optimized.root.nodes() if len(n.children) == 1
                    and set(n.dims) == {5, 1, 3, 2, 4, 6, 7, 8}]
    assert len(permutations) == 1 and permutations[0].dims[-1] == 8


@pytest.mark.native
def test_the_own_layout_with_its_permutation_computes_the_tree(dtype):
    sizes = [6, 2, 3, 2, 3, 3, 2, 3, 5] + [9] * 8      # the same choice at small sizes
    tree = EinsumTree(TRN, sizes)
    assert _gemm_rows(tree.optimize(), {5, 1, 3, 2, 4, 6, 7, 8}) == 2 * 3 * 3 * 5
    rng = np.random.default_rng(5)
    operands = random_operands(rng, [[sizes[d] for d in leaf.dims] for leaf in tree.leaves],
                               dtype)
    expected = numpy_tree(tree, operands)
    with numpy_einsum_forbidden():
        result = einjit.contract_expression(tree, dtype=dtype.name)(*operands)
    assert_close(result, expected, dtype, 81 * 81 * 4 * 7)


def test_optimization_keeps_a_good_tree_and_fixes_the_first_example():
    # the course's first example: only the [1,2,5,7] intermediate needs reordering (k=5 first)
    optimized = EinsumTree(COURSE_TREES[0], COURSE_SIZES[0]).optimize()
    assert str(optimized) == ("[[8,4],[7,3,8]->[7,3,4]],[[[2,6,7],[1,5,6]->[5,1,2,7]],[0,5]"
                              "->[0,1,2,7]]->[0,1,2,3,4]")
    assert str(optimized.optimize()) == str(optimized)


def test_useless_permutation_of_a_leaf_is_dropped():
    # the leaf [1,2] already has m=2 at unit stride for in0: its permutation is not needed
    tree = EinsumTree("[0,1],[[1,2]->[2,1]]->[0,2]", [3, 4, 5])
    assert str(tree.optimize()) == "[1,2],[0,1]->[0,2]"
    # [2,1] has 1 at unit stride, but in0 must have m=2 there: the permutation stays
    tree = EinsumTree("[0,1],[[2,1]->[2,1]]->[0,2]", [3, 4, 5])
    assert str(tree.optimize()) == "[[2,1]->[1,2]],[0,1]->[0,2]"


def test_tensor_train_from_subscripts():
    shapes = [(5, 6), (6, 7, 8), (8, 9, 10), (10, 11, 12), (12, 13)]
    tree = EinsumTree.from_subscripts("af,fbg,gch,hdi,ie->abcde", *shapes, optimize="optimal")
    assert tree.num_operands == 5
    assert [tuple(tree.sizes[d] for d in leaf.dims) for leaf in tree.leaves] == shapes
    assert EinsumTree(str(tree), tree.sizes) == tree
    assert tree.flops() > 0


@pytest.mark.native
@pytest.mark.parametrize("optimize", [False, True, "greedy", "optimal", "dp", "auto",
                                      "branch-2", "auto-hq", ["einsum_path", (1, 2), (0, 1)],
                                      [(0, 1), (0, 1)], [(0, 1, 2)]])
def test_paths(reference, optimize, dtype):
    rng = np.random.default_rng(11)
    shapes = [(3, 4), (4, 5), (5, 6)]
    operands = random_operands(rng, shapes, dtype)
    with numpy_einsum_forbidden():
        result = einjit.einsum("ij,jk,kl->il", *operands, optimize=optimize)
    assert result.dtype == dtype
    wide = [o.astype(np.longdouble) for o in operands]
    assert_close(result, wide[0] @ wide[1] @ wide[2], dtype, 20)


@pytest.mark.parametrize("expression, sizes, words", [
    ("[0,1],[1,2]->[0,2]", [3, 4], "no size"),
    ("[0,0]->[0]", [3], "appears twice"),
    ("[0,1],[1,2]->[0,3]", [3, 4, 5, 6], "in none of its children"),
    ("[0,1],[1,2]->[0,2]", [3, 4, 5, 6], "never occur"),
    ("[0,1],[1,2]->[0,2]", [3, 0, 5], ">= 1"),
    ("ij,jk->ik", [3, 4, 5], "bracket notation"),
])
def test_bracket_errors(expression, sizes, words):
    with pytest.raises(ValueError, match=words):
        EinsumTree(expression, sizes)


def test_sizes_as_mapping():
    tree = EinsumTree("[0,1],[1,2]->[0,2]", {0: 3, 1: 4, 2: 5})
    assert tree.sizes == (3, 4, 5)
    with pytest.raises(TypeError):
        EinsumTree("[0,1],[1,2]->[0,2]", ["a", 4, 5])


@pytest.mark.parametrize("optimize", [True, "auto"])
def test_default_path_is_never_costlier_than_greedy(optimize):
    """True/"auto" keep the cheaper of opt_einsum's auto and dp orders: on the course's tensor
    train greedy (and opt_einsum's auto) cost 5.5x the flops of the optimal order."""
    from opt_einsum.testing import rand_equation
    sizes = dict(zip("abcdefghi", [100, 72, 128, 128, 3, 71, 305, 32, 3]))
    equation = "af,fbg,gch,hdi,ie->abcde"
    shapes = [tuple(sizes[c] for c in term) for term in equation.split("->")[0].split(",")]
    tree = EinsumTree.from_subscripts(equation, *shapes, optimize=optimize)
    optimal = EinsumTree.from_subscripts(equation, *shapes, optimize="optimal")
    greedy = EinsumTree.from_subscripts(equation, *shapes, optimize="greedy")
    assert tree.flops() == optimal.flops() < greedy.flops() / 5
    # and on random equations it is never worse than greedy
    for seed in range(20):
        equation, shapes = rand_equation(6, 3, seed=seed, d_max=4)[:2]
        best = EinsumTree.from_subscripts(equation, *shapes, optimize=optimize)
        greedy = EinsumTree.from_subscripts(equation, *shapes, optimize="greedy")
        assert best.flops() <= greedy.flops(), equation
