#!/usr/bin/env python3
"""Regenerate tests/backends/aarch64/golden.txt: A64 encoder calls and the words GNU as gives them.

Each case is an encoder call (evaluated against einjit.backends.aarch64.encode) and the
assembly text that GNU as accepts for the same instruction(s). This script assembles all the
texts with aarch64-linux-gnu-as (apt package binutils-aarch64-linux-gnu), extracts the .text
words with objcopy and writes one line per case:

    <hex word(s)>\t<call>\t<asm>

Multi-instruction cases (mov_imm) separate statements with "; " and words with spaces. The
expected words come only from binutils; the script then reports, as information, the cases
where the encoders disagree (tests/test_encode_aarch64.py is the check that counts).

Usage: python scripts/gen_golden_aarch64.py [--as aarch64-linux-gnu-as]
"""

import argparse
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "backends" / "aarch64" / "golden.txt"

ALL_ARRS = ("8b", "16b", "4h", "8h", "2s", "4s", "1d", "2d")
INT_ARRS = ("8b", "16b", "4h", "8h", "2s", "4s", "2d")
FP_ARRS = ("2s", "4s", "2d")
ELEMENT_BITS = {"b": 8, "h": 16, "s": 32, "d": 64}
CONDITIONS = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls",
              "ge", "lt", "gt", "le", "al")


def x(reg, sp=False):
    """Assembly name of a 64-bit general register; 31 is sp or xzr as the operand says."""
    if reg == 31:
        return "sp" if sp else "xzr"
    return f"x{reg}"


def w(reg):
    return "wzr" if reg == 31 else f"w{reg}"


def elem_of(arr):
    return arr[-1]


def reglist(regs, arr):
    return "{" + ", ".join(f"v{r}.{arr}" for r in regs) + "}"


def rel(offset):
    return f".{offset:+d}"


