"""What a checked array call is: a native function f(id(a), id(b), id(out)) that a plain
call of a one-step expression makes instead of checking its operands in Python. It reads
each argument's numpy array struct (where runtime.arrays.ARRAY_FIELDS says the fields lie),
compares type, dtype, ndim, shape and strides with the layout the plan was made for, and
returns 1 having done nothing where one differs; else it runs the compiled nest on the
arrays' data pointers and returns 0. Each backend's array_call(target, call) turns an
ArrayCall into code (entry.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.arrays import ArrayFields


@dataclass(frozen=True)
class ArrayLayout:
    """An argument as the plan takes it: an ndarray of exactly the type at address `type`,
    of the dtype object at `descr`, with this shape and these strides (bytes)."""
    type: int
    descr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class ArrayCall:
    """fields: the array struct's offsets. arguments: the first two arguments' layouts
    (None: unused, the caller passes 0 and nothing reads it); the third is the result, an
    ndarray the caller made (only its data pointer is read). operands: the nest's in0 and
    in1, each (argument index, 0) or (None, a fixed address). The nest is called as
    nest(in0, in1, out, 0, count) at address `nest` (its entry guard)."""
    fields: ArrayFields
    arguments: tuple[ArrayLayout | None, ArrayLayout | None]
    operands: tuple[tuple[int | None, int], tuple[int | None, int]]
    nest: int
    count: int
