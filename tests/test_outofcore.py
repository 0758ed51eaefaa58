"""Out-of-core anchor pipeline: parity with the in-memory estimator, real clusters, resume, MNIST script."""
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits

from clusters import Cluster

from onmsc_dask import outofcore
from onmsc_dask.api import ONMSC
from onmsc_dask.outofcore import fit_store
from onmsc_dask.spectral import anchor_factor_pieces, anchor_factor_rows, anchor_column_sums
from onmsc_dask.store import MultiViewStore
from shared_data import shared_path

ROOT = Path(__file__).resolve().parents[1]
PARAMS = dict(n_landmarks=60, random_state=0, n_init=3)


def _views(n: int = 600) -> tuple[list[np.ndarray], np.ndarray]:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], X[:n] @ rng.standard_normal((64, 16)), np.sqrt(X[:n])], y[:n]


@pytest.fixture
def store(tmp_path):
    views, y = _views()
    return MultiViewStore.create(tmp_path / "digits.zarr", views, y, chunk_rows=128)


def _projection(H: np.ndarray) -> np.ndarray:
    return H @ H.T


def test_factor_split_by_rows_is_the_whole_factor():
    rng = np.random.default_rng(1)
    Z = sp.random(300, 40, density=0.08, random_state=rng, format="csr") + sp.eye(300, 40, format="csr")
    pieces = anchor_factor_pieces(anchor_column_sums(Z))
    C = np.vstack([anchor_factor_rows(Z[s:s + 70], pieces) for s in range(0, 300, 70)])
    B = Z.toarray() / np.sqrt(np.asarray(Z.sum(axis=0)).ravel())  # Z Lambda^-1/2, A = B B^T
    D = (B @ B.sum(axis=0))[:, None]  # A 1; rows of Z with no landmark have degree 0 and a zero row in C
    np.testing.assert_allclose(C, np.divide(B, np.sqrt(D), out=np.zeros_like(B), where=D > 0), atol=1e-12)  # D^-1/2 B


@pytest.mark.parametrize("method, z_block_rows", [("gram", None), ("tsqr", None), ("gram", 128)])
def test_equals_in_memory_anchor(store, method, z_block_rows, monkeypatch):
    """fit_store equals the in-memory fit (whose 600 rows are one block of Z), also with the "gram" embeddings'
    Z in blocks of z_block_rows rows."""
    views, _ = _views()
    est = ONMSC(10, embedding="anchor", n_landmarks=60, n_init=3, keep_intermediate=True,
                random_state=0).fit(views)
    if z_block_rows:
        monkeypatch.setattr(outofcore, "Z_BLOCK_ROWS", z_block_rows)
    res = fit_store(store, 10, method=method, **PARAMS)
    np.testing.assert_allclose(res.view_embeddings, est.view_embeddings_, atol=1e-8)  # same seeds and signs
    np.testing.assert_allclose(res.view_eigenvalues, est.view_eigenvalues_, atol=1e-8)  # from the m x m problem
    np.testing.assert_allclose(res.average_embedding, est.average_embedding_, atol=1e-8)
    np.testing.assert_allclose(res.view_weights, est.view_weights_, atol=1e-8)
    np.testing.assert_array_equal(res.labels, est.labels_)  # refined on the same Z
    np.testing.assert_allclose(res.refinement_objective, est.refinement_objective_, rtol=1e-10)
    assert len(res.refinement_objective) > 1  # the labels compared were moved by the refinement
    assert res.metrics == est.metric_
    H = est.view_embeddings_  # an anchor graph's orders share one n x width H per view (no copy per order)
    assert H.shape[1] == 2 and np.shares_memory(H[:, 0], H[:, 1]) and np.array_equal(H[:, 0], H[:, 1])


def test_a_float32_store_gives_the_in_memory_labels(tmp_path):
    """A float32 store is read as float32 out of core and as float64 by ONMSC.fit(store): the same labels."""
    views, y = _views()
    store = MultiViewStore.create(tmp_path / "f32.zarr", [v.astype(np.float32) for v in views], y, chunk_rows=128)
    est = ONMSC(10, embedding="anchor", n_landmarks=60, n_init=3, random_state=0).fit(store)
    res = fit_store(store, 10, **PARAMS)
    np.testing.assert_allclose(res.embedding, est.embedding_, atol=1e-6)
    np.testing.assert_array_equal(res.labels, est.labels_)