def base_cases():
    cases = []
    for name, mnem, dst_sp in (("add_imm", "add", True), ("sub_imm", "sub", True),
                               ("adds_imm", "adds", False), ("subs_imm", "subs", False)):
        for rd, rn, imm, shift in ((0, 1, 0, 0), (0, 1, 4095, 0), (31, 31, 16, 0),
                                   (30, 31, 4095, 12), (2, 30, 1, 12), (29, 3, 2048, 0)):
            text = f"{mnem} {x(rd, dst_sp)}, {x(rn, True)}, #{imm}"
            if shift:
                text += ", lsl #12"
            cases.append((f"{name}({rd}, {rn}, {imm}, {shift})", text))
    cases += [("cmp_imm(3, 4095)", "cmp x3, #4095"), ("cmp_imm(31, 0)", "cmp sp, #0"),
              ("cmp_imm(0, 1, 12)", "cmp x0, #1, lsl #12"), ("cmn_imm(2, 1)", "cmn x2, #1"),
              ("mov_sp(31, 0)", "mov sp, x0"), ("mov_sp(0, 31)", "mov x0, sp"),
              ("mov_sp(29, 31)", "mov x29, sp")]
    for name, mnem in (("add_reg", "add"), ("sub_reg", "sub"), ("adds_reg", "adds"),
                       ("subs_reg", "subs"), ("and_reg", "and"), ("orr_reg", "orr"),
                       ("eor_reg", "eor"), ("ands_reg", "ands")):
        for rd, rn, rm, lsl in ((0, 1, 2, 0), (31, 31, 31, 0), (3, 4, 5, 63), (30, 29, 28, 3)):
            text = f"{mnem} {x(rd)}, {x(rn)}, {x(rm)}"
            if lsl:
                text += f", lsl #{lsl}"
            cases.append((f"{name}({rd}, {rn}, {rm}, {lsl})", text))
    cases += [("cmp_reg(1, 2)", "cmp x1, x2"), ("cmp_reg(31, 30, 4)", "cmp xzr, x30, lsl #4"),
              ("tst_reg(5, 6)", "tst x5, x6"), ("mov_reg(0, 1)", "mov x0, x1"),
              ("mov_reg(30, 31)", "mov x30, xzr"), ("mov_reg(19, 0)", "mov x19, x0")]
    for name, mnem in (("add_ext", "add"), ("sub_ext", "sub")):
        for rd, rn, rm, lsl in ((31, 31, 0, 0), (0, 31, 1, 3), (31, 31, 9, 4), (0, 1, 2, 2)):
            text = f"{mnem} {x(rd, True)}, {x(rn, True)}, {x(rm)}"
            if rd == 31 or rn == 31:
                text += f", lsl #{lsl}" if lsl else ""
            else:
                text += f", uxtx #{lsl}"
            cases.append((f"{name}({rd}, {rn}, {rm}, {lsl})", text))
    for name, mnem, rd_sp in (("and_imm", "and", True), ("orr_imm", "orr", True),
                              ("eor_imm", "eor", True), ("ands_imm", "ands", False)):
        for rd, rn, imm in ((0, 1, 0xFF), (31, 1, 0xFFFFFFFFFFFFFFF0), (2, 3, 0x5555555555555555),
                            (4, 5, 0x8000000000000000), (6, 31, 0x00FF00FF00FF00FF),
                            (7, 8, 0x0000FFFF0000FFFF), (9, 10, 0x7FFFFFFFFFFFFFFF),
                            (11, 12, 0x3C3C3C3C3C3C3C3C), (13, 14, 0xFFF0000000000FFF)):
            cases.append((f"{name}({rd}, {rn}, {imm:#x})",
                          f"{mnem} {x(rd, rd_sp)}, {x(rn)}, #{imm:#x}"))
    cases += [("tst_imm(1, 1)", "tst x1, #0x1"), ("and_imm(0, 0, -16)",
                                                  "and x0, x0, #0xfffffffffffffff0")]
    for name in ("movz", "movn", "movk"):
        for rd, imm, shift in ((0, 0, 0), (1, 0xFFFF, 48), (2, 0x1234, 16), (30, 0xBEEF, 32)):
            cases.append((f"{name}({rd}, {imm:#x}, {shift})",
                          f"{name} x{rd}, #{imm:#x}, lsl #{shift}"))
    cases += mov_imm_cases()
    for name, mnem in (("lsl_imm", "lsl"), ("lsr_imm", "lsr"), ("asr_imm", "asr")):
        for rd, rn, amount in ((0, 1, 0), (2, 3, 1), (4, 5, 63), (30, 31, 2)):
            cases.append((f"{name}({rd}, {rn}, {amount})",
                          f"{mnem} {x(rd)}, {x(rn)}, #{amount}"))
    for name, mnem in (("lsl_reg", "lsl"), ("lsr_reg", "lsr"), ("asr_reg", "asr")):
        cases.append((f"{name}(0, 1, 2)", f"{mnem} x0, x1, x2"))
        cases.append((f"{name}(30, 31, 29)", f"{mnem} x30, xzr, x29"))
    cases += [("madd(0, 1, 2, 3)", "madd x0, x1, x2, x3"),
              ("msub(30, 29, 28, 27)", "msub x30, x29, x28, x27"),
              ("mul(0, 1, 2)", "mul x0, x1, x2"), ("mul(30, 31, 29)", "mul x30, xzr, x29"),
              ("csel(0, 1, 2, 'lt')", "csel x0, x1, x2, lt"),
              ("csel(30, 31, 3, 'hi')", "csel x30, xzr, x3, hi"),
              ("nop()", "nop"), ("ret()", "ret"), ("ret(1)", "ret x1"), ("br(16)", "br x16"),
              ("blr(17)", "blr x17"),
              ("svc()", "svc #0"), ("svc(65535)", "svc #0xffff"), ("yield_()", "yield"),
              ("dmb()", "dmb ish"), ("dmb('ishld')", "dmb ishld"), ("dmb('ishst')", "dmb ishst"),
              ("dmb('sy')", "dmb sy")]
    for rt, rn in ((0, 1), (30, 31), (9, 19)):
        cases += [(f"ldar_x({rt}, {rn})", f"ldar {x(rt)}, [{x(rn, True)}]"),
                  (f"stlr_x({rt}, {rn})", f"stlr {x(rt)}, [{x(rn, True)}]"),
                  (f"ldxr_x({rt}, {rn})", f"ldxr {x(rt)}, [{x(rn, True)}]")]
    for rs, rt, rn in ((0, 1, 2), (11, 10, 22), (30, 29, 31), (2, 31, 0)):
        cases.append((f"stxr_x({rs}, {rt}, {rn})", f"stxr w{rs}, {x(rt)}, [{x(rn, True)}]"))
    for sysreg in ("fpcr", "fpsr"):
        cases += [(f"mrs(9, {sysreg!r})", f"mrs x9, {sysreg}"),
                  (f"mrs(31, {sysreg!r})", f"mrs xzr, {sysreg}"),
                  (f"msr({sysreg!r}, 0)", f"msr {sysreg}, x0"),
                  (f"msr({sysreg!r}, 30)", f"msr {sysreg}, x30")]
    return cases


def mov_imm_cases():
    """(value, statements): the shortest movz/movn + movk sequence for each value."""
    table = (
        (0, ["movz x0, #0x0, lsl #0"]),
        (1, ["movz x0, #0x1, lsl #0"]),
        (0xFFFF, ["movz x0, #0xffff, lsl #0"]),
        (0x10000, ["movz x0, #0x1, lsl #16"]),
        (0x12345678, ["movz x0, #0x5678, lsl #0", "movk x0, #0x1234, lsl #16"]),
        (-1, ["movn x0, #0x0, lsl #0"]),
        (-2, ["movn x0, #0x1, lsl #0"]),
        (0xFFFFFFFF, ["movz x0, #0xffff, lsl #0", "movk x0, #0xffff, lsl #16"]),
        (0x123456789ABCDEF0, ["movz x0, #0xdef0, lsl #0", "movk x0, #0x9abc, lsl #16",
                              "movk x0, #0x5678, lsl #32", "movk x0, #0x1234, lsl #48"]),
        (-0x10000, ["movn x0, #0xffff, lsl #0"]),
        (1 << 63, ["movz x0, #0x8000, lsl #48"]),
        (0xFFFF_FFFF_1234_FFFF, ["movn x0, #0xedcb, lsl #16"]),
        (0xFFFF_0000_FFFF_0000, ["movz x0, #0xffff, lsl #16", "movk x0, #0xffff, lsl #48"]),
        (-4096 * 4, ["movn x0, #0x3fff, lsl #0"]),
        (0x0001_0000_0000_0002, ["movz x0, #0x2, lsl #0", "movk x0, #0x1, lsl #48"]),
        (0xFFFF_FFFF_FFFF_FFFF, ["movn x0, #0x0, lsl #0"]),
    )
    cases = []
    for value, statements in table:
        cases.append((f"mov_imm(0, {value:#x})" if value >= 0 else f"mov_imm(0, {value})",
                      "; ".join(statements)))
    cases.append(("mov_imm(30, 0x3f800000)", "movz x30, #0x3f80, lsl #16"))
    return cases


