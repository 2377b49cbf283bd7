"""Slicing: a contraction whose intermediates exceed a memory limit, computed slice by slice.

A sliced dim of size s is cut into pieces of `chunk` indices (the last one maybe shorter).
Every slice is the same contraction tree (the order opt_einsum chose for the full sizes, the
same layouts) with the sliced dims at their piece's size, reading each operand from the
piece's offset through the operand's own strides. A slice over output dims only writes its
own part of the result; slices over a contracted dim are summed into it (the first slice of
each part of the result writes it, the others go through an accumulator and are added).

slice_plan chooses which dims, in how many pieces (cotengra's idea, done greedily): each
round halves the chunk of the one dim whose slicing lowers the intermediate memory above the
limit most per extra flop (a dim contracted inside the big intermediates usually; an output
dim present in every contraction costs no extra flops), until the sliced plan's peak, its
accumulator and, where slices run at once, every thread's share of them fit the limit; then
dims cut early are cut less where the later ones made that needless. The estimate is the
tree's node sizes (and the partial sums of the nodes the whole plan sums in chunks); the
Plans built for the chosen slice shapes, compiled, then give the exact peak, and the search
goes on where they exceed it.

SlicedPlan runs them: one Plan per distinct slice shape (at most two sizes per sliced dim).
Slices are independent: with at least as many slices as threads and memory for that many at
once, each thread contracts its own slices (slice i on thread i mod T, with plans made for one
thread), each summing into its own partial result in slice order, the partials then summed in
thread order: the same bits on every run. Otherwise the slices run one after another, each
with the plan's threads."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from einjit.frontend.errors import EinsumTypeError, EinsumValueError
from einjit.frontend.long_sums import CHUNK, PARTIALS_LIMIT
from einjit.frontend.plan import Plan
from einjit.frontend.rewrite import dense_strides
from einjit.frontend.tree import EinsumTree
from einjit.runtime.arrays import aligned_empty

#: slices at most: beyond, a limit counts as out of reach (each slice costs a few plan calls)
MAX_SLICES = 1 << 16
#: what one more slice costs, in flops: its plan's calls from Python, its operand views
SLICE_COST_FLOPS = 1 << 17
#: slices run a thread each when that costs at most this factor of the serial slicing's flops
PARALLEL_FLOPS_SLACK = 1.1
#: rounds of the search against the exact peak of the plans it built
_ROUNDS = 8


def check_memory_limit(value: Any) -> Any:
    """memory_limit= as einsum takes it: None, "max_input", or a number of bytes >= 0 (an
    integer, or a float with an integer value such as 2e9). Raises naming a bad value."""
    if value is None or (isinstance(value, str) and value == "max_input"):
        return value
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise EinsumTypeError(f"memory_limit must be a number of bytes or 'max_input', "
                              f"got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        if not isinstance(value, (float, np.floating)) or not float(value).is_integer():
            raise EinsumTypeError(f"memory_limit must be a whole number of bytes or "
                                  f"'max_input', got {value!r}") from None
        number = int(value)
    if number < 0:
        raise EinsumValueError(f"memory_limit must be >= 0 bytes, got {value!r}")
    return number


def limit_bytes(memory_limit: Any, shapes: Sequence[Sequence[int]], itemsize: int) -> int:
    """The limit in bytes: as given, or for "max_input" the largest operand's bytes in the
    computing dtype."""
    if memory_limit == "max_input":
        return max((math.prod(shape) for shape in shapes), default=0) * itemsize
    return int(memory_limit)


@dataclass(frozen=True)
class Slice:
    """One slice: `ranges` maps each sliced dim id to its [start, stop); `operands` indexes
    each operand (one slice object per axis), `output` the result (one per axis); `summed`:
    the slice's result is added into that part of the result (a contracted dim is sliced),
    else it is that part."""
    number: int
    ranges: Mapping[int, tuple[int, int]]
    operands: tuple[tuple[slice, ...], ...]
    output: tuple[slice, ...]
    summed: bool


@dataclass(frozen=True)
class Slicing:
    """How a contraction is sliced (ContractExpression.slicing).

    dims: the sliced dim ids (output dims first), `letters` their labels; chunks: the
    indices in each dim's pieces (the last piece of a dim may be shorter); count: slices in
    all; workers: slices contracted at once (one per thread; 1: one after another);
    peak_bytes: the sliced run's intermediates at most (its plans' peak, the accumulator and,
    with workers > 1, each thread's share), unsliced_peak_bytes the whole plan's; flops and
    unsliced_flops: multiply-adds counted as 2, summed over all slices; overhead: their
    ratio (1.0: none). slice(number) gives one slice's operand and output index ranges, so
    that slices can also run elsewhere: result[s.output] = (or +=, where s.summed)
    einsum(subscripts, *(a[i] for a, i in zip(operands, s.operands)))."""
    dims: tuple[int, ...]
    letters: tuple[str, ...]
    sizes: tuple[int, ...]
    chunks: tuple[int, ...]
    count: int
    workers: int
    peak_bytes: int
    unsliced_peak_bytes: int
    limit_bytes: int
    flops: int
    unsliced_flops: int
    summed: bool
    operand_axes: tuple[tuple[int, ...], ...]
    operand_shapes: tuple[tuple[int, ...], ...]
    output_axes: tuple[int, ...]

    @property
    def pieces(self) -> tuple[int, ...]:
        """Pieces each sliced dim is cut into."""
        return tuple(-(-size // chunk) for size, chunk in zip(self.sizes, self.chunks))

    @property
    def overhead(self) -> float:
        return self.flops / self.unsliced_flops if self.unsliced_flops else 1.0

    def slice(self, number: int) -> Slice:
        """Slice `number` (0 <= number < count; the last dim's pieces vary fastest)."""
        if not 0 <= number < self.count:
            raise EinsumValueError(f"slice {number} of {self.count}: expected 0 <= number < "
                                   f"{self.count}")
        ranges = {}
        rest = number
        for dim, size, chunk, pieces in reversed(list(zip(self.dims, self.sizes, self.chunks,
                                                           self.pieces))):
            rest, piece = divmod(rest, pieces)
            ranges[dim] = (piece * chunk, min(size, (piece + 1) * chunk))
        ranges = {dim: ranges[dim] for dim in self.dims}
        operands = tuple(
            tuple(slice(*ranges[dim]) if dim in ranges and extent > 1 else slice(None)
                  for dim, extent in zip(axes, shape))
            for axes, shape in zip(self.operand_axes, self.operand_shapes))
        output = tuple(slice(*ranges[dim]) if dim in ranges else slice(None)
                       for dim in self.output_axes)
        return Slice(number, ranges, operands, output, self.summed)

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        """A paragraph for str(expr) and verbose mode."""
        cuts = []
        for letter, size, chunk, pieces in zip(self.letters, self.sizes, self.chunks,
                                               self.pieces):
            last = size - (pieces - 1) * chunk
            cuts.append(f"{letter} ({size}) in {pieces} pieces of {chunk}"
                        + (f" (the last {last})" if last != chunk else ""))
        how = "summed into the result" if self.summed else "each writing its part of the result"
        at_once = f"{self.workers} at once, one per thread" if self.workers > 1 \
            else "one after another"
        return (f"sliced: {', '.join(cuts)}; {self.count} slices, {at_once}, {how}\n"
                f"intermediates: peak {self.peak_bytes} bytes (unsliced {self.unsliced_peak_bytes}"
                f" bytes), memory_limit {self.limit_bytes} bytes\n"
                f"flops: {self.flops} (unsliced {self.unsliced_flops}, overhead "
                f"{self.overhead:.3f}x)")


class _Estimate:
    """A slicing's memory and flops from the tree alone: each intermediate node one dense
    buffer, allocated when computed and dropped once its parent is; a node the whole plan
    sums in chunks (`chunked`: ids of such nodes) also holds its partial sums meanwhile."""

    def __init__(self, tree: EinsumTree, itemsize: int, chunked: frozenset = frozenset()):
        self.chunked = chunked
        self.sizes = tree.sizes
        self.itemsize = itemsize
        self.root = tree.root
        self.nodes = [node for node in tree.root.nodes() if not node.is_leaf]
        self.output = set(tree.root.dims)
        self.products = [set(node.dims).union(*(c.dims for c in node.children))
                         for node in self.nodes if len(node.children) == 2]
        used = set().union(*(node.dims for node in tree.root.nodes()))
        self.candidates = sorted(d for d in used if self.sizes[d] > 1)

    def pieces(self, chunks: Mapping[int, int]) -> dict[int, int]:
        return {d: -(-self.sizes[d] // c) for d, c in chunks.items()}

    def count(self, chunks: Mapping[int, int]) -> int:
        return math.prod(self.pieces(chunks).values())

    def flops(self, chunks: Mapping[int, int]) -> int:
        """All slices' flops: a contraction's terms over all slices are its full size times
        the pieces of each sliced dim it does not iterate over."""
        pieces = self.pieces(chunks)
        return sum(2 * math.prod(self.sizes[d] for d in dims)
                   * math.prod(n for d, n in pieces.items() if d not in dims)
                   for dims in self.products)

    def elements(self, dims: Sequence[int], chunks: Mapping[int, int]) -> int:
        return math.prod(chunks.get(d, self.sizes[d]) for d in dims)

    def extra(self, chunks: Mapping[int, int], workers: int) -> int:
        """Bytes besides a slice's plan, per worker: the accumulator of a slice's part of
        the result (summed slices), and each thread's partial result (summed, workers > 1)."""
        if all(d in self.output for d in chunks):
            return 0
        part = self.elements(self.root.dims, chunks)
        whole = self.elements(self.root.dims, {}) if workers > 1 else 0
        return (part + whole) * self.itemsize

    def partials(self, node: Any, chunks: Mapping[int, int]) -> int:
        """Bytes of a node's partial sums (frontend.long_sums: one per CHUNK terms of each
        output element, PARTIALS_LIMIT elements at most), where the whole plan has them."""
        if id(node) not in self.chunked:
            return 0
        reduced = set().union(*(c.dims for c in node.children)) - set(node.dims)
        terms = self.elements(reduced, chunks)
        out = self.elements(node.dims, chunks)
        if terms <= CHUNK or 2 * out > PARTIALS_LIMIT:
            return 0
        return min(PARTIALS_LIMIT, out * -(-terms // CHUNK)) * self.itemsize

    def live(self, chunks: Mapping[int, int]) -> list[int]:
        """Bytes of intermediates held while each node is computed."""
        held = 0
        result = []
        for node in self.nodes:
            if node is not self.root:
                held += self.elements(node.dims, chunks) * self.itemsize
            result.append(held + self.partials(node, chunks))
            held -= sum(self.elements(c.dims, chunks) * self.itemsize
                        for c in node.children if not c.is_leaf)
        return result

    def totals(self, chunks: Mapping[int, int], workers: int) -> list[int]:
        extra = self.extra(chunks, workers)
        return [workers * (live + extra) for live in self.live(chunks)] or [workers * extra]


def _search(estimate: _Estimate, chunks: dict[int, int], target: int, workers: int
            ) -> tuple[dict[int, int], bool]:
    """Halve chunks greedily from `chunks` until the estimate fits `target` bytes (and, with
    workers > 1, there are at least that many slices). Returns the chunks and whether they
    fit; where no move helps any more, the chunks reached."""
    sizes = estimate.sizes
    while True:
        totals = estimate.totals(chunks, workers)
        excess = sum(max(0, t - target) for t in totals)
        count = estimate.count(chunks)
        if excess == 0 and count >= workers:
            return chunks, True
        flops = estimate.flops(chunks)
        best, best_key = None, None
        for dim in estimate.candidates:
            chunk = chunks.get(dim, sizes[dim])
            if chunk == 1:
                continue
            pieces = -(-sizes[dim] // -(-chunk // 2))
            trial = {**chunks, dim: -(-sizes[dim] // pieces)}
            more = estimate.count(trial)
            if more > MAX_SLICES:
                continue
            gain = excess - sum(max(0, t - target) for t in estimate.totals(trial, workers))
            if excess and gain <= 0:
                continue
            cost = max(0, estimate.flops(trial) - flops) + SLICE_COST_FLOPS * (more - count)
            # memory first; with memory enough (only more slices wanted), the cheapest
            key = (gain / (cost + 1), gain, -dim) if excess else (-cost, -dim)
            if best_key is None or key > best_key:
                best, best_key = trial, key
        if best is None:
            return chunks, False
        chunks = best


def _relax(estimate: _Estimate, chunks: dict[int, int], target: int, workers: int
           ) -> dict[int, int]:
    """Undo what the greedy order made needless: a dim sliced early may be cut in fewer
    pieces (or none) once later dims are sliced. Each move keeps the fit and lowers the
    flops (or the slices, at equal flops)."""
    def fits(trial: dict[int, int]) -> bool:
        return max(estimate.totals(trial, workers)) <= target and \
            estimate.count(trial) >= workers

    sizes = estimate.sizes
    better = True
    while better:
        better = False
        cost = (estimate.flops(chunks), estimate.count(chunks))
        for dim in sorted(chunks):
            pieces = -(-sizes[dim] // chunks[dim])
            for fewer in (1, -(-pieces // 2)):
                trial = {d: c for d, c in chunks.items() if d != dim}
                if fewer > 1:
                    trial[dim] = -(-sizes[dim] // fewer)
                if fewer < pieces and fits(trial) and \
                        (estimate.flops(trial), estimate.count(trial)) < cost:
                    chunks, better = trial, True
                    break
            if better:
                break
    return chunks


def _slice_sizes(sizes: Sequence[int], dims: Sequence[int], key: Sequence[int]) -> list[int]:
    shaped = list(sizes)
    for dim, size in zip(dims, key):
        shaped[dim] = size
    return shaped


def _shape_keys(sizes: Sequence[int], dims: Sequence[int], chunks: Sequence[int]) -> list:
    """Every distinct slice shape: per sliced dim its chunk and its last piece's size."""
    keys = [()]
    for dim, chunk in zip(dims, chunks):
        last = sizes[dim] - (-(-sizes[dim] // chunk) - 1) * chunk
        keys = [key + (size,) for key in keys for size in dict.fromkeys((chunk, last))]
    return keys


class _Layouts:
    """The Plans of one slicing's shapes: written with the result's strides (`result`) or
    into a dense accumulator (`dense`), for `threads` threads."""

    def __init__(self, whole: Plan, dims: tuple[int, ...], chunks: tuple[int, ...],
                 threads: int, summed: bool, workers: int):
        tree = whole.tree
        self.dims = dims
        self.keys = _shape_keys(tree.sizes, dims, chunks)
        # the accumulator's dims: the result's, outer to inner as the result's strides go
        self.order = tuple(sorted(tree.root.dims, key=lambda d: -whole.out_strides.get(d, 0)))
        self.result: dict[tuple, Plan] = {}
        self.dense: dict[tuple, Plan] = {}
        for key in self.keys:
            sized = EinsumTree(tree.root, _slice_sizes(tree.sizes, dims, key),
                               letters=tree.letters)
            options = dict(num_threads=threads, optimize_ops=whole.optimize_ops,
                           dtype=whole.dtype.name, compile=False)
            if workers == 1 or not summed:
                self.result[key] = Plan(sized, whole.leaf_strides, whole.out_strides, **options)
            if summed:
                self.dense[key] = Plan(sized, whole.leaf_strides,
                                       dense_strides(self.order, sized.sizes), **options)

    def plans(self) -> list[Plan]:
        return [*self.result.values(), *self.dense.values()]

    def peak(self) -> int:
        return max((plan.memory().peak_bytes for plan in self.plans()), default=0)

    def finish(self) -> None:
        for plan in self.plans():
            plan.finish()


def _fit(whole: Plan, estimate: _Estimate, limit: int, workers: int, threads: int
         ) -> tuple[dict[int, int], _Layouts | None, int]:
    """Chunks, their plans and their exact peak (with the extra bytes and per-worker
    shares) for `workers` slices at once; the plans are None where none fits `limit`."""
    chunks: dict[int, int] = {}
    target = limit
    total = 0
    for _ in range(_ROUNDS):
        chunks, fits = _search(estimate, chunks, target, workers)
        if fits:
            chunks = _relax(estimate, chunks, target, workers)
        dims = tuple(sorted(chunks, key=lambda d: (d not in estimate.output, d)))
        layouts = _Layouts(whole, dims, tuple(chunks[d] for d in dims), threads,
                           not all(d in estimate.output for d in dims), workers)
        total = workers * (layouts.peak() + estimate.extra(chunks, workers))
        if total <= limit and fits:
            # compiled, steps that run at once hold their buffers together: measured again
            layouts.finish()
            total = workers * (layouts.peak() + estimate.extra(chunks, workers))
            if total <= limit:
                return chunks, layouts, total
        if not fits:
            return chunks, None, total
        # the plans hold more than the tree's nodes: aim lower by what they add
        target = max(0, target - (total - limit))
    return chunks, None, total


def slice_plan(whole: Plan, limit: int, operand_axes: Sequence[Sequence[int]],
               operand_shapes: Sequence[Sequence[int]], output_axes: Sequence[int]
               ) -> "SlicedPlan | None":
    """The sliced form of `whole` (built, compiled or not: its memory is read) whose
    intermediates fit `limit` bytes, None where the whole plan's own peak fits; raises
    EinsumValueError naming the limit and the smallest peak reached where none fits.
    operand_axes: per operand the dim id of each of its axes; output_axes the result's."""
    unsliced_peak = whole.memory().peak_bytes
    if unsliced_peak <= limit:
        return None
    chunked = frozenset(id(step.node) for step in whole.steps
                        if "partial sums of chunks" in step.part)
    estimate = _Estimate(whole.tree, whole.itemsize, chunked)
    threads = whole.num_threads
    chunks, layouts, total = _fit(whole, estimate, limit, 1, threads)
    if layouts is None:
        raise EinsumValueError(
            f"memory_limit={limit} bytes is below what the contraction's intermediates need "
            f"even sliced: the smallest peak reached is {total} bytes (unsliced "
            f"{unsliced_peak} bytes, with at most {MAX_SLICES} slices)")
    workers = 1
    if threads > 1:
        # a slice per thread, each planned for one thread, where memory allows that many
        more, parallel, parallel_total = _fit(whole, estimate, limit, threads, 1)
        if parallel is not None and estimate.flops(more) <= \
                PARALLEL_FLOPS_SLACK * estimate.flops(chunks):
            chunks, layouts, total, workers = more, parallel, parallel_total, threads
    dims = tuple(sorted(chunks, key=lambda d: (d not in estimate.output, d)))
    tree = whole.tree
    letters = tuple(tree.letters[d] if tree.letters else str(d) for d in dims)
    slicing = Slicing(
        dims, letters, tuple(tree.sizes[d] for d in dims), tuple(chunks[d] for d in dims),
        estimate.count(chunks), workers, total, unsliced_peak, limit, estimate.flops(chunks),
        tree.flops(), not all(d in estimate.output for d in dims),
        tuple(map(tuple, operand_axes)), tuple(map(tuple, operand_shapes)), tuple(output_axes))
    return SlicedPlan(slicing, layouts, whole)


class SlicedPlan:
    """Runs a Slicing with its plans; `run(leaves, out)` as Plan.run (numpy arrays laid out as
    the whole plan's operands and result)."""

    def __init__(self, slicing: Slicing, layouts: _Layouts, whole: Plan):
        self.slicing = slicing
        self.whole = whole
        self.layouts = layouts
        self.dtype = whole.dtype
        # a plan to show: the first slice's
        self.shown = (layouts.result or layouts.dense)[layouts.keys[0]]
        self._slices = self._prepared_slices()

    def array_call(self, layouts, result=None) -> None:
        """None: slices run several plans, each on its own views."""
        return None

    def _prepared_slices(self) -> list[tuple]:
        """Per slice: (operand indices, output index, shape key, first of its result part,
        the accumulator's shape and byte strides): made with the plan, not on each call."""
        slicing = self.slicing
        item = self.dtype.itemsize
        seen = set()
        slices = []
        for number in range(slicing.count):
            piece = slicing.slice(number)
            key = tuple(stop - start for start, stop in piece.ranges.values())
            region = tuple((r.start, r.stop) for r in piece.output)
            sizes = _slice_sizes(self.whole.tree.sizes, slicing.dims, key)
            strides = dense_strides(self.layouts.order, sizes)
            shape = tuple(sizes[d] for d in slicing.output_axes)
            byte_strides = tuple(item * strides.get(d, 0) if extent > 1 else 0
                                 for d, extent in zip(slicing.output_axes, shape))
            # Ellipsis: a view even of a 0-d operand or result (a[()] would be a scalar)
            operands = tuple(index + (Ellipsis,) for index in piece.operands)
            slices.append((operands, piece.output + (Ellipsis,), key,
                           region not in seen, shape, byte_strides))
            seen.add(region)
        return slices

    def run(self, leaves: Sequence[np.ndarray], out: np.ndarray,
            addresses: Any = None) -> None:
        """Compute into `out` slice by slice (addresses: unused, Plan.run's signature)."""
        if self.slicing.workers > 1:
            self._run_at_once(leaves, out)
        else:
            self._run_serially(leaves, out)

    def _scratch(self) -> np.ndarray:
        """An accumulator for the largest slice's part of the result."""
        size = max(math.prod(plan.tree.sizes[d] for d in plan.tree.root.dims)
                   for plan in self.layouts.dense.values())
        return aligned_empty(size, self.dtype)

    def _run_serially(self, leaves: Sequence[np.ndarray], out: np.ndarray) -> None:
        result, dense = self.layouts.result, self.layouts.dense
        scratch = None
        for operands, output, key, first, shape, strides in self._slices:
            views = [leaf[index] for leaf, index in zip(leaves, operands)]
            region = out[output]
            if first:
                result[key].run(views, region)
                continue
            if scratch is None:
                scratch = self._scratch()
            part = np.ndarray(shape, self.dtype, buffer=scratch, strides=strides)
            dense[key].run(views, part)
            np.add(region, part, out=region)

    def _run_at_once(self, leaves: Sequence[np.ndarray], out: np.ndarray) -> None:
        from einjit.runtime.threads import pool
        workers = self.slicing.workers
        slices = self._slices
        summed = self.slicing.summed
        result, dense = self.layouts.result, self.layouts.dense
        partials = [np.zeros(out.shape, self.dtype) for _ in range(workers)] if summed else []

        def work(worker: int) -> None:
            scratch = self._scratch() if summed else None
            for number in range(worker, len(slices), workers):
                operands, output, key, _, shape, strides = slices[number]
                views = [leaf[index] for leaf, index in zip(leaves, operands)]
                if not summed:
                    result[key].run(views, out[output])
                    continue
                part = np.ndarray(shape, self.dtype, buffer=scratch, strides=strides)
                dense[key].run(views, part)
                region = partials[worker][output]
                np.add(region, part, out=region)

        pool.run(work, [(worker,) for worker in range(workers)])
        if summed:
            np.copyto(out, partials[0])
            for partial in partials[1:]:
                np.add(out, partial, out=out)

