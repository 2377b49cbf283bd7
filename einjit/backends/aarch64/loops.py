"""AArch64 loop nests: a TensorOperation's loops around calls of its primitive kernels.

    nest(in0=x0, in1=x1, out=x2, begin=x3, end=x4)

walks the NestPlan's odometer (see einjit/backends/nest_plan.py) over shared iterations
[begin, end) and calls the kernels, which follow in the same buffer as leaf functions (AAPCS64
calls, bl). Registers that live across calls are callee-saved: the three operand pointers
(x19..x21) and the iteration count (x22); the odometer's indices sit in the frame, and so does
the copies of A's and B's blocks where the plan has them (Pack); x9..x13 are scratch between
calls.
x18, the platform register, is never touched.
"""

from __future__ import annotations

from einjit.backends import Target
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler
from einjit.backends.aarch64.binary import emit_binary
from einjit.backends.aarch64.brgemm import emit_brgemm
from einjit.backends.aarch64.encode import SP, XZR
from einjit.backends.aarch64.unary import emit_unary
from einjit.backends.nest_plan import (
    SCRATCH,
    SCRATCH_B,
    KernelCall,
    NestPlan,
    Pack,
    emitter_arguments,
)

POINTERS = (19, 20, 21)               # in0, in1, out: live across calls
COUNT = enc.Reg(22)                   # iterations left (a Reg: counted_loop's runtime count)
FP, LR = 29, 30
INDEX, WEIGHT, VALUE, BEGIN = 9, 10, 11, 3
KERNEL_ALIGN = 64
MAX_IMM12 = 4095


def _add_imm(asm: Assembler, reg: int, value: int) -> None:
    """reg += value (any 64-bit value; nothing for 0)."""
    if value == 0:
        return
    if 0 < value <= MAX_IMM12:
        asm(enc.add_imm(reg, reg, value))
    elif 0 < -value <= MAX_IMM12:
        asm(enc.sub_imm(reg, reg, -value))
    else:
        asm(enc.mov_imm(VALUE, value), enc.add_reg(reg, reg, VALUE))


def _advance(asm: Assembler, strides: tuple[int, int, int], times: int = 1) -> None:
    for reg, stride in zip(POINTERS, strides):
        _add_imm(asm, reg, stride * times)


def _compare(asm: Assembler, reg: int, value: int) -> None:
    if 0 <= value <= MAX_IMM12:
        asm(enc.cmp_imm(reg, value))
    else:
        asm(enc.mov_imm(VALUE, value), enc.cmp_reg(reg, VALUE))


def _index_offset(d: int) -> int:
    """sp-relative slots: one index per loop dim, then (d = the loop count) the in0 the
    last copy of A was taken from, (d = the loop count + 1, where the plan copies B) the in1
    of B's (Pack), then the copies."""
    return 8 * d


def _copied_from_offset(plan: NestPlan, scratch: int) -> int:
    return _index_offset(len(plan.loops) + (scratch == SCRATCH_B))


