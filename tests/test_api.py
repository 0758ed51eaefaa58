"""End-to-end tests of the ONMSC estimator, on a real multi-process Dask cluster and without one."""
import re
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from distributed import Client, LocalCluster, get_task_stream
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from shared_data import shared_path

from onmsc_dask import api
from onmsc_dask.api import ONMSC
from onmsc_dask.baselines import AverageGraphSC, LinearCombination, SingleBestView
from onmsc_dask.assign import assign_labels
from fusion_reference import eigenvalue_scaled
from onmsc_dask.fusion import late_fusion, polar
from onmsc_dask.metrics import accuracy

#: measured ACC on these views with the defaults (exact solver): 0.825 (full digits); bar a few points lower
ACC_BAR = 0.78


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def _digit_views(X):
    """Top pixel half, bottom pixel half, row/column ink profiles (all non-negative -> cosine kNN)."""
    img = X.reshape(-1, 8, 8)
    return [img[:, :4].reshape(len(X), -1), img[:, 4:].reshape(len(X), -1),
            np.hstack([img.sum(axis=1), img.sum(axis=2)])]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return _digit_views(X), y


@pytest.fixture(scope="module")
def small_digits():
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).choice(len(y), 240, replace=False)
    return _digit_views(X[idx]), y[idx]


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as c:
        yield c


def _on_cluster(client, fn):
    """Run fn() with the client as the active scheduler; return its result and the names of the tasks the
    workers ran."""
    with dask.config.set(scheduler=client), get_task_stream(client) as ts:
        out = fn()
    return out, {t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in ts.data}


def test_fit_on_local_cluster_accuracy_and_attributes(client, digits):
    views, y = digits
    model, keys = _on_cluster(client, lambda: ONMSC(10, keep_intermediate=True, random_state=0).fit(views))
    assert any("_embed_view" in str(k) for k in keys), f"per-view tasks did not run on the workers: {keys}"
    assert len(client.scheduler_info()["workers"]) == 2
    acc = accuracy(y, model.labels_)
    assert acc >= ACC_BAR, f"ACC {acc:.3f} below {ACC_BAR}"
    n, k = len(y), 10
    assert model.labels_.shape == (n,) and set(np.unique(model.labels_)) == set(range(k))
    np.testing.assert_allclose(model.embedding_.T @ model.embedding_, np.eye(k), atol=1e-8)
    mu = model.view_weights_
    assert mu.shape == (3,) and (mu >= 0).all() and mu.sum() == pytest.approx(1.0)
    assert model.view_embeddings_.shape == (3, model.order, n, k)
    assert model.average_embedding_.shape == (n, k)
    assert model.metric_ == ["cosine"] * 3 and model.embedding_solver_ == "exact"
    obj = model.objective_
    assert len(obj) == model.n_iter_ >= 1
    assert (np.diff(obj) >= -1e-10 * np.abs(obj).max()).all(), "objective_ decreased"
    assert set(model.timings_) >= {"validate", "graphs_and_embeddings", "fusion", "kmeans"}


def test_same_seed_same_labels_on_cluster_and_without(client, digits):
    views, _ = digits
    first, _ = _on_cluster(client, lambda: ONMSC(10, random_state=3).fit(views))
    second, _ = _on_cluster(client, lambda: ONMSC(10, random_state=3).fit(views))
    np.testing.assert_array_equal(first.labels_, second.labels_)
    np.testing.assert_array_equal(first.view_weights_, second.view_weights_)
    with dask.config.set(scheduler="sync"), get_task_stream(client) as ts:
        local = ONMSC(10, random_state=3).fit(views)
    assert not ts.data, "the synchronous run must not use the cluster"
    np.testing.assert_array_equal(local.labels_, first.labels_)
    np.testing.assert_allclose(local.embedding_, first.embedding_, atol=1e-8)
    with dask.config.set(scheduler="threads"):
        threaded = ONMSC(10, random_state=3).fit(views)
    np.testing.assert_array_equal(threaded.labels_, first.labels_)


def test_fit_predict_equals_fit_labels(small_digits):
    views, _ = small_digits
    with dask.config.set(scheduler="sync"):
        labels = ONMSC(10, random_state=1).fit_predict(views)
        model = ONMSC(10, random_state=1).fit(views)
    np.testing.assert_array_equal(labels, model.labels_)


def test_clone_and_get_params():
    est = ONMSC(5, n_neighbors=12, order=3, lambda1=0.5, lambda2=7.0, embedding="anchor", n_components=8,
                metric=["cosine"], n_landmarks=50, n_nearest_landmarks=4, n_init=3, max_iter=20, tol=1e-6,
                random_state=42)
    params = est.get_params()
    assert params == {"n_clusters": 5, "n_neighbors": 12, "order": 3, "lambda1": 0.5, "lambda2": 7.0,
                      "embedding": "anchor", "n_components": 8, "metric": ["cosine"], "n_landmarks": 50,
                      "n_nearest_landmarks": 4,
                      "n_init": 3, "max_iter": 20, "tol": 1e-6, "fusion": "late", "alpha": "auto",
                      "eigenvalue_scaling": True, "drop_unrelated_views": True, "consensus_graph": "auto",
                      "refine": "auto", "keep_intermediate": False, "cache": None, "landmark_init": "random",
                      "landmark_sample": None, "anchor_method": "gram", "random_state": 42}
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    twin.set_params(order=1, n_clusters=3)
    assert twin.order == 1 and twin.n_clusters == 3 and est.order == 3
    assert not hasattr(clone(ONMSC(3).fit([np.random.default_rng(0).normal(size=(40, 3))] * 2)), "labels_")
    assert "ONMSC" in repr(est)


@pytest.mark.parametrize("solver, extra", [("exact", {}), ("anchor", {"n_landmarks": 60}),
                                           ("nystrom", {"n_landmarks": 240})])
def test_each_solver_runs(client, small_digits, solver, extra):
    views, y = small_digits
    model, _ = _on_cluster(client, lambda: ONMSC(10, embedding=solver, random_state=0, **extra).fit(views))
    assert model.embedding_solver_ == solver
    assert model.labels_.shape == y.shape
    np.testing.assert_allclose(model.embedding_.T @ model.embedding_, np.eye(10), atol=1e-8)
    obj = model.objective_
    assert np.isfinite(obj).all() and (np.diff(obj) >= -1e-10 * np.abs(obj).max()).all()
    assert accuracy(y, model.labels_) > 0.5  # far above chance (0.1) for every solver


def test_order_one_and_explicit_lambdas(small_digits):
    views, y = small_digits
    with dask.config.set(scheduler="sync"):
        model = ONMSC(10, order=1, lambda1=0.5, lambda2=3.0, keep_intermediate=True, random_state=0).fit(views)
    assert model.lambda1_ == 0.5 and model.lambda2_ == 3.0
    assert model.view_embeddings_.shape[1] == 1
    assert (np.diff(model.objective_) >= -1e-10 * np.abs(model.objective_).max()).all()


# --------------------------------------------------------------------------- errors


@pytest.fixture
def two_views():
    rng = np.random.default_rng(0)
    return [rng.normal(size=(50, 4)), rng.random((50, 6))]


def test_nan_view_error_names_the_view(two_views):
    views = [v.copy() for v in two_views]
    views[1][7, 2] = np.nan
    with pytest.raises(ValueError, match=r"view 1.*NaN"):
        ONMSC(3).fit(views)


def test_nan_in_sparse_view_error_names_the_view_and_row(two_views):
    S = sp.random(50, 8, density=0.3, format="csr", random_state=0)
    S.data[S.indptr[12]] = np.nan  # first stored value of row 12
    with pytest.raises(ValueError, match=r"view 2.*NaN.*\[12\]"):
        ONMSC(3).fit(two_views + [S])


def test_row_mismatch_error(two_views):
    with pytest.raises(ValueError, match=r"view 1.*49 rows.*50"):
        ONMSC(3).fit([two_views[0], two_views[1][:49]])


@pytest.mark.parametrize("n_clusters", [50, 51, 1])
def test_bad_n_clusters(two_views, n_clusters):
    with pytest.raises(ValueError, match="n_clusters"):
        ONMSC(n_clusters).fit(two_views)


@pytest.mark.parametrize("n_neighbors", [50, 60])
def test_n_neighbors_too_large(two_views, n_neighbors):
    with pytest.raises(ValueError, match="n_neighbors"):
        ONMSC(3, n_neighbors=n_neighbors).fit(two_views)


def test_n_neighbors_zero_rejected(two_views):
    """n_neighbors=0 is invalid (1 <= n_neighbors < n); it must not silently fall back to the default."""
    with pytest.raises(ValueError, match="n_neighbors"):
        ONMSC(3, n_neighbors=0).fit(two_views)


def _left_out_fit(views, k=3, match=None, **kwargs):
    """ONMSC fit of ``views``, checking the warning ``match`` when given."""
    if match is None:
        return ONMSC(k, random_state=0, **kwargs).fit(views)
    with pytest.warns(UserWarning, match=match):
        return ONMSC(k, random_state=0, **kwargs).fit(views)


