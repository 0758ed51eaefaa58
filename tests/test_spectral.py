"""Spectral embeddings (onmsc_dask.spectral) against dense eigendecompositions.

Embeddings are compared through their projectors H H^T, which are unique whenever the k-th and (k+1)-th
eigenvalues differ (each test checks that eigengap on its data first).
Paper: G = D^-1/2 A^o D^-1/2 (Sec. 'Scale to Large-Scale Dataset'), Algorithms 2 (Nystrom + randomized SVD)
and 3 (orthogonalization, with its proposition H~^T H~ = I and H~ Lam~ H~^T = H Lam H^T).
"""
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from onmsc_dask.graph import (NormalizedHighOrderAffinity, anchor_affinity, knn_affinity, nearest_neighbors,
                              select_landmarks, view_affinity)
from onmsc_dask.spectral import (anchor_column_sums, anchor_embedding, anchor_factor_pieces, anchor_factor_rows,
                                 average_graph_embedding, embed_graph, exact_embedding, fix_signs,
                                 nystrom_embedding, orthogonalize, randomized_eigh, resolve_solver, top_eigenvectors,
                                 tsqr_transform)


pytestmark = pytest.mark.usefixtures("single_threaded_blas")

K = 4


def _blobs(n, d=5, k=K, seed=0, scale=1.5):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=scale, size=(k, d))
    return centres[np.arange(n) % k] + rng.normal(size=(n, d))


def _knn_graph(n, seed=0, n_neighbors=10):
    return knn_affinity(*nearest_neighbors(_blobs(n, seed=seed), n_neighbors, "euclidean"))


def _dense_G(Ad, order):
    Ao = np.linalg.matrix_power(Ad, order)
    deg = Ao.sum(axis=1)
    return Ao / np.sqrt(np.outer(deg, deg))


def _dense_top(G, k):
    vals, vecs = np.linalg.eigh((G + G.T) / 2)
    order = np.argsort(vals)[::-1]
    return vals[order], vecs[:, order[:k]]


def _projector_error(H1, H2):
    return np.abs(H1 @ H1.T - H2 @ H2.T).max()


def _assert_orthonormal(H, atol=1e-8):
    np.testing.assert_allclose(H.T @ H, np.eye(H.shape[1]), atol=atol)


# --------------------------------------------------------------------------- exact


@pytest.mark.parametrize("n", [150, 600])  # dense eigh branch (n <= 500) and eigsh branch
@pytest.mark.parametrize("order", [1, 2])
def test_exact_embedding_matches_dense_eigh(n, order):
    A = _knn_graph(n, seed=n + order)
    vals, ref = _dense_top(_dense_G(A.toarray(), order), K)
    all_vals = np.sort(np.linalg.eigvalsh(_dense_G(A.toarray(), order)))[::-1]
    assert all_vals[K - 1] - all_vals[K] > 0.02, "test data needs an eigengap after the k-th eigenvalue"
    H = exact_embedding(A, K, order, random_state=0)
    assert H.shape == (n, K)
    _assert_orthonormal(H)
    assert _projector_error(H, ref) < 1e-6
    # columns are eigenvectors with the descending eigenvalues (Rayleigh quotients)
    G = NormalizedHighOrderAffinity(A, order)
    np.testing.assert_allclose(np.sum(H * (G @ H), axis=0), vals[:K], atol=1e-7)
    # deterministic sign convention: the largest-magnitude entry of each column is positive
    assert (H[np.abs(H).argmax(axis=0), np.arange(K)] > 0).all()


def test_top_eigenvectors_order_and_seed_determinism():
    A = _knn_graph(600, seed=3)
    G = NormalizedHighOrderAffinity(A, 1)
    vals, H = top_eigenvectors(G, K, random_state=1)
    assert (np.diff(vals) <= 1e-12).all() and vals[0] == pytest.approx(1.0, abs=1e-8)
    vals2, H2 = top_eigenvectors(G, K, random_state=1)
    np.testing.assert_array_equal(H, H2)


# --------------------------------------------------------------------------- Algorithms 2-3


def test_randomized_eigh_exact_on_low_rank():
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.normal(size=(80, 6)))
    lam = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.5])
    R = (U * lam) @ U.T
    Ur, vals = randomized_eigh(R, 3, 5, rng)
    np.testing.assert_allclose(vals, lam[:3], rtol=1e-10)
    assert _projector_error(Ur, U[:, :3]) < 1e-10


