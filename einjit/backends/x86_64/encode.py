"""x86-64 instruction encoders: pure functions that return the bytes of one instruction.

Operands are plain ints: general registers 0..15 (RAX..R15 below), vector registers 0..31
(xmm/ymm/zmm chosen by the `width` argument, 128/256/512), mask registers 0..7 (k0 means
"no mask" where a write mask is expected), and memory operands `Mem`.

There is one field packer per encoding class: `_modrm` (ModRM + SIB + displacement),
`_legacy` (REX + opcode), `_vex` (2- or 3-byte VEX) and `_evex` (EVEX with masking,
broadcast, compressed disp8*N and registers 16..31). Vector instructions pick VEX when
that is possible (width <= 256, registers 0..15, no mask/broadcast, evex=False) and EVEX
otherwise; instructions with a single encoding use it. Where two encodings exist GNU as is
the reference (tests/backends/x86_64/golden.txt), e.g. register-to-register moves use the store form
when that allows the 2-byte VEX prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache, wraps

from einjit.errors import EncodingError

_GPR_NAMES = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
              "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")


class Reg(int):
    """A general register, marked so where a plain int would mean a number: the Assembler's
    counted_loop takes a compile-time count (int) or a register holding one (Reg). The
    encoders accept both for register operands."""

    __slots__ = ()

    def __repr__(self) -> str:
        return _GPR_NAMES[self] if 0 <= self <= 15 else f"Reg({int(self)})"


RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI = (Reg(n) for n in range(8))
R8, R9, R10, R11, R12, R13, R14, R15 = (Reg(n) for n in range(8, 16))
GPRS = (RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15)

CONDITION_CODES = {
    "o": 0x0, "no": 0x1, "b": 0x2, "c": 0x2, "nae": 0x2, "ae": 0x3, "nb": 0x3, "nc": 0x3,
    "e": 0x4, "z": 0x4, "ne": 0x5, "nz": 0x5, "be": 0x6, "na": 0x6, "a": 0x7, "nbe": 0x7,
    "s": 0x8, "ns": 0x9, "p": 0xA, "pe": 0xA, "np": 0xB, "po": 0xB,
    "l": 0xC, "nge": 0xC, "ge": 0xD, "nl": 0xD, "le": 0xE, "ng": 0xE, "g": 0xF, "nle": 0xF,
}

_SCALE_BITS = {1: 0, 2: 1, 4: 2, 8: 3}


def _is_int(value: object) -> bool:
    return type(value) is int  # exact type: rejects bool (and is fast on the hot path)


def _check_gpr(name: str, reg: object) -> None:
    if (type(reg) is not Reg and type(reg) is not int) or not 0 <= reg <= 15:
        raise EncodingError(f"{name}: {reg!r} is not a general register; expected 0..15")


def _check_kreg(name: str, reg: object) -> None:
    if type(reg) is not int or not 0 <= reg <= 7:
        raise EncodingError(f"{name}: {reg!r} is not a mask register; expected 0..7")


def _check_vreg(name: str, reg: object, allow_mem: bool = False) -> None:
    if allow_mem and isinstance(reg, Mem):
        return
    if not _is_int(reg) or not 0 <= reg <= 31:
        expected = "a vector register 0..31 or a Mem" if allow_mem else "a vector register 0..31"
        raise EncodingError(f"{name}: {reg!r} is not {expected}")


def _check_mem(name: str, mem: object) -> None:
    if not isinstance(mem, Mem):
        raise EncodingError(f"{name}: {mem!r} is not a memory operand; expected a Mem")


def _imm(name: str, value: object, bits: int, signed: bool) -> bytes:
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not _is_int(value) or not low <= value <= high:
        raise EncodingError(f"{name}: {value!r} does not fit; expected an integer in {low}..{high}")
    return (value & ((1 << bits) - 1)).to_bytes(bits // 8, "little")


def _imm8(name: str, value: object) -> bytes:
    return _imm(name, value, 8, signed=False)


@dataclass(frozen=True, slots=True)
class Mem:
    """Memory operand [base + index*scale + disp]; index may not be rsp."""

    base: int
    index: int | None = None
    scale: int = 1
    disp: int = 0

    def __post_init__(self) -> None:
        _check_gpr("Mem.base", self.base)
        if self.index is not None:
            _check_gpr("Mem.index", self.index)
            if self.index == RSP:
                raise EncodingError("Mem.index: rsp (4) cannot be an index register")
        if self.scale not in _SCALE_BITS or type(self.scale) is not int:
            raise EncodingError(f"Mem.scale: {self.scale!r} is not a valid scale; "
                                f"expected 1, 2, 4 or 8")
        if type(self.disp) is not int or not -0x80000000 <= self.disp <= 0x7FFFFFFF:
            raise EncodingError(f"Mem.disp: {self.disp!r} does not fit a signed 32-bit "
                                f"displacement")

    def offset(self, delta: int) -> Mem:
        """The same address moved by `delta` bytes."""
        return replace(self, disp=self.disp + delta)


Operand = int | Mem    # a register number or a memory operand
Encoder = Callable[..., bytes]


def _memoized(encoder: Encoder) -> Encoder:
    """The scalar encoders a generator calls over and over with the same operands (pointer
    moves, strides), memoized per type (True is not the register 1). Errors are never
    cached, and an unhashable operand goes to the encoder itself, whose checks name it."""
    cached = lru_cache(maxsize=4096, typed=True)(encoder)

    @wraps(encoder)
    def encode(*operands):
        try:
            return cached(*operands)
        except TypeError:
            return encoder(*operands)
    return encode


# ---------------------------------------------------------------- field packers

def _modrm(reg: int, rm: Operand, disp_scale: int = 1) -> bytes:
    """ModRM, SIB and displacement for register field `reg` and operand `rm` (register or Mem).

    Only the low 3 bits of the registers go here; the prefix carries the rest. disp_scale is
    EVEX's N: a displacement that is a multiple of N and fits disp8 after division by N is
    stored as disp8 (compressed displacement); otherwise disp32.
    """
    reg_bits = (reg & 7) << 3
    if not isinstance(rm, Mem):
        return bytes((0xC0 | reg_bits | (rm & 7),))
    base = rm.base & 7
    disp = rm.disp
    if disp == 0 and base != RBP:  # rbp/r13 with mod=00 would mean rip/no-base: give it a disp8
        mod, tail = 0x00, b""
    elif disp % disp_scale == 0 and -128 <= disp // disp_scale <= 127:
        mod, tail = 0x40, ((disp // disp_scale) & 0xFF).to_bytes(1, "little")
    else:
        mod, tail = 0x80, disp.to_bytes(4, "little", signed=True)
    if rm.index is None and base != RSP:
        return bytes((mod | reg_bits | base,)) + tail
    # rsp/r12 as base need a SIB byte; index field 100 means "no index" (r12 is a valid index
    # because REX.X/VEX.X supplies its fourth bit)
    if rm.index is None:
        sib = (RSP << 3) | base
    else:
        sib = (_SCALE_BITS[rm.scale] << 6) | ((rm.index & 7) << 3) | base
    return bytes((mod | reg_bits | 0x04, sib)) + tail


def _rm_extension_bits(rm: Operand) -> tuple[int, int]:
    """(X, B): bit 3 of the index and base registers, or for a register rm X = bit 4, B = bit 3."""
    if isinstance(rm, Mem):
        return (rm.index or 0) >> 3 & 1, rm.base >> 3 & 1
    return rm >> 4 & 1, rm >> 3 & 1


def _legacy(opcode: bytes, reg: int, rm: Operand, *, w: bool = True,
            imm: bytes = b"") -> bytes:
    """REX (only if needed) + opcode + ModRM/SIB/disp + immediate; W=1 means 64-bit operands."""
    x, b = _rm_extension_bits(rm)  # registers here are 0..15, so X is 0 for them
    rex = w << 3 | (reg >> 3 & 1) << 2 | x << 1 | b
    prefix = bytes((0x40 | rex,)) if rex else b""
    return prefix + opcode + _modrm(reg, rm) + imm


def _opcode_plus_reg(opcode: int, reg: int, *, w: bool) -> bytes:
    """Opcodes with the register in their low 3 bits (push, pop, mov r, imm)."""
    rex = w << 3 | reg >> 3
    return (bytes((0x40 | rex,)) if rex else b"") + bytes((opcode | (reg & 7),))


def _vex(opcode: int, *, map_select: int, pp: int, w: int, length: int, reg: int, vvvv: int,
         rm: Operand, imm: bytes = b"") -> bytes:
    """VEX prefix (2-byte form when map is 0F, W=0 and no X/B extension) + opcode + ModRM."""
    r = reg >> 3 & 1
    x, b = _rm_extension_bits(rm)  # registers here are 0..15, so X is 0 for them
    vvvv_inv = ~vvvv & 15
    if map_select == 1 and not (w or x or b):
        prefix = bytes((0xC5, (r ^ 1) << 7 | vvvv_inv << 3 | length << 2 | pp))
    else:
        prefix = bytes((0xC4, (r ^ 1) << 7 | (x ^ 1) << 6 | (b ^ 1) << 5 | map_select,
                        w << 7 | vvvv_inv << 3 | length << 2 | pp))
    return prefix + bytes((opcode,)) + _modrm(reg, rm) + imm


def _evex(opcode: int, map_select: int, pp: int, w: int, ll: int, reg: int, vvvv: int,
          rm: Operand, mask: int, zeroing: bool, bcst: bool, disp_scale: int,
          imm: bytes = b"") -> bytes:
    """EVEX prefix + opcode + ModRM with compressed disp8*N (N = disp_scale)."""
    x, b = _rm_extension_bits(rm)
    p0 = (((reg >> 3 & 1) ^ 1) << 7 | (x ^ 1) << 6 | (b ^ 1) << 5 | ((reg >> 4 & 1) ^ 1) << 4
          | map_select)
    p1 = w << 7 | (~vvvv & 15) << 3 | 0x04 | pp
    p2 = zeroing << 7 | ll << 5 | bcst << 4 | ((vvvv >> 4 & 1) ^ 1) << 3 | mask
    return bytes((0x62, p0, p1, p2, opcode)) + _modrm(reg, rm, disp_scale) + imm


# ---------------------------------------------------------------- general-purpose instructions

def _check_regs(instr: str, **regs) -> None:
    for name, reg in regs.items():
        _check_gpr(f"{instr} {name}", reg)


def _check_reg_or_mem(instr: str, name: str, src: object) -> None:
    if not isinstance(src, Mem):
        _check_gpr(f"{instr} {name}", src)


@_memoized
def mov_rr(dst: int, src: int) -> bytes:
    _check_regs("mov_rr", dst=dst, src=src)
    return _legacy(b"\x89", src, dst)


def mov_ri(dst: int, imm: int) -> bytes:
    """dst := imm (shortest form: mov r32 zero-extends, sign-extended imm32, or imm64)."""
    _check_gpr("mov_ri dst", dst)
    if _is_int(imm) and 0 <= imm < (1 << 32):
        return _opcode_plus_reg(0xB8, dst, w=False) + imm.to_bytes(4, "little")
    if _is_int(imm) and -(1 << 31) <= imm < 0:
        return _legacy(b"\xc7", 0, dst, imm=_imm("mov_ri imm", imm, 32, signed=True))
    if not _is_int(imm) or not -(1 << 63) <= imm < (1 << 64):
        raise EncodingError(f"mov_ri imm: {imm!r} does not fit 64 bits; expected -2**63..2**64-1")
    return _opcode_plus_reg(0xB8, dst, w=True) + (imm & ((1 << 64) - 1)).to_bytes(8, "little")


@_memoized
def mov_rm(dst: int, mem: Mem) -> bytes:
    """dst := qword [mem]."""
    _check_gpr("mov_rm dst", dst)
    _check_mem("mov_rm mem", mem)
    return _legacy(b"\x8b", dst, mem)


@_memoized
def mov_mr(mem: Mem, src: int) -> bytes:
    """qword [mem] := src."""
    _check_mem("mov_mr mem", mem)
    _check_gpr("mov_mr src", src)
    return _legacy(b"\x89", src, mem)


@_memoized
def lea(dst: int, mem: Mem) -> bytes:
    _check_gpr("lea dst", dst)
    _check_mem("lea mem", mem)
    return _legacy(b"\x8d", dst, mem)


_ALU_EXTENSIONS = {"add": 0, "or": 1, "and": 4, "sub": 5, "xor": 6, "cmp": 7}


@_memoized
def _alu_ri(operation: str, dst: int, imm: int) -> bytes:
    instr = f"{operation}_ri"
    _check_gpr(f"{instr} dst", dst)
    ext = _ALU_EXTENSIONS[operation]
    if _is_int(imm) and -128 <= imm <= 127:
        return _legacy(b"\x83", ext, dst, imm=_imm(f"{instr} imm", imm, 8, signed=True))
    imm32 = _imm(f"{instr} imm", imm, 32, signed=True)
    if dst == RAX:  # accumulator short form, as GNU as picks it
        return bytes((0x48, ext << 3 | 0x05)) + imm32
    return _legacy(b"\x81", ext, dst, imm=imm32)


@_memoized
def _alu_rr(operation: str, dst: int, src: Operand) -> bytes:
    instr = f"{operation}_rr"
    _check_gpr(f"{instr} dst", dst)
    _check_reg_or_mem(instr, "src", src)
    ext = _ALU_EXTENSIONS[operation]
    if isinstance(src, Mem):
        return _legacy(bytes((ext << 3 | 0x03,)), dst, src)
    return _legacy(bytes((ext << 3 | 0x01,)), src, dst)


def add_ri(dst: int, imm: int) -> bytes:
    return _alu_ri("add", dst, imm)


def sub_ri(dst: int, imm: int) -> bytes:
    return _alu_ri("sub", dst, imm)


def and_ri(dst: int, imm: int) -> bytes:
    return _alu_ri("and", dst, imm)


def or_ri(dst: int, imm: int) -> bytes:
    return _alu_ri("or", dst, imm)


def xor_ri(dst: int, imm: int) -> bytes:
    return _alu_ri("xor", dst, imm)


def cmp_ri(dst: int, imm: int) -> bytes:
    return _alu_ri("cmp", dst, imm)


def add_rr(dst: int, src: Operand) -> bytes:
    """dst += src (register or Mem)."""
    return _alu_rr("add", dst, src)


def sub_rr(dst: int, src: Operand) -> bytes:
    return _alu_rr("sub", dst, src)


def and_rr(dst: int, src: Operand) -> bytes:
    return _alu_rr("and", dst, src)


def or_rr(dst: int, src: Operand) -> bytes:
    return _alu_rr("or", dst, src)


def xor_rr(dst: int, src: Operand) -> bytes:
    return _alu_rr("xor", dst, src)


def cmp_rr(dst: int, src: Operand) -> bytes:
    return _alu_rr("cmp", dst, src)


def test_rr(a: int, b: int) -> bytes:
    _check_regs("test_rr", a=a, b=b)
    return _legacy(b"\x85", b, a)


def imul_rr(dst: int, src: Operand) -> bytes:
    """dst *= src (register or Mem)."""
    _check_gpr("imul_rr dst", dst)
    _check_reg_or_mem("imul_rr", "src", src)
    return _legacy(b"\x0f\xaf", dst, src)


@_memoized
def imul_rri(dst: int, src: Operand, imm: int) -> bytes:
    """dst := src * imm (src register or Mem)."""
    _check_gpr("imul_rri dst", dst)
    _check_reg_or_mem("imul_rri", "src", src)
    if _is_int(imm) and -128 <= imm <= 127:
        return _legacy(b"\x6b", dst, src, imm=_imm("imul_rri imm", imm, 8, signed=True))
    return _legacy(b"\x69", dst, src, imm=_imm("imul_rri imm", imm, 32, signed=True))


def _shift_ri(instr: str, ext: int, dst: int, n: int) -> bytes:
    _check_gpr(f"{instr} dst", dst)
    count = _imm(f"{instr} n", n, 8, signed=False)
    if n > 63:
        raise EncodingError(f"{instr} n: {n} is not a shift count; expected 0..63")
    if n == 1:
        return _legacy(b"\xd1", ext, dst)
    return _legacy(b"\xc1", ext, dst, imm=count)


def shl_ri(dst: int, n: int) -> bytes:
    return _shift_ri("shl_ri", 4, dst, n)


def shr_ri(dst: int, n: int) -> bytes:
    return _shift_ri("shr_ri", 5, dst, n)


def sar_ri(dst: int, n: int) -> bytes:
    return _shift_ri("sar_ri", 7, dst, n)


def inc(dst: int) -> bytes:
    _check_gpr("inc dst", dst)
    return _legacy(b"\xff", 0, dst)


def dec(dst: int) -> bytes:
    _check_gpr("dec dst", dst)
    return _legacy(b"\xff", 1, dst)


def neg(dst: int) -> bytes:
    _check_gpr("neg dst", dst)
    return _legacy(b"\xf7", 3, dst)


@_memoized
def lock_xadd(mem: Mem, src: int) -> bytes:
    """Atomically: qword [mem] += src, src := the old qword (lock xadd)."""
    _check_mem("lock_xadd mem", mem)
    _check_gpr("lock_xadd src", src)
    return b"\xf0" + _legacy(b"\x0f\xc1", src, mem)


@_memoized
def lock_cmpxchg(mem: Mem, src: int) -> bytes:
    """Atomically: where qword [mem] equals rax, [mem] := src (ZF set), else rax := [mem]
    (ZF clear) (lock cmpxchg)."""
    _check_mem("lock_cmpxchg mem", mem)
    _check_gpr("lock_cmpxchg src", src)
    return b"\xf0" + _legacy(b"\x0f\xb1", src, mem)


def push(reg: int) -> bytes:
    _check_gpr("push reg", reg)
    return _opcode_plus_reg(0x50, reg, w=False)


def pop(reg: int) -> bytes:
    _check_gpr("pop reg", reg)
    return _opcode_plus_reg(0x58, reg, w=False)


def call_r(target: int) -> bytes:
    """call through a register (FF /2); 64-bit operand size is the default, no REX.W."""
    _check_gpr("call target", target)
    return _legacy(b"\xff", 2, target, w=False)


def call(rel32: int) -> bytes:
    """Direct call; rel32 counts from the end of this 5-byte instruction."""
    return b"\xe8" + _imm("call rel32", rel32, 32, signed=True)


def ret() -> bytes:
    return b"\xc3"


def vzeroupper() -> bytes:
    return b"\xc5\xf8\x77"


def sfence() -> bytes:
    """Order earlier stores (non-temporal ones included) before later ones."""
    return b"\x0f\xae\xf8"


def mfence() -> bytes:
    """Order every earlier load and store before every later one."""
    return b"\x0f\xae\xf0"


def pause() -> bytes:
    """Spin-wait hint: eases a polling loop's demand on the core and its sibling thread."""
    return b"\xf3\x90"


