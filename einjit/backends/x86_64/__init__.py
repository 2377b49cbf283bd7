"""x86-64 backend: AVX-512 and AVX2/FMA code for the primitives, as bytes.

The registry (einjit.backends) calls the generate_* functions with a Target whose variant is
"avx512" or "avx2"; the caller has validated the parameters and maps the bytes executable.
"""

from __future__ import annotations

from einjit.backends import Target
from einjit.backends.x86_64 import cpu
from einjit.backends.x86_64.binary import generate_binary as _binary
from einjit.backends.x86_64.brgemm import generate_brgemm as _brgemm
from einjit.backends.x86_64.unary import generate_unary as _unary

VARIANTS = {
    "avx512": Target("x86_64", "avx512", vector_bits=512, registers=32, masks=7),
    "avx2": Target("x86_64", "avx2", vector_bits=256, registers=16),
}


def default_variant() -> str:
    return cpu.variant()


def missing_features(variant: str) -> tuple[str, ...]:
    return tuple(name for name in cpu.VARIANTS[variant] if name not in cpu.features())


def generate_brgemm(target: Target, m: int, n: int, k: int, br_size: int) -> bytes:
    return _brgemm(m, n, k, br_size, variant=target.variant)


def generate_unary(target: Target, op: str, m: int, n: int, trans_b: bool) -> bytes:
    return _unary(op, m, n, trans_b, variant=target.variant)


def generate_binary(target: Target, op: str, m: int, n: int) -> bytes:
    return _binary(op, m, n, variant=target.variant)


from einjit.backends.x86_64.loops import generate_loop_nest  # noqa: E402  (imports the generators above)

__all__ = ["generate_loop_nest", "VARIANTS", "default_variant", "missing_features", "generate_brgemm",
           "generate_unary", "generate_binary"]
