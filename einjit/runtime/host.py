"""Which instruction set the running interpreter executes."""

import platform

from ..errors import KernelParameterError

ISAS = ("aarch64", "x86_64")

_MACHINE_TO_ISA = {
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "x86_64": "x86_64",
    "amd64": "x86_64",
}


def host_isa():
    """The host's ISA name ("aarch64" or "x86_64"), or None if einjit cannot run code here."""
    return _MACHINE_TO_ISA.get(platform.machine().lower())


def resolve_isa(isa):
    """Map the user's `isa` argument (None = the host's) to a supported ISA name."""
    if isa is None:
        isa = host_isa()
        if isa is None:
            raise KernelParameterError(
                f"isa=None but the host machine {platform.machine()!r} is not one einjit "
                f"generates code for; pass isa= one of {ISAS} to generate code only")
        return isa
    if isa not in ISAS:
        raise KernelParameterError(f"isa={isa!r} is not supported; expected one of {ISAS}")
    return isa