def _scratch_offset(plan: NestPlan, scratch: int = SCRATCH) -> int:
    """Where the copy `scratch` starts (SCRATCH: A's, SCRATCH_B: B's after A's)."""
    start = -(-_index_offset(len(plan.loops) + 1 + (1 if plan.pack_b else 0)) // 16) * 16
    if scratch == SCRATCH_B and plan.pack_a:
        start += -(-plan.pack_a.bytes // 16) * 16
    return start


def _frame_bytes(plan: NestPlan) -> int:
    if plan.pack_b:
        return _scratch_offset(plan, SCRATCH_B) + -(-plan.pack_b.bytes // 16) * 16
    return _scratch_offset(plan) + (-(-plan.pack_a.bytes // 16) * 16 if plan.pack_a else 0)


def _scratch_address(asm: Assembler, register: int, offset: int) -> None:
    """register := sp + offset (below 16 MiB)."""
    high, low = offset >> 12, offset & MAX_IMM12
    if high:
        asm(enc.add_imm(register, SP, high, shift=12))
        if low:
            asm(enc.add_imm(register, register, low))
    else:
        asm(enc.add_imm(register, SP, low))


def _call(asm: Assembler, call: KernelCall, entry, plan: NestPlan) -> None:
    for register, operand in enumerate(call.pointers):
        if operand in (SCRATCH, SCRATCH_B):
            _scratch_address(asm, register, _scratch_offset(plan, operand))
        else:
            asm(enc.mov_reg(register, POINTERS[operand]))
    for register, value in enumerate(call.integers, start=len(call.pointers)):
        asm(enc.mov_imm(register, value))
    asm.bl(entry)


def _skip_unless_indices(asm: Assembler, plan: NestPlan, at_end: bool, skip) -> None:
    """Branch to `skip` unless every reduction index is 0 (at_end: at its last value)."""
    for d, dim in enumerate(plan.loops):
        if dim.reduction:
            asm(enc.ldr_x(INDEX, SP, _index_offset(d)))
            if at_end:
                _compare(asm, INDEX, dim.size - 1)
                asm.b_cond("ne", skip)
            else:
                asm.cbnz(INDEX, skip)


def _touch(asm: Assembler, plan: NestPlan, call: KernelCall | None, at_end: bool, entries) -> None:
    """Call `call` unless some reduction index is not 0 (at_end: not at its last value)."""
    if call is None:
        return
    skip = asm.label("touch_done")
    _skip_unless_indices(asm, plan, at_end, skip)
    _call(asm, call, entries[call.kernel], plan)
    asm.bind(skip)


def _main(asm: Assembler, plan: NestPlan, entries) -> None:
    """The main call; at the first reduction indices its setting form where the plan has one
    (first_main)."""
    if plan.main is None:
        return
    done = asm.label("main_done")
    if plan.first_main is not None:
        adding = asm.label("adding")
        _skip_unless_indices(asm, plan, False, adding)
        _call(asm, plan.first_main, entries[plan.first_main.kernel], plan)
        asm.b(done)
        asm.bind(adding)
    _call(asm, plan.main, entries[plan.main.kernel], plan)
    asm.bind(done)


def _pack(asm: Assembler, plan: NestPlan, pack: Pack | None, entries) -> None:
    """Copy an operand's block into the frame unless its last copy was taken from here."""
    if pack is None:
        return
    source, scratch = pack.copy.pointers
    copied, slot = asm.label("copied"), _copied_from_offset(plan, scratch)
    asm(enc.ldr_x(INDEX, SP, slot), enc.cmp_reg(INDEX, POINTERS[source]))
    asm.b_cond("eq", copied)
    _call(asm, pack.copy, entries[pack.copy.kernel], plan)
    asm(enc.str_x(POINTERS[source], SP, slot))
    asm.bind(copied)


def _prefetch(asm: Assembler, plan: NestPlan) -> None:
    """prfm an out block's lines (see Prefetch): this block's into L1, the next one's into
    L2; prefetches never fault."""
    if plan.prefetch_out is None:
        return
    lines, columns, pitch, ahead = (plan.prefetch_out.lines, plan.prefetch_out.columns,
                                    plan.prefetch_out.pitch, plan.prefetch_out.ahead)
    level = "pldl2keep" if ahead else "pldl1keep"
    asm(enc.mov_reg(INDEX, POINTERS[2]))
    _add_imm(asm, INDEX, ahead)
    for column in range(columns):
        asm(*(enc.prfm(level, INDEX, 64 * line) for line in range(lines)))
        if column + 1 < columns:
            _add_imm(asm, INDEX, pitch)


def _step_odometer(asm: Assembler, plan: NestPlan) -> None:
    """Advance the index tuple by one: innermost dim first, carrying outward."""
    done = asm.label("stepped")
    loops = plan.loops
    for d in reversed(range(len(loops))):
        dim = loops[d]
        _advance(asm, dim.strides)
        asm(enc.ldr_x(INDEX, SP, _index_offset(d)), enc.add_imm(INDEX, INDEX, 1))
        if d == 0:      # past the last index: the count ends the walk before it is used
            asm(enc.str_x(INDEX, SP, _index_offset(d)))
            break
        carry = asm.label("carry")
        _compare(asm, INDEX, dim.size)
        asm.b_cond("eq", carry)
        asm(enc.str_x(INDEX, SP, _index_offset(d)))
        asm.b(done)
        asm.bind(carry)
        asm(enc.str_x(XZR, SP, _index_offset(d)))
        _advance(asm, dim.strides, -dim.size)
    asm.bind(done)


def _start(asm: Assembler, plan: NestPlan) -> None:
    """Zero the indices, then move the index tuple (and the pointers) to shared iteration
    `begin` (x3): each shared dim's index is found by subtracting its weight, at most its
    size times, so no division is needed."""
    for d in range(len(plan.loops) + 1 + (1 if plan.pack_b else 0)):     # and no copies yet
        asm(enc.str_x(XZR, SP, _index_offset(d)))
    weight = plan.shared_iterations
    for d, dim in enumerate(plan.shared):
        weight //= dim.size
        top, found = asm.label("find_index"), asm.label("index_found")
        asm(enc.mov_imm(WEIGHT, weight))
        asm.bind(top)
        asm(enc.cmp_reg(BEGIN, WEIGHT))
        asm.b_cond("lo", found)
        asm(enc.sub_reg(BEGIN, BEGIN, WEIGHT), enc.ldr_x(INDEX, SP, _index_offset(d)),
            enc.add_imm(INDEX, INDEX, 1), enc.str_x(INDEX, SP, _index_offset(d)))
        _advance(asm, dim.strides)
        asm.b(top)
        asm.bind(found)


def emit_loop_nest(asm: Assembler, target: Target, plan: NestPlan) -> None:
    """Emit the nest function at the current position, its kernels after it."""

    frame = _frame_bytes(plan)
    entries = {kernel: asm.label(kernel[0]) for kernel in plan.kernels}
    asm.prologue(POINTERS + (COUNT, FP, LR), ())
    asm.reserve_stack(frame)
    for reg, arg in zip(POINTERS, (0, 1, 2)):
        asm(enc.mov_reg(reg, arg))
    # iterations = (end - begin) * seq_iterations, or 0 if end <= begin
    asm(enc.subs_reg(COUNT, 4, BEGIN), enc.csel(COUNT, COUNT, XZR, "hi"))
    if plan.seq_iterations > 1:
        asm(enc.mov_imm(VALUE, plan.seq_iterations), enc.mul(COUNT, COUNT, VALUE))
    _start(asm, plan)
    with asm.counted_loop(COUNT, COUNT):
        _touch(asm, plan, plan.first_touch, False, entries)
        _prefetch(asm, plan)
        _pack(asm, plan, plan.pack_a, entries)
        _pack(asm, plan, plan.pack_b, entries)
        _main(asm, plan, entries)
        _touch(asm, plan, plan.last_touch, True, entries)
        if plan.loops:
            _step_odometer(asm, plan)
    asm.release_stack(frame)
    asm.epilogue()
    emitters = {"brgemm": emit_brgemm, "unary": emit_unary, "binary": emit_binary}
    for kernel, entry in entries.items():
        asm.align(KERNEL_ALIGN)
        asm.bind(entry)
        args, kwargs = emitter_arguments(kernel)
        emitters[kernel[0]](asm, target, *args, **kwargs)


def generate_loop_nest(target: Target, plan: NestPlan) -> bytes:
    asm = Assembler()
    emit_loop_nest(asm, target, plan)
    return asm.finish()
