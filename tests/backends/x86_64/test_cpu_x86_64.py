"""x86-64 feature detection and the choice of code variant."""

import pathlib

import pytest

from einjit.backends.x86_64 import cpu
from einjit.errors import KernelParameterError, UnsupportedCpuError
from einjit.runtime.host import host_isa

ALL = frozenset(cpu.FEATURES)
AVX2_ONLY = frozenset({"avx2", "fma"})

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16
bugs\t\t: sysret_ss_attrs

processor\t: 1
flags\t\t: fpu sse
"""


@pytest.fixture
def host(monkeypatch):
    """An x86-64 host with the given feature set; the environment starts without the override."""
    monkeypatch.delenv(cpu.VARIANT_ENV, raising=False)
    monkeypatch.setattr(cpu, "host_isa", lambda: "x86_64")

    def set_features(names):
        monkeypatch.setattr(cpu, "features", lambda: frozenset(names))
    return set_features


def test_cpuinfo_parsing_uses_the_first_flags_line():
    assert cpu.features_from_cpuinfo(CPUINFO) == ALL
    assert cpu.features_from_cpuinfo("processor : 0\n") == frozenset()


@pytest.mark.skipif(host_isa() != "x86_64", reason="asks an x86-64 CPU")
def test_cpuid_agrees_with_the_os():
    assert cpu.features_from_cpuid() <= ALL
    if pathlib.Path("/proc/cpuinfo").exists():
        assert cpu.features_from_cpuid() == cpu.features()


def test_features_are_cached_and_known():
    assert cpu.features() is cpu.features()
    assert cpu.features() <= ALL


def test_avx512_is_preferred(host):
    host(ALL)
    assert cpu.variant() == "avx512"


def test_avx2_without_avx512(host):
    host(AVX2_ONLY | {"avx512f"})
    assert cpu.variant() == "avx2"


def test_environment_forces_avx2(host, monkeypatch):
    host(ALL)
    monkeypatch.setenv(cpu.VARIANT_ENV, "avx2")
    assert cpu.variant() == "avx2"


def test_forcing_an_absent_variant_names_what_is_missing(host, monkeypatch):
    host(AVX2_ONLY | {"avx512f"})
    monkeypatch.setenv(cpu.VARIANT_ENV, "avx512")
    with pytest.raises(UnsupportedCpuError, match="avx512vl, avx512bw, avx512dq"):
        cpu.variant()


def test_bad_environment_value(host, monkeypatch):
    host(ALL)
    monkeypatch.setenv(cpu.VARIANT_ENV, "sse2")
    with pytest.raises(KernelParameterError, match="sse2"):
        cpu.variant()


@pytest.mark.parametrize("have, missing", [
    (frozenset(), "lacks avx2, fma; the AVX-512 path lacks avx512f, avx512vl, avx512bw, avx512dq"),
    ({"avx2"}, "AVX2 path lacks fma"),
    ({"fma", "avx512f", "avx512vl"},
     "AVX2 path lacks avx2; the AVX-512 path lacks avx512bw, avx512dq"),
])
def test_unsupported_host_names_what_is_missing(host, have, missing):
    host(have)
    with pytest.raises(UnsupportedCpuError, match=missing):
        cpu.variant()


def test_other_hosts_generate_avx512_unless_told(monkeypatch):
    """On a non-x86 host code is generated only to inspect: any variant, no CPU check."""
    monkeypatch.setattr(cpu, "host_isa", lambda: "aarch64")
    monkeypatch.setattr(cpu, "features", lambda: frozenset())
    monkeypatch.delenv(cpu.VARIANT_ENV, raising=False)
    assert cpu.variant() == "avx512"
    monkeypatch.setenv(cpu.VARIANT_ENV, "avx2")
    assert cpu.variant() == "avx2"
    monkeypatch.setenv(cpu.VARIANT_ENV, "sse2")
    with pytest.raises(ValueError, match="sse2"):
        cpu.variant()


# ---- the core's microarchitecture facts (the BRGEMM cost model's)

@pytest.mark.parametrize("vendor, family, model, core", [
    ("AuthenticAMD", 0x19, 0x01, "zen3"), ("AuthenticAMD", 0x19, 0x0F, "zen3"),
    ("AuthenticAMD", 0x19, 0x21, "zen3"), ("AuthenticAMD", 0x19, 0x44, "zen3"),
    ("AuthenticAMD", 0x19, 0x5F, "zen3"), ("AuthenticAMD", 0x19, 0x10, "zen4"),
    ("AuthenticAMD", 0x19, 0x11, "zen4"), ("AuthenticAMD", 0x19, 0x61, "zen4"),
    ("AuthenticAMD", 0x19, 0x7F, "zen4"), ("AuthenticAMD", 0x19, 0xA0, "zen4"),
    ("AuthenticAMD", 0x19, 0x30, "generic"), ("AuthenticAMD", 0x19, 0x80, "generic"),
    ("AuthenticAMD", 0x1A, 0x02, "zen5"), ("AuthenticAMD", 0x1A, 0x44, "zen5"),
    ("AuthenticAMD", 0x17, 0x31, "generic"), ("GenuineIntel", 0x06, 0x8F, "sapphirerapids"),
    ("GenuineIntel", 0x06, 0xCF, "sapphirerapids"), ("GenuineIntel", 0x06, 0xAD, "sapphirerapids"),
    ("GenuineIntel", 0x06, 0x55, "skylake-sp"), ("GenuineIntel", 0x06, 0x6A, "icelake-sp"),
    ("GenuineIntel", 0x06, 0x97, "generic"), ("GenuineIntel", 0x19, 0x01, "generic"),
    ("GenuineIntel", 0x19, 0x8F, "generic"), ("HygonGenuine", 0x18, 0x01, "generic"),
])
def test_cores_by_family_and_model(vendor, family, model, core):
    assert cpu.core_name(vendor, family, model) == core


@pytest.mark.parametrize("vendor, family, model, amx, core", [
    ("GenuineIntel", 0x06, 0xA7, True, "sapphirerapids"),   # a KVM guest's reported model
    ("GenuineIntel", 0x06, 0xA7, False, "generic"),
    ("GenuineIntel", 0x06, 0x55, True, "skylake-sp"),       # a known model is not overruled
    ("GenuineIntel", 0x19, 0x01, True, "generic"),
    ("AuthenticAMD", 0x19, 0x30, True, "generic"),
])
def test_an_unknown_intel_model_with_amx_tiles_is_a_sapphire_rapids_core(vendor, family, model,
                                                                          amx, core):
    assert cpu.core_name(vendor, family, model, amx) == core


def test_core_facts():
    zen3, zen4, zen5 = (cpu.MICROARCHS[name] for name in ("zen3", "zen4", "zen5"))
    assert zen4.splits_512 and zen4.passes(512) == 2 and zen4.passes(256) == 1
    assert not zen5.splits_512 and zen5.passes(512) == 1
    assert zen3.masked_store_cycles > 1 and cpu.MICROARCHS["generic"].masked_store_cycles == 1
    spr = cpu.MICROARCHS["sapphirerapids"]
    assert spr.l1_bytes == 48 << 10 and spr.l2_bytes == 2 << 20 and not spr.splits_512
    assert zen3.l2_bytes == 512 << 10 and zen4.l2_bytes == zen5.l2_bytes == 1 << 20


def test_identity_from_cpuinfo():
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
            "model name\t: AMD EPYC 9654\nprocessor\t: 1\nmodel\t\t: 99\n")
    assert cpu.identity_from_cpuinfo(text) == ("AuthenticAMD", 25, 17, False)
    assert cpu.identity_from_cpuinfo("processor : 0\n") is None
    guest = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n"
             "flags\t\t: fpu avx512f amx_bf16 amx_tile amx_int8\nprocessor\t: 1\n"
             "flags\t\t: fpu\n")
    assert cpu.identity_from_cpuinfo(guest) == ("GenuineIntel", 6, 167, True)
    assert cpu.core_name(*cpu.identity_from_cpuinfo(guest)) == "sapphirerapids"


@pytest.mark.skipif(host_isa() != "x86_64", reason="asks an x86-64 CPU")
def test_cpuid_identity_agrees_with_the_os():
    if pathlib.Path("/proc/cpuinfo").exists():
        assert cpu.identity_from_cpuid() == cpu.identity_from_cpuinfo(
            pathlib.Path("/proc/cpuinfo").read_text())
    assert cpu.host_core() in cpu.MICROARCHS


def test_environment_names_the_core(monkeypatch):
    for name, facts in cpu.MICROARCHS.items():
        monkeypatch.setenv(cpu.MICROARCH_ENV, name)
        assert cpu.microarch() == facts
    monkeypatch.setenv(cpu.MICROARCH_ENV, "zen9")
    with pytest.raises(KernelParameterError, match="zen9"):
        cpu.microarch()
    monkeypatch.delenv(cpu.MICROARCH_ENV)
    assert cpu.microarch() == cpu.MICROARCHS[cpu.host_core()]


def test_variants_carry_the_host_core():
    from einjit.backends.x86_64 import VARIANTS
    assert {target.micro for target in VARIANTS.values()} == {cpu.microarch()}