def branch_cases():
    cases = []
    for offset in (0, 4, -4, 8, (1 << 27) - 4, -(1 << 27)):
        cases.append((f"b({offset})", f"b {rel(offset)}"))
        cases.append((f"bl({offset})", f"bl {rel(offset)}"))
    for i, cond in enumerate(CONDITIONS):
        offset = (-8, 12, (1 << 20) - 4, -(1 << 20))[i % 4]
        cases.append((f"b_cond('{cond}', {offset})", f"b.{cond} {rel(offset)}"))
    for name in ("cbz", "cbnz"):
        for rt, offset in ((0, 8), (31, -(1 << 20)), (30, (1 << 20) - 4), (5, 0)):
            cases.append((f"{name}({rt}, {offset})", f"{name} {x(rt)}, {rel(offset)}"))
    for name in ("tbz", "tbnz"):
        for rt, bit, offset in ((0, 0, 8), (1, 63, -(1 << 15)), (2, 31, (1 << 15) - 4),
                                (3, 32, -4)):
            reg = f"w{rt}" if bit < 32 else f"x{rt}"
            cases.append((f"{name}({rt}, {bit}, {offset})",
                          f"{name} {reg}, #{bit}, {rel(offset)}"))
    for rd, offset in ((0, 0), (1, -(1 << 20)), (2, (1 << 20) - 1), (3, 5), (31, -3)):
        cases.append((f"adr({rd}, {offset})", f"adr {x(rd)}, {rel(offset)}"))
    cases += [("ldr_x_literal(0, 8)", "ldr x0, .+8"),
              ("ldr_x_literal(31, -(1 << 20))", "ldr xzr, .-1048576")]
    for size, offset in (("s", 4), ("d", -8), ("q", (1 << 20) - 4)):
        cases.append((f"ldr_v_literal('{size}', 31, {offset})", f"ldr {size}31, {rel(offset)}"))
    return cases


def gpr_memory_cases():
    cases = []
    for name, mnem in (("ldr_x", "ldr"), ("str_x", "str")):
        for rt, rn, offset in ((0, 1, 0), (0, 1, 32760), (30, 31, 8), (31, 2, 16)):
            cases.append((f"{name}({rt}, {rn}, {offset})",
                          f"{mnem} {x(rt)}, [{x(rn, True)}, #{offset}]"))
    for name, mnem in (("ldur_x", "ldur"), ("stur_x", "stur")):
        for rt, rn, offset in ((0, 1, -256), (1, 31, 255), (2, 3, -1)):
            cases.append((f"{name}({rt}, {rn}, {offset})",
                          f"{mnem} {x(rt)}, [{x(rn, True)}, #{offset}]"))
    for name, mnem, pre in (("ldr_x_post", "ldr", False), ("ldr_x_pre", "ldr", True),
                            ("str_x_post", "str", False), ("str_x_pre", "str", True)):
        for rt, rn, imm in ((0, 1, -256), (30, 31, 255), (2, 3, 8), (31, 4, -16)):
            if mnem == "ldr" and rt == 31:
                continue
            operand = f"[{x(rn, True)}, #{imm}]!" if pre else f"[{x(rn, True)}], #{imm}"
            cases.append((f"{name}({rt}, {rn}, {imm})", f"{mnem} {x(rt)}, {operand}"))
    for name, mnem in (("ldr_x_reg", "ldr"), ("str_x_reg", "str")):
        for rt, rn, rm, shift in ((0, 1, 2, False), (0, 1, 2, True), (3, 31, 4, True),
                                  (30, 29, 31, False)):
            index = f"{x(rm)}, lsl #3" if shift else x(rm)
            cases.append((f"{name}({rt}, {rn}, {rm}, {shift})",
                          f"{mnem} {x(rt)}, [{x(rn, True)}, {index}]"))
    for op, rn, offset in (("pldl1keep", 0, 0), ("pstl2strm", 1, 32760), ("pldl3keep", 31, 8),
                           ("pldl1strm", 2, 64), ("pstl1keep", 3, 128), ("plil2keep", 4, 0)):
        cases.append((f"prfm('{op}', {rn}, {offset})", f"prfm {op}, [{x(rn, True)}, #{offset}]"))
    for name, mnem in (("ldp_x", "ldp"), ("stp_x", "stp")):
        for rt1, rt2, rn, offset, mode in ((0, 1, 2, 0, "offset"), (29, 30, 31, -512, "pre"),
                                           (19, 20, 31, 504, "offset"), (21, 22, 31, 16, "post"),
                                           (3, 4, 5, -8, "post"), (27, 28, 31, -160, "pre")):
            cases.append((f"{name}({rt1}, {rt2}, {rn}, {offset}, '{mode}')",
                          f"{mnem} x{rt1}, x{rt2}, {address(rn, offset, mode)}"))
    cases += [("stp_x(31, 31, 0, 16)", "stp xzr, xzr, [x0, #16]")]
    return cases


