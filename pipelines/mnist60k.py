"""Out-of-core ONMSC-LF on an MNIST-format data set (default: Fashion-MNIST train, 60k images), three views.

Views, each computed over row chunks and written to a Zarr MultiViewStore chunk by chunk:

- ``pixels``: the 784 intensities in [0, 1] (appearance);
- ``hog``: histograms of oriented gradients, 9 unsigned orientations in 4 x 4 cells of 7 x 7 pixels,
  L2-normalised over 2 x 2-cell blocks (324 values; local edge structure, invariant to contrast);
- ``dct``: the 12 x 12 lowest-frequency coefficients of the orthonormal 2-D DCT-II (144 values; global
  shape/silhouette, insensitive to pixel-level texture and noise; signed, so it gets the euclidean metric
  where the other two get cosine). It complements pixels (local intensities) and HOG (local gradients)
  with a frequency-domain summary of the whole image.

Examples::

    python pipelines/mnist60k.py --workers 2                              # Fashion-MNIST 60k, LocalCluster
    python pipelines/mnist60k.py --data-dir ../shared/data/mnist-t10k --limit 2000 --out runs/t10k
    python pipelines/mnist60k.py --scheduler tcp://127.0.0.1:8786 --sweep

Without ``--scheduler`` a forked child process builds the views while this one imports the fit's and the report's
modules (FIT_MODULES) and starts the cluster; the functions that need those modules import them when called.
"""
from __future__ import annotations

import argparse
import errno
import functools
import gc
import importlib
import json
import multiprocessing
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import CancelledError, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import dask
import dask.array as da
import numpy as np
import scipy.fft

from onmsc_dask.cli import (Terminated, cluster_count, connect, failure_line, one_line, out_dir, positive_int,
                            quiet_client_log, recorded_warnings, seed_arg, sigterm_raises, versions, warnings_as_lines,
                            worker_failures)
from onmsc_dask.cluster import SCHEDULER_CONFIG
from onmsc_dask.io import load_mnist_dir, mnist_header, mnist_splits
from onmsc_dask.outputs import RUN_FILES, check_run_files, labels_files, write_run_files
from onmsc_dask.progress import Progress, counted
from onmsc_dask.store import MultiViewStore
from onmsc_dask.validation import check_landmarks, check_n_clusters, check_n_components, n_clusters_of

if TYPE_CHECKING:
    from onmsc_dask.outofcore import OutOfCoreResult

DEFAULT_DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
SWEEP = (10, 50, 100, 500, 1000, 2000, 6000)
VIEW_NAMES = ("pixels", "hog", "dct")
#: images per pass of hog: its int64 temporaries (about 30 bytes a pixel each) then reuse freed memory instead of
#: page-faulting fresh maps (60k images: 1.6-1.9 -> 1.1-1.3 CPU-s, the same descriptors)
HOG_BLOCK_IMAGES = 1000
HOG_CELL = 7  # pixels per side of a HOG cell
#: the fit's and the report's modules (scikit-learn, matplotlib, distributed: 2.5-3 s of imports on one core)
FIT_MODULES = ("distributed", "onmsc_dask.api", "onmsc_dask.outofcore", "onmsc_dask.report")
WORKERS, MEMORY_LIMIT = 2, "2GiB"  # the LocalCluster's, without --scheduler (memory: with --processes)
#: the files a run writes into --out (beside its store)
OUTPUT_FILES = (*RUN_FILES, "anchor_sweep.png")


def pixels(images: np.ndarray) -> np.ndarray:
    """Flattened intensities in [0, 1]."""
    return images.reshape(len(images), -1).astype(np.float32) / 255.0


