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

from einjit.backends import LINE_BYTES
from einjit.backends.x86_64 import encode as e
from einjit.backends.x86_64.encode import R8, R9, R10, R11, RAX, RCX, RDI, RDX, RSI, RSP, Mem
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


def object_entry(target, field: int) -> bytes:
    """A cache line of code to place before guard_entry's: an entry for callers that pass
    the objects holding the pointers instead (numpy arrays, whose data pointer lies `field`
    bytes in: einjit.runtime.arrays). It replaces rdi, rsi and rdx by the word `field` bytes
    into each and jumps to the guard behind it.

        mov rdi, [rdi+field]
        mov rsi, [rsi+field]
        mov rdx, [rdx+field]
        jmp guard                   LINE_BYTES on: the guard keeps its alignment
    """
    code = b"".join(e.mov_rm(register, Mem(register, disp=field)) for register in (RDI, RSI, RDX))
    code += e.jmp(LINE_BYTES - len(code) - 5)
    return code + e.nop(LINE_BYTES - len(code))      # never executed


_FAIL = e.mov_ri(RAX, 1) + e.ret()      # where an argument differs: return 1, nothing done
ARRAY_CALL_ENTRY = 16                   # the entry, past the failure's return


def _expect(register: int, value: int, scratch: int) -> bytes:
    """register == value (an immediate where it fits a sign-extended 32 bits)."""
    if -(1 << 31) <= value < (1 << 31):
        return e.cmp_ri(register, value)
    return e.mov_ri(scratch, value) + e.cmp_rr(register, scratch)


def array_call(target, call) -> tuple[bytes, int]:
    """The checked array call (einjit.backends.array_call) as code, and its entry's offset.
    Arguments rdi, rsi (the operands' objects, or 0 where unused), rdx (the result's).
    Offset 0 holds `mov eax, 1; ret`; each check jumps back there where it fails:

        mov rax, [rdi+type]; mov r11, type; cmp rax, r11; jne fail      and descr alike
        mov rax, [rdi+nd]; shl rax, 32; cmp rax, (nd << 32)             ndim, a C int
        mov r10, [rdi+dims]; mov rax, [r10+8i]; cmp rax, size_i; jne    each dim, each stride
        ...                                                             rsi, rdx alike
        mov rax, [rdx+flags]; and rax, WRITEABLE; je fail               a result given
        mov r9, [rdi+data]; mov r10, [rsi+data]; mov rdx, [rdx+data]
        mov r11, span; add r11, rdx                                     its bytes' end, then
        cmp r9, r11; jae next; mov rax, span_0; add rax, r9;            per operand: fail
        cmp rdx, rax; jb fail                                           where they meet
        mov rdi, r9 (or a fixed address); mov rsi, r10 (or one)
        xor ecx, ecx; mov r8, count
        sub rsp, 8; mov rax, nest; call rax; add rsp, 8                 rsp 16-aligned at the call
        xor eax, eax; ret
    """
    fields = call.fields
    code = _FAIL + e.nop(ARRAY_CALL_ENTRY - len(_FAIL))

    def fail_if(condition: str) -> bytes:
        return e.jcc(condition, -(len(code) + 6))

    for register, layout in zip((RDI, RSI, RDX), (*call.arguments, call.result)):
        if layout is None:
            continue
        for offset, value in ((fields.type, layout.type), (fields.descr, layout.descr)):
            code += e.mov_rm(RAX, Mem(register, disp=offset)) + _expect(RAX, value, R11)
            code += fail_if("ne")
        code += e.mov_rm(RAX, Mem(register, disp=fields.nd)) + e.shl_ri(RAX, 32)
        code += _expect(RAX, len(layout.shape) << 32, R11)
        code += fail_if("ne")
        for offset, values in ((fields.dims, layout.shape), (fields.strides, layout.strides)):
            if values:
                code += e.mov_rm(R10, Mem(register, disp=offset))
            for index, value in enumerate(values):
                code += e.mov_rm(RAX, Mem(R10, disp=8 * index)) + _expect(RAX, value, R11)
                code += fail_if("ne")
    if call.result is not None:
        code += e.mov_rm(RAX, Mem(RDX, disp=fields.flags)) + e.and_ri(RAX, WRITEABLE_FLAG)
        code += fail_if("e")
    data = (R9, R10)
    for register, layout, loaded in zip((RDI, RSI), call.arguments, data):
        if layout is not None:
            code += e.mov_rm(loaded, Mem(register, disp=fields.data))
    code += e.mov_rm(RDX, Mem(RDX, disp=fields.data))
    if call.result is not None:
        code += e.mov_ri(R11, call.result.span) + e.add_rr(R11, RDX)
        for loaded, layout in zip(data, call.arguments):
            if layout is None:
                continue
            meets = e.mov_ri(RAX, layout.span) + e.add_rr(RAX, loaded) + e.cmp_rr(RDX, RAX)
            code += e.cmp_rr(loaded, R11) + e.jcc("ae", len(meets) + 6) + meets
            code += fail_if("b")
    for register, (argument, fixed) in zip((RDI, RSI), call.operands):
        code += e.mov_ri(register, fixed) if argument is None else \
            e.mov_rr(register, data[argument])
    code += e.xor_rr(RCX, RCX) + e.mov_ri(R8, call.count)
    code += e.sub_ri(RSP, 8) + e.mov_ri(RAX, call.nest) + e.call_r(RAX) + e.add_ri(RSP, 8)
    code += e.xor_rr(RAX, RAX) + e.ret()
    return code, ARRAY_CALL_ENTRY
