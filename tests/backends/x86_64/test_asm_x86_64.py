"""x86-64 Assembler: label patching, prologue/epilogue, stack arguments; run on an x86-64 host."""

import ctypes

import pytest

from einjit.backends import STACK_PROBE_BYTES
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.encode import (
    R8,
    R9,
    R12,
    R13,
    R15,
    RAX,
    RBP,
    RBX,
    RCX,
    RDI,
    RDX,
    RSI,
    RSP,
    Mem,
)
from einjit.errors import EncodingError
from einjit.runtime.host import host_isa


def rel32_at(code: bytes, end_of_jump: int) -> int:
    return int.from_bytes(code[end_of_jump - 4:end_of_jump], "little", signed=True)


def test_forward_jump_is_patched_when_bound():
    asm = Assembler()
    done = asm.label("done")
    asm.jcc("ne", done)
    asm(enc.inc(RAX), enc.nop(100))
    asm.bind(done)
    asm(enc.ret())
    code = asm.finish()
    assert code[:2] == b"\x0f\x85"
    assert rel32_at(code, 6) == 3 + 100  # from the end of the jcc to `done`


def test_backward_jump_is_patched_immediately():
    asm = Assembler()
    asm(enc.nop(7))
    top = asm.label("top")
    asm.bind(top)
    asm(enc.dec(RCX))
    asm.jcc("nz", top)
    asm.jmp(top)
    code = asm.finish()
    assert rel32_at(code, 7 + 3 + 6) == -(3 + 6)
    assert code[16] == 0xE9 and rel32_at(code, 21) == -(3 + 6 + 5)


def test_several_jumps_to_one_label_from_both_sides():
    asm = Assembler()
    target = asm.label()
    asm.jmp(target)             # ends at 5
    asm.jcc("l", target)        # ends at 11
    asm.bind(target)            # at 11
    asm.jcc("ge", target)       # ends at 17
    code = asm.finish()
    assert [rel32_at(code, end) for end in (5, 11, 17)] == [6, 0, -6]


def test_unbound_label_raises_at_finish():
    asm = Assembler()
    asm.jmp(asm.label("nowhere"))
    with pytest.raises(EncodingError, match="nowhere"):
        asm.finish()


def test_label_cannot_be_bound_twice():
    asm = Assembler()
    label = asm.label("twice")
    asm.bind(label)
    with pytest.raises(EncodingError, match="already bound"):
        asm.bind(label)


def test_jump_target_must_be_a_label():
    with pytest.raises(EncodingError, match="not a Label"):
        Assembler().jmp(12)


def test_call_accepts_bytes_and_iterables_of_bytes():
    asm = Assembler()
    asm(enc.ret(), [enc.nop(2), enc.nop(1)], (enc.ret() for _ in range(2)))
    assert asm.position == 6
    assert asm.finish() == b"\xc3\x66\x90\x90\xc3\xc3"


def test_align_pads_with_nops():
    asm = Assembler()
    asm(enc.ret())
    asm.align(16)
    assert asm.position == 16
    asm.align(16)
    assert asm.position == 16
    with pytest.raises(EncodingError, match="align"):
        asm.align(12)


def test_prologue_saves_exactly_the_callee_saved_registers_used():
    asm = Assembler()
    asm.prologue({RAX, R15, RDI, RBX, R12, R8})
    asm.epilogue()
    expected = (enc.push(RBX) + enc.push(R12) + enc.push(R15)
                + enc.pop(R15) + enc.pop(R12) + enc.pop(RBX)
                + enc.vzeroupper() + enc.ret())
    assert asm.finish() == expected


def test_prologue_without_callee_saved_registers_is_empty():
    asm = Assembler()
    asm.prologue([RAX, RCX, RDX, RSI, RDI, R8, R9])
    asm.epilogue()
    assert asm.finish() == enc.vzeroupper() + enc.ret()


def test_stack_arguments_account_for_pushed_registers():
    for used, first_offset in (((), 8), ((RBX,), 16), ((RBX, RBP, R12, R13), 40)):
        asm = Assembler()
        asm.prologue(used)
        start = asm.position
        asm.stack_arg(6, RAX)
        asm.stack_arg(7, R9)
        expected = (enc.mov_rm(RAX, Mem(4, disp=first_offset))
                    + enc.mov_rm(R9, Mem(4, disp=first_offset + 8)))
        assert asm.finish()[start:] == expected


