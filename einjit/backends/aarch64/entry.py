"""The entry guard: what Python calls runs behind a stub that keeps the caller's FPSR.

Generated code raises floating-point exceptions (a reciprocal of zero, an overflowing
exp) and AArch64 records each one as a sticky flag in FPSR, which the code's caller would
otherwise find set afterwards: numpy reads those flags after its own loops and would report
a division by zero it never did. guard_entry puts a fixed stub at offset 0 that saves FPSR,
calls the unchanged code with bl and writes FPSR back, so every flag reads as before the call
(the saved word is restored whole: generated code never changes FPCR, the control register).

    stp x29, x30, [sp, #-32]!       a frame record, sp stays 16-byte aligned
    mov x29, sp
    mrs x9, fpsr                    x9: scratch, the arguments x0-x7 pass through untouched
    str x9, [sp, #16]
    bl  body                        at BODY_OFFSET: every alignment the body assumed holds
    ldr x9, [sp, #16]
    msr fpsr, x9
    ldp x29, x30, [sp], #32
    ret
"""

from __future__ import annotations

from einjit.backends import LINE_BYTES
from einjit.backends.aarch64 import encode as e

BODY_OFFSET = 64    # a cache line: the body keeps the alignment of offset 0 (blocks are 64-aligned)
_SAVED = 16         # the FPSR word's slot in the stub's 32-byte frame


def _stub() -> bytes:
    words = [e.stp_x(29, e.LR, e.SP, -32, "pre"), e.mov_sp(29, e.SP),
             e.mrs(9, "fpsr"), e.str_x(9, e.SP, _SAVED)]
    words.append(e.bl(BODY_OFFSET - 4 * len(words)))
    words += [e.ldr_x(9, e.SP, _SAVED), e.msr("fpsr", 9),
              e.ldp_x(29, e.LR, e.SP, 32, "post"), e.ret()]
    words += [e.nop()] * (BODY_OFFSET // 4 - len(words))     # never executed
    return b"".join(word.to_bytes(4, "little") for word in words)


_STUB = _stub()


def guard_entry(target, code: bytes) -> bytes:
    """`code` (a function assembled at offset 0) behind the FPSR-keeping stub: the bytes to
    map and call, entry at offset 0, the body at BODY_OFFSET."""
    return _STUB + bytes(code)


def object_entry(target, field: int) -> bytes:
    """A cache line of code to place before guard_entry's: an entry for callers that pass
    the objects holding the pointers instead (numpy arrays, whose data pointer lies `field`
    bytes in: einjit.runtime.arrays). It replaces x0, x1 and x2 by the word `field` bytes
    into each and branches to the guard behind it.

        ldr x0, [x0, #field]
        ldr x1, [x1, #field]
        ldr x2, [x2, #field]
        b   guard                   LINE_BYTES on: the guard keeps its alignment
    """
    words = [e.ldr_x(register, register, field) for register in (0, 1, 2)]
    words.append(e.b(LINE_BYTES - 4 * len(words)))
    words += [e.nop()] * (LINE_BYTES // 4 - len(words))      # never executed
    return b"".join(word.to_bytes(4, "little") for word in words)
