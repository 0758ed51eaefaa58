"""In-memory data as one input of Dask graphs: sent to the workers once, never inside a task graph."""
from __future__ import annotations

from typing import Any


def scattered(value: Any, broadcast: bool = False) -> Any:
    """`value` scattered to the workers of the running distributed client (to every worker with `broadcast`), as a
    Future that tasks take as an argument; `value` itself when no distributed client runs (the local schedulers
    share memory and serialise no graph)."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return value
    return client.scatter(value, broadcast=broadcast, hash=True)
