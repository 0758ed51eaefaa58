"""SB-SC, A-MVSC and BL / BL+HCI / BL+NLM baselines on three views of scikit-learn's digits."""
import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans
import pytest
from sklearn.datasets import load_digits

from onmsc_dask.assign import assign_labels
from onmsc_dask.baselines import AverageGraphSC, ConcatSC, LabelPickedView, LinearCombination, SingleBestView
from onmsc_dask.api import fit_early_fusion
from onmsc_dask.early_fusion import EarlyFusionProblem
from onmsc_dask.graph import view_graphs
from onmsc_dask.graph import NormalizedHighOrderAffinity
from onmsc_dask.metrics import accuracy

K = 10


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).choice(len(y), 500, replace=False)
    X, y = X[idx], y[idx]
    chance = max(accuracy(y, np.random.default_rng(s).permutation(y)) for s in range(5))
    return [X[:, :24], X[:, 24:40], X[:, 40:]], y, chance


def test_single_best_view(digits):
    views, y, chance = digits
    sb = SingleBestView(K, random_state=0).fit(views)
    assert len(sb.per_view_labels_) == 3 and sb.best_view_ == int(np.argmax(sb.eigengaps_))
    np.testing.assert_array_equal(sb.labels_, sb.per_view_labels_[sb.best_view_])
    scores = [s["acc"] for s in sb.score_views(y)]
    assert scores[sb.best_view_] == pytest.approx(accuracy(y, sb.labels_)) and max(scores) > 2 * chance
    assert accuracy(y, sb.labels_) > 2 * chance
    # each view: eigengap lambda_k - lambda_{k+1} of the dense G, labels = k-means of its top-k eigenvectors
    for p, A in enumerate(view_graphs(views, K, random_state=0)[0]):
        G = NormalizedHighOrderAffinity(A, 1) @ np.eye(A.shape[0])
        vals, vecs = np.linalg.eigh((G + G.T) / 2)
        vals, vecs = vals[::-1], vecs[:, ::-1]
        assert sb.eigengaps_[p] == pytest.approx(vals[K - 1] - vals[K], abs=1e-8)
        ref = assign_labels(vecs[:, :K], K, random_state=0)[0]
        assert accuracy(ref, sb.per_view_labels_[p]) > 0.98  # the same partition (up to k-means near-ties)


def test_average_graph(digits):
    views, y, chance = digits
    labels = AverageGraphSC(K, random_state=0).fit_predict(views)
    assert accuracy(y, labels) > 4 * chance


@pytest.mark.parametrize("order", [1, 2])
def test_linear_combination(digits, order):
    views, y, chance = digits
    bl = LinearCombination(K, order=order, random_state=0).fit(views)
    J = np.array(bl.objective_)
    assert np.all(np.diff(J) <= 1e-9 * np.abs(J[1:]))  # alternating exact minimisers
    assert np.all(bl.view_weights_ >= 0) and bl.view_weights_.sum() == pytest.approx(1.0)
    assert accuracy(y, bl.labels_) > 3 * chance


@pytest.mark.parametrize("order", [1, 2])
def test_linear_combination_first_iteration_updates_are_exact_minimisers(digits, order):
    """One iteration from uniform mu and H_0 (top-k of sum_p G_p / v): mu minimises c_0^T mu + alpha mu^T M mu on
    the simplex, and H spans the top-k eigenvectors of sum_{p,o} mu_p G_p^(o). The objective trace alone cannot
    tell a skipped mu update from a real one."""
    views, _, _ = digits
    bl = LinearCombination(K, order=order, max_iter=1, random_state=0).fit(views)
    problem = EarlyFusionProblem(view_graphs(views, K, random_state=0)[0], K, order, float(K * order), 0)
    v = len(views)
    mu0 = np.full(v, 1.0 / v)
    T0 = problem.combined(mu0) @ np.eye(problem.n)
    H0 = np.linalg.eigh((T0 + T0.T) / 2)[1][:, ::-1][:, :K]
    c0 = order * K - problem.compressions(H0).sum(axis=1)

    def Q(m):
        return c0 @ m + bl.alpha_ * m @ problem.M @ m

    mu = bl.view_weights_
    others = np.vstack([np.eye(v), mu0, np.random.default_rng(0).dirichlet(np.ones(v), 200)])
    assert Q(mu) <= min(Q(m) for m in others) + 1e-9 * abs(Q(mu))
    assert np.abs(mu - mu0).max() > 1e-3  # the data move mu off its uniform start
    T = problem.combined(mu) @ np.eye(problem.n)
    top = np.sort(np.linalg.eigvalsh((T + T.T) / 2))[::-1][:K].sum()
    assert np.trace(bl.embedding_.T @ T @ bl.embedding_) == pytest.approx(top, rel=1e-8)


