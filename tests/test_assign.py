"""Labels from the fused embedding (assign.py): k-means on the row-normalized rows, lowest inertia of the restarts,
then the label refinement on the view graphs."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans

from onmsc_dask.assign import affinity_operator, assign_labels, normalize_rows, readout, refine_labels
from onmsc_dask.graph import view_affinity
from onmsc_dask.metrics import accuracy


def _directions_with_spread_norms(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows along three directions (the clusters), their lengths spread over two orders of magnitude."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), 40)
    directions = np.linalg.qr(rng.normal(size=(4, 3)))[0].T  # 3 orthonormal directions in R^4
    lengths = 10.0 ** rng.uniform(-1, 1, size=len(y))
    H = lengths[:, None] * (directions[y] + 0.05 * rng.normal(size=(len(y), 4)))
    return H, y


def test_normalize_rows_unit_length_and_zero_rows_kept():
    H = np.array([[3.0, 4.0], [0.0, 0.0], [-1e-3, 0.0]])
    np.testing.assert_allclose(normalize_rows(H), [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]])


def test_assign_labels_is_kmeans_on_unit_rows_with_restarts():
    H, _ = _directions_with_spread_norms()
    for seed in (0, 1):
        labels, inertia = assign_labels(H, 3, random_state=seed)
        km = KMeans(3, n_init=10, random_state=seed).fit(normalize_rows(H))
        np.testing.assert_array_equal(labels, km.labels_)
        assert labels.dtype == np.int64 and inertia == km.inertia_
        raw, raw_inertia = assign_labels(H, 3, row_normalize=False, n_init=4, random_state=seed)
        km = KMeans(3, n_init=4, random_state=seed).fit(H)
        np.testing.assert_array_equal(raw, km.labels_)
        assert raw_inertia == km.inertia_


def test_assign_labels_tries_its_restarts_on_a_sample_of_many_rows(monkeypatch):
    """With more than RESTART_ROWS_PER_CLUSTER x k rows the restarts run on that many rows, then one k-means run on
    every row from the best restart's centres: the labels separate the clusters, the inertia is the labels' own on all
    rows, and the same random_state gives the same labels."""
    from onmsc_dask import assign

    H, y = _directions_with_spread_norms()
    H, y = np.repeat(H, 5, axis=0) * (1 + 0.01 * np.random.default_rng(0).normal(size=(600, 1))), np.repeat(y, 5)
    fitted = []
    monkeypatch.setattr(assign, "RESTART_ROWS_PER_CLUSTER", 40)
    fit = KMeans.fit
    monkeypatch.setattr(KMeans, "fit", lambda self, X, *a, **kw: (fitted.append((len(X), self.n_init)),
                                                                  fit(self, X, *a, **kw))[1])
    labels, inertia = assign_labels(H, 3, random_state=0)
    assert fitted == [(120, 10), (600, 1)]
    assert accuracy(y, labels) == 1.0
    X = normalize_rows(H)
    assert inertia == pytest.approx(sum(((X[labels == c] - X[labels == c].mean(axis=0)) ** 2).sum() for c in range(3)),
                                    rel=1e-9)
    np.testing.assert_array_equal(assign_labels(H, 3, random_state=0)[0], labels)


def test_row_normalization_clusters_directions_not_lengths():
    H, y = _directions_with_spread_norms()
    assert accuracy(y, assign_labels(H, 3, random_state=0)[0]) == 1.0
    assert accuracy(y, assign_labels(H, 3, row_normalize=False, random_state=0)[0]) < 0.9


def test_more_restarts_never_raise_the_kept_inertia():
    rng = np.random.default_rng(1)
    H = rng.normal(size=(300, 6))
    single = [assign_labels(H, 8, n_init=1, random_state=s)[1] for s in range(5)]
    assert assign_labels(H, 8, n_init=20, random_state=0)[1] <= min(single) + 1e-9


def test_readout_is_the_embedding_at_width_k_and_the_target_when_wider():
    rng = np.random.default_rng(2)
    embedding, target = rng.normal(size=(10, 3)), rng.normal(size=(10, 3))
    assert readout(embedding, target, 3) is embedding
    wide, wide_target = rng.normal(size=(10, 6)), rng.normal(size=(10, 6))
    assert readout(wide, wide_target, 3) is wide_target


# ------------------------------------------------------------------ label refinement


def _planted_views(seed: int = 0, n_per: int = 60, k: int = 3) -> tuple[list[sp.csr_matrix], np.ndarray]:
    """Two kNN affinities of noisy views of k well separated groups."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n_per)
    centres = rng.normal(size=(k, 5)) * 3
    views = [centres[y] + rng.normal(size=(len(y), 5)),
             centres[y] @ rng.normal(size=(5, 4)) + rng.normal(size=(len(y), 4))]
    return [view_affinity(X, 10, "euclidean") for X in views], y


