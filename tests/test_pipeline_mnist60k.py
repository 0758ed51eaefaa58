"""pipelines/mnist60k.py on small generated MNIST-format IDX data: the anchor sweep leaves the main store's
stages alone, unlabelled data run, and --chunk-rows rebuilds the store."""
from __future__ import annotations

import gzip
import importlib.util
import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from distributed import LocalCluster

from onmsc_dask.io import read_idx
from onmsc_dask.outofcore import STAGES
from onmsc_dask.store import MultiViewStore

ROOT = Path(__file__).resolve().parents[1]
N, K = 240, 3
ARGS = ["--limit", "200", "--n-clusters", str(K), "--n-landmarks", "40", "--chunk-rows", "80"]


@pytest.fixture(scope="module")
def mnist60k() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mnist60k_under_test", ROOT / "pipelines" / "mnist60k.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """One small cluster for every run of the module (a LocalCluster per run would dominate the time)."""
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def write_idx(path: Path, array: np.ndarray) -> None:
    """`array` (uint8) as an IDX file: magic 0x0000 08 ndim, big-endian uint32 dims, then the bytes."""
    data = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, ">u4").tobytes() + array.tobytes()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def mnist_dir(path: Path, labels: bool = True) -> Path:
    """N 28 x 28 images of K classes (a bright square in one of K places, plus noise) in IDX files."""
    rng = np.random.default_rng(0)
    y = np.arange(N) % K
    images = rng.integers(0, 60, size=(N, 28, 28))
    for c in range(K):
        images[y == c, 4 + 6 * c:12 + 6 * c, 4 + 6 * c:12 + 6 * c] += 180
    path.mkdir()
    write_idx(path / "train-images-idx3-ubyte.gz", images.astype(np.uint8))
    if labels:
        write_idx(path / "train-labels-idx1-ubyte", y.astype(np.uint8))
    return path


def run(module: ModuleType, data: Path, out: Path, scheduler: str, *extra: str) -> dict:
    return module.main(["--data-dir", str(data), "--out", str(out), "--scheduler", scheduler, *ARGS, *extra])


def test_sweep_keeps_the_main_run_stages(mnist60k, scheduler, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mnist60k, "SWEEP", (3, 10, 20, 500))  # m = k and m > n are skipped (m = k used to crash)
    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    report = run(mnist60k, data, out, scheduler, "--sweep")
    scores = report["scores"]  # the CLI's line, ARI too (it printed ACC=... NMI=... PURITY=...)
    assert (f"ACC {scores['acc']:.4f}  NMI {scores['nmi']:.4f}  purity {scores['purity']:.4f}  ARI {scores['ari']:.4f}"
            in capsys.readouterr().out)
    assert [s["n_landmarks"] for s in report["sweep"]] == [10, 20]
    assert report["n_clusters"] == K and report["random_state"] == 0 and report["n_iter"] == len(report["objective"])
    assert report["n_components"] == K  # the resolved width (200 samples, under 500 per cluster), not None
    assert all(set(s["scores"]) >= {"acc", "nmi", "purity"} for s in report["sweep"])
    assert report["scores"]["acc"] > 0.9
    assert sorted(p.name for p in out.iterdir()) == ["anchor_sweep.png", "convergence.png", "labels.csv",
                                                     "labels.npy", "report.html", "report.json",
                                                     "views.zarr"]  # the sweep's copies are removed
    assert report["cluster_sizes"] == np.bincount(np.load(out / "labels.npy"), minlength=K).tolist()
    assert set(report["single_view_scores"]) == {"pixels", "hog", "dct"}
    page = (out / "report.html").read_text()
    for view, scores in report["single_view_scores"].items():  # scored beside the figures, then shown
        assert f'data-key="single_view_scores.{view}.acc">{scores["acc"]:.4f}<' in page
    store = MultiViewStore(out / "views.zarr")
    assert store.read_result("landmarks", "L0").shape[0] == 40
    assert all(params["n_landmarks"] == 40 for params in store.stages().values())
    # the sweep's warnings are its entries' (they were listed as the main run's), its figure a run file: a rerun
    # without --sweep removes it (it stayed beside the new report)
    assert all("warnings" in s for s in report["sweep"])
    again = run(mnist60k, data, out, scheduler)
    assert again["computed_stages"] == [] and again["scores"] == report["scores"]
    assert not (out / "anchor_sweep.png").exists() and "sweep" not in again


