"""Loop reordering for locality: only the "seq" dims move, among their own positions.

- In a contraction the n dims go innermost, the k dims just outside them, the m and c dims
  outermost: one block of in0 (its m and k indices fixed) then serves every n block in a row
  while it sits in L2, and the out blocks of that row stay in cache across the k loop.
  Measured on Zen 4 (1600^3 in 80x64x400 GEMM blocks): 85% of peak so, 64% with the n loop
  outermost (in0's strided columns streamed from L3 on every call). First and last touch
  follow the k indices, whatever the order.
- Otherwise dims with larger strides go outer: out is written (and, for k dims, in0/in1 are
  read) in address order, one stream at a time. The weight of a non-k dim is its out stride
  (then its in0 and in1 strides), of a k dim its larger input stride. Equal weights keep their
  order; within each group of a contraction the same weights order the dims.
"""

from __future__ import annotations

from einjit.ir import Dim, TensorOperation

CONTRACTION_GROUPS = {"c": 0, "m": 0, "k": 1, "n": 2}     # outermost first


def _priority(dim: Dim, contraction: bool) -> tuple:
    if dim.type == "k":
        weights = (-max(dim.stride_in0, dim.stride_in1), -min(dim.stride_in0, dim.stride_in1))
    else:
        weights = (-dim.stride_out, -dim.stride_in0, -dim.stride_in1)
    if contraction:
        return (CONTRACTION_GROUPS[dim.type],) + weights
    return (dim.type == "k",) + weights


def reorder(op: TensorOperation) -> TensorOperation:
    """A new op with the seq dims in locality order (see the module doc)."""
    positions = [i for i, d in enumerate(op.dims) if d.exec_type == "seq"]
    contraction = op.kind == "contraction"
    ordered = sorted((op.dims[i] for i in positions),
                     key=lambda dim: _priority(dim, contraction))
    dims = list(op.dims)
    for position, dim in zip(positions, ordered):
        dims[position] = dim
    return op.replace(dims=dims)