def _dense_association(graphs, labels: np.ndarray, k: int) -> float:
    """sum_p sum_c assoc_p(c, c) / vol_p(c) from dense matrices."""
    total = 0.0
    for A in graphs:
        A = A.toarray()
        for c in range(k):
            members = labels == c
            total += A[np.ix_(members, members)].sum() / A[members].sum()
    return total


def _dense_kernel_kmeans_step(graphs, labels: np.ndarray, k: int) -> np.ndarray:
    """One batch assignment step of weighted kernel k-means (kernel D^-1 A D^-1, weights D), dense: sample i goes to
    the cluster minimising sum_p d_p,i ||phi_p(i) - m_p,c||^2, staying where it is on a tie."""
    n = len(labels)
    cost = np.zeros((n, k))
    for A in graphs:
        A = A.toarray()
        d = A.sum(axis=1)
        K = A / np.outer(d, d)
        for c in range(k):
            members, s = labels == c, d[labels == c].sum()
            cost[:, c] += d * (np.diag(K) - 2 * K[:, members] @ d[members] / s
                               + d[members] @ K[np.ix_(members, members)] @ d[members] / s ** 2)
    best = cost.argmin(axis=1)
    return np.where(cost[np.arange(n), best] < cost[np.arange(n), labels] - 1e-12, best, labels)


def _corrupt(y: np.ndarray, fraction: float, k: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    labels = y.copy()
    flip = rng.choice(len(y), int(fraction * len(y)), replace=False)
    labels[flip] = (labels[flip] + rng.integers(1, k, size=flip.size)) % k
    return labels


def test_refinement_moves_are_kernel_kmeans_steps_and_raise_the_association():
    graphs, y = _planted_views()
    start = _corrupt(y, 0.2, 3)
    one, trace, basis = refine_labels(graphs, start, 3, max_iter=1)
    np.testing.assert_array_equal(one, _dense_kernel_kmeans_step(graphs, start, 3))
    np.testing.assert_array_equal(basis, start)  # the partition the kept step assigned to (predict's)
    assert np.sum(one != start) > 10
    assert trace == pytest.approx([_dense_association(graphs, start, 3), _dense_association(graphs, one, 3)])
    labels, trace, _ = refine_labels(graphs, start, 3)
    assert np.all(np.diff(trace) > 0) and trace[-1] == pytest.approx(_dense_association(graphs, labels, 3))
    assert accuracy(y, start) < 0.85 and accuracy(y, labels) == 1.0  # the corrupted labels are repaired
    np.testing.assert_array_equal(refine_labels(graphs, y, 3)[0], y)  # the planted partition is a fixed point
    unchanged, trace, basis = refine_labels(graphs, start, 3, max_iter=0)
    np.testing.assert_array_equal(unchanged, start)
    assert len(trace) == 1 and basis is None


def test_refinement_of_anchor_matrices_equals_that_of_the_dense_anchor_graph():
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(3), 50)
    Zs = []
    for _ in range(2):  # rows link to 3 of 30 landmarks, mostly their group's, weights summing to 1
        cols = np.where(rng.random((150, 3)) < 0.8, 10 * y[:, None], rng.integers(0, 3, (150, 1)) * 10)
        cols = cols + rng.choice(10, size=(150, 3))
        w = rng.random((150, 3))
        Z = sp.csr_matrix((w.ravel(), cols.ravel(), np.arange(0, 451, 3)), shape=(150, 30))
        Z.sum_duplicates()
        Zs.append(sp.csr_matrix(Z.multiply(1 / Z.sum(axis=1))))
    dense = [sp.csr_matrix(Z @ sp.diags(1 / np.asarray(Z.sum(axis=0)).ravel()) @ Z.T) for Z in Zs]
    Y = np.eye(3)[y]
    np.testing.assert_allclose(affinity_operator(Zs[0], anchor=True)(Y), dense[0] @ Y, atol=1e-12)
    start = _corrupt(y, 0.3, 3)
    labels, trace, _ = refine_labels(Zs, start, 3, anchor=True)
    reference, reference_trace, _ = refine_labels(dense, start, 3)
    np.testing.assert_array_equal(labels, reference)
    np.testing.assert_allclose(trace, reference_trace, rtol=1e-12)
    assert len(trace) > 1


