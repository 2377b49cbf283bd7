"""x86-64 encoders against the golden bytes GNU as produced (scripts/gen_golden_x86_64.py), and
operand errors."""

import pathlib

import pytest

from einjit.backends.x86_64 import encode
from einjit.backends.x86_64.encode import R12, R13, RAX, RBP, RCX, RSP, Mem
from einjit.errors import EncodingError

GOLDEN = pathlib.Path(__file__).parent / "golden.txt"


def golden_cases():
    for line in GOLDEN.read_text().splitlines():
        if line and not line.startswith("#"):
            expr, asm, hex_bytes = line.split("\t")
            yield pytest.param(expr, hex_bytes, id=asm)


@pytest.mark.parametrize("expr, hex_bytes", list(golden_cases()))
def test_golden(expr, hex_bytes):
    assert eval(expr, vars(encode)).hex() == hex_bytes  # noqa: S307 - the checked-in table


def test_golden_table_is_large_and_covers_the_encoding_classes():
    lines = GOLDEN.read_text()
    assert lines.count("\n") > 500
    for needle in ("{1to16}", "{z}", "zmm31", "xmm15", "[rsp", "[rbp", "[r12", "[r13", "+r12*",
                   "kmovw", "{disp32} jne", "{evex}"):
        assert needle in lines, needle


# ---------------------------------------------------------------- memory operands

def test_rsp_cannot_be_an_index():
    with pytest.raises(EncodingError, match="rsp"):
        Mem(RAX, RSP)


def test_r12_can_be_an_index():
    assert encode.lea(RAX, Mem(RAX, R12, 8)).hex() == "4a8d04e0"


@pytest.mark.parametrize("kwargs, match", [
    (dict(base=16), "Mem.base"),
    (dict(base=-1), "Mem.base"),
    (dict(base=RAX, index=16), "Mem.index"),
    (dict(base=RAX, index=RCX, scale=3), "Mem.scale"),
    (dict(base=RAX, disp=2**31), "Mem.disp"),
    (dict(base=RAX, disp=-2**31 - 1), "Mem.disp"),
])
def test_bad_memory_operands(kwargs, match):
    with pytest.raises(EncodingError, match=match):
        Mem(**kwargs)


def test_mem_offset():
    assert Mem(RBP, R13, 4, 8).offset(-16) == Mem(RBP, R13, 4, -8)


def test_rbp_and_r13_bases_get_a_zero_disp8():
    assert encode.mov_rm(RAX, Mem(RBP)).hex() == "488b4500"
    assert encode.mov_rm(RAX, Mem(R13)).hex() == "498b4500"


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        encode.mov_rr(16, 0)


# ---------------------------------------------------------------- general-purpose operands

@pytest.mark.parametrize("thunk, match", [
    (lambda: encode.mov_rr(16, RAX), "mov_rr dst"),
    (lambda: encode.mov_rr(RAX, -1), "mov_rr src"),
    (lambda: encode.mov_ri(RAX, 2**64), "mov_ri imm"),
    (lambda: encode.mov_ri(RAX, -2**63 - 1), "mov_ri imm"),
    (lambda: encode.mov_rm(RAX, RCX), "mov_rm mem"),
    (lambda: encode.add_ri(RAX, 2**31), "add_ri imm"),
    (lambda: encode.cmp_ri(RCX, -2**31 - 1), "cmp_ri imm"),
    (lambda: encode.imul_rri(RAX, RCX, 2**31), "imul_rri imm"),
    (lambda: encode.shl_ri(RAX, 64), "shl_ri n"),
    (lambda: encode.shr_ri(RAX, -1), "shr_ri n"),
    (lambda: encode.push(16), "push reg"),
    (lambda: encode.jcc("zz", 0), "jcc cond"),
    (lambda: encode.jcc("e", 2**31), "jcc rel32"),
    (lambda: encode.jmp(-2**31 - 1), "jmp rel32"),
    (lambda: encode.nop(-1), "nop length"),
    (lambda: encode.kmovw_kr(8, RAX), "kmovw_kr k"),
    (lambda: encode.kmovq_kr(1, 16), "kmovq_kr src"),
    (lambda: encode.add_rr(RAX, True), "add_rr src"),
    # the memoized encoders: an unhashable operand is named like any other bad one
    (lambda: encode.mov_rr([RAX], RCX), "mov_rr dst"),
    (lambda: encode.add_ri(RAX, [1]), "add_ri imm"),
    (lambda: encode.imul_rri(RAX, RCX, [3]), "imul_rri imm"),
])
def test_general_operand_errors(thunk, match):
    with pytest.raises(EncodingError, match=match):
        thunk()


# ---------------------------------------------------------------- vector operands

