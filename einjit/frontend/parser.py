"""Expressions as plain dataclasses: numpy subscripts (`Subscripts`) or an einsum tree in the
bracket notation (`BracketNode`), plus numpy's interleaved sublist form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import lark

from einjit.frontend.errors import EinsumSyntaxError, EinsumTypeError, EinsumValueError, point_at
from einjit.frontend.grammar import parse_tree

ELLIPSIS = "..."


@dataclass(frozen=True)
class Label:
    """One subscript: a letter or ELLIPSIS, and its column in the expression (for errors)."""
    name: str
    column: int


@dataclass(frozen=True)
class Subscripts:
    """numpy notation: one label tuple per operand; output None when implicit."""
    expression: str
    inputs: tuple[tuple[Label, ...], ...]
    output: tuple[Label, ...] | None
    arrow_column: int = -1

    def error(self, column: int, message: str) -> EinsumValueError:
        return EinsumValueError(point_at(self.expression, column, message))


@dataclass(frozen=True)
class BracketNode:
    """Einsum-tree notation: dims slowest first; a leaf has no children. `columns` holds the
    column of each dim id (for errors)."""
    dims: tuple[int, ...]
    children: tuple["BracketNode", ...] = ()
    columns: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Output:
    arrow_column: int
    labels: tuple[Label, ...]


class _Build(lark.Transformer):
    def __init__(self, expression: str):
        super().__init__()
        self.expression = expression

    def term(self, tokens):
        return tuple(Label(str(token), token.start_pos) for token in tokens)

    def output(self, items):
        arrow, term = items
        return _Output(arrow.start_pos, term)

    def subscripts(self, items):
        if items and isinstance(items[-1], _Output):
            return Subscripts(self.expression, tuple(items[:-1]), items[-1].labels,
                              items[-1].arrow_column)
        return Subscripts(self.expression, tuple(items), None)

    def dims(self, tokens):
        return (tuple(int(t) for t in tokens), tuple(t.start_pos for t in tokens))

    def leaf(self, items):
        dims, columns = items[0]
        return BracketNode(dims, (), columns)

    def children(self, nodes):
        return tuple(nodes)

    def operation(self, items):
        children, _arrow, (dims, columns) = items
        return BracketNode(dims, children, columns)

    root = operation

    def root_leaf(self, items):
        dims, columns = items[0]
        return BracketNode(dims, (), columns)

    def start(self, items):
        return items[0]


def parse(expression: str) -> Subscripts | BracketNode:
    """Parse numpy subscripts or the bracket notation; EinsumSyntaxError (ValueError) if neither."""
    tree = parse_tree(expression)
    try:
        return _Build(expression).transform(tree)
    except lark.exceptions.VisitError as error:   # lark wraps errors raised in callbacks
        raise error.orig_exc from None


def is_bracket(expression: str) -> bool:
    return expression.lstrip().startswith("[")


def _letter(value: Any) -> str:
    if value is Ellipsis:
        return ELLIPSIS
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise EinsumTypeError(
            f"each subscript must be either an integer or an ellipsis, got {value!r}")
    index = value.__index__()
    if not 0 <= index < 52:
        raise EinsumValueError(f"subscript {index} is not within the valid range [0, 52)")
    return chr(ord("A") + index) if index < 26 else chr(ord("a") + index - 26)


def from_sublists(arguments: Sequence[Any]) -> tuple[str, list[Any]]:
    """numpy's interleaved form `op0, sublist0, op1, sublist1, ..., [output]` as a subscripts
    string and the operands (integers 0-25 are 'A'-'Z', 26-51 'a'-'z', as numpy maps them)."""
    arguments = list(arguments)
    output = arguments.pop() if len(arguments) % 2 == 1 else None
    operands, sublists = arguments[0::2], arguments[1::2]
    terms = []
    for sublist in sublists:
        try:
            items = list(sublist)
        except TypeError:
            raise EinsumTypeError(
                f"each sublist must be a list of integers or Ellipsis, got {sublist!r}") from None
        terms.append("".join(_letter(v) for v in items))
    expression = ",".join(terms)
    if output is not None:
        try:
            items = list(output)
        except TypeError:
            raise EinsumTypeError(
                f"the output sublist must be a list of integers or Ellipsis, "
                f"got {output!r}") from None
        expression += "->" + "".join(_letter(v) for v in items)
    return expression, operands


def check_subscripts(expression: str) -> Subscripts:
    parsed = parse(expression)
    if not isinstance(parsed, Subscripts):
        raise EinsumSyntaxError(point_at(
            expression, 0, "expected numpy subscripts here (the bracket notation needs sizes: "
                           "use einjit.EinsumTree)"))
    return parsed
