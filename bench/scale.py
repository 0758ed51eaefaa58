"""Scale benchmark on three-view Fashion-MNIST (pixels, HOG, DCT; pipelines/mnist60k.py).

In one run, on the same 60k x 3-view data:
- ONMSC anchor, out-of-core (onmsc_dask.outofcore.fit_store on a Zarr store; first and warm run);
- ONMSC exact, in memory (``ONMSC(embedding="exact")``, its per-view tasks on the same cluster);
- scikit-learn ``SpectralClustering(affinity="nearest_neighbors")`` on each single view, on 50 principal
  components of the pixels (``n_neighbors=10``), and on the average of the three views' kNN affinities
  (``affinity="precomputed"``); eigen_solver "amg" if pyamg is importable, else "arpack";
- the whole cold command ``python pipelines/mnist60k.py`` (a new process, a new output directory);
with wall time, peak RSS of every process (client and workers, psutil) and ACC/NMI; then the out-of-core
anchor fit at n = 7.5k, 15k, 30k, 60k (and 1M with ``--million``: views generated chunk by chunk into Zarr
from shifted/deformed copies of the real images) and the log-log slope of time vs n.

The ONMSC fits run on the pipeline's LocalCluster (``mnist60k.make_client``: ``--workers`` single-threaded workers,
threads of this process with one BLAS thread per call; worker processes of ``--memory-limit`` with
``--processes``); scikit-learn runs in this process with its own BLAS threads.

    python bench/scale.py                     # writes bench/results/scale.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import psutil
import scipy.ndimage
import scipy.sparse as sp
import subprocess
import tempfile
from sklearn.cluster import SpectralClustering
from sklearn.decomposition import PCA
from sklearn.neighbors import kneighbors_graph

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pipelines"))
import mnist60k  # noqa: E402

from onmsc_dask.api import ONMSC  # noqa: E402
from onmsc_dask.io import load_mnist_dir  # noqa: E402
from onmsc_dask.metrics import evaluate  # noqa: E402
from onmsc_dask.outofcore import fit_store  # noqa: E402
from onmsc_dask.warmup import warm_up  # noqa: E402
from onmsc_dask.store import MultiViewStore  # noqa: E402

K = 10
SEED = 0
#: the same m at every n (the default, min(1000, n / 10), would be 750 at 7,500), so the slope is in n alone
N_LANDMARKS = 1000
SIZES = (7500, 15000, 30000, 60000)
MILLION = 1_000_000


class PeakRSS:
    """Peak resident memory (MB) of this process and of each of its descendants, sampled every 0.1 s."""

    def __init__(self) -> None:
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            for proc in [me, *me.children(recursive=True)]:
                try:
                    self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0.0), proc.memory_info().rss / 2**20)
                except psutil.NoSuchProcess:
                    pass
            self._stop.wait(0.1)

    def __enter__(self) -> "PeakRSS":
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self, worker_pids: list[int]) -> dict:
        return {"client_mb": round(self.peaks.get(os.getpid(), 0.0)),
                "workers_mb": [round(self.peaks.get(pid, 0.0)) for pid in worker_pids]}


def timed(fn, worker_pids: list[int]) -> tuple[object, dict]:
    """Run fn(); return its result and {"seconds", peak RSS of client and workers}. The page cache is flushed first
    (os.sync, untimed): the 1M run writes 5 GB of stores, whose write-back would otherwise overlap later timings."""
    os.sync()
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
    return out, {"seconds": round(seconds, 2), **rss.summary(worker_pids)}


def deformed_chunk(images: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Images start:stop of an endless stream of copies of `images`, each shifted by up to 2 pixels and
    rotated/sheared by a small random affine map (seeded by its index)."""
    out = np.empty((stop - start, *images.shape[1:]), np.uint8)
    centre = (np.array(images.shape[1:]) - 1) / 2
    for j, i in enumerate(range(start, stop)):
        rng = np.random.default_rng(i)
        A = np.eye(2) + rng.uniform(-0.12, 0.12, (2, 2))
        offset = centre - A @ centre + rng.integers(-2, 3, 2)
        out[j] = scipy.ndimage.affine_transform(images[i % len(images)], A, offset, order=1)
    return out