@pytest.mark.parametrize("thunk, match", [
    (lambda: encode.vaddps(32, 1, 2, 512), "vaddps dst"),
    (lambda: encode.vaddps(0, -1, 2, 512), "vaddps a"),
    (lambda: encode.vaddps(0, 1, "x", 512), "vaddps b"),
    (lambda: encode.vaddps(0, 1, 2, 64), "vaddps width"),
    (lambda: encode.vaddps(0, 1, 2, 512, mask=8), "vaddps mask"),
    (lambda: encode.vaddps(0, 1, 2, 512, zeroing=True), "zeroing-masking needs a write mask"),
    (lambda: encode.vaddps(0, 1, 2, 512, bcst=True), "broadcast needs a memory operand"),
    (lambda: encode.vmovups_load(0, 1, 256), "vmovups_load mem"),
    (lambda: encode.vblendvps(16, 1, 2, 3, 256), "dst=16"),
    (lambda: encode.vblendvps(0, 1, 2, 16, 256), "vblendvps maskvec"),
    (lambda: encode.vblendvps(0, 1, 2, 3, 512), "width 512 needs EVEX"),
    (lambda: encode.vmaskmovps_load(0, 1, Mem(RAX), 512), "vmaskmovps_load"),
    (lambda: encode.vmaskmovps_store(Mem(RAX), 17, 0, 256), "maskreg=17"),
    (lambda: encode.vperm2f128(0, 1, 20, 0x20), "b=20"),
    (lambda: encode.vpermps(0, 1, 2, 128), "vpermps width"),
    (lambda: encode.vshufps(0, 1, 2, 256, 256), "vshufps imm"),
    (lambda: encode.vpslld_ri(0, 1, -1, 256), "vpslld_ri n"),
    (lambda: encode.vcmpps(0, 1, 2, 32, 256), "vcmpps pred"),
    (lambda: encode.vcmpps(16, 1, 2, 1, 256), "vcmpps dst"),
    (lambda: encode.vcmpps(8, 1, 2, 1, 512), "vcmpps dst"),
    (lambda: encode.vmovups_rr(0, 1, 256, zeroing=True), "zeroing"),
    (lambda: encode.vextractf32x4(Mem(RAX), 1, 0, 512, mask=1, zeroing=True), "merge masking"),
    (lambda: encode.vinsertf64x4(0, 1, 2, 1, mask=9), "vinsertf64x4 mask"),
    (lambda: encode.vpbroadcastd_gpr(0, 16, 512), "vpbroadcastd_gpr src"),
    (lambda: encode.vinsertf128(0, 1, 2, 256), "vinsertf128 imm"),
    (lambda: encode.vinsertps(0, 1, Mem(RAX), 256), "vinsertps imm"),
    (lambda: encode.vextractps(Mem(RAX), 1, 4), "vextractps lane"),
    (lambda: encode.vextractps(2, 1, 0), "vextractps mem"),
    (lambda: encode.vmovhps_load(0, 1, 2), "vmovhps_load mem"),
    (lambda: encode.vmovhps_store(Mem(RAX), 32), "vmovhps_store src"),
    (lambda: encode.vmovddup(0, RAX), "vmovddup mem"),
])
def test_vector_operand_errors(thunk, match):
    with pytest.raises(EncodingError, match=match):
        thunk()


def test_vex_is_chosen_when_possible_and_evex_otherwise():
    assert encode.vaddps(0, 1, 2, 256)[0] == 0xC5
    assert encode.vaddps(0, 1, 10, 256)[0] == 0xC4
    for evex in (encode.vaddps(0, 1, 2, 512), encode.vaddps(16, 1, 2, 256),
                 encode.vaddps(0, 1, 2, 128, mask=1), encode.vaddps(0, 1, Mem(RAX), 256, bcst=True),
                 encode.vaddps(0, 1, 2, 256, evex=True)):
        assert evex[0] == 0x62


def test_evex_compressed_displacement_scales_with_the_width():
    for width, n in ((128, 16), (256, 32), (512, 64)):
        compressed = encode.vmovups_load(0, Mem(RAX, disp=n), width, evex=True)
        uncompressed = encode.vmovups_load(0, Mem(RAX, disp=n // 2), width, evex=True)
        assert compressed[-1] == 1 and len(uncompressed) == len(compressed) + 3


def test_broadcast_displacement_scales_by_the_element_size():
    assert encode.vfmadd231ps(0, 1, Mem(RAX, disp=4), 512, bcst=True)[-1] == 1


def test_vcmpps_writes_a_mask_register_in_its_evex_form():
    # k1 in ModRM.reg, not a vector register
    assert encode.vcmpps(1, 2, 3, 1, 512).hex() == "62f16c48c2cb01"
