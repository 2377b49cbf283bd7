"""A64 Assembler: label fix-ups, unbound labels, AAPCS64 prologue/epilogue."""

import random
import struct

import pytest

from einjit.backends import STACK_PROBE_BYTES
from einjit.backends.aarch64 import encode
from einjit.backends.aarch64.asm import Assembler
from einjit.errors import EncodingError

MEGABYTE_OF_NOPS = [encode.nop()] * (1 << 18)


def words_of(code):
    return list(struct.unpack(f"<{len(code) // 4}I", code))


def signed(value, bits):
    return value - (1 << bits) if value >> (bits - 1) else value


def branch_offset(word):
    """Byte offset of b/bl (imm26), b.cond/cbz/cbnz (imm19) or tbz/tbnz (imm14)."""
    if word >> 26 in (0b000101, 0b100101):
        return 4 * signed(word & 0x3FFFFFF, 26)
    if (word >> 25) & 0x3F in (0b011010, 0b101010):
        return 4 * signed((word >> 5) & 0x7FFFF, 19)
    assert (word >> 25) & 0x3F == 0b011011
    return 4 * signed((word >> 5) & 0x3FFF, 14)


# --------------------------------------------------------------------------------------------
# labels

def test_forward_branches_are_patched_when_bound():
    asm = Assembler()
    done = asm.label("done")
    asm.b(done)
    asm.b_cond("ne", done)
    asm.cbz(3, done)
    asm.cbnz(31, done)
    asm.tbnz(4, 40, done)
    asm(encode.nop(), [encode.nop(), encode.nop()])
    asm.bind(done)
    asm(encode.ret())
    words = words_of(asm.finish())
    assert words[:5] == [encode.b(32), encode.b_cond("ne", 28), encode.cbz(3, 24),
                         encode.cbnz(31, 20), encode.tbnz(4, 40, 16)]
    assert [branch_offset(word) for word in words[:5]] == [32, 28, 24, 20, 16]
    assert done.position == 32


def test_backward_branches_encode_immediately():
    asm = Assembler()
    top = asm.label()
    asm(encode.nop())
    asm.bind(top)
    asm(encode.subs_imm(0, 0, 1))
    asm.b_cond("gt", top)
    asm.b(top)
    asm.cbnz(1, top)
    asm.tbz(2, 3, top)
    words = words_of(asm.finish())
    assert words[2:] == [encode.b_cond("gt", -4), encode.b(-8), encode.cbnz(1, -12),
                         encode.tbz(2, 3, -16)]
    assert [branch_offset(word) for word in words[2:]] == [-4, -8, -12, -16]


def test_branch_to_itself_and_loop_nest():
    asm = Assembler()
    outer, inner, spin = asm.label(), asm.label(), asm.label()
    asm.bind(outer)
    asm(encode.mov_imm(1, 4))
    asm.bind(inner)
    asm(encode.subs_imm(1, 1, 1))
    asm.b_cond("ne", inner)
    asm(encode.subs_imm(0, 0, 1))
    asm.b_cond("ne", outer)
    asm.bind(spin)
    asm.b(spin)
    words = words_of(asm.finish())
    assert [branch_offset(words[i]) for i in (2, 4, 5)] == [-4, -16, 0]


def test_pc_relative_loads_and_adr_reach_a_constant_pool():
    asm = Assembler()
    pool = asm.label("pool")
    asm.ldr_v_literal("q", 7, pool)
    asm.adr(2, pool)
    asm.ldr_x_literal(3, pool)
    asm(encode.ret())
    asm.align(16)
    asm.bind(pool)
    asm([0x3F800000] * 4)
    words = words_of(asm.finish())
    assert pool.position == 16
    assert words[:4] == [encode.ldr_v_literal("q", 7, 16), encode.adr(2, 12),
                         encode.ldr_x_literal(3, 8), encode.ret()]


def test_forward_branch_out_of_range_raises_when_bound():
    asm = Assembler()
    far = asm.label("far")
    asm.b_cond("eq", far)
    asm(MEGABYTE_OF_NOPS)
    with pytest.raises(EncodingError, match="far"):
        asm.bind(far)


def test_backward_branch_out_of_range_raises():
    asm = Assembler()
    top = asm.label("top")
    asm.bind(top)
    asm(MEGABYTE_OF_NOPS)
    asm.cbz(0, top)           # exactly -1 MiB is still in range
    asm(encode.nop())
    with pytest.raises(EncodingError, match="top"):
        asm.cbz(0, top)
    asm.b(top)                # b reaches ±128 MiB
    assert branch_offset(words_of(asm.finish())[-1]) == -(1 << 20) - 8


