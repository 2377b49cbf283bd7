"""Kernel: generated machine code plus the checked Python call into it.

A Kernel owns its code bytes; on a host that can run them it also owns an executable copy and
a ctypes function for it (ctypes releases the GIL during the call, so kernels run in parallel
from several threads). Every call checks its arguments against the kernel's Signature before
any code runs, so a wrong argument raises instead of touching memory it should not:

- integers are Python or numpy integers within [lower bound, 2^31);
- a pointer is a numpy array of the kernel's dtype, in the layout the kernel walks, large
  enough for the access, writable if written, or an integer address in [4096, 2^48);
- an output may be the same memory as an input only where the kernel reads each element
  before writing it (element-wise, same layout); any other overlap is refused.

`Kernel.function` is the bare ctypes entry (integers only, no checks) for callers that
validated their arguments once, such as einjit's own loop nests and benchmarks.
"""

from __future__ import annotations

import ctypes
import inspect
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .backends import Target, place_code, resolve_target, why_not_runnable
from .disasm import disassemble
from .errors import IsaMismatchError, OperandError, OperandValueError
from .limits import ADDRESS_LIMIT, INTEGER_LIMIT, MIN_ADDRESS
from .runtime.arrays import data_address


@dataclass(frozen=True)
class Layout:
    """How a kernel walks one operand: `rows` contiguous elements per column, columns `ld`
    elements apart; order "F" (column-major) or "C" (row-major: rows are the contiguous
    runs of a C-ordered array, ld its row pitch)."""
    ld: str             # the name of the integer argument giving the pitch
    rows: int
    order: str = "F"


@dataclass(frozen=True)
class Signature:
    """The arguments of a kernel and the rules they must satisfy.

    pointers: names of the operands (numpy arrays or integer addresses);
    integers: names of the integer arguments (leading dimensions, strides), in elements;
    outputs: pointer names the kernel writes;
    lower_bounds: smallest allowed value of each integer argument;
    extents: maps the integer arguments to the number of elements reachable from each pointer;
    layouts: how the kernel walks each pointer (checked against 2-D and higher arrays);
    in_place: pointer pairs (output, input) that may be the same memory in the same layout.
    """
    pointers: tuple
    integers: tuple
    outputs: frozenset
    lower_bounds: dict
    extents: Callable
    layouts: dict = field(default_factory=dict)
    in_place: frozenset = frozenset()
    dtype: str = "float32"

    @property
    def names(self) -> tuple:
        return self.pointers + self.integers


