"""einjit.einsum_path, einjit.tensordot and einjit.transpose against numpy's, and einjit as a
backend of opt_einsum (backend="einjit"), autoray and cotengra. Counting spies prove the
calls ran through einjit.einsum (and so on einjit's kernels) rather than numpy's functions."""

import subprocess
import sys

import numpy as np
import pytest
from frontend_support import jit_available, numpy_einsum_forbidden

import einjit
from einjit import numpy_api
from einjit.frontend import plan

pytestmark = pytest.mark.skipif(not jit_available(),
                                reason="needs einjit.optimize and einjit.codegen to execute")


@pytest.fixture
def einsum_calls(monkeypatch):
    """How many times numpy_api's tensordot called einjit.einsum."""
    calls = []
    original = numpy_api.einsum

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)
    monkeypatch.setattr(numpy_api, "einsum", counting)
    return calls


def _operands(rng, equation, sizes, dtype=np.float64):
    terms = equation.split("->")[0].split(",")
    return [rng.standard_normal([sizes[c] for c in t]).astype(dtype) for t in terms]


# -- einsum_path --------------------------------------------------------------------------------
PATH_CASES = [
    ("ij,jk,kl->il", {"i": 3, "j": 4, "k": 5, "l": 6}),
    ("abc,bcd,de,ea->", {"a": 4, "b": 3, "c": 5, "d": 6, "e": 2}),
    ("af,fbg,gch,hdi,ie->abcde", {c: n for c, n in zip("abcdefghi", (3, 4, 2, 5, 3, 6, 7, 5, 4))}),
    ("ij,jk->ik", {"i": 8, "j": 9, "k": 7}),
    ("ea,fb,abcd,gc,hd->efgh", {c: n for c, n in zip("abcdefgh", (10, 9, 8, 7, 6, 5, 4, 3))}),
    ("ii,ij,jk->k", {"i": 5, "j": 4, "k": 3}),
]


@pytest.mark.parametrize("optimize", ["greedy", "optimal", True, False, "dp"])
@pytest.mark.parametrize("equation, sizes", PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_einsum_path_is_einjits_order_and_valid_for_both(equation, sizes, optimize):
    rng = np.random.default_rng(len(equation))
    arrays = _operands(rng, equation, sizes)
    path, report = einjit.einsum_path(equation, *arrays, optimize=optimize)
    assert path[0] == "einsum_path"
    assert all(type(step) is tuple and all(type(p) is int for p in step) for step in path[1:])
    # the order einjit contracts in: its tree for this optimize= equals its tree for the path
    resolved = einjit.frontend.subscripts.resolve(equation, [a.shape for a in arrays])
    planned = einjit.EinsumTree.from_dims(resolved.inputs, resolved.output, resolved.sizes,
                                          optimize)
    replayed = einjit.EinsumTree.from_dims(resolved.inputs, resolved.output, resolved.sizes,
                                           path)
    assert planned == replayed
    assert f"Optimized FLOP count:  {planned.flops():.3e}" in report
    expected = np.einsum(equation, *arrays)
    np.testing.assert_allclose(np.einsum(equation, *arrays, optimize=path), expected,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(einjit.einsum(equation, *arrays, optimize=path), expected,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation, sizes", PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_einsum_path_report_has_numpys_layout(equation, sizes):
    """For numpy's own path, every line but the optimized count and the speedup (einjit's
    flops) is numpy's, character for character."""
    rng = np.random.default_rng(7)
    arrays = _operands(rng, equation, sizes)
    numpy_path, numpy_report = np.einsum_path(equation, *arrays, optimize="greedy")
    path, report = einjit.einsum_path(equation, *arrays, optimize=numpy_path)
    assert path == numpy_path
    ours, theirs = report.split("\n"), numpy_report.split("\n")
    assert len(ours) == len(theirs)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert set(differ) <= {4, 5}, (report, numpy_report)
    assert ours[4].startswith("  Optimized FLOP count:  ")
    assert ours[5].startswith("   Theoretical speedup:  ")


def test_einsum_path_single_operand_ellipsis_and_sublists():
    a = np.ones((2, 3, 4))
    path, report = einjit.einsum_path("...i->...", a)
    assert path == ["einsum_path", (0,)]
    numpy_path, numpy_report = np.einsum_path("...i->...", a)
    assert path == numpy_path and len(report.split("\n")) == len(numpy_report.split("\n"))
    assert report.split("\n")[0] == "  Complete contraction:  abi->ab"   # ellipsis as letters
    b = np.ones((4, 5))
    assert einjit.einsum_path(a, [0, 1, 2], b, [2, 3], [0, 3])[0] == \
        einjit.einsum_path("abc,cd->ad", a, b)[0]


@pytest.mark.parametrize("equation, shapes", [
    ("ij,j->i", [(3, 4), (1,)]),                       # size-1 broadcasting
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),       # ellipsis
    ("ii->", [(4, 4)]),                                # diagonal
    (",ij->ij", [(), (2, 3)]),                         # a scalar operand
    ("ij,ij,ij->", [(3, 4)] * 3),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),                # numpy: one step; einjit: pairs
])
def test_einsum_path_edge_equations(equation, shapes):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) for s in shapes]
    path, report = einjit.einsum_path(equation, *arrays)
    expected = np.einsum(equation, *arrays)
    np.testing.assert_allclose(np.einsum(equation, *arrays, optimize=path), expected,
                               rtol=1e-12)
    np.testing.assert_allclose(einjit.einsum(equation, *arrays, optimize=path), expected,
                               rtol=1e-12)
    assert len(report.split("\n")) == 10 + len(path) - 1


