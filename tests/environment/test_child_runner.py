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


def test_a_hung_child_names_its_threads_and_a_work_that_never_noted(monkeypatch):
    monkeypatch.setattr(support, "CHILD_SECONDS", 0.5)
    with pytest.raises(pytest.fail.Exception,
                       match=r"last note: forked, work not begun; its threads: \d+ S "):
        run_in_child(lambda note: time.sleep(60))


@pytest.mark.native
def test_in_the_lane_a_fork_ends_the_idle_native_workers_first(monkeypatch):
    # the shares of a generated nest, not a ctypes callback: a callback's closure would leave
    # a writable and executable page in this process (tests/runtime/test_arena.py)
    import numpy as np

    from einjit.codegen import compile_operation, workers
    from einjit.ir import TensorOperation

    op = TensorOperation("float32", "none", "add", "none", ("c", "c", "c"),
                         ("shared", "prim", "prim"), (2, 4, 4), (16, 1, 4), (16, 1, 4),
                         (16, 1, 4), num_threads=2)
    nest = compile_operation(op)
    pool = workers.native_pool(op.target)
    in0, in1 = np.arange(32, dtype=np.float32), np.full(32, 2, np.float32)
    out = np.zeros(32, np.float32)

    def run_two():                             # the second share on a worker
        out[:] = 0
        pool.run([(nest.address, in0.ctypes.data, in1.ctypes.data, out.ctypes.data, 0, 1),
                  (nest.address, in0.ctypes.data, in1.ctypes.data, out.ctypes.data, 1, 2)])
        np.testing.assert_array_equal(out, in0 + in1)

    run_two()
    monkeypatch.setattr(support, "IN_LANE", False)
    run_in_child(lambda note: None)
    assert pool._idle != []                    # on the host the workers stay
    monkeypatch.setattr(support, "IN_LANE", True)
    assert run_in_child(lambda note: workers.native_pool(op.target).started) == 0
    assert pool._idle == []
    run_two()                                  # and the next run starts new ones
    assert pool._idle != []
