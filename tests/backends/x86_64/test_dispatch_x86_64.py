"""The x86-64 dispatch code (einjit.backends.x86_64.dispatch) as instructions: what the
protocol of einjit.backends.worker_slot needs is there. It runs in tests/codegen/
test_workers.py."""

import pytest

from einjit.backends import LINE_BYTES, resolve_target
from einjit.backends.worker_slot import (
    CALLER_SLEEPS,
    CLAIM_BOUNDS,
    CLAIM_END,
    CLAIM_FUNCTION,
    CLAIM_NEXT,
    CLAIM_SHARES,
    DONE,
    FUNCTION,
    FUTEX_VALUES,
    SEQUENCE,
    SPINS,
    TAKEN,
    WORKER_SLEEPS,
)
from einjit.backends.x86_64 import dispatch
from einjit.disasm import disassemble

from support import shown

TARGET = resolve_target("x86_64:avx2")


def listing(generate):
    return [line.split(None, 2)[2] for line in
            disassemble(generate(TARGET), "x86_64").splitlines()]


def system_calls(lines):
    """What each syscall is: "yield", or the futex operation in esi ("wait", "wake")."""
    calls = []
    for index, line in enumerate(lines):
        if line == "syscall":
            before = lines[max(0, index - 5):index]
            if f"mov eax, {hex(dispatch.SYS_SCHED_YIELD)}" in before:
                calls.append("yield")
                continue
            assert f"mov eax, {hex(dispatch.SYS_FUTEX)}" in before
            operation = next(text for text in before if text.startswith("mov esi, "))
            calls.append({"mov esi, 0x80": "wait", "mov esi, 0x81": "wake"}[operation])
    return calls


def test_the_worker_polls_runs_the_task_and_sleeps_and_wakes_through_the_futex():
    lines = listing(dispatch.generate_worker_loop)
    assert "pause" in lines and "call rax" in lines
    assert f"mov r13, qword ptr [rbx + {hex(SPINS)}]" in lines
    assert f"mov qword ptr [rbx + {hex(DONE)}], r12" in lines
    assert f"mov qword ptr [rbx + {hex(WORKER_SLEEPS)}], rax" in lines
    assert f"mov rax, qword ptr [rbx + {hex(CALLER_SLEEPS)}]" in lines
    assert f"mov rdx, qword ptr [rdi + {WORKER_SLEEPS - DONE}]" in listing(
        dispatch.generate_run_tasks)                       # the worker not yet awake
    assert lines.count("mfence") == 2      # before rereading the sequence, after storing done
    # polls yield; sleep; after waking the caller, yield once
    assert system_calls(lines) == ["yield", "wait", "wake", "yield"]
    # function 0: done is stored without a call, then the loop returns
    stored = lines.index(f"mov qword ptr [rbx + {hex(DONE)}], r12")
    assert lines[stored - 1] == "call rax" and "mov r13, rax" in lines[:stored]
    leave = lines.index("test r13, r13")
    assert stored < leave and lines[leave + 1].startswith("jne ")
    assert lines[leave + 2:] == ["pop r13", "pop r12", "pop rbx", "vzeroupper", "ret"]
    assert lines[-1] == "ret"


def test_run_tasks_posts_every_task_then_fences_once_then_wakes_runs_its_own_and_waits():
    lines = listing(dispatch.generate_run_tasks)
    # a wait for the tasks the workers took after the own one; without one, for every task
    assert system_calls(lines) == ["wake", "yield", "wait", "yield", "wait"]
    fences = [index for index, line in enumerate(lines) if line == "mfence"]
    sequence_stores = [index for index, line in enumerate(lines)
                       if line == "mov qword ptr [rdi], rax"]
    assert len(fences) == 3 and len(sequence_stores) == 1
    wake = next(index for index, line in enumerate(lines) if line == "mov esi, 0x81")
    own_call = lines.index("call rax")
    assert sequence_stores[0] < fences[0] < wake < own_call < fences[1]
    # the sequence counts modulo FUTEX_VALUES: the futex compares 32 bits
    at = sequence_stores[0]
    assert SEQUENCE == 0 and lines[at - 4:at] == [
        "mov rax, qword ptr [rdi]", "inc rax", f"mov ecx, {hex(FUTEX_VALUES - 1)}", "and rax, rcx"]
    assert f"mov r8, qword ptr [rdi + {hex(SPINS)}]" in lines