def test_einsum_path_hands_other_dtypes_to_numpy():
    a, b, c = (np.arange(12).reshape(3, 4), np.arange(20).reshape(4, 5),
               np.arange(30).reshape(5, 6))
    assert einjit.einsum_path("ij,jk,kl->il", a, b, c) == \
        np.einsum_path("ij,jk,kl->il", a, b, c)


def test_einsum_path_einsum_call_gives_numpys_contraction_list_for_einjits_path():
    rng = np.random.default_rng(3)
    arrays = _operands(rng, "ij,jk,kl->il", {"i": 3, "j": 4, "k": 5, "l": 6})
    path, _ = einjit.einsum_path("ij,jk,kl->il", *arrays)
    _, contractions = einjit.einsum_path("ij,jk,kl->il", *arrays, einsum_call=True)
    assert [sorted(c[0]) for c in contractions] == [sorted(step) for step in path[1:]]


def test_einsum_path_bad_path_name():
    with pytest.raises(ValueError, match="not a path name"):
        einjit.einsum_path("ij,jk->ik", np.ones((2, 2)), np.ones((2, 2)), optimize="fastest")


# -- tensordot and transpose --------------------------------------------------------------------
TENSORDOT_CASES = [
    ((3, 4), (4, 5), 1),
    ((3, 4, 5), (4, 5, 6), 2),
    ((3, 4, 5), (5, 4, 2), ([1, 2], [1, 0])),
    ((3, 4, 5), (4, 3), ([-2, 0], [0, -1])),
    ((3, 4), (5, 6), 0),
    ((6,), (6,), 1),
    ((6,), (6,), ([0], [0])),
    ((2, 3), (3, 2), (1, 0)),
    ((7, 8, 9), (7, 8, 9), 3),
    ((), (3, 2), 0),
]


@pytest.mark.native
@pytest.mark.parametrize("dtypes", [(np.float64, np.float64), (np.float32, np.float32),
                                    (np.float32, np.float64), (np.complex64, np.complex64),
                                    (np.float32, np.complex128)],
                         ids=["f8", "f4", "f4f8", "c8", "f4c16"])
@pytest.mark.parametrize("shape_a, shape_b, axes", TENSORDOT_CASES,
                         ids=[str(c) for c in range(len(TENSORDOT_CASES))])
