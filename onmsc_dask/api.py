"""The ONMSC estimator (scikit-learn API): views -> graphs -> H_p^(o) -> late fusion -> labels."""
from __future__ import annotations

import os
import time
from collections.abc import Sequence

import dask
import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin

from .assign import assign_labels
from .fusion import late_fusion
from .graph import build_graph, default_n_neighbors, resolve_metric
from .spectral import average_graph_embedding, embed_graph, resolve_solver
from .validation import check_n_clusters, check_n_neighbors, check_views


def _embed_view(X, solver: str, k: int, order: int, graph_params: dict, seed: int):
    """Graph and H_p^(o), o = 1..order, of one view (one Dask task)."""
    graph = build_graph(X, solver, random_state=seed, **graph_params)
    return graph, embed_graph(graph, solver, k, order, n_landmarks=graph_params["n_landmarks"], random_state=seed)


class ONMSC(ClusterMixin, BaseEstimator):
    """Optimal Neighborhood Multi-view Spectral Clustering with high-order Laplacians (late fusion).

    Parameters
    ----------
    n_clusters : number of clusters k.
    n_neighbors : kNN graph neighbours N; ``None`` uses ``graph.default_n_neighbors(n, k)``.
    order : largest order O of the affinities A^o.
    lambda1, lambda2 : weights of the average-graph term and of the view-diversity term of Eq. 11;
        ``"auto"`` uses lambda1 = 1 and lambda2 = k * O, which puts the QP's quadratic term on the scale of
        its linear term so several views keep weight (docs/defaults.md).
    embedding : ``"exact"``, ``"anchor"``, ``"nystrom"`` or ``"auto"`` (spectral.resolve_solver).
    metric : ``"auto"``, ``"euclidean"``, ``"cosine"``, or a list with one entry per view.
    n_landmarks, n_nearest_landmarks : anchor graph size m and links per point r (Nystrom uses m too).
    n_init : k-means restarts on H*.
    random_state : seed; the same seed gives the same labels on any number of workers.
    """

    def __init__(self, n_clusters: int = 8, *, n_neighbors: int | None = None, order: int = 2,
                 lambda1: float | str = "auto", lambda2: float | str = "auto", embedding: str = "auto",
                 metric: str | Sequence[str] = "auto", n_landmarks: int = 1000, n_nearest_landmarks: int = 3,
                 n_init: int = 10, max_iter: int = 100, tol: float = 1e-4, random_state: int | None = None):
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.order = order
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.embedding = embedding
        self.metric = metric
        self.n_landmarks = n_landmarks
        self.n_nearest_landmarks = n_nearest_landmarks
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _metrics(self, views: list) -> list[str]:
        metrics = [self.metric] * len(views) if isinstance(self.metric, str) else list(self.metric)
        if len(metrics) != len(views):
            raise ValueError(f"metric lists {len(metrics)} entries for {len(views)} views")
        return [resolve_metric(X, m) for X, m in zip(views, metrics)]

    def fit(self, views, y=None):
        """Cluster the samples described by ``views`` (a list of n x d_p arrays, sparse or dask)."""
        t0 = time.perf_counter()
        views = check_views(views)
        n = views[0].shape[0]
        k = check_n_clusters(self.n_clusters, n)
        if not isinstance(self.order, (int, np.integer)) or self.order < 1:
            raise ValueError(f"order must be a positive integer, got {self.order!r}")
        n_neighbors = check_n_neighbors(self.n_neighbors or default_n_neighbors(n, k), n)
        solver = resolve_solver(self.embedding, n)
        self.metric_ = self._metrics(views)
        self.n_neighbors_, self.embedding_solver_ = n_neighbors, solver
        seeds = np.random.SeedSequence(self.random_state).generate_state(len(views) + 2)
        graph_params = dict(n_neighbors=n_neighbors, n_landmarks=min(self.n_landmarks, n),
                            n_nearest_landmarks=self.n_nearest_landmarks)
        tasks = [dask.delayed(_embed_view, pure=True)(X, solver, k, self.order, {**graph_params, "metric": m},
                                                      int(s)) for X, m, s in zip(views, self.metric_, seeds)]
        t1 = time.perf_counter()
        results = dask.compute(*tasks)
        graphs = [g for g, _ in results]
        H = np.stack([h for _, h in results])
        F = average_graph_embedding(graphs, solver, k, n_landmarks=graph_params["n_landmarks"],
                                    random_state=int(seeds[-2]))
        t2 = time.perf_counter()
        self.lambda1_ = 1.0 if self.lambda1 == "auto" else float(self.lambda1)
        self.lambda2_ = float(k * self.order) if self.lambda2 == "auto" else float(self.lambda2)
        fused = late_fusion(H, F, self.lambda1_, self.lambda2_, tol=self.tol, max_iter=self.max_iter)
        t3 = time.perf_counter()
        self.labels_, self.inertia_ = assign_labels(fused.embedding, k, n_init=self.n_init,
                                                    random_state=int(seeds[-1]))
        self.embedding_, self.view_weights_ = fused.embedding, fused.view_weights
        self.objective_, self.n_iter_, self.converged_ = np.array(fused.objective), fused.n_iter, fused.converged
        self.view_embeddings_, self.average_embedding_ = H, F
        self.timings_ = {"validate": t1 - t0, "graphs_and_embeddings": t2 - t1, "fusion": t3 - t2,
                         "kmeans": time.perf_counter() - t3}
        return self

    def fit_predict(self, views, y=None) -> np.ndarray:
        return self.fit(views).labels_
