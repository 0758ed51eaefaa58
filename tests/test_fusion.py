"""Late fusion (onmsc_dask.fusion, paper Algorithm 1 and Eqs. 11-15).

- polar: Theorem 1 (argmax_{Q^T Q = I} tr(Q^T C) = U V^T)
- alignment_matrix: the view-correlation matrix M of Eq. 11 (rotation invariant variant)
- simplex_qp: Eq. 15, min mu^T M mu - f^T mu on the simplex, checked by KKT and brute force
- late_fusion: monotone objective on real data (scikit-learn digits, split into views)
"""
import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import ortho_group
from sklearn.datasets import load_digits

from fusion_reference import combine, eigenvalue_scaled, objective
from onmsc_dask.fusion import (GRAM_POLAR_MAX_COND, ScaledViews, alignment_matrix, converged, fuse_views, late_fusion,
                               polar, polar_transform, related_threshold, related_views, shared_structure, simplex_qp)
from onmsc_dask.graph import view_affinity
from onmsc_dask.spectral import average_graph_embedding, embed_graph


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def _orthonormal(rng, n, k):
    return np.linalg.qr(rng.normal(size=(n, k)))[0]


# --------------------------------------------------------------------------- polar (Theorem 1)


@pytest.mark.parametrize("shape", [(30, 4), (7, 7), (100, 10)])
def test_polar_is_the_maximiser(shape):
    rng = np.random.default_rng(sum(shape))
    C = rng.normal(size=shape)
    Q = polar(C)
    assert Q.shape == shape
    np.testing.assert_allclose(Q.T @ Q, np.eye(shape[1]), atol=1e-12)
    best = np.trace(Q.T @ C)
    np.testing.assert_allclose(best, np.linalg.svd(C, compute_uv=False).sum(), rtol=1e-12)  # nuclear norm
    for _ in range(200):
        R = _orthonormal(rng, *shape)
        assert np.trace(R.T @ C) <= best + 1e-12
    # small perturbations of the optimum (retracted to the Stiefel manifold) never do better
    for _ in range(50):
        R = polar(Q + 1e-3 * rng.normal(size=shape))
        assert np.trace(R.T @ C) <= best + 1e-12


def test_polar_rank_deficient():
    rng = np.random.default_rng(0)
    C = rng.normal(size=(20, 2)) @ rng.normal(size=(2, 4))  # rank 2 < k = 4
    Q = polar(C)
    np.testing.assert_allclose(Q.T @ Q, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(np.trace(Q.T @ C), np.linalg.svd(C, compute_uv=False).sum(), rtol=1e-10)


def test_polar_of_a_tall_matrix_through_its_gram_matrix_and_by_svd_when_ill_conditioned():
    """A tall C up to condition GRAM_POLAR_MAX_COND is factored through C^T C with the SVD's numbers; beyond it
    (where squaring the condition would cost accuracy) by the SVD, still orthonormal to rounding."""
    rng = np.random.default_rng(3)
    U, _ = np.linalg.qr(rng.normal(size=(2000, 6)))
    V, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    svd, calls = np.linalg.svd, []
    for cond in (1e3, 1e7):
        C = U @ np.diag(np.logspace(0, np.log10(cond), 6)) @ V.T
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(np.linalg, "svd", lambda *a, **kw: (calls.append(cond), svd(*a, **kw))[1])
            Q = polar(C)
        np.testing.assert_allclose(Q, U @ V.T, atol=1e-9)
        np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=1e-12 if cond > GRAM_POLAR_MAX_COND else 1e-9)
    assert calls == [1e7]  # the SVD only beyond GRAM_POLAR_MAX_COND


