"""In-memory data as one input of Dask graphs: sent to the workers once, never inside a task graph; data loaded by
tasks, kept on the workers; and the scheduler settings of the LocalClusters onmsc-dask starts."""
from __future__ import annotations

from typing import Any


#: the scheduler settings of the LocalClusters onmsc-dask starts (cluster_configs/dask.yaml has them for others): one
#: root task sent to a worker per thread (distributed's default 1.1 sends a one-thread worker two), so none waits
#: there behind a long task the worker starts while another worker idles (Fashion-MNIST 60k landmarks stage: a
#: view's chunk scan sat behind the pixels' k-means for 1.5 s)
SCHEDULER_CONFIG = {"distributed.scheduler.worker-saturation": 1.0}

#: workers that hold each scattered value: a worker lost mid-fit leaves a copy for the scheduler to use
REPLICAS = 2


def active_client() -> Any:
    """The running distributed client when it is the active scheduler, else None."""
    from dask.base import get_scheduler

    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    return client if get_scheduler() == client.get else None  # not when a local scheduler is configured over it


def persisted(tasks: list) -> list:
    """Delayed ``tasks`` computed and kept where they ran: Futures on the workers of the running distributed client
    (tasks take them as arguments), else their values."""
    import dask

    client = active_client()
    return list(dask.compute(*tasks)) if client is None else client.compute(tasks)


def scattered(value: Any, broadcast: bool = False) -> Any:
    """`value` scattered to the workers of the running distributed client (to every worker with `broadcast`, else
    to REPLICAS of them), as a Future that tasks take as an argument; `value` itself when no distributed client is
    the active scheduler (the local schedulers share memory and serialise no graph). A list is scattered as a list
    of Futures, one per item."""
    client = active_client()
    if client is None:
        return value
    future = client.scatter(value, broadcast=broadcast, hash=False)  # a fresh key: no release of an equal earlier one
    if not broadcast:
        client.replicate(future if isinstance(future, list) else [future], n=REPLICAS)
    return future
