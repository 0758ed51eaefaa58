"""Baselines of the paper's comparison and ablation, as estimators with ``fit(views)`` / ``labels_``; ``views`` as
``ONMSC.fit`` takes them (a list of arrays, a MultiViewStore, its path or URL: read whole), with ``view_names`` and
``storage_options``; a view that cannot help (constant, fewer distinct rows than clusters) is left out with a warning,
as ONMSC leaves it out (``kept_views_``: the positions of the views used, of ``n_views_in_`` given).

All share the ONMSC graph construction (``graph.view_graphs``: same metric and neighbour defaults).

- ``SingleBestView`` (SB-SC): spectral clustering of every view, the best one chosen label-free by eigengap.
- ``AverageGraphSC`` (A-MVSC): spectral clustering of the average affinity (1/v) sum_p A_p.
- ``LinearCombination`` (BL; ``order=2``: BL+HCI): min_{mu, H} tr(H^T L_mu H) + alpha mu^T M mu with
  L_mu = sum_{o<=O} sum_p mu_p L_p^(o) (Liu et al. 2016's matrix-induced regularisation on Laplacians).
- BL+NLM and BL+NLM+HCI are ONMSC-EF with order 1 and 2: ``api.fit_early_fusion(order=...)``.
- ``ConcatSC`` / ``ConcatKMeans``: spectral clustering / k-means of the concatenated views
  (``concatenate_views``: dense views standardized, non-negative sparse count or weight views TF-IDF + L2).
- ``LabelPickedView``: every view's spectral clustering, the best one chosen WITH labels (a reference, not a method).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import TfidfTransformer

from .assign import assign_labels
from .cluster import one_blas_thread
from .early_fusion import EarlyFusionProblem
from .fusion import converged, full_weights, simplex_qp
from .graph import COUNTS_MIN_ZERO_FRACTION, NormalizedHighOrderAffinity, value_summary, view_graphs
from .metrics import accuracy, evaluate
from .spectral import average_graph_embedding, top_eigenvectors
from .store import encode_labels
from .validation import (check_int, check_lambda, check_row_index, check_seed, check_tol, check_views, clear_fitted,
                         informative_views, kept_names)


def usable_views(views, n_clusters: int, view_names: Sequence[str] | None = None,
                 storage_options: dict | None = None) -> tuple[list, list[str] | None, list[int], int]:
    """What a baseline fits, as ``ONMSC.fit`` takes it (in_memory_views): the views that can help a clustering into
    ``n_clusters`` (a constant view, or one of fewer distinct rows than clusters, is left out with a warning naming
    it, as ONMSC leaves it out), their names, their positions among the given views and the number of views given."""
    from .store import in_memory_views

    views, names = in_memory_views(views, view_names, storage_options)
    usable, kept = informative_views(views, n_clusters, names)
    return usable, kept_names(names, kept, len(views)), kept, len(views)


def concatenate_views(views, view_names: Sequence[str] | None = None) -> np.ndarray | sp.csr_matrix:
    """The views side by side, each weighing the same: a non-negative view with at least
    COUNTS_MIN_ZERO_FRACTION zeros (counts or term weights) as TF-IDF rows of unit length, any other view
    standardized per column (constant columns dropped) and divided by sqrt(columns), so each block's rows have
    a mean squared length of 1. Sparse when every block is. Messages name the views by ``view_names``."""
    blocks = []
    for X in check_views(views, view_names):
        min_value, zero_fraction, _ = value_summary(X)
        if min_value >= 0 and zero_fraction >= COUNTS_MIN_ZERO_FRACTION:
            blocks.append(sp.csr_matrix(TfidfTransformer().fit_transform(X)))
            continue
        D = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        sd = D.std(axis=0)
        D = (D[:, sd > 0] - D[:, sd > 0].mean(axis=0)) / sd[sd > 0]
        blocks.append(D / np.sqrt(D.shape[1]))
    if all(sp.issparse(B) for B in blocks):
        return sp.hstack(blocks).tocsr()
    return np.hstack([B.toarray() if sp.issparse(B) else B for B in blocks])


class _Baseline(ClusterMixin, BaseEstimator):
    def fit(self, views, y=None, view_names: Sequence[str] | None = None, storage_options: dict | None = None):
        """Fit on ``views`` (as ``ONMSC.fit`` takes them), the parameters checked first; a refit keeps nothing of an
        earlier fit, a failed fit leaves no fitted attributes behind."""
        clear_fitted(self)
        check_int("n_init", self.n_init)
        check_seed(self.random_state)
        if y is not None and isinstance(views, (list, tuple)):
            check_row_index(list(views), view_names, y)  # a pandas Series y in another row order than the views'
        try:
            with one_blas_thread():
                return self._fit(views, y, view_names, storage_options)
        except BaseException:
            clear_fitted(self)
            raise

    def fit_predict(self, views, y=None, **fit_params) -> np.ndarray:
        """fit, then ``labels_``."""
        return self.fit(views, y, **fit_params).labels_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # every view may be scipy.sparse, as for ONMSC
        return tags


class _GraphClustering(_Baseline):
    def __init__(self, n_clusters: int = 8, *, n_neighbors: int | None = None,
                 metric: str | Sequence[str] = "auto", n_init: int = 10, random_state: int | None = None):
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.n_init = n_init
        self.random_state = random_state

    def _seed(self) -> int | None:
        return check_seed(self.random_state)

    def _usable(self, views, view_names: Sequence[str] | None, storage_options: dict | None) -> tuple[list, list]:
        """usable_views's views and names; their positions go to ``kept_views_``, the number given to
        ``n_views_in_``."""
        usable, names, self.kept_views_, self.n_views_in_ = usable_views(views, self.n_clusters, view_names,
                                                                         storage_options)
        return usable, names

    def _graphs(self, views, view_names: Sequence[str] | None = None):
        metric = self.metric
        if not isinstance(metric, str) and len(views) < self.n_views_in_:  # a view left out takes its entry of a
            if len(metric) != self.n_views_in_:  # per-view list with it, as in ONMSC
                raise ValueError(f"metric lists {len(metric)} entries for {self.n_views_in_} views")
            metric = [metric[p] for p in self.kept_views_]
        graphs, self.metric_, self.n_neighbors_ = view_graphs(views, self.n_clusters, self.n_neighbors,
                                                              metric, self._seed(), view_names)
        return graphs

    def _labels(self, H: np.ndarray) -> np.ndarray:
        return assign_labels(H, self.n_clusters, n_init=self.n_init, random_state=self._seed())[0]


class SingleBestView(_GraphClustering):
    """SB-SC: per-view spectral clustering; ``labels_`` of the view with the largest eigengap
    lambda_k - lambda_{k+1} of G = D^-1/2 A D^-1/2 (label-free). ``score_views(y)`` gives every view's
    scores so a benchmark can also report the label-oracle best view. ``eigengaps_`` and ``per_view_labels_`` are the
    usable views' (``kept_views_``); ``best_view_`` is a position among the given views."""

    def _fit(self, views, y, view_names: Sequence[str] | None, storage_options: dict | None):
        self._cluster_views(*self._usable(views, view_names, storage_options))
        return self._pick(int(np.argmax(self.eigengaps_)))

    def _cluster_views(self, views: list, names: list[str] | None) -> None:
        """``eigengaps_`` and ``per_view_labels_`` of the usable ``views``."""
        k, seed = self.n_clusters, self._seed()
        eig = [top_eigenvectors(NormalizedHighOrderAffinity(A, 1), k + 1, seed) for A in self._graphs(views, names)]
        self.eigengaps_ = np.array([vals[k - 1] - vals[k] for vals, _ in eig])
        self.per_view_labels_ = [self._labels(vecs[:, :k]) for _, vecs in eig]

    def _pick(self, i: int) -> "SingleBestView":
        """``labels_`` of the i-th usable view, ``best_view_`` its position among the given views."""
        self.best_view_ = self.kept_views_[i]
        self.labels_ = self.per_view_labels_[i]
        return self

    def score_views(self, y_true) -> list[dict[str, float]]:
        """``metrics.evaluate`` of every usable view's labels (``kept_views_``) against ``y_true``."""
        return [evaluate(y_true, labels) for labels in self.per_view_labels_]


