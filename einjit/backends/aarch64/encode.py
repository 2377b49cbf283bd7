"""A64 instruction encoders: pure functions that return one 32-bit instruction word.

Each ARM ARM encoding class has one private field packer; the public functions name the
instruction, check every operand and raise EncodingError naming the operand that does not fit,
so a bad operand never turns into a silently wrong word. Base instructions are the 64-bit (X)
forms. General registers are ints 0..31 where 31 is SP or XZR as the class defines; vector
registers are ints 0..31. Offsets of loads/stores are in bytes; branch offsets are in bytes
relative to the branch itself.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from einjit.errors import EncodingError

SP = 31
XZR = 31
LR = 30


class Reg(int):
    """A general register, marked so where a plain int would mean an immediate.

    Used for the post-index operand of ld1/st1/ld1r/ld1_lane/st1_lane: ``post=16`` is
    "advance by 16 bytes", ``post=Reg(16)`` is "advance by x16".
    """


# --------------------------------------------------------------------------------------------
# operand checks

def _integer(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise EncodingError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise EncodingError(f"{name} must be an integer, got {value!r}") from None


def _gpr(name: str, value: object) -> int:
    reg = _integer(name, value)
    if not 0 <= reg <= 31:
        raise EncodingError(f"{name} must be a general register 0..31 (31 = sp/xzr), got {reg}")
    return reg


def _vreg(name: str, value: object) -> int:
    reg = _integer(name, value)
    if not 0 <= reg <= 31:
        raise EncodingError(f"{name} must be a vector register 0..31, got {reg}")
    return reg


def _unsigned(name: str, value: object, bits: int, scale: int = 1) -> int:
    """Field of `bits` bits holding value/scale, 0 <= value/scale < 2**bits."""
    number = _integer(name, value)
    if number % scale:
        raise EncodingError(f"{name} = {number} must be a multiple of {scale}")
    high = ((1 << bits) - 1) * scale
    if not 0 <= number <= high:
        raise EncodingError(f"{name} = {number} out of range 0..{high}")
    return number // scale


def _signed(name: str, value: object, bits: int, scale: int = 1) -> int:
    """Two's complement field of `bits` bits holding value/scale."""
    number = _integer(name, value)
    if number % scale:
        raise EncodingError(f"{name} = {number} must be a multiple of {scale}")
    low, high = -(1 << (bits - 1)) * scale, ((1 << (bits - 1)) - 1) * scale
    if not low <= number <= high:
        raise EncodingError(f"{name} = {number} out of range {low}..{high}")
    return (number // scale) & ((1 << bits) - 1)


def _choice(name: str, value: object, table: Mapping) -> Any:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise EncodingError(f"{name} must be one of {', '.join(map(repr, table))}, "
                            f"got {value!r}") from None


# Vector arrangement -> (Q, size)
_ARRANGEMENTS = {"8b": (0, 0), "16b": (1, 0), "4h": (0, 1), "8h": (1, 1),
                 "2s": (0, 2), "4s": (1, 2), "1d": (0, 3), "2d": (1, 3)}
_FP_ARRS = ("2s", "4s", "2d")
_INT_ARRS = ("8b", "16b", "4h", "8h", "2s", "4s", "2d")
_BYTE_ARRS = ("8b", "16b")
# Element size letter -> log2 of its bytes
_ELEMENTS = {"b": 0, "h": 1, "s": 2, "d": 3}
# Scalar FP/SIMD register size letter -> bytes
_SCALAR_BYTES = {"b": 1, "h": 2, "s": 4, "d": 8, "q": 16}
_FP_TYPES = {"s": 0, "d": 1}    # ftype field of scalar FP instructions


def _arrangement(arr: str, allowed: Collection[str]) -> tuple[int, int]:
    if arr not in allowed:
        raise EncodingError(f"arrangement must be one of {', '.join(allowed)}, got {arr!r}")
    return _ARRANGEMENTS[arr]


def _fp_arrangement(arr: str) -> tuple[int, int]:
    """(Q, sz) of a floating-point vector arrangement."""
    q, size = _arrangement(arr, _FP_ARRS)
    return q, size - 2


def _fp_type(size: str) -> int:
    return _choice("size", size, _FP_TYPES)


# --------------------------------------------------------------------------------------------
# base: add/sub (immediate, shifted register), logical, moves, shifts, multiply

def _addsub_imm(base: int, rd: int, rn: int, imm: int, shift: int) -> int:
    sh = _choice("shift", shift, {0: 0, 12: 1})
    return (base | sh << 22 | _unsigned("imm", imm, 12) << 10
            | _gpr("rn", rn) << 5 | _gpr("rd", rd))


def add_imm(rd: int, rn: int, imm: int, shift: int = 0) -> int:
    """add xd|sp, xn|sp, #imm{, lsl #12}"""
    return _addsub_imm(0x91000000, rd, rn, imm, shift)


def adds_imm(rd: int, rn: int, imm: int, shift: int = 0) -> int:
    """adds xd, xn|sp, #imm{, lsl #12}"""
    return _addsub_imm(0xB1000000, rd, rn, imm, shift)


def sub_imm(rd: int, rn: int, imm: int, shift: int = 0) -> int:
    """sub xd|sp, xn|sp, #imm{, lsl #12}"""
    return _addsub_imm(0xD1000000, rd, rn, imm, shift)


def subs_imm(rd: int, rn: int, imm: int, shift: int = 0) -> int:
    """subs xd, xn|sp, #imm{, lsl #12}"""
    return _addsub_imm(0xF1000000, rd, rn, imm, shift)


def cmp_imm(rn: int, imm: int, shift: int = 0) -> int:
    """cmp xn|sp, #imm{, lsl #12}"""
    return subs_imm(XZR, rn, imm, shift)


def cmn_imm(rn: int, imm: int, shift: int = 0) -> int:
    """cmn xn|sp, #imm{, lsl #12}"""
    return adds_imm(XZR, rn, imm, shift)


def mov_sp(rd: int, rn: int) -> int:
    """mov xd|sp, xn|sp (add #0): the register move that can name sp."""
    return add_imm(rd, rn, 0)


def _shifted_register(base: int, rd: int, rn: int, rm: int, lsl: int) -> int:
    """Add/sub and logical (shifted register) share this field layout; only lsl is used."""
    return (base | _gpr("rm", rm) << 16 | _unsigned("lsl", lsl, 6) << 10
            | _gpr("rn", rn) << 5 | _gpr("rd", rd))


def add_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """add xd, xn, xm{, lsl #lsl} (31 = xzr)"""
    return _shifted_register(0x8B000000, rd, rn, rm, lsl)


def adds_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """adds xd, xn, xm{, lsl #lsl} (31 = xzr)"""
    return _shifted_register(0xAB000000, rd, rn, rm, lsl)


def sub_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """sub xd, xn, xm{, lsl #lsl} (31 = xzr)"""
    return _shifted_register(0xCB000000, rd, rn, rm, lsl)


def subs_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """subs xd, xn, xm{, lsl #lsl} (31 = xzr)"""
    return _shifted_register(0xEB000000, rd, rn, rm, lsl)


def cmp_reg(rn: int, rm: int, lsl: int = 0) -> int:
    """cmp xn, xm{, lsl #lsl}"""
    return subs_reg(XZR, rn, rm, lsl)


def _addsub_ext(base: int, rd: int, rn: int, rm: int, lsl: int) -> int:
    amount = _integer("lsl", lsl)
    if not 0 <= amount <= 4:
        raise EncodingError(f"lsl = {amount} out of range 0..4")
    # option 011: uxtx, i.e. a plain 64-bit register shifted left
    return (base | _gpr("rm", rm) << 16 | 0b011 << 13 | amount << 10
            | _gpr("rn", rn) << 5 | _gpr("rd", rd))


def add_ext(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """add xd|sp, xn|sp, xm{, lsl #lsl} (extended-register form: the one that can name sp)"""
    return _addsub_ext(0x8B200000, rd, rn, rm, lsl)


def sub_ext(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """sub xd|sp, xn|sp, xm{, lsl #lsl} (extended-register form: the one that can name sp)"""
    return _addsub_ext(0xCB200000, rd, rn, rm, lsl)


def and_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """and xd, xn, xm{, lsl #lsl}"""
    return _shifted_register(0x8A000000, rd, rn, rm, lsl)


def orr_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """orr xd, xn, xm{, lsl #lsl}"""
    return _shifted_register(0xAA000000, rd, rn, rm, lsl)


def eor_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """eor xd, xn, xm{, lsl #lsl}"""
    return _shifted_register(0xCA000000, rd, rn, rm, lsl)


def ands_reg(rd: int, rn: int, rm: int, lsl: int = 0) -> int:
    """ands xd, xn, xm{, lsl #lsl}"""
    return _shifted_register(0xEA000000, rd, rn, rm, lsl)


def tst_reg(rn: int, rm: int, lsl: int = 0) -> int:
    """tst xn, xm{, lsl #lsl}"""
    return ands_reg(XZR, rn, rm, lsl)


def mov_reg(rd: int, rm: int) -> int:
    """mov xd, xm (orr xd, xzr, xm; 31 = xzr, use mov_sp for sp)"""
    return orr_reg(rd, XZR, rm)


def _bitmask_immediate(value: int) -> tuple[int, int, int] | None:
    """(N, immr, imms) of a 64-bit logical immediate, or None if it has no encoding."""
    value &= (1 << 64) - 1
    if value in (0, (1 << 64) - 1):
        return None
    for esize in (2, 4, 8, 16, 32, 64):
        mask = (1 << esize) - 1
        element = value & mask
        if any((value >> shift) & mask != element for shift in range(esize, 64, esize)):
            continue
        ones = bin(element).count("1")
        run = (1 << ones) - 1
        for rotate in range(esize):
            if ((run >> rotate) | (run << (esize - rotate))) & mask == element:
                n = 1 if esize == 64 else 0
                imms = ((~(2 * esize - 1)) & 0x3F) | (ones - 1)
                return n, rotate, imms
        return None
    return None


def _logical_imm(base: int, rd: int, rn: int, imm: int) -> int:
    imm = _integer("imm", imm)
    fields = _bitmask_immediate(imm) if -(1 << 63) <= imm < (1 << 64) else None
    if fields is None:
        raise EncodingError(f"imm = {imm:#x} is not a bitmask immediate (a rotated run of "
                            f"ones replicated over 2, 4, ..., 64 bits)")
    n, immr, imms = fields
    return base | n << 22 | immr << 16 | imms << 10 | _gpr("rn", rn) << 5 | _gpr("rd", rd)


def and_imm(rd: int, rn: int, imm: int) -> int:
    """and xd|sp, xn, #bitmask"""
    return _logical_imm(0x92000000, rd, rn, imm)


def orr_imm(rd: int, rn: int, imm: int) -> int:
    """orr xd|sp, xn, #bitmask"""
    return _logical_imm(0xB2000000, rd, rn, imm)


def eor_imm(rd: int, rn: int, imm: int) -> int:
    """eor xd|sp, xn, #bitmask"""
    return _logical_imm(0xD2000000, rd, rn, imm)


def ands_imm(rd: int, rn: int, imm: int) -> int:
    """ands xd, xn, #bitmask"""
    return _logical_imm(0xF2000000, rd, rn, imm)


def tst_imm(rn: int, imm: int) -> int:
    """tst xn, #bitmask"""
    return ands_imm(XZR, rn, imm)


def _move_wide(base: int, rd: int, imm16: int, shift: int) -> int:
    hw = _choice("shift", shift, {0: 0, 16: 1, 32: 2, 48: 3})
    return base | hw << 21 | _unsigned("imm16", imm16, 16) << 5 | _gpr("rd", rd)


def movz(rd: int, imm16: int, shift: int = 0) -> int:
    """movz xd, #imm16{, lsl #shift}"""
    return _move_wide(0xD2800000, rd, imm16, shift)


def movn(rd: int, imm16: int, shift: int = 0) -> int:
    """movn xd, #imm16{, lsl #shift}"""
    return _move_wide(0x92800000, rd, imm16, shift)


def movk(rd: int, imm16: int, shift: int = 0) -> int:
    """movk xd, #imm16{, lsl #shift}"""
    return _move_wide(0xF2800000, rd, imm16, shift)


def mov_imm(rd: int, value: int) -> list[int]:
    """Shortest movz/movn + movk sequence putting the 64-bit `value` (signed or unsigned) in xd."""
    number = _integer("value", value)
    if not -(1 << 63) <= number < (1 << 64):
        raise EncodingError(f"value = {number} does not fit in 64 bits")
    number &= (1 << 64) - 1
    chunks = [(number >> shift) & 0xFFFF for shift in (0, 16, 32, 48)]
    if chunks.count(0xFFFF) > chunks.count(0):
        # movn writes ~imm: start from all ones and patch the chunks that are not 0xffff.
        patch = [i for i, chunk in enumerate(chunks) if chunk != 0xFFFF] or [0]
        first = patch[0]
        words = [movn(rd, ~chunks[first] & 0xFFFF, 16 * first)]
    else:
        patch = [i for i, chunk in enumerate(chunks) if chunk != 0] or [0]
        first = patch[0]
        words = [movz(rd, chunks[first], 16 * first)]
    words += [movk(rd, chunks[i], 16 * i) for i in patch[1:]]
    return words


def _bitfield(base: int, rd: int, rn: int, immr: int, imms: int) -> int:
    return base | immr << 16 | imms << 10 | _gpr("rn", rn) << 5 | _gpr("rd", rd)


def lsl_imm(rd: int, rn: int, amount: int) -> int:
    """lsl xd, xn, #amount (ubfm)"""
    shift = _unsigned("amount", amount, 6)
    return _bitfield(0xD3400000, rd, rn, (-shift) % 64, 63 - shift)


def lsr_imm(rd: int, rn: int, amount: int) -> int:
    """lsr xd, xn, #amount (ubfm)"""
    return _bitfield(0xD3400000, rd, rn, _unsigned("amount", amount, 6), 63)


def asr_imm(rd: int, rn: int, amount: int) -> int:
    """asr xd, xn, #amount (sbfm)"""
    return _bitfield(0x93400000, rd, rn, _unsigned("amount", amount, 6), 63)


def _dp2(base: int, rd: int, rn: int, rm: int) -> int:
    return base | _gpr("rm", rm) << 16 | _gpr("rn", rn) << 5 | _gpr("rd", rd)


def lsl_reg(rd: int, rn: int, rm: int) -> int:
    """lsl xd, xn, xm (lslv)"""
    return _dp2(0x9AC02000, rd, rn, rm)


def lsr_reg(rd: int, rn: int, rm: int) -> int:
    """lsr xd, xn, xm (lsrv)"""
    return _dp2(0x9AC02400, rd, rn, rm)


def asr_reg(rd: int, rn: int, rm: int) -> int:
    """asr xd, xn, xm (asrv)"""
    return _dp2(0x9AC02800, rd, rn, rm)


def _dp3(base: int, rd: int, rn: int, rm: int, ra: int) -> int:
    return (base | _gpr("rm", rm) << 16 | _gpr("ra", ra) << 10
            | _gpr("rn", rn) << 5 | _gpr("rd", rd))


def madd(rd: int, rn: int, rm: int, ra: int) -> int:
    """madd xd, xn, xm, xa: xd = xa + xn*xm"""
    return _dp3(0x9B000000, rd, rn, rm, ra)


def msub(rd: int, rn: int, rm: int, ra: int) -> int:
    """msub xd, xn, xm, xa: xd = xa - xn*xm"""
    return _dp3(0x9B008000, rd, rn, rm, ra)


def mul(rd: int, rn: int, rm: int) -> int:
    """mul xd, xn, xm"""
    return madd(rd, rn, rm, XZR)


_CONDITIONS = {"eq": 0, "ne": 1, "cs": 2, "hs": 2, "cc": 3, "lo": 3, "mi": 4, "pl": 5,
               "vs": 6, "vc": 7, "hi": 8, "ls": 9, "ge": 10, "lt": 11, "gt": 12, "le": 13,
               "al": 14}


def csel(rd: int, rn: int, rm: int, cond: str) -> int:
    """csel xd, xn, xm, cond"""
    return (0x9A800000 | _gpr("rm", rm) << 16 | _choice("cond", cond, _CONDITIONS) << 12
            | _gpr("rn", rn) << 5 | _gpr("rd", rd))


def nop() -> int:
    """nop"""
    return 0xD503201F


def ret(rn: int = LR) -> int:
    """ret {xn}"""
    return 0xD65F0000 | _gpr("rn", rn) << 5


def br(rn: int) -> int:
    """br xn"""
    return 0xD61F0000 | _gpr("rn", rn) << 5


def blr(rn: int) -> int:
    """blr xn"""
    return 0xD63F0000 | _gpr("rn", rn) << 5


def svc(imm16: int = 0) -> int:
    """svc #imm16: enter the kernel (Linux: number in x8, arguments in x0..x5, result in x0)"""
    return 0xD4000001 | _unsigned("imm16", imm16, 16) << 5


def yield_() -> int:
    """yield: spin-wait hint (Python's keyword takes the plain name)"""
    return 0xD503203F


# the barrier domains dmb may name -> its CRm field
_BARRIER_DOMAINS = {"ish": 0xB, "ishld": 0x9, "ishst": 0xA, "sy": 0xF}


def dmb(domain: str = "ish") -> int:
    """dmb domain: order the memory accesses before it against those after it"""
    return 0xD50330BF | _choice("domain", domain, _BARRIER_DOMAINS) << 8


def ldar_x(rt: int, rn: int) -> int:
    """ldar xt, [xn|sp]: a load-acquire (no later access moves above it)"""
    return 0xC8DFFC00 | _gpr("rn", rn) << 5 | _gpr("rt", rt)


def stlr_x(rt: int, rn: int) -> int:
    """stlr xt, [xn|sp]: a store-release (no earlier access moves below it)"""
    return 0xC89FFC00 | _gpr("rn", rn) << 5 | _gpr("rt", rt)


def ldxr_x(rt: int, rn: int) -> int:
    """ldxr xt, [xn|sp]: a load-exclusive (marks the address for stxr_x)"""
    return 0xC85F7C00 | _gpr("rn", rn) << 5 | _gpr("rt", rt)


def stxr_x(rs: int, rt: int, rn: int) -> int:
    """stxr ws, xt, [xn|sp]: a store-exclusive; ws := 0 where it stored, 1 where another
    access to the address came between it and ldxr_x (rs unlike rt and rn)"""
    if rs in (rt, rn):
        raise EncodingError(f"rs: {rs!r} is also rt or rn; stxr's status register must "
                            f"differ from both")
    return 0xC8007C00 | _gpr("rs", rs) << 16 | _gpr("rn", rn) << 5 | _gpr("rt", rt)


# system registers mrs/msr may name -> their o0:op1:CRn:CRm:op2 field (bits 19..5 of the word)
_SYSTEM_REGISTERS = {"fpcr": 0xDA20, "fpsr": 0xDA21}


def mrs(rt: int, sysreg: str) -> int:
    """mrs xt, sysreg (fpcr or fpsr)"""
    return 0xD5200000 | _choice("sysreg", sysreg, _SYSTEM_REGISTERS) << 5 | _gpr("rt", rt)


def msr(sysreg: str, rt: int) -> int:
    """msr sysreg, xt (fpcr or fpsr)"""
    return 0xD5000000 | _choice("sysreg", sysreg, _SYSTEM_REGISTERS) << 5 | _gpr("rt", rt)


# --------------------------------------------------------------------------------------------
# branches and pc-relative

def b(offset: int) -> int:
    """b pc+offset (±128 MiB)"""
    return 0x14000000 | _signed("offset", offset, 26, 4)


def bl(offset: int) -> int:
    """bl pc+offset (±128 MiB)"""
    return 0x94000000 | _signed("offset", offset, 26, 4)


def b_cond(cond: str, offset: int) -> int:
    """b.cond pc+offset (±1 MiB)"""
    return (0x54000000 | _signed("offset", offset, 19, 4) << 5
            | _choice("cond", cond, _CONDITIONS))


def cbz(rt: int, offset: int) -> int:
    """cbz xt, pc+offset (±1 MiB)"""
    return 0xB4000000 | _signed("offset", offset, 19, 4) << 5 | _gpr("rt", rt)


def cbnz(rt: int, offset: int) -> int:
    """cbnz xt, pc+offset (±1 MiB)"""
    return 0xB5000000 | _signed("offset", offset, 19, 4) << 5 | _gpr("rt", rt)


def _test_branch(base: int, rt: int, bit: int, offset: int) -> int:
    bit = _unsigned("bit", bit, 6)
    return (base | (bit >> 5) << 31 | (bit & 31) << 19
            | _signed("offset", offset, 14, 4) << 5 | _gpr("rt", rt))


def tbz(rt: int, bit: int, offset: int) -> int:
    """tbz xt, #bit, pc+offset (±32 KiB)"""
    return _test_branch(0x36000000, rt, bit, offset)


def tbnz(rt: int, bit: int, offset: int) -> int:
    """tbnz xt, #bit, pc+offset (±32 KiB)"""
    return _test_branch(0x37000000, rt, bit, offset)


def adr(rd: int, offset: int) -> int:
    """adr xd, pc+offset (±1 MiB)"""
    imm = _signed("offset", offset, 21)
    return 0x10000000 | (imm & 3) << 29 | (imm >> 2) << 5 | _gpr("rd", rd)


def ldr_x_literal(rt: int, offset: int) -> int:
    """ldr xt, pc+offset (±1 MiB)"""
    return 0x58000000 | _signed("offset", offset, 19, 4) << 5 | _gpr("rt", rt)


def ldr_v_literal(size: str, vt: int, offset: int) -> int:
    """ldr st|dt|qt, pc+offset (±1 MiB)"""
    opc = _choice("size", size, {"s": 0, "d": 1, "q": 2})
    return 0x1C000000 | opc << 30 | _signed("offset", offset, 19, 4) << 5 | _vreg("vt", vt)


# --------------------------------------------------------------------------------------------
# general-register loads and stores

def _check_writeback(rn: int, *rts: int) -> None:
    """Writeback with the base among the transferred registers is unpredictable."""
    if rn != SP and rn in rts:
        raise EncodingError(f"rn = x{rn} is also a transferred register; writeback would be "
                            f"unpredictable")


def _ldst_uimm(base: int, rt: int, rn: int, offset: int, scale: int) -> int:
    return (base | _unsigned("offset", offset, 12, scale) << 10
            | _gpr("rn", rn) << 5 | rt)


def _ldst_imm9(base: int, rt: int, rn: int, imm: int, mode: int, name: str = "imm") -> int:
    """Unscaled (mode 0), post-index (1) and pre-index (3) forms: imm9 bytes."""
    return base | _signed(name, imm, 9) << 12 | mode << 10 | _gpr("rn", rn) << 5 | rt


def _ldst_reg(base: int, rt: int, rn: int, rm: int, shift: bool) -> int:
    s = _choice("shift", shift, {False: 0, True: 1})
    # option 011: lsl (uxtx) of a 64-bit index register
    return base | _gpr("rm", rm) << 16 | 0b011 << 13 | s << 12 | _gpr("rn", rn) << 5 | rt


def ldr_x(rt: int, rn: int, offset: int = 0) -> int:
    """ldr xt, [xn|sp, #offset] (unsigned, multiple of 8, 0..32760)"""
    return _ldst_uimm(0xF9400000, _gpr("rt", rt), rn, offset, 8)


def str_x(rt: int, rn: int, offset: int = 0) -> int:
    """str xt, [xn|sp, #offset] (unsigned, multiple of 8, 0..32760)"""
    return _ldst_uimm(0xF9000000, _gpr("rt", rt), rn, offset, 8)


def ldur_x(rt: int, rn: int, offset: int = 0) -> int:
    """ldur xt, [xn|sp, #offset] (-256..255)"""
    return _ldst_imm9(0xF8400000, _gpr("rt", rt), rn, offset, 0, "offset")


def stur_x(rt: int, rn: int, offset: int = 0) -> int:
    """stur xt, [xn|sp, #offset] (-256..255)"""
    return _ldst_imm9(0xF8000000, _gpr("rt", rt), rn, offset, 0, "offset")


def ldr_x_post(rt: int, rn: int, imm: int) -> int:
    """ldr xt, [xn|sp], #imm (-256..255)"""
    rt, rn = _gpr("rt", rt), _gpr("rn", rn)
    _check_writeback(rn, rt)
    return _ldst_imm9(0xF8400000, rt, rn, imm, 1)


def ldr_x_pre(rt: int, rn: int, imm: int) -> int:
    """ldr xt, [xn|sp, #imm]! (-256..255)"""
    rt, rn = _gpr("rt", rt), _gpr("rn", rn)
    _check_writeback(rn, rt)
    return _ldst_imm9(0xF8400000, rt, rn, imm, 3)


def str_x_post(rt: int, rn: int, imm: int) -> int:
    """str xt, [xn|sp], #imm (-256..255)"""
    rt, rn = _gpr("rt", rt), _gpr("rn", rn)
    _check_writeback(rn, rt)
    return _ldst_imm9(0xF8000000, rt, rn, imm, 1)


def str_x_pre(rt: int, rn: int, imm: int) -> int:
    """str xt, [xn|sp, #imm]! (-256..255)"""
    rt, rn = _gpr("rt", rt), _gpr("rn", rn)
    _check_writeback(rn, rt)
    return _ldst_imm9(0xF8000000, rt, rn, imm, 3)


def ldr_x_reg(rt: int, rn: int, rm: int, shift: bool = False) -> int:
    """ldr xt, [xn|sp, xm{, lsl #3}]"""
    return _ldst_reg(0xF8600800, _gpr("rt", rt), rn, rm, shift)


def str_x_reg(rt: int, rn: int, rm: int, shift: bool = False) -> int:
    """str xt, [xn|sp, xm{, lsl #3}]"""
    return _ldst_reg(0xF8200800, _gpr("rt", rt), rn, rm, shift)


_PREFETCH_OPS = {f"{kind}l{level}{policy}": (0 if kind == "pld" else 2 if kind == "pli" else 4)
                 << 2 | (level - 1) << 1 | (policy == "strm")
                 for kind in ("pld", "pli", "pst") for level in (1, 2, 3)
                 for policy in ("keep", "strm")}


def prfm(op: str, rn: int, offset: int = 0) -> int:
    """prfm op, [xn|sp, #offset] with op like "pldl1keep" (offset multiple of 8, 0..32760)"""
    return _ldst_uimm(0xF9800000, _choice("op", op, _PREFETCH_OPS), rn, offset, 8)


_PAIR_MODES = {"post": 0b001, "offset": 0b010, "pre": 0b011}


def _ldst_pair(base: int, rt1: int, rt2: int, rn: int, offset: int, mode: str, scale: int) -> int:
    return (base | _choice("mode", mode, _PAIR_MODES) << 23
            | _signed("offset", offset, 7, scale) << 15 | rt2 << 10
            | _gpr("rn", rn) << 5 | rt1)


def _gpr_pair(rt1: int, rt2: int, rn: int, mode: str, load: bool) -> tuple[int, int, int]:
    rt1, rt2, rn = _gpr("rt1", rt1), _gpr("rt2", rt2), _gpr("rn", rn)
    if load and rt1 == rt2:
        raise EncodingError(f"rt1 = rt2 = x{rt1}: a pair load into one register is "
                            f"unpredictable")
    if mode != "offset":
        _check_writeback(rn, rt1, rt2)
    return rt1, rt2, rn


def ldp_x(rt1: int, rt2: int, rn: int, offset: int = 0, mode: str = "offset") -> int:
    """ldp xt1, xt2, [xn|sp, #offset] | [xn|sp, #offset]! | [xn|sp], #offset (-512..504, x8)"""
    rt1, rt2, rn = _gpr_pair(rt1, rt2, rn, mode, load=True)
    return _ldst_pair(0xA8400000, rt1, rt2, rn, offset, mode, 8)


def stp_x(rt1: int, rt2: int, rn: int, offset: int = 0, mode: str = "offset") -> int:
    """stp xt1, xt2, [xn|sp, #offset] | [xn|sp, #offset]! | [xn|sp], #offset (-512..504, x8)"""
    rt1, rt2, rn = _gpr_pair(rt1, rt2, rn, mode, load=False)
    return _ldst_pair(0xA8000000, rt1, rt2, rn, offset, mode, 8)


# --------------------------------------------------------------------------------------------
# SIMD&FP loads and stores

# size letter -> (size field, opc field of a load); a store clears opc bit 0
_SCALAR_LDST = {"b": (0, 1), "h": (1, 1), "s": (2, 1), "d": (3, 1), "q": (0, 3)}


def _scalar_ldst(size: str, load: bool) -> int:
    size_bits, opc = _choice("size", size, _SCALAR_LDST)
    return size_bits << 30 | (opc if load else opc & 2) << 22


def ldr_v(size: str, vt: int, rn: int, offset: int = 0) -> int:
    """ldr bt|ht|st|dt|qt, [xn|sp, #offset] (unsigned, scaled by the size)"""
    base = 0x3D000000 | _scalar_ldst(size, True)
    return _ldst_uimm(base, _vreg("vt", vt), rn, offset, _SCALAR_BYTES[size])


def str_v(size: str, vt: int, rn: int, offset: int = 0) -> int:
    """str bt|ht|st|dt|qt, [xn|sp, #offset] (unsigned, scaled by the size)"""
    base = 0x3D000000 | _scalar_ldst(size, False)
    return _ldst_uimm(base, _vreg("vt", vt), rn, offset, _SCALAR_BYTES[size])


def ldur_v(size: str, vt: int, rn: int, offset: int = 0) -> int:
    """ldur bt|ht|st|dt|qt, [xn|sp, #offset] (-256..255)"""
    base = 0x3C000000 | _scalar_ldst(size, True)
    return _ldst_imm9(base, _vreg("vt", vt), rn, offset, 0, "offset")


def stur_v(size: str, vt: int, rn: int, offset: int = 0) -> int:
    """stur bt|ht|st|dt|qt, [xn|sp, #offset] (-256..255)"""
    base = 0x3C000000 | _scalar_ldst(size, False)
    return _ldst_imm9(base, _vreg("vt", vt), rn, offset, 0, "offset")


def ldr_v_post(size: str, vt: int, rn: int, imm: int) -> int:
    """ldr bt|ht|st|dt|qt, [xn|sp], #imm (-256..255)"""
    return _ldst_imm9(0x3C000000 | _scalar_ldst(size, True), _vreg("vt", vt), rn, imm, 1)


def ldr_v_pre(size: str, vt: int, rn: int, imm: int) -> int:
    """ldr bt|ht|st|dt|qt, [xn|sp, #imm]! (-256..255)"""
    return _ldst_imm9(0x3C000000 | _scalar_ldst(size, True), _vreg("vt", vt), rn, imm, 3)


def str_v_post(size: str, vt: int, rn: int, imm: int) -> int:
    """str bt|ht|st|dt|qt, [xn|sp], #imm (-256..255)"""
    return _ldst_imm9(0x3C000000 | _scalar_ldst(size, False), _vreg("vt", vt), rn, imm, 1)


def str_v_pre(size: str, vt: int, rn: int, imm: int) -> int:
    """str bt|ht|st|dt|qt, [xn|sp, #imm]! (-256..255)"""
    return _ldst_imm9(0x3C000000 | _scalar_ldst(size, False), _vreg("vt", vt), rn, imm, 3)


def ldr_v_reg(size: str, vt: int, rn: int, rm: int, shift: bool = False) -> int:
    """ldr bt|ht|st|dt|qt, [xn|sp, xm{, lsl #log2(bytes)}]"""
    return _ldst_reg(0x3C200800 | _scalar_ldst(size, True), _vreg("vt", vt), rn, rm, shift)


def str_v_reg(size: str, vt: int, rn: int, rm: int, shift: bool = False) -> int:
    """str bt|ht|st|dt|qt, [xn|sp, xm{, lsl #log2(bytes)}]"""
    return _ldst_reg(0x3C200800 | _scalar_ldst(size, False), _vreg("vt", vt), rn, rm, shift)


_PAIR_SIZES = {"s": (0, 4), "d": (1, 8), "q": (2, 16)}   # size -> (opc, scale)


def _simd_pair(base: int, size: str, vt1: int, vt2: int, rn: int, offset: int, mode: str,
               load: bool) -> int:
    opc, scale = _choice("size", size, _PAIR_SIZES)
    vt1, vt2 = _vreg("vt1", vt1), _vreg("vt2", vt2)
    if load and vt1 == vt2:
        raise EncodingError(f"vt1 = vt2 = v{vt1}: a pair load into one register is "
                            f"unpredictable")
    return _ldst_pair(base | opc << 30, vt1, vt2, rn, offset, mode, scale)


def ldp_v(size: str, vt1: int, vt2: int, rn: int, offset: int = 0, mode: str = "offset") -> int:
    """ldp st1|dt1|qt1, ..2, [xn|sp, #offset] (pre/post modes as ldp_x; imm7 scaled by size)"""
    return _simd_pair(0x2C400000, size, vt1, vt2, rn, offset, mode, load=True)


def stp_v(size: str, vt1: int, vt2: int, rn: int, offset: int = 0, mode: str = "offset") -> int:
    """stp st1|dt1|qt1, ..2, [xn|sp, #offset] (pre/post modes as ldp_x; imm7 scaled by size)"""
    return _simd_pair(0x2C000000, size, vt1, vt2, rn, offset, mode, load=False)


_LD1_OPCODES = {1: 0b0111, 2: 0b1010, 3: 0b0110, 4: 0b0010}


def _register_list(vts: int | Sequence[int]) -> tuple[int, ...]:
    regs = (vts,) if isinstance(vts, int) else tuple(vts)
    if not 1 <= len(regs) <= 4:
        raise EncodingError(f"vts must hold 1..4 registers, got {len(regs)}")
    regs = tuple(_vreg("vts", reg) for reg in regs)
    for i, reg in enumerate(regs):
        if reg != (regs[0] + i) % 32:
            raise EncodingError(f"vts = {regs} must be consecutive registers (modulo 32)")
    return regs


def _post_index(post: int | Reg | None, transferred: int) -> tuple[int, int]:
    """(post-index bit, Rm field) for None, an immediate byte count or a Reg."""
    if post is None:
        return 0, 0
    if isinstance(post, Reg):
        rm = _gpr("post", post)
        if rm == XZR:
            raise EncodingError("post = Reg(31) is not a post-index register "
                                "(xzr would mean the immediate form)")
        return 1, rm
    imm = _integer("post", post)
    if imm != transferred:
        raise EncodingError(f"post = {imm} must equal the bytes transferred ({transferred}); "
                            f"pass Reg(n) for a register post-index")
    return 1, XZR


def _ld1_multiple(load: bool, vts: int | Sequence[int], arr: str, rn: int,
                  post: int | Reg | None) -> int:
    regs = _register_list(vts)
    q, size = _arrangement(arr, tuple(_ARRANGEMENTS))
    post_bit, rm = _post_index(post, len(regs) * (16 if q else 8))
    return (0x0C000000 | q << 30 | post_bit << 23 | load << 22 | rm << 16
            | _LD1_OPCODES[len(regs)] << 12 | size << 10 | _gpr("rn", rn) << 5 | regs[0])


def ld1(vts: int | Sequence[int], arr: str, rn: int, post: int | Reg | None = None) -> int:
    """ld1 {vt.arr, ...}, [xn|sp]{, #bytes | xm}; vts 1..4 consecutive registers"""
    return _ld1_multiple(1, vts, arr, rn, post)


def st1(vts: int | Sequence[int], arr: str, rn: int, post: int | Reg | None = None) -> int:
    """st1 {vt.arr, ...}, [xn|sp]{, #bytes | xm}; vts 1..4 consecutive registers"""
    return _ld1_multiple(0, vts, arr, rn, post)


def _ld1_single(load: bool, vt: int, elem: str, lane: int, rn: int, post: int | Reg | None) -> int:
    log2 = _choice("elem", elem, _ELEMENTS)
    index = _unsigned("lane", lane, 4 - log2)
    # the lane number is spread over Q:S:size, low bits first from size (ARM ARM C4.1.3)
    if log2 == 3:
        opcode, q, s, size = 0b100, index, 0, 0b01
    elif log2 == 2:
        opcode, q, s, size = 0b100, index >> 1, index & 1, 0b00
    elif log2 == 1:
        opcode, q, s, size = 0b010, index >> 2, (index >> 1) & 1, (index & 1) << 1
    else:
        opcode, q, s, size = 0b000, index >> 3, (index >> 2) & 1, index & 3
    post_bit, rm = _post_index(post, 1 << log2)
    return (0x0D000000 | q << 30 | post_bit << 23 | load << 22 | rm << 16 | opcode << 13
            | s << 12 | size << 10 | _gpr("rn", rn) << 5 | _vreg("vt", vt))


def ld1_lane(vt: int, elem: str, lane: int, rn: int, post: int | Reg | None = None) -> int:
    """ld1 {vt.elem}[lane], [xn|sp]{, #bytes | xm}"""
    return _ld1_single(1, vt, elem, lane, rn, post)


def st1_lane(vt: int, elem: str, lane: int, rn: int, post: int | Reg | None = None) -> int:
    """st1 {vt.elem}[lane], [xn|sp]{, #bytes | xm}"""
    return _ld1_single(0, vt, elem, lane, rn, post)


def ld1r(vt: int, arr: str, rn: int, post: int | Reg | None = None) -> int:
    """ld1r {vt.arr}, [xn|sp]{, #bytes | xm}: load one element to every lane"""
    q, size = _arrangement(arr, tuple(_ARRANGEMENTS))
    post_bit, rm = _post_index(post, 1 << size)
    return (0x0D40C000 | q << 30 | post_bit << 23 | rm << 16 | size << 10
            | _gpr("rn", rn) << 5 | _vreg("vt", vt))


# --------------------------------------------------------------------------------------------
# SIMD three registers, same type

def _three_same(base: int, q: int, size_bits: int, vd: int, vn: int, vm: int) -> int:
    return (base | q << 30 | size_bits << 22 | _vreg("vm", vm) << 16
            | _vreg("vn", vn) << 5 | _vreg("vd", vd))


def _fp_three_same(base: int, vd: int, vn: int, vm: int, arr: str) -> int:
    q, sz = _fp_arrangement(arr)
    return _three_same(base, q, sz, vd, vn, vm)


def fmla(vd: int, vn: int, vm: int, arr: str) -> int:
    """fmla vd.arr, vn.arr, vm.arr (vd += vn*vm, fused)"""
    return _fp_three_same(0x0E20CC00, vd, vn, vm, arr)


def fmls(vd: int, vn: int, vm: int, arr: str) -> int:
    """fmls vd.arr, vn.arr, vm.arr (vd -= vn*vm, fused)"""
    return _fp_three_same(0x0EA0CC00, vd, vn, vm, arr)


_ROTATIONS = {0: 0, 90: 1, 180: 2, 270: 3}


def fcmla(vd: int, vn: int, vm: int, rotate: int, arr: str) -> int:
    """fcmla vd.arr, vn.arr, vm.arr, #rotate (arr 2s, 4s, 2d: complex pairs, real part in the
    even lane; FEAT_FCMA). #0 adds re(vn) * vm to each pair of vd, #90 adds im(vn) * i*vm:
    both together vd += vn * vm, each lane one fused multiply-add per rotation."""
    q, sz = _fp_arrangement(arr)
    rot = _choice("rotate", rotate, _ROTATIONS)
    return _three_same(0x2E00C400 | rot << 11, q, sz + 2, vd, vn, vm)


def fadd(vd: int, vn: int, vm: int, arr: str) -> int:
    """fadd vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x0E20D400, vd, vn, vm, arr)


def fsub(vd: int, vn: int, vm: int, arr: str) -> int:
    """fsub vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x0EA0D400, vd, vn, vm, arr)


def fmul(vd: int, vn: int, vm: int, arr: str) -> int:
    """fmul vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x2E20DC00, vd, vn, vm, arr)


def fdiv(vd: int, vn: int, vm: int, arr: str) -> int:
    """fdiv vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x2E20FC00, vd, vn, vm, arr)


def fmax(vd: int, vn: int, vm: int, arr: str) -> int:
    """fmax vd.arr, vn.arr, vm.arr (NaN-propagating)"""
    return _fp_three_same(0x0E20F400, vd, vn, vm, arr)


def fmin(vd: int, vn: int, vm: int, arr: str) -> int:
    """fmin vd.arr, vn.arr, vm.arr (NaN-propagating)"""
    return _fp_three_same(0x0EA0F400, vd, vn, vm, arr)


def fmaxnm(vd: int, vn: int, vm: int, arr: str) -> int:
    """fmaxnm vd.arr, vn.arr, vm.arr (a quiet NaN loses to a number)"""
    return _fp_three_same(0x0E20C400, vd, vn, vm, arr)


def fminnm(vd: int, vn: int, vm: int, arr: str) -> int:
    """fminnm vd.arr, vn.arr, vm.arr (a quiet NaN loses to a number)"""
    return _fp_three_same(0x0EA0C400, vd, vn, vm, arr)


def fabd(vd: int, vn: int, vm: int, arr: str) -> int:
    """fabd vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x2EA0D400, vd, vn, vm, arr)


def faddp(vd: int, vn: int, vm: int, arr: str) -> int:
    """faddp vd.arr, vn.arr, vm.arr (pairwise)"""
    return _fp_three_same(0x2E20D400, vd, vn, vm, arr)


def frecps(vd: int, vn: int, vm: int, arr: str) -> int:
    """frecps vd.arr, vn.arr, vm.arr (2 - vn*vm, Newton step for 1/x)"""
    return _fp_three_same(0x0E20FC00, vd, vn, vm, arr)


def frsqrts(vd: int, vn: int, vm: int, arr: str) -> int:
    """frsqrts vd.arr, vn.arr, vm.arr ((3 - vn*vm)/2, Newton step for 1/sqrt(x))"""
    return _fp_three_same(0x0EA0FC00, vd, vn, vm, arr)


def fcmeq(vd: int, vn: int, vm: int, arr: str) -> int:
    """fcmeq vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x0E20E400, vd, vn, vm, arr)


