"""einjit.einsum as a drop-in for numpy.einsum, at the edge where einjit decides what it computes:
calls it hands to numpy reach numpy.einsum with exactly the caller's arguments; calls it
computes check dtype=, casting= and out= as numpy does before any work; order= and its
layouts; the views numpy returns; explicit paths; contract_expression's shapes and out=;
operands that are not arrays."""

import numpy as np
import pytest
from frontend_support import numpy_einsum_calls, numpy_einsum_forbidden

import einjit

A = np.arange(12.0).reshape(3, 4) / 7
B = np.arange(8.0).reshape(4, 2) / 3


def raised(call):
    try:
        call()
    except Exception as error:  # the type and message are what is compared
        return error
    raise AssertionError("no exception")


def assert_same_error(ours, theirs):
    error, expected = raised(ours), raised(theirs)
    assert type(error) is type(expected) and str(error) == str(expected), (error, expected)


# --- the hand-over and numpy's casting rule ------------------------------------------------

@pytest.mark.parametrize("out_dtype", [np.int64, np.int32, np.bool_, np.float32])
def test_out_the_result_cannot_cast_to_is_numpys_type_error(out_dtype):
    out = np.full((3, 2), 7, out_dtype)
    assert_same_error(lambda: einjit.einsum("ij,jk->ik", A, B, out=out),
                      lambda: np.einsum("ij,jk->ik", A, B, out=np.full((3, 2), 7, out_dtype)))
    assert np.array_equal(out, np.full((3, 2), 7, out_dtype))    # refused before any work


@pytest.mark.parametrize("equation,shapes,out_shape", [
    ("ij,jk->ik", [(1, 4), (4, 2)], (3, 2)),
    ("ij,jk->ik", [(1, 4), (4, 1)], (5, 6)),
    ("ij,j->i", [(1, 4), (4,)], (7,)),
])
def test_out_a_result_broadcasts_into_is_written_as_numpy_writes_it(equation, shapes, out_shape):
    operands = [np.arange(1.0, 1 + np.prod(s)).reshape(s) for s in shapes]
    out = np.zeros(out_shape)
    assert einjit.einsum(equation, *operands, out=out) is out
    np.testing.assert_array_equal(out, np.einsum(equation, *operands, out=np.zeros(out_shape)))


@pytest.mark.parametrize("shape", [(5, 1, 2), (2, 3), (1, 3)])
def test_out_of_another_rank_or_length_is_refused_as_numpy_refuses_it(shape):
    a = np.ones((1, 4))
    with pytest.raises(ValueError):
        np.einsum("ij,jk->ik", a, B, out=np.zeros(shape))
    out = np.full(shape, 7.0)
    with pytest.raises(ValueError, match="out has shape"):
        einjit.einsum("ij,jk->ik", a, B, out=out)
    assert (out == 7).all()


def _aliased_out(dtype, shape, strides, elements):
    """An out of `shape` over `elements` elements of memory at `strides` (in elements)."""
    base = np.zeros(elements, dtype)
    item = base.itemsize
    return base, np.lib.stride_tricks.as_strided(base, shape, tuple(item * s for s in strides))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("optimize", [False, True])
@pytest.mark.parametrize("equation, shapes, out_shape, out_strides, elements", [
    ("ij,jk->ik", [(3, 3), (3, 3)], (3, 3), (1, 1), 5),        # diagonals share an element
    ("ij,jk->ik", [(4, 5), (5, 6)], (4, 6), (2, 1), 12),
    ("ij,j->i", [(6, 7), (7,)], (6,), (0,), 1),                # every row into one element
    ("abc,cd->abd", [(2, 3, 4), (4, 5)], (2, 3, 5), (5, 3, 1), 20),
])
def test_an_out_whose_elements_alias_each_other_gets_numpys_sums(
        dtype, optimize, equation, shapes, out_shape, out_strides, elements):
    operands = [np.arange(1, 1 + np.prod(s)).reshape(s).astype(dtype) for s in shapes]
    base, out = _aliased_out(dtype, out_shape, out_strides, elements)
    expected, numpy_out = _aliased_out(dtype, out_shape, out_strides, elements)
    np.einsum(equation, *operands, out=numpy_out, optimize=optimize)
    assert einjit.einsum(equation, *operands, out=out, optimize=optimize) is out
    np.testing.assert_array_equal(base, expected)


