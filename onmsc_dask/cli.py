"""Command line: ``onmsc-dask run (--data PATH | --dataset NAME) --out DIR [options]``.

A run copies the views into the Zarr store ``DIR/views.zarr``, clusters them on a Dask cluster (a local one
unless ``--scheduler`` is given) and writes ``report.json``, ``report.html`` (report.py), ``convergence.png``,
``labels.npy`` and ``labels.csv`` to ``DIR``; the cluster sizes go to stdout.
The fit is :class:`~onmsc_dask.api.ONMSC` on the store: when the solver is ``anchor`` (``auto`` above
spectral.EXACT_MAX_SAMPLES samples) its anchor chain reads the stored row chunks on the workers and keeps its stages
in the store (``cache``), so a store given with ``--data`` is never read whole; otherwise the views are read whole. Bad input ends the run with a one-line error and exit
code 2.
"""
from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import platform
import re
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import dask
import numpy as np

from .cluster import SCHEDULER_CONFIG, WorkersLost
from .datasets import DATASETS
from .outputs import RUN_FILES, check_run_files, labels_files, write_run_files
from .progress import Progress, counted
from .validation import SEED_MAX, n_clusters_of, user_warning

EXIT_BAD_INPUT, EXIT_CLUSTER_LOST, EXIT_INTERRUPTED, EXIT_TERMINATED = 2, 1, 130, 143
DEFAULT_WORKERS = 2
#: seconds to wait for a --scheduler to answer, and then for its first worker
SCHEDULER_TIMEOUT = 60.0
_VERSIONED = ("onmsc-dask", "numpy", "scipy", "scikit-learn", "dask", "distributed", "zarr", "pynndescent")


def positive_int(text: str, minimum: int = 1, maximum: int | None = None) -> int:
    """argparse type: an integer >= ``minimum`` (and <= ``maximum``)."""
    bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer {bound}, got {text!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        raise argparse.ArgumentTypeError(f"must be an integer {bound}, got {value}")
    return value


def cluster_count(text: str) -> int:
    """argparse type: k, an integer >= 2."""
    return positive_int(text, minimum=2)


def out_dir(text: str) -> Path:
    """argparse type: a local directory path, not empty (which would be the current directory), not a URL."""
    from .location import is_url

    if not text.strip():
        raise argparse.ArgumentTypeError("must name a directory (use . for the current one), got an empty string")
    if is_url(text) or re.match(r"[A-Za-z][A-Za-z0-9+.-]+:[:/]", text):  # also s3:/x, simplecache::s3://x
        raise argparse.ArgumentTypeError(f"must be a local directory, got the URL {text} (a --data URL store receives "
                                         "the run's stages; the report and labels are written locally)")
    return Path(text)


def data_arg(text: str) -> Path | str:
    """argparse type: a local path, or an fsspec URL (``s3://bucket/views.zarr``) kept as it is."""
    from .location import is_url

    return text if is_url(text) and not text.startswith("file://") else Path(text.removeprefix("file://"))


def storage_options_arg(text: str) -> dict:
    """argparse type: a JSON object of fsspec storage options."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def seed_arg(text: str) -> int:
    """argparse type: a seed (an integer in [0, 2**32 - 1])."""
    return positive_int(text, minimum=0, maximum=SEED_MAX)


EXAMPLES = """examples:
  onmsc-dask run --dataset digits --out runs/digits            built-in data, no download (about 1 minute)
  onmsc-dask run --data data.mat --view-names rgb depth --out runs/data
  onmsc-dask run --data a.csv b.csv --labels y.csv --out runs/ab   one file per view
  onmsc-dask run --data big.npz --embedding anchor --out runs/big   run again, it resumes after its last stage
  onmsc-dask run --data data.mat --scheduler tcp://HEAD:8786 --out runs/data
then open runs/.../report.html in a browser."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onmsc-dask", description="Multi-view spectral clustering (ONMSC) on Dask.",
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version('onmsc-dask')}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="cluster a multi-view data set and write a report",
                              description="Cluster a multi-view data set; writes views.zarr, report.json, "
                                          "report.html, convergence.png, labels.npy and labels.csv to --out.",
                              epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = run.add_mutually_exclusive_group()
    source.add_argument("--data", type=data_arg, nargs="+",
                        help="a .mat or .npz file, a .zarr store (a path, or an fsspec URL such as "
                             "s3://bucket/x.zarr), an MNIST IDX directory, or .csv / .npy / scipy.sparse .npz "
                             "files (one per view)")
    source.add_argument("--dataset", choices=sorted(DATASETS), help="a built-in data set (default: digits)")
    run.add_argument("--view-names", nargs="+", metavar="NAME",
                     help="names of the views, in order (default: the file names of one file per view, else view0, "
                          "view1, ...; a store keeps its own)")
    run.add_argument("--labels", type=Path,
                     help="a .csv or .npy file of labels (class ids or names) for .csv / .npy views (other formats carry "
                          "theirs)")
    run.add_argument("--storage-options", type=storage_options_arg,
                     help="JSON object of fsspec options (credentials, client_kwargs) for a --data URL")
    run.add_argument("--out", type=out_dir, required=True, help="output directory (created if missing)")
    run.add_argument("--scheduler", help="address of a running Dask scheduler (default: start a LocalCluster)")
    run.add_argument("--n-clusters", type=cluster_count, help="k (default: number of distinct labels)")
    run.add_argument("--embedding", default="auto", choices=("auto", "exact", "anchor", "nystrom"),
                     help="spectral embedding solver: exact (sparse eigensolver on kNN graphs), anchor (anchor graphs, "
                          "out of core), nystrom (the paper's, to reproduce it; less accurate), auto (exact up to "
                          "20000 samples, else anchor; default)")
    run.add_argument("--order", type=positive_int, default=2, help="largest Laplacian order O (default: 2)")
    run.add_argument("--n-components", type=positive_int,
                     help="eigenvectors per graph, at least k (default: k, or 2k from 500 samples per cluster; "
                          "docs/solvers.md)")
    run.add_argument("--n-neighbors", type=positive_int, help="kNN graph neighbours N (default: from n and k)")
    run.add_argument("--n-landmarks", type=positive_int,
                     help="landmarks m of the anchor graph, and Nystrom columns (default: min(1000, n / 10), at "
                          "least 2 x the embedding width)")
    run.add_argument("--n-nearest-landmarks", type=positive_int, default=3,
                     help="landmarks r each sample links to in the anchor graph (default: 3)")
    run.add_argument("--consensus-graph", default="auto", choices=("auto", "rank", "average"),
                     help="graph of the consensus embedding F: the views' rank consensus or the paper's average "
                          "(default: auto, rank on exact kNN graphs; docs/defaults.md)")
    run.add_argument("--no-refine", dest="refine", action="store_const", const=False, default="auto",
                     help="keep the k-means labels of the fused embedding, without the label refinement on the view "
                          "graphs (default: refined on anchor graphs only; docs/defaults.md)")
    run.add_argument("--random-state", type=seed_arg, default=0, help="seed (default: 0)")
    run.add_argument("--workers", type=positive_int,
                     help=f"LocalCluster worker processes (default: {DEFAULT_WORKERS}; not with --scheduler)")
    run.add_argument("--quiet", action="store_true",
                     help="stage lines only: no task progress nor the progress line every few seconds")
    return parser


