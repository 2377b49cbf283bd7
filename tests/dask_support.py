"""A real dask.distributed LocalCluster for the tests in tests/dask: worker processes on the
loopback address, started and closed by the test module that asks for one."""

import contextlib

import pytest

SECONDS = 120        # any wait on the cluster: a hang fails the test instead


@contextlib.contextmanager
def local_client(**cluster_options):
    """A Client of a LocalCluster of 2 worker processes of 1 thread (cluster_options: more
    LocalCluster keywords, e.g. each worker's memory_limit), closed on exit."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       host="127.0.0.1", dashboard_address=None,
                                       **cluster_options)
    try:
        with distributed.Client(cluster, timeout=SECONDS) as client:
            client.wait_for_workers(2, timeout=SECONDS)
            yield client
    finally:
        cluster.close(timeout=SECONDS)
