"""The measured rules of the x86-64 BRGEMM blocking, one record per core (CORE_RULES).

The cost model in blocking.py prices FMAs, loads, shuffles and the update of C; where a
measurement on a core disagreed with it, the correction is a rule here, not a literal in
the logic. Each field says in a line why the rule exists and gives the benchmark that
reproduces it; the figures are in docs/measurements.md (x86 BRGEMM rules). The benchmark
commands run on the core named, with the rule as it stands and with the field set to its
"off" value in that core's entry (a same-run A/B: alternate the two, best of several rounds).

A core missing from the table takes the generic entry: the values measured on Zen 4, whose
rules apply by the core's facts (cpu.Microarch: a 512-bit operation run as halves, etc.).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from einjit.backends import Target


@dataclass(frozen=True)
class CoreRules:
    """The measured rules of one core (see the module doc)."""

    # blocking.pair_dot_panels, 16-register AVX2 code: an M of one whole vector and t tail
    # rows runs as a panel of step pairs and a panel of dot tails where K >= entry t - 1 (the
    # packed tail the model prefers runs slower there; () where never). Zen 3:
    # EINJIT_X86_MICROARCH=zen3 python -m benchmarks.x86_gemm --variant avx2
    #     --sizes 8,9,10,16,24,32,40,48,56,64 --k 16,32,64,128 --no-fp64
    pair_dot_min_k: tuple[int, ...] = ()
    # ... and only where N >= this: at N = 8 a block of each loses (same command)
    pair_dot_min_n: int = 16
    # blocking.packs_tail: Ms whose one-row float32 tail AVX2 code never packs 8 columns a
    # vector (7 blends a k-step beside the FMAs run slower than the model says: a dot tail
    # instead). Zen 3: EINJIT_X86_MICROARCH=zen3 python -m benchmarks.x86_gemm --variant avx2
    #     --sizes 17,24,33,38,48,54,64 --k 16,32,64,128 --no-fp64
    unpacked_one_row_m: tuple[int, ...] = ()
    # blocking.unmasked_target, a core that splits zmm: a masked zmm tail with at most this
    # share of its lanes empty stays AVX-512 (it wastes less than AVX2's overlapping tail).
    # Zen 4: python -m benchmarks.x86_gemm --variant avx512 --sizes 8-64 --k 16,64 --no-fp64
    zmm_tail_most_empty: Fraction = Fraction(1, 5)
    # blocking.wide_pair_target: tails of 3 or 4 rows in wide step pairs (a vector of C a
    # column to update) pay only where K >= this. Zen 4:
    # python -m benchmarks.x86_gemm --variant avx512 --sizes 9,10,11,12,17,28,50 --k 16,32,48,64,128
    pair_tail_long_k: int = 48
    # blocking.quad_limit: packed tails of these many columns a vector take no quads (their
    # blends crowd the pipes the quads' shuffles need). Zen 4:
    # python -m benchmarks.x86_gemm --variant avx2 --sizes 8-64 --k 16,64 --no-fp64
    no_quad_groups: tuple[int, ...] = (2, 8)
    # blocking._block_cycles: the share of an FMA pipe a quad column's shuffle takes in a
    # block of one whole vector (no tail). Zen 4:
    # python -m benchmarks.x86_gemm --variant avx2 --sizes 8,16,24 --k 64 --no-fp64
    quad_shuffle_fma_share: float = 0.5
    # blocking._block_cycles, a core that splits zmm: a block storing more vectors than this
    # at once stalls the next block's FMAs, store_burst_cycles for each one more. Zen 4:
    # python -m benchmarks.x86_gemm --variant avx512 --sizes 8-64 --k 16,64 --no-fp64
    store_burst_units: int = 16
    store_burst_cycles: float = 2.0
    # blocking.b_column_limit: ways of an L1 set a block's columns of B may not fill (A's
    # and C's lines need them). Zen 4: B's columns 8 KiB apart (ld_b = 2048 floats), a block
    # of 13 columns against one of 6; python -m benchmarks.x86_gemm measures ld_b = k only
    spare_l1_ways: int = 2
    # blocking.k_chunks, batch_chunks: a block row loading more bytes of A a cycle than L2
    # refills into L1 runs K or the batch in chunks whose A panels and B columns fit
    # l1_chunk_share of L1, chunks of at least min_k_chunk k-steps. Zen 4:
    # python -m benchmarks.x86_gemm --variant avx2 --sizes 64,70 --k 64,500 --no-fp64
    l2_refill_bytes: float = 8.0
    l1_chunk_share: float = 3 / 8
    min_k_chunk: int = 32
    # brgemm._k_loop: instructions of a carried update of C (see schedule.emit_pipelined) a
    # k-step takes beside the next block's FMAs. Zen 4:
    # python -m benchmarks.x86_gemm --variant avx2 --sizes 24 --k 16 --no-fp64
    carried_per_step: int = 6


GENERIC_RULES = CoreRules()

# Zen 3 (16 registers: AVX2 alone, no spare set to pipeline C's updates with) corrects the
# model for Ms of one vector and a short tail; Zen 4 and 5 run the generic rules
CORE_RULES: dict[str, CoreRules] = {
    "zen3": CoreRules(pair_dot_min_k=(32, 64), unpacked_one_row_m=(17,)),
    "zen4": GENERIC_RULES,
    "zen5": GENERIC_RULES,
    "generic": GENERIC_RULES,
}


def rules(target: Target) -> CoreRules:
    """The measured rules of the core `target` generates for (GENERIC_RULES if not listed)."""
    return CORE_RULES.get(target.micro.name, GENERIC_RULES)
