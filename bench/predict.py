"""New samples: ONMSC fitted on the 60k Fashion-MNIST training images (the three views of pipelines/mnist60k.py:
pixels, HOG, DCT), then ``predict`` of the 10k test images (extend.py; docs/predict.md).

Measures train ACC (labels_), test ACC (predict), agreement of predict on the training rows with labels_, predict
throughput (numpy views, in this process; and dask views on a 2-worker LocalCluster) and the pickle size of the
fitted model; and the same for a kNN fit (embedding="exact", whose extension is a landmark regression) on the first
``--knn-samples`` training images.

    python bench/predict.py                  # writes bench/results/predict.json
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "pipelines"), str(ROOT / "bench")]
import mnist60k  # noqa: E402
from results_md import RESULTS_MD, write_block  # noqa: E402

from onmsc_dask.api import ONMSC  # noqa: E402
from onmsc_dask.io import load_mnist_dir  # noqa: E402
from onmsc_dask.metrics import evaluate  # noqa: E402
from onmsc_dask.store import MultiViewStore  # noqa: E402

K, SEED = 10, 0
REPEATS = 3  # predict of the test images is timed this many times, the fastest kept (the machine is shared)


def timed(call):
    t = time.perf_counter()
    out = call()
    return out, time.perf_counter() - t


def best_timed(call) -> tuple[object, float, float]:
    """The result, and the fewest wall seconds and CPU seconds (this process's threads, BLAS included) of REPEATS
    calls."""
    wall, cpu = [], []
    for _ in range(REPEATS):
        t, c = time.perf_counter(), time.process_time()
        out = call()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return out, min(wall), min(cpu)


def measure(model: ONMSC, train: list, y_train: np.ndarray, test: list, y_test: np.ndarray, fit_s: float) -> dict:
    """The numbers of one fitted model."""
    on_train, train_s = timed(lambda: model.predict(train))
    on_test, test_s, test_cpu_s = best_timed(lambda: model.predict(test))
    with tempfile.TemporaryDirectory() as tmp:  # dask views read from a store by the workers, 2,500 rows a chunk
        store = MultiViewStore.create(Path(tmp) / "test.zarr", test, chunk_rows=2500)
        lazy = [store.view_dask(p) for p in range(store.n_views)]
        on_dask, dask_s, _ = best_timed(lambda: model.predict(lazy).compute())
    assert np.array_equal(on_dask, on_test)
    sizes = {name: len(pickle.dumps(value)) for name, value in vars(model).items()}
    return {"n_train": len(y_train), "n_test": len(y_test), "solver": model.embedding_solver_,
            "width": int(model.embedding_.shape[1]), "fit_seconds": fit_s,
            "train_acc": evaluate(y_train, model.labels_)["acc"], "test_acc": evaluate(y_test, on_test)["acc"],
            "train_agreement": float(np.mean(on_train == model.labels_)),
            "predict_train_per_s": len(y_train) / train_s, "predict_test_per_s": len(y_test) / test_s,
            "predict_dask_per_s": len(y_test) / dask_s,
            "predict_test_per_cpu_s": len(y_test) / test_cpu_s,  # idle 2 cores: 1 to 2 x this (the GEMMs use both)
            "load_average": os.getloadavg()[0],
            "pickle_mb": len(pickle.dumps(model)) / 2**20,
            "largest_attributes_mb": {k: v / 2**20 for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:5]}}


def markdown(results: dict) -> str:
    """The table of bench/RESULTS.md's "predict" block."""
    rows = ["| fit | n | fit s | train ACC | test ACC | predict = labels_ on train | predict/s (numpy) | "
            "predict/s (dask, store chunks) | predict per CPU s | load average | pickle MB |",
            "|" + " --- |" + " ---: |" * 10]
    for name, r in results.items():
        rows.append(f"| {name} | {r['n_train']} | {r['fit_seconds']:.1f} | {r['train_acc']:.4f} | "
                    f"{r['test_acc']:.4f} | {100 * r['train_agreement']:.2f}% | {r['predict_test_per_s']:.0f} | "
                    f"{r['predict_dask_per_s']:.0f} | {r['predict_test_per_cpu_s']:.0f} | {r['load_average']:.1f} | "
                    f"{r['pickle_mb']:.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=mnist60k.DEFAULT_DATA_DIR)
    parser.add_argument("--knn-samples", type=int, default=5000, help="training images of the kNN fit")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "predict.json")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    images, y_train = load_mnist_dir(args.data_dir, "train")
    test_images, y_test = load_mnist_dir(args.data_dir, "t10k")
    train, test = mnist60k.image_views(images), mnist60k.image_views(test_images)
    results = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, Client(cluster):
        model, fit_s = timed(lambda: ONMSC(K, embedding="anchor", random_state=SEED).fit(train))
        results["anchor"] = measure(model, train, y_train, test, y_test, fit_s)
        n = args.knn_samples
        knn, fit_s = timed(lambda: ONMSC(K, embedding="exact", random_state=SEED).fit([X[:n] for X in train]))
        results["knn"] = measure(knn, [X[:n] for X in train], y_train[:n], test, y_test, fit_s)
    table = markdown(results)
    print(table)
    write_block(RESULTS_MD, "predict", table, "New samples: predict (Fashion-MNIST, `python bench/predict.py`)")
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
