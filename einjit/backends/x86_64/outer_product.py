"""The x86-64 BRGEMM kernel of K = 1 and a batch of one (C += a b^T), generated apart from the
blocked kernels: storing C bounds it, not FMAs."""
from __future__ import annotations

from einjit.backends import Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64 import instructions as ins
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.encode import R10, R11, RAX, RBX, RCX, Mem
from einjit.backends.x86_64.frame import A_PTR, B_BASE, C_PTR, LDB, LDC
from einjit.backends.x86_64.precision import Precision


class OuterProduct:
    """K = 1 and a batch of one, C += a b^T: bound by storing C, not by FMAs. A's column is
    loaded once per panel of rows and stays in registers; each column of C is then loaded,
    added to A times its broadcast element of B, and stored, 4 columns an iteration, with no
    accumulators to zero or keep: one store per vector of C and little else. One FMA onto
    C, as the blocked kernels' first k-step does. AVX2: a tail vector
    ends at the last row, overlapping the panel's previous vector; both are loaded before
    either is stored and hold the same sums there. AVX-512: the tail is masked (k1)."""

    COLUMNS = 4                                   # columns a loop iteration

    def __init__(self, asm: Assembler, target: Target, m: int, n: int,
                 elements: Precision, accumulate: bool = True) -> None:
        self.asm, self.target, self.m, self.n, self.p = asm, target, m, n, elements
        self.accumulate = accumulate
        self.lanes = target.lanes(elements.bytes)
        self.vector_bytes = target.vector_bits // 8
        vectors = -(-m // self.lanes)
        tallest = (target.registers - 1) // 2     # A's vectors, C's vectors, B's broadcast
        count = -(-vectors // tallest)
        small, extra = divmod(vectors, count)
        self.heights = (small + 1,) * extra + (small,) * (count - extra)

    @staticmethod
    def applies(target: Target, m: int, k: int, br: int, lanes: int) -> bool:
        """K = 1, batch 1, and no lone AVX2 tail vector (it would need vmaskmovps)."""
        return k * br == 1 and (target.masks > 0 or m >= lanes or m % lanes == 0)

    def emit(self) -> Label:
        asm, p = self.asm, self.p
        counter, ldb3, ldc3, b_walk, c_walk = RAX, R10, R11, RCX, RBX
        entry = asm.entry("brgemm")
        asm.prologue([counter, ldb3, ldc3, b_walk, c_walk])
        asm(enc.shl_ri(LDB, p.shift), enc.shl_ri(LDC, p.shift),
            enc.lea(ldb3, Mem(LDB, LDB, 2)), enc.lea(ldc3, Mem(LDC, LDC, 2)))
        tail = self.m % self.lanes
        if tail and self.target.masks:
            asm(enc.mov_ri(counter, (1 << tail) - 1), enc.kmovw_kr(1, counter))
        b_columns = (Mem(b_walk), Mem(b_walk, LDB), Mem(b_walk, LDB, 2), Mem(b_walk, ldb3))
        c_columns = (Mem(c_walk), Mem(c_walk, LDC), Mem(c_walk, LDC, 2), Mem(c_walk, ldc3))
        row = 0
        for number, height in enumerate(self.heights):
            last = number == len(self.heights) - 1
            offsets = [i * self.vector_bytes for i in range(height)]
            masked = [False] * height
            if last and tail:
                if self.target.masks:
                    masked[-1] = True
                else:                       # ends at the last row (height >= 2 here)
                    offsets[-1] -= p.bytes * (self.lanes - tail)
            a_regs = [self.target.registers - 1 - i for i in range(height)]
            broadcast = self.target.registers - 1 - height
            width = self.target.vector_bits
            asm((p.load(a, Mem(A_PTR, disp=row + off), width, mask=1, zeroing=True) if mask
                 else p.load(a, Mem(A_PTR, disp=row + off), width)
                 for a, off, mask in zip(a_regs, offsets, masked)),
                enc.mov_rr(b_walk, B_BASE), enc.lea(c_walk, Mem(C_PTR, disp=row)))

            def column(u: int) -> bytes:
                code = [p.broadcast(broadcast, b_columns[u], width)]
                for i, (off, mask) in enumerate(zip(offsets, masked)):
                    mem = c_columns[u].offset(off)
                    if not self.accumulate:     # onto +0, as onto a zeroed C
                        code.append(ins.zero(i))
                    elif mask:
                        code.append(p.load(i, mem, width, mask=1, zeroing=True))
                    else:
                        code.append(p.load(i, mem, width))
                code += [p.fmadd231(i, a, broadcast, width) for i, a in enumerate(a_regs)]
                for i, (off, mask) in enumerate(zip(offsets, masked)):
                    mem = c_columns[u].offset(off)
                    code.append(p.store(mem, i, width, mask=1) if mask else
                                p.store(mem, i, width))
                return b"".join(code)

            loops, rest = divmod(self.n, self.COLUMNS)
            if loops:
                with asm.counted_loop(counter, loops):
                    asm((column(u) for u in range(self.COLUMNS)),
                        enc.lea(b_walk, Mem(b_walk, LDB, 4)), enc.lea(c_walk, Mem(c_walk, LDC, 4)))
            asm(column(u) for u in range(rest))
            row += height * self.vector_bytes
        asm.epilogue()
        return entry