def test_tensordot_matches_numpy_and_runs_on_einjit(shape_a, shape_b, axes, dtypes,
                                                    einsum_calls):
    rng = np.random.default_rng(11)

    def operand(shape, dtype):         # complex: both parts random
        values = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            values = values + 1j * rng.standard_normal(shape)
        return values.astype(dtype)
    a, b = operand(shape_a, dtypes[0]), operand(shape_b, dtypes[1])
    expected = np.tensordot(a, b, axes)
    with numpy_einsum_forbidden():
        result = einjit.tensordot(a, b, axes)
    assert len(einsum_calls) == 1
    assert type(result) is np.ndarray and result.dtype == expected.dtype
    assert result.shape == expected.shape and result.flags.c_contiguous
    tolerance = 1e-5 if expected.dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("a, b, axes", [
    (np.arange(12).reshape(3, 4), np.arange(20).reshape(4, 5), 1),
    (np.ones((3, 4), np.float16), np.ones((4, 2), np.float16), 1),
    (np.ones((0, 4)), np.ones((4, 2)), 1),
    (np.ones((3, 4), bool), np.ones((4, 2), bool), ([1], [0])),
], ids=["int", "float16", "empty", "bool"])
def test_tensordot_other_dtypes_are_numpys_exactly(a, b, axes, einsum_calls):
    result, expected = einjit.tensordot(a, b, axes), np.tensordot(a, b, axes)
    assert not einsum_calls
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("shape_a, shape_b, axes", [
    ((3, 4), (5, 6), 1),                 # sizes differ
    ((3, 4), (4, 5), 3),                 # more axes than a has
    ((3, 4), (4, 5), ([1, 0], [0])),     # counts differ
    ((3, 4), (4, 5), ([5], [0])),        # out of range
    ((3, 3), (3, 3), ([0, 0], [0, 1])),  # repeated
    ((3, 4), (4, 5), "ab"),              # not axes
    ((3, 4), (4, 5), (1, 2, 3)),         # not a pair
])
def test_tensordot_errors_are_numpys(shape_a, shape_b, axes):
    a, b = np.ones(shape_a), np.ones(shape_b)
    with pytest.raises(Exception) as numpy_error:
        np.tensordot(a, b, axes)
    with pytest.raises(numpy_error.type) as ours:
        einjit.tensordot(a, b, axes)
    assert str(ours.value) == str(numpy_error.value)


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (-1, 0, -2), [2, 1, 0]])
def test_transpose_is_numpys_view(axes):
    a = np.arange(24.).reshape(2, 3, 4)
    result = einjit.transpose(a, axes)
    expected = np.transpose(a, axes)
    assert result.shape == expected.shape and result.strides == expected.strides
    assert np.shares_memory(result, a)
    np.testing.assert_array_equal(result, expected)
    with pytest.raises(ValueError):
        einjit.transpose(a, (0, 0, 1))


# -- opt_einsum, autoray, cotengra --------------------------------------------------------------
CONTRACTIONS = [
    ("ij,jk,kl->il", {"i": 6, "j": 7, "k": 8, "l": 5}),
    ("abc,bcd,de->ae", {"a": 4, "b": 5, "c": 3, "d": 6, "e": 7}),
    ("ab,bc,cd,dae->e", {"a": 3, "b": 4, "c": 5, "d": 6, "e": 2}),
    ("ea,fb,abcd,gc,hd->efgh", {c: n for c, n in zip("abcdefgh", (5, 4, 3, 6, 2, 3, 4, 5))}),
    ("ab,cd->abcd", {"a": 3, "b": 4, "c": 2, "d": 5}),
    ("ab,ab->", {"a": 30, "b": 20}),
    ("ij,ji->", {"i": 9, "j": 11}),
    ("abc,ab->c", {"a": 4, "b": 5, "c": 6}),
]