@pytest.mark.parametrize("fusion", ["late", "early"])
def test_degenerate_views_are_left_out_with_a_warning(fusion):
    """A constant view, a view with fewer distinct rows than clusters and a view whose graph falls apart into more
    pieces than clusters are left out, each with a warning naming it; the fit on the other views is unchanged."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), [20, 15, 15])
    two_views = [rng.normal(size=(50, d)) + 2.5 * np.eye(3, d)[y] for d in (4, 6)]
    constant = np.full((50, 3), 2.5)
    two_rows = np.repeat([[0.0, 1.0], [1.0, 0.0]], 25, axis=0)
    groups = np.repeat(np.arange(10), 5)[:, None] * 100.0 + 0.01 * rng.standard_normal((50, 2))  # 10 pieces at N = 4
    reference = _left_out_fit(two_views, fusion=fusion, n_neighbors=4)
    for p, (view, match) in enumerate([(constant, "view 1.*is constant.*it is left out"),
                                       (two_rows, "view 1: only 2 distinct rows, fewer than n_clusters=3.*left out"),
                                       (groups, "view 2: its graph falls apart into 10 disconnected pieces.*left out")]):
        views = [two_views[0], view, two_views[1]] if p < 2 else [two_views[0], two_views[1], view]
        if fusion == "early" and p == 2:  # early fusion checks the graphs itself: still an error
            with pytest.raises(ValueError, match="falls apart into 10"):
                _left_out_fit(views, fusion=fusion, n_neighbors=4)
            continue
        est = _left_out_fit(views, match=match, fusion=fusion, n_neighbors=4)
        left = 1 if p < 2 else 2
        assert accuracy(reference.labels_, est.labels_) == 1.0
        assert est.view_weights_[left] == 0 and not est.related_views_[left] and len(est.view_weights_) == 3
        if p < 2:  # the same seeds: the same fit
            np.testing.assert_allclose(np.delete(est.view_weights_, left), reference.view_weights_)
            assert list(est.left_out_views_) == [1] and est.metric_[1] is None
    assert not _left_out_fit(two_views, n_neighbors=4).left_out_views_.size  # nothing left out of good views


@pytest.mark.parametrize("embedding", ["exact", "anchor"])
def test_messages_after_a_view_is_left_out_name_the_others_by_their_input_position(embedding):
    """With view 0 left out, the warnings about views 1 and 2 said 'view 0 ('input view 1')' and 'view 1 ('input
    view 2')': two views called view 0 in one fit. Each view keeps its input position, named or not."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 40)
    views = [np.ones((120, 3))] + [10 * np.eye(3, d)[y] + rng.normal(size=(120, d)) for d in (4, 6)]
    for names, labels in [(None, ["view 0", "view 1", "view 2"]),
                          (["c", "a", "b"], ["view 0 ('c')", "view 1 ('a')", "view 2 ('b')"])]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ONMSC(3, embedding=embedding, n_landmarks=30, random_state=0).fit(views, view_names=names)
        said = [str(w.message) for w in caught]
        assert any(m.startswith(f"{labels[0]}: is constant") for m in said), said
        for label in labels[1:]:  # each well-separated view's graph falls into the 3 clusters
            assert any(m.startswith(f"{label}: its graph has 3 disconnected pieces") for m in said), said
        assert not any("input view" in m for m in said), said


