"""The ISA-neutral plan of a TensorOperation's loop nest: which loops, which kernel calls.

A nest walks the op's non-primitive dims (shared ones first, then seq) as ONE flattened
odometer: iteration t of the range [begin * S, end * S), S being the product of the seq
sizes, visits the index tuple t in mixed radix, and at each tuple calls the primitive
kernels on the three operand pointers advanced by that tuple's offsets. The entry point is

    nest(in0, in1, out, begin, end)         # [begin, end): this thread's shared iterations

so a thread runs its slice of the flattened shared dims with one call, and the odometer's
carry chain replaces a nest of loops (a kernel call dwarfs a carry check either way).

At each index tuple, in order: first touch on the out block if every k-dim index is 0 (the
seeds' rule), the main kernel, last touch if every k-dim index is at its end. Element-wise
main primitives have no k dims, so they touch every block. A GEMM whose innermost loop is a
k loop runs that loop as the batch of one BRGEMM call, where the batch fits in L2. A zero
first touch before a BRGEMM with no k loop around it (every block gets one update) folds into
the kernel: it sets C (accumulate False) instead of reading the zeros back; where out spans
STREAM_OUT_BYTES and no last touch reads C back, the kernel streams it (non-temporal stores).
BRGEMM kernels are generated for the ld_b the nest passes them (the backend may block for it).
A GEMM's A block whose columns lie a multiple of CONFLICT_PITCH_BYTES apart (a batch's, where
its entries follow one another), reused by the innermost loop, is copied into the nest's
frame whenever in0 moves and read from there (PackA).
A BRGEMM that reads its C block from memory (no first touch wrote it just before) gets the
C block of the next call, one innermost-loop stride on, prefetched into L2 before it runs, so
that the loads of C at the kernel's start hit L2. Into L1 the lines would not last: the A and B
a call streams evict them (the seeds' configurations, 1 core: 91-92% of peak with this block's
lines prefetched into L1 just before the call, 94-96% with the next block's into L2). Where the
innermost loop is a k loop (the same C block again), the block's own lines go to L1 instead.

The backends turn a NestPlan into code (backends/<isa>/loops.py, generate_loop_nest); the
primitive kernels are emitted into the same buffer and called as leaf functions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

import numpy as np

from ..backends import CONFLICT_PITCH_BYTES, LINE_BYTES
from ..kernel import INTEGER_LIMIT
from ..primitives import batch_fits

IN0, IN1, OUT = 0, 1, 2      # operand numbers in the nest's argument order
SCRATCH = 3                  # the nest's copy of A's block (see PackA)


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
    (generate_<kind>(target, *params)); `pointers` are operand numbers (IN0, IN1, OUT) for
    its pointer arguments; `integers` its integer arguments (leading dims, batch strides in
    elements), fixed for the whole nest."""
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
    emit_<kind> for a KernelCall.kernel: brgemm params end with `accumulate`, `stream` and
    `ld_b` (the leading dimension of B every call passes, so the kernel can block for it)."""
    kind, params, dtype = kernel
    if kind == "brgemm":
        accumulate, stream, ld_b = params[4:]
        return params[:4], {"dtype": dtype, "accumulate": accumulate, "stream": stream,
                            "ld_b": ld_b}
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
class PackA:
    """A's block copied into the nest's frame by `copy` (the unary identity, in0 to SCRATCH)
    before the main call whenever in0 has moved since the last copy; the main call reads the
    copy (SCRATCH, its leading dim). `bytes`: the copy's size."""
    copy: KernelCall
    bytes: int


# A GEMM's A block with columns a multiple of CONFLICT_PITCH_BYTES apart, reused by the
# innermost loop (it moves only B and C), is copied once per block into the nest's frame,
# contiguous, instead of once per call by the x86 kernel (blocking.packs_a) or not at all
# (AArch64). Zen 3, einjit alone, copy on / off in alternating processes (best of 3 x 5
# calls): the tensor train's einsum (128x36x305 blocks at ld_a = 4096 floats) 1.19x faster,
# fctn and synthetic 1.05x, the matrix chain 1.10x; the fc layer 64,32,16,... (128x32x16
# batches of 32 at ld_a = 128, the entries one after another) 1.09-1.21x. At most
# PACK_MAX_BYTES of stack (a 128x512 float32 block, padded).
PACK_MAX_BYTES = 288 << 10


