"""Per-view graphs (onmsc_dask.graph) against dense numpy references.

Paper: Eq. 1 (kNN affinity, linked iff either point is among the other's N nearest neighbours),
Eq. 2 (degrees D = A 1), and the high-order affinity A^(o) = A^(o-1) A with G = D^-1/2 A^o D^-1/2.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from onmsc_dask import graph
from onmsc_dask.graph import (NormalizedHighOrderAffinity, anchor_affinity, build_graph,
                              default_n_neighbors, knn_affinity, local_scale, nearest_neighbors,
                              rank_consensus_affinity, ranked_neighbors_count, resolve_metric, select_landmarks,
                              view_affinity)


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def _blobs(n=120, d=5, k=3, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(k, d))
    y = np.arange(n) % k
    return centres[y] + rng.normal(size=(n, d)) + shift, y


def _dense_distances(X, metric):
    """All pairwise distances, euclidean or cosine (1 - cos), self excluded via +inf on the diagonal."""
    if metric == "cosine":
        U = X / np.linalg.norm(X, axis=1, keepdims=True)
        D = 1.0 - U @ U.T
    else:
        sq = (X * X).sum(1)
        D = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0))
    np.fill_diagonal(D, np.inf)
    return D


def _dense_knn(X, n_neighbors, metric):
    D = _dense_distances(X, metric)
    ind = np.argsort(D, axis=1, kind="stable")[:, :n_neighbors]
    return ind, np.take_along_axis(D, ind, axis=1)


def _dense_affinity(A):
    return A.toarray() if sp.issparse(A) else np.asarray(A)


# --------------------------------------------------------------------------- nearest neighbours


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_brute_knn_matches_dense_reference(metric):
    X, _ = _blobs(n=150, d=6, seed=1, shift=3.0)  # shift keeps cosine well defined and non-trivial
    ind, dist = nearest_neighbors(X, 8, metric)
    ref_ind, ref_dist = _dense_knn(X, 8, metric)
    assert ind.shape == dist.shape == (150, 8)
    assert ind.dtype == np.int64 and dist.dtype == np.float64
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-7, atol=1e-10)
    np.testing.assert_array_equal(ind, ref_ind)  # continuous random data: no ties
    assert not (ind == np.arange(150)[:, None]).any(), "a point must not be its own neighbour"
    assert (np.diff(dist, axis=1) >= -1e-12).all(), "distances sorted ascending"


def test_cosine_distance_is_one_minus_cos_and_scale_invariant():
    X, _ = _blobs(n=80, d=4, seed=2, shift=2.0)
    ind, dist = nearest_neighbors(X, 5, "cosine")
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    cos = np.einsum("ij,ikj->ik", U, U[ind])
    np.testing.assert_allclose(dist, 1.0 - cos, atol=1e-10)
    assert ((dist >= -1e-12) & (dist <= 2 + 1e-12)).all()
    # cosine neighbours ignore the length of each row
    scales = np.random.default_rng(0).uniform(0.1, 10.0, size=(80, 1))
    ind2, dist2 = nearest_neighbors(X * scales, 5, "cosine")
    np.testing.assert_array_equal(ind2, ind)
    np.testing.assert_allclose(dist2, dist, atol=1e-10)


def test_sparse_input_matches_dense():
    rng = np.random.default_rng(3)
    Xd = rng.random((90, 30)) * (rng.random((90, 30)) < 0.4)
    Xd[:, 0] += 0.1  # no all-zero rows
    for metric in ("euclidean", "cosine"):
        ind_s, dist_s = nearest_neighbors(sp.csr_matrix(Xd), 6, metric)
        ind_d, dist_d = nearest_neighbors(Xd, 6, metric)
        np.testing.assert_allclose(dist_s, dist_d, atol=1e-10)
        np.testing.assert_array_equal(ind_s, ind_d)


def test_pynndescent_path_recall(monkeypatch):
    """Above BRUTE_FORCE_MAX_SAMPLES the approximate index is used; it must agree with brute force."""
    X, _ = _blobs(n=600, d=8, k=4, seed=4)
    n_neighbors = 10
    brute_ind, brute_dist = nearest_neighbors(X, n_neighbors, "euclidean")
    monkeypatch.setattr(graph, "BRUTE_FORCE_MAX_SAMPLES", 100)
    ind, dist = nearest_neighbors(X, n_neighbors, "euclidean", random_state=0)
    assert ind.shape == dist.shape == (600, n_neighbors)
    assert not (ind == np.arange(600)[:, None]).any(), "self must be dropped from the approximate graph"
    hits = sum(len(set(a) & set(b)) for a, b in zip(ind, brute_ind))
    recall = hits / brute_ind.size
    assert recall >= 0.9, f"pynndescent recall {recall:.3f} < 0.9"
    # the reported distances are true distances to the reported neighbours
    true = np.linalg.norm(X[:, None, :] - X[ind], axis=2)
    np.testing.assert_allclose(dist, true, rtol=1e-4, atol=1e-4)  # pynndescent works in float32
    # and the affinity built from it is a valid Eq. 1 graph
    A = knn_affinity(ind, dist)
    assert abs(A - A.T).max() == 0 and (A.data > 0).all()
    # cosine through the approximate index: distances are 1 - cos as on the brute-force path
    Xc = X + 3.0
    monkeypatch.setattr(graph, "BRUTE_FORCE_MAX_SAMPLES", 10**9)
    brute_c, _ = nearest_neighbors(Xc, n_neighbors, "cosine")
    monkeypatch.setattr(graph, "BRUTE_FORCE_MAX_SAMPLES", 100)
    ind_c, dist_c = nearest_neighbors(Xc, n_neighbors, "cosine", random_state=0)
    U = Xc / np.linalg.norm(Xc, axis=1, keepdims=True)
    np.testing.assert_allclose(dist_c, 1.0 - np.einsum("ij,ikj->ik", U, U[ind_c]), atol=1e-5)
    assert sum(len(set(a) & set(b)) for a, b in zip(ind_c, brute_c)) / brute_c.size >= 0.9
    # exact duplicates: the index may list a twin before the point itself; self must still be dropped
    Xd = np.vstack([X[:300], X[:300]])
    ind_d, dist_d = nearest_neighbors(Xd, n_neighbors, "euclidean", random_state=0)
    assert ind_d.shape == (600, n_neighbors)
    assert not (ind_d == np.arange(600)[:, None]).any()
    twin = (np.arange(600) + 300) % 600
    assert np.mean((ind_d == twin[:, None]).any(axis=1)) >= 0.9
    assert np.isfinite(knn_affinity(ind_d, dist_d).data).all()


def test_exact_search_up_to_the_threshold_pynndescent_above(monkeypatch):
    """Up to BRUTE_FORCE_MAX_SAMPLES (lowered here) the search is exact, NNDescent never built, also for the long
    ranked list of the consensus graph; one sample more and pynndescent builds the graph, with the ranked list cut
    to APPROXIMATE_RANKED_NEIGHBORS x N."""
    import pynndescent

    built, real = [], pynndescent.NNDescent
    monkeypatch.setattr(pynndescent, "NNDescent",
                        lambda data, **kwargs: built.append(data.shape) or real(data, **kwargs))
    monkeypatch.setattr(graph, "BRUTE_FORCE_MAX_SAMPLES", 300)
    X, _ = _blobs(n=301, d=8, k=2, seed=5, shift=3.0)
    L = ranked_neighbors_count(300, 2, 10)
    assert L == 149  # n / k - 1: the exact search's list
    for metric in ("euclidean", "cosine"):
        ind, dist = nearest_neighbors(X[:300], L, metric, random_state=0)
        ref_ind, ref_dist = _dense_knn(X[:300], L, metric)
        np.testing.assert_array_equal(ind, ref_ind)
        np.testing.assert_allclose(dist, ref_dist, rtol=1e-7, atol=1e-10)
    assert built == []
    assert ranked_neighbors_count(301, 2, 10) == graph.APPROXIMATE_RANKED_NEIGHBORS * 10
    ind, _ = nearest_neighbors(X, 20, "euclidean", random_state=0)
    assert built == [(301, 8)] and ind.shape == (301, 20)


# --------------------------------------------------------------------------- Eq. 1


def test_knn_affinity_eq1_structure_and_weights():
    X, _ = _blobs(n=100, d=4, seed=5)
    m = 9
    ind, dist = nearest_neighbors(X, m, "euclidean")
    A = knn_affinity(ind, dist)
    n = X.shape[0]
    assert sp.isspmatrix_csr(A) or isinstance(A, sp.csr_array)
    Ad = A.toarray()
    np.testing.assert_array_equal(Ad, Ad.T)
    assert (np.diag(Ad) == 0).all(), "no self loops"
    # linked iff i is among j's neighbours or j among i's (Eq. 1)
    in_list = np.zeros((n, n), bool)
    in_list[np.repeat(np.arange(n), m), ind.ravel()] = True
    linked = in_list | in_list.T
    np.testing.assert_array_equal(Ad != 0, linked)
    assert (Ad[linked] > 0).all() and (Ad[linked] <= 1.0).all()
    # weights: self-tuning Gaussian, sigma_i = distance to the 7th neighbour
    Dfull = np.sqrt(((X[:, None, :] - X[None]) ** 2).sum(-1))
    sigma = np.sort(Dfull + np.diag(np.full(n, np.inf)), axis=1)[:, 6]
    ref = np.exp(-Dfull**2 / np.outer(sigma, sigma))
    np.testing.assert_allclose(Ad[linked], ref[linked], rtol=1e-10)


def test_knn_affinity_with_duplicates_is_finite():
    rng = np.random.default_rng(6)
    base = rng.normal(size=(20, 3))
    X = np.vstack([base, base, base, np.zeros((12, 3)) + 5.0])  # triplicates + a block of 12 identical rows
    ind, dist = nearest_neighbors(X, 8, "euclidean")
    assert (dist[-12:, :8] == 0).all()  # the block: every neighbour at distance 0, sigma would be 0
    A = knn_affinity(ind, dist)
    assert np.isfinite(A.data).all()
    assert (A.data > 0).all()
    assert abs(A - A.T).max() == 0
    Ad = A.toarray()
    i, j = 60, 61  # two identical rows of the block are linked with weight exp(0) = 1
    assert Ad[i, j] == pytest.approx(1.0)
    # and the high-order operator on it is well defined
    G = NormalizedHighOrderAffinity(A, 2)
    assert np.isfinite(G @ np.ones(X.shape[0])).all()


def test_knn_affinity_all_identical_rows():
    X = np.ones((15, 2))
    A = knn_affinity(*nearest_neighbors(X, 5, "euclidean"))
    assert np.isfinite(A.data).all() and (A.data > 0).all()


def test_check_components_warns_up_to_k_pieces_and_raises_above():
    rng = np.random.default_rng(7)
    X = np.vstack([rng.normal(size=(30, 2)) + 1000.0 * i for i in range(3)])
    A = view_affinity(X, 5, "euclidean")
    assert graph.n_components(A) == 3
    with pytest.warns(UserWarning, match="view 1: its graph has 3 disconnected pieces"):
        graph.check_components(A, "view 1", 3)
    with pytest.raises(ValueError, match="view 1: its graph falls apart into 3 disconnected pieces, more than "
                                         "n_clusters=2"):
        graph.check_components(A, "view 1", 2)
    with pytest.warns(UserWarning, match="3 disconnected pieces"):  # 4 eigenvectors hold every piece's indicator
        graph.check_components(A, "view 1", 2, width=4)
    with pytest.raises(ValueError, match=r"more than n_components=2 \(the embedding width.*\), so its top-2 "):
        graph.check_components(A, "view 1", 1, width=2)
    Z = np.kron(np.eye(3), np.ones((30, 2))) * rng.uniform(0.1, 1.0, size=(90, 6))  # 2 landmarks per blob
    Z[29, 2] = 0.5  # a point of blob 0 also linked to a landmark of blob 1
    Z = sp.csr_matrix(Z)
    A = sp.csr_matrix(Z @ sp.diags(1.0 / np.asarray(Z.sum(axis=0)).ravel()) @ Z.T)  # A = Z Lambda^-1 Z^T
    assert graph.n_components(Z, anchor=True) == 2 == graph.n_components(A)
    assert graph.n_components(sp.csr_matrix(np.ones((90, 1))), anchor=True) == 1  # one landmark joins every sample
    square = sp.csr_matrix(np.eye(4)[[3, 3, 0, 0]])  # m = n: samples 0, 1 share landmark 3; 2, 3 landmark 0
    assert graph.n_components(square, anchor=True) == 2 and graph.n_components(square) == 1


# --------------------------------------------------------------------------- high-order operator


@pytest.mark.parametrize("order", [1, 2, 3])
def test_normalized_high_order_affinity_matches_dense(order):
    X, _ = _blobs(n=70, d=3, seed=8)
    A = knn_affinity(*nearest_neighbors(X, 6, "euclidean"))
    Ad = A.toarray()
    Ao = np.linalg.matrix_power(Ad, order)
    deg = Ao.sum(axis=1)  # Eq. 2 for A^o
    Gd = Ao / np.sqrt(np.outer(deg, deg))
    G = NormalizedHighOrderAffinity(A, order)
    assert G.shape == (70, 70)
    rng = np.random.default_rng(order)
    x = rng.normal(size=70)
    Y = rng.normal(size=(70, 4))
    np.testing.assert_allclose(G @ x, Gd @ x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G.matvec(x), Gd @ x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G @ Y, Gd @ Y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G.matmat(Y), Gd @ Y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G.rmatvec(x), Gd.T @ x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G @ np.eye(70), Gd, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G.power(x), Ao @ x, rtol=1e-10)
    # D^1/2 1 is an eigenvector of G with eigenvalue 1 (largest), a property of the normalization
    s = np.sqrt(deg)
    np.testing.assert_allclose(G @ s, s, rtol=1e-10)


def test_normalized_high_order_affinity_rejects_order_zero():
    A = sp.csr_matrix(np.ones((3, 3)) - np.eye(3))
    with pytest.raises(ValueError, match="order"):
        NormalizedHighOrderAffinity(A, 0)


def test_normalized_high_order_affinity_isolated_point():
    A = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], float))
    with pytest.warns(UserWarning, match="isolated"):
        G = NormalizedHighOrderAffinity(A, 1)
    out = G @ np.ones(3)
    assert np.isfinite(out).all() and out[2] == 0


# --------------------------------------------------------------------------- anchor graphs


def test_anchor_affinity_rows_link_nearest_landmarks():
    X, _ = _blobs(n=90, d=4, seed=9)
    L = select_landmarks(X, 12, random_state=0)
    assert L.shape == (12, 4)
    Z = anchor_affinity(X, L, 3, "euclidean")
    assert Z.shape == (90, 12)
    np.testing.assert_allclose(np.asarray(Z.sum(axis=1)).ravel(), 1.0, rtol=1e-12)
    assert (np.diff(Z.indptr) == 3).all() and (Z.data > 0).all()
    # each row links to its 3 nearest landmarks
    nearest = np.argsort(((X[:, None] - L[None]) ** 2).sum(-1), axis=1)[:, :3]
    for i in range(90):
        assert set(Z[i].indices) == set(nearest[i])
    np.testing.assert_allclose(np.asarray(Z.sum(axis=1)).ravel(), 1.0)  # rows sum to 1, so A 1 = 1
    # weights: Gaussian of the distance, width the distance to the 3rd (farthest linked) landmark, rows normalized
    d = np.sqrt(np.take_along_axis(((X[:, None] - L[None]) ** 2).sum(-1), nearest, axis=1))
    w = np.exp(-(d / d[:, -1:]) ** 2)
    w /= w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.take_along_axis(Z.toarray(), nearest, axis=1), w, rtol=1e-10)
    assert np.abs(w - 1 / 3).max() > 0.1  # the data tell the weights apart (uniform weights would fail)


def test_landmark_search_is_exact_where_float32_cannot_tell():
    """Rows just off the midpoint of two landmarks 1e-3 apart: their distances differ by ~1e-8 of scores of
    ~30, below float32's resolution, so those rows are ranked again in float64 (a float32-only search gets about
    half of them wrong); elsewhere, dense float32 / float64 and sparse rows give the brute-force float64 answer."""
    rng = np.random.default_rng(0)
    L = rng.normal(size=(40, 30))
    L[1::2] = L[::2] + 1e-3 * rng.normal(size=(20, 30))
    pair, t = rng.integers(0, 20, 300), rng.choice([-1e-3, 1e-3], 300)
    a, b = L[2 * pair + (t < 0)], L[2 * pair + (t > 0)]
    X = (a + b) / 2 + np.abs(t)[:, None] * (a - b)  # closer to a
    for r in (1, 2):
        ind, sq = graph.nearest_landmarks(X, L, r)
        np.testing.assert_array_equal(ind[:, 0], 2 * pair + (t < 0))
    Y = rng.normal(size=(500, 30))
    ref = ((Y[:, None] - L[None]) ** 2).sum(-1)
    for Xm, Lm in ((Y, L), (Y.astype(np.float32), L), (sp.csr_matrix(Y), L), (Y, sp.csr_matrix(L))):
        for r in (3, 10, 40):  # few: repeated argmin; more: argpartition; all landmarks
            ind, sq = graph.nearest_landmarks(Xm, Lm, r)
            expected = np.argsort(ref, axis=1, kind="stable")[:, :r]
            np.testing.assert_array_equal(ind, expected)
            rtol = 1e-6 if Xm.dtype == np.float32 else 1e-10
            np.testing.assert_allclose(sq, np.take_along_axis(ref, expected, axis=1), rtol=rtol)


def test_build_graph_dispatch():
    X, _ = _blobs(n=80, d=3, seed=11)
    kw = dict(n_neighbors=7, metric="euclidean", n_landmarks=10, n_nearest_landmarks=3, random_state=0)
    A, none = build_graph(X, "exact", **kw)
    assert A.shape == (80, 80) and none is None
    np.testing.assert_allclose(A.toarray(), knn_affinity(*nearest_neighbors(X, 7, "euclidean")).toarray())
    A2, (ind, dist) = build_graph(X, "exact", n_ranked=20, **kw)  # the same graph, and 20 ranked neighbours
    np.testing.assert_allclose(A2.toarray(), A.toarray())
    ref_ind, ref_dist = nearest_neighbors(X, 20, "euclidean")
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, ref_dist)
    Z, landmarks = build_graph(X, "anchor", **kw)
    assert Z.shape == (80, 10) and landmarks.shape == (10, 3)
    np.testing.assert_array_equal(Z.toarray(), anchor_affinity(X, landmarks, 3, "euclidean").toarray())
    Z2 = build_graph(X, "anchor", **kw)[0]
    np.testing.assert_array_equal(Z.toarray(), Z2.toarray())  # seeded landmarks are deterministic


def test_exact_neighbours_break_ties_by_index():
    """Rounded rows tie at many distances; the brute-force search returned the tied neighbours in an order that
    depended on how many were asked for, so the rank path (first N of L) changed the views' own graphs."""
    X = np.random.default_rng(0).integers(0, 3, (300, 4)).astype(float)
    ind, dist = nearest_neighbors(X, 60, "euclidean")
    step, next_index = np.diff(dist, axis=1), np.diff(ind, axis=1)
    assert np.all((step > 0) | ((step == 0) & (next_index > 0))) and not np.any(ind == np.arange(300)[:, None])
    for N in (5, 10, 23):
        short = nearest_neighbors(X, N, "euclidean")
        np.testing.assert_array_equal(short[0], ind[:, :N])
        A, (ranked, _) = build_graph(X, "exact", n_neighbors=N, metric="euclidean", n_landmarks=0,
                                     n_nearest_landmarks=3, n_ranked=60)
        assert abs(A - view_affinity(X, N, "euclidean")).nnz == 0
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) + np.diag(np.full(300, np.inf))  # dense reference
    ref = np.lexsort((np.broadcast_to(np.arange(300), d2.shape), d2), axis=1)[:, :60]
    np.testing.assert_array_equal(ind, ref)


