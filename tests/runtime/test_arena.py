"""The code arena: blocks share mappings, pages go RW -> RX once and never back, chunks are
unmapped when their blocks are released, sealed code runs while other threads place more.

Each block is a function returning its own number, so a call proves the bytes at that
address are that block's and are executable."""

import ctypes
import gc
import mmap
import threading

import pytest

from einjit.errors import EinjitError
from einjit.runtime import memory
from einjit.runtime.memory import BLOCK_ALIGN, PAGE_SIZE, CodeArena, ExecutableMemory

from procmaps import (
    HOST_FLUSH,
    call_int,
    mappings_of,
    permissions,
    return_constant,
    writable_and_executable,
)

# small chunks so that tests cross chunk boundaries often
SMALL_CHUNK = 4 * PAGE_SIZE


class MprotectSpy:
    """Stands in for the arena's libc: forwards mmap/mprotect/munmap and records them."""

    def __init__(self, libc):
        self._libc = libc
        self.calls = []

    def mmap(self, address, size, prot, flags, fd, offset):
        result = self._libc.mmap(address, size, prot, flags, fd, offset)
        self.calls.append(("mmap", result, size, prot))
        return result

    def mprotect(self, address, size, prot):
        self.calls.append(("mprotect", address, size, prot))
        return self._libc.mprotect(address, size, prot)

    def munmap(self, address, size):
        self.calls.append(("munmap", address, size, None))
        return self._libc.munmap(address, size)


@pytest.fixture
def spy(monkeypatch):
    recorder = MprotectSpy(memory._libc)
    monkeypatch.setattr(memory, "_libc", recorder)
    return recorder


def test_blocks_share_one_mapping_and_seal_together(spy):
    arena = CodeArena(SMALL_CHUNK)
    blocks = [arena.place(return_constant(i), HOST_FLUSH) for i in range(20)]
    starts = [b._chunk.base + b._offset for b in blocks]
    # appended one cache line apart in one mapping, still writable and not executable
    assert [s - starts[0] for s in starts] == [i * BLOCK_ALIGN for i in range(20)]
    assert len(mappings_of(starts)) == 1 and None not in mappings_of(starts)
    assert permissions(starts[0]) == "rw-p"
    assert not any(call[0] == "mprotect" for call in spy.calls)

    assert blocks[7].address == starts[7]       # seals every page written so far
    assert [c[0] for c in spy.calls] == ["mmap", "mprotect"]
    assert spy.calls[1][1:] == (starts[0], PAGE_SIZE, mmap.PROT_READ | mmap.PROT_EXEC)
    assert permissions(starts[0]) == "r-xp"
    # the other blocks were sealed with it: their addresses need no further mprotect
    assert [call_int(b.address) for b in blocks] == list(range(20))
    assert [c[0] for c in spy.calls] == ["mmap", "mprotect"]

    # the next block starts on the next page, in the same chunk, still RW
    late = arena.place(return_constant(99), HOST_FLUSH)
    late_start = late._chunk.base + late._offset
    assert late._chunk is blocks[0]._chunk and late_start == starts[0] + PAGE_SIZE
    assert permissions(late_start) == "rw-p"
    assert call_int(late.address) == 99 and permissions(late_start) == "r-xp"
    assert arena.stats().chunks == 1
    for block in blocks + [late]:
        block.release()
    assert arena.stats().chunks == 0 and permissions(starts[0]) is None


@pytest.mark.slow
def test_no_page_is_ever_writable_and_executable(spy):
    """Across placing, sealing, filling chunks and oversized blocks: every mapping starts
    RW, every mprotect makes RX pages that were never RX before, nothing is ever RWX."""
    arena = CodeArena(SMALL_CHUNK)
    assert writable_and_executable() == []
    blocks = []
    for i in range(300):
        code = return_constant(i)
        if i % 37 == 0:
            code += b"\x00" * (SMALL_CHUNK + 100)   # a block too big for a shared chunk
        blocks.append(arena.place(code, HOST_FLUSH))
        assert writable_and_executable() == []
        if i % 3 == 0:
            assert call_int(blocks[-1].address) == i
            assert permissions(blocks[-1].address) == "r-xp"
            assert writable_and_executable() == []
    assert [call_int(b.address) for b in blocks] == list(range(300))
    executable = []
    rx = mmap.PROT_READ | mmap.PROT_EXEC
    for kind, address, size, prot in spy.calls:
        if kind == "mmap":
            assert prot == mmap.PROT_READ | mmap.PROT_WRITE
        elif kind == "mprotect":
            assert prot == rx
            assert address % PAGE_SIZE == 0 and size % PAGE_SIZE == 0 and size > 0
            assert all(address + size <= start or end <= address for start, end in executable)
            executable.append((address, address + size))
    assert sum(kind == "mprotect" for kind, *_ in spy.calls) >= 100
    for block in blocks:
        block.release()
    assert arena.stats() == memory.ArenaStats(0, 0, 0, 0)