def test_bl_nlm_is_early_fusion_order_one(digits):
    views, y, chance = digits
    fit = fit_early_fusion(views, K, order=1, random_state=0)
    assert accuracy(y, fit.labels) > 4 * chance


def test_random_state_none_is_fresh_randomness_not_seed_0(digits, monkeypatch):
    """random_state=None reaches the eigensolvers as None (a fresh start each fit, as in the late-fusion
    estimator) in the baselines and early fusion, instead of silently becoming seed 0."""
    import onmsc_dask.baselines as baselines
    import onmsc_dask.early_fusion as early
    import onmsc_dask.spectral as spectral

    seen, real = [], spectral.top_eigenvectors

    def spy(G, k, random_state=None):
        seen.append(random_state)
        return real(G, k, random_state)

    for module in (spectral, early, baselines):
        monkeypatch.setattr(module, "top_eigenvectors", spy)
    views = digits[0]
    for estimator in (SingleBestView(K), AverageGraphSC(K), LinearCombination(K, max_iter=2)):
        assert accuracy(digits[1], estimator.fit(views).labels_) > 2 * digits[2]
    assert accuracy(digits[1], fit_early_fusion(views, K, max_iter=2).labels) > 2 * digits[2]
    assert len(seen) > 8 and all(s is None for s in seen)


