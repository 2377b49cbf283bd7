"""AArch64 BRGEMM of complex64 and complex128 with FCMLA: C += sum_i A_i B_i, interleaved
(numpy's layout: real part, then imaginary part), column-major.

The real kernel's ABI (brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b), leading
dimensions and batch strides in complex elements), loops and C blocks (brgemm.py), with a
complex element where the real kernel has a float: a q register holds two complex64 or one
complex128, so a block is four q registers of rows (8 complex64 or 4 complex128) by 6
columns, the same 24 accumulators.

Each k step loads the block's A rows into q registers and, per column, B's element into the
low pair of a register (ldr d: complex64, ldr q: complex128, at immediate offsets from the
column's pointer), then per A piece two FCMLAs into the same accumulator: rotation #0 adds
re(a) * b, rotation #90 adds im(a) * i*b, so acc += a * b (complex64: FCMLA by element,
B's pair 0 against every pair of A; complex128: the vector form). Every lane is one fused
multiply-add per rotation: re(C) gets ... + re a * re b, then - im a * im b, rounded after
each; im(C) gets + re a * im b, then + im a * re b (docs/brgemm.md compares this with numpy).

Remainder rows: q pieces; complex64's last row of an odd M along k instead (the real
kernel's DOT row, _ComplexRowMicrokernel): two k steps in one register, A's two elements
zipped, B's two as one q load, vector FCMLAs, the register's two pairs added at the end, so
no FCMLA computes a half-empty register. C's row moves as 64-bit loads and stores.
Remainder columns: the same blocks with fewer columns. Small blocks alternate between
accumulator sets over k as the real kernel's do (two FCMLAs a step wait on each other).
"""

from __future__ import annotations

from collections.abc import Sequence

from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler, Label
from einjit.backends.aarch64.brgemm import (
    A_REGS,
    BLOCK_COLS,
    C_BLOCK,
    DOT,
    LD_C,
    MAX_PIECES,
    WALK,
    _batch_loop,
    _column_shapes,
    _DotMicrokernel,
    _Microkernel,
    _pairwise_sums,
    emit_blocks,
)
from einjit.backends.aarch64.target import Element
from einjit.errors import KernelParameterError

# size: bytes of a complex element, lanes: complex elements per q register, letter: the
# register that loads one (B's element), arr: the FCMLA arrangement
COMPLEX64 = Element("complex64", 8, "d", "4s")
COMPLEX128 = Element("complex128", 16, "q", "2d")
ELEMENTS = {COMPLEX64.dtype: COMPLEX64, COMPLEX128.dtype: COMPLEX128}
ROTATIONS = (0, 90)          # together: acc += a * b


def complex_element(dtype: str) -> Element:
    """The Element of a complex dtype, else KernelParameterError."""
    element = ELEMENTS.get(dtype)
    if element is None:
        raise KernelParameterError(f"complex brgemm: dtype={dtype!r} is not complex; "
                                   f"expected one of {tuple(ELEMENTS)}")
    return element


