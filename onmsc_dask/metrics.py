"""Clustering quality against ground truth: accuracy (Hungarian), NMI, purity, ARI."""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.metrics.cluster import contingency_matrix


def _labelling(y: ArrayLike, name: str) -> np.ndarray:
    """``y`` as one label per sample (a column vector is one): 2-D labels were flattened into scores of nothing."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        return y.ravel()
    if y.ndim != 1:
        raise ValueError(f"{name} must hold one label per sample (1-D), got shape {y.shape}")
    return y


def _contingency(y_true: ArrayLike, y_pred: ArrayLike) -> np.ndarray:
    """The classes x clusters contingency table of two labellings of the same samples."""
    y_true, y_pred = _labelling(y_true, "y_true"), _labelling(y_pred, "y_pred")
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true has {y_true.size} labels but y_pred has {y_pred.size}")
    if y_true.size == 0:
        raise ValueError("cannot evaluate an empty labelling")
    return contingency_matrix(y_true, y_pred)


def accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Best one-to-one matching of clusters to classes (Hungarian algorithm)."""
    c = _contingency(y_true, y_pred)
    rows, cols = linear_sum_assignment(-c)
    return float(c[rows, cols].sum() / c.sum())


def purity(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Fraction of samples in the majority class of their cluster."""
    c = _contingency(y_true, y_pred)
    return float(c.max(axis=0).sum() / c.sum())


def evaluate(y_true: ArrayLike, y_pred: ArrayLike) -> dict[str, float]:
    """``acc``, ``nmi``, ``purity`` and ``ari`` of a predicted labelling."""
    y_true, y_pred = _labelling(y_true, "y_true"), _labelling(y_pred, "y_pred")
    _contingency(y_true, y_pred)
    return {
        "acc": accuracy(y_true, y_pred),
        "nmi": float(normalized_mutual_info_score(y_true, y_pred)),
        "purity": purity(y_true, y_pred),
        "ari": float(adjusted_rand_score(y_true, y_pred)),
    }
