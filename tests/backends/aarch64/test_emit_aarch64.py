"""Composable A64 emitters: emit_brgemm / emit_unary / emit_binary put a complete function at
the current position of a caller's Assembler and return its entry Label.

On the host: several functions share one buffer and each is, byte for byte, what its
standalone generate_* returns (the code is position independent). In the aarch64 lane: a
small caller bl's a BRGEMM and a unary kernel emitted into the same buffer, and its results
equal, bit for bit, those of the standalone kernels run on the same data.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import einjit
from einjit import ops
from einjit.backends import Target, resolve_target
from einjit.backends.aarch64 import (
    binary,
    emit_binary,
    emit_brgemm,
    emit_unary,
    generate_binary,
    generate_brgemm,
    generate_unary,
    unary,
)
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler
from einjit.errors import KernelParameterError
from einjit.runtime.host import host_isa

NEON = resolve_target("aarch64")


def _slice(code, start, length):
    return code[start:start + length]


@pytest.mark.parametrize("m,n,k,br,op,trans_b", [
    (17, 7, 9, 1, "sigmoid", True), (35, 13, 3, 2, "relu", False), (1, 1, 1, 16, "zero", True),
    (64, 12, 70, 3, "reciprocal", False)])
def test_functions_in_one_buffer_equal_the_standalone_code(m, n, k, br, op, trans_b):
    asm = Assembler()
    asm(enc.nop(), enc.nop(), enc.nop())               # the functions start at odd offsets
    entries = [emit_brgemm(asm, NEON, m, n, k, br)]
    asm(enc.nop())
    entries.append(emit_unary(asm, NEON, op, m, n, trans_b))
    entries.append(emit_binary(asm, NEON, "max", n, m))
    code = asm.finish()
    standalone = [generate_brgemm(NEON, m, n, k, br), generate_unary(NEON, op, m, n, trans_b),
                  generate_binary(NEON, "max", n, m)]
    assert entries[0].position == 12
    assert entries[1].position == 12 + len(standalone[0]) + 4
    assert entries[2].position == entries[1].position + len(standalone[1])
    assert len(code) == entries[2].position + len(standalone[2])
    for entry, alone in zip(entries, standalone):
        assert _slice(code, entry.position, len(alone)) == alone


def test_emitters_refuse_another_target():
    x86 = Target("x86_64", "avx2", vector_bits=256, registers=16)
    wide = Target("aarch64", "sve", vector_bits=512, registers=32)
    for target in (x86, wide, "aarch64"):
        with pytest.raises(KernelParameterError, match="target"):
            emit_brgemm(Assembler(), target, 4, 4, 4, 1)
        with pytest.raises(KernelParameterError, match="target"):
            generate_unary(target, "relu", 4, 4, False)
        with pytest.raises(KernelParameterError, match="target"):
            emit_binary(Assembler(), target, "add", 4, 4)


def test_emitters_check_their_parameters():
    for bad in (0, -3, 2.0, True, "4", None):
        with pytest.raises(KernelParameterError, match="expected an integer >= 1"):
            emit_brgemm(Assembler(), NEON, 4, 4, bad, 1)
        with pytest.raises(KernelParameterError, match="expected an integer >= 1"):
            emit_unary(Assembler(), NEON, "relu", bad, 4, False)
        with pytest.raises(KernelParameterError, match="expected an integer >= 1"):
            emit_binary(Assembler(), NEON, "add", 4, bad)
    with pytest.raises(KernelParameterError, match="'tanh' is not a unary op"):
        emit_unary(Assembler(), NEON, "tanh", 4, 4, False)
    with pytest.raises(KernelParameterError, match="'relu' is not a binary op"):
        emit_binary(Assembler(), NEON, "relu", 4, 4)
    with pytest.raises(KernelParameterError, match="trans_b"):
        emit_unary(Assembler(), NEON, "relu", 4, 4, "yes")
    # numpy integers are sizes too
    assert generate_brgemm(NEON, np.int64(5), 3, 2, 1) == generate_brgemm(NEON, 5, 3, 2, 1)


def test_backend_ops_are_the_op_table():
    assert set(unary.OPS) == set(ops.UNARY)
    assert set(binary.OPS) == set(ops.BINARY)


def test_a_second_function_needs_the_first_ones_epilogue():
    from einjit.errors import EncodingError
    asm = Assembler()
    asm.prologue([19], [])
    with pytest.raises(EncodingError, match="already"):
        emit_unary(asm, NEON, "relu", 4, 4, False)


# ---- a caller and two kernels in one buffer, run in the lane

A, B, C, D = 0, 1, 2, 3                 # caller(a, b, c, d): c += sum_i a_i b_i; d := op(c)
SAVED_C, SAVED_D = 19, 20


def caller_code(m, n, k, br, op, trans_b):
    """The caller between the two kernels: a backward bl to BRGEMM, a forward one to unary."""
    ld_d = n if trans_b else m
    asm = Assembler()
    brgemm_entry = emit_brgemm(asm, NEON, m, n, k, br)
    asm.align(16)
    caller = asm.label("caller")
    asm.bind(caller)
    asm.prologue([SAVED_C, SAVED_D, 29, 30], [])
    asm(enc.mov_reg(SAVED_C, C), enc.mov_reg(SAVED_D, D))
    # brgemm(a, b, c, ld_a=m, ld_b=k, ld_c=m, br_stride_a=m*k, br_stride_b=k*n)
    asm(enc.mov_imm(3, m), enc.mov_imm(4, k), enc.mov_imm(5, m), enc.mov_imm(6, m * k),
        enc.mov_imm(7, k * n))
    asm.bl(brgemm_entry)
    # unary(c, d, ld_a=m, ld_b)
    unary_label = asm.label("unary")
    asm(enc.mov_reg(0, SAVED_C), enc.mov_reg(1, SAVED_D), enc.mov_imm(2, m),
        enc.mov_imm(3, ld_d))
    asm.bl(unary_label)
    asm.epilogue()
    asm.align(64)
    asm.bind(unary_label)
    assert emit_unary(asm, NEON, op, m, n, trans_b).position == unary_label.position
    return asm.finish(), caller.position


@pytest.mark.skipif(host_isa() != "aarch64", reason="runs A64 code (aarch64 lane)")
@pytest.mark.parametrize("m,n,k,br,op,trans_b", [
    (17, 7, 9, 1, "relu", False), (35, 13, 3, 2, "sigmoid", True), (1, 1, 1, 16, "square", False),
    (64, 12, 70, 3, "increment", True), (5, 33, 8, 1, "identity", True)])
def test_caller_and_two_kernels_in_one_buffer(m, n, k, br, op, trans_b):
    from einjit.runtime.memory import ExecutableMemory
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.uniform(-1, 1, br * m * k).astype(np.float32)
    b = rng.uniform(-1, 1, br * k * n).astype(np.float32)
    c0 = rng.uniform(-1, 1, m * n).astype(np.float32)
    c, d = c0.copy(), np.full(m * n, np.nan, np.float32)

    code, caller_offset = caller_code(m, n, k, br, op, trans_b)
    memory = ExecutableMemory(code)
    caller = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)(memory.address + caller_offset)
    caller(a.ctypes.data, b.ctypes.data, c.ctypes.data, d.ctypes.data)
    memory.release()

    expected_c, expected_d = c0.copy(), np.full(m * n, np.nan, np.float32)
    einjit.brgemm(m, n, k, br)(a, b, expected_c, m, k, m, m * k, k * n)
    einjit.unary(op, m, n, trans_b=trans_b)(expected_c, expected_d, m, n if trans_b else m)
    assert c.view(np.uint32).tolist() == expected_c.view(np.uint32).tolist()
    assert d.view(np.uint32).tolist() == expected_d.view(np.uint32).tolist()
    # and the standalone kernels are right: C against numpy in float64
    product = sum(a[i * m * k:(i + 1) * m * k].reshape(k, m).T.astype(np.float64)
                  @ b[i * k * n:(i + 1) * k * n].reshape(n, k).T for i in range(br))
    reference = c0.reshape(n, m).T + product
    np.testing.assert_allclose(c.reshape(n, m).T, reference, rtol=1e-5, atol=1e-5 * k * br)
