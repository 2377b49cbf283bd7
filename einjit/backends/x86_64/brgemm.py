"""x86-64 BRGEMM generator: C += sum_i A_i B_i for column-major FP32/FP64, AVX-512 or AVX2/FMA.

Kernel ABI (System V): brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b), leading
dimensions and batch strides in elements; M, N, K and the batch size are compile-time.

This module is the kernel's loop structure: the prologue (arguments scaled to bytes, the
stack frame, the tail masks, a dot tail's copy of A), the panels of the plan (blocking.py)
row by row, K or the batch in chunks, a block row's optional copy of A's panel, and its sweep
along N as runs of blocks, each run plain, pipelined or skewed (schedule.py). One register
block's code is microkernel.py's; K = 1 without a batch is outer_product.py's. The design is
described in docs/brgemm.md.
"""
from __future__ import annotations

from einjit.backends import LINE_BYTES, Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64 import instructions as ins
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.blocking import (
    COLUMNS_PER_BASE,
    DOT_LANE_BYTES,
    Panel,
    batch_chunks,
    choose,
    dot_b_whole,
    dot_steps,
    k_chunks,
    packs_a,
    unmasked_target,
)
from einjit.backends.x86_64.complex_brgemm import emit_complex_brgemm, is_complex
from einjit.backends.x86_64.encode import RSP, Mem
from einjit.backends.x86_64.frame import (
    A_AHEAD,
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
from einjit.backends.x86_64.microkernel import Microkernel
from einjit.backends.x86_64.outer_product import OuterProduct
from einjit.backends.x86_64.precision import FLOAT32, Precision, precision
from einjit.backends.x86_64.schedule import (
    can_carry,
    can_pipeline,
    can_skew,
    emit_pipelined,
    emit_skewed,
    sequences,
    slots,
)
from einjit.errors import KernelParameterError


class _Generator:
    def __init__(self, asm: Assembler, target: Target, m: int, n: int, k: int, br: int,
                 elements: Precision = FLOAT32, accumulate: bool = True,
                 stream: bool = False, ld_b: int | None = None, far_c: int = 0,
                 next_call: tuple[int, int, int] | None = None) -> None:
        self.asm, self.m, self.k, self.br, self.accumulate = asm, m, k, br, accumulate
        self.p = elements
        # C from beyond L2 (far_c: its ld): each block prefetches the C of the block a row
        # below it (where C is set, not added to, for its stores) and its share of the next
        # row's A, K runs whole (each chunk would read C again), and a block's C lines stay
        # within L1's sets (c_column_limit)
        self.far_c = far_c
        self.target, self.panels = choose(m, n, k, br, target, elements.dtype, ld_b,
                                          whole_k=bool(self.far_c),
                                          far_ld_c=self.far_c or None)
        self.dot_panel = next((panel for panel in self.panels if panel.mode.dot), None)
        # code planned for 16 vector registers on a core with 32: the upper 16 hold a second
        # set of accumulators (see schedule.emit_pipelined)
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
        # C streams only in whole cache lines: every block row whole lines tall, no tail (a
        # line written partly by non-temporal stores, the rest later by the next block row's
        # or by a tail's cached store, ran several times slower than cached stores)
        whole_lines = all(not panel.tail_rows
                          and panel.vectors * self.target.vector_bits % (8 * LINE_BYTES) == 0
                          for panel in self.panels)
        chunked = any(chunks > 1 for chunks in self.chunks.values())
        self.stream = stream and not chunked and whole_lines
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
        self.dot_bytes = (br * k * self.dot_panel.mode.dot * DOT_LANE_BYTES if self.dot_panel
                          else 0)
        self.dot_origin = Mem(RSP, disp=self.dot_bytes)
        self.packs = {panel: packs_a(self.target, panel, k // self.chunks[panel], br,
                                     elements.bytes) for panel in self.panels}
        pack_bytes = max((self._row_bytes(panel) * (k // self.chunks[panel])
                          for panel in self.panels if self.packs[panel]), default=0)
        saves = self.dot_bytes + 32 if self.dot_panel else 0
        self.saved_a_row, self.saved_lda = Mem(RSP, disp=saves), Mem(RSP, disp=saves + 8)
        self.pack_buffer = saves + 16
        self.frame = self.pack_buffer + LINE_BYTES + pack_bytes if pack_bytes else saves
        # the next call's blocks (next_call, without a batch or far_c): its A where no row
        # copies A (LDA then points at the copy), its C, its B from a walker in the frame
        # (after the rest of it)
        a_next, b_next, self.c_next = (next_call if br == 1 and not self.far_c and next_call
                                       else (0, 0, 0))
        self.a_next = a_next if not any(self.packs.values()) else 0
        self.b_next = None
        if b_next:
            sweeps = sum(panel.blocks * self.chunks[panel] * sum(c for c, _ in panel.runs())
                         for panel in self.panels)
            self.b_next = (b_next, k * elements.bytes, -(-n // sweeps), Mem(RSP, disp=self.frame))
            self.frame += 8
        bases = -(-widest // COLUMNS_PER_BASE)
        assert len(pool) >= bases - 1, "too few general registers for B's bases"
        self.bases = (B_BASE,) + tuple(pool[:bases - 1])
        self.kernel = Microkernel(asm, self.target, elements, self.counter, self.ldb3,
                                  self.bases, self.batch, self.a_tail, self.dot_origin)
        self.pipelining = {panel: can_pipeline(panel, self.spare_bank, br, self.chunks[panel])
                           for panel in self.panels}
        # a skewed run (see schedule.emit_skewed) also reads the previous block's columns of B
        self.skewing = {panel: can_skew(panel, self.spare_bank, br, self.chunks[panel])
                        for panel in self.panels}
        if len(pool) < 2 * bases - 1 or not any(
                self._run_is_skewed(panel, blocks, cols, k)
                for panel in self.panels for blocks, cols in panel.runs()):
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
        if self.b_next:
            asm(enc.mov_mr(self.b_next[3], B_BASE))
        self.kernel.b_next = self.b_next
        self._set_tail_masks()
        if self.dot_panel:
            self._dot_a_tail()
        if self.stream:
            # whole lines: C and ld_c (bytes) line-aligned, else the cached body
            cached, done = asm.label(), asm.label()
            asm(enc.mov_rr(self.counter, C_PTR), enc.or_rr(self.counter, LDC),
                enc.and_ri(self.counter, LINE_BYTES - 1))
            asm.jcc("ne", cached)
            self.kernel.streaming = True
            for panel in self.panels:
                self._panel(panel)
            self.kernel.streaming = False
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
        stores waits for them to reach the cache (a packed tail's mask windows straddle two
        stores, but the first is loaded after a whole block's K loop)."""
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

    def _dot_a_tail(self) -> None:
        """Where the dot tail reads A's tail rows from: a copy in the frame, or for an M of
        one row that takes one lane a k-step (see dot_b_whole) A itself where the row's
        k-steps lie side by side (ld_a of one element, and a batch's entries one after
        another), as in a matrix times a vector."""
        if self.m != 1 or not dot_b_whole(self.dot_panel.mode.dot, self.p.bytes):
            self._copy_a_tail()
            return
        asm = self.asm
        copy, done = asm.label(), asm.label()
        asm(enc.cmp_ri(LDA, self.p.bytes))
        asm.jcc("ne", copy)
        if self.batch is not None:
            a_step = self.batch[1]
            asm(enc.test_rr(a_step, a_step))
            asm.jcc("ne", copy)
        asm(enc.mov_mr(self.dot_origin, A_PTR))
        asm.jmp(done)
        asm.bind(copy)
        self._copy_a_tail()
        asm.bind(done)

    def _copy_a_tail(self) -> None:
        """Copy the dot tail's rows of A (every batch entry's) into the frame, a vector of g
        k-steps at a time: lane r*g + q holds row r of step q, rows past M zero (past 4 rows:
        copies of rows, whose sums are never stored; a float64 row: its element q, step q;
        A_PTR is free here: the blocks reload it from A_ROW)."""
        asm, walker = self.asm, self.a_tail
        rows = self.dot_panel.tail_rows
        steps = dot_steps(self.dot_panel.mode.dot)
        asm(enc.mov_rr(walker, RSP), enc.mov_mr(self.dot_origin, walker),
            enc.add_ri(A_PTR, (self.m - rows) * self.p.bytes))
        code = []
        dwords = rows * self.p.bytes // DOT_LANE_BYTES
        for q in range(steps):                 # register q := the rows of step q
            code += [ins.load_column(q, Mem(A_PTR), dwords, 12), enc.add_rr(A_PTR, LDA)]
        # a transpose of rows x steps: xmm 8 := the lower four lanes, xmm 9 or 10 the upper
        if self.p.bytes == 8:                  # one row: its 4 steps side by side
            code += [enc.vunpcklpd(8, 0, 1, 128), enc.vunpcklpd(10, 2, 3, 128)]
        elif steps == 1:                       # already a vector of rows
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
        self.kernel.c_ahead = row_bytes if self.far_c else 0
        self.kernel.c_next = (self.c_next, row_bytes) if self.c_next else None
        # without a batch the blocks of a row share out the prefetch of the next row's A (or
        # of the next call's rows); not where a row may read a copy of A, whose own loads
        # fetch it (prefetches walking the real ld_a then measured slower)
        blocks = sum(count for count, _ in panel.runs())
        ahead = row_bytes if self.far_c and self.br == 1 else self.a_next
        self.kernel.a_ahead = ((ahead, row_bytes, -(-steps // blocks))
                               if ahead and not self.packs[panel] else None)
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
        packs_a) and ld_a is a multiple of the core's conflict pitch, from a copy of the row's k
        steps of A in the frame, whose pitch is the row's height (A_ROW and LDA point at it
        meanwhile): the blocks read the same elements, the sums are bit for bit alike."""
        if not self.packs[panel]:
            if self.kernel.a_ahead:
                self.asm(enc.mov_rm(self.counter, A_ROW), enc.mov_mr(A_AHEAD, self.counter))
            self._columns(panel, accumulate, k)
            return
        asm, scratch, p = self.asm, self.counter, self.p
        width, row_bytes = self.target.vector_bits, self._row_bytes(panel)
        direct = asm.label()
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_mr(self.saved_a_row, A_PTR),
            enc.mov_mr(self.saved_lda, LDA), enc.mov_rr(scratch, LDA),
            enc.and_ri(scratch, self.target.micro.conflict_pitch_bytes - 1))
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
        pipelines = self.pipelining[panel]
        runs = sequences(panel) if pipelines else [panel.runs()]
        for index, sequence in enumerate(runs):
            if pipelines and sum(blocks for blocks, _ in sequence) > 1 and \
                    all(can_carry(self.kernel, panel, cols) for _, cols in sequence):
                emit_pipelined(self.kernel, panel, sequence, accumulate, k, self.spare_bank)
                continue
            for position, (blocks, cols) in enumerate(sequence):
                last = index == len(runs) - 1 and position == len(sequence) - 1
                if self._run_is_skewed(panel, blocks, cols, k):
                    emit_skewed(self.kernel, panel, blocks, cols, accumulate, k,
                                self.previous_bases)
                else:
                    self._run(panel, blocks, cols, accumulate, k, last)

    def _run(self, panel: Panel, blocks: int, cols: int, accumulate: bool, k: int,
             last: bool) -> None:
        """`blocks` blocks of `cols` columns, each updating C after its K loop (last: the
        row's last run; its single block moves nothing on)."""
        if blocks == 1 and last:
            self.kernel.block(panel, cols, accumulate, k, self._entries(panel))
            return
        with self.asm.counted_loop(N_COUNT, blocks, align=1, scratch=self.counter):
            self.kernel.block(panel, cols, accumulate, k, self._entries(panel))
            self.kernel.next_columns(cols)          # past the last block: harmless, reset per row

    def _run_is_skewed(self, panel: Panel, blocks: int, cols: int, k: int) -> bool:
        """Whether a run of `blocks` blocks of `cols` columns is skewed: two blocks or more,
        two slots or more."""
        return self.skewing[panel] and blocks > 1 and len(slots(panel, cols, k)) > 1

    def _entries(self, panel: Panel) -> int:
        """Batch entries a block of the panel runs at once (a chunk of the batch)."""
        return self.br // self.chunks[panel]

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
                     enc.add_ri(A_PTR, steps * share * DOT_LANE_BYTES),
                     enc.mov_mr(self.dot_origin, A_PTR))

def emit_brgemm(asm: Assembler, target: Target, m: int, n: int, k: int, br_size: int,
                dtype: str = "float32", accumulate: bool = True, stream: bool = False,
                ld_b: int | None = None, far_c: int = 0,
                next_call: tuple[int, int, int] | None = None) -> Label:
    """Emit the function brgemm(a, b, c, ld_a, ld_b, ld_c, br_stride_a, br_stride_b) at the
    current position of `asm` and return its entry: C (m×n) += sum over br_size of
    A_i (m×k) B_i (k×n), column-major `dtype` (float32 or float64; complex64 and complex128
    are complex_brgemm.py's kernel). A leaf function: it keeps
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
    other ld_b compute the same.

    far_c (0: none): C's leading dimension (elements) the caller will pass, as its hint that
    C comes from beyond L2 on every call (a loop nest that revisits each C block only after
    others, einjit.passes.block; without accumulate, the first of those visits, which sets
    C): each register block prefetches into L2 the C of the block a block row below it (the
    next call's first row, past the last; without accumulate, for the stores) and,
    without a batch, its share of the next block row's A (Microkernel.prefetch_ahead), the
    blocking keeps K whole (choose's whole_k: K in chunks would read the C of each row again
    per chunk) and each block's lines of C within L1's sets (c_column_limit). The sums are
    those of the kernel without the hint where both run K whole; calls with any other ld_c
    compute the same.

    next_call (without a batch or far_c; None: none): the bytes from this call's A, B and C
    to the next call's blocks of the same shape, each 0 where not wanted, as the caller's
    hint that its operands stream from beyond L2 (einjit.codegen.loop_nest): the register
    blocks share out prefetches into L2 of the next call's A (as a far_c row's of the next
    row, not where a row copies A), B (a walker in the frame) and C (each block its own
    columns, that many bytes on). Prefetches never fault and change no result."""
    if stream and accumulate:
        raise KernelParameterError("brgemm stream=True needs accumulate=False (a streamed C "
                                   "is not read back)")
    if is_complex(dtype):
        return emit_complex_brgemm(asm, target, m, n, k, br_size, dtype, accumulate, stream)
    elements = precision(dtype)
    unmasked = unmasked_target(target, m, elements.bytes, k)
    if OuterProduct.applies(unmasked, m, k, br_size, unmasked.lanes(elements.bytes)):
        return OuterProduct(asm, unmasked, m, n, elements, accumulate).emit()
    return _Generator(asm, target, m, n, k, br_size, elements, accumulate, stream,
                      ld_b, far_c, next_call).emit()


def generate_brgemm(target: Target, m: int, n: int, k: int, br_size: int,
                    dtype: str = "float32", accumulate: bool = True,
                    stream: bool = False, ld_b: int | None = None,
                    far_c: int = 0, next_call: tuple[int, int, int] | None = None) -> bytes:
    """The code of emit_brgemm as a buffer of its own."""
    asm = Assembler()
    emit_brgemm(asm, target, m, n, k, br_size, dtype, accumulate, stream, ld_b, far_c,
                next_call)
    return asm.finish()