def _mixed_views(n=240, k=3, seed=0):
    """A dense view whose cluster signal sits in three columns of tiny scale next to a huge-scale noise column, and
    a sparse count view (bag of words) with a vocabulary per cluster; labels."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n // k)
    dense = np.column_stack([1e-3 * (y[:, None] + 0.3 * rng.standard_normal((n, 3))), 1e4 * rng.standard_normal(n)])
    rates = np.full((k, 600), 0.005)
    for c in range(k):
        rates[c, 200 * c:200 * (c + 1)] = 0.1
    counts = rng.poisson(rates[y])
    counts[counts.sum(axis=1) == 0, 0] = 1
    return [dense, sp.csr_matrix(counts.astype(float))], y


def test_concatenate_views_weighs_each_view_the_same():
    from onmsc_dask.baselines import concatenate_views

    views, _ = _mixed_views()
    Z = concatenate_views(views)
    assert isinstance(Z, np.ndarray) and Z.shape == (240, 604)
    np.testing.assert_allclose(Z[:, :4].mean(axis=0), 0, atol=1e-12)  # standardized, / sqrt(2)
    np.testing.assert_allclose(Z[:, :4].std(axis=0), 1 / np.sqrt(4))
    np.testing.assert_allclose(np.linalg.norm(Z[:, 4:], axis=1), 1)  # TF-IDF rows of unit length
    assert not np.shares_memory(Z, views[0]) and views[0][:, 3].std() > 1e3  # the input is untouched
    sparse = concatenate_views([views[1], views[1]])
    assert sp.issparse(sparse) and sparse.shape == (240, 1200)
    const = np.column_stack([views[0], np.ones(240)])  # a constant column is dropped, not divided by 0
    assert np.isfinite(concatenate_views([const])).all() and concatenate_views([const]).shape == (240, 4)


def test_concatenation_baselines_find_the_small_scale_signal():
    from onmsc_dask.baselines import ConcatKMeans, ConcatSC

    views, y = _mixed_views()
    for est in (ConcatSC(3, random_state=0), ConcatKMeans(3, random_state=0)):
        assert accuracy(y, est.fit_predict(views)) > 0.95
    # without standardization the huge noise column decides: k-means of the raw dense view is near chance
    raw = KMeans(3, n_init=10, random_state=0).fit_predict(views[0])
    assert accuracy(y, raw) < 0.6


def test_label_picked_view_uses_the_labels():
    from onmsc_dask.baselines import LabelPickedView

    views, y = _mixed_views()
    noise = np.random.default_rng(1).standard_normal((240, 5))
    ref = LabelPickedView(3, random_state=0).fit([noise, views[1]], y)
    assert ref.best_view_ == 1 and accuracy(y, ref.labels_) > 0.9
    with pytest.raises(ValueError, match="with the labels"):
        LabelPickedView(3).fit([noise, views[1]])


def test_baselines_take_a_store_its_path_or_url_and_view_names(digits, tmp_path):
    """Every baseline fits a MultiViewStore, its path or a memory:// URL like the arrays it holds (as ONMSC.fit takes
    them); a path used to be read as a list of characters ("every entry is 1-D"); messages name the views by
    view_names, else by the store's names."""
    from onmsc_dask.baselines import ConcatKMeans, ConcatSC, LabelPickedView
    from onmsc_dask.store import MultiViewStore

    views, y, _ = digits
    local = MultiViewStore.create(tmp_path / "d.zarr", views, y, view_names=["a", "b", "c"])
    url = "memory://baselines/d.zarr"
    MultiViewStore.create(url, views, y, view_names=["a", "b", "c"])
    for make in (SingleBestView, AverageGraphSC, ConcatSC, ConcatKMeans, LinearCombination):
        expected = make(K, random_state=0).fit(views).labels_
        for given in (local, str(local.path), url):
            np.testing.assert_array_equal(make(K, random_state=0).fit(given).labels_, expected, err_msg=str(make))
    picked = LabelPickedView(K, random_state=0).fit(local, y)
    np.testing.assert_array_equal(picked.labels_, LabelPickedView(K, random_state=0).fit(views, y).labels_)
    for given in (local, str(local.path), url):  # a store's own labels (it said it needs y)
        np.testing.assert_array_equal(LabelPickedView(K, random_state=0).fit(given).labels_, picked.labels_)
    unlabelled = MultiViewStore.create(tmp_path / "u.zarr", views)
    with pytest.raises(ValueError, match=r"picks its view with the labels: fit\(views, y\), or views a store that holds "
                                         "them"):
        LabelPickedView(K, random_state=0).fit(unlabelled)
    bad = [views[0], np.where(np.arange(500)[:, None] == 7, np.nan, views[1])]
    for make in (AverageGraphSC, ConcatKMeans):
        with pytest.raises(ValueError, match=r"view 1 \('pixels'\): contains NaN"):
            make(K).fit(bad, view_names=["grads", "pixels"])



def test_baselines_leave_out_views_that_cannot_help_as_onmsc_does(digits):
    """A constant view and one of fewer distinct rows than clusters: each baseline warns naming them and fits the
    other views (kept_views_), with the labels it gives those views alone (they used to raise ConstantViewError
    where ONMSC leaves such views out); best_view_ is a position among the given views; with no usable view, the
    error."""
    from onmsc_dask.baselines import ConcatKMeans, ConcatSC, LabelPickedView

    views, y, _ = digits
    few = np.repeat(np.arange(5.0), 100)[:, None] * np.ones((1, 2))
    given = [np.ones((500, 3)), views[0], few, views[2]]
    names = ["ones", "a", "few", "c"]
    for make in (SingleBestView, AverageGraphSC, ConcatSC, ConcatKMeans, LinearCombination):
        with pytest.warns(UserWarning) as record:
            model = make(K, random_state=0).fit(given, view_names=names)
        said = " ".join(str(w.message) for w in record)
        assert "view 0 ('ones'): is constant" in said and "view 2 ('few'): only 5 distinct rows" in said, said
        assert model.kept_views_ == [1, 3] and model.n_views_in_ == 4
        np.testing.assert_array_equal(model.labels_, make(K, random_state=0).fit([views[0], views[2]]).labels_)
    weights = LinearCombination(K, random_state=0).fit(given).view_weights_  # one per given view, as ONMSC's
    assert len(weights) == 4 and weights[[0, 2]].tolist() == [0, 0] and weights.sum() == pytest.approx(1.0)
    zero_rows = views[2].copy()
    zero_rows[:2] = 0  # all-zero rows of a cosine view: the warning names it by its input position
    with pytest.warns(UserWarning, match=r"^view 2: 2 all-zero rows"):
        AverageGraphSC(K, random_state=0).fit([np.ones((500, 3)), views[0], zero_rows])
    for make in (SingleBestView, LabelPickedView):
        with pytest.warns(UserWarning):
            model = make(K, random_state=0).fit(given, y)
        alone = make(K, random_state=0).fit([views[0], views[2]], y)
        assert model.best_view_ == [1, 3][alone.best_view_]
        np.testing.assert_array_equal(model.labels_, alone.labels_)
    with pytest.raises(ValueError, match="no view"):
        AverageGraphSC(K).fit([np.ones((500, 3)), few])