def test_orthogonalize_proposition():
    """Algorithm 3: H~^T H~ = I and H~ Lam~ H~^T = H Lam H^T, for a non-orthogonal H."""
    rng = np.random.default_rng(1)
    H = rng.normal(size=(50, 5)) @ rng.normal(size=(5, 5))
    lam = np.array([3.0, 2.0, 1.5, 0.7, -0.4])
    Ht, lam_t = orthogonalize(H, lam)
    assert Ht.shape == (50, 5) and lam_t.shape == (5,)
    _assert_orthonormal(Ht, atol=1e-10)
    ref = (H * lam) @ H.T
    np.testing.assert_allclose((Ht * lam_t) @ Ht.T, ref, atol=1e-10 * np.abs(ref).max())
    assert (np.diff(lam_t) <= 0).all(), "eigenvalues returned in descending order"
    # an already orthonormal H with diagonal Lam is returned up to column order/sign
    Q, _ = np.linalg.qr(rng.normal(size=(50, 3)))
    Qt, lq = orthogonalize(Q, np.array([1.0, 3.0, 2.0]))
    np.testing.assert_allclose(lq, [3.0, 2.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(np.abs(Qt), np.abs(Q[:, [1, 2, 0]]), atol=1e-10)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_nystrom_with_all_columns_recovers_exact_subspace(order):
    """m = n: E = G and R = G, so Algorithm 2 is exact once the randomized range finder sees the whole
    range (k + s >= n)."""
    n = 60
    A = _knn_graph(n, seed=10 + order, n_neighbors=8)
    G = _dense_G(A.toarray(), order)
    vals = np.sort(np.linalg.eigvalsh(G))[::-1]
    assert vals[K - 1] - vals[K] > 0.02
    _, ref = _dense_top(G, K)
    H = nystrom_embedding(A, K, order, n_landmarks=n, oversampling=n - K, random_state=0)
    assert H.shape == (n, K)
    _assert_orthonormal(H)
    assert _projector_error(H, ref) < 1e-8


@pytest.mark.parametrize("order", [1, 2, 3])
def test_nystrom_with_all_columns_low_rank_graph(order):
    """m = n with the default oversampling on a graph of rank <= k + s (an anchor graph with 12 anchors):
    the range finder captures the whole range, so the subspace is exact for a large n too."""
    X = _blobs(400, seed=20)
    Z = anchor_affinity(X, select_landmarks(X, 12, random_state=0), 3, "euclidean")
    Zd = Z.toarray()
    Ad = Zd @ np.diag(1 / Zd.sum(0)) @ Zd.T
    G = _dense_G(Ad, order)
    vals = np.sort(np.linalg.eigvalsh(G))[::-1]
    assert vals[K - 1] - vals[K] > 1e-3
    _, ref = _dense_top(G, K)
    H = nystrom_embedding(sp.csr_matrix(Ad), K, order, n_landmarks=400, oversampling=10, random_state=0)
    _assert_orthonormal(H)
    assert _projector_error(H, ref) < 1e-6


def test_nystrom_selects_largest_not_largest_magnitude_eigenvalues():
    """G of an odd order can have eigenvalues near -1 (bipartite parts of the graph); the embedding must be
    the top-k *largest* eigenvectors (smallest of L = I - G), like exact_embedding, not the largest |lambda|.

    Graph: a 12-clique (eigenvalue 1) plus an even 16-cycle (eigenvalues cos(2 pi j / 16), incl. -1).
    Top 4 largest: 1, 1, cos(pi/8), cos(pi/8) = 0.92 (a double eigenvalue of the cycle), then 0.71;
    largest magnitude picks -1 instead of one of the 0.92."""
    clique = np.ones((12, 12)) - np.eye(12)
    cycle = np.roll(np.eye(16), 1, axis=1)
    cycle = cycle + cycle.T
    Ad = np.block([[clique, np.zeros((12, 16))], [np.zeros((16, 12)), cycle]])
    n, k = 28, 4
    G = _dense_G(Ad, 1)
    vals, ref = _dense_top(G, k)
    assert vals[k - 1] - vals[k] > 0.05  # 0.924 vs 0.707
    assert np.linalg.eigvalsh(G).min() == pytest.approx(-1.0)
    H_exact = exact_embedding(sp.csr_matrix(Ad), k, 1)
    assert _projector_error(H_exact, ref) < 1e-8
    H = nystrom_embedding(sp.csr_matrix(Ad), k, 1, n_landmarks=n, oversampling=n - k, random_state=0)
    assert _projector_error(H, ref) < 1e-8, "nystrom picked eigenvectors of the most negative eigenvalue"


def test_nystrom_partial_landmarks_is_orthonormal_and_seeded():
    A = _knn_graph(300, seed=30)
    H1 = nystrom_embedding(A, K, 2, n_landmarks=100, random_state=5)
    H2 = nystrom_embedding(A, K, 2, n_landmarks=100, random_state=5)
    assert H1.shape == (300, K) and np.isfinite(H1).all()
    _assert_orthonormal(H1)
    np.testing.assert_array_equal(H1, H2)


# --------------------------------------------------------------------------- anchor graph


def _anchor_data(n=300, m=20, seed=40):
    X = _blobs(n, seed=seed, scale=2.0)
    Z = anchor_affinity(X, select_landmarks(X, m, random_state=0), 3, "euclidean")
    Zd = Z.toarray()
    return Z, Zd @ np.diag(1.0 / Zd.sum(axis=0)) @ Zd.T


def _anchor_factor(Z: sp.csr_matrix) -> np.ndarray:
    """C with G = C C^T for the whole of Z, as one row block."""
    return anchor_factor_rows(Z, anchor_factor_pieces(anchor_column_sums(Z)))


def test_anchor_factor_matches_dense():
    Z, Ad = _anchor_data()
    C = _anchor_factor(Z)
    assert C.shape == Z.shape
    np.testing.assert_allclose(C @ C.T, _dense_G(Ad, 1), atol=1e-10)  # G = C C^T
    np.testing.assert_allclose(Ad.sum(axis=1), 1.0, atol=1e-12)  # D = I: why every order shares eigenvectors


@pytest.mark.parametrize("order", [1, 2, 3])
def test_anchor_embedding_is_the_dense_high_order_embedding(order):
    """The anchor solver's single embedding is the top-k subspace of the dense D^-1/2 A^o D^-1/2 for every o."""
    Z, Ad = _anchor_data()
    G = _dense_G(Ad, order)
    vals = np.sort(np.linalg.eigvalsh(G))[::-1]
    assert vals[K - 1] - vals[K] > 1e-3, "anchor test data needs an eigengap"
    _, ref = _dense_top(G, K)
    H, vals_a = anchor_embedding(Z, K)
    assert H.shape == (Z.shape[0], K)
    np.testing.assert_allclose(vals_a ** order, vals[:K], atol=1e-8)
    _assert_orthonormal(H)
    assert _projector_error(H, ref) < 1e-7
    Ho, _ = embed_graph(Z, "anchor", K, order)
    assert Ho.shape == (order, Z.shape[0], K) and _projector_error(Ho[-1], ref) < 1e-7


def test_tsqr_transform_is_the_same_for_any_row_chunks_and_gives_the_gram_routes_eigenvectors():
    """R of tsqr over row chunks gives one chunk's T and eigenvalues, C T is orthonormal and spans the Gram
    route's subspace, with its eigenvalues."""
    Z, _ = _anchor_data()
    C = _anchor_factor(Z)
    T_one, vals_one = tsqr_transform(da.from_array(C, chunks=C.shape), K)
    T_da, vals_da = tsqr_transform(da.from_array(C, chunks=(75, C.shape[1])), K)
    np.testing.assert_allclose(vals_da, vals_one, atol=1e-10)
    H_ref, vals_ref = anchor_embedding(Z, K)
    np.testing.assert_allclose(vals_one, vals_ref, atol=1e-8)
    H_one, H_da = fix_signs(C @ T_one), fix_signs(C @ T_da)
    np.testing.assert_allclose(H_da, H_one, atol=1e-10)  # sign convention makes them identical
    _assert_orthonormal(H_one)
    assert _projector_error(H_ref, H_one) < 1e-7
    # each column is the eigenvector of its eigenvalue: G h = s^2 h
    np.testing.assert_allclose(C @ (C.T @ H_one), H_one * vals_one, atol=1e-8)


@pytest.mark.parametrize("solver", ["exact", "anchor", "nystrom"])
def test_embedding_eigenvalues_are_the_dense_top_eigenvalues(solver):
    """The eigenvalues embed_graph returns with each H^(o) are its Rayleigh quotients, and for the exact and
    anchor solvers the top-k eigenvalues of the dense D^-1/2 A^o D^-1/2."""
    if solver == "anchor":
        graph, Ad = _anchor_data()
    else:
        graph = _knn_graph(150, seed=70)
        Ad = graph.toarray()
    H, vals = embed_graph(graph, solver, K, 3, n_landmarks=graph.shape[0], random_state=0)
    assert vals.shape == (3, K)
    for o in range(3):
        G = _dense_G(Ad, o + 1)
        np.testing.assert_allclose(vals[o], np.einsum("nk,nk->k", H[o], G @ H[o]), atol=1e-7)
        if solver != "nystrom":  # its subspace is approximate with m < n + k + s
            np.testing.assert_allclose(vals[o], _dense_top(G, K)[0][:K], atol=1e-7)


# --------------------------------------------------------------------------- dispatch


def test_embed_graph_shapes_and_orders():
    A = _knn_graph(120, seed=50)
    H, vals = embed_graph(A, "exact", K, 3, random_state=0)
    assert H.shape == (3, 120, K) and vals.shape == (3, K)
    for o in range(3):
        _assert_orthonormal(H[o])
        assert _projector_error(H[o], exact_embedding(A, K, o + 1, 0)) < 1e-10
    Hn, _ = embed_graph(A, "nystrom", K, 2, n_landmarks=120, random_state=0)
    assert Hn.shape == (2, 120, K)
    Z, _ = _anchor_data(n=120, m=15)
    Ha, _ = embed_graph(Z, "anchor", K, 2)
    assert Ha.shape == (2, 120, K)


def test_average_graph_embedding_anchor_equals_average_affinity():
    """Stacking [Z_1, Z_2] / 2 gives the anchor affinity (A_1 + A_2) / 2."""
    X1 = _blobs(200, seed=60, scale=2.0)
    X2 = _blobs(200, seed=61, scale=2.0)
    Zs = [anchor_affinity(X, select_landmarks(X, 15, random_state=0), 3, "euclidean") for X in (X1, X2)]
    Aavg = sum(Zd @ np.diag(1 / Zd.sum(0)) @ Zd.T for Zd in (Z.toarray() for Z in Zs)) / 2
    G = _dense_G(Aavg, 1)
    vals = np.sort(np.linalg.eigvalsh(G))[::-1]
    assert vals[K - 1] - vals[K] > 1e-3
    F = average_graph_embedding(Zs, "anchor", K)
    assert _projector_error(F, _dense_top(G, K)[1]) < 1e-7


def test_average_graph_embedding_knn():
    A1, A2 = _knn_graph(150, seed=70), _knn_graph(150, seed=71)
    F = average_graph_embedding([A1, A2], "exact", K, random_state=0)
    G = _dense_G(((A1 + A2) / 2).toarray(), 1)
    assert _projector_error(F, _dense_top(G, K)[1]) < 1e-8


def test_resolve_solver():
    assert resolve_solver("auto", 100) == "exact"
    assert resolve_solver("auto", 10**6) == "anchor"
    for s in ("exact", "nystrom", "anchor"):
        assert resolve_solver(s, 100) == s
    with pytest.raises(ValueError):
        resolve_solver("lanczos", 100)


def test_anchor_embedding_rejects_rows_not_summing_to_one():
    """Its H^(o) = H^(1) shortcut holds only for A 1 = 1; another Z gave a wrong order-2 subspace (error 0.04)."""
    Z, _ = _anchor_data()
    with pytest.raises(ValueError, match="rows summing to 1"):
        anchor_embedding(sp.diags(np.linspace(0.5, 1.5, Z.shape[0])) @ Z, K)


def test_nystrom_rank_deficient_sample_is_an_error():
    """A sparse kNN graph at order 1 has a zero diagonal, so a few uniform columns of G barely meet: their m x m
    block had fewer than k positive eigenvalues. Before, the extension divided by those (near-)zero eigenvalues
    and returned an 'orthonormal' H of rank 3 of 10 (digits, m = 30), or an 'SVD did not converge' at m = 12."""
    A = _knn_graph(300, seed=31, n_neighbors=5)
    with pytest.raises(ValueError, match=r"view 7: the 8 uniformly sampled columns of G\^\(1\) span only \d of the 4 "
                                         r"directions"):
        nystrom_embedding(A, K, 1, n_landmarks=8, random_state=0, label="view 7")
    H = nystrom_embedding(A, K, 2, n_landmarks=8, random_state=0)  # G^2 has a positive diagonal: a full-rank block
    _assert_orthonormal(H)
    assert np.linalg.matrix_rank(H) == K


def test_graph_in_pieces_gets_every_eigenvalue_one():
    """Three separated 1-D groups: G has eigenvalue 1 three times, and ARPACK from one start vector found it once
    (eigenvalues 1, 0.9994, 0.9992), so k-means split the groups wrongly (ACC 0.63 for a perfectly separated view)."""
    rng = np.random.default_rng(1)
    X = np.repeat(np.arange(3), 200)[:, None] * 5.0 + rng.random((600, 1))
    G = NormalizedHighOrderAffinity(view_affinity(X, 15, "euclidean"), 2)
    vals, H = top_eigenvectors(G, 5, random_state=0)
    np.testing.assert_allclose(vals[:3], 1.0, atol=1e-12)
    dense = G @ np.eye(600)
    ref = np.linalg.eigvalsh((dense + dense.T) / 2)[::-1][:5]
    np.testing.assert_allclose(vals, ref, atol=1e-8)
    np.testing.assert_allclose(H.T @ H, np.eye(5), atol=1e-8)
    np.testing.assert_allclose(G @ H, H * vals, atol=1e-6)


def test_many_eigenvectors_against_n_use_the_dense_solver_and_warn_first():
    """k close to n/2 (k = 2500, n = 6000) sat in ARPACK for more than 300 s, silently: its Lanczos basis of 2k + 1
    vectors costs more than the dense n x n eigenproblem, which is used instead, and the fit warns with the
    expected time before it builds any graph."""
    from onmsc_dask.api import ONMSC
    from onmsc_dask.spectral import eigensolver_cost

    assert eigensolver_cost(6000, 2500)[0] == "dense" and eigensolver_cost(6000, 20)[0] == "arpack"
    assert eigensolver_cost(400, 5)[0] == "dense" and eigensolver_cost(50000, 2500)[0] == "arpack"
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    G = NormalizedHighOrderAffinity(knn_affinity(*nearest_neighbors(X, 10, "euclidean", 0)), 2)
    vals, H = top_eigenvectors(G, 300, 0)
    dense = G @ np.eye(900)
    np.testing.assert_allclose(vals, np.linalg.eigvalsh(dense)[::-1][:300], atol=1e-10)
    np.testing.assert_allclose(H.T @ H, np.eye(300), atol=1e-8)
    np.testing.assert_allclose(dense @ H, H * vals, atol=1e-8)

    class Stop(Exception):
        pass

    def stop(line):  # the first progress line comes before the graphs are built
        raise Stop(line)

    views = [rng.normal(size=(6000, 2)), rng.normal(size=(6000, 3))]
    with pytest.warns(UserWarning, match=r"the top 2500 eigenvectors of 5 graphs of 6000 samples are expected to "
                                         r"take about \d+ min on one core \(dense eigensolver"):
        with pytest.raises(Stop, match="graphs and embeddings"):
            ONMSC(2500, embedding="exact").fit(views, progress=stop)


def _tight_groups_graph() -> NormalizedHighOrderAffinity:
    """4 classes of 8 groups of 10 near-identical rows (tests/test_api.py's _tight_groups, first view), N = 15:
    links between groups weigh about 0, so G's top 8 eigenvalues are 1 to rounding."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 4.0, (4, 30))
    groups = centres[:, None, :] + rng.normal(0, 1.5, (4, 8, 30))
    X = np.repeat(groups.reshape(32, 30), 10, axis=0) + rng.normal(0, 0.05, (320, 30))
    return NormalizedHighOrderAffinity(view_affinity(X, 15, "euclidean"), 1)


def test_tied_eigenvectors_do_not_depend_on_the_blas_threads():
    """The top 4 of 8 tied eigenvectors were whatever basis rounding gave, and the BLAS thread count changes the
    rounding (Dask runs the views' eigensolvers on concurrent threads): the same graph gave different subspaces
    (projectors 0.11 apart) on 1 and 2 threads. canonical_basis makes them one."""
    from threadpoolctl import threadpool_limits

    G = _tight_groups_graph()
    vals = top_eigenvectors(G, 8, 0)[0]
    assert vals[0] - vals[-1] < 1e-12  # tied beyond k
    out = []
    for threads in (1, 2, 1, 2):
        with threadpool_limits(threads):
            out.append(top_eigenvectors(G, 4, 0)[1])
    for H in out[1:]:
        np.testing.assert_allclose(H, out[0], atol=1e-10)


def test_canonical_basis_is_the_same_for_every_basis_of_a_tied_space():
    """Any orthonormal basis of each tied eigenspace gives the same vectors, also when the tie crosses the k-th
    eigenvalue (the part of its space kept is then fixed too); distinct eigenvalues keep fix_signs' vectors."""
    from onmsc_dask.spectral import canonical_basis, fix_signs

    rng = np.random.default_rng(3)
    V = np.linalg.qr(rng.standard_normal((50, 7)))[0]
    vals = np.array([0.2, 1.0, 1.0, 1.0, 0.7, 0.5, 0.5 + 1e-12])  # unordered, as a solver may return them
    rotated = V.copy()
    for block in ([1, 2, 3], [5, 6]):
        rotated[:, block] = V[:, block] @ np.linalg.qr(rng.standard_normal((len(block), len(block))))[0]
    for k in (2, 3, 4, 5, 6):
        expected_vals, H = canonical_basis(vals, V, k)
        np.testing.assert_allclose(canonical_basis(vals, rotated, k)[1], H, atol=1e-12)
        np.testing.assert_allclose(H.T @ H, np.eye(k), atol=1e-12)
        np.testing.assert_array_equal(expected_vals, np.sort(vals)[::-1][:k])
    np.testing.assert_array_equal(canonical_basis(vals, V, 4)[1][:, 3], fix_signs(V[:, [4]])[:, 0])  # 0.7: alone


def test_fix_signs_makes_the_first_entry_of_largest_magnitude_positive():
    """Each column's sign: that of its first entry of largest magnitude (ties between a positive and a negative entry
    included; an all-zero column stays zero), checked against the entry found by argmax."""
    from onmsc_dask.spectral import fix_signs

    rng = np.random.default_rng(0)
    for H in (rng.normal(size=(200, 6)), rng.integers(-3, 4, size=(40, 30)).astype(float), np.zeros((5, 2))):
        first = np.abs(H).argmax(axis=0)
        expected = H * np.sign(H[first, np.arange(H.shape[1])])
        np.testing.assert_array_equal(fix_signs(H), expected)
    np.testing.assert_array_equal(fix_signs(np.array([[-2.0, 2.0], [2.0, -2.0]])), [[2.0, 2.0], [-2.0, -2.0]])


def test_dense_eigensolver_that_returns_fewer_pairs_than_asked_is_redone_in_full(monkeypatch):
    """LAPACK's syevr (scipy's driver for a subset of eigenpairs) can return fewer near-tied pairs than asked, with
    some BLAS thread counts; top_eigenvectors then indexed past them (IndexError) instead of solving in full."""
    import scipy.linalg

    import onmsc_dask.spectral as spectral

    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.normal(size=(60, 60)))[0]
    G = Q @ np.diag(np.r_[np.ones(4), np.linspace(0.9, 0.1, 56)]) @ Q.T  # four tied top eigenvalues
    expected_vals, expected_vecs = spectral.top_eigenvectors(G, 6)
    eigh = scipy.linalg.eigh

    def short_subset(a, **kwargs):
        vals, vecs = eigh(a, **kwargs)
        return (vals[2:], vecs[:, 2:]) if "subset_by_index" in kwargs else (vals, vecs)

    monkeypatch.setattr(spectral.scipy.linalg, "eigh", short_subset)
    vals, vecs = spectral.top_eigenvectors(G, 6)
    np.testing.assert_allclose(vals, expected_vals, atol=1e-12)
    np.testing.assert_allclose(vecs, expected_vecs, atol=1e-8)