def fcmge(vd: int, vn: int, vm: int, arr: str) -> int:
    """fcmge vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x2E20E400, vd, vn, vm, arr)


def fcmgt(vd: int, vn: int, vm: int, arr: str) -> int:
    """fcmgt vd.arr, vn.arr, vm.arr"""
    return _fp_three_same(0x2EA0E400, vd, vn, vm, arr)


def _int_three_same(base: int, vd: int, vn: int, vm: int, arr: str) -> int:
    q, size = _arrangement(arr, _INT_ARRS)
    return _three_same(base, q, size, vd, vn, vm)


def add_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """add vd.arr, vn.arr, vm.arr (integer)"""
    return _int_three_same(0x0E208400, vd, vn, vm, arr)


def sub_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """sub vd.arr, vn.arr, vm.arr (integer)"""
    return _int_three_same(0x2E208400, vd, vn, vm, arr)


def cmeq_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """cmeq vd.arr, vn.arr, vm.arr (integer)"""
    return _int_three_same(0x2E208C00, vd, vn, vm, arr)


def _logical_three_same(base: int, vd: int, vn: int, vm: int, arr: str) -> int:
    q, _ = _arrangement(arr, _BYTE_ARRS)
    return _three_same(base, q, 0, vd, vn, vm)


def and_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """and vd.arr, vn.arr, vm.arr (arr 8b|16b)"""
    return _logical_three_same(0x0E201C00, vd, vn, vm, arr)


def bic_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """bic vd.arr, vn.arr, vm.arr (arr 8b|16b)"""
    return _logical_three_same(0x0E601C00, vd, vn, vm, arr)


def orr_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """orr vd.arr, vn.arr, vm.arr (arr 8b|16b)"""
    return _logical_three_same(0x0EA01C00, vd, vn, vm, arr)


def orn_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """orn vd.arr, vn.arr, vm.arr (arr 8b|16b)"""
    return _logical_three_same(0x0EE01C00, vd, vn, vm, arr)


def eor_v(vd: int, vn: int, vm: int, arr: str) -> int:
    """eor vd.arr, vn.arr, vm.arr (arr 8b|16b)"""
    return _logical_three_same(0x2E201C00, vd, vn, vm, arr)


def bsl(vd: int, vn: int, vm: int, arr: str) -> int:
    """bsl vd.arr, vn.arr, vm.arr: vd = vd ? vn : vm bitwise (arr 8b|16b)"""
    return _logical_three_same(0x2E601C00, vd, vn, vm, arr)


def bit(vd: int, vn: int, vm: int, arr: str) -> int:
    """bit vd.arr, vn.arr, vm.arr: insert vn bits where vm is set (arr 8b|16b)"""
    return _logical_three_same(0x2EA01C00, vd, vn, vm, arr)


def bif(vd: int, vn: int, vm: int, arr: str) -> int:
    """bif vd.arr, vn.arr, vm.arr: insert vn bits where vm is clear (arr 8b|16b)"""
    return _logical_three_same(0x2EE01C00, vd, vn, vm, arr)


def mov_v(vd: int, vn: int, arr: str) -> int:
    """mov vd.arr, vn.arr (orr vd, vn, vn; arr 8b|16b)"""
    return orr_v(vd, vn, vn, arr)


# --------------------------------------------------------------------------------------------
# SIMD two-register miscellaneous

def _two_misc(base: int, q: int, size_bits: int, vd: int, vn: int) -> int:
    return base | q << 30 | size_bits << 22 | _vreg("vn", vn) << 5 | _vreg("vd", vd)


def _fp_two_misc(base: int, vd: int, vn: int, arr: str) -> int:
    q, sz = _fp_arrangement(arr)
    return _two_misc(base, q, sz, vd, vn)


def fabs(vd: int, vn: int, arr: str) -> int:
    """fabs vd.arr, vn.arr"""
    return _fp_two_misc(0x0EA0F800, vd, vn, arr)


def fneg(vd: int, vn: int, arr: str) -> int:
    """fneg vd.arr, vn.arr"""
    return _fp_two_misc(0x2EA0F800, vd, vn, arr)


def fsqrt(vd: int, vn: int, arr: str) -> int:
    """fsqrt vd.arr, vn.arr"""
    return _fp_two_misc(0x2EA1F800, vd, vn, arr)


def frintn(vd: int, vn: int, arr: str) -> int:
    """frintn vd.arr, vn.arr (round to nearest, ties to even)"""
    return _fp_two_misc(0x0E218800, vd, vn, arr)


def frintm(vd: int, vn: int, arr: str) -> int:
    """frintm vd.arr, vn.arr (round toward -inf)"""
    return _fp_two_misc(0x0E219800, vd, vn, arr)


def frintp(vd: int, vn: int, arr: str) -> int:
    """frintp vd.arr, vn.arr (round toward +inf)"""
    return _fp_two_misc(0x0EA18800, vd, vn, arr)


def frintz(vd: int, vn: int, arr: str) -> int:
    """frintz vd.arr, vn.arr (round toward zero)"""
    return _fp_two_misc(0x0EA19800, vd, vn, arr)


def frinta(vd: int, vn: int, arr: str) -> int:
    """frinta vd.arr, vn.arr (round to nearest, ties away)"""
    return _fp_two_misc(0x2E218800, vd, vn, arr)


def fcvtns(vd: int, vn: int, arr: str) -> int:
    """fcvtns vd.arr, vn.arr (to signed integer, nearest even)"""
    return _fp_two_misc(0x0E21A800, vd, vn, arr)


def fcvtms(vd: int, vn: int, arr: str) -> int:
    """fcvtms vd.arr, vn.arr (to signed integer, toward -inf)"""
    return _fp_two_misc(0x0E21B800, vd, vn, arr)


def fcvtzs(vd: int, vn: int, arr: str) -> int:
    """fcvtzs vd.arr, vn.arr (to signed integer, toward zero)"""
    return _fp_two_misc(0x0EA1B800, vd, vn, arr)


def scvtf(vd: int, vn: int, arr: str) -> int:
    """scvtf vd.arr, vn.arr (signed integer to FP)"""
    return _fp_two_misc(0x0E21D800, vd, vn, arr)


def ucvtf(vd: int, vn: int, arr: str) -> int:
    """ucvtf vd.arr, vn.arr (unsigned integer to FP)"""
    return _fp_two_misc(0x2E21D800, vd, vn, arr)


def frecpe(vd: int, vn: int, arr: str) -> int:
    """frecpe vd.arr, vn.arr (reciprocal estimate)"""
    return _fp_two_misc(0x0EA1D800, vd, vn, arr)


def frsqrte(vd: int, vn: int, arr: str) -> int:
    """frsqrte vd.arr, vn.arr (reciprocal square root estimate)"""
    return _fp_two_misc(0x2EA1D800, vd, vn, arr)


def fcmeq_zero(vd: int, vn: int, arr: str) -> int:
    """fcmeq vd.arr, vn.arr, #0.0"""
    return _fp_two_misc(0x0EA0D800, vd, vn, arr)


