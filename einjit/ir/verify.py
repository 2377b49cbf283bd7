"""Validation of a tensor operation, and the primitive calls its prim dims describe.

A TensorOperation's set-up checks its parameters and then reads the prim dims to find
the primitive's M, N, K and batch-reduce dims, the leading dimensions and the transposition.
`check_operation` does both: it raises OperationError naming the offending dim or value, and
returns the KernelCalls (first touch, main, last touch) a loop nest makes at its innermost
level. Rules (the TensorOperation contract):

- a "k" dim only with prim_main "gemm"/"brgemm"; it has stride_out == 0 and is never "shared";
- no two iterations write the same out element: every non-k dim of size > 1 has
  stride_out != 0, and, sorted by stride_out, each such dim's stride is >= the previous
  stride times the previous size;
- exec order: "shared" dims first, then "seq", then "prim" (innermost); "undefined" dims may
  sit anywhere; the prim-fit rules below apply once no dim is "undefined";
- gemm: exactly one prim m, n, k. A is column-major m x k (stride_in0(m) == 1), B column-major
  k x n (stride_in1(k) == 1), C column-major m x n (stride_out(m) == 1); stride_in0(n) == 0,
  stride_in1(m) == 0. ld_a = stride_in0(k), ld_b = stride_in1(n), ld_c = stride_out(n).
- brgemm: the gemm prims plus one more prim k, the batch-reduce dim (if both prim k dims have
  stride_in1 == 1, the outer one); br_stride_a/b are its in0/in1 strides.
- unary main (and the touches of main "none"): 1 or 2 prim dims. M is the prim dim with
  stride_in0 == 1 (stride_out == 1 for "none"), N the other (size 1 if absent). Column-major
  B if stride_out(M) == 1 (ld_b = stride_out(N)), else row-major B (kernel trans_b) if
  stride_out(N) == 1 (ld_b = stride_out(M)); ld_a = stride_in0(N).
- binary main: 1 or 2 prim dims; M has stride 1 in in0, in1 and out; N gives ld_a/ld_b/ld_c.
- first/last touch run in place on the out block (unary kernel, a == b, column-major with the
  out's unit-stride prim dim as rows).
- kernel limits (einjit.limits.BRGEMM_LIMITS / ELTWISE_LIMITS) and the kernels' lower
  bounds on leading dimensions (ld_a >= m, ...), the latter where the dim the ld steps over
  has size > 1; where it has size 1 the ld is irrelevant and KernelCall carries the bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from einjit.errors import OperationError
from einjit.ir.dims import Dim
from einjit.limits import BRGEMM_LIMITS, ELTWISE_LIMITS, INTEGER_LIMIT
from einjit.ops import BINARY, CONTRACTION, UNARY

EXEC_RANK = {"shared": 0, "seq": 1, "prim": 2}


def main_kind(prim_main: str) -> str:
    """"contraction", "unary", "binary" or "none" for a prim_main name."""
    if prim_main in CONTRACTION:
        return "contraction"
    if prim_main in UNARY:
        return "unary"
    if prim_main in BINARY:
        return "binary"
    return "none"


@dataclass(frozen=True)
class KernelCall:
    """One primitive call at the innermost level of the loop nest.

    role: "first_touch", "main" or "last_touch"; kind: "brgemm", "unary" or "binary" (the
    einjit primitive); op: the operation ("gemm"/"brgemm" or a unary/binary op name);
    operands: the tensors passed as the kernel's pointers, in order (touches: ("out", "out"),
    in place); m, n, k, br_size, trans_b: the kernel parameters; ld_*, br_stride_*: its
    integer arguments in elements; *_dim: index in op.dims of the dim each role maps to (None
    where the kernel's dim has size 1 and no op dim stands for it).
    """
    role: str
    kind: str
    op: str
    operands: tuple
    m: int
    n: int
    k: int = 1
    br_size: int = 1
    trans_b: bool = False
    ld_a: int = 0
    ld_b: int = 0
    ld_c: int = 0
    br_stride_a: int = 0
    br_stride_b: int = 0
    m_dim: int | None = None
    n_dim: int | None = None
    k_dim: int | None = None
    br_dim: int | None = None

    @property
    def arguments(self) -> tuple[int, ...]:
        """The kernel's integer arguments in call order (after the pointers)."""
        if self.kind == "brgemm":
            return self.ld_a, self.ld_b, self.ld_c, self.br_stride_a, self.br_stride_b
        if self.kind == "binary":
            return self.ld_a, self.ld_b, self.ld_c
        return self.ld_a, self.ld_b

    def describe(self) -> str:
        if self.kind == "brgemm":
            shape = f"{self.m}x{self.n}x{self.k}" + (f" batch {self.br_size}"
                                                     if self.op == "brgemm" else "")
        else:
            shape = f"{self.m}x{self.n}" + (" trans_b" if self.trans_b else "")
        args = ", ".join(f"{name}={value}" for name, value in zip(
            {"brgemm": ("ld_a", "ld_b", "ld_c", "br_stride_a", "br_stride_b"),
             "binary": ("ld_a", "ld_b", "ld_c"), "unary": ("ld_a", "ld_b")}[self.kind],
            self.arguments))
        return (f"{self.role}: {self.kind} {self.op} {shape} on "
                f"({', '.join(self.operands)}) {args}")


def describe_dim(index: int, dim: Dim) -> str:
    return (f"dim {index} ({dim.type}, {dim.exec_type}, size {dim.size}, strides in0/in1/out "
            f"{dim.stride_in0}/{dim.stride_in1}/{dim.stride_out})")


def check_operation(prim_first_touch: str, prim_main: str, prim_last_touch: str,
                    dims: tuple[Dim, ...]) -> tuple[KernelCall, ...]:
    """Validate the dims against the primitives (names already checked); return the kernel
    calls, or () while some dim is still "undefined"."""
    kind = main_kind(prim_main)
    _check_k_dims(kind, prim_main, dims)
    _check_out_overlap(dims)
    _check_exec_order(dims)
    if any(dim.exec_type == "undefined" for dim in dims):
        return ()
    prims = [(index, dim) for index, dim in enumerate(dims) if dim.exec_type == "prim"]
    if kind == "contraction":
        main, rows, cols = _fit_gemm(prim_main, prims)
    elif kind == "unary":
        main, rows, cols = _fit_unary(prim_main, prims)
    elif kind == "binary":
        main, rows, cols = _fit_binary(prim_main, prims)
    else:
        main = None
        rows, cols = _fit_out_block(prims)
    calls = [_touch("first_touch", prim_first_touch, rows, cols)] if prim_first_touch != "none" \
        else []
    if main is not None:
        calls.append(main)
    if prim_last_touch != "none":
        calls.append(_touch("last_touch", prim_last_touch, rows, cols))
    return tuple(calls)


def _check_k_dims(kind: str, prim_main: str, dims: tuple[Dim, ...]) -> None:
    for index, dim in enumerate(dims):
        if dim.type != "k":
            continue
        if kind != "contraction":
            raise OperationError(f"{describe_dim(index, dim)} is a k dim but prim_main="
                                 f"{prim_main!r} reduces nothing; k dims need 'gemm' or 'brgemm'")
        if dim.stride_out != 0:
            raise OperationError(f"{describe_dim(index, dim)} is a k dim with stride_out "
                                 f"{dim.stride_out}; a reduced dim is absent from out "
                                 f"(stride_out 0)")
        if dim.exec_type == "shared":
            raise OperationError(f"{describe_dim(index, dim)} is a k dim marked 'shared': threads "
                                 f"would race on the same out elements; use 'seq' or 'prim'")


def _check_out_overlap(dims: tuple[Dim, ...]) -> None:
    written = [(index, dim) for index, dim in enumerate(dims) if dim.type != "k" and dim.size > 1]
    for index, dim in written:
        if dim.stride_out == 0:
            raise OperationError(f"{describe_dim(index, dim)} has stride_out 0: two iterations "
                                 f"would write the same out element")
    written.sort(key=lambda item: (item[1].stride_out, item[1].size))
    for (i, prev), (j, dim) in zip(written, written[1:]):
        if dim.stride_out < prev.stride_out * prev.size:
            raise OperationError(
                f"{describe_dim(j, dim)} and {describe_dim(i, prev)}: two iterations would "
                f"write the same out element (stride_out {dim.stride_out} < "
                f"{prev.stride_out} * {prev.size})")


def _check_exec_order(dims: tuple[Dim, ...]) -> None:
    last = None
    for index, dim in enumerate(dims):
        if dim.exec_type == "undefined":
            continue
        if last is not None and EXEC_RANK[dim.exec_type] < EXEC_RANK[last[1].exec_type]:
            raise OperationError(
                f"{describe_dim(index, dim)} is {dim.exec_type!r} but comes after "
                f"{describe_dim(*last)}; the loop order is 'shared' dims first, then 'seq', "
                f"then 'prim' (innermost)")
        last = (index, dim)


def _limit(primitive: str, role: str, index: int | None, dim: Dim | None, limit: int) -> None:
    if dim is not None and dim.size > limit:
        raise OperationError(f"{describe_dim(index, dim)} is the {primitive} kernel's {role} "
                             f"with size {dim.size} > {limit}, the kernel's limit; "
                             f"einjit.optimize splits it")


def _ld(name: str, value: int, lower: int, stepped: Dim | None, where: str) -> int:
    """A leading dimension: checked against the kernel's bound when the dim it steps over has
    size > 1; else irrelevant, and the bound itself is returned."""
    if stepped is None or stepped.size == 1:
        return lower
    if value < lower:
        raise OperationError(f"{name}={value} ({where}) is below the kernel's bound {lower}: "
                             f"consecutive columns would overlap")
    if value >= INTEGER_LIMIT:
        raise OperationError(f"{name}={value} ({where}) is out of range; expected < 2**31")
    return value


def _names(prims) -> str:
    return ", ".join(describe_dim(i, d) for i, d in prims) or "none"


def _fit_gemm(prim_main: str, prims) -> tuple[KernelCall, tuple, tuple]:
    expected = Counter({"m": 1, "n": 1, "k": 1 if prim_main == "gemm" else 2})
    if Counter(dim.type for _, dim in prims) != expected:
        wanted = "m, n, k" if prim_main == "gemm" else "m, n, k, k (the batch-reduce k)"
        raise OperationError(f"prim_main={prim_main!r} needs exactly {sum(expected.values())} "
                             f"prim dims of types {wanted}; got {_names(prims)}")
    (mi, m), = [(i, d) for i, d in prims if d.type == "m"]
    (ni, n), = [(i, d) for i, d in prims if d.type == "n"]
    ks = [(i, d) for i, d in prims if d.type == "k"]
    br = None
    if prim_main == "gemm":
        ki, k = ks[0]
    else:
        unit = [item for item in ks if item[1].stride_in1 == 1]
        if len(unit) == 2:
            br, (ki, k) = ks[0], ks[1]          # the outer one is the batch-reduce dim
        elif len(unit) == 1:
            (ki, k), = unit
            br = [item for item in ks if item[0] != ki][0]
        else:
            raise OperationError(f"prim_main='brgemm': neither prim k dim has stride_in1 1 "
                                 f"({_names(ks)}); the kernel's B is column-major")
    required = ((mi, m, "stride_in0", 1, "A is column-major"),
                (mi, m, "stride_out", 1, "C is column-major"),
                (ki, k, "stride_in1", 1, "B is column-major"),
                (ni, n, "stride_in0", 0, "in0 has no n dim"),
                (mi, m, "stride_in1", 0, "in1 has no m dim"))
    for index, dim, field, value, why in required:
        if getattr(dim, field) != value:
            raise OperationError(f"{describe_dim(index, dim)} is the {prim_main} kernel's "
                                 f"prim {dim.type} but has {field} {getattr(dim, field)}; "
                                 f"expected {value} ({why})")
    _limit("brgemm", "m", mi, m, BRGEMM_LIMITS["m"])
    _limit("brgemm", "n", ni, n, BRGEMM_LIMITS["n"])
    _limit("brgemm", "k", ki, k, BRGEMM_LIMITS["k"])
    if br is not None:
        _limit("brgemm", "batch-reduce dim", br[0], br[1], BRGEMM_LIMITS["br_size"])
        for field in ("stride_in0", "stride_in1"):
            if getattr(br[1], field) >= INTEGER_LIMIT:
                raise OperationError(f"{describe_dim(*br)}: batch stride {field} is out of "
                                     f"range; expected < 2**31")
    call = KernelCall(
        role="main", kind="brgemm", op=prim_main, operands=("in0", "in1", "out"),
        m=m.size, n=n.size, k=k.size, br_size=1 if br is None else br[1].size,
        ld_a=_ld("ld_a", k.stride_in0, m.size, k, f"stride_in0 of prim k dim {ki}"),
        ld_b=_ld("ld_b", n.stride_in1, k.size, n, f"stride_in1 of prim n dim {ni}"),
        ld_c=_ld("ld_c", n.stride_out, m.size, n, f"stride_out of prim n dim {ni}"),
        br_stride_a=0 if br is None else br[1].stride_in0,
        br_stride_b=0 if br is None else br[1].stride_in1,
        m_dim=mi, n_dim=ni, k_dim=ki, br_dim=None if br is None else br[0])
    return call, (mi, m), (ni, n)


def _pick_unit(prims, fields: tuple[str, ...]):
    """The prim dim with stride 1 in all `fields` (the kernel's M); if two qualify, the larger
    (then the inner) one; None if none does."""
    unit = [(i, d) for i, d in prims if all(getattr(d, f) == 1 for f in fields)]
    if not unit:
        return None
    return max(unit, key=lambda item: (item[1].size, item[0]))


def _count_prims(prim_main: str, prims) -> None:
    if not 1 <= len(prims) <= 2:
        raise OperationError(f"prim_main={prim_main!r} needs 1 or 2 prim dims (the kernel's M "
                             f"and N); got {len(prims)}: {_names(prims)}")


def _fit_unary(prim_main: str, prims) -> tuple[KernelCall, tuple, tuple]:
    _count_prims(prim_main, prims)
    rows = _pick_unit(prims, ("stride_in0",))
    if rows is None:
        raise OperationError(f"prim_main={prim_main!r}: no prim dim has stride_in0 1 "
                             f"({_names(prims)}); the kernel's M (rows of A) is contiguous")
    (mi, m) = rows
    other = [(i, d) for i, d in prims if i != mi]
    ni, n = other[0] if other else (None, None)
    n_size = 1 if n is None else n.size
    _limit("unary", "m", mi, m, ELTWISE_LIMITS["m"])
    _limit("unary", "n", ni, n, ELTWISE_LIMITS["n"])
    ld_a = _ld("ld_a", n.stride_in0 if n else 0, m.size, n, f"stride_in0 of prim dim {ni}")
    if m.stride_out == 1:
        trans_b = False
        ld_b = _ld("ld_b", n.stride_out if n else 0, m.size, n, f"stride_out of prim dim {ni}")
        out_rows, out_cols = (mi, m), (ni, n)
    elif n is not None and n.stride_out == 1:
        trans_b = True
        ld_b = _ld("ld_b", m.stride_out, n.size, m, f"stride_out of prim dim {mi}")
        out_rows, out_cols = (ni, n), (mi, m)
    else:
        raise OperationError(f"prim_main={prim_main!r}: no prim dim has stride_out 1 "
                             f"({_names(prims)}); the kernel writes B column-major "
                             f"(stride_out of M == 1) or transposed (stride_out of N == 1)")
    call = KernelCall(role="main", kind="unary", op=prim_main, operands=("in0", "out"),
                      m=m.size, n=n_size, trans_b=trans_b, ld_a=ld_a, ld_b=ld_b,
                      m_dim=mi, n_dim=ni)
    return call, out_rows, out_cols


def _fit_binary(prim_main: str, prims) -> tuple[KernelCall, tuple, tuple]:
    _count_prims(prim_main, prims)
    rows = _pick_unit(prims, ("stride_in0", "stride_in1", "stride_out"))
    if rows is None:
        raise OperationError(f"prim_main={prim_main!r}: no prim dim has stride 1 in in0, in1 "
                             f"and out ({_names(prims)}); the kernel's M is contiguous in all")
    mi, m = rows
    other = [(i, d) for i, d in prims if i != mi]
    ni, n = other[0] if other else (None, None)
    _limit("binary", "m", mi, m, ELTWISE_LIMITS["m"])
    _limit("binary", "n", ni, n, ELTWISE_LIMITS["n"])
    lds = {name: _ld(f"ld_{name}", getattr(n, field) if n else 0, m.size, n,
                     f"{field} of prim dim {ni}")
           for name, field in (("a", "stride_in0"), ("b", "stride_in1"), ("c", "stride_out"))}
    call = KernelCall(role="main", kind="binary", op=prim_main, operands=("in0", "in1", "out"),
                      m=m.size, n=1 if n is None else n.size, ld_a=lds["a"], ld_b=lds["b"],
                      ld_c=lds["c"], m_dim=mi, n_dim=ni)
    return call, (mi, m), (ni, n)


def _fit_out_block(prims) -> tuple[tuple, tuple]:
    _count_prims("none", prims)
    rows = _pick_unit(prims, ("stride_out",))
    if rows is None:
        raise OperationError(f"prim_main='none': no prim dim has stride_out 1 "
                             f"({_names(prims)}); the touch kernels' M is contiguous in out")
    other = [(i, d) for i, d in prims if i != rows[0]]
    return rows, other[0] if other else (None, None)


def _touch(role: str, op: str, rows: tuple, cols: tuple) -> KernelCall:
    """A touch kernel: the unary kernel in place on the out block, rows the out's unit-stride
    prim dim."""
    (mi, m), (ni, n) = rows, cols
    _limit("unary", f"m of the {role}", mi, m, ELTWISE_LIMITS["m"])
    _limit("unary", f"n of the {role}", ni, n, ELTWISE_LIMITS["n"])
    ld = _ld("ld", n.stride_out if n else 0, m.size, n, f"stride_out of prim dim {ni}")
    return KernelCall(role=role, kind="unary", op=op, operands=("out", "out"), m=m.size,
                      n=1 if n is None else n.size, ld_a=ld, ld_b=ld, m_dim=mi, n_dim=ni)
