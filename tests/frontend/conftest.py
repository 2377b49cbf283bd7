"""Frontend test fixtures. `reference` runs every plan step with the IR's numpy reference
executor, so the lowering's numerics are tested whether or not the JIT'd loop nests exist.
`dtype` runs a test for float32 and float64; `numpy_einsum_forbidden` proves a call ran on
einjit's kernels (or the plan's executor): inside it, einjit.einsum's module cannot reach
numpy.einsum, so a call handed to numpy fails; `numpy_einsum_calls` records the calls handed
over."""

import sys
from contextlib import contextmanager

import numpy as np
import pytest

from einjit.frontend import plan

DTYPES = (np.float32, np.float64)
# the reference a result is compared with: float32 against float64, float64 against long
# double (80-bit on x86-64, 128-bit on AArch64)
WIDER = {np.dtype(np.float32): np.float64, np.dtype(np.float64): np.longdouble}
# (rtol, atol per element of the largest operand: the error bound grows with the summed
# length); float64's are float32's scaled by about the ratio of the epsilons
TOLERANCES = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-13, 4e-15)}


@pytest.fixture
def reference(monkeypatch):
    from einjit.ir.reference import execute_reference
    monkeypatch.setattr(plan, "EXECUTOR", execute_reference)
    return execute_reference


@pytest.fixture(params=DTYPES, ids=["float32", "float64"])
def dtype(request):
    return np.dtype(request.param)


def jit_available() -> bool:
    """Whether TensorOperation.execute can run (einjit.optimize and the codegen exist)."""
    try:
        from einjit.codegen import compile_operation  # noqa: F401
        from einjit.frontend.plan import _optimizer
    except ImportError:
        return False
    return _optimizer() is not None


def random_operands(rng, shapes, dtype=np.float32):
    return [rng.uniform(-1, 1, size=s).astype(dtype) for s in shapes]


def assert_close(result, expected, dtype, summed: int = 1) -> None:
    """`result` (of `dtype`) against a wider reference, within `dtype`'s tolerance for sums
    of up to `summed` terms."""
    rtol, atol = TOLERANCES[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(result, np.longdouble),
                               np.asarray(expected, np.longdouble), rtol=rtol,
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
