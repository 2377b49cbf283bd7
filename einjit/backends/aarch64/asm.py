"""A64 assembler: a word buffer with labels, branch fix-ups and the AAPCS64 frame.

Instructions come from encode.py as ints; the Assembler only adds what needs the position of
an instruction: pc-relative references to labels (patched when a forward label is bound), a
prologue/epilogue that saves exactly the callee-saved registers a function uses, and the one
counted-loop helper every generator uses. One Assembler may hold several functions one after
the other (a loop nest and the kernels it calls): each starts with its own prologue().
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from einjit.backends import STACK_PROBE_BYTES
from einjit.backends.aarch64 import encode
from einjit.backends.aarch64.encode import SP, XZR, Reg
from einjit.errors import EncodingError

_CALLEE_SAVED_GPRS = tuple(range(19, 31))      # x19..x28, plus x29 (fp) and x30 (lr)
_CALLEE_SAVED_VREGS = tuple(range(8, 16))      # low 64 bits (d8..d15)
_PLATFORM_REGISTER = 18


class Label:
    """A position in an Assembler's code, bound once; created by Assembler.label()."""

    def __init__(self, owner: Assembler, name: str):
        self._owner = owner
        self.name = name
        self.position: int | None = None      # byte offset once bound

    def __repr__(self) -> str:
        where = "unbound" if self.position is None else f"at {self.position}"
        return f"Label({self.name!r}, {where})"


