"""Peak memory of the client process in an out-of-core anchor fit, against the n x width matrices late fusion needs.

``ONMSC(10, embedding="anchor", n_landmarks=1000, cache=store).fit(store)`` on an n-sample three-view store of
deformed Fashion-MNIST copies (bench/scale.py ``million_store``: pixels, HOG, DCT; float32, generated chunk by chunk),
on a LocalCluster of 2 single-threaded workers; every stage computed (a fresh copy of the store without stages).
The client's peak RSS (psutil, sampled every 0.1 s) is compared with the late fusion's n x width inputs and outputs:
the v x O embeddings H_p^(o), F, H* and T, float64.

    python bench/client_memory.py --n 300000     # writes bench/results/client_memory.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import scale  # noqa: E402

from onmsc_dask.api import ONMSC  # noqa: E402
from onmsc_dask.io import load_mnist_dir  # noqa: E402
from onmsc_dask.metrics import evaluate  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=scale.MILLION)
    parser.add_argument("--data-dir", type=Path, default=scale.mnist60k.DEFAULT_DATA_DIR)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/onmsc-bench"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "client_memory.json")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    args.work_dir.mkdir(parents=True, exist_ok=True)
    images, y = load_mnist_dir(args.data_dir, "train")
    t0 = time.perf_counter()
    built = scale.million_store(images, y, args.work_dir / f"deformed{args.n}.zarr", n=args.n)
    store_seconds = time.perf_counter() - t0
    del images
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="4GiB", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        store = built.copy(args.work_dir / "client_memory_run.zarr", stages=False, overwrite=True)
        before = psutil.Process().memory_info().rss / 2**20
        cpu0 = time.process_time()
        model, t = scale.timed(lambda: ONMSC(10, embedding="anchor", n_landmarks=scale.N_LANDMARKS, cache=store,
                                             random_state=scale.SEED).fit(store), pids)
        cpu = time.process_time() - cpu0
    v, O, width = store.n_views, model.order_, model.embedding_.shape[1]
    fusion_mb = (v * O + 3) * args.n * width * 8 / 2**20
    report = {"n": args.n, "views": v, "order": O, "width": width, "store_seconds": round(store_seconds, 1), **t,
              "client_cpu_seconds": round(cpu, 1), "client_mb_before_fit": round(before),
              "fusion_matrices_mb": round(fusion_mb), "client_peak_over_fusion_matrices": round(t["client_mb"] / fusion_mb, 2),
              "stage_seconds": {s: round(x, 2) for s, x in model.timings_.items()}, **evaluate(store.labels, model.labels_),
              "load_average": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"{'n':>9s} {'seconds':>8s} {'client MB':>10s} {'fusion MB':>10s} {'ratio':>6s} {'ACC':>7s} workers MB")
    print(f"{args.n:9d} {t['seconds']:8.1f} {t['client_mb']:10d} {fusion_mb:10.0f} "
          f"{report['client_peak_over_fusion_matrices']:6.2f} {report['acc']:7.4f} {t['workers_mb']}")
    return report


if __name__ == "__main__":
    main()
