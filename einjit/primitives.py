"""Public constructors of the JIT primitives: brgemm, unary, binary.

Each validates its parameters (raising KernelParameterError, a ValueError, that names the bad
one), resolves the target (`isa=None` is the host; "x86_64:avx2" names a variant), asks that
target's backend for the code, puts it behind the backend's entry guard (guard_entry: the
caller's floating-point exception flags read the same after a call) and returns a Kernel.
Kernels are cached: asking again for the same parameters returns the same Kernel while it is
among the most recently used (einjit.runtime.cache: 1024 by default, EINJIT_KERNEL_CACHE_SIZE).
"""

from __future__ import annotations

import inspect
import time

import numpy as np

from . import log
from .backends import Target, backend, resolve_target
from .backends.complex_eltwise import check_complex_op
from .errors import KernelParameterError, KernelParameterTypeError
from .kernel import Kernel, Layout, Signature
from .limits import BRGEMM_LIMITS, ELTWISE_LIMITS
from .ops import BINARY_OPS, COMPLEX_DTYPES, PRIMITIVE_DTYPES, UNARY_OPS
from .runtime.cache import DEFAULT_KERNEL_CACHE_SIZE, BoundedCache, kernel_cache_size
from .settings import at_import

# bounded LRU (1024 kernels unless EINJIT_KERNEL_CACHE_SIZE says otherwise); generation
# runs outside its lock, so a generator may ask for other primitives
_cache = BoundedCache(at_import(kernel_cache_size, DEFAULT_KERNEL_CACHE_SIZE))


def _check_size(primitive, name, value, limit):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise KernelParameterTypeError(f"{primitive}: {name} must be an integer; got {value!r}")
    if not 1 <= value <= limit:
        raise KernelParameterError(
            f"{primitive}: {name}={value} is out of range; expected 1 <= {name} <= {limit}")
    return int(value)


def _check_dtype(primitive, dtype) -> str:
    """The canonical name ("float32", "float64", "complex64" or "complex128") of a dtype
    argument the primitive takes (einjit.ops.PRIMITIVE_DTYPES)."""
    if not isinstance(dtype, (str, type, np.dtype)):
        raise KernelParameterTypeError(f"{primitive}: dtype must be a dtype or its name; "
                                       f"got {dtype!r}")
    try:
        name = np.dtype(dtype).name if np.dtype(dtype).isnative else None
    except TypeError:
        name = None
    if name not in PRIMITIVE_DTYPES[primitive]:
        raise KernelParameterError(f"{primitive}: dtype={dtype!r} is not supported; "
                                   f"expected one of {PRIMITIVE_DTYPES[primitive]}")
    return name


def _check_backend_dtype(primitive: str, target: Target, dtype: str) -> None:
    """float64 needs a backend whose generators take the dtype, a complex dtype one that lists
    the primitive in its COMPLEX_PRIMITIVES; name the ISA that lacks it."""
    if dtype == "float32":
        return
    module = backend(target.isa)
    if dtype in COMPLEX_DTYPES:
        if primitive not in getattr(module, "COMPLEX_PRIMITIVES", ()):
            raise KernelParameterError(f"{primitive}: dtype {dtype} is not supported by the "
                                       f"{target.isa} {primitive} yet")
        return
    generate = getattr(module, f"generate_{primitive}")
    if "dtype" not in inspect.signature(generate).parameters:
        raise KernelParameterError(f"{primitive}: dtype={dtype!r} is not supported on "
                                   f"isa={target.isa!r} yet; expected 'float32' there")


def _check_op(primitive, op, ops):
    if not isinstance(op, str):
        raise KernelParameterTypeError(f"{primitive}: op must be a str; got {op!r}")
    if op not in ops:
        raise KernelParameterError(f"{primitive}: op={op!r} is not supported; "
                                   f"expected one of {ops}")


def _kernel(target: Target, kind: str, params: tuple, signature: Signature, doc: str) -> Kernel:
    """The cached Kernel for `kind` with `params` on `target` and the signature's dtype,
    generated on first request (float32 asks the generator without a dtype: the form every
    backend takes)."""
    dtype = signature.dtype
    key = (kind, params, target) if dtype == "float32" else (kind, params, target, dtype)

    def create() -> Kernel:
        started = time.perf_counter()
        module = backend(target.isa)
        generate = {"brgemm": module.generate_brgemm, "unary": module.generate_unary,
                    "binary": module.generate_binary}[kind]
        if dtype == "float32":
            code = generate(target, *params)
        else:
            code = generate(target, *params, dtype=dtype)
        code = module.guard_entry(target, code)     # the caller's FP flags survive the call
        suffix = [] if dtype == "float32" else [dtype]
        name = "_".join([kind, *(str(p) for p in params), target.variant, *suffix])
        kernel = Kernel(code, target, name, signature, doc)
        log.cache_miss("kernel", (kind, params, target.name))
        log.kernel_generated(kind, params, target, len(code), time.perf_counter() - started)
        return kernel

    misses = _cache.misses
    kernel = _cache.get(key, create)
    if _cache.misses == misses:     # a hit (DEBUG only; racy in what it prints, nothing else)
        log.cache_hit("kernel", (kind, params, target.name))
    return kernel


