"""Helpers of the IR, pass and codegen tests: the seeds' configurations as parameter dicts
(BRGEMM, GEMM, UNARY, BINARY) with edit/build, an oracle independent of einjit.ir.reference
(offsets gathered with np.indices, the contraction by np.einsum over the whole index space),
operand buffers, and random operations in the contract's space."""

import string

import numpy as np

from einjit.ir import Dim, TensorOperation
from einjit.ops import BINARY_OPS, UNARY_OPS, lookup

FIELDS = ("stride_in0", "stride_in1", "stride_out")

BRGEMM = dict(dtype="float32", prim_first_touch="none", prim_main="brgemm",
              prim_last_touch="none", dim_types=("m", "n", "k", "m", "n", "k"),
              exec_types=("seq", "seq", "prim", "prim", "prim", "prim"),
              dim_sizes=(32, 32, 8, 32, 32, 32), strides_in0=(8192, 0, 1024, 1, 0, 32),
              strides_in1=(0, 8192, 1024, 0, 32, 1), strides_out=(32768, 1024, 0, 1, 32, 0))
GEMM = dict(BRGEMM, prim_main="gemm", exec_types=("seq", "seq", "seq", "prim", "prim", "prim"))
# a 3-D permutation: in0 (a, b, c) contiguous in c, out contiguous in b
UNARY = dict(dtype="float32", prim_first_touch="none", prim_main="identity",
             prim_last_touch="none", dim_types=("c", "c", "c"), exec_types=("seq", "prim", "prim"),
             dim_sizes=(3, 5, 7), strides_in0=(35, 7, 1), strides_in1=(0, 0, 0),
             strides_out=(35, 1, 5))
BINARY = dict(UNARY, prim_main="add", strides_in1=(35, 7, 1), strides_out=(35, 7, 1))


def edit(base, **changes):
    params = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict):      # {index: value}: change entries of a column
            column = list(params[key])
            for index, entry in value.items():
                column[index] = entry
            params[key] = tuple(column)
        else:
            params[key] = value
    return params


def build(params):
    params = dict(params)
    isa = params.pop("isa", None)
    num_threads = params.pop("num_threads", None)
    return TensorOperation(**params, isa=isa, num_threads=num_threads)


def offsets(op, field, dims=None):
    """The element offset of every index of the index space (or of `dims` only)."""
    dims = op.dims if dims is None else dims
    if not dims:
        return np.zeros((), np.int64)
    grids = np.indices([d.size for d in dims], dtype=np.int64)
    return sum(grid * getattr(d, field) for grid, d in zip(grids, dims))


def _apply(name, values):
    return values if name == "none" else lookup(name).reference(values)


def oracle(op, in0, in1, out):
    """The expected out buffer (a new array), computed from the strides with np.einsum."""
    expected = out.copy()
    written = [d for d in op.dims if d.type != "k"]
    out_at = offsets(op, "stride_out", written)
    current = out[out_at]
    if op.kind == "contraction":
        wide = np.promote_types(op.dtype, np.float64)    # complex128 for complex ops
        a = in0[offsets(op, "stride_in0")].astype(wide)
        b = in1[offsets(op, "stride_in1")].astype(wide)
        letters = string.ascii_letters[:len(op.dims)]
        kept = "".join(letter for letter, d in zip(letters, op.dims) if d.type != "k")
        total = np.einsum(f"{letters},{letters}->{kept}", a, b)
        start = _apply(op.prim_first_touch, current).astype(wide)
        result = _apply(op.prim_last_touch, (start + total).astype(op.dtype))
    elif op.kind == "none":
        result = _apply(op.prim_last_touch, _apply(op.prim_first_touch, current))
    else:
        args = [in0[offsets(op, "stride_in0")]]
        if op.kind == "binary":
            args.append(in1[offsets(op, "stride_in1")])
        result = _apply(op.prim_last_touch, lookup(op.prim_main).reference(*args))
    expected[out_at] = result
    return expected


def buffers(op, rng, pad=5):
    """Random in0, in1 and out buffers of the op's dtype reaching its extents plus `pad`
    elements (complex: both parts random)."""
    def make(name):
        size = op.extent(name) + pad
        values = rng.uniform(-2.0, 2.0, size)
        if np.dtype(op.dtype).kind == "c":
            values = values + 1j * rng.uniform(-2.0, 2.0, size)
        return values.astype(op.dtype)
    return make("in0"), make("in1"), make("out")


def assert_same(op, got, expected):
    """Bit-exact for element-wise ops and exact ops, a tolerance for contractions."""
    if op.kind == "contraction":
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)
    else:
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


# -- random operations -------------------------------------------------------------------

def _layout(rng, dims_of_tensor, sizes, gaps):
    """Strides of a tensor holding `dims_of_tensor` (indices) in a random order, packed with
    random gaps; 0 for the dims it lacks."""
    strides = {}
    order = list(dims_of_tensor)
    rng.shuffle(order)
    stride = 1
    for index in order:
        strides[index] = stride
        stride *= sizes[index]
        if gaps and rng.random() < 0.3:
            stride += int(rng.integers(1, 4))
    return strides


def random_operation(rng, main, first="none", last="none", ndims=None, max_elements=6000,
                     gaps=True, broadcast=True, dtype="float32"):
    """A random valid operation of `dtype` (all exec types "undefined") with prim_main
    `main`."""
    kind = ("contraction" if main in ("gemm", "brgemm") else
            "unary" if main in UNARY_OPS else "binary" if main in BINARY_OPS else "none")
    ndims = int(rng.integers(2, 8)) if ndims is None else ndims
    if kind == "contraction":
        types = list(rng.choice(list("cmnk"), ndims))
        for needed, slot in (("m", 0), ("n", 1), ("k", 2)):
            if needed not in types and ndims > slot:
                types[slot] = needed
        rng.shuffle(types)
    else:
        types = list(rng.choice(list("cmn"), ndims))
    sizes = [int(s) for s in rng.integers(1, 41, ndims)]
    while np.prod(sizes, dtype=np.int64) > max_elements:
        big = int(np.argmax(sizes))
        sizes[big] = max(1, sizes[big] // 2)
    dims = range(ndims)
    if kind == "contraction":
        has = {"stride_in0": [i for i in dims if types[i] in "cmk"],
               "stride_in1": [i for i in dims if types[i] in "cnk"],
               "stride_out": [i for i in dims if types[i] in "cmn"]}
    else:
        in1 = [i for i in dims if not (broadcast and kind == "binary" and rng.random() < 0.2)]
        has = {"stride_in0": list(dims), "stride_in1": in1 if kind == "binary" else [],
               "stride_out": list(dims)}
    strides = {field: _layout(rng, has[field], sizes, gaps) for field in FIELDS}
    columns = [tuple(strides[field].get(i, 0) for i in dims) for field in FIELDS]
    return TensorOperation(dtype, first, main, last, tuple(types), None, tuple(sizes),
                           *columns)


def dims_of(op):
    return [Dim(d.type, d.exec_type, d.size, *d.strides) for d in op.dims]
