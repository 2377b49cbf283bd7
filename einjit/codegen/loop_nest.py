"""How a TensorOperation's loop nest is planned for a target: which loops, which kernel calls
(the records are einjit.backends.nest_plan's, which also says how a nest runs).

The loops are the op's non-primitive dims of size > 1 (shared first, then seq); the calls the
IR's kernel calls (einjit.ir.verify): a first touch when every k index is 0, the main
kernel, a last touch when every k index is at its end. Element-wise main
primitives have no k dims, so they touch every block. The thresholds come from the target's
core (Target.micro, an einjit.backends.Microarch):

- A GEMM whose innermost loop is a k loop runs that loop as the batch of one BRGEMM call,
  where the batch fits (Microarch.batch_fits): C stays in registers across it.
- A zero first touch before a BRGEMM with no k loop around it (every block gets one update)
  folds into the kernel: it sets C (accumulate False) instead of reading the zeros back; where
  out spans stream_out_bytes and no last touch reads C back, the kernel streams it
  (non-temporal stores; real dtypes only: the complex BRGEMM stores through its caches).
  Inside k loops it folds into the call at their first indices (NestPlan.first_main: the
  main kernel that sets C, its far_c hint kept so that its stores find C's lines near): no
  pass of zeros over C, which would bring every block in from beyond L2 once more.
- BRGEMM kernels are generated for the ld_b the nest passes them (the backend may block for
  it).
- A GEMM's A block whose columns lie a multiple of the core's conflict pitch apart (a batch's,
  where its entries follow one another), reused by the innermost loop, is copied into the
  nest's frame whenever in0 moves and read from there (Pack; at most pack_max_bytes); so is
  the A block of a call wide enough to pay for a copy per call (PACK_EVERY_CALL_MIN_N), and
  the B block of a GEMM whose B columns lie such a pitch apart and which the innermost loop
  reuses (a large contraction's panel: einjit.passes.block), within half of L2.
- A BRGEMM whose C block comes back only after the nest has walked other C blocks (a k
  loop around the m blocks of a large contraction) is told so and C's ld (far_c): its kernel
  prefetches C a block row ahead, keeps its K loop whole and its blocks' C within L1's sets.
- A BRGEMM that reads its C block from memory (no first touch wrote it just before) gets the
  C block of the next call, one innermost-loop stride on, prefetched into L2 before it runs,
  so that the loads of C at the kernel's start hit L2: into L1 the lines would not last, the
  A and B a call streams evict them. Where the innermost loop is a k loop (the same C block
  again), the block's own lines go to L1 instead.
- A BRGEMM without a batch or far_c in a nest whose operands outgrow L2 is told where the
  next call's blocks lie (next_call): its register blocks prefetch them into L2 (_next_call).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..backends import LINE_BYTES, Microarch, Target
from ..backends.nest_plan import (
    IN0,
    IN1,
    OUT,
    SCRATCH,
    SCRATCH_B,
    KernelCall,
    LoopDim,
    NestPlan,
    Pack,
    Prefetch,
)
from ..limits import INTEGER_LIMIT
from ..ops import DTYPES

# a call this wide copies A's block however often in0 moves: the copy, m x k elements, is small
# beside the call's m x n x k FMAs (a large contraction's calls, einjit.passes.block)
PACK_EVERY_CALL_MIN_N = 128
MAX_PREFETCHES = 256     # beyond this many lines the prefetches cost more code than they save
# the farthest a next call's block may lie for a kernel to prefetch it: x86 displacements are
# 32-bit, and a block's own extent comes on top
NEXT_CALL_MAX_BYTES = 1 << 30
# in0 and in1 beyond this share of the last-level cache come from memory: only then does a
# call prefetch the next call's A and B (docs/measurements.md)
NEXT_CALL_INPUTS_LLC_SHARE = 8


def _copy_ld(rows: int, itemsize: int, micro: Microarch) -> int:
    """The leading dim of a copy of `rows` rows: whole lines, a line more where that pitch
    would crowd L1's sets."""
    line = LINE_BYTES // itemsize
    ld = -(-rows // line) * line
    return ld + line if micro.crowds(ld * itemsize) else ld


def _pack_a(main: KernelCall | None, loops: tuple[LoopDim, ...], itemsize: int,
            micro: Microarch) -> tuple[KernelCall | None, Pack | None]:
    """(the main call, the Pack) where A's block is copied: a GEMM whose A columns lie a
    multiple of the core's conflict pitch apart (a batch's entries one after another, K
    columns apart: one matrix of K x batch columns) and whose innermost loop leaves in0 where
    it is, the copy within pack_max_bytes. The nest copies once per block what the x86
    kernel would copy on every call (blocking.packs_a) and AArch64's would read in place. The
    copy's leading dim is M rounded up to whole lines, a line more where that is a multiple
    of the conflict pitch."""
    if main is None or main.kind != "brgemm" or not loops:
        return main, None
    m, n, k, batch = main.params[:4]
    if loops[-1].strides[IN0] != 0 and n < PACK_EVERY_CALL_MIN_N:
        return main, None
    ld_a, stride_a = main.integers[0], main.integers[3]
    ld = _copy_ld(m, itemsize, micro)
    size = ld * k * batch * itemsize
    if (not micro.crowds(ld_a * itemsize) or size > micro.pack_max_bytes
            or batch > 1 and stride_a != k * ld_a):
        return main, None
    copy = KernelCall("unary", ("identity", m, k * batch, False), (IN0, SCRATCH), (ld_a, ld),
                      main.dtype)
    packed = replace(main, pointers=(SCRATCH,) + main.pointers[1:],
                     integers=(ld,) + main.integers[1:3] + (ld * k,) + main.integers[4:])
    return packed, Pack(copy, size)


def _pack_b(main: KernelCall | None, loops: tuple[LoopDim, ...], itemsize: int,
            micro: Microarch) -> tuple[KernelCall | None, Pack | None]:
    """(the main call, the Pack) where B's block is copied: a GEMM without a batch whose B
    columns lie a multiple of the core's conflict pitch apart and whose innermost loop leaves
    in1 where it is (a large contraction's panel, passed by every m block), the copy within
    L2. The copy's leading dim is K rounded up to whole lines, a line more where
    that is a multiple of the conflict pitch (the kernel is generated for it)."""
    if (main is None or main.kind != "brgemm" or not loops or main.params[3] != 1
            or loops[-1].strides[IN1] != 0):
        return main, None
    _, n, k = main.params[:3]
    ld_b = main.integers[1]
    ld = _copy_ld(k, itemsize, micro)
    size = ld * n * itemsize
    if not micro.crowds(ld_b * itemsize) or size > micro.l2_bytes:
        return main, None
    copy = KernelCall("unary", ("identity", k, n, False), (IN1, SCRATCH_B), (ld_b, ld),
                      main.dtype)
    pointers = main.pointers[:1] + (SCRATCH_B,) + main.pointers[2:]
    integers = main.integers[:1] + (ld,) + main.integers[2:]
    packed = replace(main, pointers=pointers, integers=integers,
                     params=main.params[:6] + (ld,) + main.params[7:])
    return packed, Pack(copy, size)


def _far_c(main: KernelCall | None, op, loops: tuple[LoopDim, ...]) -> bool:
    """Whether a BRGEMM that reads C gets its C block back only after the nest has walked
    other C blocks: a k loop around a loop that moves out (a large contraction's k chunks
    around its m blocks, einjit.passes.block). Its kernel then prefetches C ahead, runs its
    K whole and keeps a block's C within L1's sets (brgemm's far_c, C's ld). Not a matrix
    times a vector (n of 1): its C, one column, stays near between its k blocks, and the
    prefetches would only slow the stream of A (docs/measurements.md)."""
    if main is None or main.kind != "brgemm" or not main.params[4]:
        return False
    if op.is_matrix_vector:
        return False
    reductions = [index for index, loop in enumerate(loops) if loop.reduction]
    return bool(reductions) and any(loop.strides[OUT] for loop in loops[reductions[-1] + 1:])


_OPERANDS = {"in0": IN0, "in1": IN1, "out": OUT}


def _kernel_call(call, dtype: str) -> KernelCall:
    """The nest's view of one of the IR's kernel calls (einjit.ir.verify.KernelCall)."""
    if call.kind == "brgemm":
        # accumulate, stream, ld_b, far_c, next_call
        params = (call.m, call.n, call.k, call.br_size, True, False, call.ld_b, 0, None)
    elif call.kind == "unary":
        params = (call.op, call.m, call.n, call.trans_b)
    else:
        params = (call.op, call.m, call.n)
    return KernelCall(call.kind, params, tuple(_OPERANDS[name] for name in call.operands),
                      call.arguments, dtype)


def _span_bytes(op, operand: str) -> int:
    """The bytes an operand ("in0", "in1" or "out") spans (from its strides)."""
    return (1 + sum((dim.size - 1) * getattr(dim, f"stride_{operand}")
                    for dim in op.dims)) * np.dtype(op.dtype).itemsize


def _next_call(main: KernelCall | None, op, loops: tuple[LoopDim, ...], c_prefetched: bool,
               micro: Microarch) -> KernelCall | None:
    """A real BRGEMM without a batch or far_c, in a nest whose operands together outgrow L2
    (each call's blocks then come from beyond it), is told where the next call's blocks lie
    (brgemm's next_call): for A and B, the stride of the innermost loop that moves that
    operand, for C the innermost loop's (a C block further out may be another thread's,
    whose lines a prefetch would pull away while that thread writes them); its register
    blocks share out their prefetch into L2, which the hardware prefetchers do not issue
    early enough for blocks that start anew at every call. 0 for an operand the call reads
    from the nest's copy (Pack), for C where the nest prefetches it itself (Prefetch) or
    the kernel streams it, and for A and B unless in0 and in1 together outgrow a share of
    the last-level cache (NEXT_CALL_INPUTS_LLC_SHARE) and the call is no matrix times a
    vector (whose long runs of A the hardware prefetchers follow): where the inputs come
    from L3 in time, those prefetches measured slower (docs/measurements.md)."""
    if (main is None or main.kind != "brgemm" or not micro.prefetch_next_call or not loops
            or main.params[3] != 1 or main.params[7] or main.dtype not in DTYPES):
        return main
    if sum(_span_bytes(op, name) for name in _OPERANDS) <= micro.l2_bytes:
        return main
    m, n = main.params[:2]
    inputs_far = (m > 1 and n > 1 and _span_bytes(op, "in0") + _span_bytes(op, "in1")
                  > micro.llc_bytes // NEXT_CALL_INPUTS_LLC_SHARE)
    wanted = (inputs_far, inputs_far, not (c_prefetched or main.params[5]))
    nexts = [next((loop.strides[operand] for loop in reversed(loops) if loop.strides[operand]),
                  0) for operand in (IN0, IN1)] + [loops[-1].strides[OUT]]
    offsets = [offset if wanted[operand] and main.pointers[operand] == operand
               and abs(offset) < NEXT_CALL_MAX_BYTES else 0
               for operand, offset in enumerate(nexts)]
    if not any(offsets):
        return main
    return replace(main, params=main.params[:8] + (tuple(offsets),))


def _fold_k_loop(gemm: KernelCall, seq: tuple[LoopDim, ...], itemsize: int,
                 micro: Microarch) -> tuple[KernelCall, tuple[LoopDim, ...]]:
    """A GEMM whose innermost loop is a k loop becomes one BRGEMM over that loop (its strides
    the batch strides) where the batch fits (Microarch.batch_fits): C then stays in registers
    across the loop instead of a store and a load per iteration. Each out block gets the same
    updates in the same order, its first and last touch before and after."""
    loop = seq[-1]
    m, n, k, _, *flags = gemm.params
    stride_a, stride_b = (stride // itemsize for stride in loop.strides[:2])
    if not (loop.reduction and micro.batch_fits(m, n, k, loop.size, itemsize)
            and stride_a < INTEGER_LIMIT and stride_b < INTEGER_LIMIT):
        return gemm, seq
    brgemm = replace(gemm, params=(m, n, k, loop.size, *flags),
                     integers=gemm.integers[:3] + (stride_a, stride_b))
    return brgemm, seq[:-1]


def plan_nest(op, target: Target) -> NestPlan:
    """The NestPlan for `target` of a validated TensorOperation whose exec types are all
    defined: its non-primitive dims of size > 1 become the odometer's loops; the IR's kernel
    calls (the prim dims mapped onto the primitives, einjit.ir.verify) the calls at each
    index tuple; the target's core sets the thresholds (see the module docstring)."""
    itemsize = np.dtype(op.dtype).itemsize
    micro = target.micro

    def loop(dim) -> LoopDim:
        return LoopDim(dim.size, (dim.stride_in0 * itemsize, dim.stride_in1 * itemsize,
                                  dim.stride_out * itemsize), dim.type == "k")

    shared = tuple(loop(dim) for dim in op.dims if dim.exec_type == "shared" and dim.size > 1)
    seq = tuple(loop(dim) for dim in op.dims if dim.exec_type == "seq" and dim.size > 1)
    calls = {call.role: _kernel_call(call, op.dtype) for call in op.kernel_calls}
    main, first = calls.get("main"), calls.get("first_touch")
    if main is not None and main.kind == "brgemm" and main.params[3] == 1 and seq:
        main, seq = _fold_k_loop(main, seq, itemsize, micro)
    if (main is not None and main.kind == "brgemm" and first is not None
            and first.params[0] == "zero" and not any(d.reduction for d in shared + seq)):
        # each block's one update follows its zeroing: the kernel sets C instead of adding;
        # where nothing reads C back and out is far larger than the caches, it streams C
        # (complex kernels never stream)
        stream = (calls.get("last_touch") is None and op.dtype in DTYPES
                  and _span_bytes(op, "out") >= micro.stream_out_bytes)
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
    if _far_c(main, op, shared + seq):     # the hint is C's ld
        main = replace(main, params=main.params[:7] + (main.integers[2],) + main.params[8:])
    main, pack_a = _pack_a(main, shared + seq, itemsize, micro)
    main, pack_b = _pack_b(main, shared + seq, itemsize, micro)
    main = _next_call(main, op, shared + seq, prefetch is not None, micro)
    first_main = None
    if (main is not None and main.kind == "brgemm" and first is not None
            and first.params[0] == "zero"):
        # inside k loops (without them the fold above took it): the call at their first
        # indices sets C
        first_main = replace(main, params=main.params[:4] + (False,) + main.params[5:])
        first = None
    return NestPlan(shared, seq, first, main, calls.get("last_touch"), prefetch, pack_a, pack_b,
                    first_main)
