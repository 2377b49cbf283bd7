"""x86-64 BRGEMM blocking: how a kernel cuts C into register blocks, chosen per (M, N, K,
batch) and per core (target.micro: full-rate vector width, FMA pipes, load ports, the cost
of a masked store, L1's sets and ways). brgemm.py generates the code of a plan.

A plan is a tuple of Panels, one per band of rows: its blocks' height in vectors, the tail
rows and how they are held (masked, packed several columns a vector, an overlapping whole
vector, dot products along K, step pairs), the columns a block and how N is swept. `plan`
finds the cheapest by a small cost model of the generated loop (`_block_cycles`: FMA,
shuffle and L1 throughput, FMA latency, the update of C, per-block overhead). `choose` also
picks the register width (AVX-512 as 256-bit EVEX vectors, 32 registers and the same masks,
where the core splits a zmm FMA in halves and a zmm would be half empty: Zen 4) and applies
the measured rules the model does not price: `unmasked_target` (on such a core an M with a
tail takes the AVX2 code unless its masked zmm tail is nearly full), `wide_pair_target`
(step pairs in all 32 registers) and `pair_dot_panels` (Zen 3: M = 9, 10 as a panel of step
pairs and one of dot tails). `b_column_limit` keeps a block's columns of B within L1's
ways; `quad_limit`, `dot_tail_share` and `PAIR_STEPS` say where B's quads, dot tails and
step pairs may go; `k_chunks` and `batch_chunks` run K or the batch in chunks where A's
panel outgrows L1, and `packs_a` says which block rows copy A's panel first where its pitch
would keep it out of L1.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from einjit.backends import CONFLICT_PITCH_BYTES, LINE_BYTES, Target
from einjit.backends.x86_64.precision import precision

COLUMNS_PER_BASE = 5          # B columns one base pointer reaches (see docs/brgemm.md)
MAX_COLS = 25                 # widest block the model weighs (a batched kernel's 5 bases)
MAX_VECTORS = 6               # taller blocks leave too few columns to amortize A's loads
AVX2_SHARES = (1, 2, 4)       # rows one broadcast load repeats: vbroadcastss, sd, f128


@dataclass(frozen=True)
class TailMode:
    """How a block row holds its tail rows and takes its k-steps. group: columns whose tail
    rows share one vector (1: not packed). overlap: the tail vector is loaded and stored
    whole, without masks, ending at the last row (see brgemm's registers). quads: how many of
    a block's columns take B four k-steps at a time (see quad_limit). dot: the lanes one
    k-step takes where the tail rows are dot products along K (0: they are not; see
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


# ways of an L1 set a block's B columns may fill (A's and C's lines need the others):
# Zen 4, B with a pitch of 8 KiB (a 2048-float ld) at 13 columns a block ran at 72% of peak, at
# 6 columns 94%
SPARE_L1_WAYS = 2


def b_column_limit(target: Target, ld_b_bytes: int | None) -> int:
    """Most columns of B a register block may read when B's columns lie ld_b_bytes apart:
    every k-step reads one element of each, so their lines must fit the L1 sets they map to
    together (a pitch of a multiple of 4 KiB puts them all in one set; past its ways each
    read misses). None: the pitch is not known, no limit."""
    if ld_b_bytes is None:
        return MAX_COLS
    micro = target.micro
    per_set: dict[int, int] = {}
    for cols in range(1, MAX_COLS + 1):
        index = (cols - 1) * ld_b_bytes // LINE_BYTES % micro.l1_sets
        per_set[index] = per_set.get(index, 0) + 1
        if per_set[index] > micro.l1_ways - SPARE_L1_WAYS:
            return cols - 1
    return MAX_COLS


# A block of one vector of A (whole or masked; or one and a packed tail) loads a B element for
# every FMA of that vector: on Zen 4, which loads 2 vectors a cycle, such an AVX2 block runs at
# the load ports' pace (M = 8, 13 columns: 89% of peak in a loop from L1). Its last `quads`
# columns may instead take B four k-steps at a time: one 16-byte vbroadcastf128 of
# B[k..k+3, j] into a register of their own, then per k-step a vshufps spreads element k to
# every lane (a shuffle, no load; Zen 4 runs it beside the FMAs): 9 + 2 such columns 94% in
# the same loop. Zen 4, K = 64: M = 8 83 -> 89% of peak, M = 10 81 -> 83% (grid means).
MAX_QUADS = 3
# In a block of one whole vector (no tail) a quad column's vshufps takes an FMA pipe about
# every other k-step: Zen 4, 8x24x64 with 3 quad columns runs 4.3 cycles a k-step, not the 4
# of its FMAs. Priced so, M = 8 takes its k-steps in pairs where K is long (see PAIR_STEPS).
# Beside a packed tail the quads were measured as the model had them (M = 10: pricing them
# so there lost 4 to 10 points at K = 64).
QUAD_SHUFFLE_FMA_SHARE = 0.5
# Packed tails whose blends leave the shuffles no room (see quad_limit): 8 columns a vector
# (7 blends a k-step) and 2 (a share of 4 lanes)
NO_QUAD_GROUPS = (2, 8)


def quad_limit(target: Target, vectors: int, tail_rows: int, mode: TailMode, k: int,
               element_bytes: int) -> int:
    """Most quad columns a block may have (0: none): AVX2 (VEX) float32 blocks of at most one
    full vector (and a masked or packed tail), K of at least 4 steps. Only for an M that one
    such block row covers (see _plan): the model would otherwise cut taller M into such
    rows, which run slower than it says (Zen 4, 18x24x16: 3 vectors with a packed tail 84%
    of peak; a quad row of 1 vector and one of 1 + a packed tail 76%). Not beside a tail
    packed 8 or 2 columns a vector (NO_QUAD_GROUPS): its blends crowd the pipes the shuffles
    need (Zen 4, same-run A/B without quads, K in {16, 64}: M = 9, N in 8..62, +2.4 points of
    peak; M = 11, 12, N in 8..64, +0.5 to +0.9 over all, +1.1 to +2.1 where the plan
    changes, 12x44x64 85 -> 91%). Beside 4 columns a vector (M = 10) they stay: without
    them K = 16 gained, K = 64 lost up to 11 points."""
    full = vectors - (1 if tail_rows else 0)
    if (target.masks or element_bytes != 4 or full > 1 or mode.overlap or k < 4
            or mode.group in NO_QUAD_GROUPS):
        return 0
    return MAX_QUADS


# 256-bit tails of t <= 7 float32 rows may instead be computed as dot products along K: lanes
# hold k-steps, not only rows. A vector of such a tail holds g = 8 // share k-steps of each
# of its rows (t padded to a share of 1, 2, 4 or 8, the narrowest whose g divides K; lane
# r*g + q: row r, step q), so B's part of it is its g elements B[k..k+g-1, j] repeated: one
# load (vmovups as the FMA's operand, vbroadcastf128, vbroadcastsd, vbroadcastss), no
# shuffle. A's tail rows are copied once per call into the kernel's stack frame in that
# layout, and each column gets one accumulator. One FMA then serves g k-steps of the tail,
# where a masked tail vector spends one FMA (and a packed one, blends of B) on each; after
# the K loop each row's g lanes are summed. With a share of 8 (g = 1) it is a masked tail
# vector without masks: no vmaskmovps (C's rows go in pieces of 4, 2 and 1). Zen 4, AVX2
# code: K = 64, 1x24 1245 -> 216 cycles, 4x40 2060 -> 882 (5 -> 25%, 22 -> 53% of peak; the
# EVEX code for Zen 5, run there: 6 -> 35%, 23 -> 48%); 7x40x16 879 -> 538 cycles. M >= 8
# gains little (16 registers leave 6 columns to a block of one full vector and a dot tail,
# whose FMA latency binds).
DOT_SHARES = (1, 2, 4, 8)
DOT_LANES = 8                    # float32 lanes of the 256-bit vectors a dot tail uses
DOT_FRAME_BYTES = 16384          # most stack the copied tail rows of A may take


def dot_steps(share: int) -> int:
    """k-steps one vector of a dot tail holds (g) when a k-step takes `share` lanes."""
    return DOT_LANES // share


def dot_tail_share(target: Target, tail_rows: int, k: int, br: int, element_bytes: int) -> int:
    """The lanes one k-step takes if a block row's tail rows may be dot products along K, else
    0: 256-bit vectors (AVX2, or AVX-512's EVEX ymm), float32, 1 to 7 rows, padded to the
    narrowest share whose 8 // share k-steps a vector divide K, and A's copied tail rows
    (every batch entry's) within DOT_FRAME_BYTES."""
    if target.vector_bits != 256 or element_bytes != 4 or not 1 <= tail_rows <= 7:
        return 0
    share = next(share for share in DOT_SHARES
                 if share >= tail_rows and k % dot_steps(share) == 0)
    return share if br * k * share * element_bytes <= DOT_FRAME_BYTES else 0


# An AVX2 block of one whole vector of A (8 float32 rows) loads a B element for each of its
# FMAs: the load ports bind it (see quad_limit). Its k-steps may instead go two at a time:
# the columns k and k+1 of A, unpacked (vunpcklps, vunpckhps) into two vectors whose lanes
# hold rows {0, 1, 4, 5} and {2, 3, 6, 7} of both steps (lane 2r + q: step k + q), meet
# B[k, j] and B[k+1, j] repeated over the vector, one 8-byte vbroadcastsd for both vectors'
# FMAs. Half the loads of B, no shuffle per column; after the K loop two vshufps and an add
# sum each column's step pairs into its rows in order. 16 registers leave 6 columns. Zen 4,
# same-run A/B against one-element (and quad) blocks: M = 8, N in 8..64, K = 64: 87 -> 95%
# of peak typically (every N +1 to +8 points), K = 16 within +-2; M = 9 (its 8 rows so, the
# last as a dot panel), K = 64: 72 -> 82-87%. Only where M has one whole vector: taller M
# cut into such rows ran 2-3 points slower than the model said (20x17, 25x25 at K = 64).
# M of one whole vector and 1 to 4 tail rows (9..12) may take its tail in pairs too: a share
# of 2p lanes a column (p = share_lanes: 1, 2 or 4 rows, the column's last p, lane 2r + q:
# row r, step k + q), 4 // p columns a vector. B's part of a share is the column's 8-byte
# broadcast itself, blended into its lanes; A's is its p rows of columns k and k+1
# interleaved (two broadcast or xmm loads, one or three shuffles). No lane is wasted where
# the packed tail of one-step blocks spends a blend on every column and a load of B on
# every FMA (Zen 4 loop of 8 such columns, M = 9: 79% of peak as one-step blocks with a
# packed tail, 99% in pairs; ymm16-31 held the step-pair accumulators there).
PAIR_STEPS = 2
PAIR_TAIL_ROWS = range(1, 5)
# Zen 4, M = 11, 12 in pairs against the pipelined 16-register code: K = 16 4 to 6 points
# slower (12x50 82 -> 78%), K = 32 -1.8 to +3.2, K = 48 -0.8 to +6.6 (12x17 82 -> 88%),
# K = 64 +0.3 to +1.8 (and +7 where the 16-register blocks split N badly: 12x17 84 -> 92%),
# K = 128 12x50 89 -> 96%
PAIR_TAIL_LONG_K = 48


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
# two lines a cycle (measured: a 16-row block of 13 columns runs 7% faster on an aligned A;
# loading, adding to and storing misaligned C vectors takes 2 cycles each, aligned ones 1)
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


# A block stores all its accumulators at once; past about 16 vector stores the burst stalls
# the next block on a core that splits zmm in halves (Zen 4: 13 zmm stores cost 9 cycles
# beyond the FMAs, 26 cost 47; full-width cores are not measured and not priced so). So, on
# Zen 4 the model takes blocks of one zmm and 20-24 columns (embedded broadcasts) over 2 x 14
# where K is short: same-day A/B, M, N in 8..64 at K in {16, 64}, the 13% of shapes whose
# blocking changes gain 2.7 points of peak on average (32x40x16 90 -> 95%, 48x57x16 85 -> 94%).
STORE_BURST_UNITS = 16
STORE_BURST_CYCLES = 2.0


def _block_cycles(target: Target, vectors: int, cols: int, tail_rows: int, mode: TailMode,
                  k: int, br: int) -> float:
    """One register block: k-steps of target.micro.fma_pipes FMAs a cycle (a vector wider
    than the core's full-rate width counts once per half, as do its loads and stores), 4
    vector instructions a cycle, 4 cycles of FMA latency per accumulator chain, load_ports
    L1 accesses a cycle shared with the update of C (a load and a store per vector of C),
    which the next block's FMAs overlap unless its stores come in a burst of more than
    STORE_BURST_UNITS; plus the batch loop and the block's set-up, and for
    a packed tail the latency only a long K hides: AVX-512's vpermps (5 cycles) before the
    first FMA, and the shares of a group's columns added to their vector one after another
    (AVX-512: masked adds, 2 cycles each; AVX2: a chain of blends into one vector, then one
    add). AVX2 masked stores (vmaskmovps, a lone masked tail's) are microcoded on AMD cores:
    each costs micro.masked_store_cycles that nothing overlaps. An overlapping tail is a
    whole vector like the others. A dot tail's accumulators take one FMA a vector of k-steps
    (without full vectors, their chains allow that many more cycles a step), and sum each
    column's lanes after the K loop (4 to 6 shuffles and adds) before C's rows are added
    (in pieces of 4, 2 and 1 floats). Step pairs: each accumulator takes one FMA every two
    steps, and each column's two are summed into one vector (3 instructions) before C's, a
    tail vector's (priced at 5: summed and moved to where a packed tail's shares sit; a
    vector a column takes 3, two columns at once) before its rows of C are added. In a block
    without a tail a quad column's shuffle counts QUAD_SHUFFLE_FMA_SHARE of an FMA."""
    micro = target.micro
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
    fma_pipe_ops = fmas + (0 if tail_rows else QUAD_SHUFFLE_FMA_SHARE) * quads
    compute = steps * max(fma_pipe_ops * passes / micro.fma_pipes, vector_ops * passes / 4,
                          4.0 / chain)
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
        burst = max(0, stores - STORE_BURST_UNITS) * STORE_BURST_CYCLES
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


def _row_partitions(total: int) -> Iterator[tuple[int, ...]]:
    """Ways to cut `total` vectors into blocks: greedy by a height, and evenly balanced, each
    also in reverse order (the last block carries the tail rows)."""
    seen = set()
    for height in range(1, min(MAX_VECTORS, total) + 1):
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
    K = 1 stores C masked. Measured on Zen 4, M, N in 8..64 at K in {16, 64}: mean 74% of
    peak all AVX-512, 83% so; K = 1 at 29% of the store bound, 99% so. A masked zmm tail
    that leaves at most a fifth of its lanes empty (float32 tails of 13 to 15 rows, float64
    of 7) stays AVX-512 where K > 1: it wastes less than AVX2's overlapping tail there
    (Zen 4, N in {8, 24, 50}, K = 16: M = 61 81 -> 89%, M = 13 72 -> 75%, float64 M = 23
    83 -> 88%). So does an M that fills more than half of one ymm, where K > 1: its masked
    EVEX ymm needs no microcoded vmaskmovps store and has 32 registers (Zen 4, float32, N in
    9..57, K in {4, 16, 64}: M = 5 8-38 -> 27-54% of peak, M = 7 7-52 -> 31-67%; float64
    M = 3 16-52 -> 38-65%; float32 M <= 4 is as fast either way, as AVX2 dot tails or EVEX
    ymm)."""
    lanes = target.lanes(element_bytes)
    tail = m % lanes
    keep = (lanes - tail) * 5 <= lanes or lanes // 4 < m < lanes // 2
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
    neither's update, so the choice is a measured rule, not the model's. Measured on Zen 4
    against the 16-register code:
    - an M of one whole vector and a tail of 1 to 4 rows (9..12), the tail in pairs too:
      M = 9, 10, N in 8..64, K = 16 -1.6 to +9 points (mean +4), K = 64 +4 to +17 (9x50
      75 -> 89%, 10x28 81 -> 92%); tails of 3 or 4 rows, whose update of C has a vector a
      column, only where K >= PAIR_TAIL_LONG_K;
    - an M of one whole vector (8) whose N fits one block of 32 registers but not of 16:
      one block, no second one's update (N in 7..14, K = 16 -1.5 to +7, K = 64 -1 to +12;
      8x8x64 90 -> 95%)."""
    lanes = unmasked.lanes(element_bytes)
    if not (target.registers > 16 and unmasked.registers == 16 and not unmasked.masks
            and pair_steps_fit(unmasked, k, element_bytes) and m // lanes == 1):
        return None
    wide = replace(unmasked, registers=target.registers)
    tail = m % lanes
    if tail:
        long_enough = share_lanes(unmasked, tail) < 4 or k >= PAIR_TAIL_LONG_K
        return wide if tail in PAIR_TAIL_ROWS and long_enough else None
    pairs = TailMode(pairs=True)
    one_block = _max_cols(unmasked, 1, 0, pairs) < n <= _max_cols(wide, 1, 0, pairs)
    return wide if one_block else None


# Zen 3 (AVX2 alone: 16 registers and no spare set to pipeline C's updates with), M = 9, 10:
# the 8 whole rows in step pairs and the tail rows as dot products along K, as two panels,
# beat the one panel of a packed tail the model prefers there. Same-run A/B, best of 6
# alternating rounds, N in 8..64: M = 9 at K = 32 +5 points of peak on average (9x64x32
# 64 -> 76%), at K = 64 +8 (9x40x64 62 -> 83%); M = 10 at K = 64 +8 (10x40x64 77 -> 84%),
# K = 128 +6, K = 32 within +-2. They lose at K = 16, for M = 11, 12 (their tails take dot
# shares of 4 lanes: 11x40x64 65 -> 43%) and at N = 8 (a block of each: 9x8x64 67 -> 52%).
PAIR_DOT_MIN_N = 16


def pair_dot_panels(target: Target, m: int, n: int, k: int, br: int, element_bytes: int = 4,
                    ld_b: int | None = None) -> tuple[Panel, Panel] | None:
    """The two panels of the measured rule target.micro.pair_dot_min_k (see
    PAIR_DOT_MIN_N), or None where it does not apply: 16-register AVX2 code, float32, no
    batch, N >= PAIR_DOT_MIN_N, an M of one whole vector and t tail rows with K at least
    pair_dot_min_k[t - 1] and a multiple of 8 // t (a dot share of t lanes, no padding)."""
    tail = m - target.lanes(element_bytes)
    min_k = target.micro.pair_dot_min_k
    if not (target.registers == 16 and 1 <= tail <= len(min_k) and k >= min_k[tail - 1]
            and br == 1 and n >= PAIR_DOT_MIN_N and pair_steps_fit(target, k, element_bytes)):
        return None
    if dot_tail_share(target, tail, k, br, element_bytes) != tail:    # as measured: no padding
        return None
    col_limit = _column_limit(target, ld_b, element_bytes, br, dot=True)
    pair_modes = _candidate_modes(target, 1, 0, k, element_bytes,
                                  RowForms(pairs=True, pairs_only=True))
    dot_modes = _candidate_modes(target, 1, tail, k, element_bytes, RowForms(pack=False, dot=tail))
    rows = _sweep_n(target, 1, 0, n, k, br, pair_modes, col_limit)
    tail_row = _sweep_n(target, 1, tail, n, k, br, dot_modes, col_limit)
    if rows is None or tail_row is None or not tail_row.mode.dot:
        return None
    return rows.panel(1, 1, 0), tail_row.panel(1, 1, tail)


def choose(m: int, n: int, k: int, br: int, target: Target, dtype: str = "float32",
           ld_b: int | None = None) -> tuple[Target, tuple[Panel, ...]]:
    """The vector width (as a Target) and blocking the cost model finds cheapest for
    target.micro (see unmasked_target); on a tie the wider. Step pairs in 32 registers where
    wide_pair_target gives their target, the panels of pair_dot_panels where it gives them."""
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
        cycles, panels = _plan(m, n, k, br, candidate, dtype, ld_b)
        if best is None or cycles < best[0]:
            best = (cycles, candidate, panels)
    return best[1], best[2]


# Zen 3: M = 17's tail row packed 8 columns a vector (7 blends a k-step beside 11 FMAs) runs
# slower than the model says; as a dot tail instead, same-run A/B, best of 6 alternating
# rounds, N at random: K = 16 +10.7% geomean (6 shapes, each faster: 17x38x16 63 -> 80% of
# peak), K = 32 +5.1%, K = 64 +8.3% (17x54x64 83 -> 92%), K = 128 +9.7%. Not for other Ms of
# a one-row tail: M = 9 at K = 16 -1.4% (11 shapes), M = 33..57 -5 to +4% by M and K.
def packs_tail(target: Target, m: int, element_bytes: int) -> bool:
    """Whether a kernel of M rows may pack its tail rows (see pack_group): AVX-512 packs
    float32 tails only; AVX2 packs both, but not the one-row float32 tails of the Ms in
    target.micro.unpacked_one_row_m."""
    if target.masks:
        return element_bytes == 4
    return not (element_bytes == 4 and m in target.micro.unpacked_one_row_m)


def _column_limit(target: Target, ld_b: int | None, element_bytes: int, br: int,
                  dot: bool) -> int:
    """Most columns a block may have: B's pitch in L1 (b_column_limit) and the general
    registers left for B's base pointers."""
    col_limit = b_column_limit(target, None if ld_b is None else ld_b * element_bytes)
    return min(col_limit, COLUMNS_PER_BASE * base_registers(br, dot))


def _plan(m: int, n: int, k: int, br: int, target: Target, dtype: str = "float32",
          ld_b: int | None = None) -> tuple[float, tuple[Panel, ...]]:
    elements = precision(dtype)
    lanes = target.lanes(elements.bytes)
    vectors_total = -(-m // lanes)
    tail_rows = m % lanes
    dottable = dot_tail_share(target, tail_rows, k, br, elements.bytes)
    col_limit = _column_limit(target, ld_b, elements.bytes, br, bool(dottable))
    pairable = pair_steps_fit(target, k, elements.bytes)
    pairs_only = not target.masks and target.registers > 16        # see wide_pair_target
    packs = packs_tail(target, m, elements.bytes)
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
                sweeps[key] = _sweep_n(target, height, rows, n, k, br, modes, col_limit)
            sweep = sweeps[key]
            if sweep is None:            # no blocking of this row: not a partition for it
                break
            cycles += count * sweep.cycles
            panels.append(sweep.panel(count, height, rows))
        else:
            if best is None or cycles < best[0]:
                best = (cycles, tuple(panels))
    assert best is not None, f"no blocking of {m}x{n}x{k} for {target}"
    return best


# A block whose loads of A outrun what L2 refills into L1 (bytes a cycle, with B's and C's
# lines beside them) slows down once A's panel (its rows over all of K) no longer stays in
# L1 from one column block to the next. Zen 4: AVX2 blocks of 3 vectors x 4 columns load 16
# bytes of A a cycle: 70x60x64 94% of peak, 70x60x500 75%; the K loop run in chunks (C added
# back between chunks) whose A panel and B columns fill at most 3/8 of L1 brings them back:
# 70x60x500 in 4 chunks 87%, in 5 (the 3/8 rule) 91%, in 10 89%. AVX-512's 2 zmm x 12 columns
# (5 bytes a cycle) stay at 99% at K = 500 unchunked.
L2_REFILL_BYTES = 8.0
L1_CHUNK_SHARE = 3 / 8
MIN_K_CHUNK = 32


def _chunk_budget(target: Target) -> int:
    """Bytes of L1 a chunk's A panels and B columns may fill (L1_CHUNK_SHARE)."""
    return int(target.micro.l1_bytes * L1_CHUNK_SHARE)


def _panel_step_bytes(target: Target, panels: tuple[Panel, ...], steps: int,
                      element_bytes: int) -> int:
    """Bytes of A and B a k-step of the hungriest block row loads (see L2_REFILL_BYTES), or
    0 if none needs chunks: a row of two or more column blocks that loads A faster than L2
    refills L1 and whose A panel over `steps` k-steps outgrows L1_CHUNK_SHARE of L1."""
    micro = target.micro
    budget = _chunk_budget(target)
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
        if a_bytes / cycles > L2_REFILL_BYTES and a_bytes * steps > budget:
            step_bytes = max(step_bytes, a_bytes + panel.cols * element_bytes)
    return step_bytes


def k_chunks(target: Target, panels: tuple[Panel, ...], k: int, br: int,
             element_bytes: int = 4) -> int:
    """How many equal chunks the kernel's K loop runs in (1: one K loop; see L2_REFILL_BYTES):
    the fewest whose A panel and B columns fit L1_CHUNK_SHARE of L1, where a panel with two or
    more column blocks loads A faster than L2_REFILL_BYTES a cycle; chunks of whole vectors of
    a dot tail's k-steps and of whole step pairs; 1 with a batch (br > 1: see batch_chunks)
    or where no divisor of K leaves chunks of MIN_K_CHUNK steps or more."""
    if br > 1:
        return 1
    step_bytes = _panel_step_bytes(target, panels, k, element_bytes)
    if not step_bytes:
        return 1
    unit = max([dot_steps(panel.mode.dot) for panel in panels if panel.mode.dot]
               + [PAIR_STEPS for panel in panels if panel.mode.pairs], default=1)
    budget = _chunk_budget(target)
    for chunks in range(-(-k * step_bytes // budget), k // MIN_K_CHUNK + 1):
        if k % chunks == 0 and k // chunks % unit == 0:
            return chunks
    return 1


# The same for a batch: its block rows read A's panels of every batch entry, and past L1 they
# come from L2 again for each column block. Zen 4, AVX2 3x4 blocks (16 bytes of A a cycle):
# 64x64x64 batch 16 at 99 GFLOPS, batch 2 at 107, batch 1 at 113 (48x24x64: 97, 112, 114);
# the batch in chunks of entries whose panels fit L1_CHUNK_SHARE (C added back between them)
# runs like the small batches. How much an unchunked batch loses depends on A's pitch, a
# run-time argument, so the rule chunks regardless: 24x64x64 batch 8, unchunked / chunked,
# ld_a = 70 (280-byte columns, off the line grid) 89 / 110 GFLOPS, ld_a = 24 116 / 114.


def batch_chunks(target: Target, panel: Panel, k: int, br: int, element_bytes: int = 4) -> int:
    """How many equal chunks of batch entries a panel's rows run (1: the whole batch at
    once): where k_chunks' rule finds its A panels over the batch outgrowing L1, the fewest
    chunks (a divisor of br) whose entries' panels and B columns fit L1_CHUNK_SHARE of L1, one
    entry a chunk at least. Not for dot tails and step pairs, which load less of A a step
    than the rule counts (Zen 4, chunked as the rule said: 9x64x64 batch 8 in pairs 6% slower,
    17x64x64 batch 8 with a dot tail 2%)."""
    if br == 1 or panel.mode.dot or panel.mode.pairs:
        return 1
    step_bytes = _panel_step_bytes(target, (panel,), k * br, element_bytes)
    if not step_bytes:
        return 1
    entries = max(1, _chunk_budget(target) // (k * step_bytes))
    return next(chunks for chunks in range(1, br + 1) if br % chunks == 0
                and br // chunks <= entries)


# A's columns a multiple of 512 bytes apart (ld_a a multiple of 128 floats: a tall operand, or
# numpy's power-of-two shapes) map a block row's lines into an eighth of L1's sets or fewer
# (at 4 KiB into one set, and a page each), so its panel leaves L1 between column blocks
# however short. A block row whose columns sweep A's panel twice or more then first copies
# the panel into the kernel's stack frame, contiguous and aligned, and its blocks read the
# copy. Zen 3, AVX2, 128x64x256 at ld_a = 128 / 256 / 512 / 1024 / 4096 floats: 68 / 69 / 70 /
# 49 / 46% of peak, at 136 or 264 (not a multiple) 90-92%. The copy is decided at run time
# from ld_a: other pitches read A where it lies. Batches read A in place: copying each entry
# of a chunk measured -7 to +4 points (48x24x64 x 16 at ld_a = 128 73 -> 66%, 64x64x64 x 8
# 84 -> 87%, 128x32x16 x 32 with entries 8 KiB apart 82 -> 81%).
PACK_PITCH_BYTES = CONFLICT_PITCH_BYTES
PACK_FRAME_BYTES = 32768         # most stack a block row's copy of A may take


def packs_a(target: Target, panel: Panel, steps: int, br: int, element_bytes: int) -> bool:
    """Whether the panel's block rows copy A's panel (`steps` k-steps) into the frame where
    ld_a is a multiple of PACK_PITCH_BYTES: no batch, whole vectors only (the copy reads no
    row past M), two column blocks or more a row, and the copy within PACK_FRAME_BYTES."""
    row_bytes = panel.vectors * target.vector_bits // 8
    return (br == 1 and not panel.tail_rows and not panel.mode.dot and panel.column_blocks >= 2
            and row_bytes * steps <= PACK_FRAME_BYTES)


# general registers a kernel has past its six arguments (frame.POOL): the K counter, 3 * ld_b,
# a batch's three (count, A step, B step), a dot tail's walker and B's base pointers
POOL_REGISTERS = 9


def base_registers(br: int, dot: bool) -> int:
    """General registers a kernel has for B's base pointers: the argument register of B, and
    what the pool leaves after the K counter, 3 * ld_b, a batch's three and a dot tail's
    walker."""
    return 1 + POOL_REGISTERS - 2 - (3 if br > 1 else 0) - (1 if dot else 0)