@pytest.mark.parametrize("shape, strides, aliased", [
    ((3, 3), (1, 1), True),
    ((4,), (0,), True),
    ((2, 2), (3, 2), False),     # interleaved, but no element shared: 0, 2, 3, 5
    ((2, 3), (2, 1), True),      # row 0 column 2 is row 1 column 0
    ((3, 4), (4, 1), False),
    ((3, 4), (-4, -1), False),
    ((3, 1, 4), (4, 0, 1), False),
])
def test_aliased_elements_are_found_exactly(shape, strides, aliased):
    from einjit.einsum import _aliases_elements
    base = np.zeros(64, np.float64)
    start = base[32:]            # room either side for negative strides
    view = np.lib.stride_tricks.as_strided(start, shape, tuple(8 * s for s in strides))
    assert _aliases_elements(view) is aliased


def test_casting_no_refuses_float32_operands_into_a_float64_out():
    a, b = A.astype(np.float32), B.astype(np.float32)
    out = np.full((3, 2), 7.0)
    assert_same_error(lambda: einjit.einsum("ij,jk->ik", a, b, out=out, casting="no"),
                      lambda: np.einsum("ij,jk->ik", a, b, out=np.empty((3, 2)), casting="no"))
    assert (out == 7).all()


def test_an_explicit_optimize_reaches_numpy_as_given():
    # numpy's optimized path computes this BLAS product into an int64 out: so does the call
    # handed over with the caller's optimize=True
    out = np.zeros((3, 2), np.int64)
    with numpy_einsum_calls() as calls:
        result = einjit.einsum("ij,jk->ik", A, B, out=out, optimize=True)
    assert result is out
    assert np.array_equal(out, np.einsum("ij,jk->ik", A, B, out=np.zeros((3, 2), np.int64),
                                         optimize=True))
    assert calls[0][1]["optimize"] is True


HANDED_OVER = [
    ("float16", "ij,jk->ik", [A.astype(np.float16), B.astype(np.float16)]),
    ("big-endian", "ij,jk->ik", [A.astype(">f8"), B.astype(">f8")]),
    ("int", "ij,jk", [np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)]),
    ("zero-size", "ij,jk->ik", [np.ones((3, 0)), np.ones((0, 2))]),
]


@pytest.mark.parametrize("label, equation, operands", HANDED_OVER,
                         ids=[case[0] for case in HANDED_OVER])
def test_calls_handed_over_get_exactly_the_callers_arguments(label, equation, operands):
    with numpy_einsum_calls() as calls:
        ours = einjit.einsum(equation, *operands)
    theirs = np.einsum(equation, *operands)
    assert len(calls) == 1 and "optimize" not in calls[0][1]      # numpy's default: False
    assert calls[0][0] == (equation, *operands)
    assert type(ours) is type(theirs) and np.asarray(ours).dtype == np.asarray(theirs).dtype
    assert np.asarray(ours).tobytes() == np.asarray(theirs).tobytes()       # bit-identical
    for optimize in (True, False, "greedy"):
        with numpy_einsum_calls() as calls:
            ours = einjit.einsum(equation, *operands, optimize=optimize, order="K")
        assert calls[0][1]["optimize"] == optimize and calls[0][1]["order"] == "K"
        theirs = np.einsum(equation, *operands, optimize=optimize)
        assert np.asarray(ours).tobytes() == np.asarray(theirs).tobytes()


@pytest.mark.native
def test_calls_einjit_computes_never_reach_numpy():
    with numpy_einsum_forbidden():
        for optimize in ({}, {"optimize": True}, {"optimize": False}):
            result = einjit.einsum("ij,jk->ik", A, B, **optimize)
            np.testing.assert_allclose(result, A @ B, rtol=1e-14)
        out = np.empty((3, 2), np.float32)
        assert einjit.einsum("ij,jk->ik", A, B, out=out, casting="same_kind") is out
    np.testing.assert_allclose(out, (A @ B).astype(np.float32), rtol=1e-6)