def _within_class_share(A: sp.spmatrix, y: np.ndarray) -> float:
    C = A.tocoo()
    return float(C.data[y[C.row] == y[C.col]].sum() / C.data.sum())


def test_rank_consensus_affinity_matches_a_dense_borda_count():
    """Dense reference: Borda points L + 1 - rank (0 unlisted), summed over views and both directions; each row
    keeps its N largest counts (equal counts by affinity); the edge weight is the mean over views of the listed Eq. 1
    kernel (widths from the view's N nearest), 0 in a view that lists neither end; symmetric by max."""
    rng = np.random.default_rng(3)
    n, L, N = 40, 9, 4
    views = [rng.normal(size=(n, d)) for d in (3, 5, 2)]
    lists = [nearest_neighbors(X, L, "euclidean") for X in views]
    count, kernel = np.zeros((n, n)), np.zeros((n, n))
    for ind, dist in lists:
        s = local_scale(dist[:, :N])
        P, K = np.zeros((n, n)), np.zeros((n, n))
        for i in range(n):
            for r, (j, d) in enumerate(zip(ind[i], dist[i])):
                P[i, j] = L - r
                K[i, j] = np.exp(-d**2 / (s[i] * s[j]))
        count += P + P.T
        kernel += np.maximum(K, K.T) / len(views)
    W = np.zeros((n, n))
    for i in range(n):
        for j in np.lexsort((-kernel[i], -count[i]))[:N]:
            W[i, j] = kernel[i, j]
    A = rank_consensus_affinity(lists, N)
    np.testing.assert_allclose(A.toarray(), np.maximum(W, W.T), rtol=1e-12)
    assert ((A > 0).sum(axis=1) >= N).all()
    # the same graph whatever the order of the samples (equal counts are frequent; they are not broken by index)
    perm = rng.permutation(n)
    B = rank_consensus_affinity([nearest_neighbors(X[perm], L, "euclidean") for X in views], N)
    np.testing.assert_allclose(B.toarray(), A.toarray()[np.ix_(perm, perm)], rtol=1e-12)


