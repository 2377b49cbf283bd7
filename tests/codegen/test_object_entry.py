"""The object entry: a compiled nest called with numpy arrays themselves (their ids) reads
each one's data pointer (einjit.runtime.arrays.DATA_FIELD bytes into the object) and runs
as called with the pointers. The one-step plans of einjit.frontend call it so. Runs on the
host and in the aarch64 lane."""

import ctypes

import numpy as np
import pytest

import einjit
from einjit.backends import ISAS, LINE_BYTES, backend, resolve_target
from einjit.codegen import compile as compile_module
from einjit.codegen import compile_operation
from einjit.disasm import disassemble
from einjit.ir import TensorOperation
from einjit.runtime.arrays import DATA_FIELD, data_address
from einjit.runtime.host import host_isa


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("field", [16, 24, 248])
def test_the_entry_loads_three_pointers_then_continues_a_line_on(isa, field):
    code = backend(isa).object_entry(resolve_target(isa), field)
    assert len(code) == LINE_BYTES
    lines = [line.split(None, 2)[2] for line in disassemble(code, isa).splitlines()]
    registers = ("rdi", "rsi", "rdx") if isa == "x86_64" else ("x0", "x1", "x2")
    loads = [f"mov {r}, qword ptr [{r} + {field:#x}]" for r in registers] \
        if isa == "x86_64" else [f"ldr {r}, [{r}, #{field:#x}]" for r in registers]
    assert lines[:3] == loads
    assert lines[3] in (f"jmp {LINE_BYTES:#x}", f"b #{LINE_BYTES:#x}")


def gemm(m, n, k):
    """C (m x n) = A (m x k) B (k x n), column-major, one thread."""
    return TensorOperation("float32", "zero", "gemm", "none", ("m", "n", "k"), None, (m, n, k),
                           (1, 0, m), (0, k, 1), (1, m, 0), num_threads=1)


needs_host_code = pytest.mark.skipif(host_isa() is None or DATA_FIELD is None,
                                     reason="runs generated code on numpy's probed arrays")


@needs_host_code
@pytest.mark.parametrize("sizes", [(16, 16, 16), (37, 5, 19), (64, 64, 64)])
def test_a_nest_called_with_arrays_computes_what_it_computes_on_their_pointers(sizes):
    m, n, k = sizes
    op = einjit.optimize(gemm(m, n, k), num_threads=1)
    compiled = compile_operation(op)
    assert compiled.single is not None and compiled.on_arrays is not None
    rng = np.random.default_rng(m)
    a = rng.standard_normal((k, m)).astype(np.float32)       # column-major m x k
    b = rng.standard_normal((n, k)).astype(np.float32)
    by_pointer, by_array = np.full((n, m), np.nan, np.float32), np.full((n, m), np.nan,
                                                                         np.float32)
    compiled.function(data_address(a), data_address(b), data_address(by_pointer), 0,
                      compiled.single)
    compiled.on_arrays(id(a), id(b), id(by_array), 0, compiled.single)
    np.testing.assert_array_equal(by_array, by_pointer)
    np.testing.assert_allclose(by_array, b @ a, rtol=1e-5, atol=1e-5)
    # the mapped code: the entry, then the guard at compiled.address
    module = backend(op.target.isa)
    assert ctypes.string_at(compiled.address - LINE_BYTES, LINE_BYTES) == \
        module.object_entry(op.target, DATA_FIELD)


@needs_host_code
def test_without_the_arrays_layout_a_nest_offers_no_entry_and_plans_use_pointers(monkeypatch):
    monkeypatch.setattr(compile_module, "DATA_FIELD", None)
    compile_module.compile_operation.cache_clear()
    try:
        op = einjit.optimize(gemm(24, 8, 16), num_threads=1)
        assert compile_operation(op).on_arrays is None
        x, y = np.ones((24, 16), np.float32), np.ones((16, 8), np.float32)
        expression = einjit.contract_expression("ij,jk->ik", x.shape, y.shape)
        np.testing.assert_array_equal(expression(x, y), x @ y)
    finally:
        compile_module.compile_operation.cache_clear()
