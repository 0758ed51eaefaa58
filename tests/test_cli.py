"""The ``onmsc-dask`` command line, run in-process on real Dask clusters."""
import importlib.metadata
import html
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from distributed import LocalCluster

from onmsc_dask.api import ONMSC
from onmsc_dask.cli import main
from onmsc_dask.outofcore import STAGES
from onmsc_dask.report import single_view_scores
from onmsc_dask.store import MultiViewStore

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _blobs(n_per_class: int = 30, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """Two views of three well-separated Gaussian blobs."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n_per_class)
    views = [rng.normal(size=(3, d))[y] * 6 + rng.normal(size=(len(y), d)) for d in (4, 6)]
    return views, y


def test_digits_default_on_local_cluster(tmp_path, capsys):
    assert main(["run", "--out", str(tmp_path), "--workers", "2"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    names = ["pixels", "gradient_histograms", "radial_zoning"]
    assert report["dataset"]["source"] == "digits"
    assert report["dataset"]["n_samples"] == 1797 and report["dataset"]["view_names"] == names
    assert set(report["metrics"]) == {"acc", "nmi", "purity", "ari"}
    assert report["metrics"]["acc"] > 0.85  # measured 0.885 (random_state 0)
    assert report["resolved"]["n_clusters"] == 10 and report["resolved"]["n_workers"] == 2
    assert report["resolved"]["embedding"] == "exact" and report["resolved"]["pipeline"] == "in_memory"
    assert report["resolved"]["related_views"] == [True, True, True]
    assert report["resolved"]["n_neighbors_tried"] == {}  # digits' clusters are all larger than N
    assert report["resolved"]["consensus_graph"] == "rank"  # F's graph (docs/defaults.md)
    # refine="auto": the labels of kNN graphs are the k-means labels (docs/defaults.md)
    assert report["parameters"]["refine"] == "auto" and report["refinement_objective"] == []
    assert list(report["view_weights"]) == names
    assert sum(report["view_weights"].values()) == pytest.approx(1.0)
    objective = np.array(report["objective"])
    assert len(objective) == report["n_iter"] and np.all(np.diff(objective) >= -1e-9)
    assert {"load_and_store", "start_cluster", "fit", "fit_stages", "total"} <= set(report["timings"])
    assert report["versions"]["onmsc-dask"]
    assert (tmp_path / "convergence.png").read_bytes()[:8] == PNG_MAGIC
    assert np.load(tmp_path / "labels.npy").shape == (1797,)
    store = MultiViewStore(tmp_path / "views.zarr")
    assert store.view_names == names and store.labels.shape == (1797,)
    np.testing.assert_array_equal(store.read_result("onmsc", "labels"), np.load(tmp_path / "labels.npy"))
    # every stage of the in-memory fit is in the store: the view graphs, the embeddings H_p^(o), their
    # eigenvalues, F and the views fused
    for p in range(3):
        A = store.read_result("view_graphs", f"view{p}")
        assert sp.issparse(A) and A.shape == (1797, 1797) and abs(A - A.T).max() == 0 and A.nnz >= 1797 * 15
    H, lam = store.read_result("view_embeddings", "H"), store.read_result("view_embeddings", "eigenvalues")
    assert H.shape == (3, 2, 1797, 10) and lam.shape == (3, 2, 10)
    for p, o in np.ndindex(3, 2):  # orthonormal eigenvectors of G = D^-1/2 A_p^(o+1) D^-1/2 (Eqs. 2-3), eigenvalues lam
        A = np.linalg.matrix_power(store.read_result("view_graphs", f"view{p}").toarray(), o + 1)
        d = A.sum(axis=1)
        np.testing.assert_allclose(H[p, o].T @ H[p, o], np.eye(10), atol=1e-8)
        np.testing.assert_allclose(A / np.sqrt(np.outer(d, d)) @ H[p, o], H[p, o] * lam[p, o], atol=1e-6)
    assert store.read_result("view_embeddings", "F").shape == (1797, 10)
    assert store.read_result("view_embeddings", "related").tolist() == [True, True, True]
    stages = zarr.open_group(store.path, mode="r")["stages"]
    assert all(stages[s].attrs["complete"] is True for s in ("view_graphs", "view_embeddings", "onmsc"))
    # progress: each stage of the fit as it ends, before the summary line
    err = capsys.readouterr()
    assert "ACC" in err.out and err.err.count("fusion converged") == 1
    sizes = np.bincount(np.load(tmp_path / "labels.npy"), minlength=10)
    assert "cluster sizes: " + "  ".join(f"{c}:{s}" for c, s in enumerate(sizes)) in err.out
    assert report["cluster_sizes"] == sizes.tolist()
    csv = np.loadtxt(tmp_path / "labels.csv", delimiter=",", skiprows=1, dtype=np.int64)
    assert (tmp_path / "labels.csv").read_text().startswith("sample,cluster\n")
    np.testing.assert_array_equal(csv, np.column_stack([np.arange(1797), np.load(tmp_path / "labels.npy")]))
    order = ["] starting a local Dask cluster of 2 worker processes", "] Dask dashboard: http://",
             "]   reading the views: two Dask tasks per view, read and summarized (from the store)",
             "graphs and embeddings: 3 views as Dask tasks (exact solver, N = 15, orders 1..2, width 10)",
             "graphs and embeddings done in", "late fusion converged after", "k-means (10 restarts) in",
             "] writing the results to the store", "report.json, report.html, convergence.png"]
    positions = [err.err.find(line) for line in order]
    assert -1 not in positions and positions == sorted(positions), err.err


def test_npz_on_given_scheduler(tmp_path, scheduler):
    views, y = _blobs()
    data = tmp_path / "blobs.npz"
    np.savez(data, view0=views[0], view1=views[1], y=y)
    out = tmp_path / "run"
    assert main(["run", "--data", str(data), "--out", str(out), "--scheduler", scheduler,
                 "--view-names", "colour", "shape"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["parameters"]["scheduler"] == scheduler and report["resolved"]["n_workers"] == 1
    assert report["resolved"]["n_clusters"] == 3 and report["metrics"]["acc"] > 0.95
    assert list(report["view_weights"]) == ["colour", "shape"] == MultiViewStore(out / "views.zarr").view_names
    assert np.load(out / "labels.npy").shape == (90,)
    # the paper's F on request: the labels of ONMSC(consensus_graph="average") with the same seed
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "avg"), "--scheduler", scheduler,
                 "--consensus-graph", "average"]) == 0
    report = json.loads((tmp_path / "avg" / "report.json").read_text())
    assert report["resolved"]["consensus_graph"] == "average"
    assert report["parameters"]["consensus_graph"] == "average"  # given, as every other option
    expected = ONMSC(3, consensus_graph="average", random_state=0).fit(views).labels_
    np.testing.assert_array_equal(np.load(tmp_path / "avg" / "labels.npy"), expected)
    # the k-means labels, without the refinement, on request
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "plain"), "--scheduler", scheduler,
                 "--no-refine"]) == 0
    report = json.loads((tmp_path / "plain" / "report.json").read_text())
    assert report["parameters"]["refine"] is False and report["refinement_objective"] == []
    expected = ONMSC(3, refine=False, random_state=0).fit(views).labels_
    np.testing.assert_array_equal(np.load(tmp_path / "plain" / "labels.npy"), expected)


def test_the_nystrom_solver_says_it_is_the_papers(tmp_path, scheduler, capsys):
    """It ran without a word, though less accurate than the default (MSRC-v5: 0.81 against 0.91)."""
    views, y = _blobs()
    np.savez(tmp_path / "blobs.npz", view0=views[0], view1=views[1], y=y)
    assert main(["run", "--data", str(tmp_path / "blobs.npz"), "--out", str(tmp_path / "run"), "--scheduler",
                 scheduler, "--embedding", "nystrom", "--quiet"]) == 0
    assert "the Nystrom solver reproduces the paper's; the exact one (the default up to 20000 samples) is more " \
           "accurate" in capsys.readouterr().err


def _count_nndescent_calls(threshold: int) -> None:
    """On a worker: lower graph.BRUTE_FORCE_MAX_SAMPLES and count the NNDescent indexes built."""
    import pynndescent

    from onmsc_dask import graph

    counted_threshold = graph.BRUTE_FORCE_MAX_SAMPLES
    graph.BRUTE_FORCE_MAX_SAMPLES = threshold
    original = getattr(pynndescent.NNDescent, "__wrapped__", pynndescent.NNDescent)

    def counted(data, *args, **kwargs):  # records the data's shape and the compiled signatures before each index
        counted.compiled_before.append((data.shape, len(pynndescent.pynndescent_.nn_descent.signatures)))
        return original(data, *args, **kwargs)

    counted.compiled_before, counted.__wrapped__, counted.threshold = [], original, counted_threshold
    pynndescent.NNDescent = counted


def _restore_nndescent() -> list[tuple]:
    """On a worker: undo _count_nndescent_calls; returns (data shape, compiled signatures before) per index."""
    import pynndescent

    from onmsc_dask import graph

    graph.BRUTE_FORCE_MAX_SAMPLES = pynndescent.NNDescent.threshold
    seen = pynndescent.NNDescent.compiled_before
    pynndescent.NNDescent = pynndescent.NNDescent.__wrapped__
    return seen


def test_knn_runs_compile_pynndescent_once_per_worker(tmp_path, scheduler, monkeypatch, capsys):
    """Above graph.BRUTE_FORCE_MAX_SAMPLES (lowered here in the client and on the workers) the in-memory run
    registers the NumbaWarmup plugin, so each worker compiled pynndescent's graph construction (or loaded it from
    numba's cache) before its first view task, and the view tasks' own NNDescent graphs compile nothing more (one
    signature per worker)."""
    from distributed import Client

    from onmsc_dask import graph
    from onmsc_dask.warmup import NumbaWarmup

    monkeypatch.setattr(graph, "BRUTE_FORCE_MAX_SAMPLES", 50)
    views, y = _blobs()
    np.savez(tmp_path / "blobs.npz", view0=views[0], view1=views[1], y=y)
    with Client(scheduler) as client:
        client.run(_count_nndescent_calls, 50)
        try:
            assert main(["run", "--data", str(tmp_path / "blobs.npz"), "--out", str(tmp_path / "run"),
                         "--scheduler", scheduler]) == 0
        finally:
            seen = [n for worker in client.run(_restore_nndescent).values() for n in worker]
        views_seen = [before for shape, before in seen if shape[0] == len(y)]  # not the warm-up's (200, 8) data
        assert len(views_seen) >= 2 and min(views_seen) == 1  # the view graphs used NNDescent, already compiled
        err = capsys.readouterr().err
        assert "pynndescent on the workers: compiled the first time on this machine" in err
        assert re.search(r"pynndescent ready on the workers after \d+ s", err)
        assert all(client.run(lambda dask_worker: NumbaWarmup.name in dask_worker.plugins).values())
        assert NumbaWarmup.name in client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.worker_plugins))
        compiled = client.run(lambda: len(__import__("pynndescent.pynndescent_", fromlist=["x"])
                                          .nn_descent.signatures))
        assert set(compiled.values()) == {1}  # once in each worker, by the warm-up, used by the views


def test_worker_lost_during_the_warm_up_is_a_warning(tmp_path, scheduler, monkeypatch, capsys):
    """The warm-up only saves time: a worker dying while it registers (distributed raises CommClosedError) gives a
    one-line warning and the run goes on (it used to end the run with exit 2)."""
    from distributed import Client
    from distributed.comm import CommClosedError

    from onmsc_dask import graph

    def lost(self, plugin, name=None, idempotent=None):
        raise CommClosedError("in <TCP (closed) ConnectionPool.register_worker_plugin>: Stream is closed")

    monkeypatch.setattr(graph, "BRUTE_FORCE_MAX_SAMPLES", 50)
    monkeypatch.setattr(Client, "register_plugin", lost)
    views, y = _blobs()
    np.savez(tmp_path / "blobs.npz", view0=views[0], view1=views[1], y=y)
    assert main(["run", "--data", str(tmp_path / "blobs.npz"), "--out", str(tmp_path / "run"),
                 "--scheduler", scheduler]) == 0
    err = capsys.readouterr().err
    assert "onmsc-dask: warning: the numba warm-up of the workers was interrupted (CommClosedError: " in err
    assert json.loads((tmp_path / "run" / "report.json").read_text())["metrics"]["acc"] > 0.95


def test_scheduler_lost_mid_run_is_a_one_line_error(tmp_path, scheduler, monkeypatch, capsys):
    """distributed cancels the futures when the scheduler goes away (FutureCancelledError, whose message spans two
    lines), and its client logs reconnect tracebacks meanwhile: one line and exit 1 instead, naming the store to
    resume from."""
    import logging

    from distributed.client import FutureCancelledError

    def lost(*args, **kwargs):
        assert logging.getLogger("distributed.client").level == logging.CRITICAL  # its tracebacks are not shown
        raise FutureCancelledError("fit-key", reason="scheduler-connection-lost.\nClient lost the connection")

    monkeypatch.setattr("onmsc_dask.cli._fit", lost)
    level = logging.getLogger("distributed.client").level
    out = tmp_path / "run"
    assert main(["run", "--dataset", "digits", "--out", str(out), "--scheduler", scheduler]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("onmsc-dask: error: the Dask cluster lost the computation (")
    assert err.endswith(f"scheduler-connection-lost. Client lost the connection.); {out / 'views.zarr'} is kept (no "
                        f"stage finished); restart the Dask scheduler ({scheduler}) and its workers (`dask worker` "
                        "exits with its scheduler), then run the same command again to reuse it")
    assert logging.getLogger("distributed.client").level == level  # restored


def _files(root) -> list[tuple]:
    """Every file below `root` with its size and modification time."""
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*"))


def test_store_input_runs_out_of_core_and_is_left_unchanged(tmp_path, scheduler, monkeypatch, capsys):
    """With the anchor solver a .zarr input is copied file by file and fitted by outofcore.fit_store: no view is
    read whole, and the user's store gets no stage results."""
    views, y = _blobs(60)
    given = MultiViewStore.create(tmp_path / "given.zarr", views, y, view_names=["a", "b"], chunk_rows=50)
    before = _files(given.path)

    def no_whole_view(self, p):
        raise AssertionError("a view was read whole")
    monkeypatch.setattr(MultiViewStore, "read_view", no_whole_view)
    out = tmp_path / "run"
    assert main(["run", "--data", str(given.path), "--out", str(out), "--scheduler", scheduler,
                 "--embedding", "anchor", "--n-landmarks", "40"]) == 0
    err = capsys.readouterr().err
    assert "stage 1/5 landmarks ..." in err and "stage 5/5 labels computed in" in err  # progress as it runs
    report = json.loads((out / "report.json").read_text())
    assert report["resolved"]["embedding"] == "anchor" and report["resolved"]["pipeline"] == "out_of_core"
    assert report["resolved"]["lambda2"] == 6.0 and report["resolved"]["n_landmarks"] == 40
    assert all(report["resolved"]["related_views"])
    assert MultiViewStore(out / "views.zarr").read_result("landmarks", "L0").shape == (40, 4)
    assert report["metrics"]["acc"] > 0.95 and report["converged"] is True
    assert set(report["timings"]["fit_stages"]) == {"landmarks", "anchor_graph", "embeddings", "fusion", "labels"}
    assert list(report["view_weights"]) == ["a", "b"]
    objective = np.array(report["objective"])
    assert len(objective) == report["n_iter"] and np.all(np.diff(objective) >= -1e-9)
    run_store = MultiViewStore(out / "views.zarr")
    assert {"landmarks", "anchor_graph", "embeddings", "fusion", "labels", "onmsc"} <= set(run_store.stages())
    np.testing.assert_array_equal(run_store.read_result("onmsc", "labels"), np.load(out / "labels.npy"))
    assert _files(given.path) == before  # input untouched
    assert main(["run", "--data", str(out / "views.zarr"), "--out", str(out), "--scheduler", scheduler,
                 "--embedding", "anchor", "--n-landmarks", "40"]) == 0
    assert "stage 3/5 embeddings read from the store (resumed)" in capsys.readouterr().err
    anchor_labels = np.load(out / "labels.npy")
    np.testing.assert_array_equal(anchor_labels, run_store.read_result("onmsc", "labels"))
    # an in-memory run on the same store keeps its stages apart, so the anchor run still resumes every stage
    monkeypatch.undo()  # the in-memory fit reads the views whole
    assert main(["run", "--data", str(out / "views.zarr"), "--out", str(out), "--scheduler", scheduler,
                 "--embedding", "exact"]) == 0
    assert {"view_graphs", "view_embeddings", "landmarks", "embeddings"} <= set(run_store.stages())
    assert main(["run", "--data", str(out / "views.zarr"), "--out", str(out), "--scheduler", scheduler,
                 "--embedding", "anchor", "--n-landmarks", "40"]) == 0
    err = capsys.readouterr().err
    assert all(f"stage {i}/5 {s} read from the store (resumed)" in err for i, s in enumerate(STAGES, 1)), err
    np.testing.assert_array_equal(np.load(out / "labels.npy"), anchor_labels)


def test_unlabelled_data_needs_n_clusters(tmp_path, scheduler, capsys):
    views, _ = _blobs()
    data = tmp_path / "unlabelled.npz"
    np.savez(data, view0=views[0], view1=views[1])
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "a")]) == 2
    assert "--n-clusters" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()  # nothing created for invalid input
    store = MultiViewStore.create(tmp_path / "unlabelled.zarr", views)
    assert main(["run", "--data", str(store.path), "--out", str(tmp_path / "s")]) == 2
    assert "--n-clusters" in capsys.readouterr().err and not (tmp_path / "s").exists()
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "b"), "--n-clusters", "3",
                 "--scheduler", scheduler]) == 0
    report = json.loads((tmp_path / "b" / "report.json").read_text())
    assert report["metrics"] is None and report["dataset"]["n_classes"] is None
    np.savez(data, view0=views[0], view1=views[1], y=np.zeros(len(views[0])))
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "c")]) == 2
    assert "hold a single class" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_nan_view_exits_2_naming_the_view(tmp_path, capsys):
    views, y = _blobs()
    views[1][7, 2] = np.nan
    data = tmp_path / "nan.npz"
    np.savez(data, view0=views[0], view1=views[1], y=y)
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "view 1" in err and "NaN" in err
    assert not (tmp_path / "out").exists()