def _association(W: np.ndarray, labels: np.ndarray, k: int) -> float:
    """N of one dense graph, an empty cluster counting 0."""
    return sum(W[np.ix_(labels == c, labels == c)].sum() / W[labels == c].sum()
               for c in range(k) if np.any(labels == c))


def test_refinement_never_empties_a_cluster():
    """On this random graph the first step would empty cluster 2 and raise N: no move is made, k clusters stay."""
    rng = np.random.default_rng(848)
    W = rng.random((12, 12)) * (rng.random((12, 12)) < 0.4)
    W = np.triu(W, 1)
    W = W + W.T
    graphs, start = [sp.csr_matrix(W)], rng.integers(0, 3, 12)
    step = _dense_kernel_kmeans_step(graphs, start, 3)
    assert np.bincount(step, minlength=3).min() == 0 and _association(W, step, 3) > _association(W, start, 3)
    labels, trace, _ = refine_labels(graphs, start, 3)
    np.testing.assert_array_equal(labels, start)
    assert len(trace) == 1


def test_refinement_with_isolated_samples_and_empty_volumes():
    """A sample with no edges stays where it is (its cost is the same for every cluster), and a cluster whose
    samples have no edges in a view (volume 0 there) counts 0 in N instead of making it NaN; the labels given are
    not modified, out-of-range labels are refused."""
    graphs, y = _planted_views(n_per=30, k=2)
    keep = sp.diags(np.r_[0.0, np.ones(len(y) - 1)])  # sample 0 loses its edges in both views
    graphs = [sp.csr_matrix(keep @ A @ keep) for A in graphs]
    start = _corrupt(y, 0.2, 2)
    start[0] = 1 - y[0]
    given = start.copy()
    labels, trace, _ = refine_labels(graphs, start, 2)
    np.testing.assert_array_equal(start, given)
    assert labels.dtype == np.int64 and len(trace) > 1 and np.all(np.diff(trace) > 0)
    assert labels[0] == start[0] and accuracy(y[1:], labels[1:]) == 1.0
    lonely = sp.csr_matrix((60, 60))  # a view with no edges at all: every volume 0
    labels, trace, _ = refine_labels([lonely, graphs[1]], start, 2)
    assert np.isfinite(trace).all() and len(trace) > 1 and accuracy(y[1:], labels[1:]) == 1.0
    with pytest.raises(ValueError, match="labels must lie in 0..1, got 0..2"):
        refine_labels(graphs, np.r_[start[:-1], 2], 2)


def test_refinement_stops_at_the_relative_tolerance():
    """The stopping rule of late fusion: the last kept move changed N by at most tol relatively, every earlier one by
    more; tol = 0 runs on until no move raises N."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    graphs = [view_affinity(X[:, :32], 10, "cosine"), view_affinity(X[:, 32:], 10, "cosine")]
    rng = np.random.default_rng(0)
    start = np.where(rng.random(len(y)) < 0.3, rng.integers(0, 10, len(y)), y)
    _, full, _ = refine_labels(graphs, start, 10, tol=0)
    _, early, _ = refine_labels(graphs, start, 10, tol=0.02)
    gains = np.diff(early) / np.array(early[1:])
    assert np.all(gains[:-1] > 0.02) and 0 < gains[-1] <= 0.02
    assert len(early) < len(full) and early == full[:len(early)]
