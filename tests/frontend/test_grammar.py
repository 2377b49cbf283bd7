"""Grammar and parser: both notations, round trips, syntax errors with a caret."""

import numpy as np
import pytest

from einjit.frontend.errors import EinsumSyntaxError, EinsumTypeError, EinsumValueError
from einjit.frontend.parser import ELLIPSIS, BracketNode, Subscripts, from_sublists, parse

COURSE_TREES = [
    "[[8,4],[7,3,8]->[7,3,4]],[[[2,6,7],[1,5,6]->[1,2,5,7]],[0,5]->[0,1,2,7]]->[0,1,2,3,4]",
    "[[[[3,6,8,9]->[8,6,9,3]],[[2,5,7,9]->[7,5,2,9]]->[7,8,5,6,2,3]],[0,4,5,6]->[0,4,7,8,2,3]],"
    "[1,4,7,8]->[0,1,2,3]",
    "[[7,3,8],[8,4]->[7,3,4]],[[0,5],[[5,1,6],[6,2,7]->[5,1,2,7]]->[0,1,2,7]]->[0,1,2,3,4]",
    "[1,4,7,8],[[0,4,5,6],[[2,5,7,9],[3,6,8,9]->[2,5,7,3,6,8]]->[0,4,2,7,3,8]]->[0,1,2,3]",
    "[[2,7,3],[3,8,4]->[2,7,8,4]],[[4,9,0],[[0,5,1],[1,6,2]->[0,5,6,2]]->[4,9,5,6,2]]->[5,6,7,8,9]",
]


def names(labels):
    return "".join(label.name if label.name != ELLIPSIS else "." for label in labels)


@pytest.mark.native
@pytest.mark.parametrize("expression, inputs, output", [
    ("ij,jk->ik", ["ij", "jk"], "ik"),
    ("ij,jk", ["ij", "jk"], None),
    ("...ij,...jk->...ik", [".ij", ".jk"], ".ik"),
    (" i j , j k -> i k ", ["ij", "jk"], "ik"),
    ("", [""], None),
    (",", ["", ""], None),
    ("->", [""], ""),
    ("AbC,Cd->Ad", ["AbC", "Cd"], "Ad"),
    ("ii->i", ["ii"], "i"),
    ("...", ["."], None),
])
def test_numpy_subscripts(expression, inputs, output):
    parsed = parse(expression)
    assert isinstance(parsed, Subscripts)
    assert [names(t) for t in parsed.inputs] == inputs
    assert (None if parsed.output is None else names(parsed.output)) == output


def test_label_columns_point_into_the_expression():
    parsed = parse("ab, c->ca")
    for term in parsed.inputs + (parsed.output,):
        for label in term:
            assert parsed.expression[label.column] == label.name


def _text(node: BracketNode) -> str:
    dims = "[" + ",".join(map(str, node.dims)) + "]"
    if not node.children:
        return dims
    return "[" + ",".join(_text(c) for c in node.children) + "->" + dims + "]"


@pytest.mark.parametrize("expression", COURSE_TREES + ["[0,1]", "[3,6,8,9]->[8,6,9,3]",
                                                       "[]->[]", "[0],[0]->[]"])
def test_bracket_round_trip(expression):
    parsed = parse(expression)
    assert isinstance(parsed, BracketNode)
    text = _text(parsed)
    assert (text[1:-1] if parsed.children else text) == expression


def test_bracket_spaces_and_multi_digit_ids():
    parsed = parse("[ 10 , 2 ] , [2,11] -> [10,11]")
    assert parsed.dims == (10, 11)
    assert [c.dims for c in parsed.children] == [(10, 2), (2, 11)]