def test_contract_expression_refuses_an_out_its_dtype_cannot_cast_to():
    expr = einjit.contract_expression("ij,jk->ik", A.shape, B.shape, dtype="float64")
    for out_dtype in (np.int64, np.int32, np.float32, np.bool_):
        out = np.full((3, 2), 7, out_dtype)
        with pytest.raises(TypeError, match=f"out's dtype {np.dtype(out_dtype)}"):
            expr(A, B, out=out)
        assert np.array_equal(out, np.full((3, 2), 7, out_dtype))
    with pytest.raises(TypeError, match="out must be a numpy array"):
        expr(A, B, out=[[0.0] * 2] * 3)
    out = np.zeros((3, 2), np.complex128)            # a cast 'safe' allows: numpy computes
    assert expr(A, B, out=out) is out
    np.testing.assert_allclose(out, A @ B, rtol=1e-14)


# --- order= ---------------------------------------------------------------------------------

@pytest.mark.parametrize("order", [None, "k", "K", b"C", "c", "f", "a", np.str_("F")])
def test_orders_numpy_accepts(order):
    theirs = np.einsum("ij,jk->ik", A, B, order=order)
    with numpy_einsum_forbidden():
        ours = einjit.einsum("ij,jk->ik", A, B, order=order)
    np.testing.assert_allclose(ours, theirs, rtol=1e-14)
    assert ours.flags.c_contiguous == theirs.flags.c_contiguous
    assert ours.flags.f_contiguous == theirs.flags.f_contiguous


@pytest.mark.parametrize("order", [5, 1.0, "X", "", "CC", "Fortran"])
def test_orders_numpy_refuses(order):
    assert_same_error(lambda: einjit.einsum("ij,jk->ik", A, B, order=order),
                      lambda: np.einsum("ij,jk->ik", A, B, order=order))


LAYOUTS = {
    "C": lambda shape: np.ones(shape),
    "F": lambda shape: np.asfortranarray(np.ones(shape)),
    "strided": lambda shape: np.ones(tuple(2 * n for n in shape))[tuple(slice(None, None, 2)
                                                                       for _ in shape)],
}
ORDER_CASES = [
    ("...ft,mf->...mt", [(2, 3, 5), (4, 3)]), ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]), ("i,j->ij", [(3,), (4,)]), ("ij,j->ij", [(3, 4), (4,)]),
    ("ii,ij->ij", [(3, 3), (3, 4)]), ("ij,kl->ijkl", [(2, 3), (4, 2)]),
]


@pytest.mark.native
@pytest.mark.parametrize("order", ["C", "F", "A"])
@pytest.mark.parametrize("equation, shapes", ORDER_CASES)
def test_result_layouts_are_numpys(equation, shapes, order):
    """order='C'/'F'/'A' lay the result out as numpy does ('A': F where every operand, read
    as numpy reads it, is Fortran-contiguous); 'K' is einjit's choice, as numpy's differs
    between its own paths."""
    for layouts in [("C",) * len(shapes), ("F",) * len(shapes), ("F", "C")[:len(shapes)],
                    ("strided",) * len(shapes)]:
        operands = [LAYOUTS[layout](shape) for layout, shape in zip(layouts, shapes)]
        theirs = np.einsum(equation, *operands, order=order)
        with numpy_einsum_forbidden():
            ours = einjit.einsum(equation, *operands, order=order)
        label = (equation, layouts, order)
        assert ours.flags.c_contiguous == theirs.flags.c_contiguous, label
        assert ours.flags.f_contiguous == theirs.flags.f_contiguous, label
        np.testing.assert_allclose(ours, theirs, rtol=1e-14)


# --- views -----------------------------------------------------------------------------------

VIEWS = [
    ("ii->i", (4, 4)), ("ij->ji", (3, 4)), ("ij->ij", (3, 4)), ("ij", (3, 4)), ("ji", (3, 4)),
    ("...->...", (2, 3)), ("i...->...i", (2, 3, 4)), ("...ii->...i", (2, 3, 3)),
    ("iji->ij", (3, 2, 3)), ("ijk->kji", (2, 3, 4)), ("ij->ij", (1, 4)),
]


@pytest.mark.parametrize("equation, shape", VIEWS)
@pytest.mark.parametrize("options", [{}, {"optimize": True}, {"order": "C"},
                                     {"dtype": np.float32, "casting": "same_kind"}])
