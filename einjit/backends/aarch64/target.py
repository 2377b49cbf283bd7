"""The AArch64 targets (Advanced SIMD: 32 vector registers of 128 bits) and the core facts
code for them is planned with, the element types the kernels compute in, and the checks every
emitter makes of its parameters before emitting anything."""

from __future__ import annotations

import operator
from collections.abc import Collection
from dataclasses import dataclass, replace

from einjit.backends import Microarch, Target
from einjit.errors import KernelParameterError, KernelParameterTypeError

# The core the loop nests and passes plan for (einjit.backends.Microarch): 128-bit NEON at
# full rate. No Arm core has been measured for the cache facts and thresholds yet: they are
# the generic core's (a 32 KiB 8-way L1 of 64-byte lines, the x86 cores' nest thresholds),
# stated here so that a measured core replaces them in one place. Its kernels have no
# prefetch of the next call's blocks (brgemm's next_call): the nests never ask for it.
GENERIC_CORE = Microarch("generic-aarch64", full_rate_bits=128, l1_ways=8, l1_sets=64,
                         batch_block_bytes=384 << 10, pack_max_bytes=288 << 10,
                         stream_out_bytes=64 << 20, prefetch_next_call=False)
NEON = Target("aarch64", "neon", vector_bits=128, registers=32, micro=GENERIC_CORE)
VARIANTS = {NEON.variant: NEON}


@dataclass(frozen=True)
class Element:
    """How one element type lives in the 128-bit registers.

    size: bytes per element; letter: its scalar register / lane letter (s, d);
    arr: the full-vector arrangement (4s, 2d); lanes: elements per q register;
    shift: log2(size), turning an element count into bytes.
    """
    dtype: str
    size: int
    letter: str
    arr: str

    @property
    def lanes(self) -> int:
        return 16 // self.size

    @property
    def shift(self) -> int:
        return self.size.bit_length() - 1

    @property
    def bits(self) -> int:
        return 8 * self.size


FLOAT32 = Element("float32", 4, "s", "4s")
FLOAT64 = Element("float64", 8, "d", "2d")
ELEMENTS = {FLOAT32.dtype: FLOAT32, FLOAT64.dtype: FLOAT64}


def check_target(target: Target) -> Target:
    """`target` if this backend generates code for it (a variant's, with any core's facts),
    else KernelParameterError."""
    variant = VARIANTS.get(getattr(target, "variant", None))
    if not isinstance(target, Target) or target.isa != "aarch64" or variant is None or \
            replace(variant, micro=target.micro) != target:
        raise KernelParameterError(f"target={target!r}: the aarch64 backend generates code "
                                   f"for {', '.join(map(repr, VARIANTS.values()))} only")
    return target


def check_sizes(**sizes: int) -> None:
    """Every size an integer >= 1 (the public API checks the upper limits)."""
    for name, value in sizes.items():
        try:
            valid = not isinstance(value, bool) and operator.index(value) >= 1
        except TypeError:
            valid = False
        if not valid:
            raise KernelParameterError(f"{name}={value!r}: expected an integer >= 1")


def check_op(kind: str, op: str, ops: Collection[str]) -> None:
    if op not in ops:
        raise KernelParameterError(f"op={op!r} is not a {kind} op; expected one of "
                                   f"{tuple(ops)}")


def check_dtype(dtype: str) -> Element:
    """The Element of `dtype` ("float32" or "float64"), else KernelParameterError."""
    if not isinstance(dtype, str):
        raise KernelParameterTypeError(f"dtype={dtype!r}: expected a str, one of "
                                       f"{', '.join(map(repr, ELEMENTS))}")
    element = ELEMENTS.get(dtype)
    if element is None:
        raise KernelParameterError(f"dtype={dtype!r}: the aarch64 backend generates code for "
                                   f"{', '.join(map(repr, ELEMENTS))}")
    return element
