"""The numpy reference executor: what a TensorOperation computes, as the tests' oracle.

Each tensor is viewed over the whole index space with np.lib.stride_tricks.as_strided (the
op's element strides, 0 where a tensor lacks a dim), and the semantics of
einjit.ir.tensor_operation are applied to those views:

- gemm/brgemm: out := last_touch(dtype(wide(first_touch(out)) + sum over the k dims of
  wide(in0) * wide(in1))), the sum by np.einsum in `wide`: float64 for the real dtypes,
  complex128 for the complex ones;
- unary u: out := last_touch(u(in0)); binary b: out := last_touch(b(in0, in1));
- "none": out := last_touch(first_touch(out)).

Element-wise functions are einjit.ops' `reference` functions (the same the primitives are
tested against), in the op's dtype. Exec types do not change results, so any op works here,
including ops whose exec types are all "undefined".
"""

from __future__ import annotations

import string

import numpy as np

from einjit.errors import OperandError, OperandValueError
from einjit.ir.tensor_operation import TensorOperation
from einjit.ops import lookup

FIELD = {"in0": "stride_in0", "in1": "stride_in1", "out": "stride_out"}


def _flat(name: str, array, op: TensorOperation) -> np.ndarray:
    """`array` as a 1-D view of its memory, after checking dtype and extent."""
    if not isinstance(array, np.ndarray):
        raise OperandError(f"operand {name} must be a numpy array; got {type(array).__name__}")
    if array.dtype != np.dtype(op.dtype):
        raise OperandError(f"operand {name} has dtype {array.dtype}; expected {op.dtype}")
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        raise OperandValueError(f"operand {name} must be a contiguous array; got strides "
                                f"{array.strides}")
    flat = array.reshape(-1, order="A")   # memory order: a view, not a copy
    if flat.size < op.extent(name):
        raise OperandValueError(f"operand {name} has {flat.size} elements but the operation's "
                                f"strides reach {op.extent(name)} elements from its base")
    if name == "out" and not array.flags.writeable:
        raise OperandValueError("operand out is read-only but the operation writes it")
    return flat


def _view(flat: np.ndarray, dims, field: str, keep) -> np.ndarray:
    """The tensor over the dims selected by `keep` (strides 0 where it lacks one)."""
    chosen = [d for d in dims if keep(d)]
    return np.lib.stride_tricks.as_strided(
        flat, shape=[d.size for d in chosen],
        strides=[getattr(d, field) * flat.itemsize for d in chosen],
        writeable=field == "stride_out")


def _apply(name: str, values: np.ndarray) -> np.ndarray:
    return values if name == "none" else lookup(name).reference(values)


def execute_reference(op: TensorOperation, in0, in1, out) -> None:
    """Compute `op` with numpy, in place on `out` (numpy arrays; the bases are their first
    elements). in0/in1 may be None where the op does not use them."""
    arrays = {"in0": in0, "in1": in1, "out": out}
    flat = {name: _flat(name, arrays[name], op) for name in op.operands}
    dims = op.dims
    written = [d for d in dims if d.type != "k"]
    target = _view(flat["out"], written, "stride_out", lambda d: True)
    if op.kind == "contraction":
        target[...] = _contract(op, flat, target)
        return
    if op.kind == "none":
        result = _apply(op.prim_first_touch, target.copy())
    else:
        operands = [_view(flat[name], dims, FIELD[name], lambda d: True)
                    for name in op.operands[:-1]]
        result = lookup(op.prim_main).reference(*operands)
    target[...] = _apply(op.prim_last_touch, result)


def _contract(op: TensorOperation, flat: dict, target: np.ndarray) -> np.ndarray:
    """first_touch, then += the k-sum of in0 * in1 (float64, complex128 for complex), then
    last_touch."""
    dims = op.dims
    wide = np.promote_types(op.dtype, np.float64)     # float64, or complex128 for complex
    letters = dict(zip(range(len(dims)), string.ascii_letters))
    if len(dims) > len(letters):
        raise OperandValueError(f"the reference executor handles up to {len(letters)} dims; "
                                f"the op has {len(dims)}")
    # each input over the dims it has (stride != 0); einsum broadcasts the rest
    inputs, subscripts = [], []
    for name in ("in0", "in1"):
        field = FIELD[name]
        present = [i for i, d in enumerate(dims) if getattr(d, field) != 0 and d.size > 1]
        view = _view(flat[name], [dims[i] for i in present], field, lambda d: True)
        inputs.append(view.astype(wide))
        subscripts.append("".join(letters[i] for i in present))
    seen = set("".join(subscripts))
    out_index = [i for i, d in enumerate(dims) if d.type != "k"]
    result_letters = "".join(letters[i] for i in out_index if letters[i] in seen)
    total = np.einsum(f"{subscripts[0]},{subscripts[1]}->{result_letters}", *inputs,
                      optimize=True)
    # k dims neither input has contribute the same product size times
    for d in dims:
        if d.type == "k" and d.size > 1 and d.stride_in0 == 0 and d.stride_in1 == 0:
            total = total * d.size
    # back to the out view's axes: broadcast over the non-k dims no input has
    shape = [dims[i].size if letters[i] in seen else 1 for i in out_index]
    total = np.broadcast_to(total.reshape(shape), target.shape)
    start = _apply(op.prim_first_touch, target.copy()).astype(wide)
    result = (start + total).astype(target.dtype)
    return _apply(op.prim_last_touch, result)
