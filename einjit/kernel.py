"""Kernel: generated machine code plus the checked Python call into it.

A Kernel owns its code bytes; on a host of the same ISA it also owns an executable copy and a
ctypes function for it (ctypes releases the GIL during the call, so kernels run in parallel
from several threads). Every call checks its arguments against the kernel's Signature before
any code runs, so a wrong argument raises instead of touching memory it should not.
"""

import ctypes
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .disasm import disassemble
from .errors import IsaMismatchError, OperandError
from .runtime.host import host_isa
from .runtime.memory import ExecutableMemory


@dataclass(frozen=True)
class Signature:
    """The arguments of a kernel and the rules they must satisfy.

    pointers: names of the float32 operands (numpy arrays or integer addresses);
    integers: names of the integer arguments (leading dimensions, strides), in elements;
    outputs: pointer names the kernel writes;
    lower_bounds: smallest allowed value of each integer argument;
    extents: maps the integer arguments to the number of elements reachable from each pointer.
    """
    pointers: tuple
    integers: tuple
    outputs: frozenset
    lower_bounds: dict
    extents: Callable

    @property
    def names(self):
        return self.pointers + self.integers


def _address(name, value, required, writes):
    """The data address of one operand, after checking it can take the access it will get."""
    if isinstance(value, np.ndarray):
        if value.dtype != np.float32:
            raise OperandError(f"operand {name} has dtype {value.dtype}; expected float32")
        if not (value.flags.c_contiguous or value.flags.f_contiguous):
            raise OperandError(f"operand {name} must be a contiguous array (C or Fortran order)")
        if value.size < required:
            raise OperandError(f"operand {name} has {value.size} elements but the kernel "
                               f"accesses {required} with these leading dimensions/strides")
        if writes and not value.flags.writeable:
            raise OperandError(f"operand {name} is read-only but the kernel writes it")
        return value.ctypes.data
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return int(value)
    raise OperandError(f"operand {name} must be a float32 numpy array or a positive integer "
                       f"address; got {type(value).__name__}")


class Kernel:
    """Generated code for one primitive and one parameter set."""

    def __init__(self, code: bytes, isa: str, name: str, signature: Signature):
        self.code = bytes(code)
        self.isa = isa
        self.name = name
        self.signature = signature
        self._memory = None
        self._function = None
        if isa == host_isa():
            self._memory = ExecutableMemory(self.code)
            prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * len(signature.names))
            self._function = prototype(self._memory.address)

    def __repr__(self):
        return f"<einjit.Kernel {self.name} isa={self.isa} {len(self.code)} bytes>"

    @property
    def address(self):
        """Entry address of the executable code (None if generated for another ISA)."""
        return None if self._memory is None else self._memory.address

    def disassemble(self) -> str:
        return disassemble(self.code, self.isa)

    def __call__(self, *args):
        sig = self.signature
        if self._function is None:
            raise IsaMismatchError(f"kernel {self.name} was generated for {self.isa} but this "
                                   f"host runs {host_isa()}; it can be inspected, not called")
        if len(args) != len(sig.names):
            raise OperandError(f"kernel {self.name} takes {len(sig.names)} arguments "
                               f"({', '.join(sig.names)}); got {len(args)}")
        pointers, integers = args[:len(sig.pointers)], args[len(sig.pointers):]
        values = {}
        for name, value in zip(sig.integers, integers):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise OperandError(f"{name} must be an integer; got {value!r}")
            if value < sig.lower_bounds[name]:
                raise OperandError(f"{name}={value} is too small for kernel {self.name}; "
                                   f"expected at least {sig.lower_bounds[name]}")
            values[name] = int(value)
        extents = sig.extents(values)
        addresses = [_address(name, value, extents[name], name in sig.outputs)
                     for name, value in zip(sig.pointers, pointers)]
        self._function(*addresses, *values.values())
