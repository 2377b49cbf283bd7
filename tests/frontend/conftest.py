"""Frontend test fixtures. `reference` runs every plan step with the IR's numpy reference
executor, so the lowering's numerics are tested whether or not the JIT'd loop nests exist.
`dtype` runs a test for float32 and float64, `any_dtype` for complex64 and complex128 too;
`numpy_einsum_forbidden` proves a call ran on einjit's kernels (or the plan's executor):
inside it, einjit.einsum's module cannot reach numpy.einsum, so a call handed to numpy fails;
`numpy_einsum_calls` records the calls handed over."""

import numpy as np
import pytest
from frontend_support import COMPLEX_DTYPES, DTYPES

from einjit.frontend import plan


@pytest.fixture
def reference(monkeypatch):
    from einjit.ir.reference import execute_reference
    monkeypatch.setattr(plan, "EXECUTOR", execute_reference)
    return execute_reference


@pytest.fixture(params=DTYPES, ids=["float32", "float64"])
def dtype(request):
    return np.dtype(request.param)


@pytest.fixture(params=DTYPES + COMPLEX_DTYPES,
                ids=["float32", "float64", "complex64", "complex128"])
def any_dtype(request):
    """Every dtype einjit's kernels compute: the real ones and the complex ones."""
    return np.dtype(request.param)
