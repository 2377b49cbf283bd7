"""AArch64 code that hands loop nests to native worker threads over slots (their layout, the
task records and the sleep protocol: einjit.backends.worker_slot). Every function follows
AAPCS64; the futex numbers are Linux's.

    worker_loop(slot)           runs the tasks posted to slot; returns at one of function 0
    run_tasks(tasks, count, slots, operands, own)
                                posts task i to slots[i] for i < count, runs the task at own
                                (0: none) on this thread and then those no worker has taken,
                                returns once every slot's task is done
    spin(word, count)           count polls of word, as worker_loop and run_tasks make them
    claim(in0, in1, out, table, line)
                                runs the nest on each chunk of the table (CLAIM_*) it claims,
                                one at a time, from its share's line on, until none is left

A poll is a load-acquire (ldar: what is read after it, the task's function and arguments or
the nest's results, was stored before the store-release it saw), a compare, a yield hint and
a sched_yield (where threads outnumber the free cores the other side may be queued for this
very core, and the system call lets it run). The sequence and done words are stored with a
store-release (stlr). After `spins` polls without news a side sleeps in
futex(FUTEX_WAIT_PRIVATE) on the word it polls, with the value it last read (the kernel
compares them atomically: a store and wake between the last read and the sleep is never
missed); dmb ish orders a side's store before its read of the other's flag: run_tasks stores
every slot's sequence word, then fences once, then reads their flags.
"""

from __future__ import annotations

from collections.abc import Callable

from einjit.backends import LINE_BYTES, Target
from einjit.backends.aarch64 import encode as e
from einjit.backends.aarch64.asm import Assembler, Label
from einjit.backends.worker_slot import (
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
    TASK_FUNCTION,
    TASK_OPERANDS,
    WORKER_SLEEPS,
)

SYS_FUTEX = 98
SYS_SCHED_YIELD = 124
_SYSCALL_NUMBER = 8     # x8 holds the system call's number
_SCRATCH = 15


def _futex(asm: Assembler, word: int, operation: int, value: int | None) -> None:
    """futex(word, operation, value, NULL); value None: 1 (a wake of one sleeper). The
    kernel writes x0 only."""
    asm([e.mov_reg(0, word)] if word else [], e.mov_imm(1, operation),
        e.mov_imm(2, 1) if value is None else e.mov_reg(2, value), e.mov_reg(3, e.XZR),
        e.mov_imm(_SYSCALL_NUMBER, SYS_FUTEX), e.svc())


def _poll(asm: Assembler, word: int, against: int, news: str, found: Label, counter: int,
          read: int, give_up: tuple[int, int] | None = None) -> None:
    """Poll the word at address `word` until its compare with `against` meets `news` (branch
    to found) or `counter` polls have passed or the word at give_up's (base register,
    offset) is not 0 (fall through; x15: that word); `read`: the word as last read; x0 and x8
    are lost (sched_yield)."""
    poll, out = asm.label("poll"), asm.label("out")
    asm.align(16)
    asm.bind(poll)
    asm(e.ldar_x(read, word), e.cmp_reg(read, against))
    asm.b_cond(news, found)
    if give_up is not None:
        asm(e.ldr_x(_SCRATCH, *give_up))
        asm.cbnz(_SCRATCH, out)
    asm(e.yield_(), e.mov_imm(_SYSCALL_NUMBER, SYS_SCHED_YIELD), e.svc(),
        e.subs_imm(counter, counter, 1))
    asm.b_cond("ne", poll)
    asm.bind(out)


def _announce_sleep(asm: Assembler, base: int, flag: int, word: int, against: int, news: str,
                    awake: Label, read: int) -> None:
    """Set the flag at base + flag, fence, read the word once more: news branches to awake."""
    asm(e.mov_imm(_SCRATCH, 1), e.str_x(_SCRATCH, base, flag), e.dmb("ish"),
        e.ldar_x(read, word), e.cmp_reg(read, against))
    asm.b_cond(news, awake)


