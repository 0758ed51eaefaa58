"""numba's on-disk cache of pynndescent (onmsc_dask.warmup): a new process, after one that compiled, loads every
compiled function of the kNN graph from the cache, and the graph is pynndescent's own."""
import json
import os
import subprocess
import sys

import numpy as np

#: a process building graph.nearest_neighbors' pynndescent graph; prints each pynndescent function it used with its
#: numba cache hits and misses, and saves the graph. "plain": pynndescent as installed (cache_pynndescent skipped)
GRAPH = """
import json, sys
import numpy as np
from numba.core.dispatcher import Dispatcher
from onmsc_dask import graph, warmup
if sys.argv[1] == "plain":
    warmup._cached = True
X = np.random.default_rng(0).standard_normal((graph.BRUTE_FORCE_MAX_SAMPLES + 1, 20))
ind, dist = graph.nearest_neighbors(X, 10, "euclidean", random_state=0)
np.savez(sys.argv[2], ind=ind, dist=dist)
used = {f"{m}.{k}": (sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
        for m, module in list(sys.modules.items()) if m.split(".")[0] == "pynndescent"
        for k, f in vars(module).items() if isinstance(f, Dispatcher) and f.signatures}
print(json.dumps(used))
"""


def _graph_process(mode: str, out, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", GRAPH, mode, str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def _used(proc: subprocess.Popen) -> dict[str, list[int]]:
    """The pynndescent functions the process used, with their numba cache (hits, misses), once it ended."""
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr
    return json.loads(stdout.splitlines()[-1])


def test_a_second_process_loads_pynndescent_from_numbas_cache(tmp_path):
    """On a machine without numba's cache (an empty NUMBA_CACHE_DIR) the first process compiles; the second compiles
    nothing: ``nn_descent``, which takes the distance function ``dist`` and calls the other functions that do, comes
    from the cache too. Both graphs equal the one of pynndescent without the cache."""
    cache = str(tmp_path / "numba")
    first, plain = (_graph_process("cached", tmp_path / "first.npz", NUMBA_CACHE_DIR=cache),
                    _graph_process("plain", tmp_path / "plain.npz"))  # both compile: side by side
    _used(first)
    used = _used(_graph_process("cached", tmp_path / "second.npz", NUMBA_CACHE_DIR=cache))
    assert used["pynndescent.pynndescent_.nn_descent"] == [1, 0]  # with the code of the functions it calls
    assert {f: n for f, n in used.items() if n[1]} == {}  # nothing compiled
    _used(plain)
    plain = np.load(tmp_path / "plain.npz")
    for run in ("first", "second"):
        cached = np.load(tmp_path / f"{run}.npz")
        np.testing.assert_array_equal(cached["ind"], plain["ind"])
        np.testing.assert_array_equal(cached["dist"], plain["dist"])
