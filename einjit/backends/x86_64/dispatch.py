"""x86-64 code that hands loop nests to native worker threads over a slot (its layout and the
sleep protocol: einjit.backends.worker_slot). Every function follows System V; the futex
numbers are Linux's.

    worker_loop(slot)           runs the tasks posted to slot; returns at one of function 0
    wait(slot, expected, spins) returns once the slot's done word equals expected
    post(slot, sequence)        stores the sequence word, and wakes the worker if it sleeps
    spin(word, count)           count polls of word, as worker_loop and wait make them

A poll is a load, a compare, a pause and a sched_yield: where threads outnumber the free
cores the other side may be queued for this very core, and the yield lets it run. After
`spins` polls without news a side sleeps in futex(FUTEX_WAIT_PRIVATE) on the word it polls,
with the value it last read (the kernel compares them atomically: a store and wake between
the last read and the sleep is never missed). x86 keeps loads in order and stores in order,
so the slot's plain loads and stores acquire and release; mfence orders a side's store
before its read of the other's flag. The nests fence their non-temporal stores themselves.
"""

from __future__ import annotations

from einjit.backends import Target
from einjit.backends.worker_slot import (
    ARGUMENT_COUNT,
    ARGUMENTS,
    CALLER_SLEEPS,
    DONE,
    FUNCTION,
    FUTEX_WAIT_PRIVATE,
    FUTEX_WAKE_PRIVATE,
    SEQUENCE,
    SPINS,
    WORKER_SLEEPS,
)
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.encode import (
    R8,
    R9,
    R10,
    R12,
    R13,
    RAX,
    RBX,
    RCX,
    RDI,
    RDX,
    RSI,
    Mem,
)

SYS_FUTEX = 202
SYS_SCHED_YIELD = 24
_NEST_ARGUMENTS = (RDI, RSI, RDX, RCX, R8)


def _futex_wait(asm: Assembler, value: int) -> None:
    """futex(rdi, FUTEX_WAIT_PRIVATE, value, NULL); rax, rcx, r11 are lost."""
    asm(enc.mov_ri(RSI, FUTEX_WAIT_PRIVATE), enc.mov_rr(RDX, value), enc.xor_rr(R10, R10),
        enc.mov_ri(RAX, SYS_FUTEX), enc.syscall())


def _futex_wake_one(asm: Assembler) -> None:
    """futex(rdi, FUTEX_WAKE_PRIVATE, 1); rax, rcx, r11 are lost."""
    asm(enc.mov_ri(RSI, FUTEX_WAKE_PRIVATE), enc.mov_ri(RDX, 1), enc.mov_ri(RAX, SYS_FUTEX),
        enc.syscall())


def _set_flag(asm: Assembler, flag: Mem, value: int) -> None:
    asm(enc.mov_ri(RAX, value), enc.mov_mr(flag, RAX))


def _poll(asm: Assembler, word: Mem, against: int, news: str, found, counter: int,
          give_up: Mem | None = None) -> None:
    """Poll `word` until its compare with `against` meets `news` (jump to found) or `counter`
    polls have passed or the word at `give_up` is not 0 (fall through; rdx: that word), rax:
    the word as last read; rcx and r11 are lost (sched_yield)."""
    poll, out = asm.label("poll"), asm.label("out")
    asm.align(16)
    asm.bind(poll)
    asm(enc.mov_rm(RAX, word), enc.cmp_rr(RAX, against))
    asm.jcc(news, found)
    if give_up is not None:
        asm(enc.mov_rm(RDX, give_up), enc.test_rr(RDX, RDX))
        asm.jcc("ne", out)
    asm(enc.pause(), enc.mov_ri(RAX, SYS_SCHED_YIELD), enc.syscall(), enc.dec(counter))
    asm.jcc("ne", poll)
    asm.bind(out)


