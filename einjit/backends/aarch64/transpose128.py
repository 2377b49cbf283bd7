"""A64 transposing copy of 16-byte elements (complex128): B[j + r*ld_b] := A[r + j*ld_a].

Kernel ABI as unary.py: unary(a, b, ld_a, ld_b) in x0..x3, leading dimensions in 16-byte
elements; M and N are compile-time. An element fills a q register, so the transpose needs no
permute: only the order of the moves. A's columns go in groups of four (the last group
narrower); per row of a group, one post-incremented ldr q from each column, then one st1 of
the row's (up to) 64 contiguous bytes of B, post-incremented by ld_b. Rows go two at a time
(two register sets) so that the loads of one overlap the store of the other.
"""

from __future__ import annotations

from einjit.backends import Target
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler, Label
from einjit.backends.aarch64.eltwise import LOOP_ALIGN
from einjit.backends.aarch64.encode import Reg

ELEMENT_BYTES = 16
SHIFT = 4
GROUP_COLUMNS = 4
A, B, LD_A, LD_B = 0, 1, 2, 3          # LD_A, LD_B in bytes after the entry
COLUMNS = (4, 5, 6, 7)                 # the group's column pointers, walking down
WALK = 8                               # B's row pointer, advanced by ld_b per row
GROUP_COUNT, ROW_COUNT = 9, 10
ROW_SETS = ((0, 1, 2, 3), (4, 5, 6, 7))   # consecutive registers: st1 of a whole row


def _rows(asm: Assembler, columns: int, count: int) -> None:
    """`count` (1 or 2) rows of the group: loads, then stores."""
    for regs in ROW_SETS[:count]:
        asm(enc.ldr_v_post("q", regs[c], COLUMNS[c], ELEMENT_BYTES) for c in range(columns))
    for regs in ROW_SETS[:count]:
        asm(enc.st1(list(regs[:columns]), "2d", WALK, post=Reg(LD_B)))


def _group(asm: Assembler, m: int, columns: int) -> None:
    """`columns` (1..4) columns of A from A, all m rows, into B's rows from B."""
    asm(enc.mov_reg(COLUMNS[0], A), enc.mov_reg(WALK, B))
    for c in range(1, columns):
        asm(enc.add_reg(COLUMNS[c], COLUMNS[c - 1], LD_A))
    pairs, single = divmod(m, 2)
    if pairs:
        with asm.counted_loop(ROW_COUNT, pairs, align=LOOP_ALIGN):
            _rows(asm, columns, 2)
    if single:
        _rows(asm, columns, 1)


def emit_transpose128(asm: Assembler, target: Target, m: int, n: int) -> Label:
    """Emit the function unary(a, b, ld_a, ld_b) copying the m x n column-major matrix of
    16-byte elements A into row-major B (see the module doc); returns its entry."""
    entry = asm.label(f"transpose128_{m}x{n}")
    asm.bind(entry)
    asm.prologue([*COLUMNS, WALK, GROUP_COUNT, ROW_COUNT, LD_A, LD_B, A, B],
                 [reg for regs in ROW_SETS for reg in regs])
    asm(enc.lsl_imm(LD_A, LD_A, SHIFT), enc.lsl_imm(LD_B, LD_B, SHIFT))
    groups, rest = divmod(n, GROUP_COLUMNS)
    if groups:
        with asm.counted_loop(GROUP_COUNT, groups, align=LOOP_ALIGN):
            _group(asm, m, GROUP_COLUMNS)
            asm(enc.add_reg(A, A, LD_A, lsl=2), enc.add_imm(B, B, ELEMENT_BYTES * GROUP_COLUMNS))
    if rest:
        _group(asm, m, rest)
    asm.epilogue()
    return entry
