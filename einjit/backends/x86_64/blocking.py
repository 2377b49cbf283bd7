"""x86-64 BRGEMM blocking: how a kernel cuts C into register blocks, chosen per (M, N, K,
batch) and per core (target.micro: full-rate vector width, FMA pipes, load ports, the cost
of a masked store, whether shuffles take the FMA pipes, L1's sets and ways). brgemm.py
generates the code of a plan.

A plan is a tuple of Panels, one per band of rows: its blocks' height in vectors, the tail
rows and how they are held (masked, packed several columns a vector, an overlapping whole
vector, dot products along K, step pairs), the columns a block and how N is swept. `plan`
finds the cheapest by a small cost model of the generated loop (`_block_cycles`: FMA,
shuffle and L1 throughput, FMA latency, the update of C, per-block overhead). `choose` also
picks the register width (AVX-512 as 256-bit EVEX vectors, 32 registers and the same masks,
where the core splits a zmm FMA in halves and a zmm would be half empty: Zen 4) and applies
the measured rules the model does not price, whose values per core are tuning.CORE_RULES:
`unmasked_target` (on such a core an M with a tail takes the AVX2 code unless its masked
zmm tail is nearly full), `wide_pair_target` (step pairs in all 32 registers) and
`pair_dot_panels` (a panel of step pairs and one of dot tails). `b_column_limit` keeps a
block's columns of B within L1's ways; `quad_limit`, `dot_tail_share` and `PAIR_STEPS` say
where B's quads, dot tails and step pairs may go; `k_chunks` and `batch_chunks` run K or the
batch in chunks where A's panel outgrows L1, and `packs_a` says which block rows copy A's
panel first where its pitch would keep it out of L1. docs/brgemm.md describes the design.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from einjit.backends import LINE_BYTES, Target
from einjit.backends.x86_64.precision import precision
from einjit.backends.x86_64.tuning import rules

COLUMNS_PER_BASE = 5          # B columns one base pointer reaches (see docs/brgemm.md)
MAX_COLS = 25                 # widest block the model weighs (a batched kernel's 5 bases)
MAX_VECTORS = 6               # taller blocks leave too few columns to amortize A's loads
AVX2_SHARES = (1, 2, 4)       # rows one broadcast load repeats: vbroadcastss, sd, f128


@dataclass(frozen=True)
class TailMode:
    """How a block row holds its tail rows and takes its k-steps. group: columns whose tail
    rows share one vector (1: not packed). overlap: the tail vector is loaded and stored
    whole, without masks, ending at the last row (see brgemm's registers). quads: how many of
    a block's columns take B four k-steps at a time (see quad_limit). dot: the 32-bit lanes
    one k-step takes where the tail rows are dot products along K (0: they are not; see
    dot_tail_share). pairs: a block of one whole vector (and a tail of PAIR_TAIL_ROWS rows,
    `group` columns a vector) that takes its k-steps two at a time (see PAIR_STEPS)."""
    group: int = 1
    overlap: bool = False
    quads: int = 0
    dot: int = 0
    pairs: bool = False

    @property
    def masked(self) -> bool:
        """A tail held so is one vector a column under a mask (k1, or AVX2's mask vector)."""
        return not (self.overlap or self.dot or self.group > 1 or self.pairs)


@dataclass(frozen=True)
class Panel:
    """`blocks` register blocks stacked along M, each `vectors` vectors tall (the last one
    of each block holding only `tail_rows` rows if tail_rows > 0, held as `mode` says),
    swept along N in `n_blocks` blocks of `cols` columns plus `tail_blocks` blocks of
    `n_tail` columns."""
    blocks: int
    vectors: int
    tail_rows: int
    cols: int
    n_blocks: int
    n_tail: int
    mode: TailMode = TailMode()
    tail_blocks: int = 1

    @property
    def column_blocks(self) -> int:
        """Blocks in a row of the panel."""
        return self.n_blocks + (self.tail_blocks if self.n_tail else 0)

    def runs(self) -> list[tuple[int, int]]:
        """The runs of blocks in a row, as (blocks, columns)."""
        return [(blocks, cols) for blocks, cols in ((self.n_blocks, self.cols),
                                                    (self.tail_blocks if self.n_tail else 0,
                                                     self.n_tail)) if blocks]


@dataclass(frozen=True)
class RowForms:
    """The tail modes and k-step forms a block row may weigh (see _candidate_modes)."""
    pack: bool = True           # a packed tail (pack_group columns a vector)
    quads: bool = False         # B's quads (quad_limit)
    dot: int = 0                # dot products along K, this many lanes a k-step
    pairs: bool = False         # k-steps in pairs (PAIR_STEPS)
    pairs_only: bool = False    # nothing but pairs (see wide_pair_target)


@dataclass(frozen=True)
class RowSweep:
    """The cheapest blocking of one block row along N (see _sweep_n): blocks of `cols`
    columns, `n_blocks` of them and `tail_blocks` of `n_tail` columns, held as `mode` says."""
    cycles: float
    cols: int
    n_blocks: int
    n_tail: int
    tail_blocks: int
    mode: TailMode

    def panel(self, count: int, vectors: int, tail_rows: int) -> Panel:
        """The Panel of `count` block rows blocked so."""
        return Panel(count, vectors, tail_rows, self.cols, self.n_blocks, self.n_tail,
                     self.mode, self.tail_blocks)


def share_lanes(target: Target, tail_rows: int, element_bytes: int = 4) -> int:
    """Lanes a column owns in a packed tail vector (see brgemm's module doc): AVX-512 element
    lanes, AVX2 32-bit lanes (a double spans two; every AVX2 packing step moves bits)."""
    if target.masks:
        return tail_rows
    dwords = tail_rows * element_bytes // 4
    return next((share for share in AVX2_SHARES if share >= dwords), target.lanes())


def pack_group(target: Target, vectors: int, tail_rows: int, element_bytes: int = 4) -> int:
    """Most columns whose tail rows can share one vector (1: no packing). Packing pays where
    full vectors broadcast B anyway (alone, a tail vector is bound by its loads, not by FMAs);
    it needs those full rows (the AVX2 tail broadcast may read some of them) and, on AVX-512,
    a mask register per column."""
    if vectors < 2 or not tail_rows:
        return 1
    most = target.masks or target.lanes()       # AVX-512: a mask register (k1..k7) per column
    return min(target.lanes() // share_lanes(target, tail_rows, element_bytes), most)


def b_column_limit(target: Target, ld_b_bytes: int | None) -> int:
    """Most columns of B a register block may read when B's columns lie ld_b_bytes apart:
    every k-step reads one element of each, so their lines must fit the L1 sets they map to
    together (a pitch of a multiple of 4 KiB puts them all in one set; past its ways each
    read misses; A's and C's lines keep CoreRules.spare_l1_ways of its ways). None: the pitch
    is not known, no limit."""
    if ld_b_bytes is None:
        return MAX_COLS
    micro = target.micro
    per_set: dict[int, int] = {}
    for cols in range(1, MAX_COLS + 1):
        index = (cols - 1) * ld_b_bytes // LINE_BYTES % micro.l1_sets
        per_set[index] = per_set.get(index, 0) + 1
        if per_set[index] > micro.l1_ways - rules(target).spare_l1_ways:
            return cols - 1
    return MAX_COLS


def c_column_limit(target: Target, ld_c_bytes: int | None, lines: int) -> int:
    """Most columns a register block of `lines` lines a column may update where C comes from
    beyond L2 and its columns lie ld_c_bytes apart: its update loads all its lines of C,
    then stores them, and those sharing an L1 set stay within micro.c_set_lines (a pitch of
    a multiple of 4 KiB puts a row's lines of every column in one set). ld_c_bytes None (C
    near): MAX_COLS."""
    if ld_c_bytes is None:
        return MAX_COLS
    micro = target.micro
    per_set: dict[int, int] = {}
    for cols in range(1, MAX_COLS + 1):
        first = (cols - 1) * ld_c_bytes // LINE_BYTES
        for line in range(lines):
            index = (first + line) % micro.l1_sets
            per_set[index] = per_set.get(index, 0) + 1
        if max(per_set.values()) > micro.c_set_lines:
            return cols - 1
    return MAX_COLS


# A block of one vector of A loads a B element for every FMA: the load ports bind it. Its last
# `quads` columns may instead take B four k-steps at a time (one vbroadcastf128, then a
# vshufps a k-step: a shuffle beside the FMAs instead of a load; see docs/brgemm.md)
MAX_QUADS = 3


def quad_limit(target: Target, vectors: int, tail_rows: int, mode: TailMode, k: int,
               element_bytes: int) -> int:
    """Most quad columns a block may have (0: none): AVX2 (VEX) float32 blocks of at most one
    full vector (and a masked or packed tail), K of at least 4 steps. Only for an M that one
    such block row covers (see _plan): taller M cut into such rows run slower than the model
    says. Not beside a tail packed as many columns a vector as CoreRules.no_quad_groups
    lists: its blends crowd the pipes the shuffles need."""
    full = vectors - (1 if tail_rows else 0)
    if (target.masks or element_bytes != 4 or full > 1 or mode.overlap or k < 4
            or mode.group in rules(target).no_quad_groups):
        return 0
    return MAX_QUADS


# 256-bit tails of 1 to 7 float32 rows, or a lone float64 row, may be dot products along K:
# lanes hold k-steps of the tail rows, one FMA serves several k-steps where a masked or packed
# tail spends one on each (see docs/brgemm.md). Shares count 32-bit lanes: a double takes two.
DOT_SHARES = (1, 2, 4, 8)
DOT_LANES = 8                    # 32-bit lanes of the 256-bit vectors a dot tail uses
DOT_LANE_BYTES = 4
DOT_FRAME_BYTES = 16384          # most stack the copied tail rows of A may take


def dot_steps(share: int) -> int:
    """k-steps one vector of a dot tail holds (g) when a k-step takes `share` lanes."""
    return DOT_LANES // share


def dot_b_whole(share: int, element_bytes: int) -> bool:
    """Whether a dot tail's k-step takes one element's lanes (one row): a vector of B's
    k-steps is then read whole from memory, not broadcast."""
    return share * DOT_LANE_BYTES == element_bytes


def dot_tail_share(target: Target, m: int, k: int, br: int, element_bytes: int) -> int:
    """The lanes one k-step takes if the tail rows of an M-row block row may be dot products
    along K, else 0: 256-bit vectors (AVX2, or AVX-512's EVEX ymm); float32 tails of 1 to 7
    rows, padded to the narrowest share whose 8 // share k-steps a vector divide K; float64
    only an M of one row (its 2 lanes; beside whole vectors not measured), 4 k-steps a vector
    dividing K; A's copied tail rows (every batch entry's) within DOT_FRAME_BYTES."""
    tail_rows = m % target.lanes(element_bytes)
    if target.vector_bits != 256 or not 1 <= tail_rows <= 7:
        return 0
    if element_bytes == 4:
        share = next(share for share in DOT_SHARES
                     if share >= tail_rows and k % dot_steps(share) == 0)
    else:
        share = 2 if m == 1 and k % dot_steps(2) == 0 else 0
    return share if br * k * share * DOT_LANE_BYTES <= DOT_FRAME_BYTES else 0


# An AVX2 block of one whole vector of A may take its k-steps two at a time: A's two columns
# unpacked into lanes of rows and steps, B's two elements by one 8-byte broadcast, half the
# loads of B the one-step block needs; an M of 9..12 its tail rows too (see docs/brgemm.md)
PAIR_STEPS = 2
PAIR_TAIL_ROWS = range(1, 5)


def pair_steps_fit(target: Target, k: int, element_bytes: int) -> bool:
    """Whether an AVX2 block of one whole vector (and a tail of PAIR_TAIL_ROWS) may take its
    k-steps in pairs: float32, K even."""
    return (not target.masks and target.vector_bits == 256 and element_bytes == 4
            and k % PAIR_STEPS == 0)


def pair_group(target: Target, tail_rows: int) -> int:
    """Columns whose tail rows in step pairs share one vector (see PAIR_STEPS)."""
    return target.lanes() // (PAIR_STEPS * share_lanes(target, tail_rows))


def _accumulators(vectors: int, cols: int, mode: TailMode) -> int:
    group = mode.group
    if mode.pairs:          # a column's rows in two vectors of step pairs, then the tail's
        return 2 * cols + (-(-cols // group) if vectors > 1 else 0)
    if group == 1:
        return vectors * cols
    return (vectors - 1) * cols + -(-cols // group)


def _max_cols(target: Target, vectors: int, tail_rows: int, mode: TailMode) -> int:
    """Most columns a block held as `mode` can have with the registers left over."""
    if mode.pairs:     # A's two vectors of step pairs, B's pair; a tail's A and packed B
        spare = target.registers - 3 - ((2 if mode.group > 1 else 1) if tail_rows else 0)
    else:
        spare = target.registers - vectors - mode.quads    # A's vectors (dot: and its tail)
        if mode.group > 1:                                 # broadcast, packed B, indices
            spare -= 3 if target.masks else 2
        elif mode.dot or not (target.masks and vectors == 1):  # embedded broadcast: none
            spare -= 1
        if tail_rows and not target.masks and mode.masked:      # its mask vector
            spare -= 1
    cols = 0
    while cols < MAX_COLS and _accumulators(vectors, cols + 1, mode) <= spare:
        cols += 1
    return cols


def max_cols(target: Target, vectors: int, tail_rows: int) -> int:
    """Most columns a block of `vectors` vectors can have with the registers left over."""
    return max(_max_cols(target, vectors, tail_rows, TailMode(group))
               for group in {1, pack_group(target, vectors, tail_rows)})


# L1 accesses of a full vector of A or C at an address of unknown alignment: it mostly
# straddles two cache lines (64 bytes: 15 times in 16, 32 bytes: 7 in 16), and the L1 serves
# two lines a cycle
SPLIT_ACCESSES = {512: 2.0, 256: 1.5}       # by vector width in bits


def _step_counts(target: Target, vectors: int, cols: int, tail_rows: int, mode: TailMode
                 ) -> tuple[float, float, float]:
    """(FMAs, all vector instructions, L1 accesses) of one k-step."""
    group, quads, dot = mode.group, mode.quads, mode.dot
    full = vectors - (1 if tail_rows else 0)
    if mode.pairs:         # per two steps: 2 columns of A, their 2 unpacks, a B pair a column
        split = SPLIT_ACCESSES[target.vector_bits]
        fmas, ops, loads = cols, cols + 1, (2 * split + cols) / 2
        if tail_rows:   # the tail's FMAs, blends of B, and A's 2 loads and 1 or 3 shuffles
            tails = -(-cols // group)
            fmas += tails / 2
            ops += tails / 2 + (cols - tails) / 2 + (1.5 if tail_rows > 2 else 0.5)
            loads += 1
        return fmas, ops, loads
    if dot:           # the tail's FMAs, B's loads and A's tail: once for their k-steps
        steps = dot_steps(dot)
        fmas = full * cols + cols / steps
        b_loads = cols * (SPLIT_ACCESSES[target.vector_bits] if dot == 1 else 1)
        loads = (full * SPLIT_ACCESSES[target.vector_bits] + (cols if full else 0)
                 + (b_loads + 1) / steps)
        return fmas, fmas, loads
    fmas = _accumulators(vectors, cols, mode)
    shuffles = 0 if group == 1 else cols - -(-cols // group)       # blends of B
    if group > 1 and target.masks:                         # vpermps of A
        shuffles += 1
    shuffles += quads                                      # vshufps of B's quads
    loads = (full * SPLIT_ACCESSES[target.vector_bits] + (1 if tail_rows else 0)
             + cols - quads + quads / 4)
    return fmas, fmas + shuffles, loads


def _block_cycles(target: Target, vectors: int, cols: int, tail_rows: int, mode: TailMode,
                  k: int, br: int) -> float:
    """One register block: k-steps of target.micro.fma_pipes FMAs a cycle (a vector wider than
    the core's full-rate width counts once per half, as do its loads and stores), 4 vector
    instructions a cycle, 4 cycles of FMA latency per accumulator chain, load_ports L1 accesses
    a cycle shared with the update of C (a load and a store per vector of C), which the next
    block's FMAs overlap unless, on a core that splits zmm, its stores come in a burst of more
    than CoreRules.store_burst_units; plus the batch loop and the block's set-up, and for a
    packed tail the latency only a long K hides: AVX-512's vpermps (5 cycles) before the first
    FMA, and the shares of a group's columns added to their vector one after another (AVX-512:
    masked adds, 2 cycles each; AVX2: a chain of blends into one vector, then one add). AVX2
    masked stores (vmaskmovps, a lone masked tail's) are microcoded on AMD cores: each costs
    micro.masked_store_cycles that nothing overlaps. An overlapping tail is a whole vector like
    the others. A dot tail's accumulators take one FMA a vector of k-steps (without full
    vectors, their chains allow that many more cycles a step), and sum each column's lanes after
    the K loop (4 to 6 shuffles and adds) before C's rows are added (in pieces of 4, 2 and 1
    floats); a float64 row is priced as float32's share of 2 lanes (its B vectors, read whole
    rather than broadcast, and its 4 summing instructions differ by less than a cycle in four
    k-steps). Step pairs: each accumulator takes one FMA every two steps, and each column's two
    are summed into one vector (3 instructions) before C's, a tail vector's (priced at 5: summed
    and moved to where a packed tail's shares sit; a vector a column takes 3, two columns at
    once) before its rows of C are added. In a block without a tail a quad column's shuffle
    counts CoreRules.quad_shuffle_fma_share of an FMA. Where CoreRules.zmm_load_vector_ports
    is set, a zmm block's FMAs and its loads of A and of B's separate broadcasts share that
    many vector ports too."""
    micro, tuned = target.micro, rules(target)
    passes = micro.passes(target.vector_bits)
    group, overlap, quads, dot, pairs = (mode.group, mode.overlap, mode.quads, mode.dot,
                                         mode.pairs)
    fmas, vector_ops, loads = _step_counts(target, vectors, cols, tail_rows, mode)
    split = SPLIT_ACCESSES[target.vector_bits]
    full = vectors - (1 if tail_rows else 0)
    masked_stores = reduce = 0
    if not tail_rows:
        tail_update = 0
    elif dot:                    # C's rows in pieces of 4, 2 and 1 floats, loaded and stored
        tail_update = 2 * ((tail_rows >= 4) + (tail_rows % 4 >= 2) + tail_rows % 2)
        reduce = cols * {1: 6, 2: 6, 4: 4, 8: 0}[dot]
    elif overlap:
        tail_update, loads = 2 * split, loads - 1 + split
    elif target.masks or group > 1 or pairs:
        tail_update = 2
    else:
        tail_update, masked_stores = 2, cols
    update = cols * (2 * full * split + tail_update)
    steps = k * br
    chain = dot_steps(dot) if dot and not full else PAIR_STEPS if pairs else 1
    fma_pipe_ops = fmas + (0 if tail_rows else tuned.quad_shuffle_fma_share) * quads
    shared_ports = 0.0
    if tuned.zmm_load_vector_ports and target.vector_bits == 512:
        own_loads = vectors + (0 if group == 1 and vectors == 1 and target.masks else cols)
        shared_ports = (fma_pipe_ops + own_loads) / tuned.zmm_load_vector_ports
    compute = steps * max(fma_pipe_ops * passes / micro.fma_pipes, vector_ops * passes / 4,
                          4.0 / chain, shared_ports)
    vector_loads = split if pairs else loads - cols + quads * 3 / 4   # the rest: B elements
    memory = (steps * (loads + (passes - 1) * vector_loads) + update * passes) / micro.load_ports
    if group == 1:
        latency = 0
    elif target.masks:
        latency = 5 + 2 * min(group, cols)
    else:
        latency = 3 + min(group, cols)
    if dot:
        latency = 8
    if pairs:        # each column's two vectors into one, a tail's pairs summed and moved
        tails = -(-cols // group) if tail_rows else 0
        reduce = cols * 3 + tails * 5
    burst = 0.0
    if micro.full_rate_bits < 512:                  # measured where zmm stores go in halves
        stores = cols + tails if pairs else _accumulators(vectors, cols, mode)
        burst = max(0, stores - tuned.store_burst_units) * tuned.store_burst_cycles
    return (max(compute, memory) + 4 * br + 12 + latency + reduce / 4 + burst
            + masked_stores * micro.masked_store_cycles)


def _candidate_modes(target: Target, vectors: int, tail_rows: int, k: int, element_bytes: int,
                     forms: RowForms) -> list[TailMode]:
    """The TailModes a block row of `vectors` vectors may weigh, as `forms` allows: a masked
    tail, a packed one (pack_group columns a vector), (AVX2, two or more vectors) an
    overlapping whole tail vector, dot products along K (with AVX-512 masks only in a block
    of no full vector: beside full ones they were measured against AVX2 tails only), k-steps
    in pairs; each also with 1 to quad_limit quad columns where forms.quads allows them. In
    the order ties go to: not packed (no lane shuffles for nothing), masked rather than
    overlapping or dot products, B not in quads, k-steps not in pairs."""
    keys = set()                              # (group, overlap, dot, pairs): sorted, the order
    if not forms.pairs_only:
        keys.add((1, False, 0, False))
        if forms.pack:
            keys.add((pack_group(target, vectors, tail_rows, element_bytes), False, 0, False))
        if tail_rows and vectors > 1 and not target.masks:
            keys.add((1, True, 0, False))
        if tail_rows and forms.dot and (vectors == 1 or not target.masks):
            keys.add((1, False, forms.dot, False))
    if forms.pairs:
        keys.add((pair_group(target, tail_rows) if tail_rows else 1, False, 0, True))
    modes = []
    for group, overlap, dot, pairs in sorted(keys):
        mode = TailMode(group, overlap, 0, dot, pairs)
        most = (quad_limit(target, vectors, tail_rows, mode, k, element_bytes)
                if forms.quads and not (dot or pairs) else 0)
        modes += [TailMode(group, overlap, quads, dot, pairs) for quads in range(most + 1)]
    return modes


def _sweep_n(target: Target, vectors: int, tail_rows: int, n: int, k: int, br: int,
             modes: list[TailMode], col_limit: int = MAX_COLS) -> RowSweep | None:
    """The cheapest blocking of one block row of `vectors` vectors over N, held in one of
    `modes` (on a tie the first), at most col_limit columns a block: N as blocks of `cols`
    and one narrower block of the rest, or as blocks of cols and of cols - 1 (a block of few
    columns has too few accumulator chains to hide the FMA latency: 25 = 6 x 4 + 1 runs
    slower than 4 x 4 + 3 x 3). None if no mode fits a column. AVX-512 packs float32 tails
    only (its lane indices and masks are derived for 32-bit lanes); AVX2 packs both, in
    32-bit lanes."""
    best = None
    for mode in modes:
        quads = mode.quads
        widest = min(_max_cols(target, vectors, tail_rows, mode), col_limit)
        if widest < max(quads, 1):
            continue
        fewest = -(-n // widest)
        for cols in range(max(-(-n // fewest), quads), min(widest, n) + 1):
            n_blocks, n_tail = divmod(n, cols)
            splits = [(n_blocks, n_tail, 1)]
            narrower = (cols - n_tail) % cols           # blocks of cols - 1 instead
            if n_tail and cols > 2 and narrower * (cols - 1) <= n:
                splits.append(((n - narrower * (cols - 1)) // cols, cols - 1, narrower))
            for blocks, tail, tail_blocks in splits:
                cycles = blocks * _block_cycles(target, vectors, cols, tail_rows, mode, k, br)
                if tail:
                    narrow = mode if quads <= tail else replace(mode, quads=tail)
                    cycles += tail_blocks * _block_cycles(target, vectors, tail, tail_rows,
                                                          narrow, k, br)
                if best is None or cycles < best.cycles:
                    best = RowSweep(cycles, cols, blocks, tail, tail_blocks, mode)
    return best


def _row_partitions(total: int, tallest: int = MAX_VECTORS) -> Iterator[tuple[int, ...]]:
    """Ways to cut `total` vectors into blocks of at most `tallest`: greedy by a height, and
    evenly balanced, each also in reverse order (the last block carries the tail rows)."""
    seen = set()
    for height in range(1, min(tallest, total) + 1):
        full, rest = divmod(total, height)
        greedy = (height,) * full + ((rest,) if rest else ())
        count = -(-total // height)
        small, extra = divmod(total, count)
        balanced = (small + 1,) * extra + (small,) * (count - extra)
        for heights in (greedy, balanced, greedy[::-1], balanced[::-1]):
            if heights not in seen:
                seen.add(heights)
                yield heights


def plan(m: int, n: int, k: int, br: int, target: Target,
         dtype: str = "float32", ld_b: int | None = None) -> tuple[Panel, ...]:
    """The cheapest blocking of an M×N C by the cost model, as panels in row order (vectors
    of target.lanes(element bytes) elements: 8 doubles a zmm, 4 a ymm); ld_b: B's leading
    dimension in elements when known (see b_column_limit)."""
    return _plan(m, n, k, br, target, dtype, ld_b)[1]


def vector_targets(target: Target) -> tuple[Target, ...]:
    """The register widths a kernel for `target` may use: AVX-512 also as 256-bit vectors
    (EVEX ymm0..31, the same masks), which a core that splits 512-bit operations in halves
    (Zen 4) runs at the same FLOPs a cycle with half the lanes wasted on a short tail."""
    if target.masks and target.vector_bits == 512:
        return target, replace(target, vector_bits=256)
    return (target,)


def unmasked_target(target: Target, m: int, element_bytes: int, k: int) -> Target:
    """The target a kernel of M rows and K steps is generated for. On a core that runs
    512-bit operations in halves (Zen 4), an AVX-512 kernel whose M leaves a tail takes the
    AVX2 code instead (VEX ymm, tails overlapped or packed, no masks): the packed EVEX tails
    run slower than the model says (their EVEX broadcast loads cost more than VEX ones), and
    K = 1 stores C masked. Where K > 1 two kinds of M stay AVX-512: a masked zmm tail that
    leaves at most CoreRules.zmm_tail_most_empty of its lanes empty (it wastes less than
    AVX2's overlapping tail), and an M that fills more than half of one ymm (its masked EVEX
    ymm needs no microcoded vmaskmovps store and has 32 registers)."""
    lanes = target.lanes(element_bytes)
    tail = m % lanes
    keep = (lanes - tail <= lanes * rules(target).zmm_tail_most_empty
            or lanes // 4 < m < lanes // 2)
    if (target.masks and target.micro.passes(target.vector_bits) > 1 and tail
            and (k == 1 or not keep)):
        return replace(target, vector_bits=256, registers=16, masks=0)
    return target


def wide_pair_target(target: Target, unmasked: Target, m: int, n: int, k: int,
                     element_bytes: int) -> Target | None:
    """AVX2 code with all of an AVX-512 core's 32 registers in step pairs (see PAIR_STEPS),
    or None. Its blocks are nothing but such pairs (other blocks keep roles in the upper
    registers that VEX cannot name), twice as wide as 16 registers allow; it is not
    pipelined (no register set is spare), the 16-register code is, and the model prices
    neither's update, so the choice is a measured rule, not the model's:
    - an M of one whole vector and a tail of 1 to 4 rows (9..12), the tail in pairs too;
      tails of 3 or 4 rows, whose update of C has a vector a column, only where K >=
      CoreRules.pair_tail_long_k;
    - an M of one whole vector (8) whose N fits one block of 32 registers but not of 16:
      one block, no second one's update."""
    lanes = unmasked.lanes(element_bytes)
    if not (target.registers > 16 and unmasked.registers == 16 and not unmasked.masks
            and pair_steps_fit(unmasked, k, element_bytes) and m // lanes == 1):
        return None
    wide = replace(unmasked, registers=target.registers)
    tail = m % lanes
    if tail:
        long_enough = share_lanes(unmasked, tail) < 4 or k >= rules(target).pair_tail_long_k
        return wide if tail in PAIR_TAIL_ROWS and long_enough else None
    pairs = TailMode(pairs=True)
    one_block = _max_cols(unmasked, 1, 0, pairs) < n <= _max_cols(wide, 1, 0, pairs)
    return wide if one_block else None


def pair_dot_panels(target: Target, m: int, n: int, k: int, br: int, element_bytes: int = 4,
                    ld_b: int | None = None) -> tuple[Panel, Panel] | None:
    """The two panels of the measured rule CoreRules.pair_dot_min_k: the whole rows in step
    pairs and the tail rows as dot products along K beat the one panel of a packed tail the
    model prefers. None where it does not apply: 16-register AVX2 code, float32, no batch,
    N >= CoreRules.pair_dot_min_n, an M of one whole vector and t tail rows with K at least
    pair_dot_min_k[t - 1] and a multiple of 8 // t (a dot share of t lanes, no padding)."""
    tail = m - target.lanes(element_bytes)
    tuned = rules(target)
    min_k = tuned.pair_dot_min_k
    if not (target.registers == 16 and 1 <= tail <= len(min_k) and k >= min_k[tail - 1]
            and br == 1 and n >= tuned.pair_dot_min_n
            and pair_steps_fit(target, k, element_bytes)):
        return None
    if dot_tail_share(target, m, k, br, element_bytes) != tail:    # as measured: no padding
        return None
    col_limit = _column_limit(target, ld_b, element_bytes, br, dot=True)
    pair_modes = _candidate_modes(target, 1, 0, k, element_bytes,
                                  RowForms(pairs=True, pairs_only=True))
    dot_modes = _candidate_modes(target, 1, tail, k, element_bytes,
                                 RowForms(pack=False, dot=tail))
    rows = _sweep_n(target, 1, 0, n, k, br, pair_modes, col_limit)
    tail_row = _sweep_n(target, 1, tail, n, k, br, dot_modes, col_limit)
    if rows is None or tail_row is None or not tail_row.mode.dot:
        return None
    return rows.panel(1, 1, 0), tail_row.panel(1, 1, tail)


def choose(m: int, n: int, k: int, br: int, target: Target, dtype: str = "float32",
           ld_b: int | None = None, whole_k: bool = False,
           far_ld_c: int | None = None) -> tuple[Target, tuple[Panel, ...]]:
    """The vector width (as a Target) and blocking the cost model finds cheapest for
    target.micro (see unmasked_target); on a tie the wider. Step pairs in 32 registers where
    wide_pair_target gives their target, the panels of pair_dot_panels where it gives them.
    whole_k: only blockings whose K runs whole (k_chunks 1) where one exists. far_ld_c: C's
    leading dim (elements) where C comes from beyond L2: blocks within c_column_limit."""
    element_bytes = precision(dtype).bytes
    unmasked = unmasked_target(target, m, element_bytes, k)
    paired = wide_pair_target(target, unmasked, m, n, k, element_bytes)
    if paired is not None:
        return paired, _plan(m, n, k, br, paired, dtype, ld_b)[1]
    split = pair_dot_panels(unmasked, m, n, k, br, element_bytes, ld_b)
    if split is not None:
        return unmasked, split
    best = None
    for candidate in vector_targets(unmasked):
        cycles, panels = _plan(m, n, k, br, candidate, dtype, ld_b, whole_k, far_ld_c,
                               far_b_columns(candidate, k, element_bytes, far_ld_c))
        if far_ld_c is not None and k_chunks(candidate, panels, k, br, element_bytes) > 1:
            cycles, panels = _plan(m, n, k, br, candidate, dtype, ld_b, whole_k, far_ld_c)
        if best is None or cycles < best[0]:
            best = (cycles, candidate, panels)
    return best[1], best[2]


def far_b_columns(target: Target, k: int, element_bytes: int, far_ld_c: int | None
                  ) -> int | None:
    """Most columns a block may have where C comes from beyond L2 (far_ld_c): their B over
    all of K within CoreRules.far_b_l1_share of L1, since they stream in from L2 beside A's
    panel, which stays (choose drops the limit where it would run K in chunks). None: no
    limit."""
    share = rules(target).far_b_l1_share
    if far_ld_c is None or not share:
        return None
    return max(1, int(target.micro.l1_bytes * share) // (k * element_bytes))


def packs_tail(target: Target, m: int, element_bytes: int) -> bool:
    """Whether a kernel of M rows may pack its tail rows (see pack_group): AVX-512 packs
    float32 tails only, and not where the core's shuffles take the FMA pipes' slots
    (Microarch.fma_shuffle_bits: each blend costs the slot of the FMA it saves, and A's
    permute comes on top); AVX2 packs both, but not the float32 tails of the Ms in
    CoreRules.unpacked_one_row_m (their blends run slower than the model says)."""
    if target.masks:
        return element_bytes == 4 and not target.micro.shuffles_on_fma_pipes(target.vector_bits)
    return not (element_bytes == 4 and m in rules(target).unpacked_one_row_m)


def _column_limit(target: Target, ld_b: int | None, element_bytes: int, br: int,
                  dot: bool) -> int:
    """Most columns a block may have: B's pitch in L1 (b_column_limit) and the general
    registers left for B's base pointers."""
    col_limit = b_column_limit(target, None if ld_b is None else ld_b * element_bytes)
    return min(col_limit, COLUMNS_PER_BASE * base_registers(br, dot))


def _plan(m: int, n: int, k: int, br: int, target: Target, dtype: str = "float32",
          ld_b: int | None = None, whole_k: bool = False,
          far_ld_c: int | None = None, b_columns: int | None = None
          ) -> tuple[float, tuple[Panel, ...]]:
    """(cycles, panels) of the cheapest row partition; whole_k: of those whose K runs whole
    (k_chunks 1) where any does; far_ld_c: see choose; b_columns: a block's most columns."""
    elements = precision(dtype)
    lanes = target.lanes(elements.bytes)
    vectors_total = -(-m // lanes)
    tail_rows = m % lanes
    dottable = dot_tail_share(target, m, k, br, elements.bytes)
    col_limit = min(_column_limit(target, ld_b, elements.bytes, br, bool(dottable)),
                    b_columns or MAX_COLS)
    pairable = pair_steps_fit(target, k, elements.bytes)
    pairs_only = not target.masks and target.registers > 16        # see wide_pair_target
    packs = packs_tail(target, m, elements.bytes)
    sweeps = {}
    best = whole = None
    tallest = MAX_VECTORS
    if target.vector_bits == 512 and rules(target).max_zmm_vectors:
        tallest = rules(target).max_zmm_vectors
    for heights in _row_partitions(vectors_total, tallest):
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
            rows = tail_rows if masked else 0
            key = (height, rows)
            if key not in sweeps:
                forms = RowForms(
                    pack=packs, quads=height == vectors_total, dot=dottable,
                    pairs=pairable and (height == 1 and not rows or pairs_only and height == 2
                                        and rows in PAIR_TAIL_ROWS)
                    and vectors_total - (1 if tail_rows else 0) == 1,
                    pairs_only=pairs_only)
                modes = _candidate_modes(target, height, rows, k, elements.bytes, forms)
                c_limit = c_column_limit(
                    target, None if far_ld_c is None else far_ld_c * elements.bytes,
                    -(-height * target.vector_bits // (8 * LINE_BYTES)))
                sweeps[key] = _sweep_n(target, height, rows, n, k, br, modes,
                                       min(col_limit, c_limit))
            sweep = sweeps[key]
            if sweep is None:            # no blocking of this row: not a partition for it
                break
            cycles += count * sweep.cycles
            panels.append(sweep.panel(count, height, rows))
        else:
            if best is None or cycles < best[0]:
                best = (cycles, tuple(panels))
            if (whole_k and (whole is None or cycles < whole[0])
                    and k_chunks(target, tuple(panels), k, br, elements.bytes) == 1):
                whole = (cycles, tuple(panels))
    assert best is not None, f"no blocking of {m}x{n}x{k} for {target}"
    return whole or best


# A block whose loads of A outrun what L2 refills into L1 (with B's and C's lines beside them)
# slows down once A's panel (its rows over all of K) no longer stays in L1 from one column
# block to the next: the K loop then runs in chunks whose A panel fits L1 (see CoreRules)


def chunk_budget(target: Target) -> int:
    """Bytes of L1 a chunk's A panels and B columns may fill (CoreRules.l1_chunk_share)."""
    return int(target.micro.l1_bytes * rules(target).l1_chunk_share)


def _panel_step_bytes(target: Target, panels: tuple[Panel, ...], steps: int,
                      element_bytes: int) -> int:
    """Bytes of A and B a k-step of the hungriest block row loads, or 0 if none needs chunks:
    a row of two or more column blocks that loads A faster than L2 refills L1
    (CoreRules.l2_refill_bytes a cycle) and whose A panel over `steps` k-steps outgrows the
    chunk budget (chunk_budget)."""
    micro, refill = target.micro, rules(target).l2_refill_bytes
    budget = chunk_budget(target)
    vector_bytes = target.vector_bits // 8
    step_bytes = 0
    for panel in panels:
        if panel.column_blocks < 2:
            continue
        # the FMAs of a block taking one k-step at a time (dot tails and pairs counted so)
        one_step = TailMode(panel.mode.group, quads=panel.mode.quads)
        fmas = _step_counts(target, panel.vectors, panel.cols, panel.tail_rows, one_step)[0]
        cycles = fmas * micro.passes(target.vector_bits) / micro.fma_pipes
        a_bytes = panel.vectors * vector_bytes
        if panel.vectors == 1 and panel.mode.dot and dot_b_whole(panel.mode.dot, element_bytes):
            a_bytes = element_bytes         # an M of one row as dot products: an element
        if a_bytes / cycles > refill and a_bytes * steps > budget:
            step_bytes = max(step_bytes, a_bytes + panel.cols * element_bytes)
    return step_bytes


def k_chunks(target: Target, panels: tuple[Panel, ...], k: int, br: int,
             element_bytes: int = 4) -> int:
    """How many equal chunks the kernel's K loop runs in (1: one K loop): the fewest whose A
    panel and B columns fit the chunk budget, where _panel_step_bytes finds a block row
    needing them; chunks of whole vectors of a dot tail's k-steps and of whole step pairs; 1
    with a batch (br > 1: see batch_chunks) or where no divisor of K leaves chunks of
    CoreRules.min_k_chunk steps or more."""
    if br > 1:
        return 1
    step_bytes = _panel_step_bytes(target, panels, k, element_bytes)
    if not step_bytes:
        return 1
    unit = max([dot_steps(panel.mode.dot) for panel in panels if panel.mode.dot]
               + [PAIR_STEPS for panel in panels if panel.mode.pairs], default=1)
    budget = chunk_budget(target)
    for chunks in range(-(-k * step_bytes // budget), k // rules(target).min_k_chunk + 1):
        if k % chunks == 0 and k // chunks % unit == 0:
            return chunks
    return 1


# The same for a batch: its block rows read A's panels of every batch entry, and past L1 they
# come from L2 again for each column block; A's pitch, a run-time argument, decides how much
# an unchunked batch loses, so the rule chunks regardless


def batch_chunks(target: Target, panel: Panel, k: int, br: int, element_bytes: int = 4) -> int:
    """How many equal chunks of batch entries a panel's rows run (1: the whole batch at
    once): where k_chunks' rule finds its A panels over the batch outgrowing L1, the fewest
    chunks (a divisor of br) whose entries' panels and B columns fit the chunk budget, one
    entry a chunk at least. Not for dot tails and step pairs, which load less of A a step
    than the rule counts (chunked so, they ran slower)."""
    if br == 1 or panel.mode.dot or panel.mode.pairs:
        return 1
    step_bytes = _panel_step_bytes(target, (panel,), k * br, element_bytes)
    if not step_bytes:
        return 1
    entries = max(1, chunk_budget(target) // (k * step_bytes))
    return next(chunks for chunks in range(1, br + 1) if br % chunks == 0
                and br // chunks <= entries)


# A's columns a multiple of the core's conflict pitch apart map a block row's lines into a few
# of L1's sets, so its panel leaves L1 between column blocks however short: a row sweeping its
# columns twice or more reads a copy of its panel instead, decided at run time from ld_a
# (batches read A in place: copying each entry of a chunk did not pay)
PACK_FRAME_BYTES = 32768         # most stack a block row's copy of A may take


def packs_a(target: Target, panel: Panel, steps: int, br: int, element_bytes: int) -> bool:
    """Whether the panel's block rows copy A's panel (`steps` k-steps) into the frame where
    ld_a is a multiple of the core's conflict pitch: the 16-register blocks only (the
    32-register ones ran slower copying, docs/measurements.md), no batch, whole vectors only
    (the copy reads no row past M), two column blocks or more a row, and the copy within
    PACK_FRAME_BYTES."""
    row_bytes = panel.vectors * target.vector_bits // 8
    return (target.registers == 16 and br == 1 and not panel.tail_rows and not panel.mode.dot
            and panel.column_blocks >= 2 and row_bytes * steps <= PACK_FRAME_BYTES)


# general registers a kernel has past its six arguments (frame.POOL): the K counter, 3 * ld_b,
# a batch's three (count, A step, B step), a dot tail's walker and B's base pointers
POOL_REGISTERS = 9


def base_registers(br: int, dot: bool) -> int:
    """General registers a kernel has for B's base pointers: the argument register of B, and
    what the pool leaves after the K counter, 3 * ld_b, a batch's three and a dot tail's
    walker."""
    return 1 + POOL_REGISTERS - 2 - (3 if br > 1 else 0) - (1 if dot else 0)