def row_groups(m: int, element: Element) -> list[tuple[int, tuple]]:
    """[(repeat count, pieces or DOT)] covering M complex rows: full blocks of MAX_PIECES q
    registers, then the rest as q pieces, then (complex64, M odd) the last row as DOT."""
    lanes = element.lanes
    full, rest = divmod(m, MAX_PIECES * lanes)
    groups = [(full, (lanes,) * MAX_PIECES)] if full else []
    if rest // lanes:
        groups.append((1, (lanes,) * (rest // lanes)))
    return groups + ([(1, DOT)] if rest % lanes else [])


class _ComplexMicrokernel(_Microkernel):
    """brgemm._Microkernel with complex elements: per column, FCMLA #0 on every A piece, then
    #90 on every piece (each waits on its #0 a few instructions back, not the one before)."""

    def _multiply_adds(self, column: Sequence[int], b: int) -> list[int]:
        if self.element is COMPLEX64:
            return [enc.fcmla_elem(acc, A_REGS[p], b, 0, rotate)
                    for rotate in ROTATIONS for p, acc in enumerate(column)]
        return [enc.fcmla(acc, A_REGS[p], b, rotate, self.element.arr)
                for rotate in ROTATIONS for p, acc in enumerate(column)]

    def _arrangement(self, rows: int) -> str:
        return self.element.arr


class _ComplexRowMicrokernel(_DotMicrokernel):
    """brgemm._DotMicrokernel for complex64's last row: a chunk is two k steps, one complex
    each in a register's two pairs (A's two elements zipped, B's loaded as one q), vector
    FCMLAs #0 and #90; a last odd step loads one complex of each (the upper pairs zero).
    C starts in set 0's lower pair (a 64-bit load; accumulate=False: +0); after the batch
    the sets are summed and each accumulator's upper pair added to its lower one (K >= 2),
    which is stored as 64 bits."""

    def _multiply_add(self, acc: int, a: int, b: int) -> list[int]:
        return [enc.fcmla(acc, a, b, rotate, self.element.arr) for rotate in ROTATIONS]

    def emit(self, asm: Assembler) -> None:
        arr, letter, scratch = self.element.arr, self.element.letter, A_REGS[0]
        asm(enc.mov_reg(WALK, C_BLOCK))
        for j, acc in enumerate(self.sets[0]):
            if not self.accumulate:
                asm(enc.movi_zero(acc))
                continue
            if j:
                asm(enc.add_reg(WALK, WALK, LD_C))
            asm(enc.ldr_v(letter, acc, WALK))
        asm([enc.movi_zero(reg) for column in self.sets[1:] for reg in column])
        _batch_loop(asm, self)
        for total, addend in _pairwise_sums(len(self.sets)):
            asm([enc.fadd(t, t, e, arr) for t, e in zip(self.sets[total], self.sets[addend])])
        asm(enc.mov_reg(WALK, C_BLOCK))
        for j, acc in enumerate(self.sets[0]):
            if self.k >= 2:     # K = 1 never wrote the upper pair: C keeps its zeros' signs
                asm(enc.ext(scratch, acc, acc, 8, "16b"), enc.fadd(acc, acc, scratch, "2s"))
            if j:
                asm(enc.add_reg(WALK, WALK, LD_C))
            asm(enc.str_v(letter, acc, WALK))


def _microkernel(pieces: tuple, ncols: int, k: int, br_size: int, element: Element,
                 accumulate: bool = True):
    if pieces == DOT:
        return _ComplexRowMicrokernel(ncols, k, br_size, element, accumulate)
    return _ComplexMicrokernel(pieces, ncols, k, br_size, element, accumulate)


def _microkernels(m: int, n: int, k: int, br_size: int, element: Element, accumulate: bool):
    groups = row_groups(m, element)
    column_groups = {ncols: groups for ncols in _column_shapes(n)}
    microkernels = {(pieces, ncols): _microkernel(pieces, ncols, k, br_size, element,
                                                  accumulate)
                    for ncols in column_groups for _, pieces in groups}
    return column_groups, microkernels


def emit_complex_brgemm(asm: Assembler, m: int, n: int, k: int, br_size: int, dtype: str,
                        accumulate: bool = True) -> Label:
    """Emit brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) for complex `dtype` at
    the current position of `asm` and return its entry (brgemm.emit_brgemm has checked the
    target and sizes). accumulate=False: C := the sum, C never read."""
    element = complex_element(dtype)
    column_groups, microkernels = _microkernels(m, n, k, br_size, element, accumulate)
    name = f"brgemm_{m}x{n}x{k}_br{br_size}_{dtype}{'' if accumulate else '_set'}"
    return emit_blocks(asm, name, n, element, column_groups, microkernels)


def block_counts(m: int, n: int, dtype: str) -> dict[tuple[tuple, int], int]:
    """{(row pieces, columns): how many such C blocks} of an m×n complex BRGEMM (for the
    static throughput benchmark)."""
    element = complex_element(dtype)
    counts: dict[tuple[tuple, int], int] = {}
    for ncols in _column_shapes(n):
        column_count = n // BLOCK_COLS if ncols == BLOCK_COLS else 1
        for count, pieces in row_groups(m, element):
            counts[pieces, ncols] = counts.get((pieces, ncols), 0) + count * column_count
    return counts


def k_loop_code(pieces: tuple, ncols: int, k: int, dtype: str) -> tuple[bytes, int]:
    """The code of one C block's K loop alone, as in the kernels, and the k steps of one pass
    through the loop (for static analysis)."""
    asm = Assembler()
    element = complex_element(dtype)
    kernel = _microkernel(pieces, ncols, k, 1, element)
    kernel._k_loop(asm)
    return asm.finish(), kernel.unroll * (element.lanes if pieces == DOT else 1)
