"""Per-view graphs: kNN search, the kNN affinity (Eq. 1), anchor graphs and high-order normalized operators.

Equation numbers refer to the numbered equations of the ONMSC paper in source order.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator
from sklearn.metrics import pairwise_distances_chunked

from .validation import (METRICS, UNIT_ROW_METRICS, check_distinct_samples, check_n_clusters, check_n_neighbors,
                         check_views, metric_list, row_ids, user_warning, view_label, warn_zero_rows, width_label,
                         zero_rows)

#: views with at most this many samples use exact (brute-force) neighbours; above it pynndescent
BRUTE_FORCE_MAX_SAMPLES = 8192
#: k-means initialisations of the landmarks: "random" (fast, the default) or "k-means++" (slower seeding:
#: 19 s against about 1 s for m = 1000 centres of 20,000 784-d rows)
LANDMARK_INITS = ("random", "k-means++")
#: a non-negative integer view with at least this fraction of zeros is treated as counts (bag of words)
COUNTS_MIN_ZERO_FRACTION = 0.9
#: a view whose rows, in its value metric (value_metric), spread over fewer effective columns than this
#: (effective_columns) has distances that follow one column: its auto metric is ``standardized``
LINE_VIEW_COLUMNS = 2.0
#: a clustering into at least 3 clusters whose largest holds more than this share of the samples has a giant cluster
GIANT_CLUSTER_SHARE = 0.5
#: most neighbours each view ranks for the rank-consensus graph with exact search (its lists take n x L per view)
MAX_RANKED_NEIGHBORS = 255
#: ... and, in multiples of N, with pynndescent, whose search time grows with L (10,000 MNIST pixel rows: 0.4 s for
#: 16 neighbours, 1.0 s for 32, 2.9 s for 64, 10.8 s for 255)
APPROXIMATE_RANKED_NEIGHBORS = 2


def value_summary(X) -> tuple[float, float, bool]:
    """(smallest value, fraction of zero entries, all values integers) of a view or a row chunk."""
    values = (X.data if sp.issparse(X) else np.asarray(X)).ravel()
    size = X.shape[0] * X.shape[1]
    zeros = size - (np.count_nonzero(values))
    integer = all(np.all(np.mod(part, 1) == 0) for part in (values[:4096], values))  # the first values usually decide
    return float(values.min()) if values.size else 0.0, zeros / max(size, 1), integer


def value_metric(min_value: float, zero_fraction: float, integer: bool, n_features: int) -> str:
    """The metric the values call for: sparse non-negative integer data are counts (bag of words: cosine on
    log(1 + count), damping frequent terms); other non-negative data (histograms, intensities) use cosine, since their
    direction matters more than their length; data with negative values, or a single feature (whose only direction
    is its sign), use euclidean."""
    if min_value < 0 or n_features == 1:
        return "euclidean"
    return "counts" if integer and zero_fraction >= COUNTS_MIN_ZERO_FRACTION else "cosine"


def metric_for(min_value: float, zero_fraction: float, integer: bool, n_features: int,
               effective: float = np.inf) -> str:
    """The ``auto`` rule: value_metric, unless the view's rows in that metric spread over fewer than
    LINE_VIEW_COLUMNS effective columns (``effective``: effective_columns, of the whole view on kNN graphs, of its
    landmark sample in the anchor chain): then one column's scale sets every distance, and its columns are
    ``standardized`` (docs/defaults.md, "Line views")."""
    metric = value_metric(min_value, zero_fraction, integer, n_features)
    return "standardized" if n_features > 1 and effective < LINE_VIEW_COLUMNS else metric


#: rows per block when column_variances reads a view (bounds the copy _prepare makes of cosine or counts rows)
VARIANCE_BLOCK_ROWS = 4096


def column_variances(X, metric: str = "euclidean") -> np.ndarray:
    """The variance of each column of a view's rows as ``metric`` sees them (_prepare, row-local for euclidean,
    cosine and counts), accumulated in float64 over blocks of VARIANCE_BLOCK_ROWS rows."""
    n, sums, squares = X.shape[0], np.zeros(X.shape[1]), np.zeros(X.shape[1])
    for start in range(0, n, VARIANCE_BLOCK_ROWS):
        Z = _prepare(X[start:start + VARIANCE_BLOCK_ROWS].astype(np.float64, copy=False), metric)
        if sp.issparse(Z):
            sums += np.asarray(Z.sum(axis=0)).ravel()
            squares += np.asarray(Z.multiply(Z).sum(axis=0)).ravel()
        else:
            sums += Z.sum(axis=0)
            squares += np.einsum("ij,ij->j", Z, Z)
    return np.maximum(squares / max(n, 1) - (sums / max(n, 1)) ** 2, 0.0)


def effective_columns(X, metric: str) -> float:
    """(sum_j s_j)^2 / sum_j s_j^2 over the column variances s_j of the view's rows as ``metric`` (a row-local one)
    sees them: how many columns its squared distances spread over (d for columns of equal variance, 1 when one
    column holds it all); inf for a view without variance."""
    variances = column_variances(X, metric)
    total = float(np.sum(variances**2))
    return float(variances.sum() ** 2 / total) if total > 0 else np.inf


def column_scale(X) -> np.ndarray:
    """Each column's standard deviation (1 for a constant column): what the ``standardized`` metric divides by."""
    scale = np.sqrt(column_variances(X))
    return np.where(scale > 0, scale, 1.0)


