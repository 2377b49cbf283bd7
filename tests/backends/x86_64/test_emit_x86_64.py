"""Composable x86-64 emitters: emit_brgemm/emit_unary/emit_binary place a callable function in
a caller's Assembler; several kernels and a caller share one buffer and run.

The caller below is written with the plain encoders: it saves its arguments in callee-saved
registers, keeps rsp 16-byte aligned at each call, passes brgemm's batch strides on the stack
and calls one kernel placed before it (a backward call) and one after it (a forward call)."""

import ctypes

import numpy as np
import pytest

from einjit.backends.x86_64 import (
    VARIANTS,
    cpu,
    emit_binary,
    emit_brgemm,
    emit_unary,
    generate_binary,
    generate_brgemm,
    generate_unary,
)
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.encode import R8, R9, R12, R13, RAX, RBP, RBX, RCX, RDI, RDX, RSI, RSP
from einjit.runtime.host import host_isa

from support import CANARY


def _variants():
    params = []
    for variant, needs in cpu.VARIANTS.items():
        missing = [name for name in needs if name not in cpu.features()]
        params.append(pytest.param(variant, marks=pytest.mark.skipif(
            host_isa() != "x86_64" or bool(missing),
            reason=f"runs x86-64 {variant} code; the host lacks {', '.join(missing) or 'x86-64'}")))
    return params


def _kernel_bytes(code: bytes, entry: Label, length: int) -> bytes:
    return code[entry.position:entry.position + length]


# ---------------------------------------------------------------- call

def test_call_to_a_label_is_patched_both_ways():
    asm = Assembler()
    before = asm.label("before")
    asm.bind(before)
    asm(enc.ret())                  # 0..1
    after = asm.label("after")
    asm.call(after)                 # 1..6, forward
    asm.call(before)                # 6..11, backward
    asm.bind(after)                 # 11
    code = asm.finish()
    assert code[1:6] == enc.call(11 - 6)
    assert code[6:11] == enc.call(0 - 11)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_emitted_kernels_are_the_generated_code_at_an_aligned_entry(variant):
    """emit_* at any position: the function starts 16-byte aligned and its bytes are those of
    generate_* (every padding inside is relative to a 16-byte boundary)."""
    target = VARIANTS[variant]
    asm = Assembler()
    asm(enc.ret())                                        # something before, 1 byte
    unary = emit_unary(asm, target, "sigmoid", 37, 70, True)
    brgemm = emit_brgemm(asm, target, 33, 9, 5, 2)
    binary = emit_binary(asm, target, "max", 2048, 1536)  # the streaming path too
    code = asm.finish()
    expected = [(unary, generate_unary(target, "sigmoid", 37, 70, True)),
                (brgemm, generate_brgemm(target, 33, 9, 5, 2)),
                (binary, generate_binary(target, "max", 2048, 1536))]
    for entry, standalone in expected:
        assert entry.position % 16 == 0
        assert _kernel_bytes(code, entry, len(standalone)) == standalone
    assert unary.position == 16 and brgemm.position > unary.position


# ---------------------------------------------------------------- kernels and a caller, run

M, N, K, BR = 21, 10, 7, 2
LD_W, LD_B, LD_C = M + 3, K + 2, M + 1
STRIDE_A, STRIDE_B = K * LD_W, LD_B * N + 5


def _relu_then_brgemm(asm: Assembler, target, unary: Label, brgemm: Label) -> Label:
    """caller(a, b, c, work): work := relu(a) (M x BR*K, ld LD_W), then
    C += sum_i work_i B_i with work_i the i-th K columns of work."""
    entry = asm.entry("caller")
    asm.prologue((RBX, RBP, R12, R13))                   # 4 pushes: rsp = 8 mod 16
    asm(enc.mov_rr(RBX, RDI), enc.mov_rr(RBP, RSI), enc.mov_rr(R12, RDX), enc.mov_rr(R13, RCX),
        enc.sub_ri(RSP, 8))                              # 16-byte aligned at the calls
    asm(enc.mov_rr(RSI, R13), enc.mov_ri(RDX, LD_W), enc.mov_ri(RCX, LD_W))
    asm.call(unary)                                      # unary(a, work, ld_a, ld_work)
    asm(enc.mov_ri(RAX, STRIDE_B), enc.push(RAX),        # argument 8: br_stride_b
        enc.mov_ri(RAX, STRIDE_A), enc.push(RAX),        # argument 7: br_stride_a
        enc.mov_rr(RDI, R13), enc.mov_rr(RSI, RBP), enc.mov_rr(RDX, R12),
        enc.mov_ri(RCX, LD_W), enc.mov_ri(R8, LD_B), enc.mov_ri(R9, LD_C))
    asm.call(brgemm)
    asm(enc.add_ri(RSP, 8 + 16))
    asm.epilogue()
    return entry


