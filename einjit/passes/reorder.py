"""Loop reordering for locality: only the "seq" dims move, among their own positions.

- In a contraction the seq k dims go innermost among the seq loops: every update of an out
  block then follows the previous one, so the block stays in cache (and the first and last
  touch run right before and after its k loops).
- Otherwise dims with larger strides go outer: out is written (and, for k dims, in0/in1 are
  read) in address order, one stream at a time. The weight of a non-k dim is its out stride
  (then its in0 and in1 strides), of a k dim its larger input stride. Equal weights keep their
  order.
"""

from __future__ import annotations

from einjit.ir import Dim, TensorOperation


def _priority(dim: Dim) -> tuple:
    if dim.type == "k":
        return (1, -max(dim.stride_in0, dim.stride_in1), -min(dim.stride_in0, dim.stride_in1))
    return (0, -dim.stride_out, -dim.stride_in0, -dim.stride_in1)


def reorder(op: TensorOperation) -> TensorOperation:
    """A new op with the seq dims in locality order (see the module doc)."""
    positions = [i for i, d in enumerate(op.dims) if d.exec_type == "seq"]
    ordered = sorted((op.dims[i] for i in positions), key=_priority)
    dims = list(op.dims)
    for position, dim in zip(positions, ordered):
        dims[position] = dim
    return op.replace(dims=dims)
