"""AArch64 NEON backend: generators returning the machine code of each primitive."""

from .binary import generate_binary
from .brgemm import generate_brgemm
from .unary import generate_unary

__all__ = ["generate_brgemm", "generate_unary", "generate_binary"]