class AverageGraphSC(_GraphClustering):
    """A-MVSC: spectral clustering (Ng-Jordan-Weiss) of the average affinity."""

    def _fit(self, views, y, view_names: Sequence[str] | None, storage_options: dict | None):
        self.embedding_ = average_graph_embedding(self._graphs(*self._usable(views, view_names, storage_options)),
                                                  "exact", self.n_clusters, random_state=self._seed())
        self.labels_ = self._labels(self.embedding_)
        return self


class LinearCombination(_GraphClustering):  # Eq. 5 with high-order Laplacians and the diversity term
    """BL: min_{H^T H = I, mu in simplex} tr(H^T L_mu H) + alpha mu^T M mu, L_mu = sum_{o,p} mu_p L_p^(o);
    ``order=2`` is BL+HCI. Alternates H = top-k eigenvectors of sum_{o,p} mu_p G_p^(o) and the exact simplex QP
    for mu; the objective never increases. ``alpha="auto"`` = k * O (M_pp = O; the late-fusion lambda2 rule)."""

    def __init__(self, n_clusters: int = 8, *, order: int = 1, alpha: float | str = "auto",
                 n_neighbors: int | None = None, metric: str | Sequence[str] = "auto", tol: float = 1e-4,
                 max_iter: int = 100, n_init: int = 10, random_state: int | None = None):
        super().__init__(n_clusters, n_neighbors=n_neighbors, metric=metric, n_init=n_init,
                         random_state=random_state)
        self.order = order
        self.alpha = alpha
        self.tol = tol
        self.max_iter = max_iter

    def _fit(self, views, y, view_names: Sequence[str] | None, storage_options: dict | None):
        k, O = self.n_clusters, check_int("order", self.order)
        check_int("max_iter", self.max_iter)
        check_tol(self.tol)
        self.alpha_ = float(k * O) if self.alpha == "auto" else check_lambda("alpha", self.alpha, True, ["auto"])
        problem = EarlyFusionProblem(self._graphs(*self._usable(views, view_names, storage_options)), k, O,
                                     self.alpha_, self._seed())
        mu = np.full(len(problem.ops), 1.0 / len(problem.ops))
        H = top_eigenvectors(problem.combined(mu), k, problem.random_state)[1]
        c = O * k - problem.compressions(H).sum(axis=1)  # c_p = sum_o tr(H^T L_p^(o) H)
        self.objective_ = [float(c @ mu + self.alpha_ * mu @ problem.M @ mu)]
        for it in range(1, self.max_iter + 1):
            mu = simplex_qp(self.alpha_ * problem.M, -c)  # argmin_mu c^T mu + alpha mu^T M mu
            H = top_eigenvectors(problem.combined(mu), k, problem.random_state)[1]  # argmin_H tr(H^T L_mu H)
            c = O * k - problem.compressions(H).sum(axis=1)
            self.objective_.append(float(c @ mu + self.alpha_ * mu @ problem.M @ mu))
            if converged(self.objective_[-2], self.objective_[-1], self.tol):
                break
        self.embedding_ = H
        self.view_weights_, self.n_iter_ = full_weights(mu, self.kept_views_, self.n_views_in_), it
        self.labels_ = self._labels(self.embedding_)
        return self


