"""Dimension splitting (seeds 5.5.2 and the min_kernel_size fix of 5.5.4)."""

import dataclasses

import pytest

from einjit.backends import x86_64
from einjit.backends.x86_64 import cpu
from einjit.errors import OperationError, OperationTypeError
from einjit.ir import TensorOperation
from einjit.passes import split
from einjit.passes.peel import peel
from einjit.passes.split import best_split, gives_up_occupancy, occupancy_split

ZEN4 = dataclasses.replace(x86_64.VARIANTS["avx512"], micro=cpu.MICROARCHS["zen4"])
ZEN5 = dataclasses.replace(x86_64.VARIANTS["avx512"], micro=cpu.MICROARCHS["zen5"])


@pytest.mark.parametrize("size, max_size, dim_type, min_size, expected", [
    # the seeds, before the fix: the largest multiple of 16 <= 1024 dividing 1600 -> 2 x 800
    (1600, 1024, "m", 1, (2, 800)),
    # the seeds' rule with min_kernel_size 16: 800, 400, 320, 160 leave outer parts < 16
    (1600, 1024, "m", 16, (20, 80)),
    # the seeds' quoted 50 x 32 comes from a maximum between 32 and 63
    (1600, 32, "m", 16, (50, 32)),
    (1600, 63, "m", 16, (50, 32)),
    (1600, 64, "m", 16, (25, 64)),
    (1600, 64, "n", 16, (25, 64)),
    # n prefers multiples of 4, k takes any divisor
    (1000, 512, "n", 16, (25, 40)),
    (1575, 512, "k", 16, (21, 75)),
    # no split leaves both parts >= min_size: the largest divisor <= the maximum
    (1030, 1024, "m", 16, (2, 515)),
    # a prime has no split
    (2053, 1024, "k", 16, None),
])
def test_best_split(size, max_size, dim_type, min_size, expected):
    assert best_split(size, max_size, dim_type, min_size) == expected


@pytest.mark.parametrize("size, max_size, dim_type, expected", [
    (1600, 512, "k", (4, 400)), (1575, 512, "k", (5, 315)), (256, 128, "m", (2, 128)),
    (256, 64, "n", (4, 64)), (1600, 128, "m", (20, 80))])
def test_a_contraction_dim_may_have_a_short_outer_part(size, max_size, dim_type, expected):
    assert best_split(size, max_size, dim_type, 16, outer_min_size=2) == expected


def test_elementwise_ops_keep_the_seeds_outer_minimum():
    op = TensorOperation("float32", "none", "relu", "none", ("c",), None, (1600,), (1,), (0,),
                         (1,))
    assert [d.size for d in split(op).dims] == [20, 80]     # max 1024; 2 x 800 in a contraction


def gemm(n, exec_types=None):
    return TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), exec_types,
                           (n, n, n), (1, 0, n), (0, n, 1), (1, n, 0), isa=ZEN4)


def test_split_structure_with_defaults():
    op = split(TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), None,
                               (1600, 1600, 400), (1, 0, 1600), (0, 400, 1), (1, 1600, 0),
                               isa=ZEN4))
    # m: max 128 -> 20 x 80 (80 rows fill 10 vectors of 8); n: max 64 -> 25 x 64; k: 400
    # within 512
    assert [(d.type, d.size, d.strides, d.exec_type) for d in op.dims] == [
        ("m", 20, (80, 0, 80), "undefined"), ("m", 80, (1, 0, 1), "undefined"),
        ("n", 25, (0, 25600, 102400), "undefined"), ("n", 64, (0, 400, 1600), "undefined"),
        ("k", 400, (1600, 1, 0), "undefined")]


def test_split_structure_of_a_large_contraction():
    op = split(gemm(1600).replace(num_threads=2))
    # cache blocks (einjit.passes.block) on Zen 4: kc <= 128 -> 16 x 100; nc <= 512, panels a
    # multiple of 2 threads -> 4 x 400
    assert [(d.type, d.size, d.strides) for d in op.dims] == [
        ("m", 20, (80, 0, 80)), ("m", 80, (1, 0, 1)),
        ("n", 4, (0, 640000, 640000)), ("n", 400, (0, 1600, 1600)),
        ("k", 16, (160000, 100, 0)), ("k", 100, (1600, 1, 0))]


def test_split_repeats_until_every_part_fits():
    op = split(gemm(4096), max_size=16, min_size=2)
    assert all(d.size <= 16 for d in op.dims)
    for dim_type in "mnk":
        sizes = [d.size for d in op.dims if d.type == dim_type]
        assert len(sizes) > 2 and eval("*".join(map(str, sizes))) == 4096


def test_split_a_prim_dim_keeps_the_op_valid():
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c"), ("prim", "prim"),
                         (2048, 8), (1, 2048), (0, 0), (1, 2048))
    new = split(op, max_size=1024)
    assert [(d.exec_type, d.size, d.stride_in0) for d in new.dims] == [
        ("seq", 16, 128), ("prim", 128, 1), ("prim", 8, 2048)]
    assert new.kernel_calls[0].m == 128


