"""The schedulers of the x86-64 BRGEMM: how a run of register blocks along N hides each block's
update of C behind the next block's FMAs instead of stalling them with a burst of stores.
Pipelined (code planned for 16 vector registers on a core with 32): blocks alternate two
register sets, and each block's update is carried into the next block's K loop. Skewed
(every other run): slot s of each block starts K at step s, so a block's first k-steps finish
the previous block's slots and update their C one slot a step."""
from __future__ import annotations

from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64 import instructions as ins
from einjit.backends.x86_64.block_registers import BlockRegisters
from einjit.backends.x86_64.blocking import COLUMNS_PER_BASE, PAIR_STEPS, Panel
from einjit.backends.x86_64.encode import Mem, Reg
from einjit.backends.x86_64.frame import A_PTR, A_ROW, B_BASE, B_COL, LDB, N_COUNT
from einjit.backends.x86_64.microkernel import Microkernel


def can_pipeline(panel: Panel, spare_bank: int, br: int, chunks: int) -> bool:
    """Whether runs of the panel's blocks may be pipelined (see emit_pipelined): a bank of
    registers is spare, no batch loop surrounds the K loop, K is not in chunks, and C is not
    stored by vmaskmovps (VEX only: no upper register can be its source)."""
    masked = panel.tail_rows and panel.mode.masked
    return bool(spare_bank and br == 1 and chunks == 1 and not masked)


def can_carry(kernel: Microkernel, panel: Panel, cols: int) -> bool:
    """Whether a block of the panel's of `cols` columns can take part in a pipelined
    sequence: a carried update takes two of its accumulators as scratch (BlockRegisters),
    which a block of one column of dot products (one accumulator) does not have."""
    return len(kernel.registers(panel, cols).accumulators()) >= 2


def sequences(panel: Panel) -> list[list[tuple[int, int]]]:
    """The panel's runs as sequences of pipelined blocks (see emit_pipelined): both runs in
    one where their blocks hold the same roles, else each alone (a run of fewer columns than
    the panel's quads holds fewer quads)."""
    runs = panel.runs()
    if len({min(panel.mode.quads, cols) for _, cols in runs}) == 1:
        return [runs]
    return [[run] for run in runs]


def emit_pipelined(kernel: Microkernel, panel: Panel, runs: list[tuple[int, int]],
                   accumulate: bool, k: int, spare_bank: int) -> None:
    """The panel's runs of (blocks, columns) as one sequence of blocks whose accumulators
    alternate between two register sets: each block's update of C is spread over the next
    block's first k-steps, where the next block's FMAs hide it, instead of stalling them as a
    burst of stores after the K loop, the last block of a run into the first of the next, of
    other columns; the second set's registers start at spare_bank. C_PTR stays on a block until
    its update is out; only the last block updates in a burst."""
    asm, phases = kernel.asm, (0, 1) if accumulate else (1,)
    sets: dict[tuple[int, int], BlockRegisters] = {}
    widest = frozenset(kernel.registers(panel, max(cols for _, cols in runs)).accumulators())

    def registers(s: int, cols: int) -> BlockRegisters:
        if (s, cols) not in sets:
            sets[s, cols] = kernel.registers(panel, cols, (0, spare_bank)[s],
                                            carried=True, widest=widest)
        return sets[s, cols]

    def block(s: int, cols: int, previous: tuple[int, int] | None) -> None:
        # a carried update ends moving C_PTR on to the block computed meanwhile
        carry = None if previous is None else (
            kernel.update_code(registers(*previous), phases)
            + [kernel.c_columns(previous[1])])
        kernel.compute(panel, registers(s, cols), k, carry=carry,
                       c_offset=0 if previous is None else previous[1])
        kernel.next_columns(cols, c=False)

    previous = None                  # (set, columns) of the block before
    for blocks, cols in runs:
        s = 0 if previous is None else 1 - previous[0]
        block(s, cols, previous)
        previous, blocks = (s, cols), blocks - 1
        pairs, odd = divmod(blocks, 2)
        if pairs:
            with asm.counted_loop(N_COUNT, pairs, align=1, scratch=kernel.counter):
                block(1 - s, cols, (s, cols))
                block(s, cols, (1 - s, cols))
        if odd:
            block(1 - s, cols, (s, cols))
            previous = (1 - s, cols)
    kernel.update_c(registers(*previous), phases)
    kernel.next_columns(previous[1], b=False)


def can_skew(panel: Panel, spare_bank: int, br: int, chunks: int) -> bool:
    """Whether runs of the panel's blocks may be skewed (see emit_skewed): no spare bank
    (16-register code on a core with 32 pipelines instead), no batch loop, K not in chunks,
    no quads or dot tail, no lone masked vector: a masked vector starting a column's rows
    spans into the next column, whose load of C then waits for its store."""
    spills = panel.vectors == 1 and panel.tail_rows and panel.mode.masked
    plain = not (panel.mode.quads or panel.mode.dot or spills)
    return bool(plain and not spare_bank and br == 1 and chunks == 1)