def syscall() -> bytes:
    """Enter the kernel: number in rax, arguments in rdi, rsi, rdx, r10, r8, r9; the kernel
    returns in rax and overwrites rcx and r11."""
    return b"\x0f\x05"


def stmxcsr(mem: Mem) -> bytes:
    """Store MXCSR (SSE control and status: exception flags in bits 0..5) to a dword."""
    _check_mem("stmxcsr mem", mem)
    return _legacy(b"\x0f\xae", 3, mem, w=False)


def ldmxcsr(mem: Mem) -> bytes:
    """Load MXCSR from a dword."""
    _check_mem("ldmxcsr mem", mem)
    return _legacy(b"\x0f\xae", 2, mem, w=False)


def jcc(cond: str, rel32: int) -> bytes:
    """Conditional jump; rel32 counts from the end of this 6-byte instruction."""
    if cond not in CONDITION_CODES:
        raise EncodingError(f"jcc cond: {cond!r} is not a condition; expected one of "
                            f"{sorted(CONDITION_CODES)}")
    return bytes((0x0F, 0x80 | CONDITION_CODES[cond])) + _imm("jcc rel32", rel32, 32, signed=True)


def jmp(rel32: int) -> bytes:
    """Unconditional jump; rel32 counts from the end of this 5-byte instruction."""
    return b"\xe9" + _imm("jmp rel32", rel32, 32, signed=True)


