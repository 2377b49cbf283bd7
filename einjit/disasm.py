"""Disassembly of generated code, for inspection and tests (needs the capstone package).

Lines look like objdump's: offset, encoding, mnemonic and operands. An x86-64 instruction's
encoding is its bytes in memory order; an A64 instruction's is its 32-bit word (`d65f03c0`
for ret), as the ARM ARM and objdump write it, not its little-endian bytes (`c0035fd6`).
"""

from __future__ import annotations

from .errors import EinjitError


def _capstone_mode(capstone, isa: str) -> tuple[int, int]:
    if isa == "x86_64":
        return capstone.CS_ARCH_X86, capstone.CS_MODE_64
    # capstone 6 renamed ARM64 to AARCH64
    arch = getattr(capstone, "CS_ARCH_AARCH64", None) or capstone.CS_ARCH_ARM64
    return arch, capstone.CS_MODE_ARM


def encoding_text(raw: bytes, isa: str) -> str:
    """The encoding column of one instruction: A64 words (little-endian in memory) as 32-bit
    hex numbers, anything else as its bytes in order."""
    if isa == "aarch64" and len(raw) % 4 == 0:
        return " ".join(f"{int.from_bytes(raw[i:i + 4], 'little'):08x}"
                        for i in range(0, len(raw), 4))
    return raw.hex()


def disassemble(code: bytes, isa: str) -> str:
    """One line per instruction: offset, encoding, mnemonic and operands."""
    try:
        import capstone
    except ImportError as exc:
        raise EinjitError("disassembly needs the capstone package: pip install capstone") from exc
    decoder = capstone.Cs(*_capstone_mode(capstone, isa))
    decoder.skipdata = True  # keep going past anything capstone does not know
    lines = []
    for insn in decoder.disasm(code, 0):
        text = f"{insn.mnemonic} {insn.op_str}".strip()
        lines.append(f"{insn.address:6x}:  {encoding_text(bytes(insn.bytes), isa):<22} {text}")
    return "\n".join(lines)