def test_an_outlier_far_from_every_neighbour_is_named_not_labelled_silently():
    """A sample 100 standard deviations from every cluster in both views: its kernel weights vanish (about 1e-300),
    its row of H* is about 1e-12 and its label an arbitrary one, given without a word. The warning names it; the
    same views without it give no such warning."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(300, 5, centers=3, random_state=0)
    mix = np.random.default_rng(0).normal(size=(5, 7))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ONMSC(3, random_state=0).fit([X, X @ mix])
    assert not any("far from all" in str(w.message) for w in caught)
    X[4] = 100.0
    with pytest.warns(UserWarning, match=r"^1 sample\(s\) far from all their neighbours in every view \(rows \[4\]: "
                                         r"outliers whose rows of the fused embedding are about 0\) have arbitrary "
                                         r"labels"):
        model = ONMSC(3, random_state=0).fit([X, X @ mix])
    assert np.linalg.norm(model.embedding_[4]) < 1e-8 * np.median(np.linalg.norm(model.embedding_, axis=1))


def test_bad_views_stay_errors(two_views):
    """NaN and mismatched views are errors, not left out; so is a fit with no view left, or a single view whose
    graph falls apart."""
    nan = two_views[1].copy()
    nan[3, 0] = np.nan
    with pytest.raises(ValueError, match="view 1: contains NaN"):
        ONMSC(3).fit([two_views[0], nan, np.full((50, 3), 2.5)])
    with pytest.raises(ValueError, match="view 1: has 40 rows, expected 50"):
        ONMSC(3).fit([two_views[0], two_views[1][:40], np.full((50, 3), 2.5)])
    with pytest.raises(ValueError, match=r"^view 0: has 40 rows, expected 50 like view 1 "):  # the odd one out
        ONMSC(3).fit([two_views[0][:40], two_views[1], np.full((50, 3), 2.5)])
    with pytest.warns(UserWarning, match="is constant"), pytest.raises(ValueError, match="no view can separate 3"):
        ONMSC(3).fit([np.full((50, 3), 2.5), np.zeros((50, 2))])
    groups = np.repeat(np.arange(10), 5)[:, None] * 100.0 + 0.01 * np.random.default_rng(0).standard_normal((50, 2))
    with pytest.raises(ValueError, match="view 0: its graph falls apart into 10 disconnected pieces"):
        ONMSC(3, n_neighbors=4).fit([groups])


def test_other_input_errors(two_views):
    with pytest.raises(TypeError):
        ONMSC(3).fit(two_views[0])  # a single array instead of a list of views
    with pytest.raises(ValueError, match="order"):
        ONMSC(3, order=0).fit(two_views)
    with pytest.raises(ValueError, match="metric"):
        ONMSC(3, metric=["cosine"]).fit(two_views)
    with pytest.raises(ValueError):
        ONMSC(3, embedding="svd").fit(two_views)


@pytest.mark.parametrize("kwargs, match", [
    (dict(lambda1=-1.0), "lambda1 must be finite and >= 0"),
    (dict(lambda1=float("nan")), "lambda1 must be finite"),
    (dict(lambda1="big"), r"lambda1 must be a number or one of \['auto', 'select'\]"),
    (dict(lambda2=0.0), "lambda2 must be finite and > 0"),
    (dict(order=True), "order must be a positive integer"),
    (dict(embedding="anchor", n_landmarks=3), "n_landmarks=3 must be larger than n_clusters=3"),
    (dict(embedding="nystrom", n_landmarks=2), "n_landmarks=2 must be larger than n_clusters=3"),
    # 0 and 1 were said to be allowed by the type check (">= 0"), refused by the range check
    (dict(embedding="anchor", n_landmarks=20, n_nearest_landmarks=0), "n_nearest_landmarks must be an integer >= 2"),
    (dict(embedding="anchor", n_landmarks=20, n_nearest_landmarks=1), "n_nearest_landmarks must be an integer >= 2"),
    (dict(embedding="anchor", n_landmarks=20, n_nearest_landmarks=21), "n_nearest_landmarks=21 must satisfy"),
    # were truncated (2.5 -> 2, True -> 1), a raw TypeError ("7"), no iteration at all (max_iter=-3), KMeans' error
    (dict(n_neighbors=2.5), r"n_neighbors must be a positive integer, got 2\.5"),
    (dict(n_neighbors=True), "n_neighbors must be a positive integer, got True"),
    (dict(n_neighbors="7"), "n_neighbors must be a positive integer, got '7'"),
    (dict(max_iter=-3), "max_iter must be a positive integer, got -3"),
    (dict(n_init=0), "n_init must be a positive integer, got 0"),
    (dict(embedding="anchor", n_landmarks=20.5), r"n_landmarks must be a positive integer, got 20\.5"),
    (dict(embedding="anchor", n_landmarks=20, n_nearest_landmarks=2.0), "n_nearest_landmarks must be an integer >= 2"),
    # a TypeError after the graphs were built ("x"), every iteration run silently (-1), a TypeError (None)
    (dict(tol="x"), "tol must be a number, got 'x'"),
    (dict(tol=-1), "tol must be finite and >= 0, got -1"),
    (dict(metric=None),
     r"metric must be 'auto' or one of \('euclidean', 'standardized', 'cosine', 'counts'\).*got None"),
    (dict(metric=["cosine", 3]), "metric must be 'auto' or one of"),
    # early fusion used to ignore these silently
    (dict(fusion="early", embedding="anchor"), "embedding='anchor' applies to late fusion"),
    (dict(fusion="early", lambda1="select"), "lambda1, lambda2 and consensus_graph apply to late fusion; early"),
    (dict(fusion="early", lambda2=3.0), "lambda1, lambda2 and consensus_graph apply to late fusion"),
    (dict(fusion="early", consensus_graph="rank"), "consensus_graph apply to late fusion"),
    (dict(fusion="early", refine=True), "refine applies to late fusion; early fusion's labels are its k-means labels"),
    (dict(consensus_graph="median"), "consensus_graph must be 'auto', 'rank' or 'average', got 'median'"),
    (dict(refine="False"), "refine must be 'auto', True or False, got 'False'"),
    (dict(eigenvalue_scaling=1), "eigenvalue_scaling must be True or False, got 1"),
    (dict(drop_unrelated_views=None), "drop_unrelated_views must be True or False, got None"),
    (dict(consensus_graph="rank", embedding="anchor", n_landmarks=20), "consensus_graph='rank' needs kNN graphs"),
    # the anchor chain's own options, bad under another solver: ignored silently (a typo never told)
    (dict(embedding="exact", landmark_sample=0), "landmark_sample must be a positive integer, got 0"),
    (dict(embedding="nystrom", landmark_init="kmeans++"), "landmark_init must be one of"),
    (dict(anchor_method="qr"), r"anchor_method must be one of \('gram', 'tsqr'\), got 'qr'"),
])
def test_bad_parameters_named(two_views, kwargs, match):
    """Checked before any work: before, n_landmarks < k gave embeddings with fewer than k columns (ACC 0.65 on
    three separated blobs, no error) and lambda1=nan an 'SVD did not converge'."""
    with pytest.raises(ValueError, match=match):
        ONMSC(3, **kwargs).fit(two_views)


def test_a_refit_with_a_refused_parameter_keeps_nothing_of_the_earlier_fit(two_views):
    """The earlier fit's labels_ and model stayed, while get_params described the refused ones (found by a user
    trial; a bad view already cleared them, as the baselines do)."""
    model = ONMSC(3, n_init=2, random_state=0).fit(two_views)
    with pytest.raises(ValueError, match="order must be a positive integer"):
        model.set_params(order=0).fit(two_views)
    assert not [name for name in vars(model) if name.endswith("_")]


def test_nystrom_too_few_columns_names_the_view(two_views):
    """Order 1, 4 uniform columns of a sparse kNN graph: their block has fewer than k positive eigenvalues
    (spectral.nystrom_embedding), an error naming the view instead of an embedding with meaningless columns."""
    with pytest.raises(ValueError, match=r"view [01]: the 4 uniformly sampled columns of G\^\(1\) span only"):
        ONMSC(3, embedding="nystrom", n_landmarks=4, order=1, random_state=0).fit(two_views)


@pytest.mark.parametrize("embedding", ["exact", "anchor"])
def test_n_components_more_eigenvectors_than_clusters(small_digits, embedding):
    """n_components = 14 > k = 10: every H_p^(o), F and H* have 14 columns, lambda2 = 14 * O, and the labels are
    still 10 clusters; the "select" grid scales lambda2 with the width too."""
    views, y = small_digits
    kw = dict(embedding=embedding, n_landmarks=100) if embedding == "anchor" else dict(embedding=embedding)
    with dask.config.set(scheduler="sync"):
        est = ONMSC(10, n_components=14, refine=False, keep_intermediate=True, random_state=0, **kw).fit(views)
    n = len(y)
    assert est.view_embeddings_.shape[-2:] == (n, 14) and est.average_embedding_.shape == (n, 14)
    np.testing.assert_allclose(est.embedding_.T @ est.embedding_, np.eye(14), atol=1e-8)
    assert est.lambda2_ == 28.0 and set(est.labels_) == set(range(10))
    np.testing.assert_allclose(polar(est.fusion_target_), est.embedding_, atol=1e-8)  # H* = polar(T), Eq. 12
    labels, inertia = assign_labels(est.fusion_target_, 10, random_state=api.fit_seeds(0, 3)[-1])
    np.testing.assert_array_equal(est.labels_, labels)  # wider than k: k-means of T's rows, not of H*'s
    assert inertia == est.inertia_
    assert accuracy(y, est.labels_) > 0.7
    with dask.config.set(scheduler="sync"):
        sel = ONMSC(10, n_components=14, order=1, lambda1=1.0, lambda2="select", random_state=0).fit(views)
    assert sorted({c["lambda2"] for c in sel.selection_}) == [3.5, 7.0, 14.0, 28.0]


def _wide_blobs(n=1000):
    """Two views of 2 clusters with 500 samples each: the default width is 2k = 4."""
    rng = np.random.default_rng(0)
    y = np.arange(n) % 2
    return [rng.normal(size=(n, 3)) + 6 * y[:, None], rng.normal(size=(n, 4)) - 6 * y[:, None]], y


@pytest.mark.parametrize("n, width", [(999, 2), (1000, 4)])
def test_default_width_from_samples_per_cluster(n, width):
    """n_components=None: k below 500 samples per cluster, 2k from 500 on (validation.default_n_components); the
    labels are still k clusters, from H* when it is k wide (then T's read-out is not used)."""
    views, y = _wide_blobs(n)
    with dask.config.set(scheduler="sync"):
        est = ONMSC(2, random_state=0).fit(views)
    assert est.embedding_.shape == (n, width) and est.lambda2_ == 2 * width and accuracy(y, est.labels_) == 1.0
    if width == 2:
        labels, _ = assign_labels(est.embedding_, 2, random_state=api.fit_seeds(0, 2)[-1])
        np.testing.assert_array_equal(est.labels_, labels)


def test_default_wide_width_named_in_landmark_error():
    """n_landmarks at most 2k on data with 500 samples per cluster: the error names the width the user never set."""
    views, _ = _wide_blobs()
    with pytest.raises(ValueError, match=r"n_landmarks=4 must be larger than n_components=4 \(the embedding width: "
                                         r"given, or by default 2k from 500 samples per cluster\)"):
        ONMSC(2, embedding="anchor", n_landmarks=4).fit(views)


def test_select_scores_every_candidate_on_the_same_rows(monkeypatch):
    """Above SCORE_SAMPLE rows the "select" search scores a sample of them: the same sample for every candidate (each
    candidate used to draw its own, so a candidate could win on the rows it drew), and the same for the same seed."""
    from onmsc_dask import selection

    monkeypatch.setattr(selection, "SCORE_SAMPLE", 100)
    rng = np.random.default_rng(0)
    H = np.stack([[np.linalg.qr(rng.normal(size=(400, 3)))[0]] for _ in range(2)])
    F = np.linalg.qr(rng.normal(size=(400, 3)))[0]
    scored, real = [], selection.distortion
    monkeypatch.setattr(selection, "distortion", lambda X, k, seeds, rows: scored.append(rows) or real(X, k, seeds,
                                                                                                       rows))
    best, candidates = selection.select_fusion(H, F, 3, random_state=0)
    assert len(scored) == len(candidates) == 16 and len(scored[0]) == 100 == len(set(scored[0].tolist()))
    assert all(np.array_equal(rows, scored[0]) for rows in scored)
    again, _ = selection.select_fusion(H, F, 3, random_state=0)
    assert np.array_equal(scored[-1], scored[0]) and (again.lambda1, again.lambda2) == (best.lambda1, best.lambda2)


def test_wide_fits_score_their_read_out(monkeypatch):
    """At width > k the default-N refit and the "select" search score the matrix the labels come from (T), and
    early fusion's preliminary late fit stays k wide (its embeddings judge early fusion's k-wide graphs)."""
    views, _ = _wide_blobs()
    scored, early_inputs = [], []
    monkeypatch.setattr(api, "distortion", lambda X, k, rng, rows: scored.append(X) or 0.0)
    monkeypatch.setattr(api, "smallest_cluster_neighbors", lambda labels, k, N: N - 1)  # force the refit
    with dask.config.set(scheduler="sync"):
        est = ONMSC(2, random_state=0).fit(views)
    assert len(scored) == 2 and scored[0] is est.fusion_target_ and est.embedding_.shape[1] == 4
    from onmsc_dask import selection
    picked = []
    monkeypatch.setattr(selection, "distortion", lambda X, k, rng, rows: picked.append(X) or 0.0)
    with dask.config.set(scheduler="sync"):
        sel = ONMSC(2, order=1, lambda1=1.0, lambda2="select", n_neighbors=10, random_state=0).fit(views)
    assert len(picked) == len(sel.selection_) == 4 and all(X.shape == (1000, 4) for X in picked)
    assert not any(np.allclose(X.T @ X, np.eye(4)) for X in picked)  # T, not the orthonormal H*
    real = api.fit_early_fusion_graphs
    monkeypatch.setattr(api, "fit_early_fusion_graphs", lambda *a, **kw: early_inputs.append(kw["view_embeddings"]) or
                        real(*a, **kw))
    with dask.config.set(scheduler="sync"):
        ONMSC(2, fusion="early", random_state=0).fit(views)
    assert early_inputs[0].shape[-1] == 2


def test_n_components_holds_more_graph_pieces_than_clusters():
    """A view graph in 4 pieces with k = 3 is an error (its top-3 eigenvectors would be an arbitrary subset of the
    4 piece indicators), but 4 eigenvectors hold them all: a warning, and 3 clusters."""
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(4), 25)
    X = rng.normal(size=(100, 2)) + 1000.0 * y[:, None]
    views = [X, X[:, ::-1] * 2.0]
    with pytest.raises(ValueError, match="falls apart into 4 disconnected pieces, more than n_clusters=3"):
        ONMSC(3, n_neighbors=5, random_state=0).fit(views)
    with pytest.warns(UserWarning, match="its graph has 4 disconnected pieces"):
        est = ONMSC(3, n_neighbors=5, n_components=4, random_state=0).fit(views)
    assert len(set(est.labels_)) == 3
    assert all(len(set(est.labels_[y == c])) == 1 for c in range(4))  # each piece within one cluster


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_components=2), "n_components=2 must satisfy n_clusters=3 <= n_components < n_samples=50"),
    (dict(n_components=50), "n_components=50 must satisfy"),
    (dict(n_components=4.5), r"n_components must be a positive integer, got 4\.5"),
    (dict(n_components=6, embedding="anchor", n_landmarks=6), "n_landmarks=6 must be larger than n_components=6"),
    (dict(n_components=4, fusion="early"), "n_components applies to late fusion"),
])
def test_bad_n_components_named(two_views, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ONMSC(3, **kwargs).fit(two_views)


def test_random_state_must_be_a_seed(two_views):
    for generator in (np.random.RandomState(0), np.random.default_rng(0)):
        with pytest.raises(TypeError, match=r"random_state must be an int in \[0, 2\*\*32 - 1\] or None.*; draw a "
                                            r"seed from the generator, e\.g\. int\(rng\.integers\(2\*\*32\)\)"):
            ONMSC(3, random_state=generator).fit(two_views)
    with pytest.raises(ValueError, match=r"random_state must be an int in \[0, 2\*\*32 - 1\] or None.*-1"):
        ONMSC(3, random_state=-1).fit(two_views)


@pytest.mark.parametrize("make", [
    lambda s: ONMSC(3, random_state=s), lambda s: ONMSC(3, fusion="early", random_state=s),
    lambda s: AverageGraphSC(3, random_state=s), lambda s: SingleBestView(3, random_state=s),
    lambda s: LinearCombination(3, random_state=s)])
def test_the_same_seeds_everywhere(two_views, make):
    """2**32 - 1 works and 2**32 is refused by every estimator (early fusion and the baselines used to fail with
    scikit-learn's KMeans error for seeds late fusion accepted, and the baselines took a RandomState)."""
    assert make(2**32 - 1).fit(two_views).labels_.shape == (two_views[0].shape[0],)
    with pytest.raises(ValueError, match=r"random_state must be an int in \[0, 2\*\*32 - 1\].*4294967296"):
        make(2**32).fit(two_views)
    with pytest.raises(TypeError, match="random_state must be an int"):
        make(np.random.RandomState(0)).fit(two_views)


class _Table:
    """Stands in for a pandas DataFrame (not a dependency): iterating it yields column labels."""
    iloc = None

    def __iter__(self):
        return iter(["a", "b"])


@pytest.mark.parametrize("views, error, match", [
    ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], ValueError, "every entry is 1-D: a single table given as a list"),
    ({"a": np.ones((5, 2))}, TypeError, r"not a dict; pass list\(views.values\(\)\) \(and view_names=list\(views\) to fit"),
    (_Table(), TypeError, "not a _Table"),
])
def test_views_container_errors(views, error, match):
    with pytest.raises(error, match=match):
        ONMSC(2).fit(views)


