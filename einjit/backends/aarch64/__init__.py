"""AArch64 NEON backend: generators returning the machine code of each primitive.

The registry (einjit.backends) calls the generate_* functions with a Target of variant
"neon"; the caller has validated the parameters and maps the bytes executable.
"""

from __future__ import annotations

from einjit.backends import Target
from einjit.backends.aarch64.binary import generate_binary as _binary
from einjit.backends.aarch64.brgemm import generate_brgemm as _brgemm
from einjit.backends.aarch64.unary import generate_unary as _unary

VARIANTS = {"neon": Target("aarch64", "neon", vector_bits=128, registers=32)}


def default_variant() -> str:
    return "neon"


def missing_features(variant: str) -> tuple[str, ...]:
    return ()   # Advanced SIMD is part of every AArch64 application processor


def generate_brgemm(target: Target, m: int, n: int, k: int, br_size: int) -> bytes:
    return _brgemm(m, n, k, br_size)


def generate_unary(target: Target, op: str, m: int, n: int, trans_b: bool) -> bytes:
    return _unary(op, m, n, trans_b)


def generate_binary(target: Target, op: str, m: int, n: int) -> bytes:
    return _binary(op, m, n)


from einjit.backends.aarch64.loops import generate_loop_nest  # noqa: E402  (imports the generators above)

__all__ = ["generate_loop_nest", "VARIANTS", "default_variant", "missing_features", "generate_brgemm",
           "generate_unary", "generate_binary"]