class _Log(Progress):
    """Stage lines with the elapsed wall time on stderr, and Dask task progress (progress.Progress)."""


def _solver(args: argparse.Namespace, n_samples: int) -> str:
    """The solver the run's fit uses: --embedding, with auto resolved from n (only "anchor" runs resume)."""
    from .spectral import resolve_solver

    return resolve_solver(args.embedding, n_samples)


def _check_parameters(args: argparse.Namespace, n_samples: int, n_clusters: int) -> None:
    """The parameters that depend on n and k, checked before anything is written."""
    from .extend import extension_landmarks
    from .validation import check_landmarks, check_n_components, check_n_neighbors

    width = check_n_components(args.n_components, n_clusters, n_samples)
    solver = _solver(args, n_samples)
    if args.n_neighbors is not None and solver != "anchor":
        check_n_neighbors(args.n_neighbors, n_samples)
    if solver != "exact":
        check_landmarks(args.n_landmarks, args.n_nearest_landmarks if solver == "anchor" else None, n_clusters,
                        n_samples, width)
    if solver != "anchor":  # the landmarks of predict's extension
        extension_landmarks(args.n_landmarks, args.n_nearest_landmarks, n_clusters, n_samples, width)
    if solver == "anchor" and args.consensus_graph == "rank":
        raise ValueError("--consensus-graph rank needs kNN graphs (--embedding exact or nystrom); the anchor graph "
                         "links samples to landmarks, not to each other")


def _is_view_file(path: Path) -> bool:
    """Whether a --data path holds one view (io.load_view_files), with labels from --labels."""
    from .io import VIEW_FILE_READERS, npz_kind

    if not isinstance(path, Path) or path.suffix.lower() not in VIEW_FILE_READERS:
        return False
    return path.suffix.lower() != ".npz" or npz_kind(path) != "views"  # a damaged one: the view reader's error


def _check_data(args: argparse.Namespace) -> None:
    """``--data`` is one file, store or directory, or .csv / .npy files only (one view each); ``--labels`` goes
    with those; every local path given exists."""
    data = args.data or []
    for path in [*data, *([args.labels] if args.labels is not None else [])]:
        if isinstance(path, Path) and not path.exists():  # not a URL
            raise FileNotFoundError(f"{path}: no such file or directory")
    view_files = [p for p in data if _is_view_file(p)]
    if args.labels is not None and (not data or len(view_files) != len(data)):
        raise ValueError("--labels goes with .csv / .npy / scipy.sparse .npz views; .mat, multi-view .npz, store and "
                         "IDX inputs carry their own labels")
    if len(data) > 1 and len(view_files) != len(data):
        raise ValueError("several --data paths must all be .csv, .npy or scipy.sparse .npz files, one view each")


def _load_input(args: argparse.Namespace) -> tuple[list, np.ndarray | None, list[str] | None, str]:
    """Views, labels, view names and a description of ``--data`` (not a store) or ``--dataset``."""
    from .io import load, load_view_files, npz_view_names, view_file_names

    data = args.data or []
    if not data:
        name = args.dataset or "digits"
        return *DATASETS[name](), name
    if _is_view_file(data[0]):  # all of them (_check_data)
        names = view_file_names(data)
        given = args.view_names is not None and len(args.view_names) == len(data)  # else _open_store's error
        views, y = load_view_files(data, args.labels, list(args.view_names) if given else names)
        return views, y, names, ", ".join(map(str, data))
    names = npz_view_names(data[0]) if data[0].suffix.lower() == ".npz" else None  # named arrays: their names
    return *load(data[0]), names, str(data[0])


