"""The AArch64 targets (Advanced SIMD: 32 vector registers of 128 bits) and the checks every
emitter makes of its parameters before emitting anything."""

from __future__ import annotations

import operator
from collections.abc import Collection

from einjit.backends import Target
from einjit.errors import KernelParameterError

NEON = Target("aarch64", "neon", vector_bits=128, registers=32)
VARIANTS = {NEON.variant: NEON}


def check_target(target: Target) -> Target:
    """`target` if this backend generates code for it, else KernelParameterError."""
    if not isinstance(target, Target) or target.isa != "aarch64" or \
            VARIANTS.get(target.variant) != target:
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