def fcmgt_zero(vd: int, vn: int, arr: str) -> int:
    """fcmgt vd.arr, vn.arr, #0.0"""
    return _fp_two_misc(0x0EA0C800, vd, vn, arr)


def fcmge_zero(vd: int, vn: int, arr: str) -> int:
    """fcmge vd.arr, vn.arr, #0.0"""
    return _fp_two_misc(0x2EA0C800, vd, vn, arr)


def fcmle_zero(vd: int, vn: int, arr: str) -> int:
    """fcmle vd.arr, vn.arr, #0.0"""
    return _fp_two_misc(0x2EA0D800, vd, vn, arr)


def fcmlt_zero(vd: int, vn: int, arr: str) -> int:
    """fcmlt vd.arr, vn.arr, #0.0"""
    return _fp_two_misc(0x0EA0E800, vd, vn, arr)


def not_v(vd: int, vn: int, arr: str) -> int:
    """not vd.arr, vn.arr (arr 8b|16b)"""
    q, _ = _arrangement(arr, _BYTE_ARRS)
    return _two_misc(0x2E205800, q, 0, vd, vn)


# --------------------------------------------------------------------------------------------
# SIMD by element

def _fp_by_element(base: int, vd: int, vn: int, vm: int, index: int, arr: str) -> int:
    q, sz = _fp_arrangement(arr)
    if sz:
        h, low = _unsigned("index", index, 1), 0
    else:
        i = _unsigned("index", index, 2)
        h, low = i >> 1, i & 1
    # the element register is M:Rm, all 32 registers for single and double precision
    return (base | q << 30 | sz << 22 | low << 21 | _vreg("vm", vm) << 16 | h << 11
            | _vreg("vn", vn) << 5 | _vreg("vd", vd))


