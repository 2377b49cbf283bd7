"""Test helpers shared by the primitive tests: canary buffers, strided views, special values,
guard pages, and running kernels in a forked child so a fault fails one case, not pytest.
"""

import ctypes
import mmap
import os
import re
import threading

import numpy as np
import pytest

CANARY = np.uint32(0x7FC0_BEEF)   # a quiet NaN with a payload no arithmetic produces

# Values that break naive kernels: NaNs of both signs, infinities, signed zeros, denormals,
# the smallest normal, values near overflow.
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e-45, -1e-45,
                     1.1754942e-38, -2.9e-39, 1.0, -1.0, 0.5, 3.4e38, -3.4e38, 1.8e19, 1e-30],
                    dtype=np.float32)


# float64 operands: the same roles with 64-bit values
CANARY64 = np.uint64(0x7FF8_0000_0BAD_BEEF)
SPECIALS64 = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 1e-310,
                       -2.5e-309, 2.2250738585072014e-308, -2.2250738585072014e-308, 1.0, -1.0,
                       0.5, 1.7e308, -1.7e308, 1.3e154, 1e-300, 3.4e38, 1e-45],
                      dtype=np.float64)


def shown(number):
    """A displacement as the disassembler writes it: decimal below 10, else hex."""
    return str(number) if number < 10 else hex(number)


def part_dtype(dtype):
    """The real dtype of a complex dtype's parts (a real dtype: itself)."""
    dtype = np.dtype(dtype)
    return np.empty(0, dtype).real.dtype


def canary(dtype=np.float32):
    """The canary bits of float32 or float64 buffers (complex: of each part)."""
    return CANARY64 if part_dtype(dtype) == np.float64 else CANARY


def bits(array):
    """The array's elements as unsigned integers of their size (bit-exact comparisons; a
    complex array: its parts, the last axis doubled)."""
    return array.view(np.uint64 if part_dtype(array.dtype).itemsize == 8 else np.uint32)


def canary_buffer(size, dtype=np.float32):
    """A float32 or float64 (or complex) array of `size` canaries (complex: in each part)."""
    dtype = np.dtype(dtype)
    parts = 2 if dtype.kind == "c" else 1
    return np.full(parts * size, canary(dtype),
                   dtype=bits(np.empty(0, part_dtype(dtype))).dtype).view(dtype)


def from_parts(parts, dtype):
    """parts[0] + i parts[1] in a complex dtype, set part by part (1j * inf would be
    nan+infj)."""
    values = np.empty(np.shape(parts)[1:], dtype)
    values.real, values.imag = parts
    return values


def strided(buffer, shape, strides):
    """A view of `buffer` with the given shape and strides in elements."""
    return np.lib.stride_tricks.as_strided(buffer, shape, [buffer.itemsize * s for s in strides])


def column_major(buffer, rows, cols, ld):
    """The rows x cols column-major sub-matrix of `buffer` with leading dimension ld."""
    return strided(buffer, (rows, cols), (1, ld))


def mixed_data(rng, count, specials=SPECIALS, fraction=0.15):
    """Random values with magnitudes from 1e-4 to ~160 (both signs), `fraction` specials."""
    values = 10.0 ** rng.uniform(-4.0, 2.2, count) * rng.choice((-1.0, 1.0), count)
    values = values.astype(specials.dtype)
    special = rng.random(count) < fraction
    values[special] = rng.choice(specials, int(special.sum()))
    return values


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_mappings = []   # guarded mappings live as long as the test process (arrays may view them)


