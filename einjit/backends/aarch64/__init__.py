"""AArch64 NEON backend: the primitives' machine code, alone or emitted into a caller's code.

The registry (einjit.backends) calls the generate_* functions with a Target of variant
"neon"; the caller has validated the parameters and maps the bytes executable. The emit_*
functions put the same function at the current position of a caller's Assembler (e.g. after
a loop nest that calls it with bl) and return the Label of its entry; generate_* is emit_*
into a new Assembler. Every generator and emitter takes a trailing dtype, "float32" (the
default) or "float64".
"""

from __future__ import annotations

from einjit.backends.aarch64.binary import emit_binary, generate_binary
from einjit.backends.aarch64.brgemm import emit_brgemm, generate_brgemm
from einjit.backends.aarch64.dispatch import (
    generate_claim,
    generate_run_tasks,
    generate_spin,
    generate_worker_loop,
)
from einjit.backends.aarch64.entry import array_call, guard_entry
from einjit.backends.aarch64.icache import flush_icache
from einjit.backends.aarch64.target import VARIANTS
from einjit.backends.aarch64.unary import emit_unary, generate_unary

# the primitives whose generators take complex64 and complex128 (einjit.ops.COMPLEX_DTYPES)
COMPLEX_PRIMITIVES = ("brgemm", "unary", "binary")


def default_variant() -> str:
    return "neon"


def missing_features(variant: str) -> tuple[str, ...]:
    return ()   # Advanced SIMD is part of every AArch64 application processor


def brgemm_vector_bits(target, m: int, k: int, dtype: str) -> int:
    """The vector width a BRGEMM kernel computes in: NEON's, whatever its M."""
    return target.vector_bits


# last: the loop nests import the generators above
from einjit.backends.aarch64.loops import generate_loop_nest  # noqa: E402

__all__ = ["VARIANTS", "COMPLEX_PRIMITIVES", "default_variant", "missing_features",
           "brgemm_vector_bits", "array_call",
           "generate_brgemm", "generate_unary", "generate_binary", "generate_loop_nest",
           "emit_brgemm", "emit_unary", "emit_binary", "guard_entry", "flush_icache",
           "generate_worker_loop", "generate_run_tasks", "generate_spin",
           "generate_claim"]
