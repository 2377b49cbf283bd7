"""Executable memory and the Kernel call checks, on a tiny hand-encoded kernel.

The kernel stores 1.0f to its first operand: kern(out, n) with `out` reaching n elements.
"""

import ctypes
import threading

import numpy as np
import pytest

import einjit
from einjit.backends import ISAS, backend, place_code, resolve_target
from einjit.backends.aarch64 import icache
from einjit.kernel import Kernel, Signature
from einjit.runtime import memory
from einjit.runtime.memory import PAGE_SIZE, CodeArena, ExecutableMemory

STORE_ONE = {
    # mov dword [rdi], 0x3f800000 ; ret
    "x86_64": bytes.fromhex("c707 0000803f c3"),
    # movz w1, #0x3f80, lsl #16 ; str w1, [x0] ; ret
    "aarch64": b"".join(w.to_bytes(4, "little") for w in (0x52A7F001, 0xB9000001, 0xD65F03C0)),
}
HOST = einjit.host_isa()
OTHER = next(isa for isa in STORE_ONE if isa != HOST)

SIGNATURE = Signature(pointers=("out",), integers=("n",), outputs=frozenset({"out"}),
                      lower_bounds={"n": 1}, extents=lambda v: {"out": v["n"]})


def _mapping_permissions(address):
    """The permission string of the mapping holding `address`, or None if unmapped."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if start <= address < end:
                return perms
    return None


def test_code_is_mapped_read_execute_only_and_released():
    memory = ExecutableMemory(STORE_ONE[HOST], backend(HOST).flush_icache)
    assert _mapping_permissions(memory.address) == "r-xp"
    address = memory.address
    memory.release()
    assert _mapping_permissions(address) is None


def test_kernel_runs_generated_code():
    kern = Kernel(STORE_ONE[HOST], HOST, "store_one", SIGNATURE)
    out = np.zeros(3, np.float32)
    kern(out, 3)
    assert out.tolist() == [1.0, 0.0, 0.0]


def test_kernel_runs_from_many_threads():
    kern = Kernel(STORE_ONE[HOST], HOST, "store_one", SIGNATURE)
    outs = [np.zeros(1, np.float32) for _ in range(16)]
    threads = [threading.Thread(target=kern, args=(out, 1)) for out in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(out[0] == 1.0 for out in outs)


@pytest.mark.parametrize("args, error, message", [
    ((np.zeros(3, np.float64), 3), einjit.OperandError, "dtype float64"),
    ((np.zeros(2, np.float32), 3), einjit.OperandValueError, "has 2 elements"),
    ((np.zeros((4, 4), np.float32)[:, ::2], 2), einjit.OperandValueError, "contiguous"),
    ((np.zeros(3, np.float32),), einjit.OperandError, "missing a required argument: 'n'"),
    ((np.zeros(3, np.float32), 0), einjit.OperandValueError, "n=0 is out of range"),
    ((np.zeros(3, np.float32), 2**31), einjit.OperandValueError, "n=2147483648 is out of range"),
    ((np.zeros(3, np.float32), 1.5), einjit.OperandError, "must be an integer"),
    ((np.zeros(3, np.float32), True), einjit.OperandError, "must be an integer"),
    (([1.0, 2.0], 2), einjit.OperandError, "float32 numpy array or an integer address"),
    ((0, 1), einjit.OperandValueError, "address 0x0"),
    ((-1, 1), einjit.OperandValueError, "address -0x1"),
    ((2**64, 1), einjit.OperandValueError, "address 0x10000000000000000"),
    ((2**63, 1), einjit.OperandValueError, "address 0x8000000000000000"),
])
def test_bad_arguments_raise_before_running(args, error, message):
    kern = Kernel(STORE_ONE[HOST], HOST, "store_one", SIGNATURE)
    with pytest.raises(error, match=message):
        kern(*args)
    for arg in args:
        if isinstance(arg, np.ndarray):
            assert not arg.any()  # nothing was written


def test_read_only_output_is_refused():
    kern = Kernel(STORE_ONE[HOST], HOST, "store_one", SIGNATURE)
    out = np.zeros(3, np.float32)
    out.flags.writeable = False
    with pytest.raises(einjit.OperandValueError, match="read-only"):
        kern(out, 3)


def test_foreign_isa_code_can_be_inspected_but_not_called():
    kern = Kernel(STORE_ONE[OTHER], OTHER, "store_one", SIGNATURE)
    assert kern.code == STORE_ONE[OTHER] and kern.isa == OTHER and kern.address is None
    out = np.zeros(1, np.float32)
    with pytest.raises(einjit.IsaMismatchError, match=OTHER):
        kern(out, 1)
    assert out[0] == 0.0


def test_the_arena_flushes_the_instruction_cache_as_the_code_was_placed_asking():
    """The runtime knows no instruction set: a block placed with a flush function gets it
    called over the bytes its seal makes executable (here the host's flush, recorded); code
    placed without one is sealed without a flush."""
    calls = []

    def recording(start, end):
        calls.append((start, end))
        if backend(HOST).flush_icache is not None:
            backend(HOST).flush_icache(start, end)

    code = STORE_ONE[HOST]
    arena = CodeArena(4 * PAGE_SIZE)
    plain = arena.place(code)
    assert plain.address and calls == []
    flushed = arena.place(code, recording)
    assert flushed.address == plain.address + PAGE_SIZE     # a seal ends its page
    assert calls == [(flushed.address, flushed.address + len(code))]
    own = ExecutableMemory(code, recording)
    assert calls[1:] == [(own.address, own.address + len(code))]
    out = np.zeros(1, np.float32)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(flushed.address)(out.ctypes.data)
    assert out[0] == 1.0
    own.release()


def test_code_is_placed_with_its_backends_instruction_cache_flush(monkeypatch):
    """place_code hands the arena what the target's backend says: AArch64's icache flush,
    nothing for x86-64 (instruction fetch there sees stores)."""
    placed = []
    monkeypatch.setattr(memory.arena, "place",
                        lambda code, flush_icache=None: placed.append((code, flush_icache)))
    for isa in ISAS:
        place_code(resolve_target(isa), STORE_ONE[isa])
    assert placed == [(STORE_ONE["aarch64"], icache.flush_icache), (STORE_ONE["x86_64"], None)]
