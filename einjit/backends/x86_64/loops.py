"""x86-64 loop nests: a TensorOperation's loops around calls of its primitive kernels.

    nest(in0=rdi, in1=rsi, out=rdx, begin=rcx, end=r8)

walks the NestPlan's odometer (see einjit/backends/nest_plan.py) over shared iterations
[begin, end) and calls the kernels, which follow in the same buffer as leaf functions
(System V calls, rel32). Registers that live across calls are callee-saved: the three
operand pointers (rbx, rbp, r12) and the iteration count (r13); the odometer's indices sit in
the frame, and so do the copies of A's and B's blocks where the plan has them (Pack). Strides
are added
as immediates where they fit in 32 bits.
"""

from __future__ import annotations

from einjit.backends import LINE_BYTES, Target
from einjit.backends.nest_plan import (
    SCRATCH,
    SCRATCH_B,
    KernelCall,
    NestPlan,
    Pack,
    emitter_arguments,
)
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.binary import emit_binary
from einjit.backends.x86_64.brgemm import emit_brgemm
from einjit.backends.x86_64.encode import (
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    RAX,
    RBP,
    RBX,
    RCX,
    RDI,
    RDX,
    RSI,
    RSP,
    Mem,
)
from einjit.backends.x86_64.unary import emit_unary

POINTERS = (RBX, RBP, R12)            # in0, in1, out: live across calls
COUNT = R13                           # iterations left
ARGUMENTS = (RDI, RSI, RDX, RCX, R8, R9)
STACK_ARGUMENTS = 2                   # brgemm's batch strides are arguments 7 and 8
KERNEL_ALIGN = 64


def _add_imm(asm: Assembler, reg: int, value: int, scratch: int = R11) -> None:
    """reg += value (any 64-bit value; nothing for 0)."""
    if value == 0:
        return
    if -(1 << 31) <= value < (1 << 31):
        asm(enc.add_ri(reg, value))
    else:
        asm(enc.mov_ri(scratch, value), enc.add_rr(reg, scratch))


def _advance(asm: Assembler, strides: tuple[int, int, int], times: int = 1) -> None:
    for reg, stride in zip(POINTERS, strides):
        _add_imm(asm, reg, stride * times)


