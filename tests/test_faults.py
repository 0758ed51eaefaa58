"""Injected faults on a real cluster (a `dask scheduler` process and `dask worker` processes with nannies): a worker
killed in any out-of-core stage, every worker lost, the scheduler lost, two runs into one --out, an interrupted
run and its rerun. docs/reliability.md lists each case with what the user sees."""
import os
import signal
import sys
import time
from pathlib import Path

import cloudpickle
import dask
import numpy as np
import pytest
from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import key_split
from sklearn.datasets import load_digits

from clusters import Cluster

from onmsc_dask.outofcore import fit_store
from onmsc_dask.store import MultiViewStore

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the worker processes cannot import this module
PARAMS = dict(n_landmarks=60, random_state=0, n_init=3)


def _views(n: int = 1000) -> tuple[list[np.ndarray], np.ndarray]:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], X[:n] @ rng.standard_normal((64, 16)), np.sqrt(X[:n])], y[:n]


def _cluster(tmp: Path, n_workers: int):
    c = Cluster(tmp, n_workers)
    try:
        with Client(c.address, timeout="60s") as client:
            client.wait_for_workers(n_workers, timeout=120)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    """A scheduler and one worker: whatever a killed worker held, no other worker holds."""
    yield from _cluster(tmp_path_factory.mktemp("cluster1"), 1)


class KillOnce(WorkerPlugin):
    """SIGKILL the worker process as it starts its `nth` task of function `name`, once in the whole cluster
    (the first worker to get there creates `flag`)."""

    def __init__(self, name: str, nth: int, flag: str) -> None:
        self.name, self.nth, self.flag, self.seen = name, nth, flag, 0

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing" or key_split(key) != self.name.lstrip("_"):  # key_split drops leading "_"
            return
        self.seen += 1
        if self.seen == self.nth:
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The labels of an undisturbed run with each embedding method, on the sync scheduler."""
    views, y = _views()
    store = MultiViewStore.create(tmp_path_factory.mktemp("ref") / "r.zarr", views, y, chunk_rows=100)
    with dask.config.set(scheduler="sync"):
        return {method: fit_store(store, 10, method=method, **PARAMS).labels for method in ("gram", "tsqr")}


@pytest.mark.parametrize("task, method", [("_chunk_scan", "gram"), ("_anchor_block", "gram"),
                                          ("anchor_scaled_gram", "gram"), ("qr", "tsqr")],
                         ids=["landmarks", "anchor_graph", "embeddings", "embeddings-tsqr"])
def test_a_worker_killed_in_any_stage_gives_the_same_labels(tmp_path, one_worker, reference, task, method):
    """Nothing a task needs lives only in a worker's memory: the worker SIGKILLed as it starts a stage's task is
    replaced by its nanny, what it held is recomputed from the store, and the run ends with the undisturbed
    labels. (The landmarks used to be scattered, so a worker lost in the anchor_graph stage holding their only
    copy failed the run: `… cancelled for reason: already forgotten`; the tsqr pieces were scattered as a dict,
    under the keys "scale" and "u" shared by every graph: a dimension mismatch on any distributed cluster.)"""
    views, y = _views()
    store = MultiViewStore.create(tmp_path / "k.zarr", views, y, chunk_rows=100)
    flag = tmp_path / "killed"
    with Client(one_worker.address, timeout="60s") as client:
        client.wait_for_workers(1, timeout=120)
        pids = set(client.run(os.getpid).values())
        client.register_plugin(KillOnce(task, 2, str(flag)), name="kill-once")
        try:
            labels = fit_store(store, 10, client=client, method=method, **PARAMS).labels
        finally:
            client.unregister_worker_plugin("kill-once")
        client.wait_for_workers(1, timeout=120)
        assert flag.exists() and set(client.run(os.getpid).values()) != pids  # a worker was killed and replaced
    np.testing.assert_array_equal(labels, reference[method])
