"""Errors of einjit.einsum have numpy's exception type (checked against numpy.einsum on the
same call) and a message naming the bad part, for float32 and float64 operands; dtype=, out=
and casting= follow numpy's rules (promotion, the casting rule's errors), and what einjit
has no kernels for goes to numpy.einsum."""

import itertools

import numpy as np
import pytest
from frontend_support import DTYPES, assert_close, numpy_einsum_forbidden

import einjit

F = np.float32


def ones(*shape):
    return np.ones(shape, F)


def error_cases(dtype):
    def ones(*shape):
        return np.ones(shape, dtype)
    return [
        # (label, args, kwargs, words expected in einjit's message)
        ("bad character", ("i$->i", ones(3)), {}, "'$'"),
        ("two arrows", ("ij->i->j", ones(2, 2)), {}, "'->'"),
        ("lone dot", ("i.j", ones(2, 2)), {}, "'.'"),
        ("dangling dash", ("ij-", ones(2, 2)), {}, "'-'"),
        ("more operands", ("ij", ones(2, 2), ones(2, 2)), {}, "more operands"),
        ("fewer operands", ("ij,jk", ones(2, 2)), {}, "fewer operands"),
        ("too many subscripts", ("ijk", ones(2, 2)), {}, "operand 0 has 2 dimensions"),
        ("too few subscripts", ("i", ones(2, 2)), {}, "no '...'"),
        ("repeated output", ("ij->ii", ones(2, 2)), {}, "more than once"),
        ("output not in input", ("ij->k", ones(2, 2)), {}, "'k' appears in no input"),
        ("size mismatch", ("ij,jk->ik", ones(2, 3), ones(4, 5)), {},
         "subscript 'j' has size"),
        ("diagonal mismatch", ("ii->i", ones(2, 3)), {}, "differ (2 != 3)"),
        ("ellipsis mismatch", ("...i,...i", ones(2, 3), ones(4, 3)), {}, "broadcast dimension"),
        ("ellipsis dropped", ("...i->i", ones(2, 3)), {}, "add '...'"),
        ("two ellipses", ("......i", ones(2, 3)), {}, "more than one '...'"),
        ("sublist float", (ones(3), [0.5]), {}, "0.5"),
        ("sublist range", (ones(3), [60]), {}, "60"),
        ("nothing", (), {}, "at least"),
        ("no subscripts", (ones(3),), {}, "at least"),
        ("out shape", ("ij,jk->ik", ones(2, 3), ones(3, 4)), {"out": ones(2, 3)}, "shape"),
        ("out read-only", ("ij->ij", ones(2, 3)), {"out": np.broadcast_to(ones(2, 3), (2, 3))},
         None),
        ("out int dtype", ("i->i", ones(3)), {"out": np.ones(3, np.int32)}, None),
        ("bad order", ("ij->ji", ones(2, 3)), {"order": "X"}, None),
        ("bad casting", ("ij,jk", ones(2, 3), ones(3, 2)), {"casting": "bogus"}, None),
        ("out of the other float dtype, optimize=False",
         ("ij,jk->ik", ones(2, 3), ones(3, 4)),
         {"out": np.ones((2, 4), np.float32 if dtype == np.float64 else np.float64),
          "optimize": False, "casting": "no"}, None),
        ("dtype= the other float dtype, casting='equiv'", ("ij,jk->ik", ones(2, 3), ones(3, 4)),
         {"dtype": np.float32 if dtype == np.float64 else np.float64, "casting": "equiv"}, None),
    ]


CASES = [(np.dtype(dtype).name, *case) for dtype in DTYPES for case in error_cases(dtype)]


def outcome(function, args, kwargs):
    try:
        function(*args, **kwargs)
    except Exception as error:  # the type is what is compared
        return error
    return None