def brgemm(m, n, k, br_size=1, *, dtype="float32", isa=None) -> Kernel:
    """C += sum_i A_i B_i for column-major matrices (A_i m×k, B_i k×n, C m×n) of `dtype`
    ("float32", or "float64", "complex64" and "complex128" where the ISA's backend generates
    them; complex: interleaved, numpy's layout).

    The kernel is called as kern(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b);
    leading dimensions and batch strides are in elements.
    """
    m, n, k, br_size = (_check_size("brgemm", name, value, BRGEMM_LIMITS[name])
                        for name, value in (("m", m), ("n", n), ("k", k), ("br_size", br_size)))
    dtype = _check_dtype("brgemm", dtype)
    target = resolve_target(isa)
    _check_backend_dtype("brgemm", target, dtype)
    signature = Signature(
        pointers=("a", "b", "c"),
        integers=("ld_a", "ld_b", "ld_c", "br_stride_a", "br_stride_b"),
        outputs=frozenset("c"),
        lower_bounds={"ld_a": m, "ld_b": k, "ld_c": m, "br_stride_a": 0, "br_stride_b": 0},
        extents=lambda v: {
            "a": (br_size - 1) * v["br_stride_a"] + (k - 1) * v["ld_a"] + m,
            "b": (br_size - 1) * v["br_stride_b"] + (n - 1) * v["ld_b"] + k,
            "c": (n - 1) * v["ld_c"] + m,
        },
        layouts={"a": Layout("ld_a", m), "b": Layout("ld_b", k), "c": Layout("ld_c", m)},
        dtype=dtype)
    doc = (f"C += sum over {br_size} batch entries of A_i B_i, column-major {dtype} "
           f"(A_i {m}x{k}, B_i {k}x{n}, C {m}x{n}).\n\n"
           f"kern(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b): a, b, c are {dtype} "
           f"arrays (Fortran order, or 1-D) or addresses; leading dimensions and batch strides "
           f"in elements.")
    return _kernel(target, "brgemm", (m, n, k, br_size), signature, doc)


def unary(op, m, n, *, trans_b=False, dtype="float32", isa=None) -> Kernel:
    """B := op(A) element-wise, A column-major m×n; B column-major, or row-major if trans_b.
    dtype: "float32", "float64", or for zero and identity "complex64" and "complex128"
    (interleaved, numpy's layout).

    The kernel is called as kern(a, b, ld_a, ld_b), leading dimensions in elements.
    """
    _check_op("unary", op, UNARY_OPS)
    m, n = (_check_size("unary", name, value, ELTWISE_LIMITS[name])
            for name, value in (("m", m), ("n", n)))
    dtype = _check_dtype("unary", dtype)
    if dtype in COMPLEX_DTYPES:
        check_complex_op("unary", op, dtype)
    if not isinstance(trans_b, bool):
        raise KernelParameterTypeError(f"unary: trans_b must be a bool; got {trans_b!r}")
    target = resolve_target(isa)
    _check_backend_dtype("unary", target, dtype)
    b_rows, b_cols = (n, m) if trans_b else (m, n)
    signature = Signature(
        pointers=("a", "b"),
        integers=("ld_a", "ld_b"),
        outputs=frozenset("b"),
        lower_bounds={"ld_a": m, "ld_b": b_rows},
        extents=lambda v: {"a": (n - 1) * v["ld_a"] + m, "b": (b_cols - 1) * v["ld_b"] + b_rows},
        layouts={"a": Layout("ld_a", m), "b": Layout("ld_b", b_rows, "C" if trans_b else "F")},
        in_place=frozenset() if trans_b else frozenset({("b", "a")}),
        dtype=dtype)
    layout = "row-major (B transposed)" if trans_b else "column-major"
    doc = (f"B := {op}(A) element-wise, A column-major {m}x{n}, B {layout}.\n\n"
           f"kern(a, b, ld_a, ld_b): {dtype} arrays (a in Fortran order, b in "
           f"{'C' if trans_b else 'Fortran'} order, or 1-D) or addresses; leading dimensions "
           f"in elements.")
    return _kernel(target, "unary", (op, m, n, trans_b), signature, doc)


def binary(op, m, n, *, dtype="float32", isa=None) -> Kernel:
    """C := A op B element-wise for column-major m×n matrices of `dtype` (float32, float64, or
    for add, sub and mul complex64 and complex128: interleaved, numpy's layout; mul is the
    complex product as numpy's arrays compute it, einjit.ops).

    The kernel is called as kern(a, b, c, ld_a, ld_b, ld_c), leading dimensions in elements.
    """
    _check_op("binary", op, BINARY_OPS)
    m, n = (_check_size("binary", name, value, ELTWISE_LIMITS[name])
            for name, value in (("m", m), ("n", n)))
    dtype = _check_dtype("binary", dtype)
    if dtype in COMPLEX_DTYPES:
        check_complex_op("binary", op, dtype)
    target = resolve_target(isa)
    _check_backend_dtype("binary", target, dtype)
    signature = Signature(
        pointers=("a", "b", "c"),
        integers=("ld_a", "ld_b", "ld_c"),
        outputs=frozenset("c"),
        lower_bounds={"ld_a": m, "ld_b": m, "ld_c": m},
        extents=lambda v: {name: (n - 1) * v[f"ld_{name}"] + m for name in "abc"},
        layouts={name: Layout(f"ld_{name}", m) for name in "abc"},
        in_place=frozenset({("c", "a"), ("c", "b")}),
        dtype=dtype)
    doc = (f"C := A {op} B element-wise for column-major {m}x{n} {dtype} matrices.\n\n"
           f"kern(a, b, c, ld_a, ld_b, ld_c): {dtype} arrays (Fortran order, or 1-D) or "
           f"addresses; leading dimensions in elements.")
    return _kernel(target, "binary", (op, m, n), signature, doc)
