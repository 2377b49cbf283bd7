"""Dimension fusion (seeds 5.5.4): which dims fuse, the fused dim's size, strides and place."""

import pytest

from einjit.ir import Dim, TensorOperation
from einjit.passes import fuse
from einjit.passes.fuse import fusable


def unary(dims):
    return TensorOperation.from_dims("float32", "none", "relu", "none", dims)


def u(size, s0, s_out, exec_type="undefined", dim_type="c"):
    return Dim(dim_type, exec_type, size, s0, 0, s_out)


@pytest.mark.parametrize("dims, expected", [
    # a 5 x 4 contiguous block: the outer dim continues the inner one in in0 and out
    ([u(4, 5, 5), u(5, 1, 1)], [u(20, 1, 1)]),
    # three dims in a chain fuse into one, at the innermost dim's place
    ([u(2, 12, 12), u(3, 4, 4), u(4, 1, 1)], [u(24, 1, 1)]),
    # out has a gap after each column: no fusion
    ([u(4, 5, 6), u(5, 1, 1)], [u(4, 5, 6), u(5, 1, 1)]),
    # a transposition: strides continue in in0 only
    ([u(4, 5, 1), u(5, 1, 4)], [u(4, 5, 1), u(5, 1, 4)]),
    # size-1 dims are dropped (they loop once)
    ([u(1, 99, 7), u(6, 1, 1)], [u(6, 1, 1)]),
    # prim dims never fuse (that would change the kernel)
    ([u(4, 5, 5, "prim"), u(5, 1, 1, "prim")], [u(4, 5, 5, "prim"), u(5, 1, 1, "prim")]),
    # different exec types do not fuse
    ([u(4, 5, 5, "seq"), u(5, 1, 1, "undefined")], [u(4, 5, 5, "seq"), u(5, 1, 1, "undefined")]),
    # different types do not fuse
    ([u(4, 5, 5, dim_type="m"), u(5, 1, 1, dim_type="n")],
     [u(4, 5, 5, dim_type="m"), u(5, 1, 1, dim_type="n")]),
])
def test_fuse_structure(dims, expected):
    assert list(fuse(unary(dims)).dims) == expected


def test_min_size():
    dims = [u(100, 80, 80), u(80, 1, 1)]
    assert len(fuse(unary(dims), min_size=64).dims) == 2     # both >= 64: kept
    assert fuse(unary(dims), min_size=81).dims == (u(8000, 1, 1),)


def test_fuse_contraction_dims_of_every_type():
    # (64, 25) m, n, k dims, the 25 inner: each pair fuses into 1600 (seeds' motivation)
    op = TensorOperation("float32", "none", "gemm", "none", ("m", "m", "n", "n", "k", "k"),
                         None, (64, 25, 64, 25, 64, 25),
                         (25, 1, 0, 0, 40000, 1600), (0, 0, 40000, 1600, 25, 1),
                         (25, 1, 40000, 1600, 0, 0))
    fused = fuse(op)
    assert [(d.type, d.size, d.strides) for d in fused.dims] == [
        ("m", 1600, (1, 0, 1)), ("n", 1600, (0, 1600, 1600)), ("k", 1600, (1600, 1, 0))]


def test_fusable_rule():
    assert fusable(u(3, 2, 7), u(5, 6, 21))
    assert not fusable(u(3, 2, 7), u(5, 6, 22))
    assert not fusable(u(3, 2, 7, "prim"), u(5, 6, 21, "prim"))
