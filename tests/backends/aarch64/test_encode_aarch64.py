"""A64 encoders against the GNU binutils golden table, and operand checks.

tests/backends/aarch64/golden.txt is produced by scripts/gen_golden_aarch64.py from
aarch64-linux-gnu-as; this test only reads it, so binutils is not needed at run time.
"""

import inspect
import pathlib
import random

import pytest

from einjit.backends.aarch64 import encode
from einjit.backends.aarch64.encode import Reg
from einjit.errors import EncodingError

GOLDEN = pathlib.Path(__file__).parent / "golden.txt"


def golden_cases():
    cases = []
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        words, call, text = line.split("\t")
        cases.append((call, text, [int(word, 16) for word in words.split()]))
    return cases


CASES = golden_cases()


def evaluate(call):
    words = eval(call, vars(encode))
    return words if isinstance(words, list) else [words]


@pytest.mark.parametrize("call, text, expected", CASES, ids=[call for call, _, _ in CASES])
def test_golden_encoding(call, text, expected):
    got = evaluate(call)
    assert got == expected, (f"{call} ({text}): expected "
                             f"{[f'{w:08x}' for w in expected]}, got {[f'{w:08x}' for w in got]}")


def test_golden_table_covers_every_encoder():
    public = [name for name, value in vars(encode).items()
              if inspect.isfunction(value) and not name.startswith("_")
              and value.__module__ == encode.__name__]
    called = {call.split("(")[0] for call, _, _ in CASES}
    assert sorted(set(public) - called) == []
    assert len(CASES) >= 300


