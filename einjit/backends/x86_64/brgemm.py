"""x86-64 BRGEMM generator: C += sum_i A_i B_i for column-major FP32/FP64, AVX-512 or AVX2/FMA.

Kernel ABI (System V): brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b), leading
dimensions and batch strides in elements; M, N, K and the batch size are compile-time.

C is cut into register blocks of `vectors` column vectors (16 or 8 rows each) × `cols`
columns. A block's accumulators stay in registers across the whole K and batch loops: each
k-step loads `vectors` vectors of A's column k and, for every column j of the block, brings
B[k, j] to all lanes (AVX-512 with one vector: an embedded {1to16} broadcast inside the FMA;
otherwise one vbroadcastss shared by the column's FMAs). The accumulators start at zero;
after the K loop C is added to them (with accumulate=False it is never read: the kernel sets
C, the bits C += gives on a zeroed C) and they are stored. Rows
past M in the last vector are masked (AVX-512: k1; AVX2: vmaskmovps with a mask vector), so no
access leaves the operands; in blocks of two or more vectors that tail vector ends at the last
row instead of starting after the full vectors (see block_registers). AVX2 masked stores are
microcoded on AMD cores (12 cycles on Zen 3), so in such blocks AVX2 may instead load and
store that tail vector whole: it overlaps the previous vector, whose rows it computes bit for
bit alike (`overlap`).

A masked last vector of few rows wastes most of its FMA lanes. In blocks of two or more
vectors the tail rows of up to `group` columns therefore share one vector, each column owning
a share of `share` lanes whose top t lanes are its tail rows, and one FMA serves the whole
group. B's elements are blended into their lanes out of the broadcasts the full vectors use
anyway. A's tail rows are repeated across the shares: AVX-512 (t <= 8 rows, share t, group
min(16 // t, 7), one mask register k1..k7 a column, float32 only) by one vpermps per k-step;
AVX2 (float32 t <= 4, float64 t <= 2; share 1, 2 or 4 32-bit lanes, the narrowest broadcast
load that holds t rows, group 8 // share) by broadcasting the column's last `share` lanes
straight from memory (rows a full vector holds too when share > t, with B blended into the
whole share: those lanes hold the full vector's sums). AVX2's packing only moves bits, so a
double is simply two 32-bit lanes there.
AVX-512's C update reads and writes each column's tail rows with their lane mask, at an
address moved so that those lanes meet the column's tail rows; masked lanes are never
accessed, and the moved span starts inside the column (its full vectors lie before the
tail). AVX2's gathers each column's last `share` rows of C into their lanes (16 bytes by a
broadcast or insert of a half; 8 or 4 into an xmm lane by a broadcast, vmovhps or vinsertps),
adds them with one vaddps, and stores each share from its lane (vextractf128, vmovhps,
vextractps; the lowest by vmovsd or vmovss): no masked access.

The blocking (block shapes, how tails are held, the vector width, K chunks) is chosen per
(M, N, K, batch) and per core in blocking.py: a cost model of this loop and a few measured
rules. Blocks of one shape are repeated by runtime loops over M and N, so code size does not
grow with the matrix. Told the ld_b it will be called with, the blocking reads no more of
B's columns a k-step than fit the L1 set they share (b_column_limit). AVX2 blocks of one
vector of A may read some of B's columns four k-steps at a time, spreading each step's
element by a shuffle (quad_limit), or take their k-steps two at a time: A's two columns
unpacked into lanes of rows and steps, B's two elements by one 8-byte broadcast
(PAIR_STEPS); for M = 9..12 on a core that splits zmm FMAs, the tail rows too, packed 4, 2
or 1 columns a vector, in all 32 registers (wide_pair_target); on Zen 3, M = 9 and 10 as a
panel of pairs and a panel of dot tails (pair_dot_panels). Float32 tails of 1 to 7 rows
in 256-bit code may be dot products along K instead: lanes of k-steps, A's tail rows copied
into the kernel's stack frame first (dot_tail_share). Where a block row loads A faster than
L2 refills L1 and A's panel (its rows over all of K, and over the batch) outgrows L1, each
block row sweeps its columns once per chunk of K (k_chunks) or of batch entries
(batch_chunks), the chunk's panels staying in L1 across the column blocks (C is added back
between chunks). Where ld_a, known only at run time, is a multiple of 512 bytes, a block row
that sweeps its columns twice or more reads a copy of its A panel in the stack frame instead
(packs_a: such pitches keep the panel out of L1). Where code planned for 16 vector registers
runs on a core with 32 (AVX2 code on Zen 4's AVX-512), a row's blocks (both widths of N's
split) alternate two sets of accumulators and carry each block's update of C into the next
block's K loop
(_Generator._emit_pipelined). Other runs (16 registers, AVX-512 code, wide step pairs) are
skewed instead (_Generator._emit_skewed): slot s of each block (a column, or a packed tail's
group) starts K at step s, so a block's first k-steps finish the previous block's slots and
update their C one slot a step. K = 1 with a batch of one is generated apart
(outer_product): C's stores bound it, not FMAs.

Columns of B are addressed from base pointers 5 columns apart: base, base+L, base+2L,
base+3L (through a register holding 3L) and base+4L, where L is ld_b in bytes.
"""
from __future__ import annotations

from dataclasses import replace

from einjit.backends import LINE_BYTES, Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64 import instructions as ins
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.block_registers import BlockRegisters
from einjit.backends.x86_64.blocking import (
    COLUMNS_PER_BASE,
    PACK_PITCH_BYTES,
    PAIR_STEPS,
    Panel,
    batch_chunks,
    choose,
    dot_steps,
    k_chunks,
    packs_a,
    unmasked_target,
)
from einjit.backends.x86_64.encode import RSP, Mem, Reg
from einjit.backends.x86_64.frame import (
    A_PTR,
    A_ROW,
    B_BASE,
    B_COL,
    B_ORIGIN,
    C_PTR,
    C_ROW,
    CHUNK_COUNT,
    INDEX_SLOT,
    LDA,
    LDB,
    LDC,
    M_COUNT,
    MASK_SLOT,
    N_COUNT,
    POOL,
)
from einjit.backends.x86_64.outer_product import OuterProduct
from einjit.backends.x86_64.precision import FLOAT32, Precision, precision
from einjit.backends.x86_64.tuning import rules
from einjit.errors import KernelParameterError


