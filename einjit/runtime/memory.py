"""Executable memory for generated code: a code arena that packs many blocks into shared
mappings, never writable and executable at once.

A chunk is one anonymous mapping. Its pages pass one way only, RW -> RX, and never back:
another thread may be executing any page that has been executable, so such a page is never
written again. Blocks are appended into the chunk's open tail (RW, not executable); a block
is sealed when its address is first asked for: every page written so far is switched to RX
(and the instruction cache flushed over it by the function a block was placed with, where
the code's instruction set needs that), and the next block starts on the next page. Kernels
generated together (a plan's primitives and its loop nest) therefore share pages, and a
kernel sealed alone costs one page at most.

A chunk is unmapped when every block in it has been released, explicitly (`release()`) or
when the block is garbage collected. Releasing a block while a call into it is running is
the caller's error, as with any unmapped code.

    block = arena.place(code)    # copy into the open tail of a chunk (flush_icache=...)
    block.address                # seals on first access; the code is executable after it
    block.release()              # idempotent; also at garbage collection

`ExecutableMemory(code)` is one block in a mapping of its own, sealed at once (for code that
must run before anything else is placed, such as the cpuid probe).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import EinjitError

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype = ctypes.c_int
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_JIT = 0x800  # macOS: required for JIT pages under the hardened runtime

PAGE_SIZE = mmap.PAGESIZE
BLOCK_ALIGN = 64  # each block starts on a cache line
# 256 KiB, at least 16 pages (some systems use 16 or 64 KiB pages)
CHUNK_SIZE = max(256 * 1024, 16 * PAGE_SIZE)


# a function(start, end) that makes code freshly written there visible to instruction fetch
IcacheFlush = Callable[[int, int], None]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise EinjitError(f"{what} failed: errno {errno}")


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class _Chunk:
    """One mapping: [0, sealed) is RX, [sealed, size) RW; blocks are written at `used`.
    flush_icache: what the blocks were placed with, run over the range each seal makes RX."""
    __slots__ = ("base", "size", "sealed", "used", "live", "flush_icache")

    def __init__(self, size: int):
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        if sys.platform == "darwin":
            flags |= _MAP_JIT
        base = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0)
        if base in (None, _MAP_FAILED):
            raise EinjitError(f"mmap of {size} bytes failed: errno {ctypes.get_errno()}")
        self.base = base
        self.size = size
        self.sealed = 0
        self.used = 0
        self.live = 0   # blocks placed and not yet released
        self.flush_icache: IcacheFlush | None = None


@dataclass(frozen=True)
class ArenaStats:
    """What an arena holds: mapped chunks and their bytes, live blocks, executable bytes."""
    chunks: int
    mapped_bytes: int
    live_blocks: int
    executable_bytes: int


class CodeBlock:
    """Code placed in an arena. `address` seals it (makes it executable) on first access."""
    __slots__ = ("_arena", "_chunk", "_offset", "size", "_address", "_finalizer", "__weakref__")

    def __init__(self, arena: CodeArena, chunk: _Chunk, offset: int, size: int):
        self._arena = arena
        self._chunk = chunk
        self._offset = offset
        self.size = size
        self._address = None
        self._finalizer = weakref.finalize(self, arena._release, chunk)
        # at exit, threads may still run the code: the process unmaps it when it ends
        self._finalizer.atexit = False

    @property
    def address(self) -> int:
        """Entry address; the first access seals the block, so the code is executable (RX,
        never again writable) when this returns."""
        address = self._address
        if address is None:
            if not self._finalizer.alive:
                raise EinjitError("this code block was released; its address is gone")
            address = self._arena._seal(self._chunk, self._offset + self.size) + self._offset
            self._address = address
        return address

    @property
    def sealed(self) -> bool:
        return self._address is not None

    @property
    def released(self) -> bool:
        return self._address is None and not self._finalizer.alive

    def release(self) -> None:
        """Give the block back (idempotent; a pinned block stays); its chunk is unmapped once
        all its blocks are. No call into the code may be running or made afterwards."""
        if self._finalizer.alive:       # not pinned
            self._address = None
            self._finalizer()

    def pin(self) -> None:
        """Seal the block and keep it mapped until the process ends, even once no object
        refers to it: for code that threads run (or sleep in) for as long as the process
        lives. A pinned block is never released."""
        self._address = self.address          # sealed: the address stays valid
        self._finalizer.detach()

    def __repr__(self) -> str:
        state = "released" if self.released else "sealed" if self.sealed else "open"
        return f"<CodeBlock {self.size} bytes, {state}>"


class CodeArena:
    """Packs code blocks into shared chunks (see the module docstring).

    Thread-safe. Releases that come from garbage collection may fire inside the arena's own
    critical section (any allocation can trigger the collector), so a release never waits
    for the lock: it queues the chunk, and whichever thread holds or next takes the lock
    processes the queue.
    """

    def __init__(self, chunk_size: int = CHUNK_SIZE):
        if not isinstance(chunk_size, int) or chunk_size < PAGE_SIZE:
            raise EinjitError(f"chunk_size={chunk_size!r} is out of range; expected an "
                              f"integer >= the page size {PAGE_SIZE}")
        self.chunk_size = _round_up(chunk_size, PAGE_SIZE)
        self._lock = threading.Lock()
        self._open: _Chunk | None = None    # where the next block goes
        self._chunks: set[_Chunk] = set()   # every mapped chunk
        self._released: list[_Chunk] = []   # one entry per released block, not yet processed

    def place(self, code: bytes, flush_icache: IcacheFlush | None = None) -> CodeBlock:
        """Copy `code` into the arena; it becomes executable when its address is first read.
        flush_icache: the function making written code visible to instruction fetch, where
        the code's instruction set needs one (its backend's; einjit.backends.place_code)."""
        code = bytes(code)
        size = len(code)
        if size == 0:
            raise EinjitError("cannot place empty code")
        with self._lock:
            chunk = self._open
            offset = 0 if chunk is None else _round_up(chunk.used, BLOCK_ALIGN)
            if chunk is None or offset + size > chunk.size:
                offset = 0
                chunk = _Chunk(max(self.chunk_size, _round_up(size, PAGE_SIZE)))
                self._chunks.add(chunk)
                if size <= self.chunk_size // 2:
                    self._open = chunk  # else: a mapping of its own, the open chunk stays
            ctypes.memmove(chunk.base + offset, code, size)
            chunk.used = offset + size
            chunk.flush_icache = chunk.flush_icache or flush_icache
            chunk.live += 1
            block = CodeBlock(self, chunk, offset, size)
            self._process_released()
        self._process_released_unlocked()
        return block

    def stats(self) -> ArenaStats:
        with self._lock:
            self._process_released()
            chunks = list(self._chunks)
        self._process_released_unlocked()
        return ArenaStats(chunks=len(chunks), mapped_bytes=sum(c.size for c in chunks),
                          live_blocks=sum(c.live for c in chunks),
                          executable_bytes=sum(c.sealed for c in chunks))

    def _seal(self, chunk: _Chunk, end: int) -> int:
        """Make [0, end) of `chunk` executable, with every page written so far; the chunk's
        base address."""
        with self._lock:
            if end > chunk.sealed:
                sealed = min(_round_up(chunk.used, PAGE_SIZE), chunk.size)
                _check(_libc.mprotect(chunk.base + chunk.sealed, sealed - chunk.sealed,
                                      mmap.PROT_READ | mmap.PROT_EXEC), "mprotect RX")
                if chunk.flush_icache is not None:
                    chunk.flush_icache(chunk.base + chunk.sealed, chunk.base + chunk.used)
                chunk.sealed = chunk.used = sealed  # later blocks start on the next page
            self._process_released()
        self._process_released_unlocked()
        return chunk.base

    def _release(self, chunk: _Chunk) -> None:
        """One block of `chunk` is gone (explicit release or garbage collection)."""
        self._released.append(chunk)  # list.append is atomic: safe without the lock
        self._process_released_unlocked()

    def _process_released_unlocked(self) -> None:
        # a release queued while another thread held the lock is processed by whoever
        # takes it next; this loop closes the window after a holder's last look
        while self._released and self._lock.acquire(blocking=False):
            try:
                self._process_released()
            finally:
                self._lock.release()

    def _process_released(self) -> None:
        """With the lock held: count the queued releases, unmap chunks left empty."""
        while self._released:
            chunk = self._released.pop()
            chunk.live -= 1
            if chunk.live == 0:
                if chunk is self._open:
                    self._open = None
                self._chunks.discard(chunk)
                _check(_libc.munmap(chunk.base, chunk.size), "munmap")


arena = CodeArena()


class ExecutableMemory:
    """A read+execute copy of `code` in a mapping of its own; `address` is where it starts.
    The mapping is unmapped by release() or at garbage collection. flush_icache: as for
    CodeArena.place."""

    def __init__(self, code: bytes, flush_icache: IcacheFlush | None = None):
        if not code:
            raise EinjitError("cannot map empty code")
        self.size = _round_up(len(code), PAGE_SIZE)
        # a private one-page-granular arena: its single block gets a mapping of its own
        self._block = CodeArena(chunk_size=PAGE_SIZE).place(code, flush_icache)
        self.address = self._block.address

    def release(self) -> None:
        """Unmap now instead of at garbage collection (calls through it must have ended)."""
        self._block.release()