# Intel's recommended multi-byte NOPs (SDM vol. 2, NOP), indexed by length
_NOPS = (
    b"",
    b"\x90",
    b"\x66\x90",
    b"\x0f\x1f\x00",
    b"\x0f\x1f\x40\x00",
    b"\x0f\x1f\x44\x00\x00",
    b"\x66\x0f\x1f\x44\x00\x00",
    b"\x0f\x1f\x80\x00\x00\x00\x00",
    b"\x0f\x1f\x84\x00\x00\x00\x00\x00",
    b"\x66\x0f\x1f\x84\x00\x00\x00\x00\x00",
)


def nop(length: int = 1) -> bytes:
    """`length` bytes of padding made of as few NOP instructions as possible."""
    if not _is_int(length) or length < 0:
        raise EncodingError(f"nop length: {length!r}; expected a non-negative integer")
    longest = len(_NOPS) - 1
    return _NOPS[longest] * (length // longest) + _NOPS[length % longest]


def _prefetch(instr: str, hint: int, mem: Mem) -> bytes:
    _check_mem(f"{instr} mem", mem)
    return _legacy(b"\x0f\x18", hint, mem, w=False)


def prefetcht0(mem: Mem) -> bytes:
    return _prefetch("prefetcht0", 1, mem)


def prefetcht1(mem: Mem) -> bytes:
    return _prefetch("prefetcht1", 2, mem)


def prefetcht2(mem: Mem) -> bytes:
    return _prefetch("prefetcht2", 3, mem)


# ---------------------------------------------------------------- mask registers (AVX-512)

def _kmov(pp: int, w: int, opcode: int, reg: int, rm: int) -> bytes:
    return _vex(opcode, map_select=1, pp=pp, w=w, length=0, reg=reg, vvvv=0, rm=rm)


def kmovb_kr(k: int, src: int) -> bytes:
    """k := low 8 bits of the general register src."""
    _check_kreg("kmovb_kr k", k)
    _check_gpr("kmovb_kr src", src)
    return _kmov(1, 0, 0x92, k, src)


def kmovw_kr(k: int, src: int) -> bytes:
    _check_kreg("kmovw_kr k", k)
    _check_gpr("kmovw_kr src", src)
    return _kmov(0, 0, 0x92, k, src)


def kmovd_kr(k: int, src: int) -> bytes:
    _check_kreg("kmovd_kr k", k)
    _check_gpr("kmovd_kr src", src)
    return _kmov(3, 0, 0x92, k, src)


def kmovq_kr(k: int, src: int) -> bytes:
    _check_kreg("kmovq_kr k", k)
    _check_gpr("kmovq_kr src", src)
    return _kmov(3, 1, 0x92, k, src)


def kmovw_rk(dst: int, k: int) -> bytes:
    """General register dst := zero-extended 16-bit mask k."""
    _check_gpr("kmovw_rk dst", dst)
    _check_kreg("kmovw_rk k", k)
    return _kmov(0, 0, 0x93, dst, k)


def kmovq_rk(dst: int, k: int) -> bytes:
    _check_gpr("kmovq_rk dst", dst)
    _check_kreg("kmovq_rk k", k)
    return _kmov(3, 1, 0x93, dst, k)


def kxnorw(dst: int, a: int, b: int) -> bytes:
    """dst := ~(a ^ b); kxnorw(k, k, k) sets k to all ones."""
    for name, reg in (("dst", dst), ("a", a), ("b", b)):
        _check_kreg(f"kxnorw {name}", reg)
    return _vex(0x46, map_select=1, pp=0, w=0, length=1, reg=dst, vvvv=a, rm=b)


# ---------------------------------------------------------------- vector instructions

@dataclass(frozen=True, slots=True)
class _VectorOp:
    """Encoding data of one vector instruction (both VEX and EVEX forms when they exist)."""

    name: str
    opcode: int
    map_select: int             # 1: 0F, 2: 0F38, 3: 0F3A
    pp: int                     # implied prefix, 0: none, 1: 66, 2: F3, 3: F2
    vex_w: int | None           # VEX.W of the VEX form; None if there is no VEX form
    evex_w: int | None          # EVEX.W of the EVEX form; None if there is no EVEX form
    widths: tuple = (128, 256, 512)
    broadcast: bool = False     # memory operand may be a {1toN} broadcast of one element
    tuple_bytes: int | None = None  # disp8*N for tuple types (T1S, T4, ...); None: full vector


def _needs_evex(width: int, vector_regs: Iterable[object], mask: int, zeroing: bool,
                bcst: bool, evex: bool) -> bool:
    return bool(evex or width == 512 or mask or zeroing or bcst
                or any(type(r) is int and r >= 16 for r in vector_regs))


def _evex_reason(width: int, named_regs: dict, mask: int, zeroing: bool, bcst: bool) -> str:
    high = [f"{name}={reg}" for name, reg in named_regs.items() if _is_int(reg) and reg >= 16]
    if high:
        return f"register {high[0]} (>= 16)"
    if width == 512:
        return "width 512"
    if mask or zeroing:
        return f"write mask k{mask}" + (" with zeroing" if zeroing else "")
    if bcst:
        return "broadcast"
    return "evex=True"


def _vector(op: _VectorOp, width: int, *, reg: int, vvvv: int, rm: Operand, names: dict,
            mask: int = 0,
            zeroing: bool = False, bcst: bool = False, evex: bool = False,
            imm: bytes = b"") -> bytes:
    """Encode `op` with VEX if possible, else EVEX.

    names maps the user's operand names to the vector registers (or Mem) among reg/vvvv/rm,
    for validation and error messages; the ModRM.reg field may instead hold an opcode
    extension, a general or a mask register (validated by the caller).
    """
    if width not in op.widths:
        raise EncodingError(f"{op.name} width: {width!r} not supported; expected one of "
                            f"{op.widths}")
    high_register = False
    for name, value in names.items():
        if type(value) is int and 0 <= value <= 31:
            high_register = high_register or value >= 16
        else:
            _check_vreg(f"{op.name} {name}", value, allow_mem=True)
    if type(mask) is not int or not 0 <= mask <= 7:
        _check_kreg(f"{op.name} mask", mask)
    use_evex = evex or high_register or width == 512 or mask or zeroing or bcst
    if use_evex and op.evex_w is None:
        reason = _evex_reason(width, names, mask, zeroing, bcst)
        raise EncodingError(f"{op.name}: {reason} needs EVEX encoding, but {op.name} has only a "
                            f"VEX form (registers 0..15, width <= 256, no mask or broadcast)")
    if not use_evex and op.vex_w is not None:
        return _vex(op.opcode, map_select=op.map_select, pp=op.pp, w=op.vex_w,
                    length=int(width == 256), reg=reg, vvvv=vvvv, rm=rm, imm=imm)
    if zeroing and not mask:
        raise EncodingError(f"{op.name} zeroing: zeroing-masking needs a write mask k1..k7, "
                            f"got mask=0")
    if bcst:
        if not op.broadcast:
            raise EncodingError(f"{op.name} bcst: {op.name} has no broadcast form")
        if not isinstance(rm, Mem):
            raise EncodingError(f"{op.name} bcst: broadcast needs a memory operand, got "
                                f"register {rm!r}")
    disp_scale = op.tuple_bytes or ((4 << op.evex_w) if bcst else width >> 3)
    return _evex(op.opcode, op.map_select, op.pp, op.evex_w, width >> 8, reg, vvvv, rm,
                 mask, zeroing, bcst, disp_scale, imm)


def _op(name: str, opcode: int, map_select: int, pp: int, vex_w: int | None = 0,
        evex_w: int | None = 0, **kwargs: object) -> _VectorOp:
    return _VectorOp(name, opcode, map_select, pp, vex_w, evex_w, **kwargs)


_VMOVUPS_LOAD = _op("vmovups_load", 0x10, 1, 0)
_VMOVUPS_STORE = _op("vmovups_store", 0x11, 1, 0)
_VMOVUPS_RR = _op("vmovups_rr", 0x10, 1, 0)
_VMOVUPS_RR_STORE_FORM = _op("vmovups_rr", 0x11, 1, 0)
_VMOVAPS_RR = _op("vmovaps_rr", 0x28, 1, 0)
_VMOVAPS_RR_STORE_FORM = _op("vmovaps_rr", 0x29, 1, 0)
_VBROADCASTSS = _op("vbroadcastss", 0x18, 2, 1, tuple_bytes=4)
_VPBROADCASTD = _op("vpbroadcastd", 0x58, 2, 1, tuple_bytes=4)
_VPBROADCASTD_GPR = _op("vpbroadcastd_gpr", 0x7C, 2, 1, vex_w=None)
_VMOVSS_LOAD = _op("vmovss_load", 0x10, 1, 2, tuple_bytes=4)
_VMOVSS_STORE = _op("vmovss_store", 0x11, 1, 2, tuple_bytes=4)
_VMOVD_TO_XMM = _op("vmovd_xr", 0x6E, 1, 1, tuple_bytes=4, widths=(128,))
_VMOVD_FROM_XMM = _op("vmovd_rx", 0x7E, 1, 1, tuple_bytes=4, widths=(128,))
_VMASKMOVPS_LOAD = _op("vmaskmovps_load", 0x2C, 2, 1, evex_w=None)
_VMASKMOVPS_STORE = _op("vmaskmovps_store", 0x2E, 2, 1, evex_w=None)


def vmovups_load(dst: int, mem: Mem, width: int, *, mask: int = 0, zeroing: bool = False,
                 evex: bool = False) -> bytes:
    _check_mem("vmovups_load mem", mem)
    return _vector(_VMOVUPS_LOAD, width, reg=dst, vvvv=0, rm=mem, names={"dst": dst},
                   mask=mask, zeroing=zeroing, evex=evex)


def vmovups_store(mem: Mem, src: int, width: int, *, mask: int = 0, evex: bool = False) -> bytes:
    """Store src to mem; with a mask only the selected elements are written (no fault elsewhere)."""
    _check_mem("vmovups_store mem", mem)
    return _vector(_VMOVUPS_STORE, width, reg=src, vvvv=0, rm=mem, names={"src": src},
                   mask=mask, evex=evex)


_VMOVNTPS = _op("vmovntps_store", 0x2B, 1, 0)


def vmovntps_store(mem: Mem, src: int, width: int, *, evex: bool = False) -> bytes:
    """Non-temporal store of src to mem (aligned to width/8 bytes, else #GP): write-combined,
    not kept in the caches; needs an sfence before other threads may rely on the data."""
    _check_mem("vmovntps_store mem", mem)
    return _vector(_VMOVNTPS, width, reg=src, vvvv=0, rm=mem, names={"src": src}, evex=evex)


def _move_rr(load: _VectorOp, store: _VectorOp, dst: int, src: int, width: int, mask: int,
             zeroing: bool, evex: bool) -> bytes:
    _check_vreg(f"{load.name} dst", dst)
    _check_vreg(f"{load.name} src", src)
    vex = not _needs_evex(width, (dst, src), mask, zeroing, False, evex)
    # the store form keeps the extension in VEX.R: 2-byte VEX, as GNU as does
    if vex and src >= 8 > dst:
        return _vector(store, width, reg=src, vvvv=0, rm=dst, names={"dst": dst, "src": src})
    return _vector(load, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, evex=evex)


def vmovups_rr(dst: int, src: int, width: int, *, mask: int = 0, zeroing: bool = False,
               evex: bool = False) -> bytes:
    return _move_rr(_VMOVUPS_RR, _VMOVUPS_RR_STORE_FORM, dst, src, width, mask, zeroing, evex)


def vmovaps_rr(dst: int, src: int, width: int, *, mask: int = 0, zeroing: bool = False,
               evex: bool = False) -> bytes:
    return _move_rr(_VMOVAPS_RR, _VMOVAPS_RR_STORE_FORM, dst, src, width, mask, zeroing, evex)


def vbroadcastss(dst: int, src: Operand, width: int, *, mask: int = 0, zeroing: bool = False,
                 evex: bool = False) -> bytes:
    """Broadcast the float at src (Mem, or element 0 of an xmm register) to every lane of dst."""
    return _vector(_VBROADCASTSS, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, evex=evex)


_VBROADCASTSD = _op("vbroadcastsd", 0x19, 2, 1, evex_w=1, widths=(256, 512), tuple_bytes=8)
_VBROADCASTF128 = _op("vbroadcastf128", 0x1A, 2, 1, evex_w=None, widths=(256,))


def vbroadcastsd(dst: int, src: Operand, width: int, *, mask: int = 0, zeroing: bool = False,
                 evex: bool = False) -> bytes:
    """Broadcast the 64 bits at src (Mem, or element 0 of an xmm register) to every 64-bit
    lane of dst (256/512 bits)."""
    return _vector(_VBROADCASTSD, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, evex=evex)


def vbroadcastf128(dst: int, mem: Mem) -> bytes:
    """ymm dst := the 128 bits at mem in both halves (AVX, VEX only: registers 0..15)."""
    _check_mem("vbroadcastf128 mem", mem)
    return _vector(_VBROADCASTF128, 256, reg=dst, vvvv=0, rm=mem, names={"dst": dst})


def vpbroadcastd(dst: int, src: Operand, width: int, *, mask: int = 0, zeroing: bool = False,
                 evex: bool = False) -> bytes:
    """Broadcast the dword at src (Mem, or element 0 of an xmm register) to every lane of dst."""
    return _vector(_VPBROADCASTD, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, evex=evex)


def vpbroadcastd_gpr(dst: int, src: int, width: int, *, mask: int = 0,
                     zeroing: bool = False) -> bytes:
    """Broadcast the low 32 bits of general register src to every lane of dst (AVX-512)."""
    _check_gpr("vpbroadcastd_gpr src", src)
    return _vector(_VPBROADCASTD_GPR, width, reg=dst, vvvv=0, rm=src, names={"dst": dst},
                   mask=mask, zeroing=zeroing)


def vmovss_load(dst: int, mem: Mem, *, mask: int = 0, zeroing: bool = False,
                evex: bool = False) -> bytes:
    """dst := the float at mem, upper elements zeroed."""
    _check_mem("vmovss_load mem", mem)
    return _vector(_VMOVSS_LOAD, 128, reg=dst, vvvv=0, rm=mem, names={"dst": dst},
                   mask=mask, zeroing=zeroing, evex=evex)


def vmovss_store(mem: Mem, src: int, *, mask: int = 0, evex: bool = False) -> bytes:
    _check_mem("vmovss_store mem", mem)
    return _vector(_VMOVSS_STORE, 128, reg=src, vvvv=0, rm=mem, names={"src": src},
                   mask=mask, evex=evex)


_VMOVSD_LOAD = _op("vmovsd_load", 0x10, 1, 3, evex_w=1, tuple_bytes=8)
_VMOVSD_STORE = _op("vmovsd_store", 0x11, 1, 3, evex_w=1, tuple_bytes=8)


def vmovsd_load(dst: int, mem: Mem, *, evex: bool = False) -> bytes:
    """dst := the 64 bits at mem (a double, or two floats), upper elements zeroed."""
    _check_mem("vmovsd_load mem", mem)
    return _vector(_VMOVSD_LOAD, 128, reg=dst, vvvv=0, rm=mem, names={"dst": dst}, evex=evex)


def vmovsd_store(mem: Mem, src: int, *, evex: bool = False) -> bytes:
    """The low 64 bits of xmm src (a double, or two floats) to mem."""
    _check_mem("vmovsd_store mem", mem)
    return _vector(_VMOVSD_STORE, 128, reg=src, vvvv=0, rm=mem, names={"src": src}, evex=evex)


# single lanes of an xmm: a float into or out of lane i, 64 bits into or out of the upper half
_VINSERTPS = _op("vinsertps", 0x21, 3, 1, widths=(128,), tuple_bytes=4)
_VEXTRACTPS = _op("vextractps", 0x17, 3, 1, widths=(128,), tuple_bytes=4)
_VMOVHPS_LOAD = _op("vmovhps_load", 0x16, 1, 0, widths=(128,), tuple_bytes=8)
_VMOVHPS_STORE = _op("vmovhps_store", 0x17, 1, 0, widths=(128,), tuple_bytes=8)
_VMOVDDUP = _op("vmovddup", 0x12, 1, 3, evex_w=1, widths=(128,), tuple_bytes=8)


def vinsertps(dst: int, a: int, src: Operand, imm: int) -> bytes:
    """xmm dst := a with lane imm[5:4] replaced by the float at src (Mem) or by lane imm[7:6]
    of xmm src, then the lanes set in imm[3:0] zeroed."""
    return _vector(_VINSERTPS, 128, reg=dst, vvvv=a, rm=src,
                   names={"dst": dst, "a": a, "src": src}, imm=_imm8("vinsertps imm", imm))


def vextractps(mem: Mem, src: int, lane: int) -> bytes:
    """The float in lane 0..3 of xmm src to mem."""
    _check_mem("vextractps mem", mem)
    if type(lane) is not int or not 0 <= lane <= 3:
        raise EncodingError(f"vextractps lane: {lane!r} is not 0..3")
    return _vector(_VEXTRACTPS, 128, reg=src, vvvv=0, rm=mem, names={"src": src},
                   imm=bytes((lane,)))


def vmovhps_load(dst: int, a: int, mem: Mem) -> bytes:
    """xmm dst := the low 64 bits of a, then the 64 bits at mem."""
    _check_mem("vmovhps_load mem", mem)
    return _vector(_VMOVHPS_LOAD, 128, reg=dst, vvvv=a, rm=mem, names={"dst": dst, "a": a})


def vmovhps_store(mem: Mem, src: int) -> bytes:
    """The upper 64 bits of xmm src to mem."""
    _check_mem("vmovhps_store mem", mem)
    return _vector(_VMOVHPS_STORE, 128, reg=src, vvvv=0, rm=mem, names={"src": src})


def vmovddup(dst: int, mem: Mem) -> bytes:
    """xmm dst := the 64 bits at mem, twice."""
    _check_mem("vmovddup mem", mem)
    return _vector(_VMOVDDUP, 128, reg=dst, vvvv=0, rm=mem, names={"dst": dst})


def vmovd_xr(dst: int, src: int, *, evex: bool = False) -> bytes:
    """xmm dst := zero-extended low 32 bits of general register src."""
    _check_gpr("vmovd_xr src", src)
    return _vector(_VMOVD_TO_XMM, 128, reg=dst, vvvv=0, rm=src, names={"dst": dst}, evex=evex)


def vmovd_rx(dst: int, src: int, *, evex: bool = False) -> bytes:
    """General register dst := element 0 of xmm src (zero-extended to 64 bits)."""
    _check_gpr("vmovd_rx dst", dst)
    return _vector(_VMOVD_FROM_XMM, 128, reg=src, vvvv=0, rm=dst, names={"src": src}, evex=evex)


def vmaskmovps_load(dst: int, maskreg: int, mem: Mem, width: int) -> bytes:
    """AVX masked load: elements whose mask sign bit is clear read as 0 and do not fault."""
    _check_mem("vmaskmovps_load mem", mem)
    return _vector(_VMASKMOVPS_LOAD, width, reg=dst, vvvv=maskreg, rm=mem,
                   names={"dst": dst, "maskreg": maskreg})


def vmaskmovps_store(mem: Mem, maskreg: int, src: int, width: int) -> bytes:
    """AVX masked store: only elements whose mask sign bit is set are written."""
    _check_mem("vmaskmovps_store mem", mem)
    return _vector(_VMASKMOVPS_STORE, width, reg=src, vvvv=maskreg, rm=mem,
                   names={"src": src, "maskreg": maskreg})


# ---- three-operand arithmetic: dst := a op b (b a register or Mem, optionally broadcast)

def _three_operand(op: _VectorOp) -> Encoder:
    def encode(dst: int, a: int, b: Operand, width: int, *, mask: int = 0, zeroing: bool = False,
               bcst: bool = False, evex: bool = False) -> bytes:
        return _vector(op, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                       mask=mask, zeroing=zeroing, bcst=bcst, evex=evex)
    encode.__name__ = encode.__qualname__ = op.name
    encode.__doc__ = (f"{op.name} dst, a, b (b: vector register or Mem; bcst=True broadcasts "
                      f"one element).")
    return encode


def _arith(name: str, opcode: int, map_select: int = 1, pp: int = 0, vex_w: int | None = 0,
           evex_w: int | None = 0, **kwargs: object) -> Encoder:
    return _three_operand(_op(name, opcode, map_select, pp, vex_w, evex_w, broadcast=True,
                              **kwargs))


vaddps = _arith("vaddps", 0x58)
vmulps = _arith("vmulps", 0x59)
vsubps = _arith("vsubps", 0x5C)
vminps = _arith("vminps", 0x5D)
vdivps = _arith("vdivps", 0x5E)
vmaxps = _arith("vmaxps", 0x5F)
vandps = _arith("vandps", 0x54)
vandnps = _arith("vandnps", 0x55)
vorps = _arith("vorps", 0x56)
vxorps = _arith("vxorps", 0x57)
vunpcklps = _arith("vunpcklps", 0x14)
vunpckhps = _arith("vunpckhps", 0x15)
vunpcklpd = _arith("vunpcklpd", 0x14, pp=1, evex_w=1)
vunpckhpd = _arith("vunpckhpd", 0x15, pp=1, evex_w=1)
vfmadd132ps = _arith("vfmadd132ps", 0x98, map_select=2, pp=1)
vfmadd213ps = _arith("vfmadd213ps", 0xA8, map_select=2, pp=1)
vfmadd231ps = _arith("vfmadd231ps", 0xB8, map_select=2, pp=1)
vfnmadd213ps = _arith("vfnmadd213ps", 0xAC, map_select=2, pp=1)
vfnmadd231ps = _arith("vfnmadd231ps", 0xBC, map_select=2, pp=1)
vfmaddsub213ps = _arith("vfmaddsub213ps", 0xA6, map_select=2, pp=1)
vfmaddsub213ps.__doc__ = ("vfmaddsub213ps dst, a, b: dst := a * dst - b in the even lanes, "
                          "a * dst + b in the odd ones.")
vpaddd = _arith("vpaddd", 0xFE, pp=1)
vpsubd = _arith("vpsubd", 0xFA, pp=1)
vpermps = _arith("vpermps", 0x16, map_select=2, pp=1, widths=(256, 512))
vpermps.__doc__ = "vpermps dst, indices, table: dst[i] = table[indices[i]] (256/512 bits)."
vpermt2ps = _arith("vpermt2ps", 0x7F, map_select=2, pp=1, vex_w=None)
vpermt2ps.__doc__ = ("vpermt2ps dst, indices, table2: dst[i] = (dst ++ table2)[indices[i]] "
                     "(AVX-512; dst is the first table and is overwritten).")
vpermi2ps = _arith("vpermi2ps", 0x77, map_select=2, pp=1, vex_w=None)
vpermi2ps.__doc__ = ("vpermi2ps dst, table1, table2: dst[i] = (table1 ++ table2)[dst[i]] "
                     "(AVX-512; dst holds the indices and is overwritten).")
vscalefps = _arith("vscalefps", 0x2C, map_select=2, pp=1, vex_w=None)
vscalefps.__doc__ = "vscalefps dst, a, b: dst = a * 2**floor(b) (AVX-512)."

_VBLENDMPS = _op("vblendmps", 0x65, 2, 1, vex_w=None, broadcast=True)


def vblendmps(dst: int, a: int, b: Operand, width: int, mask: int, *, zeroing: bool = False,
              bcst: bool = False) -> bytes:
    """dst[i] := b[i] where mask bit i is set, else a[i] (AVX-512)."""
    return _vector(_VBLENDMPS, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   mask=mask, zeroing=zeroing, bcst=bcst)


# ---- two-operand (dst := op(src)) and immediate forms

def _two_operand(op: _VectorOp) -> Encoder:
    def encode(dst: int, src: Operand, width: int, *, mask: int = 0, zeroing: bool = False,
               bcst: bool = False, evex: bool = False) -> bytes:
        return _vector(op, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                       mask=mask, zeroing=zeroing, bcst=bcst, evex=evex)
    encode.__name__ = encode.__qualname__ = op.name
    encode.__doc__ = f"{op.name} dst, src (src: vector register or Mem)."
    return encode


vcvtps2dq = _two_operand(_op("vcvtps2dq", 0x5B, 1, 1, broadcast=True))
vcvttps2dq = _two_operand(_op("vcvttps2dq", 0x5B, 1, 2, broadcast=True))
vcvtdq2ps = _two_operand(_op("vcvtdq2ps", 0x5B, 1, 0, broadcast=True))
vsqrtps = _two_operand(_op("vsqrtps", 0x51, 1, 0, broadcast=True))
vrcp14ps = _two_operand(_op("vrcp14ps", 0x4C, 2, 1, vex_w=None, broadcast=True))

_VROUNDPS = _op("vroundps", 0x08, 3, 1, evex_w=None)
_VRNDSCALEPS = _op("vrndscaleps", 0x08, 3, 1, vex_w=None, broadcast=True)


def vroundps(dst: int, src: Operand, imm: int, width: int) -> bytes:
    """AVX round: imm bits 1:0 mode (0 nearest, 1 down, 2 up, 3 truncate), bit 3 no precision
    exception."""
    return _vector(_VROUNDPS, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   imm=_imm8("vroundps imm", imm))


def vrndscaleps(dst: int, src: Operand, imm: int, width: int, *, mask: int = 0,
                zeroing: bool = False,
                bcst: bool = False) -> bytes:
    """AVX-512 round to 2**-imm[7:4] precision; imm[3:0] as in vroundps."""
    return _vector(_VRNDSCALEPS, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, bcst=bcst, imm=_imm8("vrndscaleps imm", imm))


def _shift_imm(op: _VectorOp, ext: int) -> Encoder:
    def encode(dst: int, src: Operand, n: int, width: int, *, mask: int = 0, zeroing: bool = False,
               bcst: bool = False, evex: bool = False) -> bytes:
        # the VEX form only shifts a register; the memory-source form is EVEX only
        return _vector(op, width, reg=ext, vvvv=dst, rm=src, names={"dst": dst, "src": src},
                       mask=mask, zeroing=zeroing, bcst=bcst, evex=evex or isinstance(src, Mem),
                       imm=_imm8(f"{op.name} n", n))
    encode.__name__ = encode.__qualname__ = op.name
    encode.__doc__ = (f"{op.name} dst, src, n: shift each dword of src by n bits (n >= 32 "
                      f"gives 0 or the sign).")
    return encode


vpslld_ri = _shift_imm(_op("vpslld_ri", 0x72, 1, 1, broadcast=True), 6)
vpsrld_ri = _shift_imm(_op("vpsrld_ri", 0x72, 1, 1, broadcast=True), 2)
vpsrad_ri = _shift_imm(_op("vpsrad_ri", 0x72, 1, 1, broadcast=True), 4)


def _three_operand_imm(op: _VectorOp) -> Encoder:
    def encode(dst: int, a: int, b: Operand, imm: int, width: int, *, mask: int = 0,
               zeroing: bool = False, bcst: bool = False, evex: bool = False) -> bytes:
        return _vector(op, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                       mask=mask, zeroing=zeroing, bcst=bcst, evex=evex,
                       imm=_imm8(f"{op.name} imm", imm))
    encode.__name__ = encode.__qualname__ = op.name
    encode.__doc__ = f"{op.name} dst, a, b, imm (b: vector register or Mem)."
    return encode


vshufps = _three_operand_imm(_op("vshufps", 0xC6, 1, 0, broadcast=True))
vshuff32x4 = _three_operand_imm(_op("vshuff32x4", 0x23, 3, 1, vex_w=None, broadcast=True,
                                    widths=(256, 512)))
vshuff64x2 = _three_operand_imm(_op("vshuff64x2", 0x23, 3, 1, vex_w=None, evex_w=1,
                                    broadcast=True, widths=(256, 512)))

vblendps = _three_operand_imm(_op("vblendps", 0x0C, 3, 1, evex_w=None, widths=(128, 256)))
vblendps.__doc__ = ("vblendps dst, a, b, imm, width: dst[i] := b[i] where bit i of imm is set, "
                    "else a[i] (AVX, VEX only: registers 0..15, width <= 256).")

_VPERM2F128 = _op("vperm2f128", 0x06, 3, 1, evex_w=None, widths=(256,))


def vperm2f128(dst: int, a: int, b: Operand, imm: int) -> bytes:
    """AVX 256-bit: each 128-bit half of dst picks a half of a or b (or zero) by imm."""
    return _vector(_VPERM2F128, 256, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   imm=_imm8("vperm2f128 imm", imm))


_VINSERTF128 = _op("vinsertf128", 0x18, 3, 1, widths=(256, 512), tuple_bytes=16)
_VINSERTF64X4 = _op("vinsertf64x4", 0x1A, 3, 1, vex_w=None, evex_w=1, widths=(512,), tuple_bytes=32)
_VEXTRACTF128 = _op("vextractf128", 0x19, 3, 1, widths=(256, 512), tuple_bytes=16)
_VEXTRACTF64X4 = _op("vextractf64x4", 0x1B, 3, 1, vex_w=None, evex_w=1, widths=(512,),
                     tuple_bytes=32)


def vinsertf128(dst: int, a: int, b: Operand, imm: int) -> bytes:
    """ymm dst := a with its 128-bit half imm replaced by xmm/m128 b (EVEX vinsertf32x4 for
    registers >= 16)."""
    return _vector(_VINSERTF128, 256, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   imm=_imm8("vinsertf128 imm", imm))


def vinsertf32x4(dst: int, a: int, b: Operand, imm: int, width: int, *, mask: int = 0,
                 zeroing: bool = False) -> bytes:
    """dst := a with its 128-bit lane imm replaced by xmm/m128 b (AVX-512)."""
    return _vector(_VINSERTF128, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   mask=mask, zeroing=zeroing, evex=True, imm=_imm8("vinsertf32x4 imm", imm))


def vinsertf64x4(dst: int, a: int, b: Operand, imm: int, *, mask: int = 0,
                 zeroing: bool = False) -> bytes:
    """zmm dst := a with its 256-bit half imm replaced by ymm/m256 b (AVX-512)."""
    return _vector(_VINSERTF64X4, 512, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   mask=mask, zeroing=zeroing, imm=_imm8("vinsertf64x4 imm", imm))


def vextractf128(dst: Operand, src: int, imm: int) -> bytes:
    """xmm/m128 dst := 128-bit half imm of ymm src (EVEX vextractf32x4 for registers >= 16)."""
    return _vector(_VEXTRACTF128, 256, reg=src, vvvv=0, rm=dst, names={"dst": dst, "src": src},
                   imm=_imm8("vextractf128 imm", imm))


def vextractf32x4(dst: Operand, src: int, imm: int, width: int, *, mask: int = 0,
                  zeroing: bool = False) -> bytes:
    """xmm/m128 dst := 128-bit lane imm of src (AVX-512; zeroing only for a register dst)."""
    if zeroing and isinstance(dst, Mem):
        raise EncodingError("vextractf32x4 zeroing: a memory destination only allows merge masking")
    return _vector(_VEXTRACTF128, width, reg=src, vvvv=0, rm=dst, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, evex=True, imm=_imm8("vextractf32x4 imm", imm))


def vextractf64x4(dst: Operand, src: int, imm: int, *, mask: int = 0,
                  zeroing: bool = False) -> bytes:
    """ymm/m256 dst := 256-bit half imm of zmm src (AVX-512)."""
    if zeroing and isinstance(dst, Mem):
        raise EncodingError("vextractf64x4 zeroing: a memory destination only allows merge masking")
    return _vector(_VEXTRACTF64X4, 512, reg=src, vvvv=0, rm=dst, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, imm=_imm8("vextractf64x4 imm", imm))


_VBLENDVPS = _op("vblendvps", 0x4A, 3, 1, evex_w=None)


def vblendvps(dst: int, a: int, b: Operand, maskvec: int, width: int) -> bytes:
    """AVX: dst[i] := b[i] where the sign bit of maskvec[i] is set, else a[i]."""
    _check_vreg("vblendvps maskvec", maskvec)
    if maskvec >= 16:
        raise EncodingError(f"vblendvps maskvec: register {maskvec} (>= 16) has no VEX "
                            f"encoding; expected 0..15")
    return _vector(_VBLENDVPS, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   imm=bytes((maskvec << 4,)))


# ---- compares: the VEX form writes a vector of all-ones/zeros, the EVEX form a mask register

def _compare(op: _VectorOp, with_predicate: bool) -> Encoder:
    def encode(dst: int, a: int, b: Operand, *args, mask: int = 0, bcst: bool = False,
               evex: bool = False) -> bytes:
        if with_predicate:
            pred, width = args
            imm = _imm(f"{op.name} pred", pred, 8, signed=False)
            if pred > 31:
                raise EncodingError(f"{op.name} pred: {pred} is not a predicate; expected 0..31")
        else:
            (width,) = args
            imm = b""
        _check_vreg(f"{op.name} a", a)
        _check_vreg(f"{op.name} b", b, allow_mem=True)
        names = {"a": a, "b": b}
        if _needs_evex(width, (a, b), mask, False, bcst, evex):
            _check_kreg(f"{op.name} dst", dst)
            return _vector(op, width, reg=dst, vvvv=a, rm=b, names=names, mask=mask, bcst=bcst,
                           evex=True, imm=imm)
        if _is_int(dst) and dst >= 16:
            raise EncodingError(f"{op.name} dst: vector register {dst} (>= 16) is a VEX "
                                f"destination; "
                                f"expected 0..15 (the EVEX form writes a mask register)")
        return _vector(op, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, **names}, imm=imm)
    encode.__name__ = encode.__qualname__ = op.name
    return encode