@pytest.mark.parametrize("dtype, cond", [(np.float64, 1e3), (np.float64, 1e7), (np.float32, 1e3)])
def test_polar_transform_maps_T_onto_its_polar_factor(dtype, cond):
    """predict's R with polar(T) = T R: the fit's own polar factor for a well-conditioned float64 T, orthonormal
    to float32's rounding for a float32 T (never factored through its Gram matrix, which squares the error)."""
    rng = np.random.default_rng(4)
    U, _ = np.linalg.qr(rng.normal(size=(500, 6)))
    V, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    T = (U @ np.diag(np.logspace(0, np.log10(cond), 6)) @ V.T).astype(dtype)
    Q = T @ polar_transform(T)
    np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=1e-4 if dtype == np.float32 else 1e-9)
    if dtype == np.float64 and cond < GRAM_POLAR_MAX_COND:
        np.testing.assert_array_equal(Q, polar(T))


# --------------------------------------------------------------------------- M of Eq. 11


def _random_H(rng, v=4, O=3, n=40, k=5):
    return np.stack([np.stack([_orthonormal(rng, n, k) for _ in range(O)]) for _ in range(v)])


def test_alignment_matrix_formula_psd_diagonal():
    rng = np.random.default_rng(1)
    H = _random_H(rng)
    v, O, n, k = H.shape
    M = alignment_matrix(H)
    assert M.shape == (v, v)
    np.testing.assert_allclose(M, M.T, atol=0)
    np.testing.assert_allclose(np.diag(M), O, rtol=1e-12)
    assert np.linalg.eigvalsh(M).min() >= -1e-12
    # M_pq = sum_o tr(P_p P_q) / k with the projectors P = H H^T
    ref = np.array([[sum(np.trace(H[p, o] @ H[p, o].T @ H[q, o] @ H[q, o].T) for o in range(O)) / k
                     for q in range(v)] for p in range(v)])
    np.testing.assert_allclose(M, ref, rtol=1e-10)
    assert ((M >= -1e-15) & (M <= O + 1e-12)).all()


def test_alignment_matrix_identical_views():
    rng = np.random.default_rng(2)
    H0 = _random_H(rng, v=1)
    H = np.concatenate([H0, H0, H0])
    np.testing.assert_allclose(alignment_matrix(H), np.full((3, 3), H.shape[1]), rtol=1e-12)


def test_alignment_matrix_invariant_to_rotations_and_sign_flips():
    rng = np.random.default_rng(3)
    H = _random_H(rng)
    M = alignment_matrix(H)
    v, O, n, k = H.shape
    rotated = H.copy()
    for p in range(v):
        for o in range(O):
            rotated[p, o] = H[p, o] @ ortho_group.rvs(k, random_state=10 * p + o)
    np.testing.assert_allclose(alignment_matrix(rotated), M, rtol=1e-10)
    flipped = H.copy()
    flipped[1, 0] *= np.array([1, -1, 1, -1, -1])
    flipped[3, 2] *= -1
    np.testing.assert_allclose(alignment_matrix(flipped), M, rtol=1e-12)
    # rotating a single H_p^(o) only
    single = H.copy()
    single[2, 1] = single[2, 1] @ ortho_group.rvs(k, random_state=99)
    np.testing.assert_allclose(alignment_matrix(single), M, rtol=1e-10)


# --------------------------------------------------------------------------- Eq. 15


def _qp_value(M, f, mu):
    return float(mu @ M @ mu - f @ mu)


def _assert_kkt(M, f, mu, tol=1e-7):
    """Feasibility, stationarity 2 M mu - f + nu 1 - lambda = 0, lambda >= 0, lambda_i mu_i = 0."""
    scale = max(1.0, np.abs(M).max(), np.abs(f).max())
    assert mu.shape == f.shape
    assert np.isfinite(mu).all()
    assert (mu >= 0).all(), mu
    assert abs(mu.sum() - 1) < 1e-12
    g = 2 * M @ mu - f
    support = mu > 1e-9
    assert support.any()
    nu = -g[support].mean()
    lam = g + nu  # multipliers of mu >= 0
    assert np.abs(lam[support]).max() <= tol * scale, ("stationarity on the support", lam[support])
    assert lam.min() >= -tol * scale, ("dual feasibility", lam)
    assert np.abs(lam * mu).max() <= tol * scale, "complementary slackness"


