"""Loop reordering for locality: only the "seq" dims move, among their own positions.

- In a contraction the m and c dims go outermost, then the n dims, the k dims innermost:
  every update of an out block follows the previous one (the block stays in cache; first and
  last touch run right before and after its k loops), and a row of in0 blocks (m indices
  fixed) serves every n block while it sits in L2; with the n loop outermost, in0's strided
  columns would come from L3 on every call (docs/measurements.md, "Contraction loop order").
  A large contraction (einjit.passes.block) goes c, n, k, m instead: B's panel stays in L2
  while every m block passes it. So does a matrix times a vector along its rows
  (block.is_along_rows): it reads the matrix row after row, whole, its out vector staying in
  cache; m outermost read every row in runs of one m block.
- Otherwise dims with larger strides go outer: out is written (and, for k dims, in0/in1 are
  read) in address order, one stream at a time. The weight of a non-k dim is its out stride
  (then its in0 and in1 strides), of a k dim its larger input stride. Equal weights keep their
  order; within each group of a contraction the same weights order the dims.
"""

from __future__ import annotations

from einjit.ir import Dim, TensorOperation
from einjit.passes import block

CONTRACTION_GROUPS = {"c": 0, "m": 0, "n": 1, "k": 2}     # outermost first
LARGE_CONTRACTION_GROUPS = {"c": 0, "n": 1, "k": 2, "m": 3}


def _priority(dim: Dim, groups: dict | None) -> tuple:
    if dim.type == "k":
        weights = (-max(dim.stride_in0, dim.stride_in1), -min(dim.stride_in0, dim.stride_in1))
    else:
        weights = (-dim.stride_out, -dim.stride_in0, -dim.stride_in1)
    if groups is not None:
        return (groups[dim.type],) + weights
    return (dim.type == "k",) + weights


def reorder(op: TensorOperation) -> TensorOperation:
    """A new op with the seq dims in locality order (see the module doc)."""
    positions = [i for i, d in enumerate(op.dims) if d.exec_type == "seq"]
    groups = None
    if op.kind == "contraction":
        large = block.is_large(op) or block.is_along_rows(op)
        groups = LARGE_CONTRACTION_GROUPS if large else CONTRACTION_GROUPS
    ordered = sorted((op.dims[i] for i in positions), key=lambda dim: _priority(dim, groups))
    dims = list(op.dims)
    for position, dim in zip(positions, ordered):
        dims[position] = dim
    return op.replace(dims=dims)