def hog(images: np.ndarray, cell: int = HOG_CELL, bins: int = 9) -> np.ndarray:
    """HOG descriptors of (n, h, w) uint8 images: unsigned orientation histograms weighted by gradient magnitude
    per cell x cell block of pixels, each 2 x 2 group of cells L2-normalised. The gradient (np.gradient's of the
    intensities in [0, 1]) is twice an integer pixel difference over 510, so its magnitude and orientation bin are
    looked up (``gradient_table``) instead of computed per pixel. HOG_BLOCK_IMAGES images at a time."""
    if images.dtype != np.uint8:
        raise TypeError(f"hog: expected uint8 images, got {images.dtype}")
    if len(images) > HOG_BLOCK_IMAGES:
        return np.concatenate([hog(images[s:s + HOG_BLOCK_IMAGES], cell, bins)
                               for s in range(0, len(images), HOG_BLOCK_IMAGES)])
    magnitudes, orientations = gradient_table(bins)
    key = (doubled_gradient(images, 1).astype(np.intp) + 510) * 1021 + doubled_gradient(images, 2) + 510
    n, h, w = images.shape
    ch, cw = h // cell, w // cell
    cells = ((np.arange(h) // cell).clip(max=ch - 1)[:, None] * cw + (np.arange(w) // cell).clip(max=cw - 1)) * bins
    index = np.arange(n)[:, None, None] * (ch * cw * bins) + cells + orientations[key]
    hist = np.bincount(index.ravel(), weights=magnitudes[key].ravel(), minlength=n * ch * cw * bins)
    hist = hist.reshape(n, ch, cw, bins).astype(np.float32)
    blocks = np.stack([hist[:, i:i + 2, j:j + 2].reshape(n, -1) for i in range(ch - 1) for j in range(cw - 1)],
                      axis=1)
    blocks /= np.sqrt((blocks**2).sum(axis=2, keepdims=True) + 1e-6)
    return blocks.reshape(n, -1)


def doubled_gradient(images: np.ndarray, axis: int) -> np.ndarray:
    """2 x np.gradient of integer images along `axis`, exactly, as int16: central differences inside, twice the
    one-sided difference at the edges."""
    I = images.astype(np.int16)
    g = np.empty_like(I)

    def part(start: int | None, stop: int | None) -> tuple[slice, ...]:
        return tuple(slice(start, stop) if ax == axis else slice(None) for ax in range(I.ndim))

    g[part(1, -1)] = I[part(2, None)] - I[part(None, -2)]
    g[part(0, 1)] = 2 * (I[part(1, 2)] - I[part(0, 1)])
    g[part(-1, None)] = 2 * (I[part(-1, None)] - I[part(-2, -1)])
    return g


@functools.lru_cache(maxsize=4)
def gradient_table(bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Magnitude (float32) and unsigned orientation bin of every gradient (gx, gy) = (a, b) / 510 of uint8 images,
    a and b in -510..510, flattened by (b + 510) * 1021 + a + 510."""
    d = np.arange(-510, 511, dtype=np.float32) / np.float32(510)
    gx, gy = d[None, :], d[:, None]
    angle = np.mod(np.arctan2(gy, gx), np.pi)
    orientation = np.minimum((angle / np.pi * bins).astype(np.intp), bins - 1)
    return np.hypot(gx, gy).ravel(), orientation.ravel()


def dct(images: np.ndarray, size: int = 12) -> np.ndarray:
    """The size x size lowest-frequency coefficients of the orthonormal 2-D DCT-II."""
    coeffs = scipy.fft.dctn(images.astype(np.float32) / 255.0, type=2, axes=(1, 2), norm="ortho")
    return coeffs[:, :size, :size].reshape(len(images), -1)


def image_views(images: np.ndarray) -> list[np.ndarray]:
    """The three views of uint8 images in memory, in VIEW_NAMES' order."""
    return [pixels(images), hog(images), dct(images)]


def split_of(data_dir: Path) -> str:
    """The split the pipeline clusters: train if `data_dir` has it, else t10k."""
    return "train" if "train" in mnist_splits(data_dir) else "t10k"


def check_images(data_dir: Path, split: str, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """The images the views are built from: 8-bit, at least two HOG cells a side."""
    if dtype != np.uint8 or min(shape[1:]) < 2 * HOG_CELL:
        raise ValueError(f"{data_dir}: {split} images of {dtype.name} and {shape[1]} x {shape[2]} pixels; the views "
                         f"need 8-bit (uint8) images of at least {2 * HOG_CELL} x {2 * HOG_CELL} pixels (HOG's 2 x 2 "
                         f"blocks of {HOG_CELL} x {HOG_CELL}-pixel cells)")


def check_parameters(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """k (``args.n_clusters``, the number of distinct labels by default) and the parameters that depend on n and k,
    from the IDX header and the labels: a wrong value is an error before anything is connected, read or written."""
    split = split_of(args.data_dir)
    dtype, dims, y = mnist_header(args.data_dir, split)
    check_images(args.data_dir, split, dtype, dims)
    n_images = dims[0]
    if args.limit is not None and args.limit > n_images:
        print(f"--limit {args.limit}: the {split} split has only {n_images} images; using all of them", flush=True)
    n = min(args.limit or n_images, n_images)
    if args.n_clusters is None:  # from the labels: a usage error (exit 2) when they cannot give it
        try:
            source = f"{args.data_dir} ({split}, {n} images)"
            args.n_clusters = n_clusters_of(None, None if y is None else y[:n], n, source)
        except ValueError as error:
            parser.error(str(error))
    else:
        check_n_clusters(args.n_clusters, n)
    check_landmarks(args.n_landmarks, None, args.n_clusters, n, check_n_components(args.n_components,
                                                                                   args.n_clusters, n))


def build_store(data_dir: Path, path: Path, limit: int | None, chunk_rows: int) -> MultiViewStore:
    """The three-view store of `data_dir`'s images (train split if present, else t10k), reused when it
    already holds the same images (the same files: names, sizes and modification times) in chunks of `chunk_rows`
    rows, rebuilt when it holds other images of this pipeline; any other existing path is left alone (an error)."""
    split = split_of(data_dir)
    files = {p.name: [(st := p.stat()).st_size, st.st_mtime_ns] for p in sorted(data_dir.iterdir())
             if p.name.startswith(f"{split}-") and p.is_file()}
    meta = {"source": str(data_dir.resolve()), "split": split, "files": files, "limit": limit,
            "views": list(VIEW_NAMES), "chunk_rows": chunk_rows}
    if path.exists():
        try:
            old = MultiViewStore(path).metadata
        except ValueError:
            old = None
        if old is not None and {key: v for key, v in old.items() if key != "image_shape"} == meta:
            return MultiViewStore(path)
        if old is None or old.get("views") != list(VIEW_NAMES):
            raise ValueError(f"{path} exists and is not a store this pipeline wrote, or its metadata is damaged; "
                             "refusing to overwrite it (delete it if this pipeline wrote it, or pass another --store "
                             "or --out)")
    images, y = load_mnist_dir(data_dir, split)
    check_images(data_dir, split, images.dtype, images.shape)
    images, y = images[:limit], None if y is None else y[:limit]
    blocks = da.from_array(images, chunks=(chunk_rows, -1, -1))
    views = [blocks.map_blocks(f, drop_axis=2, chunks=(blocks.chunks[0], (f(images[:1]).shape[1],)),
                               dtype=np.float32) for f in (pixels, hog, dct)]
    with dask.config.set(scheduler="threads"):  # the images are in this process: built here, not shipped in a graph
        return MultiViewStore.create(path, views, y, view_names=list(VIEW_NAMES), chunk_rows=chunk_rows,
                                     overwrite=True,
                                     metadata=meta | {"image_shape": {"view": 0, "shape": list(images.shape[1:])}})


def start_build(args: argparse.Namespace, stack: ExitStack) -> Callable[[], tuple[MultiViewStore, float]]:
    """build_store of `args`, in a forked child process while this one goes on; in this process, now, when fork is
    not available or this process runs other threads (a fork copies only the calling thread). Returns the call
    that waits for the store and the seconds its build took, or raises the build's error (with the child's
    traceback as its cause). Closing `stack` stops a child still running (the next build removes its partial
    store)."""
    path = args.store or args.out / "views.zarr"

    def build() -> float:
        t = time.perf_counter()
        build_store(args.data_dir, path, args.limit, args.chunk_rows)
        return time.perf_counter() - t

    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        seconds = build()
        return lambda: (MultiViewStore(path), seconds)
    receive, send = multiprocessing.Pipe(duplex=False)

    def child() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler: terminated, it just ends
        receive.close()  # the parent's end: a message the parent cannot take then fails here instead of blocking
        try:
            send.send(build())
        except BaseException as exc:  # noqa: BLE001 - the parent raises it
            trace = traceback.format_exc()
            try:
                pickle.loads(pickle.dumps(exc))
            except Exception:  # noqa: BLE001 - an exception that does not pickle and back: its type and message
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
            send.send((exc, trace))

    process = multiprocessing.get_context("fork").Process(target=child, name="mnist60k-views", daemon=True)
    process.start()
    send.close()  # the child's copy stays open: recv ends with EOFError if the child dies without a word
    stack.callback(lambda: (process.terminate(), process.join()) if process.is_alive() else None)

    def wait() -> tuple[MultiViewStore, float]:
        try:
            outcome = receive.recv()
        except EOFError:
            outcome = None
        except BaseException:  # e.g. Ctrl-C while waiting: the child stops too
            process.terminate()
            raise
        finally:
            receive.close()
            process.join()
        if outcome is None:
            raise OSError(f"building the views of {args.data_dir} stopped (the child process exited with code "
                          f"{process.exitcode}); nothing was fitted, run the same command again")
        if isinstance(outcome, tuple):
            exc, trace = outcome
            raise exc from ChildError(trace)
        return MultiViewStore(path), outcome

    return wait


class ChildError(Exception):
    """The traceback of an error raised in start_build's child process (the cause of the error raised here)."""


def view_scores(H: np.ndarray, y: np.ndarray, n_clusters: int, random_state: int) -> dict[str, float]:
    """report.single_view_scores of one view (its H_p^(o), (O, n, width)) on one OpenMP thread: the views are scored
    side by side, each on one core."""
    from threadpoolctl import threadpool_limits

    from onmsc_dask.report import single_view_scores

    with threadpool_limits(1, user_api="openmp"):
        return single_view_scores(H[None], y, n_clusters, ["view"], random_state)["view"]


def score(y: np.ndarray | None, labels: np.ndarray) -> dict[str, float] | None:
    """evaluate(y, labels), or None when the data have no labels."""
    from onmsc_dask.metrics import evaluate

    return None if y is None else evaluate(y, labels)


def fit_anchor(store: MultiViewStore, args: argparse.Namespace, n_landmarks: int, refine: bool,
               progress: Any = None) -> OutOfCoreResult:
    """``ONMSC(embedding="anchor")`` on `store`, its stages resumed from and kept in the store (``cache``)."""
    from onmsc_dask.api import ONMSC
    from onmsc_dask.outofcore import OutOfCoreResult

    model = ONMSC(args.n_clusters, embedding="anchor", order=args.order, n_landmarks=n_landmarks,
                  n_components=args.n_components, refine=refine, keep_intermediate=True, cache=store,
                  random_state=args.random_state)
    return OutOfCoreResult.of(model.fit(store, progress=progress))


def anchor_sweep(store: MultiViewStore, args: argparse.Namespace, shown: list[str]) -> list[dict]:
    """Fit each anchor number m of SWEEP with k < m <= n on its own copy of `store` without stages (so every
    stage is computed), in a temporary directory next to the store (so workers that read the store read the
    copies), removed afterwards: `store` keeps the main run's stages. Each copy has its own path, so no task key
    (which holds the store path) of one sweep point matches another's. Each entry keeps the warnings its fit added
    to `shown` (recorded_warnings)."""
    y, entries = store.labels, []
    width = check_n_components(args.n_components, args.n_clusters, store.n_samples)
    points = [m for m in SWEEP if width < m <= store.n_samples]  # the graph needs m > the width, m <= n
    if len(points) < len(SWEEP):
        print(f"sweep: m in {sorted(set(SWEEP) - set(points))} skipped (need {width} < m <= "
              f"{store.n_samples})", flush=True)
    with tempfile.TemporaryDirectory(prefix="sweep-", dir=store.path.parent) as tmp:
        for m in points:
            copy = store.copy(Path(tmp) / f"m{m}.zarr", stages=False)
            t, said = time.perf_counter(), len(shown)
            r = fit_anchor(copy, args, m, refine=True)
            entries.append({"n_landmarks": m, "seconds": time.perf_counter() - t, "scores": score(y, r.labels),
                            "warnings": shown[said:]})
            print(json.dumps(entries[-1]), flush=True)
            shutil.rmtree(copy.path)  # one copy on disk at a time
    return entries


def make_client(args: argparse.Namespace, log: Callable[[str], None] | None = None):
    """A Client on `--scheduler`, or on a new LocalCluster of `--workers` single-threaded workers: threads of this
    process (they share its imports and memory, so nothing is pickled between them; the tasks are NumPy/BLAS
    calls that release the GIL), or with `--processes` worker processes of `--memory-limit` each. `log` hears when
    the run waits for the scheduler's first worker."""
    from distributed import Client

    if args.scheduler:
        if args.workers is not None or args.memory_limit is not None or args.processes:
            print("--workers, --processes and --memory-limit are not used: the scheduler has its own workers",
                  flush=True)
        return connect(args.scheduler, log=log)
    if args.memory_limit is not None and not args.processes:
        print("--memory-limit is not used without --processes: thread workers share this process's memory",
              flush=True)
    with dask.config.set(SCHEDULER_CONFIG):  # the Client closes its LocalCluster with it
        return Client(n_workers=args.workers or WORKERS, threads_per_worker=1, processes=args.processes,
                      memory_limit=(args.memory_limit or MEMORY_LIMIT) if args.processes else 0, dashboard_address=":0")


def enter_client(args: argparse.Namespace, stack: ExitStack, log: Callable[[str], None] | None = None) -> Any:
    """make_client(args, log), closed with `stack`, under quiet_client_log (a lost scheduler: only the one-line
    error)."""
    stack.enter_context(quiet_client_log())
    return stack.enter_context(make_client(args, log))


def blas_threads(args: argparse.Namespace) -> AbstractContextManager:
    """One BLAS thread per call in this process while its threads are the LocalCluster's workers: the workers are
    the parallelism, as in worker processes (which dask starts with OPENBLAS_NUM_THREADS=1); two workers each calling
    two-thread BLAS put four busy threads on two cores, and the client's own stages work on n x width matrices, where
    more BLAS threads gain little and spin for a core on a busy machine (bench/RESULTS_scale.md)."""
    from threadpoolctl import threadpool_limits

    return nullcontext() if args.scheduler or args.processes else threadpool_limits(1, user_api="blas")


def plot_sweep(sweep: list[dict]) -> bytes:
    """Scores (when the data have labels) and time against the anchor number, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from onmsc_dask.report import png

    m = [s["n_landmarks"] for s in sweep]
    scored = sweep[0]["scores"] is not None
    fig, axes = plt.subplots(1, 1 + scored, figsize=(4.5 * (1 + scored), 3.5), squeeze=False)
    if scored:
        ax = axes[0, 0]
        for key in ("acc", "nmi", "purity"):
            ax.plot(m, [s["scores"][key] for s in sweep], "o-", label=key.upper() if key != "purity" else "purity")
        ax.set(xscale="log", xlabel="anchors m", ylabel="score", title="anchor-number sweep")
        ax.legend()
    ax_t = axes[0, -1]
    ax_t.plot(m, [s["seconds"] for s in sweep], "o-")
    ax_t.set(xscale="log", yscale="log", xlabel="anchors m", ylabel="seconds", title="time")
    fig.tight_layout()
    data = png(fig)
    plt.close(fig)
    return data


def page(store: MultiViewStore, result: Any, report: dict) -> Any:
    """report.html's content."""
    from onmsc_dask.assign import readout
    from onmsc_dask.report import store_page

    facts = {"parameters": {key: report[key] for key in ("n_clusters", "n_components", "n_landmarks", "order",
                                                          "random_state", "workers", "chunk_rows")},
             "seconds": {"store": report["store_seconds"], "fit": report["fit_seconds"], **report["stage_seconds"]}}
    return store_page(store, f"ONMSC clustering of {store.metadata['split']} images", report["data_dir"],
                      labels=result.labels, readout=readout(result.embedding, result.target, report["n_clusters"]),
                      view_weights=result.view_weights, related_views=result.related_views,
                      objective=result.objective, refinement_objective=result.refinement_objective,
                      view_metrics=result.metrics, scores=report["scores"], single_scores=None,  # main adds them when scored
                      facts=facts, random_state=report["random_state"], left_out_views=list(result.left_out_views))


def memory_size(text: str) -> str:
    """argparse type: a worker's memory limit as Dask reads it: a size (4GiB, 2e9), a share of the machine's memory
    (0.5; 1 all of it, 0 no limit) or auto."""
    from dask.utils import parse_bytes

    try:
        size = -1.0 if text.strip().lower() == "nan" else float(text) if text != "auto" else 0.0
    except ValueError:
        try:
            size = parse_bytes(text)
        except (ValueError, TypeError):
            size = -1.0
    if size < 0:
        raise argparse.ArgumentTypeError(f"must be a memory size such as 4GiB or 2e9, a share of the memory such as "
                                         f"0.5, or auto, got {text!r}")
    return text


class Deprecated(argparse.Action):
    """An old flag name: stored under the new one's dest, with a note on stderr."""

    def __init__(self, *args: Any, new: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"mnist60k: note: {option_string} is deprecated, use {self.new} (the onmsc-dask run name)",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"an MNIST-format IDX directory (default: {DEFAULT_DATA_DIR})")
    parser.add_argument("--out", type=out_dir, default=Path("runs/mnist60k"),
                        help="where report.json, report.html, labels and the plots go (default: runs/mnist60k)")
    parser.add_argument("--out-dir", dest="out", type=out_dir, action=Deprecated, new="--out", help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help="Zarr store of the views (default OUT/views.zarr)")
    parser.add_argument("--limit", type=positive_int, help="use the first N images (default: all)")
    parser.add_argument("--chunk-rows", type=positive_int, default=10000, help="rows per Zarr chunk (default: 10000)")
    parser.add_argument("--scheduler", help="address of a running dask scheduler (default: a LocalCluster)")
    parser.add_argument("--workers", type=positive_int, help=f"LocalCluster workers (default: {WORKERS})")
    parser.add_argument("--processes", action="store_true",
                        help="LocalCluster workers as processes (default: threads of this process, which start "
                             "faster and pickle nothing)")
    parser.add_argument("--memory-limit", type=memory_size,
                        help=f"memory per worker process, with --processes (default: {MEMORY_LIMIT})")
    parser.add_argument("--n-clusters", type=cluster_count, help="k (default: the number of distinct labels)")
    parser.add_argument("--n-landmarks", type=positive_int, default=1000, help="anchors m (default: 1000)")
    parser.add_argument("--order", type=positive_int, default=2, help="largest Laplacian order O (default: 2)")
    parser.add_argument("--n-components", type=positive_int,
                        help="eigenvectors per graph, at least k (default: k, or 2k from 500 samples per cluster; "
                             "docs/solvers.md)")
    parser.add_argument("--no-refine", dest="refine", action="store_false",
                        help="keep the k-means labels, without the label refinement (docs/defaults.md)")
    parser.add_argument("--random-state", type=seed_arg, default=0, help="seed (default: 0)")
    parser.add_argument("--seed", dest="random_state", type=seed_arg, action=Deprecated, new="--random-state",
                        help=argparse.SUPPRESS)
    parser.add_argument("--sweep", action="store_true", help=f"also fit every anchor number m in {SWEEP}")
    parser.add_argument("--quiet", action="store_true", help="stage lines only, no task progress")
    args = parser.parse_args(argv)
    if not args.data_dir.is_dir():
        parser.error(f"{args.data_dir} is not a directory (apt-get install dataset-fashion-mnist, or pass --data-dir)")
    if not mnist_splits(args.data_dir):
        parser.error(f"{args.data_dir} holds no MNIST-format image file ({{train,t10k}}-images[-.]idx3-ubyte[.gz])")
    check_parameters(args, parser)
    check_run_files(args.out, OUTPUT_FILES, before_run=True)
    args.out.mkdir(parents=True, exist_ok=True)
    log = Progress(quiet=args.quiet)
    with ExitStack() as cluster, ExitStack() as stack:
        shown = stack.enter_context(recorded_warnings())
        client = None
        if args.scheduler:  # first: a wrong --scheduler fails before anything is read or written
            client = enter_client(args, cluster, log)
            stack.enter_context(log.watch())  # the client's threads run: the views are built here, with progress
        log(f"building the three views of {args.data_dir}")
        # in a child process while this one imports the fit's modules, unless a thread runs here (the client's)
        built = start_build(args, cluster)
        for name in FIT_MODULES:
            importlib.import_module(name)
        from onmsc_dask.report import figures, report_files, scores_line, sizes_line

        stack.enter_context(blas_threads(args))
        if client is None:
            stack.enter_context(log.watch())
            log("starting the Dask cluster")
            client = enter_client(args, cluster)
        log(f"Dask dashboard: {client.dashboard_link}")
        log.client = client
        report, store, result = fit(args, client, log, built)
        run_warnings = list(shown)
        if args.sweep:
            log("anchor sweep")
            report["sweep"] = anchor_sweep(store, args, shown)
        log.client = None
        cluster.close()  # the client and its LocalCluster: the workers' memory is freed before the report
        log("writing report.json, report.html, labels, convergence.png")
        with ThreadPoolExecutor(2) as pool:  # the views are scored while the page is drawn and the labels written
            scores = None if store.labels is None else [
                pool.submit(view_scores, result.view_embeddings[p], store.labels, args.n_clusters, args.random_state)
                for p in range(store.n_views)]
            run_page = page(store, result, report)
            pngs = figures(run_page)
            labels = labels_files(result.labels)
            report["single_view_scores"] = run_page.single_view_scores = None if scores is None else {
                name: future.result() for name, future in zip(store.view_names, scores)}
        report["warnings"] = run_page.warnings = run_warnings  # the sweep's are in its entries
        sweep = {"anchor_sweep.png": plot_sweep(report["sweep"])} if report.get("sweep") else {}
        write_run_files(args.out, {"report.json": json.dumps(report, indent=2).encode(),
                                   **report_files(run_page, pngs), **labels, **sweep}, OUTPUT_FILES)
        log(f"wrote {args.out / 'report.html'}")
    print(sizes_line(report["cluster_sizes"]))
    print(f"n={store.n_samples} views={store.view_names} metrics={result.metrics}")
    if report["scores"]:
        print(scores_line(report["scores"]))
    print(f"store {report['store_seconds']:.1f}s  fit {report['fit_seconds']:.1f}s  stages: "
          + "  ".join(f"{s}={t:.2f}s" for s, t in result.timings.items()))
    return report


def fit(args: argparse.Namespace, client: Any, log: Progress,
        built: Callable[[], tuple[MultiViewStore, float]]) -> tuple[dict, MultiViewStore, Any]:
    """Wait for the store (start_build's call `built`: built or reused), fit it, and the report's content."""
    from onmsc_dask.report import cluster_sizes

    store, t_store = built()
    log(f"store {store.path}: {store.n_samples} samples, views {store.view_names} ({t_store:.1f}s)")
    t1 = time.perf_counter()
    result = fit_anchor(store, args, args.n_landmarks, args.refine, progress=lambda line: log(f"  {line}"))
    seconds = time.perf_counter() - t1
    log(f"fusion {'converged' if result.converged else 'stopped'} after {counted(len(result.objective), 'iteration')}")
    report = {"data_dir": str(args.data_dir.resolve()), "split": store.metadata["split"], "limit": args.limit,
              "chunk_rows": args.chunk_rows, "n_samples": store.n_samples, "views": store.view_names,
              "view_dims": [store.view_shape(p)[1] for p in range(store.n_views)], "metrics": result.metrics,
              "n_clusters": args.n_clusters, "n_components": result.parameters["n_components"],
              "n_landmarks": result.parameters["n_landmarks"], "order": args.order, "refine": args.refine,
              "random_state": args.random_state, "workers": len(client.scheduler_info().get("workers", {})),
              "store_seconds": t_store,
              "fit_seconds": seconds, "stage_seconds": result.timings,
              "computed_stages": result.computed_stages,  # the others were read back from the store (resumed)
              "n_iter": len(result.objective), "converged": result.converged,
              "view_weights": dict(zip(store.view_names, result.view_weights.tolist())),
              "objective": result.objective.tolist(), "refinement_objective": result.refinement_objective.tolist(),
              "scores": score(store.labels, result.labels),
              "cluster_sizes": cluster_sizes(result.labels, args.n_clusters),
              "single_view_scores": None,  # main scores the views while it writes the report
              "versions": versions()}
    return report, store, result


if __name__ == "__main__":
    try:
        with warnings_as_lines("mnist60k"), sigterm_raises():
            main()
        gc.freeze()  # the exit then skips its garbage-collection passes over this run's objects (1.1-1.2 s)
    except (ValueError, OSError, CancelledError, *worker_failures()) as exc:  # bad input, no scheduler, it went
        # away, or a task killed its workers: one line
        resume = ("; the same command resumes after the last finished stage (with --scheduler, once the scheduler and "
                  "its workers are restarted: `dask worker` exits with its scheduler)"
                  if isinstance(exc, CancelledError) else
                  "; free space, then the same command resumes after the last finished stage"
                  if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) else
                  "; the same command resumes after the last finished stage"
                  if isinstance(exc, worker_failures()) else "")
        sys.exit(f"mnist60k: error: {failure_line(exc)}{resume}")
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (the views' child stopped with it): one line, as onmsc-dask
        terminated = isinstance(exc, Terminated)  # run's
        print(f"mnist60k: {'terminated (SIGTERM)' if terminated else 'interrupted'}; the store keeps the stages "
              "finished before, and the same command resumes after the last of them", file=sys.stderr)
        sys.exit(143 if terminated else 130)