def test_paths_and_a_zarr_group_as_views_say_how_to_read_them(tmp_path):
    """File paths in the view list were taken for "a single table given as a list of rows", a path beside an
    array for a view of strings, and a zarr Group (it iterates over its member names) for rows as well (found by a
    new-user helper); each now says what it is and how to read it."""
    import zarr

    X = np.ones((5, 2))
    read = r"read files with onmsc_dask\.io\.load_view_files\(paths\) or onmsc_dask\.io\.load\(path\), zarr arrays"
    with pytest.raises(TypeError, match=rf"^view 0: is a path \('A\.npy'\), not an array: {read}"):
        ONMSC(2).fit(["A.npy", "B.npy"])
    with pytest.raises(TypeError, match=rf"^view 1 \('b'\): is a path \(PosixPath\('.*B\.npy'\)\), not an array"):
        ONMSC(2).fit([X, tmp_path / "B.npy"], view_names=["a", "b"])
    group = zarr.open_group(tmp_path / "mine.zarr", mode="w")
    group.create_array("colour", data=X)
    with pytest.raises(TypeError, match=r"not a zarr Group; pass its arrays, \[dask\.array\.from_zarr\(group\[name\]\)"):
        ONMSC(2).fit(group)


@pytest.mark.parametrize("fmt", ["dense", "csr", "lil", "dok"])
def test_complex_view_rejected_and_any_sparse_format_accepted(two_views, fmt):
    def as_fmt(X):
        return X if fmt == "dense" else sp.csr_matrix(X).asformat(fmt)

    with pytest.raises(ValueError, match="view 1: has complex values"):
        ONMSC(3).fit([two_views[0], as_fmt(two_views[1] + 1j)])
    ref = ONMSC(3, random_state=0).fit(two_views).labels_
    np.testing.assert_array_equal(ONMSC(3, random_state=0).fit([two_views[0], as_fmt(two_views[1])]).labels_, ref)


# --------------------------------------------------------------------------- inputs untouched


def test_inputs_not_modified(small_digits):
    views, _ = small_digits
    dense = np.ascontiguousarray(views[0])
    ints = views[1].astype(np.uint8)
    sparse = sp.csr_matrix(views[2])
    sparse_csc = sp.csc_matrix(views[0][:, ::-1])
    inputs = [dense, ints, sparse, sparse_csc]
    copies = [x.copy() for x in inputs]
    ids = [id(x) for x in inputs]
    with dask.config.set(scheduler="sync"):
        model = ONMSC(10, random_state=0).fit(inputs)
    for before, after in zip(copies, inputs):
        assert type(before) is type(after)
        if sp.issparse(before):
            assert after.format == before.format and after.dtype == before.dtype
            for attr in ("data", "indices", "indptr"):
                np.testing.assert_array_equal(getattr(after, attr), getattr(before, attr))
        else:
            assert after.dtype == before.dtype and after.flags.c_contiguous == before.flags.c_contiguous
            np.testing.assert_array_equal(after, before)
    assert [id(x) for x in inputs] == ids, "the list of views must not be changed"
    assert model.labels_.shape == (dense.shape[0],)


def test_dask_array_view_matches_numpy(small_digits):
    views, _ = small_digits
    with dask.config.set(scheduler="sync"):
        ref = ONMSC(10, random_state=0).fit(views)
        lazy = ONMSC(10, random_state=0).fit([da.from_array(views[0], chunks=(60, -1))] + views[1:])
    np.testing.assert_array_equal(lazy.labels_, ref.labels_)


def test_lambda_select_records_candidates_and_ignores_labels(small_digits):
    """``lambda1="select"`` searches the grid by distortion; the chosen candidate has the least distortion, and
    labels passed to fit (scikit-learn's ``y``) change nothing."""
    views, y = small_digits
    est = ONMSC(10, lambda1="select", lambda2="select", random_state=0).fit(views)
    best = min(est.selection_, key=lambda c: c["distortion"])
    assert (est.order_, est.lambda1_, est.lambda2_) == (best["order"], best["lambda1"], best["lambda2"])
    assert len(est.selection_) == 2 * 4 * 4
    assert np.all(np.diff(est.objective_) >= -1e-9 * np.abs(est.objective_[1:]))
    with_labels = ONMSC(10, lambda1="select", lambda2="select", random_state=0).fit(views, y)
    assert with_labels.selection_ == est.selection_
    np.testing.assert_array_equal(with_labels.labels_, est.labels_)


def test_lambda1_select_with_auto_lambda2_uses_each_orders_rule(small_digits):
    """lambda2="auto" is k * o for each candidate order o (it was k * O for all, O times the rule at o = 1)."""
    views, _ = small_digits
    est = ONMSC(10, lambda1="select", random_state=0).fit(views)
    assert sorted({(c["order"], c["lambda2"]) for c in est.selection_}) == [(1, 10.0), (2, 20.0)]
    fixed = ONMSC(10, lambda1="select", lambda2=5.0, random_state=0).fit(views)
    assert {c["lambda2"] for c in fixed.selection_} == {5.0}