def test_full_chunk_opens_a_new_one_and_big_blocks_get_their_own():
    arena = CodeArena(SMALL_CHUNK)
    per_chunk = SMALL_CHUNK // BLOCK_ALIGN
    blocks = [arena.place(return_constant(i), HOST_FLUSH) for i in range(per_chunk + 1)]
    assert blocks[per_chunk - 1]._chunk is blocks[0]._chunk
    assert blocks[per_chunk]._chunk is not blocks[0]._chunk and blocks[per_chunk]._offset == 0
    big = arena.place(return_constant(7) + bytes(SMALL_CHUNK), HOST_FLUSH)
    assert big._chunk.size == SMALL_CHUNK + PAGE_SIZE
    after = arena.place(return_constant(8), HOST_FLUSH)   # the open chunk is still the second one
    assert after._chunk is blocks[per_chunk]._chunk
    assert call_int(big.address) == 7 and call_int(after.address) == 8
    assert arena.stats().chunks == 3
    big.release()
    assert arena.stats().chunks == 2


def test_release_unmaps_a_chunk_when_its_last_block_goes():
    arena = CodeArena(SMALL_CHUNK)
    a, b, c = (arena.place(return_constant(i), HOST_FLUSH) for i in range(3))
    address = b.address
    a.release()
    a.release()   # idempotent
    assert a.released and not c.released
    b.release()
    assert permissions(address) == "r-xp"  # c still lives in the chunk
    assert arena.stats().live_blocks == 1
    c.release()
    assert permissions(address) is None
    assert arena.stats() == memory.ArenaStats(0, 0, 0, 0)
    with pytest.raises(EinjitError, match="released"):
        c.address
    # a new block after that opens a fresh chunk
    d = arena.place(return_constant(4), HOST_FLUSH)
    assert call_int(d.address) == 4


def test_garbage_collection_releases_blocks():
    arena = CodeArena(SMALL_CHUNK)
    blocks = [arena.place(return_constant(i), HOST_FLUSH) for i in range(5)]
    address = blocks[0].address
    del blocks
    assert permissions(address) is None and arena.stats().chunks == 0
    # blocks held in reference cycles go at the next collection
    cycles = []
    for i in range(5):
        holder = [arena.place(return_constant(i), HOST_FLUSH)]
        holder.append(holder)
        cycles.append(holder[0].address)
    del holder
    gc.collect()
    assert arena.stats().chunks == 0
    assert all(permissions(address) is None for address in cycles)


def test_a_pinned_block_stays_mapped_when_dropped_or_released():
    """Code threads run until the process ends (the native workers' loop) is pinned: neither
    garbage collection nor release() gives it back."""
    arena = CodeArena(SMALL_CHUNK)
    pinned, other = (arena.place(return_constant(i), HOST_FLUSH) for i in (7, 8))
    pinned.pin()
    address = pinned.address
    assert permissions(address) == "r-xp" and not pinned.released
    pinned.release()
    assert not pinned.released and pinned.address == address
    del pinned
    gc.collect()
    other.release()
    assert permissions(address) == "r-xp" and call_int(address) == 7
    assert arena.stats().live_blocks == 1


def test_collections_during_placement_do_not_deadlock_or_corrupt():
    """A finalizer can fire inside the arena's critical section (any allocation may run the
    collector): the release is queued, not waited for, and the counts stay right."""
    arena = CodeArena(SMALL_CHUNK)
    inside = []     # for each release: was the arena's lock held (by this, the only thread)?
    release = arena._release

    def recording_release(chunk):
        inside.append(arena._lock.locked())
        release(chunk)

    arena._release = recording_release   # the finalizers of blocks placed from now on
    kept = []
    codes = [return_constant(i) for i in range(1000)]
    threshold = gc.get_threshold()
    gc.set_threshold(1, 1000, 1000)   # a young collection at almost every allocation
    try:
        for i in range(2000):
            # no container is allocated between the last cycle becoming garbage and the
            # arena's next critical section: the collection comes inside it
            holder = [arena.place(codes[i % 1000], HOST_FLUSH)]
            holder.append(holder)      # freed only by the collector
            if i % 5 == 0:
                kept.append(holder[0])
            if i % 7 == 0:
                assert call_int(holder[0].address) == i % 1000
        del holder
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert any(inside) and not all(inside)
    stats = arena.stats()
    assert stats.live_blocks == len(kept) == 400
    assert [call_int(b.address) for b in kept] == [i % 1000 for i in range(0, 2000, 5)]
    del kept
    gc.collect()
    assert arena.stats().chunks == 0


