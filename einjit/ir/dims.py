"""Dimensions of a tensor operation.

A tensor operation is a loop nest over an index space; each loop is one `Dim`:

- `type` says what the dim is in the operation:
  "c"  a dim of an element-wise operation, or a batch dim of a contraction that appears in
       in0, in1 and out alike (looped over, never a GEMM primitive dim);
  "m"  a contraction dim of in0 and out (the rows of A and C of a column-major GEMM);
  "n"  a contraction dim of in1 and out (the columns of B and C);
  "k"  a reduced dim of in0 and in1, absent from out (stride_out == 0).
- `exec_type` says how the dim is executed:
  "shared"    a loop run by several threads (outermost; never a "k" dim: a write race);
  "seq"       a sequential loop around the primitive;
  "prim"      a dim handled inside the primitive kernel (innermost);
  "undefined" not decided yet: `einjit.optimize` decides it.
- `size` is the number of iterations (>= 1); `stride_in0`, `stride_in1`, `stride_out` are the
  distances in ELEMENTS between consecutive iterations in each tensor, 0 where a tensor lacks
  the dim.

The address of an element is base + sum(index_d * stride_d) over all dims, per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from einjit.errors import OperationError, OperationTypeError

DIM_TYPES = ("c", "m", "n", "k")
EXEC_TYPES = ("seq", "shared", "prim", "undefined")
STRIDE_FIELDS = ("stride_in0", "stride_in1", "stride_out")


def check_name(what: str, value, allowed: tuple) -> str:
    """`value` if it is one of `allowed` (strings), else OperationError/OperationTypeError."""
    if not isinstance(value, str):
        raise OperationTypeError(f"{what} must be a string, one of {allowed}; got {value!r}")
    if value not in allowed:
        raise OperationError(f"{what}={value!r} is not known; expected one of {allowed}")
    return value


def check_int(what: str, value, lower: int) -> int:
    """`value` as an int if it is a (numpy) integer, not a bool, and >= lower."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise OperationTypeError(f"{what} must be an integer; got {value!r}")
    value = int(value)
    if value < lower:
        raise OperationError(f"{what}={value} is out of range; expected {what} >= {lower}")
    return value


@dataclass(frozen=True)
class Dim:
    """One loop of a tensor operation: type, exec type, size, strides (elements) per tensor."""
    type: str
    exec_type: str
    size: int
    stride_in0: int
    stride_in1: int
    stride_out: int

    def __post_init__(self) -> None:
        check_name("Dim type", self.type, DIM_TYPES)
        check_name("Dim exec_type", self.exec_type, EXEC_TYPES)
        # normalise numpy integers so equal dims hash equal
        object.__setattr__(self, "size", check_int("Dim size", self.size, 1))
        for name in STRIDE_FIELDS:
            object.__setattr__(self, name, check_int(f"Dim {name}", getattr(self, name), 0))

    @property
    def strides(self) -> tuple[int, int, int]:
        """(stride_in0, stride_in1, stride_out)."""
        return self.stride_in0, self.stride_in1, self.stride_out

    def with_(self, **changes) -> "Dim":
        """A copy with some fields changed."""
        fields = {"type": self.type, "exec_type": self.exec_type, "size": self.size,
                  "stride_in0": self.stride_in0, "stride_in1": self.stride_in1,
                  "stride_out": self.stride_out}
        fields.update(changes)
        return Dim(**fields)
