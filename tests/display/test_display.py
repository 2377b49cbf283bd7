"""Rich displays: the SVG of a tree names every node, the HTML of an operation lists every
dim with its fields, a plan shows every step, a kernel its disassembly; all parse as XML/HTML
and escape what they print."""

import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest

import einjit
from einjit import display

SVG = "{http://www.w3.org/2000/svg}"
COURSE_TT = [100, 72, 128, 128, 3, 71, 305, 32, 3]
TREES = [
    ("[[8,4],[7,3,8]->[7,3,4]],[[[2,6,7],[1,5,6]->[1,2,5,7]],[0,5]->[0,1,2,7]]->[0,1,2,3,4]",
     COURSE_TT),
    ("[1,4,7,8],[[0,4,5,6],[[2,5,7,9],[3,6,8,9]->[2,5,7,3,6,8]]->[0,4,2,7,3,8]]->[0,1,2,3]",
     [60, 60, 20, 20, 8, 8, 8, 8, 8, 8]),
    ("[0,1]->[1,0]", [3, 5]),
    ("[0,1],[1,2]->[0,2]", [4, 5, 6]),
]


def _nodes(svg_text):
    root = ET.fromstring(svg_text)       # well-formed XML, or this raises
    assert root.tag == SVG + "svg"
    groups = [g for g in root.iter(SVG + "g") if "node" in g.get("class", "").split()]
    return root, {g.find(SVG + "title").text: g for g in groups}


def _texts(group):
    return [t.text for t in group.iter(SVG + "text")]


@pytest.mark.parametrize("expression, sizes", TREES)
def test_tree_svg_names_every_node_with_dims_and_sizes(expression, sizes):
    tree = einjit.EinsumTree(expression, sizes)
    svg = tree._repr_svg_()
    root, groups = _nodes(svg)
    nodes = list(tree.root.nodes())
    assert len(groups) == len(nodes)
    for node in nodes:
        texts = _texts(groups[node.text()])
        assert texts[0] == "[" + ",".join(map(str, node.dims)) + "]"
        assert texts[1] == "×".join(str(sizes[d]) for d in node.dims)
        assert (f"operand {node.operand}" in texts) == node.is_leaf
    edges = sum(len(n.children) for n in nodes)
    assert len(list(root.iter(SVG + "line"))) == edges
    # boxes do not overlap: every pair of rectangles is apart in x or in y
    boxes = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
             for r in root.iter(SVG + "rect")]
    for i, (x, y, w, h) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1:]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y


def test_tree_svg_uses_the_letters_of_subscripts():
    tree = einjit.EinsumTree.from_subscripts("af,fbg,gch->abch", (5, 6), (6, 7, 8), (8, 9, 10))
    _, groups = _nodes(tree._repr_svg_())
    firsts = sorted(_texts(g)[0] for g in groups.values())
    assert "[a,f]" in firsts and "[f,b,g]" in firsts and "[g,c,h]" in firsts
    assert "[a,b,c,h]" in firsts


def test_plan_svg_annotates_every_step_with_its_primitive_and_flops():
    tree = einjit.EinsumTree(*TREES[0])
    expr = einjit.contract_expression(tree)
    plan = display.plan_of(expr)
    _, groups = _nodes(display.expression_svg(expr))
    for number, step in enumerate(plan.steps):
        texts = _texts(groups[step.node.text()])
        main = [c for c in step.lowered.op.kernel_calls if c.role == "main"][0]
        assert any(t.startswith(f"step {number}: brgemm") and f"{main.m}x{main.n}" in t
                   for t in texts), texts
        flops = display.node_flops(expr.tree, step.node)
        assert any(display.flops_text(flops) in t and "GFLOPS est." in t for t in texts)
    assert sum(display.node_flops(expr.tree, n) for n in expr.tree.root.nodes()) == \
        expr.tree.flops()


