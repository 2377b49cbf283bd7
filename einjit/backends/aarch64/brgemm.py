"""AArch64 NEON BRGEMM generator: C += sum_i A_i B_i, FP32 or FP64, column-major.

Kernel ABI: brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) in x0..x7, leading
dimensions and batch strides in elements. M, N, K and the batch size are baked into the code.

Blocking: C is tiled into blocks of four q-registers of rows by 6 columns: 16x6 in FP32 (four
lanes per register), 8x6 in FP64 (two). For each k, a column of the block's A rows sits in four
q-registers and each of the six B elements is loaded into lane 0 of a register and used by
element, so a step is 24 FMLAs into 24 accumulators. The accumulators stay in registers for the
whole K loop and the whole batch loop: each C block is loaded once and stored once. A kernel
generated with accumulate=False sets C instead: the accumulators start at zero, C is only
stored (what C += gives on a zeroed C, bit for bit; the loop nests use it in place of a zero
first touch).

Rows left over (M % 16, or M % 8 in FP64) are covered by q-registers for full vectors, then a
d-register for two FP32 rows, so no load or store touches a row past M. The last single
rows (FP32: M % 4 == 1 or 2, or M = 3, two rows with more than 3 columns only; FP64: M odd)
are computed along k instead (_DotMicrokernel): a register per C element holds partial sums
of consecutive k, B is read as q-registers of k and the row's A elements are zipped
together, so no FMLA computes mostly unused lanes.
Three FP32 rows after a full vector are one q-register ending at the last row and reaching back
over the piece before it (ldur/stur): both pieces load the same C, run the same FMLAs and store
the same values in the rows they share. M = 16a + 3 runs as blocks of 15 and 4 rows, so that
every 4 rows cost one register per column. Columns left over
(N % 6) run the same microkernel with fewer columns. Loops over the row blocks, the column
blocks, the batch and K keep the code small at every size; K is unrolled K_UNROLL times, with B
read at immediate offsets from one pointer per column. Blocks too small to hide the FMLA latency
with their own accumulators alternate between up to 16 zeroed copies over k (K unrolled to
cover them all) and sum them pairwise at the end; blocks of fewer than 4 FMLAs per k step walk
A with 2 or 4 pointers in turn, so that no chain of pointer adds paces the loop.

block_counts() and k_loop_code() expose the block plan and one block's K loop to the static
throughput benchmark (benchmarks/aarch64_mca.py).

complex64 and complex128 are complex_brgemm.py's kernel: these blocks and loops (emit_blocks,
_Microkernel, _DotMicrokernel) with a complex element and FCMLA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from einjit.backends import Target
from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.asm import Assembler, Label
from einjit.backends.aarch64.target import Element, check_dtype, check_sizes, check_target
from einjit.errors import KernelParameterError
from einjit.ops import COMPLEX_DTYPES

BLOCK_COLS = 6
K_UNROLL = 4
# Loop heads are not padded (align=4 is a no-op): the kernels' code stays as measured.
LOOP_ALIGN = 4

# General registers. x0..x7 hold the arguments; x1 and x2 advance to the current column block.
A_MATRIX, B_COLUMN_BLOCK, C_COLUMN_BLOCK = 0, 1, 2
LD_A, LD_B, LD_C, BR_STRIDE_A, BR_STRIDE_B = 3, 4, 5, 6, 7
N_COUNT, M_COUNT, BATCH_COUNT, K_COUNT = 8, 9, 10, 11
C_BLOCK, A_BLOCK, A_BATCH, B_BATCH = 12, 13, 14, 15
WALK = 16                              # the A column in the K loop, the C column on load/store
B_COLUMNS = (17, 19, 20, 21, 22, 23)   # one pointer per B column; x18 is the platform register
LD_B_BLOCK, LD_C_BLOCK = 24, 25        # BLOCK_COLS * ld_b, BLOCK_COLS * ld_c
A_WALKS = (WALK, 26, 27, 28)           # small blocks walk the A columns with several pointers

# Vector registers: A rows, B elements (rotating; renaming overlaps their reuse), accumulators
# from v16 up, reaching into the callee-saved v8..v15 only when a block needs more than 16.
A_REGS = (0, 1, 2, 3)
B_REGS = (4, 5, 6, 7)
ACC_REGS = tuple(range(16, 32)) + tuple(range(8, 16))

# A "piece" is the part of a C column held in one register: a full vector (q), 8 bytes (d) or
# 4 bytes (s) of rows; the piece's size in the tuples below is its row count.
PIECE_SIZE = {16: "q", 8: "d", 4: "s"}            # bytes -> register size letter
MAX_PIECES = len(A_REGS)
FMA_CHAINS = 16   # independent accumulators that hide FMLA latency (4 cycles x up to 4 pipes)


# The row group of a last single row (FP32: M % 4 == 1; FP64: M odd), computed along k by
# _DotMicrokernel: one register per C element instead of a q-register a quarter (half) used.
DOT = ("dot",)


def _rows(pieces: tuple) -> int:
    """The C rows of a row group."""
    return 1 if pieces == DOT else sum(pieces)


def _a_walks(fmlas_per_step: int) -> int:
    """How many pointers walk the A columns, taking k steps in turn.

    Each pointer's add is a dependency chain of one add per step it takes; a block with fewer
    than 4 FMLAs per k step would wait on a single chain rather than on the FMLA pipes.
    """
    return 4 if fmlas_per_step == 1 else 2 if fmlas_per_step < 4 else 1


def _block_rows(element: Element) -> int:
    return MAX_PIECES * element.lanes


def _arrangement(element: Element, rows: int) -> str:
    """The FMLA arrangement of a piece of `rows` rows (only its low `rows` lanes are stored)."""
    if element.lanes == 2:
        return "2d"
    return "4s" if rows >= 3 else "2s"


def _overlaps(rows: int, element: Element) -> bool:
    """Whether a piece of `rows` rows is a full vector ending at its last row, reaching back
    into the piece before it (FP32: 3 rows in one register rather than a d and an s piece)."""
    return rows == element.lanes - 1 > 1


def _row_pieces(rows: int, element: Element) -> tuple[int, ...]:
    """The register pieces covering `rows` (< one block) rows: full vectors first, then halves
    of the remaining lanes (FP32: a 2, then a 1), or one overlapping full vector for the last
    lanes - 1 rows when a full vector comes before it."""
    pieces = (element.lanes,) * (rows // element.lanes)
    rest = rows % element.lanes
    if pieces and _overlaps(rest, element):
        return pieces + (rest,)
    part = element.lanes // 2
    while part:
        if rest & part:
            pieces += (part,)
        part //= 2
    return pieces


def _row_groups(m: int, element: Element, ncols: int) -> list[tuple[int, tuple]]:
    """[(repeat count, pieces)] covering the M rows of a column block of `ncols` columns: full
    blocks, then the remainder's vector pieces (at most MAX_PIECES), then the last single rows
    as DOT (a last one; FP32 with ncols > 3, the rows of a d piece too)."""
    groups = []
    block_rows = _block_rows(element)
    full, rest = divmod(m, block_rows)
    if full and _overlaps(rest, element):
        # the last full block and the rest as block_rows - 1 and lanes rows: both whole
        # vectors (one overlapping), one register per column fewer than a d and an s piece
        if full > 1:
            groups.append((full - 1, (element.lanes,) * MAX_PIECES))
        return groups + [(1, _row_pieces(block_rows - 1, element)),
                         (1, (element.lanes,))]
    if full:
        groups.append((full, (element.lanes,) * MAX_PIECES))
    rest = _row_pieces(rest, element)
    singles = 0
    if rest[-1:] == (1,):
        singles, rest = 1, rest[:-1]
    if rest[-1:] == (2,) and element.lanes == 4 and ncols > 3:
        # two rows along k: 2 + 6 / ncols instructions of the vector pipes per column and 4 k
        # steps against 4 for the d piece
        singles, rest = singles + 2, rest[:-1]
    if rest:
        groups.append((1, rest))
    return groups + [(singles, DOT)] if singles else groups


def _transfer(single: Callable[..., int], pair: Callable[..., int], pieces: Sequence[int],
              regs: Sequence[int], base: int, element: Element,
              unscaled: Callable[..., int]) -> list[int]:
    """Words moving one column of pieces between `regs` and memory at [base]; adjacent
    q-pieces go as a pair, an overlapping piece (`unscaled`: ldur/stur) from lanes - rows
    rows back. An overlapping piece stores what the piece before it stored in those rows: both
    loaded the same C and ran the same FMLAs."""
    words = []
    offset = index = 0
    full = element.lanes
    while index < len(pieces):
        rows = pieces[index]
        if rows == full and index + 1 < len(pieces) and pieces[index + 1] == full:
            words.append(pair("q", regs[index], regs[index + 1], base, offset))
            offset, index = offset + 32, index + 2
            continue
        if _overlaps(rows, element):
            words.append(unscaled("q", regs[index], base, offset - element.size * (full - rows)))
        else:
            words.append(single(PIECE_SIZE[element.size * rows], regs[index], base, offset))
        offset, index = offset + element.size * rows, index + 1
    return words


def _accumulator_sets(per_set: int, k: int) -> int:
    """How many copies of the C block to accumulate into, alternating over k.

    One FMLA chain per accumulator is latency-bound when a block has few registers; extra sets
    (zeroed, summed into the C block after the batch loop) give at least FMA_CHAINS independent
    chains within the register budget.
    """
    sets = 1
    while sets < k and sets * per_set < FMA_CHAINS and (sets + 1) * per_set <= len(ACC_REGS):
        sets += 1
    return sets


def _pairwise_sums(count: int) -> list[tuple[int, int]]:
    """(total, addend) index pairs that sum `count` sets into set 0 as a tree (log2 depth)."""
    pairs = []
    while count > 1:
        half = (count + 1) // 2
        pairs += [(index, index + half) for index in range(count - half)]
        count = half
    return pairs


class _Microkernel:
    """Code for one C block shape: `pieces` per column times `ncols` columns, all K, all batches.

    Expects the block's C at C_BLOCK, its A rows (batch 0) at A_BLOCK, its B columns (batch 0)
    at B_COLUMN_BLOCK.
    """

    def __init__(self, pieces: tuple[int, ...], ncols: int, k: int, br_size: int,
                 element: Element, accumulate: bool = True):
        self.pieces, self.ncols, self.k, self.br_size = pieces, ncols, k, br_size
        self.element, self.accumulate = element, accumulate
        count = len(pieces)
        per_set = count * ncols
        self.sets = [[ACC_REGS[s * per_set + j * count:s * per_set + (j + 1) * count]
                      for j in range(ncols)]
                     for s in range(_accumulator_sets(per_set, k))]
        self.walks = A_WALKS[:_a_walks(per_set)]
        # K steps per loop pass: every set once at least, each A pointer as often
        self.unroll = max(K_UNROLL, len(self.sets))
        self.unroll += -self.unroll % len(self.walks)
        self.gprs = set(self.walks)
        self.vregs = (set(A_REGS[:count]) | set(B_REGS[:ncols])
                      | set(ACC_REGS[:per_set * len(self.sets)]))
        # The A loads of a K step depend only on its A pointer, the FMLAs on its set; B offsets
        # on the step.
        shift = len(self.walks).bit_length() - 1
        self.load_a = [_transfer(enc.ldr_v, enc.ldp_v, pieces, A_REGS, walk, element, enc.ldur_v)
                       + [enc.add_reg(walk, walk, LD_A, lsl=shift)] for walk in self.walks]
        self.fmlas = [[self._multiply_adds(column, B_REGS[j % len(B_REGS)])
                       for j, column in enumerate(accumulators)]
                      for accumulators in self.sets]

    def _multiply_adds(self, column: Sequence[int], b: int) -> list[int]:
        """One k step of one column: its accumulators += the A pieces times lane 0 of `b`."""
        return [enc.fmla_elem(acc, A_REGS[p], b, 0, self._arrangement(rows))
                for p, (acc, rows) in enumerate(zip(column, self.pieces))]

    def _arrangement(self, rows: int) -> str:
        """The arithmetic's arrangement on a piece of `rows` rows."""
        return _arrangement(self.element, rows)

    def emit(self, asm: Assembler) -> None:
        first = 0
        if self.accumulate:
            self._walk_c(asm, enc.ldr_v, enc.ldp_v, enc.ldur_v)
            first = 1
        asm([enc.movi_zero(reg) for extra in self.sets[first:] for column in extra
             for reg in column])
        _batch_loop(asm, self)
        for total, addend in _pairwise_sums(len(self.sets)):
            for to, column in zip(self.sets[total], self.sets[addend]):
                asm([enc.fadd(t, t, e, self._arrangement(rows))
                     for t, e, rows in zip(to, column, self.pieces)])
        self._walk_c(asm, enc.str_v, enc.stp_v, enc.stur_v)

    def _walk_c(self, asm: Assembler, single: Callable[..., int], pair: Callable[..., int],
                unscaled: Callable[..., int]) -> None:
        asm(enc.mov_reg(WALK, C_BLOCK))
        for j, regs in enumerate(self.sets[0]):
            if j:
                asm(enc.add_reg(WALK, WALK, LD_C))
            asm(_transfer(single, pair, self.pieces, regs, WALK, self.element, unscaled))

    def _k_loop(self, asm: Assembler) -> None:
        iterations, rest = divmod(self.k, self.unroll)
        if iterations < 2:  # short K: straight-line, B offsets just keep growing
            self._steps(asm, self.k)
            return
        with asm.counted_loop(K_COUNT, iterations, align=LOOP_ALIGN):
            self._steps(asm, self.unroll)
            asm([enc.add_imm(reg, reg, self.element.size * self.unroll)
                 for reg in B_COLUMNS[:self.ncols]])
        self._steps(asm, rest)

    def _steps(self, asm: Assembler, count: int) -> None:
        size, letter = self.element.size, self.element.letter
        for step in range(count):
            fmlas = self.fmlas[step % len(self.sets)]
            asm(self.load_a[step % len(self.walks)])
            for j in range(self.ncols):
                asm(enc.ldr_v(letter, B_REGS[j % len(B_REGS)], B_COLUMNS[j], size * step),
                    fmlas[j])


