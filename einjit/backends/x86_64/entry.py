"""The entry guard: what Python calls runs behind a stub that keeps the caller's MXCSR.

Generated code raises floating-point exceptions (a reciprocal of zero, an overflowing
exp) and SSE/AVX record each one as a sticky flag in MXCSR bits 0..5, which the code's caller
would otherwise find set afterwards (numpy and C code test them with fetestexcept).
guard_entry puts a fixed stub at offset 0 that saves MXCSR, calls the unchanged code and
loads MXCSR back, so every flag reads as before the call (the word is restored whole:
generated code never changes the control bits). rdi, rsi, rdx, rcx, r8 and r9 pass through
untouched; the stub copies the first two stack arguments (brgemm's 7th and 8th, the most any
entry takes) so the body finds them where a direct call would have put them.

    sub rsp, 40                 rsp was 8 mod 16 at entry: 0 mod 16 at the call
    stmxcsr [rsp+16]
    mov rax, [rsp+48]           the caller's stack arguments, under the new return address
    mov [rsp], rax
    mov rax, [rsp+56]
    mov [rsp+8], rax
    call body                   at BODY_OFFSET: every alignment the body assumed holds
    ldmxcsr [rsp+16]
    add rsp, 40
    ret
"""

from __future__ import annotations

from einjit.backends import STACK_PROBE_BYTES
from einjit.backends.array_call import FRAME_ALIGNMENT
from einjit.backends.x86_64 import encode as e
from einjit.backends.x86_64.encode import R8, R9, R10, R11, RAX, RBP, RCX, RDI, RDX, RSI, RSP, Mem
from einjit.runtime.arrays import WRITEABLE_FLAG

BODY_OFFSET = 64    # a cache line: the body keeps the alignment of offset 0 (blocks are 64-aligned)
STACK_ARGUMENTS = 2
_FRAME = 40         # 8 (return address) + 40 = 48: a multiple of 16
_SAVED = Mem(RSP, disp=8 * STACK_ARGUMENTS)


def _stub() -> bytes:
    code = e.sub_ri(RSP, _FRAME) + e.stmxcsr(_SAVED)
    for slot in range(STACK_ARGUMENTS):
        code += (e.mov_rm(RAX, Mem(RSP, disp=_FRAME + 8 + 8 * slot))
                 + e.mov_mr(Mem(RSP, disp=8 * slot), RAX))
    code += e.call(BODY_OFFSET - len(code) - 5)
    code += e.ldmxcsr(_SAVED) + e.add_ri(RSP, _FRAME) + e.ret()
    return code + e.nop(BODY_OFFSET - len(code))    # never executed


_STUB = _stub()


def guard_entry(target, code: bytes) -> bytes:
    """`code` (a function assembled at offset 0) behind the MXCSR-keeping stub: the bytes to
    map and call, entry at offset 0, the body at BODY_OFFSET."""
    return _STUB + bytes(code)


_FAIL = e.mov_ri(RAX, 1) + e.ret()      # where an argument differs: return 1, nothing done
ARRAY_CALL_ENTRY = 16                   # the entry, past the failure's return


def _expect(register: int, value: int, scratch: int) -> bytes:
    """register == value (an immediate where it fits a sign-extended 32 bits)."""
    if -(1 << 31) <= value < (1 << 31):
        return e.cmp_ri(register, value)
    return e.mov_ri(scratch, value) + e.cmp_rr(register, scratch)


_ARGUMENTS = (RDI, RSI, RDX, RCX, R8, R9)


def _check(register: int, layout, fields, fail_if) -> bytes:
    """The array object in `register` has `layout`'s type, dtype, ndim, shape and strides
    (rax, r10, r11 scratch)."""
    code = b""
    for offset, value in ((fields.type, layout.type), (fields.descr, layout.descr)):
        code += e.mov_rm(RAX, Mem(register, disp=offset)) + _expect(RAX, value, R11)
        code += fail_if("ne", code)
    code += e.mov_rm(RAX, Mem(register, disp=fields.nd)) + e.shl_ri(RAX, 32)
    code += _expect(RAX, len(layout.shape) << 32, R11)
    code += fail_if("ne", code)
    for offset, values in ((fields.dims, layout.shape), (fields.strides, layout.strides)):
        if values:
            code += e.mov_rm(R10, Mem(register, disp=offset))
        for index, value in enumerate(values):
            code += e.mov_rm(RAX, Mem(R10, disp=8 * index)) + _expect(RAX, value, R11)
            code += fail_if("ne", code)
    return code