vcmpps = _compare(_op("vcmpps", 0xC2, 1, 0, broadcast=True), with_predicate=True)
vcmpps.__doc__ = ("vcmpps dst, a, b, pred, width: VEX form (width <= 256, registers < 16, no mask) "
                  "sets vector dst lanes to all-ones where `a pred b`; the EVEX form (width 512, "
                  "registers >= 16, mask, bcst or evex=True) sets bits of mask register dst. "
                  "pred: 0 eq, 1 lt, 2 le, 3 unord, 4 neq, 5 nlt, 6 nle, 7 ord "
                  "(+16: signalling/quiet swap).")
vpcmpeqd = _compare(_op("vpcmpeqd", 0x76, 1, 1, broadcast=True), with_predicate=False)
vpcmpeqd.__doc__ = ("vpcmpeqd dst, a, b, width: dword equality (vector dst with VEX, mask dst "
                    "with EVEX).")
vpcmpgtd = _compare(_op("vpcmpgtd", 0x66, 1, 1, broadcast=True), with_predicate=False)
vpcmpgtd.__doc__ = ("vpcmpgtd dst, a, b, width: signed dword a > b (vector dst with VEX, mask "
                    "dst with EVEX).")


# ---------------------------------------------------------------- double precision
# The same encoding classes with the packed-double opcodes: prefix 66 and, in EVEX, W=1, so
# that write masks and embedded broadcasts ({1to8} of a qword) work per 64-bit element.

