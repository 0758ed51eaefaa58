"""ONMSC-EF (docs/early_fusion.md): exact traces and objective, monotone descent, optimal blocks, input checks."""
import numpy as np
import pytest
from sklearn.datasets import load_digits

import onmsc_dask.api as api
from onmsc_dask import ONMSC
from onmsc_dask.api import fit_early_fusion
from onmsc_dask.early_fusion import EarlyFusionProblem, early_fusion
from onmsc_dask.graph import view_graphs
from onmsc_dask.metrics import accuracy
from onmsc_dask.spectral import exact_embedding

K = 10


def digits_views(n: int, seed: int = 0):
    """n digits (8x8) as three views: the top, middle and bottom bands of pixel rows."""
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(seed).choice(len(y), n, replace=False)
    X, y = X[idx], y[idx]
    return [X[:, :24], X[:, 24:40], X[:, 40:]], y


@pytest.fixture(scope="module")
def graphs():
    views, y = digits_views(600)  # > 500: the eigsh path of top_eigenvectors
    return view_graphs(views, K)[0], y


def orthonormal(X):
    return np.linalg.qr(X)[0]


def test_traces_and_objective_match_dense():
    views, _ = digits_views(120, seed=1)
    g = view_graphs(views, 4)[0]
    O, n, k = 2, 120, 4
    prob = EarlyFusionProblem(g, k, O, alpha=0.7)
    G = [[op @ np.eye(n) for op in ops] for ops in prob.ops]
    A = [[np.linalg.matrix_power(a.toarray(), o) for o in range(1, O + 1)] for a in g]
    R = [[sum(np.sum(G[p][o] * G[q][o]) for o in range(O)) for q in range(3)] for p in range(3)]
    M = [[sum(np.sum(A[p][o] * A[q][o]) / np.linalg.norm(A[p][o]) / np.linalg.norm(A[q][o]) for o in range(O))
          for q in range(3)] for p in range(3)]
    np.testing.assert_allclose(prob.R, R, rtol=1e-10)
    np.testing.assert_allclose(prob.M, M, rtol=1e-10)
    rng = np.random.default_rng(0)
    H, P = orthonormal(rng.normal(size=(n, k))), orthonormal(rng.normal(size=(n, k)))
    lam, mu = rng.uniform(size=k), rng.dirichlet(np.ones(3))
    Lstar = np.eye(n) - P @ np.diag(lam) @ P.T
    J = (np.trace(H.T @ Lstar @ H) + prob.alpha * mu @ np.array(M) @ mu
         + sum(np.sum((Lstar - sum(mu[p] * (np.eye(n) - G[p][o]) for p in range(3))) ** 2) for o in range(O)))
    assert prob.objective(H, P, lam, mu) == pytest.approx(J, rel=1e-10)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("joint", [True, False])
def test_objective_non_increasing_and_feasible(graphs, order, joint):
    res = early_fusion(graphs[0], K, order, joint=joint, tol=1e-7, max_iter=30)
    J = np.array(res.objective)
    assert len(J) >= 2 and np.all(np.diff(J) <= 1e-9 * np.abs(J[1:]))
    n = res.P.shape[0]
    np.testing.assert_allclose(res.P.T @ res.P, np.eye(K), atol=1e-8)
    np.testing.assert_allclose(res.embedding.T @ res.embedding, np.eye(K), atol=1e-8)
    assert res.P.shape == (n, K) and np.all((res.Lambda >= 0) & (res.Lambda <= 1))
    assert np.all(res.view_weights >= 0) and res.view_weights.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("order", [1, 2])
def test_each_block_update_is_optimal(graphs, order):
    prob = EarlyFusionProblem(graphs[0], K, order)
    rng = np.random.default_rng(order)
    n, v = prob.n, len(prob.ops)
    mu = rng.dirichlet(np.ones(v))
    H0 = orthonormal(rng.normal(size=(n, K)))
    J = prob.objective

    def tweak_P(P, eps):
        return orthonormal(P + eps * rng.normal(size=P.shape))

    def tweak_lam(lam, eps):
        return np.clip(lam + eps * rng.normal(size=K), 0, 1)

    # (b) P, Lambda given H, mu
    P, lam = prob.update_p_lambda(mu, H0)
    best = J(H0, P, lam, mu)
    for eps in (1e-3, 1e-2, 1e-1, 10.0):
        assert best <= J(H0, tweak_P(P, eps), tweak_lam(lam, eps), mu) + 1e-10 * abs(best)
    # (a) H given P, Lambda
    H = prob.update_h(P)
    best = J(H, P, lam, mu)
    for eps in (1e-3, 1e-2, 1e-1, 10.0):
        assert best <= J(tweak_P(H, eps), P, lam, mu) + 1e-10 * abs(best)
    # (a)+(b) jointly given mu
    P, lam = prob.update_p_lambda(mu)
    H = prob.update_h(P)
    best = J(H, P, lam, mu)
    for eps in (1e-3, 1e-2, 1e-1, 10.0):
        assert best <= J(tweak_P(H, eps), tweak_P(P, eps), tweak_lam(lam, eps), mu) + 1e-10 * abs(best)
    # (c) mu given P, Lambda
    mu = prob.update_mu(P, lam)
    best = J(H, P, lam, mu)
    for t in (1e-4, 1e-2, 0.3, 1.0):
        other = (1 - t) * mu + t * rng.dirichlet(np.ones(v))
        assert best <= J(H, P, lam, other) + 1e-10 * abs(best)