def _open_store(args: argparse.Namespace, log: _Log, shown: list[str]) -> tuple[Any, str, int, Path | None]:
    """The run's store ``DIR/views.zarr``, a description of the source, k, and the store it copies (else None). A
    store given with ``--data`` is copied file by file (never read whole, so its values are checked by the fit;
    used as it is when it already is ``DIR/views.zarr``); other input is loaded, validated and written. A
    ``DIR/views.zarr`` written from the same input files, unchanged (_input_files), is used as it is, with its stages:
    the same command resumes, its input's warnings (`shown` while it was read) shown again. Nothing is created before
    the input is valid."""
    from .store import MultiViewStore
    from .validation import check_views

    store_path = args.out / "views.zarr"
    url, given = _url(args), _given_store(args)
    if url is not None:  # an object store is read where it is, by the workers; the run's stages go into it
        source = MultiViewStore(url, args.storage_options)
        k = n_clusters_of(args.n_clusters, source.labels, source.n_samples, url)
        _check_parameters(args, source.n_samples, k)
        source.image_view()  # the report's sample images: a wrong image_shape ends the run now, not after the fit
        log(f"using {url} where it is (the run's stages are written into it)")
        return source, url, k, None
    itself = given is not None and given.resolve() == store_path.resolve()
    fingerprint = None if itself else _input_files(args)
    previous, why = (None, "") if itself else _previous_store(store_path, fingerprint)
    if given is not None or previous is not None:
        store = previous if previous is not None else MultiViewStore(given)
        source = str(given) if given is not None else store.metadata.get("source", str(store_path))
        k = n_clusters_of(args.n_clusters, store.labels, store.n_samples, source)
        _check_parameters(args, store.n_samples, k)
        store.image_view()
        if itself:
            log(f"using {store_path}")
            return store, source, k, None
        if previous is not None:  # the same command again: an anchor run resumes after its last finished stage
            for message in previous.metadata.get("input_warnings", []):  # e.g. the class names' ids, for the report
                user_warning(message)
            if _solver(args, store.n_samples) == "anchor":
                kept, damaged, other = _finished(previous, args)
                log(f"{_resuming(kept)}: {store_path} holds this input (finished stages: "
                    f"{_stages_text(kept, damaged, other)})")
            else:
                log(f"reusing {store_path}: it holds this input; an in-memory run computes every stage again")
            return previous, source, k, given
        _replacing(store_path, why, log)
        log(f"copying {given} to {store_path}")
        copy = _recorded(store.copy(store_path, stages=False, overwrite=True), fingerprint)  # this run's input
        return copy, source, k, given
    first = len(shown)
    views, y, names, name = _load_input(args)
    if args.view_names is not None:
        if len(args.view_names) != len(views):
            raise ValueError(f"--view-names gives {len(args.view_names)} name{'s' * (len(args.view_names) != 1)} for "
                             f"the {len(views)} views of {name}")
        names = list(args.view_names)
    views = check_views(views, names, constant=True)  # the fit leaves a constant view out, with a warning
    k = n_clusters_of(args.n_clusters, y, views[0].shape[0], name)
    _check_parameters(args, views[0].shape[0], k)
    log(f"loaded {name}: {views[0].shape[0]} samples, views {[v.shape[1] for v in views]}")
    _replacing(store_path, why, log)
    store = _recorded(MultiViewStore.create(store_path, views, y, view_names=names, overwrite=True,
                                            metadata={"source": name, "input_warnings": shown[first:],
                                                      **_image_metadata(args)}), fingerprint)
    log(f"wrote {store_path} (views {store.view_names})")
    return store, name, k, None


def _check_arguments(args: argparse.Namespace) -> None:
    """The errors the arguments show by themselves, raised before a --scheduler is connected or anything is written:
    --data and --labels that do not go together, --storage-options without a URL, --view-names with a store, a URL
    scheme that is not installed or storage options it does not take."""
    from .location import location
    from .store import MultiViewStore

    _check_data(args)
    _check_out(args)
    url = _url(args)
    if args.storage_options is not None and url is None:
        raise ValueError("--storage-options go with a --data URL (s3://, gs://, memory://, ...)")
    given = url or _given_store(args)
    if args.view_names is not None and given is not None:
        if url is None:  # a zarr group that is no store: that error first (it keeps no view names)
            MultiViewStore(given)
        raise ValueError(f"--view-names is not used with a store: {given} keeps its own view names")
    if url is not None:
        location(url, args.storage_options).filesystem()


#: what a run writes into --out
OUTPUTS = ("views.zarr", *RUN_FILES)


def _check_out(args: argparse.Namespace) -> None:
    """--out neither holds an input (or a file inside an input directory) under a name the run writes, itself or
    through a symbolic link (but DIR/views.zarr given as --data, which the run uses as it is), nor a directory where
    it writes a file (check_run_files), nor lies inside an input directory or store (the run would change the input
    it is given)."""
    out = args.out.resolve()
    given = _given_store(args)
    inputs = {p.resolve(): p for p in [*(args.data or []), *([args.labels] if args.labels is not None else [])]
              if isinstance(p, Path)}  # not a URL
    for source, path in inputs.items():
        if source.is_dir() and (source == out or source in out.parents):
            raise ValueError(f"--out {args.out} is inside the input {path}, which the run would change; give an --out "
                             "outside it")
    for name in OUTPUTS:
        target = (args.out / name).resolve()
        path = next((path for source, path in inputs.items() if source == target or source in target.parents), None)
        if path is not None and not (path == given and name == "views.zarr"):
            raise ValueError(f"--out {args.out} holds the input {path}, or a file inside it, which the run would "
                             f"overwrite with its {name}; give another --out")
    check_run_files(args.out, before_run=True)


def _given_store(args: argparse.Namespace) -> Path | None:
    """The local store given as the one --data path, else None."""
    from .io import is_store

    data = args.data or []
    return data[0] if len(data) == 1 and isinstance(data[0], Path) and is_store(data[0]) else None


def _url(args: argparse.Namespace) -> str | None:
    """The --data URL (data_arg keeps only URLs as strings), else None."""
    return args.data[0] if args.data is not None and len(args.data) == 1 and isinstance(args.data[0], str) else None


def _input_files(args: argparse.Namespace) -> dict:
    """What identifies the run's input: the built-in data set's name, or the path, size and modification time of
    every input file (of every file of a store or directory, but a store's stages), and the CRC-32 of each file given
    itself (a file replaced by one of the same size with its old modification time, as `cp -p` restores one); and
    --view-names, which the store holds."""
    import fsspec

    from .store import crc32

    names = {} if args.view_names is None else {"view_names": list(args.view_names)}
    if not args.data:
        return {"dataset": args.dataset or "digits", **names}

    def stat(path: Path) -> list[int]:
        st = path.stat()
        return [st.st_size, st.st_mtime_ns]

    local = fsspec.filesystem("file")
    return {str(p.resolve()): [*stat(p), crc32(local, str(p))] if p.is_file() else
            {str(f.relative_to(p)): stat(f) for f in sorted(p.rglob("*"))
             if f.is_file() and f.relative_to(p).parts[0] != "stages"}
            for p in [*args.data, *([args.labels] if args.labels is not None else [])]} | names


#: _previous_store's reason for a DIR/views.zarr that does not open
NOT_WHOLE = "not a whole store"


def _previous_store(store_path: Path, fingerprint: dict) -> tuple[Any, str]:
    """The store an earlier run wrote from the same input (same files, unchanged), else None and why it is not
    (for _replacing): other input, or its views or labels are no longer the files it wrote (deleted or truncated)."""
    from .store import MultiViewStore

    if not store_path.is_dir():
        return None, "not a store"
    try:
        store = MultiViewStore(store_path)
    except ValueError:  # not a whole store: replaced
        return None, NOT_WHOLE
    if store.metadata.get("input") != fingerprint:
        return None, "made from other input"
    damaged = store.damaged_data_file()
    if damaged is not None:
        return None, f"made from this input, but its file {damaged} was deleted or changed since"
    return store, ""


