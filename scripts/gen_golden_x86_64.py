#!/usr/bin/env python3
"""Regenerate tests/backends/x86_64/golden.txt with GNU as (host binutils) as the reference.

Each case is an encoder call (a Python expression over einjit.backends.x86_64.encode) and the
same instruction in GNU as Intel syntax. All cases are assembled in one file, each after its
own label; the bytes between consecutive labels are what `as` produced. The golden file holds
one case a line: call <TAB> assembly <TAB> hex bytes. The script also reports where the
encoders disagree with `as` (exit status 1), so it doubles as a development check.

Usage: scripts/gen_golden_x86_64.py [--check]   (--check: compare only, do not write)
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from einjit.backends.x86_64 import encode  # noqa: E402

GOLDEN = ROOT / "tests" / "backends" / "x86_64" / "golden.txt"

GPR_CONSTANTS = ("RAX", "RCX", "RDX", "RBX", "RSP", "RBP", "RSI", "RDI",
                 "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15")
GPR64 = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
         "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")
GPR32 = ("eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi",
         "r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d")
VECTOR_PREFIX = {128: "xmm", 256: "ymm", 512: "zmm"}
PTR = {8: "BYTE", 32: "DWORD", 64: "QWORD", 128: "XMMWORD", 256: "YMMWORD", 512: "ZMMWORD"}
WIDTHS = (128, 256, 512)
ALL_REGISTERS = tuple(range(32))

CASES: list[tuple[str, str]] = []


def case(expr: str, asm: str) -> None:
    CASES.append((expr, asm))


class M:
    """A memory operand rendered both as a Mem(...) expression and as GNU as text."""

    def __init__(self, base, index=None, scale=1, disp=0):
        self.base, self.index, self.scale, self.disp = base, index, scale, disp

    def expr(self) -> str:
        args = [GPR_CONSTANTS[self.base]]
        if self.index is not None:
            args += [GPR_CONSTANTS[self.index], str(self.scale)]
        if self.disp:
            args.append(f"disp={self.disp}")
        return f"Mem({', '.join(args)})"

    def address(self) -> str:
        text = GPR64[self.base]
        if self.index is not None:
            text += f"+{GPR64[self.index]}*{self.scale}"
        if self.disp:
            text += f"{self.disp:+d}"
        return f"[{text}]"

    def asm(self, bits: int) -> str:
        return f"{PTR[bits]} PTR {self.address()}"

    def bcst_asm(self, width: int, element_bits: int = 32) -> str:
        ptr = PTR[element_bits]
        return f"{ptr} PTR {self.address()}{{1to{width // element_bits}}}"


def v(reg: int, width: int) -> str:
    return f"{VECTOR_PREFIX[width]}{reg}"


def expr_of(value) -> str:
    return value.expr() if isinstance(value, M) else repr(value)


def call(name: str, *args, **kwargs) -> str:
    parts = [expr_of(a) for a in args]
    parts += [f"{key}={value!r}" for key, value in kwargs.items() if value]
    return f"{name}({', '.join(parts)})"


def decorated(text: str, mask: int = 0, zeroing: bool = False) -> str:
    return text + (f"{{k{mask}}}" if mask else "") + ("{z}" if zeroing else "")


def prefix(evex: bool) -> str:
    return "{evex} " if evex else ""


def vector_or_mem(value, width, bcst=False, mem_bits=None, element_bits=32) -> str:
    if isinstance(value, M):
        return value.bcst_asm(width, element_bits) if bcst else value.asm(mem_bits or width)
    return v(value, width)


# ---------------------------------------------------------------- general-purpose cases

def general_cases() -> None:
    for dst, src in ((0, 3), (3, 0), (8, 0), (0, 15), (12, 13), (4, 5), (15, 8)):
        case(f"mov_rr({GPR_CONSTANTS[dst]}, {GPR_CONSTANTS[src]})",
             f"mov {GPR64[dst]}, {GPR64[src]}")
    for dst in (0, 1, 8, 15):
        for imm in (0, 5, 2**31 - 1, 2**31, 2**32 - 1):
            reg32 = GPR32[dst]
            case(f"mov_ri({GPR_CONSTANTS[dst]}, {imm})", f"mov {reg32}, {imm}")
        for imm in (-1, -2**31):
            case(f"mov_ri({GPR_CONSTANTS[dst]}, {imm})", f"mov {GPR64[dst]}, {imm}")
        for imm in (2**32, -2**31 - 1, 2**63, -2**63, 2**64 - 1):
            case(f"mov_ri({GPR_CONSTANTS[dst]}, {imm})",
                 f"movabs {GPR64[dst]}, {imm & (2**64 - 1)}")

    # every base register with disp0/disp8/disp32 boundaries
    for base in range(16):
        for disp in (0, -128, 127, 128, -129):
            mem = M(base, disp=disp)
            case(f"mov_rm(RAX, {mem.expr()})", f"mov rax, {mem.asm(64)}")
    for base in (4, 5, 12, 13, 0, 8):
        for disp in (0, 1, -2**31, 2**31 - 1):
            mem = M(base, disp=disp)
            case(f"mov_mr({mem.expr()}, R9)", f"mov {mem.asm(64)}, r9")
    # base x index x scale, incl. r12/r13/rbp as index and rsp/rbp/r12/r13 as base
    disps = (0, 8, -128, 128)
    n = 0
    for base in (0, 4, 5, 12, 13, 15):
        for index in (1, 5, 12, 13, 15, 0):
            for scale in (1, 2, 4, 8):
                mem = M(base, index, scale, disps[n % len(disps)])
                n += 1
                dst = (0, 7, 8, 14)[n % 4]
                case(f"lea({GPR_CONSTANTS[dst]}, {mem.expr()})", f"lea {GPR64[dst]}, {mem.asm(64)}")

    for op in ("add", "sub", "and", "or", "xor", "cmp"):
        for dst in (0, 1, 9):
            for imm in (1, -128, 127, 128, -129, 2**31 - 1, -2**31):
                case(f"{op}_ri({GPR_CONSTANTS[dst]}, {imm})", f"{op} {GPR64[dst]}, {imm}")
        for dst, src in ((0, 1), (9, 2), (3, 14)):
            case(f"{op}_rr({GPR_CONSTANTS[dst]}, {GPR_CONSTANTS[src]})",
                 f"{op} {GPR64[dst]}, {GPR64[src]}")
        mem = M(12, 13, 8, 64)
        case(f"{op}_rr(R10, {mem.expr()})", f"{op} r10, {mem.asm(64)}")
    for a, b in ((0, 0), (1, 9), (12, 5)):
        case(f"test_rr({GPR_CONSTANTS[a]}, {GPR_CONSTANTS[b]})", f"test {GPR64[a]}, {GPR64[b]}")
    for dst, src in ((0, 1), (9, 2), (3, 14)):
        case(f"imul_rr({GPR_CONSTANTS[dst]}, {GPR_CONSTANTS[src]})",
             f"imul {GPR64[dst]}, {GPR64[src]}")
        for imm in (3, -128, 128, 4096, -2**31):
            case(f"imul_rri({GPR_CONSTANTS[dst]}, {GPR_CONSTANTS[src]}, {imm})",
                 f"imul {GPR64[dst]}, {GPR64[src]}, {imm}")
    mem = M(5, 9, 4, -8)
    case(f"imul_rr(R11, {mem.expr()})", f"imul r11, {mem.asm(64)}")
    case(f"imul_rri(R11, {mem.expr()}, 1000)", f"imul r11, {mem.asm(64)}, 1000")
    for op in ("shl", "shr", "sar"):
        for dst in (0, 10):
            for count in (0, 1, 2, 31, 63):
                case(f"{op}_ri({GPR_CONSTANTS[dst]}, {count})", f"{op} {GPR64[dst]}, {count}")
    for op in ("inc", "dec", "neg"):
        for dst in (0, 7, 8, 15):
            case(f"{op}({GPR_CONSTANTS[dst]})", f"{op} {GPR64[dst]}")
    for reg in range(16):
        case(f"push({GPR_CONSTANTS[reg]})", f"push {GPR64[reg]}")
        case(f"pop({GPR_CONSTANTS[reg]})", f"pop {GPR64[reg]}")
        case(f"call_r({GPR_CONSTANTS[reg]})", f"call {GPR64[reg]}")
    case("ret()", "ret")
    case("vzeroupper()", "vzeroupper")
    for cond in encode.CONDITION_CODES:
        for rel in (0, 0x100, -0x106):
            case(f"jcc({cond!r}, {rel})", f"{{disp32}} j{cond} .+{rel + 6}")
    for cond in ("e", "ne", "l"):
        for rel in (2**31 - 1, -2**31):
            case(f"jcc({cond!r}, {rel})", f"{{disp32}} j{cond} .+{rel + 6}")
    for rel in (0, 5, -5, 0x12345, -2**31, 2**31 - 1):
        case(f"jmp({rel})", f"{{disp32}} jmp .+{rel + 5}")
    for rel in (0, 5, -5, 0x12345, -2**31, 2**31 - 1):
        case(f"call({rel})", f"call .+{rel + 5}")
    nops = ("", "nop", "xchg ax, ax", "nop DWORD PTR [rax]", "{disp8} nop DWORD PTR [rax+0]",
            "{disp8} nop DWORD PTR [rax+rax*1+0]", "{disp8} nop WORD PTR [rax+rax*1+0]",
            "{disp32} nop DWORD PTR [rax+0]", "{disp32} nop DWORD PTR [rax+rax*1+0]",
            "{disp32} nop WORD PTR [rax+rax*1+0]")
    for length in range(1, 10):
        case(f"nop({length})", nops[length])
    case("nop(12)", f"{nops[9]}; {nops[3]}")
    case("nop(18)", f"{nops[9]}; {nops[9]}")
    for hint in (0, 1, 2):
        for mem in (M(0), M(12, 13, 2, 256)):
            case(f"prefetcht{hint}({mem.expr()})", f"prefetcht{hint} {mem.asm(8)}")


def mask_register_cases() -> None:
    for k, r in ((1, 0), (7, 15), (2, 9)):
        for size, name in (("b", GPR32), ("w", GPR32), ("d", GPR32), ("q", GPR64)):
            case(f"kmov{size}_kr({k}, {GPR_CONSTANTS[r]})", f"kmov{size} k{k}, {name[r]}")
        case(f"kmovw_rk({GPR_CONSTANTS[r]}, {k})", f"kmovw {GPR32[r]}, k{k}")
        case(f"kmovq_rk({GPR_CONSTANTS[r]}, {k})", f"kmovq {GPR64[r]}, k{k}")
    for dst, a, b in ((1, 1, 1), (7, 0, 3), (2, 5, 6)):
        case(f"kxnorw({dst}, {a}, {b})", f"kxnorw k{dst}, k{a}, k{b}")


# ---------------------------------------------------------------- vector cases

def three_operand(name, dst, a, b, width, *, mask=0, zeroing=False, bcst=False, evex=False,
                  mnemonic=None, extra=(), element_bits=32):
    """name(dst, a, b, *extra, width) ~ mnemonic dst{k}{z}, a, b, *extra."""
    expr = call(name, dst, a, b, *extra, width, mask=mask, zeroing=zeroing, bcst=bcst, evex=evex)
    operands = [decorated(v(dst, width), mask, zeroing), v(a, width),
                vector_or_mem(b, width, bcst, element_bits=element_bits)]
    operands += [str(x) for x in extra]
    case(expr, f"{prefix(evex)}{mnemonic or name} {', '.join(operands)}")


def memory_cases() -> None:
    """Addressing forms and displacement compression through vmovups loads and stores."""
    bases = (0, 4, 5, 12, 13, 8, 15)
    for width in (128, 256):
        for base in bases:
            for disp in (0, -128, 127, 128):
                mem = M(base, disp=disp)
                case(call("vmovups_load", 3, mem, width),
                     f"vmovups {v(3, width)}, {mem.asm(width)}")
        for mem in (M(0, 12, 4, 8), M(13, 12, 8, 0), M(4, 13, 1, -4), M(9, 14, 2, 1000),
                    M(5, 5, 8, 0)):
            case(call("vmovups_store", mem, 11, width), f"vmovups {mem.asm(width)}, {v(11, width)}")
    # EVEX: disp8 * N with N = 64 (zmm), 32 (ymm), 16 (xmm); non-multiples fall back to disp32
    compressed = {512: (0, 64, -64, 8128, 8192, -8192, -8256, 63, 100, 4, 2**31 - 64),
                  256: (32, -32, 4064, 4096, -4096, -4128, 16, 31),
                  128: (16, -16, 2032, 2048, -2048, -2064, 8)}
    for width, disps in compressed.items():
        for disp in disps:
            for base in (0, 4, 13):
                mem = M(base, disp=disp)
                evex = width != 512
                case(call("vmovups_load", 1, mem, width, evex=evex),
                     f"{prefix(evex)}vmovups {v(1, width)}, {mem.asm(width)}")
        for disp in disps[:4]:
            mem = M(12, 9, 4, disp)
            case(call("vmovups_store", mem, 20, width), f"vmovups {mem.asm(width)}, {v(20, width)}")
    for base, index, scale in ((15, 12, 2), (4, 13, 8), (13, 8, 1), (5, 0, 4)):
        mem = M(base, index, scale, 192)
        case(call("vmovups_load", 31, mem, 512), f"vmovups zmm31, {mem.asm(512)}")
    for width in WIDTHS:
        for reg, mem in ((0, M(7)), (9, M(11, 3, 4, 64)), (12, M(13, disp=-128))):
            case(call("vmovntps_store", mem, reg, width),
                 f"vmovntps {mem.asm(width)}, {v(reg, width)}")
        case(call("vmovntps_store", M(4, disp=4096), 25, width),
             f"vmovntps {M(4, disp=4096).asm(width)}, {v(25, width)}")
    case("sfence()", "sfence")
    case("mfence()", "mfence")
    for mem, reg in ((M(13), 0), (M(0, disp=8), 8), (M(12, 0, 8, 80), 1), (M(5, disp=4096), 15)):
        case(f"lock_xadd({mem.expr()}, {GPR_CONSTANTS[reg]})",
             f"lock xadd {mem.asm(64)}, {GPR64[reg]}")
        case(f"lock_cmpxchg({mem.expr()}, {GPR_CONSTANTS[reg]})",
             f"lock cmpxchg {mem.asm(64)}, {GPR64[reg]}")
    case("pause()", "pause")
    case("syscall()", "syscall")
    for mem in (M(4, disp=16), M(0), M(13), M(12, 9, 4, -128), M(5, disp=4096)):
        case(f"stmxcsr({mem.expr()})", f"stmxcsr {mem.asm(32)}")
        case(f"ldmxcsr({mem.expr()})", f"ldmxcsr {mem.asm(32)}")


def mask_cases() -> None:
    for width in WIDTHS:
        for k in range(1, 8):
            mem = M(k % 2 * 12, disp=64 * k)
            case(call("vmovups_load", k + 8, mem, width, mask=k),
                 f"vmovups {decorated(v(k + 8, width), k)}, {mem.asm(width)}")
            case(call("vmovups_load", k + 16, mem, width, mask=k, zeroing=True),
                 f"vmovups {decorated(v(k + 16, width), k, True)}, {mem.asm(width)}")
            case(call("vmovups_store", mem, k, width, mask=k),
                 f"vmovups {decorated(mem.asm(width), k)}, {v(k, width)}")
            three_operand("vaddps", k, k + 1, 30 - k, width, mask=k, zeroing=bool(k % 2))
        case(call("vmovups_rr", 2, 3, width, mask=4, zeroing=True),
             f"vmovups {decorated(v(2, width), 4, True)}, {v(3, width)}")
        three_operand("vfmadd231ps", 5, 6, M(1, disp=4), width, mask=3, bcst=True)
        three_operand("vfmadd231ps", 21, 6, M(1, disp=-512), width, mask=7, zeroing=True, bcst=True)


def move_cases() -> None:
    for name, mnemonic in (("vmovups_rr", "vmovups"), ("vmovaps_rr", "vmovaps")):
        for width in WIDTHS:
            for dst, src in ((0, 1), (0, 8), (8, 0), (8, 9), (15, 3), (16, 1), (1, 17), (31, 31),
                             (0, 24)):
                case(call(name, dst, src, width), f"{mnemonic} {v(dst, width)}, {v(src, width)}")
            case(call(name, 0, 8, width, evex=True),
                 f"{{evex}} {mnemonic} {v(0, width)}, {v(8, width)}")
    for width in WIDTHS:
        for dst, src in ((0, 1), (9, 8), (16, 2), (3, 31)):
            case(call("vbroadcastss", dst, src, width),
                 f"vbroadcastss {v(dst, width)}, {v(src, 128)}")
            case(call("vpbroadcastd", dst, src, width),
                 f"vpbroadcastd {v(dst, width)}, {v(src, 128)}")
        for dst, mem in ((0, M(0)), (12, M(13, 12, 4, 4)), (17, M(4, disp=508)),
                         (17, M(4, disp=512)), (25, M(9, disp=2)), (7, M(5, disp=-516))):
            case(call("vbroadcastss", dst, mem, width),
                 f"vbroadcastss {v(dst, width)}, {mem.asm(32)}")
            case(call("vpbroadcastd", dst, mem, width),
                 f"vpbroadcastd {v(dst, width)}, {mem.asm(32)}")
        case(call("vbroadcastss", 2, M(0, disp=4), width, mask=1, zeroing=True),
             f"vbroadcastss {decorated(v(2, width), 1, True)}, DWORD PTR [rax+4]")
        case(call("vbroadcastss", 2, M(0, disp=4), width, evex=True),
             f"{{evex}} vbroadcastss {v(2, width)}, DWORD PTR [rax+4]")
        for dst, src in ((0, 0), (16, 9), (31, 15)):
            case(f"vpbroadcastd_gpr({dst}, {GPR_CONSTANTS[src]}, {width})",
                 f"vpbroadcastd {v(dst, width)}, {GPR32[src]}")
        case("vpbroadcastd_gpr(4, RCX, %d, mask=2, zeroing=True)" % width,
             f"vpbroadcastd {decorated(v(4, width), 2, True)}, ecx")
    for reg, mem in ((0, M(0)), (9, M(12, disp=4)), (16, M(4, disp=508)),
                     (31, M(13, 14, 4, 512)), (2, M(5, disp=6))):
        case(call("vmovss_load", reg, mem), f"vmovss {v(reg, 128)}, {mem.asm(32)}")
        case(call("vmovss_store", mem, reg), f"vmovss {mem.asm(32)}, {v(reg, 128)}")
    case(call("vmovss_load", 3, M(0, disp=8), mask=1, zeroing=True),
         "vmovss xmm3{k1}{z}, DWORD PTR [rax+8]")
    case(call("vmovss_store", M(0, disp=8), 3, mask=6), "vmovss DWORD PTR [rax+8]{k6}, xmm3")
    case(call("vmovss_load", 3, M(0, disp=8), evex=True), "{evex} vmovss xmm3, DWORD PTR [rax+8]")
    for reg, a, mem, lane in ((0, 1, M(0), 0), (9, 9, M(12, disp=4), 1), (16, 3, M(4, disp=508), 2),
                              (2, 31, M(13, 14, 4, 512), 3), (8, 8, M(5, disp=6), 1)):
        case(call("vinsertps", reg, a, mem, lane << 4),
             f"vinsertps {v(reg, 128)}, {v(a, 128)}, {mem.asm(32)}, {lane << 4}")
        case(call("vinsertps", reg, a, 7, lane << 6 | lane << 4 | 0b1001),
             f"vinsertps {v(reg, 128)}, {v(a, 128)}, xmm7, {lane << 6 | lane << 4 | 0b1001}")
        case(call("vextractps", mem, reg, lane), f"vextractps {mem.asm(32)}, {v(reg, 128)}, {lane}")
        case(call("vmovhps_load", reg, a, mem),
             f"vmovhps {v(reg, 128)}, {v(a, 128)}, {mem.asm(64)}")
        case(call("vmovhps_store", mem, reg), f"vmovhps {mem.asm(64)}, {v(reg, 128)}")
        case(call("vmovddup", reg, mem), f"vmovddup {v(reg, 128)}, {mem.asm(64)}")
    for xmm, gpr in ((0, 0), (8, 1), (1, 9), (16, 15), (31, 4)):
        case(f"vmovd_xr({xmm}, {GPR_CONSTANTS[gpr]})", f"vmovd {v(xmm, 128)}, {GPR32[gpr]}")
        case(f"vmovd_rx({GPR_CONSTANTS[gpr]}, {xmm})", f"vmovd {GPR32[gpr]}, {v(xmm, 128)}")
    for width in (128, 256):
        for dst, mask, mem in ((0, 1, M(0)), (8, 15, M(12, 13, 4, 32)), (3, 9, M(5, disp=-128))):
            case(call("vmaskmovps_load", dst, mask, mem, width),
                 f"vmaskmovps {v(dst, width)}, {v(mask, width)}, {mem.asm(width)}")
            case(call("vmaskmovps_store", mem, mask, dst, width),
                 f"vmaskmovps {mem.asm(width)}, {v(mask, width)}, {v(dst, width)}")


ARITHMETIC = ("vaddps", "vsubps", "vmulps", "vdivps", "vminps", "vmaxps", "vandps", "vandnps",
              "vorps", "vxorps", "vunpcklps", "vunpckhps", "vunpcklpd", "vunpckhpd",
              "vfmadd132ps", "vfmadd213ps", "vfmadd231ps", "vfnmadd213ps", "vfnmadd231ps",
              "vfmaddsub213ps", "vpaddd", "vpsubd")
AVX512_ONLY = ("vpermt2ps", "vpermi2ps", "vscalefps")


def register_position_cases() -> None:
    """Every vector register in every operand position, at every width (VEX and EVEX)."""
    for width in WIDTHS:
        for r in ALL_REGISTERS:
            three_operand("vfmadd231ps", r, 1, 2, width)
            three_operand("vfmadd231ps", 1, r, 2, width)
            three_operand("vfmadd231ps", 1, 2, r, width)
        for dst, a in ((0, 31), (31, 0), (16, 8), (8, 16), (15, 24)):
            for mem in (M(0, disp=64), M(12, 15, 8, -64), M(13, disp=4)):
                three_operand("vfmadd231ps", dst, a, mem, width)
                three_operand("vfmadd231ps", dst, a, mem, width, bcst=True)
    for width in (128, 256):
        three_operand("vfmadd231ps", 1, 2, 3, width, evex=True)
        three_operand("vfmadd231ps", 9, 10, 11, width, evex=True)
        three_operand("vfmadd231ps", 1, 2, M(0, disp=32), width, evex=True)


def broadcast_cases() -> None:
    for width in WIDTHS:
        for disp in (0, 4, -4, 508, 512, -512, -516, 6, 2):
            three_operand("vfmadd231ps", 0, 1, M(3, disp=disp), width, bcst=True)
        three_operand("vmulps", 16, 31, M(12, 13, 4, 8), width, bcst=True)


def every_instruction_cases() -> None:
    for name in ARITHMETIC:
        for width in WIDTHS:
            three_operand(name, 0, 1, 2, width)
            three_operand(name, 8, 9, 15, width)
            three_operand(name, 16, 24, 31, width)
            three_operand(name, 3, 4, M(5, disp=64), width)
            three_operand(name, 3, 20, M(12, 1, 2, 256), width, mask=2)
            if name in ("vunpcklpd", "vunpckhpd"):
                continue  # their broadcast element is a qword
            three_operand(name, 17, 4, M(0, disp=8), width, bcst=True, mask=1, zeroing=True)
    for name in AVX512_ONLY:
        for width in WIDTHS:
            three_operand(name, 0, 1, 2, width)
            three_operand(name, 16, 9, 31, width, mask=3, zeroing=True)
            three_operand(name, 4, 5, M(13, disp=128), width)
            three_operand(name, 4, 5, M(4, disp=12), width, bcst=True)
    for width in (256, 512):
        three_operand("vpermps", 0, 1, 2, width)
        three_operand("vpermps", 8, 12, M(12, disp=64), width)
        three_operand("vpermps", 18, 3, 4, width)
        for name in ("vshuff32x4", "vshuff64x2"):
            for imm in (0, 0x44, 0xEE, 255):
                three_operand(name, imm % 32, 1, 2 + imm % 29, width, extra=(imm,))
            three_operand(name, 1, 2, M(0, disp=64), width, extra=(0x4E,), mask=5)
    for width in WIDTHS:
        for imm in (0, 0x44, 0xEE, 0xFF):
            three_operand("vshufps", 0, 1, 2, width, extra=(imm,))
        three_operand("vshufps", 8, 16, M(5, disp=32), width, extra=(0x1B,))
        three_operand("vshufps", 8, 16, M(5, disp=32), width, extra=(0x1B,), bcst=True, mask=4)
    for width in (128, 256):
        for dst, a, b, imm in ((0, 1, 2, 0x0F), (8, 9, 10, 0xF0), (15, 3, M(12, disp=32), 0x3C)):
            three_operand("vblendps", dst, a, b, width, extra=(imm % (1 << width // 32),))
    for dst, mem in ((0, M(0)), (9, M(13, 12, 4, 24)), (15, M(4, disp=-8)), (3, M(5, disp=1024))):
        case(call("vbroadcastf128", dst, mem), f"vbroadcastf128 ymm{dst}, {mem.asm(128)}")
        for width in (256, 512):
            case(call("vbroadcastsd", dst, mem, width),
                 f"vbroadcastsd {v(dst, width)}, {mem.asm(64)}")
    for width in (256, 512):
        for dst, src in ((0, 1), (9, 8), (16, 2), (3, 31)):
            case(call("vbroadcastsd", dst, src, width),
                 f"vbroadcastsd {v(dst, width)}, {v(src, 128)}")
        case(call("vbroadcastsd", 2, M(0, disp=1016), width, mask=1, zeroing=True),
             f"vbroadcastsd {decorated(v(2, width), 1, True)}, QWORD PTR [rax+1016]")
    for a, b, dst, imm in ((1, 2, 0, 0x20), (9, 10, 8, 0x31), (3, 15, 14, 0x13)):
        case(call("vperm2f128", dst, a, b, imm), f"vperm2f128 ymm{dst}, ymm{a}, ymm{b}, {imm}")
    case(call("vperm2f128", 0, 1, M(12, disp=32), 0x20),
         "vperm2f128 ymm0, ymm1, YMMWORD PTR [r12+32], 32")

    for dst, a, b, imm in ((0, 1, 2, 1), (8, 9, 10, 0), (16, 17, 18, 1), (3, 4, 31, 1)):
        case(call("vinsertf128", dst, a, b, imm),
             f"{'vinsertf32x4' if max(dst, a, b) >= 16 else 'vinsertf128'} "
             f"ymm{dst}, ymm{a}, xmm{b}, {imm}")
        case(call("vextractf128", b, a, imm),
             f"{'vextractf32x4' if max(a, b) >= 16 else 'vextractf128'} xmm{b}, ymm{a}, {imm}")
    for mem in (M(0, disp=16), M(13, 12, 4, 2048), M(4, disp=8)):
        case(call("vinsertf128", 1, 2, mem, 1), f"vinsertf128 ymm1, ymm2, {mem.asm(128)}, 1")
        case(call("vextractf128", mem, 2, 1), f"vextractf128 {mem.asm(128)}, ymm2, 1")
    for width in (256, 512):
        for dst, a, b, imm in ((0, 1, 2, 1), (16, 17, 30, 3 % (width // 128)), (8, 9, 10, 0)):
            case(call("vinsertf32x4", dst, a, b, imm, width),
                 f"vinsertf32x4 {v(dst, width)}, {v(a, width)}, xmm{b}, {imm}")
            case(call("vextractf32x4", b, a, imm, width),
                 f"vextractf32x4 xmm{b}, {v(a, width)}, {imm}")
        for mem in (M(0, disp=16), M(0, disp=2032), M(0, disp=2048), M(13, disp=8)):
            case(call("vinsertf32x4", 5, 6, mem, 1, width, mask=2, zeroing=True),
                 f"vinsertf32x4 {decorated(v(5, width), 2, True)}, {v(6, width)}, "
                 f"{mem.asm(128)}, 1")
            case(call("vextractf32x4", mem, 6, 1, width, mask=3),
                 f"vextractf32x4 {decorated(mem.asm(128), 3)}, {v(6, width)}, 1")
        case(call("vextractf32x4", 7, 6, 1, width, mask=3, zeroing=True),
             f"vextractf32x4 {decorated('xmm7', 3, True)}, {v(6, width)}, 1")
    for dst, a, b, imm in ((0, 1, 2, 1), (16, 17, 31, 0), (8, 9, 10, 1)):
        case(call("vinsertf64x4", dst, a, b, imm), f"vinsertf64x4 zmm{dst}, zmm{a}, ymm{b}, {imm}")
        case(call("vextractf64x4", b, a, imm), f"vextractf64x4 ymm{b}, zmm{a}, {imm}")
    for mem in (M(0, disp=32), M(0, disp=4064), M(0, disp=4096), M(12, disp=16)):
        case(call("vinsertf64x4", 3, 4, mem, 1, mask=1),
             f"vinsertf64x4 zmm3{{k1}}, zmm4, {mem.asm(256)}, 1")
        case(call("vextractf64x4", mem, 4, 1), f"vextractf64x4 {mem.asm(256)}, zmm4, 1")

    for width in (128, 256):
        for dst, a, b, m in ((0, 1, 2, 3), (8, 9, 10, 15), (4, 12, M(13, disp=8), 7)):
            case(call("vblendvps", dst, a, b, m, width),
                 f"vblendvps {v(dst, width)}, {v(a, width)}, {vector_or_mem(b, width)}, "
                 f"{v(m, width)}")
        for dst, src, imm in ((0, 1, 0), (9, 12, 1), (2, M(0, disp=64), 11)):
            case(call("vroundps", dst, src, imm, width),
                 f"vroundps {v(dst, width)}, {vector_or_mem(src, width)}, {imm}")
    for width in WIDTHS:
        for k in (1, 7):
            case(call("vblendmps", 0, 1, 2, width, k),
                 f"vblendmps {decorated(v(0, width), k)}, {v(1, width)}, {v(2, width)}")
        case(call("vblendmps", 16, 31, M(0, disp=64), width, 5, zeroing=True),
             f"vblendmps {decorated(v(16, width), 5, True)}, {v(31, width)}, "
             f"{M(0, disp=64).asm(width)}")
        case(call("vblendmps", 16, 31, M(0, disp=64), width, 5, bcst=True),
             f"vblendmps {decorated(v(16, width), 5)}, {v(31, width)}, "
             f"{M(0, disp=64).bcst_asm(width)}")
        for dst, src, imm in ((0, 1, 0), (16, 30, 0x11), (2, M(4, disp=64), 3)):
            case(call("vrndscaleps", dst, src, imm, width),
                 f"vrndscaleps {v(dst, width)}, {vector_or_mem(src, width)}, {imm}")
        case(call("vrndscaleps", 2, M(4, disp=8), 1, width, mask=1, zeroing=True, bcst=True),
             f"vrndscaleps {decorated(v(2, width), 1, True)}, {M(4, disp=8).bcst_asm(width)}, 1")

        for name in ("vcvtps2dq", "vcvttps2dq", "vcvtdq2ps", "vsqrtps", "vrcp14ps"):
            for dst, src in ((0, 1), (8, 15), (16, 31), (3, M(13, disp=64))):
                case(call(name, dst, src, width),
                     f"{name} {v(dst, width)}, {vector_or_mem(src, width)}")
            case(call(name, 4, M(0, disp=-8), width, mask=6, zeroing=True, bcst=True),
                 f"{name} {decorated(v(4, width), 6, True)}, {M(0, disp=-8).bcst_asm(width)}")
        for name, mnemonic in (("vpslld_ri", "vpslld"), ("vpsrld_ri", "vpsrld"),
                               ("vpsrad_ri", "vpsrad")):
            for dst, src, n in ((0, 1, 23), (9, 8, 1), (16, 2, 31), (3, 29, 0),
                                (5, M(12, disp=64), 4)):
                case(call(name, dst, src, n, width),
                     f"{mnemonic} {v(dst, width)}, {vector_or_mem(src, width)}, {n}")
            case(call(name, 5, M(0, disp=4), 7, width, mask=2, bcst=True),
                 f"{mnemonic} {decorated(v(5, width), 2)}, {M(0, disp=4).bcst_asm(width)}, 7")
            case(call(name, 5, 6, 7, width, mask=1, zeroing=True),
                 f"{mnemonic} {decorated(v(5, width), 1, True)}, {v(6, width)}, 7")
            if width < 512:
                case(call(name, 5, 6, 7, width, evex=True),
                     f"{{evex}} {mnemonic} {v(5, width)}, {v(6, width)}, 7")


def compare_cases() -> None:
    for width in (128, 256):
        for dst, a, b, pred in ((0, 1, 2, 0), (8, 9, 10, 1), (15, 3, M(12, disp=32), 14)):
            case(call("vcmpps", dst, a, b, pred, width),
                 f"vcmpps {v(dst, width)}, {v(a, width)}, {vector_or_mem(b, width)}, {pred}")
        for name in ("vpcmpeqd", "vpcmpgtd"):
            case(call(name, 1, 2, 3, width), f"{name} {v(1, width)}, {v(2, width)}, {v(3, width)}")
            case(call(name, 9, 10, M(0, disp=4), width),
                 f"{name} {v(9, width)}, {v(10, width)}, {M(0, disp=4).asm(width)}")
    for width in WIDTHS:
        for k, a, b, pred, mask in ((1, 2, 3, 1, 0), (7, 16, 31, 0, 2),
                                    (2, 8, M(13, disp=128), 30, 0), (3, 0, 1, 4, 7)):
            evex = width < 512 and max(a, b if isinstance(b, int) else 0) < 16 and not mask
            case(call("vcmpps", k, a, b, pred, width, mask=mask, evex=evex),
                 f"{prefix(evex)}vcmpps {decorated(f'k{k}', mask)}, {v(a, width)}, "
                 f"{vector_or_mem(b, width)}, {pred}")
        case(call("vcmpps", 1, 2, M(0, disp=8), 3, width, bcst=True),
             f"vcmpps k1, {v(2, width)}, {M(0, disp=8).bcst_asm(width)}, 3")
        for name in ("vpcmpeqd", "vpcmpgtd"):
            case(call(name, 5, 20, 21, width), f"{name} k5, {v(20, width)}, {v(21, width)}")
            case(call(name, 5, 1, M(0, disp=4), width, mask=1, bcst=True),
                 f"{name} k5{{k1}}, {v(1, width)}, {M(0, disp=4).bcst_asm(width)}")


DOUBLE_ARITHMETIC = ("vaddpd", "vsubpd", "vmulpd", "vdivpd", "vminpd", "vmaxpd", "vandpd",
                     "vandnpd", "vorpd", "vxorpd", "vfmadd132pd", "vfmadd213pd", "vfmadd231pd",
                     "vfnmadd213pd", "vfnmadd231pd", "vfmaddsub213pd", "vpaddq", "vpsubq")
DOUBLE_AVX512_ONLY = ("vpermt2pd", "vscalefpd")


def double_cases() -> None:
    """The packed-double forms: 64-bit masks ({k} per qword) and {1to8}/{1to4} broadcasts."""
    for name in DOUBLE_ARITHMETIC:
        for width in WIDTHS:
            three_operand(name, 0, 1, 2, width)
            three_operand(name, 8, 9, 15, width)
            three_operand(name, 16, 24, 31, width)
            three_operand(name, 3, 4, M(5, disp=64), width)
            three_operand(name, 3, 20, M(12, 1, 2, 256), width, mask=2)
            three_operand(name, 17, 4, M(0, disp=8), width, bcst=True, mask=1, zeroing=True,
                          element_bits=64)
            three_operand(name, 5, 6, M(3, disp=1016), width, bcst=True, element_bits=64)
            three_operand(name, 5, 6, M(3, disp=1024), width, bcst=True, element_bits=64)
            three_operand(name, 5, 6, M(3, disp=4), width, bcst=True, element_bits=64)
    for width in WIDTHS:
        for r in (0, 7, 8, 15, 16, 23, 24, 31):
            three_operand("vfmadd231pd", r, 31 - r, r ^ 5, width)
        for name in DOUBLE_AVX512_ONLY:
            three_operand(name, 0, 1, 2, width)
            three_operand(name, 16, 9, 31, width, mask=3, zeroing=True)
            three_operand(name, 4, 5, M(4, disp=16), width, bcst=True, element_bits=64)
    for width in WIDTHS:
        for imm in (0, 0x55, 0xFF):
            three_operand("vshufpd", imm % 32, 1, 2, width, extra=(imm,))
        three_operand("vshufpd", 8, 16, M(5, disp=32), width, extra=(3,), bcst=True, mask=4,
                      element_bits=64)
        for k in range(1, 8, 3):
            mem = M(k % 2 * 12, disp=64 * k)
            case(call("vmovupd_load", k + 8, mem, width, mask=k),
                 f"vmovupd {decorated(v(k + 8, width), k)}, {mem.asm(width)}")
            case(call("vmovupd_load", k + 16, mem, width, mask=k, zeroing=True),
                 f"vmovupd {decorated(v(k + 16, width), k, True)}, {mem.asm(width)}")
            case(call("vmovupd_store", mem, k, width, mask=k),
                 f"vmovupd {decorated(mem.asm(width), k)}, {v(k, width)}")
        for base in (0, 4, 5, 12, 13):
            for disp in (0, -128, 128, 64):
                mem = M(base, disp=disp)
                case(call("vmovupd_load", 3, mem, width),
                     f"vmovupd {v(3, width)}, {mem.asm(width)}")
                case(call("vmovupd_store", mem, 30, width),
                     f"vmovupd {mem.asm(width)}, {v(30, width)}")
        for reg, mem in ((0, M(7)), (9, M(11, 3, 4, 64)), (25, M(4, disp=4096))):
            case(call("vmovntpd_store", mem, reg, width),
                 f"vmovntpd {mem.asm(width)}, {v(reg, width)}")
        for name, mnemonic in (("vmovupd_rr", "vmovupd"), ("vmovapd_rr", "vmovapd")):
            for dst, src in ((0, 1), (0, 8), (8, 0), (16, 1), (31, 31)):
                case(call(name, dst, src, width), f"{mnemonic} {v(dst, width)}, {v(src, width)}")
        for dst, src in ((0, 1), (9, 8), (16, 2), (3, 31)):
            case(call("vpbroadcastq", dst, src, width),
                 f"vpbroadcastq {v(dst, width)}, {v(src, 128)}")
        for dst, mem in ((0, M(0)), (17, M(4, disp=1016)), (7, M(5, disp=-1032))):
            case(call("vpbroadcastq", dst, mem, width),
                 f"vpbroadcastq {v(dst, width)}, {mem.asm(64)}")
        for dst, src in ((0, 0), (16, 9), (31, 15)):
            case(f"vpbroadcastq_gpr({dst}, {GPR_CONSTANTS[src]}, {width})",
                 f"vpbroadcastq {v(dst, width)}, {GPR64[src]}")
        case(f"vpbroadcastq_gpr(4, RCX, {width}, mask=2, zeroing=True)",
             f"vpbroadcastq {decorated(v(4, width), 2, True)}, rcx")
        for k in (1, 7):
            case(call("vblendmpd", 0, 1, 2, width, k),
                 f"vblendmpd {decorated(v(0, width), k)}, {v(1, width)}, {v(2, width)}")
        case(call("vblendmpd", 16, 31, M(0, disp=64), width, 5, bcst=True),
             f"vblendmpd {decorated(v(16, width), 5)}, {v(31, width)}, "
             f"{M(0, disp=64).bcst_asm(width, 64)}")
        for dst, src, imm in ((0, 1, 0), (16, 30, 0x11), (2, M(4, disp=64), 3)):
            case(call("vrndscalepd", dst, src, imm, width),
                 f"vrndscalepd {v(dst, width)}, {vector_or_mem(src, width)}, {imm}")
        for name, mnemonic in (("vpsllq_ri", "vpsllq"), ("vpsrlq_ri", "vpsrlq")):
            for dst, src, n in ((0, 1, 52), (9, 8, 1), (16, 2, 63), (5, M(12, disp=64), 4)):
                case(call(name, dst, src, n, width),
                     f"{mnemonic} {v(dst, width)}, {vector_or_mem(src, width)}, {n}")
            case(call(name, 5, M(0, disp=8), 7, width, mask=2, bcst=True),
                 f"{mnemonic} {decorated(v(5, width), 2)}, {M(0, disp=8).bcst_asm(width, 64)}, 7")
        for k, a, b, pred, mask in ((1, 2, 3, 1, 0), (7, 16, 31, 0, 2),
                                    (2, 8, M(13, disp=128), 21, 0)):
            evex = width < 512 and max(a, b if isinstance(b, int) else 0) < 16 and not mask
            case(call("vcmppd", k, a, b, pred, width, mask=mask, evex=evex),
                 f"{prefix(evex)}vcmppd {decorated(f'k{k}', mask)}, {v(a, width)}, "
                 f"{vector_or_mem(b, width)}, {pred}")
        case(call("vcmppd", 1, 2, M(0, disp=8), 7, width, bcst=True),
             f"vcmppd k1, {v(2, width)}, {M(0, disp=8).bcst_asm(width, 64)}, 7")
        for name in ("vpcmpeqq", "vpcmpgtq"):
            case(call(name, 5, 20, 21, width), f"{name} k5, {v(20, width)}, {v(21, width)}")
            case(call(name, 5, 1, M(0, disp=8), width, mask=1, bcst=True),
                 f"{name} k5{{k1}}, {v(1, width)}, {M(0, disp=8).bcst_asm(width, 64)}")
    for width in (128, 256):
        for dst, a, b, pred in ((0, 1, 2, 0), (8, 9, 10, 3), (15, 3, M(12, disp=32), 21)):
            case(call("vcmppd", dst, a, b, pred, width),
                 f"vcmppd {v(dst, width)}, {v(a, width)}, {vector_or_mem(b, width)}, {pred}")
        for name in ("vpcmpeqq", "vpcmpgtq"):
            case(call(name, 1, 2, 3, width), f"{name} {v(1, width)}, {v(2, width)}, {v(3, width)}")
            case(call(name, 9, 10, M(0, disp=8), width),
                 f"{name} {v(9, width)}, {v(10, width)}, {M(0, disp=8).asm(width)}")
        for dst, mask, mem in ((0, 1, M(0)), (8, 15, M(12, 13, 4, 32)), (3, 9, M(5, disp=-128))):
            case(call("vmaskmovpd_load", dst, mask, mem, width),
                 f"vmaskmovpd {v(dst, width)}, {v(mask, width)}, {mem.asm(width)}")
            case(call("vmaskmovpd_store", mem, mask, dst, width),
                 f"vmaskmovpd {mem.asm(width)}, {v(mask, width)}, {v(dst, width)}")
        for dst, a, b, m in ((0, 1, 2, 3), (8, 9, 10, 15), (4, 12, M(13, disp=8), 7)):
            case(call("vblendvpd", dst, a, b, m, width),
                 f"vblendvpd {v(dst, width)}, {v(a, width)}, {vector_or_mem(b, width)}, "
                 f"{v(m, width)}")
        for dst, a, b, imm in ((0, 1, 2, 1), (8, 9, 10, 2), (15, 3, M(12, disp=32), 3)):
            three_operand("vblendpd", dst, a, b, width, extra=(imm % (1 << width // 64),))
        for dst, src, imm in ((0, 1, 0), (9, 12, 1), (2, M(0, disp=64), 11)):
            case(call("vroundpd", dst, src, imm, width),
                 f"vroundpd {v(dst, width)}, {vector_or_mem(src, width)}, {imm}")
    for xmm, gpr in ((0, 0), (8, 1), (1, 9), (16, 15), (31, 4)):
        case(f"vmovq_xr({xmm}, {GPR_CONSTANTS[gpr]})", f"vmovq {v(xmm, 128)}, {GPR64[gpr]}")
        case(f"vmovq_rx({GPR_CONSTANTS[gpr]}, {xmm})", f"vmovq {GPR64[gpr]}, {v(xmm, 128)}")


def build_cases() -> None:
    general_cases()
    mask_register_cases()
    memory_cases()
    mask_cases()
    move_cases()
    register_position_cases()
    broadcast_cases()
    every_instruction_cases()
    compare_cases()
    double_cases()


# ---------------------------------------------------------------- assembling

def run(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")
    return result.stdout


def assemble(asm_lines: list[str]) -> list[bytes]:
    """Bytes GNU as produces for each entry (one or more instructions separated by ';')."""
    source = [".intel_syntax noprefix", ".text"]
    for i, text in enumerate(asm_lines):
        source += [f"case_{i}:", text]
    source.append("case_end:")
    with tempfile.TemporaryDirectory() as tmp:
        src, obj, binary = (pathlib.Path(tmp) / name
                            for name in ("cases.s", "cases.o", "cases.bin"))
        src.write_text("\n".join(source) + "\n")
        run("as", "--64", "-o", str(obj), str(src))
        run("objcopy", "-O", "binary", "--only-section=.text", str(obj), str(binary))
        code = binary.read_bytes()
        symbols = {}
        for line in run("nm", str(obj)).splitlines():
            address, _, name = line.split()
            symbols[name] = int(address, 16)
    starts = [symbols[f"case_{i}"] for i in range(len(asm_lines))] + [symbols["case_end"]]
    return [code[starts[i]:starts[i + 1]] for i in range(len(asm_lines))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare only; do not write the golden file")
    args = parser.parse_args()
    build_cases()
    expected = assemble([asm for _, asm in CASES])
    namespace = vars(encode)
    mismatches = 0
    for (expr, asm), want in zip(CASES, expected):
        try:
            got = eval(expr, namespace).hex()  # noqa: S307 - our own case table
        except Exception as error:  # report every broken case, not only the first
            got = f"{type(error).__name__}: {error}"
        if got != want.hex():
            mismatches += 1
            print(f"MISMATCH {expr}\n    as:  {asm}\n    want {want.hex()}\n    got  {got}")
    if not args.check:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        lines = ["# x86-64 encoder golden cases: call<TAB>GNU as Intel syntax<TAB>bytes from `as`",
                 "# generated by scripts/gen_golden_x86_64.py; do not edit by hand"]
        lines += [f"{expr}\t{asm}\t{want.hex()}" for (expr, asm), want in zip(CASES, expected)]
        GOLDEN.write_text("\n".join(lines) + "\n")
    print(f"{len(CASES)} cases, {mismatches} mismatches"
          + ("" if args.check else f"; wrote {GOLDEN}"))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
