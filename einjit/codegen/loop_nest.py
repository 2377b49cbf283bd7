"""The ISA-neutral plan of a TensorOperation's loop nest: which loops, which kernel calls.

A nest walks the op's non-primitive dims (shared ones first, then seq) as ONE flattened
odometer: iteration t of the range [begin * S, end * S), S being the product of the seq
sizes, visits the index tuple t in mixed radix, and at each tuple calls the primitive
kernels on the three operand pointers advanced by that tuple's offsets. The entry point is

    nest(in0, in1, out, begin, end)         # [begin, end): this thread's shared iterations

so a thread runs its slice of the flattened shared dims with one call, and the odometer's
carry chain replaces a nest of loops (a kernel call dwarfs a carry check either way).

At each index tuple, in order: first touch on the out block if every k-dim index is 0 (the
seeds' rule), the main kernel, last touch if every k-dim index is at its end. Element-wise
main primitives have no k dims, so they touch every block.

The backends turn a NestPlan into code (backends/<isa>/loops.py, generate_loop_nest); the
primitive kernels are emitted into the same buffer and called as leaf functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ..ops import BINARY, UNARY

IN0, IN1, OUT = 0, 1, 2      # operand numbers in the nest's argument order


@dataclass(frozen=True)
class LoopDim:
    """One non-primitive dim of the nest: `strides` in bytes for (in0, in1, out)."""
    size: int
    strides: tuple[int, int, int]
    reduction: bool          # a k dim: first/last touch wait for its first/last index


@dataclass(frozen=True)
class KernelCall:
    """A primitive kernel and the arguments the nest passes it.

    kind and params name the kernel as the backend generators take them
    (generate_<kind>(target, *params)); `pointers` are operand numbers (IN0, IN1, OUT) for
    its pointer arguments; `integers` its integer arguments (leading dims, batch strides in
    elements), fixed for the whole nest."""
    kind: str                # "brgemm", "unary" or "binary"
    params: tuple
    pointers: tuple[int, ...]
    integers: tuple[int, ...]

    @property
    def kernel(self) -> tuple:
        """What identifies the generated kernel (calls may differ in their arguments)."""
        return (self.kind, self.params)


@dataclass(frozen=True)
class NestPlan:
    shared: tuple[LoopDim, ...]      # flattened into the [begin, end) range, outermost first
    seq: tuple[LoopDim, ...]         # walked fully inside each shared iteration
    first_touch: KernelCall | None
    main: KernelCall | None
    last_touch: KernelCall | None

    @property
    def loops(self) -> tuple[LoopDim, ...]:
        return self.shared + self.seq

    @property
    def shared_iterations(self) -> int:
        return prod(dim.size for dim in self.shared)

    @property
    def seq_iterations(self) -> int:
        return prod(dim.size for dim in self.seq)

    @property
    def kernels(self) -> tuple[tuple, ...]:
        """The distinct kernels the nest calls (KernelCall.kernel), in a stable order."""
        found = []
        for call in (self.first_touch, self.main, self.last_touch):
            if call is not None and call.kernel not in found:
                found.append(call.kernel)
        return tuple(found)


def _pitch(dim, stride_name: str, rows: int) -> int:
    """The leading dimension a kernel gets from `dim` (None: the primitive has no such dim).
    A dim of size 1 is never stepped over, so any pitch the kernel accepts will do."""
    if dim is None or dim.size == 1:
        return rows
    return getattr(dim, stride_name)


def _size(dim) -> int:
    return 1 if dim is None else dim.size


def _rows_and_columns(prims, stride_name: str):
    """(M, N) of an element-wise block: M is the prim dim with unit stride in `stride_name`."""
    unit = [dim for dim in prims if getattr(dim, stride_name) == 1 or dim.size == 1]
    rows = next((dim for dim in unit if dim.size > 1), unit[0] if unit else prims[0])
    others = [dim for dim in prims if dim is not rows]
    return rows, (others[0] if others else None)


def _touch(op_name: str, block_rows: int, block_cols: int, ld: int) -> KernelCall | None:
    if op_name == "none":
        return None
    return KernelCall("unary", (op_name, block_rows, block_cols, False), (OUT, OUT), (ld, ld))


def _contraction(op, prims):
    by_type = {t: [dim for dim in prims if dim.type == t] for t in "mnk"}
    m, n = by_type["m"][0], by_type["n"][0]
    ks = by_type["k"]
    if len(ks) == 1:
        k, batch = ks[0], None
    else:   # the prim k with unit stride in in1 is the GEMM's; the other the batch (outer wins)
        unit = [dim for dim in ks if dim.stride_in1 == 1]
        k = unit[-1] if unit else ks[-1]
        batch = next(dim for dim in ks if dim is not k)
    ld_c = _pitch(n, "stride_out", m.size)
    main = KernelCall(
        "brgemm", (m.size, n.size, k.size, _size(batch)), (IN0, IN1, OUT),
        (_pitch(k, "stride_in0", m.size), _pitch(n, "stride_in1", k.size), ld_c,
         0 if batch is None else batch.stride_in0, 0 if batch is None else batch.stride_in1))
    block = (m.size, n.size, ld_c)
    return main, block


def _elementwise(op, prims):
    rows, cols = _rows_and_columns(prims, "stride_in0" if op.prim_main != "none" else "stride_out")
    m, n = rows.size, _size(cols)
    if op.prim_main in BINARY:
        lds = tuple(_pitch(cols, name, m) for name in ("stride_in0", "stride_in1", "stride_out"))
        return KernelCall("binary", (op.prim_main, m, n), (IN0, IN1, OUT), lds), (m, n, lds[2])
    if op.prim_main == "none":
        return None, (m, n, _pitch(cols, "stride_out", m))
    transposed = m > 1 and rows.stride_out != 1
    ld_a = _pitch(cols, "stride_in0", m)
    if transposed:   # B row-major: its unit-stride dim is N, its pitch M's out stride
        ld_b = _pitch(rows, "stride_out", n)
        main = KernelCall("unary", (op.prim_main, m, n, True), (IN0, OUT), (ld_a, ld_b))
        return main, (n, m, ld_b)    # the out block, column-major, for first/last touch
    ld_b = _pitch(cols, "stride_out", m)
    return KernelCall("unary", (op.prim_main, m, n, False), (IN0, OUT), (ld_a, ld_b)), (m, n, ld_b)


def plan_nest(op) -> NestPlan:
    """The NestPlan of a validated TensorOperation whose exec types are all defined."""
    itemsize = np.dtype(op.dtype).itemsize
    prims = [dim for dim in op.dims if dim.exec_type == "prim"]

    def loop(dim) -> LoopDim:
        return LoopDim(dim.size, (dim.stride_in0 * itemsize, dim.stride_in1 * itemsize,
                                  dim.stride_out * itemsize), dim.type == "k")

    shared = tuple(loop(dim) for dim in op.dims if dim.exec_type == "shared" and dim.size > 1)
    seq = tuple(loop(dim) for dim in op.dims if dim.exec_type == "seq" and dim.size > 1)
    if op.prim_main in ("gemm", "brgemm"):
        main, (rows, cols, ld) = _contraction(op, prims)
    elif op.prim_main in UNARY or op.prim_main in BINARY or op.prim_main == "none":
        main, (rows, cols, ld) = _elementwise(op, prims)
    else:
        raise ValueError(f"prim_main={op.prim_main!r} has no loop-nest lowering")
    return NestPlan(shared, seq, _touch(op.prim_first_touch, rows, cols, ld), main,
                    _touch(op.prim_last_touch, rows, cols, ld))