def _random_qp(rng, v, rank=None, f_scale=1.0):
    B = rng.normal(size=(rank if rank is not None else v + 2, v))
    M = B.T @ B / (rank or v)
    f = f_scale * rng.normal(size=v)
    return M, f


def _brute_force_qp(M, f):
    """Minimum of the QP by enumerating supports S and solving the equality-constrained KKT system on S."""
    v = len(f)
    best_val, best_mu = np.inf, None
    for size in range(1, v + 1):
        for S in itertools.combinations(range(v), size):
            S = list(S)
            K = np.zeros((size + 1, size + 1))
            K[:size, :size], K[:size, size], K[size, :size] = 2 * M[np.ix_(S, S)], 1.0, 1.0
            rhs = np.concatenate([f[S], [1.0]])
            sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
            if not np.allclose(K @ sol, rhs, atol=1e-9):
                continue
            mu = np.zeros(v)
            mu[S] = sol[:size]
            if mu.min() < -1e-12:
                continue
            val = _qp_value(M, f, mu)
            if val < best_val:
                best_val, best_mu = val, mu
    return best_val, best_mu


@pytest.mark.parametrize("v", [1, 2, 3, 5, 8, 12, 15])
def test_simplex_qp_kkt_random_psd(v):
    rng = np.random.default_rng(v)
    for trial in range(40):
        rank = None if trial % 2 == 0 else int(rng.integers(1, v + 1))  # every other problem singular-ish
        M, f = _random_qp(rng, v, rank=rank, f_scale=[0.1, 1.0, 10.0][trial % 3])
        mu = simplex_qp(M, f)
        _assert_kkt(M, f, mu)


@pytest.mark.parametrize("v", [2, 4, 6, 8])
def test_simplex_qp_matches_brute_force(v):
    rng = np.random.default_rng(100 + v)
    for trial in range(25 if v < 8 else 10):
        rank = None if trial % 2 == 0 else int(rng.integers(1, v))  # singular M on odd trials
        M, f = _random_qp(rng, v, rank=rank, f_scale=[0.3, 3.0][trial % 2])
        mu = simplex_qp(M, f)
        ref_val, ref_mu = _brute_force_qp(M, f)
        val = _qp_value(M, f, mu)
        assert val <= ref_val + 1e-9 * max(1, abs(ref_val)), (val, ref_val)
        assert val >= ref_val - 1e-9 * max(1, abs(ref_val))
        if rank is None:  # strictly convex: unique minimiser
            np.testing.assert_allclose(mu, ref_mu, atol=1e-7)


@pytest.mark.parametrize("v", [10, 15])
def test_simplex_qp_not_worse_than_slsqp_multistart(v):
    rng = np.random.default_rng(200 + v)
    cons = ({"type": "eq", "fun": lambda x: x.sum() - 1.0, "jac": lambda x: np.ones_like(x)},)
    for trial in range(4):
        M, f = _random_qp(rng, v, rank=[None, 3][trial % 2], f_scale=2.0)
        val = _qp_value(M, f, simplex_qp(M, f))
        ref = min(minimize(lambda x: _qp_value(M, f, x), x0, jac=lambda x: 2 * M @ x - f, method="SLSQP",
                           bounds=[(0, 1)] * v, constraints=cons, options={"ftol": 1e-14, "maxiter": 500}).fun
                  for x0 in rng.dirichlet(np.ones(v), size=8))
        assert val <= ref + 1e-8