@pytest.mark.native
@pytest.mark.parametrize("expression, column, words", [
    ("i$->i", 1, "'$'"),
    ("ij->i->j", 5, "'->'"),
    ("i.j", 1, "'.'"),
    ("ij-", 2, "'-'"),
    ("ij>k", 2, "'>'"),
    ("[[1],[2]->[3]", 13, "ends early"),
    ("[1,,2]->[1]", 3, "','"),
    ("ij,[1]", 3, "'['"),
    ("[1,2]->", 7, "ends early"),
    ("[a]", 1, "'a'"),
    ("[1],[2],[3]->[1]", 7, "','"),
    ("1", 0, "'1'"),
])
def test_syntax_errors_point_at_the_column(expression, column, words):
    with pytest.raises(ValueError) as info:
        parse(expression)
    assert isinstance(info.value, EinsumSyntaxError)
    message = str(info.value)
    assert words in message
    lines = message.splitlines()
    assert lines[-2] == "  " + expression
    assert lines[-1] == "  " + " " * column + "^"


def test_non_string_expression_is_a_type_error():
    with pytest.raises(TypeError):
        parse(b"ij")


def test_sublists_map_like_numpy():
    a, b = np.ones(2), np.ones(3)
    expression, operands = from_sublists([a, [0, Ellipsis], b, [1, 27], [0, 27]])
    assert expression == "A...,Bb->Ab"
    assert operands[0] is a and operands[1] is b
    assert from_sublists([a, [25, 26]])[0] == "Za"


@pytest.mark.parametrize("sublist, error", [([0.5], EinsumTypeError), (["a"], EinsumTypeError),
                                            ([52], EinsumValueError), ([-1], EinsumValueError),
                                            ([True], EinsumTypeError), (5, EinsumTypeError)])
def test_bad_sublists(sublist, error):
    with pytest.raises(error):
        from_sublists([np.ones(3), sublist])


def _parse_in_fresh_process(cache_dir, forbid_building=False):
    """parse() of a course tree and a numpy expression in a new interpreter whose
    EINJIT_CACHE_DIR is cache_dir; with forbid_building, lark cannot read a grammar (so it
    must load its parser from the cache). Returns what the two parses print."""
    import os
    import subprocess
    import sys
    program = "\n".join([
        "import lark.lark",
        "def refuse(*args, **kwargs):",
        "    raise AssertionError('the parser was built, not loaded from the cache')",
        "if " + str(forbid_building) + ":",
        "    lark.lark.load_grammar = refuse",
        "from einjit.frontend.parser import parse",
        f"print(repr(parse({COURSE_TREES[0]!r})))",
        "print(repr(parse('...ij,jk->...ik')))",
    ])
    environment = dict(os.environ, EINJIT_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", program], env=environment,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_the_built_parser_is_cached_and_later_processes_load_it(tmp_path):
    """The first process builds the parser and writes it to EINJIT_CACHE_DIR (made private
    to the user); the next loads it without building (lark cannot read a grammar there) and
    parses the same; a corrupt cache file is rebuilt and rewritten, not fatal."""
    cache_dir = tmp_path / "made" / "here"
    built = _parse_in_fresh_process(cache_dir)
    files = list(cache_dir.iterdir())
    assert len(files) == 1 and files[0].stat().st_size > 1000
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    assert _parse_in_fresh_process(cache_dir, forbid_building=True) == built
    files[0].write_bytes(b"not a parser\n")
    assert _parse_in_fresh_process(cache_dir) == built
    assert _parse_in_fresh_process(cache_dir, forbid_building=True) == built


def test_no_parser_cache_where_none_is_asked_for_or_possible(tmp_path, monkeypatch):
    """EINJIT_CACHE_DIR set empty: no cache; a directory that cannot be made (a file lies
    where it would go): no cache, and parsing works all the same."""
    from einjit.frontend import grammar
    monkeypatch.setenv("EINJIT_CACHE_DIR", "")
    assert grammar.parser_cache_file() is False
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("EINJIT_CACHE_DIR", str(blocker / "einjit"))
    assert grammar.parser_cache_file() is False
    assert _parse_in_fresh_process(blocker / "einjit") == _parse_in_fresh_process(tmp_path)
    monkeypatch.delenv("EINJIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert grammar.parser_cache_file().startswith(str(tmp_path / "xdg" / "einjit") + "/")