def _recorded(store: Any, fingerprint: dict | None) -> Any:
    """``store`` with the run's input and the sizes of its view and label files in its metadata (_previous_store)."""
    store.update_metadata(input=fingerprint)
    store.record_data_files()
    return store


def _finished(store: Any, args: argparse.Namespace) -> tuple[list[str], str | None, list[str]]:
    """The anchor chain's stages (the ones a run resumes after) the store holds finished, in pipeline order up to the
    first that is not, whose files are missing, of another size or whose metadata cannot be read (checksums are
    left to the run), or that was made with another value of a parameter the command sets (_other_parameters); that
    damaged stage (else None), and those parameters (else []): the run recomputes that stage and every stage after it."""
    from .outofcore import STAGES

    done, kept, stored = set(store.finished_stages()), [], store.stages()
    for stage in STAGES:
        if stage not in done:
            break
        if other := _other_parameters(stored.get(stage) or {}, args):
            return kept, None, other
        if store.stage_damage(stage, checksums=False) is not None:
            return kept, stage, []
        kept.append(stage)
    return kept, None, []


def _other_parameters(params: dict, args: argparse.Namespace) -> list[str]:
    """The parameters of the command line that a stored stage's `params` hold with another value ("random_state 0,
    not 1"); the ones left to their default rule (n_landmarks, n_components) only when given."""
    given = {"random_state": args.random_state, "order": args.order, "n_nearest_landmarks": args.n_nearest_landmarks,
             "n_landmarks": args.n_landmarks, "n_components": args.n_components}
    return [f"{name} {params[name]}, not {value}" for name, value in given.items()
            if value is not None and name in params and params[name] != value]


def _store_error(where: Any) -> str | None:
    """Why this process cannot open the store at `where` (a Location), in one line; None if it can."""
    from .store import MultiViewStore

    try:
        MultiViewStore(where)
    except Exception as exc:  # noqa: BLE001 - any failure to open it is the answer
        return one_line(exc)
    return None


def _check_workers_read(client: Any, store: Any) -> None:
    """A ValueError, before the fit, if a Dask worker cannot open the --data URL store this process opened: workers
    started elsewhere lack the client's environment (its credentials, AWS_ENDPOINT_URL), and their first read would
    fail mid-run, where a run whose stages are all stored would not read at all."""
    from .location import Location

    if not isinstance(store.location, Location):
        return
    errors = client.run(_store_error, store.location)
    bad = {worker: error for worker, error in errors.items() if error is not None}
    if not bad:
        return
    worker, error = next(iter(bad.items()))
    need = "" if store.location.protocol == "memory" else (
        "; the workers read the store themselves, so they need its endpoint and credentials too: give them in "
        "--storage-options, or in the workers' environment")
    raise ValueError(f"{len(bad)} of {len(errors)} Dask workers cannot read {store.location}, which this process "
                     f"reads (worker {worker}: {error}){need}")


def _resuming(kept: list[str]) -> str:
    """How the line about a store's finished stages starts."""
    return "resuming" if kept else "computing every stage"


def _stages_text(kept: list[str], damaged: str | None, other: list[str]) -> str:
    """_finished's stages as a phrase."""
    made = (f"; {'the stages after them were' if kept else 'its stages were'} made with {', '.join(other)}: they "
            "are computed again") if other else ""
    return (", ".join(kept) or "none") + (f"; {damaged} is damaged: it and the stages after it are recomputed"
                                          if damaged is not None else "") + made + (REUSED if kept else "")


#: how the stages a resume lists are reused
REUSED = "; a finished stage is reused if made with the same parameters"


def _image_metadata(args: argparse.Namespace) -> dict:
    """``image_shape`` of the store's metadata (report.html's thumbnails): the digits' 8 x 8 pixels, or the one
    view of an MNIST IDX directory (rows x cols from its images file's header, as io.load reads it)."""
    from .datasets import IMAGE_SHAPES
    from .io import idx_shape, mnist_image_file, mnist_splits

    if not args.data:
        shape = IMAGE_SHAPES.get(args.dataset or "digits")
        return {} if shape is None else {"image_shape": shape}
    if args.data[0].is_dir() and mnist_splits(args.data[0]):
        _, rows, cols = idx_shape(mnist_image_file(args.data[0]))
        return {"image_shape": {"view": 0, "shape": [rows, cols]}}
    return {}


def _replacing(store_path: Path, why: str, log: _Log) -> None:
    """Say so, and why (_previous_store), when the run replaces an earlier run's store, and remove that run's results
    (an interrupted run must not leave them beside the new store); a store that no longer opens (its root metadata
    lost) is removed first, when zarr metadata in it shows a run wrote it."""
    if store_path.is_symlink():
        raise ValueError(f"{store_path} is a symbolic link, so it is not replaced; remove it or give another --out")
    if not store_path.exists():
        return
    if not store_path.is_dir():
        raise ValueError(f"{store_path} is not a store a run wrote (a file), so it is not replaced; move it away or "
                         "give another --out")
    remove = why == NOT_WHOLE and any(store_path.iterdir())
    if remove and not any((store_path / group / "zarr.json").is_file() for group in ("views", "labels", "stages")):
        raise ValueError(f"{store_path} is not a store a run wrote (no views, labels or stages group in it), so it is "
                         "not replaced; move it away or give another --out")
    stale = [name for name in RUN_FILES if (store_path.parent / name).is_file()]  # of that store's input, not this
    log(f"replacing the previous run's store {store_path} ({why})"
        + (f", and removing its results ({', '.join(stale)})" if stale else ""))
    for name in stale:
        (store_path.parent / name).unlink()
    if remove:
        shutil.rmtree(store_path)


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    return {"python": platform.python_version()} | {package: _version(package) for package in _VERSIONED}