@pytest.fixture
def spied(monkeypatch):
    """Calls of the einjit functions the backends dispatch to, by name."""
    calls = {"einsum": 0, "tensordot": 0, "transpose": 0}
    for name in calls:
        original = getattr(einjit, name)

        def counting(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(einjit, name, counting)
    return calls


@pytest.fixture
def plan_runs(monkeypatch):
    """How many einjit plans ran (whichever einjit function a library kept a reference to)."""
    runs = []
    original = plan.Plan.run

    def counting(self, *args, **kwargs):
        runs.append(self)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(plan.Plan, "run", counting)
    return runs


@pytest.mark.native
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f8", "f4"])
@pytest.mark.parametrize("equation, sizes", CONTRACTIONS, ids=[c[0] for c in CONTRACTIONS])
def test_opt_einsum_backend_einjit(equation, sizes, dtype, plan_runs):
    opt_einsum = pytest.importorskip("opt_einsum")
    from opt_einsum.backends import dispatch
    dispatch.get_func("tensordot", "einjit")      # opt_einsum imports einjit by its name
    rng = np.random.default_rng(5)
    arrays = _operands(rng, equation, sizes, dtype)
    expected = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
    with numpy_einsum_forbidden():
        result = opt_einsum.contract(equation, *arrays, backend="einjit")
    assert plan_runs
    assert np.asarray(result).dtype == dtype
    tolerance = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)
    expression = opt_einsum.contract_expression(equation, *[a.shape for a in arrays])
    np.testing.assert_allclose(expression(*arrays, backend="einjit"), expected,
                               rtol=tolerance, atol=tolerance)


def test_autoray_dispatches_to_einjit(spied):
    autoray = pytest.importorskip("autoray")
    autoray.autoray._FUNCS.clear()          # look the spies up
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    np.testing.assert_allclose(autoray.do("tensordot", a, b, 1, like="einjit"), a @ b,
                               rtol=1e-12)
    np.testing.assert_allclose(autoray.do("einsum", "ij,jk->ki", a, b, like="einjit"),
                               (a @ b).T, rtol=1e-12)
    assert autoray.do("transpose", a, (1, 0), like="einjit").shape == (5, 4)
    assert spied == {"einsum": 1, "tensordot": 1, "transpose": 1}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f8", "f4"])
@pytest.mark.parametrize("equation, sizes", CONTRACTIONS, ids=[c[0] for c in CONTRACTIONS])
def test_cotengra_contract_through_einjit(equation, sizes, dtype, plan_runs):
    cotengra = pytest.importorskip("cotengra")
    rng = np.random.default_rng(9)
    arrays = _operands(rng, equation, sizes, dtype)
    expected = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
    with numpy_einsum_forbidden():
        result = cotengra.contract(equation, *arrays, backend="einjit")
    assert plan_runs
    tolerance = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)
    assert np.asarray(result).dtype == dtype


QUIMB_CHILD = """
import numpy as np, quimb.tensor as qtn
from einjit.frontend import plan
runs = []
original = plan.Plan.run
plan.Plan.run = lambda self, *a, **k: runs.append(self) or original(self, *a, **k)
mps = qtn.MPS_rand_state(8, bond_dim=6, dtype="float64", seed=3)
network = mps.H & mps
expected = network.contract(..., backend="numpy")
np.einsum = None                      # numpy's einsum must not be what computes it
result = network.contract(..., backend="einjit")
assert runs, "no einjit plan ran"
np.testing.assert_allclose(result, expected, rtol=1e-12)
print("quimb through einjit:", len(runs), "plans")
"""


def test_quimb_tensor_network_contracts_through_einjit():
    """quimb (not in an extra: it brings numba) hands backend= to cotengra. In a child process:
    numba maps a writable and executable page, which the W^X tests of this process forbid."""
    pytest.importorskip("quimb.tensor")
    child = subprocess.run([sys.executable, "-c", QUIMB_CHILD], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr
    assert "quimb through einjit:" in child.stdout