@pytest.mark.parametrize("generate, calls", [
    (dispatch.generate_run_tasks, ["wake", "yield", "wait", "yield", "wait"]),
    (dispatch.generate_spin, ["yield"])])
def test_run_tasks_and_spin(generate, calls):
    lines = listing(generate)
    assert system_calls(lines) == calls
    assert "pause" in lines
    assert ("mfence" in lines) == (generate is not dispatch.generate_spin)


def test_claim_takes_numbers_atomically_from_its_share_then_from_the_next_shares():
    lines = listing(dispatch.generate_claim)
    claim = lines.index("lock xadd qword ptr [r14], rax")    # the share's line: CLAIM_NEXT
    assert CLAIM_NEXT == 0 and lines[claim - 1] == "mov eax, 1"
    assert lines[claim + 1] == f"cmp rax, qword ptr [r14 + {shown(CLAIM_END)}]"
    assert lines[claim + 2].startswith("jae ")              # none left here: the next share
    assert lines[claim + 3:claim + 6] == [
        f"mov rcx, qword ptr [r13 + {shown(CLAIM_BOUNDS)}]",
        "mov r8, qword ptr [rcx + rax*8 + 8]", "mov rcx, qword ptr [rcx + rax*8]"]
    call = lines.index("call rax")
    assert CLAIM_FUNCTION == 0 and lines[call - 1] == "mov rax, qword ptr [r13]"
    assert lines[call + 1].startswith("jmp ")               # back to the next claim
    # the next share's line, the first after the last, until every share was visited
    assert f"mov r15, qword ptr [r13 + {shown(CLAIM_SHARES)}]" in lines
    visited = lines.index("dec r15")
    assert lines[visited + 1].startswith("je ") and lines[visited + 2:visited + 4] == [
        f"add r14, {shown(LINE_BYTES)}", f"cmp r14, qword ptr [r13 + {shown(CLAIM_BOUNDS)}]"]
    assert lines[visited + 5] == f"lea r14, [r13 + {shown(LINE_BYTES)}]"
    assert lines.count("push r15") == 1 and "sub rsp, 8" in lines  # rsp 16-aligned at the call
    assert lines[-1] == "ret"


def test_worker_and_caller_take_a_task_by_compare_and_swap_from_the_number_before_it():
    """The worker takes its task before calling it and polls again where it finds it taken;
    the caller, after its own task, runs each task no worker took and waits for the rest."""
    worker = listing(dispatch.generate_worker_loop)
    take = worker.index(f"lock cmpxchg qword ptr [rbx + {hex(TAKEN)}], rcx")
    assert worker[take - 4:take] == ["lea rax, [r12 - 1]", f"mov edx, {hex(FUTEX_VALUES - 1)}",
                                     "and rax, rdx", "mov rcx, r12"]
    assert worker[take + 1].startswith("jne ")               # taken already: poll again
    assert worker[take + 2] == f"mov rax, qword ptr [rbx + {shown(FUNCTION)}]"
    caller = listing(dispatch.generate_run_tasks)
    own_call = caller.index("call rax")
    take = caller.index(f"lock cmpxchg qword ptr [rdi + {hex(TAKEN)}], rcx")
    assert own_call < take and caller[take - 5] == "mov r9, qword ptr [rdi]"    # SEQUENCE
    assert caller[take + 1].startswith("jne ")               # the worker's: wait for it
    ran = caller.index("call rax", take)
    assert caller[ran - 1] == f"mov rax, qword ptr [r11 + {shown(FUNCTION)}]"
    assert caller.count(f"lock cmpxchg qword ptr [rdi + {hex(TAKEN)}], rcx") == 1
