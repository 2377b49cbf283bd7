"""einjit.dask on a real dask.distributed LocalCluster of 2 worker processes on the loopback
address, started here: einjit.dask.einsum, dask.array.einsum through register(client), and a
worker that dies in a block task (dask's KilledWorker, no result)."""

import numpy as np
import pytest

pytest.importorskip("distributed", reason="this interpreter has no dask.distributed (the "
                                          "aarch64 lane's python): einjit.dask is tested on "
                                          "the host")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
from dask_support import SECONDS, local_client  # noqa: E402
from distributed.scheduler import KilledWorker  # noqa: E402

import einjit.dask as ed  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client():
    # a task whose worker dies once is not retried: the death test fails at once
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with local_client() as connected:
            yield connected


def operands(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


def assert_close(result, reference):
    scale = max(float(np.abs(reference).max()), 1.0)
    np.testing.assert_allclose(result, reference, rtol=0, atol=1e-12 * scale)


def test_einsum_on_the_cluster(client):
    def plans_built():      # defined here: pickled by value for the workers
        from einjit.einsum import plan_cache
        return plan_cache().misses

    a, b, c = operands([(37, 50), (50, 23), (23, 11)])
    A, B = da.from_array(a, chunks=(16, 20)), da.from_array(b, chunks=(20, 9))
    C = da.from_array(c, chunks=(9, 4))
    for lazy, reference in [(ed.einsum("ij,jk->ik", A, B), a @ b),
                            (ed.einsum("ij,jk,kl->il", A, B, C), a @ b @ c),
                            (ed.einsum("ij,jk", A, B.astype(np.float32)),
                             a @ b.astype(np.float32).astype(np.float64))]:
        result = client.compute(lazy).result(timeout=SECONDS)
        assert result.dtype == lazy.dtype
        assert_close(result, reference)
    # the blocks ran on the workers, through einjit plans built there
    assert sum(client.run(plans_built).values()) > 0


def test_register_on_the_workers(client):
    assert not any(client.run(ed.registered).values())
    ed.register(client)
    try:
        assert all(client.run(ed.registered).values())
        a, b = operands([(37, 50), (50, 23)], seed=1)
        lazy = da.einsum("ij,jk->ik", da.from_array(a, chunks=(16, 20)),
                         da.from_array(b, chunks=(20, 9)))
        assert_close(client.compute(lazy).result(timeout=SECONDS), a @ b)
    finally:
        ed.unregister(client)
    assert not any(client.run(ed.registered).values())
    assert not ed.registered()


def test_a_worker_dying_in_a_block_is_dask_error_and_no_result(client):
    def install_dying_block():
        """On each worker: the block task whose first operand has 5 rows (the last chunk
        of i) ends its process."""
        import os

        import einjit.dask as module
        real = module._einjit_einsum

        def dying(subscripts, *blocks, **options):
            if blocks[0].shape[0] == 5:
                os._exit(1)
            return real(subscripts, *blocks, **options)

        module._einjit_einsum, module._real_einjit_einsum = dying, real

    def restore():
        import einjit.dask as module
        module._einjit_einsum = getattr(module, "_real_einjit_einsum", module._einjit_einsum)

    a, b = operands([(37, 50), (50, 23)], seed=2)
    lazy = ed.einsum("ij,jk->ik", da.from_array(a, chunks=(16, 20)),
                     da.from_array(b, chunks=(20, 9)))
    client.run(install_dying_block)
    try:
        future = client.compute(lazy)
        with pytest.raises(KilledWorker):
            future.result(timeout=SECONDS)
        assert future.status == "error"
        future.release()
    finally:
        # the worker that died may still be on the scheduler's list: a restarted one needs no
        # restore, and the computation below fails if a surviving one kept the dying block
        client.run(restore, on_error="ignore")
        client.wait_for_workers(2, timeout=SECONDS)    # the nanny restarts the dead one
    # the cluster computes on: the same einsum of other operands
    c, d = operands([(37, 50), (50, 23)], seed=3)
    again = ed.einsum("ij,jk->ik", da.from_array(c, chunks=(16, 20)),
                      da.from_array(d, chunks=(20, 9)))
    assert_close(client.compute(again).result(timeout=SECONDS), c @ d)