class LabelPickedView(SingleBestView):
    """Reference only, NOT label-free: per-view spectral clustering as SB-SC, ``labels_`` of the view with the
    highest accuracy against ``y`` (required, or the labels of a store given as ``views``)."""

    def _fit(self, views, y, view_names: Sequence[str] | None, storage_options: dict | None):
        if y is None and not isinstance(views, (list, tuple)):  # a store, its path or URL (opened once): its labels
            from .store import view_inputs

            views = view_inputs(views, view_names, storage_options)[0]
            y = getattr(views, "labels", None)
        if y is None:
            raise ValueError("LabelPickedView picks its view with the labels: fit(views, y), or views a store that "
                             "holds them")
        usable, names = self._usable(views, view_names, storage_options)
        y = encode_labels(y, usable[0].shape[0], name="y")[0]  # before any view is clustered
        self._cluster_views(usable, names)
        return self._pick(int(np.argmax([accuracy(y, labels) for labels in self.per_view_labels_])))


class ConcatSC(_GraphClustering):
    """Spectral clustering (Ng-Jordan-Weiss) of the kNN graph (Eq. 1, euclidean) of ``concatenate_views``."""

    def __init__(self, n_clusters: int = 8, *, n_neighbors: int | None = None, n_init: int = 10,
                 random_state: int | None = None):
        super().__init__(n_clusters, n_neighbors=n_neighbors, metric="euclidean", n_init=n_init,
                         random_state=random_state)

    def _fit(self, views, y, view_names: Sequence[str] | None, storage_options: dict | None):
        concatenated = concatenate_views(*self._usable(views, view_names, storage_options))
        graphs = self._graphs([concatenated], ["the concatenated views"])
        self.embedding_ = average_graph_embedding(graphs, "exact", self.n_clusters, random_state=self._seed())
        self.labels_ = self._labels(self.embedding_)
        return self


class ConcatKMeans(_Baseline):
    """k-means (``n_init`` restarts) of ``concatenate_views``."""

    def __init__(self, n_clusters: int = 8, *, n_init: int = 10, random_state: int | None = None):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.random_state = random_state

    def _fit(self, views, y, view_names: Sequence[str] | None, storage_options: dict | None):
        km = KMeans(self.n_clusters, n_init=self.n_init, random_state=check_seed(self.random_state))
        usable, names, self.kept_views_, self.n_views_in_ = usable_views(views, self.n_clusters, view_names,
                                                                         storage_options)
        self.labels_ = km.fit(concatenate_views(usable, names)).labels_.astype(np.int64)
        return self