def generate_worker_loop(target: Target) -> bytes:
    """worker_loop(slot=x0). x19: the slot, x20: the last task seen, x21: polls left, then the
    task's function (0: return once done is stored), x22, x23: the addresses of the done and
    sequence words (ldar and stlr take no offset). A worker that had to wake the caller
    yields its core before it polls again: the caller may have been woken onto it. A worker
    whose task the caller took sleeps until the next: it was late, most likely sharing the
    caller's core, and its wake-up lets the kernel place it on an idle one."""
    asm = Assembler()
    asm.prologue((19, 20, 21, 22, 23, 29, 30), ())
    again, sleep, awake, work, finished, woken = (asm.label(name) for name in (
        "again", "sleep", "awake", "work", "finished", "woken"))
    asm(e.mov_reg(19, 0), e.add_imm(22, 19, DONE), e.add_imm(23, 19, SEQUENCE),
        e.ldr_x(20, 22))
    asm.bind(again)
    asm(e.ldr_x(21, 19, SPINS))
    _poll(asm, 23, 20, "ne", work, 21, 9)
    asm.bind(sleep)
    _announce_sleep(asm, 19, WORKER_SLEEPS, 23, 20, "ne", awake, 9)
    _futex(asm, 23, FUTEX_WAIT_PRIVATE, 20)
    asm.bind(awake)
    asm(e.str_x(e.XZR, 19, WORKER_SLEEPS))
    asm.b(again)
    asm.bind(work)
    asm(e.mov_reg(20, 9), e.add_imm(10, 19, TAKEN))
    _take(asm, 10, 20, sleep)                 # the caller took it: sleep until the next
    asm(e.ldr_x(9, 19, FUNCTION), e.mov_reg(21, 9))
    asm.cbz(9, finished)
    asm(e.ldp_x(0, 1, 19, ARGUMENTS), e.ldp_x(2, 3, 19, ARGUMENTS + 16),
        e.ldr_x(4, 19, ARGUMENTS + 32), e.blr(9))
    asm.bind(finished)
    asm(e.stlr_x(20, 22), e.dmb("ish"), e.ldr_x(9, 19, CALLER_SLEEPS))
    asm.cbz(9, woken)
    _futex(asm, 22, FUTEX_WAKE_PRIVATE, None)
    asm(e.mov_imm(_SYSCALL_NUMBER, SYS_SCHED_YIELD), e.svc())
    asm.bind(woken)
    asm.cbnz(21, again)
    asm.epilogue()
    return asm.finish()


def _take(asm: Assembler, word: int, number: int, lost: Label) -> None:
    """Take task `number` through the TAKEN word at `word`: an exclusive load and store from
    the number before it (modulo FUTEX_VALUES) to it, again where another side's access came
    between; branch to `lost` where the word holds another number. x11..x13 are lost."""
    retry = asm.label("retry")
    asm(e.sub_imm(11, number, 1), e.and_imm(11, 11, FUTEX_VALUES - 1))
    asm.bind(retry)
    asm(e.ldxr_x(12, word), e.cmp_reg(12, 11))
    asm.b_cond("ne", lost)
    asm(e.stxr_x(13, number, word))
    asm.cbnz(13, retry)


def _take_or_wait(asm: Assembler, slot: int) -> None:
    """Run the slot's task here where its worker has not taken it yet, else wait for it
    (_wait); every register but x19..x24 may be lost."""
    wait, finished = asm.label("wait"), asm.label("taken")
    asm(e.ldr_x(15, slot, SEQUENCE), e.add_imm(10, slot, TAKEN))
    _take(asm, 10, 15, wait)
    asm(e.ldp_x(0, 1, slot, ARGUMENTS), e.ldp_x(2, 3, slot, ARGUMENTS + 16),
        e.ldr_x(4, slot, ARGUMENTS + 32), e.ldr_x(10, slot, FUNCTION), e.blr(10))
    asm.b(finished)
    asm.bind(wait)
    _wait(asm, slot)
    asm.bind(finished)