def address(rn, offset, mode):
    base = x(rn, True)
    if mode == "pre":
        return f"[{base}, #{offset}]!"
    if mode == "post":
        return f"[{base}], #{offset}"
    return f"[{base}, #{offset}]"


SIZE_BYTES = {"b": 1, "h": 2, "s": 4, "d": 8, "q": 16}


def simd_memory_cases():
    cases = []
    for name, mnem in (("ldr_v", "ldr"), ("str_v", "str")):
        for size, nbytes in SIZE_BYTES.items():
            for vt, rn, offset in ((0, 1, 0), (31, 31, 4095 * nbytes), (17, 30, 3 * nbytes)):
                cases.append((f"{name}('{size}', {vt}, {rn}, {offset})",
                              f"{mnem} {size}{vt}, [{x(rn, True)}, #{offset}]"))
    for name, mnem in (("ldur_v", "ldur"), ("stur_v", "stur")):
        for size, vt, rn, offset in (("q", 0, 1, -256), ("s", 31, 31, 255), ("d", 16, 2, 3)):
            cases.append((f"{name}('{size}', {vt}, {rn}, {offset})",
                          f"{mnem} {size}{vt}, [{x(rn, True)}, #{offset}]"))
    for name, mnem, mode in (("ldr_v_post", "ldr", "post"), ("ldr_v_pre", "ldr", "pre"),
                             ("str_v_post", "str", "post"), ("str_v_pre", "str", "pre")):
        for size in SIZE_BYTES:
            for vt, rn, imm in ((0, 1, -256), (31, 31, 255), (20, 3, SIZE_BYTES[size])):
                cases.append((f"{name}('{size}', {vt}, {rn}, {imm})",
                              f"{mnem} {size}{vt}, {address(rn, imm, mode)}"))
    for name, mnem in (("ldr_v_reg", "ldr"), ("str_v_reg", "str")):
        for size, nbytes in SIZE_BYTES.items():
            shift_text = f", lsl #{nbytes.bit_length() - 1}"
            cases.append((f"{name}('{size}', 0, 1, 2, False)", f"{mnem} {size}0, [x1, x2]"))
            cases.append((f"{name}('{size}', 31, 31, 30, True)",
                          f"{mnem} {size}31, [sp, x30{shift_text}]"))
    for name, mnem in (("ldp_v", "ldp"), ("stp_v", "stp")):
        for size in ("s", "d", "q"):
            scale = SIZE_BYTES[size]
            for vt1, vt2, rn, offset, mode in ((0, 1, 2, 0, "offset"),
                                               (30, 31, 31, -64 * scale, "pre"),
                                               (8, 9, 31, 63 * scale, "offset"),
                                               (14, 15, 31, 2 * scale, "post"),
                                               (16, 31, 4, -scale, "post")):
                cases.append((f"{name}('{size}', {vt1}, {vt2}, {rn}, {offset}, '{mode}')",
                              f"{mnem} {size}{vt1}, {size}{vt2}, {address(rn, offset, mode)}"))
    cases += ld1_cases()
    return cases


def ld1_cases():
    cases = []
    for name in ("ld1", "st1"):
        for arr in ALL_ARRS:
            nbytes = 16 if arr in ("16b", "8h", "4s", "2d") else 8
            for count in (1, 2, 3, 4):
                first = (0, 28, 17, 30)[count - 1] if arr in ("4s", "2d") else count * 3
                regs = tuple((first + i) % 32 for i in range(count))
                text = f"{name} {reglist(regs, arr)}, [x1]"
                cases.append((f"{name}({regs}, '{arr}', 1)", text))
                if arr in ("4s", "2s", "2d", "16b"):
                    cases.append((f"{name}({regs}, '{arr}', 31, post={count * nbytes})",
                                  f"{name} {reglist(regs, arr)}, [sp], #{count * nbytes}"))
                    cases.append((f"{name}({regs}, '{arr}', 2, post=Reg(30))",
                                  f"{name} {reglist(regs, arr)}, [x2], x30"))
        for elem, bits in ELEMENT_BITS.items():
            lanes = 128 // bits
            for lane in range(lanes):
                vt = (lane * 7) % 32
                cases.append((f"{name}_lane({vt}, '{elem}', {lane}, 3)",
                              f"{name} {{v{vt}.{elem}}}[{lane}], [x3]"))
            cases.append((f"{name}_lane(31, '{elem}', {lanes - 1}, 31, post={bits // 8})",
                          f"{name} {{v31.{elem}}}[{lanes - 1}], [sp], #{bits // 8}"))
            cases.append((f"{name}_lane(16, '{elem}', 0, 4, post=Reg(5))",
                          f"{name} {{v16.{elem}}}[0], [x4], x5"))
    for arr in ALL_ARRS:
        esize = ELEMENT_BITS[elem_of(arr)] // 8
        cases.append((f"ld1r(0, '{arr}', 1)", f"ld1r {{v0.{arr}}}, [x1]"))
        cases.append((f"ld1r(31, '{arr}', 31, post={esize})",
                      f"ld1r {{v31.{arr}}}, [sp], #{esize}"))
        cases.append((f"ld1r(17, '{arr}', 2, post=Reg(3))", f"ld1r {{v17.{arr}}}, [x2], x3"))
    return cases


