"""numpy's einsum semantics on shapes: ellipsis expansion, implicit output, label sizes with
size-1 broadcasting, diagonals. The result gives every distinct label an integer dim id and
says, per operand, which strided view (diagonal taken, size-1 axes dropped) the tree reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from einjit.frontend.errors import EinsumValueError
from einjit.frontend.parser import ELLIPSIS, Subscripts, check_subscripts


@dataclass(frozen=True)
class Resolved:
    letters: tuple[str, ...]              # dim id -> label ("...0", "...1" for ellipsis dims)
    sizes: tuple[int, ...]                # dim id -> size (broadcast)
    axes: tuple[tuple[int, ...], ...]     # per operand: dim id of each original axis
    inputs: tuple[tuple[int, ...], ...]   # per operand: distinct dims of its view (size > 1)
    full_output: tuple[int, ...]          # the result's dims (incl. size-1 dims)
    output: tuple[int, ...]               # the result's dims of size > 1 (the tree's output)

    @property
    def has_views(self) -> bool:
        """Some operand is read through a diagonal or with size-1 axes dropped."""
        return any(len(a) != len(i) for a, i in zip(self.axes, self.inputs))

    def view_strides(self, operand: int, strides: Sequence[int]) -> tuple[int, ...]:
        """Strides (any unit) of operand's view along inputs[operand], from its axis strides:
        a diagonal's stride is the sum of its axes' strides."""
        result = []
        for dim in self.inputs[operand]:
            result.append(sum(s for a, s in zip(self.axes[operand], strides) if a == dim))
        return tuple(result)


def _expand(parsed: Subscripts, shapes: Sequence[tuple[int, ...]]):
    """Per operand the list of labels of its axes, with '...' replaced by ellipsis labels
    (right-aligned across operands, as numpy broadcasts them), and the ellipsis rank."""
    terms = parsed.inputs
    if len(shapes) > len(terms):
        raise EinsumValueError(
            f"more operands ({len(shapes)}) provided to einsum than the subscripts "
            f"{parsed.expression!r} specify ({len(terms)})")
    if len(shapes) < len(terms):
        raise EinsumValueError(
            f"fewer operands ({len(shapes)}) provided to einsum than the subscripts "
            f"{parsed.expression!r} specify ({len(terms)})")
    expanded: list[list[str]] = []
    rank = 0
    for index, (term, shape) in enumerate(zip(terms, shapes)):
        ellipses = [label for label in term if label.name == ELLIPSIS]
        if len(ellipses) > 1:
            raise parsed.error(ellipses[1].column,
                               f"operand {index}'s subscripts contain more than one '...'")
        letters = len(term) - len(ellipses)
        if letters > len(shape) or (not ellipses and letters != len(shape)):
            column = term[0].column if term else max(parsed.arrow_column, 0)
            raise parsed.error(column, (
                f"operand {index} has {len(shape)} dimensions (shape {tuple(shape)}) but its "
                f"subscripts name {letters}" + ("" if ellipses else
                                                " and have no '...' to broadcast the rest")))
        here = len(shape) - letters
        rank = max(rank, here)
        labels = []
        for label in term:
            if label.name == ELLIPSIS:
                labels.extend(None for _ in range(here))   # filled below, right-aligned
            else:
                labels.append(label.name)
        expanded.append(labels)
    for labels in expanded:
        count = labels.count(None)
        names = iter(f"...{i}" for i in range(rank - count, rank))
        labels[:] = [next(names) if name is None else name for name in labels]
    return expanded, rank


def _output_labels(parsed: Subscripts, expanded: list[list[str]], rank: int) -> list[str]:
    ellipsis = [f"...{i}" for i in range(rank)]
    if parsed.output is None:
        counts: dict[str, int] = {}
        for labels in expanded:
            for name in labels:
                counts[name] = counts.get(name, 0) + 1
        # numpy: broadcast dims first, then the letters used once, in ASCII order
        return ellipsis + sorted(n for n, c in counts.items() if c == 1 and not n.startswith("."))
    seen: set[str] = set()
    result: list[str] = []
    present = set().union(*expanded) if expanded else set()
    has_ellipsis = False
    for label in parsed.output:
        if label.name == ELLIPSIS:
            if has_ellipsis:
                raise parsed.error(label.column, "the output contains more than one '...'")
            has_ellipsis = True
            result.extend(ellipsis)
            continue
        if label.name in seen:
            raise parsed.error(label.column,
                               f"the output subscript {label.name!r} appears more than once")
        if label.name not in present:
            raise parsed.error(label.column,
                               f"the output subscript {label.name!r} appears in no input")
        seen.add(label.name)
        result.append(label.name)
    if rank and not has_ellipsis:
        raise parsed.error(parsed.arrow_column + 2, (
            f"the operands have {rank} broadcast ('...') dimensions but the output names "
            f"none: add '...' to the output to keep them"))
    return result


def resolve(subscripts: str | Subscripts, shapes: Sequence[tuple[int, ...]]) -> Resolved:
    """Dim ids, sizes and per-operand views of numpy `subscripts` over arrays of `shapes`.
    Raises EinsumSyntaxError/EinsumValueError (both ValueError, as numpy)."""
    parsed = subscripts if isinstance(subscripts, Subscripts) else check_subscripts(subscripts)
    expanded, rank = _expand(parsed, shapes)
    out_labels = _output_labels(parsed, expanded, rank)
    ids: dict[str, int] = {}
    for labels in expanded:
        for name in labels:
            ids.setdefault(name, len(ids))
    sizes = [1] * len(ids)
    origin: dict[int, int] = {}
    for index, (labels, shape) in enumerate(zip(expanded, shapes)):
        mine: dict[str, int] = {}
        for name, size in zip(labels, shape):
            if name in mine and mine[name] != size:
                raise EinsumValueError(
                    f"{parsed.expression!r}: the dimensions of operand {index} for the repeated "
                    f"subscript {name!r} differ ({mine[name]} != {size}); a diagonal needs "
                    f"equal sizes")
            mine[name] = size
        for name, size in mine.items():
            dim = ids[name]
            if size != 1 and sizes[dim] != 1 and sizes[dim] != size:
                shown = name if not name.startswith(".") else f"broadcast dimension {name[3:]}"
                raise EinsumValueError(
                    f"{parsed.expression!r}: subscript {shown!r} has size {size} in operand "
                    f"{index} but {sizes[dim]} in operand {origin[dim]}; sizes must match or "
                    f"be 1 (operand shapes {[tuple(s) for s in shapes]})")
            if size != 1 and sizes[dim] == 1:
                sizes[dim] = size
                origin[dim] = index
    axes = tuple(tuple(ids[n] for n in labels) for labels in expanded)
    inputs = []
    for labels, shape in zip(expanded, shapes):
        dims = []
        for name, size in zip(labels, shape):
            dim = ids[name]
            if size != 1 and dim not in dims:
                dims.append(dim)
        inputs.append(tuple(dims))
    full_output = tuple(ids[n] for n in out_labels)
    letters = [""] * len(ids)
    for name, dim in ids.items():
        letters[dim] = name
    return Resolved(tuple(letters), tuple(sizes), axes, tuple(inputs), full_output,
                    tuple(d for d in full_output if sizes[d] != 1))