def test_n_components_equals_in_memory_and_changes_the_embeddings_stage(store):
    """More eigenvectors than clusters: the same H_p, F, H* (n x 14) and labels as in memory; the embeddings stage
    is recomputed (its parameters include the width), the landmarks and anchor graphs are resumed."""
    views, _ = _views()
    fit_store(store, 10, **PARAMS)
    est = ONMSC(10, embedding="anchor", n_components=14, n_landmarks=60, n_init=3, keep_intermediate=True,
                random_state=0).fit(views)
    res = fit_store(store, 10, n_components=14, **PARAMS)
    assert res.computed_stages == ["embeddings", "fusion", "labels"]
    assert res.view_embeddings.shape[-1] == 14 and res.embedding.shape == (600, 14)
    np.testing.assert_allclose(res.view_embeddings, est.view_embeddings_, atol=1e-8)
    np.testing.assert_allclose(res.embedding, est.embedding_, atol=1e-8)
    np.testing.assert_allclose(res.target, est.fusion_target_, atol=1e-8)  # the labels' read-out at width > k
    np.testing.assert_array_equal(res.labels, est.labels_)
    assert set(res.labels) == set(range(10)) and res.parameters["lambda2"] == 28.0  # n_components * O
    with pytest.raises(ValueError, match="n_landmarks=60 must be larger than n_components=60"):
        fit_store(store, 10, n_components=60, **PARAMS)


def test_n_components_holds_more_anchor_graph_pieces_than_clusters(tmp_path):
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(4), 50)
    X = rng.normal(size=(200, 2)) + 1000.0 * y[:, None]
    st = MultiViewStore.create(tmp_path / "pieces.zarr", [X, X[:, ::-1] * 2.0], y, chunk_rows=64)
    with pytest.raises(ValueError, match="falls apart into 4 disconnected pieces, more than n_clusters=3"):
        fit_store(st, 3, n_landmarks=20, random_state=0)
    with pytest.warns(UserWarning, match="its graph has 4 disconnected pieces"):
        res = fit_store(st, 3, n_landmarks=20, n_components=4, random_state=0)
    assert len(set(res.labels)) == 3 and all(len(set(res.labels[y == c])) == 1 for c in range(4))


def test_landmark_tasks_of_wider_views_come_first(store, monkeypatch):
    """The landmark stage's tasks (chunk scans and k-means) of each view carry its width as their priority, so the
    widest view's k-means, the stage's longest task, starts first."""
    import onmsc_dask.outofcore as outofcore

    seen = {}

    def capture(client, view_metrics, landmarks):
        seen["landmarks"] = landmarks
        raise RuntimeError("captured")

    monkeypatch.setattr(outofcore, "_compute", lambda client, *objs: capture(client, *objs)
                        if len(objs) == 2 else outofcore.dask.compute(*objs))
    with pytest.raises(RuntimeError, match="captured"):
        fit_store(store, 10, **PARAMS)
    for p, width in enumerate((64, 16, 64)):  # the views of _views
        priorities = {key: value(key) if callable(value) else value
                      for layer in seen["landmarks"][p].__dask_graph__().layers.values()
                      for value in [layer.annotations["priority"]] for key in layer}
        assert set(priorities.values()) == {width}
        assert any(str(key).startswith("_chunk_scan") for key in priorities)


def test_store_given_by_path(store):
    """A str or Path works like the MultiViewStore (it raised AttributeError); the second run resumes the first's
    stages."""
    first = fit_store(str(store.path), 10, **PARAMS)
    again = fit_store(store.path, 10, **PARAMS)
    np.testing.assert_array_equal(again.labels, first.labels)
    assert again.computed_stages == []


