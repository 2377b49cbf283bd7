"""The native worker pool (einjit.codegen.workers): the generated worker loop, wait and post on
this host (both ISAs: this module runs on the host and in the aarch64 lane), driving real loop
nests and, where a test must see what a worker did, a ctypes callback posted as the nest
(it runs Python on the worker's own thread). Those tests run in a forked child: libffi may
map a callback's trampoline writable and executable (it does on arm64 Debian), which the
arena's tests rule out for the whole process."""

import ctypes
import dataclasses
import platform
import threading
import time
from array import array

import numpy as np
import pytest

import einjit
from einjit.backends import resolve_target
from einjit.backends.worker_slot import (
    CALLER_SLEEPS,
    DONE,
    FUTEX_VALUES,
    SEQUENCE,
    SPINS,
    TAKEN,
    WORKER_SLEEPS,
)
from einjit.codegen import compile as compile_module
from einjit.codegen import compile_operation, workers
from einjit.codegen.compile import CLAIMS_PER_THREAD, claim_chunks
from einjit.codegen.loop_nest import plan_nest
from einjit.codegen.workers import NativePool, NestShares
from einjit.ir import TensorOperation
from einjit.runtime import threads

from support import run_in_child

IN_LANE = platform.machine() == "aarch64"      # emulated: timings are loose
ROUNDS = 3000
NEST = ctypes.CFUNCTYPE(None, *[ctypes.c_uint64] * 5)


def _add_op(shares):
    """out = in0 + in1 over `shares` shared iterations of a 4 x 4 block (float32)."""
    return TensorOperation("float32", "none", "add", "none", ("c", "c", "c"),
                           ("shared", "prim", "prim"), (shares, 4, 4), (16, 1, 4), (16, 1, 4),
                           (16, 1, 4), num_threads=shares)


class _Recorder:
    """A callback to post as a nest: records its arguments and thread, after `delay` s."""

    def __init__(self, delay=0.0):
        self.calls, self.delay = [], delay
        self.function = NEST(self._call)
        self.address = ctypes.cast(self.function, ctypes.c_void_p).value

    def as_calls(self, argument_lists):
        """NativePool.run's calls of this callback on each argument tuple."""
        return [(self.address, *arguments) for arguments in argument_lists]

    def _call(self, *arguments):
        if self.delay:
            time.sleep(self.delay)
        self.calls.append((arguments, threading.get_ident(), threads.thread_stack_bytes()))


def _word(worker, offset):
    return ctypes.c_uint64.from_address(worker.slot + offset).value


def test_thousands_of_dispatches_in_a_row_are_all_right(every_share_threaded):
    op = _add_op(3)
    assert len(compile_operation(op)._shares) == 3
    rng = np.random.default_rng(0)
    inputs = [(rng.standard_normal(48, np.float32), rng.standard_normal(48, np.float32))
              for _ in range(2)]
    for round_ in range(ROUNDS):
        in0, in1 = inputs[round_ % 2]
        out = np.full(48, np.nan, np.float32)
        op.execute(in0, in1, out)
        if not np.array_equal(out, in0 + in1):
            pytest.fail(f"round {round_}: {out} != {in0 + in1}")


def test_workers_get_each_share_and_run_it_on_their_own_threads():
    """Each call long enough for the new workers to start and take theirs before the caller,
    done with its own, would take them."""
    def child(note):
        pool, recorder = NativePool(resolve_target()), _Recorder(delay=0.2)
        shares = [(1, 2, 3, begin, begin + 1) for begin in range(4)]
        pool.run(recorder.as_calls(shares))
        assert sorted(arguments for arguments, _, _ in recorder.calls) == shares
        callers = [ident for arguments, ident, _ in recorder.calls if arguments == shares[0]]
        assert callers == [threading.get_ident()]                # the caller ran share 0
        assert len({ident for _, ident, _ in recorder.calls}) == 4
        assert pool.started == 3
        recorder.delay = 0.0
        pool.run(recorder.as_calls(shares[:2]))
        assert pool.started == 3                                  # idle workers are reused
        pool.shutdown()

    run_in_child(child)


