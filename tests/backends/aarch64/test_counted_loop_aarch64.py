"""Assembler.counted_loop: the one A64 loop helper.

Every case builds a small function whose loop body stores the counter register to a buffer
(post-incremented pointer) and counts its iterations in x1:

    f(buffer, runtime_count) -> iterations

On the host the words are decoded with capstone and executed by a small model of the few
instructions involved (so the iteration counts and counter values are checked everywhere);
in the aarch64 lane the same code runs natively.
"""

from __future__ import annotations

import ctypes
import re
import struct

import numpy as np
import pytest

from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler
from einjit.backends.aarch64.encode import Reg
from einjit.errors import EncodingError
from einjit.runtime.host import host_isa

capstone = pytest.importorskip("capstone")

BUFFER, ITERATIONS, RUNTIME_COUNT, COUNTER = 3, 1, 2, 9
COUNTS = (0, 1, 2, 3, 100_000)
MASK = (1 << 64) - 1


def counting_function(count, counter=COUNTER, align=4, nested=None):
    """Code of f(buffer=x0, runtime_count=x2) -> iterations; the body stores `counter` to
    the buffer. nested=(outer_counter, outer_count) wraps the loop in a second one."""
    asm = Assembler()
    asm(enc.mov_reg(BUFFER, 0), enc.mov_imm(ITERATIONS, 0))

    def inner():
        with asm.counted_loop(counter, count, align=align):
            asm(enc.str_x_post(counter, BUFFER, 8), enc.add_imm(ITERATIONS, ITERATIONS, 1))

    if nested is None:
        inner()
    else:
        with asm.counted_loop(*nested, align=align):
            inner()
    asm(enc.mov_reg(0, ITERATIONS), enc.ret())
    return asm.finish()


# ---- a model of the instructions above, driven by capstone's decoding

def _decode(code):
    decoder = capstone.Cs(getattr(capstone, "CS_ARCH_AARCH64", None) or capstone.CS_ARCH_ARM64,
                          capstone.CS_MODE_ARM)
    program = {}
    for insn in decoder.disasm(code, 0):
        operands = [part.strip() for part in insn.op_str.split(",")] if insn.op_str else []
        program[insn.address] = (insn.mnemonic, operands)
    assert 4 * len(program) == len(code), "every word decodes"
    return program


def _reg(text):
    assert re.fullmatch(r"x\d+", text), text
    return int(text[1:])


def _imm(text):
    return int(text.lstrip("#"), 0)


def run_model(code, buffer_words, runtime_count=0, max_steps=2_000_000):
    """Execute f(buffer, runtime_count) on the model; returns (x0, stored words)."""
    program = _decode(code)
    x = [0] * 32
    x[0], x[2] = 0, runtime_count & MASK
    memory = {}
    pc, zero_flag = 0, False
    for _ in range(max_steps):
        mnemonic, ops = program[pc]
        pc += 4
        if mnemonic == "ret":
            return x[0], [memory.get(8 * i, None) for i in range(buffer_words)]
        if mnemonic == "mov":
            x[_reg(ops[0])] = x[_reg(ops[1])] if ops[1].startswith("x") else _imm(ops[1]) & MASK
        elif mnemonic == "movk":
            shift = _imm(ops[2].split()[-1]) if len(ops) > 2 else 0
            reg = _reg(ops[0])
            x[reg] = (x[reg] & ~(0xFFFF << shift) | _imm(ops[1]) << shift) & MASK
        elif mnemonic in ("add", "subs"):
            value = x[_reg(ops[1])] + (_imm(ops[2]) if mnemonic == "add" else -_imm(ops[2]))
            x[_reg(ops[0])] = value & MASK
            if mnemonic == "subs":
                zero_flag = value & MASK == 0
        elif mnemonic == "str":        # str xt, [xn], #imm (post-index)
            base = _reg(ops[1].strip("[]"))
            memory[x[base]] = x[_reg(ops[0])]
            x[base] = (x[base] + _imm(ops[2])) & MASK
        elif mnemonic == "nop":
            pass
        elif mnemonic == "b":
            pc = _imm(ops[0])
        elif mnemonic == "b.ne":
            pc = _imm(ops[0]) if not zero_flag else pc
        elif mnemonic == "cbz":
            pc = _imm(ops[1]) if x[_reg(ops[0])] == 0 else pc
        else:
            raise AssertionError(f"the model does not know {mnemonic} {ops}")
    raise AssertionError("no ret within the step limit")


def expected_stores(count, buffer_words):
    """The counter values the body stores: count, count - 1, ..., 1."""
    stored = list(range(count, 0, -1))[:buffer_words]
    return stored + [None] * (buffer_words - len(stored))


# ---- emitted words

def _mnemonics(code):
    return [mnemonic for mnemonic, _ in _decode(code).values()]


def test_compile_time_zero_branches_over_the_body():
    code = counting_function(0)
    program = _decode(code)
    assert program[8] == ("b", [f"#{len(code) - 8:#x}"])   # to the mov x0 after the loop
    assert _mnemonics(code).count("str") == 1           # the body is there, never reached


def test_compile_time_one_is_the_body_inline():
    assert _mnemonics(counting_function(1)) == ["mov", "mov", "str", "add", "mov", "ret"]


