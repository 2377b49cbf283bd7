"""The AArch64 dispatch code (einjit.backends.aarch64.dispatch) as instructions: what the
protocol of einjit.backends.worker_slot needs is there. It runs in tests/codegen/
test_workers.py (the aarch64 lane)."""

import pytest

from einjit.backends import LINE_BYTES, resolve_target
from einjit.backends.aarch64 import dispatch
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
from einjit.disasm import disassemble

from support import shown

TARGET = resolve_target("aarch64")


def listing(generate):
    return [line.split(None, 2)[2] for line in
            disassemble(generate(TARGET), "aarch64").splitlines()]


def system_calls(lines):
    """What each svc is: "yield" (sched_yield), or the futex operation in x1 ("wait",
    "wake")."""
    calls = []
    for index, line in enumerate(lines):
        if line.startswith("svc"):
            before = lines[max(0, index - 6):index]
            if before[-1] == f"mov x8, #{hex(dispatch.SYS_SCHED_YIELD)}":
                calls.append("yield")
                continue
            assert f"mov x8, #{hex(dispatch.SYS_FUTEX)}" in before
            operation = next(text for text in before if text.startswith("mov x1, "))
            calls.append({"mov x1, #0x80": "wait", "mov x1, #0x81": "wake"}[operation])
    return calls


def test_the_worker_polls_runs_the_task_and_sleeps_and_wakes_through_the_futex():
    lines = listing(dispatch.generate_worker_loop)
    assert "yield" in lines and "blr x9" in lines
    assert "ldar x9, [x23]" in lines                  # the sequence word, load-acquire
    assert "stlr x20, [x22]" in lines                 # the done word, store-release
    assert f"add x22, x19, #{hex(DONE)}" in lines
    assert f"ldr x21, [x19, #{hex(SPINS)}]" in lines
    assert f"str x15, [x19, #{hex(WORKER_SLEEPS)}]" in lines
    assert f"ldr x9, [x19, #{hex(CALLER_SLEEPS)}]" in lines
    assert f"ldr x15, [x14, #{hex(WORKER_SLEEPS)}]" in listing(dispatch.generate_run_tasks)
    assert lines.count("dmb ish") == 2
    # polls yield; sleep; after waking the caller, yield once
    assert system_calls(lines) == ["yield", "wait", "wake", "yield"]
    # function 0: done is stored without a call, then the loop returns
    stored = lines.index("stlr x20, [x22]")
    assert lines[stored - 1] == "blr x9" and "mov x21, x9" in lines[:stored]
    assert any(line.startswith("cbnz x21, ") for line in lines[stored:])
    assert lines[-1] == "ret"


def test_run_tasks_posts_every_task_then_fences_once_then_wakes_runs_its_own_and_waits():
    lines = listing(dispatch.generate_run_tasks)
    # a wait for the tasks the workers took after the own one; without one, for every task
    assert system_calls(lines) == ["wake", "yield", "wait", "yield", "wait"]
    fences = [index for index, line in enumerate(lines) if line == "dmb ish"]
    sequence_stores = [index for index, line in enumerate(lines) if line.startswith("stlr")]
    assert len(fences) == 3 and len(sequence_stores) == 1
    wake = lines.index("mov x1, #0x81")
    own_call = lines.index("blr x9")
    assert sequence_stores[0] < fences[0] < wake < own_call < fences[1]
    # the sequence counts modulo FUTEX_VALUES: the futex compares 32 bits
    at = sequence_stores[0]
    assert SEQUENCE == 0 and lines[at - 4:at] == [
        "ldr x11, [x9]", "add x11, x11, #1", f"and x11, x11, #{hex(FUTEX_VALUES - 1)}",
        "add x12, x9, #0"]
    assert lines[at] == "stlr x11, [x12]"
    assert f"ldr x11, [x14, #{hex(SPINS)}]" in lines


@pytest.mark.parametrize("generate, calls", [
    (dispatch.generate_run_tasks, ["wake", "yield", "wait", "yield", "wait"]),
    (dispatch.generate_spin, ["yield"])])
def test_run_tasks_and_spin(generate, calls):
    lines = listing(generate)
    assert system_calls(lines) == calls
    assert "yield" in lines
    assert ("dmb ish" in lines) == (generate is not dispatch.generate_spin)
    assert any(line.startswith("ldar") for line in lines)
    assert any(line.startswith("stlr") for line in lines) == (
        generate is dispatch.generate_run_tasks)


def test_claim_takes_numbers_by_an_exclusive_pair_from_its_share_then_the_next_shares():
    lines = listing(dispatch.generate_claim)
    load = lines.index("ldxr x9, [x23]")                   # the share's line: CLAIM_NEXT
    assert CLAIM_NEXT == 0 and lines[load + 1:load + 3] == ["add x10, x9, #1",
                                                            "stxr w11, x10, [x23]"]
    assert lines[load + 3].startswith("cbnz x11, ")    # lost the address (w11 is 1): again
    assert lines[load + 4:load + 6] == [f"ldr x10, [x23, #{shown(CLAIM_END)}]", "cmp x9, x10"]
    assert lines[load + 6].startswith("b.hs ")             # none left here: the next share
    assert lines[load + 7:load + 10] == [f"ldr x10, [x22, #{shown(CLAIM_BOUNDS)}]",
                                         "add x10, x10, x9, lsl #3", "ldp x3, x4, [x10]"]
    call = lines.index("blr x9")
    assert CLAIM_FUNCTION == 0 and lines[call - 1] == "ldr x9, [x22]"
    assert lines[call + 1].startswith("b ")                # back to the next claim
    assert f"ldr x24, [x22, #{shown(CLAIM_SHARES)}]" in lines
    visited = lines.index("subs x24, x24, #1")
    assert lines[visited + 1].startswith("b.eq ") and lines[visited + 2:visited + 5] == [
        f"add x23, x23, #{shown(LINE_BYTES)}", f"ldr x10, [x22, #{shown(CLAIM_BOUNDS)}]",
        "cmp x23, x10"]
    assert lines[visited + 6] == f"add x23, x22, #{shown(LINE_BYTES)}"   # past the last
    assert lines[-1] == "ret"


def test_worker_and_caller_take_a_task_by_an_exclusive_swap_from_the_number_before_it():
    """The worker takes its task before calling it and polls again where it finds it taken;
    the caller, after its own task, runs each task no worker took and waits for the rest."""
    worker = listing(dispatch.generate_worker_loop)
    at = worker.index(f"add x10, x19, #{hex(TAKEN)}")
    assert worker[at + 1:at + 5] == ["sub x11, x20, #1", f"and x11, x11, #{hex(FUTEX_VALUES - 1)}",
                                     "ldxr x12, [x10]", "cmp x12, x11"]
    assert worker[at + 5].startswith("b.ne ")                # taken already: poll again
    assert worker[at + 6] == "stxr w13, x20, [x10]" and worker[at + 7].startswith("cbnz x13, ")
    assert worker[at + 8] == f"ldr x9, [x19, #{shown(FUNCTION)}]"
    caller = listing(dispatch.generate_run_tasks)
    own_call = caller.index("blr x9")
    at = caller.index(f"add x10, x9, #{hex(TAKEN)}")
    assert own_call < at and caller[at - 1] == "ldr x15, [x9]"       # SEQUENCE
    assert caller[at + 5].startswith("b.ne ") and caller[at + 6] == "stxr w13, x15, [x10]"
    ran = caller.index("blr x10", at)
    assert caller[ran - 1] == f"ldr x10, [x9, #{shown(FUNCTION)}]"
