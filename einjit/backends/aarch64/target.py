"""The AArch64 targets: Advanced SIMD (NEON), 32 vector registers of 128 bits."""

from __future__ import annotations

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
