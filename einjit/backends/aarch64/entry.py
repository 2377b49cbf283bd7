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
from einjit.runtime.arrays import WRITEABLE_FLAG

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


ARRAY_CALL_ENTRY = 16          # the entry, past the failure's return (mov x0, #1; ret)


def array_call(target, call) -> tuple[bytes, int]:
    """The checked array call (einjit.backends.array_call) as code, and its entry's offset.
    Arguments x0, x1 (the operands' objects, or 0 where unused), x2 (the result's). Offset 0
    holds `mov x0, #1; ret`; each check branches back there where it fails:

        ldr x9, [x0, #type]; mov x10, type; cmp x9, x10; b.ne fail     and descr alike
        ldr x9, [x0, #nd]; lsl x9, x9, #32; mov x10, nd << 32; cmp...  ndim, a C int
        ldr x11, [x0, #dims]; ldr x9, [x11, #8i]; mov x10, size_i; cmp  each dim, each stride
        ...                                                            x1, x2 alike
        ldr x9, [x2, #flags]; tst x9, #WRITEABLE; b.eq fail            a result given
        ldr x12, [x0, #data]; ldr x13, [x1, #data]; ldr x2, [x2, #data]
        mov x10, span; add x11, x2, x10                                its bytes' end, then
        cmp x12, x11; b.hs next; mov x10, span_0; add x9, x12, x10;    per operand: fail
        cmp x2, x9; b.lo fail                                          where they meet
        mov x0, x12 (or a fixed address); mov x1, x13 (or one)
        mov x3, #0; mov x4, count
        stp x29, x30, [sp, #-16]!; mov x29, sp
        mov x16, nest; blr x16
        ldp x29, x30, [sp], #16
        mov x0, #0; ret
    """
    fields = call.fields
    words = [e.movz(0, 1), e.ret()]
    words += [e.nop()] * (ARRAY_CALL_ENTRY // 4 - len(words))

    def fail_if(condition: str) -> int:
        return e.b_cond(condition, -4 * len(words))

    for register, layout in zip((0, 1, 2), (*call.arguments, call.result)):
        if layout is None:
            continue
        checks = [(fields.type, layout.type, None), (fields.descr, layout.descr, None),
                  (fields.nd, len(layout.shape) << 32, 32)]
        for offset, value, shift in checks:
            words.append(e.ldr_x(9, register, offset))
            if shift:
                words.append(e.lsl_imm(9, 9, shift))
            words += e.mov_imm(10, value) + [e.cmp_reg(9, 10)]
            words.append(fail_if("ne"))
        for offset, values in ((fields.dims, layout.shape), (fields.strides, layout.strides)):
            if values:
                words.append(e.ldr_x(11, register, offset))
            for index, value in enumerate(values):
                words += [e.ldr_x(9, 11, 8 * index)] + e.mov_imm(10, value) + [e.cmp_reg(9, 10)]
                words.append(fail_if("ne"))
    if call.result is not None:
        words += [e.ldr_x(9, 2, fields.flags), e.tst_imm(9, WRITEABLE_FLAG)]
        words.append(fail_if("eq"))
    data = (12, 13)
    for register, layout, loaded in zip((0, 1), call.arguments, data):
        if layout is not None:
            words.append(e.ldr_x(loaded, register, fields.data))
    words.append(e.ldr_x(2, 2, fields.data))
    if call.result is not None:
        words += e.mov_imm(10, call.result.span) + [e.add_reg(11, 2, 10)]
        for loaded, layout in zip(data, call.arguments):
            if layout is None:
                continue
            meets = e.mov_imm(10, layout.span) + [e.add_reg(9, loaded, 10), e.cmp_reg(2, 9)]
            words += [e.cmp_reg(loaded, 11), e.b_cond("hs", 4 * (len(meets) + 2))] + meets
            words.append(fail_if("lo"))
    for register, (argument, fixed) in zip((0, 1), call.operands):
        words += e.mov_imm(register, fixed) if argument is None else \
            [e.mov_reg(register, data[argument])]
    words += [e.movz(3, 0)] + e.mov_imm(4, call.count)
    words += [e.stp_x(29, e.LR, e.SP, -16, "pre"), e.mov_sp(29, e.SP)]
    words += e.mov_imm(16, call.nest) + [e.blr(16)]
    words += [e.ldp_x(29, e.LR, e.SP, 16, "post"), e.movz(0, 0), e.ret()]
    return b"".join(word.to_bytes(4, "little") for word in words), ARRAY_CALL_ENTRY