def simd_arithmetic_cases():
    cases = []
    fp_three = ("fmla", "fmls", "fadd", "fsub", "fmul", "fdiv", "fmax", "fmin", "fmaxnm",
                "fminnm", "fabd", "faddp", "frecps", "frsqrts", "fcmeq", "fcmge", "fcmgt")
    for i, name in enumerate(fp_three):
        for j, arr in enumerate(FP_ARRS):
            vd, vn, vm = ((0, 1, 2), (31, 30, 29), (16, 8, 24))[(i + j) % 3]
            cases.append((f"{name}({vd}, {vn}, {vm}, '{arr}')",
                          f"{name} v{vd}.{arr}, v{vn}.{arr}, v{vm}.{arr}"))
    fp_two = {"fabs": "fabs", "fneg": "fneg", "fsqrt": "fsqrt", "frintn": "frintn",
              "frintm": "frintm", "frintp": "frintp", "frintz": "frintz", "frinta": "frinta",
              "fcvtns": "fcvtns", "fcvtms": "fcvtms", "fcvtzs": "fcvtzs", "scvtf": "scvtf",
              "ucvtf": "ucvtf", "frecpe": "frecpe", "frsqrte": "frsqrte"}
    for i, name in enumerate(fp_two):
        for j, arr in enumerate(FP_ARRS):
            vd, vn = ((0, 1), (31, 30), (16, 15))[(i + j) % 3]
            cases.append((f"{name}({vd}, {vn}, '{arr}')", f"{name} v{vd}.{arr}, v{vn}.{arr}"))
    for name, mnem in (("fcmeq_zero", "fcmeq"), ("fcmgt_zero", "fcmgt"),
                       ("fcmge_zero", "fcmge"), ("fcmle_zero", "fcmle"),
                       ("fcmlt_zero", "fcmlt")):
        for arr in FP_ARRS:
            cases.append((f"{name}(3, 31, '{arr}')", f"{mnem} v3.{arr}, v31.{arr}, #0.0"))
    for name in ("fmla", "fmls", "fmul"):
        for arr, lanes in (("4s", 4), ("2s", 4), ("2d", 2)):
            for index in range(lanes):
                vd, vn, vm = ((0, 1, 2), (31, 30, 31), (16, 17, 15), (8, 24, 16))[index]
                cases.append((f"{name}_elem({vd}, {vn}, {vm}, {index}, '{arr}')",
                              f"{name} v{vd}.{arr}, v{vn}.{arr}, v{vm}.{elem_of(arr)}[{index}]"))
    for name, mnem in (("and_v", "and"), ("bic_v", "bic"), ("orr_v", "orr"), ("orn_v", "orn"),
                       ("eor_v", "eor"), ("bsl", "bsl"), ("bit", "bit"), ("bif", "bif")):
        for arr, (vd, vn, vm) in (("8b", (0, 1, 2)), ("16b", (31, 16, 29))):
            cases.append((f"{name}({vd}, {vn}, {vm}, '{arr}')",
                          f"{mnem} v{vd}.{arr}, v{vn}.{arr}, v{vm}.{arr}"))
    cases += [("mov_v(0, 31, '16b')", "mov v0.16b, v31.16b"),
              ("mov_v(17, 3, '8b')", "mov v17.8b, v3.8b"),
              ("not_v(0, 31, '16b')", "not v0.16b, v31.16b"),
              ("not_v(30, 1, '8b')", "not v30.8b, v1.8b")]
    for name, mnem in (("add_v", "add"), ("sub_v", "sub"), ("cmeq_v", "cmeq")):
        for i, arr in enumerate(INT_ARRS):
            vd, vn, vm = ((0, 1, 2), (31, 30, 29), (16, 8, 24))[i % 3]
            cases.append((f"{name}({vd}, {vn}, {vm}, '{arr}')",
                          f"{mnem} v{vd}.{arr}, v{vn}.{arr}, v{vm}.{arr}"))
    for arr in INT_ARRS:
        esize = ELEMENT_BITS[elem_of(arr)]
        for shift, (vd, vn) in ((0, (0, 1)), (esize - 1, (31, 30)), (esize // 2, (16, 17))):
            cases.append((f"shl_v({vd}, {vn}, {shift}, '{arr}')",
                          f"shl v{vd}.{arr}, v{vn}.{arr}, #{shift}"))
        for name in ("ushr", "sshr"):
            for shift, (vd, vn) in ((1, (0, 1)), (esize, (31, 30)), (esize // 2 + 1, (16, 17))):
                cases.append((f"{name}_v({vd}, {vn}, {shift}, '{arr}')",
                              f"{name} v{vd}.{arr}, v{vn}.{arr}, #{shift}"))
    cases += immediate_cases()
    cases += copy_permute_cases()
    return cases


def immediate_cases():
    cases = []
    for arr in ("8b", "16b"):
        for vd, imm in ((0, 0), (31, 255), (16, 0x7F)):
            cases.append((f"movi({vd}, {imm}, '{arr}')", f"movi v{vd}.{arr}, #{imm}"))
    for arr, shifts in (("4h", (0, 8)), ("8h", (0, 8)), ("2s", (0, 8, 16, 24)),
                        ("4s", (0, 8, 16, 24))):
        for i, lsl in enumerate(shifts):
            vd, imm = ((0, 255), (31, 1), (17, 0x80), (8, 0x3F))[i]
            for name in ("movi", "mvni"):
                cases.append((f"{name}({vd}, {imm}, '{arr}', {lsl})",
                              f"{name} v{vd}.{arr}, #{imm}, lsl #{lsl}"))
    for vd, imm in ((0, 0), (31, 0xFF00FF00FF00FF00), (5, 0xFFFFFFFFFFFFFFFF),
                    (16, 0x00000000FFFFFFFF)):
        cases.append((f"movi({vd}, {imm:#x}, '2d')", f"movi v{vd}.2d, #{imm:#x}"))
    cases += [("movi_zero(0)", "movi v0.2d, #0"), ("movi_zero(31)", "movi v31.2d, #0")]
    values = (1.0, -1.0, 0.125, 31.0, 0.5, 2.0, -0.1875, 1.5, 15.5, -0.25)
    for arr in FP_ARRS:
        for i, value in enumerate(values):
            vd = (0, 31, 16, 9)[i % 4]
            cases.append((f"fmov_v_imm({vd}, {value!r}, '{arr}')",
                          f"fmov v{vd}.{arr}, #{value!r}"))
    for size in ("s", "d"):
        for vd, value in ((0, 1.0), (31, -2.5), (7, 0.125), (8, 31.0)):
            cases.append((f"fmov_imm_s('{size}', {vd}, {value!r})",
                          f"fmov {size}{vd}, #{value!r}"))
    return cases


def copy_permute_cases():
    cases = []
    for arr in INT_ARRS:
        elem = elem_of(arr)
        last = 128 // ELEMENT_BITS[elem] - 1
        for vd, vn, index in ((0, 1, 0), (31, 30, last), (16, 17, last // 2)):
            cases.append((f"dup_elem({vd}, {vn}, {index}, '{arr}')",
                          f"dup v{vd}.{arr}, v{vn}.{elem}[{index}]"))
        gpr = x if elem == "d" else w
        for vd, rn in ((0, 1), (31, 31), (17, 30)):
            cases.append((f"dup_gpr({vd}, {rn}, '{arr}')", f"dup v{vd}.{arr}, {gpr(rn)}"))
    for elem, bits in ELEMENT_BITS.items():
        last = 128 // bits - 1
        for vd, vn, index in ((0, 1, 0), (31, 30, last)):
            cases.append((f"dup_scalar('{elem}', {vd}, {vn}, {index})",
                          f"dup {elem}{vd}, v{vn}.{elem}[{index}]"))
        for vd, dst, vn, src in ((0, 0, 1, last), (31, last, 30, 0), (16, last // 2, 17, 1)):
            cases.append((f"ins_elem({vd}, '{elem}', {dst}, {vn}, {src})",
                          f"ins v{vd}.{elem}[{dst}], v{vn}.{elem}[{src}]"))
        gpr = x if elem == "d" else w
        for vd, index, rn in ((0, 0, 1), (31, last, 31), (16, last // 2, 30)):
            cases.append((f"ins_gpr({vd}, '{elem}', {index}, {rn})",
                          f"ins v{vd}.{elem}[{index}], {gpr(rn)}"))
        for rd, vn, index in ((0, 1, 0), (31, 31, last), (30, 16, last // 2)):
            cases.append((f"umov({rd}, {vn}, '{elem}', {index})",
                          f"umov {gpr(rd)}, v{vn}.{elem}[{index}]"))
    for name in ("uzp1", "uzp2", "trn1", "trn2", "zip1", "zip2"):
        for i, arr in enumerate(INT_ARRS):
            vd, vn, vm = ((0, 1, 2), (31, 30, 29), (16, 8, 24))[i % 3]
            cases.append((f"{name}({vd}, {vn}, {vm}, '{arr}')",
                          f"{name} v{vd}.{arr}, v{vn}.{arr}, v{vm}.{arr}"))
    for arr, index, regs in (("8b", 0, (0, 1, 2)), ("8b", 7, (31, 30, 29)),
                             ("16b", 0, (16, 17, 18)), ("16b", 15, (31, 0, 31)),
                             ("16b", 4, (3, 4, 5))):
        vd, vn, vm = regs
        cases.append((f"ext({vd}, {vn}, {vm}, {index}, '{arr}')",
                      f"ext v{vd}.{arr}, v{vn}.{arr}, v{vm}.{arr}, #{index}"))
    return cases


def scalar_fp_cases():
    cases = []
    for i, name in enumerate(("fmul", "fdiv", "fadd", "fsub", "fmax", "fmin", "fmaxnm",
                              "fminnm", "fnmul")):
        for size in ("s", "d"):
            d, n, m = ((0, 1, 2), (31, 30, 29), (16, 8, 24))[(i + len(size)) % 3]
            cases.append((f"{name}_s('{size}', {d}, {n}, {m})",
                          f"{name} {size}{d}, {size}{n}, {size}{m}"))
    for name in ("fmov", "fabs", "fneg", "fsqrt", "frintn", "frintm", "frintz"):
        for size, (d, n) in (("s", (0, 31)), ("d", (31, 16))):
            cases.append((f"{name}_s('{size}', {d}, {n})", f"{name} {size}{d}, {size}{n}"))
    for name in ("fmadd", "fmsub", "fnmadd", "fnmsub"):
        for size, (d, n, m, a) in (("s", (0, 1, 2, 3)), ("d", (31, 30, 29, 28))):
            cases.append((f"{name}_s('{size}', {d}, {n}, {m}, {a})",
                          f"{name} {size}{d}, {size}{n}, {size}{m}, {size}{a}"))
    for size in ("s", "d"):
        cases.append((f"fcmp_s('{size}', 31, 1)", f"fcmp {size}31, {size}1"))
        cases.append((f"fcmp_zero_s('{size}', 17)", f"fcmp {size}17, #0.0"))
    cases += [("fmov_s_from_w(0, 1)", "fmov s0, w1"),
              ("fmov_s_from_w(31, 31)", "fmov s31, wzr"),
              ("fmov_w_from_s(30, 17)", "fmov w30, s17"),
              ("fmov_d_from_x(16, 31)", "fmov d16, xzr"),
              ("fmov_d_from_x(1, 2)", "fmov d1, x2"),
              ("fmov_x_from_d(0, 31)", "fmov x0, d31")]
    return cases


def fp64_cases():
    """The double-precision forms the FP64 kernels emit, with the operands they use: 2d
    arithmetic and by-element FMLA, d/q loads and stores, ld1/st1 of 2d lists and d lanes
    with register post-index, 2x2 transposes (trn/zip on 2d), constants (dup, ins, fmov,
    movi), exponent arithmetic (shl/ushr/sshr/sub on 2d), reciprocal estimate and step."""
    cases = []
    for vd, vn, vm, index in ((16, 0, 4, 0), (31, 3, 7, 0), (8, 2, 5, 0), (23, 1, 6, 1),
                              (24, 19, 3, 1)):
        cases.append((f"fmla_elem({vd}, {vn}, {vm}, {index}, '2d')",
                      f"fmla v{vd}.2d, v{vn}.2d, v{vm}.d[{index}]"))
    for name in ("fmla", "fadd", "fsub", "fmul", "fdiv", "fmax", "fmin", "fcmeq", "fcmge",
                 "fcmgt", "frecps", "fmaxnm", "fminnm"):
        for vd, vn, vm in ((24, 24, 28), (7, 0, 3)):
            cases.append((f"{name}({vd}, {vn}, {vm}, '2d')",
                          f"{name} v{vd}.2d, v{vn}.2d, v{vm}.2d"))
    for name in ("fabs", "fneg", "frecpe", "fsqrt", "frintn"):
        cases.append((f"{name}(19, 24, '2d')", f"{name} v19.2d, v24.2d"))
    for name, shift in (("shl_v", 52), ("ushr_v", 1), ("sshr_v", 63)):
        mnem = name[:-2]
        cases.append((f"{name}(11, 13, {shift}, '2d')", f"{mnem} v11.2d, v13.2d, #{shift}"))
    for name in ("add_v", "sub_v"):
        cases.append((f"{name}(12, 0, 12, '2d')", f"{name[:-2]} v12.2d, v0.2d, v12.2d"))
    for name in ("trn1", "trn2", "zip1", "zip2"):
        for vd, vn, vm in ((0, 24, 28), (1, 27, 31)):
            cases.append((f"{name}({vd}, {vn}, {vm}, '2d')",
                          f"{name} v{vd}.2d, v{vn}.2d, v{vm}.2d"))
    cases += [
        ("dup_elem(10, 4, 1, '2d')", "dup v10.2d, v4.d[1]"),
        ("dup_elem(14, 9, 0, '2d')", "dup v14.2d, v9.d[0]"),
        ("dup_gpr(1, 13, '2d')", "dup v1.2d, x13"),
        ("ins_gpr(3, 'd', 1, 13)", "mov v3.d[1], x13"),
        ("ins_gpr(10, 'd', 0, 6)", "mov v10.d[0], x6"),
        ("fmov_v_imm(2, 1.0, '2d')", "fmov v2.2d, #1.0"),
        ("ldr_v('d', 4, 17, 8)", "ldr d4, [x17, #8]"),
        ("ldr_v('d', 5, 23, 32760)", "ldr d5, [x23, #32760]"),
        ("str_v('d', 17, 16, 16)", "str d17, [x16, #16]"),
        ("ldp_v('q', 0, 1, 16, 32)", "ldp q0, q1, [x16, #32]"),
        ("ld1((24, 25, 26, 27), '2d', 6, post=64)", "ld1 {v24.2d-v27.2d}, [x6], #64"),
        ("ld1((28, 29, 30, 31), '2d', 7, post=64)", "ld1 {v28.2d-v31.2d}, [x7], #64"),
        ("st1(0, '2d', 8, post=Reg(3))", "st1 {v0.2d}, [x8], x3"),
        ("st1(1, '2d', 8, post=Reg(3))", "st1 {v1.2d}, [x8], x3"),
        ("st1_lane(24, 'd', 0, 8, post=Reg(3))", "st1 {v24.d}[0], [x8], x3"),
        ("st1_lane(27, 'd', 1, 8, post=Reg(3))", "st1 {v27.d}[1], [x8], x3"),
        ("ld1_lane(5, 'd', 1, 9, post=8)", "ld1 {v5.d}[1], [x9], #8"),
        ("ld1r(6, '2d', 10, post=Reg(11))", "ld1r {v6.2d}, [x10], x11"),
    ]
    return cases


def complex_cases():
    """FCMLA (FEAT_FCMA, Armv8.3): the vector form on every FP arrangement and rotation, and
    the single-precision form by element (4s, pair index 0..1), as the complex BRGEMM emits
    them among others."""
    cases = []
    for i, arr in enumerate(FP_ARRS):
        for j, rotate in enumerate((0, 90, 180, 270)):
            vd, vn, vm = ((0, 1, 2), (31, 30, 29), (16, 8, 24), (8, 0, 7))[(i + j) % 4]
            cases.append((f"fcmla({vd}, {vn}, {vm}, {rotate}, '{arr}')",
                          f"fcmla v{vd}.{arr}, v{vn}.{arr}, v{vm}.{arr}, #{rotate}"))
    for index in range(2):
        for j, rotate in enumerate((0, 90, 180, 270)):
            vd, vn, vm = ((0, 1, 2), (31, 30, 29), (16, 8, 24), (8, 0, 31))[(index + j) % 4]
            cases.append((f"fcmla_elem({vd}, {vn}, {vm}, {index}, {rotate})",
                          f"fcmla v{vd}.4s, v{vn}.4s, v{vm}.s[{index}], #{rotate}"))
    return cases


def all_cases():
    return (base_cases() + branch_cases() + gpr_memory_cases() + simd_memory_cases()
            + simd_arithmetic_cases() + scalar_fp_cases() + fp64_cases() + complex_cases())


def assemble(cases, assembler):
    """Words GNU as produces for each case's statements, in case order."""
    objcopy = assembler.replace("-as", "-objcopy")
    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp, "cases.s")
        lines = []
        for _, text in cases:
            lines += [statement.strip() for statement in text.split(";")]
        # Armv8.3-A: FCMLA (FEAT_FCMA); the directive emits no code
        source.write_text(".arch armv8.3-a\n" + "\n".join(lines) + "\n")
        subprocess.run([assembler, "-o", f"{tmp}/cases.o", str(source)], check=True)
        subprocess.run([objcopy, "-O", "binary", "-j", ".text", f"{tmp}/cases.o",
                        f"{tmp}/cases.bin"], check=True)
        data = pathlib.Path(tmp, "cases.bin").read_bytes()
    if len(data) != 4 * len(lines):
        sys.exit(f"expected {len(lines)} instructions, as produced {len(data) // 4}")
    words = list(struct.unpack(f"<{len(lines)}I", data))
    result = []
    for _, text in cases:
        count = len(text.split(";"))
        result.append(words[:count])
        words = words[count:]
    return result


def encoder_words(expression):
    sys.path.insert(0, str(ROOT))
    from einjit.backends.aarch64 import encode
    value = eval(expression, vars(encode))
    return value if isinstance(value, list) else [value]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--as", dest="assembler", default="aarch64-linux-gnu-as")
    args = parser.parse_args()
    if shutil.which(args.assembler) is None:
        sys.exit(f"{args.assembler} not found: apt-get install binutils-aarch64-linux-gnu")
    cases = all_cases()
    expressions = [call for call, _ in cases]
    if len(set(expressions)) != len(expressions):
        duplicates = sorted({e for e in expressions if expressions.count(e) > 1})
        sys.exit(f"duplicate cases: {duplicates}")
    words = assemble(cases, args.assembler)
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    with GOLDEN.open("w") as out:
        out.write("# A64 golden encodings from GNU as; regenerate: "
                  "python scripts/gen_golden_aarch64.py\n")
        for (call, text), expected in zip(cases, words):
            out.write(" ".join(f"{word:08x}" for word in expected) + f"\t{call}\t{text}\n")
    print(f"wrote {len(cases)} cases to {GOLDEN.relative_to(ROOT)}")
    disagreements = 0
    for (call, text), expected in zip(cases, words):
        try:
            got = encoder_words(call)
        except Exception as error:      # report, the test decides
            got = repr(error)
        if got != expected:
            disagreements += 1
            shown = got if isinstance(got, str) else [f"{word:08x}" for word in got]
            print(f"  encoder differs: {call}: as {[f'{w:08x}' for w in expected]} "
                  f"encoder {shown}  ({text})")
    print(f"encoder agrees on {len(cases) - disagreements}/{len(cases)} cases")


if __name__ == "__main__":
    main()
