"""Rich displays for Jupyter: what `_repr_svg_` / `_repr_html_` of einjit's objects return.

- tree_svg(tree): an EinsumTree drawn as a tree in hand-written SVG, root on top. Each node
  shows its dims (letters when the tree has them) and sizes; a leaf its operand; a node of a
  compiled plan also its primitive, its flops and an estimated GFLOPS.
- operation_html(op): a TensorOperation as an HTML table (one row per dim: type, exec type,
  size, strides) with its primitives and the kernel calls of its loop nest.
- expression_html(expr): a ContractExpression's plan: dims legend, the annotated tree, then
  each step's operation.
- kernel_html(kernel) / code_html(code, isa, title): generated code as a disassembly listing.
- profile_html(profile): a plan's parallel profile for a thread count, one row per step.

Only the standard library: the SVG is laid out here (leaves left to right, parents centred
over their children), so no drawing package or display is needed. Every text is escaped.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from einjit.frontend.tree import EinsumTree, Node
    from einjit.ir.tensor_operation import TensorOperation
    from einjit.kernel import Kernel

# text metrics of the SVG's monospace font (px): wide enough for any common monospace face
CHAR_WIDTH = 7.4
LINE_HEIGHT = 15
FONT = "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px"
PAD_X, PAD_Y, GAP_X, GAP_Y = 8, 6, 14, 34
EXEC_COLOURS = {"shared": "#fde2c8", "seq": "#dbe9f7", "prim": "#d8f0d2", "undefined": "#eeeeee"}
#: the model behind the GFLOPS estimate a plan's nodes show: FP32 FMA peak per core and
#: vector lanes of each target (a Zen 5 core at ~4 GHz; a Neoverse V2 core, 4 FMA pipes at
#: ~3 GHz). Only a guide: scripts/bench measures.
PEAK_GFLOPS_PER_CORE = {"avx512": 256.0, "avx2": 128.0, "neon": 96.0}
LANES = {"avx512": 16, "avx2": 8, "neon": 4}


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def dim_name(tree: "EinsumTree", dim: int) -> str:
    """A dim's name in a tree: its letter when the tree came from subscripts, else its id."""
    letters = tree.letters
    return letters[dim] if letters is not None and dim < len(letters) else str(dim)


def node_label(tree: "EinsumTree", node: "Node") -> list[str]:
    """The lines a node shows: its dims, their sizes, and for a leaf its operand."""
    names = [dim_name(tree, d) for d in node.dims]
    lines = [("[" + ",".join(names) + "]") if names else "[] (scalar)",
             "×".join(str(tree.sizes[d]) for d in node.dims) or "1"]
    if node.is_leaf:
        lines.append(f"operand {node.operand}")
    return lines


def _layout(root: "Node") -> dict[int, tuple[float, int]]:
    """x (in leaf slots) and depth of every node: leaves on consecutive slots left to right,
    a parent centred over its children."""
    place: dict[int, tuple[float, int]] = {}
    next_slot = [0.0]

    def visit(node: "Node", depth: int) -> float:
        if node.is_leaf:
            x = next_slot[0]
            next_slot[0] += 1
        else:
            xs = [visit(child, depth + 1) for child in node.children]
            x = sum(xs) / len(xs)
        place[id(node)] = (x, depth)
        return x
    visit(root, 0)
    return place