def fmla_elem(vd: int, vn: int, vm: int, index: int, arr: str) -> int:
    """fmla vd.arr, vn.arr, vm.s|d[index] (index 0..3 for s, 0..1 for d)"""
    return _fp_by_element(0x0F801000, vd, vn, vm, index, arr)


def fmls_elem(vd: int, vn: int, vm: int, index: int, arr: str) -> int:
    """fmls vd.arr, vn.arr, vm.s|d[index]"""
    return _fp_by_element(0x0F805000, vd, vn, vm, index, arr)


def fmul_elem(vd: int, vn: int, vm: int, index: int, arr: str) -> int:
    """fmul vd.arr, vn.arr, vm.s|d[index]"""
    return _fp_by_element(0x0F809000, vd, vn, vm, index, arr)


def fcmla_elem(vd: int, vn: int, vm: int, index: int, rotate: int, arr: str = "4s") -> int:
    """fcmla vd.4s, vn.4s, vm.s[index], #rotate: vm's complex pair `index` (0..1) against each
    pair of vn (only the 4s arrangement exists for single precision; FEAT_FCMA)."""
    _arrangement(arr, ("4s",))
    rot = _choice("rotate", rotate, _ROTATIONS)
    i = _unsigned("index", index, 1)
    return (0x6F801000 | rot << 13 | i << 11 | _vreg("vm", vm) << 16
            | _vreg("vn", vn) << 5 | _vreg("vd", vd))


