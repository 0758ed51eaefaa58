"""Spectral embeddings H^(o): the top-k eigenvectors of G = D^-1/2 A^o D^-1/2, by three solvers.

- ``exact``: ARPACK (eigsh) on the sparse kNN operator; the reference.
- ``nystrom``: the paper's Algorithms 2-4 (randomized SVD, the Nystrom embedding from uniform landmark columns of G,
  orthogonalization; numbered as in the compiled paper).
  Kept to reproduce the paper: on sparse kNN graphs it recovers almost nothing (see docs/solvers.md).
- ``anchor``: anchor graph A = Z Lambda^-1 Z^T; its degrees and eigenvectors (the same for every order A^o)
  reduce to an m x m eigenproblem: the sparse Gram matrix C^T C of the n x m factor C (default), or a tall-skinny
  QR of C (``outofcore.fit_store(method="tsqr")``).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import LinearOperator, eigsh

from .graph import NormalizedHighOrderAffinity, inv_sqrt
from .validation import user_warning

SOLVERS = ("exact", "nystrom", "anchor")
#: ``auto`` uses the exact kNN solver up to this many samples and the anchor graph above (docs/solvers.md)
EXACT_MAX_SAMPLES = 20000


def resolve_solver(solver: str, n_samples: int) -> str:
    if solver == "auto":
        return "exact" if n_samples <= EXACT_MAX_SAMPLES else "anchor"
    if solver not in SOLVERS:
        raise ValueError(f"embedding must be 'auto' or one of {SOLVERS}, got {solver!r}")
    return solver


def fix_signs(H: np.ndarray) -> np.ndarray:
    """Deterministic sign: the entry of largest magnitude in each column is positive (the first such entry when a
    positive and a negative one tie). From each column's max and min, two reductions along the rows (an argmax down
    the columns of a C-ordered 1M x 20 H takes 10x longer)."""
    top, bottom = H.max(axis=0), -H.min(axis=0)
    sign = np.sign(top - bottom)
    for j in np.flatnonzero(top == bottom):  # a tie (or an all-zero column: sign 0, as np.sign(0))
        sign[j] = np.sign(H[np.abs(H[:, j]).argmax(), j])
    return H * sign


#: the dense eigensolver's largest n (an n x n float64 matrix, 0.5 GB at 8000, and its eigenvectors)
DENSE_EIGH_MAX_SAMPLES = 8000
#: seconds per n ncv^2 of ARPACK (Lanczos basis of ncv = 2k + 1 vectors) and per n^3 of dense eigh, measured on one
#: core (n = 2000..4000, k = 200..500; docs/solvers.md): ARPACK costs more once ncv > n / 4
ARPACK_SECONDS, DENSE_EIGH_SECONDS = 4.2e-9, 3e-10
#: total estimated eigensolver seconds above which a fit warns (eigensolver_cost)
EIGEN_WARN_SECONDS = 60.0


def eigensolver_cost(n: int, k: int) -> tuple[str, float]:
    """The solver top_eigenvectors uses for k eigenvectors of an n x n operator, "dense" or "arpack", and its
    estimated seconds on one core: dense eigh for small n or when k is large against n (ARPACK's basis of 2k + 1
    vectors then costs more than the whole matrix), ARPACK otherwise."""
    ncv = min(n, max(2 * k + 1, 40))
    arpack, dense = ARPACK_SECONDS * n * ncv**2, DENSE_EIGH_SECONDS * n**3
    if n <= 500 or (n <= DENSE_EIGH_MAX_SAMPLES and dense < arpack):
        return "dense", dense
    return "arpack", arpack


def warn_eigensolver_cost(n: int, k: int, n_graphs: int) -> None:
    """Warn, before any graph is built, when k eigenvectors of n_graphs operators of size n are expected to take more
    than EIGEN_WARN_SECONDS (n_clusters or n_components large against n)."""
    solver, seconds = eigensolver_cost(n, k)
    if seconds * n_graphs > EIGEN_WARN_SECONDS:
        user_warning(f"the top {k} eigenvectors of {n_graphs} graphs of {n} samples are expected to take about "
                     f"{seconds * n_graphs / 60:.0f} min on one core ({solver} eigensolver, {seconds:.0f} s per graph): "
                     f"n_clusters / n_components is large against n; fewer components, or embedding='anchor', cost "
                     "less")


#: eigenvalues closer than this (ARPACK's tolerance) are tied: their eigenvectors are any basis of the space they share,
#: and rounding (which differs with the BLAS threads a call gets) would pick it
TIE_TOLERANCE = 1e-8
#: seed of the fixed reference vectors that tied eigenvectors are aligned to (canonical_basis)
TIE_REFERENCE_SEED = 0


def top_eigenvectors(G, k: int, random_state: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Largest-k eigenpairs of a symmetric operator (eigensolver_cost: dense eigh for small n or large k, else
    ARPACK), eigenvalues descending; tied eigenvalues get canonical_basis's vectors, so the result does not depend
    on rounding. More pairs are computed while the k-th eigenvalue's tie may reach past them."""
    n, m = G.shape[0], min(G.shape[0], k + 1)
    vals, vecs = _top_pairs(G, m, random_state)
    while m < n and vals[k - 1] - vals[m - 1] <= TIE_TOLERANCE:
        m = min(n, 2 * m)
        vals, vecs = _top_pairs(G, m, random_state)
    return canonical_basis(vals, vecs, k)


