"""Measuring tools shared by the benchmarks: timing, JIT'd drivers, the machine's references.

A Python call costs about a microsecond, as long as a small kernel runs, so kernels are timed
through a JIT'd driver that calls them `count` times from machine code. The references each
benchmark divides by are measured in the same run: the FP32 (vfmadd231ps) or FP64
(vfmadd231pd) FMA peak by a JIT'd loop of independent FMAs, and numpy's copy bandwidth.
The machine is shared, so every figure is the best of several repetitions.
"""

import contextlib
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from einjit.backends.x86_64 import encode as e
from einjit.backends.x86_64.asm import Assembler
from einjit.runtime.memory import ExecutableMemory

from .output import write_result  # noqa: F401  (the benchmarks' one writer of result files)

GIB = 2.0 ** 30
WIDTH = {"avx512": 512, "avx2": 256}
FLOPS_PER_FMA = {"avx512": 32, "avx2": 16}   # 16 or 8 lanes, 2 flops each
FMA = {"float32": e.vfmadd231ps, "float64": e.vfmadd231pd}
ELEMENT_BYTES = {"float32": 4, "float64": 8}


def placed(values, offset, boundary=64):
    """A Fortran-ordered copy of `values` starting `offset` bytes past a `boundary`-byte
    boundary (64: a cache line, 4096: a page), so that where an operand sits is the same in
    every run, not wherever the allocator put it."""
    buffer = np.empty(values.nbytes + boundary + offset, np.uint8)
    start = -buffer.ctypes.data % boundary + offset
    result = buffer[start:start + values.nbytes].view(values.dtype)
    result = result.reshape(values.shape[::-1]).T
    result[...] = values
    return result


@contextlib.contextmanager
def einjit_threads(threads: int):
    """A context in which einjit plans for `threads` threads (EINJIT_NUM_THREADS; a compiled
    expression keeps the count it was planned for)."""
    from einjit.runtime.threads import THREADS_ENV
    saved = os.environ.get(THREADS_ENV)
    os.environ[THREADS_ENV] = str(threads)
    try:
        yield
    finally:
        if saved is None:
            del os.environ[THREADS_ENV]
        else:
            os.environ[THREADS_ENV] = saved


