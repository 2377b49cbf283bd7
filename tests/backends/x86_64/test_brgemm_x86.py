"""x86-64 BRGEMM extras: both code variants explicitly, every block-shape choice the cost
model can make (forced through the Target's microarchitecture facts), packed tail rows,
concurrent calls, register usage.

tests/test_brgemm.py checks the host's variant through einjit.brgemm; here every case runs the
AVX-512 and the AVX2 code (where the CPU has them), straight from the generator, so both are
checked in one run, for the facts of each known core and for two made-up cores that force
the AVX2 tail choices (masked stores free: masked and packed tails; masked stores dear:
overlapping tails). C sits in a canary-filled buffer with gaps (ld_c > m) so that any write
outside its m×n sub-matrix is seen.
"""

import ctypes
import dataclasses
import re
import threading

import numpy as np
import pytest

from einjit.backends import Microarch
from einjit.backends.x86_64 import VARIANTS, cpu
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler
from einjit.backends.x86_64.blocking import (
    MAX_COLS,
    Panel,
    TailMode,
    _max_cols,
    b_column_limit,
    batch_chunks,
    choose,
    dot_tail_share,
    k_chunks,
    max_cols,
    packs_tail,
    pair_dot_panels,
    plan,
    unmasked_target,
)
from einjit.backends.x86_64.brgemm import _Generator, generate_brgemm
from einjit.backends.x86_64.encode import RSP, Mem
from einjit.backends.x86_64.outer_product import OuterProduct
from einjit.backends.x86_64.precision import precision
from einjit.backends.x86_64.schedule import sequences, slots
from einjit.backends.x86_64.tuning import CORE_RULES, GENERIC_RULES, rules
from einjit.disasm import disassemble
from einjit.runtime.host import host_isa
from einjit.runtime.memory import ExecutableMemory

from support import bits, canary, canary_buffer, guarded, run_guarded, strided

pytestmark = pytest.mark.skipif(host_isa() != "x86_64", reason="runs x86-64 code")

_PROTOTYPE = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 8)


def _variants():
    have = cpu.features()
    params = []
    for variant, needs in cpu.VARIANTS.items():
        missing = [name for name in needs if name not in have]
        reason = (f"host CPU lacks {', '.join(missing)}" if host_isa() == "x86_64"
                  else "runs x86-64 code")   # not an x86-64 host: no CPU features to list
        params.append(pytest.param(variant, marks=pytest.mark.skipif(bool(missing),
                                                                     reason=reason)))
    return params


# the facts of each known core (Intel's three share their rules: Sapphire Rapids stands for
# them here, the INTEL_* tests below run all three), and two made-up cores that force the AVX2
# tail choices
MICROS = {**{name: cpu.MICROARCHS[name] for name in ("zen3", "zen4", "zen5", "generic",
                                                     "sapphirerapids", "skylake-sp",
                                                     "icelake-sp")},
          "cheap-masks": Microarch("cheap-masks", masked_store_cycles=0.0),
          "dear-masks": Microarch("dear-masks", full_rate_bits=256, masked_store_cycles=1e6)}


def target(variant, micro="zen3"):
    """The variant's Target with the facts of `micro` (a MICROS key)."""
    return dataclasses.replace(VARIANTS[variant], micro=MICROS[micro])


def choices(tgt, m, n, k, br, dtype="float32"):
    """The block-shape choices the generator makes for one kernel, as words."""
    unmasked = unmasked_target(tgt, m, np.dtype(dtype).itemsize, k)
    if OuterProduct.applies(unmasked, m, k, br, unmasked.lanes(np.dtype(dtype).itemsize)):
        return {"outer"}
    generator = _Generator(Assembler(), tgt, m, n, k, br, precision(dtype))
    chosen, panels = generator.target, generator.panels
    words = {f"{chosen.vector_bits}-bit"}
    if any(generator.pipelining[panel]
           and any(sum(blocks for blocks, _ in run) > 1 for run in sequences(panel))
           for panel in panels):
        words.add("pipelined")
    for panel in panels:
        mode = panel.mode
        if any(generator._run_is_skewed(panel, blocks, cols, k)
               for blocks, cols in panel.runs()):
            words.add("skewed")
            if mode.group > 1:
                words.add("skewed packed")
            if mode.pairs:
                words.add("skewed pairs")
            if panel.tail_rows and not (mode.overlap or mode.group > 1 or mode.pairs):
                words.add("skewed masked")
        if panel.tail_rows:
            words.add("pair tail" if mode.pairs else "packed" if mode.group > 1
                      else "overlap" if mode.overlap else "dot" if mode.dot else "masked")
        if mode.quads:
            words.add("quads")
        if mode.pairs:
            words.add("pairs")
        if panel.n_tail and panel.tail_blocks > 1:
            words.add("two widths")
    return words


class Compiled:
    """Generated BRGEMM code mapped executable, called with raw addresses."""

    def __init__(self, m, n, k, br, variant, dtype="float32", micro="zen3", accumulate=True,
                 stream=False, ld_b=None, far_c=0, next_call=None):
        code = generate_brgemm(target(variant, micro), m, n, k, br, dtype=dtype,
                               accumulate=accumulate, stream=stream, ld_b=ld_b, far_c=far_c,
                               next_call=next_call)
        self.memory = ExecutableMemory(code)
        self.function = _PROTOTYPE(self.memory.address)


class Case:
    """Operands of one call with gaps (ld > rows, batch stride gaps) and the float64 result
    (float128 where the operands are float64)."""

    PAD = 37   # canary elements around C

    def __init__(self, m, n, k, br, seed, dtype="float32", ld_b=None, ld_a=None, stride_a=None):
        rng = np.random.default_rng(seed)
        self.m, self.n, self.k, self.br, self.dtype = m, n, k, br, np.dtype(dtype)
        exact = np.longdouble if self.dtype == np.float64 else np.float64
        self.ld_a, self.ld_b, self.ld_c = ld_a or m + 3, ld_b or k + 1, m + 5
        self.stride_a = self.ld_a * k + 7 if stride_a is None else stride_a
        self.stride_b = self.ld_b * n + 2
        self.a = rng.uniform(-1, 1, (br - 1) * self.stride_a + self.ld_a * k).astype(dtype)
        self.b = rng.uniform(-1, 1, (br - 1) * self.stride_b + self.ld_b * n).astype(dtype)
        size = self.ld_c * n
        self.c_buffer = canary_buffer(size + 2 * self.PAD, dtype)
        c = self._c_matrix()
        c[...] = rng.uniform(-1, 1, c.shape).astype(dtype)
        self.initial = c.astype(exact)
        self.product = self.batch_product()

    def batch_product(self):
        """sum_i A_i B_i of the operands as they are now, in the exact type."""
        exact = np.longdouble if self.dtype == np.float64 else np.float64
        m, n, k = self.m, self.n, self.k
        return sum(self._matrix(self.a, i * self.stride_a, m, k, self.ld_a).astype(exact)
                   @ self._matrix(self.b, i * self.stride_b, k, n, self.ld_b).astype(exact)
                   for i in range(self.br))

    @staticmethod
    def _matrix(buffer, offset, rows, cols, ld):
        return buffer[offset:offset + ld * cols].reshape(cols, ld).T[:rows]

    def _c_matrix(self):
        return self._matrix(self.c_buffer, self.PAD, self.m, self.n, self.ld_c)

    def arguments(self):
        return (self.a.ctypes.data, self.b.ctypes.data,
                self.c_buffer.ctypes.data + self.dtype.itemsize * self.PAD,
                self.ld_a, self.ld_b, self.ld_c, self.stride_a, self.stride_b)

    def call(self, compiled):
        compiled.function(*self.arguments())

    def verify(self, calls=1):
        """C must be its initial value plus `calls` times the batch's product, canaries intact."""
        inside = np.zeros(self.c_buffer.size, bool)
        self._matrix(inside, self.PAD, self.m, self.n, self.ld_c)[...] = True
        bits = self.c_buffer.view(np.uint64 if self.dtype.itemsize == 8 else np.uint32)
        changed = np.flatnonzero(~inside & (bits != canary(self.dtype)))
        assert changed.size == 0, f"wrote outside C at buffer offsets {changed[:8].tolist()}"
        unit = 1e-5 if self.dtype == np.float32 else 1e-14
        tolerance = unit * calls * (self.k * self.br + 1)
        np.testing.assert_allclose(self._c_matrix(), self.initial + calls * self.product,
                                   rtol=0, atol=tolerance)


# M around both vector lengths (8 and 16 rows) and block heights, N around block widths
SHAPES = [
    (1, 1, 1, 1), (7, 3, 5, 2), (8, 8, 8, 1), (9, 14, 3, 3), (15, 25, 16, 2), (16, 26, 17, 1),
    (17, 6, 64, 1), (31, 13, 2, 5), (33, 31, 9, 2), (47, 9, 4, 1), (48, 17, 33, 2),
    (63, 24, 7, 1), (64, 64, 64, 3), (65, 12, 3, 2), (100, 7, 11, 1), (129, 50, 6, 2),
    (257, 3, 2, 1), (1024, 2, 3, 2), (3, 1024, 2, 1), (40, 40, 300, 1),
]
# issue 12's awkward sizes at small K, and outer products (K = 1, batch 1) of every kind
AWKWARD = [(m, n, k, br) for m, n in ((8, 50), (12, 12), (13, 9), (20, 25), (25, 40), (50, 24),
                                      (57, 8), (63, 61)) for k, br in ((16, 1), (3, 2))]
OUTER = [(m, n, 1, 1) for m, n in ((1, 1), (5, 9), (8, 3), (12, 4), (17, 5), (25, 6), (50, 7),
                                   (64, 13), (65, 2), (121, 9))]
# large K beside M tails: Zen 4 runs them as AVX2 blocks whose K loop goes in chunks
CHUNKED = [(70, 20, 500, 1), (25, 9, 400, 1), (50, 13, 256, 1), (100, 11, 392, 1)]
# block rows that copy A's panel into the frame where ld_a is a multiple of 512 bytes: tall
# M (several block rows, several panels), a tail panel beside (read where A lies), one
# vector (step pairs at K = 64), K in chunks, short K
PACKED_A = [(128, 40, 40, 1), (64, 40, 64, 1), (130, 24, 40, 1), (8, 40, 64, 1),
            (48, 30, 300, 1), (24, 17, 5, 1), (256, 12, 70, 1)]
# batches whose A panels outgrow L1 on Zen 4's AVX2 blocks: chunks of one entry and of
# several, a prime batch, two panels and a panel with a dot tail (not chunked) beside one
BATCH_CHUNKED = [(64, 64, 64, 4), (48, 24, 64, 16), (70, 60, 64, 5), (64, 40, 32, 6),
                 (25, 40, 64, 4), (57, 40, 64, 6)]
# AVX2 blocks of one vector of A reading B in quads: K a multiple of 4 and not (the steps
# left run alone), batches, masked (M < 8, a K too long for a dot tail's frame) and packed
# tails, a long K
QUADS = [(8, 24, 16, 1), (8, 13, 7, 2), (4, 9, 1025, 1), (10, 24, 17, 1), (10, 30, 5, 3),
         (10, 24, 17, 2), (10, 40, 5, 1), (8, 9, 999, 1)]