_VMOVUPD_LOAD = _op("vmovupd_load", 0x10, 1, 1, evex_w=1)
_VMOVUPD_STORE = _op("vmovupd_store", 0x11, 1, 1, evex_w=1)
_VMOVUPD_RR = _op("vmovupd_rr", 0x10, 1, 1, evex_w=1)
_VMOVUPD_RR_STORE_FORM = _op("vmovupd_rr", 0x11, 1, 1, evex_w=1)
_VMOVAPD_RR = _op("vmovapd_rr", 0x28, 1, 1, evex_w=1)
_VMOVAPD_RR_STORE_FORM = _op("vmovapd_rr", 0x29, 1, 1, evex_w=1)
_VMOVNTPD = _op("vmovntpd_store", 0x2B, 1, 1, evex_w=1)
_VMASKMOVPD_LOAD = _op("vmaskmovpd_load", 0x2D, 2, 1, evex_w=None)
_VMASKMOVPD_STORE = _op("vmaskmovpd_store", 0x2F, 2, 1, evex_w=None)
_VPBROADCASTQ = _op("vpbroadcastq", 0x59, 2, 1, evex_w=1, tuple_bytes=8)
_VPBROADCASTQ_GPR = _op("vpbroadcastq_gpr", 0x7C, 2, 1, vex_w=None, evex_w=1)
_VMOVQ_TO_XMM = _op("vmovq_xr", 0x6E, 1, 1, vex_w=1, evex_w=1, tuple_bytes=8, widths=(128,))
_VMOVQ_FROM_XMM = _op("vmovq_rx", 0x7E, 1, 1, vex_w=1, evex_w=1, tuple_bytes=8, widths=(128,))


