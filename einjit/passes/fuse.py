"""Dimension fusion: two dims X (inner) and Y (outer) become one of size
|X|·|Y| with X's strides when, in every tensor, stride(Y) = |X|·stride(X) — then the pair walks
exactly the elements the fused dim walks, in the same order.

A dim is fused only when it is small (below `min_size`), so that the dimension splitter
can then cut the fused dim into sizes that suit the kernels (e.g. m dims 25 and 64 fuse into
1600, which splits into a prim m of 80 or 64). Here a pair fuses when either dim is below
`min_size`; both must have the same type and the same exec type, and prim dims never fuse
(that would change the kernel). Dims of size 1 that are not prim are dropped first: they loop
once and fuse with anything. The fused dim takes the inner dim's place in the loop order.
"""

from __future__ import annotations

from einjit.ir import Dim, TensorOperation

DEFAULT_MIN_SIZE = 64


def fusable(inner: Dim, outer: Dim) -> bool:
    """True if `outer` continues `inner` in every tensor (same type, same non-prim exec
    type, stride(outer) == |inner|·stride(inner))."""
    return (inner.type == outer.type and inner.exec_type == outer.exec_type
            and inner.exec_type != "prim"
            and all(o == inner.size * i for i, o in zip(inner.strides, outer.strides)))


def fuse(op: TensorOperation, min_size: int = DEFAULT_MIN_SIZE) -> TensorOperation:
    """A new op with fusable dim pairs fused where either dim is smaller than `min_size`."""
    dims = [d for d in op.dims if d.size > 1 or d.exec_type == "prim"] or [op.dims[0]]
    fused = True
    while fused:
        fused = False
        for i, inner in enumerate(dims):
            for j, outer in enumerate(dims):
                if i != j and min(inner.size, outer.size) < min_size and fusable(inner, outer):
                    dims[i] = inner.with_(size=inner.size * outer.size)
                    del dims[j]
                    fused = True
                    break
            if fused:
                break
    return op.replace(dims=dims)