def _each_slot(asm: Assembler, body: Callable[[int], None]) -> None:
    """body(x9) for x20 over [x22, x21) (the slots' addresses), x9: the slot; body may lose
    every register but x19..x24."""
    step, finished = asm.label("step"), asm.label("finished")
    asm(e.mov_reg(20, 22), e.cmp_reg(20, 21))
    asm.b_cond("eq", finished)
    asm.align(16)
    asm.bind(step)
    asm(e.ldr_x(9, 20))
    body(9)
    asm(e.add_imm(20, 20, 8), e.cmp_reg(20, 21))
    asm.b_cond("ne", step)
    asm.bind(finished)


def _post(asm: Assembler, slot: int) -> None:
    """Copy the task at x19 into the slot (its operands from x23's array) and store-release
    the slot's next sequence number; x19 moves to the next task. x10..x12 are lost."""
    asm(e.ldr_x(10, 19, TASK_FUNCTION), e.str_x(10, slot, FUNCTION),
        e.ldr_x(10, 19, TASK_OPERANDS), e.add_reg(10, 23, 10),
        e.ldp_x(11, 12, 10), e.stp_x(11, 12, slot, ARGUMENTS),
        e.ldr_x(11, 10, 16), e.str_x(11, slot, ARGUMENTS + 16),
        e.ldp_x(11, 12, 19, TASK_BEGIN),             # begin and end
        e.stp_x(11, 12, slot, ARGUMENTS + 8 * OPERAND_COUNT),
        # the next number below FUTEX_VALUES: the futex compares the word's low 32 bits
        e.ldr_x(11, slot, SEQUENCE), e.add_imm(11, 11, 1), e.and_imm(11, 11, FUTEX_VALUES - 1),
        e.add_imm(12, slot, SEQUENCE), e.stlr_x(11, 12), e.add_imm(19, 19, TASK_BYTES))


def _wake_if_asleep(asm: Assembler, slot: int) -> None:
    """A futex wake on the slot's sequence word if its worker may sleep."""
    awake = asm.label("awake")
    asm(e.ldr_x(10, slot, WORKER_SLEEPS))
    asm.cbz(10, awake)
    asm(e.add_imm(10, slot, SEQUENCE))
    _futex(asm, 10, FUTEX_WAKE_PRIVATE, None)
    asm.bind(awake)


def _wait(asm: Assembler, slot: int) -> None:
    """Return once the slot's done word equals its sequence word. x14: the slot, x9: the done
    word's address, x10: the number, x11: spins, x12: polls left, x13: the word as last read.
    While the worker has not woken up for the task, the caller sleeps at once: polling could
    hold the very core the worker waits for."""
    again, awake, finished = asm.label("again"), asm.label("awake"), asm.label("finished")
    asm(e.mov_reg(14, slot), e.add_imm(9, slot, DONE), e.ldr_x(10, 14, SEQUENCE),
        e.ldr_x(11, 14, SPINS))
    asm.bind(again)
    asm(e.mov_reg(12, 11))
    _poll(asm, 9, 10, "eq", finished, 12, 13, give_up=(14, WORKER_SLEEPS))
    _announce_sleep(asm, 14, CALLER_SLEEPS, 9, 10, "eq", awake, 13)
    _futex(asm, 9, FUTEX_WAIT_PRIVATE, 13)
    asm.bind(awake)
    asm(e.str_x(e.XZR, 14, CALLER_SLEEPS))
    asm.b(again)
    asm.bind(finished)