def _fit(store: Any, n_clusters: int, args: argparse.Namespace, client: Any, log: _Log) -> dict:
    """Fitted labels, embedding, mu, objective, resolved parameters and stage times of
    :class:`~onmsc_dask.api.ONMSC` on the run's store: when the solver resolves to ``anchor``, the anchor chain over
    the stored row chunks, its stages resumed from and written to the store (``cache``, no view read whole);
    otherwise the views read whole."""
    from .api import ONMSC
    from .graph import BRUTE_FORCE_MAX_SAMPLES
    from .warmup import CACHED_SECONDS, COMPILE_SECONDS, warm_up

    anchor = _solver(args, store.n_samples) == "anchor"
    if anchor and args.n_neighbors is not None:
        log("--n-neighbors is not used: the anchor graph links each sample to its nearest landmarks")
    if args.embedding == "nystrom":
        log("the Nystrom solver reproduces the paper's; the exact one (the default up to 20000 samples) is more "
            "accurate")
    if not anchor and store.n_samples > BRUTE_FORCE_MAX_SAMPLES:  # pynndescent's kNN graphs: compile it once
        log(f"pynndescent on the workers: compiled the first time on this machine (about {COMPILE_SECONDS} s), "
            f"loaded from numba's cache after that (about {CACHED_SECONDS} s)")
        started = time.perf_counter()
        warm_up(client)
        log(f"pynndescent ready on the workers after {time.perf_counter() - started:.0f} s")
    model = ONMSC(n_clusters, n_neighbors=None if anchor else args.n_neighbors, order=args.order,
                  embedding="anchor" if anchor else args.embedding, n_components=args.n_components,
                  n_landmarks=args.n_landmarks, n_nearest_landmarks=args.n_nearest_landmarks,
                  consensus_graph=args.consensus_graph, refine=args.refine, keep_intermediate=True,
                  cache=store if anchor else None, random_state=args.random_state)
    model.fit(store, progress=lambda line: log(f"  {line}"))  # messages name the store's views
    fit = {"labels": model.labels_, "embedding": model.embedding_, "target": model.fusion_target_,
           "view_weights": model.view_weights_, "view_embeddings": model.view_embeddings_,
           "objective": model.objective_, "n_iter": model.n_iter_, "converged": bool(model.converged_),
           "stages": model.timings_, "refinement_objective": model.refinement_objective_}
    # the input views the graphs and H cover: all but those left out before the graphs (constant, too few rows)
    embedded = np.setdiff1d(np.arange(store.n_views), model.left_out_views_)
    if anchor:
        log(f"  late fusion {'converged' if model.converged_ else 'stopped'} after "
            f"{counted(model.n_iter_, 'iteration')}")
        return {**fit, "embedded_views": embedded.tolist(),
                "resolved": {**model.stage_parameters_, "n_clusters": n_clusters, "n_neighbors": None,
                             "embedding": "anchor", "pipeline": "out_of_core", "metric": model.metric_,
                             "consensus_graph": model.consensus_graph_,
                             "related_views": model.related_views_.tolist(),
                             "left_out_views": model.left_out_views_.tolist()}}
    return {**fit, "embedded_views": embedded.tolist(),
            # the stages before fusion, named apart from outofcore.STAGES (whose resume they would break)
            "intermediate": {
                "view_graphs": {f"view{p}": graph for p, graph in zip(embedded, model.view_graphs_)},
                "view_embeddings": {"H": model.view_embeddings_, "eigenvalues": model.view_eigenvalues_,
                                    "F": model.average_embedding_, "related": model.related_views_,
                                    "views": embedded}},
            "resolved": {"n_clusters": n_clusters, "n_components": int(model.embedding_.shape[1]),
                         "n_neighbors": model.n_neighbors_, "n_landmarks": model.n_landmarks_,
                         "embedding": model.embedding_solver_, "pipeline": "in_memory", "metric": model.metric_,
                         "lambda1": model.lambda1_, "lambda2": model.lambda2_,
                         "consensus_graph": model.consensus_graph_, "related_views": model.related_views_.tolist(),
                         "left_out_views": model.left_out_views_.tolist(),
                         "n_neighbors_tried": {str(N): d for N, d in model.n_neighbors_tried_.items()}}}


async def _identity(address: str, timeout: float) -> dict:
    """The reply of the Dask server at `address` to the "identity" message every server answers; connection
    attempts for up to `timeout` seconds (a scheduler may still be starting)."""
    from distributed.comm import connect as open_comm

    comm = await open_comm(address, timeout=timeout)
    try:
        await comm.write({"op": "identity"})
        return await comm.read()
    finally:
        comm.abort()


def _check_host(address: str) -> None:
    """An OSError at once for an address whose host name is not known (a typo would be retried for the whole
    timeout); a name the resolver cannot look up now (EAI_AGAIN) is left to the connection attempts."""
    import socket

    from distributed.comm.addressing import get_address_host, parse_address

    try:
        if parse_address(address)[0] not in ("tcp", "tls", "ws", "wss"):
            return
        host = get_address_host(address)
        socket.getaddrinfo(host, None)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_NONAME:
            raise OSError(f"no Dask scheduler at {address} (the host name {host!r} is not known); give the address "
                          "`dask scheduler` prints (tcp://HOST:8786 by default)") from None
    except ValueError:  # not an address distributed can parse: its own error, from the connection attempt
        return


def connect(address: str, timeout: float = SCHEDULER_TIMEOUT, log: Callable[[str], None] | None = None) -> Any:
    """A distributed Client (the default one from now on) of the scheduler at `address`, which has at least one
    worker; or an OSError within about 2 x `timeout` seconds: a wrong or closed port, an address that is not a
    scheduler (a worker, a dashboard) or a scheduler without workers would otherwise end in a traceback or wait
    forever (on some ports Client() never returns). `log` is told when connecting and when the wait for a first
    worker begins."""
    from distributed import Client

    _check_host(address)
    if log is not None:  # a refused port is retried: a scheduler started with this command may still be coming up
        log(f"connecting to the Dask scheduler at {address} (trying for up to {timeout:g} s)")
    try:  # a short-lived thread with its own event loop, so this works under a running loop (Jupyter) too
        with ThreadPoolExecutor(1) as pool:
            # 1 s more than the connection attempts: a closed port ends in their error, a silent one in this wait's
            server = pool.submit(asyncio.run, asyncio.wait_for(_identity(address, timeout), timeout + 1)).result()
    except Exception as exc:  # noqa: BLE001 - any failure means: no usable scheduler there
        detail = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else one_line(exc)
        raise OSError(f"no Dask scheduler at {address} ({detail}); give the address `dask scheduler` prints "
                      "(tcp://HOST:8786 by default, not a worker's or the dashboard's port)") from None
    kind = server.get("type") if isinstance(server, dict) else None
    if kind != "Scheduler":
        raise OSError(f"{address} is a Dask {kind or 'server'}, not a scheduler; give the address `dask scheduler` "
                      "prints (tcp://HOST:8786 by default)")
    client = Client(address, timeout=f"{timeout}s")
    try:
        if log is not None and not client.scheduler_info().get("workers"):
            log(f"waiting up to {timeout:g} s for a worker of the Dask scheduler at {address}")
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        client.close()
        raise OSError(f"the Dask scheduler at {address} has no workers (none joined within {timeout:g} s); "
                      f"start some with `dask worker {address} --nthreads 1`") from None
    return client


