"""What a checked array call is: a native function f(id(a), id(b), id(out)) that a plain
call of a one-step expression makes instead of checking its operands in Python. It reads
each argument's numpy array struct (where runtime.arrays.ARRAY_FIELDS says the fields lie),
compares type, dtype, ndim, shape and strides with the layout the plan was made for (and,
for a result the caller gave, that it is writable and shares no byte with an operand), and
returns 1 having done nothing where one differs; else it runs the compiled nest on the
arrays' data pointers and returns 0. Each backend's array_call(target, call) turns an
ArrayCall into code (entry.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.arrays import ArrayFields


@dataclass(frozen=True)
class ArrayLayout:
    """An argument as the plan takes it: an ndarray of exactly the type at address `type`,
    of the dtype object at `descr` (elements of `itemsize` bytes), with this shape and these
    strides (bytes, none negative)."""
    type: int
    descr: int
    itemsize: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def span(self) -> int:
        """Bytes from the first element's start to the last one's end."""
        return self.itemsize + sum((size - 1) * stride
                                   for size, stride in zip(self.shape, self.strides))


@dataclass(frozen=True)
class ArrayCall:
    """fields: the array struct's offsets. arguments: the first two arguments' layouts
    (None: unused, the caller passes 0 and nothing reads it). result: the third argument's
    layout, checked with its flags and its bytes against each operand's; None where the
    caller made it (only its data pointer is read). operands: the nest's in0 and in1, each
    (argument index, 0) or (None, a fixed address). The nest is called as nest(in0, in1,
    out, 0, count) at address `nest` (its entry guard)."""
    fields: ArrayFields
    arguments: tuple[ArrayLayout | None, ArrayLayout | None]
    operands: tuple[tuple[int | None, int], tuple[int | None, int]]
    nest: int
    count: int
    result: ArrayLayout | None = None
