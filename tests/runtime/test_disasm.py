"""The disassembly listing: A64 encodings as instruction words (as objdump and the ARM ARM
write them), x86-64 encodings as bytes in memory order; either way the listing accounts for
every byte of the code."""

import pytest

import einjit

pytest.importorskip("capstone")


def _listing(kernel):
    """(offset, encoding text, instruction text) per line."""
    rows = []
    for line in kernel.disassemble().splitlines():
        offset, rest = line.split(":", 1)
        encoding, text = rest.strip().split(None, 1)
        rows.append((int(offset, 16), encoding, text))
    return rows


def test_a64_lines_show_the_instruction_word():
    kernel = einjit.brgemm(3, 2, 5, isa="aarch64")
    rows = _listing(kernel)
    assert rows[-1][1:] == ("d65f03c0", "ret")
    for offset, word, _ in rows:
        assert len(word) == 8
        assert int(word, 16).to_bytes(4, "little") == kernel.code[offset:offset + 4]
    assert len(rows) * 4 == len(kernel.code)


def test_x86_lines_show_the_bytes_in_memory_order():
    kernel = einjit.brgemm(3, 2, 5, isa="x86_64")
    rows = _listing(kernel)
    assert rows[-1][1:] == ("c3", "ret")
    assert b"".join(bytes.fromhex(encoding) for _, encoding, _ in rows) == kernel.code
