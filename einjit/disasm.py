"""Disassembly of generated code, for inspection and tests (needs the capstone package)."""

from .errors import EinjitError


def _capstone_mode(capstone, isa):
    if isa == "x86_64":
        return capstone.CS_ARCH_X86, capstone.CS_MODE_64
    # capstone 6 renamed ARM64 to AARCH64
    arch = getattr(capstone, "CS_ARCH_AARCH64", None) or capstone.CS_ARCH_ARM64
    return arch, capstone.CS_MODE_ARM


def disassemble(code: bytes, isa: str) -> str:
    """One line per instruction: offset, bytes, mnemonic and operands."""
    try:
        import capstone
    except ImportError as exc:
        raise EinjitError("disassembly needs the capstone package: pip install capstone") from exc
    decoder = capstone.Cs(*_capstone_mode(capstone, isa))
    decoder.skipdata = True  # keep going past anything capstone does not know
    lines = []
    for insn in decoder.disasm(code, 0):
        text = f"{insn.mnemonic} {insn.op_str}".strip()
        lines.append(f"{insn.address:6x}:  {insn.bytes.hex():<22} {text}")
    return "\n".join(lines)
