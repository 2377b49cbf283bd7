"""numpy.einsum's rules for one call, as numpy's C einsum applies them, checked before einjit
computes anything: which objects are operands, which `order=` and `casting=` values are valid,
the dtype a call computes in and the casts `casting` must allow, which calls numpy answers
with a view of the operand, and the layout order="A" gives the result."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from einjit.frontend.subscripts import Resolved

CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
ORDERS = ("C", "F", "A", "K")


def _reads_only_dlpack(value: Any) -> bool:
    """An object numpy's array conversion does not read but np.from_dlpack does."""
    return not isinstance(value, (np.ndarray, np.generic, str, bytes, list, tuple)) \
        and hasattr(value, "__dlpack__") and not hasattr(value, "__array__") \
        and not hasattr(value, "__array_interface__")


def with_dlpack_converted(values: tuple) -> tuple:
    """`values` with each object that numpy reads only through DLPack replaced by its numpy
    array (np.from_dlpack, sharing its memory); the same tuple when there is none."""
    if not any(_reads_only_dlpack(v) for v in values):
        return values
    return tuple(np.from_dlpack(v) if _reads_only_dlpack(v) else v for v in values)


def _text(value: Any) -> Any:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


def order_letter(order: Any) -> str | None:
    """"C", "F", "A" or "K" for an `order=` numpy's einsum takes (any case, str or bytes;
    None means "K"), else None: numpy raises its own error for it."""
    if order is None:
        return "K"
    order = _text(order)
    if not isinstance(order, str) or order.upper() not in ORDERS:
        return None
    return order.upper()


def casting_rule(casting: Any) -> str | None:
    """The casting rule's name for a `casting=` numpy's einsum takes (str or bytes), else
    None: numpy raises its own error for it."""
    casting = _text(casting)
    return casting if isinstance(casting, str) and casting in CASTINGS else None


def computing_dtype(arrays: Sequence[np.ndarray], out: np.ndarray | None, dtype: Any,
                    casting: str) -> np.dtype | None:
    """The dtype numpy's einsum computes in (`dtype`, else the common dtype of the operands and
    out) when `casting` allows every cast it makes: each operand to it, and out both ways
    (numpy accumulates into out through the computing dtype). None where a cast is refused
    or `dtype` is no dtype: numpy raises its TypeError for the call."""
    if dtype is None:
        compute = np.result_type(*arrays, *([] if out is None else [out]))
    else:
        try:
            compute = np.dtype(dtype)
        except TypeError:
            return None
    if not all(np.can_cast(a.dtype, compute, casting) for a in arrays):
        return None
    if out is not None and not (np.can_cast(out.dtype, compute, casting)
                                and np.can_cast(compute, out.dtype, casting)):
        return None
    return compute


def is_view(resolved: Resolved) -> bool:
    """numpy returns a view of the operand (whatever dtype=, order= or casting= say): one
    operand, no out=, and every one of its subscripts kept in the output (no summation: a
    transpose, a diagonal, the operand itself)."""
    return len(resolved.axes) == 1 and set(resolved.axes[0]) <= set(resolved.full_output)


def _f_contiguous(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """numpy's F_CONTIGUOUS flag for a view of `shape` and byte `strides` (size-1 axes are
    ignored, an empty view is contiguous)."""
    if 0 in shape:
        return True
    expected = itemsize
    for size, stride in zip(shape, strides):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def any_order_layout(resolved: Resolved, arrays: Sequence[np.ndarray]) -> str:
    """order="A": "F" where every operand, read as numpy reads it (repeated subscripts merged
    into one diagonal axis), is Fortran-contiguous; else "C"."""
    for index, array in enumerate(arrays):
        dims = resolved.inputs[index]
        shape = [resolved.sizes[d] for d in dims]
        if not _f_contiguous(shape, resolved.view_strides(index, array.strides), array.itemsize):
            return "C"
    return "F"