def test_rank_consensus_keeps_the_edges_the_views_agree_on():
    """Two informative views (different noise) and one weak view: the average graph takes every edge the weak
    view proposes; the rank-consensus graph keeps mostly within-class edges, more than the average graph and
    than either informative view alone (the effect measured on Handwritten: 0.705 -> 0.949, docs/defaults.md)."""
    rng = np.random.default_rng(7)
    k, n, N = 4, 240, 10
    y = np.arange(n) % k
    centres = rng.normal(scale=1.6, size=(2, k, 6))
    views = [centres[p][y] + rng.normal(size=(n, 6)) for p in range(2)] + [
        0.5 * np.eye(k)[y] @ rng.normal(size=(k, 4)) + rng.normal(size=(n, 4))]
    L = ranked_neighbors_count(n, k, N)
    lists = [nearest_neighbors(X, L, "euclidean") for X in views]
    graphs = [knn_affinity(ind[:, :N], dist[:, :N]) for ind, dist in lists]
    consensus = _within_class_share(rank_consensus_affinity(lists, N), y)
    average = _within_class_share(sum(graphs) / 3, y)
    best_view = max(_within_class_share(A, y) for A in graphs)
    assert consensus > average + 0.1 and consensus > best_view, (consensus, average, best_view)


def test_ranked_neighbors_count_rule():
    assert ranked_neighbors_count(2000, 10, 15) == 199  # the mean cluster size less one (Handwritten)
    assert ranked_neighbors_count(60, 10, 5) == 5  # at least N
    assert ranked_neighbors_count(8000, 10, 15) == graph.MAX_RANKED_NEIGHBORS  # exact search
    assert ranked_neighbors_count(100_000, 10, 15) == graph.APPROXIMATE_RANKED_NEIGHBORS * 15  # pynndescent
    assert ranked_neighbors_count(30, 1, 15) == 29  # at most n - 1


