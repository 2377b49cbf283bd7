"""Loads grammar/einsum.lark (installed as the package data einjit.grammar, or read from the
source checkout) and parses expressions into lark trees; lark's errors become
EinsumSyntaxError with a caret under the offending column.

Building the LALR parser takes lark 30-45 ms, most of a fresh process's first einsum, so
lark keeps the built parser in a file of the user's cache directory (parser_cache_file) and
later processes load it (about 7 ms); lark uses it only where the hash of the grammar, the
options, its own version and Python's it holds matches, and rebuilds it otherwise.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import sys
import threading
from pathlib import Path

import lark

from einjit.frontend.errors import EinsumSyntaxError, point_at

GRAMMAR_FILE = "einsum.lark"
CACHE_ENV = "EINJIT_CACHE_DIR"
_lock = threading.Lock()


def grammar_text() -> str:
    """The grammar's source: the installed package data first, the checkout's grammar/ else."""
    try:
        return importlib.resources.files("einjit.grammar").joinpath(GRAMMAR_FILE).read_text()
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        # running from a source checkout where einjit.grammar is not mapped
        return (Path(__file__).resolve().parents[2] / "grammar" / GRAMMAR_FILE).read_text()


def cache_directory() -> Path | None:
    """EINJIT_CACHE_DIR, else $XDG_CACHE_HOME/einjit, else ~/.cache/einjit; None where
    EINJIT_CACHE_DIR is set empty (no cache)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "einjit"


def parser_cache_file() -> str | bool:
    """The file lark keeps the built parser in (see the module doc), its directory made
    private to the user if missing; False (build in every process) where there is no cache
    directory or it cannot be made."""
    directory = cache_directory()
    if directory is None:
        return False
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    python = "".join(map(str, sys.version_info[:2]))
    return str(directory / f"einsum-parser-lark{lark.__version__}-py{python}.pickle")


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    return lark.Lark(grammar_text(), parser="lalr", maybe_placeholders=False,
                     cache=parser_cache_file())


_EXPECTED = {
    "LETTER": "a letter", "ELLIPSIS": "'...'", "ARROW": "'->'", "COMMA": "','",
    "DIM": "a dimension id", "LSQB": "'['", "RSQB": "']'", "$END": "the end of the expression",
}


def _describe(expected) -> str:
    names = sorted({_EXPECTED.get(name, name) for name in expected})
    return " or ".join(names) if names else "nothing"


def parse_tree(expression: str) -> lark.Tree:
    """The lark parse tree of `expression`; EinsumSyntaxError (a ValueError) when it does not
    parse, naming the bad character or token and pointing at it."""
    if not isinstance(expression, str):
        raise TypeError(f"an einsum expression must be a str, got {type(expression).__name__}")
    try:
        with _lock:  # one LALR parser object shared by all threads
            return _parser().parse(expression)
    except lark.exceptions.UnexpectedCharacters as error:
        column = error.pos_in_stream
        char = expression[column]
        hint = ("subscripts must be letters" if char not in ".-"
                else "'.' only as part of an ellipsis '...', '-' only in '->'")
        raise EinsumSyntaxError(point_at(
            expression, column,
            f"invalid character {char!r} in einsum expression ({hint})")) from None
    except lark.exceptions.UnexpectedToken as error:
        token = error.token
        column = len(expression) if token.type == "$END" or token.start_pos is None \
            else token.start_pos
        found = ("einsum expression ends early" if token.type == "$END"
                 else f"unexpected {str(token)!r} in einsum expression")
        raise EinsumSyntaxError(point_at(
            expression, column, f"{found}, expected {_describe(error.expected)}")) from None
    except lark.exceptions.UnexpectedEOF as error:
        raise EinsumSyntaxError(point_at(
            expression, len(expression),
            f"einsum expression ends early, expected {_describe(error.expected)}")) from None
