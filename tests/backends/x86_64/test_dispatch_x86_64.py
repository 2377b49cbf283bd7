"""The x86-64 dispatch code (einjit.backends.x86_64.dispatch) as instructions: what the
protocol of einjit.backends.worker_slot needs is there. It runs in tests/codegen/
test_workers.py."""

import pytest

from einjit.backends import resolve_target
from einjit.backends.worker_slot import CALLER_SLEEPS, DONE, SPINS, WORKER_SLEEPS
from einjit.backends.x86_64 import dispatch
from einjit.disasm import disassemble

TARGET = resolve_target("x86_64:avx2")


def listing(generate):
    return [line.split(None, 2)[2] for line in
            disassemble(generate(TARGET), "x86_64").splitlines()]


def futex_calls(lines):
    """(operation, count of such calls): each syscall's esi, rax being the futex's number."""
    calls = []
    for index, line in enumerate(lines):
        if line == "syscall":
            before = lines[max(0, index - 5):index]
            assert f"mov eax, {hex(dispatch.SYS_FUTEX)}" in before
            calls.append(next(text for text in before if text.startswith("mov esi, ")))
    return calls


def test_the_worker_polls_runs_the_task_and_sleeps_and_wakes_through_the_futex():
    lines = listing(dispatch.generate_worker_loop)
    assert "pause" in lines and "call rax" in lines
    assert f"mov r13, qword ptr [rbx + {hex(SPINS)}]" in lines
    assert f"mov qword ptr [rbx + {hex(DONE)}], r12" in lines
    assert f"mov qword ptr [rbx + {hex(WORKER_SLEEPS)}], rax" in lines
    assert f"mov rax, qword ptr [rbx + {hex(CALLER_SLEEPS)}]" in lines
    assert lines.count("mfence") == 2      # before rereading the sequence, after storing done
    assert futex_calls(lines) == ["mov esi, 0x80", "mov esi, 0x81"]    # wait, then wake
    assert lines[-1] == "ret"


@pytest.mark.parametrize("generate, operations", [
    (dispatch.generate_wait, ["mov esi, 0x80"]), (dispatch.generate_post, ["mov esi, 0x81"]),
    (dispatch.generate_spin, [])])
def test_wait_post_and_spin(generate, operations):
    lines = listing(generate)
    assert futex_calls(lines) == operations
    assert ("pause" in lines) == (generate is not dispatch.generate_post)
    assert ("mfence" in lines) == (generate is not dispatch.generate_spin)