# --------------------------------------------------------------------------------------------
# SIMD shift by immediate

def _shift_imm(base: int, vd: int, vn: int, immh_immb: int, q: int) -> int:
    return base | q << 30 | immh_immb << 16 | _vreg("vn", vn) << 5 | _vreg("vd", vd)


def shl_v(vd: int, vn: int, shift: int, arr: str) -> int:
    """shl vd.arr, vn.arr, #shift (0..esize-1)"""
    q, size = _arrangement(arr, _INT_ARRS)
    esize = 8 << size
    return _shift_imm(0x0F005400, vd, vn, esize + _unsigned("shift", shift, size + 3), q)


def _right_shift(base: int, vd: int, vn: int, shift: int, arr: str) -> int:
    q, size = _arrangement(arr, _INT_ARRS)
    esize = 8 << size
    amount = _integer("shift", shift)
    if not 1 <= amount <= esize:
        raise EncodingError(f"shift = {amount} out of range 1..{esize}")
    return _shift_imm(base, vd, vn, 2 * esize - amount, q)


def ushr_v(vd: int, vn: int, shift: int, arr: str) -> int:
    """ushr vd.arr, vn.arr, #shift (1..esize)"""
    return _right_shift(0x2F000400, vd, vn, shift, arr)


def sshr_v(vd: int, vn: int, shift: int, arr: str) -> int:
    """sshr vd.arr, vn.arr, #shift (1..esize)"""
    return _right_shift(0x0F000400, vd, vn, shift, arr)