class _Generator:
    def __init__(self, asm: Assembler, target: Target, m: int, n: int, k: int, br: int,
                 elements: Precision = FLOAT32, accumulate: bool = True,
                 stream: bool = False, ld_b: int | None = None) -> None:
        self.asm, self.m, self.k, self.br, self.accumulate = asm, m, k, br, accumulate
        self.p = elements
        self.target, self.panels = choose(m, n, k, br, target, elements.dtype, ld_b)
        self.dot_panel = next((panel for panel in self.panels if panel.mode.dot), None)
        # code planned for 16 vector registers on a core with 32: the upper 16 hold a second
        # set of accumulators (see _emit_pipelined)
        self.spare_bank = 16 if target.registers >= 32 and self.target.registers <= 16 else 0
        # where A's panels outgrow L1: K in chunks (a kernel without a batch, every panel
        # alike) or, per panel, its batch
        if br == 1:
            k_chunked = k_chunks(self.target, self.panels, k, br, elements.bytes)
            self.chunks = dict.fromkeys(self.panels, k_chunked)
        else:
            self.chunks = {panel: batch_chunks(self.target, panel, k, br, elements.bytes)
                           for panel in self.panels}
        # chunks read C back between them: such a kernel never streams (its C traffic is
        # small beside its K anyway), and so computes the same bits with stream or without.
        # C streams only in whole cache lines: every block row whole lines tall, no tail. A
        # line written partly by non-temporal stores (the rest by the next block row's, much
        # later, or by a tail's cached store) ran 3-4x slower than cached stores (Zen 4,
        # M = 48..72, N = 65536, K = 8: 5 against 19-23 GB/s of C)
        whole_lines = all(not panel.tail_rows
                          and panel.vectors * self.target.vector_bits % (8 * LINE_BYTES) == 0
                          for panel in self.panels)
        chunked = any(chunks > 1 for chunks in self.chunks.values())
        self.stream, self.streaming = stream and not chunked and whole_lines, False
        widest = max(max(p.cols, p.n_tail) for p in self.panels)
        pool = list(POOL)
        self.counter = pool.pop(0)                 # K counter, scratch between blocks
        self.ldb3 = pool.pop(0) if widest > 3 else None
        self.batch = (pool.pop(0), pool.pop(0), pool.pop(0)) if br > 1 else None
        # a dot tail: the frame holding A's copied tail rows, and the register walking them
        self.a_tail = pool.pop(0) if self.dot_panel else None
        # the frame: the copy of A's tail rows, then where the blocks start walking it; then
        # A_ROW and ld_a saved while a block row reads its copy of A's panel, and that copy
        # (see packs_a), 64-byte aligned
        self.dot_bytes = br * k * self.dot_panel.mode.dot * elements.bytes if self.dot_panel else 0
        self.dot_origin = Mem(RSP, disp=self.dot_bytes)
        self.packs = {panel: packs_a(self.target, panel, k // self.chunks[panel], br,
                                     elements.bytes) for panel in self.panels}
        pack_bytes = max((self._row_bytes(panel) * (k // self.chunks[panel])
                          for panel in self.panels if self.packs[panel]), default=0)
        saves = self.dot_bytes + 32 if self.dot_panel else 0
        self.saved_a_row, self.saved_lda = Mem(RSP, disp=saves), Mem(RSP, disp=saves + 8)
        self.pack_buffer = saves + 16
        self.frame = self.pack_buffer + LINE_BYTES + pack_bytes if pack_bytes else saves
        bases = -(-widest // COLUMNS_PER_BASE)
        assert len(pool) >= bases - 1, "too few general registers for B's bases"
        self.bases = (B_BASE,) + tuple(pool[:bases - 1])
        # a skewed run (see _emit_skewed) also reads the previous block's columns of B
        self.skewing = {panel: self._can_skew(panel) for panel in self.panels}
        if len(pool) < 2 * bases - 1 or not any(
                self._run_is_skewed(panel, blocks, cols, k)
                for panel in self.panels for blocks, cols in self._runs(panel)):
            self.skewing = dict.fromkeys(self.panels, False)
        self.previous_bases = tuple(pool[bases - 1:2 * bases - 1]) if any(
            self.skewing.values()) else ()

    # -- whole kernel

    def emit(self) -> Label:
        """The whole function; returns its entry."""
        asm = self.asm
        used = [self.counter, *self.bases, *self.previous_bases, *(self.batch or ())]
        used += [reg for reg in (self.ldb3, self.a_tail) if reg is not None]
        entry = asm.entry("brgemm")
        asm.prologue(used)
        shift = self.p.shift
        asm(enc.shl_ri(LDA, shift), enc.shl_ri(LDB, shift), enc.shl_ri(LDC, shift))
        if self.ldb3 is not None:
            asm(enc.lea(self.ldb3, Mem(LDB, LDB, 2)))
        if self.batch is not None:
            _, a_step, b_step = self.batch
            # the K loop leaves A moved by K*ld_a and the B bases by K elements
            asm.stack_arg(6, a_step)
            asm.stack_arg(7, b_step)
            asm(enc.shl_ri(a_step, shift), enc.shl_ri(b_step, shift),
                enc.imul_rri(self.counter, LDA, self.k), enc.sub_rr(a_step, self.counter),
                enc.sub_ri(b_step, self.p.bytes * self.k))
        if self.frame:            # below the arguments on the stack; the red zone moves along
            asm.reserve_stack(self.frame)
        asm(enc.mov_mr(A_ROW, A_PTR), enc.mov_mr(C_ROW, C_PTR), enc.mov_mr(B_ORIGIN, B_BASE))
        self._set_tail_masks()
        if self.dot_panel:
            self._copy_a_tail()
        if self.stream:
            # whole lines: C and ld_c (bytes) line-aligned, else the cached body
            cached, done = asm.label(), asm.label()
            asm(enc.mov_rr(self.counter, C_PTR), enc.or_rr(self.counter, LDC),
                enc.and_ri(self.counter, LINE_BYTES - 1))
            asm.jcc("ne", cached)
            self.streaming = True
            for panel in self.panels:
                self._panel(panel)
            self.streaming = False
            asm.jmp(done)
            asm.bind(cached)
        for panel in self.panels:
            self._panel(panel)
        if self.stream:
            asm.bind(done)
        if self.frame:
            asm(enc.add_ri(RSP, self.frame))
        asm.epilogue()
        return entry

    def _set_tail_masks(self) -> None:
        """The masks of the tail rows (see BlockRegisters for where they sit). AVX-512: k1,
        and for a packed tail k1+s for the lanes of the column s places from a group's end,
        plus the lane indices that repeat A's tail rows in INDEX_SLOT. AVX2: the mask vector
        in MASK_SLOT, followed by zeros for a packed tail. Each slot is written by one vector
        store: a vector load from one equal store is forwarded, one from several narrower
        stores waits for them to reach the cache (measured: 36x3x16 ran 25% slower; a packed
        tail's mask windows straddle two stores, but the first is loaded after a whole block's
        K loop)."""
        tail_panel = next((p for p in self.panels if p.tail_rows
                           and not (p.mode.overlap or p.mode.dot or p.mode.pairs)
                           and (p.mode.group == 1 or self.target.masks)), None)
        if tail_panel is None:
            return
        asm, scratch, lanes = self.asm, self.counter, self.target.lanes(self.p.bytes)
        tail, group = tail_panel.tail_rows, tail_panel.mode.group
        first = lanes - tail if tail_panel.vectors > 1 else 0     # lane of the first tail row
        if self.target.masks:
            if group > 1:
                self._store_lane_indices([first + (lane - lanes) % tail for lane in range(lanes)])
            for s in range(group):
                lanes_of_s = ((1 << tail) - 1) << (first - tail * s)
                asm(enc.mov_ri(scratch, lanes_of_s), enc.kmovw_kr(1 + s, scratch))
            return
        # AVX2: sign bits from one set dword: lanes 0..count-1 in register (count - 1) % 4;
        # a double's sign is in the second of its two dwords: both are set
        pairs = self.p.dword_pairs
        count, first = (first or tail) * pairs, first * pairs
        asm(enc.mov_ri(scratch, -1), enc.vmovd_xr(0, scratch),   # 0: lane 0
            enc.vunpcklps(1, 0, 0, 128),                        # 1: lanes 0-1
            enc.vunpcklpd(2, 1, 0, 128),                        # 2: lanes 0-2
            enc.vunpcklpd(3, 1, 1, 128))                        # 3: lanes 0-3
        if count > 4:
            asm(enc.vinsertf128(count - 5, 3, count - 5, 1))    # lanes 0-3 and 4..count-1
        mask = (count - 1) % 4
        if first:                                             # the lanes from `first` on
            asm(enc.vpcmpeqd(4, 4, 4, 256), enc.vxorps(mask, mask, 4, 256))
        asm(enc.vmovups_store(MASK_SLOT, mask, self.target.vector_bits))

    def _store_lane_indices(self, indices: list[int]) -> None:
        """INDEX_SLOT := indices (one per lane), built in zmm0 by masked broadcasts."""
        asm, scratch, width = self.asm, self.counter, self.target.vector_bits
        asm(enc.mov_ri(scratch, indices[0]), enc.vpbroadcastd_gpr(0, scratch, width))
        for value in sorted(set(indices) - {indices[0]}):
            lanes = sum(1 << lane for lane, index in enumerate(indices) if index == value)
            asm(enc.mov_ri(scratch, lanes), enc.kmovw_kr(1, scratch), enc.mov_ri(scratch, value),
                enc.vpbroadcastd_gpr(0, scratch, width, mask=1))
        asm(enc.vmovups_store(INDEX_SLOT, 0, width))

    def _copy_a_tail(self) -> None:
        """Copy the dot tail's rows of A (every batch entry's) into the frame, a vector of g
        k-steps at a time: lane r*g + q holds row r of step q, rows past M zero (past 4 rows:
        copies of rows, whose sums are never stored; A_PTR is free here: the blocks reload it
        from A_ROW)."""
        asm, walker = self.asm, self.a_tail
        rows = self.dot_panel.tail_rows
        steps = dot_steps(self.dot_panel.mode.dot)
        asm(enc.mov_rr(walker, RSP), enc.mov_mr(self.dot_origin, walker),
            enc.add_ri(A_PTR, (self.m - rows) * self.p.bytes))
        code = []
        for q in range(steps):                 # register q := the rows of step q
            code += [ins.load_column(q, Mem(A_PTR), rows, 12), enc.add_rr(A_PTR, LDA)]
        # a transpose of rows x steps: xmm 8 := the lower four lanes, xmm 9 or 10 the upper
        if steps == 1:                         # already a vector of rows
            code += [enc.vmovups_store(Mem(walker), 0, 256), enc.add_ri(walker, 32)]
        elif steps == 2:
            code += [enc.vunpckhps(9, 0, 1, 128), enc.vunpcklps(8, 0, 1, 128)]
        elif steps == 4:
            code += [enc.vunpcklps(8, 0, 1, 128), enc.vunpcklps(9, 2, 3, 128),
                     enc.vunpckhpd(10, 8, 9, 128), enc.vunpcklpd(8, 8, 9, 128)]
        else:
            code += [enc.vunpcklps(8 + i, 2 * i, 2 * i + 1, 128) for i in range(4)]
            code += [enc.vunpcklpd(8, 8, 9, 128), enc.vunpcklpd(10, 10, 11, 128)]
        if steps > 1:
            upper = 10 if steps > 2 else 9
            code += [enc.vinsertf128(8, 8, upper, 1), enc.vmovups_store(Mem(walker), 8, 256),
                     enc.add_ri(walker, 32)]
        scratch = self.counter
        if self.batch is None:
            with asm.counted_loop(scratch, self.k // steps):
                asm(code)
            return
        batch_counter, a_step, _ = self.batch
        with asm.counted_loop(batch_counter, self.br):
            with asm.counted_loop(scratch, self.k // steps):
                asm(code)
            asm(enc.add_rr(A_PTR, a_step))

    # -- loops over blocks (their counters live in red-zone slots: no register is left)

    def _panel(self, panel: Panel) -> None:
        """The panel's blocks, row by row. K or the batch in chunks (self.chunks): each
        row of blocks sweeps its columns once per chunk, A_ROW and B_ORIGIN moved a chunk
        on in between and back after the last; the first chunk ends as the kernel does
        (adding C or setting it), the others add to the C the previous one stored."""
        asm, scratch = self.asm, self.counter
        row_bytes = self._row_bytes(panel)
        chunks = self.chunks[panel]
        steps = self.k // chunks if self.br == 1 else self.k      # a sweep's K steps
        with asm.counted_loop(M_COUNT, panel.blocks, align=1, scratch=scratch):
            self._row(panel, self.accumulate, steps)
            if chunks > 1:
                self._move_chunk(1, chunks)
                with asm.counted_loop(CHUNK_COUNT, chunks - 1, align=1, scratch=scratch):
                    self._row(panel, True, steps)
                    self._move_chunk(1, chunks)
                self._move_chunk(-chunks, chunks)
            for slot in (A_ROW, C_ROW):
                asm(enc.mov_rm(scratch, slot), enc.add_ri(scratch, row_bytes),
                    enc.mov_mr(slot, scratch))

    def _row_bytes(self, panel: Panel) -> int:
        return panel.vectors * self.target.vector_bits // 8

    def _row(self, panel: Panel, accumulate: bool, k: int) -> None:
        """One row of blocks across all columns (_columns); where the panel packs A (see
        packs_a) and ld_a is a multiple of PACK_PITCH_BYTES, from a copy of the row's k
        steps of A in the frame, whose pitch is the row's height (A_ROW and LDA point at it
        meanwhile): the blocks read the same elements, the sums are bit for bit alike."""
        if not self.packs[panel]:
            self._columns(panel, accumulate, k)
            return
        asm, scratch, p = self.asm, self.counter, self.p
        width, row_bytes = self.target.vector_bits, self._row_bytes(panel)
        direct = asm.label()
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_mr(self.saved_a_row, A_PTR),
            enc.mov_mr(self.saved_lda, LDA), enc.mov_rr(scratch, LDA),
            enc.and_ri(scratch, PACK_PITCH_BYTES - 1))
        asm.jcc("ne", direct)
        copy = B_BASE                         # free until the first block loads it
        asm(enc.lea(copy, Mem(RSP, disp=self.pack_buffer + LINE_BYTES - 1)),
            enc.and_ri(copy, -LINE_BYTES), enc.mov_mr(A_ROW, copy))
        vector_bytes = width // 8
        with asm.counted_loop(scratch, k):
            asm(p.load(v, Mem(A_PTR, disp=v * vector_bytes), width)
                for v in range(panel.vectors))
            asm(p.store(Mem(copy, disp=v * vector_bytes), v, width)
                for v in range(panel.vectors))
            asm(enc.add_rr(A_PTR, LDA), enc.add_ri(copy, row_bytes))
        asm(enc.mov_ri(LDA, row_bytes))
        asm.bind(direct)
        self._columns(panel, accumulate, k)
        asm(enc.mov_rm(LDA, self.saved_lda), enc.mov_rm(A_PTR, self.saved_a_row),
            enc.mov_mr(A_ROW, A_PTR))

    def _columns(self, panel: Panel, accumulate: bool, k: int) -> None:
        """One row of blocks across all columns, k steps of K from A_ROW and B_ORIGIN."""
        asm = self.asm
        asm(enc.mov_rm(self.counter, B_ORIGIN), enc.mov_mr(B_COL, self.counter),
            enc.mov_rm(C_PTR, C_ROW))
        pipelines = self._can_pipeline(panel)
        sequences = self._sequences(panel) if pipelines else [self._runs(panel)]
        for index, sequence in enumerate(sequences):
            if pipelines and sum(blocks for blocks, _ in sequence) > 1:
                self._emit_pipelined(panel, sequence, accumulate, k)
                continue
            for position, (blocks, cols) in enumerate(sequence):
                last = index == len(sequences) - 1 and position == len(sequence) - 1
                if self._run_is_skewed(panel, blocks, cols, k):
                    self._emit_skewed(panel, blocks, cols, accumulate, k)
                else:
                    self._run(panel, blocks, cols, accumulate, k, last)

    def _run(self, panel: Panel, blocks: int, cols: int, accumulate: bool, k: int,
             last: bool) -> None:
        """`blocks` blocks of `cols` columns, each updating C after its K loop (last: the
        row's last run; its single block moves nothing on)."""
        if blocks == 1 and last:
            self._block(panel, cols, accumulate, k)
            return
        with self.asm.counted_loop(N_COUNT, blocks, align=1, scratch=self.counter):
            self._block(panel, cols, accumulate, k)
            self._next_columns(cols)          # past the last block: harmless, reset per row

    @staticmethod
    def _runs(panel: Panel) -> list[tuple[int, int]]:
        """The panel's runs of blocks in a row, as (blocks, columns)."""
        return [(blocks, cols) for blocks, cols in ((panel.n_blocks, panel.cols),
                                                    (panel.tail_blocks if panel.n_tail else 0,
                                                     panel.n_tail)) if blocks]

    @classmethod
    def _sequences(cls, panel: Panel) -> list[list[tuple[int, int]]]:
        """The runs as sequences of pipelined blocks (see _emit_pipelined): both runs in one
        where their blocks hold the same roles, else each alone (a run of fewer columns
        than the panel's quads holds fewer quads)."""
        runs = cls._runs(panel)
        if len({min(panel.mode.quads, cols) for _, cols in runs}) == 1:
            return [runs]
        return [[run] for run in runs]

    def _can_pipeline(self, panel: Panel) -> bool:
        """Whether runs of the panel's blocks are pipelined (see _emit_pipelined): a bank of
        registers is spare, no batch loop surrounds the K loop, K is not in chunks, and C
        is not stored by vmaskmovps (VEX only: no upper register can be its source)."""
        masked = panel.tail_rows and panel.mode.masked
        return bool(self.spare_bank and self.br == 1 and self.chunks[panel] == 1
                    and not masked)

    def _emit_pipelined(self, panel: Panel, runs: list[tuple[int, int]], accumulate: bool,
                   k: int) -> None:
        """The panel's runs of (blocks, columns) as one sequence of blocks whose accumulators
        alternate between two register sets: each block's update of C is spread over the
        next block's first k-steps, where the next block's FMAs hide it, instead of stalling
        them as a burst of stores after the K loop (measured on Zen 4, 3x4 ymm blocks,
        K = 16: 92 -> 98% of peak), the last block of a run into the first of the next, of
        other columns. C_PTR stays on a block until its update is out; only the last block
        updates in a burst."""
        asm, phases = self.asm, (0, 1) if accumulate else (1,)
        sets: dict[tuple[int, int], BlockRegisters] = {}
        widest = frozenset(self._registers(panel, max(cols for _, cols in runs)).accumulators())

        def registers(s: int, cols: int) -> BlockRegisters:
            if (s, cols) not in sets:
                sets[s, cols] = self._registers(panel, cols, (0, self.spare_bank)[s],
                                                carried=True, widest=widest)
            return sets[s, cols]

        def block(s: int, cols: int, previous: tuple[int, int] | None) -> None:
            # a carried update ends moving C_PTR on to the block computed meanwhile
            carry = None if previous is None else (
                self._update_code(registers(*previous), phases)
                + [self._c_columns(previous[1])])
            self._compute(panel, registers(s, cols), k, carry=carry)
            self._next_columns(cols, c=False)

        previous = None                  # (set, columns) of the block before
        for blocks, cols in runs:
            s = 0 if previous is None else 1 - previous[0]
            block(s, cols, previous)
            previous, blocks = (s, cols), blocks - 1
            pairs, odd = divmod(blocks, 2)
            if pairs:
                with asm.counted_loop(N_COUNT, pairs, align=1, scratch=self.counter):
                    block(1 - s, cols, (s, cols))
                    block(s, cols, (1 - s, cols))
            if odd:
                block(1 - s, cols, (s, cols))
                previous = (1 - s, cols)
        self._update_c(registers(*previous), phases)
        self._next_columns(previous[1], b=False)

    def _can_skew(self, panel: Panel) -> bool:
        """Whether runs of the panel's blocks may be skewed (see _emit_skewed): no spare bank
        (16-register code on a core with 32 pipelines instead), no batch loop, K not in
        chunks, no quads or dot tail, no lone masked vector."""
        # a masked vector starting a column's rows spans into the next column, whose load
        # of C then waits for its store (Zen 4, AVX-512 13x40x64: 82 -> 68% of peak skewed)
        spills = panel.vectors == 1 and panel.tail_rows and panel.mode.masked
        plain = not (panel.mode.quads or panel.mode.dot or spills)
        return bool(plain and not self.spare_bank and self.br == 1
                    and self.chunks[panel] == 1)

    def _slots(self, panel: Panel, cols: int, k: int) -> list[range]:
        """A skewed block's slots: its columns one by one, or a packed tail's groups, or two
        columns of a tail in step pairs of a vector a column (summed two at once, see
        _sum_pair_rows), or as many of any as a head no longer than K needs (a slot takes a
        step, or a pair)."""
        unit = PAIR_STEPS if panel.mode.pairs else 1
        base = (panel.mode.group if panel.mode.group > 1
                else PAIR_STEPS if panel.mode.pairs and panel.tail_rows else 1)
        width = base
        while -(-cols // width) * unit > k:
            width += base
        return [range(first, min(first + width, cols)) for first in range(0, cols, width)]

    def _run_is_skewed(self, panel: Panel, blocks: int, cols: int, k: int) -> bool:
        """Whether a run of `blocks` blocks of `cols` columns is skewed: two blocks or more,
        two slots or more."""
        return self.skewing[panel] and blocks > 1 and len(self._slots(panel, cols, k)) > 1

    def _emit_skewed(self, panel: Panel, blocks: int, cols: int, accumulate: bool, k: int) -> None:
        """`blocks` blocks of `cols` columns whose columns are skewed: the block's slots (its
        columns, or a packed tail's groups of columns, which share an accumulator; wider
        where the head would outgrow K, see _slots) take their k-steps from their own step
        on: slot s from step s (in step pairs, pair s) to K-1, then 0 to s-1. Every column
        still meets A's column k at step k, and a block's first steps (its head, unrolled)
        finish the previous block's later slots: at step s slot s of the previous block is
        done, sums its step pairs, updates C and starts over, between the FMAs of the
        others. No burst of a whole block's update after the
        K loop for the next block's FMAs to wait behind (Zen 4, AVX2 3x4 blocks, whole rows
        at K = 16: 92.5 -> 95.5% of peak in a JIT'd loop; two or more steps between slots'
        updates gained less). The first block's head starts its slots one a step; a last
        head (the drain) finishes the last block's. C_PTR stays on the previous block until
        its head is over. The update comes first in its step, while A's and B's registers
        (its scratch) are free; the sums' order along K differs from slot to slot."""
        asm, p = self.asm, self.p
        regs = self._registers(panel, cols)
        phases = (0, 1) if accumulate else (1,)
        count = -(-cols // COLUMNS_PER_BASE)
        current, previous = self.bases[:count], self.previous_bases[:count]
        slots = self._slots(panel, cols, k)
        unit = PAIR_STEPS if panel.mode.pairs else 1
        self._load_tail_roles(regs)          # nothing in the run overwrites them

        def column(bases: tuple[Reg, ...], j: int, step: int) -> list[bytes]:
            if panel.mode.pairs:
                return self._pair_column(regs, bases, j, step * p.bytes)
            return self._column_step(regs, bases, j, step)

        def zeroed(slot: range) -> list[bytes]:
            packed = regs.packed_acc[slot.start // regs.group:-(-slot.stop // regs.group)]
            return [ins.zero(acc) for acc in [*(acc for j in slot for acc in regs.acc[j]),
                                           *packed]]

        # each head step's pieces, built once for the three kinds of head: A's part, the
        # update of slot s, the FMAs of later slots on the previous block's B, and (slot s
        # zeroed first) those of slot s and earlier on this block's
        heads = []
        a_part = b"".join(self._pair_a(regs) if panel.mode.pairs else self._a_column(regs))
        for s_index, slot in enumerate(slots):
            step = s_index * unit
            old = [code for later in slots[s_index + 1:] for j in later
                   for code in column(previous, j, step)]
            new = zeroed(slot) + [code for earlier in slots[:s_index + 1] for j in earlier
                                  for code in column(current, j, step)]
            heads.append((a_part, b"".join(self._update_code(regs, phases, slot)),
                          b"".join(old), b"".join(new)))

        def cycle(first: bool, drain: bool) -> None:
            asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_rm(B_BASE, B_COL))
            if not first:
                asm(enc.imul_rri(self.counter, LDB, cols), enc.mov_rr(previous[0], B_BASE),
                    enc.sub_rr(previous[0], self.counter))
            for bases in (current, () if first else previous):
                for base, following in zip(bases, bases[1:]):
                    asm(enc.lea(following, Mem(base, LDB, 4)), enc.add_rr(following, LDB))
            for s_index, (a_part, update, old, new) in enumerate(heads):
                if not first:
                    asm(update)
                if not (drain and s_index == len(slots) - 1):
                    asm(a_part)
                if not first:
                    asm(old)
                if not drain:
                    asm(new)
            if not first:
                asm(self._c_columns(cols))
            if not drain:
                head_bytes = len(slots) * unit * p.bytes
                asm(*(enc.add_ri(base, head_bytes) for base in current))
                self._k_loop(regs, current, k - len(slots) * unit)
                self._next_columns(cols, c=False)

        cycle(first=True, drain=False)
        if blocks > 2:
            with asm.counted_loop(N_COUNT, blocks - 1, align=1, scratch=self.counter):
                cycle(first=False, drain=False)
        else:
            cycle(first=False, drain=False)
        cycle(first=False, drain=True)

    def _move_chunk(self, count: int, chunks: int) -> None:
        """A_ROW, B_ORIGIN and a dot tail's origin `count` of `chunks` chunks on (back if
        negative): K's, or the batch's entries (by their strides: a_step and b_step plus
        what the K loop moves). A_PTR is free here: a scratch."""
        scratch, p = self.counter, self.p
        if self.br == 1:
            steps = count * (self.k // chunks)
            self.asm(enc.imul_rri(scratch, LDA, steps), enc.mov_rm(A_PTR, A_ROW),
                     enc.add_rr(A_PTR, scratch), enc.mov_mr(A_ROW, A_PTR),
                     enc.mov_rm(A_PTR, B_ORIGIN), enc.add_ri(A_PTR, steps * p.bytes),
                     enc.mov_mr(B_ORIGIN, A_PTR))
        else:
            _, a_step, b_step = self.batch
            entries = count * (self.br // chunks)
            steps = entries * self.k                     # a dot tail's copied k-steps
            self.asm(enc.imul_rri(scratch, LDA, self.k), enc.add_rr(scratch, a_step),
                     enc.imul_rri(scratch, scratch, entries), enc.mov_rm(A_PTR, A_ROW),
                     enc.add_rr(A_PTR, scratch), enc.mov_mr(A_ROW, A_PTR),
                     enc.mov_rr(scratch, b_step), enc.add_ri(scratch, self.k * p.bytes),
                     enc.imul_rri(scratch, scratch, entries), enc.mov_rm(A_PTR, B_ORIGIN),
                     enc.add_rr(A_PTR, scratch), enc.mov_mr(B_ORIGIN, A_PTR))
        if self.dot_panel:
            share = self.dot_panel.mode.dot
            self.asm(enc.mov_rm(A_PTR, self.dot_origin),
                     enc.add_ri(A_PTR, steps * share * p.bytes),
                     enc.mov_mr(self.dot_origin, A_PTR))

    def _next_columns(self, cols: int, b: bool = True, c: bool = True) -> None:
        """Move B_COL (b) and C_PTR (c) `cols` columns on (A_PTR is free here: a scratch)."""
        scratch = self.counter
        if b:
            self.asm(enc.mov_rm(A_PTR, B_COL), enc.imul_rri(scratch, LDB, cols),
                     enc.add_rr(A_PTR, scratch), enc.mov_mr(B_COL, A_PTR))
        if c:
            self.asm(self._c_columns(cols))

    def _c_columns(self, cols: int) -> bytes:
        """C_PTR `cols` columns on (the K counter as scratch)."""
        return enc.imul_rri(self.counter, LDC, cols) + enc.add_rr(C_PTR, self.counter)

    # -- one register block

    def _block(self, panel: Panel, cols: int, accumulate: bool, k: int) -> None:
        regs = self._registers(panel, cols)
        self._compute(panel, regs, k)
        self._update_c(regs, phases=(0, 1) if accumulate else (1,))

    def _registers(self, panel: Panel, cols: int, bank: int = 0,
                   carried: bool = False, widest: frozenset[int] = frozenset()
                   ) -> BlockRegisters:
        mode = panel.mode if panel.mode.quads <= cols else replace(panel.mode, quads=cols)
        return BlockRegisters(self.target, panel.vectors, cols, panel.tail_rows, mode, self.p,
                                bank, carried, widest)

    def _compute(self, panel: Panel, regs: BlockRegisters, k: int,
                 carry: list[bytes] | None = None) -> None:
        """The block's accumulators := its sums over K and the batch; carry: instructions
        (the previous block's update of C) to spread over the first k-steps."""
        asm = self.asm
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_rm(B_BASE, B_COL))
        if panel.mode.dot:
            asm(enc.mov_rm(self.a_tail, self.dot_origin))
        bases = self.bases[:-(-regs.cols // COLUMNS_PER_BASE)]
        for previous, base in zip(bases, bases[1:]):
            asm(enc.lea(base, Mem(previous, LDB, 4)), enc.add_rr(base, LDB))
        self._load_tail_roles(regs)
        asm(ins.zero(acc) for acc in regs.accumulators())
        if self.batch is None:
            self._k_loop(regs, bases, k, carry)
        else:
            batch_counter, a_step, b_step = self.batch
            with asm.counted_loop(batch_counter, self.br // self.chunks[panel]):
                self._k_loop(regs, bases, k)
                asm(enc.add_rr(A_PTR, a_step), *(enc.add_rr(base, b_step) for base in bases))

    def _load_tail_roles(self, regs: BlockRegisters) -> None:
        """The AVX2 tail's mask vector, AVX-512's packed tail's lane indices, into their
        registers (see _set_tail_masks)."""
        width = self.target.vector_bits
        if regs.mask_vector is not None:
            self.asm(enc.vmovups_load(regs.mask_vector, MASK_SLOT, width))
        if regs.indices is not None:
            self.asm(enc.vmovups_load(regs.indices, INDEX_SLOT, width))

    def _update_c(self, regs: BlockRegisters, phases: tuple[int, ...]) -> None:
        self.asm(self._update_code(regs, phases))

    def _update_code(self, regs: BlockRegisters, phases: tuple[int, ...],
                     columns: range | None = None) -> list[bytes]:
        """After the K loop, phase 0: the accumulators += C; phase 1: C := the accumulators
        (of `columns` only: a skewed slot's, see _emit_skewed; None: every column).
        C is added at the end, not loaded first: no FMA then waits for a load of C, which
        may wait for a store of C still on its way to the cache (the previous call's, or the
        previous chunk's). Measured on Zen 4, K = 16: 16x16 76 -> 98% of peak, 8x24 68 ->
        78%; K = 64: 16x16 91 -> 99.6%. All loads of C of a block come before its first
        store: a load overlapping the span of an earlier masked store (a packed column's
        reaches into the next column) would wait for it, and an overlapping tail must read C
        before its neighbour's store. The walker is the K counter: free outside the K loop."""
        walker = self.counter
        next_column = enc.add_rr(walker, LDC)
        columns = columns or range(regs.cols)
        code = (regs.sum_dot_lanes() if regs.dot else regs.sum_pairs(columns) if regs.pairs
                else [])
        for move, move_packed in (self._moves(regs, phase) for phase in phases):
            code += ([enc.imul_rri(walker, LDC, columns.start), enc.add_rr(walker, C_PTR)]
                     if columns.start else [enc.mov_rr(walker, C_PTR)])
            for j in columns:
                accs = regs.acc[j]
                if j > columns.start:
                    code.append(next_column)
                # a column's vectors of C (in step pairs the second accumulator is scratch)
                code.extend(move(acc, Mem(walker, disp=regs.offset(i)), i)
                            for i, acc in enumerate(accs[:regs.column_vectors]))
                if regs.packed_acc:
                    code.append(move_packed(walker, *regs.packed_position(j)))
        return code

    def _moves(self, regs: BlockRegisters, phase: int) -> tuple:
        """(a vector's move, a packed tail's move) of an update's phase: 0 adds C, 1 stores
        it (non-temporally while streaming)."""
        if phase == 0:
            return regs.add, regs.add_packed
        return regs.stream if self.streaming else regs.store, regs.store_packed

    def _k_loop(self, regs: BlockRegisters, bases: tuple[Reg, ...], k: int,
                carry: list[bytes] | None = None) -> None:
        """k k-steps; the loop body is one k (unrolling K gained nothing measurable and
        doubles the generation time). A block with quad columns runs the steps four at a
        time (each quad loaded once for them), then the k % 4 left alone. carry:
        instructions spread over the first k-steps, CoreRules.carried_per_step a step, those
        steps unrolled; what K leaves over follows the loop."""
        carry = carry or []
        for steps, count, body in self._k_runs(regs, bases, k):
            while count and carry:
                share = rules(self.target).carried_per_step * steps
                self.asm(body, *carry[:share])
                carry, count = carry[share:], count - 1
            if count:
                with self.asm.counted_loop(self.counter, count):
                    self.asm(body)
        self.asm(carry)

    def _k_runs(self, regs: BlockRegisters, bases: tuple[Reg, ...],
                k: int) -> list[tuple[int, int, bytes]]:
        """The K loop as runs of (k-steps an iteration, iterations, the iteration's code)."""
        step_bytes = self.p.bytes
        if regs.pairs:
            return [(PAIR_STEPS, k // PAIR_STEPS, b"".join(
                [self._pair_step(regs, bases),
                 *(enc.add_ri(base, PAIR_STEPS * step_bytes) for base in bases)]))]
        if regs.dot:                   # whole vectors of a dot tail's k-steps at a time
            steps = regs.dot_steps
            return [(steps, k // steps, b"".join(
                [enc.vmovups_load(regs.a_tail, Mem(self.a_tail), 256),
                 enc.add_ri(self.a_tail, 32),
                 *(self._k_step(regs, bases, step) for step in range(steps)),
                 self._dot_step(regs, bases),
                 *(enc.add_ri(base, steps * step_bytes) for base in bases)]))]
        single = b"".join([self._k_step(regs, bases),
                           *(enc.add_ri(base, step_bytes) for base in bases)])
        if not regs.quads:
            return [(1, k, single)]
        quads = b"".join([*(enc.vbroadcastf128(quad, self._b_address(bases, j))
                            for j, quad in regs.quad_columns()),
                          *(self._k_step(regs, bases, step) for step in range(4)),
                          *(enc.add_ri(base, 4 * step_bytes) for base in bases)])
        return [(4, k // 4, quads), (1, k % 4, single)]

    def _b_element(self, regs: BlockRegisters, bases: tuple[Reg, ...], j: int, dst: int,
                   step: int | None) -> bytes:
        """dst := B[k, j] in every lane, k `step` steps past the bases (None: at them, no
        quads): from column j's quad by a shuffle, or a broadcast load."""
        if step is not None and j in regs.quad_of:
            quad = regs.quad_of[j]
            return enc.vshufps(dst, quad, quad, 0x55 * step, self.target.vector_bits)
        mem = self._b_address(bases, j, (step or 0) * self.p.bytes)
        return ins.broadcast(dst, mem, self.target.vector_bits, self.p)

    def _k_step(self, regs: BlockRegisters, bases: tuple[Reg, ...],
                step: int | None = None) -> bytes:
        """One k: load A's column and move A on, then every column's FMAs (B `step` steps
        past the bases, see _b_element). Nothing for a dot tail alone (no full vector)."""
        if not regs.a:
            return b""
        code = self._a_column(regs)
        for j in range(regs.cols):
            code += self._column_step(regs, bases, j, step)
        return b"".join(code)

    def _a_column(self, regs: BlockRegisters) -> list[bytes]:
        """Load A's column k into A's registers and move A_PTR on a step."""
        code = [regs.load(a_reg, Mem(A_PTR, disp=regs.offset(i)), i)
                for i, a_reg in enumerate(regs.a)]
        code.append(enc.add_rr(A_PTR, LDA))
        if regs.indices is not None:
            code.append(ins.permute(regs.a[-1], regs.indices, self.target.vector_bits))
        return code

    def _column_step(self, regs: BlockRegisters, bases: tuple[Reg, ...], j: int,
                     step: int | None) -> list[bytes]:
        """Column j's FMAs of a k-step (B `step` steps past the bases, see _b_element): one
        a vector of A; in a packed tail's group, B's element blended into the group's packed
        B vector, and after a group's last column the packed tail's FMA."""
        width, p, accs = self.target.vector_bits, self.p, regs.acc[j]
        if regs.group > 1:
            q, s = regs.packed_position(j)
            first, last = j % regs.group == 0, s == 0
            # a group's first element goes straight into the packed B vector
            b_reg = regs.packed_b if first else regs.broadcast
            code = [self._b_element(regs, bases, j, b_reg, step),
                    *(ins.fma(acc, a_reg, b_reg, width, False, p)
                      for acc, a_reg in zip(accs, regs.a))]
            if not first:
                code.append(regs.blend(s))
            if last:
                code.append(ins.fma(regs.packed_acc[q], regs.a[-1], regs.packed_b, width, False,
                                 p))
            return code
        if regs.broadcast is None:              # AVX-512, one vector: no quads here
            mem = self._b_address(bases, j, (step or 0) * p.bytes)
            return [ins.fma(accs[0], regs.a[0], mem, width, True, p)]
        return [self._b_element(regs, bases, j, regs.broadcast, step),
                *(ins.fma(acc, a_reg, regs.broadcast, width, False, p)
                  for acc, a_reg in zip(accs, regs.a))]

    def _pair_step(self, regs: BlockRegisters, bases: tuple[Reg, ...]) -> bytes:
        """Two k-steps of a block in pairs (see PAIR_STEPS): A's columns k and k+1 unpacked
        into rows {0, 1, 4, 5} and {2, 3, 6, 7} of both steps, A moved on two steps, then
        every column's B[k..k+1, j] repeated over a vector and its two FMAs."""
        return b"".join([*self._pair_a(regs),
                         *(code for j in range(regs.cols)
                           for code in self._pair_column(regs, bases, j, 0))])

    def _pair_a(self, regs: BlockRegisters) -> list[bytes]:
        """A's part of a step pair: its tail rows (if any), columns k and k+1 unpacked, A
        moved on two steps."""
        low, high = regs.a
        b_reg = regs.broadcast
        code = [self._pair_tail_a(regs)] if regs.packed_acc else []
        return code + [enc.vmovups_load(low, Mem(A_PTR), 256),
                       enc.vmovups_load(b_reg, Mem(A_PTR, LDA), 256),
                       enc.vunpckhps(high, low, b_reg, 256), enc.vunpcklps(low, low, b_reg, 256),
                       enc.lea(A_PTR, Mem(A_PTR, LDA, 2))]

    def _pair_column(self, regs: BlockRegisters, bases: tuple[Reg, ...], j: int,
                     disp: int) -> list[bytes]:
        """Column j's part of a step pair, B `disp` bytes past the bases: its B pair, two
        FMAs, its share of a packed tail's B and, for a group's last column, the tail's FMA."""
        low, high = regs.a
        b_reg, accs = regs.broadcast, regs.acc[j]
        mem = self._b_address(bases, j, disp)
        if not regs.packed_acc:
            return [ins.broadcast_rows(b_reg, mem, PAIR_STEPS),
                    ins.fma(accs[0], low, b_reg, 256, False),
                    ins.fma(accs[1], high, b_reg, 256, False)]
        # a tail in pairs: a group's first B pair goes straight into the packed B vector
        q, s = regs.packed_position(j)
        first = regs.group > 1 and j % regs.group == 0
        pair = regs.packed_b if first else b_reg
        code = [ins.broadcast_rows(pair, mem, PAIR_STEPS),
                ins.fma(accs[0], low, pair, 256, False), ins.fma(accs[1], high, pair, 256, False)]
        if regs.group > 1 and not first:
            code.append(regs.blend(s))
        if s == 0:
            code.append(ins.fma(regs.packed_acc[q], regs.a_tail,
                             regs.packed_b if regs.group > 1 else b_reg, 256, False))
        return code

    def _pair_tail_a(self, regs: BlockRegisters) -> bytes:
        """regs.a_tail := A's tail rows (the last p = regs.share) of columns k and k+1, lane
        2r + q of each share holding row r of step k + q ('high' and the broadcast register
        are free before the step's A is loaded)."""
        p, a_tail, free, spare = regs.share, regs.a_tail, regs.a[1], regs.broadcast
        step_k, step_next = Mem(A_PTR, disp=regs.share_offset()), Mem(A_PTR, LDA,
                                                                       disp=regs.share_offset())
        if p < 4:                    # the p rows repeated, then interleaved step by step
            return (ins.broadcast_rows(a_tail, step_k, p) + ins.broadcast_rows(free, step_next, p)
                    + enc.vunpcklps(a_tail, a_tail, free, 256))
        return (enc.vmovups_load(a_tail, step_k, 128) + enc.vmovups_load(free, step_next, 128)
                + enc.vunpckhps(spare, a_tail, free, 128)          # rows 2, 3
                + enc.vunpcklps(a_tail, a_tail, free, 128)         # rows 0, 1
                + enc.vinsertf128(a_tail, a_tail, spare, 1))

    def _dot_step(self, regs: BlockRegisters, bases: tuple[Reg, ...]) -> bytes:
        """The dot tail's FMAs for the k-steps of one vector: each column's accumulator +=
        A's tail rows (regs.a_tail) times B[k..k+g-1, j] repeated over the vector: straight
        from memory for g = 8, else by a broadcast load of 16 or 8 bytes."""
        code = []
        for j, accs in enumerate(regs.acc):
            mem = self._b_address(bases, j)
            if regs.dot_steps == 8:
                code.append(ins.fma(accs[-1], regs.a_tail, mem, 256, False))
                continue
            b_reg = regs.broadcast
            code += [ins.broadcast_rows(b_reg, mem, regs.dot_steps),
                     ins.fma(accs[-1], regs.a_tail, b_reg, 256, False)]
        return b"".join(code)

    def _b_address(self, bases: tuple[Reg, ...], j: int, disp: int = 0) -> Mem:
        """Column j of B, `disp` bytes past the bases."""
        base, offset = bases[j // COLUMNS_PER_BASE], j % COLUMNS_PER_BASE
        if offset == 0:
            return Mem(base, disp=disp)
        if offset == 3:
            return Mem(base, self.ldb3, disp=disp)
        return Mem(base, LDB, offset, disp)


def emit_brgemm(asm: Assembler, target: Target, m: int, n: int, k: int, br_size: int,
                dtype: str = "float32", accumulate: bool = True, stream: bool = False,
                ld_b: int | None = None) -> Label:
    """Emit the function brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) at the
    current position of `asm` and return its entry: C (m×n) += sum over br_size of
    A_i (m×k) B_i (k×n), column-major `dtype` (float32 or float64). A leaf function: it keeps
    data in the red zone (and, with a dot tail, in a stack frame of its own).
    accumulate=False: C := the sum, C never read (the accumulators start at +0: the bits
    C += gives on a zeroed C).

    stream=True (only with accumulate=False): when every block row of the blocking is whole
    cache lines tall (no tail rows) and C and ld_c are 64-byte aligned at run time, C is
    stored non-temporally, whole lines only (no read for ownership, not kept in the caches:
    for outputs far larger than the caches); the caller issues the sfence before other
    threads read C. The K = 1 outer-product kernel, a kernel whose K runs in chunks
    (k_chunks: it reads C back between them) and any other blocking store as usual.

    ld_b: the leading dimension of B (elements) the caller will pass, when it is known now;
    the blocking then keeps B's columns within L1's ways (b_column_limit). Calls with any
    other ld_b compute the same."""
    if stream and accumulate:
        raise KernelParameterError("brgemm stream=True needs accumulate=False (a streamed C "
                                   "is not read back)")
    elements = precision(dtype)
    unmasked = unmasked_target(target, m, elements.bytes, k)
    if OuterProduct.applies(unmasked, m, k, br_size, unmasked.lanes(elements.bytes)):
        return OuterProduct(asm, unmasked, m, n, elements, accumulate).emit()
    return _Generator(asm, target, m, n, k, br_size, elements, accumulate, stream,
                      ld_b).emit()


def generate_brgemm(target: Target, m: int, n: int, k: int, br_size: int,
                    dtype: str = "float32", accumulate: bool = True,
                    stream: bool = False, ld_b: int | None = None) -> bytes:
    """The code of emit_brgemm as a buffer of its own."""
    asm = Assembler()
    emit_brgemm(asm, target, m, n, k, br_size, dtype, accumulate, stream, ld_b)
    return asm.finish()
