"""Shared machinery of the element-wise A64 kernels (unary and binary).

An element-wise op is described once, as a VectorOp acting on whole vectors (4s in FP32, 2d in
FP64); this module applies it to many vectors at a time (interleaved, so independent work
overlaps) and streams column-major matrices through it column by column.

Column streaming: every column of M rows is cut into pieces of one full vector (q register:
4 FP32 or 2 FP64 rows), then at most one of 8 bytes (d: 2 FP32 rows or 1 FP64 row) and one of
4 bytes (s: 1 FP32 row), so no access reaches past the last row of a column. Full blocks of
`step` q-pieces run in a loop that advances each pointer with one add per block; the pieces
left over are unrolled at immediate offsets. So at the end of a column each pointer sits
`looped` rows further and one add of (ld - looped) * element size moves it to the next
column. (Immediate offsets rather than post-indexed accesses: the pointer update is then one
add per block instead of a chain through every load and store.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler
from einjit.backends.aarch64.target import FLOAT32, Element

ARR = FLOAT32.arr
PIECE_SIZE = {16: "q", 8: "d", 4: "s"}      # bytes -> register size letter
MAX_STEP_VECTORS = 8
# Loop heads are not padded (align=4 is a no-op): the kernels' code stays as measured.
LOOP_ALIGN = 4

# Caller-saved vector registers first; v8..v15 (callee-saved low halves) only when needed.
VECTOR_REGISTERS = tuple(range(0, 8)) + tuple(range(16, 32)) + tuple(range(8, 16))


@dataclass(frozen=True)
class VectorOp:
    """An element-wise op on whole vectors of one element type.

    arity: input vectors per result (0: the result does not depend on any input);
    temps: scratch vectors needed per result;
    constant_count: vectors holding constants for the whole kernel;
    load_constants(regs, scratch_gpr) -> words setting up the constant registers;
    compute(inputs, temps, consts) -> (words, result register). Ops with inputs compute in
    place: the result register is inputs[0].
    """
    name: str
    arity: int
    temps: int
    constant_count: int
    load_constants: Callable[[Sequence[int], int], list[int]]
    compute: Callable[[Sequence[int], Sequence[int], Sequence[int]], tuple[list[int], int]]


def interleave(sequences: Sequence[Sequence[int]]) -> list[int]:
    """Round-robin merge of instruction lists, so independent chains overlap in the pipeline."""
    merged = []
    longest = max((len(seq) for seq in sequences), default=0)
    for index in range(longest):
        merged.extend(seq[index] for seq in sequences if index < len(seq))
    return merged


def apply(op: VectorOp, vectors: Sequence[Sequence[int]], temp_pool: Sequence[int],
          consts: Sequence[int]) -> tuple[list[int], list[int]]:
    """Words computing op on each entry of `vectors` (a list of input-register lists), in
    batches as large as the scratch registers in `temp_pool` allow; returns (words, results)."""
    batch = len(vectors) if op.temps == 0 else max(1, len(temp_pool) // op.temps)
    words, results = [], []
    for start in range(0, len(vectors), batch):
        sequences = []
        for index, inputs in enumerate(vectors[start:start + batch]):
            temps = temp_pool[index * op.temps:(index + 1) * op.temps]
            seq, result = op.compute(inputs, temps, consts)
            sequences.append(seq)
            results.append(result)
        words += interleave(sequences)
    return words, results


def scale_to_bytes(ld: int, element: Element = FLOAT32) -> int:
    """lsl ld, ld, #log2(size): a leading dimension in elements becomes a stride in bytes."""
    return enc.lsl_imm(ld, ld, element.shift)


def subtract_constant(reg: int, value: int) -> list[int]:
    """Words doing reg -= value for 0 <= value < 2**24 (add/sub immediates are 12 bits)."""
    words = []
    if value >> 12:
        words.append(enc.sub_imm(reg, reg, value >> 12, shift=12))
    if value & 0xFFF:
        words.append(enc.sub_imm(reg, reg, value & 0xFFF))
    return words