def guarded(count, dtype=np.float32):
    """A float32 or float64 (or complex) array of `count` canaries ending right before a
    no-access page, in shared memory (a forked child's writes are visible to the parent)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return guarded(2 * count, part_dtype(dtype)).view(dtype)
    page = mmap.PAGESIZE
    data_pages = -(-dtype.itemsize * count // page)
    mapping = mmap.mmap(-1, (data_pages + 1) * page)
    _mappings.append(mapping)
    raw = np.frombuffer(mapping, dtype=np.uint8)
    guard = raw.ctypes.data + data_pages * page
    if _libc.mprotect(guard, page, 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect of the guard page failed")
    array = raw[:data_pages * page].view(dtype)[-count:]
    bits(array)[...] = canary(dtype)
    return array


def run_guarded(cases, problems, kernels, describe):
    """Call each problem's kernel in a forked child; fail naming the case that faulted, then
    verify every problem in the parent (their buffers are shared memory from `guarded`)."""
    progress = guarded(1).view(np.int32)   # shared: the case the child is running
    progress[0] = -1
    pid = os.fork()
    if pid == 0:
        try:
            for index, (problem, kernel) in enumerate(zip(problems, kernels)):
                progress[0] = index
                problem.call(kernel)
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        what = ("faulted: it accessed memory past the end of an operand"
                if os.WIFSIGNALED(status) else "raised an exception")
        pytest.fail(f"{describe(cases[progress[0]])} {what} (wait status {status:#x})")
    for problem in problems:
        problem.verify()


def run_code(code, *args, entry=0):
    """Run raw generated code once from its own executable mapping, as a function of
    integer arguments (addresses, sizes), starting `entry` bytes in."""
    from einjit.runtime.memory import ExecutableMemory
    memory = ExecutableMemory(code)
    try:
        ctypes.CFUNCTYPE(None, *[ctypes.c_uint64] * len(args))(memory.address + entry)(*args)
    finally:
        memory.release()


def assert_well_formed(kernel):
    """The kernel's code decodes to instructions throughout, returns at its end, and on
    AArch64 never names x18 (the platform register)."""
    lines = kernel.disassemble().splitlines()
    undecoded = [line for line in lines if ".byte" in line or "invalid" in line]
    assert not undecoded, f"{kernel.name}: bytes that decode to no instruction: {undecoded[:3]}"
    assert lines[-1].split()[-1] == "ret", f"{kernel.name} does not end with ret: {lines[-1]}"
    if kernel.isa == "aarch64":
        assert not any(re.search(r"\b[xw]18\b", line) for line in lines), \
            f"{kernel.name} uses x18, the platform register"


# set by scripts/aarch64 for its arm64 interpreter under qemu-user
IN_LANE = os.environ.get("EINJIT_LANE") == "aarch64"

# a child still running after this long is stuck (the longest take seconds, a minute in the
# aarch64 lane): it is killed and the test fails quoting its last note, instead of the parent
# waiting for ever (in the lane before scripts/test's 300 s per-test watchdog fires)
CHILD_SECONDS = 240 if IN_LANE else 180


def _end_idle_native_workers():
    """End the einjit worker threads this process keeps between runs (the next run starts new
    ones). qemu-user now and then deadlocks a child forked while other guest threads run
    guest code, as an idle worker does while it polls; a process whose tests fork thousands
    of children with no worker alive (tests/primitives in the lane) has never hung."""
    from einjit.backends import resolve_target
    from einjit.codegen import workers

    pool = workers.native_pool(resolve_target())
    if pool is not None:
        pool.shutdown()


def _threads_of(pid):
    """Each thread of process pid as 'tid state (wait channel)', read from /proc."""
    described = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/task/{tid}/wchan") as wchan:
                channel = wchan.read().strip() or "-"
        except OSError:
            continue
        described.append(f"{tid} {state} ({channel})")
    return ", ".join(described)


def run_in_child(work):
    """Run work(note) in a forked child and return its result (pickled through a file).

    note(text) records, in shared memory, what the child is about to do; if the child dies
    of a signal (a segfault from a kernel), the test fails quoting the last note, and if
    work raises, the test fails with the child's traceback; if it runs past CHILD_SECONDS,
    it is killed and the test fails quoting the last note. Nothing a kernel does in the
    child can take pytest down."""
    import pickle
    import signal
    import tempfile
    import time
    import traceback

    last = mmap.mmap(-1, mmap.PAGESIZE)   # shared with the child: its last note
    if IN_LANE:
        _end_idle_native_workers()
    with tempfile.TemporaryFile() as result:
        pid = os.fork()
        if pid == 0:
            def note(text):
                data = text.encode()[:mmap.PAGESIZE - 1] + b"\0"
                last[:len(data)] = data
            note("forked, work not begun")
            try:
                outcome = ("ok", work(note))
            except BaseException:
                outcome = ("raised", traceback.format_exc())
            try:
                pickle.dump(outcome, result)
                result.flush()
            finally:
                os._exit(0)
        deadline = time.monotonic() + CHILD_SECONDS
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                threads = _threads_of(pid)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                doing = last[:].split(b"\0", 1)[0].decode(errors="replace")
                pytest.fail(f"the child hung: still running after {CHILD_SECONDS} s, last "
                            f"note: {doing or '(none: it never ran Python)'}; its threads: "
                            f"{threads}")
            time.sleep(0.005)
        doing = last[:].split(b"\0", 1)[0].decode(errors="replace")
        if os.WIFSIGNALED(status):
            pytest.fail(f"the child died of signal {os.WTERMSIG(status)} while running: {doing}")
        if os.WEXITSTATUS(status) != 0:
            pytest.fail(f"the child exited with status {os.WEXITSTATUS(status)} while running: "
                        f"{doing}")
        result.seek(0)
        kind, value = pickle.load(result)
    if kind == "raised":
        pytest.fail(f"the child raised while running: {doing}\n{value}")
    return value


def on_thread_with_stack(stack_bytes, work):
    """work() on a new thread of stack_bytes of stack; its exception, re-raised here."""
    errors = []

    def run():
        try:
            work()
        except BaseException as error:
            errors.append(error)

    before = threading.stack_size(stack_bytes)
    try:
        thread = threading.Thread(target=run)
        thread.start()
    finally:
        threading.stack_size(before)
    thread.join()
    if errors:
        raise errors[0]
