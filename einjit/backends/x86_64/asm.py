"""x86-64 code buffer: labels with patched rel32 jumps and calls, the counted loop every
generator uses, System V prologue/epilogue.

Several functions may share one Assembler, one after another (prologue ... epilogue each):
that is how a loop nest and the kernels it calls end up in one buffer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from einjit.backends import STACK_PROBE_BYTES
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.encode import R12, R13, R14, R15, RAX, RBP, RBX, RSP, Mem, Reg
from einjit.errors import EncodingError

# System V callee-saved registers in the order the prologue pushes them
CALLEE_SAVED = (RBX, RBP, R12, R13, R14, R15)

_REGISTER_ARGUMENTS = 6  # rdi, rsi, rdx, rcx, r8, r9; later integer arguments are on the stack


class Label:
    """A code position; jumps to it may be emitted before it is bound."""

    __slots__ = ("name", "position")

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.position: int | None = None

    def __repr__(self) -> str:
        where = "unbound" if self.position is None else f"at {self.position}"
        return f"Label({self.name!r}, {where})"


class Assembler:
    """Accumulates instruction bytes; jumps and calls to labels are rel32, patched when the
    label is bound."""

    def __init__(self) -> None:
        self._code = bytearray()
        self._pending: list[tuple[int, Label]] = []  # (rel32 field offset, target) not yet bound
        self._saved: tuple[int, ...] | None = None   # of the open function (prologue emitted)

    def __call__(self, *items: bytes | Iterable[bytes]) -> None:
        """Append instructions: each item is bytes or an iterable of bytes."""
        for item in items:
            if isinstance(item, (bytes, bytearray)):
                self._code += item
            else:
                for part in item:
                    self._code += part

    @property
    def position(self) -> int:
        return len(self._code)

    def label(self, name: str | None = None) -> Label:
        return Label(name)

    def entry(self, name: str | None = None) -> Label:
        """Pad to 16 bytes and bind a new label there: the entry of the function emitted
        next (see prologue)."""
        label = self.label(name)
        self.align(16)
        self.bind(label)
        return label

    def bind(self, label: Label) -> None:
        """Place `label` at the current position and patch the jumps already emitted to it."""
        if label.position is not None:
            raise EncodingError(f"bind: {label!r} is already bound")
        label.position = self.position
        still_pending = []
        for field, target in self._pending:
            if target is label:
                self._patch(field, label)
            else:
                still_pending.append((field, target))
        self._pending = still_pending

    def _patch(self, field: int, label: Label) -> None:
        rel = label.position - (field + 4)
        self._code[field:field + 4] = rel.to_bytes(4, "little", signed=True)

    def _jump(self, instruction: bytes, label: Label) -> None:
        if not isinstance(label, Label):
            raise EncodingError(f"jump target: {label!r} is not a Label")
        self(instruction)
        field = self.position - 4
        if label.position is None:
            self._pending.append((field, label))
        else:
            self._patch(field, label)

    def jcc(self, cond: str, label: Label) -> None:
        self._jump(enc.jcc(cond, 0), label)

    def jmp(self, label: Label) -> None:
        self._jump(enc.jmp(0), label)

    def call(self, label: Label) -> None:
        """Call the function whose entry is `label` (rel32; it may be bound later)."""
        self._jump(enc.call(0), label)

    @contextmanager
    def counted_loop(self, counter: int | Mem, count: int, align: int = 16, *,
                     scratch: int | None = None) -> Iterator[None]:
        """Emit the body of the `with` block to run `count` times.

        count: an int >= 0 known now, or a general register (a `Reg`, e.g. enc.R13) holding
        an unsigned count at run time. Inside the body `counter` (a general register) holds
        the iterations left including the current one, count down to 1; the body must leave
        it unchanged. A count of 0 jumps over the body (a run-time 0 skips it, never wraps
        around); a compile-time count of 1 emits the body once, inline, counter not set. The
        loop head is padded to a multiple of `align` bytes (1: no padding).

        counter may instead be a memory slot (a Mem, e.g. in the red zone) when no register
        is left; then `scratch` is a general register the loop may clobber outside the body
        (at its start and at each step)."""
        if isinstance(counter, Mem):
            if scratch is None:
                raise EncodingError(f"counted_loop: counter {counter!r} is in memory; "
                                    f"pass a scratch general register")
            enc.mov_rr(scratch, scratch)              # validates scratch
        else:
            enc.mov_rr(counter, counter)              # validates counter
        if isinstance(count, Reg):
            yield from self._runtime_loop(counter, count, align, scratch)
            return
        if type(count) is not int or count < 0:
            raise EncodingError(f"counted_loop count: {count!r}; expected an int >= 0 or a "
                                f"general register (Reg)")
        if count == 0:
            skip = self.label("loop_skip")
            self.jmp(skip)
            yield
            self.bind(skip)
            return
        if count == 1:
            yield
            return
        if isinstance(counter, Mem):
            self(enc.mov_ri(scratch, count), enc.mov_mr(counter, scratch))
        else:
            self(enc.mov_ri(counter, count))
        top = self.label("loop")
        self.align(align)
        self.bind(top)
        yield
        self._count_down(counter, scratch)
        self.jcc("ne", top)

    def _runtime_loop(self, counter: int | Mem, count: Reg, align: int,
                      scratch: int | None) -> Iterator[None]:
        if isinstance(counter, Mem):
            self(enc.mov_mr(counter, count), enc.test_rr(count, count))
        else:
            if counter != count:
                self(enc.mov_rr(counter, count))
            self(enc.test_rr(counter, counter))
        skip, top = self.label("loop_skip"), self.label("loop")
        self.jcc("e", skip)
        self.align(align)
        self.bind(top)
        yield
        self._count_down(counter, scratch)
        self.jcc("ne", top)
        self.bind(skip)

    def _count_down(self, counter: int | Mem, scratch: int | None) -> None:
        """counter -= 1, setting ZF when it reaches 0."""
        if isinstance(counter, Mem):
            self(enc.mov_rm(scratch, counter), enc.sub_ri(scratch, 1), enc.mov_mr(counter, scratch))
        else:
            self(enc.dec(counter))

    def align(self, boundary: int) -> None:
        """Pad with NOPs up to a multiple of `boundary` bytes (e.g. loop heads)."""
        if not isinstance(boundary, int) or boundary <= 0 or boundary & (boundary - 1):
            raise EncodingError(f"align boundary: {boundary!r}; expected a power of two")
        self(enc.nop(-self.position % boundary))

    def prologue(self, gprs: Iterable[int]) -> None:
        """Open a function: push the callee-saved registers (rbx, rbp, r12..r15) among `gprs`,
        the registers the code uses."""
        if self._saved is not None:
            raise EncodingError("prologue: already emitted (the open function has no epilogue)")
        used = set(gprs)
        for reg in used:
            if not isinstance(reg, int) or not 0 <= reg <= 15:
                raise EncodingError(f"prologue gprs: {reg!r} is not a general register; "
                                    f"expected 0..15")
        self._saved = tuple(reg for reg in CALLEE_SAVED if reg in used)
        self(enc.push(reg) for reg in self._saved)

    def epilogue(self) -> None:
        """Close the function: pop what prologue pushed, clear the upper vector state
        (vzeroupper) and return. The next function may follow with its own prologue."""
        if self._saved is None:
            raise EncodingError("epilogue: no prologue was emitted")
        self(enc.pop(reg) for reg in reversed(self._saved))
        self(enc.vzeroupper(), enc.ret())
        self._saved = None

    def reserve_stack(self, size: int) -> None:
        """rsp -= size. A frame of a page or more goes down STACK_PROBE_BYTES at a time, each
        step followed by a store at the new top (rax's value: the frame is the caller's to
        fill), so that a thread short of stack faults on its guard page."""
        probed = size >= STACK_PROBE_BYTES
        while size > 0:
            step = min(size, STACK_PROBE_BYTES)
            self(enc.sub_ri(RSP, step))
            if probed:
                self(enc.mov_mr(Mem(RSP), RAX))
            size -= step

    def stack_arg(self, i: int, dst: int) -> None:
        """Load integer argument i (0-based, i >= 6) into dst; valid while rsp is as prologue
        left it."""
        if self._saved is None:
            raise EncodingError("stack_arg: emit the prologue first (the offset depends on it)")
        if not isinstance(i, int) or i < _REGISTER_ARGUMENTS:
            raise EncodingError(f"stack_arg i: {i!r} is passed in a register; expected i >= 6")
        # at entry [rsp] is the return address and argument 6 is at [rsp + 8]
        disp = 8 * len(self._saved) + 8 + 8 * (i - _REGISTER_ARGUMENTS)
        self(enc.mov_rm(dst, Mem(RSP, disp=disp)))

    def finish(self) -> bytes:
        """The code, once every label jumped to is bound."""
        if self._pending:
            unbound = sorted({repr(label) for _, label in self._pending})
            raise EncodingError(f"finish: jumps to unbound labels {', '.join(unbound)}")
        return bytes(self._code)