@pytest.mark.parametrize("dtype, label, args, kwargs, words", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_error_types_match_numpy(dtype, label, args, kwargs, words):
    expected = outcome(np.einsum, args, dict(kwargs))
    assert expected is not None, f"numpy accepts {label}"
    error = outcome(einjit.einsum, args, dict(kwargs))
    assert error is not None, f"einjit accepts {label}"
    for base in (ValueError, TypeError):
        assert isinstance(error, base) == isinstance(expected, base), (error, expected)
    if words is not None:
        assert words in str(error)
        assert isinstance(error, einjit.EinjitError)


def test_subscript_errors_point_at_the_label():
    with pytest.raises(ValueError) as info:
        einjit.einsum("ij,jk->iz", ones(2, 2), ones(2, 2))
    lines = str(info.value).splitlines()
    assert lines[-2].strip() == "ij,jk->iz"
    assert lines[-1].index("^") - 2 == "ij,jk->iz".index("z")


def test_unknown_optimize_names():
    with pytest.raises(ValueError, match="not a path name"):
        einjit.einsum("ij,jk", ones(2, 2), ones(2, 2), optimize="fastest")
    with pytest.raises(TypeError):
        einjit.einsum("ij,jk", ones(2, 2), ones(2, 2), optimize=5)
    with pytest.raises(ValueError, match="leaves 2 operands"):
        einjit.einsum("ij,jk,kl", ones(2, 2), ones(2, 2), ones(2, 2), optimize=[(0, 1)])
    with pytest.raises(ValueError, match="distinct positions"):
        einjit.einsum("ij,jk", ones(2, 2), ones(2, 2), optimize=[(0, 2)])


@pytest.mark.parametrize("value", [1, 0, 1.0])
def test_a_number_for_optimize_is_refused_after_a_bool_planned_alike(value):
    # 1 == True and 0 == False: a plan cached for the bool must not answer the number
    a, b = ones(3, 4), ones(4, 5)
    einjit.einsum("ij,jk->ik", a, b, optimize=bool(value))
    with pytest.raises(TypeError, match="optimize must be"):
        einjit.einsum("ij,jk->ik", a, b, optimize=value)


# calls einjit has no kernels for: numpy.einsum computes them (and einjit's call reaches it);
# complex ones run on the kernels (test_einsum_complex.py)
DELEGATED = [
    ("ij,jk->ik", [np.ones((2, 3), np.int32), np.ones((3, 4), np.int64)], {}),     # ints
    ("ij,jk->ik", [np.ones((2, 3), np.int32), ones(3, 4)], {}),                    # int + float
    ("ij,jk->ik", [np.ones((2, 3), np.float16), np.ones((3, 4), np.float16)], {}),
    ("ij,jk->ik", [np.ones((2, 3), np.longdouble), np.ones((3, 4))], {}),
    ("ij,jk->ik", [np.ones((2, 3), ">f8"), np.ones((3, 4), ">f8")], {}),         # byte-swapped
    ("ij,jk", [ones(2, 3), ones(3, 4)], {"dtype": np.float16, "casting": "unsafe"}),
    ("ij,jk", [np.ones((2, 3)), np.ones((3, 4))], {"dtype": np.int32, "casting": "unsafe"}),
    ("ij,jk", [np.ones((2, 3)), np.ones((3, 4))],
     {"out": np.zeros((2, 4), np.int32), "casting": "unsafe"}),
    ("i,j->ij", [ones(0), ones(3)], {}),                                          # zero-size
    ("i,j->ij", [np.ones(0), np.ones(3)], {}),
]


@pytest.mark.parametrize("equation, operands, kwargs", DELEGATED)
def test_other_dtypes_are_numpys(equation, operands, kwargs):
    with numpy_einsum_forbidden(), pytest.raises(AssertionError, match="numpy.einsum was called"):
        einjit.einsum(equation, *operands, **dict(kwargs))
    ours = einjit.einsum(equation, *operands, **dict(kwargs))
    theirs = np.einsum(equation, *operands, **dict(kwargs))
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    assert np.shape(ours) == np.shape(theirs)
    np.testing.assert_array_equal(ours, theirs)


def _wide(rng, shape, dtype):
    # values with more bits than float32 holds: a float32 computation would show
    return rng.uniform(-1, 1, shape).astype(dtype)


# mixed float32/float64 operands, dtype= and out= that numpy computes in float32 or float64:
# einjit's kernels compute them, in numpy's dtype
PROMOTED = [
    (",i->i", lambda r: [2.0, _wide(r, 3, F)], {}),                  # python float: float64
    ("ij,jk->ik", lambda r: [_wide(r, (9, 7), F), _wide(r, (7, 5), np.float64)], {}),
    ("ij,jk,kl->il", lambda r: [_wide(r, (4, 6), np.float64), _wide(r, (6, 5), F),
                                _wide(r, (5, 3), F)], {}),
    ("ij,jk", lambda r: [_wide(r, (9, 7), F), _wide(r, (7, 5), F)], {"dtype": np.float64}),
    ("ij,jk", lambda r: [_wide(r, (9, 7), F), _wide(r, (7, 5), F)],
     {"dtype": "float64", "casting": "safe"}),
    ("ij,jk", lambda r: [_wide(r, (9, 7), np.float64), _wide(r, (7, 5), F)],
     {"dtype": np.float32, "casting": "same_kind"}),
    ("ij,jk", lambda r: [_wide(r, (9, 7), F), _wide(r, (7, 5), F)],
     {"out": np.zeros((9, 5))}),
    ("ij,jk", lambda r: [_wide(r, (9, 7), np.float64), _wide(r, (7, 5), np.float64)],
     {"out": np.zeros((9, 5), F), "casting": "same_kind"}),
    ("bij,bjk->bik", lambda r: [_wide(r, (3, 4, 6), F), _wide(r, (3, 6, 5), np.float64)],
     {"order": "F"}),
]


@pytest.mark.native
@pytest.mark.parametrize("index", range(len(PROMOTED)))
def test_mixed_dtypes_promote_as_numpy_on_einjits_kernels(index):
    equation, make, kwargs = PROMOTED[index]
    operands = make(np.random.default_rng(index))
    theirs = np.einsum(equation, *operands, **{k: (np.empty_like(v) if k == "out" else v)
                                               for k, v in kwargs.items()})
    with numpy_einsum_forbidden():
        ours = einjit.einsum(equation, *operands, **kwargs)
    kind = np.asarray(theirs).dtype
    assert np.asarray(ours).dtype == kind and type(ours) is type(theirs)
    if "out" in kwargs:
        assert ours is kwargs["out"]
    # numpy casts each operand to the computing dtype first: so does the reference
    cast = [np.asarray(o).astype(kind).astype(np.longdouble) for o in operands]
    assert_close(ours, np.einsum(equation, *cast), kind, 10)


def einjit_outcome(call):
    """(the call's result or its ValueError/TypeError, whether numpy.einsum stayed out)."""
    try:
        with numpy_einsum_forbidden():
            return call(), True
    except AssertionError as error:
        if "numpy.einsum was called" not in str(error):
            raise
    except (TypeError, ValueError) as error:
        return error, True
    try:
        return call(), False
    except (TypeError, ValueError) as error:
        return error, False


INPUTS = [(np.float32, np.float32), (np.float32, np.float64), (np.float64, np.float64)]
KINDS = (None, np.float32, np.float64)


@pytest.mark.native
@pytest.mark.parametrize("optimize", [False, True])
@pytest.mark.parametrize("casting", ["no", "equiv", "safe", "same_kind", "unsafe"])
def test_dtype_out_and_casting_follow_numpy(casting, optimize):
    """Every float32/float64 combination of operands, dtype= and out= under each casting
    rule: numpy's error type where numpy refuses; else numpy's result dtype, out returned,
    numpy's values, and einjit's kernels computing exactly the calls numpy's casting rule
    allows (numpy's unoptimized einsum: the computing dtype is dtype=, else the promotion of
    the operands and out; each operand casts to it, and out both ways). The few calls only
    numpy's optimize path accepts besides (a BLAS product cast into out) stay numpy's."""
    rng = np.random.default_rng(31)
    for inputs, dtype, out_dtype in itertools.product(INPUTS, KINDS, KINDS):
        a = rng.uniform(-1, 1, (5, 6)).astype(inputs[0])
        b = rng.uniform(-1, 1, (6, 4)).astype(inputs[1])
        options = dict(dtype=dtype, casting=casting, optimize=optimize)
        label = (inputs, dtype, out_dtype, casting, optimize)

        def out():
            return None if out_dtype is None else np.full((5, 4), np.nan, out_dtype)
        expected = outcome(lambda: np.einsum("ij,jk->ik", a, b, out=out(), **options), (), {})
        theirs = None if expected is not None else \
            np.einsum("ij,jk->ik", a, b, out=out(), **options)
        target = out()
        ours, native = einjit_outcome(
            lambda: einjit.einsum("ij,jk->ik", a, b, out=target, **options))
        if expected is not None:
            assert isinstance(ours, Exception), label
            for base in (ValueError, TypeError):
                assert isinstance(ours, base) == isinstance(expected, base), (label, ours)
            continue
        assert not isinstance(ours, Exception), (label, ours)
        assert ours.dtype == theirs.dtype, label
        if target is not None:
            assert ours is target, label
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=str(label))
        computing = np.dtype(dtype) if dtype is not None else \
            np.result_type(a, b, *([] if target is None else [target]))
        allowed = all(np.can_cast(x.dtype, computing, casting) for x in (a, b)) and (
            target is None or (np.can_cast(computing, target.dtype, casting)
                               and np.can_cast(target.dtype, computing, casting)))
        assert native == allowed, label
