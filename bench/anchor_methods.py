"""The anchor chain's two eigensolvers (``fit_store(method="gram")``, the default, and ``method="tsqr"``) on the
views of a store: seconds of the embeddings stage and of the fit, ACC, NMI, and how far apart the two methods' H_p
are. Each run fits a fresh copy of the views (no stage resumed), on a LocalCluster of single-threaded workers.
Prints a table and writes JSON.

    python pipelines/mnist60k.py --out runs/mnist60k             # writes runs/mnist60k/views.zarr
    python bench/anchor_methods.py runs/mnist60k/views.zarr --out bench/results/anchor_methods.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pipelines"))

import mnist60k  # noqa: E402
from onmsc_dask.metrics import evaluate  # noqa: E402
from onmsc_dask.outofcore import METHODS, fit_store  # noqa: E402
from onmsc_dask.store import MultiViewStore  # noqa: E402


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="a MultiViewStore with labels (pipelines/mnist60k.py writes one)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--random-state", type=int, default=0)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/onmsc-bench"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "anchor_methods.json")
    args = parser.parse_args(argv)
    source = MultiViewStore(args.store)
    y, k = source.labels, len(np.unique(source.labels))
    cluster_args = argparse.Namespace(scheduler=None, workers=args.workers, processes=False, memory_limit=None)
    rows, embeddings = [], {}
    with mnist60k.make_client(cluster_args) as client, mnist60k.blas_threads(cluster_args):
        for repeat in range(args.repeats):
            for method in METHODS:
                copy = source.copy(args.work_dir / f"anchor-methods-{method}.zarr", stages=False, overwrite=True)
                res = fit_store(copy, k, client=client, method=method, random_state=args.random_state)
                shutil.rmtree(copy.location)
                embeddings[method] = res.view_embeddings[:, 0]
                scores = evaluate(y, res.labels)
                rows.append({"method": method, "repeat": repeat, "n_samples": len(y),
                             "embeddings_seconds": res.timings["embeddings"], "fit_seconds": sum(res.timings.values()),
                             "acc": scores["acc"], "nmi": scores["nmi"]})
    # projector distance of each view's H between the methods (they span the same subspace: ~1e-8)
    gap = max(np.linalg.norm(a @ (a.T @ b) - b) for a, b in zip(embeddings["gram"], embeddings["tsqr"]))
    print(f"{'method':8s} {'embeddings s':>13s} {'fit s':>7s} {'ACC':>7s} {'NMI':>7s}")
    for method in METHODS:
        mine = [r for r in rows if r["method"] == method]
        print(f"{method:8s} {np.median([r['embeddings_seconds'] for r in mine]):13.2f} "
              f"{np.median([r['fit_seconds'] for r in mine]):7.2f} {mine[0]['acc']:7.4f} {mine[0]['nmi']:7.4f}")
    print(f"median of {args.repeats} runs; largest |H_gram H_gram^T H_tsqr - H_tsqr| over the views: {gap:.1e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": rows, "subspace_gap": float(gap)}, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
