"""x86-64 transposing copy of 16-byte elements (complex128): B[j + r ld_b] := A[r + j ld_a].

Kernel ABI as unary.py: unary(a, b, ld_a, ld_b) in rdi, rsi, rdx, rcx, leading dimensions in
16-byte elements; M and N are compile-time. An element fills an xmm, so the transpose needs no
shuffle: only the order of the moves. A's columns go in groups of four (the last group
narrower); per row of a group, two neighbouring columns' elements are joined into a ymm (a load
and a vinsertf128 from memory) and stored as 32 contiguous bytes of B's row, so a group writes
64 bytes, a whole line, of each B row while reading its four columns downwards, two rows a
loop step. VEX ymm code: the same for AVX2 and AVX-512.

Large outputs (unary.py's rule for transposed kernels: stream_stride_mask) first try a
streaming path, taken at run time when ld_b in bytes has no bit of the mask set and b is
16-byte aligned: the 0..3 columns before the first whose B rows start on a cache line go as a
narrow group with cached stores, then groups of eight (and one of four) store whole lines with
non-temporal stores, two lines a row (each of B's rows, on a page of its own when ld_b is
large, is visited half as often), then the 0..3 columns left, cached again; no line is
written partly by non-temporal stores.
"""

from __future__ import annotations

from einjit.backends import Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.eltwise import LINE_MASK, emit_streaming_or_static
from einjit.backends.x86_64.encode import (
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    RAX,
    RCX,
    RDI,
    RDX,
    RSI,
    Mem,
    Reg,
)

ELEMENT_BYTES = 16
SHIFT = 4
GROUP_COLUMNS = 4
A, B, LD_A, LD_B = RDI, RSI, RDX, RCX     # LD_A, LD_B in bytes after the entry
LD_A3, A_ROWS, B_ROWS, ROW_COUNT, GROUP_COUNT = R8, R9, R10, R11, RAX
NARROW, REST = R12, R13                   # streaming: the narrow groups' column counts
A_ROWS4 = R14                             # streaming: A_ROWS + 4 ld_a, columns 4..7
STREAM_COLUMNS = 8                        # a streamed group: two whole lines of each B row


def _column(c: int) -> Mem:
    """The current row of the group's column c (of 8)."""
    base, c = (A_ROWS, c) if c < 4 else (A_ROWS4, c - 4)
    if c == 0:
        return Mem(base)
    if c == 3:
        return Mem(base, index=LD_A3)
    return Mem(base, index=LD_A, scale=c)


def _rows(asm: Assembler, columns: int, count: int, stream: bool) -> None:
    """`count` (1 or 2) rows of the group at A_ROWS, B_ROWS; both pointers move on."""
    for row in range(count):
        for pair in range(0, columns, 2):
            reg = 4 * row + pair // 2
            asm(enc.vmovupd_load(reg, _column(pair).offset(ELEMENT_BYTES * row), 128))
            at = Mem(B_ROWS, disp=ELEMENT_BYTES * pair)
            if pair + 1 < columns:
                store = enc.vmovntpd_store if stream else enc.vmovupd_store
                asm(enc.vinsertf128(reg, reg, _column(pair + 1).offset(ELEMENT_BYTES * row), 1),
                    store(at, reg, 256))
            else:
                asm(enc.vmovupd_store(at, reg, 128))
        asm(enc.add_rr(B_ROWS, LD_B))
    asm(enc.add_ri(A_ROWS, ELEMENT_BYTES * count))
    if columns > 4:
        asm(enc.add_ri(A_ROWS4, ELEMENT_BYTES * count))


def _group(asm: Assembler, m: int, columns: int, stream: bool = False) -> None:
    """`columns` (1..8) columns of A from A, all m rows, into B's rows from B."""
    asm(enc.mov_rr(A_ROWS, A), enc.mov_rr(B_ROWS, B))
    if columns > 4:
        asm(enc.lea(A_ROWS4, Mem(A, index=LD_A, scale=4)))
    pairs, single = divmod(m, 2)
    with asm.counted_loop(ROW_COUNT, pairs):
        _rows(asm, columns, 2, stream)
    if single:
        _rows(asm, columns, 1, stream)


