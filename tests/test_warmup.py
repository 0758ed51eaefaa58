"""numba's on-disk cache of pynndescent (onmsc_dask.warmup): a new process, after one that compiled, loads every
compiled function of the kNN graph from the cache, and gives the same graph, a true kNN graph of the rows."""
import json
import os
import subprocess
import sys

import numpy as np

#: a process building graph.nearest_neighbors' pynndescent graph; prints each pynndescent function it used with its
#: numba cache hits and misses, and saves the graph
GRAPH = """
import json, sys
import numpy as np
from numba.core.dispatcher import Dispatcher
from onmsc_dask import graph
X = np.random.default_rng(0).standard_normal((graph.BRUTE_FORCE_MAX_SAMPLES + 1, 20))
ind, dist = graph.nearest_neighbors(X, 10, "euclidean", random_state=0)
np.savez(sys.argv[1], ind=ind, dist=dist)
used = {f"{m}.{k}": (sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
        for m, module in list(sys.modules.items()) if m.split(".")[0] == "pynndescent"
        for k, f in vars(module).items() if isinstance(f, Dispatcher) and f.signatures}
print(json.dumps(used))
"""


def _graph_process(out, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", GRAPH, str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def _used(proc: subprocess.Popen) -> dict[str, list[int]]:
    """The pynndescent functions the process used, with their numba cache (hits, misses), once it ended."""
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr
    return json.loads(stdout.splitlines()[-1])


def test_a_second_process_loads_pynndescent_from_numbas_cache(tmp_path):
    """On a machine without numba's cache (an empty NUMBA_CACHE_DIR) the first process compiles; the second compiles
    nothing: ``nn_descent``, which takes the distance function ``dist`` and calls the other functions that do, comes
    from the cache too. Both give the same graph: each row's distances to the rows it lists, and most of its exact
    nearest neighbours. That it is the graph of pynndescent as installed (without the cache) is measured by
    bench/numba_cache.py: a third process compiling pynndescent would cost the suite 2 min of CPU."""
    from onmsc_dask import graph

    cache = str(tmp_path / "numba")
    _used(_graph_process(tmp_path / "first.npz", NUMBA_CACHE_DIR=cache))
    used = _used(_graph_process(tmp_path / "second.npz", NUMBA_CACHE_DIR=cache))
    assert used["pynndescent.pynndescent_.nn_descent"] == [1, 0]  # with the code of the functions it calls
    assert {f: n for f, n in used.items() if n[1]} == {}  # nothing compiled
    first, second = np.load(tmp_path / "first.npz"), np.load(tmp_path / "second.npz")
    np.testing.assert_array_equal(second["ind"], first["ind"])
    np.testing.assert_array_equal(second["dist"], first["dist"])
    X = np.random.default_rng(0).standard_normal((graph.BRUTE_FORCE_MAX_SAMPLES + 1, 20))
    rows = np.arange(len(X))[:, None]
    np.testing.assert_allclose(first["dist"], np.linalg.norm(X[first["ind"]] - X[rows], axis=2), rtol=1e-5)
    exact, _ = graph._exact_neighbors(X, 10)
    recall = np.mean([len(np.intersect1d(a, b)) for a, b in zip(first["ind"], exact)]) / 10
    assert recall > 0.8 and (first["ind"] != rows).all()  # 0.87 on these 20-dimensional Gaussian rows; chance: 0.001
