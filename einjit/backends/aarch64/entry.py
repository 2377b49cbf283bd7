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

from einjit.backends import STACK_PROBE_BYTES
from einjit.backends.aarch64 import encode as e
from einjit.backends.array_call import FRAME_ALIGNMENT
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


ARRAY_CALL_ENTRY = 16          # the entry, past the failure's return (mov x0, #1; ret)


_SAVED = (19, 20, 21, 22, 23, 24)      # callee-saved: every argument's data pointer


def _check(register: int, layout, fields, fail_if) -> list[int]:
    """The array object in `register` has `layout`'s type, dtype, ndim, shape and strides
    (x9, x10, x11 scratch)."""
    words: list[int] = []
    checks = ((fields.type, layout.type, 0), (fields.descr, layout.descr, 0),
              (fields.nd, len(layout.shape) << 32, 32))
    for offset, value, shift in checks:
        words.append(e.ldr_x(9, register, offset))
        words += [e.lsl_imm(9, 9, shift)] if shift else []
        words += e.mov_imm(10, value) + [e.cmp_reg(9, 10)]
        words.append(fail_if("ne", words))
    for offset, values in ((fields.dims, layout.shape), (fields.strides, layout.strides)):
        if values:
            words.append(e.ldr_x(11, register, offset))
        for index, value in enumerate(values):
            words += [e.ldr_x(9, 11, 8 * index)] + e.mov_imm(10, value) + [e.cmp_reg(9, 10)]
            words.append(fail_if("ne", words))
    return words


def _add(rd: int, rn: int, value: int) -> list[int]:
    """rd = rn + value (x10 scratch where it does not fit an immediate)."""
    if value == 0:
        return [e.mov_reg(rd, rn)] if rd != rn else []
    if value < 4096:
        return [e.add_imm(rd, rn, value)]
    # the extended-register form reads sp as register 31, the shifted-register one xzr
    return e.mov_imm(10, value) + [e.add_ext(rd, rn, 10) if rn == e.SP else
                                   e.add_reg(rd, rn, 10)]


def array_call(target, call) -> tuple[bytes, int]:
    """The checked array call (einjit.backends.array_call) as code, and its entry's offset.
    Arguments in x0, x1, ...: the operands' objects, then the result's. Offset 0 holds
    `mov x0, #1; ret`; each check branches back there where it fails:

        ldr x9, [x0, #type]; mov x10, type; cmp x9, x10; b.ne fail     and descr alike
        ldr x9, [x0, #nd]; lsl x9, x9, #32; mov x10, nd << 32; cmp...  ndim, a C int
        ldr x11, [x0, #dims]; ldr x9, [x11, #8i]; mov x10, size_i; cmp  each dim, each stride
        ...                                                            each argument alike
        ldr x9, [xr, #flags]; tst x9, #WRITEABLE; b.eq fail            a result given: writable,
        ldr x12, [xr, #data]; add x13, x12, #span                      its bytes [x12, x13)
        ldr x14, [x0, #data]; cmp x14, x13; b.hs next                  met by no operand's:
        add x14, x14, #span_0; cmp x14, x12; b.hi fail                 each one's alike
        stp x29, x30, [sp, #-16]!; mov x29, sp; stp x19, x20, [sp, #-16]!; ...
        ldr x19, [x0, #data]; ...                                      every data pointer
        sub sp, sp, #4032; str xzr, [sp]; ...                          the scratch frame, a
        sub x9, sp, #rest; and sp, x9, #-64; str xzr, [sp]             page at most a touch
        per nest: add x0, x19, #offset (or add x0, sp, #offset, or an address), x1 and x2
        alike; mov x3, #0; mov x4, count; mov x16, nest; blr x16
        sub sp, x29, #saved; ldp x23, x24, [sp], #16; ...; ldp x29, x30, [sp], #16
        mov x0, #0; ret
    """
    fields = call.fields
    words = [e.movz(0, 1), e.ret()]
    words += [e.nop()] * (ARRAY_CALL_ENTRY // 4 - len(words))

    def fail_if(condition: str, tail=()) -> int:
        return e.b_cond(condition, -4 * (len(words) + len(tail)))

    count = len(call.arguments) + 1
    result = count - 1
    for register, layout in enumerate((*call.arguments, call.result)):
        if layout is not None:
            words += _check(register, layout, fields, fail_if)
    if call.result is not None:
        words += [e.ldr_x(9, result, fields.flags), e.tst_imm(9, WRITEABLE_FLAG)]
        words.append(fail_if("eq"))
        words.append(e.ldr_x(12, result, fields.data))
        words += _add(13, 12, call.result.span)
        for register, layout in enumerate(call.arguments):
            meets = _add(14, 14, layout.span) + [e.cmp_reg(14, 12)]
            words += [e.ldr_x(14, register, fields.data), e.cmp_reg(14, 13),
                      e.b_cond("hs", 4 * (len(meets) + 2))] + meets
            words.append(fail_if("hi"))      # the operand's end lies past out's start
    pairs = -(-count // 2)
    words += [e.stp_x(29, e.LR, e.SP, -16, "pre"), e.mov_sp(29, e.SP)]
    words += [e.stp_x(_SAVED[2 * i], _SAVED[2 * i + 1], e.SP, -16, "pre") for i in range(pairs)]
    words += [e.ldr_x(_SAVED[i], i, fields.data) for i in range(count)]
    frame, step = call.frame_bytes, STACK_PROBE_BYTES - FRAME_ALIGNMENT
    while frame > step:                    # each page touched before the next is taken
        words += [e.sub_imm(e.SP, e.SP, step), e.str_x(e.XZR, e.SP)]
        frame -= step
    if call.frame_bytes:
        words += [e.sub_imm(9, e.SP, frame), e.and_imm(e.SP, 9, -FRAME_ALIGNMENT),
                  e.str_x(e.XZR, e.SP)]
    for nest in call.calls:
        for register, source in enumerate(nest.operands):
            if source.kind == "argument":
                words += _add(register, _SAVED[source.index], source.offset)
            elif source.kind == "frame":
                words += _add(register, e.SP, source.offset) if source.offset else \
                    [e.mov_sp(register, e.SP)]
            else:
                words += e.mov_imm(register, source.offset)
        words += [e.movz(3, 0)] + e.mov_imm(4, nest.count)
        words += e.mov_imm(16, nest.nest) + [e.blr(16)]
    words.append(e.sub_imm(e.SP, 29, 16 * pairs))
    words += [e.ldp_x(_SAVED[2 * i], _SAVED[2 * i + 1], e.SP, 16, "post")
              for i in reversed(range(pairs))]
    words += [e.ldp_x(29, e.LR, e.SP, 16, "post"), e.movz(0, 0), e.ret()]
    return b"".join(word.to_bytes(4, "little") for word in words), ARRAY_CALL_ENTRY