class _Table(HTMLParser):
    """Rows of <tr class="dim"> as lists of cell texts, and the whole text."""

    def __init__(self):
        super().__init__()
        self.rows, self.text, self._row, self._cell = [], [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr" and ("class", "dim") in attrs:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell += data


def _parse(html_text):
    table = _Table()
    table.feed(html_text)
    table.close()
    return table


OPS = [
    einjit.TensorOperation("float32", "zero", "brgemm", "relu", ("m", "n", "k", "m", "n", "k"),
                           ("seq", "seq", "prim", "prim", "prim", "prim"),
                           (32, 32, 8, 32, 32, 32), (8192, 0, 1024, 1, 0, 32),
                           (0, 8192, 1024, 0, 32, 1), (32768, 1024, 0, 1, 32, 0)),
    einjit.TensorOperation("float32", "none", "identity", "none", ("c",) * 4, None,
                           (3, 4, 7, 5), (140, 35, 5, 1), (0,) * 4, (140, 5, 20, 1)),
    einjit.TensorOperation("float32", "none", "add", "none", ("c", "c"), ("seq", "prim"),
                           (7, 9), (9, 1), (9, 1), (9, 1), isa="aarch64"),
]


@pytest.mark.parametrize("op", OPS, ids=["brgemm", "undefined", "aarch64 add"])
def test_operation_html_lists_every_dim(op):
    table = _parse(op._repr_html_())
    assert len(table.rows) == len(op.dims)
    for index, (row, dim) in enumerate(zip(table.rows, op.dims)):
        assert row == [str(index), dim.type, dim.exec_type, str(dim.size), str(dim.stride_in0),
                       str(dim.stride_in1), str(dim.stride_out)]
    text = "".join(table.text)
    assert op.prim_main in text and op.target.name in text
    for call in op.kernel_calls:
        assert call.describe() in text
    assert ("not decided" in text) == (not op.kernel_calls)


def test_optimized_operation_shows_what_the_passes_chose():
    op = einjit.optimize(OPS[0].replace(exec_types=None), num_threads=2)
    table = _parse(op._repr_html_())
    assert [row[2] for row in table.rows] == list(op.exec_types)
    assert "shared" in op.exec_types


@pytest.mark.native
def test_expression_html_has_the_tree_and_every_step():
    rng = np.random.default_rng(0)
    shapes = [(6, 5, 7), (7, 4), (4, 3)]
    expr = einjit.contract_expression("abc,cd,de->abe", *shapes)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    np.testing.assert_allclose(expr(*arrays), np.einsum("abc,cd,de->abe", *arrays),
                               rtol=1e-5, atol=1e-5)
    text = expr._repr_html_()
    body = text[text.index("<svg"):text.index("</svg>") + 6]
    _, groups = _nodes(body)
    assert len(groups) == len(list(expr.tree.root.nodes()))
    table = _parse(text)
    steps = display.plan_of(expr).steps
    assert len(table.rows) == sum(len(s.lowered.op.dims) for s in steps)
    flat = "".join(table.text)
    for number in range(len(steps)):
        assert f"step {number}:" in flat
    assert "a=6, b=5, c=7, d=4, e=3" in flat


@pytest.mark.native
@pytest.mark.parametrize("isa", ["aarch64", "x86_64:avx2"])
def test_kernel_html_is_its_disassembly(isa):
    pytest.importorskip("capstone")
    kernel = einjit.brgemm(16, 6, 4, isa=isa)
    text = kernel._repr_html_()
    table = _parse(text)
    flat = "".join(table.text)
    assert kernel.name in flat and f"{len(kernel.code)} bytes" in flat
    assert kernel.disassemble() in flat       # the listing, unescaped by the parser
    assert "ret" in flat


def test_text_is_escaped():
    svg = display.tree_svg(einjit.EinsumTree("[0,1],[1,2]->[0,2]", [2, 3, 4]),
                           {id(einjit.EinsumTree("[0,1]", [2, 3]).root): ["<&>"]})
    ET.fromstring(svg)
    html_text = display.code_html(b"\xc3", "x86_64", "<script>")
    assert "<script>" not in html_text and "&lt;script&gt;" in html_text


def test_text_repr_and_str_stay_text():
    tree = einjit.EinsumTree(*TREES[3])
    assert str(tree) == TREES[3][0] and "<" not in tree.pretty()
    assert str(OPS[0]).startswith("TensorOperation float32") and "<" not in str(OPS[0])
    assert repr(OPS[0]).startswith("TensorOperation(")
