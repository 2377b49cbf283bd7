"""The worker pool and the split of shared iterations across threads."""

import threading

import pytest

from einjit.errors import KernelParameterError
from einjit.runtime import threads
from einjit.runtime.threads import WorkerPool, check_threads, default_threads, split_range

from support import on_thread_with_stack


@pytest.mark.parametrize("total, parts", [(1, 1), (1, 4), (7, 2), (8, 2), (100, 3), (5, 5),
                                          (3, 8), (1000, 7)])
def test_split_range_covers_everything_once_in_balanced_shares(total, parts):
    shares = split_range(total, parts)
    assert len(shares) == min(total, parts)
    assert shares[0][0] == 0 and shares[-1][1] == total
    assert all(end == begin for (_, end), (begin, _) in zip(shares, shares[1:]))
    sizes = [end - begin for begin, end in shares]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_pool_runs_every_share_once_on_distinct_threads():
    pool = WorkerPool()
    seen, lock = [], threading.Lock()
    barrier = threading.Barrier(3, timeout=10)   # all three shares must run at once

    def work(begin, end):
        barrier.wait()
        with lock:
            seen.append((begin, end, threading.get_ident()))

    pool.run(work, [(0, 1), (1, 2), (2, 3)])
    assert sorted(s[:2] for s in seen) == [(0, 1), (1, 2), (2, 3)]
    assert len({s[2] for s in seen}) == 3
    assert seen and any(s[2] == threading.get_ident() for s in seen)  # the caller took a share


def test_pool_reraises_a_worker_error_after_all_shares_finished():
    pool = WorkerPool()
    finished = []

    def work(i):
        if i == 1:
            raise RuntimeError("share 1 failed")
        finished.append(i)

    with pytest.raises(RuntimeError, match="share 1 failed"):
        pool.run(work, [(0,), (1,), (2,)])
    assert sorted(finished) == [0, 2]


def test_pool_serves_concurrent_callers():
    pool = WorkerPool()
    results = []

    def caller(k):
        out = [0] * 4
        pool.run(lambda i: out.__setitem__(i, i * k), [(i,) for i in range(4)])
        results.append(out == [i * k for i in range(4)])

    callers = [threading.Thread(target=caller, args=(k,)) for k in range(1, 9)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert results == [True] * 8


def test_thread_count_defaults_and_checks(monkeypatch):
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    assert default_threads() >= 1
    monkeypatch.setenv(threads.THREADS_ENV, "3")
    assert check_threads(None) == 3
    assert check_threads(2) == 2
    monkeypatch.setenv(threads.THREADS_ENV, "zero")
    with pytest.raises(KernelParameterError, match="EINJIT_NUM_THREADS='zero'"):
        default_threads()
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(KernelParameterError, match="num_threads="):
            check_threads(bad)


def test_pool_works_in_a_forked_child():
    """A child process inherits none of the parent's worker threads; the pool starts its own
    there instead of queueing work for threads that do not exist."""
    import os
    pool = WorkerPool()
    pool.run(lambda i: None, [(0,), (1,)])          # the parent's worker exists now
    pid = os.fork()
    if pid == 0:
        out = [0, 0, 0]
        pool.run(lambda i: out.__setitem__(i, 1), [(0,), (1,), (2,)])
        os._exit(0 if out == [1, 1, 1] else 1)
    _, status = os.waitpid(pid, 0)
    assert status == 0


def test_workers_get_their_own_stack_size_and_may_take_every_share():
    """Workers start with WORKER_STACK_BYTES of stack whatever threading.stack_size says (a
    nest's frame may hold a copy of A), and leave threading's setting as it was; with
    on_caller=False every share runs on a worker, none on the calling thread."""
    import os
    pid = os.fork()
    if pid == 0:                          # a fresh pool, and threading's setting left as found
        threading.stack_size(256 << 10)
        pool, ran = WorkerPool(), []
        pool.run(lambda i: ran.append((i, threading.get_ident(), threads.thread_stack_bytes())),
                 [(0,), (1,)], on_caller=False)
        here = threading.get_ident()
        fine = (sorted(i for i, _, _ in ran) == [0, 1]
                and all(ident != here and size >= threads.WORKER_STACK_BYTES
                        for _, ident, size in ran)
                and threading.stack_size() == 256 << 10)
        os._exit(0 if fine else 1)
    _, status = os.waitpid(pid, 0)
    assert status == 0


def test_thread_stack_bytes_reads_the_calling_threads_stack():
    """A thread started with 1 MiB of stack reads 1 MiB (or a little more where the C library
    rounds it up): 900 KiB fit, 2 MiB do not; the main thread has more. (1 MiB: more than 4
    times the 128 KiB threads of the nest tests, so glibc never hands them this stack.)"""
    seen = {}

    def record():
        seen["size"] = threads.thread_stack_bytes()
        seen["fits"] = threads.stack_suffices(900 << 10), threads.stack_suffices(2 << 20)

    on_thread_with_stack(1 << 20, record)
    assert 1 << 20 <= seen["size"] < 5 << 18
    assert seen["fits"] == (True, False)
    assert threads.stack_suffices(2 << 20) and not threads.stack_suffices(1 << 50)


def test_the_thread_setting_follows_the_environment(monkeypatch):
    """threads_setting (a per-call cache key) changes with every change of
    EINJIT_NUM_THREADS made through os.environ."""
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    unset = threads.threads_setting()
    assert unset is None
    monkeypatch.setenv(threads.THREADS_ENV, "3")
    three = threads.threads_setting()
    monkeypatch.setenv(threads.THREADS_ENV, "5")
    assert three is not None and threads.threads_setting() not in (None, three)
    monkeypatch.delenv(threads.THREADS_ENV)
    assert threads.threads_setting() is None


def _cgroups(tmp_path, membership, files):
    """A made-up cgroup mount under tmp_path: `files` maps paths below it to contents."""
    for name, text in files.items():
        path = tmp_path / "mount" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "cgroup").write_text(membership)
    return str(tmp_path / "mount"), str(tmp_path / "cgroup")


