"""TensorOperation: a loop nest of dims around up to three primitive kernels.

    op = TensorOperation(dtype, prim_first_touch, prim_main, prim_last_touch, dim_types,
                         exec_types, dim_sizes, strides_in0, strides_in1, strides_out,
                         isa=None, num_threads=None)

Semantics. The index space is the product of all dims; for an index tuple i the element of a
tensor is base + sum(i_d * stride_d) (strides in elements, 0 where the tensor lacks the dim).

- "gemm"/"brgemm": for every out element o: o := first_touch(o) (unless "none"), then
  o += the sum over every k dim of in0 * in1, then o := last_touch(o). Executed blockwise: the
  first touch runs on an out block before its first update (every seq k index 0), the last
  touch after its last (every seq k index at its end).
- a unary op u:  out := last_touch(u(in0)), element-wise (a first touch is allowed, pointless).
- a binary op b: out := last_touch(b(in0, in1)), element-wise.
- "none": out := last_touch(first_touch(out)), in place; in0 and in1 are unused.

Execution. `exec_types` place each dim: "shared" loops (outermost, split over threads), then
"seq" loops, then the "prim" dims that one kernel call covers (see einjit.ir.verify for the
rules that map prim dims onto the BRGEMM/unary/binary kernels). exec_types may be None (all
"undefined"): einjit.optimize then decides them. An op is immutable, hashable, and equal to
another with the same fields; `replace` makes a changed copy, validated again.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from einjit.backends import Target, backend, resolve_target
from einjit.errors import OperandError, OperandValueError, OperationError, OperationTypeError
from einjit.ir.dims import DIM_TYPES, EXEC_TYPES, Dim, check_int, check_name
from einjit.ir.verify import KernelCall, check_operation, main_kind
from einjit.limits import ADDRESS_LIMIT, MIN_ADDRESS
from einjit.ops import BINARY_OPS, COMPLEX_DTYPES, CONTRACTION_OPS, DTYPES, UNARY_OPS, lookup
from einjit.runtime.arrays import data_address

PRIM_MAINS = CONTRACTION_OPS + UNARY_OPS + BINARY_OPS + ("none",)
PRIM_TOUCHES = ("none",) + UNARY_OPS
FIELDS = ("dim_types", "exec_types", "dim_sizes", "strides_in0", "strides_in1", "strides_out")


def _sequence(name: str, value) -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise OperationTypeError(f"{name} must be a sequence (tuple or list) with one entry per "
                                 f"dim; got {value!r}")
    return tuple(value)


def _dtype(dtype) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in DTYPES + COMPLEX_DTYPES:
        raise OperationError(f"dtype={dtype!r} is not supported; expected one of "
                             f"{DTYPES + COMPLEX_DTYPES}")
    return name


# the primitive each kind of prim_main runs (touches are unary kernels)
_PRIMITIVE = {"contraction": "brgemm", "unary": "unary", "binary": "binary"}


def _check_complex(dtype: str, names: dict[str, str], target: Target) -> None:
    """A complex op needs every primitive it names to take complex (einjit.ops' `complex`)
    and the target's backend to generate that primitive in complex (its COMPLEX_PRIMITIVES);
    OperationError naming the op, the dtype and, where it is the backend, the ISA."""
    offered = getattr(backend(target.isa), "COMPLEX_PRIMITIVES", ())
    for role, name in names.items():
        if name == "none":
            continue
        entry = lookup(name)
        if not entry.complex:
            takes = tuple(op for op in PRIM_MAINS[:-1] if lookup(op).complex)
            raise OperationError(f"{role}={name!r} does not take dtype {dtype}; the ops that "
                                 f"take complex dtypes are {takes}")
        primitive = _PRIMITIVE[main_kind(name)] if role == "prim_main" else "unary"
        if primitive not in offered:
            raise OperationError(f"{role}={name!r} in {dtype} needs the complex {primitive} "
                                 f"kernel, which the {target.isa} backend does not generate")


def _num_threads(value) -> int | None:
    if value is None:
        return None
    return check_int("num_threads", value, 1)


@dataclass(slots=True)
class _Execution:
    """What every execute of an operation needs, computed once on the first: the compiled
    loop nest, each tensor's extent in elements, which tensors the op uses, its dtype, and
    `last`, the arrays of the last plain call (weak references) with their addresses."""
    compiled: Any
    extents: tuple[int, int, int]
    used: tuple[bool, bool, bool]
    dtype: np.dtype
    last: tuple | None = None


def _still_plain(execution: _Execution, in0, in1, out) -> bool:
    """Whether arrays that passed _plain_addresses before still do (an array keeps its data
    while its size and dtype stay; out's writability can be switched off)."""
    dtype = execution.dtype
    for value, flag, extent in zip((in0, in1, out), execution.used, execution.extents):
        if flag and (value.dtype is not dtype or value.size < extent):
            return False
    return out.flags.writeable


def _plain_addresses(execution: _Execution, in0, in1, out) -> list | None:
    """The operands' addresses when every used one is a writable, C-ordered array of the op's
    dtype large enough for its extent, unused ones are None and out overlaps no input: the
    common case, checked without a call per operand. None for anything else. The arrays are
    remembered weakly, with their addresses, for the next call (execute)."""
    extents, used, dtype = execution.extents, execution.used, execution.dtype
    values = (in0, in1, out)
    for value, flag, extent in zip(values, used, extents):
        if not flag:
            if value is not None:
                return None
        elif (type(value) is not np.ndarray or value.dtype is not dtype
              or value.size < extent or not value.flags.c_contiguous
              or not value.flags.writeable):
            return None
    addresses = [data_address(value) if flag else 0 for value, flag in zip(values, used)]
    item = dtype.itemsize
    out_start = addresses[2]
    out_end = out_start + extents[2] * item
    for address, extent, flag in zip(addresses[:2], extents[:2], used[:2]):
        if flag and address < out_end and out_start < address + extent * item:
            return None
    execution.last = (tuple(weakref.ref(value) if flag else None
                            for value, flag in zip(values, used)), addresses)
    return addresses


class TensorOperation:
    """A tensor operation: dims (loop order, outermost first) and the primitives around them.

    Parameters: see the module docstring.
    """

    def __init__(self, dtype, prim_first_touch: str, prim_main: str, prim_last_touch: str,
                 dim_types: Sequence[str], exec_types: Sequence[str] | None,
                 dim_sizes: Sequence[int], strides_in0: Sequence[int],
                 strides_in1: Sequence[int], strides_out: Sequence[int], *,
                 isa: str | Target | None = None, num_threads: int | None = None):
        self._dtype = _dtype(dtype)
        self._first = check_name("prim_first_touch", prim_first_touch, PRIM_TOUCHES)
        self._main = check_name("prim_main", prim_main, PRIM_MAINS)
        self._last = check_name("prim_last_touch", prim_last_touch, PRIM_TOUCHES)
        columns = {"dim_types": _sequence("dim_types", dim_types)}
        if exec_types is None:
            exec_types = ("undefined",) * len(columns["dim_types"])
        for name, value in zip(FIELDS[1:], (exec_types, dim_sizes, strides_in0, strides_in1,
                                            strides_out)):
            columns[name] = _sequence(name, value)
        lengths = {name: len(value) for name, value in columns.items()}
        if len(set(lengths.values())) != 1:
            raise OperationError(f"the per-dim parameters have different lengths: {lengths}; "
                                 f"each needs one entry per dim")
        if lengths["dim_types"] == 0:
            raise OperationError("an operation needs at least one dim; got dim_types=()")
        dims = []
        for index in range(lengths["dim_types"]):
            check_name(f"dim_types[{index}]", columns["dim_types"][index], DIM_TYPES)
            check_name(f"exec_types[{index}]", columns["exec_types"][index], EXEC_TYPES)
            check_int(f"dim_sizes[{index}]", columns["dim_sizes"][index], 1)
            for name in FIELDS[3:]:
                check_int(f"{name}[{index}]", columns[name][index], 0)
            dims.append(Dim(*(columns[name][index] for name in FIELDS)))
        self._dims = tuple(dims)
        self._kernel_calls = check_operation(self._first, self._main, self._last, self._dims)
        self._target = resolve_target(isa)
        if self._dtype in COMPLEX_DTYPES:
            _check_complex(self._dtype, {"prim_first_touch": self._first,
                                         "prim_main": self._main,
                                         "prim_last_touch": self._last}, self._target)
        self._num_threads = _num_threads(num_threads)
        self._execution: _Execution | None = None      # set by the first execute

    @classmethod
    def from_dims(cls, dtype, prim_first_touch: str, prim_main: str, prim_last_touch: str,
                  dims: Sequence[Dim], *, isa: str | Target | None = None,
                  num_threads: int | None = None) -> "TensorOperation":
        """The operation over `dims` (Dim objects, loop order, outermost first)."""
        dims = _sequence("dims", dims)
        for index, dim in enumerate(dims):
            if not isinstance(dim, Dim):
                raise OperationTypeError(f"dims[{index}] must be an einjit.ir.Dim; got {dim!r}")
        columns = [tuple(getattr(dim, field) for dim in dims)
                   for field in ("type", "exec_type", "size", "stride_in0", "stride_in1",
                                 "stride_out")]
        return cls(dtype, prim_first_touch, prim_main, prim_last_touch, *columns, isa=isa,
                   num_threads=num_threads)

    # -- fields ---------------------------------------------------------------------------
    dtype = property(lambda self: self._dtype, doc="element type name, e.g. 'float32'")
    prim_first_touch = property(lambda self: self._first)
    prim_main = property(lambda self: self._main)
    prim_last_touch = property(lambda self: self._last)
    dims = property(lambda self: self._dims, doc="tuple of Dim in loop order, outermost first")
    target = property(lambda self: self._target, doc="the einjit.backends.Target code is for")
    num_threads = property(lambda self: self._num_threads)

    @property
    def isa(self) -> str:
        return self._target.isa

    @property
    def kind(self) -> str:
        """"contraction", "unary", "binary" or "none" (what prim_main is)."""
        return main_kind(self._main)

    @property
    def kernel_calls(self) -> tuple[KernelCall, ...]:
        """The primitive calls of the innermost level (first touch, main, last touch, those
        that are not "none"), their kernel parameters and integer arguments; () while a dim
        is "undefined"."""
        return self._kernel_calls

    @property
    def is_defined(self) -> bool:
        """True when no dim is "undefined" (the op can be executed)."""
        return all(dim.exec_type != "undefined" for dim in self._dims)

    def column(self, field: str) -> tuple:
        """One per-dim parameter as a tuple: "dim_types", "exec_types", "dim_sizes",
        "strides_in0", "strides_in1" or "strides_out"."""
        attribute = {"dim_types": "type", "exec_types": "exec_type", "dim_sizes": "size",
                     "strides_in0": "stride_in0", "strides_in1": "stride_in1",
                     "strides_out": "stride_out"}
        if field not in attribute:
            raise OperationError(f"field={field!r} is not known; expected one of {FIELDS}")
        return tuple(getattr(dim, attribute[field]) for dim in self._dims)

    dim_types = property(lambda self: self.column("dim_types"))
    exec_types = property(lambda self: self.column("exec_types"))
    dim_sizes = property(lambda self: self.column("dim_sizes"))
    strides_in0 = property(lambda self: self.column("strides_in0"))
    strides_in1 = property(lambda self: self.column("strides_in1"))
    strides_out = property(lambda self: self.column("strides_out"))

    def extent(self, tensor: str) -> int:
        """Elements from the base to one past the highest element `tensor` ("in0", "in1" or
        "out") reaches: 1 + sum((size - 1) * stride)."""
        field = {"in0": "stride_in0", "in1": "stride_in1", "out": "stride_out"}.get(tensor)
        if field is None:
            raise OperationError(f"tensor={tensor!r} is not known; expected 'in0', 'in1' or 'out'")
        return 1 + sum((dim.size - 1) * getattr(dim, field) for dim in self._dims)

    def total(self, dim_type: str) -> int:
        """The product of the sizes of the dims of `dim_type` ("c", "m", "n" or "k")."""
        if dim_type not in DIM_TYPES:
            raise OperationError(f"dim_type={dim_type!r} is not known; expected one of "
                                 f"{DIM_TYPES}")
        return prod(dim.size for dim in self._dims if dim.type == dim_type)

    @property
    def is_matrix_vector(self) -> bool:
        """Whether the operation is a contraction whose n dims are all of size 1: a matrix
        times a vector, C one column."""
        return self.kind == "contraction" and self.total("n") == 1

    @property
    def operands(self) -> tuple[str, ...]:
        """The tensors the operation reads or writes."""
        return {"contraction": ("in0", "in1", "out"), "binary": ("in0", "in1", "out"),
                "unary": ("in0", "out"), "none": ("out",)}[self.kind]

    # -- value semantics ------------------------------------------------------------------
    def _key(self) -> tuple:
        return (self._dtype, self._first, self._main, self._last, self._dims, self._target,
                self._num_threads)

    def __eq__(self, other) -> bool:
        if not isinstance(other, TensorOperation):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value) -> None:
        # public fields are read-only; private slots may be set (e.g. codegen's cache)
        if not name.startswith("_"):
            raise AttributeError(f"TensorOperation is immutable; use op.replace({name}=...)")
        object.__setattr__(self, name, value)

    def replace(self, **changes) -> "TensorOperation":
        """A new operation with some parameters changed (constructor names, or dims=...),
        validated again."""
        params = {"dtype": self._dtype, "prim_first_touch": self._first,
                  "prim_main": self._main, "prim_last_touch": self._last,
                  "isa": self._target, "num_threads": self._num_threads}
        unknown = set(changes) - set(params) - set(FIELDS) - {"dims"}
        if unknown:
            raise OperationTypeError(f"replace() got unknown parameters {sorted(unknown)}; "
                                     f"expected {sorted(set(params) | set(FIELDS) | {'dims'})}")
        if "dims" in changes and set(changes) & set(FIELDS):
            raise OperationTypeError("replace() takes dims=... or per-dim columns, not both")
        params.update({k: v for k, v in changes.items() if k in params})
        first, main, last = (params.pop(name) for name in
                             ("prim_first_touch", "prim_main", "prim_last_touch"))
        dtype = params.pop("dtype")
        if "dims" in changes:
            return TensorOperation.from_dims(dtype, first, main, last, changes["dims"], **params)
        columns = [changes.get(field, self.column(field)) for field in FIELDS]
        return TensorOperation(dtype, first, main, last, *columns, **params)

    def __str__(self) -> str:
        from einjit.ir.printer import format_operation
        return format_operation(self)

    def __repr__(self) -> str:
        columns = ", ".join(f"{field}={self.column(field)!r}" for field in FIELDS)
        return (f"TensorOperation({self._dtype!r}, {self._first!r}, {self._main!r}, "
                f"{self._last!r}, {columns}, isa={self._target.name!r}, "
                f"num_threads={self._num_threads!r})")

    def _repr_html_(self) -> str:
        """Jupyter's table of the operation (einjit.display.operation_html)."""
        from einjit.display import operation_html
        return operation_html(self)

    # -- execution ------------------------------------------------------------------------
    def execute(self, in0, in1, out) -> None:
        """Run the operation on numpy arrays of the op's dtype (their data pointers are the
        bases) or integer addresses; `in1` may be None for unary and "none" ops, `in0` for
        "none". Arrays must reach the highest offset the strides address; out must be
        writable."""
        execution = self._execution or self._prepare()
        last = execution.last
        if last is not None:    # the arrays of the last call again: only what may have changed
            refs, addresses = last
            # an unused operand (no ref) was None, and must be again: others get checked
            if (refs[2]() is out and (in0 is None if refs[0] is None else refs[0]() is in0)
                    and (in1 is None if refs[1] is None else refs[1]() is in1)
                    and _still_plain(execution, in0, in1, out)):
                compiled = execution.compiled
                if compiled.single is not None:      # the common case, without run()'s call
                    compiled.function(*addresses, 0, compiled.single)
                else:
                    compiled.run(*addresses)
                return
        addresses = _plain_addresses(execution, in0, in1, out)
        if addresses is None:       # anything unusual: the full checks, which name the problem
            extents, used = execution.extents, execution.used
            values = (in0, in1, out)
            addresses = [self._address(name, value, flag, extent) for name, value, flag, extent
                         in zip(("in0", "in1", "out"), values, used, extents)]
            if isinstance(out, np.ndarray):      # subclasses too: a matrix, a view of one
                self._check_overlap(values, addresses, extents, used)
        execution.compiled.run(*addresses)

    def _prepare(self) -> _Execution:
        """What every execute needs (an _Execution), computed once."""
        if not self.is_defined:
            undefined = [i for i, dim in enumerate(self._dims) if dim.exec_type == "undefined"]
            raise OperationError(f"dims {undefined} have exec_type 'undefined'; run "
                                 f"einjit.optimize(op) first to decide how each dim executes")
        from einjit.codegen import compile_operation
        used = tuple(name in self.operands for name in ("in0", "in1", "out"))
        extents = tuple(self.extent(name) if flag else 0
                        for name, flag in zip(("in0", "in1", "out"), used))
        self._execution = _Execution(compile_operation(self), extents, used,
                                     np.dtype(self._dtype))
        return self._execution

    def _address(self, name: str, value, used: bool, extent: int) -> int:
        dtype = np.dtype(self._dtype)
        if value is None:
            if used:
                raise OperandError(f"operand {name} is None but prim_main={self._main!r} "
                                   f"uses it; expected a {dtype} array or an address")
            return 0
        if isinstance(value, np.ndarray):
            if value.dtype != dtype:
                raise OperandError(f"operand {name} has dtype {value.dtype}; expected {dtype}")
            if not used:
                return 0
            flags = value.flags
            if not (flags.c_contiguous or flags.f_contiguous):
                raise OperandValueError(f"operand {name} must be a contiguous array (C or "
                                        f"Fortran order); got strides {value.strides}")
            if value.size < extent:
                raise OperandValueError(
                    f"operand {name} has {value.size} elements but the operation's strides "
                    f"reach {extent} elements from its base")
            if name == "out" and not flags.writeable:
                raise OperandValueError(f"operand {name} is read-only but the operation "
                                        f"writes it")
            return data_address(value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            address = int(value)
            end = address + extent * dtype.itemsize
            if used and not (MIN_ADDRESS <= address and end <= ADDRESS_LIMIT):
                raise OperandValueError(
                    f"operand {name}: address {address:#x} (reaching {extent} elements) is out "
                    f"of range; expected {MIN_ADDRESS:#x} <= address and the end <= 2**48")
            return address if used else 0
        raise OperandError(f"operand {name} must be a {dtype} numpy array, an integer address "
                           f"or None; got {type(value).__name__}")

    def _check_overlap(self, values: tuple, addresses: list, extents: tuple,
                       used: tuple) -> None:
        """out may share memory with an input only as the same elements in the same order
        (element-wise ops in place); contractions never."""
        item = np.dtype(self._dtype).itemsize
        out_start = addresses[2]
        out_end = out_start + extents[2] * item
        for index, name in enumerate(("in0", "in1")):
            if not used[index] or not isinstance(values[index], np.ndarray):
                continue
            start = addresses[index]
            end = start + extents[index] * item
            if start >= out_end or out_start >= end:
                continue
            field = "stride_" + name
            same = (self.kind in ("unary", "binary") and start == out_start
                    and all(getattr(d, field) == d.stride_out or d.size == 1 for d in self._dims))
            if not same:
                raise OperandValueError(
                    f"operand out overlaps operand {name} in memory; the operation writes out "
                    f"while reading {name}: pass separate arrays"
                    + (" (or the same array with the same strides)"
                       if self.kind in ("unary", "binary") else ""))