def _top_pairs(G, k: int, random_state: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Largest-k eigenpairs of a symmetric operator, eigenvalues descending (dense eigh, or ARPACK after deflating
    the known eigenvectors of a graph in pieces)."""
    n = G.shape[0]
    if eigensolver_cost(n, k)[0] == "dense" or k >= n - 1:  # ARPACK finds at most n - 2
        dense = G @ np.eye(n) if not isinstance(G, np.ndarray) else G
        dense = dense.toarray() if sp.issparse(dense) else np.asarray(dense)
        dense = (dense + dense.T) / 2
        vals, vecs = scipy.linalg.eigh(dense, subset_by_index=[max(0, n - k), n - 1])
        if len(vals) < min(k, n):  # LAPACK's syevr can return fewer near-tied pairs than asked (scipy #13913)
            vals, vecs = scipy.linalg.eigh(dense, driver="evd")
            vals, vecs = vals[n - min(k, n):], vecs[:, n - min(k, n):]
    else:
        known = piece_eigenvectors(G) if isinstance(G, NormalizedHighOrderAffinity) else np.zeros((n, 0))
        vals, vecs = np.ones(known.shape[1]), known
        if known.shape[1] < k:  # Lanczos from one start vector misses repeated eigenvalues: deflate the known ones
            rest = G if not known.size else LinearOperator(
                G.shape, matvec=lambda x: G @ x - 2 * known @ (known.T @ x), dtype=np.float64)
            v0 = np.random.default_rng(random_state).uniform(0.5, 1.5, n)
            more, V = eigsh(rest, k=k - known.shape[1], which="LA", v0=v0, ncv=min(n, max(2 * k + 1, 40)),
                            tol=1e-8)
            vals, vecs = np.r_[vals, more], np.hstack([known, V])
    order = np.argsort(-vals, kind="stable")
    return vals[order], vecs[:, order]


def canonical_basis(vals: np.ndarray, vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top k of the eigenpairs (vals, vecs), each eigenvector of a distinct eigenvalue signed by fix_signs, and
    the vectors of tied eigenvalues (consecutive gaps at most TIE_TOLERANCE: a space of which the solver returns
    any basis) replaced by a canonical one: V Q, Q the polar factor of V^T R for fixed reference vectors R (a
    seeded Gaussian n x k, one column per position), which is the same for every orthonormal basis V of the space.
    A tie at the k-th eigenvalue keeps the part of its space closest to R's columns, again independent of V."""
    order = np.argsort(-vals, kind="stable")
    vals, vecs = vals[order], vecs[:, order]
    H, start, reference = fix_signs(vecs[:, :k]), 0, None
    while start < k:
        stop = start + 1
        while stop < len(vals) and vals[stop - 1] - vals[stop] <= TIE_TOLERANCE:
            stop += 1
        if stop - start > 1:
            if reference is None:
                reference = np.random.default_rng(TIE_REFERENCE_SEED).standard_normal((len(vecs), k))
            V, end = vecs[:, start:stop], min(stop, k)
            U, _, Wt = np.linalg.svd(V.T @ reference[:, start:end], full_matrices=False)
            H[:, start:end] = V @ (U @ Wt)
        start = stop
    return vals[:k], H


def piece_eigenvectors(G: NormalizedHighOrderAffinity) -> np.ndarray:
    """G's eigenvectors of eigenvalue 1 when its graph falls into pieces: D^1/2 1_piece, unit norm, one column per
    piece (none for a connected graph)."""
    pieces, piece = connected_components(G.A, directed=False)
    if pieces == 1:
        return np.zeros((G.shape[0], 0))
    sqrt_degrees = np.divide(1.0, G.inv_sqrt_degrees, out=np.zeros(G.shape[0]), where=G.inv_sqrt_degrees > 0)
    Q = np.zeros((G.shape[0], pieces))
    Q[np.arange(G.shape[0]), piece] = sqrt_degrees
    return Q / np.maximum(np.linalg.norm(Q, axis=0), np.finfo(float).tiny)


def exact_embedding(A, k: int, order: int, random_state: int | None = None) -> np.ndarray:
    """H^(o) from the exact operator G (reference solver)."""  # Eq. 4: the top-k eigenvectors of G
    return top_eigenvectors(NormalizedHighOrderAffinity(A, order), k, random_state)[1]


def randomized_eigh(R: np.ndarray, k: int, oversampling: int, rng: np.random.Generator):
    """Paper's Algorithm 2 (randomized SVD): Omega Gaussian, Y = R Omega, Q = qr(Y), B = Q^T R Q, eig(B), U = Q V."""
    omega = rng.standard_normal((R.shape[0], min(R.shape[0], k + oversampling)))
    Q, _ = np.linalg.qr(R @ omega)
    vals, V = np.linalg.eigh(Q.T @ R @ Q)
    top = np.argsort(vals)[::-1][:k]  # largest eigenvalues of G (smallest of the Laplacian)
    return Q @ V[:, top], vals[top]


def orthogonalize(H: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Paper's Algorithm 4: H~ with H~^T H~ = I and H~ Lam~ H~^T = H Lam H^T."""
    sigma, V = np.linalg.eigh(H.T @ H)
    sigma = np.maximum(sigma, np.finfo(float).eps * sigma.max())
    s_half = np.sqrt(sigma)
    K = (s_half[:, None] * (V.T @ np.diag(lam) @ V)) * s_half[None, :]
    lam_t, V_t = np.linalg.eigh(K)
    top = np.argsort(lam_t)[::-1]
    return H @ (V / s_half) @ V_t[:, top], lam_t[top]


def nystrom_embedding(A, k: int, order: int, n_landmarks: int, oversampling: int = 10,
                      random_state: int | None = None, label: str = "the graph") -> np.ndarray:
    """Paper's Algorithm 3 (+4): uniform columns E of G, R = E[idx], randomized SVD of R, extension to n rows.
    Raises ValueError when R has fewer than k positive eigenvalues (the sampled columns of a sparse graph
    barely meet): the extension would have zero or meaningless columns."""
    G = NormalizedHighOrderAffinity(A, order)
    n = G.shape[0]
    m = min(n_landmarks, n)
    rng = np.random.default_rng(random_state)
    idx = np.sort(rng.choice(n, size=m, replace=False))
    E = G @ sp.csr_matrix((np.ones(m), (idx, np.arange(m))), shape=(n, m)).toarray()  # m columns of G
    R = E[idx]
    U_r, lam = randomized_eigh((R + R.T) / 2, k, oversampling, rng)
    rank = int(np.sum(lam > m * np.finfo(float).eps * max(np.abs(lam).max(), np.finfo(float).tiny)))
    if rank < k:
        raise ValueError(f"{label}: the {m} uniformly sampled columns of G^({order}) span only {rank} of the {k} "
                         f"directions the Nystrom embedding needs (one per cluster, or n_components; their m x m "
                         f"block has {rank} positive eigenvalues); use "
                         f"{'more landmarks (n_landmarks), ' if m < n else ''}fewer n_components or "
                         "embedding='anchor'")
    H = np.sqrt(m / n) * (E @ U_r / lam)
    H, _ = orthogonalize(H, lam * n / m)
    return fix_signs(H)


# The anchor operator G = C C^T, C = D^-1/2 B, B = Z Lambda^-1/2, split by rows: C = anchor_factor_rows(Z,
# anchor_factor_pieces(anchor_column_sums(Z))); the sums over rows (anchor_column_sums, anchor_scaled_gram) add
# over row chunks, which is how outofcore.py runs them chunk by chunk.
#
# Every order has the same eigenvectors: rows of Z sum to 1, so A 1 = Z Lambda^-1 Z^T 1 = Z 1 = 1, hence
# D = diag(A^o 1) = I and G^(o) = A^o, whose top-k eigenvectors are A's (A is PSD, so powers keep the order of
# its eigenvalues). H^(o) = H^(1) for every o, and the anchor solver computes it once per view.


def anchor_column_sums(Z: sp.csr_matrix) -> np.ndarray:
    """Column sums Lambda = Z^T 1 of a row block (they add over row blocks)."""
    return np.asarray(Z.sum(axis=0)).ravel()


def anchor_factor_pieces(lam: np.ndarray) -> dict[str, np.ndarray]:
    """The m-sized parts of C from Lambda: Lambda^-1/2 and u = B^T 1, so that the degrees are
    A 1 = B u."""
    scale = inv_sqrt(lam)
    return {"scale": scale, "u": scale * lam}


def anchor_half(Z: sp.spmatrix, pieces: dict) -> sp.csr_matrix:
    """B = Z Lambda^-1/2 (A = B B^T) for a row block."""
    return (Z @ sp.diags(pieces["scale"])).tocsr()


def anchor_scaled_rows(Z: sp.csr_matrix, pieces: dict) -> tuple[sp.csr_matrix, np.ndarray]:
    """B = Z Lambda^-1/2 and D^-1/2 for a row block."""
    B = anchor_half(Z, pieces)
    degrees = B @ pieces["u"]  # Eq. 2 for A = B B^T
    return B, inv_sqrt(degrees)


def anchor_factor_rows(Z: sp.csr_matrix, pieces: dict) -> np.ndarray:
    """Rows of C = D^-1/2 B for a row block."""  # G of Eq. 3: G = D^-1/2 A D^-1/2 = C C^T
    B, inv_sqrt = anchor_scaled_rows(Z, pieces)
    return inv_sqrt[:, None] * B.toarray()


def anchor_scaled_gram(Z: sp.csr_matrix, pieces: dict) -> sp.csr_matrix:
    """C^T C = B^T D^-1 B of a row block (sparse, adds over row blocks)."""
    B, inv_sqrt = anchor_scaled_rows(Z, pieces)
    return (B.T @ sp.diags(inv_sqrt**2) @ B).tocsr()


def anchor_gram_transform(S: sp.csr_matrix, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """T (m x k) with H = D^-1/2 B T, and the top-k eigenvalues s^2 of G = C C^T: the top-k eigenvectors V,
    values s^2 of C^T C = S give the left singular vectors C V / s of C, i.e. the top-k eigenvectors of G."""
    vals, V = top_eigenvectors(S, k, seed)
    return V / np.sqrt(np.maximum(vals, np.finfo(float).tiny)), vals


def anchor_embed_rows(Z: sp.csr_matrix, pieces: dict, T: np.ndarray) -> np.ndarray:
    """Rows of H = D^-1/2 B T for a row block."""
    B, inv_sqrt = anchor_scaled_rows(Z, pieces)
    return inv_sqrt[:, None] * (B @ T)


def tsqr_transform(C, k: int) -> tuple[np.ndarray, np.ndarray]:
    """T (m x k) with H = C T, and the top-k eigenvalues s^2 of G = C C^T, for a row-chunked dask array C: R of a
    tall-skinny QR (C = Q R, dask.array.linalg.tsqr; Q is not formed) and the SVD R = U s W^T give the left
    singular vectors C W / s of C (as anchor_gram_transform's, without forming C^T C)."""
    import dask.array as da

    _, s, Wt = np.linalg.svd(da.linalg.tsqr(C)[1].compute())
    return Wt[:k].T / np.maximum(s[:k], np.finfo(float).tiny), s[:k] ** 2


def anchor_embedding(Z: sp.spmatrix, k: int, random_state: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """H^(o) of an anchor graph, the same for every order o (see above), and A's top-k eigenvalues (those of
    A^o are their o-th powers), from the sparse m x m Gram matrix C^T C (as outofcore.py's default ``"gram"``
    method; O(n r^2), against O(n m^2) for the QR of C)."""
    Z = sp.csr_matrix(Z, dtype=np.float64)
    if not np.allclose(np.asarray(Z.sum(axis=1)).ravel(), 1.0, rtol=0, atol=1e-8):
        raise ValueError("an anchor matrix Z needs rows summing to 1 (graph.anchor_affinity): the solver's shared "
                         "eigenvectors of all orders rely on A 1 = 1")
    pieces = anchor_factor_pieces(anchor_column_sums(Z))
    T, vals = anchor_gram_transform(anchor_scaled_gram(Z, pieces), k, random_state)
    return fix_signs(anchor_embed_rows(Z, pieces, T)), vals


def anchor_order_embeddings(H: np.ndarray, vals: np.ndarray, orders: int) -> tuple[np.ndarray, np.ndarray]:
    """H^(o) = H and the eigenvalues vals^o of G^(o) = A^o, o = 1..orders, of anchor graphs: H (..., n, k) and vals
    (..., k) of one graph or a stack of them give (..., orders, n, k), a read-only view of H that every order
    shares (no copy), and (..., orders, k)."""
    return (np.broadcast_to(H[..., None, :, :], (*H.shape[:-2], orders, *H.shape[-2:])),
            np.stack([vals ** (o + 1) for o in range(orders)], axis=-2))


def rayleigh_quotients(graph: sp.csr_matrix, H: np.ndarray) -> np.ndarray:
    """diag(H^(o)T G^(o) H^(o)) of embeddings H (orders, n, k) of a kNN graph, shape (orders, k): the
    eigenvalues of G^(o) when H^(o) are its eigenvectors."""
    return np.stack([np.einsum("nk,nk->k", h, NormalizedHighOrderAffinity(graph, o + 1) @ h) for o, h in enumerate(H)])


def embed_graph(graph: sp.csr_matrix, solver: str, k: int, orders: int, *, n_landmarks: int = 0,
                random_state: int | None = None, label: str = "the graph") -> tuple[np.ndarray, np.ndarray]:
    """H^(o) for o = 1..orders from one view's graph (see ``graph.build_graph``; ``label`` names it in errors),
    shape (orders, n, k), and the eigenvalues of each G^(o) they span, shape (orders, k)."""
    if solver == "anchor":
        return anchor_order_embeddings(*anchor_embedding(graph, k, random_state), orders)
    if solver == "nystrom":
        H = np.stack([nystrom_embedding(graph, k, o, n_landmarks, random_state=random_state, label=label)
                      for o in range(1, orders + 1)])
        return H, rayleigh_quotients(graph, H)
    pairs = [top_eigenvectors(NormalizedHighOrderAffinity(graph, o), k, random_state) for o in range(1, orders + 1)]
    return np.stack([H for _, H in pairs]), np.stack([vals for vals, _ in pairs])


def average_graph_embedding(graphs: list[sp.csr_matrix], solver: str, k: int, *, n_landmarks: int = 0,
                            random_state: int | None = None) -> np.ndarray:
    """F: first-order embedding of the average affinity (1/v) sum_p A_p (the anchor one stacks the B_p)."""
    if solver == "anchor":
        return anchor_embedding(sp.hstack(graphs).tocsr() / len(graphs), k, random_state)[0]
    return embed_graph(sum(graphs) / len(graphs), solver, k, 1, n_landmarks=n_landmarks,
                       random_state=random_state, label="the average graph")[0][0]
