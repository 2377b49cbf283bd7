"""Random einjit.einsum calls against numpy.einsum with the same arguments (a seeded generator):
subscripts (implicit and explicit outputs, repeated subscripts, ellipses, size-1 broadcasting),
shapes with 0 and 1, operands with non-contiguous, transposed, negative and zero strides, of
float32, float64, integer, complex and float16 dtypes (mixed), lists, and the options out=
(any dtype), dtype=, casting=, order= and optimize=. Compared: the exception type (einjit's
is an instance of numpy's), the result's type, dtype and shape, its values (bit for bit where
einjit handed the call to numpy, else within the dtype's rounding), the layout for order C, F
and A, out= returned, and views of an operand where numpy returns one."""

import warnings

import numpy as np
import pytest
from frontend_support import numpy_einsum_calls

import einjit

LETTERS = "abcdef"
DTYPES = [np.float32] * 6 + [np.float64] * 6 + [np.int64, np.int32, np.complex128,
                                                  np.complex64, np.float16]
OUT_DTYPES = [np.float32, np.float64, np.int64, np.complex128, np.bool_, np.float16]
CASTINGS = ["safe"] * 8 + ["no", "equiv", "same_kind", "unsafe"]
ORDERS = ["K"] * 4 + ["C", "F", "A", "k", "c", None]
OPTIMIZE = [None] * 3 + [False, True, "greedy", "optimal"]     # None: not given


def random_call(rng):
    """(subscripts, operands, options, description) of one random call."""
    count = int(rng.integers(1, 4))
    pool = LETTERS[: int(rng.integers(1, len(LETTERS) + 1))]
    sizes = {c: int(rng.choice([0, 1, 2, 3, 4], p=[0.04, 0.16, 0.3, 0.3, 0.2])) for c in pool}
    ellipsis_rank = int(rng.integers(0, 3)) if rng.random() < 0.25 else None
    ellipsis_sizes = [int(rng.choice([1, 2, 3])) for _ in range(ellipsis_rank or 0)]
    terms, shapes = [], []
    for _ in range(count):
        labels = [str(c) for c in rng.choice(list(pool), size=int(rng.integers(0, 4)))]
        shape = [sizes[c] if sizes[c] != 1 or rng.random() < 0.5 else 1 for c in labels]
        # a label repeated within a term needs one size there: its first
        for i, c in enumerate(labels):
            shape[i] = shape[labels.index(c)]
        # size-1 broadcasting of a label against the others
        shape = [1 if rng.random() < 0.1 else n for n in shape]
        for i, c in enumerate(labels):
            shape[i] = shape[labels.index(c)]
        term = "".join(labels)
        if ellipsis_rank is not None and rng.random() < 0.8:
            rank = int(rng.integers(0, ellipsis_rank + 1))
            position = int(rng.integers(0, len(labels) + 1))
            term = term[:position] + "..." + term[position:]
            broadcast = [1 if rng.random() < 0.2 else n for n in ellipsis_sizes[-rank:]] \
                if rank else []
            shape = shape[:position] + broadcast + shape[position:]
        terms.append(term)
        shapes.append(tuple(shape))
    subscripts = ",".join(terms)
    if rng.random() < 0.7:
        used = sorted(set("".join(terms).replace(".", "")))
        output = [c for c in used if rng.random() < 0.5]
        rng.shuffle(output)
        output = "".join(output)
        if "..." in subscripts:
            position = int(rng.integers(0, len(output) + 1))
            output = output[:position] + "..." + output[position:]
        subscripts += "->" + output
    operands = [random_operand(rng, shape) for shape in shapes]
    options = {}
    optimize = OPTIMIZE[int(rng.integers(len(OPTIMIZE)))]
    if optimize is not None:
        options["optimize"] = optimize
    order = ORDERS[int(rng.integers(len(ORDERS)))]
    if order != "K" and not (order is None and options.get("optimize")):
        # (numpy's optimized path cannot take order=None; numpy's einsum can, and einjit does)
        options["order"] = order
    casting = CASTINGS[int(rng.integers(len(CASTINGS)))]
    if casting != "safe":
        options["casting"] = casting
    if rng.random() < 0.15:
        options["dtype"] = [np.float32, np.float64, np.complex128][int(rng.integers(3))]
    if rng.random() < 0.25:
        options["out"] = OUT_DTYPES[int(rng.integers(len(OUT_DTYPES)))]    # made per call
    return subscripts, operands, options


