"""The backend contract: the registry resolves targets, and every backend implements every
entry of the op table with the same generator signatures (code for any ISA is generated on
any host, so this runs everywhere)."""

import dataclasses
import inspect

import pytest

import einjit
from einjit.backends import (
    GENERIC,
    ISAS,
    Microarch,
    Target,
    backend,
    resolve_target,
    why_not_runnable,
)
from einjit.backends.x86_64 import cpu
from einjit.errors import KernelParameterError, KernelParameterTypeError
from einjit.ops import BINARY_OPS, UNARY_OPS

TARGETS = [target for isa in ISAS for target in backend(isa).VARIANTS.values()]
GENERATORS = {
    "generate_brgemm": ["target", "m", "n", "k", "br_size", "dtype", "accumulate", "stream",
                        "ld_b", "far_c", "next_call"],
    "generate_unary": ["target", "op", "m", "n", "trans_b", "dtype"],
    "generate_binary": ["target", "op", "m", "n", "dtype"],
    "generate_loop_nest": ["target", "plan"],
}


@pytest.mark.parametrize("isa", ISAS)
def test_every_backend_offers_the_same_functions(isa):
    module = backend(isa)
    for name, parameters in GENERATORS.items():
        assert list(inspect.signature(getattr(module, name)).parameters) == parameters, name
    for name in ("emit_brgemm", "emit_unary", "emit_binary"):
        parameters = inspect.signature(getattr(module, name)).parameters
        assert list(parameters)[:2] == ["asm", "target"]
        assert parameters["dtype"].default == "float32"
    for name in ("emit_brgemm", "generate_brgemm"):
        assert inspect.signature(getattr(module, name)).parameters["accumulate"].default is True
        assert inspect.signature(getattr(module, name)).parameters["stream"].default is False
        assert inspect.signature(getattr(module, name)).parameters["far_c"].default == 0
        assert inspect.signature(getattr(module, name)).parameters["ld_b"].default is None
        with pytest.raises(KernelParameterError, match="accumulate=False"):
            module.generate_brgemm(next(iter(module.VARIANTS.values())), 8, 8, 8, 1,
                                   stream=True)
    for name in ("generate_brgemm", "generate_unary", "generate_binary"):
        assert inspect.signature(getattr(module, name)).parameters["dtype"].default == "float32"
    assert list(inspect.signature(module.brgemm_vector_bits).parameters) == \
        ["target", "m", "k", "dtype"]
    assert list(inspect.signature(module.array_call).parameters) == ["target", "call"]
    assert module.default_variant() in module.VARIANTS
    assert all(target.isa == isa for target in module.VARIANTS.values())
    assert module.flush_icache is None or callable(module.flush_icache)


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_every_backend_implements_every_operation(target):
    """Every op of the table generates code for every target, with and without transposition
    and with row remainders; kernels for different ops differ."""
    module = backend(target.isa)
    codes = set()
    for op in UNARY_OPS:
        for trans_b in (False, True):
            code = module.generate_unary(target, op, 19, 5, trans_b)
            assert code and code not in codes, (op, trans_b)
            codes.add(code)
    for op in BINARY_OPS:
        code = module.generate_binary(target, op, 19, 5)
        assert code and code not in codes, op
        codes.add(code)
    assert module.generate_brgemm(target, 19, 5, 3, 2)


def test_resolve_target_names_variants():
    assert resolve_target("x86_64:avx2") == backend("x86_64").VARIANTS["avx2"]
    assert resolve_target("aarch64").variant == "neon"
    target = resolve_target("x86_64:avx512")
    assert resolve_target(target) is target and str(target) == "x86_64:avx512"
    assert target.lanes() == 16 and target.lanes(8) == 8
    assert einjit.brgemm(8, 8, 8, isa="x86_64:avx2").target.variant == "avx2"


@pytest.mark.parametrize("isa, error, message", [
    ("sparc", KernelParameterError, "isa='sparc' is not supported"),
    ("x86_64:sse2", KernelParameterError, "variant 'sse2' is not one of"),
    ("aarch64:sve", KernelParameterError, "variant 'sve' is not one of"),
    (3, KernelParameterTypeError, "isa=3"),
])
def test_resolve_target_errors_name_the_value(isa, error, message):
    with pytest.raises(error, match=message):
        resolve_target(isa)