def tree_svg(tree: "EinsumTree",
             annotations: Mapping[int, Sequence[str]] | None = None) -> str:
    """The tree as an SVG document. `annotations` maps id(node) to extra lines shown in that
    node's box (a plan's primitive, flops, estimate). Each node is a <g class="node"> whose
    <title> is the node's bracket notation."""
    annotations = annotations or {}
    nodes = list(tree.root.nodes())
    labels = {id(n): node_label(tree, n) + list(annotations.get(id(n), ())) for n in nodes}
    width = max(len(line) for lines in labels.values() for line in lines) * CHAR_WIDTH \
        + 2 * PAD_X
    heights = {key: len(lines) * LINE_HEIGHT + 2 * PAD_Y for key, lines in labels.items()}
    place = _layout(tree.root)
    depth_count = max(depth for _, depth in place.values()) + 1
    row_height = [0.0] * depth_count
    for node in nodes:
        x, depth = place[id(node)]
        row_height[depth] = max(row_height[depth], heights[id(node)])
    row_top = [0.0] * depth_count
    for depth in range(1, depth_count):
        row_top[depth] = row_top[depth - 1] + row_height[depth - 1] + GAP_Y
    slots = max(x for x, _ in place.values()) + 1
    total_width = slots * (width + GAP_X) - GAP_X + 2 * GAP_X
    total_height = row_top[-1] + row_height[-1] + 2 * GAP_X

    def box(node: "Node") -> tuple[float, float, float]:
        x, depth = place[id(node)]
        left = GAP_X + x * (width + GAP_X)
        return left, GAP_X + row_top[depth], heights[id(node)]

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_width:.0f}" '
             f'height="{total_height:.0f}" viewBox="0 0 {total_width:.0f} {total_height:.0f}" '
             f'class="einjit-tree">',
             f'<title>{_esc(tree)}</title>']
    for node in nodes:                      # edges first, so boxes are drawn over them
        left, top, height = box(node)
        for child in node.children:
            c_left, c_top, _ = box(child)
            parts.append(f'<line x1="{left + width / 2:.1f}" y1="{top + height:.1f}" '
                         f'x2="{c_left + width / 2:.1f}" y2="{c_top:.1f}" '
                         f'stroke="#777" stroke-width="1.2"/>')
    for node in nodes:
        left, top, height = box(node)
        kind = "leaf" if node.is_leaf else ("contraction" if len(node.children) == 2
                                            else "permutation")
        fill = {"leaf": "#f4f4f4", "contraction": "#dbe9f7", "permutation": "#fdf0c8"}[kind]
        parts.append(f'<g class="node {kind}"><title>{_esc(node.text())}</title>')
        parts.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{width:.1f}" '
                     f'height="{height:.1f}" rx="5" fill="{fill}" stroke="#555"/>')
        for number, line in enumerate(labels[id(node)]):
            weight = ";font-weight:bold" if number == 0 else ""
            parts.append(f'<text x="{left + width / 2:.1f}" '
                         f'y="{top + PAD_Y + (number + 0.8) * LINE_HEIGHT:.1f}" '
                         f'text-anchor="middle" style="{FONT}{weight}">{_esc(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)


# -- TensorOperation --------------------------------------------------------------------------
HEADER = ("dim", "type", "exec", "size", "stride in0", "stride in1", "stride out")


def operation_html(op: "TensorOperation", title: str | None = None) -> str:
    """The operation as an HTML table: one row per dim (outermost first), coloured by exec
    type, under a caption with dtype, target and primitives; its kernel calls below."""
    threads = "default" if op.num_threads is None else str(op.num_threads)
    caption = title or f"TensorOperation {op.dtype} on {op.target.name}, threads: {threads}"
    rows = []
    for index, dim in enumerate(op.dims):
        colour = EXEC_COLOURS.get(dim.exec_type, "#ffffff")
        cells = (index, dim.type, dim.exec_type, dim.size, dim.stride_in0, dim.stride_in1,
                 dim.stride_out)
        rows.append(f'<tr class="dim" style="background:{colour}">' + "".join(
            f'<td style="text-align:{"left" if c in (1, 2) else "right"};padding:1px 8px">'
            f'{_esc(v)}</td>' for c, v in enumerate(cells)) + "</tr>")
    if op.kernel_calls:
        calls = "".join(f"<li><code>{_esc(call.describe())}</code></li>"
                        for call in op.kernel_calls)
        kernels = f'<div>kernels:<ul style="margin:2px 0">{calls}</ul></div>'
    else:
        kernels = ("<div>kernels: not decided (some dims are <code>undefined</code>; run "
                   "<code>einjit.optimize</code>)</div>")
    return (f'<div class="einjit-op">'
            f'<table style="border-collapse:collapse;font-family:monospace">'
            f'<caption style="text-align:left;caption-side:top">{_esc(caption)}<br>'
            f'primitives: first touch <b>{_esc(op.prim_first_touch)}</b> | main '
            f'<b>{_esc(op.prim_main)}</b> | last touch <b>{_esc(op.prim_last_touch)}</b>'
            f'</caption><thead><tr>'
            + "".join(f'<th style="padding:1px 8px;border-bottom:1px solid #888">{h}</th>'
                      for h in HEADER)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>" + kernels + "</div>")


# -- a compiled expression's plan -------------------------------------------------------------
def plan_of(expr: Any) -> Any:
    """The frontend Plan behind a ContractExpression (einjit.frontend.plan.Plan; a sliced
    expression's first slice)."""
    return expr._prepared.shown


def node_flops(tree: "EinsumTree", node: "Node") -> int:
    """2 × the product of all sizes a two-child node iterates over; 0 for other nodes."""
    if len(node.children) != 2:
        return 0
    dims = set(node.dims).union(*(c.dims for c in node.children))
    return 2 * math.prod(tree.sizes[d] for d in dims)


def estimated_gflops(op: "TensorOperation") -> float | None:
    """A rough GFLOPS estimate of a contraction step (None for other steps): the peak of its
    target's cores (PEAK_GFLOPS_PER_CORE) times the vector lanes the BRGEMM's m fills, times
    k·br / (k·br + 16) (loading and storing C is paid once per block), times the threads
    its shared loops keep busy."""
    main = [c for c in op.kernel_calls if c.role == "main"]
    if op.kind != "contraction" or not main:
        return None
    call = main[0]
    unit = "neon" if op.isa == "aarch64" else op.target.variant
    peak = PEAK_GFLOPS_PER_CORE.get(unit, PEAK_GFLOPS_PER_CORE["avx2"])
    lanes = LANES.get(unit, 8)
    filled = call.m / (math.ceil(call.m / lanes) * lanes)
    depth = call.k * call.br_size
    shared = math.prod(d.size for d in op.dims if d.exec_type == "shared")
    from einjit.runtime.threads import default_threads
    threads = max(1, min(op.num_threads or default_threads(), shared))
    return peak * filled * depth / (depth + 16) * threads


def flops_text(flops: float) -> str:
    """12345678 -> "12.3 MFLOP"."""
    for scale, unit in ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP")):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.0f} FLOP"


def bytes_text(count: float) -> str:
    """12345678 -> "12.3 MB"."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count:.0f} B"


def profile_html(profile: Any) -> str:
    """A parallel profile (einjit.frontend.profile.ParallelProfile) as an HTML table."""
    head = ("step", "node", "kind", "work", "tasks", "threads", "busiest/mean", "efficiency",
            "bytes")
    rows = []
    for step in profile.steps:
        work = flops_text(step.work) if step.kind == "contraction" else f"{step.work} elements"
        cells = (step.step, step.node, step.kind, work, step.tasks, step.threads,
                 f"{step.balance:.2f}", f"{100 * step.efficiency:.1f}%", bytes_text(step.bytes))
        rows.append("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>")
    return (f'<div class="einjit-profile"><div><b>{_esc(profile.title)}</b> on '
            f'{profile.num_threads} threads: predicted efficiency '
            f'<b>{100 * profile.efficiency:.1f}%</b></div><table><tr>'
            + "".join(f"<th>{_esc(h)}</th>" for h in head) + "</tr>" + "".join(rows)
            + "</table>"
            + (f"<div>run at once: {_esc(profile.together)}</div>" if profile.together else "")
            + "</div>")


def step_annotations(tree: "EinsumTree", plan: Any) -> dict[int, list[str]]:
    """id(node) -> the lines a plan adds to that node: primitive, flops, estimated GFLOPS."""
    notes: dict[int, list[str]] = {}
    for number, step in enumerate(plan.steps):
        op = step.lowered.op
        main = [c for c in op.kernel_calls if c.role == "main"]
        prim = main[0].describe().split(" on ")[0].removeprefix("main: ") if main \
            else op.prim_main
        lines = [f"step {number}: {prim}"]
        flops = node_flops(tree, step.node)
        if flops:
            estimate = estimated_gflops(op)
            lines.append(flops_text(flops) + (f", ~{estimate:.0f} GFLOPS est."
                                              if estimate else ""))
        notes[id(step.node)] = lines
    return notes


def expression_svg(expr: Any) -> str:
    """The tree of a compiled expression, each node annotated with what it became."""
    return tree_svg(expr.tree, step_annotations(expr.tree, plan_of(expr)))


def expression_html(expr: Any) -> str:
    """A ContractExpression's plan: the dims legend, the annotated tree, each step's op."""
    tree = expr.tree
    plan = plan_of(expr)
    legend = ", ".join(f"{_esc(dim_name(tree, d))}={size}" for d, size in enumerate(tree.sizes))
    parts = [f'<div class="einjit-plan"><div><b>{_esc(expr.subscripts)}</b> on shapes '
             f'{_esc(list(expr.shapes))}: {flops_text(tree.flops())}</div>',
             f"<div>dims: {legend}</div>",
             f"<div>tree: <code>{_esc(tree)}</code></div>",
             expression_svg(expr)]
    slicing = getattr(expr, "slicing", None)
    if slicing is not None:
        parts.insert(2, f'<pre class="einjit-slicing">{_esc(slicing.text())}\n'
                        f'each slice (the first shown below)</pre>')
    for number, step in enumerate(plan.steps):
        where = "result" if step.sources[2] == ("out",) else \
            f"intermediate buffer {step.sources[2][1]}"
        title = (f"step {number}: [{','.join(dim_name(tree, d) for d in step.node.dims)}] -> "
                 f"{where}; on {step.lowered.op.target.name}")
        parts.append(operation_html(step.lowered.op, title))
    parts.append("</div>")
    return "\n".join(parts)


# -- machine code -----------------------------------------------------------------------------
def code_html(code: bytes, isa: str, title: str) -> str:
    """A disassembly listing (capstone) in a scrollable block; a hex dump without capstone."""
    from einjit.disasm import disassemble
    from einjit.errors import EinjitError
    try:
        listing = disassemble(code, isa)
    except EinjitError as exc:     # no capstone: the bytes, and why
        listing = f"({exc})\n" + "\n".join(code[i:i + 16].hex(" ")
                                           for i in range(0, len(code), 16))
    return (f'<div class="einjit-code"><div><b>{_esc(title)}</b></div>'
            f'<pre style="max-height:30em;overflow:auto;font-size:11px;margin:2px 0">'
            f"{_esc(listing)}</pre></div>")


def kernel_html(kernel: "Kernel") -> str:
    return code_html(kernel.code, kernel.isa,
                     f"{kernel.name} on {kernel.target.name}: {len(kernel.code)} bytes")
