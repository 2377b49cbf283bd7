"""Which instruction set the running interpreter executes."""

import platform

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