# 256-bit tails of 1 to 7 rows as dot products along K: every row count, batches, one column,
# a long K, a dot tail under full vectors, Ks that take a wider share, wide blocks with batches
DOTS = [(1, 24, 16, 1), (2, 33, 4, 2), (3, 10, 16, 1), (4, 9, 8, 3), (3, 7, 6, 2), (1, 1, 8, 1),
        (1, 13, 512, 1), (17, 48, 64, 1), (2, 5, 12, 1), (4, 30, 64, 1), (5, 9, 16, 1),
        (6, 13, 7, 2), (7, 20, 3, 3), (1, 40, 12, 1), (2, 30, 7, 2), (1, 50, 16, 2),
        (3, 45, 8, 2)]
# AVX2 blocks of one whole vector taking their k-steps in pairs: batches, one column, blocks of
# two widths, beside a dot tail's panel, K in 3 and in 5 chunks
PAIRS = [(8, 24, 64, 1), (8, 6, 100, 3), (8, 50, 200, 1), (8, 1, 64, 1), (9, 24, 64, 1),
         (9, 40, 600, 1), (8, 60, 500, 1)]
# M of one whole vector whose tail of 1 to 4 rows goes in step pairs too (AVX2 code with 32
# registers on a split-512 AVX-512 core): tails of 1, 2, 3 (one row computed twice) and 4
# rows, groups of 4, 2 and 1 columns, part-filled groups, two widths, batches, a long K
PAIR_TAILS = [(9, 24, 16, 1), (9, 50, 64, 1), (10, 17, 16, 1), (10, 33, 64, 2), (11, 17, 64, 1),
              (12, 50, 48, 3), (11, 5, 100, 2), (12, 9, 900, 1), (10, 3, 64, 1), (10, 10, 2, 1),
              (11, 4, 64, 1), (12, 3, 64, 1)]
# M = 8 whose N fits one block of pairs in 32 registers but not in 16: every width, batches
WIDE_PAIRS = [(8, 7, 64, 1), (8, 8, 16, 2), (8, 11, 2, 1), (8, 13, 30, 3), (8, 14, 64, 1)]
# runs of blocks pipelined on a split-512 AVX-512 core (each block's C update carried into the
# next block's K loop): odd and even runs, two panels and two widths, beside a dot panel, step
# pairs, quads, packed tails of shares 1, 2 and 4, overlapping tails, a K shorter than the
# update (the rest after the loop); one block and one of other columns, a wider block's
# update carried into a narrower one's (dot panels of 14, 14 and 12 columns) and back
PIPELINED = [(24, 24, 16, 1), (24, 20, 16, 1), (40, 40, 16, 1), (25, 24, 16, 1), (8, 64, 64, 1),
             (8, 24, 16, 1), (17, 40, 16, 1), (26, 50, 16, 1), (12, 40, 16, 1), (20, 17, 3, 1),
             (24, 20, 2, 1), (23, 30, 16, 1), (26, 30, 16, 1), (17, 30, 16, 1), (11, 9, 16, 1),
             (11, 13, 16, 1), (25, 40, 16, 1), (17, 9, 16, 1), (41, 9, 16, 1)]
# 16-register AVX2 runs of blocks with skewed columns: two blocks and many, a tail run skewed
# too, two base pointers of B (6 columns), an overlapping tail, K equal to the columns (no
# K loop after the head) and K short and odd
SKEWED = [(24, 24, 16, 1), (24, 8, 16, 1), (14, 8, 16, 1), (16, 24, 16, 1), (24, 12, 4, 1),
          (16, 60, 6, 1), (40, 40, 16, 1), (23, 30, 16, 1), (20, 17, 5, 1), (30, 36, 8, 1)]
# skewed slots of a packed tail's group (AVX2 float32: 8, 2 columns a vector, two widths) and
# skewed step pairs (AVX2: a block of one vector, and one beside a dot tail's panel; Zen 4's
# AVX-512: wide pairs with their tail packed 4 and 2 columns a vector)
SKEWED_PACKED = [(9, 50, 16, 1), (12, 40, 16, 1), (19, 30, 16, 1), (26, 30, 16, 1)]
SKEWED_PAIRS = [(8, 24, 64, 1), (9, 24, 64, 1)]
SKEWED_WIDE_PAIRS = [(9, 36, 16, 1), (10, 40, 16, 1), (9, 24, 64, 1),
                     # a tail of a vector a column: slots of two columns (one, odd)
                     (11, 40, 64, 1), (12, 27, 48, 1)]
# skewed masked tails of two or more vectors: AVX-512 zmm, AVX2 vmaskmovps (cheap-masks)
SKEWED_MASKED = [(62, 25, 16, 1), (61, 25, 16, 1), (47, 9, 4, 1)]
# slots of two or more columns, for a head within K: AVX-512 zmm blocks of 20 and more
# columns at K = 16, short K (AVX2: packed tails, two groups a slot, in 36x33x2 and 18x31x3)
SKEWED_WIDE_SLOTS = [(16, 60, 16, 1), (48, 57, 16, 1), (24, 8, 3, 1), (40, 40, 2, 1),
                     (36, 33, 2, 1), (18, 31, 3, 1)]
