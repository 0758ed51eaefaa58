"""Discrete labels from the fused embedding: k-means with restarts, lowest inertia kept, then refined on the view
graphs (``refine_labels``)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans

from .fusion import converged
from .spectral import anchor_column_sums, anchor_factor_pieces, anchor_half
from .validation import user_warning

REFINE_MAX_ITER = 100  # batch steps of refine_labels at most


def normalize_rows(H: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (Ng-Jordan-Weiss); all-zero rows stay zero."""
    norms = np.linalg.norm(H, axis=1, keepdims=True)
    return H / np.where(norms > 0, norms, 1.0)


#: rows per cluster on which k-means tries its restarts, when there are more rows (``assign_labels``)
RESTART_ROWS_PER_CLUSTER = 10_000


def assign_labels(H: np.ndarray, n_clusters: int, *, n_init: int = 10, row_normalize: bool = True,
                  random_state: int | None = None) -> tuple[np.ndarray, float]:
    """k-means on (row-normalized) H with ``n_init`` restarts; returns labels and the kept inertia. With more than
    RESTART_ROWS_PER_CLUSTER x k rows the restarts run on that many rows drawn at random, and the centres of the best
    start one k-means run on every row (1M rows x 20 columns: 21-32 s -> 4-5 s, docs/defaults.md)."""
    X = normalize_rows(H) if row_normalize else H
    # copy_x=False: k-means centres X in place (X is H's normalized copy) instead of copying it (the same numbers)
    full = dict(random_state=random_state, copy_x=not row_normalize)
    rows = RESTART_ROWS_PER_CLUSTER * n_clusters
    if len(X) > rows:
        sample = np.sort(np.random.default_rng(random_state).choice(len(X), rows, replace=False))
        best = KMeans(n_clusters, n_init=n_init, random_state=random_state).fit(X[sample])
        km = KMeans(n_clusters, init=best.cluster_centers_, n_init=1, **full).fit(X)
    else:
        km = KMeans(n_clusters, n_init=n_init, **full).fit(X)
    return km.labels_.astype(np.int64), float(km.inertia_)


#: a row of the read-out shorter than this times the median row has no direction within the eigensolver's tolerance
#: (spectral.py: ARPACK's tol=1e-8): its sample is linked to nothing in any view, its label arbitrary
NEGLIGIBLE_ROW = 1e-8


def warn_isolated_rows(rows: np.ndarray) -> None:
    """A warning naming the samples whose read-out row is about 0 (NEGLIGIBLE_ROW): outliers so far from their
    neighbours in every view that their kernel weights vanish, so that their labels are arbitrary."""
    norms = np.linalg.norm(rows, axis=1)
    far = np.flatnonzero(norms < NEGLIGIBLE_ROW * np.median(norms))
    if far.size:
        user_warning(f"{far.size} sample(s) far from all their neighbours in every view (rows {far[:5].tolist()}"
                     f"{', ...' if far.size > 5 else ''}: outliers whose rows of the fused embedding are about 0) have "
                     "arbitrary labels; look at them, or leave them out")


def readout(embedding: np.ndarray, target: np.ndarray, n_clusters: int) -> np.ndarray:
    """The rows k-means clusters: H* when it is k wide; when wider, the fusion target T = S + lambda1 F (Eq. 12),
    H* with each direction weighted by its singular value (how strongly the views support it), so that the extra
    directions do not weigh as much as the cluster directions (docs/solvers.md, "More eigenvectors than clusters")."""
    return target if embedding.shape[1] > n_clusters else embedding