def test_views_numpy_returns_are_views(equation, shape, options):
    operand = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    theirs = np.einsum(equation, operand, **options)
    ours = einjit.einsum(equation, operand, **options)
    assert np.shares_memory(theirs, operand)
    assert np.shares_memory(ours, operand) and ours.flags.writeable
    assert ours.strides == theirs.strides and ours.dtype == theirs.dtype
    ours[...] = -1                                   # writes through to the operand
    np.testing.assert_array_equal(np.einsum(equation, operand), -np.ones(theirs.shape))


@pytest.mark.native
@pytest.mark.parametrize("equation, shape", [("ij->i", (3, 4)), ("ii", (3, 3)),
                                             ("ii->", (3, 3)), ("iij->j", (3, 3, 2))])
def test_a_summation_is_computed_not_viewed(equation, shape):
    operand = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    with numpy_einsum_forbidden():
        ours = einjit.einsum(equation, operand)
    assert not np.shares_memory(ours, operand)
    np.testing.assert_allclose(ours, np.einsum(equation, operand), rtol=1e-14)


# --- paths ------------------------------------------------------------------------------------

@pytest.mark.parametrize("equation, path", [
    ("ab,bc,cd,de->ae", ["einsum_path", (2, 3), (0, 1)]),
    ("a,a,a->a", ["einsum_path", (1,), (0, 1)]),
    ("ab,bc->ac", [(0, 2)]),
])
def test_an_invalid_explicit_path_is_numpys_runtime_error(equation, path):
    terms = equation.split("->")[0].split(",")
    operands = [np.ones([2] * len(term)) for term in terms]
    with pytest.raises(RuntimeError) as info:
        einjit.einsum(equation, *operands, optimize=path)
    assert isinstance(info.value, einjit.EinsumPathError) and isinstance(info.value, ValueError)
    if path[0] == "einsum_path":
        with pytest.raises(RuntimeError):
            np.einsum(equation, *operands, optimize=path)


def test_numpys_other_optimize_forms():
    a, b, c = np.ones((3, 4)), np.ones((4, 5)), np.ones((5, 2))
    expected = a @ b @ c
    with numpy_einsum_forbidden():
        for optimize in (None, ("greedy", 0), ("optimal", 10**6), ["einsum_path", (0, 1), (0, 1)]):
            np.testing.assert_allclose(einjit.einsum("ij,jk,kl->il", a, b, c,
                                                     optimize=optimize), expected)
    with pytest.raises(KeyError) as info:
        einjit.einsum("ij,jk,kl", a, b, c, optimize="fastest")
    assert "'fastest' is not a path name" in str(info.value)
    with pytest.raises(KeyError):
        np.einsum("ij,jk,kl", a, b, c, optimize="fastest")


# --- contract_expression's shapes -----------------------------------------------------------

def test_contract_expression_sizes_must_be_integers():
    with pytest.raises(TypeError, match=r"size 2\.5 is not an integer"):
        einjit.contract_expression("ij->ji", (2, 2.5))
    with pytest.raises(TypeError, match="size True is not an integer"):
        einjit.contract_expression("ij->ji", (2, True))
    with pytest.raises(ValueError, match="size -3 is negative"):
        einjit.contract_expression("ij->ji", (2, -3))
    with pytest.raises(TypeError, match="must be a sequence of integer sizes"):
        einjit.contract_expression("i->", 5)
    expr = einjit.contract_expression("ij->ji", (np.int64(2), np.int32(3)))
    assert expr.shapes == ((2, 3),) and all(type(n) is int for n in expr.shapes[0])


def test_contract_expression_takes_arrays_for_their_shapes():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    expr = einjit.contract_expression("ij,jk->ik", a, b)
    assert expr.shapes == ((3, 4), (4, 5))
    with numpy_einsum_forbidden():
        np.testing.assert_array_equal(expr(a, b), np.full((3, 5), 4, np.float32))


def test_contract_expression_of_zero_size_shapes_is_numpys():
    expr = einjit.contract_expression("ij,jk->ik", (4, 0), (0, 3))
    assert expr.empty and expr.shape == (4, 3)
    result = expr(np.ones((4, 0), np.float32), np.ones((0, 3), np.float32))
    assert result.shape == (4, 3) and result.dtype == np.float32 and not result.any()
    assert "numpy.einsum evaluates it" in str(expr)
    with pytest.raises(ValueError, match="no contraction tree"):
        expr.tree
    with pytest.raises(ValueError, match="subscript 'j' has size"):
        einjit.contract_expression("ij,jk->ik", (4, 0), (2, 3))


