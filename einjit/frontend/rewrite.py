"""Tree optimization: choose, top down, which child of each
contraction is in0 (the one that provides the output's unit-stride dim as GEMM m), the dim
order of every intermediate (so that in0 sees m, in1 sees k at unit stride), and insert
permutation nodes only where an input's layout cannot serve the primitive.

Layouts: leaves are read with their real strides (given per operand), intermediates are dense
and row-major in their dims order (last dim unit stride), the root is written with the given
output strides (dense row-major if none)."""

from __future__ import annotations

from typing import Mapping, Sequence

from einjit.frontend.tree import EinsumTree, Node

Strides = Mapping[int, int]     # dim id -> stride in elements
SMALL_M = 16                    # GEMM rows below which a contraction may take its own layout
LARGER_M = 4                    # ... if that gives it this many times the rows
MIN_SUMMED_FOR_PERMUTE = 64     # ... and it sums this many products per result element


def dense_strides(dims: Sequence[int], sizes: Sequence[int]) -> dict[int, int]:
    strides, step = {}, 1
    for dim in reversed(dims):
        strides[dim] = step
        step *= sizes[dim]
    return strides


class _Rewriter:
    def __init__(self, sizes: Sequence[int], leaf_strides: Mapping[int, Strides]):
        self.sizes = sizes
        self.leaf_strides = leaf_strides

    # -- what a child can offer -----------------------------------------------------------
    def unit_dim(self, node: Node) -> int | None:
        """The dim with unit stride in `node` as laid out now (None if none)."""
        if node.is_leaf:
            strides = self.leaf_strides[node.operand]
            units = [d for d in node.dims if strides[d] == 1 and self.sizes[d] > 1]
            return units[0] if units else None
        return node.dims[-1] if node.dims else None

    def can_lead(self, node: Node, dim: int) -> bool:
        """Whether `node` can be computed with `dim` at unit stride without a permutation."""
        if node.is_leaf:
            return self.unit_dim(node) == dim
        if len(node.children) == 2:
            return sum(dim in c.dims for c in node.children) == 1
        return True

    def arrange(self, node: Node, order: tuple[int, ...]) -> Node:
        """`node` producing its dims in `order` (last = unit stride). Leaves keep their layout:
        a permutation node on top re-lays them out when `order` asks for another unit dim."""
        if node.is_leaf:
            if order and self.unit_dim(node) != order[-1]:
                return Node(order, (node,))
            return node
        (child, *_) = node.children
        if len(node.children) == 1 and child.is_leaf and set(child.dims) == set(node.dims) \
                and (not order or self.unit_dim(child) == order[-1]):
            return child     # a permutation of a leaf the parent can read as it is
        return self.place(Node(order, node.children), fixed=None)

    # -- the rewrite ----------------------------------------------------------------------
    def place(self, node: Node, fixed: Strides | None) -> Node:
        """Rewrite the subtree under `node`, whose output is laid out by `fixed` strides (the
        root) or dense in node.dims order (an intermediate)."""
        if node.is_leaf:
            return node
        strides = fixed if fixed is not None else dense_strides(node.dims, self.sizes)
        units = [d for d in node.dims if strides[d] == 1 and self.sizes[d] > 1]
        unit = units[0] if units else None
        if len(node.children) == 1:
            return self._place_unary(node, unit, fixed)
        return self._place_binary(node, unit, fixed)

    def _place_unary(self, node: Node, unit: int | None, fixed: Strides | None) -> Node:
        (child,) = node.children
        reduced = tuple(d for d in child.dims if d not in node.dims)
        if child.is_leaf:
            return node
        if not reduced and fixed is None:
            # a permutation of an intermediate costs nothing: compute it in this order
            return self.place(Node(node.dims, child.children), None)
        # reduction: the child with the kept unit dim last serves a GEMM against ones as in0
        order = reduced + node.dims if unit is not None else node.dims + reduced
        return Node(node.dims, (self.arrange(child, order),))

    def _place_binary(self, node: Node, unit: int | None, fixed: Strides | None) -> Node:
        left, right = node.children
        out = set(node.dims)
        in_left = unit is not None and unit in left.dims
        in_right = unit is not None and unit in right.dims
        if in_left and in_right and self._sum_of_product(node, unit):
            # out[j] = sum_i a[i, j] b[i, j] along the unit-stride j: the product as a
            # Hadamard (vectors of j), then summed as a GEMM against ones, m = j
            reduced = tuple(d for d in left.dims if d not in out)
            return self.place(Node(node.dims, (Node(reduced + node.dims, (left, right)),)),
                              fixed)
        if in_left == in_right:
            if not (out == set(left.dims) == set(right.dims)) and fixed is not None:
                # the caller's unit dim cannot be GEMM m: compute in our own order, permute
                own = self._own_order(node)
                if own is not None and own != node.dims:
                    return Node(node.dims, (self.place(Node(own, node.children), None),))
            if out == set(left.dims) == set(right.dims):   # Hadamard: same layout everywhere
                return Node(node.dims, (self.arrange(left, node.dims),
                                        self.arrange(right, node.dims)))
            a, b = self._pick_in0(left, right)
        else:
            a, b = (left, right) if in_left else (right, left)
            if self._read_once(a, b, unit, out):
                a, b = b, a
        k_dims = [d for d in a.dims if d in b.dims and d not in out]
        c_dims = [d for d in node.dims if d in a.dims and d in b.dims]
        m_dims = [d for d in node.dims if d in a.dims and d not in b.dims]
        n_dims = [d for d in node.dims if d in b.dims and d not in a.dims]
        only_a = [d for d in a.dims if d not in out and d not in b.dims]
        only_b = [d for d in b.dims if d not in out and d not in a.dims]
        k_prim = self._pick_k(b, k_dims)
        k_rest = [d for d in k_dims if d != k_prim]
        k_last = [k_prim] if k_prim is not None else []
        # in0 is [m dims the GEMM m block cannot take][k dims][the m block]: an A block is
        # then contiguous (ld_a = the block's rows), not spread over the other m dims
        m_block = self._m_block(m_dims, fixed if fixed is not None
                                else dense_strides(node.dims, self.sizes))
        if not m_block:         # out has no unit-stride m dim: every m dim goes last
            m_block = m_dims
        m_outer = [d for d in m_dims if d not in m_block]
        a_order = tuple(c_dims + only_a + m_outer + k_rest + k_last + m_block)
        b_order = tuple(c_dims + n_dims + only_b + k_rest + k_last)
        a_new = self.arrange_child(a, a_order) \
            if not a.is_leaf or (m_block and unit is not None) else a
        b_new = self.arrange_child(b, b_order) if not b.is_leaf or k_prim is not None else b
        return Node(node.dims, (a_new, b_new))

    def _sum_of_product(self, node: Node, unit: int) -> bool:
        """Whether a contraction of two children with the same dims, out's unit dim among them,
        is computed as their Hadamard product then a sum: each child then walks its unit
        stride, where as a GEMM the unit dim would be a batch dim (a 1 x 1 dot product per
        element of out, across strides)."""
        left, right = node.children
        return (set(left.dims) == set(right.dims) != set(node.dims)
                and all(not c.is_leaf or self.unit_dim(c) == unit for c in (left, right)))

    def _read_once(self, a: Node, b: Node, unit: int, out: set[int]) -> bool:
        """Whether leaf `a`, which has out's unit dim but not at unit stride, is better read
        in place as in1 (its unit-stride dim a k dim) than permuted to serve as in0: every
        element of it enters one product only (b has no dim beyond a's and out's), so a copy
        would move as many bytes as the product reads (a matrix times a vector)."""
        if not a.is_leaf or any(d not in a.dims for d in b.dims):
            return False
        lead = self.unit_dim(a)
        return lead is not None and lead != unit and lead in b.dims and lead not in out

    def _m_block(self, m_dims: list[int], out_strides: Strides) -> list[int]:
        """The m dims that fuse with out's unit-stride dim into the GEMM's m (outer first):
        from unit stride up, while each next dim is an m dim continuing the previous ones."""
        block, step = [], 1
        for d in sorted(out_strides, key=lambda d: (out_strides[d], -self.sizes[d])):
            if self.sizes[d] == 1:
                continue
            if d not in m_dims or out_strides[d] != step:
                break
            block.insert(0, d)
            step *= self.sizes[d]
        return block

    def arrange_child(self, node: Node, order: tuple[int, ...]) -> Node:
        """`node` producing its dims in `order`, as arrange() does; but a contraction that
        `order` would leave a GEMM of fewer than SMALL_M rows, where an order of its own gives
        it LARGER_M times as many, is computed in its own order and permuted to `order`: a
        permutation of its result costs less than its flops at a few rows a block (the
        einsum_ir trn layer: m 5 -> 980 on 75% of the flops)."""
        if node.is_leaf or len(node.children) != 2:
            return self.arrange(node, order)
        given = self._m_rows(node, order)
        own = self._rows_first_order(node)
        summed = self._product(set().union(*(c.dims for c in node.children)) - set(node.dims))
        if (given < SMALL_M and summed >= MIN_SUMMED_FOR_PERMUTE
                and self._m_rows(node, own) >= LARGER_M * given):
            return Node(order, (self.place(Node(own, node.children), None),))
        return self.arrange(node, order)

    def _m_rows(self, node: Node, order: tuple[int, ...]) -> int:
        """GEMM m of the contraction `node` laid out in `order`: the trailing dims of `order`
        that only one child has (they fuse into one m dim)."""
        left, right = node.children
        if not order or (order[-1] in left.dims) == (order[-1] in right.dims):
            return 1
        side, other = (left, right) if order[-1] in left.dims else (right, left)
        rows = 1
        for d in reversed(order):
            if d not in side.dims or d in other.dims:
                break
            rows *= self.sizes[d]
        return rows

    def _rows_first_order(self, node: Node) -> tuple[int, ...]:
        """node.dims with the dims only one child has (the larger group) moved last."""
        left, right = node.children
        best = ()
        for side, other in ((left, right), (right, left)):
            only = tuple(d for d in node.dims if d in side.dims and d not in other.dims)
            if self._product(only) > self._product(best):
                best = only
        return tuple(d for d in node.dims if d not in best) + best

    def _product(self, dims: Sequence[int]) -> int:
        result = 1
        for d in dims:
            result *= self.sizes[d]
        return result

    def _pick_in0(self, left: Node, right: Node) -> tuple[Node, Node]:
        """Without a unit dim to follow: in0 is the child whose unit dim is an m dim."""
        for a, b in ((left, right), (right, left)):
            u = self.unit_dim(a)
            if u is not None and u not in b.dims:
                return a, b
        return left, right

    def _pick_k(self, b: Node, k_dims: list[int]) -> int | None:
        """The k dim in1 should have at unit stride: the one it has already (a leaf), else the
        largest it can lead with."""
        if not k_dims:
            return None
        u = self.unit_dim(b) if b.is_leaf else None
        if u in k_dims:
            return u
        able = [d for d in k_dims if self.can_lead(b, d)]
        return max(able or k_dims, key=lambda d: self.sizes[d])

    def _own_order(self, node: Node) -> tuple[int, ...] | None:
        """A dims order for a contraction whose last dim can be m: prefer a leaf's unit dim."""
        left, right = node.children
        candidates = [d for d in node.dims if (d in left.dims) != (d in right.dims)]
        if not candidates:
            return None
        units = [self.unit_dim(c) for c in node.children]
        best = max(candidates, key=lambda d: (d in units, self.sizes[d]))
        return tuple(d for d in node.dims if d != best) + (best,)