def test_empty_or_url_out_is_a_usage_error(tmp_path, capsys, monkeypatch):
    """--out "" used to write every output into the current directory, --out s3://... into a local s3: directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--dataset", "digits", "--out", ""])
    assert exit_info.value.code == 2 and "--out: must name a directory" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit) as exit_info:  # it was written to the local directory s3:/bucket/out
        main(["run", "--dataset", "digits", "--out", "s3://bucket/out"])
    assert exit_info.value.code == 2 and "--out: must be a local directory, got the URL s3://bucket/out" in \
        capsys.readouterr().err
    for url in ("s3:/bucket/out", "simplecache::s3://bucket/out"):  # one slash: a local "s3:" directory too
        with pytest.raises(SystemExit):
            main(["run", "--dataset", "digits", "--out", url])
        assert f"--out: must be a local directory, got the URL {url}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_negative_seed_is_a_usage_error_before_any_output(tmp_path, capsys):
    """It used to end in a TypeError traceback after views.zarr was written."""
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--dataset", "digits", "--out", str(tmp_path / "out"), "--random-state", "-1"])
    assert exit_info.value.code == 2
    assert "--random-state: must be an integer in [0, 4294967295], got -1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given, shown", [("x", "'x'"), ("2.5", "'2.5'"), ("-2", "-2"), ("1", "1")])
def test_n_clusters_must_be_an_integer_of_at_least_2(tmp_path, capsys, given, shown):
    """'x' used to print "invalid positive_int value: 'x'", and -2 "must be an integer >= 1" although 1 then failed."""
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--dataset", "digits", "--out", str(tmp_path / "out"), "--n-clusters", given])
    assert exit_info.value.code == 2
    assert f"argument --n-clusters: must be an integer >= 2, got {shown}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_n_clusters_of_at_least_the_samples_is_named_as_the_option(tmp_path, capsys):
    """It used to print the estimator's "n_clusters=8 must satisfy 2 <= n_clusters < n_samples=8"."""
    np.save(tmp_path / "a.npy", np.random.default_rng(0).normal(size=(8, 3)))
    assert main(["run", "--data", str(tmp_path / "a.npy"), "--n-clusters", "8", "--out", str(tmp_path / "out")]) == 2
    assert f"--n-clusters 8: must be below the 8 samples of {tmp_path / 'a.npy'}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_missing_file_exits_2(tmp_path, capsys):
    """Each missing input gets "FILE: no such file or directory"; a missing view or labels file of several used to
    print Python's "[Errno 2] No such file or directory: 'FILE'"."""
    np.save(tmp_path / "a.npy", np.ones((5, 2)))
    for args, missing in [(["--data", "nope.npz"], "nope.npz"), (["--data", "a.npy", "gone/b.npy"], "gone/b.npy"),
                          (["--data", "a.npy", "--labels", "y.npy", "--n-clusters", "2"], "y.npy")]:
        args = [str(tmp_path / a) if a.endswith(".npz") or a.endswith(".npy") else a for a in args]
        assert main(["run", *args, "--out", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err.strip() == f"onmsc-dask: error: {tmp_path / missing}: no such file or directory"
    assert not (tmp_path / "out").exists()


def test_negative_labels_counted_as_classes_are_said():
    """Labels of -1 (scikit-learn's mark of unlabelled samples) made k one more without a word (found by a new-user
    helper); k from the labels still counts them, with a warning, and given labels without negatives say nothing."""
    import warnings

    from onmsc_dask.validation import n_clusters_of

    y = np.repeat([0, 1, 2, 3], 25)
    y[:10] = -1
    with pytest.warns(UserWarning, match=r"^the labels of neg\.zarr hold negative classes \(-1; 10 samples\), counted "
                                         r"among the 5 clusters; if they mark unlabelled samples \(scikit-learn's -1\), "
                                         r"pass --n-clusters K$"):
        assert n_clusters_of(None, y, len(y), "neg.zarr") == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert n_clusters_of(None, np.abs(y), len(y), "pos.zarr") == 4
        assert n_clusters_of(4, y, len(y), "neg.zarr") == 4  # k given: the labels only score the result


def test_csv_views_with_labels_file(tmp_path, scheduler, capsys):
    """One .csv per view (a header row allowed) and a --labels file; before, --data took one .csv, read as one
    unlabelled view, so a label column could only be clustered as a feature."""
    views, y = _blobs()
    paths = [tmp_path / "shape.csv", tmp_path / "colour.csv"]
    np.savetxt(paths[0], views[0], delimiter=",", header="a,b,c,d", comments="")
    np.savetxt(paths[1], views[1], delimiter=",")
    np.savetxt(tmp_path / "y.csv", y, delimiter=",", fmt="%d")
    out = tmp_path / "run"
    assert main(["run", "--data", *map(str, paths), "--labels", str(tmp_path / "y.csv"), "--out", str(out),
                 "--scheduler", scheduler, "--n-components", "5"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["parameters"]["n_components"] == 5 and report["resolved"]["lambda2"] == 10.0  # 5 * O
    assert report["resolved"]["n_components"] == 5
    assert np.load(out / "labels.npy").max() == 2  # k = 3 clusters from a 5-column embedding
    assert report["dataset"]["view_names"] == ["shape", "colour"] and report["dataset"]["view_dims"] == [4, 6]
    assert report["resolved"]["n_clusters"] == 3 and report["metrics"]["acc"] > 0.95
    np.testing.assert_array_equal(MultiViewStore(out / "views.zarr").labels, y)
    npz = tmp_path / "blobs.npz"
    np.savez(npz, view0=views[0], view1=views[1], y=y)
    store = MultiViewStore.create(tmp_path / "s.zarr", views, y)
    for args, message in ((["--data", str(npz), "--labels", str(tmp_path / "y.csv")], "--labels goes with .csv"),
                          (["--data", str(store.path), "--labels", str(tmp_path / "y.csv")], "--labels goes with"),
                          (["--data", str(npz), str(paths[0])],
                           "several --data paths must all be .csv, .npy or scipy.sparse .npz")):
        assert main(["run", *args, "--out", str(tmp_path / "bad")]) == 2
        assert message in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_npy_views_with_npy_labels(tmp_path, scheduler):
    """One .npy per view (here mixed with a .csv view) and .npy labels: the issue's .npy input, which was refused
    as an unsupported format."""
    views, y = _blobs()
    paths = [tmp_path / "shape.npy", tmp_path / "colour.csv"]
    np.save(paths[0], views[0])
    np.savetxt(paths[1], views[1], delimiter=",")
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "run"
    assert main(["run", "--data", *map(str, paths), "--labels", str(tmp_path / "y.npy"), "--out", str(out),
                 "--scheduler", scheduler]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"]["view_names"] == ["shape", "colour"] and report["dataset"]["view_dims"] == [4, 6]
    assert report["resolved"]["n_clusters"] == 3 and report["metrics"]["acc"] > 0.95
    store = MultiViewStore(out / "views.zarr")
    np.testing.assert_array_equal(store.labels, y)
    np.testing.assert_array_equal(store.read_view(0), views[0])


def test_sparse_npz_views(tmp_path, scheduler):
    """A scipy.sparse.save_npz file is a view, alone or next to other view files (it used to be refused as an .npz
    without view0, view1, ...); it is stored sparse."""
    views, y = _blobs()
    words = sp.csr_matrix(np.maximum(views[1], 0).round())
    sp.save_npz(tmp_path / "words.npz", words)
    np.save(tmp_path / "shape.npy", views[0])
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "run"
    assert main(["run", "--data", str(tmp_path / "shape.npy"), str(tmp_path / "words.npz"), "--labels",
                 str(tmp_path / "y.npy"), "--out", str(out), "--scheduler", scheduler]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"]["view_names"] == ["shape", "words"] and report["metrics"]["acc"] > 0.95
    store = MultiViewStore(out / "views.zarr")
    assert store.is_sparse(1) and (store.read_view(1) != words).nnz == 0
    alone = tmp_path / "alone"
    assert main(["run", "--data", str(tmp_path / "words.npz"), "--n-clusters", "3", "--out", str(alone),
                 "--scheduler", scheduler]) == 0
    assert MultiViewStore(alone / "views.zarr").is_sparse(0)


def test_view_file_errors_name_the_views_and_the_damage(tmp_path, capsys):
    """--view-names name the views in a rows mismatch (the file names did, before them); a damaged sparse .npz
    with --labels is named damaged (it was taken for a multi-view .npz: "--labels goes with ...")."""
    views, y = _blobs()
    np.save(tmp_path / "a.npy", views[0])
    np.save(tmp_path / "b.npy", views[1][:-1])
    np.save(tmp_path / "y.npy", y)
    sp.save_npz(tmp_path / "words.npz", sp.csr_matrix(views[1]))
    (tmp_path / "damaged.npz").write_bytes((tmp_path / "words.npz").read_bytes()[:100])
    for data, extra, message in [
            (["a.npy", "b.npy"], ["--view-names", "img", "txt"],
             "view 1 ('txt'): has 89 rows, expected 90 like view 0 ('img')"),
            (["a.npy", "damaged.npz"], [], "damaged.npz: corrupt or not a scipy.sparse .npz matrix")]:
        assert main(["run", "--data", *(str(tmp_path / d) for d in data), "--labels", str(tmp_path / "y.npy"),
                     *extra, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_view_left_out_before_the_graphs_keeps_the_other_views_names(tmp_path, scheduler, capsys):
    """A view with fewer distinct rows than clusters is left out before the graphs (ONMSC.left_out_views_): the
    per-view results of the other views stay under their own names, in report.json, the store and report.html."""
    views, y = _blobs()
    views[1] = views[1] / 6 + np.random.default_rng(1).normal(size=views[1].shape)  # b: a weaker view than a
    few = np.repeat([[0.0, 1.0], [1.0, 0.0]], len(y) // 2, axis=0)  # two distinct rows, k = 3
    paths = [tmp_path / "few.npy", tmp_path / "a.npy", tmp_path / "b.npy"]
    for path, view in zip(paths, [few, *views]):
        np.save(path, view)
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "run"
    assert main(["run", "--data", *map(str, paths), "--labels", str(tmp_path / "y.npy"), "--out", str(out),
                 "--scheduler", scheduler, "--quiet"]) == 0
    assert "view 0 ('few'): only 2 distinct rows" in capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["resolved"]["left_out_views"] == [0] and report["view_weights"]["few"] == 0
    assert set(report["single_view_scores"]) == {"a", "b"}
    alone = {name: single_view_scores(ONMSC(3, keep_intermediate=True, random_state=0).fit([view, view])
                                      .view_embeddings_[:1], y, 3, [name])
             for name, view in zip("ab", views)}  # each view's own first-order embedding scored alone
    assert alone["a"]["a"]["acc"] > alone["b"]["b"]["acc"] + 0.1
    for name in "ab":  # the same up to the views' seeds (fit_seeds by position)
        assert report["single_view_scores"][name] == pytest.approx(alone[name][name], abs=0.05)
    store = MultiViewStore(out / "views.zarr")
    assert store.read_result("view_embeddings", "views").tolist() == [1, 2]
    assert sorted(zarr.open_group(store.path / "stages" / "view_graphs", mode="r").keys()) == ["view1", "view2"]
    page = (out / "report.html").read_text()
    reason = next(w for w in report["warnings"] if w.startswith("view 0 ('few'): only 2 distinct rows"))
    assert ('<td>few</td><td>2</td><td>-</td><td data-key="view_weights.few">0.0000</td><td class="words">no: only 2 '
            "distinct rows, fewer than n_clusters=3") in page  # the reason, where the cell listed every possible one
    assert f'"warnings.{report["warnings"].index(reason)}">{html.escape(reason)}</li>' in page


def test_an_npz_of_named_arrays_names_the_views(tmp_path, scheduler):
    """np.savez(f, colour=A, texture=B, y=y): the run's views are named colour and texture (the archive was
    refused); --view-names still overrides them."""
    views, y = _blobs(30)
    np.savez(tmp_path / "named.npz", colour=views[0], texture=views[1], y=y)
    out = tmp_path / "run"
    assert main(["run", "--data", str(tmp_path / "named.npz"), "--out", str(out), "--scheduler", scheduler,
                 "--quiet"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"]["view_names"] == ["colour", "texture"]
    np.testing.assert_array_equal(np.load(out / "labels.npy"), ONMSC(3, random_state=0).fit(views).labels_)
    assert main(["run", "--data", str(tmp_path / "named.npz"), "--view-names", "a", "b", "--out", str(out),
                 "--scheduler", scheduler, "--quiet"]) == 0
    assert json.loads((out / "report.json").read_text())["dataset"]["view_names"] == ["a", "b"]


def test_a_constant_view_of_a_file_is_left_out_and_the_run_goes_on(tmp_path, scheduler, capsys):
    """A constant view of a .npz (or .mat, .csv) file is left out with the warning naming it, as from a store or
    ONMSC.fit, not an error; the labels are those of the other views; the input file is not changed; views that are
    all constant stay an error."""
    import scipy.io

    views, y = _blobs(30)
    data = tmp_path / "flat.mat"
    scipy.io.savemat(data, {"X": _cell([views[0], np.zeros((len(y), 4)), views[1]]), "y": y})
    before = data.read_bytes()
    out = tmp_path / "run"
    assert main(["run", "--data", str(data), "--out", str(out), "--scheduler", scheduler, "--quiet"]) == 0
    assert "view 1 ('view1'): is constant (every sample has the same features), so it carries no cluster information; " \
           "it is left out" in capsys.readouterr().err
    assert data.read_bytes() == before
    report = json.loads((out / "report.json").read_text())
    assert report["resolved"]["left_out_views"] == [1] and report["view_weights"]["view1"] == 0
    alone = ONMSC(3, random_state=0).fit(views).labels_
    np.testing.assert_array_equal(np.load(out / "labels.npy"), alone)
    scipy.io.savemat(data, {"X": _cell([np.ones((len(y), 2)), np.zeros((len(y), 4))]), "y": y})
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "none"), "--scheduler", scheduler,
                 "--quiet"]) == 2
    assert ("every view is constant (every sample has the same features), so none carries cluster information: "
            "view 0, view 1") in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def _cell(views: list[np.ndarray]) -> np.ndarray:
    """A MATLAB cell array of views (scipy.io.savemat)."""
    cell = np.empty(len(views), dtype=object)
    cell[:] = views
    return cell


def test_constant_store_view_of_an_anchor_run_keeps_the_other_views_names(tmp_path, scheduler, capsys):
    """A constant view of a store is left out by the anchor chain (outofcore.ConstantViews): report.json lists it
    as left out and scores the other views alone under their own names, each as its own view's embedding of the
    fit; report.html says why it is not used."""
    views, y = _blobs(60)
    store = MultiViewStore.create(tmp_path / "given.zarr", [np.full((len(y), 3), 2.5), *views], y,
                                  view_names=["flat", "a", "b"], chunk_rows=60)
    out = tmp_path / "run"
    assert main(["run", "--data", str(store.path), "--out", str(out), "--embedding", "anchor", "--n-landmarks", "40",
                 "--scheduler", scheduler, "--quiet"]) == 0
    assert "view 0 ('flat'): is constant" in capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["view_weights"]["flat"] == 0 and report["resolved"]["left_out_views"] == [0]
    assert set(report["single_view_scores"]) == {"a", "b"}
    assert "no: is constant (every sample has the same features)" in (out / "report.html").read_text()
    model = ONMSC(3, embedding="anchor", n_landmarks=40, keep_intermediate=True, random_state=0).fit(views)
    assert report["single_view_scores"] == single_view_scores(model.view_embeddings_, y, 3, ["a", "b"])


def test_a_run_store_without_its_root_metadata_is_rebuilt(tmp_path, scheduler, capsys):
    """DIR/views.zarr that lost its zarr.json was 'replaced' in the log, then refused as 'not a zarr store' at every
    rerun. It is rebuilt (same labels); a views.zarr holding no store group is not a run's store: left as it is."""
    views, y = _blobs()
    data = tmp_path / "blobs.npz"
    np.savez(data, view0=views[0], view1=views[1], y=y)
    out = tmp_path / "run"
    command = ["run", "--data", str(data), "--out", str(out), "--scheduler", scheduler]
    assert main(command) == 0
    labels = np.load(out / "labels.npy")
    (out / "views.zarr" / "zarr.json").unlink()
    capsys.readouterr()
    assert main(command) == 0
    err = capsys.readouterr().err
    assert "replacing the previous run's store" in err and "(not a whole store)" in err and "error" not in err, err
    assert (np.load(out / "labels.npy") == labels).all() and (out / "views.zarr" / "zarr.json").is_file()
    other = tmp_path / "other"
    (other / "views.zarr").mkdir(parents=True)
    (other / "views.zarr" / "notes.txt").write_text("mine")
    assert main(["run", "--data", str(data), "--out", str(other), "--scheduler", scheduler]) == 2
    assert "views.zarr is not a store a run wrote (no views, labels or stages group in it)" in capsys.readouterr().err
    assert (other / "views.zarr" / "notes.txt").read_text() == "mine"
    # a file, or a symbolic link to a store, there: refused without first saying "replacing the previous run's store"
    (tmp_path / "file" / "views.zarr").parent.mkdir()
    (tmp_path / "file" / "views.zarr").write_text("mine")
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "views.zarr").symlink_to(MultiViewStore.create(tmp_path / "made.zarr", views).path)
    for where, said in (("file", "is not a store a run wrote (a file)"), ("link", "is a symbolic link")):
        assert main(["run", "--data", str(data), "--out", str(tmp_path / where), "--scheduler", scheduler,
                     "--n-clusters", "4"]) == 2
        err = capsys.readouterr().err
        assert f"onmsc-dask: error: {tmp_path / where / 'views.zarr'} {said}, so it is not replaced" in err, err
        assert "replacing" not in err, err
    assert (tmp_path / "file" / "views.zarr").read_text() == "mine"
    assert MultiViewStore(tmp_path / "made.zarr").stages() == {}


def test_parameters_checked_before_anything_is_written(tmp_path, capsys):
    """--n-neighbors >= n failed after views.zarr was written and a cluster started; --out naming a file gave a
    bare '[Errno 17] File exists'."""
    views, y = _blobs()
    data = tmp_path / "blobs.npz"
    np.savez(data, view0=views[0], view1=views[1], y=y)
    assert main(["run", "--data", str(data), "--n-neighbors", "90", "--out", str(tmp_path / "a")]) == 2
    assert "n_neighbors=90 must satisfy 1 <= n_neighbors < n_samples=90" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    assert main(["run", "--data", str(data), "--embedding", "anchor", "--n-landmarks", "40",
                 "--n-nearest-landmarks", "41", "--out", str(tmp_path / "b")]) == 2
    assert "n_nearest_landmarks=41 must satisfy" in capsys.readouterr().err and not (tmp_path / "b").exists()
    # with kNN graphs they size predict's extension: the same error (they used to be taken, leaving no extension)
    assert main(["run", "--data", str(data), "--n-landmarks", "40", "--n-nearest-landmarks", "41", "--out",
                 str(tmp_path / "b")]) == 2
    assert "n_nearest_landmarks=41 must satisfy" in capsys.readouterr().err and not (tmp_path / "b").exists()
    assert main(["run", "--data", str(data), "--n-components", "2", "--out", str(tmp_path / "c")]) == 2
    assert "n_components=2 must satisfy n_clusters=3" in capsys.readouterr().err and not (tmp_path / "c").exists()
    assert main(["run", "--data", str(data), "--embedding", "anchor", "--n-landmarks", "40", "--consensus-graph",
                 "rank", "--out", str(tmp_path / "d")]) == 2
    assert "--consensus-graph rank needs kNN graphs" in capsys.readouterr().err and not (tmp_path / "d").exists()
    (tmp_path / "file").write_text("mine")
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "file")]) == 2
    assert "--out " + str(tmp_path / "file") + " is a file" in capsys.readouterr().err
    assert (tmp_path / "file").read_text() == "mine"


def test_anchor_links_and_one_line_messages(tmp_path, capfd, monkeypatch):
    """--n-nearest-landmarks reaches the anchor graph; a warning is one line, and a bad store on a process cluster
    ends in the one-line error without the workers' tracebacks (captured at the file descriptors, so the worker
    processes' stderr is included)."""
    views, y = _blobs(60)
    given = MultiViewStore.create(tmp_path / "given.zarr", views, y, chunk_rows=50)
    out = tmp_path / "run"
    assert main(["run", "--data", str(given.path), "--out", str(out), "--embedding", "anchor", "--n-landmarks", "40",
                 "--n-nearest-landmarks", "4", "--workers", "1"]) == 0
    err = capfd.readouterr().err
    # the blobs lie far apart: each view's anchor graph is in 3 pieces
    assert "onmsc-dask: warning: view 0 ('view0'): its graph has 3 disconnected pieces" in err
    assert "UserWarning" not in err
    report = json.loads((out / "report.json").read_text())
    assert report["parameters"]["n_nearest_landmarks"] == 4 and report["parameters"]["n_components"] is None
    Z = MultiViewStore(out / "views.zarr").read_result("anchor_graph", "Z0")
    assert np.all(np.diff(Z.indptr) == 4)  # each sample links to 4 landmarks
    bad = MultiViewStore.create(tmp_path / "bad.zarr", views, y, chunk_rows=50)
    zarr.open_array(bad.path / "views" / "1", mode="r+")[5, 1] = np.nan  # create refuses NaN: damaged afterwards
    monkeypatch.chdir(tmp_path)  # a relative --out: out of core the message holds the copy's resolved path
    assert main(["run", "--data", str(bad.path), "--out", "bad", "--embedding", "anchor",
                 "--n-landmarks", "40", "--workers", "1"]) == 2
    err = capfd.readouterr().err
    assert "onmsc-dask: error: " in err and "view 1 ('view1')" in err and "NaN" in err
    assert "Traceback" not in err and "Compute Failed" not in err
    error = err[err.index("onmsc-dask: error: "):]  # names the user's store, not the run's copy (it used to)
    assert f"store {bad.path}: view 1" in error and "views.zarr" not in error


@pytest.mark.parametrize("command", [["onmsc-dask"], [sys.executable, "-m", "onmsc_dask"]])
def test_help_in_subprocess(command):
    for args in (["--help"], ["run", "--help"]):
        result = subprocess.run(command + args, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "usage: onmsc-dask" in result.stdout
        assert "examples:\n  onmsc-dask run --dataset digits --out runs/digits" in result.stdout
    assert "--scheduler" in result.stdout and "--embedding" in result.stdout and "--view-names" in result.stdout
    version = subprocess.run(command + ["--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.strip() == f"onmsc-dask {importlib.metadata.version('onmsc-dask')}"


def test_an_out_that_would_overwrite_or_change_an_input_is_refused(tmp_path, scheduler, capsys):
    """A run writes labels.csv, labels.npy, ... into --out: an input of that name there (the user's labels.csv) was
    overwritten with the run's labels, and the same command then failed on it. An --out inside an input directory
    or store would change that input. Both are one line, exit 2, nothing written; DIR/views.zarr given as --data
    with --out DIR is still run as it is."""
    views, y = _blobs()
    np.savetxt(tmp_path / "a.csv", views[0], delimiter=",")
    np.savetxt(tmp_path / "b.csv", views[1], delimiter=",")
    np.savetxt(tmp_path / "labels.csv", y, fmt="%d")
    np.save(tmp_path / "labels.npy", y)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for labels in ("labels.csv", "labels.npy"):
        assert main(["run", "--data", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--labels",
                     str(tmp_path / labels), "--out", str(tmp_path)]) == 2
        assert (f"--out {tmp_path} holds the input {tmp_path / labels}, or a file inside it, which the run would "
                f"overwrite with its {labels}; give another --out") in capsys.readouterr().err
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "labels.csv").symlink_to(tmp_path / "labels.csv")  # written through, it would be lost
    assert main(["run", "--data", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--labels",
                 str(tmp_path / "linked" / "labels.csv"), "--out", str(tmp_path / "linked")]) == 2
    assert (f"holds the input {tmp_path / 'linked' / 'labels.csv'}, or a file inside it, which the run would "
            "overwrite with its labels.csv") in capsys.readouterr().err
    assert main(["run", "--data", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--labels",
                 str(tmp_path / "labels.csv"), "--out", str(tmp_path / "linked")]) == 2  # the link's target given
    assert "which the run would overwrite with its labels.csv" in capsys.readouterr().err
    store = MultiViewStore.create(tmp_path / "s.zarr", views, y)
    assert main(["run", "--data", str(tmp_path / "s.zarr"), "--out", str(tmp_path / "s.zarr" / "run")]) == 2
    assert (f"--out {tmp_path / 's.zarr' / 'run'} is inside the input {tmp_path / 's.zarr'}, which the run would "
            "change; give an --out outside it") in capsys.readouterr().err
    assert not (tmp_path / "s.zarr" / "run").exists()
    (tmp_path / "into").mkdir()  # a link from --out to a file inside the input store: written through, it was lost
    (tmp_path / "into" / "labels.csv").symlink_to(tmp_path / "s.zarr" / "zarr.json")
    assert main(["run", "--data", str(tmp_path / "s.zarr"), "--out", str(tmp_path / "into")]) == 2
    assert (f"--out {tmp_path / 'into'} holds the input {tmp_path / 's.zarr'}, or a file inside it, which the run "
            "would overwrite with its labels.csv") in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == files
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*files, "into", "linked", "s.zarr"])
    assert store.stages() == {} and [p.name for p in (tmp_path / "into").iterdir()] == ["labels.csv"]
    assert [p.name for p in (tmp_path / "linked").iterdir()] == ["labels.csv"]
    store.copy(tmp_path / "out" / "views.zarr")
    assert main(["run", "--data", str(tmp_path / "out" / "views.zarr"), "--out", str(tmp_path / "out"),
                 "--quiet", "--scheduler", scheduler]) == 0


def test_view_names_must_match_the_views(tmp_path, scheduler, capsys):
    views, y = _blobs()
    np.savez(tmp_path / "blobs.npz", view0=views[0], view1=views[1], y=y)
    assert main(["run", "--data", str(tmp_path / "blobs.npz"), "--out", str(tmp_path / "out"),
                 "--view-names", "one"]) == 2
    assert "--view-names gives 1 name for the 2 views of" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    MultiViewStore.create(tmp_path / "blobs.zarr", views, y)  # a store keeps its own names
    assert main(["run", "--data", str(tmp_path / "blobs.zarr"), "--out", str(tmp_path / "out"),
                 "--view-names", "one", "two"]) == 2
    assert "--view-names is not used with a store" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    # a rerun into the same --out with other names: the store is written again with them (it used to be reused with
    # the earlier names, and a wrong count was accepted)
    run = ["run", "--data", str(tmp_path / "blobs.npz"), "--out", str(tmp_path / "named"), "--quiet",
           "--scheduler", scheduler]
    assert main([*run, "--view-names", "alpha", "beta"]) == 0
    assert main([*run, "--view-names", "colour", "shape"]) == 0
    assert MultiViewStore(tmp_path / "named" / "views.zarr").view_names == ["colour", "shape"]
    assert list(json.loads((tmp_path / "named" / "report.json").read_text())["view_weights"]) == ["colour", "shape"]
    capsys.readouterr()
    assert main([*run, "--view-names", "one"]) == 2
    assert "--view-names gives 1 name for the 2 views of" in capsys.readouterr().err
    assert main(run) == 0
    assert MultiViewStore(tmp_path / "named" / "views.zarr").view_names == ["view0", "view1"]


def test_scheduler_problems_are_one_line_errors_before_anything_is_written(tmp_path, scheduler, capsys, monkeypatch):
    """A silent port, a worker's address and a scheduler without workers end in exit 2 within the connect timeout
    (they used to wait forever or end in a traceback), and the output directory is not created."""
    import socket

    from distributed import Client, default_client

    monkeypatch.setattr("onmsc_dask.cli.SCHEDULER_TIMEOUT", 3.0)
    with Client(scheduler) as client:
        worker = next(iter(client.scheduler_info()["workers"]))
    silent = socket.socket()  # accepts connections (listen backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    with silent, LocalCluster(n_workers=0, processes=False, dashboard_address=None) as empty:
        port = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        cases = {port: f"no Dask scheduler at {port} (no answer within 3 s)",
                 worker: f"{worker} is a Dask Worker, not a scheduler",
                 empty.scheduler_address: f"the Dask scheduler at {empty.scheduler_address} has no workers"}
        for address, message in cases.items():
            out = tmp_path / "never"
            assert main(["run", "--dataset", "digits", "--out", str(out), "--scheduler", address]) == 2
            assert message in capsys.readouterr().err and not out.exists()
    with pytest.raises(ValueError, match="No clients found"):  # no half-made client left as the default, which
        default_client()  # in-memory fits later in this process would wait on forever


def test_connect_waits_its_own_timeout_and_says_when_it_waits_for_a_worker(scheduler):
    """A closed port is retried for the whole `timeout` (it used to give up after distributed's connect timeout, 30 s,
    while the docs say 60 s); a scheduler without workers gets a line saying the run waits for one (the heartbeat
    used to say "connecting" all along); a scheduler with workers, only the line saying how long connecting may take
    (a refused port waited the whole timeout without saying so). A host name that is not known is said at once (a
    typo waited the whole 60 s)."""
    import socket
    import time

    import dask
    from onmsc_dask.cli import connect

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    address = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        start = time.monotonic()
        with pytest.raises(OSError, match=f"no Dask scheduler at {address} \\(Timed out trying to connect to "
                                          f"{address} after 3 s\\)"):
            connect(address, timeout=3.0)
        assert time.monotonic() - start >= 2.9
    lines = []
    with pytest.raises(OSError, match=r"^no Dask scheduler at tcp://no-such-host\.invalid:8786 \(the host name "
                                      r"'no-such-host\.invalid' is not known\); give the address `dask scheduler`"):
        connect("tcp://no-such-host.invalid:8786", timeout=60.0, log=lines.append)  # said at once, not retried
    assert lines == []
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as empty:
        with pytest.raises(OSError, match="has no workers"):
            connect(empty.scheduler_address, timeout=1.0, log=lines.append)
    assert lines == [f"connecting to the Dask scheduler at {empty.scheduler_address} (trying for up to 1 s)",
                     f"waiting up to 1 s for a worker of the Dask scheduler at {empty.scheduler_address}"]
    with connect(scheduler, timeout=10.0, log=lines.append):
        assert lines[2:] == [f"connecting to the Dask scheduler at {scheduler} (trying for up to 10 s)"]


def test_a_directory_where_the_run_writes_a_file_is_said_before_the_fit(tmp_path, capsys):
    """OUT/labels.npy a directory: the run fitted, then stopped writing its results, every time, and an earlier
    run's results were already removed."""
    out = tmp_path / "out"
    (out / "labels.npy").mkdir(parents=True)
    assert main(["run", "--dataset", "digits", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"error: {out / 'labels.npy'} is a directory, where the run writes its labels.npy; move it "
                        "away\n") and "fitting" not in err and not (out / "views.zarr").exists()


def test_an_out_directory_with_the_user_s_own_report_or_labels_is_refused(tmp_path, capsys):
    """--out holding a report.json or labels.csv that no run wrote: one line, exit 2, the files unchanged, nothing
    written (the run replaced them); an earlier run's files are replaced as before."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "labels.csv").write_text("my,labels\n")
    (out / "report.json").write_text('{"mine": 1}\n')
    (out / "notes.txt").write_text("kept\n")
    assert main(["run", "--dataset", "digits", "--out", str(out)]) == 2
    assert capsys.readouterr().err.endswith(
        f"error: --out {out} holds report.json, labels.csv, which no onmsc-dask run wrote ({out / 'report.json'} is "
        "no run's report) and the run would replace; give another --out, or move them away\n")
    assert sorted(p.name for p in out.iterdir()) == ["labels.csv", "notes.txt", "report.json"]
    assert (out / "report.json").read_text() == '{"mine": 1}\n' and (out / "labels.csv").read_text() == "my,labels\n"
    (out / "report.json").unlink()
    assert main(["run", "--dataset", "digits", "--out", str(out), "--quiet"]) == 2  # labels.csv alone: refused too
    (out / "labels.csv").unlink()
    assert main(["run", "--dataset", "digits", "--out", str(out), "--quiet"]) == 0
    first = (out / "labels.csv").read_text()
    assert main(["run", "--dataset", "digits", "--out", str(out), "--quiet"]) == 0  # its own files: replaced
    assert (out / "labels.csv").read_text() == first and (out / "notes.txt").read_text() == "kept\n"


def test_argument_errors_come_before_connecting_to_the_scheduler(tmp_path, capsys, monkeypatch):
    """--storage-options without a URL, a URL scheme that is not installed, --view-names with a store and a --data
    or --labels file that does not exist are known from the arguments: the one-line error comes at once, not after
    SCHEDULER_TIMEOUT spent connecting (here to a closed port, which would be "no Dask scheduler at ...")."""
    import socket
    import time

    monkeypatch.setattr("onmsc_dask.cli.SCHEDULER_TIMEOUT", 30.0)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    address = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    store = MultiViewStore.create(tmp_path / "s.zarr", *_blobs(5))
    out = tmp_path / "out"
    cases = {("--dataset", "digits", "--storage-options", "{}"): "--storage-options go with a --data URL",
             ("--data", "s4://bucket/views.zarr"): "s4://bucket/views.zarr: URL scheme 's4' is not available",
             ("--data", str(store.path), "--view-names", "a", "b"): "--view-names is not used with a store",
             # a zarr group that is no store said "--view-names is not used with a store" first (a new-user trial)
             ("--data", str(tmp_path / "mine.zarr"), "--view-names", "a"): "mine.zarr is not an onmsc-dask store",
             ("--data", str(tmp_path / "gone.csv")): f"{tmp_path / 'gone.csv'}: no such file or directory",
             ("--data", str(tmp_path / "v.csv"), "--labels", str(tmp_path / "no_y.csv")):
                 f"{tmp_path / 'no_y.csv'}: no such file or directory"}
    (tmp_path / "v.csv").write_text("1,2\n3,4\n5,6\n")
    zarr.open_group(tmp_path / "mine.zarr", mode="w").create_array("a", data=np.ones((6, 2)))
    for arguments, message in cases.items():
        start = time.monotonic()
        assert main(["run", *arguments, "--out", str(out), "--scheduler", address]) == 2
        assert time.monotonic() - start < 20  # not the 30 s connect timeout
        assert message in capsys.readouterr().err and not out.exists()


def test_lost_workers_of_a_given_scheduler_say_to_start_workers(tmp_path, scheduler, monkeypatch, capsys):
    """The supervision's "no worker left" with --scheduler: the hint says to start workers first; on a local cluster
    (the run's own) it says only to run the command again."""
    from onmsc_dask.supervision import ClusterLost

    def lost(*args, **kwargs):
        raise ClusterLost("no Dask worker left for 30 s", scheduler=False)

    monkeypatch.setattr("onmsc_dask.cli._fit", lost)
    out = tmp_path / "run"
    assert main(["run", "--dataset", "digits", "--out", str(out), "--scheduler", scheduler]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"onmsc-dask: error: no Dask worker left for 30 s; {out / 'views.zarr'} is kept (no stage finished); start "
        f"workers with `dask worker {scheduler} --nthreads 1`, then run the same command again to reuse it")
    assert main(["run", "--dataset", "digits", "--out", str(out), "--workers", "1"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"onmsc-dask: error: no Dask worker left for 30 s; {out / 'views.zarr'} is kept (no stage finished); run the "
        "same command again to reuse it")


def test_a_failed_run_says_the_outputs_in_out_are_an_earlier_runs(tmp_path, scheduler, monkeypatch, capsys):
    """A run that fails after an earlier one completed leaves that run's report and labels in --out (they are replaced
    as one set only by a run that completes): its line says so, where a user would take them for this run's (found by
    a new-user trial)."""
    from onmsc_dask.supervision import ClusterLost

    out, run = tmp_path / "run", ["run", "--dataset", "digits", "--out", str(tmp_path / "run"), "--scheduler", scheduler]
    assert main(run) == 0
    labels = (out / "labels.csv").read_bytes()
    capsys.readouterr()

    def lost(*args, **kwargs):
        raise ClusterLost("no Dask worker left for 30 s", scheduler=False)

    monkeypatch.setattr("onmsc_dask.cli._fit", lost)
    assert main([*run, "--n-clusters", "4"]) == 1
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"; {out} holds an earlier run's report.json, report.html, convergence.png, labels.npy, labels.csv, not this "
        "run's (a run that completes replaces them)")
    assert (out / "labels.csv").read_bytes() == labels  # left as they were


def test_resume_hint_names_the_store_that_keeps_the_stages(tmp_path):
    """After a lost cluster or Ctrl-C the line names DIR/views.zarr, or the --data URL store a run writes its stages
    into (an fsspec memory:// store here), with the anchor chain's stages finished in a row, each reused if made with
    the same parameters; the stages made with another value of a parameter the command sets are not listed."""
    from onmsc_dask.cli import _resume_hint, build_parser

    E = "; a finished stage is reused if made with the same parameters"
    views, y = _blobs(5)
    url = "memory://resume-hint/views.zarr"
    store = MultiViewStore.create(url, views, y)
    args = build_parser().parse_args(["run", "--data", url, "--out", str(tmp_path / "out"), "--embedding", "anchor"])
    assert _resume_hint(args) == f"{url} is kept (no stage finished); run the same command again to reuse it"
    store.write_result("landmarks", "L0", np.zeros(2), {})
    store.mark_complete("landmarks")
    assert _resume_hint(args) == (f"{url} keeps the finished stages (landmarks{E}); run the same command again to "
                                  "resume after the last of them")
    store.write_result("fusion", "H", np.zeros(2), {})  # after a missing stage: recomputed, not listed (it was)
    store.mark_complete("fusion")
    assert _resume_hint(args).startswith(f"{url} keeps the finished stages (landmarks{E}); ")
    store.write_result("view_graphs", "G", np.zeros(2), {})  # a kNN run's: nothing resumes after it (it was listed)
    store.mark_complete("view_graphs")
    assert _resume_hint(args).startswith(f"{url} keeps the finished stages (landmarks{E}); ")
    for solver in ("exact", "auto"):  # in memory (auto: 15 samples): no stage resumes (it listed the anchor stages)
        exact = build_parser().parse_args(["run", "--data", url, "--out", str(tmp_path / "out"), "--embedding", solver])
        assert _resume_hint(exact) == (f"{url} is kept; run the same command again to reuse it (an in-memory run "
                                       "computes every stage again)")
    local = build_parser().parse_args(["run", "--out", str(tmp_path / "out")])
    assert _resume_hint(local) == "nothing was kept; run the same command again"
    # stages of another seed are not listed as kept: they are computed again (they were listed)
    other = MultiViewStore.create("memory://resume-hint/other.zarr", views, y)
    for stage, seed in (("landmarks", 0), ("anchor_graph", 1)):
        other.write_result(stage, "R", np.zeros(2), {"random_state": seed, "n_landmarks": 60})
        other.mark_complete(stage)
    command = ["run", "--data", "memory://resume-hint/other.zarr", "--out", str(tmp_path / "out"), "--embedding",
               "anchor"]
    assert _resume_hint(build_parser().parse_args(command)) == (
        "memory://resume-hint/other.zarr keeps the finished stages (landmarks; the stages after them were made with "
        f"random_state 1, not 0: they are computed again{E}); run the same command again to resume after the last of "
        "them")
    assert _resume_hint(build_parser().parse_args([*command, "--random-state", "1"])) == (
        "memory://resume-hint/other.zarr is kept (no stage finished with random_state 0, not 1); run the same "
        "command again to reuse it")
    assert _resume_hint(build_parser().parse_args([*command, "--n-landmarks", "50"])).startswith(
        "memory://resume-hint/other.zarr is kept (no stage finished with n_landmarks 60, not 50); ")


def test_the_same_in_memory_command_again_says_it_recomputes(tmp_path, scheduler, capsys):
    """It used to log "resuming: ... (finished stages: onmsc, view_embeddings, view_graphs)" and then compute every
    stage again, as in-memory runs do (only the anchor chain resumes)."""
    views, _ = _blobs()
    np.savez(tmp_path / "feat.npz", view0=views[0], view1=views[1])
    command = ["run", "--data", str(tmp_path / "feat.npz"), "--n-clusters", "3", "--out", str(tmp_path / "run"),
               "--scheduler", scheduler]
    assert main(command) == 0
    first = np.load(tmp_path / "run" / "labels.npy")
    # the stage label of the heartbeat while it connects (it said "since: starting")
    assert f"] connecting to the Dask scheduler at {scheduler} (trying for up to 60 s)\n" in capsys.readouterr().err
    assert main(command) == 0
    err = capsys.readouterr().err
    assert f"reusing {tmp_path / 'run' / 'views.zarr'}: it holds this input; an in-memory run computes every stage " \
           "again" in err and "resuming" not in err
    np.testing.assert_array_equal(np.load(tmp_path / "run" / "labels.npy"), first)


def test_the_same_command_again_keeps_the_inputs_warnings_and_class_names_in_the_report(tmp_path, scheduler, capsys,
                                                                                       monkeypatch):
    """A run reusing DIR/views.zarr used to write a report.json without the warnings of reading its input, which it
    did not read again. Class names were ids 0..C-1 in the report, their names only in a warning: the store keeps
    them, report.json gives them and the confusion matrix shows them."""
    from onmsc_dask import report as report_module

    drawn, plot_confusion = [], report_module.plot_confusion
    monkeypatch.setattr(report_module, "plot_confusion", lambda *args: drawn.append(args[2]) or plot_confusion(*args))
    views, y = _blobs()
    np.save(tmp_path / "a.npy", views[0])
    np.save(tmp_path / "b.npy", views[1])
    (tmp_path / "y.csv").write_text("".join(f"{'Cat cat fox'.split()[c]}\n" for c in y))
    command = ["run", "--data", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--labels", str(tmp_path / "y.csv"),
               "--out", str(tmp_path / "run"), "--scheduler", scheduler]
    said = "y.csv: class names 'Cat' and 'cat' differ only in case: two classes"
    for _ in range(2):
        assert main(command) == 0
        assert said in capsys.readouterr().err
        report = json.loads((tmp_path / "run" / "report.json").read_text())
        assert [w for w in report["warnings"] if said in w] and report["dataset"]["class_names"] == ["Cat", "cat", "fox"]
        assert report["metrics"]["acc"] == 1.0
    assert drawn == [["Cat", "cat", "fox"]] * 2


def test_a_damaged_view_of_the_runs_store_is_written_again_from_the_input(tmp_path, scheduler, capsys):
    """A view chunk of DIR/views.zarr deleted after a run: the same command used to fail on it every time, naming
    the input file; now the store is written again from the unchanged input, with the same labels, and the next
    run resumes."""
    views, y = _blobs(n_per_class=100)
    np.savez(tmp_path / "d.npz", view0=views[0], view1=views[1], y=y)
    out = tmp_path / "run"
    command = ["run", "--data", str(tmp_path / "d.npz"), "--out", str(out), "--embedding", "anchor",
               "--n-landmarks", "60", "--scheduler", scheduler]
    assert main(command) == 0
    first = np.load(out / "labels.npy")
    (out / "views.zarr" / "views" / "1" / "c" / "0" / "0").unlink()
    capsys.readouterr()
    assert main(command) == 0
    err = capsys.readouterr().err
    assert (f"replacing the previous run's store {out / 'views.zarr'} (made from this input, but its file "
            "views/1/c/0/0 was deleted or changed since)") in err and "resuming" not in err
    np.testing.assert_array_equal(np.load(out / "labels.npy"), first)
    assert main(command) == 0
    assert f"resuming: {out / 'views.zarr'} holds this input (finished stages: landmarks" in capsys.readouterr().err


def test_a_run_over_other_input_removes_the_earlier_run_s_results_first(tmp_path, scheduler, capsys, monkeypatch):
    """A run into the DIR of a run of other input replaces its store; if it then stops before its own results, the
    earlier run's report and labels must not be left beside the new store as if they were its results."""
    import onmsc_dask.cli as cli

    out = tmp_path / "run"
    for name, n_per_class in (("a", 30), ("b", 40)):
        views, y = _blobs(n_per_class)
        np.savez(tmp_path / f"{name}.npz", view0=views[0], view1=views[1], y=y)
    command = ["run", "--data", str(tmp_path / "a.npz"), "--out", str(out), "--scheduler", scheduler, "--quiet"]
    assert main(command) == 0 and len(np.load(out / "labels.npy")) == 90
    capsys.readouterr()
    with monkeypatch.context() as patch:
        patch.setattr(cli, "_fit", lambda *args: (_ for _ in ()).throw(ValueError("stopped for the test")))
        assert main([*command[:2], str(tmp_path / "b.npz"), *command[3:]]) == 2
    err = capsys.readouterr().err
    assert (f"replacing the previous run's store {out / 'views.zarr'} (made from other input), and removing its "
            "results (report.json, report.html, convergence.png, labels.npy, labels.csv)") in err, err
    assert "stopped for the test" in err
    assert not any((out / name).exists() for name in ("report.json", "report.html", "labels.npy", "labels.csv"))
    assert MultiViewStore(out / "views.zarr").n_samples == 120
    assert main([*command[:2], str(tmp_path / "b.npz"), *command[3:]]) == 0
    assert len(np.load(out / "labels.npy")) == 120


def test_an_input_file_of_the_same_size_and_time_but_other_content_is_new_input(tmp_path, scheduler, capsys):
    """A view file replaced by one of the same size with its old modification time (as `cp -p` or `rsync -t` restore
    a backup): the run used to say "resuming" and give the old input's labels; the files' CRC-32 tells them apart."""
    import os

    views, y = _blobs(n_per_class=100)
    path, out = tmp_path / "v0.npy", tmp_path / "run"
    np.save(path, views[0])
    np.save(tmp_path / "v1.npy", views[1])
    np.save(tmp_path / "y.npy", y)
    command = ["run", "--data", str(path), str(tmp_path / "v1.npy"), "--labels", str(tmp_path / "y.npy"), "--out",
               str(out), "--embedding", "anchor", "--n-landmarks", "60", "--scheduler", scheduler]
    assert main(command) == 0
    first = np.load(out / "labels.npy")
    before = path.stat()
    order = np.random.default_rng(1).permutation(len(y))
    np.save(path, views[0][order])  # the same size, other rows
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    capsys.readouterr()
    assert main(command) == 0
    err = capsys.readouterr().err
    assert "resuming" not in err and (f"replacing the previous run's store {out / 'views.zarr'} (made from other "
                                      "input)") in err, err
    assert not np.array_equal(np.load(out / "labels.npy"), first)
    assert main(command) == 0  # unchanged since: resumed
    assert f"resuming: {out / 'views.zarr'} holds this input (finished stages: landmarks" in capsys.readouterr().err


def test_a_full_disk_while_the_results_are_written_is_one_line_and_leaves_no_earlier_result(tmp_path, scheduler,
                                                                                          capsys, monkeypatch):
    """A full disk (or a kill) while a rerun wrote its results left its new labels beside the earlier run's report,
    and the disk's error was a bare `[Errno 28] No space left on device`, exit 2, saying neither what was kept nor how
    to go on. Now: no file of the earlier run is left, and one line says to free space and run the command again."""
    import errno
    from pathlib import Path

    views, y = _blobs()
    np.savez(tmp_path / "blobs.npz", view0=views[0], view1=views[1], y=y)
    out = tmp_path / "out"
    run = ["run", "--data", str(tmp_path / "blobs.npz"), "--out", str(out), "--scheduler", scheduler, "--quiet"]
    assert main(run) == 0
    capsys.readouterr()
    real = Path.replace

    def full(self, target):
        if Path(target).name == "labels.npy":  # the report's files are in place
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, target)

    monkeypatch.setattr(Path, "replace", full)
    assert main([*run, "--n-clusters", "4"]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # not the stage lines
    assert len(err) == 1 and err[0].startswith(f"onmsc-dask: error: no space left on the device of {out} (writing "
                                               f"the run); {out / 'views.zarr'} ")
    assert err[0].endswith("is kept (no stage finished); free space, then run the same command again to reuse it")
    assert sorted(p.name for p in out.iterdir()) == ["convergence.png", "report.html", "report.json", "views.zarr"]
    assert len(json.loads((out / "report.json").read_text())["cluster_sizes"]) == 4
    monkeypatch.setattr(Path, "replace", real)
    assert main([*run, "--n-clusters", "4"]) == 0
    assert len(np.unique(np.load(out / "labels.npy"))) == 4


def test_a_wrong_image_shape_is_refused_before_the_fit(tmp_path, capsys):
    """A store's metadata image_shape (the report's sample images) of 9 x 9 pixels over 64 features, or of a view the
    store lacks, was accepted by create, and a run fitted it, then failed while writing the report: a broadcast error
    or an IndexError traceback, and no labels.npy, labels.csv or report (found by a trial). create and update_metadata
    refuse it; a store written with it anyway (zarr) ends the run at once, in one line, nothing written."""
    views = [np.random.default_rng(0).normal(size=(60, 64)), np.random.default_rng(1).normal(size=(60, 3))]
    for info, said in (({"view": 0, "shape": [9, 9]}, r"9 x 9 pixels, but view 0 \('view0'\) has 64 features"),
                       ({"view": 5, "shape": [8, 8]}, r"no view 5 \(the store has 2\)"),
                       ({"view": 0, "shape": "8x8"}, r"expected \{'view': p, 'shape': \[height, width\]\}")):
        with pytest.raises(ValueError, match=f"^metadata image_shape .*: {said}"):
            MultiViewStore.create(tmp_path / "s.zarr", views, metadata={"image_shape": info})
    store = MultiViewStore.create(tmp_path / "s.zarr", views, metadata={"image_shape": {"view": 0, "shape": [8, 8]}})
    assert store.image_view() == (0, (8, 8))
    floats = MultiViewStore.create(tmp_path / "f.zarr", views, metadata={"image_shape": {"view": 0, "shape": [8.0, 8.0]}})
    assert floats.image_view() == (0, (8, 8))  # as report.py's int() read them before the check
    with pytest.raises(ValueError, match="no view 5"):
        store.update_metadata(image_shape={"view": 5, "shape": [8, 8]})
    zarr.open_group(tmp_path / "s.zarr", mode="r+").attrs["metadata"] = {"image_shape": {"view": 0, "shape": [9, 9]}}
    code = main(["run", "--data", str(tmp_path / "s.zarr"), "--n-clusters", "2", "--out", str(tmp_path / "out"),
                 "--quiet"])
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("onmsc-dask: error")]
    assert code == 2 and "Traceback" not in err and len(said) == 1, err
    assert said[0] == (f"onmsc-dask: error: store {tmp_path / 's.zarr'}: metadata image_shape {{'view': 0, 'shape': [9, "
                       "9]}: 9 x 9 pixels, but view 0 ('view0') has 64 features; correct it with "
                       "update_metadata(image_shape=...), or image_shape=None for no sample images"), said
    assert not (tmp_path / "out").exists()
    MultiViewStore(tmp_path / "s.zarr").update_metadata(image_shape=None)
    assert MultiViewStore(tmp_path / "s.zarr").image_view() is None
