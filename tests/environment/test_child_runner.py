"""support.run_in_child, which the guard-page and fuzz tests run kernels through: a child's
result comes back, its exception and its death by signal fail the test quoting its last note,
and a child that hangs is killed after CHILD_SECONDS and fails the test the same way."""

import os
import signal
import time

import pytest

import support
from support import run_in_child


def test_the_childs_result_comes_back():
    assert run_in_child(lambda note: [os.getpid(), 42])[1] == 42
    assert run_in_child(lambda note: os.getpid()) != os.getpid()


def test_a_child_that_raises_fails_quoting_its_note():
    def work(note):
        note("dividing")
        return 1 // 0
    with pytest.raises(pytest.fail.Exception, match="dividing(.|\\n)*ZeroDivisionError"):
        run_in_child(work)


def test_a_child_killed_by_a_signal_fails_quoting_its_note():
    def work(note):
        note("about to fault")
        os.kill(os.getpid(), signal.SIGKILL)
    with pytest.raises(pytest.fail.Exception, match="signal 9 while running: about to fault"):
        run_in_child(work)


def test_a_hung_child_is_killed_and_fails_quoting_its_note(monkeypatch):
    monkeypatch.setattr(support, "CHILD_SECONDS", 0.5)

    def work(note):
        note("waiting for ever")
        time.sleep(60)
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match="hung.*last note: waiting for ever"):
        run_in_child(work)
    assert time.monotonic() - started < 30
