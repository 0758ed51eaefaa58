"""In-memory data as one input of Dask graphs: sent to the workers once, never inside a task graph."""
from __future__ import annotations

from typing import Any


#: workers that hold each scattered value: a worker lost mid-fit leaves a copy for the scheduler to use
REPLICAS = 2


def scattered(value: Any, broadcast: bool = False) -> Any:
    """`value` scattered to the workers of the running distributed client (to every worker with `broadcast`, else
    to REPLICAS of them), as a Future that tasks take as an argument; `value` itself when no distributed client is
    the active scheduler (the local schedulers share memory and serialise no graph). A list is scattered as a list
    of Futures, one per item."""
    from dask.base import get_scheduler

    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return value
    if get_scheduler() != client.get:  # a local scheduler is configured over the client
        return value
    future = client.scatter(value, broadcast=broadcast, hash=False)  # a fresh key: no release of an equal earlier one
    if not broadcast:
        client.replicate(future if isinstance(future, list) else [future], n=REPLICAS)
    return future
