"""x86-64 BRGEMM of complex64 and complex128: C += sum_i A_i B_i, interleaved (numpy's layout,
real and imaginary parts adjacent), column-major, AVX-512 or AVX2/FMA.

The same ABI as the real kernel: brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b),
leading dimensions and batch strides in complex elements; M, N, K and the batch size are
compile-time.

Each k-step of a register block loads its vectors of A's column k (a vector holds lanes/2
complex numbers) and, per column j of B, brings re(B[k, j]) and im(B[k, j]) to every lane:
two sets of accumulators sum A * re(b) and A * im(b) separately. After K they are combined
once: C += acc_re + swap_pairs(acc_im) * (-1, +1) (vshufps/vshufpd swap each pair,
vfmaddsub213 with a vector of ones subtracts in the real lanes and adds in the imaginary
ones). So the real part of C gets sum(re a * re b) - sum(im a * im b) and the imaginary part
sum(im a * re b) + sum(re a * im b), each sum over the k-steps and batch entries of a chunk
(below); numpy adds whole complex products one by one. The terms are the same, grouped
otherwise: the results differ in rounding, in the sign of a zero (each sum starts at +0),
and where a partial sum overflows that numpy's grouping keeps finite (or the reverse). The
infinities are the same terms either way, so inf and NaN land where numpy puts them, from
the same textbook products (inf * (0+1j) is nan+infj in both; docs/brgemm.md).

Blocks: `vectors` column vectors by `cols` columns, the most columns the register file holds
(two accumulators a vector and column, the vectors of A, two broadcasts); M as rows of
blocks of the tallest height and one lower row for what is left, N as blocks and one
narrower (or two of about equal width where one would hold too few accumulators). Rows past
M in the last vector: AVX-512 masks them (k1), AVX2 moves only the tail's floats. A row whose
A panels outgrow L1 runs its batch (or, AVX2, its K) in chunks, C added back between them;
an AVX2 row whose ld_a is a multiple of the core's conflict pitch reads a copy of its A
panels (decided at run time).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from einjit.backends import LINE_BYTES, Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64 import instructions as ins
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.blocking import COLUMNS_PER_BASE, PACK_FRAME_BYTES, chunk_budget
from einjit.backends.x86_64.encode import R10, R11, R12, R13, R14, R15, RAX, RBP, RBX, RSP, Mem
from einjit.backends.x86_64.frame import (
    A_PTR,
    A_ROW,
    B_BASE,
    B_COL,
    B_ORIGIN,
    C_PTR,
    C_ROW,
    CHUNK_COUNT,
    LDA,
    LDB,
    LDC,
)
from einjit.backends.x86_64.precision import FLOAT32, FLOAT64, Precision
from einjit.backends.x86_64.tuning import rules
from einjit.errors import KernelParameterError

# the real type of each complex dtype: a complex element is two of them
PARTS = {"complex64": FLOAT32, "complex128": FLOAT64}
ONE_BITS = {"complex64": 0x3F80_0000, "complex128": 0x3FF0_0000_0000_0000}
# vshufps/vshufpd immediates that swap the two parts of every complex lane
SWAP_PAIRS = {"complex64": 0xB1, "complex128": 0x55}

# the tallest block (vectors) per register file: its columns then fill the rest
MAX_VECTORS = {32: 4, 16: 2}
MAX_COLUMNS = 3 * COLUMNS_PER_BASE          # three bases of B's columns
# independent accumulators a block needs to keep two FMA pipes of latency 4 busy
MIN_CHAINS = 8
# the frame: A_ROW, ld_a and a_step saved while a row reads its copy of A, then the copy
COPY_OFFSET = 24

COUNTER, LDB3, BATCH, A_STEP, B_STEP = RAX, R10, R11, RBX, RBP
EXTRA_BASES = (R12, R13)
ROW_COUNT, COLUMN_COUNT = R14, R15


def is_complex(dtype: str) -> bool:
    return dtype in PARTS


@dataclass(frozen=True)
class Block:
    """A register block: `vectors` vectors of rows (the last holding `tail` complex elements,
    0: whole) by `cols` columns."""
    vectors: int
    cols: int
    tail: int = 0


def columns_for(vectors: int, registers: int) -> int:
    """The most columns a block of `vectors` vectors holds: 2 accumulators a vector and column,
    the vectors of A and two broadcasts of B (none with one vector on AVX-512: the FMA
    broadcasts B from memory)."""
    broadcasts = 0 if vectors == 1 and registers == 32 else 2
    return min(MAX_COLUMNS, (registers - vectors - broadcasts) // (2 * vectors))


def plan(m: int, n: int, target: Target, dtype: str) -> list[tuple[int, Block, list]]:
    """The row bands: (blocks, block, column runs), each run (blocks, cols)."""
    per_vector = target.lanes(PARTS[dtype].bytes) // 2
    whole, tail = divmod(m, per_vector)
    tallest = MAX_VECTORS[target.registers]
    heights = [(whole // tallest, tallest, 0)] if whole >= tallest else []
    rest = whole % tallest if whole >= tallest else whole
    if rest or tail:
        heights.append((1, rest + (1 if tail else 0), tail))
    bands = []
    for blocks, vectors, tail_rows in heights:
        if not blocks:
            continue
        cols = min(n, columns_for(vectors, target.registers))
        bands.append((blocks, Block(vectors, cols, tail_rows), column_runs(n, cols, vectors)))
    return bands


def column_runs(n: int, cols: int, vectors: int) -> list[tuple[int, int]]:
    """N as runs of (blocks, columns): blocks of `cols` and one narrower for what is left,
    unless that one would hold fewer than MIN_CHAINS accumulators: then the last wide block
    and it split into two of about equal width."""
    whole, left = divmod(n, cols)
    if not left:
        return [(whole, cols)]
    if 2 * vectors * left >= MIN_CHAINS or not whole:
        return [(whole, cols), (1, left)]
    wide, narrow = cols + left - (cols + left) // 2, (cols + left) // 2
    runs = [(whole - 1, cols)] if whole > 1 else []
    return runs + ([(2, wide)] if wide == narrow else [(1, wide), (1, narrow)])


def batch_chunks(target: Target, block: Block, runs: list, k: int, br: int,
                 element: int) -> int:
    """How many equal chunks of batch entries a row of blocks runs (a divisor of br; 1: the
    whole batch at once): a row of two column blocks or more reads its A panel of every
    entry once per column block, from L1 only where the chunk's panels and B columns fit
    the chunk budget (blocking.chunk_budget); the fewest chunks that fit, one entry at
    least."""
    if br == 1 or sum(blocks for blocks, _ in runs) < 2:
        return 1
    entry_bytes = k * (block.vectors * target.vector_bits // 8 + block.cols * element)
    entries = max(1, chunk_budget(target) // entry_bytes)
    return next(chunks for chunks in range(1, br + 1) if br % chunks == 0
                and br // chunks <= entries)


def k_chunks(target: Target, block: Block, runs: list, k: int, br: int, element: int) -> int:
    """How many equal chunks of K a row of blocks runs without a batch (a divisor of K; 1: K
    at once): where its A panel over K outgrows the chunk budget (as in batch_chunks), the
    fewest whose panels and B columns fit it, of CoreRules.min_k_chunk steps or more; 1
    where no divisor does. The 16-register blocks only (the 32-register ones kept their
    speed over long K)."""
    if br > 1 or target.registers != 16 or sum(blocks for blocks, _ in runs) < 2:
        return 1
    step_bytes = block.vectors * target.vector_bits // 8 + block.cols * element
    budget, shortest = chunk_budget(target), rules(target).min_k_chunk
    return next((chunks for chunks in range(1, k // shortest + 1)
                 if k % chunks == 0 and k // chunks * step_bytes <= budget), 1)


def packs_a(target: Target, block: Block, runs: list, entries: int, steps: int) -> bool:
    """Whether a row of blocks copies its A panels (of the `entries` batch entries a sweep
    runs) into the frame where ld_a is a multiple of the core's conflict pitch (decided at
    run time): the 16-register blocks only (the 32-register ones ran slower copying), whole
    vectors only (the copy reads no row past M), two column blocks or more, the copy within
    PACK_FRAME_BYTES."""
    return (target.registers == 16 and not block.tail and sum(blocks for blocks, _ in runs) >= 2
            and block.vectors * target.vector_bits // 8 * steps * entries <= PACK_FRAME_BYTES)


def complex_target(target: Target, m: int, dtype: str) -> Target:
    """The target the kernel is generated for: on a core that runs 512-bit operations in
    halves (Zen 4), an AVX-512 kernel with a masked zmm tail takes the AVX2 code (ymm, no
    masks) where that ran faster there: a tail that leaves the zmm at least half empty, or
    at most one whole zmm before the tail; otherwise `target`."""
    per_vector = target.lanes(PARTS[dtype].bytes) // 2
    tail = m % per_vector
    if (target.masks and target.micro.passes(target.vector_bits) > 1 and tail
            and (tail <= per_vector // 2 or m < 2 * per_vector)):
        return replace(target, vector_bits=256, registers=16, masks=0)
    return target


class _ComplexGenerator:
    def __init__(self, asm: Assembler, target: Target, m: int, n: int, k: int, br: int,
                 dtype: str, accumulate: bool) -> None:
        self.asm, self.target, self.m, self.n, self.k, self.br = asm, target, m, n, k, br
        self.dtype, self.accumulate = dtype, accumulate
        self.p: Precision = PARTS[dtype]
        self.element = 2 * self.p.bytes                      # bytes of a complex element
        self.width = target.vector_bits
        self.vector_bytes = self.width // 8
        self.bands = plan(m, n, target, dtype)
        # the batch entries and k-steps a row's sweep runs at once (batch_chunks, k_chunks)
        self.chunk = {block: (br // batch_chunks(target, block, runs, k, br, self.element),
                              k // k_chunks(target, block, runs, k, br, self.element))
                      for _, block, runs in self.bands}
        self.packs = {block: packs_a(target, block, runs, *self.chunk[block])
                      for _, block, runs in self.bands}
        copy_bytes = max((self._row_bytes(block) * steps * entries
                          for block, (entries, steps) in self.chunk.items()
                          if self.packs[block]), default=0)
        self.frame = COPY_OFFSET + LINE_BYTES + copy_bytes if copy_bytes else 0
        widest = max(block.cols for _, block, _ in self.bands)
        self.bases = (B_BASE, *EXTRA_BASES)[:-(-widest // COLUMNS_PER_BASE)]

    def emit(self) -> Label:
        asm, shift = self.asm, self.element.bit_length() - 1
        entry = asm.entry("brgemm")
        used = [COUNTER, LDB3, ROW_COUNT, COLUMN_COUNT, *self.bases[1:]]
        if self.br > 1:
            used += [BATCH, A_STEP, B_STEP]
        asm.prologue(used)
        asm(enc.shl_ri(LDA, shift), enc.shl_ri(LDB, shift), enc.shl_ri(LDC, shift),
            enc.lea(LDB3, Mem(LDB, LDB, 2)))
        if self.br > 1:
            # the K loop leaves A moved by K*ld_a and B's bases by K elements
            asm.stack_arg(6, A_STEP)
            asm.stack_arg(7, B_STEP)
            asm(enc.shl_ri(A_STEP, shift), enc.shl_ri(B_STEP, shift),
                enc.imul_rri(COUNTER, LDA, self.k), enc.sub_rr(A_STEP, COUNTER),
                enc.sub_ri(B_STEP, self.element * self.k))
        tail = next((block.tail for _, block, _ in self.bands if block.tail), 0)
        if tail and self.target.masks:
            floats = 2 * tail                                # lanes of the tail's parts
            asm(enc.mov_ri(COUNTER, (1 << floats) - 1), enc.kmovw_kr(1, COUNTER))
        if self.frame:            # below the arguments on the stack; the red zone moves along
            asm.reserve_stack(self.frame)
        asm(enc.mov_mr(A_ROW, A_PTR), enc.mov_mr(C_ROW, C_PTR), enc.mov_mr(B_ORIGIN, B_BASE))
        for blocks, block, runs in self.bands:
            with asm.counted_loop(ROW_COUNT, blocks, align=1):
                self._row(block, runs)
        if self.frame:
            asm(enc.add_ri(RSP, self.frame))
        asm.epilogue()
        return entry

    def _row(self, block: Block, runs: list) -> None:
        """One row of blocks along N, the batch or K in chunks (see batch_chunks, k_chunks):
        each chunk sweeps the row, the first ends as the kernel does (adding C or setting
        it), the others add to what it stored. Then A_ROW and C_ROW a block's height on."""
        asm = self.asm
        entries, steps = self.chunk[block]
        chunks = self.br // entries * (self.k // steps)
        move = self._move_batch if self.br > 1 else self._move_k
        unit = entries if self.br > 1 else steps
        self._chunk(block, runs, entries, steps, self.accumulate)
        if chunks > 1:
            move(unit)
            with asm.counted_loop(CHUNK_COUNT, chunks - 1, align=1, scratch=A_PTR):
                self._chunk(block, runs, entries, steps, True)
                move(unit)
            move(-unit * chunks)
        height = self._row_bytes(block)
        for slot in (A_ROW, C_ROW):
            asm(enc.mov_rm(COUNTER, slot), enc.add_ri(COUNTER, height), enc.mov_mr(slot, COUNTER))

    def _sweep(self, block: Block, runs: list, entries: int, steps: int,
               accumulate: bool) -> None:
        """The row's blocks along N over `entries` batch entries of `steps` k-steps from A_ROW
        and B_ORIGIN."""
        asm = self.asm
        asm(enc.mov_rm(COUNTER, B_ORIGIN), enc.mov_mr(B_COL, COUNTER),
            enc.mov_rm(C_PTR, C_ROW))
        for blocks, cols in runs:
            shape = Block(block.vectors, cols, block.tail)
            with asm.counted_loop(COLUMN_COUNT, blocks, align=1):
                self._block(shape, entries, steps, accumulate)
                asm(enc.mov_rm(A_PTR, B_COL), enc.imul_rri(COUNTER, LDB, cols),
                    enc.add_rr(A_PTR, COUNTER), enc.mov_mr(B_COL, A_PTR),
                    enc.imul_rri(COUNTER, LDC, cols), enc.add_rr(C_PTR, COUNTER))

    def _row_bytes(self, block: Block) -> int:
        return block.vectors * self.vector_bytes

    def _chunk(self, block: Block, runs: list, entries: int, steps: int,
               accumulate: bool) -> None:
        """The row's sweep over `entries` batch entries of `steps` k-steps; where the row
        packs A (packs_a) and ld_a is a multiple of the core's conflict pitch at run time
        (A's columns then share a few L1 sets and leave L1 between column blocks), from a
        copy of the entries' A panels in the frame, one after the other, the pitch the row's
        height (A_ROW, LDA and a_step point at it meanwhile); the blocks read the same
        elements, the sums are the same bits."""
        if not self.packs[block]:
            self._sweep(block, runs, entries, steps, accumulate)
            return
        asm, p, width = self.asm, self.p, self.width
        row_bytes = self._row_bytes(block)
        saved_a_row, saved_lda, saved_a_step = (Mem(RSP, disp=8 * i) for i in range(3))
        direct = asm.label()
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_mr(saved_a_row, A_PTR), enc.mov_mr(saved_lda, LDA),
            enc.mov_rr(COUNTER, LDA),
            enc.and_ri(COUNTER, self.target.micro.conflict_pitch_bytes - 1))
        if self.br > 1:
            asm(enc.mov_mr(saved_a_step, A_STEP))
        asm.jcc("ne", direct)
        copy = B_BASE                         # free until the first block loads it
        asm(enc.lea(copy, Mem(RSP, disp=COPY_OFFSET + LINE_BYTES - 1)),
            enc.and_ri(copy, -LINE_BYTES), enc.mov_mr(A_ROW, copy))
        with asm.counted_loop(BATCH, entries):
            with asm.counted_loop(COUNTER, steps):
                asm(p.load(v, Mem(A_PTR, disp=v * self.vector_bytes), width)
                    for v in range(block.vectors))
                asm(p.store(Mem(copy, disp=v * self.vector_bytes), v, width)
                    for v in range(block.vectors))
                asm(enc.add_rr(A_PTR, LDA), enc.add_ri(copy, row_bytes))
            if self.br > 1:
                asm(enc.add_rr(A_PTR, A_STEP))
        asm(enc.mov_ri(LDA, row_bytes))
        if self.br > 1:                       # the copied entries follow each other
            asm(enc.xor_rr(A_STEP, A_STEP))
        asm.bind(direct)
        self._sweep(block, runs, entries, steps, accumulate)
        asm(enc.mov_rm(LDA, saved_lda), enc.mov_rm(A_PTR, saved_a_row),
            enc.mov_mr(A_ROW, A_PTR))
        if self.br > 1:
            asm(enc.mov_rm(A_STEP, saved_a_step))

    def _move_k(self, steps: int) -> None:
        """A_ROW and B_ORIGIN `steps` k-steps on (back if negative). A_PTR and the K counter
        are free here."""
        self.asm(enc.imul_rri(COUNTER, LDA, steps), enc.mov_rm(A_PTR, A_ROW),
                 enc.add_rr(A_PTR, COUNTER), enc.mov_mr(A_ROW, A_PTR),
                 enc.mov_rm(A_PTR, B_ORIGIN), enc.add_ri(A_PTR, steps * self.element),
                 enc.mov_mr(B_ORIGIN, A_PTR))

    def _move_batch(self, entries: int) -> None:
        """A_ROW and B_ORIGIN `entries` batch entries on (back if negative): a stride is
        what the K loop moves plus a_step (b_step). A_PTR and the K counter are free here."""
        asm = self.asm
        asm(enc.imul_rri(COUNTER, LDA, self.k), enc.add_rr(COUNTER, A_STEP),
            enc.imul_rri(COUNTER, COUNTER, entries), enc.mov_rm(A_PTR, A_ROW),
            enc.add_rr(A_PTR, COUNTER), enc.mov_mr(A_ROW, A_PTR),
            enc.mov_rr(COUNTER, B_STEP), enc.add_ri(COUNTER, self.k * self.element),
            enc.imul_rri(COUNTER, COUNTER, entries), enc.mov_rm(A_PTR, B_ORIGIN),
            enc.add_rr(A_PTR, COUNTER), enc.mov_mr(B_ORIGIN, A_PTR))

    # -- one register block

    def _registers(self, block: Block):
        """(accumulators of re(b) [i][j], of im(b) [i][j], A's vectors, the two broadcasts)."""
        count = block.vectors * block.cols
        re = [[i * block.cols + j for j in range(block.cols)] for i in range(block.vectors)]
        im = [[count + i * block.cols + j for j in range(block.cols)]
              for i in range(block.vectors)]
        a = list(range(2 * count, 2 * count + block.vectors))
        broadcasts = (2 * count + block.vectors, 2 * count + block.vectors + 1)
        return re, im, a, broadcasts

    def _block(self, block: Block, entries: int, steps: int, accumulate: bool) -> None:
        asm = self.asm
        re, im, a, broadcasts = self._registers(block)
        bases = self.bases[:-(-block.cols // COLUMNS_PER_BASE)]
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_rm(B_BASE, B_COL))
        for previous, base in zip(bases, bases[1:]):
            asm(enc.lea(base, Mem(previous, LDB, 4)), enc.add_rr(base, LDB))
        asm(ins.zero(acc) for row in re + im for acc in row)
        step = self._k_step(block, re, im, a, broadcasts, bases)
        if self.br == 1:
            with asm.counted_loop(COUNTER, steps):
                asm(step)
        else:
            with asm.counted_loop(BATCH, entries):
                with asm.counted_loop(COUNTER, self.k):
                    asm(step)
                asm(enc.add_rr(A_PTR, A_STEP), *(enc.add_rr(base, B_STEP) for base in bases))
        self._update(block, re, im, a[0], broadcasts, accumulate)

    def _k_step(self, block: Block, re, im, a, broadcasts, bases) -> bytes:
        p, width = self.p, self.width
        code = [self._load_a(a_reg, i, block, broadcasts[0]) for i, a_reg in enumerate(a)]
        code.append(enc.add_rr(A_PTR, LDA))
        embedded = block.vectors == 1 and self.target.registers == 32
        for j in range(block.cols):
            real, imag = self._b_address(bases, j), self._b_address(bases, j, p.bytes)
            if embedded:
                code += [p.fmadd231(re[0][j], a[0], real, width, bcst=True),
                         p.fmadd231(im[0][j], a[0], imag, width, bcst=True)]
                continue
            b_re, b_im = broadcasts
            code += [p.broadcast(b_re, real, width), p.broadcast(b_im, imag, width)]
            code += [p.fmadd231(re[i][j], a_reg, b_re, width) for i, a_reg in enumerate(a)]
            code += [p.fmadd231(im[i][j], a_reg, b_im, width) for i, a_reg in enumerate(a)]
        code += [enc.add_ri(base, self.element) for base in bases]
        return b"".join(code)

    def _tail_floats(self, block: Block, i: int) -> int:
        """The floats (dword lanes) vector i of the block moves: all, or the tail's."""
        if block.tail and i == block.vectors - 1:
            return 2 * block.tail * self.p.bytes // 4
        return 0

    def _load_a(self, dst: int, i: int, block: Block, spare: int) -> bytes:
        mem, floats = Mem(A_PTR, disp=i * self.vector_bytes), self._tail_floats(block, i)
        if not floats:
            return self.p.load(dst, mem, self.width)
        if self.target.masks:
            return self.p.load(dst, mem, self.width, mask=1, zeroing=True)
        return ins.load_column(dst, mem, floats, spare)

    def _update(self, block: Block, re, im, ones: int, spares: tuple[int, int],
                accumulate: bool) -> None:
        """C += acc_re + swap_pairs(acc_im) * (-1, +1), column by column (C := without
        accumulate); the K counter walks C's columns. spares: AVX2's for a tail of C."""
        asm, p, width = self.asm, self.p, self.width
        asm(enc.mov_ri(COUNTER, ONE_BITS[self.dtype]), p.move_to_xmm(ones, COUNTER),
            p.broadcast(ones, ones, width), enc.mov_rr(COUNTER, C_PTR))
        swap = enc.vshufps if self.p is FLOAT32 else enc.vshufpd
        fmaddsub = enc.vfmaddsub213ps if self.p is FLOAT32 else enc.vfmaddsub213pd
        for j in range(block.cols):
            if j:
                asm(enc.add_rr(COUNTER, LDC))
            for i in range(block.vectors):
                acc, mem = re[i][j], Mem(COUNTER, disp=i * self.vector_bytes)
                asm(swap(im[i][j], im[i][j], im[i][j], SWAP_PAIRS[self.dtype], width),
                    fmaddsub(acc, ones, im[i][j], width))
                floats = self._tail_floats(block, i)
                asm(self._add_c(acc, mem, floats, spares) if accumulate else b"",
                    self._store_c(acc, mem, floats, spares))

    def _add_c(self, acc: int, mem: Mem, floats: int, spares: tuple[int, int]) -> bytes:
        if not floats:
            return self.p.add(acc, acc, mem, self.width)
        if self.target.masks:
            return self.p.add(acc, acc, mem, self.width, mask=1)   # masked lanes not read
        # the tail's floats of C, nothing past them read (lanes past them: junk, never stored)
        return (ins.load_column(spares[0], mem, floats, spares[1])
                + self.p.add(acc, acc, spares[0], self.width))

    def _store_c(self, acc: int, mem: Mem, floats: int, spares: tuple[int, int]) -> bytes:
        if not floats:
            return self.p.store(mem, acc, self.width)
        if self.target.masks:
            return self.p.store(mem, acc, self.width, mask=1)
        return ins.store_column(mem, acc, floats, spares[0])

    def _b_address(self, bases, j: int, disp: int = 0) -> Mem:
        """re(B[k, j]) (disp 0) or its imaginary part, j columns past the first base."""
        base, offset = bases[j // COLUMNS_PER_BASE], j % COLUMNS_PER_BASE
        if offset == 0:
            return Mem(base, disp=disp)
        if offset == 3:
            return Mem(base, LDB3, disp=disp)
        return Mem(base, LDB, offset, disp)


def emit_complex_brgemm(asm: Assembler, target: Target, m: int, n: int, k: int, br_size: int,
                        dtype: str, accumulate: bool = True, stream: bool = False) -> Label:
    """Emit brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) for complex `dtype`
    at the current position of `asm` and return its entry. A leaf function: its loop state
    is in the red zone. accumulate=False: C := the sum, C never read."""
    if not is_complex(dtype):
        raise KernelParameterError(f"complex brgemm: dtype={dtype!r} is not complex; expected "
                                   f"one of {tuple(PARTS)}")
    if stream:
        raise KernelParameterError(f"brgemm stream=True is not supported for dtype {dtype}")
    return _ComplexGenerator(asm, complex_target(target, m, dtype), m, n, k, br_size, dtype,
                             accumulate).emit()