def _check_integer(name: str, value, lower: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise OperandError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if not lower <= value < INTEGER_LIMIT:
        raise OperandValueError(f"{name}={value} is out of range; expected "
                                f"{lower} <= {name} < 2**31")
    return value


def _check_layout(name: str, array: np.ndarray, layout: Layout, ld: int) -> None:
    """A 2-D or higher array must lay its elements out as the kernel walks them: Fortran order
    with shape[0] == ld for a column-major operand; for a row-major one, C order with
    shape[-1] == ld, or its transpose in Fortran order (shape[0] == ld)."""
    if array.ndim < 2 or array.size == max(array.shape):
        return  # one row or one column: every order describes the same memory
    fortran = array.flags.f_contiguous and array.shape[0] == ld
    c_rows = array.flags.c_contiguous and array.shape[-1] == ld
    if fortran or (layout.order == "C" and c_rows):
        return
    order = "Fortran" if array.flags.f_contiguous else "C"
    if layout.order == "F":
        expected = (f"a Fortran-ordered (column-major) array with shape[0] == {layout.ld} "
                    f"({ld}), e.g. np.asfortranarray(...), or a 1-D buffer")
    else:
        expected = (f"a C-ordered (row-major) array with shape[-1] == {layout.ld} ({ld}), its "
                    f"transpose in Fortran order with shape[0] == {ld}, or a 1-D buffer")
    raise OperandValueError(f"operand {name} is a {order}-ordered array with shape "
                            f"{array.shape}; the kernel walks it in runs of {layout.rows} "
                            f"elements {ld} apart and expects {expected}")


def _span(address: int, extent: int, itemsize: int) -> tuple[int, int]:
    return address, address + extent * itemsize


class Kernel:
    """Generated code for one primitive and one parameter set.

    Call it with the arguments its signature names (`inspect.signature(kern)`, `help(kern)`),
    positionally or by name. `function` is the unchecked entry for validated callers.
    """

    def __init__(self, code: bytes, target: Target | str, name: str, signature: Signature,
                 doc: str = ""):
        self.code = bytes(code)
        self.target = target if isinstance(target, Target) else resolve_target(target)
        self.name = name
        self.signature = signature
        self.__doc__ = doc or f"Kernel {name}: call with ({', '.join(signature.names)})."
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD)
             for arg in signature.names])
        self._dtype = np.dtype(signature.dtype)
        self._memory = None     # a CodeBlock in the shared arena, sealed on first use
        self._function = None
        self._not_runnable = why_not_runnable(self.target)
        if self._not_runnable is None:
            self._memory = place_code(self.target, self.code)

    @property
    def isa(self) -> str:
        return self.target.isa

    def __repr__(self) -> str:
        return f"<einjit.Kernel {self.name} target={self.target} {len(self.code)} bytes>"

    @property
    def address(self) -> int | None:
        """Entry address of the executable code (None if this host cannot run it)."""
        return None if self._memory is None else self._memory.address

    @property
    def function(self) -> Callable | None:
        """The unchecked ctypes entry (None if this host cannot run the code). The first access
        seals the code: kernels placed before it share its executable pages."""
        function = self._function
        if function is None and self._memory is not None:
            prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * len(self.signature.names))
            function = prototype(self._memory.address)
            function.code_block = self._memory  # the code lives as long as this entry
            self._function = function
        return function

    def disassemble(self) -> str:
        return disassemble(self.code, self.isa)

    def _repr_html_(self) -> str:
        """Jupyter's disassembly listing (einjit.display.kernel_html)."""
        from .display import kernel_html
        return kernel_html(self)

    def __call__(self, *args, **kwargs) -> None:
        if self.function is None:
            raise IsaMismatchError(f"kernel {self.name} cannot run here: {self._not_runnable}; "
                                   f"it can be inspected, not called")
        sig = self.signature
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as exc:
            raise OperandError(f"kernel {self.name} takes ({', '.join(sig.names)}): "
                               f"{exc}") from None
        values = {name: _check_integer(name, bound.arguments[name], sig.lower_bounds[name])
                  for name in sig.integers}
        extents = sig.extents(values)
        addresses = [self._address(name, bound.arguments[name], extents[name], values)
                     for name in sig.pointers]
        self._check_overlap(addresses, extents, values, bound.arguments)
        self.function(*addresses, *values.values())

    def _address(self, name: str, value, extent: int, values: dict) -> int:
        """The data address of one operand, after checking it can take the access it gets."""
        sig = self.signature
        if isinstance(value, np.ndarray):
            if value.dtype != self._dtype:
                raise OperandError(f"operand {name} has dtype {value.dtype}; "
                                   f"expected {self._dtype}")
            if not (value.flags.c_contiguous or value.flags.f_contiguous):
                raise OperandValueError(f"operand {name} must be a contiguous array (C or "
                                        f"Fortran order); got strides {value.strides}")
            layout = sig.layouts.get(name)
            if layout is not None:
                _check_layout(name, value, layout, values[layout.ld])
            if value.size < extent:
                raise OperandValueError(
                    f"operand {name} has {value.size} elements but the kernel accesses {extent} "
                    f"with these leading dimensions/strides")
            if name in sig.outputs and not value.flags.writeable:
                raise OperandValueError(f"operand {name} is read-only but the kernel writes it")
            return data_address(value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            address = int(value)
            end = address + extent * self._dtype.itemsize
            if not (MIN_ADDRESS <= address and end <= ADDRESS_LIMIT):
                raise OperandValueError(
                    f"operand {name}: address {address:#x} (reaching {extent} elements) is out "
                    f"of range; expected {MIN_ADDRESS:#x} <= address and the end <= 2**48")
            return address
        raise OperandError(f"operand {name} must be a {self._dtype} numpy array or an integer "
                           f"address; got {type(value).__name__}")

    def _check_overlap(self, addresses: list, extents: dict, values: dict, arguments: dict) -> None:
        """No output may share memory with another operand, except an allowed in-place pair
        given in the same layout."""
        sig = self.signature
        itemsize = self._dtype.itemsize
        spans = {name: _span(address, extents[name], itemsize)
                 for name, address in zip(sig.pointers, addresses)}
        starts = dict(zip(sig.pointers, addresses))
        for out in sig.outputs:
            out_start, out_end = spans[out]
            for other in sig.pointers:
                if other == out:
                    continue
                start, end = spans[other]
                if start >= out_end or out_start >= end:
                    continue
                same = (starts[other] == starts[out]
                        and (out, other) in sig.in_place
                        and values[sig.layouts[out].ld] == values[sig.layouts[other].ld])
                if not same:
                    raise OperandValueError(
                        f"operand {out} overlaps operand {other} in memory; the kernel writes "
                        f"{out} while reading {other}: pass separate arrays"
                        + (" (or the same array in the same layout)"
                           if (out, other) in sig.in_place else ""))