class _Frame:
    """rsp-relative slots: outgoing stack arguments, one index per loop dim, the in0 the copy
    of A was taken from (where the plan copies A or B; Pack), the in1 of B's (where it copies
    B), then the copies, 64-byte aligned: A's, then B's."""

    def __init__(self, loops: int, a_bytes: int = 0, b_bytes: int = 0):
        self.loops = loops
        self.slots = STACK_ARGUMENTS + loops + 1 + (1 if b_bytes else 0)
        self.size = 8 * self.slots
        self.b_offset = -(-a_bytes // LINE_BYTES) * LINE_BYTES
        if a_bytes or b_bytes:
            self.size += LINE_BYTES + (self.b_offset + b_bytes if b_bytes else a_bytes)
        pushed = 8 * (1 + len(POINTERS) + 1)       # return address, pointers and COUNT
        self.size += -(self.size + pushed) % 16    # rsp 16-byte aligned at every call

    @staticmethod
    def stack_argument(i: int) -> Mem:
        return Mem(RSP, disp=8 * i)

    @staticmethod
    def index(d: int) -> Mem:
        return Mem(RSP, disp=8 * (STACK_ARGUMENTS + d))

    def copied_from(self, scratch: int) -> Mem:
        """The slot of the operand pointer the copy into `scratch` was taken from."""
        return self.index(self.loops + (scratch == SCRATCH_B))

    def scratch(self, reg: int, scratch: int = SCRATCH) -> list[bytes]:
        """reg := the address of the copy `scratch` (SCRATCH: A's, SCRATCH_B: B's)."""
        start = 8 * self.slots + LINE_BYTES - 1 + (self.b_offset if scratch == SCRATCH_B else 0)
        return [enc.lea(reg, Mem(RSP, disp=start)), enc.and_ri(reg, -LINE_BYTES)]


def _call(asm: Assembler, call: KernelCall, entry, frame: _Frame) -> None:
    registers = iter(ARGUMENTS)
    for operand in call.pointers:
        register = next(registers)
        asm(*frame.scratch(register, operand) if operand in (SCRATCH, SCRATCH_B)
            else (enc.mov_rr(register, POINTERS[operand]),))
    stack = 0
    for value in call.integers:
        register = next(registers, None)
        if register is not None:
            asm(enc.mov_ri(register, value))
        else:
            asm(enc.mov_ri(RAX, value), enc.mov_mr(_Frame.stack_argument(stack), RAX))
            stack += 1
    asm.call(entry)


def _prefetch(asm: Assembler, plan: NestPlan) -> None:
    """Prefetch an out block's lines (see Prefetch): this block's into L1 (prefetcht0), the
    next one's into L2 (prefetcht1); prefetches never fault."""
    if plan.prefetch_out is None:
        return
    lines, columns, pitch, ahead = (plan.prefetch_out.lines, plan.prefetch_out.columns,
                                    plan.prefetch_out.pitch, plan.prefetch_out.ahead)
    prefetch = enc.prefetcht1 if ahead else enc.prefetcht0
    asm(enc.mov_rr(RAX, POINTERS[2]))
    _add_imm(asm, RAX, ahead)
    for column in range(columns):
        asm(*(prefetch(Mem(RAX, disp=64 * line)) for line in range(lines)))
        if column + 1 < columns:
            _add_imm(asm, RAX, pitch)


def _skip_unless_indices(asm: Assembler, plan: NestPlan, at_end: bool, skip) -> None:
    """Jump to `skip` unless every reduction loop's index is 0 (or its last value)."""
    for d, dim in enumerate(plan.loops):
        if dim.reduction:
            asm(enc.mov_rm(RAX, _Frame.index(d)))
            if at_end:
                asm(enc.cmp_ri(RAX, dim.size - 1))
            else:
                asm(enc.test_rr(RAX, RAX))
            asm.jcc("ne", skip)


def _touch(asm: Assembler, plan: NestPlan, call: KernelCall | None, at_end: bool, entries,
           frame: _Frame) -> None:
    if call is None:
        return
    skip = asm.label("touch_done")
    _skip_unless_indices(asm, plan, at_end, skip)
    _call(asm, call, entries[call.kernel], frame)
    asm.bind(skip)


def _main(asm: Assembler, plan: NestPlan, entries, frame: _Frame) -> None:
    """The main call; at the first reduction indices its setting form where the plan has one
    (first_main)."""
    if plan.main is None:
        return
    done = asm.label("main_done")
    if plan.first_main is not None:
        adding = asm.label("adding")
        _skip_unless_indices(asm, plan, False, adding)
        _call(asm, plan.first_main, entries[plan.first_main.kernel], frame)
        asm.jmp(done)
        asm.bind(adding)
    _call(asm, plan.main, entries[plan.main.kernel], frame)
    asm.bind(done)


def _pack(asm: Assembler, pack: Pack | None, entries, frame: _Frame) -> None:
    """Copy an operand's block into the frame unless its last copy was taken from here."""
    if pack is None:
        return
    source, scratch = pack.copy.pointers
    copied = asm.label("copied")
    asm(enc.mov_rm(RAX, frame.copied_from(scratch)), enc.cmp_rr(RAX, POINTERS[source]))
    asm.jcc("e", copied)
    _call(asm, pack.copy, entries[pack.copy.kernel], frame)
    asm(enc.mov_mr(frame.copied_from(scratch), POINTERS[source]))
    asm.bind(copied)


def _step_odometer(asm: Assembler, plan: NestPlan) -> None:
    """Advance the index tuple by one: innermost dim first, carrying outward."""
    done = asm.label("stepped")
    loops = plan.loops
    for d in reversed(range(len(loops))):
        dim = loops[d]
        _advance(asm, dim.strides)
        asm(enc.mov_rm(RAX, _Frame.index(d)), enc.inc(RAX), enc.cmp_ri(RAX, dim.size))
        if d == 0:      # past the last index: the count ends the walk before it is used
            asm(enc.mov_mr(_Frame.index(d), RAX))
            break
        carry = asm.label("carry")
        asm.jcc("e", carry)
        asm(enc.mov_mr(_Frame.index(d), RAX))
        asm.jmp(done)
        asm.bind(carry)
        asm(enc.xor_rr(RAX, RAX), enc.mov_mr(_Frame.index(d), RAX))
        _advance(asm, dim.strides, -dim.size)
    asm.bind(done)


def _start(asm: Assembler, plan: NestPlan, frame: _Frame) -> None:
    """Zero the indices (and the operands of the last copies: none yet), then move the index
    tuple (and the pointers) to shared iteration `begin` (rcx): each shared dim's index is
    found by subtracting its weight, at most its size times, so no division is needed."""
    asm(enc.xor_rr(RAX, RAX), enc.mov_mr(frame.copied_from(SCRATCH), RAX))
    if plan.pack_b:
        asm(enc.mov_mr(frame.copied_from(SCRATCH_B), RAX))
    for d in range(len(plan.loops)):
        asm(enc.mov_mr(_Frame.index(d), RAX))
    weight = plan.shared_iterations
    for d, dim in enumerate(plan.shared):
        weight //= dim.size
        top, found = asm.label("find_index"), asm.label("index_found")
        asm(enc.mov_ri(R10, weight))
        asm.bind(top)
        asm(enc.cmp_rr(RCX, R10))
        asm.jcc("b", found)
        asm(enc.sub_rr(RCX, R10), enc.mov_rm(RAX, _Frame.index(d)), enc.inc(RAX),
            enc.mov_mr(_Frame.index(d), RAX))
        _advance(asm, dim.strides)
        asm.jmp(top)
        asm.bind(found)


def emit_loop_nest(asm: Assembler, target: Target, plan: NestPlan) -> None:
    """Emit the nest function at the current position, its kernels after it."""

    frame = _Frame(len(plan.loops), plan.pack_a.bytes if plan.pack_a else 0,
                   plan.pack_b.bytes if plan.pack_b else 0)
    entries = {kernel: asm.label(kernel[0]) for kernel in plan.kernels}
    asm.prologue(POINTERS + (COUNT,))
    asm.reserve_stack(frame.size)
    for reg, arg in zip(POINTERS, (RDI, RSI, RDX)):
        asm(enc.mov_rr(reg, arg))
    # iterations = (end - begin) * seq_iterations, or 0 if end <= begin
    empty, counted = asm.label("empty"), asm.label("counted")
    asm(enc.mov_rr(COUNT, R8), enc.sub_rr(COUNT, RCX))
    asm.jcc("be", empty)
    if plan.seq_iterations > 1:
        asm(enc.mov_ri(RAX, plan.seq_iterations), enc.imul_rr(COUNT, RAX))
    asm.jmp(counted)
    asm.bind(empty)
    asm(enc.xor_rr(COUNT, COUNT))
    asm.bind(counted)
    _start(asm, plan, frame)
    with asm.counted_loop(COUNT, COUNT):
        _touch(asm, plan, plan.first_touch, False, entries, frame)
        _prefetch(asm, plan)
        _pack(asm, plan.pack_a, entries, frame)
        _pack(asm, plan.pack_b, entries, frame)
        _main(asm, plan, entries, frame)
        _touch(asm, plan, plan.last_touch, True, entries, frame)
        if plan.loops:
            _step_odometer(asm, plan)
    if plan.streams:
        asm(enc.sfence())       # the kernel's non-temporal stores land before the caller reads
    asm(enc.add_ri(RSP, frame.size))
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