def test_fit_early_fusion_clusters_digits():
    views, y = digits_views(600)
    fit = fit_early_fusion(views, K, order=2, random_state=0)
    assert fit.labels.shape == y.shape and fit.result.converged
    assert accuracy(y, fit.labels) > 0.6  # chance is about 0.12


def test_affinity_embedding_is_the_learned_affinity_up_to_isometry(graphs):
    res = early_fusion(graphs[0], K, 2)
    X, S = res.affinity_embedding, res.P @ np.diag(res.Lambda) @ res.P.T  # rows of S = rows of X times P^T
    np.testing.assert_allclose(X @ res.P.T, S, atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), np.linalg.norm(S, axis=1), atol=1e-10)


def blobs(n_per: int = 40, d: int = 4, seed: int = 0):
    """Two views of three Gaussian blobs."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n_per)
    return [rng.normal(size=(len(y), d)) + 3 * y[:, None] for _ in range(2)], y


def bad_inputs():
    """(views, k, expected error) of each kind of bad input."""
    views, y = blobs()
    nan = views[1].copy()
    nan[5, 1] = np.nan
    far = np.concatenate([np.random.default_rng(1).normal(size=(30, 2)) + 100 * i for i in range(4)])
    return {"nan": ([views[0], nan], 3, "view 1: contains NaN"),
            "k too large": (views, len(y), "n_clusters=120 must satisfy"),
            "disconnected": ([far, far + 0.01], 2, "view 0: its graph falls apart into 4"),
            "mismatched rows": ([views[0], views[1][:100]], 3, "view 1: has 100 rows, expected 120")}


@pytest.mark.parametrize("case", list(bad_inputs()))
def test_bad_input_raises_naming_the_view_as_late_fusion_does(case):
    views, k, message = bad_inputs()[case]
    with pytest.raises(ValueError, match=message) as late:
        ONMSC(k, random_state=0).fit(views)
    for fit in (lambda: ONMSC(k, fusion="early", random_state=0).fit(views),
                lambda: ONMSC(k, fusion="early", n_neighbors=10, random_state=0).fit(views),
                lambda: fit_early_fusion(views, k, n_neighbors=10, random_state=0)):
        with pytest.raises(ValueError) as early:
            fit()
        assert str(early.value) == str(late.value)


def test_constant_view_left_out_by_the_estimator_an_error_of_the_function():
    """ONMSC(fusion="early") leaves a constant view out with a warning (test_api); fit_early_fusion, given the views
    to fuse, stops naming it."""
    views, y = blobs()
    constant = [views[0], np.ones((len(y), 3))]
    with pytest.warns(UserWarning, match="view 1: is constant.*left out"):
        est = ONMSC(3, fusion="early", random_state=0).fit(constant)
    assert list(est.left_out_views_) == [1] and est.view_weights_[1] == 0
    with pytest.raises(ValueError, match="view 1: is constant"):
        fit_early_fusion(constant, 3, n_neighbors=10, random_state=0)


@pytest.mark.parametrize("alpha", [np.nan, np.inf, -1.0, None, "select"])
def test_bad_alpha_is_a_named_error(alpha, monkeypatch):
    """NaN alpha failed in an eigensolve (AttributeError), inf in the mu step (LinAlgError), None with a TypeError,
    all after the graphs and traces were built; the estimator checks it before any work (no late fit for N)."""
    views, _ = blobs()
    monkeypatch.setattr(ONMSC, "_fit_late", lambda *a: pytest.fail("a late fit ran before alpha was checked"))
    with pytest.raises(ValueError, match="alpha must be"):
        ONMSC(3, fusion="early", alpha=alpha, random_state=0).fit(views)
    with pytest.raises(ValueError, match="alpha must be"):
        fit_early_fusion(views, 3, alpha=alpha, random_state=0)
    with pytest.raises(ValueError, match="alpha must be"):
        EarlyFusionProblem(view_graphs(views, 3)[0], 3, 2, alpha=alpha)


def test_each_warning_once_as_in_late_fusion():
    """With the default N the late fit that picks N and early fusion both warned about the same views."""
    views, y = blobs()
    noisy = views + [np.random.default_rng(2).normal(size=(len(y), 5))]
    for fusion in ("late", "early"):
        with pytest.warns(UserWarning) as record:
            ONMSC(3, fusion=fusion, random_state=0).fit(noisy)
        messages = [str(w.message) for w in record]
        assert sum("view 2: shares no cluster structure" in m for m in messages) == 1, messages
        assert len(messages) == len(set(messages)), messages


def test_related_views_from_the_late_fit_embeddings(monkeypatch):
    """The default N comes from a late fit, whose graphs and first-order embeddings early fusion reuses (no second
    round of graph tasks, no eigensolve on the client); given N, one round of graph tasks gives the graphs and their
    first-order embeddings. Same labels either way (n > 500: eigsh, whose start vectors differ between the fits)."""
    views, _ = digits_views(600)
    calls, rounds = [], []
    monkeypatch.setattr(api, "exact_embedding", lambda *a: calls.append(1) or exact_embedding(*a))
    real = api._view_tasks
    monkeypatch.setattr(api, "_view_tasks", lambda *a: rounds.append(a[3]) or real(*a))
    est = ONMSC(K, fusion="early", random_state=0).fit(views)
    assert calls == [] and rounds and set(rounds) == {2}  # the late fit's (and refit's) rounds, orders 1..2
    rounds.clear()
    given = ONMSC(K, fusion="early", n_neighbors=est.n_neighbors_, random_state=0).fit(views)
    assert calls == [] and rounds == [1]
    np.testing.assert_array_equal(est.labels_, given.labels_)
    np.testing.assert_array_equal(est.related_views_, given.related_views_)