def test_shared_dims_are_not_split():
    op = TensorOperation("float32", "none", "relu", "none", ("c", "c"), ("shared", "undefined"),
                         (4096, 8), (8, 1), (0, 0), (8, 1))
    assert split(op, max_size=64).dims[0] == op.dims[0]


def test_contraction_c_dims_are_not_split_by_default():
    op = TensorOperation("float32", "none", "gemm", "none", ("c", "m"), None, (5000, 8),
                         (8, 1), (1, 0), (8, 1))
    assert split(op).dims == op.dims


@pytest.mark.parametrize("max_size, error, fragment", [
    ({"x": 4}, OperationError, "max_size key 'x'"),
    ({"m": 0}, OperationError, "max_size['m']=0"),
    ("big", OperationTypeError, "got 'big'"),
    (True, OperationTypeError, "got True"),
])
def test_max_size_validation(max_size, error, fragment):
    with pytest.raises(error) as info:
        split(gemm(64), max_size=max_size)
    assert fragment in str(info.value)


def test_min_size_validation():
    with pytest.raises(OperationError, match="min_size=0"):
        split(gemm(64), min_size=0)


@pytest.mark.parametrize("size, lanes, expected", [
    (980, 8, (14, 70)),      # 70 rows in 9 vectors of 8 (97%); the divisor rule's 28 fills 88%
    (980, 4, (35, 28)),      # NEON: 28 and 20 fill their 4-lane vectors; the larger
    (1200, 8, (10, 120)),    # Zen 4 (256 bits at full rate): 120 fills 15 vectors
    (1200, 16, (15, 80)),    # Zen 5 (512 bits): 120 would leave 8 of 128 lanes empty
    (1600, 8, (20, 80)), (384, 8, (3, 128)),
    (2053, 8, None),         # a prime: no divisor in range
])
def test_a_contraction_m_dim_splits_to_fill_its_vectors(size, lanes, expected):
    assert occupancy_split(size, 128, lanes, 16, 2) == expected


@pytest.mark.parametrize("isa, inner", [(ZEN4, 70), (ZEN5, 98), ("aarch64", 28)], ids=str)
def test_the_split_pass_fills_the_targets_vectors_along_m(isa, inner):
    """Zen 5 runs 16 lanes at full rate: 70, 98 and 28 all fill 7/8 of them; the largest."""
    op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), None,
                         (980, 64, 64), (1, 0, 980), (0, 64, 1), (1, 980, 0), isa=isa)
    dims = split(op).dims
    assert [(d.type, d.size) for d in dims if d.type == "m"] == [("m", 980 // inner),
                                                                  ("m", inner)]


def test_a_block_in_the_targets_full_width_wins_over_fuller_vectors():
    # 1000 float32 rows on Zen 4: 40 fills its vectors of 8, 125 leaves 3 of 128 lanes
    # empty, but 40's tail of 8 would take AVX2 code and 125's masked zmm tail need not
    zmm = lambda rows: rows % 16 == 0 or rows % 16 >= 13        # noqa: E731
    assert occupancy_split(1000, 128, 8, 16, 2) == (25, 40)
    assert occupancy_split(1000, 128, 8, 16, 2, zmm) == (8, 125)
    # none in full width: the fullest, as before
    assert occupancy_split(980, 128, 8, 16, 2, lambda rows: False) == (14, 70)
    op = TensorOperation("float32", "zero", "gemm", "none", ("m", "n", "k"), None,
                         (1000, 64, 256), (1, 0, 1000), (0, 256, 1), (1, 1000, 0), isa=ZEN4)
    assert [(d.type, d.size) for d in split(op).dims if d.type == "m"] == [("m", 8),
                                                                          ("m", 125)]
    (m,) = [d for d in op.dims if d.type == "m"]
    assert gives_up_occupancy(op, m)       # so peel cuts whole blocks of 128 and a rest
    assert [part.op.dims[0].size for part in peel(op)] == [896, 104]
    zen5 = op.replace(isa=ZEN5)        # 16 rows a full-rate vector: 125 is the fullest too
    assert not gives_up_occupancy(zen5, m)


def test_of_divisors_that_fill_their_vectors_one_in_the_targets_full_width_wins():
    # 100 and 80 both fill Zen 4's full-rate vectors of 4 float64 rows; 100's tail of M
    # would take AVX2 code, and peel would cut it into blocks of 128 and a rest
    assert occupancy_split(400, 128, 4, 16, 2) == (4, 100)
    assert occupancy_split(400, 128, 4, 16, 2, lambda rows: rows % 8 == 0) == (5, 80)
    op = TensorOperation("float64", "zero", "gemm", "none", ("m", "n", "k"), None,
                         (400, 40, 144), (1, 0, 400), (0, 144, 1), (1, 400, 0), isa=ZEN4)
    assert [(d.type, d.size) for d in split(op).dims if d.type == "m"] == [("m", 5),
                                                                          ("m", 80)]
    assert len(peel(op)) == 1