def test_code_runs_only_where_the_host_matches():
    other = "aarch64" if einjit.host_isa() == "x86_64" else "x86_64"
    assert "generated for" in why_not_runnable(resolve_target(other))
    assert why_not_runnable(resolve_target(None)) is None
    assert isinstance(resolve_target(None), Target)


def test_the_conflict_pitch_comes_from_l1s_lines_and_ways():
    """Columns 8 lines apart start in every eighth set: 512 bytes on every core described (a
    32 KiB 8-way or 48 KiB 12-way L1 of 64-byte lines, a 4 KiB way); where a way is shorter
    than 8 lines, columns a way apart already share one set."""
    assert GENERIC.l1_bytes == 32 << 10 and GENERIC.conflict_pitch_bytes == 512
    assert {name: micro.conflict_pitch_bytes for name, micro in cpu.MICROARCHS.items()} == \
        {name: 512 for name in ("zen3", "zen4", "zen5", "skylake-sp", "icelake-sp",
                                "sapphirerapids", "generic")}
    assert resolve_target("aarch64").micro.conflict_pitch_bytes == 512
    assert Microarch(l1_ways=4, l1_sets=4).conflict_pitch_bytes == 256
    assert Microarch(l1_ways=4, l1_sets=256).conflict_pitch_bytes == 512
    # crowds: a positive multiple of that pitch (no columns at all crowd nothing)
    assert [GENERIC.crowds(pitch) for pitch in (0, 256, 512, 1000, 1024, 8192, 12800)] == \
        [False, False, True, False, True, True, True]


def test_a_batch_fits_the_cores_budget_and_the_kernels_limit():
    """More than one entry, at most the BRGEMM's br_size limit, in0 + in1 blocks within the
    core's batch_block_bytes, n above 1 (not a matrix times a vector)."""
    micro = GENERIC
    assert micro.batch_fits(128, 32, 16, 32, 4)                  # 320 KiB of 384
    assert not micro.batch_fits(128, 32, 16, 1, 4)
    assert not micro.batch_fits(128, 64, 32, 32, 4)              # 768 KiB
    assert not micro.batch_fits(1, 1, 1, 1025, 4)                # past br_size 1024
    assert not micro.batch_fits(1000, 1, 16, 5, 4)               # a matrix times a vector
    assert micro.batch_fits(1000, 2, 16, 5, 4)
    assert not dataclasses.replace(micro, batch_block_bytes=(320 << 10) - 1).batch_fits(
        128, 32, 16, 32, 4)


def test_the_aarch64_backend_takes_its_variant_with_any_cores_facts():
    """As on x86-64, a variant's Target with another core's facts generates code; a Target
    that is not a variant's (other registers) is refused, naming it."""
    neon = resolve_target("aarch64")
    other_core = dataclasses.replace(neon, micro=dataclasses.replace(neon.micro,
                                                                     pack_max_bytes=0))
    module = backend("aarch64")
    assert module.generate_brgemm(other_core, 8, 6, 4, 1) == module.generate_brgemm(neon, 8, 6,
                                                                                    4, 1)
    with pytest.raises(KernelParameterError, match="registers=16"):
        module.generate_brgemm(dataclasses.replace(neon, registers=16), 8, 6, 4, 1)


@pytest.mark.parametrize("m, zen4_bits", [(48, 512), (125, 512), (40, 256), (100, 256),
                                          (130, 256), (6, 512)])
def test_a_brgemm_computes_in_narrower_vectors_only_where_its_core_runs_a_tail_so(m, zen4_bits):
    """Zen 4 runs an M with a tail in AVX2 code (x86_64.blocking.unmasked_target); a core of
    full-rate 512-bit vectors, the AVX2 variant and NEON compute in their own width."""
    x86 = backend("x86_64")
    zen4 = dataclasses.replace(x86.VARIANTS["avx512"], micro=cpu.MICROARCHS["zen4"])
    zen5 = dataclasses.replace(x86.VARIANTS["avx512"], micro=cpu.MICROARCHS["zen5"])
    assert x86.brgemm_vector_bits(zen4, m, 64, "float32") == zen4_bits
    assert x86.brgemm_vector_bits(zen5, m, 64, "float32") == 512
    assert x86.brgemm_vector_bits(x86.VARIANTS["avx2"], m, 64, "float32") == 256
    neon = backend("aarch64").VARIANTS["neon"]
    assert backend("aarch64").brgemm_vector_bits(neon, m, 64, "float32") == neon.vector_bits
