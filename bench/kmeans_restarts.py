"""k-means restarts of the labels stage on a sample of rows (assign.assign_labels) against all rows, on the fusion
read-out of a fitted store: seconds, inertia and (with labels) ACC per seed. Prints a table and writes JSON.

    python bench/kmeans_restarts.py /tmp/onmsc-bench/scale_run.zarr --seeds 0,1,2,3,4 \
        --out bench/results/kmeans_restarts.json     # the 1M store bench/scale.py --million leaves there
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from sklearn.cluster import KMeans

from onmsc_dask.assign import assign_labels, normalize_rows, readout
from onmsc_dask.metrics import evaluate
from onmsc_dask.store import MultiViewStore


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", help="a store whose fusion stage is complete")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--out", type=Path, default=Path("bench/results/kmeans_restarts.json"))
    args = parser.parse_args(argv)
    store = MultiViewStore(args.store)
    k = int(store.stages()["fusion"]["n_clusters"])
    X = readout(store.read_result("fusion", "embedding"), store.read_result("fusion", "target"), k)
    rows = []
    for seed in map(int, args.seeds.split(",")):
        t0 = time.perf_counter()
        labels, inertia = assign_labels(X, k, random_state=seed)
        t1 = time.perf_counter()
        full = KMeans(k, n_init=10, random_state=seed).fit(normalize_rows(X))
        t2 = time.perf_counter()
        row = {"seed": seed, "sampled_seconds": round(t1 - t0, 2), "sampled_inertia": inertia,
               "all_rows_seconds": round(t2 - t1, 2), "all_rows_inertia": float(full.inertia_)}
        if store.labels is not None:
            row |= {"sampled_acc": evaluate(store.labels, labels)["acc"],
                    "all_rows_acc": evaluate(store.labels, full.labels_)["acc"]}
        rows.append(row)
        print(row, flush=True)
    print(f"\nn = {len(X)}, width {X.shape[1]}, k = {k}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'seed':>4s} {'sampled s':>10s} {'all rows s':>10s} {'inertia sampled/all':>20s} {'ACC sampled':>12s} "
          f"{'ACC all':>8s}")
    for r in rows:
        print(f"{r['seed']:4d} {r['sampled_seconds']:10.1f} {r['all_rows_seconds']:10.1f} "
              f"{r['sampled_inertia'] / r['all_rows_inertia']:20.4f} {r.get('sampled_acc', float('nan')):12.4f} "
              f"{r.get('all_rows_acc', float('nan')):8.4f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"n": len(X), "k": k, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
