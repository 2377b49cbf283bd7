"""The code of one x86-64 BRGEMM register block, the microkernel: its accumulators zeroed,
its K loop (one k-step, four with B's quads, two in step pairs, a vector of a dot tail's
k-steps at a time) inside the batch loop, and its update of C; and the moves of B_COL and
C_PTR from one block to the next. What the block's registers hold is block_registers'; the
loops over blocks are brgemm's and schedule's."""
from __future__ import annotations

from dataclasses import replace

from einjit.backends import LINE_BYTES, Target
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64 import instructions as ins
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.block_registers import BlockRegisters
from einjit.backends.x86_64.blocking import COLUMNS_PER_BASE, PAIR_STEPS, Panel, dot_b_whole
from einjit.backends.x86_64.encode import Mem, Reg
from einjit.backends.x86_64.frame import (
    A_AHEAD,
    A_PTR,
    A_ROW,
    B_BASE,
    B_COL,
    C_PTR,
    INDEX_SLOT,
    LDA,
    LDB,
    LDC,
    MASK_SLOT,
)
from einjit.backends.x86_64.precision import Precision
from einjit.backends.x86_64.tuning import rules

L2_PREFETCH = enc.prefetcht1     # lines of C and A wanted a block or a row on go to L2


class Microkernel:
    """Emits register blocks into `asm`. counter: the K counter (scratch outside the K loop);
    ldb3: the register holding 3 * ld_b (None: no block has a 4th column); bases: B's base
    pointers; batch: (counter, A step, B step) of a batch loop, or None; a_tail, dot_origin:
    the register walking a dot tail's copy of A and the frame slot it starts from (None
    without a dot tail). streaming: C's whole vectors are stored non-temporally. c_ahead:
    where nonzero, each block first prefetches into L2 the lines of C this many bytes below
    its own (the block a block row on, see prefetch_c); c_next: where set, (bytes, row
    bytes), the lines of the block that many bytes on instead (the next call's). a_ahead
    and b_next: the shares of A's and B's lines each block prefetches (prefetch_a,
    prefetch_b)."""

    def __init__(self, asm: Assembler, target: Target, elements: Precision, counter: Reg,
                 ldb3: Reg | None, bases: tuple[Reg, ...],
                 batch: tuple[Reg, Reg, Reg] | None, a_tail: Reg | None,
                 dot_origin: Mem) -> None:
        self.asm, self.target, self.p = asm, target, elements
        self.counter, self.ldb3, self.bases, self.batch = counter, ldb3, bases, batch
        self.a_tail, self.dot_origin = a_tail, dot_origin
        self.streaming = False
        self.c_ahead = 0
        self.c_next: tuple[int, int] | None = None
        self.a_ahead: tuple[int, int, int] | None = None
        self.b_next: tuple[int, int, int, Mem] | None = None

    def block(self, panel: Panel, cols: int, accumulate: bool, k: int, entries: int = 1) -> None:
        """A block of `cols` columns at B_COL and C_PTR: its sums over K (and `entries` batch
        entries), then its update of C."""
        regs = self.registers(panel, cols)
        self.compute(panel, regs, k, entries)
        self.update_c(regs, phases=(0, 1) if accumulate else (1,))

    def registers(self, panel: Panel, cols: int, bank: int = 0,
                   carried: bool = False, widest: frozenset[int] = frozenset()
                   ) -> BlockRegisters:
        mode = panel.mode if panel.mode.quads <= cols else replace(panel.mode, quads=cols)
        return BlockRegisters(self.target, panel.vectors, cols, panel.tail_rows, mode, self.p,
                                bank, carried, widest)

    def compute(self, panel: Panel, regs: BlockRegisters, k: int, entries: int = 1,
                carry: list[bytes] | None = None, c_offset: int = 0) -> None:
        """The block's accumulators := its sums over K and the batch; carry: instructions
        (the previous block's update of C) to spread over the first k-steps; entries: the
        batch entries it runs (a chunk of the batch); c_offset: the block's columns past
        C_PTR (a pipelined block's: C_PTR still on the previous block)."""
        asm = self.asm
        self.prefetch_ahead(regs.cols, c_offset)
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_rm(B_BASE, B_COL))
        if panel.mode.dot:
            asm(enc.mov_rm(self.a_tail, self.dot_origin))
        bases = self.bases[:-(-regs.cols // COLUMNS_PER_BASE)]
        for previous, base in zip(bases, bases[1:]):
            asm(enc.lea(base, Mem(previous, LDB, 4)), enc.add_rr(base, LDB))
        self.load_tail_roles(regs)
        asm(ins.zero(acc) for acc in regs.accumulators())
        if self.batch is None:
            self.k_loop(regs, bases, k, carry)
        else:
            batch_counter, a_step, b_step = self.batch
            with asm.counted_loop(batch_counter, entries):
                self.k_loop(regs, bases, k)
                asm(enc.add_rr(A_PTR, a_step), *(enc.add_rr(base, b_step) for base in bases))

    def prefetch_ahead(self, cols: int, c_offset: int = 0) -> None:
        """A block's prefetches before its K loop, where a far C or the next call asks for
        them: C's (prefetch_c), A's (prefetch_a), B's (prefetch_b)."""
        self.prefetch_c(cols, c_offset)
        self.prefetch_a()
        self.prefetch_b()

    def prefetch_c(self, cols: int, c_offset: int = 0) -> None:
        """Where c_ahead is set: prefetch into L2 the c_ahead bytes of each of the block's
        columns that lie c_ahead bytes below its own rows (C_PTR's block, `c_offset` columns
        on), the last byte's line too (C's columns need not start on a line); on a core whose
        L3 is far (far_llc), those of the `cols` columns after the block's, at its own rows
        (the next block's, if as wide). Issued a block row or a block ahead of its loads, so
        that C coming from L3 or memory arrives in time; into L2, not L1: with a pitch of a
        power of two, a block's columns share few of L1's sets. Where c_next = (bytes, row
        bytes) is set instead: the lines of the block's columns that many bytes on (the next
        call's block, which the nest's next call finds in L2). The walker is the K counter:
        free before the K loop. Prefetches never fault."""
        if self.c_next:
            below, ahead = self.c_next
        elif self.c_ahead:
            below = ahead = self.c_ahead
            if self.target.micro.far_llc:
                c_offset, below = c_offset + cols, 0
        else:
            return
        walker = self.counter
        code = ([enc.imul_rri(walker, LDC, c_offset), enc.add_rr(walker, C_PTR)] if c_offset
                else [enc.mov_rr(walker, C_PTR)])
        offsets = sorted(set(range(below, below + ahead, LINE_BYTES)) | {below + ahead - 1})
        for j in range(cols):
            if j:
                code.append(enc.add_rr(walker, LDC))
            code.extend(L2_PREFETCH(Mem(walker, disp=offset)) for offset in offsets)
        self.asm(code)

    def prefetch_a(self) -> None:
        """Where a_ahead = (bytes, row_bytes, columns) is set: prefetch into L2 the lines of
        the `columns` columns of A from A_AHEAD on, `bytes` on from the block row's rows
        (row_bytes of them): the next block row's (bytes = row_bytes; past the last row, the
        next call's in a nest whose m blocks are innermost) or the next call's (brgemm's
        next_call); then move A_AHEAD that many columns on. The blocks of a row share out the
        row's panel so that it comes from L3 while this row runs (its columns lie ld_a
        apart: the hardware prefetchers do not follow them); into L2, not L1, which holds
        this row's panel. The walker is the K counter: free before the K loop."""
        if self.a_ahead is None:
            return
        ahead, row_bytes, columns = self.a_ahead
        self.asm(self._walk_columns(A_AHEAD, LDA, ahead, row_bytes, columns))

    def prefetch_b(self) -> None:
        """Where b_next = (bytes, column_bytes, columns, slot) is set: prefetch into L2 the
        column_bytes of each of `columns` columns of B from the walker in `slot` on, `bytes`
        on (the next call's B), and move the walker that many columns on: the blocks of the
        kernel share out the next call's B."""
        if self.b_next is None:
            return
        ahead, column_bytes, columns, slot = self.b_next
        self.asm(self._walk_columns(slot, LDB, ahead, column_bytes, columns))

    def _walk_columns(self, slot: Mem, ld: Reg, ahead: int, column_bytes: int,
                      columns: int) -> list[bytes]:
        """Prefetches into L2 of the lines from `ahead` to `ahead` + column_bytes of
        `columns` columns, `ld` apart, from the walker in `slot` on (the last byte's line too:
        a column need not start on a line), the walker moved past them. The walker is the K
        counter: free before the K loop."""
        walker = self.counter
        end = ahead + column_bytes
        offsets = sorted(set(range(ahead, end, LINE_BYTES)) | {end - 1})
        code = [enc.mov_rm(walker, slot)]
        for _ in range(columns):
            code.extend(L2_PREFETCH(Mem(walker, disp=offset)) for offset in offsets)
            code.append(enc.add_rr(walker, ld))
        code.append(enc.mov_mr(slot, walker))
        return code

    def load_tail_roles(self, regs: BlockRegisters) -> None:
        """The AVX2 tail's mask vector, AVX-512's packed tail's lane indices, into their
        registers (see _set_tail_masks)."""
        width = self.target.vector_bits
        if regs.mask_vector is not None:
            self.asm(enc.vmovups_load(regs.mask_vector, MASK_SLOT, width))
        if regs.indices is not None:
            self.asm(enc.vmovups_load(regs.indices, INDEX_SLOT, width))

    def update_c(self, regs: BlockRegisters, phases: tuple[int, ...]) -> None:
        self.asm(self.update_code(regs, phases))

    def update_code(self, regs: BlockRegisters, phases: tuple[int, ...],
                     columns: range | None = None) -> list[bytes]:
        """After the K loop, phase 0: the accumulators += C; phase 1: C := the accumulators
        (of `columns` only: a skewed slot's, see schedule.emit_skewed; None: every column).
        C is added at the end, not loaded first: no FMA then waits for a load of C, which
        may wait for a store of C still on its way to the cache (the previous call's, or the
        previous chunk's). All loads of C of a block come before its first
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

    def k_loop(self, regs: BlockRegisters, bases: tuple[Reg, ...], k: int,
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
        code = self.a_column(regs)
        for j in range(regs.cols):
            code += self.column_step(regs, bases, j, step)
        return b"".join(code)

    def a_column(self, regs: BlockRegisters) -> list[bytes]:
        """Load A's column k into A's registers and move A_PTR on a step."""
        code = [regs.load(a_reg, Mem(A_PTR, disp=regs.offset(i)), i)
                for i, a_reg in enumerate(regs.a)]
        code.append(enc.add_rr(A_PTR, LDA))
        if regs.indices is not None:
            code.append(ins.permute(regs.a[-1], regs.indices, self.target.vector_bits))
        return code

    def column_step(self, regs: BlockRegisters, bases: tuple[Reg, ...], j: int,
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
        return b"".join([*self.pair_a(regs),
                         *(code for j in range(regs.cols)
                           for code in self.pair_column(regs, bases, j, 0))])

    def pair_a(self, regs: BlockRegisters) -> list[bytes]:
        """A's part of a step pair: its tail rows (if any), columns k and k+1 unpacked, A
        moved on two steps."""
        low, high = regs.a
        b_reg = regs.broadcast
        code = [self._pair_tail_a(regs)] if regs.packed_acc else []
        return code + [enc.vmovups_load(low, Mem(A_PTR), 256),
                       enc.vmovups_load(b_reg, Mem(A_PTR, LDA), 256),
                       enc.vunpckhps(high, low, b_reg, 256), enc.vunpcklps(low, low, b_reg, 256),
                       enc.lea(A_PTR, Mem(A_PTR, LDA, 2))]

    def pair_column(self, regs: BlockRegisters, bases: tuple[Reg, ...], j: int,
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
        from memory for one row (see dot_b_whole), else by a broadcast load of 16 or 8
        bytes."""
        code = []
        whole = dot_b_whole(regs.dot_share, self.p.bytes)
        for j, accs in enumerate(regs.acc):
            mem = self._b_address(bases, j)
            if whole:
                code.append(ins.fma(accs[-1], regs.a_tail, mem, 256, False, self.p))
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


    def next_columns(self, cols: int, b: bool = True, c: bool = True) -> None:
        """Move B_COL (b) and C_PTR (c) `cols` columns on (A_PTR is free here: a scratch)."""
        scratch = self.counter
        if b:
            self.asm(enc.mov_rm(A_PTR, B_COL), enc.imul_rri(scratch, LDB, cols),
                     enc.add_rr(A_PTR, scratch), enc.mov_mr(B_COL, A_PTR))
        if c:
            self.asm(self.c_columns(cols))

    def c_columns(self, cols: int) -> bytes:
        """C_PTR `cols` columns on (the K counter as scratch)."""
        return enc.imul_rri(self.counter, LDC, cols) + enc.add_rr(C_PTR, self.counter)

    # -- one register block