def test_a_sweep_of_no_anchor_number_writes_the_report(mnist60k, scheduler, tmp_path, monkeypatch):
    """Every anchor number of the sweep out of range: an IndexError after the fit, and no report (found by a
    review)."""
    monkeypatch.setattr(mnist60k, "SWEEP", (3,))  # m = k
    out = tmp_path / "out"
    report = run(mnist60k, mnist_dir(tmp_path / "data"), out, scheduler, "--sweep")
    assert report["sweep"] == [] and json.loads((out / "report.json").read_text())["sweep"] == []
    assert not (out / "anchor_sweep.png").exists()


def test_n_components_reaches_the_fit_and_the_sweep(mnist60k, scheduler, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mnist60k, "SWEEP", (5, 6, 40))  # m must exceed n_components = 5
    out = tmp_path / "out"
    report = run(mnist60k, mnist_dir(tmp_path / "data"), out, scheduler, "--n-components", "5", "--sweep")
    assert report["n_components"] == 5 and [s["n_landmarks"] for s in report["sweep"]] == [6, 40]
    assert "m in [5] skipped (need 5 < m" in capsys.readouterr().out
    store = MultiViewStore(out / "views.zarr")
    assert store.read_result("embeddings", "H").shape[-1] == 5
    assert store.read_result("fusion", "embedding").shape[1] == 5
    assert report["scores"]["acc"] > 0.9


def test_unlabelled_data(mnist60k, scheduler, tmp_path, monkeypatch):
    monkeypatch.setattr(mnist60k, "SWEEP", (10,))
    out = tmp_path / "out"
    report = run(mnist60k, mnist_dir(tmp_path / "data", labels=False), out, scheduler, "--sweep")
    assert report["scores"] is None and report["sweep"][0]["scores"] is None
    assert MultiViewStore(out / "views.zarr").labels is None
    assert json.loads((out / "report.json").read_text())["scores"] is None
    assert (out / "anchor_sweep.png").stat().st_size > 0


def test_other_chunk_rows_rebuild_the_store(mnist60k, scheduler, tmp_path):
    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    run(mnist60k, data, out, scheduler)
    assert MultiViewStore(out / "views.zarr").row_chunks(0)[0] == (0, 80)
    report = run(mnist60k, data, out, scheduler, "--chunk-rows", "50")  # the later option wins
    store = MultiViewStore(out / "views.zarr")
    assert store.row_chunks(0)[:2] == [(0, 50), (50, 100)] and store.metadata["chunk_rows"] == 50
    assert report["computed_stages"] == list(STAGES)


def test_replaced_images_rebuild_the_store(mnist60k, scheduler, tmp_path):
    """A store is reused only for the same IDX files: replaced images (same names) are read again, not the old
    views; report.json gives the landmarks used (m clipped to n), not the option."""
    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    first = run(mnist60k, data, out, scheduler, "--n-landmarks", "5000")
    assert first["n_landmarks"] == 200  # clipped to the 200 samples
    path = data / "train-images-idx3-ubyte.gz"
    shifted = np.roll(read_idx(path), 3, axis=2)  # other images under the same name
    write_idx(path, shifted)
    again = run(mnist60k, data, out, scheduler)
    assert again["computed_stages"] == list(STAGES)
    np.testing.assert_allclose(MultiViewStore(out / "views.zarr").read_view(0),
                               shifted[:200].reshape(200, -1) / 255.0, rtol=1e-6)


def test_n_clusters_defaults_to_the_number_of_labels(mnist60k, scheduler, tmp_path, capsys):
    data = mnist_dir(tmp_path / "data")
    args = ["--data-dir", str(data), "--out", str(tmp_path / "out"), "--scheduler", scheduler,
            "--limit", "200", "--n-landmarks", "40"]
    assert mnist60k.main(args)["n_clusters"] == K
    unlabelled = mnist_dir(tmp_path / "unl", labels=False)
    with pytest.raises(SystemExit) as exit_info:
        mnist60k.main(["--data-dir", str(unlabelled), *args[2:]])
    assert exit_info.value.code == 2 and "pass --n-clusters" in capsys.readouterr().err


