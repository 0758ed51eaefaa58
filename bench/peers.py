"""ONMSC's defaults against mvlearn's multi-view spectral clustering, the n x n peer a user would otherwise run.

mvlearn 0.5.0's ``MultiviewSpectralClustering`` (co-training, Kumar & Daume 2011) and
``MultiviewCoRegSpectralClustering`` (co-regularized, Kumar, Rai & Daume 2011), each with mvlearn's default affinity
(``rbf``) and with its kNN affinity (``nearest_neighbors``, 10 neighbours), on the views as given (dense, as mvlearn
needs them); no parameter is tuned. Quality: every ``.mat`` of ``../shared/data`` (or ``--data-dir``), seeds
0..S-1, mean ACC / NMI and the median seconds per fit of each method, ONMSC fitted in the same run. Scale
(``--scale-idx DIR``, an MNIST-format directory): its first n test images as the pipeline's three views
(``mnist60k.image_views``), seconds and peak RSS (above the process's before the fit; psutil, sampled every 0.1 s) of
one fit per n and method.

    pip install --no-deps mvlearn==0.5.0 && pip install seaborn  # mvlearn imports seaborn; it pins an old matplotlib
    python bench/peers.py [--data-dir DIR] [--sets A,B] [--seeds 3] [--scale-idx DIR --sizes 1000,2000,4000]
                          [--out bench/results/peers.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import psutil
import scipy.sparse as sp

from onmsc_dask import ONMSC
from onmsc_dask.io import load_mat, load_mnist_dir
from onmsc_dask.metrics import evaluate

from quality import DEFAULT_DATA, ROOT, _git_state, dataset_files
from scale import PeakRSS

sys.path.insert(0, str(ROOT / "pipelines"))
import mnist60k  # noqa: E402

ONMSC_NAME = "ONMSC defaults"
PEERS = {f"mvlearn {kind} ({affinity})": (kind, affinity)
         for kind in ("co-training", "co-regularized") for affinity in ("rbf", "kNN")}


def fit_labels(method: str, views: list, k: int, seed: int) -> np.ndarray:
    """One method's labels of `views` at `seed`."""
    if method == ONMSC_NAME:
        return ONMSC(k, random_state=seed).fit(views).labels_
    from mvlearn.cluster import MultiviewCoRegSpectralClustering, MultiviewSpectralClustering

    kind, affinity = PEERS[method]
    est = (MultiviewSpectralClustering if kind == "co-training" else MultiviewCoRegSpectralClustering)(
        k, random_state=seed, affinity="nearest_neighbors" if affinity == "kNN" else "rbf")
    return est.fit_predict([X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64) for X in views])


def run(method: str, views: list, y: np.ndarray, k: int, seed: int, memory: bool = False) -> dict:
    """Scores and seconds of one fit (and the process's peak RSS in MB with `memory`); an error is recorded."""
    before = psutil.Process().memory_info().rss / 2**20
    with PeakRSS() if memory else nullcontext() as rss, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        try:
            labels = fit_labels(method, views, k, seed)
        except (MemoryError, ValueError, np.linalg.LinAlgError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - t0}
        out = {**evaluate(y, labels), "seconds": time.perf_counter() - t0}
    if memory:  # above the process's resident memory before the fit
        out["peak_rss_mb"] = round(rss.peaks.get(os.getpid(), 0.0) - before)
    return out


def quality(files: list[Path], seeds: int) -> list[dict]:
    rows = []
    for path in files:
        views, y = load_mat(path)
        k = len(np.unique(y))
        row = {"dataset": path.stem, "n": len(y), "n_views": len(views), "k": k, "methods": {}}
        for method in (ONMSC_NAME, *PEERS):
            runs = [run(method, views, y, k, seed) for seed in range(seeds)]
            ok = [r for r in runs if "error" not in r]
            row["methods"][method] = {
                "runs": runs, "acc": float(np.mean([r["acc"] for r in ok])) if ok else None,
                "nmi": float(np.mean([r["nmi"] for r in ok])) if ok else None,
                "median_seconds": float(np.median([r["seconds"] for r in runs]))}
            m = row["methods"][method]
            print(f"  {path.stem:12s} {method:34s} ACC {m['acc'] if m['acc'] is None else round(m['acc'], 3)}"
                  f"  {m['median_seconds']:.1f} s", flush=True)
        rows.append(row)
    return rows


