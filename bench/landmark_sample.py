"""The anchor chain's landmark sample (rows per view the landmarks' k-means runs on) against ACC and NMI over seeds,
on Fashion-MNIST 60k and the MNIST test set (the three pipelines/mnist60k.py views each, ``ONMSC(10,
embedding="anchor", n_landmarks=1000)`` in memory). Prints a table and writes JSON.

    python bench/landmark_sample.py --samples 5000,7500,10000 --out bench/results/landmark_sample.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pipelines"))

import mnist60k  # noqa: E402
from onmsc_dask.api import ONMSC  # noqa: E402
from onmsc_dask.metrics import evaluate  # noqa: E402

SETS = {"Fashion-MNIST 60k": mnist60k.DEFAULT_DATA_DIR, "MNIST test set": ROOT.parent / "shared" / "data" / "mnist-t10k"}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", default="5000,7500,10000", help="landmark_sample values ('none': the default)")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/onmsc-bench"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "landmark_sample.json")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for name, data_dir in SETS.items():
        if not data_dir.exists():
            print(f"skipped {name}: no {data_dir}")
            continue
        store = mnist60k.build_store(data_dir, args.work_dir / f"landmark_sample_{data_dir.name}.zarr", None, 10000)
        views = [store.read_view(p) for p in range(store.n_views)]
        for sample in args.samples.split(","):
            scores, seconds = [], []
            for seed in seeds:
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = ONMSC(10, embedding="anchor", n_landmarks=1000, random_state=seed,
                                  landmark_sample=None if sample == "none" else int(sample)).fit(views)
                seconds.append(time.perf_counter() - t0)
                scores.append(evaluate(store.labels, model.labels_))
            rows.append({"set": name, "landmark_sample": sample, "acc": [s["acc"] for s in scores],
                         "mean_acc": float(np.mean([s["acc"] for s in scores])),
                         "mean_nmi": float(np.mean([s["nmi"] for s in scores])), "mean_seconds": float(np.mean(seconds))})
            print(rows[-1], flush=True)
    print(f"\n{'set':20s} {'sample':>7s} {'ACC per seed':>40s} {'mean ACC':>9s} {'mean NMI':>9s} {'s/fit':>6s}")
    for r in rows:
        print(f"{r['set']:20s} {r['landmark_sample']:>7s} {' / '.join(f'{a:.3f}' for a in r['acc']):>40s} "
              f"{r['mean_acc']:9.4f} {r['mean_nmi']:9.4f} {r['mean_seconds']:6.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seeds": seeds, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
