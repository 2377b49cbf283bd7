"""The einsum benchmark's parallel-plan columns: einjit's speed-up over its one-thread plan,
measured, beside the parallel profile's prediction and its predicted efficiency on 16, 48 and
72 threads (peers replaced by a fixed time: only einjit's side is under test)."""

import numpy as np
import pytest

from benchmarks import einsum


@pytest.mark.native
def test_run_case_measures_one_thread_and_predicts_the_servers(monkeypatch):
    monkeypatch.setattr(einsum, "peer_seconds", lambda *args: ({"np.einsum": 1.0}, []))
    case = einsum.cases(quick=True, pattern="matrix chain")[0]
    result = einsum.run_case(case, {}, threads=2, peer_windows=1)
    scaling = result["scaling"]
    expression = case.compile("float32", threads=2)
    assert scaling["predicted"] == pytest.approx(
        2 * expression.parallel_profile(2).efficiency)
    assert 0 < scaling["measured"]
    assert set(scaling["efficiency"]) == set(einsum.PROFILE_THREADS)
    for count, efficiency in scaling["efficiency"].items():
        assert efficiency == pytest.approx(expression.parallel_profile(count).efficiency)
        assert 0 < efficiency <= 1
    lines = einsum._scaling_lines([result], 2)
    assert "2 threads over 1" in lines[0] and "16 / 48 / 72" in lines[0]
    assert lines[1].split()[:3] == ["matrix", "chain", "ij,jk,kl,lm"]
    assert f"{scaling['predicted']:5.2f}x" in lines[1]


@pytest.mark.native
def test_one_thread_runs_nothing_twice(monkeypatch):
    monkeypatch.setattr(einsum, "peer_seconds", lambda *args: ({"np.einsum": 1.0}, []))
    case = einsum.cases(quick=True, pattern="matrix chain")[0]
    result = einsum.run_case(case, {}, threads=1, peer_windows=1)
    assert result["scaling"]["measured"] == result["scaling"]["predicted"] == 1.0


@pytest.mark.native
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_cases_count_8_flops_a_multiply_add_on_complex_operands(monkeypatch, dtype):
    """--dtype complex64/complex128: complex operands (both parts random) for einjit and the
    peers, einjit's result checked against numpy's in complex128, and the flops of a complex
    multiply-add counted as 8 real ones (4 times the tree's count)."""
    monkeypatch.setattr(einsum, "peer_seconds", lambda *args: ({"np.einsum": 1.0}, []))
    case = einsum.cases(quick=True, pattern="matrix chain")[0]
    operands = einsum.operands_of(case.shapes, dtype)
    assert all(o.dtype == dtype and (o.imag != 0).all() for o in operands)
    result = einsum.run_case(case, {}, threads=1, dtype=dtype, peer_windows=1)
    assert result["flops"] == 4 * case.compile(dtype).tree.flops()
    assert 0 <= result["error"] < einsum.TOLERANCES[dtype]
    assert einsum.PEAK_DTYPE[dtype] == {"complex64": "float32", "complex128": "float64"}[dtype]
    # the error counts imaginary parts: a result off in them only is not within tolerance
    exact = operands[0] @ operands[0].T
    assert einsum.relative_error(exact.conj(), exact) > 0.1


def test_relative_error_keeps_numpys_blas_on_one_thread(monkeypatch):
    """The result checks that precede einjit's timings run numpy's BLAS on one thread: its
    other threads, once woken, spin on the cores einjit's threads are then timed on."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    seen = []
    norm = np.linalg.norm

    def recording_norm(values):
        seen.append([pool["num_threads"] for pool in threadpoolctl.threadpool_info()
                     if pool["user_api"] == "blas"])
        return norm(values)

    monkeypatch.setattr(einsum.np.linalg, "norm", recording_norm)
    reference = np.arange(1.0, 7.0).reshape(2, 3)
    assert einsum.relative_error(reference * (1 + 1e-3), reference) == pytest.approx(1e-3)
    assert len(seen) == 2 and all(seen), "no BLAS seen: nothing checked"
    assert all(count == 1 for counts in seen for count in counts), seen
