"""The measured rules of the x86-64 BRGEMM blocking, one record per core (CORE_RULES).

The cost model in blocking.py prices FMAs, loads, shuffles and the update of C; where a
measurement on a core disagreed with it, the correction is a rule here, not a literal in
the logic. Each field says in a line why the rule exists and gives the benchmark that
reproduces it; the figures are in docs/measurements.md (x86 BRGEMM rules). A command runs
on the core the rule was measured on, once as the table stands and once with the field set
to its "off" value in that core's entry (a same-run A/B: alternate the two, keep each one's
best round).

A core missing from the table takes the generic entry: the values measured on Zen 4, whose
rules apply by the core's facts (cpu.Microarch: a 512-bit operation run as halves, etc.).
The Intel cores' entry is partly modelled: llvm-mca's tables of those cores, checked by
benchmarks.x86_mca on any host.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from einjit.backends import Target


@dataclass(frozen=True)
class CoreRules:
    """The measured rules of one core (see the module doc). Each field: the function that
    reads it, a line saying why, and the benchmark that reproduces the measurement ($)."""

    # pair_dot_panels: 16-register AVX2, an M of one vector and t tail rows: the whole rows in
    # step pairs and the tail as dot products, two panels, beat the packed tail where K >=
    # entry t - 1 (() where never); pair_dot_min_n: and N at least this (a block each loses)
    # $ python -m benchmarks.x86_gemm --variant avx2 --sizes 8,9,10,16,24,32,48,64 --k 16,32,64
    pair_dot_min_k: tuple[int, ...] = ()
    pair_dot_min_n: int = 16
    # packs_tail: these Ms' one-row float32 tails run slower packed (7 blends a k-step) than dot
    # $ python -m benchmarks.x86_gemm --variant avx2 --sizes 17,24,38,54,64 --k 16,32,64,128
    unpacked_one_row_m: tuple[int, ...] = ()
    # unmasked_target: a masked zmm tail this empty or less wastes less than AVX2's overlap
    # $ python -m benchmarks.x86_gemm --variant avx512 --sizes 8-64 --k 16,64 --no-fp64
    zmm_tail_most_empty: Fraction = Fraction(1, 5)
    # wide_pair_target: wide pairs' tails of 3 or 4 rows (a vector of C each) pay from this K
    # $ python -m benchmarks.x86_gemm --variant avx512 --sizes 11,12,17,50 --k 16,32,48,64,128
    pair_tail_long_k: int = 48
    # quad_limit: tails packed so many columns a vector leave the quads' shuffles no pipe
    # $ python -m benchmarks.x86_gemm --variant avx2 --sizes 8-64 --k 16,64 --no-fp64
    no_quad_groups: tuple[int, ...] = (2, 8)
    # _block_cycles: a quad's shuffle beside one whole vector takes this share of an FMA pipe
    # $ python -m benchmarks.x86_gemm --variant avx2 --sizes 8,10,24 --k 64 --no-fp64
    quad_shuffle_fma_share: float = 0.5
    # _block_cycles: a 512-bit load (not a broadcast inside an FMA) also takes a uop of this
    # many vector ports, the FMA pipes among them (0: none; Intel as llvm-mca's Skylake-SP
    # tables have it: p0, p1, p5), so a block's FMAs, shuffles and such loads share them
    # $ python -m benchmarks.x86_mca      (the skylake-avx512 .. sapphirerapids columns)
    zmm_load_vector_ports: int = 0
    # _plan: zmm blocks at most this many vectors tall (0: blocking.MAX_VECTORS); taller ones
    # ran slower on an Emerald Rapids core than the model and llvm-mca say
    # $ (no command: a same-run A/B of x86_gemm's timer with blocking.MAX_VECTORS 4 and 6)
    max_zmm_vectors: int = 0
    # _block_cycles, a core splitting zmm: more stores at once stall the next block's FMAs
    # $ python -m benchmarks.x86_gemm --variant avx512 --sizes 8-64 --k 16,64 --no-fp64
    store_burst_units: int = 16
    store_burst_cycles: float = 2.0
    # b_column_limit: ways of an L1 set B's columns leave to A's and C's lines
    # $ (no command: benchmarks.x86_gemm passes ld_b = K; time 8x24x64 at ld_b = 2048)
    spare_l1_ways: int = 2
    # _plan: where C comes from beyond L2 (a large contraction's call), a block's columns of B
    # over all of K fill at most this share of L1 (0: no limit): they stream in from L2 beside
    # A's panel, which must stay
    # $ python -m benchmarks.matmul --dtype float64      (768^3: the one-thread row)
    far_b_l1_share: float = 1 / 2
    # k_chunks, batch_chunks: A loaded faster than L2 refills L1 must fit a share of L1
    # $ python -m benchmarks.x86_gemm --variant avx2 --sizes 64,70 --k 64,500 --no-fp64
    l2_refill_bytes: float = 8.0
    l1_chunk_share: float = 3 / 8
    min_k_chunk: int = 32
    # microkernel.k_loop: a carried update of C's instructions a k-step beside the FMAs
    # $ python -m benchmarks.x86_gemm --variant avx2 --sizes 8-64 --k 16 --no-fp64
    carried_per_step: int = 6


GENERIC_RULES = CoreRules()

# The Intel cores' rules: zmm_load_vector_ports from llvm-mca's model of them, max_zmm_vectors
# measured on an Emerald Rapids core (docs/measurements.md)
INTEL_RULES = CoreRules(zmm_load_vector_ports=3, max_zmm_vectors=4)

# Zen 3 (16 registers: AVX2 alone, no spare set to pipeline C's updates with) corrects the
# model for Ms of one vector and a short tail; Zen 4 and 5 run the generic rules
CORE_RULES: dict[str, CoreRules] = {
    "zen3": CoreRules(pair_dot_min_k=(32, 64), unpacked_one_row_m=(17,)),
    "zen4": GENERIC_RULES,
    "zen5": GENERIC_RULES,
    "skylake-sp": INTEL_RULES,
    "icelake-sp": INTEL_RULES,
    "sapphirerapids": INTEL_RULES,
    "generic": GENERIC_RULES,
}


def rules(target: Target) -> CoreRules:
    """The measured rules of the core `target` generates for (GENERIC_RULES if not listed)."""
    return CORE_RULES.get(target.micro.name, GENERIC_RULES)