def test_constant_view_of_a_store_or_dask_array_is_left_out_with_a_warning(client, small_digits, tmp_path):
    """A constant view of a store or of dask arrays (found by the anchor chain's chunk scan on the workers, no view
    gathered on the client) is left out with the warning numpy input gives; the fit is the one without it, also
    when cached in the store."""
    from onmsc_dask.store import MultiViewStore

    views, _ = small_digits
    with_constant = [views[0], np.full((len(views[0]), 5), 2.5), views[2]]
    kw = dict(embedding="anchor", n_landmarks=60, random_state=0)
    with dask.config.set(scheduler=client):
        reference = ONMSC(10, **kw).fit([views[0], views[2]])
        store = MultiViewStore.create(tmp_path / "c.zarr", with_constant, view_names=["a", "flat", "c"], chunk_rows=60)
        lazy = [da.from_array(X, chunks=(60, -1)) for X in with_constant]
        named, unnamed = r"view 1 \('flat'\): is constant.*it is left out", r"view 1: is constant.*it is left out"
        for source, cache, match in [(store, None, named), (lazy, None, unnamed), (store, store, named),
                                     (with_constant, None, unnamed)]:
            with pytest.warns(UserWarning, match=match):
                model = ONMSC(10, cache=cache, **kw).fit(source)
            np.testing.assert_array_equal(model.labels_, reference.labels_)
            assert model.left_out_views_.tolist() == [1] and model.view_weights_[1] == 0 and model.metric_[1] is None
            assert np.mean(model.predict(with_constant) == model.labels_) > 0.9  # one view per input view
    assert store.read_result("landmarks", "L0").shape == reference.extension_.views[0].landmarks.shape


def test_cached_fit_with_a_constant_view_resumes_without_reading_the_views(small_digits, tmp_path, monkeypatch):
    """A refit of a store whose cached chain left a constant view out resumes every stage: no chunk is scanned again
    (the first fit's landmark scan found the view constant), the warning names the view again, and the labels are
    those of the first fit."""
    from onmsc_dask import outofcore
    from onmsc_dask.store import MultiViewStore

    views, _ = small_digits
    store = MultiViewStore.create(tmp_path / "c.zarr", [views[0], np.full((len(views[0]), 5), 2.5), views[2]],
                                  view_names=["a", "flat", "c"], chunk_rows=60)
    kw = dict(embedding="anchor", n_landmarks=60, cache=store, random_state=0)
    scans = []
    scan = outofcore._chunk_scan
    monkeypatch.setattr(outofcore, "_chunk_scan", lambda *a: scans.append(a[2]) or scan(*a))
    with dask.config.set(scheduler="sync"):
        with pytest.warns(UserWarning, match=r"view 1 \('flat'\): is constant.*it is left out"):
            first = ONMSC(10, **kw).fit(store)
        assert len(scans) == 4 * 3 + 4 * 2  # all views, then the chain on the two others
        scans.clear()
        with pytest.warns(UserWarning, match=r"view 1 \('flat'\): is constant.*it is left out"):
            again = ONMSC(10, **kw).fit(store)
    assert scans == [] and again.computed_stages_ == [] and again.left_out_views_.tolist() == [1]
    np.testing.assert_array_equal(again.labels_, first.labels_)
    np.testing.assert_array_equal(again.view_weights_, first.view_weights_)
    with dask.config.set(scheduler="sync"), pytest.warns(UserWarning, match=r"view 1 \('flat'\): is constant"):
        result = outofcore.fit_store(store, 10, n_landmarks=60, random_state=0)  # fit_store's names for the same
    assert result.left_out_views.tolist() == [1] and result.view_weights[1] == 0
    assert len(result.view_embeddings) == 2 and result.computed_stages == []
    np.testing.assert_array_equal(result.labels, first.labels_)


@pytest.mark.parametrize("fusion, embedding, stored", [("late", "exact", False), ("late", "anchor", False),
                                                      ("early", "auto", False), ("late", "exact", True),
                                                      ("late", "anchor", True)])