# --------------------------------------------------------------------------- defaults


def test_resolve_metric_rule():
    rng = np.random.default_rng(12)
    nonneg = rng.random((10, 3))
    mixed = rng.normal(size=(10, 3))
    assert resolve_metric(nonneg) == "cosine"
    assert resolve_metric(nonneg, "auto") == "cosine"
    assert resolve_metric(np.zeros((4, 2)) + np.eye(4, 2)) == "cosine"  # zeros count as non-negative
    assert resolve_metric(mixed) == "euclidean"
    barely_negative = nonneg.copy()
    barely_negative[3, 1] = -1e-9
    assert resolve_metric(barely_negative) == "euclidean"
    assert resolve_metric(sp.random(20, 5, density=0.3, format="csr", random_state=0)) == "cosine"
    S = sp.random(20, 5, density=0.3, format="csr", random_state=0)
    S.data[0] = -1.0
    assert resolve_metric(S) == "euclidean"
    assert resolve_metric(nonneg, "euclidean") == "euclidean"
    assert resolve_metric(mixed, "cosine") == "cosine"
    with pytest.raises(ValueError, match="metric"):
        resolve_metric(nonneg, "manhattan")


def test_default_n_neighbors():
    assert default_n_neighbors(60, 10) == 5  # floor of 5
    assert default_n_neighbors(200, 10) == 10  # n / (2k)
    assert default_n_neighbors(10**6, 10) == 15  # ceiling of 15
    assert default_n_neighbors(5, 2) == 4  # never more than n - 1