def scale(directory: Path, sizes: list[int]) -> list[dict]:
    images, y = load_mnist_dir(directory, "t10k")
    rows = []
    for n in sizes:
        views, labels = mnist60k.image_views(images[:n]), y[:n]
        k = len(np.unique(labels))
        for method in (ONMSC_NAME, "mvlearn co-training (kNN)", "mvlearn co-regularized (kNN)"):
            r = {"n": n, "method": method, **run(method, views, labels, k, 0, memory=True)}
            print(f"  n = {n:6d} {method:34s} {r['seconds']:.1f} s, peak RSS {r.get('peak_rss_mb')} MB, "
                  f"ACC {r.get('acc', float('nan')):.3f}", flush=True)
            rows.append(r)
    return rows


def _cell(m: dict) -> str:
    return "error" if m["acc"] is None else f"{m['acc']:.3f} / {m['nmi']:.3f}"


def markdown(rows: list[dict], scaled: list[dict]) -> str:
    methods = (ONMSC_NAME, *PEERS)
    lines = (["| set (n, views, k) | " + " | ".join(methods) + " |", "| --- |" + " ---: |" * len(methods)]
             if rows else [])
    for r in rows:
        lines.append(f"| {r['dataset']} ({r['n']}, {r['n_views']}, {r['k']}) | " + " | ".join(
            f"{_cell(r['methods'][m])} ({r['methods'][m]['median_seconds']:.1f} s)" for m in methods) + " |")
    if rows:
        means = [np.mean([r["methods"][m]["acc"] or 0.0 for r in rows]) for m in methods]
        lines.append("| **mean ACC** (an error counts 0) | " + " | ".join(f"{a:.3f}" for a in means) + " |")
        ours = [r["methods"][ONMSC_NAME]["acc"] for r in rows]
        lines.append("| **ONMSC: wins / ties / losses** (±0.01) | – | " + " | ".join(
            "/".join(str(sum(f(a - (r["methods"][m]["acc"] or 0.0)) for a, r in zip(ours, rows)))
                     for f in (lambda d: d > 0.01, lambda d: abs(d) <= 0.01, lambda d: d < -0.01))
            for m in PEERS) + " |")
        lines.append("| **seconds, all sets** (sum of the medians) | " + " | ".join(
            f"{sum(r['methods'][m]['median_seconds'] for r in rows):.1f}" for m in methods) + " |")
    if scaled:
        lines += [""] * bool(rows) + [
            "| n (MNIST-format test images, 3 views) | method | seconds | peak RSS above the start (MB) | ACC |",
            "| ---: | --- | ---: | ---: | ---: |"]
        lines += [f"| {r['n']} | {r['method']} | {r['seconds']:.1f} | {r.get('peak_rss_mb', '–')} | "
                  f"{r['acc']:.3f} |" if "acc" in r else f"| {r['n']} | {r['method']} | {r['seconds']:.1f} | "
                  f"{r.get('peak_rss_mb', '–')} | {r['error']} |" for r in scaled]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", type=lambda s: s.split(","), default=None, help="comma-separated subset; 'none': skip")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..S-1")
    ap.add_argument("--scale-idx", type=Path, default=None, help="an MNIST-format directory for the scale table")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 2000, 4000])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "peers.json")
    args = ap.parse_args(argv)
    import importlib.util

    if importlib.util.find_spec("mvlearn") is None:
        raise SystemExit("mvlearn is not installed: pip install --no-deps mvlearn==0.5.0 && pip install seaborn")
    t0 = time.perf_counter()
    skip = args.sets == ["none"]
    rows = [] if skip else quality(dataset_files(args.data_dir, args.sets), args.seeds)
    scaled = [] if args.scale_idx is None else scale(args.scale_idx, args.sizes)
    table = markdown(rows, scaled)
    print(table)
    report = {"command": "python bench/peers.py", "seeds": args.seeds, "git": _git_state(),
              "load_average": os.getloadavg(), "seconds": time.perf_counter() - t0, "quality": rows, "scale": scaled,
              "markdown": table}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=float))
    return report


if __name__ == "__main__":
    main()
