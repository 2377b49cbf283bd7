"""Which real element-wise kernel computes a complex one, on every ISA.

A complex64 or complex128 matrix (interleaved, numpy's layout) is, byte for byte, a real
matrix of twice the rows whose leading dimension is twice as many real elements. So zero,
identity, add, sub and mul (the complex product, an op of its own on the real rows) run the
real kernels' sweeps on 2M rows of the part dtype, with the leading dimensions scaled to
bytes by one more doubling. A transposing copy must move each complex element whole: a
complex64 moves as one float64 (the float64 transposing copy on the same shape), a
complex128 as a 16-byte element, which no real kernel moves: the backend's own transpose of
16-byte elements (RealForm None).
"""

from __future__ import annotations

from dataclasses import dataclass

from einjit.errors import KernelParameterError
from einjit.ops import BINARY, UNARY

# the real type of each complex dtype's parts
PART_DTYPES = {"complex64": "float32", "complex128": "float64"}


def is_complex(dtype: str) -> bool:
    return isinstance(dtype, str) and dtype in PART_DTYPES


def check_complex_op(kind: str, op: str, dtype: str) -> None:
    """KernelParameterError unless einjit.ops marks the `kind` ("unary" or "binary") op as
    taking complex dtypes."""
    table = UNARY if kind == "unary" else BINARY
    if op not in table or not table[op].complex:
        takes = tuple(name for name, entry in table.items() if entry.complex)
        raise KernelParameterError(f"{kind} {op} does not take {dtype}; the {kind} ops that "
                                   f"take complex dtypes are {takes}")


@dataclass(frozen=True)
class RealForm:
    """The real kernel computing a complex element-wise op: its shape, layout and dtype, and
    the extra left shift turning the complex leading dimensions into its own (1: ld doubled)."""
    m: int
    n: int
    trans_b: bool
    dtype: str
    ld_shift: int


def unary_form(op: str, m: int, n: int, trans_b: bool, dtype: str) -> RealForm | None:
    """The real form of the complex unary `op` (zero or identity) on m x n; None for the
    complex128 transposing copy (a transpose of 16-byte elements)."""
    if trans_b and op == "zero":         # B is simply an n x m column-major matrix
        m, n, trans_b = n, m, False
    if not trans_b:
        return RealForm(2 * m, n, False, PART_DTYPES[dtype], 1)
    if dtype == "complex64":
        return RealForm(m, n, True, "float64", 0)
    return None


def binary_form(m: int, n: int, dtype: str) -> RealForm:
    """The real form of a complex binary op on m x n (add and sub are the real ops; mul is
    the backend's complex product on pairs of real lanes)."""
    return RealForm(2 * m, n, False, PART_DTYPES[dtype], 1)