def test_simplex_qp_degenerate_cases():
    # M = 0: a linear program, optimum at the vertex of the largest f
    f = np.array([0.1, 0.7, 0.3])
    np.testing.assert_allclose(simplex_qp(np.zeros((3, 3)), f), [0, 1, 0], atol=1e-12)
    # identical views (M = all ones, rank 1): mu^T M mu = 1 on the simplex, again the largest f wins
    np.testing.assert_allclose(simplex_qp(np.ones((4, 4)), np.array([0.0, 0.2, 0.1, -1.0])), [0, 1, 0, 0],
                               atol=1e-12)
    # M = I, f = 0: uniform weights
    np.testing.assert_allclose(simplex_qp(np.eye(5), np.zeros(5)), np.full(5, 0.2), atol=1e-12)
    # M = I, f with one dominant entry: the unconstrained optimum f / 2 shifted onto the simplex
    mu = simplex_qp(np.eye(3), np.array([4.0, 0.0, 0.0]))
    np.testing.assert_allclose(mu, [1, 0, 0], atol=1e-12)
    mu = simplex_qp(np.eye(3), np.array([1.0, 0.5, -5.0]))  # interior of the edge {0,1}: mu = (0.625, 0.375)
    np.testing.assert_allclose(mu, [0.625, 0.375, 0.0], atol=1e-12)
    # one view
    np.testing.assert_allclose(simplex_qp(np.array([[2.0]]), np.array([3.0])), [1.0])


# --------------------------------------------------------------------------- Algorithm 1 on real data


@pytest.fixture(scope="module")
def digits_embeddings():
    """Three views of scikit-learn's digits: top pixel half, bottom pixel half, row/column ink profiles."""
    X, y = load_digits(return_X_y=True)
    X, y = X[::2], y[::2]  # 899 samples keep it fast
    img = X.reshape(-1, 8, 8)
    views = [img[:, :4].reshape(len(X), -1), img[:, 4:].reshape(len(X), -1),
             np.hstack([img.sum(axis=1), img.sum(axis=2)])]
    k, O = 10, 2
    graphs = [view_affinity(V, 15, "cosine") for V in views]
    H = np.stack([embed_graph(A, "exact", k, O, random_state=0)[0] for A in graphs])
    F = average_graph_embedding(graphs, "exact", k, random_state=0)
    return H, F, y


def _initial_point(H, F, lambda1):
    """Algorithm 1's starting point as late_fusion builds it (W aligned to F, mu uniform) and its H*."""
    v, O, _, _ = H.shape
    mu = np.full(v, 1.0 / v)
    W = np.stack([np.stack([polar(H[p, o].T @ F) for o in range(O)]) for p in range(v)])
    return W, mu, polar(combine(H, W, mu) + lambda1 * F)


def _initial_objective(H, F, lambda1, lambda2):
    """J at Algorithm 1's starting point."""
    W, mu, Hstar = _initial_point(H, F, lambda1)
    return objective(H, F, Hstar, W, mu, alignment_matrix(H), lambda1, lambda2)


@pytest.mark.parametrize("lambda1, lambda2", [(1.0, 20.0), (0.1, 0.5), (2.0, 200.0), (0.0, 1e-3)])
def test_late_fusion_monotone_on_digits(digits_embeddings, lambda1, lambda2):
    H, F, _ = digits_embeddings
    v, O, n, k = H.shape
    res = late_fusion(H, F, lambda1, lambda2, tol=0.0, max_iter=25)  # tol=0: run long enough to see drift
    obj = np.asarray(res.objective)
    assert len(obj) == res.n_iter >= 2
    assert np.isfinite(obj).all()
    slack = 1e-10 * np.abs(obj).max()
    assert (np.diff(obj) >= -slack).all(), f"objective decreased: {np.diff(obj).min()}"
    assert obj[0] >= _initial_objective(H, F, lambda1, lambda2) - slack
    # H* orthonormal, W orthogonal, mu on the simplex
    np.testing.assert_allclose(res.embedding.T @ res.embedding, np.eye(k), atol=1e-10)
    assert res.rotations.shape == (v, O, k, k)
    for p in range(v):
        for o in range(O):
            np.testing.assert_allclose(res.rotations[p, o].T @ res.rotations[p, o], np.eye(k), atol=1e-10)
    mu = res.view_weights
    assert mu.shape == (v,) and (mu >= 0).all() and mu.sum() == pytest.approx(1.0, abs=1e-12)
    # the recorded value is J (Eq. 11) of the returned variables
    M = alignment_matrix(H)
    assert obj[-1] == pytest.approx(objective(H, F, res.embedding, res.rotations, mu, M, lambda1, lambda2),
                                    rel=1e-10)
    # Proposition 'upper bound' of the paper (with the normalized M): J <= tr(H*^T S) + lambda1 k
    assert obj[-1] <= O * k + lambda1 * k + 1e-9


