"""Command line: ``onmsc-dask run (--data PATH | --dataset NAME) --out DIR [options]``.

A run loads the views, copies them into the Zarr store ``DIR/views.zarr``, fits :class:`~onmsc_dask.api.ONMSC`
on a Dask cluster (a local one unless ``--scheduler`` is given) and writes ``report.json``,
``convergence.png`` and ``labels.npy`` to ``DIR``. Bad input ends the run with a one-line error and exit code 2.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from contextlib import ExitStack
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from .datasets import DATASETS

EXIT_BAD_INPUT = 2
_METRIC_NAMES = {"acc": "ACC", "nmi": "NMI", "purity": "purity", "ari": "ARI"}
_VERSIONED = ("onmsc-dask", "numpy", "scipy", "scikit-learn", "dask", "distributed", "zarr", "pynndescent")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onmsc-dask", description="Multi-view spectral clustering (ONMSC) on Dask.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="cluster a multi-view data set and write a report",
                              description="Cluster a multi-view data set; writes views.zarr, report.json, "
                                          "convergence.png and labels.npy to --out.")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--data", type=Path, help="a .mat, .npz or .csv file, a .zarr store or an MNIST IDX directory")
    source.add_argument("--dataset", choices=sorted(DATASETS), help="a built-in data set (default: digits)")
    run.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
    run.add_argument("--scheduler", help="address of a running Dask scheduler (default: start a LocalCluster)")
    run.add_argument("--n-clusters", type=_positive_int, help="k (default: number of distinct labels)")
    run.add_argument("--embedding", default="auto", choices=("auto", "exact", "anchor", "nystrom"),
                     help="spectral embedding solver (default: auto)")
    run.add_argument("--order", type=_positive_int, default=2, help="largest Laplacian order O (default: 2)")
    run.add_argument("--n-neighbors", type=_positive_int, help="kNN graph neighbours N (default: from n and k)")
    run.add_argument("--random-state", type=int, default=0, help="seed (default: 0)")
    run.add_argument("--workers", type=_positive_int, default=2, help="LocalCluster worker processes (default: 2)")
    return parser


class _Log:
    """Stage lines with the elapsed wall time on stderr."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.start:7.1f}s] {message}", file=sys.stderr, flush=True)


def _load(args: argparse.Namespace) -> tuple[list, np.ndarray | None, list[str] | None, str]:
    """Views, labels, view names (None for defaults) and a description of the source."""
    if args.data is None:
        name = args.dataset or "digits"
        views, y, names = DATASETS[name]()
        return views, y, names, name
    from .io import load
    from .store import MultiViewStore

    views, y = load(args.data)
    names = MultiViewStore(args.data).view_names if (args.data / "zarr.json").is_file() else None
    return views, y, names, str(args.data)


