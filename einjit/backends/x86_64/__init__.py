"""x86-64 backend: AVX-512 and AVX2/FMA code for the primitives, as bytes.

Each generator takes the primitive's compile-time parameters and `variant` ("avx512" or
"avx2"); the caller (einjit.primitives) has validated them and maps the bytes executable.
"""

from einjit.backends.x86_64.binary import generate_binary
from einjit.backends.x86_64.brgemm import generate_brgemm
from einjit.backends.x86_64.unary import generate_unary

__all__ = ["generate_brgemm", "generate_unary", "generate_binary"]
