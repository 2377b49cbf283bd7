"""x86-64 BRGEMM generator: C += sum_i A_i B_i for column-major FP32, AVX-512 or AVX2/FMA.

Kernel ABI (System V): brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b), leading
dimensions and batch strides in elements; M, N, K and the batch size are compile-time.

C is cut into register blocks of `vectors` column vectors (16 or 8 rows each) × `cols`
columns. A block's accumulators stay in registers across the whole K and batch loops: each
k-step loads `vectors` vectors of A's column k and, for every column j of the block, brings
B[k, j] to all lanes (AVX-512 with one vector: an embedded {1to16} broadcast inside the FMA;
otherwise one vbroadcastss shared by the column's FMAs). The accumulators start at zero and
are added to C at the end of the block. Rows past M in the last vector are masked (AVX-512:
k1; AVX2: vmaskmovps with a mask vector), so no access leaves the operands.

The blocking is chosen per (M, N, K, batch) by a small cost model of this loop (FMA and load
throughput, FMA latency, per-block overhead), see `plan`. Blocks of one shape are repeated
by runtime loops over M and N, so code size does not grow with the matrix.

Columns of B are addressed from base pointers 5 columns apart: base, base+L, base+2L,
base+3L (through a register holding 3L) and base+4L, where L is ld_b in bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from einjit.backends.x86_64 import encode as e
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.encode import (RAX, RBP, RBX, RCX, RDI, RDX, RSI, RSP, R8, R9, R10,
                                           R11, R12, R13, R14, R15, Mem)


@dataclass(frozen=True)
class VectorIsa:
    """What the register blocking depends on: vector width and register count."""
    name: str
    width: int        # bits
    lanes: int        # floats per vector
    registers: int    # vector registers

    @property
    def vector_bytes(self) -> int:
        return self.width // 8


VARIANTS = {
    "avx512": VectorIsa("avx512", 512, 16, 32),
    "avx2": VectorIsa("avx2", 256, 8, 16),
}

COLUMNS_PER_BASE = 5          # B columns reachable from one base pointer (see module doc)
MAX_COLS = 25                 # general registers left for B base pointers: 5 bases
MAX_VECTORS = 6               # taller blocks leave too few columns to amortize A's loads


# ---------------------------------------------------------------- blocking plan

@dataclass(frozen=True)
class Panel:
    """`blocks` register blocks stacked along M, each `vectors` vectors tall (the last one of
    each block holding only `tail_rows` rows if tail_rows > 0), swept along N in `n_blocks`
    blocks of `cols` columns plus one block of `n_tail` columns."""
    blocks: int
    vectors: int
    tail_rows: int
    cols: int
    n_blocks: int
    n_tail: int


def max_cols(isa: VectorIsa, vectors: int, masked: bool) -> int:
    """Most columns a block of `vectors` vectors can have with the registers left over."""
    spare = isa.registers - vectors                     # A's vectors
    if not (isa.name == "avx512" and vectors == 1):     # embedded broadcast needs no register
        spare -= 1
    if masked and isa.name == "avx2":                   # vmaskmovps mask vector
        spare -= 1
    return min(spare // vectors, MAX_COLS)


def _step_cycles(vectors: int, cols: int) -> float:
    """Cycles of one k-step: 2 FMAs and 2 loads per cycle, 4 cycles of FMA latency."""
    loads = vectors + cols
    return max(vectors * cols / 2, loads / 2, 4.0)


def _block_cycles(vectors: int, cols: int, k: int, br: int) -> float:
    """One register block: its k-steps plus updating C and per-batch pointer updates."""
    return br * (k * _step_cycles(vectors, cols) + 4) + vectors * cols + 12


def _sweep_n(isa, vectors, masked, n, k, br):
    """Best (cycles, cols, n_blocks, n_tail) for one block row of `vectors` vectors."""
    widest = max_cols(isa, vectors, masked)
    fewest = -(-n // widest)
    best = None
    for cols in range(-(-n // fewest), min(widest, n) + 1):
        n_blocks, n_tail = divmod(n, cols)
        cycles = n_blocks * _block_cycles(vectors, cols, k, br)
        if n_tail:
            cycles += _block_cycles(vectors, n_tail, k, br)
        if best is None or cycles < best[0]:
            best = (cycles, cols, n_blocks, n_tail)
    return best


def _row_partitions(total: int):
    """Ways to cut `total` vectors into blocks: greedy by a height, and evenly balanced."""
    seen = set()
    for height in range(1, min(MAX_VECTORS, total) + 1):
        full, rest = divmod(total, height)
        greedy = (height,) * full + ((rest,) if rest else ())
        count = -(-total // height)
        small, extra = divmod(total, count)
        balanced = (small + 1,) * extra + (small,) * (count - extra)
        for heights in (greedy, balanced):
            if heights not in seen:
                seen.add(heights)
                yield heights


def plan(m: int, n: int, k: int, br: int, isa: VectorIsa) -> tuple[Panel, ...]:
    """The cheapest blocking of an M×N C by the cost model, as panels in row order."""
    vectors_total = -(-m // isa.lanes)
    tail_rows = m % isa.lanes
    sweeps = {}
    best = None
    for heights in _row_partitions(vectors_total):
        groups = []                      # [height, count, masked], consecutive equal heights
        for height in heights:
            if groups and groups[-1][0] == height:
                groups[-1][1] += 1
            else:
                groups.append([height, 1, False])
        if tail_rows:                    # the last block carries the masked rows
            height, count, _ = groups[-1]
            groups[-1:] = ([[height, count - 1, False]] if count > 1 else []) + [[height, 1, True]]
        cycles, panels = 0.0, []
        for height, count, masked in groups:
            key = (height, masked)
            if key not in sweeps:
                sweeps[key] = _sweep_n(isa, height, masked, n, k, br)
            sweep_cycles, cols, n_blocks, n_tail = sweeps[key]
            cycles += count * sweep_cycles
            panels.append(Panel(count, height, tail_rows if masked else 0, cols, n_blocks, n_tail))
        if best is None or cycles < best[0]:
            best = (cycles, tuple(panels))
    return best[1]


# ---------------------------------------------------------------- code generation

# general registers: arguments as they arrive, then a pool for the other roles
A_PTR, B_BASE, C_PTR, LDA, LDB, LDC = RDI, RSI, RDX, RCX, R8, R9
POOL = (RAX, R10, R11, RBX, RBP, R12, R13, R14, R15)

# red-zone slots below rsp (a leaf function may use 128 bytes there without moving rsp)
A_ROW, C_ROW, B_ORIGIN, B_COL, N_COUNT, M_COUNT = (Mem(RSP, disp=-8 * i) for i in range(1, 7))
MASK_SLOT = Mem(RSP, disp=-96)   # AVX2 mask vector, 32 bytes


class _Generator:
    def __init__(self, isa: VectorIsa, m: int, n: int, k: int, br: int):
        self.isa, self.k, self.br = isa, k, br
        self.panels = plan(m, n, k, br, isa)
        self.asm = Assembler()
        widest = max(max(p.cols, p.n_tail) for p in self.panels)
        pool = list(POOL)
        self.counter = pool.pop(0)                 # K counter, scratch between blocks
        self.ldb3 = pool.pop(0) if widest > 3 else None
        self.batch = (pool.pop(0), pool.pop(0), pool.pop(0)) if br > 1 else None
        bases = -(-widest // COLUMNS_PER_BASE)
        self.bases = (B_BASE,) + tuple(pool[:bases - 1])

    # -- whole kernel

    def generate(self) -> bytes:
        asm = self.asm
        used = [self.counter, *self.bases, *(self.batch or ())]
        if self.ldb3 is not None:
            used.append(self.ldb3)
        asm.prologue(used)
        asm(e.shl_ri(LDA, 2), e.shl_ri(LDB, 2), e.shl_ri(LDC, 2))
        if self.ldb3 is not None:
            asm(e.lea(self.ldb3, Mem(LDB, LDB, 2)))
        if self.batch is not None:
            _, a_step, b_step = self.batch
            # the K loop leaves A moved by K*ld_a and the B bases by K elements
            asm.stack_arg(6, a_step)
            asm.stack_arg(7, b_step)
            asm(e.shl_ri(a_step, 2), e.shl_ri(b_step, 2),
                e.imul_rri(self.counter, LDA, self.k), e.sub_rr(a_step, self.counter),
                e.sub_ri(b_step, 4 * self.k))
        asm(e.mov_mr(A_ROW, A_PTR), e.mov_mr(C_ROW, C_PTR), e.mov_mr(B_ORIGIN, B_BASE))
        self._set_tail_mask()
        for panel in self.panels:
            self._panel(panel)
        asm.epilogue()
        return asm.finish()

    def _set_tail_mask(self):
        tail = next((p.tail_rows for p in self.panels if p.tail_rows), 0)
        if not tail:
            return
        if self.isa.name == "avx512":
            self.asm(e.mov_ri(self.counter, (1 << tail) - 1), e.kmovw_kr(1, self.counter))
            return
        lanes = [0xFFFFFFFF if i < tail else 0 for i in range(self.isa.lanes)]
        for pair in range(self.isa.lanes // 2):
            qword = lanes[2 * pair] | lanes[2 * pair + 1] << 32
            self.asm(e.mov_ri(self.counter, qword),
                     e.mov_mr(MASK_SLOT.offset(8 * pair), self.counter))

    # -- loops over blocks

    def _counted_loop(self, slot: Mem, count: int, body):
        """body() `count` times, the trip count kept in a red-zone slot."""
        asm, scratch = self.asm, self.counter
        if count == 1:
            body()
            return
        asm(e.mov_ri(scratch, count), e.mov_mr(slot, scratch))
        top = asm.label()
        asm.bind(top)
        body()
        asm(e.mov_rm(scratch, slot), e.sub_ri(scratch, 1), e.mov_mr(slot, scratch))
        asm.jcc("ne", top)

    def _panel(self, panel: Panel):
        asm, scratch = self.asm, self.counter
        row_bytes = panel.vectors * self.isa.vector_bytes

        def block_row():
            asm(e.mov_rm(scratch, B_ORIGIN), e.mov_mr(B_COL, scratch), e.mov_rm(C_PTR, C_ROW))
            has_next = panel.n_blocks > 1 or panel.n_tail

            def full_block():
                self._block(panel.vectors, panel.cols, panel.tail_rows)
                if has_next:
                    self._next_columns(panel.cols)

            if panel.n_blocks:
                self._counted_loop(N_COUNT, panel.n_blocks, full_block)
            if panel.n_tail:
                self._block(panel.vectors, panel.n_tail, panel.tail_rows)
            for slot in (A_ROW, C_ROW):
                asm(e.mov_rm(scratch, slot), e.add_ri(scratch, row_bytes), e.mov_mr(slot, scratch))

        self._counted_loop(M_COUNT, panel.blocks, block_row)

    def _next_columns(self, cols: int):
        """Move B_COL and C_PTR `cols` columns on (A_PTR is free here: it is a scratch)."""
        scratch = self.counter
        self.asm(e.mov_rm(A_PTR, B_COL), e.imul_rri(scratch, LDB, cols), e.add_rr(A_PTR, scratch),
                 e.mov_mr(B_COL, A_PTR), e.imul_rri(scratch, LDC, cols), e.add_rr(C_PTR, scratch))

    # -- one register block

    def _block(self, vectors: int, cols: int, tail_rows: int):
        asm, isa = self.asm, self.isa
        regs = _VectorRegisters(isa, vectors, cols, tail_rows)
        asm(e.mov_rm(A_PTR, A_ROW), e.mov_rm(B_BASE, B_COL))
        bases = self.bases[:-(-cols // COLUMNS_PER_BASE)]
        for previous, base in zip(bases, bases[1:]):
            asm(e.lea(base, Mem(previous, LDB, 4)), e.add_rr(base, LDB))
        if regs.mask_vector is not None:
            asm(e.vmovups_load(regs.mask_vector, MASK_SLOT, isa.width))
        asm(_zero(acc) for accs in regs.acc for acc in accs)
        if self.batch is None:
            self._k_loop(regs, bases)
        else:
            batch_counter, a_step, b_step = self.batch
            asm(e.mov_ri(batch_counter, self.br))
            top = asm.label()
            asm.align(16)
            asm.bind(top)
            self._k_loop(regs, bases)
            asm(e.add_rr(A_PTR, a_step), *(e.add_rr(base, b_step) for base in bases),
                e.dec(batch_counter))
            asm.jcc("ne", top)
        self._update_c(regs)

    def _update_c(self, regs):
        """C += the accumulators. They start at zero rather than at C so that no FMA chain
        waits for C: the next block's FMAs overlap this block's update (32x32x32: +8% of
        peak). Every load of C comes before the first store: a load overlapping the span of
        an earlier masked store (the next column, when ld_c < 16) would wait for it."""
        walker, step = self.counter, self.isa.vector_bytes
        next_column = e.add_rr(walker, LDC)
        rows = [Mem(walker, disp=i * step) for i in range(regs.vectors)]
        code = []
        for move in (regs.add, regs.store):
            code.append(e.mov_rr(walker, C_PTR))
            for j, accs in enumerate(regs.acc):
                if j:
                    code.append(next_column)
                code.extend(move(acc, mem, i) for i, (acc, mem) in enumerate(zip(accs, rows)))
        self.asm(code)

    def _k_loop(self, regs, bases):
        """K k-steps; measured: unrolling K gains nothing on Zen 4/5, so the loop body is one k."""
        asm = self.asm
        step = self._k_step(regs, bases) + b"".join(e.add_ri(base, 4) for base in bases)
        if self.k == 1:
            asm(step)
            return
        asm(e.mov_ri(self.counter, self.k))
        top = asm.label()
        asm.align(16)
        asm.bind(top)
        asm(step, e.dec(self.counter))
        asm.jcc("ne", top)

    def _k_step(self, regs, bases) -> bytes:
        """One k: load A's column and move A on, then every column's FMAs."""
        width, step = self.isa.width, self.isa.vector_bytes
        code = [regs.load(a_reg, Mem(A_PTR, disp=i * step), i) for i, a_reg in enumerate(regs.a)]
        code.append(e.add_rr(A_PTR, LDA))
        for j in range(regs.cols):
            b_mem = self._b_address(bases, j)
            accs = regs.acc[j]
            if regs.broadcast is None:
                code.append(_fma(accs[0], regs.a[0], b_mem, width, True))
            else:
                code.append(e.vbroadcastss(regs.broadcast, b_mem, width))
                code.extend(_fma(acc, a_reg, regs.broadcast, width, False)
                            for acc, a_reg in zip(accs, regs.a))
        return b"".join(code)

    def _b_address(self, bases, j: int) -> Mem:
        base, offset = bases[j // COLUMNS_PER_BASE], j % COLUMNS_PER_BASE
        if offset == 0:
            return Mem(base)
        if offset == 3:
            return Mem(base, self.ldb3)
        return Mem(base, LDB, offset)


class _VectorRegisters:
    """Vector register roles of one block: accumulators from register 0 up, A's vectors, the
    broadcast B element and the AVX2 mask vector from the top down."""

    def __init__(self, isa: VectorIsa, vectors: int, cols: int, tail_rows: int):
        self.width = isa.width
        self.vectors, self.cols, self.tail_rows = vectors, cols, tail_rows
        self.acc = [list(range(j * vectors, (j + 1) * vectors)) for j in range(cols)]
        top = isa.registers - 1
        self.a = list(range(top, top - vectors, -1))
        top -= vectors
        self.broadcast = None
        if not (isa.name == "avx512" and vectors == 1):
            self.broadcast, top = top, top - 1
        self.mask_vector = None
        if tail_rows and isa.name == "avx2":
            self.mask_vector, top = top, top - 1
        assert top >= vectors * cols - 1, "block does not fit the register file"

    def _masked(self, i: int) -> bool:
        return self.tail_rows and i == self.vectors - 1

    def load(self, dst: int, mem: Mem, i: int) -> bytes:
        """Vector i of a block column: rows past M read as 0 without touching memory."""
        return _load(dst, mem, self.width, self._masked(i), self.mask_vector)

    def add(self, acc: int, mem: Mem, i: int) -> bytes:
        """acc += vector i of a block column (A's registers are free to help once K is done)."""
        return _add(acc, mem, self.width, self._masked(i), self.mask_vector, self.a[0])

    def store(self, src: int, mem: Mem, i: int) -> bytes:
        """Vector i of a block column: rows past M are not written."""
        return _store(src, mem, self.width, self._masked(i), self.mask_vector)


# the same few hundred instructions recur in every kernel: encode each once per process

@lru_cache(maxsize=8192)
def _fma(acc: int, a: int, b, width: int, bcst: bool) -> bytes:
    return e.vfmadd231ps(acc, a, b, width, bcst=bcst)


@lru_cache(maxsize=8192)
def _load(dst: int, mem: Mem, width: int, masked: bool, mask_vector) -> bytes:
    if not masked:
        return e.vmovups_load(dst, mem, width)
    if mask_vector is not None:
        return e.vmaskmovps_load(dst, mask_vector, mem, width)
    return e.vmovups_load(dst, mem, width, mask=1, zeroing=True)


@lru_cache(maxsize=8192)
def _add(acc: int, mem: Mem, width: int, masked: bool, mask_vector, spare: int) -> bytes:
    if not masked:
        return e.vaddps(acc, acc, mem, width)
    if mask_vector is not None:
        return e.vmaskmovps_load(spare, mask_vector, mem, width) + e.vaddps(acc, acc, spare, width)
    return e.vaddps(acc, acc, mem, width, mask=1)     # masked lanes are not read


@lru_cache(maxsize=8192)
def _zero(reg: int) -> bytes:
    """reg := 0 in all lanes (a 128-bit write clears the rest of the register)."""
    return e.vxorps(reg, reg, reg, 128)


@lru_cache(maxsize=8192)
def _store(src: int, mem: Mem, width: int, masked: bool, mask_vector) -> bytes:
    if not masked:
        return e.vmovups_store(mem, src, width)
    if mask_vector is not None:
        return e.vmaskmovps_store(mem, mask_vector, src, width)
    return e.vmovups_store(mem, src, width, mask=1)


def generate_brgemm(m: int, n: int, k: int, br_size: int, *, variant: str) -> bytes:
    """Machine code of brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) for
    `variant` ("avx512" or "avx2"): C (m×n) += sum over br_size of A_i (m×k) B_i (k×n),
    column-major FP32."""
    return _Generator(VARIANTS[variant], m, n, k, br_size).generate()