# --------------------------------------------------------------------------------------------
# SIMD modified immediate

def _modified_imm(vd: int, q: int, op: int, cmode: int, imm8: int) -> int:
    return (0x0F000400 | q << 30 | op << 29 | (imm8 >> 5) << 16 | cmode << 12
            | (imm8 & 31) << 5 | _vreg("vd", vd))


def _shifted_imm_cmode(arr: str, lsl: int) -> tuple[int, int]:
    """cmode of the 16/32-bit shifted-immediate forms of movi/mvni."""
    q, size = _arrangement(arr, ("4h", "8h", "2s", "4s"))
    if size == 1:
        return q, 0b1000 | _choice("lsl", lsl, {0: 0, 8: 1}) << 1
    return q, _choice("lsl", lsl, {0: 0, 8: 1, 16: 2, 24: 3}) << 1


def movi(vd: int, imm: int, arr: str, lsl: int = 0) -> int:
    """movi vd.arr, #imm{, lsl #lsl}.

    8b/16b: imm 0..255 in every byte; 4h/8h: imm8 lsl 0|8; 2s/4s: imm8 lsl 0|8|16|24;
    2d: imm is the 64-bit value, each byte 0x00 or 0xff.
    """
    if arr == "2d":
        value = _integer("imm", imm)
        if _integer("lsl", lsl) != 0:
            raise EncodingError(f"lsl = {lsl} must be 0 for arrangement 2d")
        byte_values = [(value >> (8 * i)) & 0xFF for i in range(8)]
        if not 0 <= value < (1 << 64) or any(v not in (0, 0xFF) for v in byte_values):
            raise EncodingError(f"imm = {value:#x} must be a 64-bit value whose bytes are each "
                                f"0x00 or 0xff")
        imm8 = sum(1 << i for i, v in enumerate(byte_values) if v)
        return _modified_imm(vd, 1, 1, 0b1110, imm8)
    if arr in _BYTE_ARRS:
        if _integer("lsl", lsl) != 0:
            raise EncodingError(f"lsl = {lsl} must be 0 for arrangement {arr}")
        return _modified_imm(vd, _ARRANGEMENTS[arr][0], 0, 0b1110, _unsigned("imm", imm, 8))
    q, cmode = _shifted_imm_cmode(arr, lsl)
    return _modified_imm(vd, q, 0, cmode, _unsigned("imm", imm, 8))


