"""pynndescent's numba JIT paid once per machine: numba's on-disk cache keeps every compiled function of pynndescent,
so a new (worker) process loads them instead of compiling them (bench/RESULTS.md, "numba compile")."""
from __future__ import annotations

import asyncio
import copyreg
import importlib
import sys
import time
from types import ModuleType
from typing import Any

import numba
import numpy as np
from distributed import WorkerPlugin
from distributed.comm import CommClosedError
from numba.core import types
from numba.extending import overload
try:  # numba internals (numba 0.5x-0.6x); without them pynndescent is compiled in every process, as numba does alone
    from numba.np.ufunc.parallel import _iget_num_threads, _launch_threads
except ImportError:
    _iget_num_threads = _launch_threads = None

from .validation import user_warning

#: seconds the warm-up of 2 workers takes on an idle 2-core machine: the first time on the machine (compiling), and
#: later (loading numba's cache). bench/RESULTS.md, "numba compile": 115 s and 7.5 s of CPU in one process; the CLI's
#: step took 281 s and 7.5 s at load 7-10
COMPILE_SECONDS, CACHED_SECONDS = 120, 5
_cached = False


def _module_attribute(module: str, qualname: str) -> Any:
    """The object `qualname` names in `module`."""
    obj: Any = importlib.import_module(module)
    for name in qualname.split("."):
        obj = getattr(obj, name)
    return obj


def _dispatcher_type(module: str, qualname: str) -> types.Dispatcher:
    """The numba type of the jitted function `qualname` of `module` (unpickles :func:`_reduce_dispatcher_type`)."""
    return types.Dispatcher(_module_attribute(module, qualname))


def _reduce_dispatcher_type(typ: types.Dispatcher) -> tuple:
    """Pickle the numba type of a module-level jitted function by the function's module and name. numba's own pickle
    of it makes a new function object in the next process, so a cached function that takes a jitted function as an
    argument (pynndescent's ``dist``) would never be found in numba's cache again (numba issue #6251)."""
    func = typ.dispatcher.py_func
    try:
        by_name = _module_attribute(func.__module__, func.__qualname__) is typ.dispatcher
    except (ImportError, AttributeError):  # a closure or a function not reachable by its name
        by_name = False
    return (_dispatcher_type, (func.__module__, func.__qualname__)) if by_name else typ.__reduce__()


def get_num_threads() -> int:
    """numba.get_num_threads, in a form numba can cache in compiled code: numba's own calls the threading layer
    through a ctypes pointer, and numba caches no function that holds one (pynndescent's ``nn_descent``)."""
    return numba.get_num_threads()


if _iget_num_threads is not None:
    @overload(get_num_threads)
    def _get_num_threads_compiled():
        return lambda: np.int32(_iget_num_threads())  # the same C function, linked by name


class _CacheableNumba(ModuleType):
    """The numba module as pynndescent's compiled functions see it: with :func:`get_num_threads`."""

    get_num_threads = staticmethod(get_num_threads)

    def __getattr__(self, name: str) -> Any:
        return getattr(numba, name)


def cache_pynndescent() -> None:
    """Turn numba's on-disk cache on for every compiled function of pynndescent (it caches only some), so that a new
    process loads them instead of compiling them again. For the functions that take the distance function ``dist``
    and for ``nn_descent``, numba can do so only with :func:`_reduce_dispatcher_type` and :class:`_CacheableNumba`
    (installed here, in pynndescent's modules; the pickle reducer is registered for every numba Dispatcher type of
    the process). Where numba lacks the internals this needs, it warns once and leaves pynndescent as it is."""
    global _cached
    if _cached:
        return
    _cached = True
    if _launch_threads is None:
        user_warning(f"numba {numba.__version__} lacks the internals onmsc_dask.warmup uses: pynndescent's JIT is "
                     "compiled in every process (about 2 min on 2 cores)")
        return
    from numba.core.dispatcher import Dispatcher

    import pynndescent  # noqa: F401 - imports its modules

    _launch_threads()  # the threading layer's get_num_threads, which cached code links to
    copyreg.pickle(types.Dispatcher, _reduce_dispatcher_type)
    cacheable = _CacheableNumba("numba")
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "pynndescent":
            if getattr(module, "numba", None) is numba:
                module.numba = cacheable
            for obj in list(vars(module).values()):
                if isinstance(obj, Dispatcher) and type(obj._cache).__name__ == "NullCache":
                    obj.enable_caching()


def warm_pynndescent() -> float:
    """Compile (or load from numba's cache) the NNDescent graph construction graph.nearest_neighbors uses, in this
    process; returns the seconds it took (about 0.01 once compiled)."""
    from pynndescent import NNDescent

    cache_pynndescent()
    t0 = time.perf_counter()
    X = np.random.default_rng(0).standard_normal((200, 8))
    NNDescent(X, n_neighbors=5, random_state=0, n_jobs=1, compressed=True).neighbor_graph  # noqa: B018
    return time.perf_counter() - t0


class NumbaWarmup(WorkerPlugin):
    """Runs :func:`warm_pynndescent` when a worker starts, so no view or chunk task pays the compilation. It runs in
    a thread: the worker's event loop keeps answering the scheduler's heartbeats, which a first compile on a busy
    machine would otherwise outlast (the scheduler then drops the worker)."""

    name = "onmsc-numba-warmup"

    async def setup(self, worker: Any = None) -> None:
        await asyncio.to_thread(warm_pynndescent)


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
