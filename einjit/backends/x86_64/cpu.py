"""Host x86-64 feature detection, the choice of code variant ("avx512" or "avx2") and the
core's microarchitecture facts for the block-shape cost model (`microarch`)."""

from __future__ import annotations

import ctypes
import functools
import os

from einjit.backends import GENERIC, Microarch
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.encode import R8, RAX, RBX, RCX, RDI, RDX, RSI, Mem
from einjit.errors import KernelParameterError, UnsupportedCpuError
from einjit.runtime.host import host_isa
from einjit.runtime.memory import ExecutableMemory

FEATURES = ("avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq")
AVX2_PATH = ("avx2", "fma")
AVX512_PATH = ("avx512f", "avx512vl", "avx512bw", "avx512dq")
VARIANT_ENV = "EINJIT_X86_VARIANT"
VARIANTS = {"avx2": AVX2_PATH, "avx512": AVX512_PATH}
MICROARCH_ENV = "EINJIT_X86_MICROARCH"

# Known cores (their measured blocking rules: tuning.CORE_RULES). Zen 3: one ymm store a cycle
# and a microcoded vmaskmovps store (measured); Zen 4 runs a zmm FMA/load/store as two 256-bit
# halves, Zen 5 at full width (AMD's optimization guides). Zen 4/5 masked AVX stores are taken
# as slow as Zen 3's (not measured). L1D: 32 KiB 8-way on Zen 3/4, 48 KiB 12-way on Zen 5
# (64 sets each); L2 512 KiB on Zen 3, 1 MiB on Zen 4/5.
# Intel server cores (Intel's optimization reference manual): two 512-bit FMA pipes (one on
# some Skylake-SP parts, which CPUID does not tell apart), ports 0 and 5, which 512-bit
# vblendmps and vpermps issue to as well (uops.info), masked stores at full speed; L1D
# 32 KiB 8-way and L2 1 MiB on Skylake-SP / Cascade Lake, 48 KiB 12-way and 1.25 MiB on Ice
# Lake-SP, 48 KiB 12-way and 2 MiB on Sapphire / Emerald / Granite Rapids; their L3 a mesh
# away (far_llc: C prefetched a block ahead, B beyond L2 blocked; measured on Sapphire
# Rapids, taken for the others); their full-width zmm FMAs want a large contraction's k
# chunks a third shorter (k_chunk_l1_parts: measured on Sapphire Rapids, taken for the others).
MICROARCHS = {
    "zen3": Microarch("zen3", full_rate_bits=256, masked_store_cycles=12.0,
                      l2_bytes=512 << 10),
    "zen4": Microarch("zen4", full_rate_bits=256, masked_store_cycles=12.0),
    "zen5": Microarch("zen5", full_rate_bits=512, masked_store_cycles=12.0, l1_ways=12),
    "skylake-sp": Microarch("skylake-sp", fma_shuffle_bits=512, far_llc=True,
                            k_chunk_l1_parts=3),
    "icelake-sp": Microarch("icelake-sp", fma_shuffle_bits=512, l1_ways=12,
                            l2_bytes=1280 << 10, far_llc=True, k_chunk_l1_parts=3),
    "sapphirerapids": Microarch("sapphirerapids", fma_shuffle_bits=512, l1_ways=12,
                                l2_bytes=2 << 20, far_llc=True, k_chunk_l1_parts=3),
    "generic": GENERIC,
}
# Intel family 6 model -> core (Emerald and Granite Rapids as Sapphire Rapids: the same
# cache sizes and pipes)
INTEL_MODELS = {0x55: "skylake-sp", 0x6A: "icelake-sp", 0x6C: "icelake-sp",
                0x8F: "sapphirerapids", 0xCF: "sapphirerapids", 0xAD: "sapphirerapids",
                0xAE: "sapphirerapids"}
