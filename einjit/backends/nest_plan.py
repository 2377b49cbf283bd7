"""The plan of a loop nest: what codegen decides (einjit.codegen.loop_nest) and every backend
turns into code (backends/<isa>/loops.py, generate_loop_nest(target, plan)). ISA-neutral
records only; how a plan is chosen lives in codegen.

A nest walks an operation's non-primitive dims (shared ones first, then seq) as ONE flattened
odometer: iteration t of the range [begin * S, end * S), S being the product of the seq
sizes, visits the index tuple t in mixed radix, and at each tuple calls the primitive kernels
on the three operand pointers advanced by that tuple's offsets. The entry point is

    nest(in0, in1, out, begin, end)         # [begin, end): this thread's shared iterations

so a thread runs its slice of the flattened shared dims with one call, and the odometer's
carry chain replaces a nest of loops (a kernel call dwarfs a carry check either way).

At each index tuple, in order: the first touch on the out block if every reduction index is
0, the out block's prefetch, the copies of A's and B's blocks (Pack) where in0 or in1 has
moved since its last copy, the main kernel (its setting form, first_main, in place of a zero
first touch and the main kernel where the plan has one), the last touch if every reduction
index is at its end. The kernels follow the nest in the same buffer and are called as leaf
functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

IN0, IN1, OUT = 0, 1, 2      # operand numbers in the nest's argument order
SCRATCH = 3                  # the nest's copy of A's block (see Pack)
SCRATCH_B = 4                # the nest's copy of B's block


@dataclass(frozen=True)
class LoopDim:
    """One non-primitive dim of the nest: `strides` in bytes for (in0, in1, out)."""
    size: int
    strides: tuple[int, int, int]
    reduction: bool          # a k dim: first/last touch wait for its first/last index


@dataclass(frozen=True)
class KernelCall:
    """A primitive kernel and the arguments the nest passes it.

    kind and params name the kernel as the backend generators take them
    (generate_<kind>(target, *params)); `pointers` are operand numbers (IN0, IN1, OUT,
    SCRATCH) for its pointer arguments; `integers` its integer arguments (leading dims, batch
    strides in elements), fixed for the whole nest."""
    kind: str                # "brgemm", "unary" or "binary"
    params: tuple
    pointers: tuple[int, ...]
    integers: tuple[int, ...]
    dtype: str = "float32"

    @property
    def kernel(self) -> tuple:
        """What identifies the generated kernel (calls may differ in their arguments)."""
        return (self.kind, self.params, self.dtype)


def emitter_arguments(kernel: tuple) -> tuple[tuple, dict]:
    """The positional and keyword arguments (after asm, target) of the backend's
    emit_<kind> for a KernelCall.kernel: brgemm params end with `accumulate`, `stream`,
    `ld_b` (the leading dimension of B every call passes, so the kernel can block for it),
    `far_c` (0, or ld_c where the nest revisits each C block only after other blocks: C
    comes from beyond L2) and `next_call` (None, or the bytes from this call's A, B and C to
    the next call's, each 0 where not to be prefetched: the nest's operands stream from
    beyond L2)."""
    kind, params, dtype = kernel
    if kind == "brgemm":
        accumulate, stream, ld_b, far_c, next_call = params[4:]
        return params[:4], {"dtype": dtype, "accumulate": accumulate, "stream": stream,
                            "ld_b": ld_b, "far_c": far_c, "next_call": next_call}
    return params, {"dtype": dtype}


@dataclass(frozen=True)
class Prefetch:
    """Cache lines to prefetch: `lines` 64-byte lines from the start of each of `columns`
    columns, `pitch` bytes apart, from the out pointer plus `ahead` bytes. ahead 0: this
    call's block, into L1; else the next call's, into L2."""
    lines: int
    columns: int
    pitch: int
    ahead: int = 0


@dataclass(frozen=True)
class Pack:
    """An operand's block copied into the nest's frame by `copy` (the unary identity: in0 to
    SCRATCH for A, in1 to SCRATCH_B for B) before the main call whenever that operand has
    moved since its last copy; the main call reads the copy (at its leading dim). `bytes`:
    the copy's size."""
    copy: KernelCall
    bytes: int

    @property
    def source(self) -> int:
        return self.copy.pointers[0]


@dataclass(frozen=True)
class NestPlan:
    shared: tuple[LoopDim, ...]      # flattened into the [begin, end) range, outermost first
    seq: tuple[LoopDim, ...]         # walked fully inside each shared iteration
    first_touch: KernelCall | None
    main: KernelCall | None
    last_touch: KernelCall | None
    prefetch_out: Prefetch | None = None
    pack_a: Pack | None = None
    pack_b: Pack | None = None
    # the main call at the first reduction indices where it sets the out block instead of
    # adding to it (a zero first touch folded into the BRGEMM); None: main at every index
    first_main: KernelCall | None = None

    @property
    def pack_bytes(self) -> int:
        """The bytes of the frame's copies of A and B."""
        return sum(pack.bytes for pack in (self.pack_a, self.pack_b) if pack)

    @property
    def loops(self) -> tuple[LoopDim, ...]:
        return self.shared + self.seq

    @property
    def shared_iterations(self) -> int:
        return prod(dim.size for dim in self.shared)

    @property
    def seq_iterations(self) -> int:
        return prod(dim.size for dim in self.seq)

    @property
    def streams(self) -> bool:
        """Whether the main kernel may store non-temporally (the nest then ends in a fence
        that orders those stores before the caller's next ones)."""
        return self.main is not None and self.main.kind == "brgemm" and self.main.params[5]

    @property
    def kernels(self) -> tuple[tuple, ...]:
        """The distinct kernels the nest calls (KernelCall.kernel), in a stable order."""
        found = []
        copies = [pack.copy if pack else None for pack in (self.pack_a, self.pack_b)]
        for call in (self.first_touch, *copies, self.first_main, self.main, self.last_touch):
            if call is not None and call.kernel not in found:
                found.append(call.kernel)
        return tuple(found)
