"""Errors of einjit.einsum have numpy's exception type (checked against numpy.einsum on the
same call) and a message naming the bad part."""

import numpy as np
import pytest

import einjit

F = np.float32


def ones(*shape):
    return np.ones(shape, F)


CASES = [
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
    ("size mismatch", ("ij,jk->ik", ones(2, 3), ones(4, 5)), {}, "subscript 'j' has size"),
    ("diagonal mismatch", ("ii->i", ones(2, 3)), {}, "differ (2 != 3)"),
    ("ellipsis mismatch", ("...i,...i", ones(2, 3), ones(4, 3)), {}, "broadcast dimension"),
    ("ellipsis dropped", ("...i->i", ones(2, 3)), {}, "add '...'"),
    ("two ellipses", ("......i", ones(2, 3)), {}, "more than one '...'"),
    ("sublist float", (ones(3), [0.5]), {}, "0.5"),
    ("sublist range", (ones(3), [60]), {}, "60"),
    ("nothing", (), {}, "at least"),
    ("no subscripts", (ones(3),), {}, "at least"),
    ("out shape", ("ij,jk->ik", ones(2, 3), ones(3, 4)), {"out": ones(2, 3)}, "shape"),
    ("out read-only", ("ij->ij", ones(2, 3)), {"out": np.broadcast_to(ones(2, 3), (2, 3))}, None),
    ("out int dtype", ("i->i", ones(3)), {"out": np.ones(3, np.int32)}, None),
    ("bad order", ("ij->ji", ones(2, 3)), {"order": "X"}, None),
    ("bad casting", ("ij,jk", ones(2, 3), ones(3, 2)), {"casting": "bogus"}, None),
]


def outcome(function, args, kwargs):
    try:
        function(*args, **kwargs)
    except Exception as error:  # the type is what is compared
        return error
    return None


@pytest.mark.parametrize("label, args, kwargs, words", CASES, ids=[c[0] for c in CASES])
def test_error_types_match_numpy(label, args, kwargs, words):
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


DELEGATED = [
    ("ij,jk->ik", [np.ones((2, 3)), np.ones((3, 4))], {}),                       # float64
    ("ij,jk->ik", [np.ones((2, 3), np.int32), np.ones((3, 4), np.int64)], {}),     # ints
    (",i->i", [2.0, np.ones(3, F)], {}),                                          # mix
    ("ij,jk", [ones(2, 3), ones(3, 4)], {"dtype": np.float64}),
    ("ij,jk", [ones(2, 3), ones(3, 4)], {"out": np.zeros((2, 4))}),
    ("i,j->ij", [ones(0), ones(3)], {}),                                          # zero-size
    ("ij->i", [np.ones((2, 3), np.complex64)], {}),
]


@pytest.mark.parametrize("equation, operands, kwargs", DELEGATED)
def test_other_dtypes_are_numpys(equation, operands, kwargs):
    ours = einjit.einsum(equation, *operands, **dict(kwargs))
    theirs = np.einsum(equation, *operands, **dict(kwargs))
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    assert np.shape(ours) == np.shape(theirs)
    np.testing.assert_array_equal(ours, theirs)