def optimize_tree(tree: EinsumTree, *, leaf_strides: Mapping[int, Strides] | None = None,
                  out_strides: Strides | None = None, free_root: bool = False) -> EinsumTree:
    """`tree` rewritten so each contraction maps onto column-major GEMM/BRGEMM: left child =
    in0 with the output's unit-stride dim as m, right child = in1 with a k dim at unit stride.
    leaf_strides: operand -> {dim: stride} (dense row-major if None); out_strides: the root's
    strides (dense row-major in root order if None). free_root: the result's layout is ours to
    choose (numpy's order="K"): the root's dims are reordered like an intermediate's."""
    if leaf_strides is None:
        leaf_strides = {leaf.operand: dense_strides(leaf.dims, tree.sizes) for leaf in tree.leaves}
    root = tree.root
    rewriter = _Rewriter(tree.sizes, leaf_strides)
    if free_root and out_strides is None and not root.is_leaf:
        if len(root.children) == 2:
            own = rewriter._own_order(root)
        else:
            unit = rewriter.unit_dim(root.children[0])
            own = tuple(d for d in root.dims if d != unit) + (unit,) if unit in root.dims \
                else None
        if own is not None:
            root = Node(own, root.children)
    fixed = dict(out_strides) if out_strides is not None else dense_strides(root.dims, tree.sizes)
    rewritten = rewriter.place(root, fixed)
    return EinsumTree(rewritten, tree.sizes, letters=tree.letters)