def test_sealed_code_runs_in_threads_while_new_blocks_are_placed_and_sealed(spy):
    """Four threads keep calling the newest sealed blocks while the main thread places,
    seals and releases more: in turns of 100 blocks, one turn keeps and publishes the odd
    ones, the next releases all (every 4th sealed first), so whole chunks are unmapped
    next to chunks being executed."""
    arena = CodeArena(SMALL_CHUNK)
    ready = []                      # (function, expected) of sealed blocks, appended by main
    stop = threading.Event()
    failures = []
    calls = [0] * 4

    def caller(slot):
        while not stop.is_set():
            for function, expected in ready[-64:]:   # the newest: just sealed pages
                got = function()
                if got != expected:
                    failures.append((expected, got))
                calls[slot] += 1

    prototype = ctypes.CFUNCTYPE(ctypes.c_int)
    keep = [arena.place(return_constant(0), HOST_FLUSH)]
    ready.append((prototype(keep[0].address), 0))
    threads = [threading.Thread(target=caller, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    try:
        for i in range(1, 3000):
            block = arena.place(return_constant(i), HOST_FLUSH)
            if (i // 100) % 2 == 0 and i % 2:
                keep.append(block)
                ready.append((prototype(block.address), i))   # sealed while others call
            elif i % 4 == 0:
                block.address
            del block                  # released unless kept
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert failures == []
    assert min(calls) > 0
    assert len(keep) == 751 and [f() for f, _ in ready] == [e for _, e in ready]
    assert arena.stats().live_blocks == 751
    assert sum(kind == "munmap" for kind, *_ in spy.calls) >= 10
    ready.clear()
    keep.clear()
    assert arena.stats().chunks == 0


def test_concurrent_placing_from_many_threads():
    arena = CodeArena(SMALL_CHUNK)
    results = {}

    def work(slot):
        blocks = [arena.place(return_constant(slot * 1000 + i), HOST_FLUSH) for i in range(200)]
        results[slot] = [call_int(b.address) for b in blocks]
        for b in blocks[::2]:
            b.release()
        results[slot] += [call_int(b.address) for b in blocks[1::2]]

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for slot in range(6):
        expected = [slot * 1000 + i for i in range(200)]
        assert results[slot] == expected + expected[1::2]
    assert arena.stats().chunks == 0   # the blocks went with the threads' frames


def test_bad_arguments():
    with pytest.raises(EinjitError, match="empty"):
        CodeArena().place(b"")
    with pytest.raises(EinjitError, match="chunk_size=100"):
        CodeArena(100)


def test_executable_memory_keeps_a_mapping_of_its_own():
    code = return_constant(5)
    shared = memory.arena.place(code, HOST_FLUSH)           # the shared arena's open chunk
    own = ExecutableMemory(code, HOST_FLUSH)
    assert own.size == PAGE_SIZE
    assert own._block._chunk is not shared._chunk and own._block._chunk.size == PAGE_SIZE
    assert call_int(own.address) == 5 and permissions(own.address) == "r-xp"
    address = own.address
    own.release()
    assert permissions(address) is None
    shared.release()


def test_kernels_generated_together_share_their_executable_pages():
    import numpy as np

    import einjit
    from einjit import primitives

    primitives._cache.clear()   # the kernels below are generated now, placed one after another
    mark = memory.arena.place(return_constant(0), HOST_FLUSH)
    mark.address     # seals the shared arena's tail: the next block starts a fresh page
    mark.release()
    m = 2047
    kernels = [einjit.unary("identity", m, n) for n in range(1, 5)]
    blocks = [k._memory for k in kernels]
    assert len({b._chunk for b in blocks}) == 1 and not any(b.sealed for b in blocks)
    assert sum(len(k.code) for k in kernels) + 4 * BLOCK_ALIGN <= PAGE_SIZE
    a = np.arange(m * 4, dtype=np.float32)
    for n, kern in enumerate(kernels, start=1):
        b = np.full(m * 4 + 1, -1.0, np.float32)
        kern(a, b, m, m)                   # the first call seals all four at once
        expected = a[:m * n]
        assert np.array_equal(b[:m * n], expected) and b[m * n] == -1.0
        if n == 1:   # the last kernel's page is executable before it is asked for
            last = blocks[-1]
            assert not last.sealed
            assert permissions(last._chunk.base + last._offset) == "r-xp"
    pages = {k.address // PAGE_SIZE for k in kernels}
    assert len(pages) == 1 and permissions(kernels[-1].address) == "r-xp"