class Assembler:
    """Collects instruction words; labels, branches to labels, prologue/epilogue."""

    def __init__(self) -> None:
        self._words: list[int] = []
        # (word index, label, encoder of the byte offset) of references to unbound labels
        self._pending: list[tuple[int, Label, Callable[[int], int]]] = []
        self._label_count = 0
        # (frame bytes, [(kind, registers, offset)]) of the current function's prologue
        self._saved: tuple[int, list[tuple[str, tuple[int, ...], int]]] | None = None
        self._returned = False        # the current function has emitted an epilogue

    # ---- words

    def __call__(self, *items: int | Iterable[int]) -> None:
        """Emit words: each item is an int or an iterable of ints (e.g. mov_imm's list)."""
        words = []
        for item in items:
            if isinstance(item, int):
                words.append(item)
            else:
                try:
                    words.extend(item)
                except TypeError:
                    raise EncodingError(f"expected an instruction word or an iterable of "
                                        f"words, got {item!r}") from None
        for word in words:
            if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word < (1 << 32):
                raise EncodingError(f"instruction word must be an int 0..2**32-1, got {word!r}")
        self._words.extend(words)

    @property
    def position(self) -> int:
        """Byte offset of the next instruction."""
        return 4 * len(self._words)

    def align(self, boundary: int) -> None:
        """Pad with nops up to a multiple of `boundary` bytes (a power of two >= 4)."""
        if boundary < 4 or boundary & (boundary - 1):
            raise EncodingError(f"boundary = {boundary} must be a power of two >= 4")
        while self.position % boundary:
            self(encode.nop())

    # ---- labels

    def label(self, name: str | None = None) -> Label:
        """A new unbound label."""
        self._label_count += 1
        return Label(self, name or f"L{self._label_count}")

    def bind(self, label: Label) -> None:
        """Bind `label` to the current position and patch the references waiting for it."""
        self._check_label(label)
        if label.position is not None:
            raise EncodingError(f"label {label.name!r} is already bound at {label.position}")
        label.position = self.position
        waiting = [ref for ref in self._pending if ref[1] is label]
        self._pending = [ref for ref in self._pending if ref[1] is not label]
        for index, _, encoder in waiting:
            self._words[index] = self._encode_reference(label, 4 * index, encoder)

    def _check_label(self, label: Label) -> None:
        if not isinstance(label, Label) or label._owner is not self:
            raise EncodingError(f"{label!r} is not a label of this assembler")

    @staticmethod
    def _encode_reference(label: Label, at: int, encoder: Callable[[int], int]) -> int:
        try:
            return encoder(label.position - at)
        except EncodingError as error:
            raise EncodingError(f"reference at {at} to label {label.name!r} at "
                                f"{label.position}: {error}") from None

    def _reference(self, label: Label, encoder: Callable[[int], int]) -> None:
        """Emit an instruction whose pc-relative operand is `label`."""
        self._check_label(label)
        if label.position is None:
            encoder(0)      # operands other than the offset are checked now, not at bind
            self._pending.append((len(self._words), label, encoder))
            self._words.append(0)
        else:
            self._words.append(self._encode_reference(label, self.position, encoder))

    def b(self, label: Label) -> None:
        self._reference(label, encode.b)

    def bl(self, label: Label) -> None:
        self._reference(label, encode.bl)

    def b_cond(self, cond: str, label: Label) -> None:
        self._reference(label, lambda offset: encode.b_cond(cond, offset))

    def cbz(self, rt: int, label: Label) -> None:
        self._reference(label, lambda offset: encode.cbz(rt, offset))

    def cbnz(self, rt: int, label: Label) -> None:
        self._reference(label, lambda offset: encode.cbnz(rt, offset))

    def tbz(self, rt: int, bit: int, label: Label) -> None:
        self._reference(label, lambda offset: encode.tbz(rt, bit, offset))

    def tbnz(self, rt: int, bit: int, label: Label) -> None:
        self._reference(label, lambda offset: encode.tbnz(rt, bit, offset))

    def adr(self, rd: int, label: Label) -> None:
        self._reference(label, lambda offset: encode.adr(rd, offset))

    def ldr_v_literal(self, size: str, vt: int, label: Label) -> None:
        self._reference(label, lambda offset: encode.ldr_v_literal(size, vt, offset))

    def ldr_x_literal(self, rt: int, label: Label) -> None:
        self._reference(label, lambda offset: encode.ldr_x_literal(rt, offset))

    # ---- AAPCS64 frame

    def prologue(self, gprs: Iterable[int], vregs: Iterable[int]) -> None:
        """Save the callee-saved registers among those used and keep sp 16-byte aligned.

        gprs: general registers the code writes (x19..x30 are saved; x0..x17 and 31 are free);
        vregs: vector registers the code writes (the low halves d8..d15 are saved).
        x18 is the platform register: code that uses it is refused.
        A prologue starts a function: the previous one, if any, must have emitted its
        epilogue().
        """
        if self._saved is not None and not self._returned:
            raise EncodingError("prologue() was already emitted for this function "
                                "(emit its epilogue() before the next function's prologue())")
        gprs = sorted({_register("gprs", reg) for reg in gprs})
        vregs = sorted({_register("vregs", reg) for reg in vregs})
        if _PLATFORM_REGISTER in gprs:
            raise EncodingError("gprs contains x18, the platform register; it must not be used")
        saved_gprs = [reg for reg in gprs if reg in _CALLEE_SAVED_GPRS]
        saved_dregs = [reg for reg in vregs if reg in _CALLEE_SAVED_VREGS]
        slots = ([("x", pair) for pair in _pairs(saved_gprs)]
                 + [("d", pair) for pair in _pairs(saved_dregs)])
        offsets, offset = [], 0
        for _, pair in slots:
            offsets.append(offset)
            offset += 8 * len(pair)
        frame = (offset + 15) // 16 * 16
        self._saved = (frame, [(kind, pair, at) for (kind, pair), at in zip(slots, offsets)])
        self._returned = False
        for index, (kind, pair, at) in enumerate(self._saved[1]):
            if index == 0:      # the first store allocates the whole frame
                self(_store(kind, pair, -frame, "pre"))
            else:
                self(_store(kind, pair, at, "offset"))

    def epilogue(self) -> None:
        """Restore what prologue() saved, release the frame, ret."""
        if self._saved is None:
            raise EncodingError("epilogue() needs a prologue() first")
        frame, stores = self._saved
        for index, (kind, pair, at) in reversed(list(enumerate(stores))):
            if index == 0:      # the last load releases the frame
                self(_load(kind, pair, frame, "post"))
            else:
                self(_load(kind, pair, at, "offset"))
        self(encode.ret())
        self._returned = True

    def reserve_stack(self, size: int) -> None:
        """sp -= size (a multiple of 16). A frame of a page or more goes down
        STACK_PROBE_BYTES at a time, each step followed by a store of xzr at the new top, so
        that a thread short of stack faults on its guard page."""
        probed = size >= STACK_PROBE_BYTES
        while size > 0:
            step = min(size, STACK_PROBE_BYTES)
            self(_sp_moves(encode.sub_imm, step))
            if probed:
                self(encode.str_x(XZR, SP))
            size -= step

    def release_stack(self, size: int) -> None:
        """sp += size: what reserve_stack(size) took."""
        self(_sp_moves(encode.add_imm, size))

    # ---- loops

    @contextmanager
    def counted_loop(self, counter: int, count: int | Reg, align: int = 16) -> Iterator[None]:
        """Run the body of the `with` block `count` times, counting `counter` down.

            with asm.counted_loop(counter, count, align=16):
                ... body ...

        counter: the general register (x0..x30, not x18) that holds, inside the body, the
        iterations left including the current one (count .. 1); the body must preserve it.
        count: an int >= 0 known now, or a general register marked as `encode.Reg(n)` whose
        unsigned 64-bit value at run time is the count (it may be `Reg(counter)` itself).
        align: the loop head is padded with nops to a multiple of this many bytes (a power of
        two; 1, 2 and 4 mean no padding, every A64 instruction being 4-byte aligned).

        The loop is `subs counter, counter, #1; b.ne head` at the bottom. A count of 0 never
        wraps around: an int 0 emits a branch over the body, a register holding 0 skips it
        (cbz). An int 1 emits the body once, inline, and leaves `counter` unwritten.
        """
        counter = _loop_register("counter", counter)
        if isinstance(align, bool) or not isinstance(align, int) or align < 1 or \
                align & (align - 1):
            raise EncodingError(f"align = {align!r}: expected a power of two (bytes)")
        if isinstance(count, Reg):
            count_register = _loop_register("count", count)
            skip = self.label("loop_skip")
            self.cbz(count_register, skip)
            if count_register != counter:
                self(encode.mov_reg(counter, count_register))
        elif isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            if count == 1:
                yield
                return
            skip = self.label("loop_skip")
            if count == 0:
                self.b(skip)
            else:
                self(encode.mov_imm(counter, count))
        else:
            raise EncodingError(f"count = {count!r}: expected an int >= 0 or a register "
                                f"marked as encode.Reg(n)")
        self.align(max(align, 4))
        head = self.label("loop")
        self.bind(head)
        yield
        self(encode.subs_imm(counter, counter, 1))
        self.b_cond("ne", head)
        self.bind(skip)

    # ---- result

    def finish(self) -> bytes:
        """The code as little-endian bytes; every referenced label must be bound."""
        if self._pending:
            names = sorted({label.name for _, label, _ in self._pending})
            raise EncodingError(f"unbound label(s) referenced: {', '.join(names)}")
        return struct.pack(f"<{len(self._words)}I", *self._words)