def _advance(asm: Assembler, columns: int) -> None:
    """A and B `columns` (1..4, or 8) columns on."""
    step = (Mem(A, index=LD_A, scale=columns) if columns in (1, 2, 4, 8)
            else Mem(A, index=LD_A3))
    asm(enc.lea(A, step), enc.add_ri(B, ELEMENT_BYTES * columns))


def _narrow_group(asm: Assembler, m: int, columns: Reg) -> None:
    """A group of the run-time count of columns in `columns` (0..3), then A and B past it."""
    done = asm.label("narrow_done")
    for width in range(1, GROUP_COLUMNS):
        other = asm.label("narrow_other")
        asm(enc.cmp_ri(columns, width))
        asm.jcc("ne", other)
        _group(asm, m, width)
        _advance(asm, width)
        asm.jmp(done)
        asm.bind(other)
    asm.bind(done)


def _streaming(asm: Assembler, m: int, n: int, stride_mask: int, static: Label) -> None:
    asm(enc.mov_rr(GROUP_COUNT, LD_B), enc.and_ri(GROUP_COUNT, stride_mask))
    asm.jcc("ne", static)
    asm(enc.mov_rr(GROUP_COUNT, B), enc.and_ri(GROUP_COUNT, ELEMENT_BYTES - 1))
    asm.jcc("ne", static)
    # NARROW := columns before the first whose B rows start on a cache line
    asm(enc.mov_rr(NARROW, B), enc.neg(NARROW), enc.and_ri(NARROW, LINE_MASK),
        enc.shr_ri(NARROW, SHIFT), enc.mov_ri(REST, n), enc.sub_rr(REST, NARROW))
    _narrow_group(asm, m, NARROW)
    asm(enc.mov_rr(NARROW, REST), enc.shr_ri(NARROW, 3), enc.and_ri(REST, STREAM_COLUMNS - 1))
    with asm.counted_loop(GROUP_COUNT, NARROW):
        _group(asm, m, STREAM_COLUMNS, stream=True)
        _advance(asm, STREAM_COLUMNS)
    four = asm.label("fewer_than_four")               # 4..7 left: a streamed group of 4
    asm(enc.cmp_ri(REST, GROUP_COLUMNS))
    asm.jcc("b", four)
    _group(asm, m, GROUP_COLUMNS, stream=True)
    _advance(asm, GROUP_COLUMNS)
    asm(enc.sub_ri(REST, GROUP_COLUMNS))
    asm.bind(four)
    _narrow_group(asm, m, REST)
    asm(enc.sfence())


def _static(asm: Assembler, m: int, n: int) -> None:
    groups, rest = divmod(n, GROUP_COLUMNS)
    if groups:
        with asm.counted_loop(GROUP_COUNT, groups):
            _group(asm, m, GROUP_COLUMNS)
            _advance(asm, GROUP_COLUMNS)
    if rest:
        _group(asm, m, rest)


def emit_transpose128(asm: Assembler, target: Target, m: int, n: int,
                      stream_stride_mask: int | None = None) -> Label:
    """Emit the function unary(a, b, ld_a, ld_b) copying the m x n column-major matrix of
    16-byte elements A into row-major B (see the module doc); returns its entry.
    stream_stride_mask: None (cached stores only), or the mask of ld_b in bytes below which
    the streaming path is taken (a multiple of 64, minus 1)."""
    entry = asm.entry("transpose128")
    streams = stream_stride_mask is not None
    asm.prologue((RAX, RCX, RDX, RSI, RDI, R8, R9, R10, R11)
                 + ((R12, R13, R14) if streams else ()))
    asm(enc.shl_ri(LD_A, SHIFT), enc.shl_ri(LD_B, SHIFT),
        enc.lea(LD_A3, Mem(LD_A, index=LD_A, scale=2)))
    emit_streaming_or_static(asm, streams,
                             lambda static: _streaming(asm, m, n, stream_stride_mask, static),
                             lambda: _static(asm, m, n))
    asm.epilogue()
    return entry
