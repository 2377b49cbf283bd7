"""x86-64 code that hands loop nests to native worker threads over slots (their layout, the task
records and the sleep protocol: einjit.backends.worker_slot). Every function follows System V;
the futex numbers are Linux's.

    worker_loop(slot)           runs the tasks posted to slot; returns at one of function 0
    run_tasks(tasks, count, slots, operands, own)
                                posts task i to slots[i] for i < count, runs the task at own
                                (0: none) on this thread and then those no worker has taken,
                                returns once every slot's task is done
    spin(word, count)           count polls of word, as worker_loop and run_tasks make them
    claim(in0, in1, out, table, line)
                                runs the nest on each chunk of the table (CLAIM_*) it claims,
                                one at a time, from its share's line on, until none is left

A poll is a load, a compare, a pause and a sched_yield: where threads outnumber the free
cores the other side may be queued for this very core, and the yield lets it run. After
`spins` polls without news a side sleeps in futex(FUTEX_WAIT_PRIVATE) on the word it polls,
with the value it last read (the kernel compares them atomically: a store and wake between
the last read and the sleep is never missed). x86 keeps loads in order and stores in order,
so the slot's plain loads and stores acquire and release; mfence orders a side's store
before its read of the other's flag: run_tasks stores every slot's sequence word, then
fences once, then reads their flags. The nests fence their non-temporal stores themselves.
"""

from __future__ import annotations