def test_a_failed_refit_leaves_no_fitted_attributes(digits):
    """A baseline refitted on bad views kept the earlier fit's labels_, which looked like a fit of the new data (as
    ONMSC, a failed fit now leaves nothing behind); a refit keeps nothing of an earlier one."""
    from onmsc_dask.baselines import ConcatKMeans, ConcatSC, LabelPickedView

    views, y, _ = digits
    bad = [views[0].copy(), views[1]]
    bad[0][0, 0] = np.nan
    for est in (SingleBestView(K, random_state=0), AverageGraphSC(K, random_state=0), ConcatSC(K, random_state=0),
                ConcatKMeans(K, random_state=0), LinearCombination(K, random_state=0, max_iter=3),
                LabelPickedView(K, random_state=0)):
        est.fit(views, y)
        assert hasattr(est, "labels_") and est.n_views_in_ == 3
        with pytest.raises(ValueError, match="view 0: contains NaN"):
            est.fit(bad, y)
        assert not [a for a in vars(est) if a.endswith("_")], type(est).__name__
        est.fit(views[1:], y)
        assert est.n_views_in_ == 2 and len(est.labels_) == len(y)
        if hasattr(est, "eigengaps_"):
            assert len(est.eigengaps_) == 2


def test_baselines_check_their_parameters_and_labels_before_any_work(digits, monkeypatch):
    """n_init and random_state are checked before the views are read (n_init=0 used to reach scikit-learn's KMeans
    after the graphs were built); LabelPickedView checks y (length, NaN, one column) before it clusters a view (a wrong
    length used to fail after every view was clustered, NaN labels were taken), and its fit_predict passes y on
    (ClusterMixin's dropped it: `picks its view with the labels`)."""
    from onmsc_dask import baselines
    from onmsc_dask.baselines import ConcatKMeans, ConcatSC, LabelPickedView

    views, y, _ = digits
    read = []
    monkeypatch.setattr(baselines, "usable_views", lambda *a: read.append(a) or pytest.fail("views read"))
    for est in (SingleBestView, AverageGraphSC, ConcatSC, ConcatKMeans, LinearCombination, LabelPickedView):
        with pytest.raises(ValueError, match="n_init must be a positive integer"):
            est(K, n_init=0).fit(views, y)
        with pytest.raises(ValueError, match="n_init must be a positive integer"):
            est(K, n_init=1.5).fit(views, y)
        with pytest.raises(ValueError, match=r"random_state must be an int in \[0, 2\*\*32 - 1\] or None"):
            est(K, random_state=-1).fit(views, y)
    monkeypatch.undo()
    clustered = []
    monkeypatch.setattr(LabelPickedView, "_cluster_views", lambda *a: clustered.append(a) or pytest.fail("clustered"))
    for bad, message in [(y[:-5], f"y: has {len(y) - 5} entries, expected {len(y)}, one per sample"),
                         (np.where(y == 1, np.nan, y), r"y: holds missing values \(NaN"),
                         (np.column_stack([y, y]), r"y: has shape \(\d+, 2\), expected a vector")]:
        with pytest.raises(ValueError, match=message):
            LabelPickedView(K, random_state=0).fit(views, bad)
    with pytest.raises(ValueError, match=r"y: holds missing values \(None, NaN or NA, e\.g\. in rows \[\d+"):
        LabelPickedView(K, random_state=0).fit(views, np.where(y == 1, None, y.astype(str)))
    import pandas as pd
    with pytest.raises(ValueError, match=r"y: holds missing values \(None, NaN or NA, e\.g\. in rows \[\d+"):  # was a TypeError
        LabelPickedView(K, random_state=0).fit(views, pd.Series(np.where(y == 1, None, y.astype(str)), dtype="string"))
    with pytest.raises(ValueError, match="y: mixes class names and numbers"):  # 1 and "1" were one class
        LabelPickedView(K, random_state=0).fit(views, np.array([*y[:-1], "1"], dtype=object))
    assert not clustered
    monkeypatch.undo()
    names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])[y]
    np.testing.assert_array_equal(LabelPickedView(K, random_state=0).fit(views, list(names)).labels_,
                                  LabelPickedView(K, random_state=0).fit(views, y).labels_)  # class names work
    picked = LabelPickedView(K, random_state=0)
    np.testing.assert_array_equal(picked.fit_predict(views, y), LabelPickedView(K, random_state=0).fit(views, y).labels_)
    np.testing.assert_array_equal(ConcatKMeans(K, random_state=0).fit_predict(views),
                                  ConcatKMeans(K, random_state=0).fit(views).labels_)


