"""Assembler.counted_loop on x86-64: the code it emits, and generated loops run at counts 0, 1,
2 and large, compile-time and run-time, with the counter in a register or in a memory slot.

Each generated function is f(count, out): its body adds 1 to out[0] and the counter's value to
out[1], so a run proves how often the body ran and that the counter went count .. 1."""

import ctypes

import numpy as np
import pytest

from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.encode import R8, R9, R10, R13, RAX, RCX, RDI, RSI, RSP, Mem, Reg
from einjit.errors import EncodingError
from einjit.runtime.host import host_isa

COUNTS = (0, 1, 2, 3, 100_000)
RUNS, SUM = Mem(RSI), Mem(RSI, disp=8)        # out[0], out[1]
SLOT = Mem(RSP, disp=-8)                      # a red-zone slot for a counter in memory

runs_here = pytest.mark.skipif(host_isa() != "x86_64", reason="runs x86-64 code")


def _body(asm: Assembler, counter) -> None:
    """out[0] += 1; out[1] += counter (read from its slot if it is in memory)."""
    value = counter
    if isinstance(counter, Mem):
        asm(enc.mov_rm(R9, counter))
        value = R9
    asm(enc.mov_rm(RAX, RUNS), enc.inc(RAX), enc.mov_mr(RUNS, RAX),
        enc.mov_rm(RAX, SUM), enc.add_rr(RAX, value), enc.mov_mr(SUM, RAX))


def _function(counter, count, **options) -> bytes:
    """f(count in rdi, out in rsi) with the loop `counted_loop(counter, count)`."""
    asm = Assembler()
    asm.prologue((RAX, RCX, RDI, RSI, R8, R9, R10))
    asm(enc.mov_rr(R8, RDI))                  # the run-time count, where one is used
    with asm.counted_loop(counter, count, **options):
        _body(asm, counter)
    asm.epilogue()
    return asm.finish()


def _run(code: bytes, count: int) -> tuple[int, int]:
    from einjit.runtime.memory import ExecutableMemory

    memory = ExecutableMemory(code)
    function = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_void_p)(memory.address)
    out = np.zeros(2, dtype=np.uint64)
    function(count, out.ctypes.data)
    return int(out[0]), int(out[1])


COUNTERS = [pytest.param(RCX, {}, id="register"),
            pytest.param(SLOT, {"scratch": R10}, id="memory")]


@runs_here
@pytest.mark.parametrize("counter, options", COUNTERS)
@pytest.mark.parametrize("count", COUNTS)
def test_compile_time_count_runs_the_body_count_times(counter, options, count):
    runs, total = _run(_function(counter, count, **options), 12345)
    assert runs == count
    if count != 1:           # a single iteration is inline: the counter is not set
        assert total == count * (count + 1) // 2


@runs_here
@pytest.mark.parametrize("counter, options", COUNTERS)
@pytest.mark.parametrize("count", COUNTS)
def test_run_time_count_runs_the_body_count_times(counter, options, count):
    assert _run(_function(counter, R8, **options), count) == (count, count * (count + 1) // 2)


@runs_here
@pytest.mark.parametrize("count", COUNTS)
def test_run_time_count_in_the_counter_itself(count):
    assert _run(_function(R8, R8), count) == (count, count * (count + 1) // 2)


@runs_here
@pytest.mark.parametrize("outer, inner", [(0, 5), (3, 0), (1, 1), (4, 7), (300, 200)])
def test_nested_loops_multiply(outer, inner):
    asm = Assembler()
    asm.prologue((RAX, RCX, RDI, RSI, R8, R9, R10, R13))
    asm(enc.mov_rr(R13, RDI))
    with asm.counted_loop(RCX, outer):
        with asm.counted_loop(R9, R13):
            asm(enc.mov_rm(RAX, RUNS), enc.inc(RAX), enc.mov_mr(RUNS, RAX))
    asm.epilogue()
    assert _run(asm.finish(), inner)[0] == outer * inner


# ---------------------------------------------------------------- the code emitted

def _loop_code(counter, count, body: bytes = enc.inc(RAX), **options) -> bytes:
    asm = Assembler()
    with asm.counted_loop(counter, count, **options):
        asm(body)
    return asm.finish()


def test_count_one_is_the_body_inline():
    assert _loop_code(RCX, 1) == enc.inc(RAX)


def test_count_zero_jumps_over_the_body():
    body = enc.inc(RAX)
    assert _loop_code(RCX, 0, body) == enc.jmp(len(body)) + body


def test_compile_time_loop_shape():
    """mov counter, count; padding to the aligned head; body; dec; jne head."""
    code = _loop_code(RCX, 7, align=16)
    head = 16
    assert code[:5] == enc.mov_ri(RCX, 7)
    assert code[5:head] == enc.nop(head - 5)
    body_end = head + len(enc.inc(RAX))
    assert code[head:body_end] == enc.inc(RAX)
    assert code[body_end:] == enc.dec(RCX) + enc.jcc("ne", head - (body_end + 3 + 6))


def test_run_time_loop_shape():
    """mov counter, count; test; je past the loop; body; dec; jne head (align=1: no padding)."""
    code = _loop_code(RCX, R8, align=1)
    start = enc.mov_rr(RCX, R8) + enc.test_rr(RCX, RCX)
    body, step = enc.inc(RAX), enc.dec(RCX)
    loop_bytes = len(body) + len(step) + 6
    assert code == (start + enc.jcc("e", loop_bytes) + body + step
                    + enc.jcc("ne", -loop_bytes))


def test_run_time_count_in_the_counter_needs_no_move():
    assert _loop_code(RCX, RCX, align=1).startswith(enc.test_rr(RCX, RCX))


def test_memory_counter_steps_through_the_scratch_register():
    code = _loop_code(SLOT, 5, align=1, scratch=R10)
    assert code.startswith(enc.mov_ri(R10, 5) + enc.mov_mr(SLOT, R10) + enc.inc(RAX)
                           + enc.mov_rm(R10, SLOT) + enc.sub_ri(R10, 1) + enc.mov_mr(SLOT, R10))


def test_registers_are_marked_and_plain_ints_are_counts():
    assert isinstance(R8, Reg) and R8 == 8 and repr(R8) == "r8"
    assert _loop_code(RCX, 8, align=1).startswith(enc.mov_ri(RCX, 8))       # 8 iterations
    assert _loop_code(RCX, Reg(8), align=1).startswith(enc.mov_rr(RCX, R8))  # count in r8


@pytest.mark.parametrize("count, match", [
    (-1, "count: -1"), (True, "count: True"), (2.0, "count: 2.0"), (None, "count: None"),
])
def test_bad_counts_raise(count, match):
    with pytest.raises(EncodingError, match=match):
        _loop_code(RCX, count)


def test_memory_counter_needs_a_scratch_register():
    with pytest.raises(EncodingError, match="scratch"):
        _loop_code(SLOT, 3)


def test_counter_must_be_a_general_register():
    with pytest.raises(EncodingError, match="general register"):
        _loop_code(16, 3)


def test_loop_label_left_unbound_when_the_body_raises():
    asm = Assembler()
    with pytest.raises(RuntimeError, match="body failed"):
        with asm.counted_loop(RCX, R8):
            raise RuntimeError("body failed")
    with pytest.raises(EncodingError, match="unbound"):
        asm.finish()
