"""Public constructors of the JIT primitives: brgemm, unary, binary.

Each validates its parameters (raising KernelParameterError, a ValueError, that names the bad
one), picks the backend for the ISA, and returns a Kernel. Kernels are cached: asking twice for
the same parameters returns the same Kernel, generated once.
"""

import threading

import numpy as np

from .backends.x86_64 import cpu
from .errors import KernelParameterError
from .kernel import Kernel, Signature
from .runtime.host import resolve_isa

UNARY_OPS = ("zero", "identity", "relu", "square", "reciprocal", "increment", "decrement",
             "sigmoid")
BINARY_OPS = ("add", "sub", "mul", "div", "min", "max")

BRGEMM_LIMITS = {"m": 1024, "n": 1024, "k": 2048, "br_size": 1024}
ELTWISE_LIMITS = {"m": 2048, "n": 2048}

_cache = {}
_cache_lock = threading.Lock()


def _check_size(primitive, name, value, limit):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise KernelParameterError(f"{primitive}: {name} must be an integer; got {value!r}")
    if not 1 <= value <= limit:
        raise KernelParameterError(
            f"{primitive}: {name}={value} is out of range; expected 1 <= {name} <= {limit}")
    return int(value)


def _check_dtype(primitive, dtype):
    try:
        is_float32 = np.dtype(dtype) == np.float32
    except TypeError:
        is_float32 = False
    if not is_float32:
        raise KernelParameterError(f"{primitive}: dtype={dtype!r} is not supported; "
                                   f"expected 'float32'")


def _check_op(primitive, op, ops):
    if op not in ops:
        raise KernelParameterError(f"{primitive}: op={op!r} is not supported; expected one of {ops}")


def _kernel(isa, kind, params, signature):
    """The cached Kernel for `kind` with `params` on `isa`, generated on first request."""
    variant = cpu.variant() if isa == "x86_64" else None
    key = (kind, params, isa, variant)
    with _cache_lock:
        kernel = _cache.get(key)
        if kernel is None:
            if isa == "aarch64":
                from .backends import aarch64 as backend
                code = getattr(backend, f"generate_{kind}")(*params)
            else:
                from .backends import x86_64 as backend
                code = getattr(backend, f"generate_{kind}")(*params, variant=variant)
            label = "_".join(str(p) for p in params)
            name = f"{kind}_{label}" + (f"_{variant}" if variant else "")
            kernel = _cache[key] = Kernel(code, isa, name, signature)
    return kernel


def brgemm(m, n, k, br_size=1, *, dtype="float32", isa=None) -> Kernel:
    """C += sum_i A_i B_i for column-major FP32 matrices (A_i m×k, B_i k×n, C m×n).

    The kernel is called as kern(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b);
    leading dimensions and batch strides are in elements.
    """
    m, n, k, br_size = (_check_size("brgemm", name, value, BRGEMM_LIMITS[name])
                        for name, value in (("m", m), ("n", n), ("k", k), ("br_size", br_size)))
    _check_dtype("brgemm", dtype)
    isa = resolve_isa(isa)
    signature = Signature(
        pointers=("a", "b", "c"),
        integers=("ld_a", "ld_b", "ld_c", "br_stride_a", "br_stride_b"),
        outputs=frozenset("c"),
        lower_bounds={"ld_a": m, "ld_b": k, "ld_c": m, "br_stride_a": 0, "br_stride_b": 0},
        extents=lambda v: {
            "a": (br_size - 1) * v["br_stride_a"] + (k - 1) * v["ld_a"] + m,
            "b": (br_size - 1) * v["br_stride_b"] + (n - 1) * v["ld_b"] + k,
            "c": (n - 1) * v["ld_c"] + m,
        })
    return _kernel(isa, "brgemm", (m, n, k, br_size), signature)


def unary(op, m, n, *, trans_b=False, dtype="float32", isa=None) -> Kernel:
    """B := op(A) element-wise, A column-major m×n; B column-major, or row-major if trans_b.

    The kernel is called as kern(a, b, ld_a, ld_b), leading dimensions in elements.
    """
    _check_op("unary", op, UNARY_OPS)
    m, n = (_check_size("unary", name, value, ELTWISE_LIMITS[name])
            for name, value in (("m", m), ("n", n)))
    _check_dtype("unary", dtype)
    if not isinstance(trans_b, bool):
        raise KernelParameterError(f"unary: trans_b must be a bool; got {trans_b!r}")
    isa = resolve_isa(isa)
    b_rows, b_cols = (n, m) if trans_b else (m, n)
    signature = Signature(
        pointers=("a", "b"),
        integers=("ld_a", "ld_b"),
        outputs=frozenset("b"),
        lower_bounds={"ld_a": m, "ld_b": b_rows},
        extents=lambda v: {"a": (n - 1) * v["ld_a"] + m, "b": (b_cols - 1) * v["ld_b"] + b_rows})
    return _kernel(isa, "unary", (op, m, n, trans_b), signature)


def binary(op, m, n, *, dtype="float32", isa=None) -> Kernel:
    """C := A op B element-wise for column-major m×n FP32 matrices.

    The kernel is called as kern(a, b, c, ld_a, ld_b, ld_c), leading dimensions in elements.
    """
    _check_op("binary", op, BINARY_OPS)
    m, n = (_check_size("binary", name, value, ELTWISE_LIMITS[name])
            for name, value in (("m", m), ("n", n)))
    _check_dtype("binary", dtype)
    isa = resolve_isa(isa)
    signature = Signature(
        pointers=("a", "b", "c"),
        integers=("ld_a", "ld_b", "ld_c"),
        outputs=frozenset("c"),
        lower_bounds={"ld_a": m, "ld_b": m, "ld_c": m},
        extents=lambda v: {name: (n - 1) * v[f"ld_{name}"] + m for name in "abc"})
    return _kernel(isa, "binary", (op, m, n), signature)