def million_store(images: np.ndarray, y: np.ndarray, path: Path, chunk_rows: int = 10000,
                  n: int = MILLION) -> MultiViewStore:
    """n-sample (default 1M) three-view store, each view generated and written chunk by chunk (never whole); reused
    when `path` already holds the store generated from the same images."""
    meta = {"generator": "deformed_chunk", "n": n, "chunk_rows": chunk_rows,
            "source_sha1": hashlib.sha1(images.tobytes()).hexdigest()}
    try:
        if MultiViewStore(path).metadata == meta:
            return MultiViewStore(path)
    except ValueError:  # no store there yet (or a damaged one): generate it
        pass
    starts = range(0, n, chunk_rows)
    source = dask.delayed(images, pure=True)  # one key for the 60k source images, not a copy per chunk task
    raw = da.concatenate([da.from_delayed(dask.delayed(deformed_chunk)(source, s, min(s + chunk_rows, n)),
                                          (min(chunk_rows, n - s), 28, 28), np.uint8) for s in starts])
    views = [raw.map_blocks(f, drop_axis=2, chunks=(raw.chunks[0], (f(images[:1]).shape[1],)), dtype=np.float32)
             for f in (mnist60k.pixels, mnist60k.hog, mnist60k.dct)]
    return MultiViewStore.create(path, views, y[np.arange(n) % len(y)], view_names=list(mnist60k.VIEW_NAMES),
                                 chunk_rows=chunk_rows, metadata=meta, overwrite=True)


def sklearn_baselines(views: list[np.ndarray], y: np.ndarray, pids: list[int], repeats: int) -> dict:
    """SpectralClustering(nearest_neighbors) per view, and on the average of the views' kNN affinities.
    A single view's time is its kNN affinity plus the clustering of it (the work affinity="nearest_neighbors"
    does); the affinities are reused by the average baseline. The fastest view is timed `repeats` times (the
    median is its time), like the warm anchor fit it is compared with."""
    try:
        import pyamg  # noqa: F401

        solver = "amg"
    except ImportError:
        solver = "arpack"
    out, affinities = {"eigen_solver": solver}, []
    def single_view(X: np.ndarray) -> tuple[sp.csr_matrix, dict]:
        conn, t_graph = timed(lambda: kneighbors_graph(X, 10, include_self=True), pids)
        A = 0.5 * (conn + conn.T)
        sc = SpectralClustering(K, affinity="precomputed", eigen_solver=solver, random_state=SEED,
                                assign_labels="kmeans")
        labels, t_fit = timed(lambda: sc.fit_predict(A), pids)
        return A, {"seconds": round(t_graph["seconds"] + t_fit["seconds"], 2),
                   "client_mb": max(t_graph["client_mb"], t_fit["client_mb"]), "workers_mb": t_fit["workers_mb"],
                   **_scores(y, labels)}

    for name, X in zip(mnist60k.VIEW_NAMES, views):
        A, out[f"sklearn_{name}"] = single_view(X)
        affinities.append(A)
        print(name, out[f"sklearn_{name}"], flush=True)
    fastest = min(mnist60k.VIEW_NAMES, key=lambda name: out[f"sklearn_{name}"]["seconds"])
    first = out[f"sklearn_{fastest}"]
    runs = [first["seconds"]] + [single_view(views[mnist60k.VIEW_NAMES.index(fastest)])[1]["seconds"]
                                 for _ in range(repeats - 1)]
    out[f"sklearn_{fastest}"] = {**first, "seconds": float(np.median(runs)), "runs": runs}
    def pca_view() -> tuple[np.ndarray, dict]:
        sc = SpectralClustering(K, affinity="nearest_neighbors", n_neighbors=10, eigen_solver=solver,
                                random_state=SEED)
        return timed(lambda: sc.fit_predict(PCA(50, random_state=SEED).fit_transform(views[0])), pids)

    pca = [pca_view() for _ in range(repeats)]
    out["sklearn_pca50_pixels"] = {**pca[0][1], "seconds": float(np.median([t["seconds"] for _, t in pca])),
                                   "runs": [t["seconds"] for _, t in pca], **_scores(y, pca[0][0])}
    print("pca50", out["sklearn_pca50_pixels"], flush=True)
    sc = SpectralClustering(K, affinity="precomputed", eigen_solver=solver, random_state=SEED)
    labels, t = timed(lambda: sc.fit_predict(sp.csr_matrix(sum(affinities) / len(affinities))), pids)
    graph_seconds = sum(out[f"sklearn_{n}"]["seconds"] for n in mnist60k.VIEW_NAMES)
    out["sklearn_average_affinity"] = {**t, "seconds": round(t["seconds"] + graph_seconds, 2),
                                       **_scores(y, labels)}
    return out