def random_operand(rng, shape):
    dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    layout = rng.choice(["c", "f", "step", "negative", "broadcast", "list"],
                        p=[0.4, 0.15, 0.15, 0.12, 0.1, 0.08])
    values = rng.uniform(-2, 2, shape)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * rng.uniform(-2, 2, shape)
    if np.issubdtype(dtype, np.integer):
        values = np.round(values * 3)
    array = values.astype(dtype)
    if layout == "f" and array.ndim:           # (asfortranarray makes a 0-d array 1-d)
        return np.asfortranarray(array)
    if layout == "step" and array.ndim:
        wide = np.zeros(tuple(2 * n for n in shape), dtype)
        view = wide[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = array
        return view
    if layout == "negative" and array.ndim:
        axis = int(rng.integers(array.ndim))
        return np.flip(np.flip(array, axis).copy(), axis)
    if layout == "broadcast" and array.ndim:
        axis = int(rng.integers(array.ndim))
        return np.broadcast_to(np.take(array, [0], axis=axis) if shape[axis] else array, shape)
    if layout == "list" and array.size and dtype in (np.float64, np.int64, np.complex128):
        return array.tolist()
    return array


def outcome(function, subscripts, operands, options, out_dtype):
    """(the call's result or its exception, the out array given or None)."""
    options = dict(options)
    out = None
    if out_dtype is not None:
        try:
            shape = np.shape(np.einsum(subscripts, *operands))
        except Exception:               # an invalid call: any out will do
            shape = (1,)
        out = options["out"] = np.full(shape, 3, out_dtype)
    try:
        return function(subscripts, *operands, **options), out
    except Exception as error:  # the exception type is compared
        return error, out


def tolerance(dtype):
    kind = np.dtype(dtype)
    if kind.kind in "iub":
        return 0
    return {2: 1e-2, 4: 1e-4, 8: 1e-11, 16: 1e-11}[kind.itemsize if kind.kind == "f"
                                                       else kind.itemsize // 2]


def check_call(subscripts, operands, options):
    label = (subscripts, [(np.shape(o), np.asarray(o).dtype.name,
                           getattr(o, "strides", "list")) for o in operands],
             {k: (v.__name__ if isinstance(v, type) else v) for k, v in options.items()})
    options = dict(options)
    out_dtype = options.pop("out", None)
    theirs, their_out = outcome(np.einsum, subscripts, operands, options, out_dtype)
    with numpy_einsum_calls() as calls:
        ours, our_out = outcome(einjit.einsum, subscripts, operands, options, out_dtype)
    if isinstance(theirs, (IndexError, AttributeError)) and options.get("optimize") \
            and not calls:
        # numpy's optimized path fails on some calls its einsum refuses with a ValueError
        # (IndexError for subscripts "" of a 1-d operand): for a call einjit did not hand
        # over, numpy's einsum is the reference
        theirs, their_out = outcome(np.einsum, subscripts, operands,
                                    dict(options, optimize=False), out_dtype)
    if isinstance(theirs, Exception):
        assert isinstance(ours, type(theirs)), (label, ours, theirs)
        return "error"
    assert not isinstance(ours, Exception), (label, ours)
    if not calls and options.get("optimize") and their_out is None and \
            type(theirs) is np.ndarray and theirs.ndim == 0:
        # numpy's optimized path returns some 0-d results as arrays; its einsum (and einjit)
        # as scalars
        assert isinstance(ours, np.generic), label
    else:
        assert type(ours) is type(theirs), label
    if their_out is not None:
        assert theirs is their_out and ours is our_out, label
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, label
    if calls:                            # numpy computed it: numpy's bits
        assert ours.tobytes() == theirs.tobytes(), label
    else:
        # einjit computes as numpy's einsum documents (numpy's optimized path may keep an
        # intermediate in a narrower dtype): against the exact sum, within the rounding of the
        # computing dtype and the result's
        arrays = [np.asarray(o) for o in operands]
        compute = np.dtype(options["dtype"]) if "dtype" in options else \
            np.result_type(*arrays, *([] if our_out is None else [our_out]))
        # a real computing dtype takes complex operands' real parts (numpy's unsafe cast)
        arrays = [a.real if compute.kind != "c" else a for a in arrays]
        exact = np.einsum(subscripts, *[a.astype(np.complex128) for a in arrays])
        bound = np.einsum(subscripts, *[np.abs(a).astype(np.float64) for a in arrays])
        limit = max(tolerance(compute), tolerance(theirs.dtype)) * (np.asarray(bound) + 1)
        assert (np.abs(ours.astype(np.complex128) - exact) <= limit).all(), (label, ours, exact)
    arrays = [o for o in operands if isinstance(o, np.ndarray)]
    if their_out is None:
        assert [np.shares_memory(ours, a) for a in arrays] == \
            [np.shares_memory(theirs, a) for a in arrays], label
        if options.get("order", "K") in ("C", "F", "A", "c") and not calls:
            # the layout numpy's einsum gives (its optimized path's may differ for "A")
            layout, _ = outcome(np.einsum, subscripts, operands, dict(options, optimize=False),
                                None)
            layout = np.asarray(layout)
            assert (ours.flags.c_contiguous, ours.flags.f_contiguous) == \
                (layout.flags.c_contiguous, layout.flags.f_contiguous), label
    return "numpy" if calls else "einjit"


@pytest.mark.parametrize("seed", [pytest.param(0, marks=pytest.mark.native), *range(1, 8)])
def test_random_calls_match_numpy(seed):
    rng = np.random.default_rng(3100 + seed)
    seen = {"error": 0, "numpy": 0, "einjit": 0}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)   # casting="unsafe"
        for _ in range(80):
            subscripts, operands, options = random_call(rng)
            seen[check_call(subscripts, operands, options)] += 1
    # every kind of outcome shows up: the generator reaches each side of the hand-over
    assert all(seen.values()), seen