def test_idle_workers_are_taken_most_recent_first_and_none_is_lost():
    pool = NativePool(resolve_target())
    first, second, third = (object() for _ in range(3))
    pool._idle = [first, second, third]              # the last one given back is the last
    assert pool._take(0) == [] and pool._idle == [first, second, third]
    assert pool._take(2) == [third, second] and pool._idle == [first]
    pool._give_back([third, second])
    assert pool._idle == [first, second, third]
    assert pool._take(3) == [third, second, first] and pool._idle == []


def test_a_caller_needing_more_workers_than_are_idle_starts_only_the_missing():
    def child(note):
        pool, recorder = NativePool(resolve_target()), _Recorder()
        pool.run(recorder.as_calls([(0, 0, 0, b, b + 1) for b in range(3)]))
        assert pool.started == 2 and len(pool._idle) == 2
        shares = [(0, 0, 0, b, b + 1) for b in range(5)]
        pool.run(recorder.as_calls(shares))
        assert pool.started == 4 and len(pool._idle) == 4
        assert sorted(arguments for arguments, _, _ in recorder.calls[3:]) == shares
        pool.shutdown()

    run_in_child(child)


def test_without_the_caller_every_share_is_on_a_worker_with_a_large_stack():
    def child(note):
        pool, recorder = NativePool(resolve_target()), _Recorder()
        pool.run(recorder.as_calls([(0, 0, 0, 0, 1), (0, 0, 0, 1, 2)]), on_caller=False)
        assert len(recorder.calls) == 2 and pool.started == 2
        here = threading.get_ident()
        assert all(ident != here and stack >= threads.WORKER_STACK_BYTES
                   for _, ident, stack in recorder.calls)
        pool.shutdown()

    run_in_child(child)


def test_a_worker_asleep_past_its_spin_wakes_for_the_next_task():
    """Each call long enough for the woken worker to take its task before the caller, done
    with its own, would."""
    def child(note):
        pool, recorder = NativePool(resolve_target()), _Recorder()
        calls = recorder.as_calls([(0, 0, 0, 0, 1), (0, 0, 0, 1, 2)])
        pool.run(calls)
        worker = pool._idle[-1]
        recorder.delay = 0.05
        for round_ in range(3):
            deadline = time.monotonic() + 5
            while not _word(worker, WORKER_SLEEPS) and time.monotonic() < deadline:
                time.sleep(0.01)                              # far past the spin bound
            assert _word(worker, WORKER_SLEEPS) == 1, round_  # it went to sleep
            recorder.calls.clear()
            pool.run(calls)
            assert len({ident for _, ident, _ in recorder.calls}) == 2, round_
            assert _word(worker, DONE) == _word(worker, SEQUENCE), round_
        pool.shutdown()

    run_in_child(child)


def test_a_caller_asleep_past_its_spin_is_woken_when_the_worker_finishes():
    def child(note):
        pool, slow = NativePool(resolve_target()), _Recorder(delay=0.05)
        started = time.perf_counter()
        pool.run(slow.as_calls([(0, 0, 0, 0, 1)]), on_caller=False)
        assert time.perf_counter() - started >= 0.05 and len(slow.calls) == 1
        worker = pool._idle[-1]
        assert _word(worker, CALLER_SLEEPS) == 0 and _word(worker, DONE) == 1
        pool.shutdown()

    run_in_child(child)


def test_shutdown_ends_the_threads_and_a_later_run_starts_new_ones():
    def child(note):
        pool, recorder = NativePool(resolve_target()), _Recorder()
        pool.run(recorder.as_calls([(0, 0, 0, 0, 1), (0, 0, 0, 1, 2)]))
        first = pool._idle[-1].thread
        pool.shutdown()
        assert not first.is_alive() and pool._idle == []
        pool.run(recorder.as_calls([(0, 0, 0, 0, 1), (0, 0, 0, 1, 2)]))
        assert pool.started == 2 and len(recorder.calls) == 4
        pool.shutdown()

    run_in_child(child)