def cold_command(data_dir: Path, repeats: int) -> dict:
    """Wall seconds of the whole ``python pipelines/mnist60k.py`` command, each run a new process writing a new
    output directory (views built, cluster started, fit, report); the median of ``repeats`` runs, and its ACC/NMI."""
    runs, scores = [], {}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as out:
            os.sync()  # as in timed()
            t0 = time.perf_counter()
            subprocess.run([sys.executable, str(ROOT / "pipelines" / "mnist60k.py"), "--data-dir", str(data_dir),
                            "--out", out, "--quiet"], check=True, stdout=subprocess.DEVNULL)
            runs.append(round(time.perf_counter() - t0, 2))
            scores = json.loads((Path(out) / "report.json").read_text())["scores"]
    return {"seconds": float(np.median(runs)), "runs": runs, "acc": round(scores["acc"], 4),
            "nmi": round(scores["nmi"], 4)}


def _scores(y: np.ndarray, labels: np.ndarray) -> dict:
    s = evaluate(y, labels)
    return {"acc": round(s["acc"], 4), "nmi": round(s["nmi"], 4)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=mnist60k.DEFAULT_DATA_DIR)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/onmsc-bench"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", action="store_true",
                        help="worker processes (default: thread workers, as pipelines/mnist60k.py runs)")
    parser.add_argument("--memory-limit", default="4GiB", help="of each worker process (with --processes)")
    parser.add_argument("--skip-baselines", action="store_true", help="only the out-of-core anchor runs")
    parser.add_argument("--million", action="store_true", help="add n = 1M to the scaling sweep")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs of the warm anchor fit and of sklearn's fastest single view; the median "
                             "is reported (default: 3)")
    args = parser.parse_args(argv)
    cluster_args = argparse.Namespace(scheduler=None, workers=args.workers, processes=args.processes,
                                      memory_limit=args.memory_limit if args.processes else None)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {"cores": os.cpu_count(), "workers": args.workers,
                    "worker_kind": "processes" if args.processes else "threads", "load_average_start": os.getloadavg()}

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=2))

    t0 = time.perf_counter()
    store = mnist60k.build_store(args.data_dir, args.work_dir / "fmnist60k.zarr", None, 10000)
    report["store_seconds"] = round(time.perf_counter() - t0, 2)
    y = store.labels
    with mnist60k.make_client(cluster_args) as client:
        pids = sorted(set(client.run(os.getpid).values()))  # thread workers: this process

        def fit_store_timed(store: MultiViewStore) -> tuple[object, dict]:
            with mnist60k.blas_threads(cluster_args):
                return timed(lambda: fit_store(store, K, n_landmarks=N_LANDMARKS, random_state=SEED,
                                               client=client), pids)
        t0 = time.perf_counter()
        warm = warm_up(client)
        report["numba_warmup"] = {"cold_seconds_all_workers": round(time.perf_counter() - t0, 2),
                                  "warm_seconds_per_worker": [round(s, 3) for s in warm.values()]}
        print("numba warm-up", report["numba_warmup"], flush=True)
        for run, repeats in (("anchor_first", 1), ("anchor_warm", args.repeats)):
            runs = []
            for _ in range(repeats):  # each from a fresh copy of the views: every stage computed
                copy = store.copy(args.work_dir / f"{run}.zarr", stages=False, overwrite=True)
                res, t = fit_store_timed(copy)
                runs.append({**t, **_scores(y, res.labels), "stage_seconds": {s: round(v, 2) for s, v in
                                                                               res.timings.items()}})
            median = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
            report[run] = {**median, "runs": [r["seconds"] for r in runs]} if repeats > 1 else median
            print(run, report[run], flush=True)
            save()
        report["scaling"] = []
        sizes = SIZES + ((MILLION,) if args.million else ())
        images, y_all = load_mnist_dir(args.data_dir, "train")
        for n in sizes:
            path = args.work_dir / f"scale{n}.zarr"
            t0 = time.perf_counter()
            built = (million_store(images, y_all, path) if n == MILLION
                     else mnist60k.build_store(args.data_dir, path, n, 10000))
            store_seconds = round(time.perf_counter() - t0, 2)
            run_store = built.copy(args.work_dir / "scale_run.zarr", stages=False, overwrite=True)
            res, t = fit_store_timed(run_store)
            report["scaling"].append({"n": n, "store_seconds": store_seconds, **t,
                                      "stage_seconds": {s: round(v, 2) for s, v in res.timings.items()},
                                      **_scores(built.labels, res.labels)})
            print(report["scaling"][-1], flush=True)
            save()
        ns, secs = zip(*[(s["n"], s["seconds"]) for s in report["scaling"]])
        report["scaling_slope"] = round(float(np.polyfit(np.log(ns), np.log(secs), 1)[0]), 3)
        save()
        if not args.skip_baselines:
            views = [store.read_view(p) for p in range(store.n_views)]
            est = ONMSC(K, embedding="exact", random_state=SEED)
            with mnist60k.blas_threads(cluster_args):
                est, t = timed(lambda: est.fit(views), pids)
            report["onmsc_exact"] = {**t, **_scores(y, est.labels_)}
            print("exact", report["onmsc_exact"], flush=True)
            save()
            report.update(sklearn_baselines(views, y, pids, args.repeats))
            save()
    if not args.skip_baselines:
        report["cold_command"] = cold_command(args.data_dir, args.repeats)
        print("cold command", report["cold_command"], flush=True)
    report["load_average_end"] = os.getloadavg()
    save()
    print_table(report)
    return report


