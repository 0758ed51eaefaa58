"""pynndescent's numba JIT paid once per machine where numba can cache it, and once per Dask worker process for
the rest, before its first kNN graph (bench/RESULTS.md, "numba compile")."""
from __future__ import annotations

import inspect
import sys
import time
from typing import Any

import numpy as np
from distributed import WorkerPlugin
from distributed.comm import CommClosedError

from .validation import user_warning


#: seconds the warm-up of 2 workers takes on a 2-core machine: the first time on the machine, and with numba's cache
#: (bench/RESULTS.md, "numba compile": 452 s and 119 s on a machine at load 15-18, where the previous code took 233 s
#: and 109 s at a normal load)
COMPILE_SECONDS, CACHED_SECONDS = 210, 55
_cached = False


def cache_pynndescent() -> None:
    """Turn numba's on-disk cache on for every compiled function of pynndescent (it caches only some), so that a new
    process loads them instead of compiling them again. Functions that take the distance function as an argument
    (``dist``) are left alone: numba cannot reuse them in another process, so they are compiled in each."""
    global _cached
    if _cached:
        return
    from numba.core.dispatcher import Dispatcher

    import pynndescent  # noqa: F401 - imports its modules

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "pynndescent":
            for obj in list(vars(module).values()):
                if (isinstance(obj, Dispatcher) and type(obj._cache).__name__ == "NullCache"
                        and "dist" not in inspect.signature(obj.py_func).parameters):
                    obj.enable_caching()
    _cached = True


def warm_pynndescent() -> float:
    """Compile the NNDescent graph construction graph.nearest_neighbors uses, in this process; returns the seconds
    it took (about 0.01 once compiled)."""
    from pynndescent import NNDescent

    cache_pynndescent()
    t0 = time.perf_counter()
    X = np.random.default_rng(0).standard_normal((200, 8))
    NNDescent(X, n_neighbors=5, random_state=0, n_jobs=1, compressed=True).neighbor_graph  # noqa: B018
    return time.perf_counter() - t0


class NumbaWarmup(WorkerPlugin):
    """Runs :func:`warm_pynndescent` when a worker starts, so no view or chunk task pays the compilation."""

    name = "onmsc-numba-warmup"

    def setup(self, worker: Any = None) -> None:
        warm_pynndescent()


def warm_up(client: Any) -> dict[str, float]:
    """Register :class:`NumbaWarmup` on every current and future worker of `client`; returns the seconds each
    current worker then needs for a second warm-up (about 0.01 once compiled). The warm-up only saves time: if a
    worker is lost meanwhile, it warns and returns {} (workers not warmed compile at their first kNN graph)."""
    try:
        client.register_plugin(NumbaWarmup())
        return client.run(warm_pynndescent)
    except CommClosedError as exc:  # a worker died meanwhile
        user_warning(f"the numba warm-up of the workers was interrupted ({type(exc).__name__}: {exc}); "
                     "workers compile pynndescent at their first kNN graph instead")
        return {}
