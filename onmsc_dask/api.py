"""The ONMSC estimator (scikit-learn API): views -> graphs -> H_p^(o) -> late fusion -> labels (docs/pipeline.md)."""
from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import dask
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin, clone

from .assign import assign_labels, mean_normalized_cut, readout, refine_labels, warn_isolated_rows
from .cluster import again_on_lost_data, check_worker_memory, one_blas_thread, persisted, scattered
from .early_fusion import EarlyFusionResult, check_alpha, early_fusion
from .extend import build_extension, extension_landmarks, landmark_graph
from .graph import (build_graph, check_view_graphs, default_n_neighbors, n_components, rank_consensus_affinity,
                    ranked_neighbors_count, resolve_graph_inputs, resolve_view_inputs, smallest_cluster_neighbors,
                    usable_graphs, view_facts, view_graphs, giant_cluster)
from .fusion import LateFusionResult, default_lambda2, full_weights, related_among, related_views, warn_unrelated
from .progress import counted
from .selection import distortion, fuse, score_rows
from .store import unchanged_store
from .validation import (ConstantViewError, check_bool, check_int, check_lambda, check_landmarks,
                         check_n_clusters, check_n_components, check_n_distinct, check_n_neighbors, check_same_rows,
                         check_seed, check_tol, check_view, clear_fitted, column_names, constant_view_message,
                         fit_seeds, informative_views, keep_informative, kept_names, metric_list, n_distinct,
                         user_warning, view_label)
from .spectral import (EXACT_MAX_SAMPLES, average_graph_embedding, embed_graph, exact_embedding, resolve_solver,
                       warn_eigensolver_cost)


def _embed_view(X, solver: str, k: int, order: int, graph_params: dict, seed: int, label: str,
                extension_landmarks: int | None):
    """kNN graph, ranked neighbours (for the rank-consensus graph, else None), H_p^(o) and their eigenvalues,
    o = 1..order, of one view (one Dask task); and the ``extension_landmarks`` landmarks, anchor matrix Z and column
    scale predict extends it by (extend.landmark_graph; None when there are too few samples)."""
    graph, extra = build_graph(X, solver, random_state=seed, **graph_params)
    H, vals = embed_graph(graph, solver, k, order, n_landmarks=graph_params["n_landmarks"], random_state=seed,
                          label=label)
    landmarks, Z, scale = ((None, None, None) if extension_landmarks is None else
                           landmark_graph(X, extension_landmarks, graph_params["n_nearest_landmarks"],
                                          graph_params["metric"], seed))
    return graph, extra, H, vals, landmarks, Z, scale


def _n_rows(views) -> int:
    """The samples of the first view (0 when it has none or no shape; validation names the problem)."""
    if hasattr(views, "n_samples"):
        return views.n_samples
    first = views[0] if len(views) else []
    return int(first.shape[0]) if hasattr(first, "shape") and len(first.shape) else len(first)


@dataclass
class _GraphInputs:
    """A late fit's checked views for the kNN graphs: the tasks' inputs (views scattered, or Futures of views loaded
    on the workers), the views in memory (None when loaded on the workers), n, k, N and one metric per view."""

    sent: list
    views: list | None
    n: int
    k: int
    n_neighbors: int
    metrics: list[str]


def _load_view(source, p: int, names: list[str] | None):
    """View p checked (validation.check_view) by the task that loads it: a store's view read there (``source`` the
    store's location) or a dask array computed there; a constant view gives its message."""
    from .location import Location
    from .store import MultiViewStore

    X = MultiViewStore(source).read_view(p) if isinstance(source, (str, Location)) else source
    try:
        return check_view(X, p, names)
    except ConstantViewError as exc:
        return str(exc)


def _view_facts(X) -> dict | str:
    """graph.view_facts of a view loaded on a worker (a constant view: its message)."""
    return X if isinstance(X, str) else view_facts(X)


def _load_on_workers(inputs, names: list[str] | None, n_clusters: int) -> tuple[list, list, list[int]]:
    """The views of a store, or dask arrays, each read and checked by one task and kept on the workers
    (cluster.persisted), what the client needs of each (_view_facts), and the positions of the informative ones
    (validation.keep_informative)."""
    store = hasattr(inputs, "read_view")
    sources = [inputs.location] * inputs.n_views if store else inputs
    loaded = persisted([dask.delayed(_load_view, pure=True)(X, p, names) for p, X in enumerate(sources)])
    facts = dask.compute(*[dask.delayed(_view_facts, pure=True)(X) for X in loaded])
    n = check_same_rows([inputs.n_samples if store else X.shape[0] for X in sources], names)
    distinct = [f if isinstance(f, str) else int(f["row_ids"].max()) + 1 for f in facts]
    return loaded, list(facts), keep_informative(distinct, check_n_clusters(n_clusters, n), names)


def _facts_inputs(loaded: list, facts: list[dict], n_clusters: int, n_neighbors: int | None, metric,
                  names: list[str] | None) -> _GraphInputs:
    """graph.resolve_view_inputs for views loaded on the workers, from their facts (_view_facts)."""
    k, N, metrics = resolve_view_inputs(
        facts, n_clusters, n_neighbors, metric, names,
        lambda k: check_n_distinct(n_distinct([f["row_ids"] for f in facts], k), k))
    return _GraphInputs(loaded, None, facts[0]["n"], k, N, metrics)


def _view_tasks(inputs: _GraphInputs, solver: str, width: int, order: int, graph_params: dict, seeds: list[int],
                names: list[str] | None, m_extension: int | None) -> tuple:
    """_embed_view of each view of ``inputs`` (with its metric and seed), one Dask task per view, computed."""
    return dask.compute(*[dask.delayed(_embed_view, pure=True)(X, solver, width, order, {**graph_params, "metric": m},
                                                               s, view_label(p, names), m_extension)
                          for p, (X, m, s) in enumerate(zip(inputs.sent, inputs.metrics, seeds))])


def _n_features(views) -> np.ndarray:
    """The number of features of each (valid) view."""
    if hasattr(views, "view_shape"):
        return np.array([views.view_shape(p)[1] for p in range(views.n_views)])
    return np.array([X.shape[1] if hasattr(X, "shape") else np.shape(X)[1] for X in views])


def _same_location(store, cache, storage_options: dict | None) -> bool:
    """Whether the MultiViewStore ``store`` is the store at ``cache`` (a store, path or URL)."""
    from .location import Location, location

    where = cache.location if hasattr(cache, "location") else location(cache, storage_options)
    where = where if isinstance(where, Location) else str(Path(where).resolve())
    return store.location == where


