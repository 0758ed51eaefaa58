"""Landmarks of sparse views: sparse k-means (graph.sparse_kmeans) against the dense k-means of the densified sample.

1. ACC of ``ONMSC(k, embedding="anchor")`` on the sparse (bag-of-words) sets of ``../shared/data``, their mostly-zero
   views given as CSR (sparse k-means landmarks) and as dense arrays (scikit-learn's KMeans on the dense sample, which
   is what sparse views got before), seeds 0, 1, 2.
2. A wide generated view pair, n = 500 samples x 2,000,000 columns, 5 non-zeros a row (5 clusters of words): time
   and peak memory (ru_maxrss of a fresh process, sync scheduler) of the anchor solver in memory and out of core
   (``fit_store``), and of the exact solver.

Prints markdown tables and writes ``bench/results/sparse_landmarks.json``.

    python bench/sparse_landmarks.py [--data-dir ../shared/data] [--out bench/results/sparse_landmarks.json]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
SETS = ("BBCSport", "3Sources", "WebKB", "CiteSeer", "Movies", "Reuters-1200")
SEEDS = (0, 1, 2)
#: a view with at least this fraction of zeros is given as CSR
SPARSE_MIN_ZERO_FRACTION = 0.9


def acc_rows(data_dir: Path) -> list[dict]:
    """ACC (mean over SEEDS) of the anchor solver with sparse and with densified views of each set found."""
    import warnings

    from onmsc_dask import ONMSC
    from onmsc_dask.io import load_mat
    from onmsc_dask.metrics import evaluate

    rows = []
    for name in SETS:
        path = data_dir / f"{name}.mat"
        if not path.exists():
            continue
        views, y = load_mat(path)
        dense = [v.toarray() if sp.issparse(v) else v for v in views]
        sparse = [sp.csr_matrix(v) if np.mean(v == 0) >= SPARSE_MIN_ZERO_FRACTION else v for v in dense]
        if not any(sp.issparse(v) for v in sparse):
            continue
        row = {"set": name, "n": len(y), "sparse_views": sum(sp.issparse(v) for v in sparse)}
        for kind, given in (("sparse", sparse), ("dense", dense)):
            accs, t0 = [], time.perf_counter()
            for seed in SEEDS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = ONMSC(len(np.unique(y)), embedding="anchor", random_state=seed).fit(given)
                accs.append(evaluate(y, model.labels_)["acc"])
            row[f"acc_{kind}"], row[f"seconds_{kind}"] = float(np.mean(accs)), (time.perf_counter() - t0) / len(SEEDS)
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    return rows


def wide_views(n: int = 500, d: int = 2_000_000, k: int = 5, nnz: int = 5) -> tuple[list[sp.csr_matrix], np.ndarray]:
    """Two views of n bag-of-words rows over d columns, nnz words a row, 4 in 5 from the row's cluster's 50."""
    y = np.arange(n) % k
    views = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        own = rng.integers(0, 50, size=(n, nnz)) + y[:, None] * 50
        words = np.where(rng.random((n, nnz)) < 0.8, own, rng.integers(k * 50, d, size=(n, nnz)))
        X = sp.csr_matrix((np.ones(n * nnz), (np.repeat(np.arange(n), nnz), words.ravel())), shape=(n, d))
        X.sum_duplicates()
        views.append(X)
    return views, y


def wide_case(case: str) -> dict:
    """One wide run in this process: seconds, peak RSS (GB), ACC."""
    import dask

    from onmsc_dask import ONMSC
    from onmsc_dask.metrics import evaluate
    from onmsc_dask.outofcore import fit_store
    from onmsc_dask.store import MultiViewStore

    views, y = wide_views()
    dask.config.set(scheduler="sync")
    t0 = time.perf_counter()
    if case == "anchor, out of core":
        with tempfile.TemporaryDirectory() as tmp:
            store = MultiViewStore.create(Path(tmp) / "w.zarr", views, y)
            t0 = time.perf_counter()
            labels = fit_store(store, 5, random_state=0).labels
    else:
        labels = ONMSC(5, embedding=case.split(",")[0], random_state=0).fit(views).labels_
    return {"case": case, "seconds": time.perf_counter() - t0,
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "acc": evaluate(y, labels)["acc"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "sparse_landmarks.json")
    parser.add_argument("--wide-case", help=argparse.SUPPRESS)  # one wide run, in a child process
    args = parser.parse_args()
    if args.wide_case:
        print(json.dumps(wide_case(args.wide_case)))
        return
    wide = []
    for case in ("anchor, in memory", "anchor, out of core", "exact, in memory"):
        child = subprocess.run([sys.executable, __file__, "--wide-case", case], capture_output=True, text=True)
        wide.append(json.loads(child.stdout) if child.returncode == 0 else {"case": case, "error": child.stderr[-300:]})
        print(wide[-1], file=sys.stderr, flush=True)
    accs = acc_rows(args.data_dir)
    print("| set | n | sparse views | ACC sparse k-means | ACC dense k-means (before) | s/fit sparse | s/fit dense |")
    print("|---|---|---|---|---|---|---|")
    for r in accs:
        print(f"| {r['set']} | {r['n']} | {r['sparse_views']} | {r['acc_sparse']:.3f} | {r['acc_dense']:.3f} | "
              f"{r['seconds_sparse']:.1f} | {r['seconds_dense']:.1f} |")
    print("\n| n = 500 x 2,000,000, 5 non-zeros a row, 2 views | seconds | peak memory (GB) | ACC |")
    print("|---|---|---|---|")
    for r in wide:
        print(f"| {r['case']} | " + (f"{r['seconds']:.1f} | {r['peak_gb']:.2f} | {r['acc']:.3f} |" if "seconds" in r
                                     else f"failed: {r['error']} | | |"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"sets": accs, "wide": wide}, indent=2) + "\n")


if __name__ == "__main__":
    main()
