"""Tree nodes -> TensorOperations (einjit.ir).

A tensor is a dims tuple with element strides. Dim types follow from membership: in in0 and
out only -> m, in1 and out only -> n, all three -> c, inputs only -> k (a dim only one input
has is a k dim with stride 0 in the other). Where no real dim can be a primitive's m, n or k
(outer products, vector operands, full reductions, strided views), a size-1 dummy dim with the
strides the primitive asks for takes its place: it addresses nothing beyond element 0.

- contraction: gemm, out := 0 then += sum in0 * in1 (first touch "zero")
- Hadamard (every dim in all three, one unit-stride dim common to all): binary "mul"
- permutation of one child: unary "identity"
- reduction of one child: gemm against a vector of ones (the GEMM needs a unit-stride k in
  in1, so ones is an operand of its own, allocated once per plan)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from einjit.ir import Dim, TensorOperation

#: the primitives the lowered operations run (gemm: brgemm; identity and the touches: unary;
#: mul: binary): a dtype runs on the kernels where a backend generates all three in it
PRIMITIVES = ("brgemm", "unary", "binary")


@dataclass(frozen=True)
class Tensor:
    dims: tuple[int, ...]
    strides: tuple[int, ...]          # elements, one per dim

    def stride(self, dim: int) -> int:
        return self.strides[self.dims.index(dim)] if dim in self.dims else 0

    def unit(self, sizes: Sequence[int]) -> int | None:
        units = [d for d, s in zip(self.dims, self.strides) if s == 1 and sizes[d] > 1]
        return units[0] if units else None


@dataclass(frozen=True)
class Lowered:
    op: TensorOperation
    ones: str | None = None           # "in0"/"in1" when that operand is the ones vector
    ones_length: int = 0
    prims: int = 0                    # the op's innermost dims meant as primitive dims


def _dim(kind: str, size: int, a: int, b: int, c: int) -> Dim:
    return Dim(kind, "undefined", size, a, b, c)


def _order(dims: list[Dim], prims: list[Dim]) -> tuple[Dim, ...]:
    """Loop order: c dims, the rest by decreasing out/in strides, likely prims innermost."""
    rest = [d for d in dims if all(d is not p for p in prims)]
    rest.sort(key=lambda d: (d.type != "c", -max(d.stride_out, d.stride_in0, d.stride_in1)))
    return tuple(rest + prims)


def _gemm(in0: Tensor, in1: Tensor, out: Tensor, sizes: Sequence[int], dtype: str,
          ones: str | None = None) -> TensorOperation:
    every = list(dict.fromkeys(out.dims + in0.dims + in1.dims))
    dims: dict[int, Dim] = {}
    for d in every:
        kind = ("c" if d in in0.dims and d in in1.dims else "m" if d in in0.dims else "n") \
            if d in out.dims else "k"
        dims[d] = _dim(kind, sizes[d], in0.stride(d), in1.stride(d), out.stride(d))
    m_size = max([sizes[d] for d in dims if dims[d].type == "m"] + [1])
    k_size = max([sizes[d] for d in dims if dims[d].type == "k"] + [1])
    m = [d for d in dims.values() if d.type == "m" and d.stride_in0 == 1 and d.stride_out == 1
         and d.size > 1]
    k = [d for d in dims.values() if d.type == "k" and d.stride_in1 == 1 and d.size > 1]
    n = [d for d in dims.values() if d.type == "n" and d.size > 1]
    m_prim = m[0] if m else _dim("m", 1, 1, 0, 1)
    k_prim = k[0] if k else _dim("k", 1, m_size, 1, 0)
    n_prim = max(n, key=lambda d: d.size) if n else _dim("n", 1, 0, k_size, m_size)
    loops = [d for d in dims.values()] + [p for p in (m_prim, k_prim, n_prim)
                                           if all(p is not d for d in dims.values())]
    return TensorOperation.from_dims(dtype, "zero", "gemm", "none",
                                     _order(loops, [n_prim, k_prim, m_prim]))


def _gemm_lowered(in0: Tensor, in1: Tensor, out: Tensor, sizes: Sequence[int], dtype: str,
                  ones: str | None = None, ones_length: int = 0) -> Lowered:
    return Lowered(_gemm(in0, in1, out, sizes, dtype), ones, ones_length, 3)


def lower_contraction(in0: Tensor, in1: Tensor, out: Tensor, sizes: Sequence[int],
                      dtype: str = "float32") -> Lowered:
    same = set(in0.dims) == set(in1.dims) == set(out.dims)
    unit = out.unit(sizes)
    if same and unit is not None and in0.unit(sizes) == unit and in1.unit(sizes) == unit:
        dims = [_dim("c", sizes[d], in0.stride(d), in1.stride(d), out.stride(d))
                for d in out.dims]
        prim = [d for d, name in zip(dims, out.dims) if name == unit]
        return Lowered(TensorOperation.from_dims(dtype, "none", "mul", "none",
                                                 _order(dims, prim)), prims=1)
    return _gemm_lowered(in0, in1, out, sizes, dtype)


def lower_unary(child: Tensor, out: Tensor, sizes: Sequence[int],
                dtype: str = "float32") -> Lowered:
    reduced = [d for d in child.dims if d not in out.dims and sizes[d] > 1]
    if not reduced:
        # the unary kernel: M = the dim in0 has at unit stride; written transposed (N = the
        # out's unit dim) when out has another unit dim
        dims = {d: _dim("c", sizes[d], child.stride(d), 0, out.stride(d)) for d in out.dims
                if sizes[d] > 1}
        unit_in, unit_out = child.unit(sizes), out.unit(sizes)
        m = dims[unit_in] if unit_in in dims else _dim("c", 1, 1, 0, 1)
        prims = [m]
        if m.stride_out != 1:
            prims.insert(0, dims[unit_out] if unit_out in dims else _dim("c", 1, 0, 0, 1))
        loops = list(dims.values()) + [p for p in prims if all(p is not d for d in dims.values())]
        return Lowered(TensorOperation.from_dims(dtype, "none", "identity", "none",
                                                 _order(loops, prims)), prims=len(prims))
    unit = child.unit(sizes)
    if unit is not None and unit in out.dims and out.stride(unit) == 1:
        # in0 = child (the kept unit dim is m), in1 = ones along the largest reduced dim
        along = max(reduced, key=lambda d: sizes[d])
        ones = Tensor((along,), (1,))
        return _gemm_lowered(child, ones, out, sizes, dtype, "in1", sizes[along])
    # in1 = child (its unit-stride reduced dim is k), in0 = ones; kept dims are n
    along = unit if unit in reduced else None
    ones = Tensor((along,), (1,)) if along is not None else Tensor((), ())
    return _gemm_lowered(ones, child, out, sizes, dtype, "in0",
                         sizes[along] if along is not None else 1)
