"""Fixtures of the codegen tests."""

import pytest

from einjit.codegen import compile as compile_module


@pytest.fixture
def every_share_threaded(monkeypatch):
    """Split shared iterations across threads however little work they hold."""
    monkeypatch.setattr(compile_module, "MIN_WORK_PER_THREAD", 0)
    monkeypatch.setattr(compile_module, "MIN_FLOPS_PER_THREAD", 0)
    compile_module.compile_operation.cache_clear()
    yield
    compile_module.compile_operation.cache_clear()