def worker_failures() -> tuple[type[Exception], ...]:
    """The errors of Dask workers that died under a task (distributed's KilledWorker, once it has killed
    distributed.scheduler.allowed-failures + 1 workers) or were lost with data sent to them, every time
    (WorkersLost); distributed is imported here, not with this module."""
    from distributed.scheduler import KilledWorker

    return KilledWorker, WorkersLost


def failure_line(exc: BaseException) -> str:
    """An error's one line (one_line), for KilledWorker with what kills a worker."""
    if isinstance(exc, worker_failures()[0]):
        return ("a task killed every Dask worker that ran it: a worker process dies when it runs out of memory "
                f"(give the workers more) or crashes in native code, as its log says ({one_line(exc)})")
    return one_line(exc)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (distributed's span several); an OSError of a file as "FILE: reason"."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror[0].lower()}{exc.strerror[1:]}"
    return " ".join(str(exc).split()) or type(exc).__name__


@contextmanager
def quiet_client_log() -> Iterator[None]:
    """distributed.client's, in-process workers' and asyncio's logged errors silenced: a lost scheduler, an
    interrupted run or a failed task then ends in the one-line error of the caller, not also in the client's logged
    reconnect tracebacks, a worker thread's "Compute Failed" or "Async instruction … ended with CancelledError", a
    closed in-process comm's traceback or asyncio's "Task exception was never retrieved" of the client's abandoned
    waits (worker processes keep their logs: a nanny's "exceeded 95% memory budget" says why it restarted one)."""
    import distributed  # noqa: F401 - importing it sets its loggers' levels, which would undo ours

    logs = [logging.getLogger(name) for name in ("distributed.client", "distributed.worker",
                                                 "distributed.worker.state_machine", "distributed.batched", "asyncio")]
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for log, level in zip(logs, levels):
            log.setLevel(level)


@contextmanager
def _signal_handler(signum: int, handler: Any) -> Iterator[None]:
    """``handler`` for ``signum`` meanwhile, in the main thread (where Python sets them; elsewhere nothing changes).
    SIGINT ignored while worker processes start makes them inherit that: Ctrl-C in a terminal (which signals the
    whole process group) then stops only this process, in one line, and not also every worker with a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


def run(args: argparse.Namespace, log: _Log) -> dict:
    """Execute ``onmsc-dask run``; returns the report (also written to ``args.out/report.json``). The output
    directory is locked for the whole run (supervision.OutputLock)."""
    from .supervision import OutputLock

    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out} is a file; it must be a directory (created if missing)")
    _check_arguments(args)
    with OutputLock(args.out), recorded_warnings() as shown:
        return _run(args, log, shown)


def _run(args: argparse.Namespace, log: _Log, shown: list[str]) -> dict:
    from distributed import Client, LocalCluster
    from distributed.client import ClosedClientError

    from .metrics import evaluate
    from .location import Location
    from .supervision import ClusterWatch, StoreLock, worker_count
    from .report import cluster_sizes, report_files, scores_line, sizes_line

    timings = {}
    workers = args.workers or DEFAULT_WORKERS
    with ExitStack() as stack:
        t = time.perf_counter()
        stack.enter_context(quiet_client_log())
        if args.scheduler:  # connected before anything is written
            if args.workers is not None:
                log(f"--workers {args.workers} is not used: the scheduler at {args.scheduler} has its own workers")
            client = stack.enter_context(connect(args.scheduler, SCHEDULER_TIMEOUT, log))
            timings["start_cluster"] = time.perf_counter() - t
            _watch(client, stack, log)
        t = time.perf_counter()
        store, source, n_clusters, copy_of = _open_store(args, log, shown)
        if isinstance(store.location, Location):  # a URL: the run's stages go into the user's store
            stack.enter_context(StoreLock(store.location))
            kept, damaged, other = _finished(store, args)
            if _solver(args, store.n_samples) == "anchor" and (kept or damaged or other):
                log(f"{_resuming(kept)}: {source} holds finished stages ({_stages_text(kept, damaged, other)})")
        y = store.labels
        timings["load_and_store"] = time.perf_counter() - t
        log(f"{store.n_samples} samples, views {store.view_names}, k={n_clusters}")

        if not args.scheduler:
            t = time.perf_counter()
            log(f"starting a local Dask cluster of {workers} worker processes")
            # a task's error reaches the client, which reports it in one line: no worker tracebacks on stderr
            with _signal_handler(signal.SIGINT, signal.SIG_IGN), dask.config.set(SCHEDULER_CONFIG):
                cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                           dashboard_address=":0", silence_logs=logging.CRITICAL))
            client = stack.enter_context(Client(cluster))
            timings["start_cluster"] = time.perf_counter() - t
            _watch(client, stack, log)
        watch = stack.enter_context(ClusterWatch(client, report=log))
        n_workers = worker_count(client)
        _check_workers_read(client, store)
        log(f"Dask scheduler {client.scheduler.address} with {n_workers} workers; fitting ONMSC")
        t = time.perf_counter()
        try:
            with _mid_run(args):
                fit = _fit(store, n_clusters, args, client, log)
        except ValueError as exc:
            if copy_of is None:
                raise
            raise _naming(exc, store.path, copy_of) from None
        except (CancelledError, ClosedClientError):
            if watch.lost is None:
                raise
            raise watch.lost from None
        timings["fit"] = time.perf_counter() - t
        log("writing the results to the store, and the report")

    metrics = None if y is None else evaluate(y, fit["labels"])
    params = fit["resolved"] | {"order": args.order, "random_state": args.random_state}
    results = {**fit.get("intermediate", {}),
               "onmsc": {name: np.asarray(fit[name]) for name in ("labels", "embedding", "target", "view_weights",
                                                                  "objective")}}
    with _mid_run(args):  # the results go into the store, and the report reads it
        for stage, values in results.items():
            for name, value in values.items():
                store.write_result(stage, name, value, params)
            store.mark_complete(stage)
        report = _report(args, store, source, fit, metrics, timings | {"total": time.perf_counter() - log.start},
                         None if args.scheduler else workers, n_workers, shown)
        write_run_files(args.out, {"report.json": (json.dumps(report, indent=2) + "\n").encode(),
                                   **report_files(_page(store, source, fit, report, args.random_state)),
                                   **labels_files(fit["labels"])})
    log(f"wrote {args.out / 'report.json'}, report.html, convergence.png, labels.npy, labels.csv")
    print(sizes_line(cluster_sizes(fit["labels"], n_clusters)))  # once the results are on disk
    if metrics:
        print(scores_line(metrics))
    return report


def _page(store: Any, source: str, fit: dict, report: dict, random_state: int) -> Any:
    """report.html's content."""
    from .assign import readout
    from .report import store_page

    facts = {"parameters": {k: v for k, v in report["resolved"].items() if not isinstance(v, (dict, list))},
             "seconds": {k: v for k, v in report["timings"].items() if not isinstance(v, dict)}}
    return store_page(store, f"ONMSC clustering of {source}", source, labels=fit["labels"],
                      readout=readout(fit["embedding"], fit["target"], report["resolved"]["n_clusters"]),
                      view_weights=fit["view_weights"], related_views=report["resolved"]["related_views"],
                      objective=fit["objective"], refinement_objective=fit["refinement_objective"],
                      view_metrics=report["resolved"]["metric"], scores=report["metrics"],
                      single_scores=report["single_view_scores"], facts=facts, random_state=random_state,
                      left_out_views=report["resolved"].get("left_out_views", []), warnings=report["warnings"])


def _watch(client: Any, stack: ExitStack, log: _Log) -> None:
    """Say where the Dask dashboard is, and report the client's tasks until the cluster closes."""
    log(f"Dask dashboard: {client.dashboard_link}")
    log.client = client
    stack.callback(setattr, log, "client", None)  # before the client closes


def _naming(exc: ValueError, copy: Path, source: Path) -> ValueError:
    """`exc` naming the user's store `source` instead of the run's `copy` of it (e.g. bad values found by the
    fit); out of core the workers name the copy by its resolved path."""
    message = str(exc)
    for name in (str(copy.resolve()), str(copy)):
        message = message.replace(name, str(source))
    return ValueError(message)


def _report(args: argparse.Namespace, store: Any, source: str, fit: dict, metrics: dict | None, timings: dict,
            workers: int | None, n_workers: int, shown: list[str]) -> dict:
    """The content of report.json; `shown`: the run's warnings."""
    from .report import cluster_sizes, single_view_scores

    y = store.labels
    return {
        "dataset": {"source": source, "store": str(store.path), "n_samples": store.n_samples,
                    "view_names": store.view_names,
                    "view_dims": [store.view_shape(p)[1] for p in range(store.n_views)],
                    "n_classes": None if y is None else int(len(np.unique(y))),
                    "class_names": store.class_names},
        "parameters": {"n_clusters": args.n_clusters, "embedding": args.embedding, "order": args.order,
                       "n_components": args.n_components,
                       "n_neighbors": args.n_neighbors, "n_landmarks": args.n_landmarks,
                       "n_nearest_landmarks": args.n_nearest_landmarks, "consensus_graph": args.consensus_graph,
                       "refine": args.refine,
                       "random_state": args.random_state, "workers": workers, "scheduler": args.scheduler},
        "resolved": fit["resolved"] | {"n_workers": n_workers},
        "metrics": metrics,
        "cluster_sizes": cluster_sizes(fit["labels"], fit["resolved"]["n_clusters"]),
        "single_view_scores": None if y is None else single_view_scores(
            fit["view_embeddings"], y, fit["resolved"]["n_clusters"],
            [store.view_names[p] for p in fit["embedded_views"]], args.random_state),
        "view_weights": dict(zip(store.view_names, map(float, fit["view_weights"]))),
        "objective": [float(v) for v in fit["objective"]],
        "n_iter": int(fit["n_iter"]),
        "converged": bool(fit["converged"]),
        "refinement_objective": [float(v) for v in fit["refinement_objective"]],
        "timings": timings | {"fit_stages": fit["stages"]},
        "versions": versions(),
        "warnings": list(shown),  # last: with those of the scores above
    }


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a batch scheduler's end of job), raised like Ctrl-C's KeyboardInterrupt so the
    run stops the same way: its cluster closed, its locks released, one line."""


def _raise_terminated(signum: int, frame: Any) -> None:
    """SIGTERM's handler in a run."""
    raise Terminated


def sigterm_raises() -> AbstractContextManager[None]:
    """SIGTERM raises :class:`Terminated` meanwhile (in the main thread), so a run stops as on Ctrl-C."""
    return _signal_handler(signal.SIGTERM, _raise_terminated)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``onmsc-dask``; returns the exit code (0 success, 2 bad input or no scheduler, 1 the cluster
    lost the computation, the --data URL store could not be reached or a disk is full, 130 interrupted, 143
    terminated)."""
    args = build_parser().parse_args(argv)
    args.started = time.time()  # outputs older than this are an earlier run's (_earlier_outputs)
    from distributed.client import ClosedClientError

    from .supervision import ClusterLost

    with warnings_as_lines("onmsc-dask"), sigterm_raises():
        try:
            log = _Log(quiet=args.quiet)
            with log.watch():
                run(args, log)
        except (ValueError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                print(f"onmsc-dask: error: no space left on the device of {exc.filename or args.out} (writing the run);"
                      f" {_resume_hint(args, 'free space, then ')}", file=sys.stderr)
                return EXIT_CLUSTER_LOST
            print(f"onmsc-dask: error: {one_line(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except ClusterLost as exc:  # no worker left, or no scheduler, for longer than supervision allows
            print(f"onmsc-dask: error: {exc}; {_resume_hint(args, _restart(args, exc.scheduler))}", file=sys.stderr)
            return EXIT_CLUSTER_LOST
        except (CancelledError, ClosedClientError) as exc:  # distributed's, when the scheduler goes away mid-run
            print(f"onmsc-dask: error: the Dask cluster lost the computation ({one_line(exc)}); "
                  f"{_resume_hint(args, _restart(args, True))}", file=sys.stderr)
            return EXIT_CLUSTER_LOST
        except worker_failures() as exc:
            print(f"onmsc-dask: error: {failure_line(exc)}; {_resume_hint(args)}", file=sys.stderr)
            return EXIT_CLUSTER_LOST
        except StoreOutOfReach as exc:
            from .location import unreachable

            lost = unreachable(exc)
            if lost is None:  # gone
                print(f"onmsc-dask: error: the store {_url(args)} is gone mid-run ({one_line(exc.__cause__)}):"
                      " it was deleted or emptied meanwhile; write it again and run the same command (every stage is "
                      "then computed again)", file=sys.stderr)
                return EXIT_CLUSTER_LOST
            said = one_line(lost) if isinstance(lost, ValueError) else \
                f"{_url(args)}: {type(lost).__name__}: {one_line(lost)}"  # BucketUnreachable names the URL itself
            print(f"onmsc-dask: error: the store could not be reached mid-run: {said}; "
                  f"{_resume_hint(args, 'once it can be reached, ')}", file=sys.stderr)
            return EXIT_CLUSTER_LOST
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, Terminated)
            print(f"onmsc-dask: {'terminated (SIGTERM)' if terminated else 'interrupted'}; {_resume_hint(args)}",
                  file=sys.stderr)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    return 0


class StoreOutOfReach(Exception):
    """The --data URL store could not be reached mid-run, or is gone (its cause: the run's error)."""


@contextmanager
def _mid_run(args: argparse.Namespace) -> Iterator[None]:
    """A --data URL store out of reach meanwhile (location.unreachable), or gone (_gone), as StoreOutOfReach, not as
    bad input."""
    from .location import unreachable

    try:
        yield
    except Exception as exc:
        if _url(args) is None or (unreachable(exc) is None and not _gone(args)):
            raise
        raise StoreOutOfReach(exc) from exc


def _gone(args: argparse.Namespace) -> bool:
    """Whether the --data URL store is gone (deleted, or its bucket emptied, meanwhile): its root metadata is no
    longer there. False when that cannot be told (the store out of reach, access denied)."""
    from .location import location

    try:
        return not location(f"{_url(args)}/zarr.json", args.storage_options).exists()
    except Exception:  # noqa: BLE001 - the file system's own errors (botocore's are no OSError): cannot tell
        return False


def _resume_hint(args: argparse.Namespace, restart: str = "") -> str:
    """What an interrupted run keeps, and how to resume it (after `restart`, what the cluster needs first): the stages
    of ``DIR/views.zarr``, or of the --data URL store the run writes its stages into (_open_store); and the outputs
    in --out that are an earlier run's."""
    return _stages_hint(args, restart) + _earlier_outputs(args)


def _earlier_outputs(args: argparse.Namespace) -> str:
    """"; DIR holds an earlier run's report.json, ..." for the run files in --out older than this run (main's
    ``args.started``), which a failed run leaves as they were (outputs.write_run_files); else ""."""
    started = getattr(args, "started", None)
    earlier = [] if started is None else [name for name in RUN_FILES if (args.out / name).is_file()
                                          and (args.out / name).stat().st_mtime < started]
    return f"; {args.out} holds an earlier run's {', '.join(earlier)}, not this run's (a run that completes " \
           "replaces them)" if earlier else ""


def _stages_hint(args: argparse.Namespace, restart: str) -> str:
    """_resume_hint's stages of the store."""
    from .store import MultiViewStore

    url = _url(args)
    where = url or args.out / "views.zarr"
    again = f"{restart}run the same command again"
    try:
        store = MultiViewStore(where, args.storage_options if url else None)
        kept, damaged, other = _finished(store, args)
    except (ValueError, OSError, KeyError):  # no store yet (or not a whole one), or a URL store out of reach
        return f"{url} keeps the stages finished before; {again} to resume after them" if url else \
            f"nothing was kept; {again}"
    except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM while the stages are listed
        return f"{where} may keep finished stages; {again} to resume after them"
    if not kept or _solver(args, store.n_samples) != "anchor":  # an in-memory run resumes no stage
        finished = f"no stage finished with {', '.join(other)}" if other else "no stage finished"
        return f"{where} is kept ({finished}); {again} to reuse it" if not kept else \
            f"{where} is kept; {again} to reuse it (an in-memory run computes every stage again)"
    return (f"{where} keeps the finished stages ({_stages_text(kept, damaged, other)}); {again} to resume after the "
            "last of them")


def _restart(args: argparse.Namespace, scheduler_lost: bool) -> str:
    """What a --scheduler cluster needs before the run is resumed: `dask worker` processes exit with their scheduler,
    so both are restarted after the scheduler is lost, workers started after the workers are. A local cluster is
    the run's own: nothing."""
    if not args.scheduler:
        return ""
    if scheduler_lost:
        return (f"restart the Dask scheduler ({args.scheduler}) and its workers (`dask worker` exits with its "
                "scheduler), then ")
    return f"start workers with `dask worker {args.scheduler} --nthreads 1`, then "


@contextmanager
def warnings_as_lines(prog: str) -> Iterator[None]:
    """Warnings shown meanwhile as one line ``PROG: warning: message`` on stderr, like errors (not with the Python
    source line that raised them)."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


@contextmanager
def recorded_warnings() -> Iterator[list[str]]:
    """The messages of the warnings shown meanwhile (in order; each still shown as before), for the report."""
    shown: list[str] = []
    previous = warnings.showwarning

    def show(message, *args, **kwargs) -> None:
        shown.append(str(message))
        previous(message, *args, **kwargs)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield shown