def vmovupd_load(dst: int, mem: Mem, width: int, *, mask: int = 0, zeroing: bool = False,
                 evex: bool = False) -> bytes:
    """dst := the doubles at mem; with a mask, unselected elements are not read (no fault)."""
    _check_mem("vmovupd_load mem", mem)
    return _vector(_VMOVUPD_LOAD, width, reg=dst, vvvv=0, rm=mem, names={"dst": dst},
                   mask=mask, zeroing=zeroing, evex=evex)


def vmovupd_store(mem: Mem, src: int, width: int, *, mask: int = 0, evex: bool = False) -> bytes:
    """Store the doubles of src to mem; with a mask only the selected elements are written."""
    _check_mem("vmovupd_store mem", mem)
    return _vector(_VMOVUPD_STORE, width, reg=src, vvvv=0, rm=mem, names={"src": src},
                   mask=mask, evex=evex)


def vmovupd_rr(dst: int, src: int, width: int, *, mask: int = 0, zeroing: bool = False,
               evex: bool = False) -> bytes:
    return _move_rr(_VMOVUPD_RR, _VMOVUPD_RR_STORE_FORM, dst, src, width, mask, zeroing, evex)


def vmovapd_rr(dst: int, src: int, width: int, *, mask: int = 0, zeroing: bool = False,
               evex: bool = False) -> bytes:
    return _move_rr(_VMOVAPD_RR, _VMOVAPD_RR_STORE_FORM, dst, src, width, mask, zeroing, evex)