class _DotMicrokernel:
    """Code for one row of C by `ncols` columns, all K, all batches, vectorized along k.

    Each chunk of `lanes` k steps loads the row's A elements of `lanes` columns (one A pointer
    per column, taking turns) and zips them into one register, loads each B column's `lanes`
    consecutive k as a q-register and does one full-width FMLA per C element; the chunks
    alternate between two sets of scratch registers (the model sees a false dependency
    otherwise) and between accumulator sets. K % lanes steps load single elements (the other
    lanes zero). After the batch loop the sets are summed, each accumulator's lanes added
    pairwise, and the sum added to C.
    """

    def __init__(self, ncols: int, k: int, br_size: int, element: Element,
                 accumulate: bool = True):
        self.ncols, self.k, self.br_size, self.element = ncols, k, br_size, element
        self.accumulate = accumulate
        lanes = element.lanes
        self.b_regs = ACC_REGS[:ncols]
        pool = ACC_REGS[ncols:]
        chunks = k // lanes
        sets = min(-(-FMA_CHAINS // ncols), len(pool) // ncols, max(1, chunks // 2))
        self.sets = [pool[s * ncols:(s + 1) * ncols] for s in range(sets)]
        self.unroll = sets + sets % 2      # chunks per loop pass: both scratch sets in turn
        self.walks = A_WALKS[:lanes]
        self.gprs = set(self.walks)
        self.vregs = set(A_REGS) | set(B_REGS) | set(ACC_REGS[:ncols * (sets + 1)])

    def emit(self, asm: Assembler) -> None:
        arr = self.element.arr
        asm([enc.movi_zero(reg) for column in self.sets for reg in column])
        _batch_loop(asm, self)
        for total, addend in _pairwise_sums(len(self.sets)):
            asm([enc.fadd(t, t, e, arr) for t, e in zip(self.sets[total], self.sets[addend])])
        letter, scratch = self.element.letter, A_REGS[0]
        asm(enc.mov_reg(WALK, C_BLOCK))
        for j, acc in enumerate(self.sets[0]):
            asm([enc.faddp(acc, acc, acc, arr)] * (self.element.lanes // 2))
            if j:
                asm(enc.add_reg(WALK, WALK, LD_C))
            # C + the sum, or +0 + the sum (a -0 sum stores +0, as onto a zeroed C)
            asm(enc.ldr_v(letter, scratch, WALK) if self.accumulate else enc.movi_zero(scratch),
                enc.fadd_s(letter, scratch, scratch, acc), enc.str_v(letter, scratch, WALK))

    def _k_loop(self, asm: Assembler) -> None:
        chunks, steps = divmod(self.k, self.element.lanes)
        passes, rest = divmod(chunks, self.unroll)
        if passes < 2:  # short K: straight-line, B offsets just keep growing
            self._chunks(asm, chunks)
        else:
            with asm.counted_loop(K_COUNT, passes, align=LOOP_ALIGN):
                self._chunks(asm, self.unroll)
                asm([enc.add_imm(reg, reg, 16 * self.unroll) for reg in B_COLUMNS[:self.ncols]])
            self._chunks(asm, rest)
        done = 16 * (chunks if passes < 2 else rest)
        size, letter = self.element.size, self.element.letter
        for step in range(steps):   # the A pointers stand at the next columns, in turn
            row = A_REGS[0]
            asm(enc.ldr_v(letter, row, self.walks[step]))
            for j, acc in enumerate(self.sets[0]):
                asm(enc.ldr_v(letter, self.b_regs[j], B_COLUMNS[j], done + size * step),
                    self._multiply_add(acc, row, self.b_regs[j]))

    def _chunks(self, asm: Assembler, count: int) -> None:
        letter = self.element.letter
        shift = len(self.walks).bit_length() - 1
        for chunk in range(count):
            columns = (A_REGS + B_REGS)[4 * (chunk % 2):4 * (chunk % 2) + 4]
            for walk, column in zip(self.walks, columns):
                asm(enc.ldr_v(letter, column, walk), enc.add_reg(walk, walk, LD_A, lsl=shift))
            if self.element.lanes == 4:   # [a0 a1 a2 a3] from four s-registers
                asm(enc.zip1(columns[0], columns[0], columns[1], "2s"),
                    enc.zip1(columns[2], columns[2], columns[3], "2s"),
                    enc.zip1(columns[0], columns[0], columns[2], "2d"))
            else:
                asm(enc.zip1(columns[0], columns[0], columns[1], "2d"))
            for j, acc in enumerate(self.sets[chunk % len(self.sets)]):
                asm(enc.ldr_v("q", self.b_regs[j], B_COLUMNS[j], 16 * chunk),
                    self._multiply_add(acc, columns[0], self.b_regs[j]))

    def _multiply_add(self, acc: int, a: int, b: int) -> int | list[int]:
        """acc += a * b, lane by lane."""
        return enc.fmla(acc, a, b, self.element.arr)


def _microkernel(pieces: tuple, ncols: int, k: int, br_size: int, element: Element,
                 accumulate: bool = True):
    if pieces == DOT:
        return _DotMicrokernel(ncols, k, br_size, element, accumulate)
    return _Microkernel(pieces, ncols, k, br_size, element, accumulate)


def _column_block(asm: Assembler, groups: list[tuple[int, tuple]], ncols: int,
                  microkernels: dict[tuple[tuple[int, ...], int], _Microkernel],
                  element: Element) -> None:
    """All row blocks of one column block of `ncols` columns."""
    asm(enc.mov_reg(C_BLOCK, C_COLUMN_BLOCK), enc.mov_reg(A_BLOCK, A_MATRIX))
    for index, (count, pieces) in enumerate(groups):
        more_follow = index + 1 < len(groups)
        with asm.counted_loop(M_COUNT, count, align=LOOP_ALIGN):
            microkernels[pieces, ncols].emit(asm)
            if count > 1 or more_follow:
                block_bytes = element.size * _rows(pieces)
                asm(enc.add_imm(C_BLOCK, C_BLOCK, block_bytes),
                    enc.add_imm(A_BLOCK, A_BLOCK, block_bytes))


def _column_shapes(n: int) -> list[int]:
    """The column counts of the column blocks: BLOCK_COLS, then the rest."""
    column_blocks, column_rest = divmod(n, BLOCK_COLS)
    return ([BLOCK_COLS] if column_blocks else []) + ([column_rest] if column_rest else [])


def block_counts(m: int, n: int, dtype: str = "float32") -> dict[tuple[tuple, int], int]:
    """{(row pieces or DOT, columns): how many such C blocks} of an m×n BRGEMM (for cost models
    and the static throughput benchmark)."""
    element = check_dtype(dtype)
    counts: dict[tuple[tuple[int, ...], int], int] = {}
    for ncols in _column_shapes(n):
        column_count = n // BLOCK_COLS if ncols == BLOCK_COLS else 1
        for count, pieces in _row_groups(m, element, ncols):
            counts[pieces, ncols] = counts.get((pieces, ncols), 0) + count * column_count
    return counts


def k_loop_code(pieces: tuple, ncols: int, k: int, dtype: str = "float32") -> tuple[bytes, int]:
    """The code of one C block's K loop alone, as in the kernels, and the k steps of one pass
    through the loop (for static analysis)."""
    asm = Assembler()
    element = check_dtype(dtype)
    kernel = _microkernel(pieces, ncols, k, 1, element)
    kernel._k_loop(asm)
    steps = kernel.unroll * (element.lanes if pieces == DOT else 1)
    return asm.finish(), steps



def _batch_loop(asm: Assembler, kernel) -> None:
    """The batch loop both microkernels share: per batch entry, A's walk pointers (ld_a
    apart) and B's column pointers (ld_b apart) from the entry's bases, then the kernel's
    K loop."""
    batched = kernel.br_size > 1
    if batched:     # the batch walks copies of the block's A and B pointers
        asm(enc.mov_reg(A_BATCH, A_BLOCK), enc.mov_reg(B_BATCH, B_COLUMN_BLOCK))
    a_source, b_source = (A_BATCH, B_BATCH) if batched else (A_BLOCK, B_COLUMN_BLOCK)
    with asm.counted_loop(BATCH_COUNT, kernel.br_size, align=LOOP_ALIGN):
        asm(enc.mov_reg(WALK, a_source), enc.mov_reg(B_COLUMNS[0], b_source))
        for before, walk in zip(kernel.walks, kernel.walks[1:]):
            asm(enc.add_reg(walk, before, LD_A))
        for j in range(1, kernel.ncols):
            asm(enc.add_reg(B_COLUMNS[j], B_COLUMNS[j - 1], LD_B))
        kernel._k_loop(asm)
        if batched:
            asm(enc.add_reg(A_BATCH, A_BATCH, BR_STRIDE_A),
                enc.add_reg(B_BATCH, B_BATCH, BR_STRIDE_B))

def emit_brgemm(asm: Assembler, target: Target, m: int, n: int, k: int, br_size: int,
                dtype: str = "float32", accumulate: bool = True, stream: bool = False,
                ld_b: int | None = None, far_c: int = 0,
                next_call: tuple[int, int, int] | None = None) -> Label:
    """Emit the function C += sum_i A_i B_i with C m×n, A_i m×k, B_i k×n of `dtype` (float32,
    float64, or complex64 and complex128: complex_brgemm.py; see the module docstring) at
    the current position of `asm`; returns the Label of its entry.
    accumulate=False: C := sum_i A_i B_i, C never read (the bits C += gives on a zeroed C).
    stream (the contract's hint that C is far larger than the caches): accepted with
    accumulate=False; this backend stores C as usual (STNP pairs are not generated).
    ld_b (the contract's hint of B's leading dimension): accepted and not needed, a block
    reads BLOCK_COLS columns of B whatever their pitch. far_c (the contract's hint that C
    comes from beyond L2, its ld_c): accepted; this backend loads C where it is. next_call
    (the contract's hint of where the next call's blocks lie): accepted; this backend does
    not prefetch them (its core's prefetch_next_call is off: the nests never pass one)."""
    if stream and accumulate:
        raise KernelParameterError("brgemm stream=True needs accumulate=False (a streamed C "
                                   "is not read back)")
    check_target(target)
    check_sizes(m=m, n=n, k=k, br_size=br_size)
    if dtype in COMPLEX_DTYPES:
        # the complex kernel builds on this module's blocks (a late import: no cycle)
        from einjit.backends.aarch64.complex_brgemm import emit_complex_brgemm
        return emit_complex_brgemm(asm, m, n, k, br_size, dtype, accumulate)
    element = check_dtype(dtype)
    column_groups = {ncols: _row_groups(m, element, ncols) for ncols in _column_shapes(n)}
    microkernels = {(pieces, ncols): _microkernel(pieces, ncols, k, br_size, element, accumulate)
                    for ncols, groups in column_groups.items() for _, pieces in groups}
    suffix = "" if element.dtype == "float32" else f"_{element.dtype}"
    name = f"brgemm_{m}x{n}x{k}_br{br_size}{suffix}{'' if accumulate else '_set'}"
    return emit_blocks(asm, name, n, element, column_groups, microkernels)


def emit_blocks(asm: Assembler, name: str, n: int, element: Element,
                column_groups: dict[int, list[tuple[int, tuple]]],
                microkernels: dict[tuple[tuple, int], _Microkernel]) -> Label:
    """Emit the function `name` over C's blocks: the column blocks of _column_shapes(n), each
    the row groups of `column_groups[ncols]`, each block run by `microkernels[pieces, ncols]`;
    leading dimensions and strides arrive in elements of `element`."""
    column_blocks, column_rest = divmod(n, BLOCK_COLS)
    column_shapes = _column_shapes(n)
    advances_columns = column_blocks > 1 or (column_blocks == 1 and column_rest > 0)
    gprs = set(range(0, WALK + 1)) | set(B_COLUMNS[:max(column_shapes)])
    if advances_columns:
        gprs |= {LD_B_BLOCK, LD_C_BLOCK}
    gprs = gprs.union(*(kernel.gprs for kernel in microkernels.values()))
    vregs = set().union(*(kernel.vregs for kernel in microkernels.values()))

    entry = asm.label(name)
    asm.bind(entry)
    asm.prologue(gprs, vregs)
    # leading dimensions and strides arrive in elements
    asm([enc.lsl_imm(reg, reg, element.shift)
         for reg in (LD_A, LD_B, LD_C, BR_STRIDE_A, BR_STRIDE_B)])
    if column_blocks:
        if advances_columns:
            for block, ld in ((LD_B_BLOCK, LD_B), (LD_C_BLOCK, LD_C)):
                asm(enc.add_reg(block, ld, ld, lsl=1), enc.lsl_imm(block, block, 1))
        with asm.counted_loop(N_COUNT, column_blocks, align=LOOP_ALIGN):
            _column_block(asm, column_groups[BLOCK_COLS], BLOCK_COLS, microkernels, element)
            if advances_columns:
                asm(enc.add_reg(B_COLUMN_BLOCK, B_COLUMN_BLOCK, LD_B_BLOCK),
                    enc.add_reg(C_COLUMN_BLOCK, C_COLUMN_BLOCK, LD_C_BLOCK))
    if column_rest:
        _column_block(asm, column_groups[column_rest], column_rest, microkernels, element)
    asm.epilogue()
    return entry


def generate_brgemm(target: Target, m: int, n: int, k: int, br_size: int,
                    dtype: str = "float32", accumulate: bool = True,
                    stream: bool = False, ld_b: int | None = None,
                    far_c: int = 0, next_call: tuple[int, int, int] | None = None) -> bytes:
    """Machine code of the BRGEMM kernel alone (emit_brgemm into a new Assembler)."""
    asm = Assembler()
    emit_brgemm(asm, target, m, n, k, br_size, dtype, accumulate, stream, ld_b, far_c,
                next_call)
    return asm.finish()