def test_noise_view_left_out_out_of_core_as_in_memory(tmp_path):
    views, y = _views()
    views = views + [np.random.default_rng(0).uniform(size=(len(y), 12))]
    store = MultiViewStore.create(tmp_path / "noisy.zarr", views, y, chunk_rows=128)
    with pytest.warns(UserWarning, match="view 3 .*: shares no cluster structure"):
        res = fit_store(store, 10, **PARAMS)
    with pytest.warns(UserWarning, match="view 3: shares no cluster structure"):
        est = ONMSC(10, embedding="anchor", n_landmarks=60, n_init=3, keep_intermediate=True,
                    random_state=0).fit(views)
    assert res.related_views.tolist() == est.related_views_.tolist() == [True, True, True, False]
    np.testing.assert_allclose(_projection(res.average_embedding), _projection(est.average_embedding_), atol=1e-8)
    np.testing.assert_allclose(res.view_weights, est.view_weights_, atol=1e-8)
    np.testing.assert_array_equal(res.labels, est.labels_)
    assert fit_store(store, 10, **PARAMS).computed_stages == []  # the mask is a stored result too


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(lambda1="x"), ValueError, r"lambda1 must be a number or one of \['auto', 'select'\]"),
    (dict(lambda2=-2.0), ValueError, "lambda2 must be finite and > 0"),
    (dict(order=0), ValueError, "order must be a positive integer"),
    (dict(metric=["cosine"]), ValueError, "metric lists 1 entries for 3 views"),
    (dict(n_landmarks=10), ValueError, "n_landmarks=10 must be larger than n_clusters=10"),
    (dict(n_nearest_landmarks=61), ValueError, "n_nearest_landmarks=61 must satisfy"),
    (dict(random_state=np.random.RandomState(0)), TypeError, "random_state must be"),
    (dict(max_iter=0), ValueError, "max_iter must be a positive integer"),
    (dict(n_init=1.5), ValueError, "n_init must be a positive integer"),
    (dict(landmark_sample=-1), ValueError, "landmark_sample must be a positive integer"),
    # a string tol failed after three stages were written, a negative or NaN one ran every iteration
    (dict(tol="x"), ValueError, "tol must be a number, got 'x'"),
    (dict(tol=float("nan")), ValueError, "tol must be finite and >= 0, got nan"),
    (dict(metric=None), ValueError, "metric must be 'auto' or one of"),
    (dict(metric="cityblock"), ValueError, "metric must be 'auto' or one of .*got 'cityblock'"),
    (dict(refine="yes"), ValueError, "refine must be 'auto', True or False, got 'yes'"),
    (dict(drop_unrelated_views=0), ValueError, "drop_unrelated_views must be True or False, got 0"),
])
def test_fit_store_checks_parameters_before_any_stage(store, kwargs, error, match):
    with pytest.raises(error, match=match):
        fit_store(store, 10, **{**PARAMS, **kwargs})
    assert store.stages() == {}


def test_fit_store_refuses_views_in_memory():
    with pytest.raises(TypeError, match="fit_store reads a MultiViewStore or the path of one, got list"):
        fit_store([np.eye(20), np.eye(20)], 2)


def test_fit_store_accepts_auto_lambdas_and_a_metric_tuple(store):
    res = fit_store(store, 10, lambda1="auto", lambda2="auto", metric=("auto", "euclidean", "auto"), **PARAMS)
    assert res.parameters["lambda1"] == 1.0 and res.parameters["lambda2"] == 20.0 and res.metrics[1] == "euclidean"


def test_resume_skips_completed_and_recomputes_affected(store):
    first = fit_store(store, 10, **PARAMS)
    assert first.computed_stages == ["landmarks", "anchor_graph", "embeddings", "fusion", "labels"]
    again = fit_store(store, 10, **PARAMS)
    assert again.computed_stages == []
    np.testing.assert_array_equal(again.labels, first.labels)
    landmarks = store.read_result("landmarks", "L0")
    changed = fit_store(store, 8, **PARAMS)
    assert changed.computed_stages == ["embeddings", "fusion", "labels"]
    assert len(np.unique(changed.labels)) == 8
    np.testing.assert_array_equal(store.read_result("landmarks", "L0"), landmarks)
    assert fit_store(store, 8, **{**PARAMS, "n_init": 5}).computed_stages == ["labels"]
    plain = fit_store(store, 8, **{**PARAMS, "n_init": 5, "refine": False})
    assert plain.computed_stages == ["labels"] and plain.refinement_objective.size == 0
    refined = fit_store(store, 8, **{**PARAMS, "n_init": 5})
    trace = refined.refinement_objective
    assert refined.computed_stages == ["labels"] and len(trace) > 1 and np.all(np.diff(trace) > 0)
    assert np.sum(refined.labels != plain.labels) > 0
    assert fit_store(store, 8, **{**PARAMS, "n_init": 5}).computed_stages == []
    params = store.stages()["embeddings"]  # an interrupted rewrite: the embeddings stage is incomplete again
    store.write_result("embeddings", "F", store.read_result("embeddings", "F"), params)
    assert fit_store(store, 8, **{**PARAMS, "n_init": 5}).computed_stages == ["embeddings", "fusion", "labels"]


def test_embeddings_stage_stores_one_h_per_view_and_resumes_it_shared_by_the_orders(store):
    """An anchor graph's orders share one H per view: the embeddings stage stores it once per view (not once per
    order), and a resumed fit's view_embeddings are every order a view of it, equal to the computed ones."""
    first = fit_store(store, 10, order=3, **PARAMS)
    assert store.read_result("embeddings", "H").shape == (3, 1, 600, 10)
    again = fit_store(store, 10, order=3, **PARAMS)
    H = again.view_embeddings
    assert again.computed_stages == [] and H.shape == (3, 3, 600, 10)
    assert np.shares_memory(H[:, 0], H[:, 2])
    np.testing.assert_array_equal(H, first.view_embeddings)
    np.testing.assert_array_equal(again.labels, first.labels)


