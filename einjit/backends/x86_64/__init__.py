"""x86-64 backend: AVX-512 and AVX2/FMA code for the primitives.

The registry (einjit.backends) calls the generate_* functions with a Target whose variant is
"avx512" or "avx2"; the caller has validated the parameters and maps the bytes executable.
The emit_* functions place the same code as a callable function into a caller's Assembler
(e.g. after a loop nest that calls it) and return its entry Label.
"""

from __future__ import annotations

import numpy as np

from einjit.backends import Target
from einjit.backends.x86_64 import cpu
from einjit.backends.x86_64.binary import emit_binary, generate_binary
from einjit.backends.x86_64.blocking import unmasked_target
from einjit.backends.x86_64.brgemm import emit_brgemm, generate_brgemm
from einjit.backends.x86_64.complex_brgemm import complex_target
from einjit.backends.x86_64.dispatch import (
    generate_claim,
    generate_run_tasks,
    generate_spin,
    generate_worker_loop,
)
from einjit.backends.x86_64.entry import array_call, guard_entry
from einjit.backends.x86_64.loops import generate_loop_nest
from einjit.backends.x86_64.unary import emit_unary, generate_unary
from einjit.ops import COMPLEX_DTYPES

# the host core's facts (or EINJIT_X86_MICROARCH's) choose block shapes; a Target built with
# dataclasses.replace(VARIANTS[v], micro=cpu.MICROARCHS[name]) generates for another core
VARIANTS = {
    "avx512": Target("x86_64", "avx512", vector_bits=512, registers=32, masks=7,
                     micro=cpu.microarch()),
    "avx2": Target("x86_64", "avx2", vector_bits=256, registers=16, micro=cpu.microarch()),
}


# the primitives whose generators take complex64 and complex128 (einjit.ops.COMPLEX_DTYPES)
COMPLEX_PRIMITIVES = ("brgemm", "unary", "binary")

# x86 keeps instruction fetch coherent with stores: placed code needs no flush
flush_icache = None


def default_variant() -> str:
    """The host's best variant, or the one EINJIT_X86_VARIANT forces (see cpu.variant)."""
    return cpu.variant()


def missing_features(variant: str) -> tuple[str, ...]:
    """The CPU features `variant` needs that this host lacks."""
    return tuple(name for name in cpu.VARIANTS[variant] if name not in cpu.features())


def brgemm_vector_bits(target: Target, m: int, k: int, dtype: str) -> int:
    """The vector width a BRGEMM kernel of M rows and K steps computes in: the target's, or
    AVX2's where a tail of M takes that code (Zen 4: blocking.unmasked_target,
    complex_brgemm.complex_target)."""
    if dtype in COMPLEX_DTYPES:
        return complex_target(target, m, dtype).vector_bits
    return unmasked_target(target, m, np.dtype(dtype).itemsize, k).vector_bits


__all__ = ["VARIANTS", "COMPLEX_PRIMITIVES", "default_variant", "missing_features",
           "brgemm_vector_bits", "array_call",
           "emit_brgemm", "emit_unary", "emit_binary", "generate_brgemm", "generate_unary",
           "generate_binary",
           "generate_loop_nest", "guard_entry", "flush_icache", "generate_worker_loop",
           "generate_run_tasks", "generate_spin",
           "generate_claim"]
