"""An executable plan: an optimized EinsumTree lowered to one TensorOperation per node, with
the buffers its intermediates live in. Intermediates are dense in their node's dims order,
allocated when produced and dropped as soon as their consumer ran.

Once every step's operation is defined (einjit.optimize ran), the plan compiles the steps and
keeps a program of (entry, operand slots) so that a call costs one unchecked
`CompiledOperation.run(in0, in1, out)` per step on addresses: the caller (einjit.einsum,
ContractExpression) has checked the operands' shapes, strides, dtype and writability against
the plan's, which is what makes those addresses safe.

A plan has one dtype (DTYPES: the ones einjit's kernels take): every operand, intermediate
buffer and ones vector is of it, and strides are in its elements."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from einjit.backends.array_call import (
    FRAME_ALIGNMENT,
    MAX_ARGUMENTS,
    MAX_FRAME_BYTES,
    ArrayCall,
    ArrayLayout,
    NestCall,
    Source,
)
from einjit.frontend.concurrency import concurrent_groups
from einjit.frontend.long_sums import (
    CHUNK,
    LONG_CHAIN,
    LONG_SUM,
    accumulation_chain,
    chunked,
    row_chunks,
    rows_cut,
    starved,
)
from einjit.frontend.lower import Lowered, Tensor, lower_contraction, lower_unary
from einjit.frontend.rewrite import dense_strides
from einjit.frontend.tree import EinsumTree, Node
from einjit.log import plan_built
from einjit.ops import COMPLEX_DTYPES, DTYPES
from einjit.runtime.arrays import ALIGN_FROM_BYTES, ARRAY_FIELDS, aligned_empty, data_address
from einjit.runtime.threads import default_threads

#: how a step's operation runs: op.execute(in0, in1, out) unless a test swaps in the numpy
#: reference executor (einjit.ir.reference.execute_reference) while the JIT is unavailable
EXECUTOR: Callable | None = None


@dataclass(frozen=True)
class Step:
    lowered: Lowered
    # in0, in1, out: ("leaf", i) ("buf", j) ("ones", n) ("out",) or () for unused
    sources: tuple[tuple, tuple, tuple]
    frees: tuple[int, ...]                     # buffers no later step reads
    node: Node
    # element offsets of in0, in1 and out from their sources' bases (a long sum's last chunk)
    offsets: tuple[int, int, int] = (0, 0, 0)
    part: str = ""      # which part of a node's sum in chunks this step computes, if any


@dataclass(frozen=True)
class PlanMemory:
    """A plan's intermediate memory in bytes (operands and result not counted): its largest
    buffer, and the most its buffers hold at once while it runs."""
    largest_bytes: int
    peak_bytes: int


def _optimizer():
    """(optimize, peel), or None where the optimizer is not there (ops stay undefined)."""
    try:
        from einjit.passes import optimize
        from einjit.passes.peel import peel
    except ImportError:
        return None
    return optimize, peel


class Plan:
    """Steps computing `tree` (already optimized) from leaves with `leaf_strides` into an output
    with `out_strides` (per dim id, elements of `dtype`)."""

    def __init__(self, tree: EinsumTree, leaf_strides: Mapping[int, Mapping[int, int]],
                 out_strides: Mapping[int, int], *, num_threads: int | None = None,
                 optimize_ops: bool = True, dtype: str = "float32", compile: bool = True):
        if dtype not in DTYPES + COMPLEX_DTYPES:
            raise ValueError(f"a plan's dtype is one of {DTYPES + COMPLEX_DTYPES}, got "
                             f"{dtype!r}")
        self.tree = tree
        self.leaf_strides = leaf_strides
        self.out_strides = out_strides
        self.optimize_ops = optimize_ops
        self.dtype = np.dtype(dtype)
        self.itemsize = self.dtype.itemsize
        sizes = tree.sizes
        self.buffer_sizes: list[int] = []
        self.steps: list[Step] = []
        self.ones: dict[int, np.ndarray] = {}
        optimizer = _optimizer() if optimize_ops else None
        threads = num_threads or default_threads()
        self.num_threads = threads
        ids = {}

        def tensor_of(node: Node) -> tuple[Tensor, tuple]:
            if node is tree.root:
                return Tensor(node.dims, tuple(out_strides[d] for d in node.dims)), ("out",)
            if node.is_leaf:
                strides = leaf_strides[node.operand]
                return (Tensor(node.dims, tuple(strides[d] for d in node.dims)),
                        ("leaf", node.operand))
            strides = dense_strides(node.dims, sizes)
            return Tensor(node.dims, tuple(strides[d] for d in node.dims)), ("buf", ids[id(node)])

        def lowered_step(inputs: Sequence[Tensor], out: Tensor,
                         step_sizes: Sequence[int]) -> list[tuple[Lowered, tuple]]:
            """The node's operation as parts (einjit.passes.peel), each optimized, with the
            element offsets of its in0, in1 and out."""
            if len(inputs) == 2:
                lowered = lower_contraction(inputs[0], inputs[1], out, step_sizes, dtype)
            else:
                lowered = lower_unary(inputs[0], out, step_sizes, dtype)
            if optimizer is None:
                return [(lowered, (0, 0, 0))]
            optimize, peel = optimizer
            return [(Lowered(optimize(part.op, num_threads=num_threads), lowered.ones,
                             lowered.ones_length, lowered.prims), part.offsets)
                    for part in peel(lowered.op, num_threads)]

        def add(node: Node, parts: list[tuple[Lowered, tuple]], refs: Sequence[tuple],
                out_ref: tuple, frees: tuple[int, ...], offsets: Sequence[int] = (0, 0),
                out_offset: int = 0, part: str = "") -> None:
            """A step per part (the last frees the buffers)."""
            for number, (lowered, moved) in enumerate(parts):
                if len(refs) == 2:
                    sources, at = tuple(refs), tuple(offsets)
                elif lowered.ones == "in1":
                    sources, at = (refs[0], ("ones", lowered.ones_length)), (offsets[0], 0)
                elif lowered.ones == "in0":
                    sources, at = (("ones", lowered.ones_length), refs[0]), (0, offsets[0])
                else:
                    sources, at = (refs[0], ()), (offsets[0], 0)
                if lowered.ones:
                    self.ones.setdefault(lowered.ones_length,
                                         np.ones(lowered.ones_length, self.dtype))
                # a ones vector is all ones: read from its start at any offset
                at = tuple(0 if source[:1] == ("ones",) else a + b
                           for source, a, b in zip(sources, at, moved))
                label = part
                if len(parts) > 1:
                    label = (f"{part}, " if part else "") + f"part {number + 1} of {len(parts)}"
                self.steps.append(Step(lowered, (sources[0], sources[1], out_ref),
                                       frees if number == len(parts) - 1 else (), node,
                                       at + (out_offset + moved[2],), label))

        def reduce(node: Node, inputs: Sequence[Tensor], refs: Sequence[tuple], out: Tensor,
                   out_ref: tuple, step_sizes: Sequence[int], frees: tuple[int, ...],
                   longest: int = LONG_SUM, part: str = "") -> None:
            """The steps of `node`: one, or a long sum's chunks (frontend.long_sums) into
            a partial sums buffer, that buffer then summed (in chunks again where long)."""
            chunks = chunked(inputs, out, step_sizes, longest)
            plain = None
            if longest == LONG_SUM and optimizer is not None:
                plain = lowered_step(inputs, out, step_sizes)
                main = plain[0][0].op
                if chunks is not None and accumulation_chain(main) <= LONG_CHAIN:
                    # the node's own operation: its kernels' blocks keep the chains short
                    chunks = None
                if chunks is None and starved(main, threads):
                    # too few out blocks for the threads: chunks of the sum give them work
                    chunks = chunked(inputs, out, step_sizes, CHUNK)
                elif chunks is None and rows_cut(main, threads):
                    # chunks of whole rows for the threads
                    chunks = chunked(inputs, out, step_sizes, CHUNK, row_chunks(threads))
            if chunks is None:
                add(node, plain or lowered_step(inputs, out, step_sizes), refs, out_ref, frees,
                    part=part)
                return
            partials = len(self.buffer_sizes)
            self.buffer_sizes.append(chunks.partials_size)
            for number, piece in enumerate(chunks.parts):
                last = number == len(chunks.parts) - 1
                add(node, lowered_step(piece.inputs, piece.out, chunks.sizes), refs,
                    ("buf", partials), frees if last else (),
                    piece.input_offsets + (0,) * (2 - len(refs)), piece.out_offset,
                    "the last, shorter chunk" if number else
                    f"{chunks.partials_size} partial sums of chunks")
            reduce(node, [chunks.partials], [("buf", partials)], out, out_ref, chunks.sizes,
                   (partials,), CHUNK, "the sum of the partial sums")

        def emit(node: Node, children: Sequence[Node]) -> None:
            if node is not tree.root:
                ids[id(node)] = len(self.buffer_sizes)
                self.buffer_sizes.append(int(np.prod([sizes[d] for d in node.dims])))
            out, out_ref = tensor_of(node)
            inputs = [tensor_of(c) for c in children]
            refs = [ref for _, ref in inputs]
            reduce(node, [tensor for tensor, _ in inputs], refs, out, out_ref, sizes,
                   tuple(r[1] for r in refs if r[0] == "buf"))

        for node in tree.root.nodes():
            if not node.is_leaf:
                emit(node, node.children)
        if tree.root.is_leaf:                  # a single operand read as it is: copy it
            emit(tree.root, [Node(tree.root.dims, (), tree.root.operand)])
        self.num_leaves = len(tree.leaves)
        self._program: tuple | None = None
        # the steps' indices as groups that run at once (frontend.concurrency; compile)
        self.groups: tuple[tuple[int, ...], ...] = ()
        # run(leaves, out) and run_addresses(leaves, out) of a one-step plan as closures
        # (compile)
        self._direct: Callable | None = None
        self._direct_addresses: Callable | None = None
        # (calls, frame bytes, compiled steps) of array_call, where every step runs on the
        # calling thread (compile)
        self._nests: tuple | None = None
        if compile:
            self.finish()

    def finish(self) -> "Plan":
        """What the constructor does with compile=True: compile where every step's
        operation is defined, and report the plan (verbose mode)."""
        if all(step.lowered.op.is_defined for step in self.steps):
            self.compile()
        plan_built(self)
        return self

    def memory(self) -> PlanMemory:
        """The largest intermediate buffer and the peak of the live ones, walking the steps
        as run_addresses does: a buffer is allocated when first written (a concurrent group
        allocates all its members' buffers before any of them runs) and dropped after the
        step (group) listing it in its frees."""
        groups = self.groups or tuple((index,) for index in range(len(self.steps)))
        sizes = [size * self.itemsize for size in self.buffer_sizes]
        written: set[int] = set()
        live = peak = 0
        for group in groups:
            for index in group:
                target = self.steps[index].sources[2]
                if target[0] == "buf" and target[1] not in written:
                    written.add(target[1])
                    live += sizes[target[1]]
            peak = max(peak, live)
            for index in group:
                live -= sum(sizes[buffer] for buffer in self.steps[index].frees)
        return PlanMemory(max(sizes, default=0), peak)

    def for_threads(self, num_threads: int) -> "Plan":
        """The same tree planned for `num_threads` threads (the cache blocks, the shared
        loops and the sums in chunks follow the count), not compiled: to inspect."""
        return Plan(self.tree, self.leaf_strides, self.out_strides, num_threads=num_threads,
                    optimize_ops=self.optimize_ops, dtype=self.dtype.name, compile=False)

    def compile(self) -> None:
        """Generate every step's code now (einjit.codegen, cached per operation) and the
        program run_addresses executes. Needs every operation defined (einjit.optimize)."""
        from einjit.codegen import compile_operation
        from einjit.codegen.workers import native_pool
        # slots: leaves, the result, ones vectors, a zero for "unused", intermediate buffers
        leaves = self.num_leaves
        out_slot = leaves
        ones_slots = {length: leaves + 1 + i for i, length in enumerate(self.ones)}
        zero_slot = leaves + 1 + len(self.ones)
        first_buffer = zero_slot + 1
        tail = [data_address(self.ones[length]) for length in self.ones] + [0] + \
            [0] * len(self.buffer_sizes)

        def slot(ref: tuple) -> int:
            if not ref:
                return zero_slot
            return {"leaf": lambda: ref[1], "out": lambda: out_slot,
                    "buf": lambda: first_buffer + ref[1],
                    "ones": lambda: ones_slots[ref[1]]}[ref[0]]()

        records = []
        written = set()
        for step in self.steps:
            out_ref = step.sources[2]
            size, allocate = 0, None
            if out_ref[0] == "buf" and out_ref[1] not in written:     # allocated when first written
                size = self.buffer_sizes[out_ref[1]]
                written.add(out_ref[1])
                # aligned_empty's alignment only where a nest may stream into the buffer
                allocate = aligned_empty if size * self.itemsize >= ALIGN_FROM_BYTES \
                    else np.empty
            compiled = compile_operation(step.lowered.op)
            run = compiled.run
            offsets = tuple(offset * self.itemsize for offset in step.offsets)
            if any(offsets):
                run = _offset(run, *offsets)
            records.append(((run, slot(step.sources[0]), slot(step.sources[1]), slot(out_ref),
                             size, allocate, tuple(first_buffer + index for index in step.frees)),
                            compiled, offsets))
        pool = native_pool(self.steps[0].lowered.op.target) if self.steps else None
        eligible = [pool is not None and compiled.function is not None
                    and compiled.worth_a_thread and not compiled.stack_bytes
                    for _, compiled, _ in records]
        self.groups = concurrent_groups(self.steps, [len(c.shares) for _, c, _ in records],
                                        self.num_threads, eligible)
        program = []
        for group in self.groups:
            if len(group) == 1:
                program.append(records[group[0]][0])
                continue
            members = [records[index] for index in group]
            frees = tuple(index for entry, _, _ in members for index in entry[6])
            program.append((_Group(pool, members), _GROUP, 0, 0, 0, None, frees))
        self._program = (tuple(program), tuple(tail))
        self._direct = self._direct_addresses = None
        if len(self.steps) == 1 and not self.buffer_sizes and not any(self.steps[0].offsets):
            # one step from the leaves into the result: no slots, no buffers
            _, in0, in1, _, _, _, _ = program[0]
            self._direct, self._direct_addresses = _one_step(
                compiled, *((index, 0) if index < leaves else (None, tail[index - leaves - 1])
                            for index in (in0, in1)))
        self._nests = None
        if records and all(len(group) == 1 for group in self.groups) and \
                all(compiled.single is not None for _, compiled, _ in records):
            # every step on the calling thread, one after another: what array_call calls
            def source(index: int, offset: int) -> Source:
                if index <= leaves:                   # a leaf, or the result after them
                    return Source("argument", index, offset)
                if index < first_buffer:              # a ones vector, or 0 where unused
                    return Source("address", 0, tail[index - leaves - 1] + offset)
                return Source("frame", 0, frame[index - first_buffer] + offset)
            frame, end = [], 0
            for size in self.buffer_sizes:
                frame.append(end)
                end += -(-size * self.itemsize // FRAME_ALIGNMENT) * FRAME_ALIGNMENT
            self._nests = (tuple(NestCall(compiled.address, compiled.single,
                                          tuple(map(source, entry[1:4], offsets)))
                                 for entry, compiled, offsets in records), end,
                           tuple(compiled for _, compiled, _ in records))

    def array_call(self, layouts: Sequence[ArrayLayout], result: ArrayLayout | None = None
                   ) -> Callable[..., int] | None:
        """A native f(id(leaf 0), ..., id(out)) that checks each leaf is an ndarray of its
        layout in `layouts` (what the caller would check), runs the steps into out's data
        (intermediates on its stack) and returns 0, or returns 1 having run nothing
        (einjit.backends.array_call). out: checked against `result` (the plan's out strides),
        writable and sharing no byte with a leaf; without `result`, an ndarray the caller
        made so, unchecked. None where not offered: a step runs on threads, the
        intermediates outgrow MAX_FRAME_BYTES, or numpy's struct was not probed."""
        if self._nests is None or ARRAY_FIELDS is None or \
                not 0 < len(layouts) == self.num_leaves < MAX_ARGUMENTS:
            return None
        calls, frame, compiled = self._nests
        if frame > MAX_FRAME_BYTES:
            return None
        from einjit.codegen.compile import place_array_call
        call = ArrayCall(ARRAY_FIELDS, tuple(layouts), result, calls, frame)
        return place_array_call(call, compiled[0].target, (compiled, self.ones))

    @property
    def compiled(self) -> bool:
        """Whether run_addresses can execute this plan (every step compiled)."""
        return self._program is not None

    def run_addresses(self, leaves: Sequence[int], out: int) -> None:
        """Execute on addresses, unchecked: leaves[i] is the base of operand i laid out with
        the plan's strides, `out` the root's base. Intermediates are allocated per call (so
        concurrent calls share nothing) and dropped as soon as consumed."""
        direct = self._direct_addresses
        if direct is not None:
            direct(leaves, out)
            return
        program, tail = self._program
        slots = [*leaves, out, *tail]
        held = {}
        dtype = self.dtype
        for run, in0, in1, dst, size, allocate, frees in program:
            if size:
                buffer = allocate(size, dtype)
                held[dst] = buffer
                slots[dst] = data_address(buffer)
            if in0 == _GROUP:
                run(slots, held, dtype)
            else:
                run(slots[in0], slots[in1], slots[dst])
            for index in frees:
                del held[index]

    def run(self, leaves: Sequence[np.ndarray], out: np.ndarray,
            addresses: tuple[Sequence[int], int] | None = None) -> None:
        """Compute into `out` (its data pointer is the root's base) from `leaves` (each one's
        data pointer is its leaf's base; strides are the plan's), all numpy arrays.
        addresses: the leaves' data addresses and out's, where the caller has read them."""
        execute = EXECUTOR
        if execute is None:
            if addresses is not None and self._program is not None:
                self.run_addresses(*addresses)
                return
            direct = self._direct
            if direct is not None:
                direct(leaves, out)
                return
            if self._program is not None:
                self.run_addresses(list(map(data_address, leaves)), data_address(out))
                return
        buffers: list[np.ndarray | None] = [None] * len(self.buffer_sizes)
        for step in self.steps:
            op = step.lowered.op
            arrays = []
            for name, ref, offset in zip(("in0", "in1", "out"), step.sources, step.offsets):
                if not ref:
                    arrays.append(None)
                    continue
                kind = ref[0]
                if kind == "buf":
                    if buffers[ref[1]] is None:
                        buffers[ref[1]] = aligned_empty(self.buffer_sizes[ref[1]], self.dtype)
                    arrays.append(buffers[ref[1]][offset:])
                elif kind == "ones":
                    arrays.append(self.ones[ref[1]])
                else:
                    base = out if kind == "out" else leaves[ref[1]]
                    arrays.append(_flat(base, offset + op.extent(name), self.itemsize,
                                        writeable=kind == "out")[offset:])
            if execute is None:
                op.execute(*arrays)
            else:
                execute(op, *arrays)
            for index in step.frees:
                buffers[index] = None

    def describe(self, ops: Sequence[Any] | None = None) -> str:
        """The tree and each step's operation (`ops`: one per step in their place, e.g. the
        steps' operations made for another target)."""
        sizes = self.tree.sizes
        lines = [f"tree: {self.tree}", f"dtype: {self.dtype}", self.tree.pretty(),
                 f"flops: {self.tree.flops()}", ""]
        for number, step in enumerate(self.steps):
            node = step.node
            target = step.sources[2]
            elements = int(np.prod([sizes[d] for d in node.dims])) if target == ("out",) \
                else self.buffer_sizes[target[1]]
            where = "result" if target == ("out",) else f"intermediate buffer {target[1]}"
            op = step.lowered.op
            # a product of two of the tree's tensors, not a sum against a vector of ones
            flops = 2 * int(np.prod([d.size for d in op.dims])) \
                if len(node.children) == 2 and op.kind == "contraction" and \
                not any(source[:1] == ("ones",) for source in step.sources) else 0
            part = f" ({step.part})" if step.part else ""
            lines.append(f"step {number}: [{','.join(map(str, node.dims))}]{part} -> {where}, "
                         f"{elements} elements ({elements * self.itemsize} bytes), {flops} flops, "
                         f"operands {step.sources[0]} {step.sources[1]}")
            lines.append(str(step.lowered.op if ops is None else ops[number]))
            lines.append("")
        return "\n".join(lines)


def _one_step(compiled: Any, in0: tuple[int | None, int],
              in1: tuple[int | None, int]) -> tuple[Callable, Callable]:
    """run(leaves, out) and run_addresses(leaves, out) of a plan whose one step reads the
    leaves and writes the result, as closures over that step's compiled nest. in0, in1:
    (leaf index, 0) or (None, a fixed address: a ones vector, 0 where unused)."""
    (leaf0, fixed0), (leaf1, fixed1) = in0, in1
    address = data_address
    run = compiled.run
    count = compiled.single
    if leaf0 is not None and leaf1 is not None and count is not None:
        function = compiled.function

        def on_arrays(leaves: Sequence[np.ndarray], out: np.ndarray) -> None:
            function(address(leaves[leaf0]), address(leaves[leaf1]), address(out), 0, count)

        def on_addresses(leaves: Sequence[int], out: int) -> None:
            function(leaves[leaf0], leaves[leaf1], out, 0, count)
        return on_arrays, on_addresses

    def step(leaves: Sequence[int], out: int) -> None:
        run(fixed0 if leaf0 is None else leaves[leaf0],
            fixed1 if leaf1 is None else leaves[leaf1], out)

    def step_on_arrays(leaves: Sequence[np.ndarray], out: np.ndarray) -> None:
        step(tuple(map(address, leaves)), address(out))
    return step_on_arrays, step


_GROUP = -1      # a program entry's in0 where it runs a group of steps at once (_Group)


class _Group:
    """Steps that run at once (frontend.concurrency): their buffers allocated, then every
    share of every step handed out in one native call, the first on the calling thread."""

    def __init__(self, pool: Any, members: Sequence[tuple]):
        """members: (program entry, CompiledOperation, byte offsets of in0, in1, out)."""
        from einjit.codegen.workers import OPERAND_COUNT, Tasks
        self._pool = pool
        self._members = [(entry[1:6], offsets) for entry, _, offsets in members]
        # every share of every member, reading its member's three operands
        self._tasks = Tasks([(compiled.address, OPERAND_COUNT * number, begin, end)
                             for number, (_, compiled, _) in enumerate(members)
                             for begin, end in compiled.shares])

    def __call__(self, slots: list, held: dict, dtype: np.dtype) -> None:
        operands = array("Q")
        for (in0, in1, dst, size, allocate), offsets in self._members:
            if size:
                buffer = allocate(size, dtype)
                held[dst] = buffer
                slots[dst] = data_address(buffer)
            operands.extend(slots[index] + offset
                            for index, offset in zip((in0, in1, dst), offsets))
        self._pool.run_tasks(self._tasks, operands)


def _offset(run: Callable, in0: int, in1: int, out: int) -> Callable:
    """`run` on addresses moved by these byte offsets."""
    return lambda a, b, c: run(a + in0, b + in1, c + out)


def _flat(array: np.ndarray, extent: int, itemsize: int, writeable: bool) -> np.ndarray:
    """The `extent` elements from `array`'s data pointer on, as a contiguous 1-D view."""
    return np.lib.stride_tricks.as_strided(array, shape=(max(extent, 1),), strides=(itemsize,),
                                           writeable=writeable and array.flags.writeable)