@pytest.mark.parametrize("variant", _variants())
def test_two_kernels_and_a_caller_in_one_buffer_run(variant):
    from einjit.runtime.memory import ExecutableMemory

    target = VARIANTS[variant]
    asm = Assembler()
    unary = emit_unary(asm, target, "relu", M, BR * K, False)     # before the caller
    brgemm = asm.label("brgemm")
    caller = _relu_then_brgemm(asm, target, unary, brgemm)
    asm.align(16)                                 # after the caller: a forward call
    asm.bind(brgemm)
    assert emit_brgemm(asm, target, M, N, K, BR).position == brgemm.position
    code = asm.finish()
    memory = ExecutableMemory(code)
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)(memory.address + caller.position)

    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (BR * K - 1) * LD_W + M).astype(np.float32)
    b = rng.uniform(-1, 1, (BR - 1) * STRIDE_B + (N - 1) * LD_B + K).astype(np.float32)
    pad = 16
    c_buffer = np.full(pad + (N - 1) * LD_C + M + pad, CANARY, np.uint32).view(np.float32)
    c = c_buffer[pad:pad + (N - 1) * LD_C + M]
    c_matrix = np.lib.stride_tricks.as_strided(c, (M, N), (4, 4 * LD_C))
    c_matrix[...] = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    initial = c_matrix.astype(np.float64)
    work = np.full((BR * K - 1) * LD_W + M, CANARY, np.uint32).view(np.float32)

    function(a.ctypes.data, b.ctypes.data, c.ctypes.data, work.ctypes.data)

    a_matrix = np.lib.stride_tricks.as_strided(a, (M, BR * K), (4, 4 * LD_W))
    relu = np.maximum(a_matrix.astype(np.float64), 0.0)
    work_matrix = np.lib.stride_tricks.as_strided(work, (M, BR * K), (4, 4 * LD_W))
    np.testing.assert_array_equal(work_matrix, relu.astype(np.float32))
    product = sum(relu[:, i * K:(i + 1) * K]
                  @ np.lib.stride_tricks.as_strided(b[i * STRIDE_B:], (K, N), (4, 4 * LD_B))
                  for i in range(BR))
    np.testing.assert_allclose(c_matrix, initial + product, rtol=0, atol=1e-5 * (K * BR + 1))
    canaries = np.concatenate([c_buffer[:pad], c_buffer[-pad:]]).view(np.uint32)
    assert (canaries == CANARY).all(), "the caller's kernels wrote outside C"


@pytest.mark.parametrize("variant", _variants())
def test_one_kernel_called_twice(variant):
    """caller(a, b, c): c := a + b; c := c + b, through one emitted binary kernel."""
    from einjit.runtime.memory import ExecutableMemory

    m, n, ld = 19, 5, 23
    asm = Assembler()
    caller = asm.entry("caller")
    asm.prologue((RBX, RBP, R12))                        # 3 pushes: rsp = 0 mod 16
    asm(enc.mov_rr(RBX, RDI), enc.mov_rr(RBP, RSI), enc.mov_rr(R12, RDX))
    add = asm.label("add")
    for first in (RBX, R12):
        asm(enc.mov_rr(RDI, first), enc.mov_rr(RSI, RBP), enc.mov_rr(RDX, R12),
            enc.mov_ri(RCX, ld), enc.mov_ri(R8, ld), enc.mov_ri(R9, ld))
        asm.call(add)
    asm.epilogue()
    asm.align(16)
    asm.bind(add)
    assert emit_binary(asm, VARIANTS[variant], "add", m, n).position == add.position
    memory = ExecutableMemory(asm.finish())
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3)(memory.address + caller.position)
    rng = np.random.default_rng(3)
    a, b = (rng.uniform(-1, 1, (n - 1) * ld + m).astype(np.float32) for _ in range(2))
    c = np.zeros_like(a)
    function(a.ctypes.data, b.ctypes.data, c.ctypes.data)
    view = [np.lib.stride_tricks.as_strided(x, (m, n), (4, 4 * ld)) for x in (a, b, c)]
    np.testing.assert_array_equal(view[2], (view[0] + view[1]) + view[1])