def _sp_moves(step: Callable[..., int], size: int) -> list[int]:
    """sp = sp -/+ size (below 16 MiB): 4 KiB units, then the rest."""
    return ([step(SP, SP, size >> 12, 12)] if size >> 12 else []) + (
        [step(SP, SP, size & 0xFFF)] if size & 0xFFF else [])


def _register(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 31:
        raise EncodingError(f"{name} must hold register numbers 0..31, got {value!r}")
    return value


def _loop_register(name: str, value: int) -> int:
    """A general register a loop may count in: x0..x30 except x18 (sp/xzr cannot count)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 30:
        raise EncodingError(f"{name} = {value!r}: expected a general register 0..30")
    if value == _PLATFORM_REGISTER:
        raise EncodingError(f"{name} = x18, the platform register; it must not be used")
    return int(value)


def _pairs(registers: list[int]) -> list[tuple[int, ...]]:
    return [tuple(registers[i:i + 2]) for i in range(0, len(registers), 2)]


def _store(kind: str, pair: tuple[int, ...], offset: int, mode: str) -> int:
    if len(pair) == 2:
        if kind == "x":
            return encode.stp_x(pair[0], pair[1], encode.SP, offset, mode)
        return encode.stp_v("d", pair[0], pair[1], encode.SP, offset, mode)
    if mode == "pre":
        if kind == "x":
            return encode.str_x_pre(pair[0], encode.SP, offset)
        return encode.str_v_pre("d", pair[0], encode.SP, offset)
    if kind == "x":
        return encode.str_x(pair[0], encode.SP, offset)
    return encode.str_v("d", pair[0], encode.SP, offset)


def _load(kind: str, pair: tuple[int, ...], offset: int, mode: str) -> int:
    if len(pair) == 2:
        if kind == "x":
            return encode.ldp_x(pair[0], pair[1], encode.SP, offset, mode)
        return encode.ldp_v("d", pair[0], pair[1], encode.SP, offset, mode)
    if mode == "post":
        if kind == "x":
            return encode.ldr_x_post(pair[0], encode.SP, offset)
        return encode.ldr_v_post("d", pair[0], encode.SP, offset)
    if kind == "x":
        return encode.ldr_x(pair[0], encode.SP, offset)
    return encode.ldr_v("d", pair[0], encode.SP, offset)