@pytest.mark.parametrize("lambda1, lambda2", [(1.0, 20.0), (0.1, 0.5)])
def test_late_fusion_each_block_update_is_its_maximiser(digits_embeddings, lambda1, lambda2):
    """One iteration of Algorithm 1 from its starting H*_0: W maximises tr(H*_0^T H_p W) (Eq. 14), mu maximises
    J over the simplex for H*_0 and that W (Eq. 15), and H* maximises J for that W and mu (Eqs. 12-13).
    Monotonicity alone does not check this: keeping W or mu at their starting values is monotone too."""
    H, F, _ = digits_embeddings
    v, O, n, k = H.shape
    _, mu0, Hstar0 = _initial_point(H, F, lambda1)
    res = late_fusion(H, F, lambda1, lambda2, tol=0.0, max_iter=1)
    W, mu, M = res.rotations, res.view_weights, alignment_matrix(H)
    for p in range(v):
        for o in range(O):
            C = H[p, o].T @ Hstar0
            np.testing.assert_allclose(np.trace(W[p, o].T @ C), np.linalg.svd(C, compute_uv=False).sum(), rtol=1e-10)
    a = np.einsum("ponk,nk->p", np.einsum("ponk,pokj->ponj", H, W), Hstar0)  # tr(H*_0^T sum_o H_p^(o) W_p^(o))

    def J_mu(m):
        return a @ m - lambda2 * m @ M @ m  # the terms of J that depend on mu

    others = np.vstack([np.eye(v), mu0, np.random.default_rng(0).dirichlet(np.ones(v), 200)])
    assert J_mu(mu) >= max(J_mu(m) for m in others) - 1e-9 * abs(J_mu(mu))
    assert np.abs(mu - mu0).max() > 1e-3  # the data move mu off its uniform start
    C = combine(H, W, mu) + lambda1 * F
    np.testing.assert_allclose(np.sum(res.embedding * C), np.linalg.svd(C, compute_uv=False).sum(), rtol=1e-10)


def test_late_fusion_converges_and_clusters_digits(digits_embeddings):
    from onmsc_dask.assign import assign_labels
    from onmsc_dask.metrics import accuracy

    H, F, y = digits_embeddings
    res = late_fusion(H, F, 1.0, 20.0)
    assert res.converged and 1 < res.n_iter < 100
    # the stopping rule: the last relative change of J is at most tol = 1e-4, every earlier one above it
    J = np.array(res.objective)
    change = np.abs(np.diff(J)) / np.abs(J[1:])
    assert change[-1] <= 1e-4 and np.all(change[:-1] > 1e-4)
    labels, _ = assign_labels(res.embedding, 10, random_state=0)
    assert accuracy(y, labels) > 0.7


def test_converged_is_the_relative_change_rule():
    assert converged(100.0, 100.0 + 1e-2, 1e-4) and not converged(100.0, 100.0 + 2e-2, 1e-4)
    assert converged(-5.0, -5.0, 0.0) and not converged(0.0, 1e-12, 1e-4)


