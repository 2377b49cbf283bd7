"""The frontend's exceptions: subclasses of einjit.errors.EinjitError and of the builtin numpy
raises for the same mistake (ValueError for a bad expression, shape or option, TypeError for a
bad type), so code written against numpy.einsum catches them unchanged."""

from __future__ import annotations

from einjit.errors import EinjitError


class EinsumSyntaxError(EinjitError, ValueError):
    """An einsum expression does not parse; the message quotes it with a caret under the column."""


class EinsumValueError(EinjitError, ValueError):
    """An expression, shape, size list, path or option that is well-typed but wrong."""


class EinsumTypeError(EinjitError, TypeError):
    """An argument of the wrong type (sublist entries, optimize=, out=)."""


class EinsumPathError(EinjitError, RuntimeError, ValueError):
    """An explicit contraction path that does not contract the operands into one: numpy raises
    RuntimeError for it."""


class EinsumPathNameError(EinsumValueError, KeyError):
    """optimize= names no path algorithm: numpy raises KeyError for it."""

    def __str__(self) -> str:        # KeyError's would quote the message
        return str(self.args[0]) if self.args else ""


def point_at(expression: str, column: int, message: str) -> str:
    """`message` followed by the expression and a caret under `column` (0-based)."""
    return f"{message}\n  {expression}\n  {' ' * column}^"