@pytest.mark.parametrize("membership, files, expected", [
    # cgroup v2: the tightest of the group's and its ancestors' quotas, rounded up
    ("0::/pod/app\n", {"pod/app/cpu.max": "250000 100000\n", "pod/cpu.max": "max 100000\n"}, 3),
    ("0::/pod/app\n", {"pod/app/cpu.max": "400000 100000", "pod/cpu.max": "150000 100000"}, 2),
    ("0::/\n", {"cpu.max": "50000 100000"}, 1),
    ("0::/pod\n", {"pod/cpu.max": "max 100000"}, None),
    ("0::/pod\n", {"pod/cpu.max": "lots 100000"}, None),
    ("0::/pod\n", {}, None),
    # paths Linux does not write (relative, a trailing slash) still end at the root
    ("0::pod/app\n", {"pod/app/cpu.max": "300000 100000", "cpu.max": "200000 100000"}, 2),
    ("0::/pod/\n", {"pod/cpu.max": "300000 100000"}, 3),
    # cgroup v1: cpu.cfs_quota_us over cpu.cfs_period_us, -1 for none
    ("4:memory:/x\n2:cpu,cpuacct:/docker/c1\n",
     {"cpu/docker/c1/cpu.cfs_quota_us": "200000", "cpu/docker/c1/cpu.cfs_period_us": "100000"},
     2),
    ("2:cpu,cpuacct:/docker/c1\n",
     {"cpu/docker/c1/cpu.cfs_quota_us": "-1", "cpu/docker/c1/cpu.cfs_period_us": "100000"},
     None),
    ("2:cpuacct:/docker/c1\n",
     {"cpu/docker/c1/cpu.cfs_quota_us": "100000", "cpu/docker/c1/cpu.cfs_period_us": "100000"},
     None),
])
def test_quota_cpus_reads_cgroup_v1_and_v2_limits(tmp_path, membership, files, expected):
    root, groups = _cgroups(tmp_path, membership, files)
    assert threads.quota_cpus(root, groups) == expected


def test_quota_cpus_without_cgroups_is_none(tmp_path):
    assert threads.quota_cpus(str(tmp_path), str(tmp_path / "missing")) is None


def test_default_threads_keeps_within_the_cgroup_quota(monkeypatch):
    """A container's CPU limit caps the default (its affinity still lists the host's every
    core); EINJIT_NUM_THREADS still decides where it is set."""
    import os
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    usable = len(os.sched_getaffinity(0))
    monkeypatch.setattr(threads, "_process_quota_cpus", lambda: None)
    assert default_threads() == usable
    monkeypatch.setattr(threads, "_process_quota_cpus", lambda: 1)
    assert default_threads() == 1
    monkeypatch.setattr(threads, "_process_quota_cpus", lambda: usable + 5)
    assert default_threads() == usable
    monkeypatch.setattr(threads, "_process_quota_cpus", lambda: 1)
    monkeypatch.setenv(threads.THREADS_ENV, "3")
    assert default_threads() == 3