def cache_store(cache, views, names: list[str] | None, storage_options: dict | None = None):
    """The MultiViewStore ``cache`` (a store, path or URL) holding ``views``: the input store itself when it is the
    cache; else the cache when it was made from the same input (metadata "input": _input_token), else the views
    written to it first (a local store's copied, a URL store's written from its dask views). Only an empty path or a
    cache made this way is replaced: any other store or file there is an error, never overwritten.
    ``storage_options`` are the input's, and the cache's too when it is a URL."""
    from .location import Location, is_url, location
    from .store import MultiViewStore

    options = storage_options if is_url(cache) else None
    if hasattr(views, "read_view") and _same_location(views, cache, options):
        return views
    token = _input_token(views)
    if isinstance(cache, MultiViewStore):
        existing, where = cache, cache.path
    else:
        where = location(cache, options)
        if isinstance(where, Location):
            where.check_bucket()  # a missing bucket, a refused credential or no endpoint: one line naming it
        present = where.exists() and (isinstance(where, Location) or not where.is_dir() or any(where.iterdir()))
        try:
            existing = MultiViewStore(where) if present else None
        except ValueError:
            raise ValueError(f"cache {cache} holds something that is not a MultiViewStore; give an empty path or "
                             "a cache store made by an earlier fit") from None
    if existing is not None:
        if existing.metadata.get("input") == token:
            return existing
        if "input" not in existing.metadata:
            raise ValueError(f"cache {cache} is a MultiViewStore not made as a cache (its views would be "
                             "overwritten); give an empty path or a cache store made by an earlier fit")
    if hasattr(views, "read_view"):
        if not isinstance(views.path, Location) and not isinstance(where, Location):
            store = views.copy(where, stages=False, overwrite=True)
            store.update_metadata(input=token)
            return store
        views, y, names = [views.view_dask(p) for p in range(views.n_views)], views.given_labels, views.view_names
    else:
        y = None
    return MultiViewStore.create(where, views, y, view_names=names, metadata={"input": token}, overwrite=True)


def _input_token(views) -> str:
    """What identifies fit's input in its cache: a store's location and content_id, the values of numpy and sparse
    views (dask.base.tokenize), and of each chunk of a dask view, read where it lives (a dask array's name need not
    change with the data it reads: da.from_zarr's is that of the path)."""
    from dask.base import tokenize

    from .store import is_lazy

    if hasattr(views, "read_view"):
        return tokenize(str(views.location), views.content_id)
    lazy = [i for i, X in enumerate(views) if is_lazy(X)]
    chunks = dask.compute(*[views[i].map_blocks(_block_token, dtype=object, meta=np.empty((0, 0), object),
                                                chunks=tuple((1,) * len(c) for c in views[i].chunks))
                            for i in lazy])  # one task per chunk, as X.sum()'s
    return tokenize(*[(X.shape, X.dtype, X.chunks, chunks[lazy.index(i)]) if i in lazy else X
                      for i, X in enumerate(views)])


def _block_token(block) -> np.ndarray:
    """dask.base.tokenize of a dask view's chunk, as a 1 x 1 block (_input_token)."""
    from dask.base import tokenize

    return np.full((1, 1), tokenize(block), dtype=object)


@dataclass
class EarlyFusionFit:
    labels: np.ndarray
    inertia: float
    result: EarlyFusionResult
    affinities: list[sp.csr_matrix]
    metric: list[str]
    n_neighbors: int
    related: np.ndarray  # views kept by fusion.related_views (the others have weight 0)


def fit_early_fusion(views, n_clusters: int, *, n_neighbors: int | None = None, metric: str | Sequence[str] = "auto",
                     view_names: Sequence[str] | None = None, random_state: int | None = None,
                     **options) -> EarlyFusionFit:
    """Views -> kNN graphs (graph.view_graphs, on the client) -> fit_early_fusion_graphs, whose keyword
    ``options`` it takes; ``order`` and ``alpha`` are checked before the graphs are built."""
    check_int("order", options.get("order", 2))
    check_alpha(options.get("alpha", "auto"))
    graphs, metrics, N = view_graphs(views, n_clusters, n_neighbors, metric, random_state, view_names)
    return fit_early_fusion_graphs(graphs, n_clusters, metrics, N, view_names=view_names, random_state=random_state,
                                   **options)


def fit_early_fusion_graphs(graphs: list[sp.csr_matrix], n_clusters: int, metrics: list[str], n_neighbors: int, *,
                            order: int = 2, alpha: float | str = "auto", joint: bool = True, n_init: int = 10,
                            tol: float = 1e-4, max_iter: int = 100, lambda_scaled: bool = True,
                            drop_unrelated_views: bool = True, view_embeddings: np.ndarray | None = None,
                            view_names: Sequence[str] | None = None,
                            random_state: int | None = None) -> EarlyFusionFit:
    """The views' kNN graphs A_p, already checked (graph.check_view_graphs; built with N = ``n_neighbors`` and
    ``metrics``) -> ONMSC-EF (Eq. 10) -> k-means labels (``ONMSC(fusion="early")``) on the rows of the learned
    affinity P Lambda P^T, i.e. on P Lambda (``lambda_scaled``), or on H = P (docs/early_fusion.md).
    ``drop_unrelated_views`` leaves out the graphs of views unrelated to all others (fusion.related_views), judged
    on ``view_embeddings``, the first-order embeddings H_p^(1) of these graphs, shape (v, >= 1, n, k), or, when
    None, on embeddings computed here once per view. Messages name the views by ``view_names`` when given."""
    check_int("order", order)
    check_alpha(alpha)
    related = np.ones(len(graphs), bool)
    if drop_unrelated_views and len(graphs) > 1:
        H = view_embeddings if view_embeddings is not None else np.stack(
            [exact_embedding(A, n_clusters, 1, random_state)[None] for A in graphs])
        related, shares = related_views(H)
        warn_unrelated(related, shares, graphs[0].shape[0], n_clusters, view_names)
    used = np.flatnonzero(related)
    res = early_fusion([graphs[p] for p in used], n_clusters, order, alpha, joint=joint, tol=tol,
                       max_iter=max_iter, random_state=random_state)
    res.view_weights = full_weights(res.view_weights, used, len(graphs))
    X = res.affinity_embedding if lambda_scaled else res.embedding
    labels, inertia = assign_labels(X, n_clusters, n_init=n_init, random_state=random_state)
    return EarlyFusionFit(labels, inertia, res, graphs, metrics, n_neighbors, related)


#: late fusion's per-sample inputs, kept after the fit only with ``keep_intermediate=True``
INTERMEDIATE = ("view_graphs_", "view_embeddings_", "average_embedding_")


class _OrdersOfOneH(NamedTuple):
    """An anchor fit's view_embeddings_ in a pickle: one H per view (v x 1 x n x width), which its ``orders`` share."""

    first: np.ndarray
    orders: int


_EARLY_NO_EXTENSION = ("{method} needs a late-fusion fit (fusion='late'): early fusion learns one affinity of the "
                       "fitted samples, with no extension to new ones")