def one_blas_thread():
    """A context in which numpy's BLAS runs on one thread (threadpoolctl, where installed): the
    reference products computed in the process that times einjit, whose BLAS threads would
    otherwise keep polling on the cores einjit's threads are timed on."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def best_seconds(function, repetitions=7):
    """The shortest of `repetitions` timed calls of function()."""
    best = float("inf")
    for _ in range(repetitions):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def warm_memory(nbytes: int = 3 << 30) -> None:
    """Touch `nbytes` of fresh memory once, then free it: a VM may back guest memory lazily,
    and the first touch of memory the guest has not used for a while is then far slower,
    hitting whichever side of a comparison meets it first."""
    np.ones(nbytes // 8)


def seconds_per_call(functions, round_seconds=0.03, rounds=7):
    """Seconds per call of each function in the dict `functions`: the best of `rounds` rounds
    of about round_seconds each. Every round times every function once, so a busy spell on
    the shared machine hits all of them alike."""
    calls = {}
    for name, function in functions.items():
        function()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < round_seconds / 4:
            function()
            count += 1
        calls[name] = max(1, 4 * count)
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                function()
            best[name] = min(best[name], (time.perf_counter() - start) / calls[name])
    return best


class JitFunction:
    """Machine code callable with `argument_count` 64-bit integer arguments."""

    def __init__(self, code, argument_count):
        self.memory = ExecutableMemory(code)
        prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * argument_count)
        self.call = prototype(self.memory.address)


def _fma_loop(variant, fmas_per_iteration=48, dtype="float32"):
    """peak(count): count iterations of independent FMAs (vfmadd231ps, or vfmadd231pd for
    float64) on 24 (AVX2: 12) accumulators."""
    asm, width = Assembler(), WIDTH[variant]
    chains = 24 if variant == "avx512" else 12
    asm.prologue([])
    for r in range(chains + 2):
        asm(e.vxorps(r, r, r, 256))   # a VEX xor zeroes the whole register
    top = asm.label()
    asm.align(32)
    asm.bind(top)
    for i in range(fmas_per_iteration):
        asm(FMA[dtype](i % chains, chains, chains + 1, width))
    asm(e.dec(e.RDI))
    asm.jcc("ne", top)
    asm.epilogue()
    return JitFunction(asm.finish(), 1), fmas_per_iteration


def fma_peak_gflops(variant, seconds=0.05, dtype="float32"):
    """GFLOPS of one core running nothing but independent FMAs of `dtype` (FP32 by default;
    FP64: half the lanes)."""
    loop, fmas = _fma_loop(variant, dtype=dtype)
    count = 1000
    while best_seconds(lambda: loop.call(count), 1) < seconds:
        count *= 2
    elapsed = best_seconds(lambda: loop.call(count))
    flops = FLOPS_PER_FMA[variant] * 4 // ELEMENT_BYTES[dtype]
    return count * fmas * flops / elapsed / 1e9


class RepeatDriver:
    """repeat(count, kernel_address, args): call an 8-argument kernel `count` times."""

    def __init__(self):
        asm = Assembler()
        count, kernel, args = e.RBX, e.RBP, e.R12
        asm.prologue([count, kernel, args, e.R13])   # 4 pushes + return address: rsp = 8 mod 16
        asm(e.mov_rr(count, e.RDI), e.mov_rr(kernel, e.RSI), e.mov_rr(args, e.RDX),
            e.sub_ri(e.RSP, 24))                       # room for 2 stack arguments, realigned
        top = asm.label()
        asm.bind(top)
        for i, reg in enumerate((e.RDI, e.RSI, e.RDX, e.RCX, e.R8, e.R9)):
            asm(e.mov_rm(reg, e.Mem(args, disp=8 * i)))
        for i in (6, 7):
            asm(e.mov_rm(e.RAX, e.Mem(args, disp=8 * i)),
                e.mov_mr(e.Mem(e.RSP, disp=8 * (i - 6)), e.RAX))
        asm(e.call_r(kernel), e.dec(count))
        asm.jcc("ne", top)
        asm(e.add_ri(e.RSP, 24))
        asm.epilogue()
        self._function = JitFunction(asm.finish(), 3)

    def seconds_per_call(self, kernel_address, args, seconds=0.005, repetitions=5):
        """Seconds per kernel call: the best of `repetitions` batches of about `seconds`."""
        packed = (ctypes.c_int64 * 8)(*args, *[0] * (8 - len(args)))
        address = ctypes.addressof(packed)

        def batch(count):
            return best_seconds(lambda: self._function.call(count, kernel_address, address), 1)
        count, elapsed = 16, batch(16)
        while elapsed < seconds / 20:        # too short to scale from reliably
            count *= 16
            elapsed = batch(count)
        count = max(1, round(count * seconds / elapsed))
        return best_seconds(lambda: self._function.call(count, kernel_address, address),
                            repetitions) / count


def cold_ms(setup, statement, processes=3, environment=None):
    """Milliseconds `statement` takes the first time in a fresh interpreter after `setup`
    (imports done, no per-process caches warm): the best of `processes` runs, with the
    variables of `environment` added to this process's. The modules a statement imports
    late are timed from their bytecode, as an installed package has it (pip compiles it at
    install), not from source: the runs share a temporary PYTHONPYCACHEPREFIX, which the
    first fills, whatever PYTHONDONTWRITEBYTECODE says (the checkout gets no __pycache__)."""
    program = (f"{setup}\nimport time\nstart = time.perf_counter()\n{statement}\n"
               f"print(time.perf_counter() - start)")
    with tempfile.TemporaryDirectory() as bytecode:
        env = dict(os.environ, PYTHONPYCACHEPREFIX=bytecode, **(environment or {}))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        runs = [float(subprocess.run([sys.executable, "-c", program], capture_output=True,
                                     text=True, check=True, env=env).stdout)
                for _ in range(processes)]
    return 1e3 * min(runs)
