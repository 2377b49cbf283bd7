"""Frontend test fixtures. `reference` runs every plan step with the IR's numpy reference
executor, so the lowering's numerics are tested whether or not the JIT'd loop nests exist."""

import numpy as np
import pytest

from einjit.frontend import plan


@pytest.fixture
def reference(monkeypatch):
    from einjit.ir.reference import execute_reference
    monkeypatch.setattr(plan, "EXECUTOR", execute_reference)
    return execute_reference


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


def tolerance(*shapes_and_sums) -> float:
    """float32 tolerance scaled by the summed length."""
    return 1e-6 * max(8, *shapes_and_sums)