def slots(panel: Panel, cols: int, k: int) -> list[range]:
    """A skewed block's slots: its columns one by one, or a packed tail's groups, or two columns
    of a tail in step pairs of a vector a column (summed two at once, see
    BlockRegisters._sum_pair_rows), or as many of any as a head no longer than K needs (a slot
    takes a step, or a pair)."""
    unit = PAIR_STEPS if panel.mode.pairs else 1
    base = (panel.mode.group if panel.mode.group > 1
            else PAIR_STEPS if panel.mode.pairs and panel.tail_rows else 1)
    width = base
    while -(-cols // width) * unit > k:
        width += base
    return [range(first, min(first + width, cols)) for first in range(0, cols, width)]


def emit_skewed(kernel: Microkernel, panel: Panel, blocks: int, cols: int, accumulate: bool,
                k: int, previous_bases: tuple[Reg, ...]) -> None:
    """`blocks` blocks of `cols` columns whose columns are skewed: the block's slots (its
    columns, or a packed tail's groups of columns, which share an accumulator; wider where the
    head would outgrow K, see slots) take their k-steps from their own step on: slot s from step
    s (in step pairs, pair s) to K-1, then 0 to s-1. Every column still meets A's column k at
    step k, and a block's first steps (its head, unrolled) finish the previous block's later
    slots: at step s slot s of the previous block is done, sums its step pairs, updates C and
    starts over, between the FMAs of the others. No burst of a whole block's update after the K
    loop for the next block's FMAs to wait behind (two or more steps between slots' updates
    gained less). previous_bases: registers for the previous block's bases of B. The first
    block's head starts its slots one a step; a last head (the drain) finishes the last block's.
    C_PTR stays on the previous block until its head is over. The update comes first in its
    step, while A's and B's registers (its scratch) are free; the sums' order along K differs
    from slot to slot."""
    asm, p = kernel.asm, kernel.p
    regs = kernel.registers(panel, cols)
    phases = (0, 1) if accumulate else (1,)
    count = -(-cols // COLUMNS_PER_BASE)
    current, previous = kernel.bases[:count], previous_bases[:count]
    block_slots = slots(panel, cols, k)
    unit = PAIR_STEPS if panel.mode.pairs else 1
    kernel.load_tail_roles(regs)          # nothing in the run overwrites them

    def column(bases: tuple[Reg, ...], j: int, step: int) -> list[bytes]:
        if panel.mode.pairs:
            return kernel.pair_column(regs, bases, j, step * p.bytes)
        return kernel.column_step(regs, bases, j, step)

    def zeroed(slot: range) -> list[bytes]:
        packed = regs.packed_acc[slot.start // regs.group:-(-slot.stop // regs.group)]
        return [ins.zero(acc) for acc in [*(acc for j in slot for acc in regs.acc[j]),
                                       *packed]]

    # each head step's pieces, built once for the three kinds of head: A's part, the
    # update of slot s, the FMAs of later slots on the previous block's B, and (slot s
    # zeroed first) those of slot s and earlier on this block's
    heads = []
    a_part = b"".join(kernel.pair_a(regs) if panel.mode.pairs else kernel.a_column(regs))
    for s_index, slot in enumerate(block_slots):
        step = s_index * unit
        old = [code for later in block_slots[s_index + 1:] for j in later
               for code in column(previous, j, step)]
        new = zeroed(slot) + [code for earlier in block_slots[:s_index + 1] for j in earlier
                              for code in column(current, j, step)]
        heads.append((a_part, b"".join(kernel.update_code(regs, phases, slot)),
                      b"".join(old), b"".join(new)))

    def cycle(first: bool, drain: bool) -> None:
        if not drain:                     # C_PTR is on the previous block, if any
            kernel.prefetch_ahead(cols, 0 if first else cols)
        asm(enc.mov_rm(A_PTR, A_ROW), enc.mov_rm(B_BASE, B_COL))
        if not first:
            asm(enc.imul_rri(kernel.counter, LDB, cols), enc.mov_rr(previous[0], B_BASE),
                enc.sub_rr(previous[0], kernel.counter))
        for bases in (current, () if first else previous):
            for base, following in zip(bases, bases[1:]):
                asm(enc.lea(following, Mem(base, LDB, 4)), enc.add_rr(following, LDB))
        for s_index, (a_part, update, old, new) in enumerate(heads):
            if not first:
                asm(update)
            if not (drain and s_index == len(block_slots) - 1):
                asm(a_part)
            if not first:
                asm(old)
            if not drain:
                asm(new)
        if not first:
            asm(kernel.c_columns(cols))
        if not drain:
            head_bytes = len(block_slots) * unit * p.bytes
            asm(*(enc.add_ri(base, head_bytes) for base in current))
            kernel.k_loop(regs, current, k - len(block_slots) * unit)
            kernel.next_columns(cols, c=False)

    cycle(first=True, drain=False)
    if blocks > 2:
        with asm.counted_loop(N_COUNT, blocks - 1, align=1, scratch=kernel.counter):
            cycle(first=False, drain=False)
    else:
        cycle(first=False, drain=False)
    cycle(first=False, drain=True)