def resolve_metric(X, metric: str = "auto", label: str = "the view") -> str:
    """Metric for a view's kNN graph (``auto``: ``metric_for`` its values and effective columns), checked against
    its values."""
    summary = value_summary(X)
    return metric_from_values(metric, *summary, X.shape[1], label=label,
                              effective=effective_columns(X, value_metric(*summary, X.shape[1])))


def metric_from_values(metric: str, min_value: float, zero_fraction: float, integer: bool, n_features: int,
                       label: str = "the view", effective: float = np.inf) -> str:
    """``metric_for`` the values (and ``effective`` columns) for ``auto``; a given metric is checked: ``counts``
    needs non-negative values, ``cosine`` and ``counts`` more than one feature."""
    if metric == "auto":
        return metric_for(min_value, zero_fraction, integer, n_features, effective)
    if metric not in METRICS:
        raise ValueError(f"metric must be 'auto' or one of {METRICS}, got {metric!r}")
    if metric in UNIT_ROW_METRICS and n_features == 1:
        raise ValueError(f"{label}: metric {metric!r} compares directions, and a single feature has one direction "
                         "(every row becomes the same unit vector, a constant view); use 'euclidean'")
    if metric == "counts" and min_value < 0:
        raise ValueError(f"{label}: metric 'counts' (cosine on log(1 + count)) needs non-negative values, "
                         f"found {min_value:g}")
    return metric


def default_n_neighbors(n_samples: int, n_clusters: int) -> int:
    """Neighbours from n and k: half the mean cluster size n/(2k) (inside the paper's 0.1..1 x n/k grid, so
    a point's neighbours can all lie in its own cluster), kept within [5, 15] so the graph stays sparse for
    large n and connected for tiny clusters."""
    return int(min(n_samples - 1, np.clip(round(n_samples / (2 * n_clusters)), 5, 15)))


def smallest_cluster_neighbors(labels: np.ndarray, n_clusters: int, n_neighbors: int) -> int:
    """The rule of default_n_neighbors applied to the smallest cluster of a first clustering instead of the mean
    one, half its size within [5, n_neighbors], when that cluster holds at most n_neighbors samples (imbalanced
    classes), so its points cannot have their neighbours inside it; else n_neighbors (docs/defaults.md)."""
    smallest = np.bincount(labels, minlength=n_clusters).min()
    if smallest > n_neighbors:
        return n_neighbors
    return int(min(n_neighbors, max(5, round(smallest / 2))))


def giant_cluster(labels: np.ndarray, n_clusters: int) -> bool:
    """Whether a clustering into k >= 3 clusters put more than GIANT_CLUSTER_SHARE of the samples in one: on a kNN
    graph, the mark of small tight groups (near-duplicate rows) taking the top eigenvectors while the rest stays in
    one piece. At k = 2 a cluster holds more than half the samples whenever the classes are unequal."""
    return n_clusters >= 3 and np.bincount(labels).max() > GIANT_CLUSTER_SHARE * len(labels)


def _prepare(X, metric: str, scale: np.ndarray | None = None):
    """Rows ready for the metric: log(1 + count) for counts, then unit-normalized for cosine and counts (so
    euclidean search is equivalent); for standardized, each column divided by ``scale`` (column_scale; default X's
    own: the view's, for a whole view)."""
    if metric == "euclidean":
        return X
    if metric == "standardized":
        scale = column_scale(X) if scale is None else scale
        return X @ sp.diags(1.0 / scale) if sp.issparse(X) else X / scale
    if metric == "counts":
        X = X.log1p() if sp.issparse(X) else np.log1p(X)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel() if sp.issparse(X) else (X * X).sum(axis=1))
    norms[norms == 0] = 1.0
    return sp.diags(1.0 / norms) @ X if sp.issparse(X) else X / norms[:, None]


def nearest_neighbors(X, n_neighbors: int, metric: str, random_state: int | None = None):
    """Indices and distances of each row's ``n_neighbors`` nearest other rows, shape (n, n_neighbors)."""
    n = X.shape[0]
    Xm = _prepare(X, metric)
    if n <= BRUTE_FORCE_MAX_SAMPLES:
        ind, dist = _exact_neighbors(Xm, n_neighbors)
    else:
        from pynndescent import NNDescent

        from .warmup import cache_pynndescent

        cache_pynndescent()
        index = NNDescent(Xm, metric="euclidean", n_neighbors=n_neighbors + 1, random_state=random_state,
                          n_jobs=1 if random_state is not None else None, compressed=True)
        ind, dist = index.neighbor_graph
        ind, dist = _drop_self(ind, dist)
    if metric in UNIT_ROW_METRICS:  # chord length of unit vectors -> cosine distance
        dist = dist**2 / 2.0
    return ind.astype(np.int64), dist.astype(np.float64)