def test_real_cluster_matches_local_cluster(store, tmp_path):
    from distributed import Client, LocalCluster, get_task_stream

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, processes=False) as cluster, \
            Client(cluster) as client:
        local = fit_store(store, 10, client=client, **PARAMS).labels
    clean = MultiViewStore.create(tmp_path / "again.zarr", *_views(), chunk_rows=128)
    real = Cluster(tmp_path, 2, nanny=False)
    try:
        with Client(real.address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
            with get_task_stream(client) as stream:
                remote = fit_store(clean, 10, client=client, **PARAMS)
            workers = {ts for ts in client.run(os.getpid).values()}
            addresses = set(client.scheduler_info()["workers"])
        assert len(workers) == 2 and os.getpid() not in workers
        # the chunk tasks of every stage ran on the two worker processes, not in this one
        ran = {(t["key"][0] if isinstance(t["key"], tuple) else t["key"]).rsplit("-", 1)[0] for t in stream.data}
        assert {"_chunk_scan", "_anchor_block", "_z_rows", "anchor_scaled_gram"} <= ran, ran
        assert {t["worker"] for t in stream.data} == addresses
        np.testing.assert_array_equal(remote.labels, local)
    finally:
        real.stop()


def test_pipeline_script_on_mnist_t10k(tmp_path):
    mnist_t10k = shared_path("mnist-t10k")
    spec = importlib.util.spec_from_file_location("mnist60k", ROOT / "pipelines" / "mnist60k.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = module.main(["--data-dir", str(mnist_t10k), "--limit", "2000", "--out", str(tmp_path),
                          "--chunk-rows", "500", "--n-landmarks", "300", "--workers", "2"])
    assert report["n_samples"] == 2000 and report["view_dims"] == [784, 324, 144]
    assert report["scores"]["acc"] > 0.5
    for name in ("report.json", "report.html", "convergence.png", "labels.npy", "labels.csv"):
        assert (tmp_path / name).stat().st_size > 0


def test_sparse_count_view_equals_in_memory_anchor(tmp_path):
    """A stored CSR bag-of-words-like view is read chunk by chunk, gets the 'counts' metric from its chunk
    summaries like in memory, and gives the in-memory estimator's labels."""
    views, y = _views(400)
    rng = np.random.default_rng(3)
    counts = sp.csr_matrix(rng.poisson(0.04, size=(400, 300)) * (np.arange(400)[:, None] % 2 + 1)).astype(float)
    views = [views[0], counts]
    store = MultiViewStore.create(tmp_path / "sparse.zarr", views, y, chunk_rows=90)
    assert store.is_sparse(1)
    est = ONMSC(10, embedding="anchor", n_landmarks=60, n_init=3, random_state=0).fit(views)
    res = fit_store(store, 10, **PARAMS)
    assert res.metrics == est.metric_ == ["cosine", "counts"]
    np.testing.assert_array_equal(res.labels, est.labels_)


def test_landmark_sample_defaults_to_rows_per_landmark(store, monkeypatch):
    """Without landmark_sample, each view's landmark k-means samples LANDMARK_SAMPLE_PER_LANDMARK rows per landmark,
    at least LANDMARK_SAMPLE_MIN (recorded in the stage's parameters); a given landmark_sample is used as it is."""
    sizes = []
    sample = outofcore.landmark_rows
    monkeypatch.setattr(outofcore, "landmark_rows",
                        lambda n, m, size, seed: (sizes.append(size), sample(n, m, size, seed))[1])
    for minimum, expected in ((5000, 5000), (100, round(outofcore.LANDMARK_SAMPLE_PER_LANDMARK * 40))):
        monkeypatch.setattr(outofcore, "LANDMARK_SAMPLE_MIN", minimum)
        sizes.clear()
        fit_store(store, 10, n_landmarks=40, random_state=0, n_init=3)
        assert sizes == [expected] * 3 and store.stages()["landmarks"]["landmark_sample"] == expected
    sizes.clear()
    fit_store(store, 10, n_landmarks=40, landmark_sample=100, random_state=0, n_init=3)
    assert sizes == [100] * 3 and store.stages()["landmarks"]["landmark_sample"] == 100
