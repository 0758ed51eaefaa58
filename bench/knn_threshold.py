"""The kNN search threshold graph.BRUTE_FORCE_MAX_SAMPLES: exact brute-force search against pynndescent (and its
numba compile) on the three views of ``pipelines/mnist60k.py``.

``compile``: the seconds of ``warmup.warm_pynndescent`` in a new process with an empty numba cache (the first run
on a machine), then with the cache that run filled (every later run).
``search``: per view, the seconds of the search by brute force (L = 2N and the exact search's ranked list,
graph.ranked_neighbors_count) and by pynndescent (compiled beforehand, L = 2N), on the first n rows of Fashion-MNIST
train (``--fashion``).
``acc``: ACC, NMI and seconds of the default fit ``ONMSC(10, random_state=s)``, s = 0, 1, 2, on the MNIST test set
(``--mnist``; its three views, or ``--views pixels``, the one view of ``onmsc-dask run`` on the IDX directory),
for each of VARIANTS back to back.
Prints markdown tables and writes ``bench/results/knn_threshold.json``.

    python bench/knn_threshold.py [--parts compile,search,acc] [--sizes 10000,20000] [--views three|pixels]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from onmsc_dask import ONMSC, api, graph
from onmsc_dask.io import load_mnist_dir
from onmsc_dask.metrics import evaluate
from onmsc_dask.warmup import warm_pynndescent

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "pipelines"), str(ROOT / "bench")]
import mnist60k  # noqa: E402
from components import FASHION, SHARED  # noqa: E402

SEEDS = (0, 1, 2)


def views_of(directory: Path, split: str, n: int) -> tuple[list[np.ndarray], np.ndarray]:
    images, y = load_mnist_dir(directory, split)
    return mnist60k.image_views(images[:n]), y[:n]


def compile_seconds() -> dict[str, float]:
    """warm_pynndescent in a new process: with an empty numba cache, then with the cache it filled."""
    code = "from onmsc_dask.warmup import warm_pynndescent; print(warm_pynndescent())"
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        return {run: float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                          check=True).stdout.split()[-1]) for run in ("first_run", "later_run")}


def search(sizes: list[int], fashion: Path) -> list[dict]:
    """Seconds of each view's search by brute force and by pynndescent (compiled beforehand), n = each size."""
    warm_pynndescent()
    rows, saved = [], graph.BRUTE_FORCE_MAX_SAMPLES
    for n in sizes:
        views, _ = views_of(fashion, "train", n)
        N = graph.default_n_neighbors(n, 10)
        graph.BRUTE_FORCE_MAX_SAMPLES = n
        runs = (("brute", n, 2 * N), ("brute", n, graph.ranked_neighbors_count(n, 10, N)),
                ("pynndescent", n - 1, 2 * N))
        for p, X in enumerate(views):
            metric = graph.resolve_metric(X)
            for method, graph.BRUTE_FORCE_MAX_SAMPLES, L in runs:
                t = time.perf_counter()
                graph.nearest_neighbors(X, L, metric, random_state=0)
                rows.append({"n": n, "view": mnist60k.VIEW_NAMES[p], "metric": metric, "method": method, "L": L,
                             "seconds": time.perf_counter() - t})
                print(rows[-1], flush=True)
    graph.BRUTE_FORCE_MAX_SAMPLES = saved
    return rows


#: (name, BRUTE_FORCE_MAX_SAMPLES, the value ranked_neighbors_count's cap is taken at) compared by ``acc``
VARIANTS = (("pynndescent, L = 2N", 8192, 8192), ("brute force, L = 255", 20000, 20000),
            ("brute force, L = 2N", 20000, 8192))


@contextmanager
def variant(search_max: int, ranked_max: int):
    """graph.BRUTE_FORCE_MAX_SAMPLES at `search_max`, and the fit's ranked-list length L as at `ranked_max`."""
    ranked, saved = graph.ranked_neighbors_count, graph.BRUTE_FORCE_MAX_SAMPLES

    def count(n_samples: int, n_clusters: int, n_neighbors: int) -> int:
        graph.BRUTE_FORCE_MAX_SAMPLES = ranked_max
        try:
            return ranked(n_samples, n_clusters, n_neighbors)
        finally:
            graph.BRUTE_FORCE_MAX_SAMPLES = search_max

    graph.BRUTE_FORCE_MAX_SAMPLES, api.ranked_neighbors_count = search_max, count
    try:
        yield
    finally:
        graph.BRUTE_FORCE_MAX_SAMPLES, api.ranked_neighbors_count = saved, ranked


def acc(views_used: str, mnist: Path) -> list[dict]:
    """The default fit on the MNIST test set's three views (or its pixels alone), seeds 0-2, each variant back to
    back."""
    if not mnist.is_dir():
        print(f"the MNIST test set ({mnist}) is missing: acc skipped")
        return []
    views, y = views_of(mnist, "t10k", 10000)
    views = views[:1] if views_used == "pixels" else views
    warm_pynndescent()
    rows = []
    for seed in SEEDS:
        for name, search_max, ranked_max in VARIANTS:
            with variant(search_max, ranked_max):
                t = time.perf_counter()
                est = ONMSC(10, random_state=seed).fit(views)
                seconds = time.perf_counter() - t
            scores = evaluate(y, est.labels_)
            rows.append({"variant": name, "views": views_used, "seed": seed, "acc": scores["acc"],
                         "nmi": scores["nmi"], "seconds": seconds,
                         "graphs_seconds": est.timings_.get("graphs_and_embeddings")})
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="compile,search,acc")
    ap.add_argument("--sizes", default="10000,20000")
    ap.add_argument("--fashion", type=Path, default=FASHION)
    ap.add_argument("--mnist", type=Path, default=SHARED / "mnist-t10k")
    ap.add_argument("--views", choices=("three", "pixels"), default="three", help="the MNIST views acc fits")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "knn_threshold.json")
    args = ap.parse_args(argv)
    parts, result = args.parts.split(","), {"threshold": graph.BRUTE_FORCE_MAX_SAMPLES}
    if "compile" in parts:
        result["compile_seconds"] = compile_seconds()
        print(f"pynndescent compile, seconds: {result['compile_seconds']}")
    if "search" in parts:
        result["search"] = search([int(s) for s in args.sizes.split(",")], args.fashion)
        print("\n| n | view | method | L | seconds |\n|---|---|---|---:|---:|")
        for r in result["search"]:
            print(f"| {r['n']} | {r['view']} | {r['method']} | {r['L']} | {r['seconds']:.1f} |")
    if "acc" in parts:
        result["acc"] = acc(args.views, args.mnist)
        print("\n| variant | ACC (seeds 0-2) | mean | NMI mean | fit s (median) |\n|---|---|---:|---:|---:|")
        for name, *_ in VARIANTS:
            rows = [r for r in result["acc"] if r["variant"] == name]
            if rows:
                accs = " / ".join(f"{r['acc']:.4f}" for r in rows)
                print(f"| {name} | {accs} | {np.mean([r['acc'] for r in rows]):.4f} | "
                      f"{np.mean([r['nmi'] for r in rows]):.4f} | {np.median([r['seconds'] for r in rows]):.1f} |")
    args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