def test_concurrent_callers_never_share_a_worker(every_share_threaded):
    op = _add_op(3)
    rng = np.random.default_rng(1)
    results = []

    def caller(seed):
        in0 = np.random.default_rng(seed).standard_normal(48).astype(np.float32)
        in1 = np.full(48, seed, np.float32)
        for _ in range(ROUNDS // 10):
            out = np.empty(48, np.float32)
            op.execute(in0, in1, out)
            if not np.array_equal(out, in0 + in1):
                results.append(False)
                return
        results.append(True)

    callers = [threading.Thread(target=caller, args=(int(rng.integers(100)),))
               for _ in range(4)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join()
    assert results == [True] * 4


def test_a_forked_child_starts_its_own_workers(every_share_threaded):
    op = _add_op(3)
    in0, in1 = np.arange(48, dtype=np.float32), np.full(48, 2, np.float32)
    out = np.empty(48, np.float32)
    op.execute(in0, in1, out)                                 # the parent's workers exist

    def child(note):
        pool = workers.native_pool(op.target)
        assert pool._idle == [] and pool.started == 0
        results = []
        for _ in range(100):
            out[:] = 0
            op.execute(in0, in1, out)
            results.append(bool(np.array_equal(out, in0 + in1)))
        return all(results), pool.started

    assert run_in_child(child) == (True, 2)
    out[:] = 0
    op.execute(in0, in1, out)                                 # and the parent's still work
    np.testing.assert_array_equal(out, in0 + in1)


def test_spins_come_from_a_time():
    """The poll count is timed on this core: SPIN_SECONDS of polls, at least one."""
    code = workers._Code(resolve_target())
    spin = code.spin
    word = (ctypes.c_uint64 * 1)()
    started = time.perf_counter()
    spin(ctypes.addressof(word), code.spins)
    elapsed = time.perf_counter() - started
    assert code.spins >= 1
    if not IN_LANE:             # emulation and a loaded host time loosely
        assert elapsed < 50 * workers.SPIN_SECONDS


def test_the_native_pool_is_linux_only(monkeypatch):
    assert workers.native_pool(resolve_target()) is not None
    monkeypatch.setattr(workers.sys, "platform", "darwin")
    assert workers.native_pool(resolve_target()) is None


def test_without_the_native_pool_shares_run_on_the_python_pool(monkeypatch, every_share_threaded):
    monkeypatch.setattr(workers, "native_pool", lambda target: None)
    op = _add_op(3)
    in0, in1 = np.arange(48, dtype=np.float32), np.ones(48, np.float32)
    out = np.empty(48, np.float32)
    before = len(threads.pool._queues)
    op.execute(in0, in1, out)
    np.testing.assert_array_equal(out, in0 + in1)
    assert len(threads.pool._queues) >= max(before, 2)


def test_many_dispatches_with_a_pause_now_and_then_stay_right(every_share_threaded):
    """Posts that find the worker polling, and some that find it asleep."""
    op = _add_op(2)
    in0 = np.arange(32, dtype=np.float32)
    for round_ in range(ROUNDS // 10):
        in1 = np.full(32, round_, np.float32)
        out = np.empty(32, np.float32)
        op.execute(in0, in1, out)
        assert np.array_equal(out, in0 + in1), round_
        if round_ % 50 == 49:
            time.sleep(20 * workers.SPIN_SECONDS)


def _gemm_op(shares, num_threads):
    """C := A B over `shares` shared blocks of 8 rows (float32, N = 6, K = 5, column-major)."""
    rows, n, k = 8 * shares, 6, 5
    dims = [("m", shares, 8, 0, 8), ("m", 8, 1, 0, 1), ("n", n, 0, k, rows), ("k", k, rows, 1, 0)]
    return TensorOperation("float32", "zero", "gemm", "none", [d[0] for d in dims],
                           ("shared", "prim", "prim", "prim"), [d[1] for d in dims],
                           [d[2] for d in dims], [d[3] for d in dims], [d[4] for d in dims],
                           num_threads=num_threads)


@pytest.mark.parametrize("shares", [2, 3, 5, 16])
def test_every_share_count_gives_the_one_thread_result_bit_for_bit(shares, every_share_threaded):
    """16 shares on this machine's cores: more workers than cores, still right."""
    op, alone = _gemm_op(shares, shares), _gemm_op(shares, 1)
    assert len(compile_operation(op)._shares) == shares
    assert len(compile_operation(alone)._shares) == 1
    rng = np.random.default_rng(shares)
    a = rng.standard_normal((5, 8 * shares), np.float32)            # column-major A: k rows
    b = rng.standard_normal((6, 5), np.float32)                     # column-major B: n rows
    expected = np.empty((6, 8 * shares), np.float32)
    alone.execute(a, b, expected)
    np.testing.assert_allclose(expected.T, a.T @ b.T, rtol=1e-5, atol=1e-5)
    for round_ in range(50):
        out = np.full_like(expected, np.nan)
        op.execute(a, b, out)
        if not np.array_equal(out.view(np.uint32), expected.view(np.uint32)):
            pytest.fail(f"{shares} shares, round {round_}: not the one-thread result")


def test_tasks_of_different_functions_run_in_one_call(every_share_threaded):
    """An add's shares and a GEMM's shares handed out at once, each with its own operands."""
    add, gemm = compile_operation(_add_op(3)), compile_operation(_gemm_op(2, 2))
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(48, np.float32), rng.standard_normal(48, np.float32)
    a, b = rng.standard_normal((5, 16), np.float32), rng.standard_normal((6, 5), np.float32)
    sum_, product = np.zeros(48, np.float32), np.zeros((6, 16), np.float32)
    expected = np.empty_like(product)
    _gemm_op(2, 1).execute(a, b, expected)
    pool = workers.native_pool(add.target)
    tasks = workers.Tasks([(add.address, 0, begin, end) for begin, end in add._shares]
                          + [(gemm.address, 3, begin, end) for begin, end in gemm._shares])
    operands = array("Q", [x.ctypes.data, y.ctypes.data, sum_.ctypes.data,
                           a.ctypes.data, b.ctypes.data, product.ctypes.data])
    for on_caller in (True, False):
        sum_[:], product[:] = 0, 0
        pool.run_tasks(tasks, operands, on_caller)
        np.testing.assert_array_equal(sum_, x + y)
        np.testing.assert_array_equal(product.view(np.uint32), expected.view(np.uint32))


def test_tasks_and_their_operands_are_checked_before_any_code_runs():
    with pytest.raises(ValueError, match="expected \\(function, first, begin, end\\)"):
        workers.Tasks([(1, 0, 0)])
    with pytest.raises(ValueError, match="-1"):
        workers.Tasks([(1, 0, -1, 2)])
    with pytest.raises(ValueError, match="at least one"):
        workers.Tasks([])
    with pytest.raises(ValueError, match="a function and 5 arguments"):
        NativePool(resolve_target()).run([(1, 2, 3)])
    reading_six = workers.Tasks([(1, 0, 0, 1), (1, 3, 1, 2)])
    assert reading_six.operand_words == 6
    with pytest.raises(ValueError, match="5 operand words; these tasks read 6"):
        NativePool(resolve_target()).run_tasks(reading_six, array("Q", range(5)))


def test_workers_asleep_past_their_spin_all_wake_for_one_call(every_share_threaded):
    op = _add_op(5)
    in0, in1 = np.arange(80, dtype=np.float32), np.full(80, 3, np.float32)
    out = np.zeros(80, np.float32)
    op.execute(in0, in1, out)
    taken = workers.native_pool(op.target)._idle[-4:]
    deadline = time.monotonic() + 5
    while (not all(_word(worker, WORKER_SLEEPS) for worker in taken)
           and time.monotonic() < deadline):
        time.sleep(0.01)
    assert [_word(worker, WORKER_SLEEPS) for worker in taken] == [1] * 4
    for _ in range(3):
        out[:] = 0
        op.execute(in0, in1, out)
        np.testing.assert_array_equal(out, in0 + in1)
        time.sleep(0.05)
    # every task taken, by its worker or, where it had not woken yet, by the caller
    assert all(_word(worker, TAKEN) == _word(worker, SEQUENCE) for worker in taken)


def test_sequence_numbers_wrap_below_the_futex_width(monkeypatch, every_share_threaded):
    """Workers whose numbers start just below FUTEX_VALUES count on through 0, asleep or
    polling."""
    near_wrap = FUTEX_VALUES - 2

    def slot_near_wrap():
        slot = plain_slot()
        for offset in (SEQUENCE, DONE, TAKEN):
            ctypes.c_uint64.from_address(slot + offset).value = near_wrap
        return slot

    plain_slot = workers._slot_memory
    monkeypatch.setattr(workers, "_slot_memory", slot_near_wrap)
    pool = NativePool(resolve_target())
    op = _add_op(3)
    monkeypatch.setattr(workers, "native_pool", lambda target: pool)
    in0 = np.arange(48, dtype=np.float32)
    seen = []
    for round_ in range(6):
        in1 = np.full(48, round_, np.float32)
        out = np.empty(48, np.float32)
        op.execute(in0, in1, out)
        np.testing.assert_array_equal(out, in0 + in1)
        seen.append(_word(pool._idle[-1], SEQUENCE))
        if round_ < 2:
            time.sleep(20 * workers.SPIN_SECONDS)             # asleep at the wrap
    assert seen == [near_wrap + 1, 0, 1, 2, 3, 4]
    assert all(_word(worker, TAKEN) == 4 for worker in pool._idle)
    pool.shutdown()


def _expected(op_alone, a, b):
    expected = np.empty((6, a.shape[1]), np.float32)
    op_alone.execute(a, b, expected)
    np.testing.assert_allclose(expected.T, a.T @ b.T, rtol=1e-5, atol=1e-5)
    return expected


@pytest.mark.parametrize("iterations, threads, chunks", [
    (8, 2, 8), (7, 3, 6), (24, 3, 3 * CLAIMS_PER_THREAD), (40, 16, 32)])
def test_claimed_chunks_give_the_one_thread_result_bit_for_bit(iterations, threads, chunks,
                                                                every_share_threaded):
    """The threads claim chunks of the shared iterations, each share cut into as many as its
    size and CLAIMS_PER_THREAD allow (16 threads: more than this machine's cores), run after
    run."""
    op, alone = _gemm_op(iterations, threads), _gemm_op(iterations, 1)
    assert compile_operation(op)._nest_shares.chunks == chunks
    rng = np.random.default_rng(iterations)
    a = rng.standard_normal((5, 8 * iterations), np.float32)
    b = rng.standard_normal((6, 5), np.float32)
    expected = _expected(alone, a, b)
    for round_ in range(50):
        out = np.full_like(expected, np.nan)
        op.execute(a, b, out)
        if not np.array_equal(out.view(np.uint32), expected.view(np.uint32)):
            pytest.fail(f"{threads} threads, round {round_}: not the one-thread result")


def test_concurrent_runs_of_one_claimed_nest_stay_right(every_share_threaded):
    """One run at a time claims chunks; a run that finds them in use runs the shares."""
    op, alone = _gemm_op(16, 2), _gemm_op(16, 1)
    assert compile_operation(op)._nest_shares.chunks == 16
    rng = np.random.default_rng(5)
    a = rng.standard_normal((5, 128), np.float32)
    b = rng.standard_normal((6, 5), np.float32)
    expected = _expected(alone, a, b)
    results = []

    def caller():
        for _ in range(ROUNDS // 10):
            out = np.full_like(expected, np.nan)
            op.execute(a, b, out)
            if not np.array_equal(out.view(np.uint32), expected.view(np.uint32)):
                results.append(False)
                return
        results.append(True)

    callers = [threading.Thread(target=caller) for _ in range(4)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join()
    assert results == [True] * 4


def test_each_chunk_runs_once_a_run_and_a_slowed_thread_claims_fewer():
    def child(note):
        here, calls = threading.get_ident(), []

        def nest(in0, in1, out, begin, end):
            calls.append((threading.get_ident(), (in0, in1, out), (begin, end)))
            if threading.get_ident() == here:
                time.sleep(0.05)             # the caller's thread: slowed

        function = NEST(nest)
        address = ctypes.cast(function, ctypes.c_void_p).value
        chunks = [(begin, begin + 1) for begin in range(3, 11)]
        shares = NestShares(resolve_target(), address, function, [(3, 7), (7, 11)], chunks)
        assert shares.chunks == 8
        for round_ in range(3):              # the next number starts again at 0 each run
            calls.clear()
            shares.run(1, 2, 3)
            assert sorted(chunk for _, _, chunk in calls) == chunks, round_
            assert {operands for _, operands, _ in calls} == {(1, 2, 3)}
            slowed = sum(ident == here for ident, _, _ in calls)
            assert slowed < len(chunks) - slowed, (round_, slowed)
            # each thread takes a share's chunks in order, and its own share's first
            for ident in {ident for ident, _, _ in calls}:
                taken = [begin for thread, _, (begin, _) in calls if thread == ident]
                for share in ((3, 7), (7, 11)):
                    mine = [begin for begin in taken if share[0] <= begin < share[1]]
                    assert mine == sorted(mine), (round_, taken)
            assert calls[0][0] == here or calls[0][2][0] >= 7    # the worker's share: 7..10

    run_in_child(child)


@pytest.mark.parametrize("chunks", [[(0, 4)], [(0, 3), (4, 8)], [(0, 4), (4, 7)],
                                    [(1, 4), (4, 8)], [(0, 2), (2, 5), (5, 8)]])
def test_chunks_must_cut_the_shares_one_after_another(chunks):
    with pytest.raises(ValueError, match="chunks"):
        NestShares(resolve_target(), 1, None, [(0, 4), (4, 8)], chunks)


def test_chunks_are_claimed_only_where_each_thread_gets_several_of_enough_work(monkeypatch):
    plan = plan_nest(_gemm_op(64, 2), resolve_target())     # 64 GEMMs of 8 x 6 x 5: 480 flops
    shares = [(0, 32), (32, 64)]
    assert plan.pack_b is None and claim_chunks(plan, shares) is None    # far too little work
    # a chunk holds CLAIM_LEAST_SHARES (4) shares' least work at least
    monkeypatch.setattr(compile_module, "MIN_FLOPS_PER_THREAD", 480)
    chunks = claim_chunks(plan, shares)
    assert chunks == [(begin, begin + 4) for begin in range(0, 64, 4)]   # 8 a share
    monkeypatch.setattr(compile_module, "MIN_FLOPS_PER_THREAD", 960)
    assert claim_chunks(plan, shares) == [(begin, begin + 8) for begin in range(0, 64, 8)]
    monkeypatch.setattr(compile_module, "MIN_FLOPS_PER_THREAD", 2000)
    assert claim_chunks(plan, shares) is None                # one chunk a share
    monkeypatch.setattr(compile_module, "MIN_FLOPS_PER_THREAD", 480)
    assert claim_chunks(plan, shares[:1]) is None            # one thread


def _large_gemm(m, n, k, batch, threads):
    """A float32 GEMM (a batch of them where batch > 1) optimized and compiled for `threads`:
    large, its B's columns a conflict pitch apart (K a power of two), so the nest copies B
    (K = 2048 makes 128 rows of A large on an L2 of up to 2 MiB)."""
    dims = ("m", "n", "k") if batch == 1 else ("c", "m", "n", "k")
    lead = () if batch == 1 else (batch,)
    strides = [(1, 0, m), (0, k, 1), (1, m, 0)]
    if batch > 1:
        strides = [(m * k,) + strides[0], (k * n,) + strides[1], (m * n,) + strides[2]]
    op = TensorOperation("float32", "zero", "gemm", "none", dims, None, lead + (m, n, k),
                         *strides, num_threads=threads)
    return einjit.optimize(op, num_threads=threads)


def test_a_share_that_copies_b_for_its_m_blocks_is_not_claimed_a_batch_entry_is():
    """Shares of m blocks reading one copied panel of B (the innermost shared loop leaves in1
    in place): each chunk would copy it again, so no claims (where the copy is not planned,
    the same shares are claimed). A batch of large products shared by entry copies a panel
    per entry anyway: its entries are claimed."""
    tiles = compile_operation(_large_gemm(4096, 512, 2048, 1, 3))
    plan, shares = tiles.plan, tiles._shares
    assert plan.pack_b is not None and plan.shared[-1].strides[1] == 0
    assert claim_chunks(plan, shares) is None
    assert claim_chunks(dataclasses.replace(plan, pack_b=None), shares) is not None
    batch = compile_operation(_large_gemm(1024, 1024, 2048, 8, 2))
    assert batch.plan.pack_b is not None and batch.plan.shared[-1].strides[1] != 0
    assert claim_chunks(batch.plan, batch._shares) == [(c, c + 1) for c in range(8)]


def test_a_batch_whose_entries_copy_b_runs_right_claimed(every_share_threaded):
    """4 large products of 256 x 256 x 2048 on 2 threads, each entry a chunk its threads
    claim (the nest copies B's panels): numpy's products, every run."""
    op = _large_gemm(256, 256, 2048, 4, 2)
    compiled = compile_operation(op)
    assert compiled.plan.pack_b is not None and claim_chunks(compiled.plan, compiled._shares)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 2048, 256), np.float32)            # column-major A_c: k rows
    b = rng.standard_normal((4, 256, 2048), np.float32)            # column-major B_c: n rows
    expected = np.einsum("ckm,cnk->cnm", a.astype(np.float64), b.astype(np.float64))
    for _ in range(5):
        out = np.full((4, 256, 256), np.nan, np.float32)
        op.execute(a, b, out)
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-3)


def test_a_task_no_worker_takes_runs_on_the_caller_once_its_own_is_done():
    """Slots with no worker behind them (a worker not yet scheduled, taken to the extreme):
    the caller runs every task itself and returns; without an own task it could not."""
    def child(note):
        code = workers._Code(resolve_target())
        recorder = _Recorder()
        slots = array("Q", [workers._slot_memory() for _ in range(3)])
        operands = array("Q", [7, 8, 9])
        tasks = workers.Tasks([(recorder.address, 0, begin, begin + 1) for begin in range(4)])
        for round_ in range(3):
            recorder.calls.clear()
            code.run_tasks(tasks.address + workers.TASK_BYTES, 3, slots.buffer_info()[0],
                           operands.buffer_info()[0], tasks.address)
            assert [arguments for arguments, _, _ in recorder.calls] == [
                (7, 8, 9, begin, begin + 1) for begin in range(4)], round_
            assert {ident for _, ident, _ in recorder.calls} == {threading.get_ident()}
            for slot in slots:
                assert _word_at(slot, SEQUENCE) == _word_at(slot, TAKEN) == round_ + 1
                assert _word_at(slot, DONE) == 0        # no worker finished anything

    run_in_child(child)


def _word_at(address, offset):
    return ctypes.c_uint64.from_address(address + offset).value


def test_a_worker_whose_task_the_caller_took_sleeps_until_the_next():
    """It was late (most likely on the caller's core): asleep, its next wake-up lets the
    kernel place it on an idle core, where polling on it would keep it queued behind the
    caller. Its spin is made endless here, so only the lost task can put it to sleep."""
    def child(note):
        code, recorder = workers._Code(resolve_target()), _Recorder()
        slot = workers._slot_memory()
        ctypes.c_uint64.from_address(slot + SPINS).value = 1 << 60
        worker = threads.start_worker_thread(code.worker_loop, (slot,), "late-worker")
        time.sleep(0.01)                      # polling
        assert _word_at(slot, WORKER_SLEEPS) == 0
        ctypes.c_uint64.from_address(slot + TAKEN).value = 1     # the caller took task 1
        ctypes.c_uint64.from_address(slot + SEQUENCE).value = 1
        deadline = time.monotonic() + 30
        while not _word_at(slot, WORKER_SLEEPS) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert _word_at(slot, WORKER_SLEEPS) == 1
        assert _word_at(slot, DONE) == 0 and recorder.calls == []
        note("posting a task the worker takes")
        slots, operands = array("Q", [slot]), array("Q", [7, 8, 9])
        tasks = workers.Tasks([(recorder.address, 0, 4, 5)])
        code.run_tasks(tasks.address, 1, slots.buffer_info()[0], operands.buffer_info()[0], 0)
        assert [arguments for arguments, _, _ in recorder.calls] == [(7, 8, 9, 4, 5)]
        assert recorder.calls[0][1] == worker.ident and _word_at(slot, DONE) == 2
        ends = workers.Tasks([(0, 0, 0, 0)])
        code.run_tasks(ends.address, 1, slots.buffer_info()[0], operands.buffer_info()[0], 0)
        worker.join(30)
        assert not worker.is_alive()

    run_in_child(child)