def _pack_a(main: KernelCall | None, loops: tuple[LoopDim, ...], itemsize: int
            ) -> tuple[KernelCall | None, PackA | None]:
    """(the main call, the PackA) where A's block is copied (see PACK_MAX_BYTES): a GEMM
    whose A columns lie a multiple of CONFLICT_PITCH_BYTES apart (a batch's entries one after
    another, K columns apart: one matrix of K x batch columns) and whose innermost loop leaves
    in0 where it is; the copy's leading dim is M rounded up to whole lines, a line more where
    that is a multiple of CONFLICT_PITCH_BYTES."""
    if (main is None or main.kind != "brgemm" or not loops
            or loops[-1].strides[IN0] != 0):
        return main, None
    m, _, k, batch = main.params[:4]
    ld_a, stride_a = main.integers[0], main.integers[3]
    line = LINE_BYTES // itemsize
    ld = -(-m // line) * line
    ld += line if ld * itemsize % CONFLICT_PITCH_BYTES == 0 else 0
    size = ld * k * batch * itemsize
    if (ld_a * itemsize % CONFLICT_PITCH_BYTES or size > PACK_MAX_BYTES
            or batch > 1 and stride_a != k * ld_a):
        return main, None
    copy = KernelCall("unary", ("identity", m, k * batch, False), (IN0, SCRATCH), (ld_a, ld),
                      main.dtype)
    packed = replace(main, pointers=(SCRATCH,) + main.pointers[1:],
                     integers=(ld,) + main.integers[1:3] + (ld * k,) + main.integers[4:])
    return packed, PackA(copy, size)


# out spans at least this many bytes: a BRGEMM that sets C (no k loop, no last touch) stores
# it non-temporally (Zen 4, the tensor train's 1.4 GB result in 128x64 blocks: its last
# node ~25% faster; a Zen 4 CCD's L3 is 32 MiB)
STREAM_OUT_BYTES = 64 << 20
MAX_PREFETCHES = 256     # beyond this many lines the prefetches cost more code than they save


@dataclass(frozen=True)
class NestPlan:
    shared: tuple[LoopDim, ...]      # flattened into the [begin, end) range, outermost first
    seq: tuple[LoopDim, ...]         # walked fully inside each shared iteration
    first_touch: KernelCall | None
    main: KernelCall | None
    last_touch: KernelCall | None
    prefetch_out: Prefetch | None = None
    pack_a: PackA | None = None

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
        pack = self.pack_a.copy if self.pack_a else None
        for call in (self.first_touch, pack, self.main, self.last_touch):
            if call is not None and call.kernel not in found:
                found.append(call.kernel)
        return tuple(found)


_OPERANDS = {"in0": IN0, "in1": IN1, "out": OUT}


def _kernel_call(call, dtype: str) -> KernelCall:
    """The nest's view of one of the IR's kernel calls (einjit.ir.verify.KernelCall)."""
    if call.kind == "brgemm":
        # accumulate, stream, ld_b
        params = (call.m, call.n, call.k, call.br_size, True, False, call.ld_b)
    elif call.kind == "unary":
        params = (call.op, call.m, call.n, call.trans_b)
    else:
        params = (call.op, call.m, call.n)
    return KernelCall(call.kind, params, tuple(_OPERANDS[name] for name in call.operands),
                      call.arguments, dtype)


def _out_bytes(op) -> int:
    """The bytes out spans (from its strides)."""
    return (1 + sum((dim.size - 1) * dim.stride_out for dim in op.dims)) * \
        np.dtype(op.dtype).itemsize


def _fold_k_loop(gemm: KernelCall, seq: tuple[LoopDim, ...],
                 itemsize: int) -> tuple[KernelCall, tuple[LoopDim, ...]]:
    """A GEMM whose innermost loop is a k loop becomes one BRGEMM over that loop (its strides
    the batch strides) where the batch fits (einjit.primitives.batch_fits): C then stays in
    registers across the loop instead of a store and a load per iteration. Each out block
    gets the same updates in the same order, its first and last touch before and after."""
    loop = seq[-1]
    m, n, k, _, *flags = gemm.params
    stride_a, stride_b = (stride // itemsize for stride in loop.strides[:2])
    if not (loop.reduction and batch_fits(m, n, k, loop.size, itemsize)
            and stride_a < INTEGER_LIMIT and stride_b < INTEGER_LIMIT):
        return gemm, seq
    brgemm = replace(gemm, params=(m, n, k, loop.size, *flags),
                     integers=gemm.integers[:3] + (stride_a, stride_b))
    return brgemm, seq[:-1]


def plan_nest(op) -> NestPlan:
    """The NestPlan of a validated TensorOperation whose exec types are all defined: its
    non-primitive dims of size > 1 become the odometer's loops; the IR's kernel calls (the
    prim dims mapped onto the primitives, einjit.ir.verify) the calls at each index tuple."""
    itemsize = np.dtype(op.dtype).itemsize

    def loop(dim) -> LoopDim:
        return LoopDim(dim.size, (dim.stride_in0 * itemsize, dim.stride_in1 * itemsize,
                                  dim.stride_out * itemsize), dim.type == "k")

    shared = tuple(loop(dim) for dim in op.dims if dim.exec_type == "shared" and dim.size > 1)
    seq = tuple(loop(dim) for dim in op.dims if dim.exec_type == "seq" and dim.size > 1)
    calls = {call.role: _kernel_call(call, op.dtype) for call in op.kernel_calls}
    main, first = calls.get("main"), calls.get("first_touch")
    if main is not None and main.kind == "brgemm" and main.params[3] == 1 and seq:
        main, seq = _fold_k_loop(main, seq, itemsize)
    if (main is not None and main.kind == "brgemm" and first is not None
            and first.params[0] == "zero" and not any(d.reduction for d in shared + seq)):
        # each block's one update follows its zeroing: the kernel sets C instead of adding;
        # where nothing reads C back and out is far larger than the caches, it streams C
        stream = calls.get("last_touch") is None and _out_bytes(op) >= STREAM_OUT_BYTES
        main = replace(main, params=main.params[:4] + (False, stream) + main.params[6:])
        first = None
    prefetch = None
    if main is not None and main.kind == "brgemm" and first is None and main.params[4]:
        m, n = main.params[:2]
        lines = -(-m * itemsize // LINE_BYTES) + 1     # +1: a column need not start on a line
        loops = shared + seq           # the next call's C: one innermost stride on
        ahead = loops[-1].strides[OUT] if loops else 0
        if lines * n <= MAX_PREFETCHES:
            prefetch = Prefetch(lines, n, main.integers[2] * itemsize, ahead)
    main, pack = _pack_a(main, shared + seq, itemsize)
    return NestPlan(shared, seq, first, main, calls.get("last_touch"), prefetch, pack)
