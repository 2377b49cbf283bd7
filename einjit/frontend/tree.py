"""Contraction trees (`EinsumTree`): built from the bracket notation and a size list, or from
dim ids per operand with the order chosen by opt_einsum (frontend.paths).

A node's dims are listed slowest first (row-major, numpy's C order: the last dim has unit
stride in a dense tensor). A leaf stands for input operand `operand`; a node with one child
permutes and/or reduces it, a node with two children contracts them (dims of the children
missing from the node's dims are summed). After `rewrite.optimize_tree`, the left child of a
contraction is in0 of its GEMM (it provides the output's unit-stride dim as m)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from einjit.frontend.errors import EinsumTypeError, EinsumValueError, point_at
from einjit.frontend.parser import BracketNode, parse
from einjit.frontend.paths import contraction_path


@dataclass(frozen=True)
class Node:
    dims: tuple[int, ...]
    children: tuple["Node", ...] = ()
    # leaves: index of the input operand. Not compared: the bracket notation numbers leaves
    # left to right, so a tree equals its round trip through str() whatever its operand order
    operand: int = field(default=-1, compare=False)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def nodes(self) -> Iterator["Node"]:
        """Post-order: children before parents (execution order)."""
        for child in self.children:
            yield from child.nodes()
        yield self

    def text(self) -> str:
        dims = "[" + ",".join(map(str, self.dims)) + "]"
        if self.is_leaf:
            return dims
        return "[" + ",".join(c.text() for c in self.children) + "->" + dims + "]"


def _bracket_to_node(parsed: BracketNode, expression: str, sizes: Sequence[int],
                     counter: list[int]) -> Node:
    for dim, column in zip(parsed.dims, parsed.columns):
        if dim >= len(sizes):
            raise EinsumValueError(point_at(
                expression, column,
                f"dimension id {dim} has no size: the size list has {len(sizes)} entries"))
    if len(set(parsed.dims)) != len(parsed.dims):
        dup = next(d for i, d in enumerate(parsed.dims) if d in parsed.dims[:i])
        column = parsed.columns[[i for i, d in enumerate(parsed.dims) if d == dup][1]]
        raise EinsumValueError(point_at(expression, column,
                                        f"dimension id {dup} appears twice in one tensor"))
    if not parsed.children:
        counter[0] += 1
        return Node(parsed.dims, (), counter[0] - 1)
    children = tuple(_bracket_to_node(c, expression, sizes, counter) for c in parsed.children)
    available = set().union(*(c.dims for c in children))
    for dim, column in zip(parsed.dims, parsed.columns):
        if dim not in available:
            raise EinsumValueError(point_at(
                expression, column, f"dimension id {dim} of this node is in none of its children"))
    return Node(parsed.dims, children)


def _node_flops(node: Node, sizes: Sequence[int]) -> int:
    if len(node.children) != 2:
        return 0
    total = 1
    for dim in set(node.dims).union(*(c.dims for c in node.children)):
        total *= sizes[dim]
    return 2 * total


def summed_leaves(inputs: Sequence[Sequence[int]], output: Sequence[int]) -> list[Node]:
    """One node per operand: its leaf, or (with two or more operands) the leaf summed over
    the dims no other operand and not the output has. The contraction path orders these."""
    inputs = [tuple(t) for t in inputs]
    nodes: list[Node] = []
    for index, dims in enumerate(inputs):
        leaf = Node(dims, (), index)
        others = set(output).union(*(inputs[:index] + inputs[index + 1:]))
        kept = tuple(d for d in dims if d in others)
        if len(kept) < len(dims) and len(inputs) > 1:
            leaf = Node(kept, (leaf,))
        nodes.append(leaf)
    return nodes


class EinsumTree:
    """A contraction tree over input operands with integer dimension ids and sizes.

        EinsumTree("[[8,4],[7,3,8]->[7,3,4]],[[0,5],...]->[0,1,2,3,4]", [100, 72, ...])
        EinsumTree.from_subscripts("af,fbg,gch->abch", (5, 6), (6, 7, 8), (8, 9, 10))

    `str(tree)` is the bracket notation (it parses back to an equal tree); `tree.sizes[d]` the
    size of dim d; `tree.optimize()` returns the tree rewritten for column-major primitives."""

    def __init__(self, expression: str | Node, sizes: Sequence[int] | Mapping[int, int],
                 *, letters: Sequence[str] | None = None):
        if isinstance(sizes, Mapping):
            count = max(sizes, default=-1) + 1
            missing = [d for d in range(count) if d not in sizes]
            if missing:
                raise EinsumValueError(f"the size mapping lacks dimension ids {missing}")
            sizes = [sizes[d] for d in range(count)]
        try:
            sizes = tuple(int(s.__index__()) for s in sizes)
        except (AttributeError, TypeError):
            raise EinsumTypeError(f"sizes must be integers, got {sizes!r}") from None
        bad = [s for s in sizes if s < 1]
        if bad:
            raise EinsumValueError(f"dimension sizes must be >= 1, got {list(sizes)}")
        self.sizes: tuple[int, ...] = sizes
        self.letters = tuple(letters) if letters is not None else None
        if isinstance(expression, Node):
            self.root = expression
        else:
            parsed = parse(expression)
            if not isinstance(parsed, BracketNode):
                raise EinsumValueError(point_at(
                    expression, 0, "expected the bracket notation (e.g. '[0,1],[1,2]->[0,2]'); "
                                   "for numpy subscripts use EinsumTree.from_subscripts"))
            self.root = _bracket_to_node(parsed, expression, sizes, [0])
        leaves = [n for n in self.root.nodes() if n.is_leaf]
        self.leaves: tuple[Node, ...] = tuple(sorted(leaves, key=lambda n: n.operand))
        used = set().union(*(n.dims for n in self.root.nodes()))
        unused = [d for d in range(len(sizes)) if d not in used]
        if unused and not isinstance(expression, Node):
            raise EinsumValueError(
                f"the size list has {len(sizes)} entries but dimension ids {unused} never occur")

    # -- construction from numpy-style dims -------------------------------------------------
    @classmethod
    def from_dims(cls, inputs: Sequence[Sequence[int]], output: Sequence[int],
                  sizes: Sequence[int], optimize: Any = "auto",
                  *, letters: Sequence[str] | None = None) -> "EinsumTree":
        """Tree for operands with (distinct) dim ids `inputs` and result dims `output`.
        Dims only one operand has and the output lacks are summed first (a one-child node);
        the contraction order comes from opt_einsum (see paths.contraction_path)."""
        output = tuple(output)
        nodes = summed_leaves(inputs, output)
        path = contraction_path([n.dims for n in nodes], output, sizes, optimize)
        for step in path:
            chosen = [nodes[p] for p in step]
            for p in sorted(step, reverse=True):
                del nodes[p]
            keep = set(output).union(*(n.dims for n in nodes))
            while len(chosen) > 1:      # steps of three or more operands: left to right
                left, right = chosen[0], chosen[1]
                rest = keep.union(*(n.dims for n in chosen[2:]))
                dims = tuple(d for d in dict.fromkeys(left.dims + right.dims) if d in rest)
                chosen = [Node(dims, (left, right))] + chosen[2:]
            only = chosen[0]
            if len(step) == 1:
                dims = tuple(d for d in only.dims if d in keep)
                only = Node(dims, (only,))
            nodes.append(only)
        root = nodes[0]
        if root.dims != output:
            if not root.is_leaf and set(root.dims) == set(output):
                root = Node(output, root.children)      # only the order differs
            else:
                root = Node(output, (root,))            # a permutation and/or reduction
        return cls(root, sizes, letters=letters)

    @classmethod
    def from_subscripts(cls, subscripts: str, *shapes: Sequence[int],
                        optimize: Any = "auto") -> "EinsumTree":
        """Tree of numpy subscripts over operands of `shapes` (no repeated letters in one
        operand, no size-1 broadcasting: those are views that einjit.einsum takes before)."""
        from einjit.frontend.subscripts import resolve
        resolved = resolve(subscripts, [tuple(s) for s in shapes])
        if resolved.has_views:
            raise EinsumValueError(
                f"{subscripts!r}: diagonals and size-1 broadcasting are views of the operands; "
                f"build the tree through einjit.contract_expression or einjit.einsum")
        return cls.from_dims(resolved.inputs, resolved.output, resolved.sizes, optimize,
                             letters=resolved.letters)

    # -- inspection ---------------------------------------------------------------------------
    def __str__(self) -> str:
        text = self.root.text()
        return text[1:-1] if not self.root.is_leaf else text

    def __repr__(self) -> str:
        return f"EinsumTree({str(self)!r}, {list(self.sizes)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EinsumTree) and self.root == other.root and \
            self.sizes == other.sizes

    __hash__ = None  # type: ignore[assignment]

    @property
    def output(self) -> tuple[int, ...]:
        return self.root.dims

    @property
    def num_operands(self) -> int:
        return len(self.leaves)

    def flops(self) -> int:
        """Multiply-adds counted as 2 flops, summed over the contraction nodes."""
        return sum(_node_flops(n, self.sizes) for n in self.root.nodes())

    def pretty(self) -> str:
        """The tree drawn as text, root first, each child indented below its parent."""
        lines: list[str] = []

        def draw(node: Node, prefix: str, tail: str) -> None:
            label = ",".join(map(str, node.dims))
            if node.is_leaf:
                label += f"  (operand {node.operand})"
            lines.append(prefix + tail + label)
            child_prefix = prefix + ("   " if tail.startswith("└") else "│  " if tail else "")
            for i, child in enumerate(node.children):
                draw(child, child_prefix, "└─ " if i == len(node.children) - 1 else "├─ ")
        draw(self.root, "", "")
        return "\n".join(lines)

    def _repr_svg_(self) -> str:
        """Jupyter's picture of the tree (einjit.display.tree_svg)."""
        from einjit.display import tree_svg
        return tree_svg(self)

    def optimize(self, **options: Any) -> "EinsumTree":
        """The tree rewritten for column-major GEMM/BRGEMM (see frontend.rewrite)."""
        from einjit.frontend.rewrite import optimize_tree
        return optimize_tree(self, **options)