def mvni(vd: int, imm: int, arr: str, lsl: int = 0) -> int:
    """mvni vd.arr, #imm{, lsl #lsl}: vd = ~(imm << lsl) (4h/8h lsl 0|8, 2s/4s lsl 0..24)"""
    q, cmode = _shifted_imm_cmode(arr, lsl)
    return _modified_imm(vd, q, 1, cmode, _unsigned("imm", imm, 8))


def movi_zero(vd: int) -> int:
    """movi vd.2d, #0"""
    return movi(vd, 0, "2d")


def _fp_imm8_table() -> dict[float, int]:
    """Float value -> imm8 of every FP immediate fmov accepts (VFPExpandImm)."""
    table = {}
    for imm8 in range(256):
        sign, b6, exp_low, frac = imm8 >> 7, (imm8 >> 6) & 1, (imm8 >> 4) & 3, imm8 & 15
        exponent = (exp_low - 3) if b6 else (exp_low + 1)
        table[(-1) ** sign * (16 + frac) / 16 * 2.0 ** exponent] = imm8
    return table


_FP_IMM8 = _fp_imm8_table()


def _fp_imm8(value: float) -> int:
    try:
        if isinstance(value, (str, bytes, bool)):
            raise TypeError
        return _FP_IMM8[float(value)]
    except (KeyError, TypeError, ValueError):
        raise EncodingError(f"value = {value!r} is not an FP immediate (±(16..31)/16 * "
                            f"2**(-3..4); use movi for 0.0)") from None


def fmov_v_imm(vd: int, value: float, arr: str) -> int:
    """fmov vd.arr, #value (value = ±(16..31)/16 * 2**e, e in -3..4; arr 2s|4s|2d)"""
    q, sz = _fp_arrangement(arr)
    return _modified_imm(vd, q, sz, 0b1111, _fp_imm8(value))


# --------------------------------------------------------------------------------------------
# SIMD copy, permute, extract

def _element_imm5(elem: str, index: int, name: str = "index") -> int:
    """imm5 of dup/ins/umov: index bits above a one-hot element size."""
    log2 = _choice("elem", elem, _ELEMENTS)
    return (_unsigned(name, index, 4 - log2) << 1 | 1) << log2


def dup_elem(vd: int, vn: int, index: int, arr: str) -> int:
    """dup vd.arr, vn.elem[index] (elem from arr)"""
    q, size = _arrangement(arr, _INT_ARRS)
    imm5 = _element_imm5("bhsd"[size], index)
    return 0x0E000400 | q << 30 | imm5 << 16 | _vreg("vn", vn) << 5 | _vreg("vd", vd)


def dup_gpr(vd: int, rn: int, arr: str) -> int:
    """dup vd.arr, wn|xn (xn for 2d; 31 = zr)"""
    q, size = _arrangement(arr, _INT_ARRS)
    imm5 = 1 << size
    return 0x0E000C00 | q << 30 | imm5 << 16 | _gpr("rn", rn) << 5 | _vreg("vd", vd)


def dup_scalar(elem: str, vd: int, vn: int, index: int) -> int:
    """dup (mov) bd|hd|sd|dd, vn.elem[index]"""
    return 0x5E000400 | _element_imm5(elem, index) << 16 | _vreg("vn", vn) << 5 | _vreg("vd", vd)