def test_bad_directories_and_foreign_stores_are_refused(mnist60k, tmp_path, capsys):
    """A directory without IDX images was a FileNotFoundError traceback after --out-dir was created; --store on a
    store the pipeline did not write (here: the CLI's digits store) was silently overwritten."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for data_dir in (empty, tmp_path / "missing"):
        with pytest.raises(SystemExit) as exit_info:
            mnist60k.main(["--data-dir", str(data_dir), "--out", str(tmp_path / "out")])
        assert exit_info.value.code == 2
    assert "holds no MNIST-format image file" in capsys.readouterr().err and not (tmp_path / "out").exists()
    foreign = MultiViewStore.create(tmp_path / "other.zarr", [np.eye(6), np.eye(6)[::-1]], metadata={"x": 1})
    with pytest.raises(ValueError, match=r"not a store this pipeline wrote, or its metadata is damaged; refusing to "
                                         r"overwrite it \(delete it if this pipeline wrote it, or pass another --store "
                                         r"or --out\)"):
        mnist60k.main(["--data-dir", str(mnist_dir(tmp_path / "data")), "--out", str(tmp_path / "out"),
                       "--store", str(foreign.path), *ARGS])
    assert MultiViewStore(foreign.path).metadata == {"x": 1}
    small = tmp_path / "small"  # 7 x 7 images: HOG has no 2 x 2 block of cells ("need at least one array to stack")
    small.mkdir()
    write_idx(small / "train-images-idx3-ubyte", np.zeros((30, 7, 7), np.uint8))
    with pytest.raises(ValueError, match=r"train images of uint8 and 7 x 7 pixels; the views need 8-bit \(uint8\) "
                                         r"images of at least 14 x 14 pixels"):
        mnist60k.main(["--data-dir", str(small), "--out", str(tmp_path / "small-out"), "--n-clusters", "2", *ARGS])


def test_dotted_idx_names_and_a_limit_beyond_the_images(mnist60k, scheduler, tmp_path, capsys):
    """`t10k-images.idx3-ubyte` (the unzipped files' other common name), which onmsc_dask.io reads, was refused by
    the pipeline's own check; a --limit above the number of images is said, not silently cut."""
    data = mnist_dir(tmp_path / "data")
    dotted = tmp_path / "dotted"
    dotted.mkdir()
    (data / "train-images-idx3-ubyte.gz").rename(dotted / "t10k-images.idx3-ubyte.gz")
    (data / "train-labels-idx1-ubyte").rename(dotted / "t10k-labels.idx1-ubyte")
    report = mnist60k.main(["--data-dir", str(dotted), "--out", str(tmp_path / "out"), "--scheduler", scheduler,
                            *ARGS[2:], "--limit", str(N + 50)])
    assert report["split"] == "t10k" and report["n_samples"] == N
    assert f"--limit {N + 50}: the t10k split has only {N} images; using all of them" in capsys.readouterr().out


def test_a_wrong_scheduler_fails_before_the_store_is_written(mnist60k, scheduler, tmp_path):
    """--scheduler is checked first: a worker's address used to be found only after the views were built."""
    from distributed import Client

    with Client(scheduler) as client:
        worker = next(iter(client.scheduler_info()["workers"]))
    out = tmp_path / "out"
    with pytest.raises(OSError, match="is a Dask Worker, not a scheduler"):
        run(mnist60k, mnist_dir(tmp_path / "data"), out, worker)
    assert not (out / "views.zarr").exists()


def test_old_flag_names_are_accepted_with_a_note(mnist60k, scheduler, tmp_path, capsys):
    """--seed and --out-dir (the pipeline's names before it took the CLI's) still work, saying so."""
    out = tmp_path / "out"
    report = mnist60k.main(["--data-dir", str(mnist_dir(tmp_path / "data")), "--out-dir", str(out), "--seed", "3",
                            "--scheduler", scheduler, "--no-refine", *ARGS])
    err = capsys.readouterr().err
    assert "--out-dir is deprecated, use --out" in err and "--seed is deprecated, use --random-state" in err
    assert report["random_state"] == 3 and report["refine"] is False
    labels = np.load(out / "labels.npy")
    np.testing.assert_array_equal(np.loadtxt(out / "labels.csv", delimiter=",", skiprows=1, dtype=int)[:, 1], labels)
    assert len(MultiViewStore(out / "views.zarr").read_result("labels", "refinement_objective")) == 0


def test_hog_equals_the_per_pixel_formula(mnist60k):
    """The table-driven HOG gives the descriptor computed per pixel from np.gradient, arctan2 and np.add.at, on
    images of a size the cells do not tile (the last cell row and column take the rest) and on binary images
    (every gradient on a bin edge: horizontal, vertical or diagonal)."""
    def reference(images: np.ndarray, cell: int, bins: int = 9) -> np.ndarray:
        img = images.astype(np.float32) / 255.0
        gy, gx = np.gradient(img, axis=(1, 2))
        b = np.minimum((np.mod(np.arctan2(gy, gx), np.pi) / np.pi * bins).astype(np.int64), bins - 1)
        n, h, w = img.shape
        ch, cw = h // cell, w // cell
        hist = np.zeros((n, ch, cw, bins))
        np.add.at(hist, (np.arange(n)[:, None, None], (np.arange(h) // cell).clip(max=ch - 1)[None, :, None],
                         (np.arange(w) // cell).clip(max=cw - 1)[None, None, :], b), np.hypot(gx, gy))
        blocks = np.stack([hist[:, i:i + 2, j:j + 2].reshape(n, -1) for i in range(ch - 1) for j in range(cw - 1)],
                          axis=1)
        return (blocks / np.sqrt((blocks**2).sum(axis=2, keepdims=True) + 1e-6)).reshape(n, -1)

    rng = np.random.default_rng(0)
    for images, cell in ((rng.integers(0, 256, (40, 30, 25)).astype(np.uint8), 6),
                         (255 * (rng.random((40, 28, 28)) > 0.5).astype(np.uint8), 7)):
        out = mnist60k.hog(images, cell)
        assert out.dtype == np.float32 and out.shape == (40, (images.shape[1] // cell - 1) * (images.shape[2] // cell - 1) * 36)
        np.testing.assert_allclose(out, reference(images, cell), atol=1e-6)
    with pytest.raises(TypeError, match="uint8"):
        mnist60k.hog(rng.random((2, 28, 28)))


def test_hog_of_many_images_is_each_image_s_own(mnist60k, monkeypatch):
    """More images than HOG_BLOCK_IMAGES are described block by block, each exactly as on its own."""
    images = np.random.default_rng(1).integers(0, 256, (25, 28, 28)).astype(np.uint8)
    monkeypatch.setattr(mnist60k, "HOG_BLOCK_IMAGES", 10)
    np.testing.assert_array_equal(mnist60k.hog(images), np.concatenate([mnist60k.hog(im[None]) for im in images]))


def test_local_cluster_workers_are_threads_unless_processes_are_asked_for(mnist60k, capsys):
    import argparse
    import os

    def args(**kw) -> argparse.Namespace:
        return argparse.Namespace(**{"scheduler": None, "workers": 2, "memory_limit": None, "processes": False,
                                     **kw})

    def saturation(dask_scheduler) -> float:
        return dask_scheduler.WORKER_SATURATION

    with mnist60k.make_client(args(memory_limit="1GiB")) as client, client.cluster:
        assert set(client.run(os.getpid).values()) == {os.getpid()} and len(client.scheduler_info()["workers"]) == 2
        assert client.run_on_scheduler(saturation) == 1.0  # cluster.SCHEDULER_CONFIG: one root task per thread
    assert "--memory-limit is not used without --processes" in capsys.readouterr().out
    with mnist60k.make_client(args(workers=1, processes=True, memory_limit="1GiB")) as client, client.cluster:
        (pid,) = client.run(os.getpid).values()
        (worker,) = client.scheduler_info()["workers"].values()
        assert pid != os.getpid() and worker["memory_limit"] == 2**30


def test_thread_workers_run_on_one_blas_thread_and_other_clusters_keep_theirs(mnist60k):
    import argparse

    from threadpoolctl import threadpool_info, threadpool_limits

    def blas() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    with threadpool_limits(2, user_api="blas"):
        for kw, inside in (({}, {1}), ({"processes": True}, {2}), ({"scheduler": "tcp://x:1"}, {2})):
            with mnist60k.blas_threads(argparse.Namespace(**{"scheduler": None, "processes": False, **kw})):
                assert blas() == inside, kw
            assert blas() == {2}


def test_views_are_built_where_the_images_are_not_shipped_in_a_graph(mnist60k, scheduler, tmp_path):
    """build_store under a distributed client (as the pipeline and bench/scale.py call it) computes the views in
    this process: no task graph carries the images (distributed's large-graph warning, its threshold lowered to
    1 kB, stays silent) and the store holds the views of the images."""
    import dask
    from distributed import Client

    data = mnist_dir(tmp_path / "data")
    with Client(scheduler), dask.config.set({"distributed.admin.large-graph-warning-threshold": "1kB"}):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*large graph.*")
            store = mnist60k.build_store(data, tmp_path / "v.zarr", None, 100)
    images = read_idx(data / "train-images-idx3-ubyte.gz")
    np.testing.assert_allclose(store.read_view(1), mnist60k.hog(images), rtol=1e-6)


CHILD_BUILD = """
import json, os, signal, sys, time
from pathlib import Path

from onmsc_dask.cli import sigterm_raises

sys.path.insert(0, sys.argv[1])
import mnist60k

case, data, out = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
build_store = mnist60k.build_store


class Unpicklable(Exception):
    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


def recorded(*args):
    modules = sorted(m for m in mnist60k.FIT_MODULES + ("sklearn", "matplotlib") if m in sys.modules)
    sigterm = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    (out / "builder.json").write_text(json.dumps({"pid": os.getpid(), "modules": modules, "sigterm_default": sigterm}))
    if case == "dies":
        os._exit(3)
    if case == "unpicklable":
        raise Unpicklable("no views", "row 7")
    if case == "stopped":
        time.sleep(120)
    return build_store(*args)


def no_cluster(*args):
    raise OSError("no cluster here")


mnist60k.build_store = recorded
if case == "stopped":  # main leaves before it waits for the views
    mnist60k.make_client = no_cluster
try:
    with sigterm_raises():  # as the command runs main
        outcome = {"report": mnist60k.main(["--data-dir", str(data), "--out", str(out), "--quiet", *sys.argv[5:]])}
except (ValueError, OSError, RuntimeError) as exc:
    outcome = {"error": type(exc).__name__ + ": " + str(exc), "cause": type(exc.__cause__).__name__,
               "trace": str(exc.__cause__)}
try:
    os.kill(json.loads((out / "builder.json").read_text())["pid"], 0)
    outcome["child_alive"] = True
except ProcessLookupError:
    outcome["child_alive"] = False
print(json.dumps({"pid": os.getpid(), **outcome}))
"""


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="no fork here")
@pytest.mark.parametrize("case", ["builds", "damaged", "dies", "unpicklable", "stopped"])
def test_the_views_are_built_in_a_child_forked_before_the_fit_modules_import(mnist60k, tmp_path, case):
    """main() in a fresh interpreter (no other thread; a LocalCluster of its own) forks the view building before
    it imports any of FIT_MODULES: the child builds the store the fit reads; the child's error reaches the caller as
    the same exception, the child's traceback its cause (one that does not pickle as a RuntimeError of its type and
    message); a child that dies without a word ends in one OSError that says to run again; a main that leaves before
    it waits for the views stops the child (reaped: its pid is gone)."""
    import subprocess
    import sys

    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    images = read_idx(data / "train-images-idx3-ubyte.gz")
    if case == "damaged":  # a whole header (main reads it before the fork) and too few pixels
        (data / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(bytes([0, 0, 8, 3])
                                                                        + np.array(images.shape, ">u4").tobytes()))
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", CHILD_BUILD, str(ROOT / "pipelines"), case, str(data), str(out),
                           *ARGS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    builder = json.loads((out / "builder.json").read_text())
    assert builder["pid"] != result["pid"] and builder["modules"] == []  # forked before the fit's imports
    assert builder["sigterm_default"]  # terminated, it ends (the parent's handler made it a traceback: a review)
    assert not result["child_alive"]
    if case == "builds":
        assert result["report"]["n_samples"] == 200 and result["report"]["scores"]["acc"] > 0.9
        store = MultiViewStore(out / "views.zarr")
        for p, view in enumerate((mnist60k.pixels, mnist60k.hog, mnist60k.dct)):
            np.testing.assert_allclose(store.read_view(p), view(images[:200]), rtol=1e-6)
    elif case == "damaged":
        assert result["error"].startswith("ValueError: ") and "train-images-idx3-ubyte.gz" in result["error"]
        assert result["cause"] == "ChildError" and "Traceback" in result["trace"] and "read_idx" in result["trace"]
        assert not list(out.glob("views.zarr*"))
    elif case == "unpicklable":
        assert result["error"] == "RuntimeError: Unpicklable: no views at row 7" and "recorded" in result["trace"]
    elif case == "stopped":
        assert result["error"] == "OSError: no cluster here"
    else:
        assert result["error"] == (f"OSError: building the views of {data} stopped (the child process exited with "
                                   "code 3); nothing was fitted, run the same command again")


def test_a_damaged_image_file_ends_the_command_in_one_line(tmp_path):
    """`python pipelines/mnist60k.py` on a damaged IDX file (its header, read before the views are built): exit code 1
    and one line on stderr naming the file, no traceback, and no store left behind."""
    import subprocess
    import sys

    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    (data / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(b"\0\0\x08\x03" + b"\0" * 5))
    done = subprocess.run([sys.executable, str(ROOT / "pipelines" / "mnist60k.py"), "--data-dir", str(data), "--out",
                           str(out), "--quiet", *ARGS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if not line.startswith("[")]  # progress lines: "[ 0.1s] ..."
    assert line.startswith("mnist60k: error: ") and "train-images-idx3-ubyte.gz" in line and "truncated" in line
    assert not list(out.glob("views.zarr*"))


def test_a_damaged_view_chunk_is_one_line_without_the_worker_s_log(tmp_path):
    """A view chunk of the pipeline's store truncated, read again by a fit with other parameters: the thread workers
    logged "distributed.worker - ERROR - Compute Failed" and the task's traceback before the one-line error."""
    import subprocess
    import sys

    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    command = [sys.executable, str(ROOT / "pipelines" / "mnist60k.py"), "--data-dir", str(data), "--out", str(out),
               "--quiet", *ARGS]
    assert subprocess.run(command, capture_output=True, text=True, timeout=300).returncode == 0
    chunk = out / "views.zarr" / "views" / "1" / "c" / "2" / "0"
    chunk.write_bytes(chunk.read_bytes()[:100])
    done = subprocess.run([*command, "--n-landmarks", "50"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if not line.startswith("[")]
    assert line.startswith(f"mnist60k: error: store {out / 'views.zarr'}: view 1 ('hog') rows 160:200 cannot be read, "
                           "a chunk file is corrupt or truncated"), done.stderr


def test_a_task_that_kills_every_worker_is_one_line(tmp_path):
    """A task that kills each worker that runs it (out of memory, a crash in native code): once distributed gives up
    on it (KilledWorker), one line saying so and how to resume, exit 1 (it was a KilledWorker traceback)."""
    import subprocess
    import sys

    from distributed import Client

    from clusters import Cluster, KillEvery

    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    cluster = Cluster(tmp_path, 1, allowed_failures=1)  # given up after 2 workers, not 4
    try:
        with Client(cluster.address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=120)
            client.register_plugin(KillEvery("_anchor_block"), name="kill-every")
            done = subprocess.run([sys.executable, str(ROOT / "pipelines" / "mnist60k.py"), "--data-dir", str(data),
                                   "--out", str(out), "--scheduler", cluster.address, "--quiet", *ARGS],
                                  capture_output=True, text=True, timeout=300)
    finally:
        cluster.stop()
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if not line.startswith("[")]
    assert line.startswith("mnist60k: error: a task killed every Dask worker that ran it: a worker process dies when "
                           "it runs out of memory (give the workers more) or crashes in native code, as its log says "
                           "(Attempted to run task "), done.stderr
    assert line.endswith("; the same command resumes after the last finished stage"), done.stderr


def test_a_refused_store_in_the_forked_build_is_one_line_and_exit_1(tmp_path):
    """A views.zarr in --out that the pipeline did not write, refused by the forked child that builds the views: the
    command printed nothing and exited 0 (SystemExit, pickled back once distributed is imported, lost its code)."""
    import subprocess
    import sys

    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    (out / "views.zarr").mkdir(parents=True)
    (out / "views.zarr" / "mine.txt").write_text("mine")
    done = subprocess.run([sys.executable, str(ROOT / "pipelines" / "mnist60k.py"), "--data-dir", str(data), "--out",
                           str(out), "--quiet", *ARGS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if not line.startswith("[")]
    assert line == (f"mnist60k: error: {out / 'views.zarr'} exists and is not a store this pipeline wrote, or its "
                    "metadata is damaged; refusing to overwrite it (delete it if this pipeline wrote it, or pass "
                    "another --store or --out)"), done.stderr
    assert (out / "views.zarr" / "mine.txt").read_text() == "mine"


def test_parameters_are_checked_before_the_store_is_written(mnist60k, tmp_path, capsys):
    """--n-components below k, --n-landmarks not above the width, --n-clusters of n or more, or unlabelled images
    without --n-clusters: an error from the IDX header and labels before the views are built or a cluster is asked
    for (a closed port here; --n-components used to fail after the store was written)."""
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    address = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    argv = ["--data-dir", str(data), "--out", str(out), "--scheduler", address, *ARGS]
    cases = {("--n-components", "2"): "n_components=2 must satisfy n_clusters=3 <= n_components < n_samples=200",
             ("--n-landmarks", "3"): "n_landmarks=3 must be larger than n_clusters=3",
             ("--n-clusters", "200"): "n_clusters=200 must satisfy"}
    for extra, message in cases.items():
        with pytest.raises(ValueError, match=message):
            mnist60k.main([*argv, *extra])
        assert not (out / "views.zarr").exists()
    # these said "n_clusters=1 must satisfy ..." (a flag not given), "could not interpret 'banana' as a byte unit"
    # after the store was built, and, for a file of other dimensions, "truncated IDX file" or "data beyond"
    unlabelled, one_class = mnist_dir(tmp_path / "unlabelled", labels=False), mnist_dir(tmp_path / "one")
    write_idx(one_class / "train-labels-idx1-ubyte", np.zeros(N, np.uint8))
    for images, said in [(unlabelled, "has no labels, so the number of clusters is unknown; pass --n-clusters K"),
                         (one_class, "hold a single class, so they do not give the number of clusters; pass "
                                     "--n-clusters K")]:  # the words of onmsc-dask run's
        with pytest.raises(SystemExit) as exit_info:  # a usage error
            mnist60k.main(["--data-dir", str(images), "--out", str(out), "--scheduler", address, "--limit", "200"])
        assert exit_info.value.code == 2 and f"{images} (train, 200 images) {said}" in capsys.readouterr().err
        assert not (out / "views.zarr").exists()
    with pytest.raises(SystemExit):
        mnist60k.main(["--data-dir", str(data), "--out", str(out), "--scheduler", address, *ARGS, "--processes",
                       "--memory-limit", "banana"])
    assert ("argument --memory-limit: must be a memory size such as 4GiB or 2e9, a share of the memory such as 0.5, "
            "or auto, got 'banana'") in capsys.readouterr().err
    assert not (out / "views.zarr").exists()
    for size in ("auto", "0.5", "0", "4GiB", "2e9"):  # as Dask takes them (a share of the memory, 0: no limit)
        assert mnist60k.memory_size(size) == size
    images = read_idx(data / "train-images-idx3-ubyte.gz")
    for name, array, kind in [("train-labels-idx1-ubyte", images[:, :2, :2], "labels (n)"),
                              ("train-images-idx3-ubyte.gz", images.reshape(N, -1), "images (n, rows, cols)")]:
        bad = mnist_dir(tmp_path / f"dims-{kind[0]}")
        write_idx(bad / name, array)
        with pytest.raises(ValueError, match=rf"{name}: its header gives {array.ndim}-D data \({array.shape[0]}, .*\), "
                                             rf"expected {re.escape(kind)} \(the magic number's last byte is the "
                                             r"number of dimensions\)"):
            mnist60k.main(["--data-dir", str(bad), "--out", str(out), "--scheduler", address, *ARGS])
        assert not (out / "views.zarr").exists()
    floats = mnist_dir(tmp_path / "floats")  # float32 images: refused after the views' build had started
    header = bytes([0, 0, 0x0D, 3]) + np.asarray(images.shape, ">u4").tobytes()
    (floats / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(header + images.astype(">f4").tobytes()))
    with pytest.raises(ValueError, match=r"train images of float32 and 28 x 28 pixels; the views need 8-bit"):
        mnist60k.main(["--data-dir", str(floats), "--out", str(out), "--scheduler", address, *ARGS])
    assert not (out / "views.zarr").exists()
    write_idx(one_class / "train-images-idx3-ubyte.gz", images[:0])
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte\.gz: holds no images \(its header gives dims "
                                         r"\(0, 28, 28\)\)"):
        mnist60k.main(["--data-dir", str(one_class), "--out", str(out), "--scheduler", address, *ARGS])


def test_warnings_are_one_line_and_the_report_names_the_weights(tmp_path):
    """`python pipelines/mnist60k.py` on images of which two are all black (all-zero rows of the cosine views): the
    library's warnings as `mnist60k: warning: ...` lines (they were Python's two-line warnings with the source line);
    report.json gives mu by view name (a list before), the refinement's trace and the package versions, as the
    CLI's does, and the warnings (also on report.html)."""
    import subprocess
    import sys

    data, out = mnist_dir(tmp_path / "data"), tmp_path / "out"
    path = data / "train-images-idx3-ubyte.gz"
    images = read_idx(path).copy()
    images[[5, 9]] = 0
    write_idx(path, images)
    done = subprocess.run([sys.executable, str(ROOT / "pipelines" / "mnist60k.py"), "--data-dir", str(data), "--out",
                           str(out), "--quiet", *ARGS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "all-zero rows" in line]
    assert warned == [f"mnist60k: warning: view {p} ('{name}'): 2 all-zero rows (e.g. [5, 9]); they have no direction "
                      "under the cosine metric, so they are linked by distance only"
                      for p, name in enumerate(["pixels", "hog"])], done.stderr
    assert "UserWarning" not in done.stderr and "warnings.warn" not in done.stderr
    report = json.loads((out / "report.json").read_text())
    assert list(report["view_weights"]) == ["pixels", "hog", "dct"]
    assert sum(report["view_weights"].values()) == pytest.approx(1.0)
    assert report["refinement_objective"] and report["versions"]["onmsc-dask"]
    assert [w for w in report["warnings"] if "all-zero rows" in w] == [line.split("warning: ", 1)[1] for line in warned]
    assert '<li data-key="warnings.0">' in (out / "report.html").read_text()


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_is_one_line_and_the_same_command_resumes(tmp_path, how):
    """SIGINT to the pipeline's process group (Ctrl-C in a terminal) as the landmarks stage starts: one line, exit
    130 (it used to be a 40-line KeyboardInterrupt traceback and a worker's CancelledError warning); SIGTERM to the
    pipeline alone (`kill PID`): likewise, exit 143 (it died at once, leaving the views' forked child running on, to
    end in a BrokenPipeError traceback); the same command then completes."""
    import os
    import signal
    import subprocess
    import sys

    command = [sys.executable, str(ROOT / "pipelines" / "mnist60k.py"), "--data-dir", str(mnist_dir(tmp_path / "d")),
               "--out", str(tmp_path / "out"), "--quiet", *ARGS]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines = []
    for line in run.stderr:
        lines.append(line)
        if "stage 1/5 landmarks ..." in line:
            os.killpg(run.pid, signal.SIGINT) if how == "ctrl-c" else os.kill(run.pid, signal.SIGTERM)
            break
    lines += run.stderr.read().splitlines(keepends=True)
    assert run.wait(120) == (130 if how == "ctrl-c" else 143), "".join(lines)
    assert "Traceback" not in "".join(lines) and "CancelledError" not in "".join(lines), "".join(lines)
    said = "interrupted" if how == "ctrl-c" else "terminated (SIGTERM)"
    assert lines[-1] == (f"mnist60k: {said}; the store keeps the stages finished before, and the same command "
                         "resumes after the last of them\n")
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert np.load(tmp_path / "out" / "labels.npy").shape == (200,)
