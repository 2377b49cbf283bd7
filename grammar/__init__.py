"""The einsum grammar (einsum.lark) as package data: installed as einjit.grammar from the
repository's top-level grammar/ directory (see pyproject.toml and einjit/frontend/grammar.py)."""
