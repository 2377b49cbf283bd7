"""einjit.dask.contract_sliced: a sliced contraction's slices as tasks on a real
dask.distributed LocalCluster of 2 worker processes on the loopback address, started here,
whose workers each have a memory limit below the contraction's unsliced intermediates."""

import numpy as np
import pytest

pytest.importorskip("distributed", reason="this interpreter has no dask.distributed (the "
                                          "aarch64 lane's python): einjit.dask is tested on "
                                          "the host")
from dask_support import local_client  # noqa: E402

import einjit  # noqa: E402
import einjit.dask as ed  # noqa: E402
from einjit.frontend.errors import EinsumTypeError  # noqa: E402

pytestmark = pytest.mark.slow
WORKER_BYTES = 400 << 20        # each worker's memory limit (its nanny restarts it beyond)


@pytest.fixture(scope="module")
def client():
    with local_client(memory_limit=WORKER_BYTES) as connected:
        yield connected


def operands(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


def test_a_network_larger_than_a_worker(client):
    # this order makes the outer product a,b,i,j (800 MB) before summing over i and j
    a, b, w = operands([(100, 100), (100, 100), (100, 100)])
    path = [(0, 1), (0, 1)]
    limit = 32 << 20
    whole = einjit.contract_expression("ai,bj,ij->ab", a, b, w, dtype="float64",
                                       optimize=path, memory_limit=limit)
    assert whole.slicing.unsliced_peak_bytes > WORKER_BYTES
    assert whole.slicing.peak_bytes <= limit
    workers = set(client.scheduler_info()["workers"])
    result = ed.contract_sliced("ai,bj,ij->ab", a, b, w, memory_limit=limit, client=client,
                                optimize=path)
    reference = np.einsum("ai,bj,ij->ab", a, b, w, optimize=True)
    np.testing.assert_allclose(result, reference, rtol=1e-10, atol=1e-10)
    # no worker was restarted (a nanny restarting one gives it a new address)
    assert set(client.scheduler_info()["workers"]) == workers


@pytest.mark.parametrize("equation, shapes, limit, dtype", [
    # a sliced output index: each part written once
    ("ab,bc,cd->ad", [(64, 48), (48, 512), (512, 40)], 40_000, "float64"),
    # an output index and contracted ones sliced: each part a sum of slices, float32
    ("ai,bj,ij->ab", [(2, 60), (3, 60), (60, 60)], 8_000, "float32"),
    # everything summed: a scalar
    ("ai,bi,ab->", [(40, 50), (30, 50), (40, 30)], 8_000, "float64"),
    # complex, on einjit's complex kernels
    ("ai,bj,ij->ab", [(2, 60), (3, 60), (60, 60)], 16_000, "complex128"),
])
def test_sliced_results_equal_numpys(client, equation, shapes, limit, dtype):
    arrays = [a.astype(dtype) for a in operands(shapes, seed=len(equation))]
    if dtype.startswith("complex"):
        arrays = [a + 1j * b for a, b in zip(arrays, operands(shapes, seed=7))]
    path = [(0, 1), (0, 1)]
    expression = einjit.contract_expression(equation, *arrays, optimize=path, dtype=dtype,
                                            memory_limit=limit)
    assert expression.slicing is not None and expression.slicing.count > 1
    assert expression.slicing.summed == (equation != "ab,bc,cd->ad")
    result = ed.contract_sliced(equation, *arrays, memory_limit=limit, client=client,
                                optimize=path)
    reference = np.einsum(equation, *[a.astype(np.complex128) for a in arrays])
    assert result.dtype == dtype and result.shape == reference.shape
    tolerance = 1e-4 if dtype == "float32" else 1e-11
    scale = max(float(np.abs(reference).max()), 1.0)
    np.testing.assert_allclose(result, reference, rtol=0, atol=tolerance * scale)
    # the slices are added in a fixed order: the same bits again
    again = ed.contract_sliced(equation, *arrays, memory_limit=limit, client=client,
                               optimize=path)
    assert again.tobytes() == result.tobytes()


def test_unsliced_runs_whole_on_a_worker(client):
    a, b = operands([(30, 20), (20, 10)])
    result = ed.contract_sliced("ij,jk->ik", a, b, memory_limit=1 << 30, client=client)
    np.testing.assert_allclose(result, a @ b, rtol=1e-12, atol=1e-12)


def test_a_dtype_without_kernels_is_refused_naming_it(client):
    a = np.ones((4, 4), np.int32)
    with pytest.raises(EinsumTypeError, match="int32"):
        ed.contract_sliced("ij,jk->ik", a, a, memory_limit=1 << 20, client=client)