def generate_run_tasks(target: Target) -> bytes:
    """run_tasks(tasks=x0, count=x1, slots=x2, operands=x3, own=x4). x19: the next task, x22,
    x21: the slots' addresses from first to end, x20: the slot at hand, x23: operands, x24:
    own. All tasks are posted before the own one runs, and each worker's wake follows one
    fence after all the posts; after the own one, each task no worker has taken runs here
    (without an own task, whose stack may be too small, it waits for every worker)."""
    asm = Assembler()
    asm.prologue((19, 20, 21, 22, 23, 24, 29, 30), ())
    no_own, finished = asm.label("no_own"), asm.label("finished")
    asm(e.mov_reg(19, 0), e.mov_reg(22, 2), e.add_reg(21, 2, 1, lsl=3), e.mov_reg(23, 3),
        e.mov_reg(24, 4))
    _each_slot(asm, lambda slot: _post(asm, slot))
    asm(e.dmb("ish"))
    _each_slot(asm, lambda slot: _wake_if_asleep(asm, slot))
    asm.cbz(24, no_own)
    asm(e.ldr_x(9, 24, TASK_OPERANDS), e.add_reg(9, 23, 9), e.ldp_x(0, 1, 9),
        e.ldr_x(2, 9, 16), e.ldp_x(3, 4, 24, TASK_BEGIN), e.ldr_x(9, 24, TASK_FUNCTION),
        e.blr(9))
    _each_slot(asm, lambda slot: _take_or_wait(asm, slot))
    asm.b(finished)
    asm.bind(no_own)                        # this thread's stack may not hold a task
    _each_slot(asm, lambda slot: _wait(asm, slot))
    asm.bind(finished)
    asm.epilogue()
    return asm.finish()


def generate_spin(target: Target) -> bytes:
    """spin(word=x0, count=x1 >= 1): the poll of worker_loop and run_tasks, count times, the
    compare never true (einjit.codegen.workers times it to turn a time into polls)."""
    asm = Assembler()
    finished = asm.label("finished")
    asm(e.mov_reg(9, 0), e.mov_imm(2, -1))
    _poll(asm, 9, 2, "eq", finished, 1, 3)
    asm.bind(finished)
    asm(e.ret())
    return asm.finish()


def generate_claim(target: Target) -> bytes:
    """claim(in0=x0, in1=x1, out=x2, table=x3, line=x4: its share's): take the next number of
    the share at hand (an exclusive load and store of its CLAIM_NEXT, again where another
    thread's came between) and run the nest on that chunk, or, where the share has none left,
    move to the next share's line, until every share has been found empty. x19..x21: the
    operands, x22: the table, x23: the share's line, x24: the shares left to visit."""
    asm = Assembler()
    asm.prologue((19, 20, 21, 22, 23, 24, 29, 30), ())
    claim, next_share, finished = (asm.label(name) for name in (
        "claim", "next_share", "finished"))
    asm(e.mov_reg(19, 0), e.mov_reg(20, 1), e.mov_reg(21, 2), e.mov_reg(22, 3),
        e.add_imm(23, 4, CLAIM_NEXT), e.ldr_x(24, 22, CLAIM_SHARES))
    asm.bind(claim)
    asm(e.ldxr_x(9, 23), e.add_imm(10, 9, 1), e.stxr_x(11, 10, 23))
    asm.cbnz(11, claim)
    asm(e.ldr_x(10, 23, CLAIM_END), e.cmp_reg(9, 10))
    asm.b_cond("hs", next_share)
    asm(e.ldr_x(10, 22, CLAIM_BOUNDS), e.add_reg(10, 10, 9, lsl=3), e.ldp_x(3, 4, 10),
        e.mov_reg(0, 19), e.mov_reg(1, 20), e.mov_reg(2, 21),
        e.ldr_x(9, 22, CLAIM_FUNCTION), e.blr(9))
    asm.b(claim)
    asm.bind(next_share)
    asm(e.subs_imm(24, 24, 1))
    asm.b_cond("eq", finished)
    asm(e.add_imm(23, 23, LINE_BYTES), e.ldr_x(10, 22, CLAIM_BOUNDS), e.cmp_reg(23, 10))
    asm.b_cond("lo", claim)
    asm(e.add_imm(23, 22, LINE_BYTES))                      # past the last: the first
    asm.b(claim)
    asm.bind(finished)
    asm.epilogue()
    return asm.finish()