def test_compile_time_loop_counts_down_with_subs_and_b_ne():
    code = counting_function(2)
    program = _decode(code)
    assert program[8] == ("mov", [f"x{COUNTER}", "#2"])
    assert program[20] == ("subs", [f"x{COUNTER}", f"x{COUNTER}", "#1"])
    assert program[24] == ("b.ne", ["#0xc"])            # back to the str at the loop head


def test_large_count_uses_a_movz_movk_sequence():
    words = struct.unpack("<4I", counting_function(100_000)[8:24])
    assert list(words[:2]) == enc.mov_imm(COUNTER, 100_000)
    assert [enc.movz(COUNTER, 100_000 & 0xFFFF), enc.movk(COUNTER, 100_000 >> 16, 16)] \
        == enc.mov_imm(COUNTER, 100_000)


def test_runtime_count_guards_zero_with_cbz():
    code = counting_function(Reg(RUNTIME_COUNT))
    program = _decode(code)
    assert program[8] == ("cbz", [f"x{RUNTIME_COUNT}", f"#{len(code) - 8:#x}"])
    assert program[12] == ("mov", [f"x{COUNTER}", f"x{RUNTIME_COUNT}"])
    # the count register itself as the counter: no copy
    assert "mov" not in _mnemonics(counting_function(Reg(RUNTIME_COUNT),
                                                     counter=RUNTIME_COUNT))[2:-2]


@pytest.mark.parametrize("align", [16, 64])
def test_loop_head_is_aligned(align):
    asm = Assembler()
    asm(enc.nop())
    with asm.counted_loop(COUNTER, 5, align=align):
        head = asm.position
        asm(enc.add_imm(ITERATIONS, ITERATIONS, 1))
    assert head % align == 0
    words = struct.unpack(f"<{len(asm.finish()) // 4}I", asm.finish())
    assert words[-1] == enc.b_cond("ne", head - 4 * (len(words) - 1))


def test_bad_arguments_raise():
    asm = Assembler()
    for counter, count, match in ((18, 3, "x18"), (31, 3, "counter"), (-1, 3, "counter"),
                                  (9, -1, "count"), (9, 2.0, "count"), (9, True, "count"),
                                  (9, Reg(18), "x18"), (9, Reg(31), "count")):
        with pytest.raises(EncodingError, match=match):
            with asm.counted_loop(counter, count):
                pass
    for align in (12, 0, 2.0):
        with pytest.raises(EncodingError, match="align"):
            with asm.counted_loop(9, 4, align=align):
                pass


@pytest.mark.parametrize("align", [1, 2, 4])
def test_small_alignments_pad_nothing(align):
    assert counting_function(5, align=align) == counting_function(5, align=4)
    assert "nop" not in _mnemonics(counting_function(Reg(RUNTIME_COUNT), align=align))


# ---- behaviour: the model on the host, the CPU in the lane

def _native(code, buffer, runtime_count):
    from einjit.runtime.memory import ExecutableMemory
    memory = ExecutableMemory(code)
    function = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64,
                                ctypes.c_uint64)(memory.address)
    try:
        return function(buffer.ctypes.data, 0, runtime_count & MASK)
    finally:
        memory.release()


def _run(code, runtime_count, buffer_words, native):
    if not native:
        return run_model(code, buffer_words, runtime_count)
    # one guard word past the stores the loop may do
    buffer = np.full(buffer_words, 0x5A5A5A5A5A5A5A5A, dtype=np.uint64)
    iterations = _native(code, buffer, runtime_count)
    stored = [None if word == 0x5A5A5A5A5A5A5A5A else int(word) for word in buffer]
    return iterations, stored


RUNNERS = [pytest.param(False, id="model"),
           pytest.param(True, id="native", marks=pytest.mark.skipif(
               host_isa() != "aarch64", reason="runs A64 code (aarch64 lane)"))]


@pytest.mark.parametrize("native", RUNNERS)
@pytest.mark.parametrize("count", COUNTS)
def test_compile_time_count_runs_count_times(count, native):
    if count > 1000 and not native:
        words = 8
    else:
        words = count + 1
    iterations, stored = _run(counting_function(count), 0, words, native)
    assert iterations == count
    if count != 1:      # an inline body leaves the counter unwritten
        assert stored == expected_stores(count, words)


@pytest.mark.parametrize("native", RUNNERS)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("counter", [COUNTER, RUNTIME_COUNT], ids=["copy", "in-place"])
def test_runtime_count_runs_count_times(count, counter, native):
    words = count + 1
    code = counting_function(Reg(RUNTIME_COUNT), counter=counter, align=16)
    iterations, stored = _run(code, count, words, native)
    assert iterations == count
    assert stored == expected_stores(count, words)


@pytest.mark.parametrize("native", RUNNERS)
@pytest.mark.parametrize("outer,inner", [(3, 0), (3, 1), (3, 4), (0, 5), (4, 1000)])
def test_nested_loops_with_a_runtime_inner_count(outer, inner, native):
    code = counting_function(Reg(RUNTIME_COUNT), nested=(10, outer))
    iterations, stored = _run(code, inner, outer * inner + 1, native)
    assert iterations == outer * inner
    assert stored == list(range(inner, 0, -1)) * outer + [None]