def array_call(target, call) -> tuple[bytes, int]:
    """The checked array call (einjit.backends.array_call) as code, and its entry's offset.
    Arguments in rdi, rsi, rdx, rcx, r8, r9: the operands' objects, then the result's.
    Offset 0 holds `mov eax, 1; ret`; each check jumps back there where it fails:

        mov rax, [rdi+type]; mov r11, type; cmp rax, r11; jne fail      and descr alike
        mov rax, [rdi+nd]; shl rax, 32; cmp rax, (nd << 32)             ndim, a C int
        mov r10, [rdi+dims]; mov rax, [r10+8i]; cmp rax, size_i; jne    each dim, each stride
        ...                                                             each argument alike
        mov rax, [r9+flags]; and rax, WRITEABLE; je fail                a result given: writable,
        mov r11, [r9+data]; mov r10, span; add r10, r11                 its bytes [r11, r10)
        mov rax, [rdi+data]; cmp rax, r10; jae next                     met by no operand's:
        mov rax, span_0; add rax, [rdi+data]; cmp rax, r11; ja fail     each one's alike
        push rbp; mov rbp, rsp; sub rsp, 8 * arguments (16-aligned)
        mov rax, [rdi+data]; mov [rbp-8], rax; ...                      every data pointer
        sub rsp, 4032; mov [rsp], rax; ...                              the scratch frame, a
        sub rsp, rest; and rsp, -64; mov [rsp], rax                     page at most a touch
        per nest: mov rdi, [rbp-8i]; add rdi, offset (or lea rdi, [rsp+offset], or an
        address), rsi and rdx alike; xor ecx, ecx; mov r8, count; mov rax, nest; call rax
        mov rsp, rbp; pop rbp; xor eax, eax; ret
    """
    fields = call.fields
    code = _FAIL + e.nop(ARRAY_CALL_ENTRY - len(_FAIL))

    def fail_if(condition: str, tail: bytes = b"") -> bytes:
        return e.jcc(condition, -(len(code) + len(tail) + 6))

    arguments = _ARGUMENTS[:len(call.arguments) + 1]
    result = arguments[-1]
    for register, layout in zip(arguments, (*call.arguments, call.result)):
        if layout is not None:
            code += _check(register, layout, fields, fail_if)
    if call.result is not None:
        code += e.mov_rm(RAX, Mem(result, disp=fields.flags)) + e.and_ri(RAX, WRITEABLE_FLAG)
        code += fail_if("e")
        code += e.mov_rm(R11, Mem(result, disp=fields.data))
        code += e.mov_ri(R10, call.result.span) + e.add_rr(R10, R11)
        for register, layout in zip(arguments, call.arguments):
            data = Mem(register, disp=fields.data)
            meets = e.mov_ri(RAX, layout.span) + e.add_rr(RAX, data) + e.cmp_rr(RAX, R11)
            code += e.mov_rm(RAX, data) + e.cmp_rr(RAX, R10) + e.jcc("ae", len(meets) + 6)
            code += meets
            code += fail_if("a")         # the operand's end lies past out's start
    slots = 16 * -(-len(arguments) // 2)           # rsp stays 16-aligned for the calls
    code += e.push(RBP) + e.mov_rr(RBP, RSP) + e.sub_ri(RSP, slots)

    def slot(index: int) -> Mem:
        return Mem(RBP, disp=-8 * (index + 1))
    for index, register in enumerate(arguments):
        code += e.mov_rm(RAX, Mem(register, disp=fields.data)) + e.mov_mr(slot(index), RAX)
    frame, step = call.frame_bytes, STACK_PROBE_BYTES - FRAME_ALIGNMENT
    while frame > step:                    # each page touched before the next is taken
        code += e.sub_ri(RSP, step) + e.mov_mr(Mem(RSP), RAX)
        frame -= step
    if call.frame_bytes:
        code += e.sub_ri(RSP, frame) + e.and_ri(RSP, -FRAME_ALIGNMENT)
        code += e.mov_mr(Mem(RSP), RAX)
    for nest in call.calls:
        for register, source in zip((RDI, RSI, RDX), nest.operands):
            if source.kind == "argument":
                code += e.mov_rm(register, slot(source.index))
                code += e.add_ri(register, source.offset) if source.offset else b""
            elif source.kind == "frame":
                code += e.lea(register, Mem(RSP, disp=source.offset))
            else:
                code += e.mov_ri(register, source.offset)
        code += e.xor_rr(RCX, RCX) + e.mov_ri(R8, nest.count)
        code += e.mov_ri(RAX, nest.nest) + e.call_r(RAX)
    code += e.mov_rr(RSP, RBP) + e.pop(RBP) + e.xor_rr(RAX, RAX) + e.ret()
    return code, ARRAY_CALL_ENTRY