def vmovntpd_store(mem: Mem, src: int, width: int, *, evex: bool = False) -> bytes:
    """Non-temporal store of the doubles of src (mem aligned to width/8 bytes, else #GP)."""
    _check_mem("vmovntpd_store mem", mem)
    return _vector(_VMOVNTPD, width, reg=src, vvvv=0, rm=mem, names={"src": src}, evex=evex)


def vmaskmovpd_load(dst: int, maskreg: int, mem: Mem, width: int) -> bytes:
    """AVX masked load of doubles: elements whose mask qword has its sign bit clear read as 0
    and do not fault."""
    _check_mem("vmaskmovpd_load mem", mem)
    return _vector(_VMASKMOVPD_LOAD, width, reg=dst, vvvv=maskreg, rm=mem,
                   names={"dst": dst, "maskreg": maskreg})


def vmaskmovpd_store(mem: Mem, maskreg: int, src: int, width: int) -> bytes:
    """AVX masked store of doubles: only elements whose mask qword has its sign bit set are
    written."""
    _check_mem("vmaskmovpd_store mem", mem)
    return _vector(_VMASKMOVPD_STORE, width, reg=src, vvvv=maskreg, rm=mem,
                   names={"src": src, "maskreg": maskreg})


def vpbroadcastq(dst: int, src: Operand, width: int, *, mask: int = 0, zeroing: bool = False,
                 evex: bool = False) -> bytes:
    """Broadcast the qword at src (Mem, or element 0 of an xmm register) to every lane."""
    return _vector(_VPBROADCASTQ, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, evex=evex)