class ONMSC(ClusterMixin, BaseEstimator):
    """Optimal Neighborhood Multi-view Spectral Clustering with high-order Laplacians.

    Parameters
    ----------
    n_clusters : number of clusters k.
    n_neighbors : kNN graph neighbours N; ``None`` uses ``graph.default_n_neighbors(n, k)`` and, on kNN graphs,
        refits late fusion with half the smallest cluster found when that holds at most N samples, keeping it
        if its labels cut the view graphs of both N more cleanly, and
        first, when one cluster found holds more than half the samples (k >= 3), with N doubled, keeping that
        refit if it has no such giant cluster (``n_neighbors_tried_``; early fusion uses the N this settles on;
        docs/defaults.md).
    order : largest order O of the affinities A^o.
    lambda1, lambda2 : weights of the consensus term tr(H*^T F) and of the view-diversity term of Eq. 11.
        ``"auto"``: lambda1 = 1 (F weighs like one view) and lambda2 = width * O (width = n_components), the
        scale of the QP's linear term, so several views keep weight (docs/defaults.md). ``"select"``: chosen
        label-free, with the orders used, by ``selection.select_fusion`` (k-means distortion of the read-out,
        assign.readout).
    embedding : ``"exact"``, ``"anchor"``, ``"nystrom"`` or ``"auto"`` (spectral.resolve_solver).
    n_components : eigenvectors per graph (H_p^(o), F and H* are n x n_components; ``lambda2="auto"`` is
        n_components * O); ``None``: k (the paper's), or 2k from 500 samples per cluster
        (validation.default_n_components). The labels are always k clusters, k-means of H* when it is k wide, else
        of the fusion target (assign.readout). Late fusion only; docs/solvers.md ("More eigenvectors than
        clusters").
    metric : ``"auto"`` (graph.metric_for), ``"euclidean"``, ``"standardized"`` (euclidean on columns divided by
        their standard deviation), ``"cosine"``, ``"counts"`` (cosine on log(1 + x)),
        or a list with one entry per input view (a view left out takes its entry with it).
    n_landmarks, n_nearest_landmarks : anchor graph size m and links per point r (Nystrom uses m too); m = None:
        min(1000, n / 10), at least twice the embedding width (validation.default_n_landmarks).
    consensus_graph : the graph F (Eq. 11) is the embedding of: ``"rank"``, the edges the views agree on
        (graph.rank_consensus_affinity: Borda count of the views' ranked neighbours); ``"average"``, the paper's
        average affinity (1/v) sum_p A_p; ``"auto"``: rank on exact kNN graphs, average for anchor graphs (no
        sample-to-sample ranks) and Nystrom (the paper's reproduction). docs/defaults.md.
    n_init : k-means restarts on the read-out (assign.readout); above 10,000 k rows they run on that many random rows
        and the best one's centres start one run on every row (assign.assign_labels).
    max_iter, tol : the fusion stops when its objective changes by at most ``tol`` relatively (the paper's 1e-4), or
        after ``max_iter`` iterations; the label refinement stops by the same ``tol``.
    refine : late fusion: refine the k-means labels on the related views' graphs, moving samples while that raises
        the views' summed normalized association (assign.refine_labels; docs/defaults.md, "Label refinement").
        ``"auto"``: on anchor graphs only (on the kNN graphs of the 10-set suite it lowered the mean ACC).
        Early fusion's labels are its k-means labels.
    fusion : ``"late"`` (Eq. 11, Algorithm 1) or ``"early"`` (Eq. 10 on the exact kNN graphs, for n up to a
        few thousand; docs/early_fusion.md). Its ``embedding_`` is P Lambda, the matrix the labels are k-means of.
    alpha : early fusion's diversity weight; ``"auto"`` = tr R / tr M (docs/early_fusion.md).
    eigenvalue_scaling : late fusion of H_p^(o) (Lambda_p^(o))^1/2, the rank-k factors of the G_p^(o), instead of
        the bare eigenvectors H_p^(o) (the paper's form, ``False``); docs/defaults.md. The ``"select"`` search
        always fuses the bare eigenvectors, on which its criterion was measured.
    drop_unrelated_views : leave out of the fusion and of F's graph every view whose cluster directions
        share no more than chance with any other view (``fusion.related_views``; noise, or a view of other
        structure), with a warning; its weight is 0. When no two views are related (e.g. two views left, one of
        them noise) all are kept: agreement cannot tell which one is the noise.
    keep_intermediate : keep late fusion's per-sample inputs after the fit: the view graphs (``view_graphs_``, n x n
        for kNN), ``view_embeddings_`` (v x O x n x width) and ``average_embedding_`` (F). predict does not need
        them, and they are most of the model's size (docs/predict.md measures a pickle with and without them).
    cache : anchor solver: a MultiViewStore, or its path or fsspec URL, that holds the views and the results of
        the anchor chain's stages (outofcore.STAGES), so that a refit resumes after the last stage whose parameters
        are unchanged. The input store itself when ``fit`` is given that store; otherwise the views are written
        (a store copied) to it first, unless it was made from the same input (docs/pipeline.md). None: the stage
        results stay in memory and nothing is written.
    landmark_init, landmark_sample : anchor solver: the landmarks' k-means initialisation (graph.LANDMARK_INITS)
        and the rows sampled per view for them (graph.landmark_centres); None: outofcore.LANDMARK_SAMPLE_PER_LANDMARK
        (7.5) rows per landmark, at least LANDMARK_SAMPLE_MIN (5000) (docs/defaults.md, "Landmark sample").
    anchor_method : ``"gram"`` or ``"tsqr"``, the anchor solver's eigensolver (outofcore.py).
    random_state : an int seed in [0, 2**32 - 1]; the same seed gives the same labels on any number of workers (a
        RandomState or Generator is refused: tasks on other workers derive their seeds from the int). None: fresh
        randomness on every fit (each stage, the kNN search on all cores; no cached stage reused), as in
        scikit-learn.

    Attributes
    ----------
    labels_ : the cluster of each sample, 0..k-1.
    embedding_ : H* (late fusion, n x n_components) or P Lambda (early fusion, n x k).
    fusion_target_ : late fusion's T = S + lambda1 F (Eq. 12), H*'s directions weighted by the views' support; the
        labels are k-means of its rows when H* is wider than k (assign.readout), of H*'s otherwise.
    view_weights_ : mu, one weight per view (0 for a view left out).
    objective_ : late fusion: J of Eq. 11 after each iteration (maximised: never decreases; ``n_iter_`` values).
        Early fusion: the objective of Eq. 10 at the start and after each iteration (minimised: never increases;
        ``n_iter_ + 1`` values).
    n_iter_, converged_ : iterations run, and whether ``tol`` was met before ``max_iter``.
    inertia_ : k-means inertia of its labels (before any refinement) on the row-normalized read-out.
    refinement_objective_ : the views' summed normalized association of the k-means labels and after each move of
        the label refinement (increasing); empty without refinement (``refine=False``, early fusion).
    related_views_ : bool per view, kept by fusion.related_views (the others have weight 0).
    left_out_views_ : the views left out before the graphs, with a warning (validation.informative_views: constant,
        or fewer distinct rows than clusters); a view whose graph falls apart into more pieces than the width is
        left out of the fusion too (late fusion). Per-view attributes keep one entry per input view (weight 0,
        metric None); ``view_embeddings_``, ``view_graphs_`` and ``view_eigenvalues_`` cover the other views.
    n_neighbors_, metric_, embedding_solver_ : the resolved N, metric per view and solver;
        ``n_neighbors_tried_`` maps each N fitted by the default-N refit to its distortion.
    order_, lambda1_, lambda2_, n_landmarks_ : late fusion's resolved parameters (``selection_``: the "select"
        search's candidates); early fusion has ``alpha_``.
    view_eigenvalues_ : late fusion's eigenvalues of the H_p^(o) (v, O, width); ``consensus_graph_`` the graph F
        came from, ``"rank"`` or ``"average"``.
    view_embeddings_, average_embedding_, view_graphs_ : only with ``keep_intermediate=True``: late fusion's
        H_p^(o) (v, O, n, width), F (n, width) and graph per view, CSR: the kNN affinity A_p of Eq. 1 (n x n), or
        for ``anchor`` the anchor matrix Z (n x m).
    n_features_in_ : the number of features of each view.
    view_names_ : the names the fit's messages gave the views (``view_names``, or a store's), else None; predict's
        and transform's messages use them too.
    extension_ : what predict and transform use (extend.Extension: per view landmarks and m x width maps); None for
        early fusion, or a kNN fit with too few samples for its landmarks.
    timings_ : seconds per step (anchor solver: per stage of the chain).
    computed_stages_, stage_parameters_ : anchor solver: the stages computed by this fit (the others were read
        from ``cache``) and the parameters of the chain's stages.
    """

    def __init__(self, n_clusters: int = 8, *, n_neighbors: int | None = None, order: int = 2,
                 lambda1: float | str = "auto", lambda2: float | str = "auto", embedding: str = "auto",
                 n_components: int | None = None, metric: str | Sequence[str] = "auto", n_landmarks: int | None = None,
                 n_nearest_landmarks: int = 3,
                 n_init: int = 10, max_iter: int = 100, tol: float = 1e-4, fusion: str = "late",
                 alpha: float | str = "auto", eigenvalue_scaling: bool = True, drop_unrelated_views: bool = True,
                 consensus_graph: str = "auto", refine: bool | str = "auto", keep_intermediate: bool = False,
                 cache: Any = None, landmark_init: str = "random", landmark_sample: int | None = None,
                 anchor_method: str = "gram", random_state: int | None = None):
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.order = order
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.embedding = embedding
        self.n_components = n_components
        self.metric = metric
        self.n_landmarks = n_landmarks
        self.n_nearest_landmarks = n_nearest_landmarks
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.fusion = fusion
        self.alpha = alpha
        self.eigenvalue_scaling = eigenvalue_scaling
        self.drop_unrelated_views = drop_unrelated_views
        self.consensus_graph = consensus_graph
        self.refine = refine
        self.keep_intermediate = keep_intermediate
        self.cache = cache
        self.landmark_init = landmark_init
        self.landmark_sample = landmark_sample
        self.anchor_method = anchor_method
        self.random_state = random_state

    def fit(self, views, y=None, view_names: Sequence[str] | None = None,
            progress: Callable[[str], None] | None = None, storage_options: dict | None = None):
        """Cluster the samples described by ``views``: a list of n x d_p arrays (numpy, scipy.sparse or
        dask), a ``MultiViewStore``, or the path or fsspec URL of one (``s3://bucket/views.zarr``, with the
        file system's ``storage_options``). Errors and warnings name the views by ``view_names``
        (default: a store's names, else their positions). ``progress``, if given, is called with a line as each
        stage of a late-fusion fit starts or ends (the CLI's progress display)."""
        t0 = time.perf_counter()
        report = progress or (lambda line: None)
        clear_fitted(self)  # a refit keeps nothing of an earlier fit, also when its parameters are refused
        if self.fusion not in ("late", "early"):
            raise ValueError(f"fusion must be 'late' or 'early', got {self.fusion!r}")
        for name in ("order", "n_init", "max_iter"):
            check_int(name, getattr(self, name))
        random_state = check_seed(self.random_state)
        check_tol(self.tol)
        if not (isinstance(self.refine, str) and self.refine == "auto"):
            check_bool("refine", self.refine, "'auto', True or False")
        for name in ("eigenvalue_scaling", "drop_unrelated_views", "keep_intermediate"):
            check_bool(name, getattr(self, name))
        if self.consensus_graph not in ("auto", "rank", "average"):
            raise ValueError(f"consensus_graph must be 'auto', 'rank' or 'average', got {self.consensus_graph!r}")
        for name in ("lambda1", "lambda2"):  # checked before any work
            self._fixed_lambda(name, getattr(self, name), 1.0)
        if self.fusion == "early":
            check_alpha(self.alpha)
            if self.n_components is not None:
                raise ValueError("n_components applies to late fusion; early fusion learns a rank-k affinity")
            if self.embedding not in ("auto", "exact"):
                raise ValueError(f"embedding={self.embedding!r} applies to late fusion; early fusion runs on the exact "
                                 "kNN graphs")
            if not isinstance(self.refine, str) and self.refine:
                raise ValueError("refine applies to late fusion; early fusion's labels are its k-means labels")
            if (self.lambda1, self.lambda2, self.consensus_graph) != ("auto", "auto", "auto"):
                raise ValueError("lambda1, lambda2 and consensus_graph apply to late fusion; early fusion's weight is "
                                 "alpha")
        elif not (isinstance(self.alpha, str) and self.alpha == "auto"):
            raise ValueError("alpha is early fusion's weight (fusion='early'); late fusion's are lambda1 and lambda2")
        if self.embedding == "anchor":
            self._consensus_graph("anchor")  # its error before any work
        from .outofcore import check_anchor_options

        check_anchor_options(self.landmark_init, self.landmark_sample, self.anchor_method)
        check_worker_memory()
        if isinstance(views, Iterator):
            views = list(views)  # read again if the fit starts again after a lost worker

        def attempt() -> ONMSC:
            try:
                with unchanged_store(views, storage_options) as opened:  # a path or URL opened once
                    self._fit_views(opened, view_names, storage_options, random_state, t0, report)
                return self
            except BaseException:
                clear_fitted(self)  # a failed fit leaves no fitted attributes behind
                raise

        with one_blas_thread():
            return again_on_lost_data(attempt, "fitting", "fit again once the cluster is steady, or fit from a store "
                                      "(cache=...), whose tasks read again what a lost worker held", report)

    def _fit_views(self, views, view_names: Sequence[str] | None, storage_options: dict | None,
                   random_state: int | None, t0: float, report: Callable[[str], None]) -> None:
        """fit's work once its parameters are checked."""
        loaded = None  # views loaded on the workers (_load_on_workers)
        from .store import is_lazy, view_inputs

        inputs, names = view_inputs(views, view_names, storage_options)
        input_names = names
        stored = hasattr(inputs, "read_view")
        columns = (inputs.column_names if stored else
                   [column_names(X) for X in views] if isinstance(views, (list, tuple)) else None)
        anchor = self.fusion == "late" and resolve_solver(self.embedding, _n_rows(inputs)) == "anchor"
        if self.cache is not None and not anchor:
            raise ValueError("cache holds the stages of the anchor chain: it needs late fusion with "
                             f"embedding='anchor' (or 'auto' above {EXACT_MAX_SAMPLES} samples)")
        lazy = stored or any(is_lazy(X) for X in inputs)
        if anchor and lazy:  # read chunk by chunk by the chain's tasks, their values checked there
            views, n_views = inputs, inputs.n_views if stored else len(inputs)
            kept = list(range(n_views))
        elif lazy:  # kNN graphs: each view loaded and checked by a task on a worker
            report(f"reading the views: two Dask tasks per view, read and summarized{' (from the store)' * stored}")
            loaded, facts, kept = _load_on_workers(inputs, names, self.n_clusters)
            n_views = len(loaded)
        else:
            n_views, (views, kept) = len(inputs), informative_views(inputs, self.n_clusters, names,
                                                                    float32=anchor)
        names = kept_names(names, kept, n_views)
        # one metric per kept view: a view left out takes its entry of a per-view list with it
        metric = self.metric if isinstance(self.metric, str) else [metric_list(self.metric, n_views)[p]
                                                                    for p in kept]
        if not anchor:
            if loaded is not None:
                graph_inputs = _facts_inputs([loaded[p] for p in kept], [facts[p] for p in kept],
                                             self.n_clusters, self.n_neighbors, metric, names)
            else:
                views, k, N, metrics = resolve_graph_inputs(views, self.n_clusters, self.n_neighbors, metric,
                                                            names)
                # each view goes to the workers once, by scatter when a distributed client runs
                graph_inputs = _GraphInputs([scattered(X) for X in views], views, views[0].shape[0], k, N,
                                            metrics)
        if self.fusion == "early":
            self._fit_early(graph_inputs, names, random_state, t0)
        elif anchor:
            kept = [kept[p] for p in self._fit_anchor(views, names, metric, random_state, report,
                                                      storage_options)]
            self._finish_fit()
        else:
            self._fit_late(graph_inputs, names, random_state, t0, report)
            if self.n_neighbors is None:
                self._refit_for_cluster_sizes(graph_inputs, names, random_state, report)
            if self._refines():
                self._refine_labels(report)
            warn_isolated_rows(readout(self.embedding_, self.fusion_target_, self.n_clusters))
            self._finish_fit()
        self._expand_to_input_views(np.array(kept), n_views)
        self.n_features_in_ = _n_features(inputs)  # of every input view, once they are known valid
        self.feature_names_in_ = columns or [None] * n_views
        self.view_names_ = input_names

    def _fit_anchor(self, views, names: list[str] | None, metric: str | list[str], random_state: int | None,
                    report: Callable[[str], None], storage_options: dict | None) -> list[int]:
        """ONMSC-LF on anchor graphs: the chain of outofcore.py over the views' row chunks (rows.py), its stages
        resumed from and written to ``cache`` when given. Returns the positions of the views fitted: all, or when
        the chain's first read finds constant views (outofcore.ConstantViews; a store's or dask arrays' values are
        read there first), the others, the chain run again on them and each constant view left out with a warning
        naming it (validation.keep_informative)."""
        from .outofcore import ConstantViews, InMemory, run_chain, stage_parameters
        from .rows import array_rows, store_rows

        source = views if self.cache is None else cache_store(self.cache, views, names, storage_options)
        stored = hasattr(source, "read_view")
        n, n_views = (source.n_samples, source.n_views) if stored else (source[0].shape[0], len(source))
        k = check_n_clusters(self.n_clusters, n)
        self.n_neighbors_tried_ = {}
        self.n_neighbors_ = check_n_neighbors(default_n_neighbors(n, k) if self.n_neighbors is None
                                              else self.n_neighbors, n)
        self.embedding_solver_, self.consensus_graph_ = "anchor", self._consensus_graph("anchor")
        width = check_n_components(self.n_components, k, n)
        self.n_landmarks_ = check_landmarks(self.n_landmarks, self.n_nearest_landmarks, k, n, width)
        warn_eigensolver_cost(self.n_landmarks_, width, n_views + 1)  # the m x m Grams
        lambda1, lambda2 = self._lambdas(width)
        metrics = metric_list(metric, n_views)

        def chain_parameters(kept: list[int]) -> dict:
            """The stage parameters of the chain on the views ``kept`` (``views``: the kept ones, when not all)."""
            return stage_parameters(k, width=width, n_landmarks=self.n_landmarks_,
                                    n_nearest_landmarks=self.n_nearest_landmarks, order=self.order,
                                    metric=[metrics[p] for p in kept], lambda1=lambda1, lambda2=lambda2,
                                    tol=self.tol, max_iter=self.max_iter, eigenvalue_scaling=self.eigenvalue_scaling,
                                    drop_unrelated_views=self.drop_unrelated_views, n_init=self.n_init,
                                    refine=bool(self._refines()), random_state=random_state,
                                    landmark_init=self.landmark_init, landmark_sample=self.landmark_sample,
                                    method=self.anchor_method, views=kept if len(kept) < n_views else None)

        def chain(kept: list[int]) -> tuple[Any, dict]:
            """The chain on the views ``kept``, and its stage parameters."""
            rows = store_rows(source, kept) if stored else array_rows([source[p] for p in kept])
            rows.view_names = kept_names(names, kept, n_views)
            params = chain_parameters(kept)
            return run_chain(rows, source if self.cache is not None else InMemory(), k, params, progress=report), params

        kept = list(range(n_views))
        # a cached chain on the views a fit of these stored views kept (the others found constant): resumed
        previous = source.stages().get("landmarks", {}).get("views") if self.cache is not None else None
        if (previous is not None and set(previous) < set(kept)
                and source.has_stage("landmarks", chain_parameters(previous)["landmarks"], ["metrics"])):
            kept = keep_informative([n if p in previous else constant_view_message(view_label(p, names))
                                     for p in kept], k, names)
        try:
            r, params = chain(kept)
        except ConstantViews as found:
            kept = keep_informative([found.messages.get(p, n) for p in kept], k, names)
            r, params = chain(kept)
        emb, fus, lab = r.embeddings, r.fusion, r.labels
        self.metric_, self.related_views_ = r.metrics, np.asarray(emb["related"], bool)
        self.view_embeddings_, self.view_eigenvalues_, self.average_embedding_ = emb["H"], emb["eigenvalues"], emb["F"]
        self.view_graphs_ = r.graphs
        self._set_fusion(fus["settings"])
        self.embedding_, self.fusion_target_, self.view_weights_ = fus["embedding"], fus["target"], fus["view_weights"]
        self.objective_, self.converged_ = np.asarray(fus["objective"]), bool(fus["converged"])
        self.labels_, self.inertia_ = np.asarray(lab["labels"]), float(lab["inertia"])
        self.refinement_objective_ = np.asarray(lab["refinement_objective"])
        used = np.flatnonzero(self.related_views_)
        fused = LateFusionResult(self.embedding_, self.fusion_target_, self.view_weights_[used], fus["rotations"])
        self._extension_inputs_ = {"graphs": [(L, Z, m, self.n_nearest_landmarks, scale)
                                              for L, Z, m, scale in zip(r.landmarks, r.graphs, r.metrics, r.scales)],
                                   "scales": self._fusion_scales(), "fused": fused, "used": used,
                                   "basis": lab["refinement_basis"] if len(lab["refinement_basis"]) else None}
        self.timings_, self.computed_stages_, self.stage_parameters_ = r.timings, r.computed, params["labels"]
        return kept

    def _lambdas(self, width: int) -> tuple[float | str, float | str]:
        """lambda1 and lambda2 as selection.fuse takes them: numbers (``"auto"``: 1 and width * O), ``"select"``,
        and for lambda2 ``"auto"`` (width * o per order o) when lambda1 is searched."""
        l1 = self._fixed_lambda("lambda1", self.lambda1, 1.0)
        l2 = self._fixed_lambda("lambda2", self.lambda2, default_lambda2(width, self.order))
        select = None in (l1, l2)
        return ("select" if l1 is None else l1,
                "select" if l2 is None else "auto" if select and self.lambda2 == "auto" else l2)

    def _set_fusion(self, settings: dict) -> None:
        """The resolved order and lambdas of selection.fuse's ``settings`` (and ``selection_`` when searched)."""
        self.order_, self.lambda1_, self.lambda2_ = settings["order"], settings["lambda1"], settings["lambda2"]
        self.n_iter_ = settings["n_iter"]
        if settings["selection"] is not None:
            self.selection_ = settings["selection"]

    def _fusion_scales(self) -> np.ndarray:
        """The factors each H_p^(o) was fused with: its eigenvalues^1/2 (``eigenvalue_scaling``; the "select" search
        fuses the bare eigenvectors), else ones."""
        scaled = self.eigenvalue_scaling and "select" not in (self.lambda1, self.lambda2)
        return np.sqrt(np.clip(self.view_eigenvalues_, 0, None)) if scaled else np.ones_like(self.view_eigenvalues_)

    def _refines(self) -> bool:
        """Whether the labels are refined: ``refine``, or by default on anchor graphs only (docs/defaults.md)."""
        return self.embedding_solver_ == "anchor" if isinstance(self.refine, str) else self.refine

    def _finish_fit(self) -> None:
        """The model predict uses (extend.build_extension; None when a kNN fit had too few samples for its
        landmarks), and the INTERMEDIATE attributes dropped unless ``keep_intermediate``."""
        parts = self.__dict__.pop("_extension_inputs_")
        anchor = self.embedding_solver_ == "anchor"
        self.extension_ = None if any(parts["graphs"][p][1] is None for p in parts["used"]) else build_extension(
            parts["graphs"], self.view_embeddings_, parts["scales"], self.average_embedding_, parts["fused"],
            parts["used"], self.lambda1_, self.labels_, self.n_clusters, anchor=anchor, refined=parts.get("basis"))
        if not self.keep_intermediate:
            for name in INTERMEDIATE:
                delattr(self, name)

    def _expand_to_input_views(self, kept: np.ndarray, n_views: int) -> None:
        """Per-view results of a fit on the ``kept`` views (informative_views) as one entry per input view: weight
        0, not related, metric None, no extension for a view left out; ``left_out_views_`` lists those."""
        self.left_out_views_ = np.setdiff1d(np.arange(n_views), kept)
        if not self.left_out_views_.size:
            return
        related, metric = np.zeros(n_views, bool), [None] * n_views
        related[kept] = self.related_views_
        for p, m in zip(kept, self.metric_):
            metric[p] = m
        self.view_weights_, self.related_views_ = full_weights(self.view_weights_, kept, n_views), related
        self.metric_ = metric
        if getattr(self, "extension_", None) is not None:
            views: list = [None] * n_views
            for p, ext in zip(kept, self.extension_.views):
                views[p] = ext
            self.extension_ = replace(self.extension_, views=views)

    def _refit_for_cluster_sizes(self, inputs: _GraphInputs, names: list[str] | None, random_state: int | None,
                                 report: Callable[[str], None]) -> None:
        """Default N, from the cluster sizes the fit found (docs/defaults.md). A giant cluster (graph.giant_cluster):
        refit with 2N, kept if it has none (a dominant class stays one cluster at 2N too). Then, unless that refit was
        kept, a cluster of at most N samples: refit with N from the smallest one (graph.smallest_cluster_neighbors),
        keeping the refit if its labels have a lower mean normalized cut (assign.mean_normalized_cut) than the first
        fit's on the related views' graphs of both N. ``n_neighbors_tried_`` maps each N fitted to the k-means
        distortion of its read-out (assign.readout; selection.distortion; empty when no refit was needed, None for a
        refit that failed its input checks)."""
        k, N0, n = self.n_clusters, self.n_neighbors_, len(self.labels_)
        t0, first_timings = time.perf_counter(), self.timings_
        seed = np.random.SeedSequence(random_state).generate_state(1)[0]  # the same k-means seed for every score
        rows = score_rows(n, np.random.default_rng(seed))  # and the same rows

        def score(fit: ONMSC | None) -> float | None:
            return None if fit is None else distortion(readout(fit.embedding_, fit.fusion_target_, k), k,
                                                       np.random.default_rng(seed), rows)

        def refit(N: int) -> ONMSC | None:
            try:
                with warnings.catch_warnings():  # the first fit has already warned about these views
                    warnings.simplefilter("ignore")
                    other = clone(self).set_params(n_neighbors=N)
                    other._fit_late(replace(inputs, n_neighbors=check_n_neighbors(N, n)), names, random_state,
                                    time.perf_counter(),
                                    lambda line: report(f"  N = {N}: {line}"))
                return other
            except ValueError:  # e.g. a view graph in more than k pieces at N: keep the first fit
                return None

        first, kept, tried = self, self, {}
        share = np.bincount(self.labels_).max() / n
        if giant_cluster(self.labels_, k) and min(n - 1, 2 * N0) > N0:
            N1 = min(n - 1, 2 * N0)
            report(f"a cluster of {share:.0%} of the samples found: refitting with N = {N1} (docs/defaults.md)")
            other = refit(N1)
            tried = {N0: score(first), N1: score(other)}
            if other is not None and not giant_cluster(other.labels_, k):
                kept = other
            report(f"kept N = {kept.n_neighbors_}: largest cluster {share:.0%} at N = {N0}, "
                   + ("failed its input checks" if other is None else
                      f"{np.bincount(other.labels_).max() / n:.0%}") + f" at N = {N1}")
        N1 = smallest_cluster_neighbors(first.labels_, k, N0)
        if kept is first and N1 != N0:
            report(f"a cluster of at most N = {N0} samples found: refitting with N = {N1} (docs/defaults.md)")
            other = refit(N1)
            tried = {**tried, N0: tried.get(N0) or score(first), N1: score(other)}
            if other is None:
                report(f"kept N = {N0}: N = {N1} failed its input checks")
            else:
                # rows: the graphs at N0, at N1; columns: the labels at N0, at N1
                cuts = np.array([[mean_normalized_cut(graphs, fit.labels_, k) for fit in (first, other)]
                                 for graphs in (first._related_graphs(), other._related_graphs())])
                if (cuts[:, 1] < cuts[:, 0]).all():  # a cleaner partition on the graphs of either N
                    kept = other
                report(f"kept N = {kept.n_neighbors_}: mean normalized cut of the labels at N = {N0} / {N1}: "
                       f"{cuts[0, 0]:.4f} / {cuts[0, 1]:.4f} on the graphs at N = {N0}, "
                       f"{cuts[1, 0]:.4f} / {cuts[1, 1]:.4f} on those at N = {N1}")
        if not tried:
            return
        if kept is not first:
            self.__dict__.update({name: value for name, value in vars(kept).items() if name.endswith("_")})
        self.n_neighbors_tried_ = tried
        self.timings_ = {**self.timings_, "first_fit_total": sum(first_timings.values()),
                         "cluster_size_refit": time.perf_counter() - t0}

    def _related_graphs(self) -> list:
        """The graphs of the views fusion related (related_views_)."""
        return [graph for graph, kept in zip(self.view_graphs_, self.related_views_) if kept]

    def _refine_labels(self, report: Callable[[str], None]) -> None:
        """The k-means labels refined on the related views' graphs (assign.refine_labels)."""
        t0, kmeans_labels = time.perf_counter(), self.labels_
        graphs = self._related_graphs()
        self.labels_, trace, _ = refine_labels(graphs, kmeans_labels, self.n_clusters,
                                               anchor=self.embedding_solver_ == "anchor", tol=self.tol)
        self.refinement_objective_ = np.array(trace)
        self.timings_ = {**self.timings_, "refine": time.perf_counter() - t0}
        report(f"label refinement: {int(np.sum(self.labels_ != kmeans_labels))} samples moved in {len(trace) - 1} "
               f"steps, normalized association {trace[0]:.4f} -> {trace[-1]:.4f}")

    def _fit_late(self, inputs: _GraphInputs, names: list[str] | None, random_state: int | None, t0: float,
                  report: Callable[[str], None]) -> None:
        """ONMSC-LF (Eq. 11, Algorithm 1) with the estimator's parameters on kNN graphs."""
        self.n_neighbors_tried_ = {}
        views, n, k, n_neighbors, self.metric_ = inputs.views, inputs.n, inputs.k, inputs.n_neighbors, inputs.metrics
        solver = resolve_solver(self.embedding, n)
        self.n_neighbors_, self.embedding_solver_ = n_neighbors, solver
        width = check_n_components(self.n_components, k, n)
        n_landmarks = check_landmarks(self.n_landmarks, None, k, n, width) if solver == "nystrom" else 0
        self.n_landmarks_ = n_landmarks or None
        if solver == "exact":  # its n x n operators, each order
            warn_eigensolver_cost(n, width, len(inputs.sent) * self.order + 1)
        self.consensus_graph_ = self._consensus_graph(solver)
        n_ranked = ranked_neighbors_count(n, k, n_neighbors) if self.consensus_graph_ == "rank" else 0
        seeds = fit_seeds(random_state, len(inputs.sent))
        graph_params = dict(n_neighbors=n_neighbors, n_landmarks=n_landmarks,
                            n_nearest_landmarks=self.n_nearest_landmarks, n_ranked=n_ranked)
        m_extension = extension_landmarks(self.n_landmarks, self.n_nearest_landmarks, k, n, width)
        t1, v = time.perf_counter(), len(inputs.sent)
        report(f"graphs and embeddings: {v} view{'s' * (v > 1)} as Dask tasks ({solver} solver, "
               + f"N = {n_neighbors}, "
               + f"orders 1..{self.order}, width {width})")
        results = _view_tasks(inputs, solver, width, self.order, graph_params, seeds, names, m_extension)
        usable = usable_graphs([r[0] for r in results], [view_label(p, names) for p in range(len(results))], k, width,
                               views=views)
        H, self.view_eigenvalues_ = np.stack([r[2] for r in results]), np.stack([r[3] for r in results])
        self.related_views_, shares = related_among(H, usable, drop=self.drop_unrelated_views)
        warn_unrelated(self.related_views_[usable], shares, n, width, [view_label(p, names) for p in usable],
                       labelled=True)
        used = np.flatnonzero(self.related_views_)
        F, self.consensus_graph_ = self._consensus_embedding([results[p][:2] for p in used], solver, width,
                                                             graph_params, seeds[-2])
        t2 = time.perf_counter()
        report(f"graphs and embeddings done in {t2 - t1:.2f}s (F from the {self.consensus_graph_} graph)")
        fused, settings = fuse(H, self.view_eigenvalues_, F, used, k, *self._lambdas(width), order=self.order,
                               eigenvalue_scaling=self.eigenvalue_scaling, tol=self.tol, max_iter=self.max_iter,
                               random_state=seeds[-2])
        self._set_fusion(settings)
        t3 = time.perf_counter()
        report(f"late fusion {'converged' if fused.converged else 'stopped'} after "
               f"{counted(fused.n_iter, 'iteration')} in {t3 - t2:.2f}s")
        self.labels_, self.inertia_ = assign_labels(readout(fused.embedding, fused.target, k), k,
                                                    n_init=self.n_init, random_state=seeds[-1])
        self.refinement_objective_ = np.empty(0)  # refined by fit, after the small-cluster refit
        report(f"k-means ({self.n_init} restarts) in {time.perf_counter() - t3:.2f}s")
        self.embedding_, self.fusion_target_ = fused.embedding, fused.target
        self.view_weights_ = full_weights(fused.view_weights, used, len(H))
        self.objective_, self.converged_ = np.array(fused.objective), fused.converged
        self.view_embeddings_, self.average_embedding_ = H, F
        self.view_graphs_ = [r[0] for r in results]
        self._extension_inputs_ = {  # for _finish_fit, after the label refinement
            "graphs": [(r[4], r[5], m, self.n_nearest_landmarks, r[6]) for r, m in zip(results, self.metric_)],
            "scales": self._fusion_scales(), "fused": fused, "used": used}
        self.timings_ = {"validate": t1 - t0, "graphs_and_embeddings": t2 - t1, "fusion": t3 - t2,
                         "kmeans": time.perf_counter() - t3}

    def _consensus_graph(self, solver: str) -> str:
        """The resolved ``consensus_graph``: "rank" or "average"."""
        if self.consensus_graph == "rank" and solver == "anchor":
            raise ValueError("consensus_graph='rank' needs kNN graphs (embedding='exact' or 'nystrom'); anchor graphs "
                             "link samples to landmarks, not to each other")
        if self.consensus_graph == "auto":
            return "rank" if solver == "exact" else "average"
        return self.consensus_graph

    def _consensus_embedding(self, graphs: list[tuple], solver: str, width: int, graph_params: dict,
                             seed: int) -> tuple[np.ndarray, str]:
        """F of Eq. 11 from the related views' (graph, ranked neighbours) and the graph it came from: the
        rank-consensus graph's embedding, or the average graph's (also, with a warning, when the consensus graph
        falls into more than ``width`` pieces, so that its leading eigenvectors would be arbitrary)."""
        if self.consensus_graph_ == "rank":
            A = rank_consensus_affinity([neighbors for _, neighbors in graphs], graph_params["n_neighbors"])
            pieces = n_components(A)
            if pieces <= width:
                return embed_graph(A, solver, width, 1, n_landmarks=graph_params["n_landmarks"], random_state=seed,
                                   label="the rank-consensus graph")[0][0], "rank"
            user_warning(f"the rank-consensus graph of the views falls into {pieces} pieces, more than {width}; F is "
                         "the average graph's embedding")
        return average_graph_embedding([graph for graph, _ in graphs], solver, width,
                                       n_landmarks=graph_params["n_landmarks"], random_state=seed), "average"

    @staticmethod
    def _fixed_lambda(name: str, value, auto: float) -> float | None:
        """``"auto"`` -> the documented rule, ``"select"`` -> None (searched), a number -> itself, checked."""
        if isinstance(value, str) and value in ("auto", "select"):
            return float(auto) if value == "auto" else None
        return check_lambda(name, value, positive=name == "lambda2")

    def _fit_early(self, inputs: _GraphInputs, names: list[str] | None, random_state: int | None, t0: float) -> None:
        """ONMSC-EF: Eq. 10 by fit_early_fusion_graphs on the views' kNN graphs, built by the late path's Dask tasks
        (_view_tasks: on the workers, where _load_on_workers keeps lazy views) with their first-order embeddings
        for the related-views check; only these come to the client. The default N is the one late fusion's rule
        settles on (docs/defaults.md: the same refit scored on EF's own embedding picked a worse N on MSRC-v5), and
        that late fit's graphs and first-order embeddings at that N are used; its warnings are left to early
        fusion, which checks the same graphs."""
        k, n_neighbors, self.n_neighbors_tried_ = inputs.k, inputs.n_neighbors, {}
        if self.n_neighbors is None:  # exact graphs and the default lambdas: the settings early fusion shares
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                late = clone(self).set_params(fusion="late", embedding="exact", lambda1="auto", lambda2="auto",
                                              n_components=k, refine=False)
                late._fit_late(inputs, names, random_state, t0, lambda line: None)
                late._refit_for_cluster_sizes(inputs, names, random_state, lambda line: None)
            n_neighbors, self.n_neighbors_tried_ = late.n_neighbors_, late.n_neighbors_tried_
            graphs, embeddings = late.view_graphs_, late.view_embeddings_
        else:  # one seed for every view: the graphs and embeddings of fit_early_fusion
            results = _view_tasks(inputs, "exact", k, 1, dict(n_neighbors=n_neighbors, n_landmarks=0,
                                                              n_nearest_landmarks=0, n_ranked=0),
                                  [random_state] * len(inputs.sent), names, None)
            graphs, embeddings = [r[0] for r in results], np.stack([r[2] for r in results])
        check_view_graphs(graphs, k, names, inputs.views)
        ef = fit_early_fusion_graphs(graphs, k, inputs.metrics, n_neighbors, order=self.order, alpha=self.alpha,
                                     n_init=self.n_init, tol=self.tol, max_iter=self.max_iter,
                                     drop_unrelated_views=self.drop_unrelated_views, view_embeddings=embeddings,
                                     view_names=names, random_state=random_state)
        r = ef.result
        self.metric_, self.n_neighbors_, self.embedding_solver_ = ef.metric, ef.n_neighbors, "exact"
        self.related_views_ = ef.related
        self.labels_, self.inertia_, self.embedding_ = ef.labels, ef.inertia, r.affinity_embedding
        self.refinement_objective_ = np.empty(0)
        self.view_weights_, self.alpha_, self.objective_ = r.view_weights, r.alpha, np.array(r.objective)
        self.n_iter_, self.converged_ = r.n_iter, r.converged
        self.timings_ = {"total": time.perf_counter() - t0}

    def __getstate__(self) -> dict:
        """The estimator's state; an anchor fit's view_embeddings_ (every order a view of one H per view) as that H,
        pickled once rather than once per order."""
        state = super().__getstate__()
        H = state.get("view_embeddings_")
        if isinstance(H, np.ndarray) and H.ndim == 4 and H.shape[1] > 1 and H.strides[1] == 0:
            state = {**state, "view_embeddings_": _OrdersOfOneH(np.ascontiguousarray(H[:, :1]), H.shape[1])}
        return state

    def __setstate__(self, state: dict) -> None:
        H = state.get("view_embeddings_")
        if isinstance(H, _OrdersOfOneH):
            shape = (H.first.shape[0], H.orders, *H.first.shape[2:])
            state = {**state, "view_embeddings_": np.broadcast_to(H.first, shape)}
        super().__setstate__(state)

    def fit_predict(self, views, y=None, **fit_params) -> np.ndarray:
        """fit, then ``labels_``."""
        return self.fit(views, **fit_params).labels_

    def fit_transform(self, views, y=None, **fit_params):
        """fit, then :meth:`transform` of the same views (``embedding_`` itself for anchor graphs); early fusion has
        no transform (refused before fitting)."""
        if self.fusion == "early":
            raise ValueError(_EARLY_NO_EXTENSION.format(method="transform"))
        return self.fit(views, **fit_params).transform(views)

    def predict(self, views, storage_options: dict | None = None):
        """The cluster of each new sample (rows of ``views``, with the fitted views' features): its r nearest
        landmarks in each view, its anchor rows, its fusion target T and read-out, then the label refinement's
        assignment (anchor graphs) or the nearest cluster centre (docs/predict.md). numpy or scipy.sparse views
        give a numpy array; dask arrays a dask array computed chunk by chunk; a MultiViewStore, its path or URL (with
        ``storage_options``) a numpy array, one task per stored row chunk."""
        return self._extend(views, "predict", storage_options)

    def transform(self, views, storage_options: dict | None = None):
        """H* of new samples (n_new x width), computed as :meth:`predict`: on an anchor fit's own samples
        ``embedding_`` (to 1e-8), on a kNN fit's an approximation of it (docs/predict.md)."""
        return self._extend(views, "transform", storage_options)

    def _extend(self, views, method: str, storage_options: dict | None):
        from sklearn.utils.validation import check_is_fitted

        from .extend import apply

        check_is_fitted(self, "labels_")
        if hasattr(self, "alpha_"):  # an early-fusion fit
            raise ValueError(_EARLY_NO_EXTENSION.format(method=method))
        if getattr(self, "extension_", None) is None:
            raise ValueError(f"{method} needs more than n_components landmarks per view (n_landmarks); this fit had "
                             "too few samples or too small an n_landmarks for them, so it has no extension to new "
                             "samples")
        return apply(self.extension_, views, method, list(self.n_features_in_), getattr(self, "view_names_", None),
                     storage_options, getattr(self, "feature_names_in_", None))

    def __sklearn_tags__(self):
        from sklearn.utils import TransformerTags

        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # every view may be scipy.sparse
        tags.transformer_tags = TransformerTags(preserves_dtype=["float64"])  # transform gives float64 H*
        return tags
