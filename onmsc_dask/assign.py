"""Discrete labels from the fused embedding: k-means with restarts, lowest inertia kept, then refined on the view
graphs (``refine_labels``)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans

from .fusion import converged

REFINE_MAX_ITER = 100  # batch moves of refine_labels at most


def normalize_rows(H: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (Ng-Jordan-Weiss); all-zero rows stay zero."""
    norms = np.linalg.norm(H, axis=1, keepdims=True)
    return H / np.where(norms > 0, norms, 1.0)


def assign_labels(H: np.ndarray, n_clusters: int, *, n_init: int = 10, row_normalize: bool = True,
                  random_state: int | None = None) -> tuple[np.ndarray, float]:
    """k-means on (row-normalized) H with ``n_init`` restarts; returns labels and the kept inertia."""
    X = normalize_rows(H) if row_normalize else H
    km = KMeans(n_clusters, n_init=n_init, random_state=random_state).fit(X)
    return km.labels_.astype(np.int64), float(km.inertia_)


def readout(embedding: np.ndarray, target: np.ndarray, n_clusters: int) -> np.ndarray:
    """The rows k-means clusters: H* when it is k wide; when wider, the fusion target T = S + lambda1 F (Eq. 12),
    H* with each direction weighted by its singular value (how strongly the views support it), so that the extra
    directions do not weigh as much as the cluster directions (docs/solvers.md, "More eigenvectors than clusters")."""
    return target if embedding.shape[1] > n_clusters else embedding


def affinity_product(graph: sp.spmatrix, Y: np.ndarray, anchor: bool = False) -> np.ndarray:
    """A Y for a kNN affinity A (n x n), or for an anchor matrix Z (n x m) with A = Z Lambda^-1 Z^T, Lambda = Z^T 1
    (spectral.py), without forming A."""
    if not anchor:
        return np.asarray(graph @ Y)
    lam = np.asarray(graph.sum(axis=0)).ravel()
    return np.asarray(graph @ ((graph.T @ Y) / np.where(lam > 0, lam, 1.0)[:, None]))


def _cluster_links(graphs: Sequence[sp.spmatrix], degrees: list[np.ndarray], labels: np.ndarray, k: int,
                   anchor: bool) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Per view: links(i, c) = sum_{j in c} A_ij (n x k); and per view and cluster assoc(c, c) and vol(c) (v x k)."""
    Y = np.eye(k)[labels]
    links = [affinity_product(G, Y, anchor) for G in graphs]
    within = np.array([np.einsum("ic,ic->c", Y, L) for L in links])
    volume = np.maximum(np.array([Y.T @ d for d in degrees]), np.finfo(float).tiny)
    return links, within, volume


def refine_labels(graphs: Sequence[sp.spmatrix], labels: np.ndarray, n_clusters: int, *, anchor: bool = False,
                  tol: float = 1e-4, max_iter: int = REFINE_MAX_ITER) -> tuple[np.ndarray, list[float]]:
    """Labels that raise the views' summed normalized association N = sum_p sum_c assoc_p(c, c) / vol_p(c)
    (= sum_p (k - Ncut_p); each view's term is the discrete problem Eq. 4's tr(H^T G_p H) relaxes), from
    ``labels``: batch moves of weighted kernel k-means (Dhillon, Guan & Kulis 2007, kernels D_p^-1 A_p D_p^-1 and
    weights D_p summed over the views: each sample to the cluster at the least distance), kept while N increases
    and no cluster empties, until a move changes N by at most ``tol`` relatively (the stopping rule of late fusion).
    ``graphs`` are kNN affinities, or anchor matrices Z with ``anchor``. Returns the labels and N before and after each
    kept move (docs/defaults.md, "Label refinement")."""
    k, n = n_clusters, len(labels)
    degrees = [affinity_product(G, np.ones((n, 1)), anchor).ravel() for G in graphs]
    inv_degrees = [np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)[:, None] for d in degrees]
    links, within, volume = _cluster_links(graphs, degrees, labels, k, anchor)
    trace = [float(np.sum(within / volume))]
    for _ in range(max_iter):
        # distance to cluster c in the kernel feature space, less the sample's own term (the same for every c)
        distance = sum(w / v ** 2 - 2 * L * inv_d / v for L, w, v, inv_d in zip(links, within, volume, inv_degrees))
        moved = distance.argmin(axis=1)
        if np.array_equal(moved, labels) or np.bincount(moved, minlength=k).min() == 0:
            break
        state = _cluster_links(graphs, degrees, moved, k, anchor)
        value = float(np.sum(state[1] / state[2]))
        if value <= trace[-1]:
            break
        labels, (links, within, volume) = moved, state
        trace.append(value)
        if converged(trace[-2], value, tol):
            break
    return labels, trace