def _plot_convergence(objective: np.ndarray, path: Path) -> None:
    from matplotlib.figure import Figure  # renders with the Agg canvas, no GUI backend

    fig = Figure(figsize=(5, 3.5), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(np.arange(1, len(objective) + 1), objective, marker="o")
    ax.set(xlabel="iteration", ylabel="objective J (Eq. 11, maximised)", title="ONMSC late fusion convergence")
    ax.xaxis.get_major_locator().set_params(integer=True)
    fig.savefig(path, dpi=120)


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in _VERSIONED:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def run(args: argparse.Namespace, log: _Log) -> dict:
    """Execute ``onmsc-dask run``; returns the report (also written to ``args.out/report.json``)."""
    from distributed import Client, LocalCluster

    from .api import ONMSC
    from .metrics import evaluate
    from .store import MultiViewStore
    from .validation import check_views

    timings = {}
    t = time.perf_counter()
    views, y, names, source = _load(args)
    views = check_views(views, names)
    if args.n_clusters is None and y is None:
        raise ValueError(f"{source} has no labels, so the number of clusters is unknown; pass --n-clusters K")
    n_clusters = args.n_clusters or len(np.unique(y))
    timings["load"] = time.perf_counter() - t
    log(f"loaded {source}: {views[0].shape[0]} samples, views {[v.shape[1] for v in views]}, k={n_clusters}")

    t = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    store_path = args.out / "views.zarr"
    reuse = args.data is not None and args.data.resolve() == store_path.resolve()
    if reuse:
        store = MultiViewStore(store_path)
    else:
        store = MultiViewStore.create(store_path, views, y, view_names=names, overwrite=True,
                                      metadata={"source": source})
    views = [store.read_view(p) for p in range(store.n_views)]
    timings["write_store"] = time.perf_counter() - t
    log(f"{'using' if reuse else 'wrote'} {store_path} (views {store.view_names})")

    model = ONMSC(n_clusters, n_neighbors=args.n_neighbors, order=args.order, embedding=args.embedding,
                  random_state=args.random_state)
    t = time.perf_counter()
    with ExitStack() as stack:
        if args.scheduler:
            client = stack.enter_context(Client(args.scheduler))
        else:
            cluster = stack.enter_context(LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                                       processes=True, dashboard_address=":0"))
            client = stack.enter_context(Client(cluster))
        n_workers = len(client.scheduler_info()["workers"])
        timings["start_cluster"] = time.perf_counter() - t
        log(f"Dask scheduler {client.scheduler.address} with {n_workers} workers; fitting ONMSC")
        t = time.perf_counter()
        model.fit(views)
        timings["fit"] = time.perf_counter() - t
    for stage, seconds in model.timings_.items():
        log(f"  fit stage {stage}: {seconds:.2f}s")
    log(f"fusion {'converged' if model.converged_ else 'stopped'} after {model.n_iter_} iterations")

    metrics = None if y is None else evaluate(y, model.labels_)
    if metrics:
        print("  ".join(f"{_METRIC_NAMES[key]} {value:.4f}" for key, value in metrics.items()))
    resolved = {"n_clusters": n_clusters, "n_neighbors": model.n_neighbors_, "embedding": model.embedding_solver_,
                "metric": model.metric_, "lambda1": model.lambda1_, "lambda2": model.lambda2_}
    for name, value in [("labels", model.labels_), ("embedding", model.embedding_),
                        ("view_weights", model.view_weights_), ("objective", model.objective_)]:
        store.write_result("onmsc", name, np.asarray(value), resolved | {"order": args.order,
                                                                           "random_state": args.random_state})
    store.mark_complete("onmsc")

    np.save(args.out / "labels.npy", model.labels_)
    _plot_convergence(model.objective_, args.out / "convergence.png")
    report = {
        "dataset": {"source": source, "store": str(store_path), "n_samples": store.n_samples,
                    "view_names": store.view_names, "view_dims": [v.shape[1] for v in views],
                    "n_classes": None if y is None else int(len(np.unique(y)))},
        "parameters": {"n_clusters": args.n_clusters, "embedding": args.embedding, "order": args.order,
                       "n_neighbors": args.n_neighbors, "random_state": args.random_state,
                       "workers": None if args.scheduler else args.workers, "scheduler": args.scheduler},
        "resolved": resolved | {"n_workers": n_workers},
        "metrics": metrics,
        "view_weights": dict(zip(store.view_names, map(float, model.view_weights_))),
        "objective": [float(v) for v in model.objective_],
        "n_iter": int(model.n_iter_),
        "converged": bool(model.converged_),
        "timings": timings | {"fit_stages": model.timings_, "total": time.perf_counter() - log.start},
        "versions": _versions(),
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {args.out / 'report.json'}, convergence.png, labels.npy")
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``onmsc-dask``; returns the exit code (0 success, 2 bad input)."""
    args = build_parser().parse_args(argv)
    try:
        run(args, _Log())
    except (ValueError, OSError) as exc:
        print(f"onmsc-dask: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