@pytest.mark.parametrize("call, operand", [
    # base immediates and registers
    (lambda: encode.add_imm(0, 1, 4096), "imm"),
    (lambda: encode.sub_imm(0, 1, -1), "imm"),
    (lambda: encode.add_imm(0, 1, 1, shift=8), "shift"),
    (lambda: encode.add_imm(32, 0, 0), "rd"),
    (lambda: encode.add_imm(0, -1, 0), "rn"),
    (lambda: encode.add_imm(0, 1, True), "imm"),
    (lambda: encode.add_imm(0, 1, 1.0), "imm"),
    (lambda: encode.add_reg(0, 1, 2, 64), "lsl"),
    (lambda: encode.add_ext(0, 1, 2, 5), "lsl"),
    (lambda: encode.and_imm(0, 1, 0), "imm"),
    (lambda: encode.and_imm(0, 1, 5), "imm"),
    (lambda: encode.orr_imm(0, 1, -1), "imm"),
    (lambda: encode.movz(0, 0x10000), "imm16"),
    (lambda: encode.movk(0, 1, 8), "shift"),
    (lambda: encode.mov_imm(0, 1 << 64), "value"),
    (lambda: encode.mov_imm(0, -(1 << 63) - 1), "value"),
    (lambda: encode.lsl_imm(0, 1, 64), "amount"),
    (lambda: encode.asr_imm(0, 1, -1), "amount"),
    (lambda: encode.csel(0, 1, 2, "xx"), "cond"),
    (lambda: encode.ret(32), "rn"),
    # general-register loads and stores
    (lambda: encode.ldr_x(0, 1, 4), "offset"),
    (lambda: encode.ldr_x(0, 1, 32768), "offset"),
    (lambda: encode.str_x(0, 1, -8), "offset"),
    (lambda: encode.ldur_x(0, 1, 256), "offset"),
    (lambda: encode.ldr_x_post(0, 1, -257), "imm"),
    (lambda: encode.ldr_x_pre(1, 1, 8), "rn"),
    (lambda: encode.str_x_post(2, 2, 8), "rn"),
    (lambda: encode.ldr_x_reg(0, 1, 2, shift=2), "shift"),
    (lambda: encode.ldp_x(0, 1, 2, 512), "offset"),
    (lambda: encode.ldp_x(0, 1, 2, -520), "offset"),
    (lambda: encode.stp_x(0, 1, 2, 4), "offset"),
    (lambda: encode.stp_x(0, 1, 2, 0, "bogus"), "mode"),
    (lambda: encode.ldp_x(1, 1, 2), "rt1"),
    (lambda: encode.ldp_x(0, 1, 0, 16, "post"), "rn"),
    (lambda: encode.prfm("pldl4keep", 0), "op"),
    # SIMD&FP loads and stores
    (lambda: encode.ldr_v("q", 0, 1, 8), "offset"),
    (lambda: encode.ldr_v("q", 0, 1, 65536), "offset"),
    (lambda: encode.str_v("s", 0, 1, 2), "offset"),
    (lambda: encode.ldr_v("x", 0, 1), "size"),
    (lambda: encode.ldr_v("s", 32, 1), "vt"),
    (lambda: encode.ldr_v_post("s", 0, 1, 256), "imm"),
    (lambda: encode.str_v_pre("q", 0, 1, -257), "imm"),
    (lambda: encode.ldr_v_reg("d", 0, 1, 32), "rm"),
    (lambda: encode.ldp_v("q", 0, 1, 2, 1024), "offset"),
    (lambda: encode.ldp_v("q", 0, 1, 2, 8), "offset"),
    (lambda: encode.ldp_v("b", 0, 1, 2), "size"),
    (lambda: encode.ldp_v("d", 3, 3, 2), "vt1"),
    (lambda: encode.ld1((0, 2), "4s", 1), "vts"),
    (lambda: encode.ld1((0, 1, 2, 3, 4), "4s", 1), "vts"),
    (lambda: encode.ld1((), "4s", 1), "vts"),
    (lambda: encode.ld1((32,), "4s", 1), "vts"),
    (lambda: encode.ld1((0,), "5s", 1), "arrangement"),
    (lambda: encode.ld1((0,), "4s", 1, post=32), "post"),
    (lambda: encode.st1((0, 1), "2s", 1, post=32), "post"),
    (lambda: encode.ld1((0,), "4s", 1, post=Reg(31)), "post"),
    (lambda: encode.ld1((0,), "4s", 1, post=Reg(32)), "post"),
    (lambda: encode.ld1_lane(0, "s", 4, 1), "lane"),
    (lambda: encode.ld1_lane(0, "b", 16, 1), "lane"),
    (lambda: encode.st1_lane(0, "d", 2, 1), "lane"),
    (lambda: encode.ld1_lane(0, "q", 0, 1), "elem"),
    (lambda: encode.ld1_lane(0, "s", 0, 1, post=8), "post"),
    (lambda: encode.ld1r(0, "4s", 1, post=16), "post"),
    # SIMD arithmetic
    (lambda: encode.fmla(32, 1, 2, "4s"), "vd"),
    (lambda: encode.fmla(0, 1, 32, "4s"), "vm"),
    (lambda: encode.fadd(0, 1, 2, "1d"), "arrangement"),
    (lambda: encode.fmax(0, 1, 2, "16b"), "arrangement"),
    (lambda: encode.fmla_elem(0, 1, 2, 4, "4s"), "index"),
    (lambda: encode.fmla_elem(0, 1, 2, 4, "2s"), "index"),
    (lambda: encode.fmla_elem(0, 1, 2, 2, "2d"), "index"),
    (lambda: encode.fmla_elem(0, 1, 2, -1, "4s"), "index"),
    (lambda: encode.fmla_elem(0, 1, 2, 0, "8h"), "arrangement"),
    (lambda: encode.fmul_elem(0, 1, 32, 0, "4s"), "vm"),
    (lambda: encode.fcmla(0, 1, 2, 45, "4s"), "rotate"),
    (lambda: encode.fcmla(0, 1, 2, 360, "2d"), "rotate"),
    (lambda: encode.fcmla(0, 1, 2, 0, "1d"), "arrangement"),
    (lambda: encode.fcmla(0, 32, 2, 0, "4s"), "vn"),
    (lambda: encode.fcmla_elem(0, 1, 2, 2, 0), "index"),
    (lambda: encode.fcmla_elem(0, 1, 2, 0, 91), "rotate"),
    (lambda: encode.fcmla_elem(0, 1, 2, 0, 0, "2d"), "arrangement"),
    (lambda: encode.fcmla_elem(0, 1, 32, 0, 0), "vm"),
    (lambda: encode.fabs(0, 32, "4s"), "vn"),
    (lambda: encode.and_v(0, 1, 2, "4s"), "arrangement"),
    (lambda: encode.add_v(0, 1, 2, "1d"), "arrangement"),
    (lambda: encode.shl_v(0, 1, 32, "4s"), "shift"),
    (lambda: encode.shl_v(0, 1, 1, "1d"), "arrangement"),
    (lambda: encode.ushr_v(0, 1, 0, "4s"), "shift"),
    (lambda: encode.sshr_v(0, 1, 33, "4s"), "shift"),
    (lambda: encode.ushr_v(0, 1, 9, "16b"), "shift"),
    (lambda: encode.movi(0, 256, "16b"), "imm"),
    (lambda: encode.movi(0, 1, "16b", 8), "lsl"),
    (lambda: encode.movi(0, 1, "4s", 4), "lsl"),
    (lambda: encode.movi(0, 1, "8h", 16), "lsl"),
    (lambda: encode.movi(0, 0x1234, "2d"), "imm"),
    (lambda: encode.movi(0, 1, "1d"), "arrangement"),
    (lambda: encode.mvni(0, 1, "16b"), "arrangement"),
    (lambda: encode.fmov_v_imm(0, 0.0, "4s"), "value"),
    (lambda: encode.fmov_v_imm(0, 0.1, "4s"), "value"),
    (lambda: encode.fmov_v_imm(0, 32.0, "2d"), "value"),
    (lambda: encode.fmov_v_imm(0, "one", "2d"), "value"),
    (lambda: encode.fmov_imm_s("h", 0, 1.0), "size"),
    (lambda: encode.dup_elem(0, 1, 4, "4s"), "index"),
    (lambda: encode.dup_elem(0, 1, 0, "1d"), "arrangement"),
    (lambda: encode.dup_gpr(0, 32, "4s"), "rn"),
    (lambda: encode.ins_elem(0, "s", 4, 1, 0), "dst_index"),
    (lambda: encode.ins_elem(0, "s", 0, 1, 4), "src_index"),
    (lambda: encode.ins_gpr(0, "q", 0, 1), "elem"),
    (lambda: encode.umov(0, 1, "d", 2), "index"),
    (lambda: encode.ext(0, 1, 2, 8, "8b"), "index"),
    (lambda: encode.ext(0, 1, 2, 16, "16b"), "index"),
    (lambda: encode.ext(0, 1, 2, 0, "4s"), "arrangement"),
    (lambda: encode.zip1(0, 1, 2, "1d"), "arrangement"),
    (lambda: encode.fadd_s("q", 0, 1, 2), "size"),
    (lambda: encode.fmadd_s("s", 0, 1, 2, 32), "va"),
    (lambda: encode.fmov_s_from_w(32, 0), "vd"),
    # branches
    (lambda: encode.b(2), "offset"),
    (lambda: encode.b(1 << 27), "offset"),
    (lambda: encode.bl(-(1 << 27) - 4), "offset"),
    (lambda: encode.b_cond("xx", 0), "cond"),
    (lambda: encode.b_cond("eq", 1 << 20), "offset"),
    (lambda: encode.cbz(0, -(1 << 20) - 4), "offset"),
    (lambda: encode.cbnz(32, 0), "rt"),
    (lambda: encode.tbz(0, 64, 0), "bit"),
    (lambda: encode.tbnz(0, 0, 1 << 15), "offset"),
    (lambda: encode.adr(0, 1 << 20), "offset"),
    (lambda: encode.ldr_v_literal("q", 0, 6), "offset"),
    (lambda: encode.ldr_v_literal("b", 0, 8), "size"),
    (lambda: encode.stxr_x(1, 1, 2), "rs"),
    (lambda: encode.stxr_x(2, 1, 2), "rs"),
])
def test_invalid_operand_raises_naming_it(call, operand):
    with pytest.raises(EncodingError, match=rf"^{operand}\b"):
        call()


def run_moves(words):
    """Value left in the register by a movz/movn/movk sequence."""
    value = 0
    for word in words:
        opc, shift, imm16 = (word >> 29) & 3, 16 * ((word >> 21) & 3), (word >> 5) & 0xFFFF
        if opc == 0b10:
            value = imm16 << shift
        elif opc == 0b00:
            value = ~(imm16 << shift) & ((1 << 64) - 1)
        else:
            assert opc == 0b11
            value = (value & ~(0xFFFF << shift)) | imm16 << shift
    return value


def test_mov_imm_sequences_are_right_and_shortest():
    rng = random.Random(7)
    for _ in range(2000):
        chunks = [rng.choice((0, 0xFFFF, rng.randrange(1 << 16))) for _ in range(4)]
        value = sum(chunk << (16 * i) for i, chunk in enumerate(chunks))
        words = encode.mov_imm(5, value)
        assert run_moves(words) == value
        assert all(word & 31 == 5 for word in words)
        assert len(words) == max(1, min(4 - chunks.count(0), 4 - chunks.count(0xFFFF)))
        signed = value - (1 << 64) if value >> 63 else value
        assert encode.mov_imm(5, signed) == words
