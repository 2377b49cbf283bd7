"""The backend registry: an ISA name maps to the module that generates its code.

Every backend module offers the same functions with the same signatures:

    generate_brgemm(target, m, n, k, br_size, dtype, accumulate, stream, ld_b) -> bytes
    generate_unary(target, op, m, n, trans_b, dtype) -> bytes
    generate_binary(target, op, m, n, dtype) -> bytes
    generate_loop_nest(target, plan) -> bytes        (a NestPlan, einjit.backends.nest_plan)
    guard_entry(target, code) -> bytes               (code behind a stub keeping the FP flags)
    array_call(target, call) -> (bytes, entry offset)
                                     (an ArrayCall, einjit.backends.array_call: checks numpy
                                     arrays against a plan's layouts, then runs its nests)
    default_variant() -> str                         (the host's best variant, or the widest)
    missing_features(variant) -> tuple[str, ...]     (what this host lacks to run it)
    brgemm_vector_bits(target, m, k, dtype) -> int
                                     (the vector width a BRGEMM of M rows computes in)
    flush_icache: a function(start, end) making freshly written code visible to instruction
                  fetch, or None where the ISA keeps instruction fetch coherent with stores
    VARIANTS: dict[str, Target]
    generate_worker_loop(target), generate_run_tasks(target), generate_spin(target),
    generate_claim(target) -> bytes  (native workers' code over slots and the claim of a
                                     nest's chunks, see worker_slot)

Nothing above this package imports a specific backend: it asks `backend(target.isa)` or
`resolve_target(isa)`, and places code to run with `place_code(target, code)`. A target is
written "isa" or "isa:variant" ("x86_64:avx2").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ..errors import KernelParameterError, KernelParameterTypeError
from ..limits import BRGEMM_LIMITS
from ..runtime.host import host_isa
from ..runtime.memory import CodeBlock, arena

ISAS = ("aarch64", "x86_64")


LINE_BYTES = 64          # a cache line on every core the backends target
# columns a multiple of this many cache lines apart start in every CONFLICT_SET_SHARE-th set
# of L1 or fewer (Microarch.conflict_pitch_bytes): a panel of them has that share of L1 at most
CONFLICT_SET_SHARE = 8
# Generated code lowers its stack pointer at most this far before it touches the stack (a
# store at the new top): a larger frame reserved at once could step over a thread's guard
# page (4 KiB on Linux) into other memory instead of faulting on it ("stack clash")
STACK_PROBE_BYTES = 4096


@dataclass(frozen=True)
class Microarch:
    """What the block-shape cost models know of the core the code will run on.

    full_rate_bits: the widest vector an FMA, load or store handles in one go; a wider one
    is executed as halves (Zen 4: a zmm FMA takes both 256-bit pipes, so it counts twice).
    fma_pipes: FMAs of up to full_rate_bits a cycle. load_ports, store_ports: vector loads
    and stores of up to full_rate_bits a cycle. masked_store_cycles: cycles one AVX
    vmaskmovps/pd store occupies (microcoded on AMD cores; docs/measurements.md).
    fma_shuffle_bits: shuffles and blends of vectors this wide or wider (vpermps, vblendmps)
    issue to the FMA pipes, each in an FMA's slot (0: they have pipes of their own).
    l1_ways, l1_sets: the L1 data cache's associativity and sets of 64-byte lines; addresses
    l1_sets * 64 bytes apart compete for the same l1_ways lines. l2_bytes: one core's L2
    (the cache blocks of a large contraction, einjit.passes.block). llc_bytes: the last-level
    cache a core's reads go through (an AMD CCD's L3; taken for other cores until measured
    there): a matrix beyond it comes from memory (einjit.passes.block). (The x86-64 BRGEMM's
    measured rules per core: x86_64/tuning.py.)

    The loop nests' thresholds (einjit.codegen.loop_nest, einjit.passes.identify), from the
    caches (the defaults measured on Zen 3/4, docs/measurements.md): batch_block_bytes: the
    most in0 + in1 bytes one BRGEMM call's batch reads (under half of L2, which the call's out
    block and the next blocks share); a longer batch would stream its blocks from beyond L2
    on every call. pack_max_bytes: the most stack a nest's copy of A's block takes (Pack; a
    128 x 512 float32 block, split's largest, at its padded leading dim). stream_out_bytes:
    an out this large (far past the last-level cache) that a BRGEMM sets and nothing reads
    back is stored non-temporally. c_set_ways: where C comes from beyond L2 (a large
    contraction's calls, brgemm's far_c), the most lines of one register block's C that may
    map to one L1 set, in L1 ways (chosen by measurement at power-of-two ld_c:
    docs/measurements.md, "C from beyond L2"). far_llc: the last-level cache lies across a
    mesh (Intel's server cores), far from each core's L2. There a far C's register blocks each
    prefetch the C of the block after them, not of the block a row below (C prefetched a row
    ahead has left L2's few sets a power-of-two ld_c gives it before it is read:
    docs/measurements.md, "C prefetched a block ahead"); and a contraction whose B outgrows L2
    is blocked as a large one (einjit.passes.block). k_chunk_l1_parts: two lines of each of a
    large contraction's kc columns of A fill one of this many parts of L1
    (einjit.passes.block.k_chunk; an integer: planning does no inexact float arithmetic,
    which would raise the caller's inexact flag); three on Intel's server cores, whose FMAs
    take a zmm at full width and read a block row of A twice as fast as Zen 4's halves, so
    that it must stay in L1 rather than come from L2 (docs/measurements.md, "kc on Sapphire
    Rapids"). prefetch_next_call: a BRGEMM whose nest's operands outgrow L2 prefetches the
    next call's blocks into L2 (brgemm's next_call; einjit.codegen.loop_nest), where the
    backend's kernels can."""
    name: str = "generic"
    full_rate_bits: int = 512
    fma_pipes: int = 2
    load_ports: int = 2
    store_ports: int = 1
    masked_store_cycles: float = 1.0
    fma_shuffle_bits: int = 0
    l1_ways: int = 8
    l1_sets: int = 64
    l2_bytes: int = 1 << 20
    llc_bytes: int = 32 << 20
    batch_block_bytes: int = 384 << 10
    pack_max_bytes: int = 288 << 10
    stream_out_bytes: int = 64 << 20
    c_set_ways: float = 1.5
    far_llc: bool = False
    k_chunk_l1_parts: int = 2
    prefetch_next_call: bool = True

    @property
    def l1_bytes(self) -> int:
        return self.l1_ways * self.l1_sets * LINE_BYTES

    @property
    def conflict_pitch_bytes(self) -> int:
        """Columns a multiple of this many bytes apart crowd into few of L1's sets: a pitch of
        CONFLICT_SET_SHARE lines puts their first lines in every eighth set or fewer, one way
        (l1_bytes / l1_ways, the bytes after which the sets repeat) in a single set; the
        smaller of the two (512 bytes on a 32 KiB 8-way L1 of 64-byte lines, whose way is
        4 KiB). A panel of such columns has an eighth of L1 or less and leaves it between
        uses however short it is."""
        return min(self.l1_bytes // self.l1_ways, CONFLICT_SET_SHARE * LINE_BYTES)

    def crowds(self, pitch_bytes: int) -> bool:
        """Whether columns pitch_bytes apart crowd into few of L1's sets: a positive multiple
        of conflict_pitch_bytes."""
        return pitch_bytes > 0 and pitch_bytes % self.conflict_pitch_bytes == 0

    @property
    def c_set_lines(self) -> int:
        """The most lines of a far C's register block that may share an L1 set."""
        return int(self.c_set_ways * self.l1_ways)

    def batch_fits(self, m: int, n: int, k: int, batch: int, itemsize: int) -> bool:
        """Whether a BRGEMM batch of `batch` m x n x k blocks keeps C in registers at a gain:
        more than one entry, within the kernel's limit, its in0 and in1 blocks within
        batch_block_bytes, and n above 1: a matrix times a vector would read the batch's rows
        of in0 beside K's in every call, each a run the hardware prefetchers must follow at
        once (einjit.passes.block keeps K short for them, VECTOR_MAX_SIZE)."""
        return n > 1 and 1 < batch <= BRGEMM_LIMITS["br_size"] and \
            batch * k * (m + n) * itemsize <= self.batch_block_bytes

    @property
    def splits_512(self) -> bool:
        """A 512-bit operation runs as two 256-bit halves (Zen 4)."""
        return self.full_rate_bits < 512

    def shuffles_on_fma_pipes(self, bits: int) -> bool:
        """Whether shuffles and blends of `bits`-bit vectors take the FMA pipes' slots."""
        return 0 < self.fma_shuffle_bits <= bits

    def passes(self, bits: int) -> int:
        """How many full-rate operations one operation on `bits`-bit vectors takes."""
        return max(1, -(-bits // self.full_rate_bits))


GENERIC = Microarch()


@dataclass(frozen=True)
class Target:
    """What generated code may use: instruction set, its variant and the register file, and
    the facts of the core that choose between code shapes (`micro`)."""
    isa: str            # "aarch64" or "x86_64"
    variant: str        # "neon", "avx2" or "avx512"
    vector_bits: int    # width of one vector register
    registers: int      # vector registers
    masks: int = 0      # opmask registers usable as write masks (AVX-512: k1..k7)
    micro: Microarch = GENERIC

    def lanes(self, dtype_bytes: int = 4) -> int:
        """Elements of `dtype_bytes` bytes in one vector register."""
        return self.vector_bits // 8 // dtype_bytes

    @property
    def name(self) -> str:
        return f"{self.isa}:{self.variant}"

    def __str__(self) -> str:
        return self.name


def backend(isa: str) -> ModuleType:
    """The backend module of `isa` (imported on first use)."""
    if isa not in ISAS:
        raise KernelParameterError(f"isa={isa!r} is not supported; expected one of {ISAS}")
    return importlib.import_module(f"{__name__}.{isa}")


def resolve_target(isa: str | Target | None = None) -> Target:
    """The Target for the user's `isa` argument: None means the host's ISA; "x86_64:avx2"
    names a variant; without one, the x86-64 variant comes from EINJIT_X86_VARIANT or the
    host's best. Raises KernelParameterError naming the value it cannot use."""
    if isinstance(isa, Target):
        return isa
    if isa is None:
        name = host_isa()
        if name is None:
            import platform
            raise KernelParameterError(
                f"isa=None but the host machine {platform.machine()!r} is not one einjit "
                f"generates code for; pass isa= one of {ISAS} to generate code only")
        variant = None
    elif isinstance(isa, str):
        name, _, variant = isa.partition(":")
        variant = variant or None
    else:
        raise KernelParameterTypeError(f"isa={isa!r} is not supported; expected None, a "
                                       f"Target or one of {ISAS} (optionally 'isa:variant')")
    module = backend(name)
    if variant is None:
        variant = module.default_variant()
    if variant not in module.VARIANTS:
        raise KernelParameterError(f"isa={isa!r}: variant {variant!r} is not one of "
                                   f"{sorted(module.VARIANTS)}")
    return module.VARIANTS[variant]


def why_not_runnable(target: Target) -> str | None:
    """None if code for `target` can run on this host, else the reason it cannot."""
    if target.isa != host_isa():
        return f"it was generated for {target.isa} but this host runs {host_isa()}"
    missing = backend(target.isa).missing_features(target.variant)
    if missing:
        return f"it uses {target.variant} but the host CPU lacks {', '.join(missing)}"
    return None


def place_code(target: Target, code: bytes) -> CodeBlock:
    """`code`, generated for `target`, in the shared code arena (einjit.runtime.memory) to run
    on this host; the arena flushes the instruction cache as the target's backend says."""
    return arena.place(code, flush_icache=backend(target.isa).flush_icache)