# A hypervisor may report a model the table does not know for a server core (a KVM guest of
# a Sapphire Rapids host seen as model 0xA7, a client core's number, with the host's caches
# and AMX): AMX tiles, which only Sapphire Rapids and later Xeons have, tell that core.
AMX_CORE = "sapphirerapids"
# AMD family -> ((first model, last model), core): Zen 3 and Zen 4 share family 0x19
AMD_MODELS = {
    0x19: (((0x00, 0x0F), "zen3"), ((0x20, 0x2F), "zen3"), ((0x40, 0x5F), "zen3"),
           ((0x10, 0x1F), "zen4"), ((0x60, 0x7F), "zen4"), ((0xA0, 0xAF), "zen4")),
    0x1A: (((0x00, 0xFF), "zen5"),),
}


@functools.cache
def features() -> frozenset[str]:
    """The FEATURES the host CPU has and the OS has enabled (empty on a non-x86-64 host)."""
    if host_isa() != "x86_64":
        return frozenset()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return features_from_cpuinfo(cpuinfo.read())
    except OSError:  # not Linux: ask the CPU
        return features_from_cpuid()


def features_from_cpuinfo(text: str) -> frozenset[str]:
    """FEATURES named on the first `flags` line of /proc/cpuinfo (Linux lists only enabled ones)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split()) & frozenset(FEATURES)
    return frozenset()


def _cpuid_code() -> bytes:
    """cpuid(leaf=rdi, subleaf=rsi, out=rdx): out[0..3] := eax, ebx, ecx, edx (as uint64)."""
    out = R8
    return b"".join((
        enc.push(RBX),                       # cpuid clobbers rbx, which is callee-saved
        enc.mov_rr(out, RDX),
        enc.mov_rr(RAX, RDI),
        enc.mov_rr(RCX, RSI),
        b"\x0f\xa2",                            # cpuid
        enc.mov_mr(Mem(out), RAX),
        enc.mov_mr(Mem(out, disp=8), RBX),
        enc.mov_mr(Mem(out, disp=16), RCX),
        enc.mov_mr(Mem(out, disp=24), RDX),
        enc.pop(RBX),
        enc.ret(),
    ))


def _xgetbv_code() -> bytes:
    """xgetbv(index=rdi) -> edx:eax as one uint64."""
    return b"".join((
        enc.mov_rr(RCX, RDI),
        b"\x0f\x01\xd0",                        # xgetbv
        enc.shl_ri(RDX, 32),
        enc.or_rr(RAX, RDX),
        enc.ret(),
    ))


def _bit(value: int, n: int) -> bool:
    return bool(value >> n & 1)


def _cpuid():
    """cpuid(leaf, subleaf=0) -> (eax, ebx, ecx, edx), run by JIT'd code."""
    memory = ExecutableMemory(_cpuid_code())
    function = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64,
                                ctypes.POINTER(ctypes.c_uint64))(memory.address)

    def cpuid(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        out = (ctypes.c_uint64 * 4)()
        function(leaf, subleaf, out)
        return tuple(out)
    cpuid.memory = memory               # the code lives as long as the function
    return cpuid


def features_from_cpuid() -> frozenset[str]:
    """FEATURES reported by cpuid whose register state the OS enables (XCR0 via xgetbv)."""
    cpuid = _cpuid()
    max_leaf = cpuid(0)[0]
    _, _, ecx1, _ = cpuid(1)
    if not (_bit(ecx1, 27) and _bit(ecx1, 28)):  # no OSXSAVE or no AVX: no ymm state at all
        return frozenset()
    xgetbv_memory = ExecutableMemory(_xgetbv_code())
    xcr0 = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(xgetbv_memory.address)(0)
    ymm_enabled = (xcr0 & 0x06) == 0x06          # SSE and AVX state
    zmm_enabled = ymm_enabled and (xcr0 & 0xE0) == 0xE0  # opmask, ZMM_Hi256, Hi16_ZMM state
    ebx7 = cpuid(7)[1] if max_leaf >= 7 else 0
    found = set()
    if ymm_enabled:
        found |= {name for name, present in (("fma", _bit(ecx1, 12)), ("avx2", _bit(ebx7, 5)))
                  if present}
    if zmm_enabled:
        found |= {name for name, bit in (("avx512f", 16), ("avx512dq", 17), ("avx512bw", 30),
                                         ("avx512vl", 31)) if _bit(ebx7, bit)}
    return frozenset(found)


def core_name(vendor: str, family: int, model: int, amx: bool = False) -> str:
    """The MICROARCHS key of a CPU identified by cpuid (vendor string, display family and
    model, whether it has AMX tiles); "generic" for every core not in the tables."""
    if vendor == "GenuineIntel":
        if family != 0x06:
            return "generic"
        return INTEL_MODELS.get(model, AMX_CORE if amx else "generic")
    if vendor != "AuthenticAMD":
        return "generic"
    return next((name for (low, high), name in AMD_MODELS.get(family, ())
                 if low <= model <= high), "generic")


def identity_from_cpuinfo(text: str) -> tuple[str, int, int, bool] | None:
    """(vendor, family, model, AMX tiles) of the first processor in /proc/cpuinfo, or None."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("vendor_id", "cpu family", "model", "flags") and key not in fields:
            fields[key] = value.strip()
    try:
        return (fields["vendor_id"], int(fields["cpu family"]), int(fields["model"]),
                "amx_tile" in fields.get("flags", "").split())
    except (KeyError, ValueError):
        return None


def identity_from_cpuid() -> tuple[str, int, int, bool]:
    """(vendor, display family, display model, AMX tiles) from cpuid leaves 0, 1 and 7."""
    cpuid = _cpuid()
    max_leaf, ebx, ecx, edx = cpuid(0)
    vendor = b"".join(r.to_bytes(4, "little") for r in (ebx, edx, ecx)).decode("ascii", "replace")
    eax = cpuid(1)[0]
    family, model = eax >> 8 & 0xF, eax >> 4 & 0xF
    if family == 0xF:
        family += eax >> 20 & 0xFF
    if family >= 0x6:
        model |= (eax >> 16 & 0xF) << 4
    amx = max_leaf >= 7 and _bit(cpuid(7)[3], 24)      # AMX-TILE
    return vendor, family, model, amx


@functools.cache
def host_core() -> str:
    """The MICROARCHS key of the host core ("generic" off x86-64 or if unknown)."""
    if host_isa() != "x86_64":
        return "generic"
    identity = None
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            identity = identity_from_cpuinfo(cpuinfo.read())
    except OSError:
        pass
    if identity is None:
        identity = identity_from_cpuid()
    return core_name(*identity)


def microarch() -> Microarch:
    """The facts of the host core, or of the core EINJIT_X86_MICROARCH names (a MICROARCHS
    key): code generated to run elsewhere, or a test of another core's choices."""
    forced = os.environ.get(MICROARCH_ENV, "")
    if forced:
        if forced not in MICROARCHS:
            raise KernelParameterError(f"{MICROARCH_ENV}={forced!r}: expected one of "
                                       f"{sorted(MICROARCHS)}")
        return MICROARCHS[forced]
    return MICROARCHS[host_core()]


def _missing(path: tuple[str, ...], have: frozenset[str]) -> list[str]:
    return [name for name in path if name not in have]


def variant() -> str:
    """"avx512" if the host has AVX-512 F/VL/BW/DQ, else "avx2" if it has AVX2+FMA.

    EINJIT_X86_VARIANT=avx2 (or avx512) forces a variant; on x86-64 it must be supported.
    On another host (code generated only to be inspected) the default is "avx512".
    """
    have = features()
    forced = os.environ.get(VARIANT_ENV, "")
    if forced:
        if forced not in VARIANTS:
            raise KernelParameterError(f"{VARIANT_ENV}={forced!r}: expected one of "
                                       f"{sorted(VARIANTS)}")
        missing = _missing(VARIANTS[forced], have)
        if missing and host_isa() == "x86_64":
            raise UnsupportedCpuError(f"{VARIANT_ENV}={forced} but the host CPU lacks "
                                      f"{', '.join(missing)}")
        return forced
    if host_isa() != "x86_64":
        return "avx512"   # code generated here only to inspect: the widest variant
    if not _missing(AVX512_PATH, have):
        return "avx512"
    if not _missing(AVX2_PATH, have):
        return "avx2"
    raise UnsupportedCpuError(
        f"the host CPU supports neither einjit x86-64 path: the AVX2 path lacks "
        f"{', '.join(_missing(AVX2_PATH, have))}; the AVX-512 path lacks "
        f"{', '.join(_missing(AVX512_PATH, have))}")