@pytest.mark.parametrize("thunk, match", [
    (lambda asm: asm.stack_arg(6, RAX), "prologue first"),
    (lambda asm: (asm.prologue(()), asm.stack_arg(5, RAX)), "expected i >= 6"),
    (lambda asm: asm.epilogue(), "no prologue"),
    (lambda asm: (asm.prologue(()), asm.prologue(())), "already emitted"),
    (lambda asm: asm.prologue((16,)), "prologue gprs"),
])
def test_prologue_misuse_raises(thunk, match):
    with pytest.raises(EncodingError, match=match):
        thunk(Assembler())


@pytest.mark.skipif(host_isa() != "x86_64", reason="runs x86-64 code")
def test_generated_function_runs():
    """f(a0..a7) = a6 + 2 * a7 + sum(range(a0)), using callee-saved registers, a backward loop
    and a forward exit."""
    from einjit.runtime.memory import ExecutableMemory

    asm = Assembler()
    asm.prologue({RBX, R12, RAX})
    asm.stack_arg(6, RBX)
    asm.stack_arg(7, R12)
    asm(enc.mov_rr(RAX, RBX), enc.add_rr(RAX, R12), enc.add_rr(RAX, R12))
    done, loop = asm.label("done"), asm.label("loop")
    asm(enc.test_rr(RDI, RDI))
    asm.jcc("le", done)
    asm.align(16)
    asm.bind(loop)
    asm(enc.dec(RDI), enc.add_rr(RAX, RDI), enc.test_rr(RDI, RDI))
    asm.jcc("g", loop)
    asm.bind(done)
    asm(enc.mov_ri(RBX, 0), enc.xor_rr(R12, R12))  # clobber: the epilogue must restore them
    asm.epilogue()
    memory = ExecutableMemory(asm.finish())
    function = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_int64] * 8)(memory.address)
    assert function(10, 0, 0, 0, 0, 0, 1000, 7) == 1000 + 14 + 45
    assert function(0, 0, 0, 0, 0, 0, -3, 5) == 7


def test_functions_follow_each_other_with_their_own_frames():
    """An epilogue closes the function: the next prologue saves its own registers and stack
    arguments are found past those."""
    asm = Assembler()
    first = asm.entry("first")
    asm.prologue((RBX, R12, R13))
    asm.epilogue()
    second = asm.entry("second")
    asm.prologue((RBP,))
    start = asm.position
    asm.stack_arg(6, RAX)
    asm.epilogue()
    code = asm.finish()
    assert first.position == 0 and second.position == 16
    assert code[second.position:start] == enc.push(RBP)
    assert code[start:start + 5] == enc.mov_rm(RAX, Mem(4, disp=16))
    with pytest.raises(EncodingError, match="no prologue"):
        asm.epilogue()


def test_entry_pads_to_sixteen_bytes():
    asm = Assembler()
    asm(enc.ret())
    entry = asm.entry("f")
    assert entry.position == 16 and asm.finish()[1:16] == enc.nop(15)


@pytest.mark.parametrize("size", [16, 4088, 4096, 4104, 12288, 300000])
def test_reserve_stack_touches_every_page_it_passes(size):
    """rsp goes down `size` in all; a frame of a page or more never moves more than
    STACK_PROBE_BYTES without a store at the new top (a thread short of stack faults on its
    guard page instead of writing past it)."""
    asm = Assembler()
    asm.reserve_stack(size)
    code = asm.finish()
    # sub rsp, imm32 / imm8 (the encoder's two forms) and the probe, told apart by their bytes
    sub32, sub8 = enc.sub_ri(RSP, 1 << 12)[:-4], enc.sub_ri(RSP, 16)[:-1]
    probe = enc.mov_mr(Mem(RSP), RAX)
    moves, unprobed, at = [], 0, 0
    while at < len(code):
        if code.startswith(probe, at):
            unprobed, at = 0, at + len(probe)
            continue
        for prefix, width in ((sub32, 4), (sub8, 1)):
            if code.startswith(prefix, at):
                start = at + len(prefix)
                moves.append(int.from_bytes(code[start:start + width], "little", signed=True))
                unprobed += moves[-1]
                at = start + width
                break
        else:
            raise AssertionError(f"unexpected bytes at {at}: {code[at:].hex()}")
        assert size < STACK_PROBE_BYTES or unprobed <= STACK_PROBE_BYTES
    assert sum(moves) == size
    assert unprobed == (size if size < STACK_PROBE_BYTES else 0)