from einjit.backends import LINE_BYTES, Target
from einjit.backends.worker_slot import (
    ARGUMENT_COUNT,
    ARGUMENTS,
    CALLER_SLEEPS,
    CLAIM_BOUNDS,
    CLAIM_END,
    CLAIM_FUNCTION,
    CLAIM_NEXT,
    CLAIM_SHARES,
    DONE,
    FUNCTION,
    FUTEX_VALUES,
    FUTEX_WAIT_PRIVATE,
    FUTEX_WAKE_PRIVATE,
    OPERAND_COUNT,
    SEQUENCE,
    SPINS,
    TAKEN,
    TASK_BEGIN,
    TASK_BYTES,
    TASK_END,
    TASK_FUNCTION,
    TASK_OPERANDS,
    WORKER_SLEEPS,
)
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.encode import (
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
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
    """worker_loop(slot=rdi). rbx: the slot, r12: the last task seen, r13: polls left, then
    the task's function (0: return once done is stored). A worker that had to wake the caller
    yields its core before it polls again: the caller may have been woken onto it. A worker
    whose task the caller took sleeps until the next: it was late, most likely sharing the
    caller's core, and its wake-up lets the kernel place it on an idle one."""
    asm = Assembler()
    asm.prologue((RBX, R12, R13))             # three pushes: rsp is 16-aligned at the call
    again, sleep, awake, work, finished, woken = (asm.label(name) for name in (
        "again", "sleep", "awake", "work", "finished", "woken"))
    sequence, flag = Mem(RBX, disp=SEQUENCE), Mem(RBX, disp=WORKER_SLEEPS)
    asm(enc.mov_rr(RBX, RDI), enc.mov_rm(R12, Mem(RBX, disp=DONE)))
    asm.bind(again)
    asm(enc.mov_rm(R13, Mem(RBX, disp=SPINS)))
    _poll(asm, sequence, R12, "ne", work, R13)
    asm.bind(sleep)
    _set_flag(asm, flag, 1)
    asm(enc.mfence(), enc.mov_rm(RAX, sequence), enc.cmp_rr(RAX, R12))
    asm.jcc("ne", awake)
    asm(enc.lea(RDI, sequence))
    _futex_wait(asm, R12)
    asm.bind(awake)
    _set_flag(asm, flag, 0)
    asm.jmp(again)
    asm.bind(work)
    asm(enc.mov_rr(R12, RAX))
    _take(asm, RBX, R12)
    asm.jcc("ne", sleep)                      # the caller took it: sleep until the next
    asm(enc.mov_rm(RAX, Mem(RBX, disp=FUNCTION)), enc.mov_rr(R13, RAX), enc.test_rr(RAX, RAX))
    asm.jcc("e", finished)
    for index, register in enumerate(_NEST_ARGUMENTS[:ARGUMENT_COUNT]):
        asm(enc.mov_rm(register, Mem(RBX, disp=ARGUMENTS + 8 * index)))
    asm(enc.call_r(RAX))
    asm.bind(finished)
    asm(enc.mov_mr(Mem(RBX, disp=DONE), R12), enc.mfence(),
        enc.mov_rm(RAX, Mem(RBX, disp=CALLER_SLEEPS)), enc.test_rr(RAX, RAX))
    asm.jcc("e", woken)
    asm(enc.lea(RDI, Mem(RBX, disp=DONE)))
    _futex_wake_one(asm)
    asm(enc.mov_ri(RAX, SYS_SCHED_YIELD), enc.syscall())
    asm.bind(woken)
    asm(enc.test_rr(R13, R13))
    asm.jcc("ne", again)
    asm.epilogue()
    return asm.finish()


def _take(asm: Assembler, slot: int, number: int) -> None:
    """Take the slot's task `number`: lock cmpxchg of TAKEN from the number before it (modulo
    FUTEX_VALUES) to it; ZF set where this side took it. rax, rcx and rdx are lost."""
    asm(enc.lea(RAX, Mem(number, disp=-1)), enc.mov_ri(RDX, FUTEX_VALUES - 1),
        enc.and_rr(RAX, RDX), enc.mov_rr(RCX, number),
        enc.lock_cmpxchg(Mem(slot, disp=TAKEN), RCX))


def _take_or_wait(asm: Assembler, slot: int) -> None:
    """Run the slot's task here where its worker has not taken it yet, else wait for it
    (_wait); every register but rbx, rbp and r12..r15 may be lost."""
    wait, finished = asm.label("wait"), asm.label("taken")
    asm(enc.mov_rm(R9, Mem(slot, disp=SEQUENCE)))
    _take(asm, slot, R9)
    asm.jcc("ne", wait)
    asm(enc.mov_rr(R11, slot))
    for index, register in enumerate(_NEST_ARGUMENTS[:ARGUMENT_COUNT]):
        asm(enc.mov_rm(register, Mem(R11, disp=ARGUMENTS + 8 * index)))
    asm(enc.mov_rm(RAX, Mem(R11, disp=FUNCTION)), enc.call_r(RAX))
    asm.jmp(finished)
    asm.bind(wait)
    _wait(asm, slot)
    asm.bind(finished)


def _each_slot(asm: Assembler, body) -> None:
    """body(slot register) for rbp over [r13, r12) (the slots' addresses), rdi: the slot; body
    may lose every register but rbx, rbp and r12..r15."""
    step, finished = asm.label("step"), asm.label("finished")
    asm(enc.mov_rr(RBP, R13), enc.cmp_rr(RBP, R12))
    asm.jcc("e", finished)
    asm.align(16)
    asm.bind(step)
    asm(enc.mov_rm(RDI, Mem(RBP)))
    body(RDI)
    asm(enc.add_ri(RBP, 8), enc.cmp_rr(RBP, R12))
    asm.jcc("ne", step)
    asm.bind(finished)


def _post(asm: Assembler, slot: int) -> None:
    """Copy the task at rbx into the slot (its operands from r14's array) and store the
    slot's next sequence number; rbx moves to the next task. rax and rcx are lost."""
    asm(enc.mov_rm(RAX, Mem(RBX, disp=TASK_FUNCTION)), enc.mov_mr(Mem(slot, disp=FUNCTION), RAX),
        enc.mov_rm(RAX, Mem(RBX, disp=TASK_OPERANDS)), enc.add_rr(RAX, R14))
    for index in range(OPERAND_COUNT):
        asm(enc.mov_rm(RCX, Mem(RAX, disp=8 * index)),
            enc.mov_mr(Mem(slot, disp=ARGUMENTS + 8 * index), RCX))
    for index, field in enumerate((TASK_BEGIN, TASK_END), OPERAND_COUNT):
        asm(enc.mov_rm(RCX, Mem(RBX, disp=field)),
            enc.mov_mr(Mem(slot, disp=ARGUMENTS + 8 * index), RCX))
    # the next number below FUTEX_VALUES: the futex compares the word's low 32 bits
    asm(enc.mov_rm(RAX, Mem(slot, disp=SEQUENCE)), enc.inc(RAX), enc.mov_ri(RCX, FUTEX_VALUES - 1),
        enc.and_rr(RAX, RCX), enc.mov_mr(Mem(slot, disp=SEQUENCE), RAX),
        enc.add_ri(RBX, TASK_BYTES))


def _wake_if_asleep(asm: Assembler, slot: int) -> None:
    """A futex wake on the slot's sequence word if its worker may sleep."""
    awake = asm.label("awake")
    asm(enc.mov_rm(RAX, Mem(slot, disp=WORKER_SLEEPS)), enc.test_rr(RAX, RAX))
    asm.jcc("e", awake)
    asm(enc.lea(RDI, Mem(slot, disp=SEQUENCE)))
    _futex_wake_one(asm)
    asm.bind(awake)


def _wait(asm: Assembler, slot: int) -> None:
    """Return once the slot's done word equals its sequence word. rdi: the done word, r9: the
    number, r8: the spins, r10: polls left (system calls keep rdi, r8, r9 and r10). While the
    worker has not woken up for the task, the caller sleeps at once: polling could hold the
    very core the worker waits for."""
    again, awake, finished = asm.label("again"), asm.label("awake"), asm.label("finished")
    done, flag = Mem(RDI), Mem(RDI, disp=CALLER_SLEEPS - DONE)
    asm(enc.mov_rm(R9, Mem(slot, disp=SEQUENCE)), enc.mov_rm(R8, Mem(slot, disp=SPINS)),
        enc.lea(RDI, Mem(slot, disp=DONE)))
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


def generate_run_tasks(target: Target) -> bytes:
    """run_tasks(tasks=rdi, count=rsi, slots=rdx, operands=rcx, own=r8). rbx: the next task,
    r13, r12: the slots' addresses from first to end, rbp: the slot at hand, r14: operands,
    r15: own. All tasks are posted before the own one runs, and each worker's wake follows
    one fence after all the posts; after the own one, each task no worker has taken runs
    here (without an own task, whose stack may be too small, it waits for every worker)."""
    asm = Assembler()
    asm.prologue((RBX, RBP, R12, R13, R14, R15))
    asm.reserve_stack(8)                     # six pushes: rsp 16-aligned at the own call
    no_own, finished = asm.label("no_own"), asm.label("finished")
    asm(enc.mov_rr(RBX, RDI), enc.mov_rr(R13, RDX), enc.lea(R12, Mem(RDX, index=RSI, scale=8)),
        enc.mov_rr(R14, RCX), enc.mov_rr(R15, R8))
    _each_slot(asm, lambda slot: _post(asm, slot))
    asm(enc.mfence())
    _each_slot(asm, lambda slot: _wake_if_asleep(asm, slot))
    asm(enc.test_rr(R15, R15))
    asm.jcc("e", no_own)
    asm(enc.mov_rm(RAX, Mem(R15, disp=TASK_OPERANDS)), enc.add_rr(RAX, R14))
    for index, register in enumerate(_NEST_ARGUMENTS[:OPERAND_COUNT]):
        asm(enc.mov_rm(register, Mem(RAX, disp=8 * index)))
    for register, field in zip(_NEST_ARGUMENTS[OPERAND_COUNT:], (TASK_BEGIN, TASK_END)):
        asm(enc.mov_rm(register, Mem(R15, disp=field)))
    asm(enc.mov_rm(RAX, Mem(R15, disp=TASK_FUNCTION)), enc.call_r(RAX))
    _each_slot(asm, lambda slot: _take_or_wait(asm, slot))
    asm.jmp(finished)
    asm.bind(no_own)                         # this thread's stack may not hold a task
    _each_slot(asm, lambda slot: _wait(asm, slot))
    asm.bind(finished)
    asm(enc.add_ri(RSP, 8))
    asm.epilogue()
    return asm.finish()


def generate_spin(target: Target) -> bytes:
    """spin(word=rdi, count=rsi >= 1): the poll of worker_loop and run_tasks, count times, the
    compare never true (einjit.codegen.workers times it to turn a time into polls)."""
    asm = Assembler()
    finished = asm.label("finished")
    asm(enc.mov_ri(RDX, -1))
    _poll(asm, Mem(RDI), RDX, "e", finished, RSI)
    asm.bind(finished)
    asm(enc.ret())
    return asm.finish()


def generate_claim(target: Target) -> bytes:
    """claim(in0=rdi, in1=rsi, out=rdx, table=rcx, line=r8: its share's): take the next
    number of the share at hand (lock xadd on its CLAIM_NEXT) and run the nest on that chunk,
    or, where the share has none left, move to the next share's line, until every share has
    been found empty. rbx, rbp, r12: the operands, r13: the table, r14: the share's line, r15:
    the shares left to visit."""
    asm = Assembler()
    asm.prologue((RBX, RBP, R12, R13, R14, R15))
    asm.reserve_stack(8)                     # six pushes: rsp 16-aligned at the call
    claim, next_share, finished = (asm.label(name) for name in (
        "claim", "next_share", "finished"))
    asm(enc.mov_rr(RBX, RDI), enc.mov_rr(RBP, RSI), enc.mov_rr(R12, RDX), enc.mov_rr(R13, RCX),
        enc.mov_rr(R14, R8), enc.mov_rm(R15, Mem(R13, disp=CLAIM_SHARES)))
    asm.bind(claim)
    asm(enc.mov_ri(RAX, 1), enc.lock_xadd(Mem(R14, disp=CLAIM_NEXT), RAX),
        enc.cmp_rr(RAX, Mem(R14, disp=CLAIM_END)))
    asm.jcc("ae", next_share)
    asm(enc.mov_rm(RCX, Mem(R13, disp=CLAIM_BOUNDS)),
        enc.mov_rm(R8, Mem(RCX, index=RAX, scale=8, disp=8)),
        enc.mov_rm(RCX, Mem(RCX, index=RAX, scale=8)),
        enc.mov_rr(RDI, RBX), enc.mov_rr(RSI, RBP), enc.mov_rr(RDX, R12),
        enc.mov_rm(RAX, Mem(R13, disp=CLAIM_FUNCTION)), enc.call_r(RAX))
    asm.jmp(claim)
    asm.bind(next_share)
    asm(enc.dec(R15))
    asm.jcc("e", finished)
    asm(enc.add_ri(R14, LINE_BYTES), enc.cmp_rr(R14, Mem(R13, disp=CLAIM_BOUNDS)))
    asm.jcc("b", claim)
    asm(enc.lea(R14, Mem(R13, disp=LINE_BYTES)))             # past the last: the first
    asm.jmp(claim)
    asm.bind(finished)
    asm(enc.add_ri(RSP, 8))
    asm.epilogue()
    return asm.finish()
