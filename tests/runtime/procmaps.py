"""What the process's own /proc files say about its mappings and memory, and tiny
hand-encoded functions to place in executable memory."""

import ctypes

import einjit
from einjit.backends import backend

HOST = einjit.host_isa()
# what code placed to run here is flushed with (None where instruction fetch is coherent)
HOST_FLUSH = backend(HOST).flush_icache


def maps() -> list[tuple[int, int, str]]:
    """(start, end, permissions) of every mapping of this process."""
    rows = []
    with open("/proc/self/maps") as lines:
        for line in lines:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            rows.append((start, end, perms))
    return rows


def mapping_count() -> int:
    with open("/proc/self/maps") as lines:
        return sum(1 for _ in lines)


def permissions(address: int) -> str | None:
    """The permission string of the mapping holding `address`, or None if unmapped."""
    for start, end, perms in maps():
        if start <= address < end:
            return perms
    return None


def mappings_of(addresses) -> set[tuple[int, int] | None]:
    """The mappings holding `addresses`, from one read of the maps: a neighbouring mapping
    placed between two reads (another thread, or qemu's own) can merge with the one looked at
    and change its end."""
    rows = maps()
    found = set()
    for address in addresses:
        found.add(next(((s, e) for s, e, _ in rows if s <= address < e), None))
    return found


def writable_and_executable() -> list[tuple[int, int, str]]:
    return [row for row in maps() if "w" in row[2] and "x" in row[2]]


def rss_bytes() -> int:
    """Resident bytes of the mappings this process sees: the Rss lines of /proc/self/smaps
    over the ranges of /proc/self/maps. Natively that is the process's RSS. Under qemu-user
    (the aarch64 lane) maps lists only the guest's mappings while smaps and statm are the
    emulator's own, so this leaves out qemu's translation cache, which grows with every
    new piece of code it translates whether that code is still mapped or not."""
    visible = {(start, end) for start, end, _ in maps()}
    total = 0
    counted = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                counted = (start, end) in visible
            elif head == "Rss:" and counted:
                total += int(line.split()[1]) * 1024
    return total


def return_constant(value: int) -> bytes:
    """Code of `int f(void) { return value; }` for the host, 0 <= value < 2**16."""
    if HOST == "x86_64":
        return b"\xb8" + value.to_bytes(4, "little") + b"\xc3"          # mov eax, imm32; ret
    # movz w0, #value ; ret
    return b"".join(w.to_bytes(4, "little") for w in (0x52800000 | value << 5, 0xD65F03C0))


def call_int(address: int) -> int:
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)()