def ins_elem(vd: int, elem: str, dst_index: int, vn: int, src_index: int) -> int:
    """ins (mov) vd.elem[dst_index], vn.elem[src_index]"""
    imm5 = _element_imm5(elem, dst_index, "dst_index")
    imm4 = _unsigned("src_index", src_index, 4 - _ELEMENTS[elem]) << _ELEMENTS[elem]
    return 0x6E000400 | imm5 << 16 | imm4 << 11 | _vreg("vn", vn) << 5 | _vreg("vd", vd)


def ins_gpr(vd: int, elem: str, index: int, rn: int) -> int:
    """ins (mov) vd.elem[index], wn|xn (xn for d; 31 = zr)"""
    imm5 = _element_imm5(elem, index)
    return 0x4E001C00 | imm5 << 16 | _gpr("rn", rn) << 5 | _vreg("vd", vd)


def umov(rd: int, vn: int, elem: str, index: int) -> int:
    """umov wd|xd, vn.elem[index] (xd for d; 31 = zr)"""
    imm5 = _element_imm5(elem, index)
    q = 1 if elem == "d" else 0
    return 0x0E003C00 | q << 30 | imm5 << 16 | _vreg("vn", vn) << 5 | _gpr("rd", rd)


def _permute(opcode: int, vd: int, vn: int, vm: int, arr: str) -> int:
    q, size = _arrangement(arr, _INT_ARRS)
    return (0x0E000800 | q << 30 | size << 22 | _vreg("vm", vm) << 16 | opcode << 12
            | _vreg("vn", vn) << 5 | _vreg("vd", vd))


def uzp1(vd: int, vn: int, vm: int, arr: str) -> int:
    """uzp1 vd.arr, vn.arr, vm.arr (even elements of vn:vm)"""
    return _permute(0b001, vd, vn, vm, arr)


def trn1(vd: int, vn: int, vm: int, arr: str) -> int:
    """trn1 vd.arr, vn.arr, vm.arr"""
    return _permute(0b010, vd, vn, vm, arr)


def zip1(vd: int, vn: int, vm: int, arr: str) -> int:
    """zip1 vd.arr, vn.arr, vm.arr (interleave low halves)"""
    return _permute(0b011, vd, vn, vm, arr)


def uzp2(vd: int, vn: int, vm: int, arr: str) -> int:
    """uzp2 vd.arr, vn.arr, vm.arr (odd elements of vn:vm)"""
    return _permute(0b101, vd, vn, vm, arr)


def trn2(vd: int, vn: int, vm: int, arr: str) -> int:
    """trn2 vd.arr, vn.arr, vm.arr"""
    return _permute(0b110, vd, vn, vm, arr)


def zip2(vd: int, vn: int, vm: int, arr: str) -> int:
    """zip2 vd.arr, vn.arr, vm.arr (interleave high halves)"""
    return _permute(0b111, vd, vn, vm, arr)


def ext(vd: int, vn: int, vm: int, index: int, arr: str) -> int:
    """ext vd.arr, vn.arr, vm.arr, #index (bytes: 0..7 for 8b, 0..15 for 16b)"""
    q, _ = _arrangement(arr, _BYTE_ARRS)
    return (0x2E000000 | q << 30 | _vreg("vm", vm) << 16
            | _unsigned("index", index, 3 + q) << 11 | _vreg("vn", vn) << 5 | _vreg("vd", vd))


# --------------------------------------------------------------------------------------------
# scalar floating point (size "s" or "d")

def _fp_dp2(opcode: int, size: str, vd: int, vn: int, vm: int) -> int:
    return (0x1E200800 | _fp_type(size) << 22 | _vreg("vm", vm) << 16 | opcode << 12
            | _vreg("vn", vn) << 5 | _vreg("vd", vd))


def fmul_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fmul sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0000, size, vd, vn, vm)


def fdiv_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fdiv sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0001, size, vd, vn, vm)


def fadd_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fadd sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0010, size, vd, vn, vm)


def fsub_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fsub sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0011, size, vd, vn, vm)


def fmax_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fmax sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0100, size, vd, vn, vm)


def fmin_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fmin sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0101, size, vd, vn, vm)


def fmaxnm_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fmaxnm sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0110, size, vd, vn, vm)


def fminnm_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fminnm sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b0111, size, vd, vn, vm)


def fnmul_s(size: str, vd: int, vn: int, vm: int) -> int:
    """fnmul sd|dd, sn|dn, sm|dm"""
    return _fp_dp2(0b1000, size, vd, vn, vm)


def _fp_dp1(opcode: int, size: str, vd: int, vn: int) -> int:
    return (0x1E204000 | _fp_type(size) << 22 | opcode << 15
            | _vreg("vn", vn) << 5 | _vreg("vd", vd))


def fmov_s(size: str, vd: int, vn: int) -> int:
    """fmov sd|dd, sn|dn"""
    return _fp_dp1(0b000000, size, vd, vn)


def fabs_s(size: str, vd: int, vn: int) -> int:
    """fabs sd|dd, sn|dn"""
    return _fp_dp1(0b000001, size, vd, vn)


def fneg_s(size: str, vd: int, vn: int) -> int:
    """fneg sd|dd, sn|dn"""
    return _fp_dp1(0b000010, size, vd, vn)


def fsqrt_s(size: str, vd: int, vn: int) -> int:
    """fsqrt sd|dd, sn|dn"""
    return _fp_dp1(0b000011, size, vd, vn)


def frintn_s(size: str, vd: int, vn: int) -> int:
    """frintn sd|dd, sn|dn"""
    return _fp_dp1(0b001000, size, vd, vn)


def frintm_s(size: str, vd: int, vn: int) -> int:
    """frintm sd|dd, sn|dn"""
    return _fp_dp1(0b001010, size, vd, vn)


def frintz_s(size: str, vd: int, vn: int) -> int:
    """frintz sd|dd, sn|dn"""
    return _fp_dp1(0b001011, size, vd, vn)


def _fp_dp3(base: int, size: str, vd: int, vn: int, vm: int, va: int) -> int:
    return (base | _fp_type(size) << 22 | _vreg("vm", vm) << 16 | _vreg("va", va) << 10
            | _vreg("vn", vn) << 5 | _vreg("vd", vd))


def fmadd_s(size: str, vd: int, vn: int, vm: int, va: int) -> int:
    """fmadd sd|dd, sn, sm, sa: va + vn*vm, fused"""
    return _fp_dp3(0x1F000000, size, vd, vn, vm, va)


def fmsub_s(size: str, vd: int, vn: int, vm: int, va: int) -> int:
    """fmsub sd|dd, sn, sm, sa: va - vn*vm, fused"""
    return _fp_dp3(0x1F008000, size, vd, vn, vm, va)


def fnmadd_s(size: str, vd: int, vn: int, vm: int, va: int) -> int:
    """fnmadd sd|dd, sn, sm, sa: -va - vn*vm, fused"""
    return _fp_dp3(0x1F200000, size, vd, vn, vm, va)


def fnmsub_s(size: str, vd: int, vn: int, vm: int, va: int) -> int:
    """fnmsub sd|dd, sn, sm, sa: -va + vn*vm, fused"""
    return _fp_dp3(0x1F208000, size, vd, vn, vm, va)


def fmov_imm_s(size: str, vd: int, value: float) -> int:
    """fmov sd|dd, #value (value = ±(16..31)/16 * 2**e, e in -3..4)"""
    return 0x1E201000 | _fp_type(size) << 22 | _fp_imm8(value) << 13 | _vreg("vd", vd)


def fcmp_s(size: str, vn: int, vm: int) -> int:
    """fcmp sn|dn, sm|dm"""
    return 0x1E202000 | _fp_type(size) << 22 | _vreg("vm", vm) << 16 | _vreg("vn", vn) << 5


def fcmp_zero_s(size: str, vn: int) -> int:
    """fcmp sn|dn, #0.0"""
    return 0x1E202008 | _fp_type(size) << 22 | _vreg("vn", vn) << 5


def fmov_s_from_w(vd: int, rn: int) -> int:
    """fmov sd, wn (31 = wzr)"""
    return 0x1E270000 | _gpr("rn", rn) << 5 | _vreg("vd", vd)


def fmov_w_from_s(rd: int, vn: int) -> int:
    """fmov wd, sn"""
    return 0x1E260000 | _vreg("vn", vn) << 5 | _gpr("rd", rd)


def fmov_d_from_x(vd: int, rn: int) -> int:
    """fmov dd, xn (31 = xzr)"""
    return 0x9E670000 | _gpr("rn", rn) << 5 | _vreg("vd", vd)


def fmov_x_from_d(rd: int, vn: int) -> int:
    """fmov xd, dn"""
    return 0x9E660000 | _vreg("vn", vn) << 5 | _gpr("rd", rd)