def _pieces(rows: int, element: Element) -> list[int]:
    """Row counts of the register pieces covering `rows` rows: full vectors, then halves of
    the remaining lanes (FP32: a 2, then a 1; FP64: a 1)."""
    pieces = [element.lanes] * (rows // element.lanes)
    part = element.lanes // 2
    while part:
        if rows & part:
            pieces.append(part)
        part //= 2
    return pieces


def _transfer(load: bool, pointer: int, offset: int, regs: Sequence[int],
              pieces: Sequence[int], element: Element) -> list[int]:
    """Loads (or stores) of the pieces from/to [pointer + offset bytes] on; adjacent q as
    pairs."""
    pair, single = (enc.ldp_v, enc.ldr_v) if load else (enc.stp_v, enc.str_v)
    words, index = [], 0
    full = element.lanes
    while index < len(pieces):
        if pieces[index] == full and index + 1 < len(pieces) and pieces[index + 1] == full:
            words.append(pair("q", regs[index], regs[index + 1], pointer, offset))
            offset, index = offset + 32, index + 2
        else:
            nbytes = element.size * pieces[index]
            words.append(single(PIECE_SIZE[nbytes], regs[index], pointer, offset))
            offset, index = offset + nbytes, index + 1
    return words


@dataclass(frozen=True)
class Stream:
    """A column-major operand: its pointer register and its leading-dimension register."""
    pointer: int
    ld: int


class ColumnSweep:
    """C := op(inputs...) column by column for M x N column-major operands.

    inputs: one Stream per op input (op.arity of them); output: the result Stream;
    counters: two free general registers (column count, row-block count);
    scratch_gpr: a free general register for building constants;
    element: the element type (op computes on its vectors);
    ld_shift: the leading dimensions count 2**ld_shift elements (1: complex, see
    einjit.backends.complex_eltwise).
    """

    def __init__(self, op: VectorOp, m: int, n: int, inputs: list[Stream], output: Stream,
                 counters: tuple[int, int], scratch_gpr: int, element: Element = FLOAT32,
                 ld_shift: int = 0):
        self.op, self.m, self.n, self.element = op, m, n, element
        self.ld_shift = ld_shift
        self.inputs, self.output = inputs, output
        self.column_counter, self.block_counter = counters
        self.scratch_gpr = scratch_gpr
        pool = list(VECTOR_REGISTERS)
        self.consts, pool = pool[:op.constant_count], pool[op.constant_count:]
        per_vector = op.arity + op.temps
        step = MAX_STEP_VECTORS if per_vector == 0 else len(pool) // per_vector
        self.step = min(MAX_STEP_VECTORS, step)
        data_count = self.step * op.arity
        # data[i] = registers of input i for each vector slot
        self.data = [pool[i * self.step:(i + 1) * self.step] for i in range(op.arity)]
        self.temps = pool[data_count:data_count + self.step * op.temps]

    @property
    def general_registers(self) -> list[int]:
        streams = self.inputs + [self.output]
        return ([s.pointer for s in streams] + [s.ld for s in streams]
                + [self.column_counter, self.block_counter, self.scratch_gpr])

    @property
    def vector_registers(self) -> list[int]:
        return self.consts + [reg for regs in self.data for reg in regs] + self.temps

    def emit(self, asm: Assembler) -> None:
        """The whole kernel body (without prologue/epilogue)."""
        streams = self.inputs + [self.output]
        blocks = self.m // (self.element.lanes * self.step)
        if self.n > 1:
            for stream in streams:
                asm(enc.lsl_imm(stream.ld, stream.ld, self.element.shift + self.ld_shift),
                    subtract_constant(stream.ld, 16 * self.step * blocks))
        asm(self.op.load_constants(self.consts, self.scratch_gpr))
        with asm.counted_loop(self.column_counter, self.n, align=LOOP_ALIGN):
            self._column(asm, streams)

    def _column(self, asm: Assembler, streams: list[Stream]) -> None:
        blocks, rest = divmod(self.m, self.element.lanes * self.step)
        if blocks:
            with asm.counted_loop(self.block_counter, blocks, align=LOOP_ALIGN):
                self._block(asm, streams)
        pieces, offset = _pieces(rest, self.element), 0
        for start in range(0, len(pieces), self.step):
            group = pieces[start:start + self.step]
            self._group(asm, group, offset)
            offset += self.element.size * sum(group)
        if self.n > 1:
            for stream in streams:
                asm(enc.add_reg(stream.pointer, stream.pointer, stream.ld))

    def _block(self, asm: Assembler, streams: list[Stream]) -> None:
        self._group(asm, [self.element.lanes] * self.step, 0)
        for stream in streams:
            asm(enc.add_imm(stream.pointer, stream.pointer, 16 * self.step))

    def _group(self, asm: Assembler, pieces: list[int], offset: int) -> None:
        """Load, compute and store one group of pieces (at most self.step of them)."""
        count = len(pieces)
        for stream, regs in zip(self.inputs, self.data):
            asm(_transfer(True, stream.pointer, offset, regs, pieces, self.element))
        vectors = [[regs[slot] for regs in self.data] for slot in range(count)]
        words, results = apply(self.op, vectors, self.temps, self.consts)
        asm(words)
        asm(_transfer(False, self.output.pointer, offset, results, pieces, self.element))