def _exact_neighbors(Xm, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force euclidean search, each row's nearest other rows ordered by (distance, index): equal distances
    (duplicate or rounded rows) are broken by index, so the first N of a longer list are the N-neighbour list."""
    def nearest(D: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        rows = np.arange(D.shape[0])
        D[rows, start + rows] = np.inf  # not the row itself
        cols = np.argpartition(D, n_neighbors - 1, axis=1)[:, :n_neighbors]
        dist = np.take_along_axis(D, cols, axis=1)
        kth = dist.max(axis=1, keepdims=True)
        for i in np.flatnonzero((D == kth).sum(axis=1) > (dist == kth).sum(axis=1)):  # ties cut by the list's end
            closer, tied = np.flatnonzero(D[i] < kth[i]), np.flatnonzero(D[i] == kth[i])
            cols[i] = np.concatenate([closer, tied[:n_neighbors - closer.size]])
            dist[i] = D[i, cols[i]]
        order = np.lexsort((cols, dist), axis=1)  # by distance, then index
        return np.take_along_axis(cols, order, axis=1), np.take_along_axis(dist, order, axis=1)

    parts = list(pairwise_distances_chunked(Xm, reduce_func=nearest, working_memory=64))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _drop_self(ind: np.ndarray, dist: np.ndarray):
    """Remove each row's own index (or, for exact duplicates found first, the last column)."""
    n, m = ind.shape
    is_self = ind == np.arange(n)[:, None]
    is_self[~is_self.any(axis=1), -1] = True
    keep = ~is_self
    return ind[keep].reshape(n, m - 1), dist[keep].reshape(n, m - 1)


def local_scale(dist: np.ndarray) -> np.ndarray:
    """Per-point kernel width: distance to the 7th neighbour (self-tuning, Zelnik-Manor & Perona), never 0."""
    sigma = dist[:, min(6, dist.shape[1] - 1)].copy()
    positive = sigma[sigma > 0]
    floor = positive.min() if positive.size else 1.0
    sigma[sigma <= 0] = floor
    return sigma


def _kernel(ind: np.ndarray, dist: np.ndarray, sigma: np.ndarray) -> sp.csr_matrix:
    """exp(-d_ij^2 / (s_i s_j)) on the listed pairs (i, ind[i, j]), never exactly 0; not yet symmetric."""
    n, m = ind.shape
    rows = np.repeat(np.arange(n), m)
    w = np.exp(-dist.ravel() ** 2 / (sigma[rows] * sigma[ind.ravel()]))
    return sp.csr_matrix((np.maximum(w, np.finfo(float).tiny), (rows, ind.ravel())), shape=(n, n))


def knn_affinity(ind: np.ndarray, dist: np.ndarray) -> sp.csr_matrix:
    """Symmetric kNN affinity, A_ij = exp(-d_ij^2 / (s_i s_j)) if i or j is among the other's neighbours."""  # Eq. 1
    W = _kernel(ind, dist, local_scale(dist))
    return W.maximum(W.T).tocsr()


def ranked_neighbors_count(n_samples: int, n_clusters: int, n_neighbors: int) -> int:
    """L, the neighbours each view ranks for ``rank_consensus_affinity``: the mean cluster size n / k less one
    (ranks beyond a cluster's size say nothing about the cluster), at least N, at most n - 1 and
    MAX_RANKED_NEIGHBORS, or APPROXIMATE_RANKED_NEIGHBORS x N where the search is pynndescent's."""
    cap = (MAX_RANKED_NEIGHBORS if n_samples <= BRUTE_FORCE_MAX_SAMPLES
           else APPROXIMATE_RANKED_NEIGHBORS * n_neighbors)
    return int(min(n_samples - 1, max(n_neighbors, min(round(n_samples / n_clusters) - 1, cap))))


def rank_consensus_affinity(neighbors: Sequence[tuple[np.ndarray, np.ndarray]], n_neighbors: int) -> sp.csr_matrix:
    """The graph the views agree on, from each view's L ranked neighbours (indices, distances; n x L, nearest
    first): i is linked to the N samples with the largest Borda count sum_p c_p(i, j) + c_p(j, i), where
    c_p(i, j) = L + 1 - rank of j in view p's list of i (0 when unlisted; equal counts ordered by affinity, then
    index), and the edge weighs the mean over the views of its Eq. 1 affinity (the view's own widths; 0 in a view
    that lists neither end); symmetric by max. The average graph takes every edge any view proposes, so a weak
    view's wrong edges enter F; here an edge needs the views' support (docs/defaults.md)."""
    n, L = neighbors[0][0].shape
    points, indptr = np.tile(np.arange(L, 0, -1, dtype=float), n), np.arange(0, n * L + 1, L)
    credit, weight = sp.csr_matrix((n, n)), sp.csr_matrix((n, n))
    for ind, dist in neighbors:
        C = sp.csr_matrix((points, ind.ravel(), indptr), shape=(n, n))
        K = _kernel(ind, dist, local_scale(dist[:, :n_neighbors]))
        credit, weight = credit + C + C.T, weight + K.maximum(K.T)
    credit, weight = credit.tocsr(), weight.tocsr()
    credit.sum_duplicates()
    weight.sum_duplicates()  # the same entries as credit: the pairs some view lists either way
    row = np.repeat(np.arange(n), np.diff(credit.indptr))
    affinity = weight.data / len(neighbors)
    score = credit.data + affinity / 2  # integer counts first, then affinity in (0, 1/2]
    order = np.argsort(row * (2 * score.max() + 2) - score, kind="stable")  # by row, best first; ties by index
    keep = order[np.arange(order.size) - credit.indptr[row] < n_neighbors]
    rows, cols, w = row[keep], credit.indices[keep], affinity[keep]
    W = sp.csr_matrix((np.maximum(w, np.finfo(float).tiny), (rows, cols)), shape=(n, n))
    return W.maximum(W.T).tocsr()


def view_affinity(X, n_neighbors: int, metric: str, random_state: int | None = None) -> sp.csr_matrix:
    """kNN search plus Eq. 1 for one view."""
    return knn_affinity(*nearest_neighbors(X, n_neighbors, metric, random_state))


def n_components(graph: sp.spmatrix, anchor: bool = False) -> int:
    """Connected components of the samples in a kNN affinity A (n x n), or with ``anchor`` in an anchor matrix Z
    (n x m, samples joined through shared landmarks): the pieces of the landmarks in use, each row's landmarks
    linked to its first (an m x m graph of nnz(Z) edges), plus one piece per row without a landmark."""
    if not anchor:
        return sp.csgraph.connected_components(graph, directed=False)[0]
    Z = sp.csr_matrix(graph)
    counts = np.diff(Z.indptr)
    first = np.repeat(Z.indices[Z.indptr[:-1][counts > 0]], counts[counts > 0])
    links = sp.coo_matrix((np.ones(Z.nnz), (first, Z.indices)), shape=(Z.shape[1], Z.shape[1]))
    pieces = sp.csgraph.connected_components(links, directed=False)[1]
    return len(np.unique(pieces[Z.indices])) + int(np.sum(counts == 0))


def check_components(graph: sp.spmatrix, label: str, n_clusters: int, anchor: bool = False,
                     width: int | None = None, view=None, leave_out: bool = False, pieces: int | None = None) -> bool:
    """A graph in more pieces than its embedding's width (k, or n_components) is an error (its top eigenvectors
    would be an arbitrary choice of pieces; the error counts the identical rows of ``view`` when given), or with
    ``leave_out`` a warning that the view is left out (returns False); in 2..width pieces, a warning (each piece
    becomes a cluster or part of one). True when the graph can be used. ``pieces``: n_components(graph, anchor) when
    already counted."""
    c = n_components(graph, anchor) if pieces is None else pieces
    width = n_clusters if width is None else width
    few_landmarks = (f"only {graph.shape[1]} distinct landmarks (its rows take few distinct values), not more than "
                     f"{width_label(width, n_clusters)}, so the anchor graph has too few eigenvectors"
                     if _too_few_landmarks(graph, width, anchor) else None)
    if leave_out and (c > width or few_landmarks):
        reason = (few_landmarks if few_landmarks else
                  f"its graph falls apart into {c} disconnected pieces, more than {width_label(width, n_clusters)}")
        user_warning(f"{label}: {reason}; it is left out (weight 0)"
                     f"{'' if view is None or anchor else _identical_rows_note(view)}")
        return False
    if few_landmarks:
        raise ValueError(f"{label}: {few_landmarks}; drop the view (or, in memory, use embedding='exact')")
    if c > width:
        raise ValueError(f"{label}: its graph falls apart into {c} disconnected pieces, more than "
                         f"{width_label(width, n_clusters)}, so its top-{width} eigenvectors would pick an arbitrary "
                         f"subset of them; raise {'n_nearest_landmarks' if anchor else 'n_neighbors'}, or drop the "
                         f"view{'' if view is None or anchor else _identical_rows_note(view)}")
    if c > 1:
        user_warning(f"{label}: its graph has {c} disconnected pieces; each will be a cluster or part of one")
    return True


def _too_few_landmarks(graph: sp.spmatrix, width: int, anchor: bool) -> bool:
    """Whether an anchor graph (n x m) has no more landmarks than the embedding's width, so too few eigenvectors."""
    return anchor and graph.shape[1] <= width


def usable_graphs(graphs: Sequence[sp.spmatrix], labels: Sequence[str], n_clusters: int, width: int,
                  anchor: bool = False, views: Sequence | None = None) -> np.ndarray:
    """Indices of the views whose graph check_components accepts: a graph in more pieces than ``width`` (or an anchor
    graph of at most ``width`` landmarks) is left out with a warning while another view's graph is usable, else an
    error."""
    pieces = [n_components(graph, anchor) for graph in graphs]
    leave_out = any(c <= width and not _too_few_landmarks(graph, width, anchor) for c, graph in zip(pieces, graphs))
    return np.flatnonzero([check_components(graph, label, n_clusters, anchor=anchor, width=width,
                                            view=None if views is None else views[p], leave_out=leave_out,
                                            pieces=pieces[p])
                           for p, (graph, label) in enumerate(zip(graphs, labels))])


def _identical_rows_note(X) -> str:
    """For a kNN graph's error: in a view of few distinct rows (binary, categorical, rounded) identical samples fill
    each other's neighbour lists."""
    sizes = np.bincount(row_ids(X))
    if sizes.size == X.shape[0]:
        return ""
    return (f" (it has only {sizes.size} distinct rows among {X.shape[0]} samples, up to {sizes.max()} identical: "
            "identical rows fill each other's neighbour lists, so a group links to few other samples, and one larger "
            "than n_neighbors only to itself; binary, categorical or rounded features need n_neighbors above the "
            "largest group, or more distinguishing features)")


def landmark_rows(n_samples: int, n_landmarks: int, sample_size: int, seed: int | None) -> np.ndarray:
    """Sorted uniform sample of at least ``n_landmarks`` (and ``sample_size``) row indices."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_samples, size=min(n_samples, max(sample_size, n_landmarks)), replace=False))


def landmark_centres(samples: list[np.ndarray | sp.csr_matrix], n_landmarks: int, seed: int | None,
                     init: str = "random", metric: str = "euclidean",
                     scale: np.ndarray | None = None) -> np.ndarray | sp.csr_matrix:
    """k-means centres (one start, 50 Lloyd iterations) of the sampled rows (blocks, concatenated) in the metric's
    space (``_prepare``: log1p for counts, unit rows for cosine and counts, columns divided by the view's ``scale``
    for standardized, which needs it), where anchor_affinity measures
    distances; unit-normalized for cosine and counts. Sparse rows give sparse centres (sparse_kmeans), so a wide
    sparse view is never densified. A sample of at most ``n_landmarks`` distinct rows gives those rows instead
    (k-means would repeat centres), so there can be fewer landmarks than asked. k-means runs on one thread, as in a
    Dask worker process (OMP_NUM_THREADS=1): its sums depend on the thread count, and the landmarks, the anchor
    graph's ties and so the labels with them, were not the same on the threaded scheduler and on worker processes."""
    from threadpoolctl import threadpool_limits

    if init not in LANDMARK_INITS:
        raise ValueError(f"landmark init must be one of {LANDMARK_INITS}, got {init!r}")
    if metric == "standardized" and scale is None:
        raise ValueError("standardized landmarks need the whole view's column_scale, not the sample's")
    sparse = sp.issparse(samples[0])
    sample = _prepare(sp.vstack(samples, format="csr") if sparse else np.concatenate(samples), metric, scale)
    with threadpool_limits(1, user_api="openmp"):  # its BLAS calls: one thread already (scikit-learn's own limit)
        centres = _centres(sample, n_landmarks, seed, init)
    return _prepare(centres, "cosine") if metric in UNIT_ROW_METRICS else centres


def _centres(sample: np.ndarray | sp.csr_matrix, n_landmarks: int, seed: int | None,
             init: str) -> np.ndarray | sp.csr_matrix:
    """landmark_centres' k-means centres of the prepared sample, or its distinct rows when they are few."""
    from sklearn.cluster import KMeans

    if sp.issparse(sample):
        first = np.unique(row_ids(sample), return_index=True)[1]
        return sample[first] if len(first) <= n_landmarks else sparse_kmeans(sample, n_landmarks, seed, init)
    # rows with distinct projections are distinct, so np.unique (0.17 s for 5,000 pixel rows) is rarely needed
    projection = sample @ np.random.default_rng(0).standard_normal(sample.shape[1])
    distinct = sample if len(np.unique(projection)) > n_landmarks else np.unique(sample, axis=0)
    if len(distinct) <= n_landmarks:
        return distinct
    return KMeans(n_landmarks, init=init, n_init=1, max_iter=50, random_state=seed).fit(sample).cluster_centers_


def sparse_kmeans(X: sp.csr_matrix, k: int, seed: int | None, init: str = "random",
                  max_iter: int = 50) -> sp.csr_matrix:
    """Lloyd's k-means of CSR rows with CSR centres (a mean of sparse rows has the union of their non-zeros), in
    memory O(nnz(X) + rows x k); seeded with k distinct random rows or by k-means++ sampling; an emptied cluster
    takes the row farthest from its centre."""
    rng = np.random.default_rng(seed)
    n, norms = X.shape[0], np.asarray(X.multiply(X).sum(axis=1)).ravel()
    first = np.unique(row_ids(X), return_index=True)[1]  # distinct rows: more than k (landmark_centres)

    def sq_distances(C: sp.csr_matrix) -> np.ndarray:
        cross = (X @ C.T).toarray()
        return np.maximum(norms[:, None] - 2 * cross + np.asarray(C.multiply(C).sum(axis=1)).ravel()[None, :], 0)

    if init == "random":
        centres = X[np.sort(rng.choice(first, k, replace=False))]
    else:  # k-means++: each next centre a row drawn with probability proportional to its squared distance
        chosen = [int(rng.choice(first))]
        closest = sq_distances(X[chosen])[:, 0]
        for _ in range(k - 1):
            chosen.append(int(rng.choice(n, p=closest / closest.sum())))
            closest = np.minimum(closest, sq_distances(X[chosen[-1:]])[:, 0])
        centres = X[chosen]
    labels = np.full(n, -1)
    for _ in range(max_iter):
        distances = sq_distances(centres)
        new = distances.argmin(axis=1)
        if np.array_equal(new, labels):
            break
        labels, counts = new, np.bincount(new, minlength=k)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            labels[np.argsort(-distances[np.arange(n), labels], kind="stable")[:empty.size]] = empty
            counts = np.bincount(labels, minlength=k)
        centres = (sp.csr_matrix((1.0 / counts[labels], (labels, np.arange(n))), shape=(k, n)) @ X).tocsr()
    return centres


def select_landmarks(X, n_landmarks: int, random_state: int | None = None, sample_size: int = 5000,
                     init: str = "random", metric: str = "euclidean",
                     scale: np.ndarray | None = None) -> np.ndarray | sp.csr_matrix:
    """The anchor points of an anchor graph: k-means centres of a uniform sample of rows in the metric's space
    (outofcore.py reads the same sample chunk by chunk; standardized by ``scale``, default X's column_scale); sparse
    for a sparse view."""
    if metric == "standardized" and scale is None:
        scale = column_scale(X)
    sample = X[landmark_rows(X.shape[0], n_landmarks, sample_size, random_state)]
    return landmark_centres([sp.csr_matrix(sample) if sp.issparse(sample) else sample], n_landmarks, random_state,
                            init, metric, scale)


def anchor_affinity(X, landmarks: np.ndarray, n_nearest: int, metric: str,
                    scale: np.ndarray | None = None) -> sp.csr_matrix:
    """Z (n x m): each row links to its ``n_nearest`` landmarks (given in the metric's space, as landmark_centres
    returns them; ``nearest_landmarks``) with self-tuned Gaussian weights, rows sum to 1. ``scale``: the fitted
    view's column_scale for standardized (default X's own, right only when X is that whole view)."""
    L = landmarks
    r = min(n_nearest, L.shape[0])
    ind, sq_dist = nearest_landmarks(_prepare(X, metric, scale), L, r)
    dist = np.sqrt(sq_dist)
    sigma = np.maximum(dist[:, -1:], np.finfo(float).eps) if r > 1 else np.ones((len(dist), 1))
    w = np.exp(-(dist**2) / sigma**2) + np.finfo(float).tiny
    w /= w.sum(axis=1, keepdims=True)
    n = X.shape[0]
    return sp.csr_matrix((w.ravel(), ind.ravel(), np.arange(0, n * r + 1, r)), shape=(n, L.shape[0]))


#: entries (rows x landmarks) of the score matrix of one row block of the landmark search (float32: 32 MiB)
SEARCH_BLOCK_ENTRIES = 2**23
#: rows whose chosen landmarks' distances are computed at once (a rows x r x d float64 gather stays in cache)
DISTANCE_CHUNK_ROWS = 256
#: most smallest scores per row found by repeated argmin (faster than argpartition for a few)
ARGMIN_MAX = 8


def nearest_landmarks(Xm, landmarks, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and squared euclidean distances (float64) of each row's ``r`` nearest landmarks, n x r, nearest
    first (equal distances by index).

    The landmarks are ranked by the scores ||l||^2 - 2 x l^T (||x - l||^2 less the row's constant ||x||^2), one
    GEMM per block of rows. Dense rows are scored in float32; a row keeps that choice only when the gap between its
    r-th and (r+1)-th score exceeds twice the scores' worst-case rounding error (``float32_score_error``), which
    makes the chosen set the exact one; the other rows (near ties), and sparse rows, are ranked in float64. The distances of the chosen landmarks are then computed in float64."""
    sparse = sp.issparse(Xm) or sp.issparse(landmarks)
    L = landmarks.tocsr().astype(np.float64) if sp.issparse(landmarks) else np.asarray(landmarks, np.float64)
    sq_norms = np.asarray(L.multiply(L).sum(axis=1)).ravel() if sp.issparse(L) else np.einsum("md,md->m", L, L)
    L32 = None if sparse else (-2 * L).astype(np.float32)  # x (-2 l)^T: the factor 2 is exact in float32
    step = max(1, SEARCH_BLOCK_ENTRIES // L.shape[0])
    parts = [_nearest_block(Xm[s:s + step], L, L32, sq_norms, r) for s in range(0, Xm.shape[0], step)]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])) if parts else (
        np.empty((0, r), np.int64), np.empty((0, r)))


def float32_score_error(row_sq_norms: np.ndarray, sq_norms: np.ndarray, n_features: int) -> np.ndarray:
    """Bound on |score32 - score| of ``nearest_landmarks``' scores per row, from the float32 squared row norms: the
    rounding of x and l to float32 (2u ||x|| ||l||), of the d-term dot product (gamma_d ||x|| ||l||, gamma_d =
    d u / (1 - d u), any summation order), of ||l||^2 and of the subtraction (u = 2^-24), with 1% to spare for
    second-order terms, plus float32 underflow; infinite where float32 could overflow."""
    u, lmax = 2.0**-24, np.sqrt(sq_norms.max())
    gamma = n_features * u / (1 - n_features * u)
    x = np.sqrt(row_sq_norms.astype(np.float64)) * (1 + gamma)  # the float32 norm is within gamma_d
    bound = 1.01 * (2 * (gamma + 3 * u) * x * lmax + 2 * u * lmax**2) + n_features * np.finfo(np.float32).tiny
    return np.where((x + lmax) ** 2 < np.finfo(np.float32).max / 4, bound, np.inf)


def _smallest(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns and values of each row's ``k`` smallest scores, by (score, column); overwrites ``scores``."""
    rows = np.arange(scores.shape[0])
    if k > ARGMIN_MAX:
        ind = np.argpartition(scores, k - 1, axis=1)[:, :k]
        values = scores[rows[:, None], ind]
        order = np.lexsort((ind, values), axis=1)
        return np.take_along_axis(ind, order, axis=1), np.take_along_axis(values, order, axis=1)
    ind, values = np.empty((len(rows), k), np.int64), np.empty((len(rows), k), scores.dtype)
    for j in range(k):
        ind[:, j] = scores.argmin(axis=1)
        values[:, j] = scores[rows, ind[:, j]]
        scores[rows, ind[:, j]] = np.inf
    return ind, values


def _nearest_block(X, L, L32: np.ndarray | None, sq_norms: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """``nearest_landmarks`` of one row block; ``L32`` the float32 landmarks times -2, None when X or L is sparse."""
    n, m = X.shape[0], L.shape[0]
    if L32 is None:
        cross = X @ L.T
        ind, scores = _smallest(sq_norms - 2 * (cross.toarray() if sp.issparse(cross) else np.asarray(cross)), r)
        x_sq = np.asarray(X.multiply(X).sum(axis=1)) if sp.issparse(X) else np.einsum("nd,nd->n", X, X)[:, None]
        sq_dist = np.maximum(x_sq + scores, 0.0)
    else:
        X32 = np.asarray(X, np.float32)
        if r < m:
            with np.errstate(over="ignore", invalid="ignore"):  # rows float32 cannot score exactly enough are redone
                scores = X32 @ L32.T
                scores += sq_norms.astype(np.float32)
                ind, values = _smallest(scores, r + 1)
                error = float32_score_error(np.einsum("nd,nd->n", X32, X32), sq_norms, X.shape[1])
                ind, redo = ind[:, :r], np.flatnonzero(~(values[:, r] - values[:, r - 1] > 2 * error))
            if redo.size:
                ind[redo] = _smallest(sq_norms - 2 * (np.asarray(X[redo], np.float64) @ L.T), r)[0]
        else:
            ind = np.tile(np.arange(m), (n, 1))
        sq_dist = np.empty((n, r))
        for s in range(0, n, DISTANCE_CHUNK_ROWS):
            Xc, chosen = np.asarray(X[s:s + DISTANCE_CHUNK_ROWS], np.float64), ind[s:s + DISTANCE_CHUNK_ROWS]
            sq_dist[s:s + len(Xc)] = np.maximum(np.einsum("nd,nd->n", Xc, Xc)[:, None] + sq_norms[chosen]
                                                - 2 * np.einsum("nd,nrd->nr", Xc, L[chosen]), 0.0)
        order = np.lexsort((ind, sq_dist), axis=1)  # the float64 distances decide the order
        ind, sq_dist = np.take_along_axis(ind, order, axis=1), np.take_along_axis(sq_dist, order, axis=1)
    return ind, sq_dist


def inv_sqrt(values: np.ndarray) -> np.ndarray:
    """values^-1/2, and 0 where a value is 0 (an isolated sample's degree, an unused landmark)."""
    return np.where(values > 0, 1.0 / np.sqrt(np.where(values > 0, values, 1.0)), 0.0)


class NormalizedHighOrderAffinity(LinearOperator):
    """G = D^-1/2 A^o D^-1/2 with D = diag(A^o 1); A^o is applied as o products, never formed."""  # Eqs. 2-3, 7-8

    def __init__(self, A, order: int):
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        self.A, self.order = A, int(order)
        n = A.shape[0]
        degrees = self.power(np.ones(n))  # Eq. 2 for A^o
        if (degrees <= 0).any():
            user_warning(f"{int((degrees <= 0).sum())} isolated points (zero degree) at order {order}; "
                         "they get zero rows in G")
        self.inv_sqrt_degrees = inv_sqrt(degrees)
        super().__init__(np.float64, (n, n))

    def power(self, x: np.ndarray) -> np.ndarray:
        """A^o x."""
        for _ in range(self.order):
            x = self.A @ x
        return x

    def _matmat(self, X):
        d = self.inv_sqrt_degrees if X.ndim == 1 else self.inv_sqrt_degrees[:, None]
        return d * self.power(d * X)

    def _matvec(self, x):
        return self._matmat(np.asarray(x).ravel())

    def _adjoint(self):
        return self


def build_graph(X, solver: str, *, n_neighbors: int, metric: str, n_landmarks: int, n_nearest_landmarks: int,
                n_ranked: int = 0, random_state: int | None = None) -> tuple[sp.csr_matrix, tuple | None]:
    """The view's graph for ``solver``: the kNN affinity A (n x n), or the anchor matrix Z (n x m) with its landmarks
    (m x d, in the metric's space); and, for kNN graphs when ``n_ranked`` > 0 (at least N), the view's ``n_ranked``
    nearest neighbours (indices, distances) from the same search, for ``rank_consensus_affinity``, else None."""
    if solver == "anchor":
        landmarks = select_landmarks(X, n_landmarks, random_state, metric=metric)
        return anchor_affinity(X, landmarks, n_nearest_landmarks, metric), landmarks
    if not n_ranked:
        return view_affinity(X, n_neighbors, metric, random_state), None
    ind, dist = nearest_neighbors(X, n_ranked, metric, random_state)
    return knn_affinity(ind[:, :n_neighbors], dist[:, :n_neighbors]), (ind, dist)


def view_facts(X, with_row_ids: bool = True) -> dict:
    """What resolve_view_inputs needs of a view (computed where the view is): rows, features, value summary, its
    effective columns in its value metric, all-zero rows and, with ``with_row_ids``, the row ids of its distinct
    rows."""
    zr, summary = zero_rows(X), value_summary(X)
    facts = {"n": X.shape[0], "d": X.shape[1], "summary": summary,
             "effective": effective_columns(X, value_metric(*summary, X.shape[1])),
             "zero_rows": (int(zr.size), zr[:5].tolist())}
    return {**facts, "row_ids": row_ids(X)} if with_row_ids else facts


def resolve_view_inputs(facts: list[dict], n_clusters: int, n_neighbors: int | None, metric,
                        view_names: Sequence[str] | None, check_distinct: Callable[[int], None]):
    """k, N (``default_n_neighbors`` when None) and one resolved metric per view from the views' ``facts``
    (view_facts), ``check_distinct(k)`` raising when fewer than k samples differ; warns of all-zero rows."""
    n = facts[0]["n"]
    k = check_n_clusters(n_clusters, n)
    check_distinct(k)
    N = check_n_neighbors(default_n_neighbors(n, k) if n_neighbors is None else n_neighbors, n)
    metrics = [metric_from_values(m, *f["summary"], f["d"], view_label(p, view_names), f["effective"])
               for p, (f, m) in enumerate(zip(facts, metric_list(metric, len(facts))))]
    for p, (f, m) in enumerate(zip(facts, metrics)):
        warn_zero_rows(*f["zero_rows"], m, view_label(p, view_names))
    return k, N, metrics


def resolve_graph_inputs(views, n_clusters: int, n_neighbors: int | None, metric,
                         view_names: Sequence[str] | None = None):
    """Validated views, k, N (``default_n_neighbors`` when None) and one resolved metric per view; messages name
    the views by ``view_names`` when given."""
    views = check_views(views, view_names)
    k, N, metrics = resolve_view_inputs([view_facts(X, with_row_ids=False) for X in views], n_clusters, n_neighbors,
                                        metric, view_names, lambda k: check_distinct_samples(views, k))
    return views, k, N, metrics


def view_graphs(views, n_clusters: int, n_neighbors: int | None = None, metric: str | Sequence[str] = "auto",
                random_state: int | None = None,
                view_names: Sequence[str] | None = None) -> tuple[list[sp.csr_matrix], list[str], int]:
    """Validated views -> kNN affinities A_p (Eq. 1) with the ONMSC defaults; returns graphs, metrics, N."""
    views, k, N, metrics = resolve_graph_inputs(views, n_clusters, n_neighbors, metric, view_names)
    graphs = [view_affinity(X, N, m, random_state) for X, m in zip(views, metrics)]
    check_view_graphs(graphs, k, view_names, views)
    return graphs, metrics, N


def check_view_graphs(graphs: Sequence[sp.spmatrix], n_clusters: int, view_names: Sequence[str] | None = None,
                      views: Sequence | None = None) -> None:
    """check_components of each view's kNN graph (its view, when given, for the identical-rows note)."""
    for p, A in enumerate(graphs):
        check_components(A, view_label(p, view_names), n_clusters, view=None if views is None else views[p])