def test_late_fusion_invariant_to_eigenvector_signs(digits_embeddings):
    """Flipping signs / rotating the input H_p^(o) (both arbitrary for eigenvectors) gives the same H* H*^T."""
    H, F, _ = digits_embeddings
    ref = late_fusion(H, F, 1.0, 20.0)
    H2 = H.copy()
    H2[0, 1] = H2[0, 1] @ ortho_group.rvs(H.shape[-1], random_state=0)
    H2[2, 0] *= -1
    res = late_fusion(H2, F, 1.0, 20.0)
    P, P_ref = res.embedding @ res.embedding.T, ref.embedding @ ref.embedding.T
    assert np.abs(P - P_ref).max() < 1e-6
    np.testing.assert_allclose(res.view_weights, ref.view_weights, atol=1e-8)


def test_late_fusion_rejects_nonpositive_lambda2(digits_embeddings):
    H, F, _ = digits_embeddings
    with pytest.raises(ValueError, match="lambda2"):
        late_fusion(H, F, 1.0, 0.0)


def test_eigenvalue_scaled_is_the_rank_k_factor_and_fusion_stays_monotone(digits_embeddings):
    """H Lambda^1/2 (H Lambda^1/2)^T = H Lambda H^T, negative eigenvalues clipped; Algorithm 1 on the scaled
    embeddings keeps a non-decreasing objective."""
    H, F, *_ = digits_embeddings
    v, O, _, k = H.shape
    lam = np.random.default_rng(0).uniform(-0.1, 1.0, size=(v, O, k))
    Hs = eigenvalue_scaled(H, lam)
    P = Hs[1, 0] @ Hs[1, 0].T
    np.testing.assert_allclose(P, H[1, 0] @ np.diag(np.clip(lam[1, 0], 0, None)) @ H[1, 0].T, atol=1e-12)
    res = late_fusion(Hs, F, 1.0, k * O, tol=0.0, max_iter=25)
    assert np.all(np.diff(res.objective) >= -1e-9 * np.abs(res.objective).max())