def vpbroadcastq_gpr(dst: int, src: int, width: int, *, mask: int = 0,
                     zeroing: bool = False) -> bytes:
    """Broadcast general register src to every 64-bit lane of dst (AVX-512)."""
    _check_gpr("vpbroadcastq_gpr src", src)
    return _vector(_VPBROADCASTQ_GPR, width, reg=dst, vvvv=0, rm=src, names={"dst": dst},
                   mask=mask, zeroing=zeroing)


def vmovq_xr(dst: int, src: int, *, evex: bool = False) -> bytes:
    """xmm dst := general register src (upper elements zeroed)."""
    _check_gpr("vmovq_xr src", src)
    return _vector(_VMOVQ_TO_XMM, 128, reg=dst, vvvv=0, rm=src, names={"dst": dst}, evex=evex)


def vmovq_rx(dst: int, src: int, *, evex: bool = False) -> bytes:
    """General register dst := qword element 0 of xmm src."""
    _check_gpr("vmovq_rx dst", dst)
    return _vector(_VMOVQ_FROM_XMM, 128, reg=src, vvvv=0, rm=dst, names={"src": src}, evex=evex)


def _arith_pd(name: str, opcode: int, map_select: int = 1, vex_w: int | None = 0,
              **kwargs: object) -> Encoder:
    return _arith(name, opcode, map_select=map_select, pp=1, vex_w=vex_w, evex_w=1, **kwargs)


vaddpd = _arith_pd("vaddpd", 0x58)
vmulpd = _arith_pd("vmulpd", 0x59)
vsubpd = _arith_pd("vsubpd", 0x5C)
vminpd = _arith_pd("vminpd", 0x5D)
vdivpd = _arith_pd("vdivpd", 0x5E)
vmaxpd = _arith_pd("vmaxpd", 0x5F)
vandpd = _arith_pd("vandpd", 0x54)
vandnpd = _arith_pd("vandnpd", 0x55)
vorpd = _arith_pd("vorpd", 0x56)
vxorpd = _arith_pd("vxorpd", 0x57)
vfmadd132pd = _arith_pd("vfmadd132pd", 0x98, map_select=2, vex_w=1)
vfmadd213pd = _arith_pd("vfmadd213pd", 0xA8, map_select=2, vex_w=1)
vfmadd231pd = _arith_pd("vfmadd231pd", 0xB8, map_select=2, vex_w=1)
vfnmadd213pd = _arith_pd("vfnmadd213pd", 0xAC, map_select=2, vex_w=1)
vfnmadd231pd = _arith_pd("vfnmadd231pd", 0xBC, map_select=2, vex_w=1)
vfmaddsub213pd = _arith_pd("vfmaddsub213pd", 0xA6, map_select=2, vex_w=1)
vfmaddsub213pd.__doc__ = ("vfmaddsub213pd dst, a, b: dst := a * dst - b in the even lanes, "
                          "a * dst + b in the odd ones.")
vpaddq = _arith_pd("vpaddq", 0xD4)
vpsubq = _arith_pd("vpsubq", 0xFB)
vpermt2pd = _arith_pd("vpermt2pd", 0x7F, map_select=2, vex_w=None)
vpermt2pd.__doc__ = ("vpermt2pd dst, indices, table2: dst[i] = (dst ++ table2)[indices[i]] "
                     "(AVX-512, 64-bit elements; dst is the first table and is overwritten).")
vscalefpd = _arith_pd("vscalefpd", 0x2C, map_select=2, vex_w=None)
vscalefpd.__doc__ = "vscalefpd dst, a, b: dst = a * 2**floor(b) (AVX-512)."

_VBLENDMPD = _op("vblendmpd", 0x65, 2, 1, vex_w=None, evex_w=1, broadcast=True)


def vblendmpd(dst: int, a: int, b: Operand, width: int, mask: int, *, zeroing: bool = False,
              bcst: bool = False) -> bytes:
    """dst[i] := b[i] where mask bit i is set, else a[i], 64-bit elements (AVX-512)."""
    return _vector(_VBLENDMPD, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   mask=mask, zeroing=zeroing, bcst=bcst)


vshufpd = _three_operand_imm(_op("vshufpd", 0xC6, 1, 1, evex_w=1, broadcast=True))
vshufpd.__doc__ = ("vshufpd dst, a, b, imm: in each 128-bit lane L, dst = (a[2L + imm bit], "
                   "b[2L + next imm bit]).")
vblendpd = _three_operand_imm(_op("vblendpd", 0x0D, 3, 1, evex_w=None, widths=(128, 256)))
vblendpd.__doc__ = ("vblendpd dst, a, b, imm, width: dst[i] := b[i] where bit i of imm is set, "
                    "else a[i] (AVX, VEX only).")

_VBLENDVPD = _op("vblendvpd", 0x4B, 3, 1, evex_w=None)


def vblendvpd(dst: int, a: int, b: Operand, maskvec: int, width: int) -> bytes:
    """AVX: dst[i] := b[i] where the sign bit of qword maskvec[i] is set, else a[i]."""
    _check_vreg("vblendvpd maskvec", maskvec)
    if maskvec >= 16:
        raise EncodingError(f"vblendvpd maskvec: register {maskvec} (>= 16) has no VEX "
                            f"encoding; expected 0..15")
    return _vector(_VBLENDVPD, width, reg=dst, vvvv=a, rm=b, names={"dst": dst, "a": a, "b": b},
                   imm=bytes((maskvec << 4,)))


_VROUNDPD = _op("vroundpd", 0x09, 3, 1, evex_w=None)
_VRNDSCALEPD = _op("vrndscalepd", 0x09, 3, 1, vex_w=None, evex_w=1, broadcast=True)


def vroundpd(dst: int, src: Operand, imm: int, width: int) -> bytes:
    """AVX round of doubles; imm as in vroundps."""
    return _vector(_VROUNDPD, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   imm=_imm8("vroundpd imm", imm))


def vrndscalepd(dst: int, src: Operand, imm: int, width: int, *, mask: int = 0,
                zeroing: bool = False, bcst: bool = False) -> bytes:
    """AVX-512 round of doubles to 2**-imm[7:4] precision; imm[3:0] as in vroundps."""
    return _vector(_VRNDSCALEPD, width, reg=dst, vvvv=0, rm=src, names={"dst": dst, "src": src},
                   mask=mask, zeroing=zeroing, bcst=bcst, imm=_imm8("vrndscalepd imm", imm))


def _shift_imm_q(op: _VectorOp, ext: int) -> Encoder:
    encode = _shift_imm(op, ext)
    encode.__doc__ = (f"{op.name} dst, src, n: shift each qword of src by n bits (n >= 64 "
                      f"gives 0 or the sign).")
    return encode


vpsllq_ri = _shift_imm_q(_op("vpsllq_ri", 0x73, 1, 1, evex_w=1, broadcast=True), 6)
vpsrlq_ri = _shift_imm_q(_op("vpsrlq_ri", 0x73, 1, 1, evex_w=1, broadcast=True), 2)

vcmppd = _compare(_op("vcmppd", 0xC2, 1, 1, evex_w=1, broadcast=True), with_predicate=True)
vcmppd.__doc__ = ("vcmppd dst, a, b, pred, width: vcmpps for doubles (VEX: vector dst with "
                  "all-ones qwords; EVEX: mask register dst, one bit a qword).")
vpcmpeqq = _compare(_op("vpcmpeqq", 0x29, 2, 1, evex_w=1, broadcast=True), with_predicate=False)
vpcmpeqq.__doc__ = "vpcmpeqq dst, a, b, width: qword equality (vector dst / mask dst)."
vpcmpgtq = _compare(_op("vpcmpgtq", 0x37, 2, 1, evex_w=1, broadcast=True), with_predicate=False)
vpcmpgtq.__doc__ = "vpcmpgtq dst, a, b, width: signed qword a > b (vector dst / mask dst)."
