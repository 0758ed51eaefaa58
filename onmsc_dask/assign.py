"""Discrete labels from the fused embedding: k-means with restarts, lowest inertia kept."""
from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans


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
