"""x86-64 transposing copy of 16-byte elements (complex128): B[j + r ld_b] := A[r + j ld_a].

Kernel ABI as unary.py: unary(a, b, ld_a, ld_b) in rdi, rsi, rdx, rcx, leading dimensions in
16-byte elements; M and N are compile-time. An element fills an xmm, so the transpose needs no
shuffle: only the order of the moves. A's columns go in groups of four (the last group
narrower); per row of a group, two neighbouring columns' elements are joined into a ymm (a load
and a vinsertf128 from memory) and stored as 32 contiguous bytes of B's row, so a group writes
64 bytes, a whole line, of each B row while reading its four columns downwards, two rows a
loop step. VEX ymm code: the same for AVX2 and AVX-512.
"""

from __future__ import annotations

from einjit.backends import Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.encode import R8, R9, R10, R11, RAX, RCX, RDI, RDX, RSI, Mem

ELEMENT_BYTES = 16
SHIFT = 4
GROUP_COLUMNS = 4
A, B, LD_A, LD_B = RDI, RSI, RDX, RCX     # LD_A, LD_B in bytes after the entry
LD_A3, A_ROWS, B_ROWS, ROW_COUNT, GROUP_COUNT = R8, R9, R10, R11, RAX


def _column(c: int) -> Mem:
    """The current row of the group's column c (of 4)."""
    if c == 0:
        return Mem(A_ROWS)
    if c == 3:
        return Mem(A_ROWS, index=LD_A3)
    return Mem(A_ROWS, index=LD_A, scale=c)


def _rows(asm: Assembler, columns: int, count: int) -> None:
    """`count` (1 or 2) rows of the group at A_ROWS, B_ROWS; both pointers move on."""
    for row in range(count):
        for pair in range(0, columns, 2):
            reg = 2 * row + pair // 2
            asm(enc.vmovupd_load(reg, _column(pair).offset(ELEMENT_BYTES * row), 128))
            if pair + 1 < columns:
                asm(enc.vinsertf128(reg, reg, _column(pair + 1).offset(ELEMENT_BYTES * row), 1),
                    enc.vmovupd_store(Mem(B_ROWS, disp=ELEMENT_BYTES * pair), reg, 256))
            else:
                asm(enc.vmovupd_store(Mem(B_ROWS, disp=ELEMENT_BYTES * pair), reg, 128))
        asm(enc.add_rr(B_ROWS, LD_B))
    asm(enc.add_ri(A_ROWS, ELEMENT_BYTES * count))


def _group(asm: Assembler, m: int, columns: int) -> None:
    """`columns` (1..4) columns of A from A, all m rows, into B's rows from B."""
    asm(enc.mov_rr(A_ROWS, A), enc.mov_rr(B_ROWS, B))
    pairs, single = divmod(m, 2)
    with asm.counted_loop(ROW_COUNT, pairs):
        _rows(asm, columns, 2)
    if single:
        _rows(asm, columns, 1)


def emit_transpose128(asm: Assembler, target: Target, m: int, n: int) -> Label:
    """Emit the function unary(a, b, ld_a, ld_b) copying the m x n column-major matrix of
    16-byte elements A into row-major B (see the module doc); returns its entry."""
    entry = asm.entry("transpose128")
    asm.prologue((RAX, RCX, RDX, RSI, RDI, R8, R9, R10, R11))
    asm(enc.shl_ri(LD_A, SHIFT), enc.shl_ri(LD_B, SHIFT),
        enc.lea(LD_A3, Mem(LD_A, index=LD_A, scale=2)))
    groups, rest = divmod(n, GROUP_COLUMNS)
    if groups:
        with asm.counted_loop(GROUP_COUNT, groups):
            _group(asm, m, GROUP_COLUMNS)
            asm(enc.lea(A, Mem(A, index=LD_A, scale=4)),
                enc.add_ri(B, ELEMENT_BYTES * GROUP_COLUMNS))
    if rest:
        _group(asm, m, rest)
    asm.epilogue()
    return entry