def test_a_metric_per_view_follows_its_view_when_one_is_left_out(small_digits, tmp_path, fusion, embedding, stored):
    """``metric`` lists one entry per input view: a view left out takes its entry with it, the others keep theirs
    (the fit is the one of the other views with their metrics), for numpy input and a store."""
    from onmsc_dask.store import MultiViewStore

    views, _ = small_digits
    kw = dict(fusion=fusion, embedding=embedding, n_landmarks=60, random_state=0)
    reference = ONMSC(10, metric=["euclidean", "cosine"], **kw).fit([views[0], views[2]])
    source = [views[0], np.full((len(views[0]), 5), 2.5), views[2]]
    if stored:
        source = MultiViewStore.create(tmp_path / "m.zarr", source, chunk_rows=60)
    with dask.config.set(scheduler="sync"), pytest.warns(UserWarning, match="view 1.*is constant.*it is left out"):
        model = ONMSC(10, metric=["euclidean", "counts", "cosine"], **kw).fit(source)
    assert model.metric_ == ["euclidean", None, "cosine"] and model.left_out_views_.tolist() == [1]
    np.testing.assert_array_equal(model.labels_, reference.labels_)
    with pytest.raises(ValueError, match="metric lists 2 entries for 3 views"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy input: the constant view's warning comes first
        ONMSC(10, metric=["euclidean", "cosine"], **kw).fit(source)


def test_fit_from_store_path_equals_in_memory(small_digits, tmp_path):
    from onmsc_dask.store import MultiViewStore

    views, y = small_digits
    MultiViewStore.create(tmp_path / "v.zarr", views, y)
    a = ONMSC(10, random_state=3).fit(views).labels_
    b = ONMSC(10, random_state=3).fit(str(tmp_path / "v.zarr")).labels_
    np.testing.assert_array_equal(a, b)


def test_early_fusion_objective_non_increasing(small_digits):
    views, y = small_digits
    est = ONMSC(10, fusion="early", random_state=0).fit(views)
    assert np.all(np.diff(est.objective_) <= 1e-9 * np.abs(est.objective_[:-1]))
    assert est.labels_.shape == (240,)


def test_refit_keeps_nothing_of_an_earlier_fit(small_digits):
    """A late-fusion estimator refitted with fusion="early" kept the late fit's lambda1_, view_embeddings_, ...
    (stale values that no longer described the fit)."""
    views, _ = small_digits
    est = ONMSC(10, random_state=0).fit(views)
    late_only = {"order_", "lambda1_", "lambda2_", "view_eigenvalues_", "fusion_target_", "extension_"}
    assert late_only <= set(vars(est))
    est.set_params(fusion="early").fit(views)
    assert not late_only & set(vars(est)) and hasattr(est, "alpha_")
    est.set_params(fusion="late").fit(views)
    assert late_only <= set(vars(est)) and not hasattr(est, "alpha_")


def test_failed_fit_leaves_no_fitted_attributes(small_digits, two_views, monkeypatch):
    """A fit that raised had already set n_neighbors_, metric_, ... so check_is_fitted passed on an estimator
    without labels; a failed refit kept that partial state too."""
    views, _ = small_digits
    est = ONMSC(10, random_state=0).fit(views)
    bad = [views[0].copy(), views[1].copy()]
    bad[1][3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    est = ONMSC(3, random_state=0)  # an error after graphs, embeddings and fusion have set their attributes
    monkeypatch.setattr(api, "assign_labels", lambda *a, **k: (_ for _ in ()).throw(MemoryError("k-means")))
    with pytest.raises(MemoryError):
        est.fit(two_views)
    assert not [a for a in vars(est) if a.endswith("_")]


def test_eigenvalue_scaling_fuses_the_rank_k_factors(small_digits):
    """Default: late fusion of H_p^(o) Lambda^1/2 (view_eigenvalues_ = the Rayleigh quotients, <= 1);
    eigenvalue_scaling=False fuses the bare eigenvectors, the paper's form."""
    views, _ = small_digits
    for scaling in (True, False):
        m = ONMSC(10, eigenvalue_scaling=scaling, keep_intermediate=True, random_state=0).fit(views)
        lam = m.view_eigenvalues_
        assert lam.shape == (3, 2, 10) and np.all(lam <= 1 + 1e-9)
        np.testing.assert_allclose(lam[:, 1], lam[:, 1].clip(0), atol=1e-9)  # order 2: eigenvalues of a square
        H = eigenvalue_scaled(m.view_embeddings_, lam) if scaling else m.view_embeddings_
        ref = late_fusion(H, m.average_embedding_, m.lambda1_, m.lambda2_)
        np.testing.assert_allclose(m.embedding_, ref.embedding, atol=1e-10)


@pytest.mark.parametrize("fusion", ["late", "early"])
def test_noise_view_is_left_out_with_a_warning(small_digits, fusion):
    """A view of pure noise shares nothing with the others: without the rule the diversity term gives it the
    largest weight (measured: 0.45-0.67 on the shared sets and digits, BBCSport ACC 0.978 -> 0.858 late, 0.796
    early); with it, its weight is 0 and the fit equals the one without the view up to the seeds."""
    views, y = small_digits
    noisy = views + [np.random.default_rng(0).normal(size=(len(y), 20))]
    with pytest.warns(UserWarning, match="view 3: shares no cluster structure"):
        est = ONMSC(10, fusion=fusion, random_state=0).fit(noisy)
    assert est.related_views_.tolist() == [True, True, True, False] and est.view_weights_[3] == 0.0
    base = ONMSC(10, fusion=fusion, random_state=0).fit(views)
    np.testing.assert_allclose(est.view_weights_[:3], base.view_weights_, atol=1e-6)
    assert accuracy(y, est.labels_) >= accuracy(y, base.labels_) - 0.02
    if fusion == "late":  # the labels are refined on the related views' graphs only
        from onmsc_dask.assign import refine_labels

        plain = ONMSC(10, refine=False, keep_intermediate=True, random_state=0).fit(noisy)
        with pytest.warns(UserWarning, match="view 3: shares no cluster structure"):
            refined = ONMSC(10, refine=True, random_state=0).fit(noisy)
        np.testing.assert_array_equal(refine_labels(plain.view_graphs_[:3], plain.labels_, 10)[0], refined.labels_)
    off = ONMSC(10, fusion=fusion, drop_unrelated_views=False, random_state=0).fit(noisy)
    assert off.related_views_.all() and off.view_weights_[3] > 0


def test_default_neighbours_refit_for_small_clusters():
    """With imbalanced clusters (12 points next to 2 x 90) the first fit at the default N = 15 finds a cluster of at
    most 15 points, which cannot hold its points' neighbours: the fit is redone with N from the smallest cluster
    found, and kept since its labels cut the graphs of both N more cleanly (they find the 12 points, the first fit's
    do not); the result is the fit with that N given explicitly. An explicit N is never changed."""
    from onmsc_dask.graph import smallest_cluster_neighbors
    from onmsc_dask.selection import distortion
    from sklearn.metrics import adjusted_rand_score

    assert smallest_cluster_neighbors(np.repeat([0, 1, 2], [50, 40, 12]), 3, 15) == 6
    assert smallest_cluster_neighbors(np.repeat([0, 1, 2], [50, 40, 4]), 3, 15) == 5  # at least 5
    assert smallest_cluster_neighbors(np.repeat([0, 1], [50, 60]), 2, 15) == 15  # at most the default
    assert smallest_cluster_neighbors(np.repeat([0, 1, 2], [50, 40, 15]), 3, 15) == 8  # at most N samples: fires
    assert smallest_cluster_neighbors(np.repeat([0, 1, 2], [50, 40, 16]), 3, 15) == 15  # more than N: it does not
    views = _imbalanced_views(12, 2.0)
    lines = []
    est = ONMSC(3, refine=True, random_state=0).fit(views, progress=lines.append)
    first = ONMSC(3, n_neighbors=15, refine=False, random_state=0).fit(views)  # the refit reads k-means labels
    N1 = smallest_cluster_neighbors(first.labels_, 3, 15)
    assert set(est.n_neighbors_tried_) == {15, N1} and est.n_neighbors_ == N1
    y = np.repeat([0, 1, 2], [90, 90, 12])
    assert adjusted_rand_score(y, est.labels_) > adjusted_rand_score(y, first.labels_)
    # the progress lines: the first fit's stages, the refit's (prefixed with its N), then the decision
    assert lines[0].startswith("graphs and embeddings: 2 views as Dask tasks (exact solver, N = 15, orders 1..2")
    assert lines[4] == f"a cluster of at most N = 15 samples found: refitting with N = {N1} (docs/defaults.md)"
    assert [line.split(":")[0] for line in lines[5:9]] == [f"  N = {N1}"] * 4
    assert lines[-2].startswith(f"kept N = {N1}: mean normalized cut of the labels at N = 15 / {N1}: ")
    assert len(lines) == 11
    assert lines[-1].startswith("label refinement: ")  # once, on the kept fit
    again = ONMSC(3, n_neighbors=est.n_neighbors_, refine=True, random_state=0).fit(views)
    assert again.n_neighbors_tried_ == {}
    np.testing.assert_array_equal(again.labels_, est.labels_)
    seed = np.random.SeedSequence(0).generate_state(1)[0]
    early = ONMSC(3, fusion="early", random_state=0).fit(views)
    assert early.n_neighbors_ == est.n_neighbors_ and early.n_neighbors_tried_ == est.n_neighbors_tried_
    assert distortion(est.embedding_, 3, np.random.default_rng(seed)) == pytest.approx(est.n_neighbors_tried_[N1])


def test_refit_kept_only_when_its_labels_cut_both_graphs_more_cleanly(monkeypatch):
    """mean_normalized_cut is 0 for the components of a graph and grows as a partition cuts its edges; a refit whose
    labels cut only its own graphs more cleanly, not the first fit's too, is not kept: the fit is the one with the
    default N given explicitly."""
    from onmsc_dask.assign import mean_normalized_cut

    blocks = sp.block_diag([np.ones((3, 3)), np.ones((4, 4))]).tocsr()
    assert mean_normalized_cut([blocks], np.repeat([0, 1], [3, 4]), 2) == 0
    assert 0 < mean_normalized_cut([blocks], np.array([0, 0, 1, 1, 1, 1, 1]), 2) < mean_normalized_cut(
        [blocks], np.array([0, 1, 0, 1, 0, 1, 0]), 2)
    views = _imbalanced_views(12, 2.0)
    assert ONMSC(3, random_state=0).fit(views).n_neighbors_ != 15  # the refit, kept on the real cuts
    # cuts of the labels at N0, then at N1, on the graphs at N0, then at N1: cleaner on N1's graphs only
    cuts = iter([0.10, 0.11, 0.05, 0.02])
    monkeypatch.setattr(api, "mean_normalized_cut", lambda graphs, labels, k: next(cuts))
    lines = []
    est = ONMSC(3, random_state=0).fit(views, progress=lines.append)
    tried = est.n_neighbors_tried_
    assert len(tried) == 2 and est.n_neighbors_ == 15
    N1 = min(tried)
    assert lines[-1] == (f"kept N = 15: mean normalized cut of the labels at N = 15 / {N1}: 0.1000 / 0.1100 on the "
                         f"graphs at N = 15, 0.0500 / 0.0200 on those at N = {N1}")
    np.testing.assert_array_equal(est.labels_, ONMSC(3, n_neighbors=15, random_state=0).fit(views).labels_)
    with pytest.raises(ValueError, match="labels must lie in 0..1"):
        mean_normalized_cut([blocks], np.array([0, 0, 1, 1, 1, 1, -1]), 2)


def _imbalanced_views(small: int, spread: float, seed: int = 3) -> list[np.ndarray]:
    """Two views of 3 classes, 90 + 90 + ``small`` samples, centres scaled by ``spread``."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], [90, 90, small])
    centres = rng.normal(size=(3, 6)) * spread
    return [centres[y] + rng.normal(size=(len(y), 6)),
            centres[y] @ rng.normal(size=(6, 5)) + rng.normal(size=(len(y), 5))]


def test_default_neighbours_no_refit_for_a_cluster_larger_than_n():
    """A smallest cluster of more than N samples (24 points next to 2 x 90, N = 15: below 2N, but its points can have
    their 15 neighbours inside it) leaves the first fit alone: the labels are those of N = 15 given explicitly."""
    views = _imbalanced_views(24, 3.0)
    est = ONMSC(3, random_state=0).fit(views)
    assert 15 < np.bincount(est.labels_).min() < 30 and est.n_neighbors_ == 15 and est.n_neighbors_tried_ == {}
    np.testing.assert_array_equal(est.labels_, ONMSC(3, n_neighbors=15, random_state=0).fit(views).labels_)


def _tight_groups() -> list[np.ndarray]:
    """Two views of 4 classes, each made of 8 groups of 10 near-identical rows: links between groups weigh about 0,
    so at N = 15 to 30 the top 8 or more eigenvalues of each view's G are 1 to rounding."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 4.0, (4, 30))
    views = []
    for _ in range(2):
        groups = centres[:, None, :] + rng.normal(0, 1.5, (4, 8, 30))
        views.append(np.repeat(groups.reshape(32, 30), 10, axis=0) + rng.normal(0, 0.05, (320, 30)))
    return views


def test_default_neighbours_refit_for_a_giant_cluster():
    """A fit at the default N = 15 that puts more than half the samples in one of k >= 3 clusters is redone with
    N = 30 and the refit is kept because it has no giant cluster, although its H* is less tight (the distortion
    would keep the giant cluster). Checked on Reuters-1200, the set the rule is for (groups of near-identical
    documents): the generated groups of _tight_groups gave a giant cluster at N = 15 only through which of their
    tied eigenvectors rounding picked (spectral.canonical_basis now picks one basis, without a giant cluster)."""
    from onmsc_dask.graph import giant_cluster
    from onmsc_dask.io import load_mat

    assert giant_cluster(np.repeat([0, 1, 2], [60, 20, 20]), 3)
    assert not giant_cluster(np.repeat([0, 1, 2], [50, 30, 20]), 3)  # half is not more than half
    assert not giant_cluster(np.repeat([0, 1], [80, 20]), 2)  # at k = 2 any unequal split has one
    views, y = load_mat(shared_path("Reuters-1200.mat"))
    k, lines = len(np.unique(y)), []
    est = ONMSC(k, random_state=0).fit(views, progress=lines.append)
    assert est.n_neighbors_ == 30 and set(est.n_neighbors_tried_) == {15, 30}
    assert not giant_cluster(est.labels_, k)
    assert est.n_neighbors_tried_[30] > est.n_neighbors_tried_[15]
    decision = [line for line in lines if line.startswith(("a cluster", "kept"))]
    assert decision[0] == "a cluster of 85% of the samples found: refitting with N = 30 (docs/defaults.md)"
    assert re.fullmatch(r"kept N = 30: largest cluster 85% at N = 15, [1-4]\d% at N = 30", decision[1])


def test_repeated_fits_give_the_same_labels_on_any_blas_threads():
    """Groups of near-identical rows tie G's top 8 eigenvalues (to rounding) while k = 4: the same fit repeated in
    one process, on 1 or 2 BLAS threads (the views' eigensolvers also run on concurrent Dask threads), gave other
    labels (N = 20) until tied eigenvectors got a canonical basis (spectral.canonical_basis)."""
    from threadpoolctl import threadpool_limits

    views, fits = _tight_groups(), []
    for threads in (1, 2, 2, 1):
        with threadpool_limits(threads):
            fits.append(ONMSC(4, n_neighbors=20, metric="euclidean", random_state=0, keep_intermediate=True).fit(views))
    for est in fits[1:]:
        np.testing.assert_array_equal(est.labels_, fits[0].labels_)
        np.testing.assert_allclose(est.view_embeddings_, fits[0].view_embeddings_, atol=1e-10)


def test_giant_cluster_refit_keeps_a_dominant_class():
    """A class of 200 samples next to two of 12 is a giant cluster too; at N = 30 it stays one, so that refit is not
    kept and the small-cluster refit decides between N = 15 and N = 6 as without the rule: both find the three
    classes, the same cuts, so the first fit stays."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], [200, 12, 12])
    centres = rng.standard_normal((3, 10)) * 2.5
    views = [centres[y] + rng.standard_normal((len(y), 10)), centres[y][:, ::-1] + rng.standard_normal((len(y), 10))]
    est = ONMSC(3, random_state=0).fit(views)
    assert set(est.n_neighbors_tried_) == {15, 30, 6}
    assert est.n_neighbors_ == 15
    assert np.bincount(est.labels_).max() == 200


def test_default_neighbours_refit_reads_the_views_once_and_never_fails_the_fit():
    """The refit reuses the views read once (dask arrays computed once, an iterator consumed once), and a refit
    that fails its input checks (here: at N = 5 the tight groups fall apart into more pieces than k) keeps the
    first fit instead of failing it."""
    rng = np.random.default_rng(0)
    groups = np.concatenate([np.array([3.0 * g, 0]) + 0.01 * rng.standard_normal((6, 2)) for g in range(20)])
    X = np.vstack([groups, np.array([30.0, 50]) + 0.5 * rng.standard_normal((10, 2))])  # 120 + 10 samples
    twin = X + 0.001 * rng.standard_normal(X.shape)
    est = ONMSC(2, random_state=0).fit(iter([X, twin]))
    assert est.n_neighbors_ == 15 and est.n_neighbors_tried_[5] is None
    np.testing.assert_array_equal(est.labels_, ONMSC(2, n_neighbors=15, random_state=0).fit([X, twin]).labels_)

    calls = []
    y = np.repeat([0, 1, 2], [200, 12, 12])
    centres = rng.standard_normal((3, 10)) * 2.2
    arrays = [centres[y] + rng.standard_normal((len(y), 10)), centres[y][:, ::-1] + rng.standard_normal((len(y), 10))]
    views = [da.from_delayed(dask.delayed(lambda a: calls.append(1) or a, pure=False)(a), a.shape, a.dtype)
             for a in arrays]
    for fusion in ("late", "early"):
        calls.clear()
        with dask.config.set(scheduler="synchronous"):  # the loads run in this process, where they are counted
            fitted = ONMSC(3, fusion=fusion, random_state=0).fit(views)
        assert len(fitted.n_neighbors_tried_) == 3 and len(calls) == 2  # two refits (giant, small), one load per view


def test_default_landmarks_follow_n():
    """n_landmarks=None: min(1000, n / 10). The former fixed 1000 made every one of 600 samples a landmark (on the
    embedded digits views the anchor graph then fell apart into 12 pieces, an error)."""
    X, y = load_digits(return_X_y=True)
    views = _digit_views(X[:600])
    model = ONMSC(10, embedding="anchor", random_state=0).fit(views)
    assert model.n_landmarks_ == 60 and accuracy(y[:600], model.labels_) > 0.7  # 0.79
    assert ONMSC(10, embedding="anchor", n_landmarks=100, random_state=0).fit(views).n_landmarks_ == 100
    assert ONMSC(10, embedding="exact", random_state=0).fit(views).n_landmarks_ is None


def test_fit_predict_forwards_fit_parameters_and_baselines_check_theirs(two_views):
    """fit_predict(views, view_names=...) used to be a TypeError; LinearCombination(max_iter=0) an UnboundLocalError."""
    labels = ONMSC(3, random_state=0).fit_predict(two_views, view_names=["a", "b"])
    np.testing.assert_array_equal(labels, ONMSC(3, random_state=0).fit(two_views).labels_)
    with pytest.raises(ValueError, match="max_iter must be a positive integer, got 0"):
        LinearCombination(3, max_iter=0).fit(two_views)
    with pytest.raises(ValueError, match="tol must be finite and >= 0"):
        LinearCombination(3, tol=-1.0).fit(two_views)


def test_F_is_the_rank_consensus_graph_on_knn_graphs(small_digits, monkeypatch):
    """consensus_graph="auto": F is the embedding of graph.rank_consensus_affinity of the views' ranked neighbours
    on exact kNN graphs; "average" gives the paper's average graph; anchor graphs keep the average."""
    from onmsc_dask.graph import nearest_neighbors, rank_consensus_affinity, ranked_neighbors_count, view_graphs
    from onmsc_dask.spectral import average_graph_embedding, embed_graph
    from onmsc_dask.validation import fit_seeds

    views, y = small_digits
    n, k = len(y), 10
    m = ONMSC(k, keep_intermediate=True, random_state=0).fit(views)
    assert m.consensus_graph_ == "rank"
    seeds, N = fit_seeds(0, 3), m.n_neighbors_
    lists = [nearest_neighbors(X, ranked_neighbors_count(n, k, N), metric, s)
             for X, metric, s in zip(views, m.metric_, seeds)]
    F = embed_graph(rank_consensus_affinity(lists, N), "exact", k, 1, random_state=seeds[-2])[0][0]
    np.testing.assert_allclose(m.average_embedding_ @ m.average_embedding_.T, F @ F.T, atol=1e-8)

    avg = ONMSC(k, consensus_graph="average", keep_intermediate=True, random_state=0).fit(views)
    graphs = view_graphs(views, k, N)[0]
    F = average_graph_embedding(graphs, "exact", k, random_state=seeds[-2])
    assert avg.consensus_graph_ == "average"
    np.testing.assert_allclose(avg.average_embedding_ @ avg.average_embedding_.T, F @ F.T, atol=1e-8)
    assert ONMSC(k, embedding="anchor", n_landmarks=60, random_state=0).fit(views).consensus_graph_ == "average"

    # a consensus graph in more pieces than k would make F arbitrary: the average graph, with a warning
    monkeypatch.setattr(api, "rank_consensus_affinity", lambda lists, N: sp.identity(n, format="csr"))
    with pytest.warns(UserWarning, match=f"rank-consensus graph of the views falls into {n} pieces, more than 10"):
        fallback = ONMSC(k, keep_intermediate=True, random_state=0).fit(views)
    assert fallback.consensus_graph_ == "average"
    np.testing.assert_allclose(fallback.average_embedding_, avg.average_embedding_, atol=1e-10)


@pytest.mark.parametrize("embedding", ["exact", "anchor"])
def test_labels_are_the_kmeans_labels_refined_on_the_related_views_graphs(small_digits, embedding):
    """refine=True: the labels of refine=False (k-means of the read-out) refined by assign.refine_labels on the
    graphs of the related views (kNN affinities, or anchor matrices Z); refine=False keeps no trace."""
    from onmsc_dask.assign import refine_labels

    views, y = small_digits
    kw = dict(embedding=embedding, n_landmarks=60) if embedding == "anchor" else dict(embedding=embedding)
    with dask.config.set(scheduler="sync"):
        plain = ONMSC(10, refine=False, tol=1e-3, keep_intermediate=True, random_state=0, **kw).fit(views)
        refined = ONMSC(10, refine=True, tol=1e-3, random_state=0, **kw).fit(views)
        default = ONMSC(10, tol=1e-3, random_state=0, **kw).fit(views)  # refine="auto": on anchor graphs only
    np.testing.assert_array_equal(default.labels_, (refined if embedding == "anchor" else plain).labels_)
    assert default.refinement_objective_.size == (refined.refinement_objective_.size if embedding == "anchor" else 0)
    assert plain.refinement_objective_.size == 0 and "refine" not in plain.timings_
    graphs = [G for G, kept in zip(plain.view_graphs_, plain.related_views_) if kept]
    labels, trace, _ = refine_labels(graphs, plain.labels_, 10, anchor=embedding == "anchor", tol=1e-3)  # the fit's tol
    np.testing.assert_array_equal(refined.labels_, labels)
    np.testing.assert_allclose(refined.refinement_objective_, trace)
    assert len(trace) > 1 and np.all(np.diff(trace) > 0) and np.sum(labels != plain.labels_) > 0
    np.testing.assert_array_equal(refined.embedding_, plain.embedding_)  # only the labels change
    assert refined.inertia_ == plain.inertia_  # the anchor chain refines in its labels stage
    assert ("labels" if embedding == "anchor" else "refine") in refined.timings_


def test_alpha_with_late_fusion_is_an_error(small_digits):
    """alpha, early fusion's weight, was ignored without a word under late fusion."""
    with pytest.raises(ValueError, match=r"^alpha is early fusion's weight \(fusion='early'\); late fusion's are "
                                         r"lambda1 and lambda2$"):
        ONMSC(10, alpha=3.0).fit(small_digits[0])


def test_early_fusion_labels_are_not_refined(small_digits):
    """refine="auto" (the default) and False give early fusion's k-means labels; True is refused
    (test_bad_parameters_named)."""
    views, _ = small_digits
    fits = [ONMSC(10, fusion="early", refine=r, random_state=0).fit(views) for r in ("auto", False)]
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    assert fits[0].refinement_objective_.size == 0


def _views_with_a_line_view(n: int = 300, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """Four blobs: view 0 holds them in two unit-scale columns beside a noise column 100x wider (a line view:
    euclidean distances follow the noise), view 1 in ten columns of which noise hides half."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 4
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]])
    line = np.column_stack([centres[y] + rng.normal(size=(n, 2)), rng.normal(scale=100.0, size=n)])
    other = rng.normal(scale=3.0, size=(4, 10))[y] + rng.normal(scale=3.0, size=(n, 10))
    return [line, other], y


def test_a_line_view_is_standardized_and_new_rows_take_the_fitted_scale():
    views, y = _views_with_a_line_view()
    model = ONMSC(4, random_state=0).fit(views)
    assert model.metric_ == ["standardized", "euclidean"]
    lazy = ONMSC(4, random_state=0).fit([da.from_array(X, chunks=(100, -1)) for X in views])  # scaled on a worker
    assert lazy.metric_ == model.metric_
    np.testing.assert_array_equal(lazy.labels_, model.labels_)
    as_euclidean = ONMSC(4, metric="euclidean", random_state=0).fit(views)
    assert accuracy(y, model.labels_) > 0.95 > 0.8 > accuracy(y, as_euclidean.labels_), (
        accuracy(y, model.labels_), accuracy(y, as_euclidean.labels_))
    # new rows are scaled by the fitted view's deviations: rows of one cluster alone (whose own deviations differ)
    # keep the labels of the fit
    np.testing.assert_allclose(model.extension_.views[0].scale, views[0].std(axis=0))
    one = model.labels_ == model.labels_[0]
    assert np.mean(model.predict([X[one] for X in views]) == model.labels_[0]) > 0.95


def test_the_line_view_rule_leaves_other_views_alone(digits, monkeypatch):
    views, _ = digits
    fitted = ONMSC(10, random_state=0).fit(views)
    assert "standardized" not in fitted.metric_
    monkeypatch.setattr("onmsc_dask.graph.LINE_VIEW_COLUMNS", 0.0)  # the rule off
    np.testing.assert_array_equal(ONMSC(10, random_state=0).fit(views).labels_, fitted.labels_)


def test_anchor_graphs_standardize_a_line_view_as_kNN_graphs_do(tmp_path, digits):
    """The anchor chain applies the line-view rule too (effective columns and column scales of the landmark sample):
    in memory and from a store in row chunks of any size alike; a given "standardized" is the same; new rows take
    the fitted scale, also when resumed; views that are no line views keep their metric."""
    from onmsc_dask import MultiViewStore, graph

    views, y = _views_with_a_line_view()
    anchor = dict(embedding="anchor", n_landmarks=40, random_state=0)
    model = ONMSC(4, **anchor).fit(views)
    assert model.metric_ == ["standardized", "euclidean"]
    as_euclidean = ONMSC(4, metric="euclidean", **anchor).fit(views)
    assert accuracy(y, model.labels_) > 0.95 > 0.8 > accuracy(y, as_euclidean.labels_), (
        accuracy(y, model.labels_), accuracy(y, as_euclidean.labels_))
    given = ONMSC(4, metric=["standardized", "auto"], **anchor).fit(views)
    np.testing.assert_array_equal(given.labels_, model.labels_)
    np.testing.assert_allclose(model.extension_.views[0].scale, views[0].std(axis=0))  # 300 rows: all sampled
    one = model.labels_ == model.labels_[0]
    assert np.mean(model.predict([X[one] for X in views]) == model.labels_[0]) > 0.95
    for rows in (70, 300):  # the sample's rows in the same order whatever the chunks: the same scales and labels
        store = MultiViewStore.create(tmp_path / f"v{rows}.zarr", views, y, chunk_rows=rows)
        stored = ONMSC(4, cache=store, **anchor).fit(store)
        assert stored.metric_ == model.metric_
        np.testing.assert_array_equal(stored.extension_.views[0].scale, model.extension_.views[0].scale)
        np.testing.assert_array_equal(stored.labels_, model.labels_)
    # the rule is part of the stage's parameters: a store's landmark stage of an earlier rule is not reused
    assert stored.stage_parameters_["line_view_columns"] == graph.LINE_VIEW_COLUMNS
    resumed = ONMSC(4, cache=store, **anchor).fit(store)  # every stage read back, the scales with them
    assert resumed.computed_stages_ == []
    np.testing.assert_array_equal(resumed.extension_.views[0].scale, model.extension_.views[0].scale)
    np.testing.assert_array_equal(resumed.predict([X[one] for X in views]), model.predict([X[one] for X in views]))
    assert "standardized" not in ONMSC(10, embedding="anchor", random_state=0).fit(digits[0]).metric_


def test_top_level_names_load_on_first_use():
    """`import onmsc_dask.store` (what pipelines/mnist60k.py imports before it forks) loads neither scikit-learn nor
    the fit; `from onmsc_dask import ONMSC, MultiViewStore, evaluate` still works, dir() lists the names, and a name
    is looked up once (then cached in the module); an unknown name is an AttributeError."""
    import subprocess
    import sys

    code = ("import sys, onmsc_dask.store\n"
            "print(sorted(m for m in ('sklearn', 'onmsc_dask.api', 'matplotlib') if m in sys.modules))\n"
            "import onmsc_dask\n"
            "from onmsc_dask import ONMSC, MultiViewStore, evaluate\n"
            "print(ONMSC.__module__, MultiViewStore.__module__, evaluate.__module__, 'ONMSC' in vars(onmsc_dask),\n"
            "      {'ONMSC', 'MultiViewStore', 'evaluate'} <= set(dir(onmsc_dask)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "onmsc_dask.api onmsc_dask.store onmsc_dask.metrics True True"]
    import onmsc_dask

    with pytest.raises(AttributeError, match="has no attribute 'fit'"):
        onmsc_dask.fit


@pytest.mark.parametrize("embedding", ["exact", "anchor"])
def test_a_dask_view_of_unknown_chunk_sizes_is_named(two_views, embedding):
    """A boolean-masked dask array has NaN chunk sizes: the fit used to fail with "cannot convert float NaN to
    integer", naming no view."""
    X, Y = two_views
    masked = da.from_array(X, chunks=50)
    masked = masked[masked[:, 0] > -np.inf]
    with pytest.raises(ValueError, match=r"^view 1 \('b'\): has unknown chunk sizes; call compute_chunk_sizes\(\)"):
        ONMSC(3, embedding=embedding).fit([Y, masked], view_names=["a", "b"])


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_blas_thread_calls_inside_another_change_nothing():
    """A call nested in one thread, or from another thread while the first holds the limit and leaving after it,
    keeps the limit it found and restores nothing (an earlier lock made every later fit wait forever behind a fit
    stuck in a thread; overlapping limits restored each other's)."""
    import threading

    from threadpoolctl import threadpool_limits

    from onmsc_dask.cluster import one_blas_thread

    inside, left, seen = threading.Event(), threading.Event(), []

    def other() -> None:
        with one_blas_thread():
            seen.append(_blas_threads())
            inside.set()
            left.wait(5)

    with threadpool_limits(2, user_api="blas"):
        start = _blas_threads()
        with one_blas_thread():
            with one_blas_thread():
                pass
            assert _blas_threads() == [1] * len(start)
            thread = threading.Thread(target=other)
            thread.start()
            inside.wait(5)
        assert _blas_threads() == start  # the first restored what it found; the other still runs
        left.set()
        thread.join()
        assert seen == [[1] * len(start)] and _blas_threads() == start