# Zen 3's M = 9, 10 as two panels (blocking.pair_dot_panels): whole rows in step pairs, the
# tail rows as dot products; N at the rule's least, blocks of two widths, K in chunks
PAIR_DOTS = [(9, 16, 32, 1), (9, 40, 64, 1), (10, 17, 64, 1), (10, 64, 128, 1), (9, 23, 600, 1)]
INTEL = ("skylake-sp", "icelake-sp", "sapphirerapids")
MICRO_NAMES = [name for name in MICROS if name not in INTEL[:2]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
@pytest.mark.parametrize("shape", SHAPES + AWKWARD + OUTER + CHUNKED + BATCH_CHUNKED + QUADS
                         + DOTS + PAIRS + PAIR_TAILS + WIDE_PAIRS + PIPELINED + SKEWED
                         + SKEWED_PACKED + SKEWED_PAIRS + SKEWED_WIDE_PAIRS + SKEWED_MASKED
                         + SKEWED_WIDE_SLOTS + PAIR_DOTS,
                         ids=lambda s: "x".join(map(str, s)))
def test_variant_matches_numpy(variant, micro, dtype, shape):
    case = Case(*shape, seed=sum(shape), dtype=dtype)
    case.call(Compiled(*shape, variant, dtype, micro))
    case.verify()


@pytest.mark.parametrize("far_c", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_setting_c_gives_the_bits_of_adding_to_a_zeroed_c(variant, micro, dtype, far_c):
    """accumulate=False: C := the batch's sum without reading C (it starts as NaN), bit for
    bit what C += gives on a zeroed C, signed zeros included (B's first column is -0: its
    products are -0 or +0, and +0 + -0 is +0); nothing outside C written. Likewise both
    told far_c (a loop nest's first k chunk sets C where the others add to it)."""
    shapes = (SHAPES + AWKWARD + OUTER + CHUNKED + BATCH_CHUNKED + QUADS + DOTS + PAIRS
              + PAIR_TAILS + WIDE_PAIRS + PIPELINED + SKEWED + SKEWED_PACKED
              + SKEWED_PAIRS + SKEWED_WIDE_PAIRS + SKEWED_MASKED + SKEWED_WIDE_SLOTS)
    for shape in FAR_C_ALL + PACKED_A if far_c else shapes:
        hint = shape[0] + 5 if far_c else 0                  # Case's ld_c
        setting, adding = (Case(*shape, seed=sum(shape), dtype=dtype) for _ in range(2))
        for case, start in ((setting, np.nan), (adding, 0.0)):
            case._c_matrix()[...] = start
            case._matrix(case.b, 0, shape[2], shape[1], case.ld_b)[:, 0] = -0.0
        setting.call(Compiled(*shape, variant, dtype, micro, accumulate=False, far_c=hint))
        adding.call(Compiled(*shape, variant, dtype, micro, far_c=hint))
        assert np.array_equal(setting.c_buffer.view(np.uint8), adding.c_buffer.view(np.uint8)), \
            f"{shape}: the set C differs from the added one"
        setting.initial, setting.product = np.zeros_like(setting.initial), setting.batch_product()
        setting.verify()


def _streamed_c(shape, variant, dtype, micro, stream, misalign):
    """C (with its canary surroundings) after a setting call: C and ld_c 64-byte aligned, or
    C moved one element off (the kernel must then take its cached path)."""
    m, n, k, br = shape
    rng = np.random.default_rng(sum(shape))
    item = np.dtype(dtype).itemsize
    lanes = 64 // item
    ld_c = -(-m // lanes) * lanes + lanes
    a = rng.uniform(-1, 1, br * m * k).astype(dtype)
    b = rng.uniform(-1, 1, br * k * n).astype(dtype)
    raw = canary_buffer(ld_c * n + 4 * lanes, dtype)
    start = (-raw.ctypes.data % 64) // item + lanes + misalign
    code = Compiled(m, n, k, br, variant, dtype, micro, accumulate=False, stream=stream)
    code.function(a.ctypes.data, b.ctypes.data, raw.ctypes.data + start * item, m, k, ld_c,
                  m * k, k * n)
    window = start - lanes - misalign       # the aligned start: same layout in every call
    return raw[window:window + ld_c * n + 3 * lanes], lanes + misalign, ld_c


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", ["zen4", "zen5"])
@pytest.mark.parametrize("variant", _variants())
def test_streaming_c_stores_the_same_bits_aligned_or_not(variant, micro, dtype):
    """stream=True: C goes out with non-temporal stores (the code has them) exactly where
    every block row is whole cache lines tall and has no tail, so no line is written partly
    so; other blockings and misaligned C take the cached stores. Either way C holds the bits
    of the cached kernel and nothing outside C is written."""
    streams = set()
    for shape in (SHAPES + AWKWARD + DOTS[-3:] + PAIRS[:3] + PAIR_TAILS[:5] + WIDE_PAIRS[:2]
                  + PIPELINED[:3] + PIPELINED[6:9] + SKEWED[:4] + [(128, 64, 32, 1), (64, 9, 16, 2),
                                                     (16, 8, 16, 1), (64, 8, 16, 1)]):
        m, n, k, br = shape
        chosen, panels = choose(m, n, k, br, target(variant, micro), dtype)
        whole_lines = all(not p.tail_rows and p.vectors * chosen.vector_bits % 512 == 0
                          for p in panels)
        # the outer product (K = 1, no batch) and K or a batch in chunks never stream
        size = np.dtype(dtype).itemsize
        whole_lines &= (k * br > 1 and k_chunks(chosen, panels, k, br, size) == 1
                        and all(batch_chunks(chosen, p, k, br, size) == 1 for p in panels))
        listing = disassemble(generate_brgemm(target(variant, micro), m, n, k, br, dtype,
                                              accumulate=False, stream=True), "x86_64")
        assert ("vmovntp" in listing) == whole_lines, shape
        streams.add(whole_lines)
        for misalign in (0, 1):
            streamed, start, ld_c = _streamed_c(shape, variant, dtype, micro, True, misalign)
            cached, _, _ = _streamed_c(shape, variant, dtype, micro, False, misalign)
            assert np.array_equal(streamed.view(np.uint8), cached.view(np.uint8)), shape
            m, n = shape[:2]
            written = strided(streamed[start:], (m, n), (1, ld_c))
            assert not np.isin(bits(written), [bits(canary_buffer(1, dtype))[0]]).all(), shape
            outside = np.ones(streamed.size, bool)
            for j in range(n):
                outside[start + j * ld_c:start + j * ld_c + m] = False
            assert np.array_equal(bits(streamed[outside]),
                                  np.full(outside.sum(), bits(canary_buffer(1, dtype))[0])), shape
    assert streams == {True, False}, "the shapes must include streamed and cached blockings"


def _all_choices(variant, dtype):
    return {word for micro in MICRO_NAMES
            for shape in (SHAPES + AWKWARD + OUTER + QUADS + DOTS + PAIRS + PAIR_TAILS + WIDE_PAIRS
                          + PIPELINED + SKEWED + SKEWED_PACKED + SKEWED_PAIRS
                          + SKEWED_WIDE_PAIRS + SKEWED_MASKED + SKEWED_WIDE_SLOTS)
            for word in choices(target(variant, micro), *shape, dtype)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_cases_above_make_every_choice(variant, dtype):
    """Every block-shape choice the generator can make is among the cases run above: both
    register widths on AVX-512, every kind of tail (AVX-512 packs float32 tails only; the
    split-512 cores' AVX2 code packs float64 tails too), outer products, N in blocks of two
    widths, B in quads, dot tails and k-steps in pairs (AVX2 code, float32), pipelined runs
    of blocks (AVX2 code on an AVX-512 core), skewed ones (plain, masked, packed, in step
    pairs)."""
    expected = {"outer", "masked", "two widths", f"{VARIANTS[variant].vector_bits}-bit"}
    expected |= {"skewed", "skewed masked"}
    if variant == "avx512":
        expected |= {"256-bit", "pipelined"} | ({"pair tail"} if dtype == "float32" else set())
    else:
        expected |= {"overlap"}
    if dtype == "float32" or variant == "avx2":
        expected |= {"packed", "skewed packed"}
    if dtype == "float32":
        expected |= {"quads", "dot", "pairs", "skewed pairs"}
    assert expected <= _all_choices(variant, dtype)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_quad_shapes_read_b_in_quads(variant):
    """Each QUADS case reads B in quads on Zen 4 (as AVX2 code), with a vbroadcastf128 and
    vshufps in its code, so the cases above run that path; float64 never does."""
    for shape in QUADS:
        assert "quads" in choices(target(variant, "zen4"), *shape), shape
        assert "quads" not in choices(target(variant, "zen4"), *shape, "float64"), shape
    listing = disassemble(generate_brgemm(target(variant, "zen4"), *QUADS[0]), "x86_64")
    assert "vbroadcastf128" in listing and "vshufps" in listing


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_pair_shapes_take_k_steps_in_pairs(variant):
    """Each PAIRS case takes its whole vectors' k-steps in pairs on Zen 4 (as AVX2 code, with
    the unpacks and 8-byte broadcasts in its code); float64 never does, nor an odd K."""
    for shape in PAIRS:
        assert "pairs" in choices(target(variant, "zen4"), *shape), shape
        assert "pairs" not in choices(target(variant, "zen4"), *shape, "float64"), shape
        m, n, k, br = shape
        assert "pairs" not in choices(target(variant, "zen4"), m, n, k + 1, br), shape
    listing = disassemble(generate_brgemm(target(variant, "zen4"), *PAIRS[0]), "x86_64")
    assert "vunpcklps" in listing and "vunpckhps" in listing and "vbroadcastsd" in listing


def test_the_pair_tail_shapes_take_their_tails_in_pairs():
    """Each PAIR_TAILS case takes its tail in step pairs on Zen 4 as AVX-512 (AVX2 code in
    all 32 registers, not pipelined), never as the AVX2 variant (16 registers), in float64
    or with an odd K; tails of 3 or 4 rows only where K >= CORE_RULES["zen4"].pair_tail_long_k."""
    for shape in PAIR_TAILS:
        assert "pair tail" in choices(target("avx512", "zen4"), *shape), shape
        assert "pipelined" not in choices(target("avx512", "zen4"), *shape), shape
        assert "pair tail" not in choices(target("avx2", "zen4"), *shape), shape
        assert "pair tail" not in choices(target("avx512", "zen4"), *shape, "float64"), shape
        m, n, k, br = shape
        assert "pair tail" not in choices(target("avx512", "zen4"), m, n, k + 1, br), shape
    long_k = CORE_RULES["zen4"].pair_tail_long_k
    for m in (11, 12):
        assert "pair tail" not in choices(target("avx512", "zen4"), m, 50, long_k - 2, 1)
        assert "pair tail" in choices(target("avx512", "zen4"), m, 50, long_k, 1)
    listing = disassemble(generate_brgemm(target("avx512", "zen4"), *PAIR_TAILS[0]), "x86_64")
    assert re.search(r"ymm(1[6-9]|2\d|3[01])\b", listing) and "vblendps" in listing
    assert "zmm" not in listing


def test_the_wide_pair_shapes_take_one_block_of_32_registers():
    """Each WIDE_PAIRS case is one block of step pairs on Zen 4 as AVX-512 (AVX2 code with
    ymm16 and up, not pipelined), never as the AVX2 variant; N that one 16-register block
    holds (6), or that takes two 32-register blocks (15), keeps the 16-register code."""
    for shape in WIDE_PAIRS:
        generator = _Generator(Assembler(), target("avx512", "zen4"), *shape, precision("float32"))
        assert generator.target.registers == 32, shape
        assert [(p.mode.pairs, p.n_blocks, p.n_tail)
                for p in generator.panels] == [(True, 1, 0)], shape
        assert "pipelined" not in choices(target("avx512", "zen4"), *shape), shape
        avx2 = _Generator(Assembler(), target("avx2", "zen4"), *shape, precision("float32"))
        assert avx2.target.registers == 16, shape
    for n in (6, 15):
        generator = _Generator(Assembler(), target("avx512", "zen4"), 8, n, 64, 1,
                               precision("float32"))
        assert generator.target.registers == 16, n
    listing = disassemble(generate_brgemm(target("avx512", "zen4"), *WIDE_PAIRS[1]), "x86_64")
    assert re.search(r"ymm(1[6-9]|2\d|3[01])\b", listing) and "vbroadcastsd" in listing


@pytest.mark.parametrize("m", [9, 10, 11, 12])
@pytest.mark.parametrize("variant", [v for v in _variants() if v.values[0] == "avx512"])
def test_pair_tails_keep_specials_to_their_row_column_and_step(variant, m):
    """inf and NaN in A's tail rows (and, for 11 rows, the full vector's row the tail computes
    again) at even and odd k, and in B's elements of columns at different places of a tail
    group, reach only the C elements their own products sum into."""
    n, k = 17, 64
    assert "pair tail" in choices(target(variant, "zen4"), m, n, k, 1)
    case = Case(m, n, k, 1, seed=m)
    a = Case._matrix(case.a, 0, m, k, case.ld_a)
    b = Case._matrix(case.b, 0, k, n, case.ld_b)
    rows = {m - 1: (2, np.inf), m - 2: (5, np.nan), 7: (9, -np.inf)}    # row: (k, value)
    for row, (step, value) in rows.items():
        a[row, step] = value
    b[33, n - 1], b[8, n - 2], b[20, 5] = -np.inf, np.nan, np.inf
    with np.errstate(invalid="ignore"):
        case.product = a.astype(np.float64) @ b.astype(np.float64)
    case.call(Compiled(m, n, k, 1, variant, micro="zen4"))
    case.verify()
    finite = np.ones((m, n), bool)
    finite[list(rows)] = False
    finite[:, [5, n - 2, n - 1]] = False
    assert np.isfinite(case._c_matrix()[finite]).all()


def test_the_pipelined_shapes_pipeline():
    """Each PIPELINED case pipelines its runs of blocks on Zen 4 as AVX-512 (AVX2 code with
    the upper registers for the second set of accumulators: ymm16 and up in its code), and
    never as the AVX2 variant (16 registers) or with a batch loop around the K loop."""
    for shape in PIPELINED:
        assert "pipelined" in choices(target("avx512", "zen4"), *shape), shape
        assert "pipelined" not in choices(target("avx2", "zen4"), *shape), shape
        m, n, k, _ = shape
        assert "pipelined" not in choices(target("avx512", "zen4"), m, n, k, 2), shape
    listing = disassemble(generate_brgemm(target("avx512", "zen4"), *PIPELINED[0]), "x86_64")
    assert re.search(r"ymm(1[6-9]|2\d|3[01])\b", listing)
    assert "zmm" not in listing


def test_the_skewed_shapes_skew():
    """Each SKEWED case skews a run of blocks as the AVX2 variant (16 registers, no spare
    bank), float32 and float64, and never with a batch loop; no PIPELINED case skews on
    Zen 4 as AVX-512 (its AVX2 code has a spare bank there); SKEWED_PACKED skew a
    packed tail's groups, SKEWED_PAIRS and SKEWED_WIDE_PAIRS (AVX-512 on Zen 4) step pairs,
    SKEWED_MASKED masked tails below full vectors."""
    for shape in SKEWED:
        m, n, k, _ = shape
        for micro in ("zen3", "zen4"):
            for dtype in ("float32", "float64"):
                assert "skewed" in choices(target("avx2", micro), *shape, dtype), shape
            assert "skewed" not in choices(target("avx2", micro), m, n, k, 2), shape
    for shape in PIPELINED:        # a spare bank pipelines instead
        assert "skewed" not in choices(target("avx512", "zen4"), *shape), shape
    for shape in SKEWED_PACKED:
        assert "skewed packed" in choices(target("avx2", "zen4"), *shape), shape
    for shape in SKEWED_PAIRS:
        assert "skewed pairs" in choices(target("avx2", "zen4"), *shape), shape
    for shape in SKEWED_WIDE_PAIRS:
        assert {"skewed pairs", "pair tail"} <= choices(target("avx512", "zen4"), *shape), shape
    for shape in SKEWED_MASKED[:2]:
        assert "skewed masked" in choices(target("avx512", "zen4"), *shape), shape
    assert "skewed masked" in choices(target("avx2", "cheap-masks"), *SKEWED_MASKED[2])
    # a lone masked vector spans into the next column: never skewed
    assert "skewed" not in choices(target("avx512", "zen4"), 13, 40, 64, 1)


@pytest.mark.parametrize("variant", _variants())
@pytest.mark.parametrize("shape, micro", [
    *((shape, "zen4") for shape in (SKEWED[0], SKEWED[3], SKEWED[7], *SKEWED_PACKED[:2],
                                    *SKEWED_PAIRS, SKEWED_WIDE_PAIRS[0], SKEWED_WIDE_PAIRS[4],
                                    CHUNKED[0], BATCH_CHUNKED[0], BATCH_CHUNKED[2])),
    *((shape, "zen3") for shape in (PAIR_DOTS[1], PAIR_DOTS[4], (17, 40, 16, 1)))],
    ids=lambda s: "x".join(map(str, s)) if isinstance(s, tuple) else s)
def test_specials_reach_only_their_own_elements(variant, shape, micro):
    """inf and NaN in A and B reach only the C elements their own products sum into, in
    kernels that split or reorder K: skewed runs (each column starts K at its own step, the
    head of a block reads the previous block's B), K in chunks and the batch in chunks (C
    read back between chunks), and Zen 3's panels of step pairs beside dot tails (M = 9; the
    tail row's inf sits in the dot panel) and M = 17's unpacked dot tail."""
    m, n, k, br = shape
    case = Case(m, n, k, br, seed=11)
    a = Case._matrix(case.a, (br - 1) * case.stride_a, m, k, case.ld_a)    # the last entry
    b = Case._matrix(case.b, 0, k, n, case.ld_b)                            # the first
    a[m - 1, k - 1], a[1, 2] = np.inf, np.nan
    b[0, n - 1], b[k - 1, 1] = -np.inf, np.nan
    with np.errstate(invalid="ignore"):
        case.product = case.batch_product()
    case.call(Compiled(*shape, variant, micro=micro))
    case.verify()
    bad = ~np.isfinite(case.product)
    assert bad.any() and not bad.all()
    assert np.array_equal(~np.isfinite(case._c_matrix()), bad)


def test_a_skewed_head_is_no_longer_than_k():
    """A skewed block's slots are its columns (or a packed tail's groups, or two columns of
    a tail in step pairs of a vector a column), widened to as many as keep the head (a step
    a slot, a pair in step pairs) within K."""
    generator = _Generator(Assembler(), target("avx2", "zen4"), 24, 8, 16, 1)
    panel = generator.panels[0]
    assert slots(panel, 4, 16) == [range(0, 1), range(1, 2), range(2, 3),
                                              range(3, 4)]
    assert slots(panel, 4, 3) == [range(0, 2), range(2, 4)]
    assert slots(panel, 4, 1) == [range(0, 4)]
    packed = dataclasses.replace(panel, mode=dataclasses.replace(panel.mode, group=2))
    paired = dataclasses.replace(panel, mode=dataclasses.replace(panel.mode, pairs=True))
    assert slots(packed, 5, 2) == [range(0, 4), range(4, 5)]
    assert slots(paired, 6, 4) == [range(0, 3), range(3, 6)]
    lone = dataclasses.replace(paired, tail_rows=3)          # tails summed two columns at once
    assert slots(lone, 5, 64) == [range(0, 2), range(2, 4), range(4, 5)]
    assert slots(lone, 9, 4) == [range(0, 6), range(6, 9)]
    for shape in SKEWED_WIDE_SLOTS:
        m, n, k, br = shape
        variant = "avx512" if k == 16 else "avx2"
        generator = _Generator(Assembler(), target(variant, "zen4"), m, n, k, br)
        widths = {len(slot) for panel in generator.panels
                  for blocks, cols in panel.runs()
                  if generator._run_is_skewed(panel, blocks, cols, k)
                  for slot in slots(panel, cols, k)}
        assert widths and max(widths) > 1, shape


def test_a_row_pipelines_both_runs_as_one_sequence_where_their_roles_agree():
    """A row's run of blocks and its narrower tail run pipeline as one sequence (the update
    of the run's last block carried into the tail block's K loop), unless the tail run has
    fewer columns than the panel's quads and so other registers in their roles."""
    def panel(cols, n_tail, quads):
        return Panel(1, 1, 0, cols, 3, n_tail, TailMode(quads=quads))
    assert sequences(panel(6, 4, 3)) == [[(3, 6), (1, 4)]]
    assert sequences(panel(6, 2, 3)) == [[(3, 6)], [(1, 2)]]
    assert sequences(panel(6, 0, 3)) == [[(3, 6)]]


@pytest.mark.parametrize("variant", _variants())
def test_pairs_keep_specials_to_their_row_and_step(variant):
    """inf and NaN in A's rows and B's elements at even and odd k reach only the C elements
    their own products sum into: the unpacked lanes and the pair sums keep rows and steps
    apart."""
    m, n, k = 8, 12, 64
    assert "pairs" in choices(target(variant, "zen4"), m, n, k, 1)
    case = Case(m, n, k, 1, seed=7)
    a = Case._matrix(case.a, 0, m, k, case.ld_a)
    b = Case._matrix(case.b, 0, k, n, case.ld_b)
    a[2, 5], a[5, 40] = np.inf, np.nan                # rows 2 (odd k) and 5 (even k)
    b[33, n - 1], b[8, n - 2] = -np.inf, np.nan       # columns n-1 (odd k), n-2 (even k)
    with np.errstate(invalid="ignore"):
        case.product = a.astype(np.float64) @ b.astype(np.float64)
    case.call(Compiled(m, n, k, 1, variant, micro="zen4"))
    case.verify()
    rows = np.ones(m, bool)
    rows[[2, 5]] = False
    assert np.isfinite(case._c_matrix()[rows][:, :n - 2]).all()


@pytest.mark.parametrize("variant", VARIANTS)
def test_tails_packed_eight_or_two_columns_a_vector_read_no_quads(variant):
    """M = 9 as AVX2 code packs its tail row 8 columns a vector, M = 11 and 12 their 3 or 4
    tail rows 2 columns a vector: their blends leave no room for quad shuffles, so their
    blocks broadcast every element of B (before, these took quads). On Zen 4 as AVX-512 the
    tails go in step pairs instead where they may (no quads either)."""
    for m in (9, 11, 12):
        for n, k in ((24, 16), (40, 64), (30, 5), (44, 64)):
            words = choices(target(variant, "zen4"), m, n, k, 1)
            assert "quads" not in words, (m, n, k, words)
            assert {"packed", "pair tail"} & words or m != 9, (m, n, k, words)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_dot_shapes_take_dot_tails(variant):
    """Each DOTS case computes its tail as dot products on Zen 4 (as AVX2 code), and those of
    M < 5 on Zen 5 too (AVX-512 code: as EVEX ymm, where a vector holds two or more k-steps),
    so the cases above run those paths; a K that a vector's k-steps do not divide takes a
    wider share; float64 only where M is one row and a vector's 4 k-steps divide K."""
    for shape in DOTS:
        m, n, k, br = shape
        if variant == "avx512" and 4 < m < 8:   # Zen 4 runs M = 5..7 as masked EVEX ymm
            assert "dot" not in choices(target(variant, "zen4"), *shape), shape
            continue
        assert "dot" in choices(target(variant, "zen4"), *shape), shape
        one_row = m == 1 and k % 4 == 0
        assert one_row == ("dot" in choices(target(variant, "zen4"), *shape, "float64")), shape
        share = dot_tail_share(target("avx2"), m, k, br, 4)
        assert share >= m % 8 and k * share % 8 == 0, shape
        if share < 8:
            odd = dot_tail_share(target("avx2"), m, k + 4 // share, br, 4)
            assert odd > share and (k + 4 // share) * odd % 8 == 0, shape
        if m < 5 and share < 8:        # full-width AVX-512 cores too, as EVEX ymm
            assert "dot" in choices(target(variant, "zen5"), *shape), shape


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_a_one_row_dot_tail_reads_a_in_place_where_its_steps_lie_side_by_side(variant, micro,
                                                                                dtype):
    """An M of one row as dot products (a matrix times a vector) reads A itself where ld_a is
    one element and a batch's entries follow one another, and a copy of it otherwise (ld_a of
    2, a gap between entries): each against numpy, nothing outside C written. The shapes
    take that dot tail on Zen 4 (f32 and f64) and on the other cores where the model says."""
    for m, n, k, br in [(1, 24, 16, 1), (1, 13, 512, 1), (1, 50, 16, 2), (1, 7, 2048, 1),
                        (1, 17, 64, 3), (1, 40, 12, 1)]:
        if micro == "zen4":
            assert "dot" in choices(target(variant, micro), m, n, k, br, dtype), (m, n, k, br)
        kernel = Compiled(m, n, k, br, variant, dtype, micro)
        for ld_a, stride_a in ((1, k), (1, k + 5), (2, 2 * k)):
            case = Case(m, n, k, br, seed=k + n, dtype=dtype, ld_a=ld_a, stride_a=stride_a)
            case.call(kernel)
            case.verify()


@pytest.mark.parametrize("variant", _variants())
@pytest.mark.parametrize("m, n, k", [(1, 7, 16), (2, 7, 16), (3, 7, 16), (4, 7, 16),
                                     (17, 48, 64), (5, 9, 16), (7, 20, 3)])
def test_dot_tails_keep_specials_to_their_row_and_column(variant, m, n, k):
    """inf in B reaches only its column's sums, NaN in one of A's tail rows only that row's:
    the lanes of a dot tail's rows and k-steps (and padded rows) stay apart. (M = 5..7: the
    AVX2 code; Zen 4's AVX-512 code runs them as masked EVEX ymm.)"""
    variant = "avx2" if m > 4 else variant
    assert "dot" in choices(target(variant, "zen4"), m, n, k, 1)
    case = Case(m, n, k, 1, seed=m)
    a = Case._matrix(case.a, 0, m, k, case.ld_a)
    b = Case._matrix(case.b, 0, k, n, case.ld_b)
    b[k - 3, 2] = np.inf
    a[m - 1, 1] = np.nan
    with np.errstate(invalid="ignore"):
        case.product = a.astype(np.float64) @ b.astype(np.float64)
    case.call(Compiled(m, n, k, 1, variant, micro="zen4"))
    case.verify()
    c = case._c_matrix()
    assert np.isnan(c[m - 1]).all() and np.isinf(c[:m - 1, 2]).all()
    assert np.isfinite(np.delete(c[:m - 1], 2, axis=1)).all()


@pytest.mark.parametrize("micro, m, width", [("zen4", 8, 256), ("zen4", 12, 256),
                                             ("zen4", 64, 512), ("zen5", 8, 512),
                                             ("zen5", 12, 512), ("generic", 8, 512)])
def test_avx512_width_follows_the_core(micro, m, width):
    """A core that splits 512-bit FMAs in halves (Zen 4) gets ymm blocks where a zmm would
    be half empty; a full-width one (Zen 5) keeps zmm."""
    assert choose(m, 40, 64, 1, target("avx512", micro))[0].vector_bits == width


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", ["zen4", "zen5"])
def test_split_512_cores_run_tails_without_masks(micro, dtype):
    """On Zen 4 an AVX-512 kernel whose M leaves a tail is AVX2 code (no mask register, no
    zmm), unless K > 1 and the tail fills all but a fifth of its zmm at most (float32: 13
    to 15 rows, float64: 7) or M fills more than half of one ymm and no more (float32: 5
    to 7 rows, float64: 3); M without a tail and every M on Zen 5 stay AVX-512."""
    tgt = target("avx512", micro)
    lanes = tgt.lanes(np.dtype(dtype).itemsize)
    for m in (3, 4, 5, 7, 8, 12, 13, 15, 17, 23, 25, 40, 63, 64, 96):
        for k in (1, 16):
            text = _disassembly(generate_brgemm(tgt, m, 24, k, 1, dtype=dtype))
            tail = m % lanes
            kept = ((lanes - tail) * 5 <= lanes or lanes // 4 < m < lanes // 2) and k > 1
            unmasked = micro == "zen4" and tail != 0 and not kept
            if tail and "dot" not in choices(tgt, m, 24, k, 1, dtype):   # masked: k1..k7
                assert ("zmm" not in text and "{k" not in text) == unmasked, (m, k)
            assert (unmasked_target(tgt, m, np.dtype(dtype).itemsize, k).masks == 0) \
                == unmasked


def test_zen3_avoids_masked_avx2_stores():
    """On Zen 3 (12 cycles a vmaskmovps store) tails of 8..64-row blocks overlap or pack."""
    for m in range(9, 65):
        for k in (1, 16, 64):
            assert "masked" not in choices(target("avx2", "zen3"), m, 40, k, 1), (m, k)


def test_zen3_runs_m9_and_m10_as_pairs_and_a_dot_tail():
    """On Zen 3 the PAIR_DOTS cases run their whole rows in step pairs and their tail rows
    as dot products, two panels; the rule holds nowhere else: other cores, a batch, float64,
    N below Zen 3's pair_dot_min_n, K below the core's least for the tail or not a multiple
    of the dot share's k-steps, M = 11."""
    zen3, zen4 = target("avx2", "zen3"), target("avx2", "zen4")
    for shape in PAIR_DOTS:
        generator = _Generator(Assembler(), zen3, *shape, precision("float32"))
        assert [(p.tail_rows, p.mode.pairs, p.mode.dot) for p in generator.panels] == [
            (0, True, 0), (shape[0] - 8, False, shape[0] - 8)], shape
        assert pair_dot_panels(zen3, *shape) is not None
        assert pair_dot_panels(zen4, *shape) is None, shape
    assert pair_dot_panels(zen3, 9, 40, 64, 2) is None
    assert pair_dot_panels(zen3, 9, 40, 64, 1, element_bytes=8) is None
    assert pair_dot_panels(zen3, 9, CORE_RULES["zen3"].pair_dot_min_n - 1, 64, 1) is None
    for tail, least in enumerate(CORE_RULES["zen3"].pair_dot_min_k, 1):
        assert pair_dot_panels(zen3, 8 + tail, 40, least, 1) is not None
        assert pair_dot_panels(zen3, 8 + tail, 40, least - 8, 1) is None
    assert pair_dot_panels(zen3, 9, 40, 68, 1) is None          # 68 = 8 * 8 + 4: share 4
    assert pair_dot_panels(zen3, 11, 40, 64, 1) is None


def test_zen3_never_packs_the_tail_row_of_m17():
    """On Zen 3 (unpacked_one_row_m) M = 17's float32 tail row is never packed 8 columns a
    vector, on any N or K (from K = 16 on it takes a dot tail); other cores, M = 9 and 33 and
    float64 (two rows of 32-bit lanes) may still pack."""
    zen3 = target("avx2", "zen3")
    for n in (8, 13, 24, 40, 64):
        for k in (4, 16, 64, 128):
            words = choices(zen3, 17, n, k, 1)
            assert "packed" not in words and ("dot" in words or k < 16), (n, k, words)
    assert not packs_tail(zen3, 17, 4)
    assert packs_tail(zen3, 17, 8) and packs_tail(zen3, 9, 4) and packs_tail(zen3, 33, 4)
    assert packs_tail(target("avx2", "zen4"), 17, 4)
    assert "packed" in choices(target("avx2", "zen4"), 17, 40, 16, 1)


# Intel: (dtype, M, N, K, batch) -> the (vectors, columns) of each panel's blocks. Three or
# four zmm of A keep a block's loads within half its FMAs (their vector-port uops fit beside
# the FMAs' two pipes, see CoreRules.zmm_load_vector_ports), no block is taller than four
# (max_zmm_vectors); two vectors take 13 columns
INTEL_BLOCKS = {
    ("float32", 64, 64, 64, 1): [(4, 6)], ("float32", 64, 64, 64, 16): [(4, 6)],
    ("float32", 48, 48, 64, 16): [(3, 8)], ("float32", 128, 64, 256, 4): [(4, 6)],
    ("float32", 32, 64, 64, 1): [(2, 13)], ("float32", 17, 64, 64, 1): [(2, 13)],
    ("float32", 80, 64, 64, 1): [(3, 8), (2, 13)], ("float32", 96, 96, 64, 1): [(3, 9)],
    ("float64", 64, 64, 64, 1): [(4, 6)], ("float64", 24, 64, 64, 1): [(3, 8)],
    ("float64", 32, 32, 32, 32): [(4, 6)], ("float64", 16, 64, 64, 1): [(2, 13)],
    ("float64", 40, 64, 64, 1): [(3, 8), (2, 13)],
}


@pytest.mark.parametrize("micro", INTEL)
def test_intel_blocks_keep_zmm_loads_within_half_the_fmas(micro):
    """On an Intel core the blocks of three or more zmm of A load at most half as many
    vectors (A's, B's broadcasts) as they issue FMAs, none is taller than four zmm, and they
    take the shapes INTEL_BLOCKS lists; the generic core keeps its 2 x 13 blocks for
    M = 64 and a block of five zmm for 80 x 5 (no such rules)."""
    tgt = target("avx512", micro)
    for (dtype, m, n, k, br), blocks in INTEL_BLOCKS.items():
        chosen, panels = choose(m, n, k, br, tgt, dtype)
        assert chosen.vector_bits == 512, (dtype, m)
        assert [(panel.vectors, panel.cols) for panel in panels] == blocks, (dtype, m, n, k, br)
        for panel in panels:
            assert panel.vectors <= rules(tgt).max_zmm_vectors == 4
            for _, cols in panel.runs():
                if panel.vectors >= 3:
                    assert 2 * (panel.vectors + cols) <= panel.vectors * cols, (dtype, m, cols)
    for m in range(1, 200, 7):
        for n in (5, 40):
            assert all(panel.vectors <= 4 for panel in choose(m, n, 64, 1, tgt)[1]), (m, n)
    generic = target("avx512", "generic")
    assert [(panel.vectors, panel.cols) for panel in choose(64, 64, 64, 1, generic)[1]] \
        == [(2, 13)]
    assert max(panel.vectors for panel in choose(80, 5, 64, 1, generic)[1]) == 5


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", INTEL)
def test_intel_zmm_tails_stay_masked(micro, dtype):
    """Intel's 512-bit blends and permutes take the FMA pipes (Microarch.fma_shuffle_bits):
    a packed tail would spend a blend where it saves an FMA, so no M packs its tail; cores
    whose shuffles have pipes of their own (the generic core, Zen 5) still pack."""
    tgt = target("avx512", micro)
    assert tgt.micro.shuffles_on_fma_pipes(512) and not tgt.micro.shuffles_on_fma_pipes(256)
    for m in range(1, 66):
        for n, k in ((64, 64), (13, 16), (40, 3)):
            assert "packed" not in choices(tgt, m, n, k, 1, dtype), (m, n, k)
    assert not packs_tail(tgt, 19, 4)
    for micro in ("generic", "zen5"):
        assert packs_tail(target("avx512", micro), 19, 4)
        assert "packed" in choices(target("avx512", micro), 19, 64, 64, 1)


def _intel_grid():
    """(m, n, k, br) for the Intel cores' kernels: M across every vector count and tail of
    both dtypes up to 5 zmm and past, N and K cycling through remainders and block widths."""
    ns, ks = (1, 5, 6, 7, 13, 25, 64, 8, 12, 19), (1, 2, 7, 64, 16, 33, 5)
    ms = (*range(1, 34), 40, 41, 47, 48, 49, 56, 57, 63, 64, 65, 70, 80, 96, 97, 130)
    # and K in chunks (a long K, a batch of long panels), a batch of 16
    return [(m, ns[i % len(ns)], ks[i % len(ks)], 1 + (i % 4 == 3) * 2)
            for i, m in enumerate(ms)] + [(64, 40, 500, 1), (70, 20, 300, 1), (48, 64, 64, 16),
                                          (128, 64, 256, 4), (33, 30, 400, 1)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", INTEL)
@pytest.mark.parametrize("variant", [p for p in _variants() if p.values[0] == "avx512"])
def test_intel_kernels_match_numpy(variant, micro, dtype):
    """The AVX-512 code generated for each Intel core (run here: any AVX-512 host executes
    it) computes numpy's result over _intel_grid, operands with ld > rows and batch gaps,
    nothing written outside C."""
    for shape in _intel_grid():
        case = Case(*shape, seed=sum(shape), dtype=dtype)
        case.call(Compiled(*shape, variant, dtype, micro))
        case.verify()


def test_every_known_core_has_its_rules_and_others_the_generic_ones():
    """tuning.CORE_RULES has an entry for every core cpu.MICROARCHS knows; a core it does not
    list (the made-up ones here) gets the generic rules, which carry no rule for one M."""
    assert set(CORE_RULES) == set(cpu.MICROARCHS)
    assert rules(target("avx2", "zen3")) is CORE_RULES["zen3"] != GENERIC_RULES
    for micro in ("cheap-masks", "dear-masks", "generic"):
        assert rules(target("avx2", micro)) is GENERIC_RULES
    assert not GENERIC_RULES.pair_dot_min_k and not GENERIC_RULES.unpacked_one_row_m
    # the Intel cores' rule and fact reach no other core (their code stays as it was)
    for micro in INTEL:
        assert rules(target("avx512", micro)).zmm_load_vector_ports == 3
    for micro in ("zen3", "zen4", "zen5", "generic"):
        assert rules(target("avx512", micro)).zmm_load_vector_ports == 0
        assert rules(target("avx512", micro)).max_zmm_vectors == 0
        assert cpu.MICROARCHS[micro].fma_shuffle_bits == 0


@pytest.mark.parametrize("micro", ["zen4", "zen5"])
def test_avx512_code_for_other_cores_decodes(micro):
    """AVX-512 code cannot run here: every kernel of the cases above decodes (capstone) to
    EVEX/VEX instructions of the chosen width, without bytes it cannot decode."""
    for shape in SHAPES + AWKWARD + OUTER:
        for dtype in ("float32", "float64"):
            tgt = target("avx512", micro)
            text = _disassembly(generate_brgemm(tgt, *shape, dtype=dtype))
            assert "(bad)" not in text and ".byte" not in text, shape
            if "outer" in choices(tgt, *shape, dtype):
                continue
            width = choose(*shape, tgt, dtype)[0].vector_bits
            assert ("zmm" in text) == (width == 512), (shape, dtype)


def test_vmovsd_encodings():
    """The 64-bit moves the AVX2 packed tails store two rows with."""
    assert enc.vmovsd_store(Mem(enc.RAX, disp=8), 3).hex() == "c5fb115808"
    assert enc.vmovsd_load(9, Mem(enc.R10, disp=-16)).hex() == "c4417b104af0"
    assert "vmovsd qword ptr [rsp - 0x80], xmm17" in _disassembly(
        enc.vmovsd_store(Mem(RSP, disp=-128), 17))


PACK = "cheap-masks"     # the facts under which the cost model packs and masks tails


def _widest_block_shapes(variant, micro):
    """Sizes whose plan uses the widest block of each height, masked (or overlapping) and
    not: the most accumulators, B base pointers and (with a batch) general registers a
    kernel can use."""
    isa = target(variant, micro)
    shapes = []
    for vectors in range(1, 5):
        for tail in (0, 3):
            m = vectors * isa.lanes() - (isa.lanes() - tail if tail else 0)
            cols = max_cols(isa, vectors, tail)
            if micro != PACK and tail and vectors > 1:
                cols = _max_cols(isa, vectors, tail, TailMode(overlap=True))
            shapes.append((m, cols, 5, 3))
    return shapes


@pytest.mark.parametrize("micro", [PACK, "dear-masks"])
@pytest.mark.parametrize("variant", _variants())
def test_widest_blocks_with_a_batch(variant, micro):
    for m, n, k, br in _widest_block_shapes(variant, micro):
        if micro == PACK or variant == "avx2":
            assert max(p.cols for p in plan(m, n, k, br, target(variant, micro))) == n
        case = Case(m, n, k, br, seed=m + n)
        case.call(Compiled(m, n, k, br, variant, micro=micro))
        case.verify()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("variant", ["avx512", "avx2"])
def test_large_k_runs_in_chunks_where_a_outruns_l2(variant, dtype):
    """Zen 4's AVX2 blocks at large K run K in equal chunks of at least min_k_chunk steps (the
    cases above check their results); AVX-512's zmm blocks and small K do not."""
    tgt = target(variant, "zen4")
    for m, n, k, br in CHUNKED:
        chosen, panels = choose(m, n, k, br, tgt, dtype)
        chunks = k_chunks(chosen, panels, k, br, np.dtype(dtype).itemsize)
        least = CORE_RULES["zen4"].min_k_chunk
        assert chunks > 1 and k % chunks == 0 and k // chunks >= least, (m, n, k, chunks)
        assert k_chunks(chosen, panels, 64, br, np.dtype(dtype).itemsize) == 1
        assert k_chunks(chosen, panels, k, 2, np.dtype(dtype).itemsize) == 1
    if variant == "avx512" and dtype == "float32":
        chosen, panels = choose(64, 60, 500, 1, tgt, dtype)
        assert k_chunks(chosen, panels, 500, 1) == 1


def _conflicting_ld_a(m, dtype, micro):
    """The least ld_a >= m whose columns lie a multiple of the core's conflict pitch apart."""
    step = cpu.MICROARCHS[micro].conflict_pitch_bytes // np.dtype(dtype).itemsize
    return -(-m // step) * step


@pytest.mark.parametrize("far_c", [False, True])
@pytest.mark.parametrize("micro", ["zen3", "zen4"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("variant", _variants())
def test_a_copied_at_a_conflicting_pitch_gives_the_bits_of_a_reading_in_place(variant, dtype,
                                                                              micro, far_c):
    """At an ld_a of a multiple of 512 bytes (and of 4 KiB) the block rows read a copy of A's
    panel: C gets the same bits as the same kernel reading A in place at another ld_a, both
    within the tolerance of the exact product, nothing outside C written; far_c's kernels
    too (their prefetches of A's next row walk ld_a in place, the copy while reading it)."""
    for index, (m, n, k, br) in enumerate(PACKED_A):
        kernel = Compiled(m, n, k, br, variant, dtype, micro=micro, far_c=m + 5 if far_c else 0)
        far = _conflicting_ld_a(m, dtype, micro) + 4096 // np.dtype(dtype).itemsize * (index % 2)
        copied = Case(m, n, k, br, seed=index, dtype=dtype, ld_a=far)
        in_place = Case(m, n, k, br, seed=index, dtype=dtype, ld_a=m + 3)
        Case._matrix(in_place.a, 0, m, k, in_place.ld_a)[...] = Case._matrix(copied.a, 0, m, k,
                                                                            copied.ld_a)
        in_place.b[...] = copied.b
        in_place._c_matrix()[...] = copied._c_matrix()
        in_place.initial, in_place.product = copied.initial, copied.product
        for case in (copied, in_place):
            case.call(kernel)
            case.verify()
        assert np.array_equal(bits(copied._c_matrix()), bits(in_place._c_matrix())), (m, n, k)


@pytest.mark.parametrize("variant", ["avx2", "avx512"])
def test_block_rows_copy_a_where_they_sweep_it_twice(variant):
    """Every PACKED_A shape's 16-register blocking has a panel that copies A (zen3 and zen4
    facts, both dtypes), a 32-register one none; none with a batch, none of a tail panel,
    none of a single column block."""
    for micro in ("zen3", "zen4"):
        for dtype in ("float32", "float64"):
            for m, n, k, br in PACKED_A:
                generator = _Generator(Assembler(), target(variant, micro), m, n, k, br,
                                       precision(dtype))
                copies = any(generator.packs.values())
                assert copies == (generator.target.registers == 16), (micro, dtype, m, n, k)
                assert not any(generator.packs[panel] for panel in generator.panels
                               if panel.tail_rows or panel.mode.dot), (micro, dtype, m, n, k)
                batched = _Generator(Assembler(), target(variant, micro), m, n, k, 2,
                                     precision(dtype))
                assert not any(batched.packs.values()), (micro, dtype, m, n, k)
    narrow = _Generator(Assembler(), target(variant, "zen4"), 64, 4, 64, 1, precision("float32"))
    assert not any(narrow.packs.values())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_batch_runs_in_chunks_where_its_a_panels_outgrow_l1(dtype):
    """Zen 4's AVX2 blocks run a batch whose A panels outgrow L1 in equal chunks of entries
    (the cases above check their results), a dot-tail panel never; a batch of one, AVX-512's
    zmm blocks and small batches do not."""
    size = np.dtype(dtype).itemsize
    for m, n, k, br in BATCH_CHUNKED:
        chosen, panels = choose(m, n, k, br, target("avx2", "zen4"), dtype)
        chunks = [batch_chunks(chosen, panel, k, br, size) for panel in panels]
        assert any(count > 1 for count in chunks), (m, n, k, br)
        assert all(br % count == 0 for count in chunks), (m, n, k, br, chunks)
        assert all(count == 1 for count, panel in zip(chunks, panels) if panel.mode.dot)
        assert all(batch_chunks(chosen, panel, k, 1, size) == 1 for panel in panels)
    chosen, panels = choose(64, 64, 64, 16, target("avx2", "zen4"), dtype)
    assert all(batch_chunks(chosen, panel, 64, 16, size) in (8, 16) for panel in panels)
    assert all(batch_chunks(chosen, panel, 16, 2, size) == 1 for panel in panels)
    chosen, panels = choose(64, 64, 64, 16, target("avx512", "zen4"), dtype)
    assert all(batch_chunks(chosen, panel, 64, 16, size) == 1 for panel in panels)


def test_b_column_limit_keeps_b_columns_within_the_l1_ways():
    """B's columns at a pitch of a multiple of 4 KiB share one L1 set (64 sets of 64 bytes):
    a block reads at most ways - 2 of them; 2 KiB: two sets; a pitch off the 4 KiB grid and an
    unknown pitch: no limit."""
    zen4, zen5 = target("avx512", "zen4"), target("avx512", "zen5")
    assert b_column_limit(zen4, None) == MAX_COLS
    assert [b_column_limit(zen4, pitch) for pitch in (4096, 8192, 1 << 20)] == [6, 6, 6]
    assert b_column_limit(zen5, 8192) == 10
    assert b_column_limit(zen4, 2048) == 12
    assert b_column_limit(zen4, 4096 + 64) == MAX_COLS
    assert b_column_limit(zen4, 2064 * 4) == MAX_COLS


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("variant", _variants())
@pytest.mark.parametrize("micro", ["zen4", "zen5"])
def test_a_conflicting_b_pitch_narrows_the_blocks(variant, micro, dtype):
    """Told B's pitch, the blocking keeps a block's columns within the limit, and the kernel
    computes the same for that pitch and any other."""
    tgt = target(variant, micro)
    itemsize = np.dtype(dtype).itemsize
    ld_b = 8192 // itemsize
    limit = b_column_limit(tgt, ld_b * itemsize)
    for m, n, k in ((128, 64, 40), (48, 30, 17), (37, 25, 9)):
        widest = max(max(p.cols, p.n_tail) for p in choose(m, n, k, 2, tgt, dtype, ld_b)[1])
        assert widest <= limit
        if m == 128 and variant == "avx512":        # AVX2's 16 registers hold fewer anyway
            assert max(p.cols for p in choose(m, n, k, 2, tgt, dtype)[1]) > limit
        compiled = Compiled(m, n, k, 2, variant, dtype, micro, ld_b=ld_b)
        for pitch in (ld_b, k + 1):
            case = Case(m, n, k, 2, seed=m + pitch, dtype=dtype, ld_b=pitch)
            case.call(compiled)
            case.verify()


# tail rows that share vectors: AVX-512 float32 up to 8 of 16 lanes; AVX2 float32 up to 4 of
# 8, float64 up to 2 of 4
PACKED_TAIL_ROWS = {("avx512", "float32"): range(1, 9), ("avx2", "float32"): range(1, 5),
                    ("avx2", "float64"): range(1, 3)}


def _group(variant, t, dtype="float32"):
    """Columns one packed vector serves: AVX-512 t lanes each, one mask register k1..k7 per
    column; AVX2 1, 2 or 4 32-bit lanes each (the broadcast load of A that holds t rows)."""
    if variant == "avx512":
        return min(16 // t, 7)
    dwords = t * np.dtype(dtype).itemsize // 4
    return 8 // next(share for share in (1, 2, 4) if share >= dwords)


def _packed_shapes(variant, dtype="float32"):
    """Blocks whose t tail rows share vectors (`group` columns each): every t, 2 to 4 vectors
    tall, N a partial group past whole ones or whole groups, with a batch."""
    lanes = VARIANTS[variant].lanes(np.dtype(dtype).itemsize)
    shapes = []
    for t in PACKED_TAIL_ROWS[variant, dtype]:
        group = _group(variant, t, dtype)
        for vectors in (2, 3, 4):
            m = lanes * (vectors - 1) + t
            for n, k, br in ((2 * group + 1, 33, 1), (7 * group - 1, 5, 4), (6 * group, 9, 2)):
                shapes.append((m, n, k, br))
    return shapes


def _packed_groups(variant, shape, dtype="float32"):
    return [p.mode.group for p in plan(*shape, target(variant, PACK), dtype) if p.tail_rows]


PACKED_KINDS = list(PACKED_TAIL_ROWS)


def _packed_params():
    return [pytest.param(variant.values[0], dtype, shape, marks=variant.marks,
                         id=f"{variant.values[0]}-{dtype}-{'x'.join(map(str, shape))}")
            for variant in _variants() for kind, dtype in PACKED_KINDS
            if kind == variant.values[0] for shape in _packed_shapes(kind, dtype)]


@pytest.mark.parametrize("variant, dtype, shape", _packed_params())
def test_packed_tail_rows_match_numpy(variant, dtype, shape):
    case = Case(*shape, seed=sum(shape), dtype=dtype)
    case.call(Compiled(*shape, variant, dtype, micro=PACK))
    case.verify()


@pytest.mark.parametrize("variant, dtype", PACKED_KINDS)
def test_the_packed_shapes_pack(variant, dtype):
    """The cases above exercise the packed path (the cost model chooses it for them)."""
    lanes = VARIANTS[variant].lanes(np.dtype(dtype).itemsize)
    unpacked = [shape for shape in _packed_shapes(variant, dtype)
                if _packed_groups(variant, shape, dtype)
                != [_group(variant, shape[0] % lanes, dtype)]]
    assert not unpacked, f"plans that no longer pack the tail: {unpacked}"


@pytest.mark.parametrize("variant, dtype", [pytest.param(
    variant.values[0], dtype, marks=variant.marks) for variant in _variants()
    for kind, dtype in PACKED_KINDS if kind == variant.values[0]])
def test_packed_tails_keep_specials_apart(variant, dtype):
    """inf and NaN in the rows right above the tail (AVX2 broadcasts some of them into lanes
    of a packed tail that are never stored) reach only their own rows of C."""
    exact = np.longdouble if dtype == "float64" else np.float64
    for t in PACKED_TAIL_ROWS[variant, dtype]:
        group = _group(variant, t, dtype)
        m, n, k = VARIANTS[variant].lanes(np.dtype(dtype).itemsize) + t, 2 * group + 1, 33
        assert _packed_groups(variant, (m, n, k, 1), dtype) == [group]
        case = Case(m, n, k, 1, seed=t, dtype=dtype)
        a = Case._matrix(case.a, 0, m, k, case.ld_a)
        a[m - t - 1, 0], a[m - t - 2, 1] = np.inf, np.nan
        case.product = a.astype(exact) @ Case._matrix(case.b, 0, k, n, case.ld_b).astype(exact)
        case.call(Compiled(m, n, k, 1, variant, dtype, micro=PACK))
        case.verify()


@pytest.mark.parametrize("variant", _variants())
def test_quads_keep_specials_to_their_step(variant):
    """inf and NaN in B elements that share a quad with finite ones (and one in the steps left
    after the quads, K = 17) reach only the C elements their own products sum into."""
    m, n, k = 10, 11, 17
    assert "quads" in choices(target(variant, "zen4"), m, n, k, 1)
    case = Case(m, n, k, 1, seed=5)
    b = Case._matrix(case.b, 0, k, n, case.ld_b)
    b[5, n - 1], b[10, n - 2], b[16, n - 3] = np.inf, np.nan, -np.inf
    a = Case._matrix(case.a, 0, m, k, case.ld_a)
    with np.errstate(invalid="ignore"):           # the NaN's products
        case.product = a.astype(np.float64) @ b.astype(np.float64)
    case.call(Compiled(m, n, k, 1, variant, micro="zen4"))
    case.verify()
    assert np.isfinite(case._c_matrix()[:, :n - 3]).all()


def _stack_scribbler():
    """Code with the kernels' prototype that sets the 256 bytes below its stack pointer to
    all ones: called with a kernel's arguments right before it (same caller, same stack
    pointer at entry, nothing run in between), it leaves that kernel a red zone full of set
    sign bits instead of an earlier call's data."""
    ones = enc.vpcmpeqd(0, 0, 0, 256)
    stores = b"".join(enc.vmovups_store(Mem(RSP, disp=-32 * i), 0, 256) for i in range(1, 9))
    memory = ExecutableMemory(ones + stores + enc.vzeroupper() + enc.ret())
    return memory, _PROTOTYPE(memory.address)


@pytest.mark.parametrize("variant", _variants())
def test_kernels_set_their_red_zone_themselves(variant):
    """The tail masks (and their AVX2 packed windows), and a dot tail's copy of A in its
    frame, are stored by the kernel, not found below the stack pointer: scribbles there
    change nothing."""
    _memory, scribble = _stack_scribbler()
    shapes = [(shape, PACK) for shape in _packed_shapes(variant)[::3] + [(5, 7, 3, 1),
                                                                         (31, 6, 2, 1)]]
    for shape, micro in shapes + [(shape, "zen4") for shape in DOTS[:4]]:
        case, kernel = Case(*shape, seed=sum(shape)), Compiled(*shape, variant, micro=micro)
        arguments, function = case.arguments(), kernel.function
        scribble(*arguments)
        function(*arguments)
        case.verify()


class GuardedCase:
    """Tight operands (ld = rows), each ending right before a no-access page, so the masked
    accesses of the last column's tail rows reach into the guard page."""

    def __init__(self, m, n, k, br, seed):
        rng = np.random.default_rng(seed)
        self.shape = (m, n, k, br)
        self.a, self.b, self.c = guarded(br * m * k), guarded(br * k * n), guarded(m * n)
        self.a[...] = rng.integers(-4, 5, self.a.size)
        self.b[...] = rng.integers(-4, 5, self.b.size)
        self.c[...] = rng.integers(-4, 5, self.c.size)
        a = strided(self.a, (br, m, k), (m * k, 1, m)).astype(np.float64)
        b = strided(self.b, (br, k, n), (k * n, 1, k)).astype(np.float64)
        c = strided(self.c, (m, n), (1, m)).astype(np.float64)
        self.expected = c + np.einsum("imk,ikn->mn", a, b)

    def call(self, compiled):
        m, n, k, br = self.shape
        compiled.function(self.a.ctypes.data, self.b.ctypes.data, self.c.ctypes.data,
                          m, k, m, m * k, k * n)

    def verify(self):
        m, n, _, _ = self.shape
        np.testing.assert_array_equal(strided(self.c, (m, n), (1, m)), self.expected)


@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_no_access_past_the_operands(variant, micro):
    """Masked, packed and overlapping tails, outer products, K in chunks and copies of A's
    panel (ld_a = M = 128, 256: 512 bytes and more) at the very end of A, B and C: a fault
    fails the case."""
    shapes = (_packed_shapes("avx512") + _packed_shapes("avx2") + AWKWARD + OUTER + CHUNKED
              + QUADS + DOTS + PAIRS + PAIR_TAILS + WIDE_PAIRS + PIPELINED + PACKED_A
              + [(5, 7, 3, 1), (9, 4, 3, 2), (31, 6, 2, 1), (47, 9, 1, 1)])
    cases = [GuardedCase(*shape, seed=index) for index, shape in enumerate(shapes)]
    kernels = [Compiled(*shape, variant, micro=micro) for shape in shapes]
    run_guarded(shapes, cases, kernels, lambda shape: f"{variant} kernel {shape}")


@pytest.mark.parametrize("variant", _variants())
def test_concurrent_calls_from_threads(variant):
    """ctypes releases the GIL: several threads run kernels at once, each on its own data,
    sharing kernels (the code keeps its state in registers and its own stack)."""
    shapes = [(64, 64, 64, 2), (17, 33, 16, 3), (5, 40, 7, 1)]
    kernels = [Compiled(*shape, variant) for shape in shapes]
    failures = []

    def work(thread):
        try:
            for round_ in range(12):
                index = (thread + round_) % len(shapes)
                case = Case(*shapes[index], seed=100 * thread + round_)
                for _ in range(3):
                    case.call(kernels[index])
                case.verify(calls=3)
        except BaseException as exc:   # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _disassembly(code):
    return disassemble(code, "x86_64")


# kernels told that C comes from beyond L2 (far_c): tails in M of every vector width, N left
# over by the blocks, K that the plain kernels run in chunks, and the shapes that pipeline
# (AVX2 code on a core with 32 registers) and skew
FAR_C = [(128, 96, 128, 1), (37, 53, 70, 1), (130, 61, 33, 1), (17, 31, 5, 1)] + CHUNKED
FAR_C_ALL = FAR_C + PIPELINED + SKEWED


def _generators(variant, micro, shape, dtype, ld_b=None, ld_c=None):
    """The plain kernel's _Generator and the far_c one's for `shape` (C's ld: Case's)."""
    m, n, k, br = shape
    return [_Generator(Assembler(), target(variant, micro), m, n, k, br, precision(dtype),
                       ld_b=ld_b, far_c=far) for far in (0, ld_c or m + 5)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_far_c_kernels_match_numpy_and_the_plain_kernels_bits(variant, micro, dtype):
    """far_c: every block prefetches C a block row ahead (prefetcht1 in the code, none in the
    plain kernel's); C as numpy's (ld > rows), nothing outside it written; where both kernels
    block alike, bit for bit the plain kernel's C (the prefetches change no sum)."""
    compared = 0
    for shape in FAR_C_ALL:
        plain_gen, far_gen = _generators(variant, micro, shape, dtype)
        hints = (0, shape[0] + 5)                       # far_c: Case's ld_c
        plain, far = (Compiled(*shape, variant, dtype, micro, far_c=hint) for hint in hints)
        texts = [_disassembly(generate_brgemm(target(variant, micro), *shape, dtype=dtype,
                                              far_c=hint)) for hint in hints]
        assert "prefetch" not in texts[0] and "prefetcht1" in texts[1], shape
        cases = [Case(*shape, seed=sum(shape), dtype=dtype) for _ in range(2)]
        cases[0].call(plain)
        cases[1].call(far)
        cases[1].verify()
        alike = (plain_gen.target == far_gen.target and plain_gen.panels == far_gen.panels
                 and plain_gen.chunks == far_gen.chunks)
        if alike:
            np.testing.assert_array_equal(bits(cases[0].c_buffer), bits(cases[1].c_buffer),
                                          err_msg=f"{shape}: far_c changed C's bits")
            compared += 1
    assert compared >= len(FAR_C_ALL) // 2, f"only {compared} kernels blocked alike"


@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", ["avx512", "avx2"])
def test_far_c_kernels_run_k_whole(variant, micro):
    """far_c keeps K whole (each chunk would load and store C again): the shapes the plain
    kernels run in chunks, a large contraction's 128 x 512 x 128 call among them (B's copy
    at a pitch of 144 floats), get blockings without chunks, also where C is set
    (accumulate=False: a nest's first k chunk, whose stores the prefetches serve). At a C
    pitch of 8 KiB (every column's line of a row in one L1 set) a block updates at most
    micro.c_set_lines columns."""
    chunked = 0
    for shape, ld_b in [(shape, None) for shape in CHUNKED] + [((128, 512, 128, 1), 144)]:
        for dtype in ("float32", "float64"):
            plain, far = _generators(variant, micro, shape, dtype, ld_b)
            chunked += max(plain.chunks.values()) > 1
            assert set(far.chunks.values()) == {1}, (shape, dtype)
            assert far.far_c
            _, conflicting = _generators(variant, micro, shape, dtype, ld_b,
                                         8192 // np.dtype(dtype).itemsize)
            most = conflicting.target.micro.c_set_lines
            assert all(max(p.cols, p.n_tail) <= most for p in conflicting.panels), shape
    assert chunked, "no shape here runs K in chunks without far_c"
    m, n, k, br = CHUNKED[0]
    setting = _Generator(Assembler(), target(variant, micro), m, n, k, br, precision("float32"),
                         accumulate=False, far_c=64)
    assert setting.far_c == 64 and set(setting.chunks.values()) == {1}


@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_a_one_column_block_of_dot_products_is_not_pipelined(variant, micro):
    """M = 7 at K = 1 with B's columns 1 or 2 elements apart: Zen 4 takes a panel of dot
    tails, its blocks 6 columns wide and a last one of one column, whose single accumulator
    cannot give a carried update its two scratch registers (the generator raised ValueError
    for N of 31, 37, ..., 61, found by einsum 'cdf,ceadc->edfc'). Such a sequence runs its
    blocks one after another; C as numpy's, nothing outside it written."""
    for n in (31, 37, 61, 25, 64):
        for ld_b in (1, 2):
            case = Case(7, n, 1, 1, seed=n + ld_b, ld_b=ld_b)
            case.call(Compiled(7, n, 1, 1, variant, "float32", micro, ld_b=ld_b))
            case.verify()


@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", ["avx512", "avx2"])
def test_far_c_blocks_keep_b_columns_over_k_within_their_share_of_l1(variant, micro):
    """A large contraction's call (far_c, B's copy at a pitch of K + 8 elements) reads at
    most rules.far_b_l1_share of L1 in B's columns over all of K per block; float64 at K =
    128 on zen4 would take 24 columns (24 KiB of its 32) without that limit, and does take
    them where C is near (no far_c)."""
    tgt = target(variant, micro)
    share = rules(tgt).far_b_l1_share
    for m, n, k in [(128, 256, 128), (128, 384, 192), (100, 300, 160), (64, 512, 128)]:
        for dtype in ("float32", "float64"):
            itemsize = np.dtype(dtype).itemsize
            far = _Generator(Assembler(), tgt, m, n, k, 1, precision(dtype), ld_b=k + 8,
                             far_c=m + 640)
            widest = max(max(p.cols, p.n_tail) for p in far.panels)
            assert widest * k * itemsize <= tgt.micro.l1_bytes * share, (m, n, k, dtype)
    if (variant, micro) == ("avx512", "zen4"):
        near = _Generator(Assembler(), tgt, 128, 256, 128, 1, precision("float64"), ld_b=136)
        assert max(p.cols for p in near.panels) * 128 * 8 > tgt.micro.l1_bytes * share


@pytest.mark.parametrize("micro", ["zen4", "sapphirerapids"])
def test_far_c_prefetches_the_block_a_row_below_or_the_next_block(micro):
    """far_c's prefetches of a large contraction's call: on a core with
    far_llc the lines of the block's own rows in the columns after its own
    (from displacement 0, the walker moved on by a multiple of ld_c), else the rows a block
    below (every displacement at least a line on)."""
    text = _disassembly(generate_brgemm(target("avx512", micro), 128, 512, 128, 1,
                                        ld_b=144, far_c=2048))
    displacements = [int(d, 16) if d.startswith("0x") else int(d) for d in
                     re.findall(r"prefetcht1 byte ptr \[r\w+(?: \+ (\w+))?\]", text)
                     for d in [d or "0"]]
    assert displacements and len(displacements) == text.count("prefetcht1")
    if cpu.MICROARCHS[micro].far_llc:
        assert min(displacements) == 0
    else:
        assert min(displacements) >= 64


def _a_prefetch_groups(text):
    """The far_c blocks' prefetches of A's next row in a disassembly: per group (from the
    load of A_AHEAD, rsp - 0x40, to its store), the prefetches' displacements and the
    operands added to the walker between them."""
    groups = re.findall(r"mov (\w+), qword ptr \[rsp - 0x40\]\n(.*?)mov qword ptr "
                        r"\[rsp - 0x40\], \1", text, re.S)
    return [(sorted({int(d, 16) for d in re.findall(rf"prefetcht1 byte ptr \[{walker} \+ "
                                                     r"(0x\w+)\]", body)}),
             re.findall(rf"add {walker}, (.+)", body)) for walker, body in groups]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", ["zen4", "sapphirerapids"])
@pytest.mark.parametrize("variant", ["avx2", "avx512"])
def test_far_c_blocks_share_out_the_prefetch_of_the_next_rows_a(variant, micro, dtype):
    """Each far_c block without a batch prefetches the lines of A one block row below its
    own (row_bytes on, up to the row's last byte), `columns` columns of it, the walker moved
    ld_a (rcx) on per column: the row's blocks together cover the chunk's k columns, each
    taking the fewest that do. Panels whose rows may read a copy of A (16-register code)
    and batched kernels have none."""
    for shape, ld_b in (((128, 496, 128, 1), 1999), ((128, 512, 128, 1), 144),
                        ((79, 64, 512, 1), 1999)):
        generator = _Generator(Assembler(), target(variant, micro), *shape,
                               precision(dtype), ld_b=ld_b, far_c=2048)
        text = _disassembly(generate_brgemm(target(variant, micro), *shape, dtype=dtype,
                                            ld_b=ld_b, far_c=2048))
        groups = _a_prefetch_groups(text)
        expected = []
        for panel in generator.panels:
            if generator.packs[panel]:
                continue
            row_bytes = generator._row_bytes(panel)
            blocks = sum(count for count, _ in panel.runs())
            steps = shape[2] // generator.chunks[panel]
            columns = -(-steps // blocks)
            assert columns * blocks >= steps > (columns - 1) * blocks, shape
            lines = sorted(set(range(row_bytes, 2 * row_bytes, 64)) | {2 * row_bytes - 1})
            expected.append((lines, ["rcx"] * columns))
        assert sorted(set(map(repr, groups))) == sorted(set(map(repr, expected))), \
            (variant, shape)
    batched = _disassembly(generate_brgemm(target(variant, micro), 64, 64, 64, 4,
                                           dtype=dtype, far_c=2048))
    assert not _a_prefetch_groups(batched)


@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_far_c_prefetches_never_fault(variant, micro):
    """The prefetches a block row below C's last rows, at the very end of C (ld_c = M, a
    no-access page after it): no fault, C as numpy's."""
    shapes = FAR_C + PIPELINED[:3] + SKEWED[:3]
    cases = [GuardedCase(*shape, seed=index) for index, shape in enumerate(shapes)]
    kernels = [Compiled(*shape, variant, micro=micro, far_c=shape[0]) for shape in shapes]
    run_guarded(shapes, cases, kernels, lambda shape: f"{variant} far_c kernel {shape}")


# the next call's blocks: A, B and C each a block on (as a nest walking them contiguously),
# B and C only, and C only
NEXT_CALLS = [lambda m, n, k, size: (m * k * size, k * n * size, m * n * size),
              lambda m, n, k, size: (0, k * n * size, m * n * size),
              lambda m, n, k, size: (0, 0, m * n * size)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_next_call_kernels_match_the_plain_kernels_bits(variant, micro, dtype):
    """next_call: the blocks prefetch the next call's blocks (prefetcht1 in the code, none in
    the plain kernel's), and C is bit for bit the plain kernel's (and numpy's, added to), set
    or added to, with every kind of tail, chunked K and pipelined and skewed runs."""
    size = np.dtype(dtype).itemsize
    for shape in FAR_C_ALL:
        m, n, k, br = shape
        if br != 1:
            continue
        for accumulate in (True, False):
            for offsets in NEXT_CALLS:
                hint = offsets(m, n, k, size)
                plain, ahead = (Compiled(*shape, variant, dtype, micro, accumulate=accumulate,
                                         next_call=h) for h in (None, hint))
                text = _disassembly(generate_brgemm(
                    target(variant, micro), *shape, dtype=dtype, accumulate=accumulate,
                    next_call=hint))
                assert "prefetcht1" in text, (shape, hint)
                cases = [Case(*shape, seed=sum(shape), dtype=dtype) for _ in range(2)]
                cases[0].call(plain)
                cases[1].call(ahead)
                if accumulate:
                    cases[1].verify()
                np.testing.assert_array_equal(bits(cases[0].c_buffer), bits(cases[1].c_buffer),
                                              err_msg=f"{shape} {hint}: next_call changed C")


@pytest.mark.parametrize("micro", MICRO_NAMES)
@pytest.mark.parametrize("variant", _variants())
def test_next_call_prefetches_never_fault(variant, micro):
    """The next call's blocks, a whole block past A's, B's and C's last bytes (a no-access
    page after each): no fault, C as numpy's."""
    shapes = [shape for shape in FAR_C + PIPELINED[:3] + SKEWED[:3] if shape[3] == 1]
    cases = [GuardedCase(*shape, seed=index) for index, shape in enumerate(shapes)]
    kernels = [Compiled(*shape, variant, micro=micro, next_call=NEXT_CALLS[0](*shape[:3], 4))
               for shape in shapes]
    run_guarded(shapes, cases, kernels, lambda shape: f"{variant} next_call kernel {shape}")


def test_next_call_b_walker_prefetches_whole_columns_of_the_next_b():
    """B's prefetch: each column's lines from the next block's start to its last byte, the
    walker moved by ld_b (r8) between columns."""
    m, n, k = 64, 96, 64
    ahead = k * n * 4
    text = _disassembly(generate_brgemm(target("avx512", "zen4"), m, n, k, 1,
                                        next_call=(0, ahead, 0)))
    found = re.findall(r"prefetcht1 byte ptr \[\w+ \+ (0x[0-9a-f]+)\]", text)
    displacements = {int(d, 16) for d in found}
    assert displacements == set(range(ahead, ahead + k * 4, 64)) | {ahead + k * 4 - 1}
    assert re.search(r"add \w+, r8\b", text), "B's walker never moves by ld_b"


@pytest.mark.parametrize("micro", ["zen4", "zen5", "generic"])
def test_avx512_code_uses_the_upper_sixteen_zmm_registers(micro):
    text = _disassembly(generate_brgemm(target("avx512", micro), 16, 100, 64, 1))
    high = {int(r) for r in re.findall(r"zmm(\d+)", text) if int(r) >= 16}
    assert len(high) >= 8, f"only zmm{sorted(high)} of zmm16..31 used"


def test_avx2_code_needs_no_avx512():
    """Only VEX encodings with ymm0..15: the AVX2 code runs on CPUs without AVX-512."""
    for shape in ((64, 64, 64, 2), (19, 37, 5, 1), (3, 14, 2, 1)):
        text = _disassembly(generate_brgemm(VARIANTS["avx2"], *shape))
        assert "zmm" not in text and "{k" not in text
        assert not re.search(r"[xy]mm(1[6-9]|2\d|3[01])\b", text)
        assert "(bad)" not in text and ".byte" not in text