def test_unbound_label_raises_at_finish():
    asm = Assembler()
    asm.cbnz(5, asm.label("missing"))
    with pytest.raises(EncodingError, match="missing"):
        asm.finish()


def test_label_misuse_raises():
    asm, other = Assembler(), Assembler()
    label = asm.label()
    asm.bind(label)
    with pytest.raises(EncodingError, match="already bound"):
        asm.bind(label)
    with pytest.raises(EncodingError):
        other.b(label)
    with pytest.raises(EncodingError, match="^cond"):
        asm.b_cond("sometimes", asm.label())


def test_words_are_checked_and_packed_little_endian():
    asm = Assembler()
    asm(encode.nop(), encode.mov_imm(0, 0x12345678))
    assert asm.position == 12
    assert asm.finish()[:4] == bytes.fromhex("1f2003d5")
    for bad in (1 << 32, -1, 1.5, True):
        with pytest.raises(EncodingError):
            asm(bad)


# --------------------------------------------------------------------------------------------
# prologue / epilogue, checked by running them on a small model of sp, memory and registers

def decode_frame_instruction(word):
    """(load, kind, registers, offset, writeback) of the loads/stores a frame uses."""
    if word == encode.ret():
        return None
    assert (word >> 5) & 31 == encode.SP, f"{word:08x} does not address sp"
    if (word >> 27) & 7 == 0b101:                        # ldp/stp
        opc, vector, mode = word >> 30, (word >> 26) & 1, (word >> 23) & 3
        assert (opc, vector) in ((0b10, 0), (0b01, 1)), f"{word:08x} is not an x/d pair"
        registers = [word & 31, (word >> 10) & 31]
        offset = 8 * signed((word >> 15) & 0x7F, 7)
        writeback = {0b01: "post", 0b10: None, 0b11: "pre"}[mode]
    elif (word >> 27) & 7 == 0b111:                      # ldr/str of one register
        assert word >> 30 == 0b11, f"{word:08x} is not a 64-bit access"
        vector = (word >> 26) & 1
        registers = [word & 31]
        if (word >> 24) & 1:
            offset, writeback = 8 * ((word >> 10) & 0xFFF), None
        else:
            offset = signed((word >> 12) & 0x1FF, 9)
            writeback = {1: "post", 3: "pre"}[(word >> 10) & 3]
    else:
        raise AssertionError(f"unexpected frame instruction {word:08x}")
    load = bool((word >> 22) & 1)
    return load, "d" if vector else "x", registers, offset, writeback


def run_frame_code(words, state):
    """Execute prologue/epilogue words; return the words after the last executed one."""
    for i, word in enumerate(words):
        decoded = decode_frame_instruction(word)
        if decoded is None:
            return words[i + 1:]
        load, kind, registers, offset, writeback = decoded
        assert not (kind == "x" and 18 in registers), "x18 must never be touched"
        address = state["sp"] + (0 if writeback == "post" else offset)
        for j, reg in enumerate(registers):
            slot = address + 8 * j
            if load:
                state[kind][reg] = state["memory"][slot]
            else:
                assert slot >= (state["sp"] + offset if writeback == "pre" else state["sp"]), \
                    "store below sp"
                assert slot < state["entry_sp"], "store above the caller's sp"
                state["memory"][slot] = state[kind][reg]
                state["saved"].append((kind, reg))
        if writeback:
            state["sp"] += offset
        assert state["sp"] % 16 == 0, "sp must stay 16-byte aligned"
    return []