def test_fuse_views_scales_block_by_block_without_a_copy_of_h():
    """fuse_views equals late_fusion of eigenvalue_scaled(H[used]) (the same blocks, formed one at a time), also on a
    broadcast H (an anchor graph's orders share one H per view), and its peak memory stays below one copy of H:
    besides H and F it holds S, T and H* of one iteration and a few n x k temporaries."""
    import tracemalloc

    rng = np.random.default_rng(0)
    v, O, n, k = 4, 3, 20000, 6
    H = np.stack([np.stack([_orthonormal(rng, n, k) for _ in range(O)]) for _ in range(v)])
    F, lam, used = _orthonormal(rng, n, k), rng.uniform(0.2, 1.0, (v, O, k)), np.array([0, 2, 3])
    ref = late_fusion(eigenvalue_scaled(H[used], lam[used]), F, 1.0, k * O, max_iter=5)
    tracemalloc.start()
    try:
        res = fuse_views(H, lam, F, used, 1.0, k * O, max_iter=5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(res.embedding, ref.embedding, atol=1e-12)
    np.testing.assert_allclose(res.view_weights, ref.view_weights, atol=1e-12)
    assert peak < H[used].nbytes, (peak, H[used].nbytes)
    assert ScaledViews(H, np.sqrt(lam), used).shape == (3, O, n, k)
    shared = np.broadcast_to(H[:, :1], H.shape)  # every order a view of the first
    np.testing.assert_allclose(fuse_views(shared, lam, F, used, 1.0, k * O, max_iter=5).embedding,
                               late_fusion(eigenvalue_scaled(np.ascontiguousarray(shared[used]), lam[used]), F, 1.0,
                                           k * O, max_iter=5).embedding, atol=1e-12)


def test_scaled_views_products_equal_those_of_the_scaled_blocks():
    """ScaledViews.cross, .combine and alignment_matrix give the numbers of the explicitly scaled blocks, for
    distinct blocks per order and for a broadcast H (whose one block per view they multiply once: ``blocks``)."""
    rng = np.random.default_rng(1)
    v, O, n, k = 3, 2, 500, 4
    lam, used = rng.uniform(0.2, 1.0, (v, O, k)), np.array([0, 2])
    X, W, mu = rng.normal(size=(n, k)), rng.normal(size=(len(used), O, k, k)), np.array([0.3, 0.7])
    distinct = np.stack([np.stack([_orthonormal(rng, n, k) for _ in range(O)]) for _ in range(v)])
    for H, blocks in ((distinct, O), (np.broadcast_to(distinct[:, :1], distinct.shape), 1)):
        views, dense = ScaledViews(H, np.sqrt(lam), used), eigenvalue_scaled(np.ascontiguousarray(H[used]), lam[used])
        assert views.blocks == blocks
        np.testing.assert_allclose(views.cross(X), np.einsum("ponk,nj->pokj", dense, X), atol=1e-12)
        np.testing.assert_allclose(views.combine(W, mu), np.einsum("p,ponk,pokj->nj", mu, dense, W), atol=1e-12)
        np.testing.assert_allclose(alignment_matrix(views), alignment_matrix(dense), atol=1e-12)


def test_shared_structure_excludes_the_trivial_direction_and_related_views_flags_noise(digits_embeddings):
    """s_pq ignores the top (degree) eigenvector; a random view shares only chance ((k-1)/n) with the digit views
    and is flagged, the digit views share far more and are kept."""
    H, *_ = digits_embeddings
    v, O, n, k = H.shape
    rng = np.random.default_rng(0)
    trivial = H[0, :, :, :1]  # the same top direction as view 0, random cluster directions
    noise = np.linalg.qr(np.concatenate([trivial[0], rng.normal(size=(n, k - 1))], axis=1))[0]
    Hn = np.concatenate([H, np.repeat(noise[None, None], O, axis=1)])
    S = shared_structure(Hn)
    np.testing.assert_allclose(S, S.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(S), 1.0, atol=1e-10)
    assert S[v, :v].max() < related_threshold(n, k, v + 1) < 0.2 < S[:v, :v][~np.eye(v, dtype=bool)].min()
    keep, best = related_views(Hn)
    assert keep.tolist() == [True] * v + [False] and best[v] == S[v, :v].max()


def test_related_views_keeps_all_when_none_is_related():
    rng = np.random.default_rng(1)
    H = np.stack([_orthonormal(rng, 400, 5)[None] for _ in range(3)])
    keep, best = related_views(H)
    assert keep.all() and (best < related_threshold(400, 5, 3)).all()
    assert related_views(H[:1])[0].tolist() == [True]  # a single view is always used


@pytest.mark.parametrize("k", [2, 3, 10])
def test_related_threshold_is_calibrated_for_independent_views(k):
    """Two independent random views exceed the threshold about UNRELATED_ALPHA / (v - 1) of the time at any k
    (a fixed 3 x chance kept a noise view in 6 of 40 runs at k = 2); a shared cluster direction passes it."""
    rng = np.random.default_rng(k)
    n, v, trials = 400, 3, 400
    ones = np.full((n, 1), n ** -0.5)
    exceed = 0
    for _ in range(trials):
        H = np.stack([np.linalg.qr(np.hstack([ones, rng.normal(size=(n, k - 1))]))[0][None] for _ in range(2)])
        exceed += shared_structure(H)[0, 1] > related_threshold(n, k, v)
    assert exceed <= 3  # expected 0.2 at alpha = 1e-3 / 2
    shared = np.linalg.qr(np.hstack([ones, rng.normal(size=(n, k - 1))]))[0]
    partner = np.linalg.qr(np.hstack([ones, shared[:, 1:2] + 0.5 * rng.normal(size=(n, 1)) / np.sqrt(n),
                                      rng.normal(size=(n, k - 2))]))[0]
    assert shared_structure(np.stack([shared[None], partner[None]]))[0, 1] > related_threshold(n, k, v)
