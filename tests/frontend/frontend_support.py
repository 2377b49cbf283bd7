"""What the frontend tests share beyond fixtures: dtypes and tolerances, operands, the
comparison with numpy, and the proofs that a call ran on einjit's kernels
(`numpy_einsum_forbidden`) or was handed to numpy (`numpy_einsum_calls`). A module of its own
name, so that test modules import it whichever conftest pytest loaded last."""

import sys
from contextlib import contextmanager

import numpy as np

DTYPES = (np.float32, np.float64)
COMPLEX_DTYPES = (np.complex64, np.complex128)
# the reference a result is compared with: float32 against float64, float64 against long
# double (80-bit on x86-64, 128-bit on AArch64); complex likewise, part by part
WIDER = {np.dtype(np.float32): np.float64, np.dtype(np.float64): np.longdouble,
         np.dtype(np.complex64): np.complex128, np.dtype(np.complex128): np.clongdouble}
# (rtol, atol per element of the largest operand: the error bound grows with the summed
# length); float64's are float32's scaled by about the ratio of the epsilons; a complex
# product adds two real products, so its sums carry twice the terms
TOLERANCES = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-13, 4e-15),
              np.dtype(np.complex64): (2e-5, 2e-6), np.dtype(np.complex128): (2e-13, 8e-15)}


def jit_available() -> bool:
    """Whether TensorOperation.execute can run (einjit.optimize and the codegen exist)."""
    try:
        from einjit.codegen import compile_operation  # noqa: F401
        from einjit.frontend.plan import _optimizer
    except ImportError:
        return False
    return _optimizer() is not None


def random_operands(rng, shapes, dtype=np.float32):
    """Uniform values in [-1, 1) (complex dtypes: in each part)."""
    if np.dtype(dtype).kind == "c":
        return [(rng.uniform(-1, 1, size=s) + 1j * rng.uniform(-1, 1, size=s)).astype(dtype)
                for s in shapes]
    return [rng.uniform(-1, 1, size=s).astype(dtype) for s in shapes]


def assert_close(result, expected, dtype, summed: int = 1) -> None:
    """`result` (of `dtype`) against a wider reference, within `dtype`'s tolerance for sums
    of up to `summed` terms."""
    rtol, atol = TOLERANCES[np.dtype(dtype)]
    wide = np.clongdouble if np.dtype(dtype).kind == "c" else np.longdouble
    np.testing.assert_allclose(np.asarray(result, wide),
                               np.asarray(expected, wide), rtol=rtol,
                               atol=atol * max(8, summed))


class _NumpyWithoutEinsum:
    """numpy, but einsum raises (what einjit.einsum's module sees while forbidden)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def einsum(*args, **kwargs):
        raise AssertionError("numpy.einsum was called: this call did not run on einjit's "
                             "kernels")


@contextmanager
def numpy_einsum_forbidden():
    module = sys.modules["einjit.einsum"]
    module.np = _NumpyWithoutEinsum()
    try:
        yield
    finally:
        module.np = np


@contextmanager
def numpy_einsum_calls():
    """A list that gets (args, kwargs) of each numpy.einsum call einjit.einsum's module makes
    inside (the calls it hands over)."""
    module = sys.modules["einjit.einsum"]
    calls = []

    class Recorder:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def einsum(*args, **kwargs):
            calls.append((args, kwargs))
            return np.einsum(*args, **kwargs)

    module.np = Recorder()
    try:
        yield calls
    finally:
        module.np = np
