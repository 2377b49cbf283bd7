"""The one table of operations: every layer (public API, backends, IR, tests) derives from it.

An operation is a primitive's element-wise function (unary, binary) or a contraction (gemm,
brgemm). `reference` computes it with numpy on arrays of the operation's dtype; it is the
oracle of the tests and of the IR's reference executor. `exact` says whether einjit's kernels
match the reference bit for bit (NaN payloads aside); the others state their accuracy in
`tolerance` (absolute, float32; float64 kernels meet the tighter bounds in
FLOAT64_TOLERANCE). `complex` says whether the op also takes complex64 and complex128 (the
one record of which op takes which dtype).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Op:
    name: str
    kind: str                       # "unary", "binary" or "contraction"
    reference: Callable | None      # numpy function of 1 or 2 arrays (None for contractions)
    exact: bool = True
    tolerance: float = 0.0          # absolute, where not exact
    complex: bool = False           # takes COMPLEX_DTYPES besides DTYPES


def _relu(a):
    # numpy (and the A64 kernels) give +0.0 for relu(-0.0); the x86-64 kernels keep -0.0
    # (it compares equal: the one documented sign difference, see README)
    return np.maximum(a, np.zeros_like(a))


def _sigmoid(a):
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-a.astype(np.float64)))).astype(a.dtype)


def _recip(a):
    with np.errstate(divide="ignore", over="ignore"):    # 1/denormal overflows to inf
        return np.reciprocal(a)


def _div(a, b):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.divide(a, b)


def _quiet(function):
    def call(*arrays):
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            return function(*arrays)
    return call


UNARY = {op.name: op for op in (
    Op("zero", "unary", np.zeros_like, complex=True),
    Op("identity", "unary", np.copy, complex=True),
    Op("relu", "unary", _relu),
    Op("square", "unary", _quiet(np.square)),
    Op("reciprocal", "unary", _recip, exact=False, tolerance=0.0),  # within 1 ulp (relative)
    Op("increment", "unary", _quiet(lambda a: a + a.dtype.type(1))),
    Op("decrement", "unary", _quiet(lambda a: a - a.dtype.type(1))),
    Op("sigmoid", "unary", _sigmoid, exact=False, tolerance=1e-6),
)}

BINARY = {op.name: op for op in (
    Op("add", "binary", _quiet(np.add), complex=True),
    Op("sub", "binary", _quiet(np.subtract), complex=True),
    # complex: numpy's array product, re = fma(ar, br, -(ai bi)), im = fma(ar, bi, ai br)
    Op("mul", "binary", _quiet(np.multiply), complex=True),
    Op("div", "binary", _div),
    Op("min", "binary", _quiet(np.minimum)),
    Op("max", "binary", _quiet(np.maximum)),
)}

CONTRACTION = {op.name: op for op in (
    Op("gemm", "contraction", None, complex=True),
    Op("brgemm", "contraction", None, complex=True),
)}

# float64 accuracy of the ops that are not exact: sigmoid within 1e-15 absolute of a
# high-precision reference, reciprocal within 1 ulp (relative, as for float32)
FLOAT64_TOLERANCE = {"sigmoid": 1e-15, "reciprocal": 0.0}

UNARY_OPS = tuple(UNARY)
BINARY_OPS = tuple(BINARY)
CONTRACTION_OPS = tuple(CONTRACTION)

# what the kernels, the IR (TensorOperation) and codegen compute on, on every ISA
DTYPES = ("float32", "float64")
# interleaved complex (numpy's layout): what a backend's primitives may take besides DTYPES,
# for the ops marked `complex` (a backend lists the primitives whose generators take them in
# its COMPLEX_PRIMITIVES)
COMPLEX_DTYPES = ("complex64", "complex128")
# the dtypes each primitive's public constructor accepts (complex: for its `complex` ops)
PRIMITIVE_DTYPES = {"brgemm": DTYPES + COMPLEX_DTYPES, "unary": DTYPES + COMPLEX_DTYPES,
                    "binary": DTYPES + COMPLEX_DTYPES}


def multiply_add_flops(dtype: str) -> int:
    """Real flops of one multiply-add in `dtype`: 2, or 8 in complex (4 products, 4 sums)."""
    return 8 if dtype in COMPLEX_DTYPES else 2


def lookup(name: str) -> Op:
    """The operation called `name`, or KeyError."""
    for table in (UNARY, BINARY, CONTRACTION):
        if name in table:
            return table[name]
    raise KeyError(name)