def generate_worker_loop(target: Target) -> bytes:
    """worker_loop(slot=rdi). rbx: the slot, r12: the last task seen, r13: polls left. A
    worker that had to wake the caller yields its core before it polls again: the caller may
    have been woken onto it."""
    asm = Assembler()
    asm.prologue((RBX, R12, R13))             # three pushes: rsp is 16-aligned at the call
    again, awake, work, leave = (asm.label(name) for name in ("again", "awake", "work", "leave"))
    sequence, flag = Mem(RBX, disp=SEQUENCE), Mem(RBX, disp=WORKER_SLEEPS)
    asm(enc.mov_rr(RBX, RDI), enc.mov_rm(R12, Mem(RBX, disp=DONE)))
    asm.bind(again)
    asm(enc.mov_rm(R13, Mem(RBX, disp=SPINS)))
    _poll(asm, sequence, R12, "ne", work, R13)
    _set_flag(asm, flag, 1)
    asm(enc.mfence(), enc.mov_rm(RAX, sequence), enc.cmp_rr(RAX, R12))
    asm.jcc("ne", awake)
    asm(enc.lea(RDI, sequence))
    _futex_wait(asm, R12)
    asm.bind(awake)
    _set_flag(asm, flag, 0)
    asm.jmp(again)
    asm.bind(work)
    asm(enc.mov_rr(R12, RAX), enc.mov_rm(RAX, Mem(RBX, disp=FUNCTION)), enc.test_rr(RAX, RAX))
    asm.jcc("e", leave)
    for index, register in enumerate(_NEST_ARGUMENTS[:ARGUMENT_COUNT]):
        asm(enc.mov_rm(register, Mem(RBX, disp=ARGUMENTS + 8 * index)))
    asm(enc.call_r(RAX), enc.mov_mr(Mem(RBX, disp=DONE), R12), enc.mfence(),
        enc.mov_rm(RAX, Mem(RBX, disp=CALLER_SLEEPS)), enc.test_rr(RAX, RAX))
    asm.jcc("e", again)
    asm(enc.lea(RDI, Mem(RBX, disp=DONE)))
    _futex_wake_one(asm)
    asm(enc.mov_ri(RAX, SYS_SCHED_YIELD), enc.syscall())
    asm.jmp(again)
    asm.bind(leave)
    asm.epilogue()
    return asm.finish()


def generate_wait(target: Target) -> bytes:
    """wait(slot=rdi, expected=rsi, spins=rdx). rdi: the done word, r9: expected, r8: spins,
    r10: polls left (system calls keep rdi, r8, r9 and r10). While the worker has not woken
    up for the task, the caller sleeps at once: polling could hold the very core the worker
    waits for."""
    asm = Assembler()
    again, awake, finished = asm.label("again"), asm.label("awake"), asm.label("finished")
    done, flag = Mem(RDI), Mem(RDI, disp=CALLER_SLEEPS - DONE)
    asm(enc.lea(RDI, Mem(RDI, disp=DONE)), enc.mov_rr(R9, RSI), enc.mov_rr(R8, RDX))
    asm.bind(again)
    asm(enc.mov_rr(R10, R8))
    _poll(asm, done, R9, "e", finished, R10, give_up=Mem(RDI, disp=WORKER_SLEEPS - DONE))
    _set_flag(asm, flag, 1)
    asm(enc.mfence(), enc.mov_rm(RAX, done), enc.cmp_rr(RAX, R9))
    asm.jcc("e", awake)
    _futex_wait(asm, RAX)
    asm.bind(awake)
    _set_flag(asm, flag, 0)
    asm.jmp(again)
    asm.bind(finished)
    asm(enc.ret())
    return asm.finish()


def generate_post(target: Target) -> bytes:
    """post(slot=rdi, sequence=rsi): the store, then a wake if the worker may sleep."""
    asm = Assembler()
    asleep = asm.label("asleep")
    asm(enc.mov_mr(Mem(RDI, disp=SEQUENCE), RSI), enc.mfence(),
        enc.mov_rm(RAX, Mem(RDI, disp=WORKER_SLEEPS)), enc.test_rr(RAX, RAX))
    asm.jcc("ne", asleep)
    asm(enc.ret())
    asm.bind(asleep)
    asm(enc.lea(RDI, Mem(RDI, disp=SEQUENCE)))
    _futex_wake_one(asm)
    asm(enc.ret())
    return asm.finish()


def generate_spin(target: Target) -> bytes:
    """spin(word=rdi, count=rsi >= 1): the poll of worker_loop and wait, count times, the
    compare never true (einjit.codegen.workers times it to turn a time into polls)."""
    asm = Assembler()
    finished = asm.label("finished")
    asm(enc.mov_ri(RDX, -1))
    _poll(asm, Mem(RDI), RDX, "e", finished, RSI)
    asm.bind(finished)
    asm(enc.ret())
    return asm.finish()