def affinity_operator(graph: sp.spmatrix, anchor: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    """Y -> A Y for a kNN affinity A (n x n), or for an anchor matrix Z (n x m) with A = B B^T, B = Z Lambda^-1/2
    (spectral.anchor_factor_pieces; Lambda = Z^T 1 computed once), without forming A."""
    if not anchor:
        return lambda Y: np.asarray(graph @ Y)
    B = anchor_half(graph, anchor_factor_pieces(anchor_column_sums(graph)))
    return lambda Y: np.asarray(B @ (B.T @ Y))


class _Partition(NamedTuple):
    """A partition seen by each view p: links_p(i, c) = sum_{j in c} A_p,ij (n x k); assoc_p(c, c), vol_p(c) (v x k)."""

    links: list[np.ndarray]
    within: np.ndarray
    volume: np.ndarray

    @property
    def association(self) -> float:
        """N = sum_p sum_c assoc_p(c, c) / vol_p(c), an empty volume counting 0."""
        return float(np.sum(np.divide(self.within, self.volume, out=np.zeros_like(self.within),
                                      where=self.volume > 0)))


def _partition(products: list[Callable[[np.ndarray], np.ndarray]], degrees: list[np.ndarray], labels: np.ndarray,
               k: int) -> _Partition:
    Y = np.eye(k)[labels]
    links = [product(Y) for product in products]
    return _Partition(links, np.array([np.einsum("ic,ic->c", Y, L) for L in links]),
                      np.array([Y.T @ d for d in degrees]))


def _products_and_degrees(graphs: Sequence[sp.spmatrix], anchor: bool, n: int) -> tuple[list, list[np.ndarray]]:
    products = [affinity_operator(G, anchor) for G in graphs]
    return products, [product(np.ones((n, 1))).ravel() for product in products]


def _checked_labels(labels: np.ndarray, k: int) -> np.ndarray:
    """``labels`` as an int64 copy, checked to lie in 0..k-1."""
    labels = np.array(labels, dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= k):
        raise ValueError(f"labels must lie in 0..{k - 1}, got {labels.min()}..{labels.max()}")
    return labels


def mean_normalized_cut(graphs: Sequence[sp.spmatrix], labels: np.ndarray, n_clusters: int, *,
                        anchor: bool = False) -> float:
    """Mean over the views and the k clusters of 1 - assoc_p(c, c) / vol_p(c) (an empty cluster counts 1):
    1 - N / (v k), N refine_labels' objective. ``graphs``: kNN affinities, or anchor matrices Z with ``anchor``."""
    labels = _checked_labels(labels, n_clusters)
    products, degrees = _products_and_degrees(graphs, anchor, len(labels))
    return 1 - _partition(products, degrees, labels, n_clusters).association / (len(graphs) * n_clusters)


def _distances(state: _Partition, volume: np.ndarray, degrees: list[np.ndarray]) -> np.ndarray:
    """sum_p d_p[:, None] (w_p / v_p) / v_p - 2 L_p / v_p (n x k) of refine_labels' step, summed in place: the
    numbers of that expression with two n x k temporaries."""
    distance = None
    for L, w, v, d in zip(state.links, state.within, volume, degrees):
        term = d[:, None] * (w / v)
        term /= v
        twice = 2 * L
        twice /= v
        term -= twice
        if distance is None:
            distance = term
        else:
            distance += term
    return distance


def refine_labels(graphs: Sequence[sp.spmatrix], labels: np.ndarray, n_clusters: int, *, anchor: bool = False,
                  tol: float = 1e-4, max_iter: int = REFINE_MAX_ITER
                  ) -> tuple[np.ndarray, list[float], np.ndarray | None]:
    """Labels that raise the views' summed normalized association N = sum_p sum_c assoc_p(c, c) / vol_p(c)
    (= sum_p (k - Ncut_p); each term is the discrete problem that Eq. 4's tr(H^T G_p H) relaxes), from ``labels``
    (0..k-1, not modified): batch assignment steps of weighted kernel k-means, whose objective is -N (Dhillon, Guan &
    Kulis 2004: kernels D_p^-1 A_p D_p^-1, weights D_p), kept while N increases and no cluster empties, until a step
    changes N by at most ``tol`` relatively (late fusion's stopping rule). ``graphs``: kNN affinities, or anchor
    matrices Z with ``anchor``. Returns int64 labels, N before and after each kept step (docs/defaults.md), and the
    partition whose clusters the last kept step assigned the samples to (None when no step was kept): predict's
    (extend.refinement_map), which then gives every fitted sample its label."""
    k, labels = n_clusters, _checked_labels(labels, n_clusters)
    products, degrees = _products_and_degrees(graphs, anchor, len(labels))
    state = _partition(products, degrees, labels, k)
    trace, rows, basis = [state.association], np.arange(len(labels)), None
    for _ in range(max_iter):
        # sum_p d_p,i x (squared distance of sample i to cluster c's mean in view p's kernel space, less i's own term)
        volume = np.where(state.volume > 0, state.volume, np.inf)
        distance = _distances(state, volume, degrees)
        best = distance.argmin(axis=1)
        moved = np.where(distance[rows, best] < distance[rows, labels], best, labels)  # ties stay
        del distance, state  # not needed by the step's partition, which replaces them (peak memory)
        if np.array_equal(moved, labels) or np.bincount(moved, minlength=k).min() == 0:
            break
        state = _partition(products, degrees, moved, k)
        if state.association <= trace[-1]:
            break
        basis, labels = labels, moved
        trace.append(state.association)
        if converged(trace[-2], trace[-1], tol):
            break
    return labels, trace, basis
