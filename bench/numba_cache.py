"""numba's on-disk cache of pynndescent (``onmsc_dask.warmup.cache_pynndescent``), measured in new processes that
share an empty NUMBA_CACHE_DIR (a machine that never ran the package).

``knn``: a new process builds graph.nearest_neighbors' pynndescent graph of 10,000 x 50 Gaussian rows (NNDescent,
euclidean, 31 neighbours) twice: ``first`` (import, compile or cache load, and search), ``again`` (the search alone).
Three processes in turn: the first on the machine, a second one, and a second one with pynndescent as installed
(cache_pynndescent skipped). With the numba functions each compiled (cache misses) and loaded (hits), and whether
the graph is the first process's, index for index and distance for distance.
``cli``: ``onmsc-dask run --data DIR`` twice (DIR: 10,000 IDX images, by default the MNIST test set under
../shared/data): the compile step (the workers' warm-up: from its stderr line to the next stage line) and the run.
Prints a table with the load average and writes ``bench/results/numba_cache.json``.

    python bench/numba_cache.py [--parts knn,cli] [--data DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MNIST_T10K = ROOT.parent / "shared" / "data" / "mnist-t10k"

#: the process of the ``knn`` part; argv: mode ("cached" or "plain"), the .npz file of its graph; prints a JSON line
KNN = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
from numba.core.dispatcher import Dispatcher
from onmsc_dask import graph, warmup
if sys.argv[1] == "plain":
    warmup._cached = True
X = np.random.default_rng(0).standard_normal((10_000, 50))
seconds = []
for _ in range(2):
    t = time.perf_counter()
    ind, dist = graph.nearest_neighbors(X, 30, "euclidean", random_state=0)
    seconds.append(time.perf_counter() - t)
np.savez(sys.argv[2], ind=ind, dist=dist)
used = {id(f): f for m, module in list(sys.modules.items()) if m.split(".")[0] == "pynndescent"
        for f in vars(module).values() if isinstance(f, Dispatcher)}
stats = [(sum(f.stats.cache_misses.values()), sum(f.stats.cache_hits.values())) for f in used.values()]
print(json.dumps({"first_s": round(time.perf_counter() - t0 - seconds[1], 1), "again_s": round(seconds[1], 2),
                  "cpu_s": round(time.process_time() - c0, 1), "compiled": sum(s[0] for s in stats),
                  "loaded": sum(s[1] for s in stats)}))
"""


def knn(env: dict[str, str], out: Path) -> list[dict]:
    rows = []
    for i, (name, mode) in enumerate((("first process on the machine", "cached"), ("second process", "cached"),
                                      ("second process, pynndescent as installed", "plain"))):
        load = os.getloadavg()[0]
        run = subprocess.run([sys.executable, "-c", KNN, mode, str(out / f"{i}.npz")], env=env, capture_output=True,
                             text=True)
        assert run.returncode == 0, run.stderr
        graphs = [np.load(out / f"{j}.npz") for j in (0, i)]
        same = all(np.array_equal(graphs[0][key], graphs[1][key]) for key in ("ind", "dist"))
        rows.append({"run": name, **json.loads(run.stdout.splitlines()[-1]), "load": round(load, 1),
                     "same_graph": same})
        print(rows[-1], flush=True)
    return rows


def stage_seconds(stderr: str, stage: str) -> float:
    """Seconds from the CLI's stage line starting with `stage` to its next stage line (``[elapsed] line``)."""
    lines = [(float(m[1]), m[2]) for m in re.finditer(r"^\[\s*([\d.]+)s\] (.*)$", stderr, re.M)
             if not m[2].lstrip().startswith("...")]
    i = next(i for i, (_, line) in enumerate(lines) if line.startswith(stage))
    return round(lines[i + 1][0] - lines[i][0], 1)


def cli(env: dict[str, str], data: Path, out: Path) -> list[dict]:
    rows = []
    for name in ("first run on the machine", "second run"):
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        run = subprocess.run([shutil.which("onmsc-dask"), "run", "--data", str(data), "--out", str(out / name[:5])],
                             env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        report = json.loads((out / name[:5] / "report.json").read_text())
        rows.append({"run": name, "compile_step_s": stage_seconds(run.stderr, "compiling pynndescent"),
                     "run_s": round(time.perf_counter() - t0, 1), "acc": report["metrics"]["acc"],
                     "load": round(load, 1), "load_after": round(os.getloadavg()[0], 1)})
        print(rows[-1], flush=True)
    return rows


def table(rows: list[dict]) -> str:
    keys = list(rows[0])
    return "\n".join(["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
                     + ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="knn,cli")
    ap.add_argument("--data", type=Path, default=MNIST_T10K, help="an IDX directory of 10,000 images")
    args = ap.parse_args()
    path = ROOT / "bench" / "results" / "numba_cache.json"
    result = json.loads(path.read_text()) if path.exists() else {}  # the parts not run are kept
    with tempfile.TemporaryDirectory() as tmp:
        for part in args.parts.split(","):
            cache = Path(tmp) / part / "numba"
            env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
            result[part] = knn(env, Path(tmp)) if part == "knn" else cli(env, args.data, Path(tmp) / part)
            print(table(result[part]), flush=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