# --- operands that convert, __version__ --------------------------------------------------------

class WithArray:
    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array if dtype is None else self.array.astype(dtype)


class WithDLPack:
    """Only DLPack: numpy's own array conversion does not read it."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


@pytest.mark.native
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_operands_that_convert(dtype):
    a, b = A.astype(dtype), B.astype(dtype)
    expected = np.einsum("ij,jk->ik", a, b)
    for make in (WithArray, WithDLPack):
        with numpy_einsum_forbidden():
            ours = einjit.einsum("ij,jk->ik", make(a), make(b))
        assert type(ours) is np.ndarray and ours.dtype == dtype
        np.testing.assert_allclose(ours, expected, rtol=1e-6)
        expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape, dtype=dtype)
        with numpy_einsum_forbidden():
            np.testing.assert_allclose(expr(make(a), make(b)), expected, rtol=1e-6)
    view = einjit.einsum("ij->ji", WithDLPack(a))    # numpy's view of the DLPack memory
    assert np.shares_memory(view, a)
    # lists and Python scalars: as numpy converts them (float64)
    ours = einjit.einsum("ij,jk->ik", a.tolist(), b)
    theirs = np.einsum("ij,jk->ik", a.tolist(), b)
    assert type(ours) is np.ndarray and ours.dtype == theirs.dtype == np.float64
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    scaled = einjit.einsum(",ij->ij", 2.0, a)
    assert scaled.dtype == np.einsum(",ij->ij", 2.0, a).dtype
    np.testing.assert_allclose(scaled, 2 * a.astype(np.float64))
    dot = einjit.einsum("i,i", [1.0, 2.0], [3.0, 4.0])
    assert type(dot) is np.float64 and dot == 11.0
    with pytest.raises(TypeError):
        einjit.einsum("ij,jk->ik", WithDLPack(a), b, out=WithArray(np.empty((3, 2))))


def test_version():
    from importlib import metadata
    try:
        expected = metadata.version("einjit")
    except metadata.PackageNotFoundError:
        from pathlib import Path

        from einjit.version import pyproject_version
        expected = pyproject_version(Path(einjit.__file__).parents[1] / "pyproject.toml")
    assert einjit.__version__ == expected
    assert einjit.__version__[0].isdigit()


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_expression_out_in_every_layout(dtype):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((9, 7)).astype(dtype)
    b = rng.standard_normal((7, 5)).astype(dtype)
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape)
    expected = a.astype(np.float64) @ b
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    # C layout (written in place), Fortran layout, a strided view, another dtype: each result
    # right, out returned and filled, nothing around a view touched
    holder = np.full((9, 10), 7, dtype)
    outs = [np.full((9, 5), np.nan, dtype), np.full((9, 5), np.nan, dtype, order="F"),
            holder[:, ::2], np.full((9, 5), np.nan, "float64")]
    for out in outs:
        assert expr(a, b, out=out) is out
        np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance)
    assert (holder[:, 1::2] == 7).all()
    # out sharing memory with an operand: the result as if computed first, then written
    square = rng.standard_normal((6, 6)).astype(dtype)
    want = square.astype(np.float64) @ square
    same = einjit.contract_expression("ij,jk->ik", square.shape, square.shape)
    assert same(square, square, out=square) is square
    np.testing.assert_allclose(square, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", ["int8", "float16"])
def test_an_expression_numpy_evaluates_says_so_and_in_its_dtype(dtype):
    expr = einjit.contract_expression("ij,jk->ik", (2, 3), (3, 4), dtype=dtype)
    text = str(expr)
    assert f"numpy.einsum evaluates it in {dtype}" in text and "plan below is float32's" in text
    a, b = np.arange(6).reshape(2, 3).astype(dtype), np.arange(12).reshape(3, 4).astype(dtype)
    result = expr(a, b)
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result, np.einsum("ij,jk->ik", a, b))
    assert "numpy.einsum evaluates" not in str(
        einjit.contract_expression("ij,jk->ik", (2, 3), (3, 4), dtype="float64"))