def test_baselines_are_tagged_as_taking_sparse_views():
    """They take scipy.sparse views as ONMSC does, but were tagged otherwise (sklearn's check_estimator_sparse_tag
    failed for all five; found by a user trial)."""
    from onmsc_dask import baselines

    for est in (SingleBestView, AverageGraphSC, LinearCombination, baselines.ConcatSC, baselines.ConcatKMeans,
                baselines.LabelPickedView):
        assert est().__sklearn_tags__().input_tags.sparse, est.__name__


def test_labels_in_another_row_order_a_per_view_metric_with_a_view_left_out_and_the_concatenated_graph_named():
    """Found by a trial: LabelPickedView took a pandas Series y by position when its index was in another order than
    the views' (it picked the noise view); a per-view metric list failed every graph baseline once a view was left
    out ("metric lists 3 entries for 2 views"; ONMSC drops the left-out view's entry); ConcatSC's graph error named the
    user's view 0."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n, k = 300, 3
    y = np.repeat(np.arange(k), n // k)
    ids = [f"s{i:03d}" for i in range(n)]
    good = pd.DataFrame(rng.normal(size=(k, 5))[y] * 3 + rng.normal(size=(n, 5)), index=ids)
    noise = pd.DataFrame(rng.normal(size=(n, 5)), index=ids)
    with pytest.raises(ValueError, match=r"the labels: its row index differs from view 0's \(row 0: 's189' here"):
        LabelPickedView(k, random_state=0).fit([noise, good], pd.Series(y, index=ids).sample(frac=1, random_state=1))
    assert LabelPickedView(k, random_state=0).fit([noise, good], pd.Series(y, index=ids)).best_view_ == 1

    A = rng.normal(size=(k, 10))[y] * 2 + rng.normal(size=(n, 10))
    B = sp.csr_matrix(rng.poisson((rng.uniform(size=(k, 200)) ** 4)[y]).astype(float))
    metric = ["euclidean", "euclidean", "counts"]
    for estimator in (AverageGraphSC, SingleBestView):
        with pytest.warns(UserWarning, match="view 1"):  # the constant view, left out
            left_out = estimator(k, metric=metric, random_state=0).fit([A, np.ones((n, 4)), B])
        kept = estimator(k, metric=["euclidean", "counts"], random_state=0).fit([A, B])
        np.testing.assert_array_equal(left_out.labels_, kept.labels_)
        assert left_out.metric_ == kept.metric_ == ["euclidean", "counts"]
        with pytest.raises(ValueError, match="metric lists 2 entries for 3 views"), pytest.warns(UserWarning):
            estimator(k, metric=["euclidean", "counts"], random_state=0).fit([A, np.ones((n, 4)), B])  # as ONMSC

    g = np.arange(n) % 6
    pieces = [g[:, None] * 10.0 + rng.normal(size=(n, d)) * 0.01 for d in (4, 3)]
    with pytest.raises(ValueError, match=r"^view 0 \('the concatenated views'\): its graph falls apart into 6"):
        ConcatSC(3, random_state=0).fit(pieces, view_names=["audio", "video"])
