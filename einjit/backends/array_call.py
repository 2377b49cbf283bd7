"""What a checked array call is: a native function f(id(a), id(b), ..., id(out)) that a
plain call of a small plan makes instead of checking its operands in Python. It reads each
argument's numpy array struct (where runtime.arrays.ARRAY_FIELDS says the fields lie),
compares type, dtype, ndim, shape and strides with the layout the plan was made for (and,
for a result the caller gave, that it is writable and shares no byte with an operand), and
returns 1 having done nothing where one differs; else it calls the plan's compiled nests in
order on the arrays' data pointers, intermediates in a scratch frame on its stack, and
returns 0. Each backend's array_call(target, call) turns an ArrayCall into code
(entry.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.arrays import ArrayFields

MAX_ARGUMENTS = 6          # the operands and the result, all passed in registers on both ISAs
# the most scratch an array call takes from its caller's stack, beside the nests' own frames
# (under 64 KiB): a thread's stack may be small (musl's default is 128 KiB), and plans whose
# intermediates outgrow this spend their time in the nests rather than in the call
MAX_FRAME_BYTES = 16 << 10
FRAME_ALIGNMENT = 64       # each intermediate starts on a cache line


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
class Source:
    """Where a nest's operand lies: `offset` bytes past the data of argument `index`
    (kind "argument"), past the scratch frame's base ("frame"), or at address `offset`
    ("address": a vector of ones, 0 where unused)."""
    kind: str
    index: int
    offset: int


@dataclass(frozen=True)
class NestCall:
    """nest(in0, in1, out, 0, count) at address `nest` (a compiled nest's entry guard)."""
    nest: int
    count: int
    operands: tuple[Source, Source, Source]


@dataclass(frozen=True)
class ArrayCall:
    """fields: the array struct's offsets. arguments: the operands' layouts, one argument
    each, in order; the result is the argument after them, checked against `result` (with
    its flags and its bytes against each operand's), unchecked where None (the caller made
    it; only its data pointer is read). calls: the nests, in order. frame_bytes: the scratch
    frame the intermediates take (FRAME_ALIGNMENT-aligned, at most MAX_FRAME_BYTES)."""
    fields: ArrayFields
    arguments: tuple[ArrayLayout, ...]
    result: ArrayLayout | None
    calls: tuple[NestCall, ...]
    frame_bytes: int = 0
