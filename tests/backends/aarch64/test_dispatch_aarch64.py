"""The AArch64 dispatch code (einjit.backends.aarch64.dispatch) as instructions: what the
protocol of einjit.backends.worker_slot needs is there. It runs in tests/codegen/
test_workers.py (the aarch64 lane)."""

import pytest

from einjit.backends import resolve_target
from einjit.backends.aarch64 import dispatch
from einjit.backends.worker_slot import CALLER_SLEEPS, DONE, SPINS, WORKER_SLEEPS
from einjit.disasm import disassemble

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
    assert f"ldr x15, [x14, #{hex(WORKER_SLEEPS)}]" in listing(dispatch.generate_wait)
    assert lines.count("dmb ish") == 2
    # polls yield; sleep; after waking the caller, yield once
    assert system_calls(lines) == ["yield", "wait", "wake", "yield"]
    assert lines[-1] == "ret"


@pytest.mark.parametrize("generate, calls", [
    (dispatch.generate_wait, ["yield", "wait"]), (dispatch.generate_post, ["wake"]),
    (dispatch.generate_spin, ["yield"])])
def test_wait_post_and_spin(generate, calls):
    lines = listing(generate)
    assert system_calls(lines) == calls
    assert ("yield" in lines) == (generate is not dispatch.generate_post)
    assert ("dmb ish" in lines) == (generate is not dispatch.generate_spin)
    assert any(line.startswith("ldar") for line in lines) == (
        generate is not dispatch.generate_post)
    assert any(line.startswith("stlr") for line in lines) == (
        generate is dispatch.generate_post)