def test_auto_metric_rule_by_data_nature():
    """counts for sparse non-negative integers, cosine for other non-negative data, euclidean otherwise."""
    rng = np.random.default_rng(0)
    words = sp.random(50, 400, density=0.02, random_state=0, data_rvs=lambda n: rng.integers(1, 5, n)).tocsr()
    assert resolve_metric(words) == "counts"
    assert resolve_metric(words.toarray() + 0.5) == "cosine"  # not integer
    assert resolve_metric(rng.integers(0, 7, (50, 20)).astype(float)) == "cosine"  # dense counts/intensities
    assert resolve_metric(rng.normal(size=(50, 5))) == "euclidean"


def _line_view(n=300, seed=0):
    """Three blobs in two columns of unit scale beside a third column of noise 100x wider: in euclidean distances
    the noise column is almost all there is (a line view)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [3.0, 6.0]])
    return np.column_stack([centres[y] + rng.normal(size=(n, 2)), rng.normal(scale=100.0, size=n)]), y


def test_effective_columns_count_the_columns_the_distances_spread_over():
    rng = np.random.default_rng(3)
    assert graph.effective_columns(rng.normal(size=(2000, 6)), "euclidean") == pytest.approx(6, rel=0.05)
    X, _ = _line_view()
    assert graph.effective_columns(X, "euclidean") < 1.1
    assert graph.effective_columns(X / graph.column_scale(X), "euclidean") == pytest.approx(3, rel=0.05)
    S = sp.random(500, 40, density=0.1, format="csr", random_state=0)
    assert graph.effective_columns(S, "cosine") == pytest.approx(graph.effective_columns(S.toarray(), "cosine"))
    # cosine sees the unit rows: non-negative rows whose directions turn in one plane only are a line view too
    turning = np.column_stack([np.ones(300), rng.random(300), 0.01 * rng.random((300, 3))])
    assert graph.effective_columns(turning, "cosine") < 2 < graph.effective_columns(rng.random((300, 5)), "cosine")
    assert graph.effective_columns(np.ones((10, 3)), "euclidean") == np.inf  # no variance


def test_auto_metric_standardizes_a_line_view_only():
    X, y = _line_view()
    assert resolve_metric(X) == "standardized"
    assert resolve_metric(X, "euclidean") == "euclidean"  # a given metric stays
    assert resolve_metric(X[:, :1]) == "euclidean"  # one feature: nothing to rescale
    blobs, _ = _blobs()
    assert resolve_metric(blobs) == "euclidean"  # columns of similar scale: unchanged
    assert resolve_metric(np.abs(blobs)) == "cosine"
    # the standardized metric is euclidean on columns divided by their standard deviation
    ind, dist = nearest_neighbors(X, 8, "standardized")
    ind_e, dist_e = nearest_neighbors(X / X.std(axis=0), 8, "euclidean")
    np.testing.assert_array_equal(ind, ind_e)
    np.testing.assert_allclose(dist, dist_e)
    # and its kNN graph follows the blobs where the euclidean one follows the noise column
    same = {"standardized": np.mean(y[ind] == y[:, None]),
            "euclidean": np.mean(y[nearest_neighbors(X, 8, "euclidean")[0]] == y[:, None])}
    assert same["standardized"] > 0.95 > 0.6 > same["euclidean"], same  # 0.995 and 0.528


def test_standardized_landmarks_and_anchor_rows_use_the_views_scale():
    X, _ = _line_view()
    scale = graph.column_scale(X)
    L = select_landmarks(X, 20, 0, metric="standardized")
    np.testing.assert_allclose(L, select_landmarks(X / scale, 20, 0, metric="euclidean"))
    rows = X[:30]  # new rows are scaled by the fitted view's deviations, not their own
    np.testing.assert_allclose(anchor_affinity(rows, L, 3, "standardized", scale).toarray(),
                               anchor_affinity(rows / scale, L, 3, "euclidean").toarray())
    with pytest.raises(ValueError, match="column_scale"):
        graph.landmark_centres([rows], 10, 0, metric="standardized")


def test_counts_metric_is_cosine_of_log1p():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 4, (60, 30)).astype(float)
    ind_c, dist_c = nearest_neighbors(X, 5, "counts")
    ind_l, dist_l = nearest_neighbors(np.log1p(X), 5, "cosine")
    np.testing.assert_array_equal(ind_c, ind_l)
    np.testing.assert_allclose(dist_c, dist_l)


@pytest.mark.parametrize("metric", ["cosine", "counts"])
def test_landmarks_are_kmeans_centres_in_the_metric_space(metric):
    """Anchors are k-means centres of the rows as anchor_affinity compares them (log1p for counts, unit rows),
    not of the raw rows: the raw mean of counts is not a centre after log1p and normalization."""
    from sklearn.cluster import KMeans

    from onmsc_dask.graph import _prepare, landmark_rows

    X = np.random.default_rng(0).poisson(0.3, size=(300, 40)) * np.arange(1, 41)  # long rows dominate raw means
    L = select_landmarks(X, 8, random_state=0, sample_size=100, metric=metric)
    np.testing.assert_allclose(np.linalg.norm(L, axis=1), 1.0)
    sample = _prepare(X[landmark_rows(300, 8, 100, 0)].astype(float), metric)
    ref = KMeans(8, init="random", n_init=1, max_iter=50, random_state=0).fit(sample).cluster_centers_
    np.testing.assert_allclose(L, ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=1e-12)
    raw = KMeans(8, init="random", n_init=1, max_iter=50, random_state=0).fit(X[landmark_rows(300, 8, 100, 0)])
    assert not np.allclose(L, _prepare(raw.cluster_centers_, metric), atol=1e-3)


def _sparse_words(n=300, d=20000, k=3, nnz=8, seed=0):
    """Bag-of-words rows: 3/4 of each row's words from its cluster's 100, the others from half of a wide vocabulary."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    own = rng.integers(0, 100, size=(n, nnz)) + y[:, None] * 100
    words = np.where(rng.random((n, nnz)) < 0.75, own, rng.integers(d // 2, d, size=(n, nnz)))
    X = sp.csr_matrix((rng.integers(1, 4, size=n * nnz).astype(float), (np.repeat(np.arange(n), nnz),
                                                                        words.ravel())), shape=(n, d))
    X.sum_duplicates()
    return X, y


def test_landmarks_are_the_same_on_any_number_of_threads():
    """The landmark k-means runs on one thread wherever it runs: with 2 OpenMP/BLAS threads (the threaded scheduler)
    its centres differed from those of a worker process (1 thread) by 1e-15, enough to break ties in the anchor
    graph of integer data differently (on 20,000 x 5 views: other view weights, 1e-5, and permuted labels)."""
    from threadpoolctl import threadpool_limits

    X = np.random.default_rng(0).standard_normal((6000, 30))
    centres = []
    for threads in (1, 2):
        with threadpool_limits(threads):
            centres.append(graph.landmark_centres([X[:3000], X[3000:]], 200, 0))
    np.testing.assert_array_equal(centres[0], centres[1])


@pytest.mark.parametrize("init", ["random", "k-means++"])
def test_landmarks_of_a_sparse_view_stay_sparse(init):
    """graph.select_landmarks used to densify its sample (sample.toarray(): n = 500 x 2,000,000 columns took
    14.8 GB); sparse rows now give sparse k-means centres, each the mean of its rows, each row at its nearest."""
    from onmsc_dask.graph import _prepare, landmark_rows

    X, _ = _sparse_words()
    for metric in ("euclidean", "cosine"):
        L = select_landmarks(X, 30, random_state=0, sample_size=200, init=init, metric=metric)
        assert sp.issparse(L) and L.shape == (30, X.shape[1])
        sample = _prepare(X[landmark_rows(300, 30, 200, 0)], metric)
        assert L.nnz <= sample.nnz
        if metric == "euclidean":  # a Lloyd fixed point
            d2 = ((sample.toarray()[:, None, :] - L.toarray()[None]) ** 2).sum(axis=2)
            nearest = d2.argmin(axis=1)
            means = np.stack([sample[nearest == c].mean(axis=0).A1 for c in range(30)])
            np.testing.assert_allclose(L.toarray(), means, atol=1e-12)
    Z = anchor_affinity(X, L, 3, "cosine")
    assert Z.shape == (300, 30) and np.allclose(Z.sum(axis=1), 1)


def test_wide_sparse_views_cluster_with_the_anchor_solver_in_memory_and_out_of_core(tmp_path):
    from onmsc_dask.api import ONMSC
    from onmsc_dask.metrics import evaluate
    from onmsc_dask.outofcore import fit_store
    from onmsc_dask.store import MultiViewStore

    (X1, y), (X2, _) = _sparse_words(seed=0), _sparse_words(seed=1)
    model = ONMSC(3, embedding="anchor", n_landmarks=30, random_state=0).fit([X1, X2])
    assert evaluate(y, model.labels_)["acc"] > 0.9
    store = MultiViewStore.create(tmp_path / "w.zarr", [X1, X2], y, chunk_rows=100)
    result = fit_store(store, 3, n_landmarks=30, random_state=0)
    assert sp.issparse(store.read_result("landmarks", "L0"))
    assert evaluate(y, result.labels)["acc"] > 0.9


def test_anchor_components_are_those_of_the_joint_sample_landmark_graph():
    """n_components of an anchor matrix Z counts the pieces of the samples in the bipartite sample-landmark graph
    [[0, Z], [Z^T, 0]] (its definition), rows without any landmark as pieces of their own, on random sparse Z."""
    from onmsc_dask.graph import n_components

    for seed in range(100):
        rng = np.random.default_rng(seed)
        Z = sp.random(int(rng.integers(5, 60)), int(rng.integers(3, 30)), density=rng.uniform(0.02, 0.2),
                      random_state=seed, format="csr")
        pieces = sp.csgraph.connected_components(sp.bmat([[None, Z], [Z.T, None]]), directed=False)[1]
        assert n_components(Z, anchor=True) == len(np.unique(pieces[:Z.shape[0]])), seed
