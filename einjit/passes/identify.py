"""Primitive identification: decide which dims the kernel covers ("prim").

An op that already has prim dims and no "undefined" dim is returned unchanged. Otherwise
every dim that is not "shared" is a candidate; the chosen ones become "prim" (innermost), the
rest "seq" (in their order), the shared dims stay in front.

- unary main u: M is the dim with unit stride in in0 (the kernel reads A column-major). If
  M has unit stride in out too, N is the dim with the smallest in0 stride (that keeps the
  kernel's leading dimensions valid); otherwise the op transposes and N is the dim with unit
  stride in out (the kernel writes B row-major, trans_b).
- "none" main (touches only): the same on out alone.
- binary main: M has unit stride in in0, in1 and out; N is the dim with the smallest out
  stride among those with valid leading dimensions in all three tensors.
- gemm/brgemm: M is an m dim with unit stride in in0 and out (absent from in1); K a k dim with
  unit stride in in1; N the n dim (absent from in0) with the smallest out stride. Another k
  dim becomes the batch-reduce dim and the op a BRGEMM (else a GEMM): C then stays in
  registers across the whole batch. The batch is taken only while one call's blocks of in0
  and in1 fit in L2 (the target core's Microarch.batch_fits): a larger one streams its blocks from
  beyond L2 on every call, where a seq k loop keeps them cache-sized and, the m loops
  outermost (see reorder), lets one row of in0 blocks serve every n block from L2. A matrix
  times a vector takes no batch (batch_fits says why).

Every candidate must fit the kernel's limits (einjit.limits) and leading-dimension bounds.
Where no dim fits a role, a dim of size 1 with the strides the kernel needs stands in for it
(it loops once, so results do not change): a strided copy then runs as 1-row blocks, an outer
product as a GEMM with k = 1. So identify always returns an op that satisfies the contract.
"""

from __future__ import annotations

import numpy as np

from einjit.backends import Microarch
from einjit.ir import Dim, TensorOperation
from einjit.limits import BRGEMM_LIMITS, ELTWISE_LIMITS, INTEGER_LIMIT


def _best(candidates: list[tuple[int, Dim]], key) -> tuple[int, Dim] | None:
    return min(candidates, key=key) if candidates else None


def _take(pool: list[tuple[int, Dim]], chosen: tuple[int, Dim] | None, fallback: Dim) -> Dim:
    """The chosen dim as "prim" (removed from the pool), or the size-1 stand-in."""
    if chosen is None:
        return fallback
    pool.remove(chosen)
    return chosen[1].with_(exec_type="prim")


def _contraction(pool: list[tuple[int, Dim]], itemsize: int,
                 micro: Microarch) -> tuple[str, list[Dim]]:
    lm, ln, lk = (BRGEMM_LIMITS[name] for name in ("m", "n", "k"))
    largest = lambda item: (-item[1].size, -item[0])      # noqa: E731 (largest, then inner)
    m = _take(pool, _best([(i, d) for i, d in pool if d.type == "m" and d.size <= lm
                           and d.stride_in0 == 1 and d.stride_out == 1 and d.stride_in1 == 0],
                          largest),
              Dim("m", "prim", 1, 1, 0, 1))
    k = _take(pool, _best([(i, d) for i, d in pool if d.type == "k" and d.size <= lk
                           and d.stride_in1 == 1 and m.size <= d.stride_in0 < INTEGER_LIMIT],
                          largest),
              Dim("k", "prim", 1, m.size, 1, 0))
    n = _take(pool, _best([(i, d) for i, d in pool if d.type == "n" and d.size <= ln
                           and d.stride_in0 == 0 and k.size <= d.stride_in1 < INTEGER_LIMIT
                           and m.size <= d.stride_out < INTEGER_LIMIT],
                          lambda item: (item[1].stride_out, -item[1].size)),
              Dim("n", "prim", 1, 0, k.size, m.size))
    batch = _best([(i, d) for i, d in pool if d.type == "k"
                   and d.stride_in0 < INTEGER_LIMIT and d.stride_in1 < INTEGER_LIMIT
                   and micro.batch_fits(m.size, n.size, k.size, d.size, itemsize)], largest)
    if batch is None:
        return "gemm", [m, n, k]
    # the batch dim goes outer: if it also has unit stride in in1, the contract takes the
    # outer of two such k dims as the batch dim
    return "brgemm", [_take(pool, batch, None), m, n, k]


def _eltwise(pool: list[tuple[int, Dim]], unit: tuple[str, ...], transposable: bool,
             lds: tuple[str, ...]) -> list[Dim]:
    """M: unit stride in every field of `unit`; N: leading dimensions in `lds` >= |M|."""
    lm, ln = ELTWISE_LIMITS["m"], ELTWISE_LIMITS["n"]
    largest = lambda item: (-item[1].size, -item[0])      # noqa: E731
    m = _take(pool, _best([(i, d) for i, d in pool if d.size <= lm
                           and all(getattr(d, f) == 1 for f in unit)], largest),
              Dim("c", "prim", 1, 1, 1 if "stride_in1" in unit else 0, 1))
    if transposable and m.stride_out != 1:
        # out is contiguous along another dim: the transposing kernel (B row-major)
        n = _take(pool, _best([(i, d) for i, d in pool if 1 < d.size <= ln
                               and d.stride_out == 1 and d.size <= m.stride_out
                               and m.size <= d.stride_in0 < INTEGER_LIMIT], largest),
                  Dim("c", "prim", 1, m.size, 0, 1))
        return [n, m]
    fits = [(i, d) for i, d in pool if 1 < d.size <= ln
            and all(m.size <= getattr(d, f) < INTEGER_LIMIT for f in lds)]
    n = _best(fits, lambda item: (getattr(item[1], lds[0]),) + tuple(
        getattr(item[1], f) for f in lds[1:]) + (-item[1].size,))
    return [_take(pool, n, None), m] if n else [m]


def identify(op: TensorOperation) -> TensorOperation:
    """A new op whose prim dims map onto the primitive (see the module doc)."""
    exec_types = {d.exec_type for d in op.dims}
    if "prim" in exec_types and "undefined" not in exec_types:
        return op
    shared = [d for d in op.dims if d.exec_type == "shared"]
    pool = [(i, d.with_(exec_type="seq")) for i, d in enumerate(op.dims)
            if d.exec_type != "shared"]
    main = op.prim_main
    if op.kind == "contraction":
        main, prims = _contraction(pool, np.dtype(op.dtype).itemsize, op.target.micro)
    elif op.kind == "unary":
        prims = _eltwise(pool, ("stride_in0",), True, ("stride_in0", "stride_out"))
    elif op.kind == "binary":
        prims = _eltwise(pool, ("stride_in0", "stride_in1", "stride_out"), False,
                         ("stride_out", "stride_in0", "stride_in1"))
    else:
        prims = _eltwise(pool, ("stride_out",), False, ("stride_out",))
    seq = [d for _, d in pool]
    return op.replace(prim_main=main, dims=shared + seq + prims)