def print_table(report: dict) -> None:
    rows = [k for k in report if isinstance(report[k], dict) and "acc" in report[k]]
    print(f"{'method':28s} {'seconds':>9s} {'ACC':>7s} {'NMI':>7s} {'client MB':>10s} workers MB")
    for k in rows:
        r = report[k]
        print(f"{k:28s} {r['seconds']:9.1f} {r['acc']:7.4f} {r['nmi']:7.4f} {str(r.get('client_mb', '-')):>10s} {r.get('workers_mb', '-')}")
    for s in report.get("scaling", []):
        print(f"anchor n={s['n']:<8d} {s['seconds']:9.1f} {s['acc']:7.4f} {s['nmi']:7.4f}")
    if "scaling_slope" in report:
        print(f"log-log slope of time vs n: {report['scaling_slope']}")
    if "sklearn_pca50_pixels" in report and "anchor_warm" in report:
        sk = report["sklearn_pca50_pixels"]["seconds"]
        print(f"sklearn on 50 PCA components of the pixels: {sk:.1f} s; the warm anchor fit is "
              f"{sk / report['anchor_warm']['seconds']:.2f}x faster, the cold command takes "
              f"{report.get('cold_command', {}).get('seconds', float('nan')):.1f} s")
    single = [report[f"sklearn_{name}"]["seconds"] for name in mnist60k.VIEW_NAMES if f"sklearn_{name}" in report]
    if single and "anchor_warm" in report:
        print(f"speed-up of the warm anchor fit over sklearn's fastest single view (medians): "
              f"{min(single) / report['anchor_warm']['seconds']:.2f}x")


if __name__ == "__main__":
    main()