def check_frame(gprs, vregs):
    asm = Assembler()
    asm.prologue(gprs, vregs)
    prologue_end = asm.position
    asm(encode.nop())
    asm.epilogue()
    words = words_of(asm.finish())
    entry_sp = 0x7FFF0000
    state = {"sp": entry_sp, "entry_sp": entry_sp, "memory": {}, "saved": [],
             "x": {r: 1000 + r for r in range(31)}, "d": {r: 2000 + r for r in range(32)}}
    assert run_frame_code(words[:prologue_end // 4], state) == []
    expected_x = sorted(r for r in set(gprs) if 19 <= r <= 30)
    expected_d = sorted(r for r in set(vregs) if 8 <= r <= 15)
    saved = state["saved"]
    assert sorted(r for kind, r in saved if kind == "x") == expected_x
    assert sorted(r for kind, r in saved if kind == "d") == expected_d
    assert len(saved) == len(set(saved)), "a register saved twice"
    frame = entry_sp - state["sp"]
    assert frame == (8 * len(saved) + 15) // 16 * 16, "frame larger than needed"
    # the body clobbers every callee-saved register; the epilogue must bring them back
    original = {"x": dict(state["x"]), "d": dict(state["d"])}
    for kind in ("x", "d"):
        for reg in state[kind]:
            state[kind][reg] = -1
    rest = run_frame_code(words[prologue_end // 4 + 1:], state)
    assert rest == [], "epilogue must end with ret"
    assert words[-1] == encode.ret()
    assert state["sp"] == entry_sp
    for reg in expected_x:
        assert state["x"][reg] == original["x"][reg]
    for reg in expected_d:
        assert state["d"][reg] == original["d"][reg]
    return words[:prologue_end // 4]


@pytest.mark.parametrize("gprs, vregs", [
    ([], []),
    ([0, 1, 2, 17], [0, 7, 16, 31]),
    ([19], []),
    ([], [8]),
    ([19, 20], [8, 9]),
    ([0, 19, 20, 21], [8, 9, 10]),
    (list(range(0, 18)) + list(range(19, 31)), list(range(32))),
    ([29, 30], [15]),
    ([28, 19, 19, 28], [15, 8]),
])
def test_prologue_saves_exactly_the_used_callee_saved_registers(gprs, vregs):
    check_frame(gprs, vregs)


def test_prologue_random_register_sets():
    rng = random.Random(3)
    candidates = [r for r in range(31) if r != 18]
    for _ in range(200):
        gprs = rng.sample(candidates, rng.randrange(len(candidates)))
        vregs = rng.sample(range(32), rng.randrange(33))
        check_frame(gprs, vregs)


def test_frame_instructions_are_the_expected_ones():
    asm = Assembler()
    asm.prologue([19, 20, 21], [8])
    asm.epilogue()
    assert words_of(asm.finish()) == [
        encode.stp_x(19, 20, encode.SP, -32, "pre"), encode.str_x(21, encode.SP, 16),
        encode.str_v("d", 8, encode.SP, 24),
        encode.ldr_v("d", 8, encode.SP, 24), encode.ldr_x(21, encode.SP, 16),
        encode.ldp_x(19, 20, encode.SP, 32, "post"), encode.ret()]


def test_no_callee_saved_registers_means_no_frame():
    asm = Assembler()
    asm.prologue([0, 1, 9, 16, 17], [0, 1, 31])
    asm.epilogue()
    assert words_of(asm.finish()) == [encode.ret()]


def test_epilogue_can_close_several_exits():
    asm = Assembler()
    asm.prologue([19], [])
    asm.epilogue()
    asm.epilogue()
    words = words_of(asm.finish())
    assert words[1:3] == words[3:5] and words[2] == encode.ret()


def test_frame_misuse_raises():
    with pytest.raises(EncodingError, match="x18"):
        Assembler().prologue([18, 19], [])
    with pytest.raises(EncodingError, match="gprs"):
        Assembler().prologue([32], [])
    with pytest.raises(EncodingError, match="vregs"):
        Assembler().prologue([], [-1])
    with pytest.raises(EncodingError, match="prologue"):
        Assembler().epilogue()
    asm = Assembler()
    asm.prologue([], [])
    with pytest.raises(EncodingError, match="already"):
        asm.prologue([], [])


def _sp_moves(word):
    """Bytes an `add|sub sp, sp, #imm{, lsl #12}` moves sp (negative: down), else None."""
    for step, sign in ((encode.sub_imm, -1), (encode.add_imm, 1)):
        for shift in (0, 12):
            base = step(encode.SP, encode.SP, 0, shift)
            if word & ~(0xFFF << 10) == base:
                return sign * ((word >> 10) & 0xFFF) << shift
    return None


@pytest.mark.parametrize("size", [16, 4080, 4096, 4112, 12288, 300000])
def test_reserve_stack_touches_every_page_it_passes(size):
    """sp goes down `size` in all and release_stack brings it back; a frame of a page or more
    never moves more than STACK_PROBE_BYTES without a store at the new top (a thread short of
    stack faults on its guard page instead of writing past it)."""
    asm = Assembler()
    asm.reserve_stack(size)
    down, unprobed = 0, 0
    for word in words_of(asm.finish()):
        moved = _sp_moves(word)
        if moved is None:
            assert word == encode.str_x(encode.XZR, encode.SP), hex(word)
            unprobed = 0
            continue
        assert moved < 0
        down, unprobed = down - moved, unprobed - moved
        assert size < STACK_PROBE_BYTES or unprobed <= STACK_PROBE_BYTES
    assert down == size and unprobed == (size if size < STACK_PROBE_BYTES else 0)
    asm = Assembler()
    asm.release_stack(size)
    assert sum(_sp_moves(word) for word in words_of(asm.finish())) == size
