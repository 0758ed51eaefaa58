"""Label-free choice of the fusion weights (lambda1, lambda2) and of the orders used.

Each candidate's read-out (assign.readout: H*, or the fusion target T when wider than k) is clustered and scored
by the k-means distortion of its unit-length rows (mean squared distance to the nearest centre): unit rows make the
scores comparable, and lower means the rows form k tighter, better separated groups. No labels are used.
Measured on the shared benchmarks (docs/defaults.md), this tracks ACC (Spearman 0.33-0.70) while a fixed
guess of (lambda1, lambda2) can collapse mu onto one view. It runs fusion and assignment for each candidate, so
it comes after both stages; ``fuse`` is the chain's fusion step, searched or not.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np
from sklearn.cluster import KMeans

from .assign import normalize_rows, readout
from .fusion import LateFusionResult, default_lambda2, fuse_views, late_fusion, views_used

#: lambda1 candidates (weight of the consensus embedding F; tr(H*^T F) <= k like each view's term)
LAMBDA1_GRID = (0.0, 0.5, 1.0, 2.0)
#: lambda2 candidates in units of width * O (width = k, or n_components), the scale of the QP's linear term (Eq. 15)
LAMBDA2_SCALE_GRID = (0.25, 0.5, 1.0, 2.0)
#: rows used to score a candidate (a seeded sample keeps scoring O(1) in n)
SCORE_SAMPLE = 5000


@dataclass
class Candidate:
    order: int
    lambda1: float
    lambda2: float
    distortion: float
    result: LateFusionResult


def score_rows(n: int, rng: np.random.Generator) -> np.ndarray | slice:
    """The rows distortion scores: a sample of SCORE_SAMPLE of the n rows drawn from ``rng``, or all of them."""
    return rng.choice(n, SCORE_SAMPLE, replace=False) if n > SCORE_SAMPLE else slice(None)


def distortion(H: np.ndarray, k: int, rng: np.random.Generator, rows: np.ndarray | slice = slice(None)) -> float:
    """Mean squared distance of H's unit-normalized ``rows`` (score_rows: the same for every candidate compared) to
    their k-means centres (3 restarts, seeded from ``rng``)."""
    X = normalize_rows(H[rows])
    km = KMeans(k, n_init=3, random_state=int(rng.integers(2**31 - 1))).fit(X)
    return float(((X - km.cluster_centers_[km.labels_]) ** 2).sum(axis=1).mean())


def select_fusion(H: np.ndarray, F: np.ndarray, k: int, *, lambda1=None, lambda2=None, tol: float = 1e-4,
                  max_iter: int = 100, random_state: int | None = None) -> tuple[Candidate, list[Candidate]]:
    """Run late fusion for every candidate (orders 1..O, lambda grids; a given lambda is kept fixed, and
    ``lambda2="auto"`` is the rule width * o of each candidate's order o, width = H's columns) and return the one
    of least distortion (of k clusters), with all candidates."""
    O, width = H.shape[1], H.shape[-1]
    orders = range(1, O + 1) if lambda1 is None or lambda2 is None else [O]
    l1_grid = LAMBDA1_GRID if lambda1 is None else (lambda1,)
    rng = np.random.default_rng(random_state)
    rows, candidates = score_rows(H.shape[-2], rng), []
    for o, l1, l2s in product(orders, l1_grid, LAMBDA2_SCALE_GRID if lambda2 is None else (None,)):
        auto = default_lambda2(width, o)
        l2 = l2s * auto if l2s is not None else auto if lambda2 == "auto" else lambda2
        fused = late_fusion(H[:, :o], F, l1, l2, tol=tol, max_iter=max_iter)
        seed_rng = np.random.default_rng(rng.integers(2**31 - 1))
        candidates.append(Candidate(o, l1, l2, distortion(readout(fused.embedding, fused.target, k), k, seed_rng,
                                                                rows), fused))
    return min(candidates, key=lambda c: c.distortion), candidates


def fuse(H: np.ndarray, eigenvalues: np.ndarray, F: np.ndarray, used: np.ndarray, k: int, lambda1: float | str,
         lambda2: float | str, *, order: int, eigenvalue_scaling: bool, tol: float, max_iter: int,
         random_state: int | None) -> tuple[LateFusionResult, dict]:
    """Late fusion of the views ``used`` (indices): with numbers for both lambdas fusion.fuse_views; when either is
    ``"select"``, select_fusion on the bare eigenvectors (the other a number, or for lambda2 ``"auto"``: width * o
    of each candidate's order o). Returns the result and the settings it used (order, lambda1, lambda2, n_iter, and
    the candidates searched, or None)."""
    if "select" not in (lambda1, lambda2):
        fused = fuse_views(H, eigenvalues, F, used, lambda1, lambda2, eigenvalue_scaling=eigenvalue_scaling, tol=tol,
                           max_iter=max_iter)
        return fused, {"order": order, "lambda1": lambda1, "lambda2": lambda2, "n_iter": fused.n_iter,
                       "selection": None}
    best, candidates = select_fusion(views_used(H, used), F, k, lambda1=None if lambda1 == "select" else lambda1,
                                     lambda2=None if lambda2 == "select" else lambda2, tol=tol, max_iter=max_iter,
                                     random_state=random_state)
    return best.result, {"order": best.order, "lambda1": float(best.lambda1), "lambda2": float(best.lambda2),
                         "n_iter": best.result.n_iter,
                         "selection": [dict(order=c.order, lambda1=float(c.lambda1), lambda2=float(c.lambda2),
                                            distortion=float(c.distortion)) for c in candidates]}
