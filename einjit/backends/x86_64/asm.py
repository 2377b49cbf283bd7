"""x86-64 code buffer: labels with patched rel32 jumps, System V prologue/epilogue."""

from __future__ import annotations

from einjit.backends.x86_64 import encode
from einjit.backends.x86_64.encode import RBP, RBX, RSP, R12, R13, R14, R15, Mem
from einjit.errors import EncodingError

# System V callee-saved registers in the order the prologue pushes them
CALLEE_SAVED = (RBX, RBP, R12, R13, R14, R15)

_REGISTER_ARGUMENTS = 6  # rdi, rsi, rdx, rcx, r8, r9; later integer arguments are on the stack


class Label:
    """A code position; jumps to it may be emitted before it is bound."""

    __slots__ = ("name", "position")

    def __init__(self, name: str | None = None):
        self.name = name
        self.position: int | None = None

    def __repr__(self) -> str:
        where = "unbound" if self.position is None else f"at {self.position}"
        return f"Label({self.name!r}, {where})"


class Assembler:
    """Accumulates instruction bytes; jumps to labels are rel32 and patched when the label is bound."""

    def __init__(self):
        self._code = bytearray()
        self._pending: list[tuple[int, Label]] = []  # (offset of a rel32 field, target) not yet bound
        self._saved: tuple[int, ...] | None = None

    def __call__(self, *items) -> None:
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
        self._jump(encode.jcc(cond, 0), label)

    def jmp(self, label: Label) -> None:
        self._jump(encode.jmp(0), label)

    def align(self, boundary: int) -> None:
        """Pad with NOPs up to a multiple of `boundary` bytes (e.g. loop heads)."""
        if not isinstance(boundary, int) or boundary <= 0 or boundary & (boundary - 1):
            raise EncodingError(f"align boundary: {boundary!r}; expected a power of two")
        self(encode.nop(-self.position % boundary))

    def prologue(self, gprs) -> None:
        """Push the callee-saved registers (rbx, rbp, r12..r15) among `gprs`, the registers the code uses."""
        if self._saved is not None:
            raise EncodingError("prologue: already emitted")
        used = set(gprs)
        for reg in used:
            if not isinstance(reg, int) or not 0 <= reg <= 15:
                raise EncodingError(f"prologue gprs: {reg!r} is not a general register; expected 0..15")
        self._saved = tuple(reg for reg in CALLEE_SAVED if reg in used)
        self(encode.push(reg) for reg in self._saved)

    def epilogue(self) -> None:
        """Pop what prologue pushed, clear the upper vector state (vzeroupper) and return."""
        if self._saved is None:
            raise EncodingError("epilogue: no prologue was emitted")
        self(encode.pop(reg) for reg in reversed(self._saved))
        self(encode.vzeroupper(), encode.ret())

    def stack_arg(self, i: int, dst: int) -> None:
        """Load integer argument i (0-based, i >= 6) into dst; valid while rsp is as prologue left it."""
        if self._saved is None:
            raise EncodingError("stack_arg: emit the prologue first (the offset depends on it)")
        if not isinstance(i, int) or i < _REGISTER_ARGUMENTS:
            raise EncodingError(f"stack_arg i: {i!r} is passed in a register; expected i >= 6")
        # at entry [rsp] is the return address and argument 6 is at [rsp + 8]
        disp = 8 * len(self._saved) + 8 + 8 * (i - _REGISTER_ARGUMENTS)
        self(encode.mov_rm(dst, Mem(RSP, disp=disp)))

    def finish(self) -> bytes:
        """The code, once every label jumped to is bound."""
        if self._pending:
            unbound = sorted({repr(label) for _, label in self._pending})
            raise EncodingError(f"finish: jumps to unbound labels {', '.join(unbound)}")
        return bytes(self._code)
