"""Out-of-core ONMSC-LF with anchor graphs: a MultiViewStore -> labels, no process holding a whole view.

Every pass over a view is one Dask task per stored row chunk; only m x m matrices (per view) and the n x width
embeddings are gathered on the client. Each stage writes its output back to the store, so a rerun resumes
after the last completed stage and a changed parameter recomputes only the stages that depend on it:

    landmarks -> anchor_graph -> embeddings -> fusion -> labels

The anchor operator G = C C^T, C = D^-1/2 B, B = Z Lambda^-1/2 (spectral.anchor_factor) is split into sums
over row chunks (Lambda, C^T C), m-sized pieces, and row-wise products. Its eigenvectors, the same for every
order (spectral.py), are computed once per view, either from the m x m Gram C^T C = B^T D^-1 B, a sum of
sparse per-chunk products (``method="gram"``, the default: O(n r^2) per view), or from ``da.linalg.tsqr`` of
the row-chunked C (``method="tsqr"``, spectral.eigvecs_from_factor: O(n m^2)).
"""
from __future__ import annotations

import operator
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.delayed import Delayed

from .assign import assign_labels, readout, refine_labels
from .fusion import full_weights, fuse_views, related_views, warn_unrelated
from .graph import (LANDMARK_INITS, anchor_affinity, check_components, landmark_centres, landmark_rows,
                    metric_from_values, value_summary)
from .spectral import (anchor_embed_rows, anchor_factor_pieces, anchor_factor_rows,
                       anchor_column_sums, anchor_gram_transform, anchor_order_embeddings, anchor_scaled_gram,
                       eigvecs_from_factor, fix_signs)
from .store import MultiViewStore
from .validation import (DISTINCT_CHECK_ROWS, check_bool, check_finite, check_int, check_lambda, check_landmarks,
                         check_n_clusters, check_n_components, check_n_distinct, check_not_constant, check_scale,
                         check_seed, check_tol, column_range, fit_seeds, metric_list, n_distinct, row_ids, row_keys,
                         view_label, warn_zero_rows, zero_rows)

__all__ = ["OutOfCoreResult", "fit_store"]

STAGES = ("landmarks", "anchor_graph", "embeddings", "fusion", "labels")
METHODS = ("gram", "tsqr")


@dataclass
class OutOfCoreResult:
    """Output of :func:`fit_store`."""

    labels: np.ndarray  # (n,)
    embedding: np.ndarray  # H*, n x width (k, or n_components)
    target: np.ndarray  # T = S + lambda1 F (Eq. 12); the labels are k-means of its rows when wider than k
    view_weights: np.ndarray  # mu, (v,)
    objective: np.ndarray  # J after each late-fusion iteration
    view_embeddings: np.ndarray  # H_p^(o), (v, O, n, width)
    view_eigenvalues: np.ndarray  # their eigenvalues, (v, O, width) (spectral.embed_graph)
    average_embedding: np.ndarray  # F, n x width, of the related views
    related_views: np.ndarray  # (v,) bool, views kept by fusion.related_views (the others have weight 0)
    metrics: list[str]  # resolved metric of each view
    converged: bool  # late fusion met its tolerance before max_iter
    parameters: dict[str, Any]  # every parameter of the run as given, lambda2 resolved
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per stage (resumed: reading it back)
    computed_stages: list[str] = field(default_factory=list)  # stages computed in this call (others resumed)
    refinement_objective: np.ndarray = field(default_factory=lambda: np.empty(0))  # refine_labels' trace (refine)


# ---------------------------------------------------------------- chunk tasks


def _rows(path: str, p: int, start: int, stop: int) -> np.ndarray | sp.csr_matrix:
    """Rows start:stop of view p in the stored dtype: float32 views are searched in float32 (half the time
    of the float64 the in-memory estimator converts every view to)."""
    return MultiViewStore(path).read_rows(p, start, stop)


class _ChunkSummary(NamedTuple):
    """What the landmark stage learns about a row chunk while reading its sample."""

    min_value: float  # graph.value_summary
    zero_fraction: float
    integer: bool
    rows: int
    col_min: np.ndarray  # validation.column_range
    col_max: np.ndarray
    n_zero_rows: int  # validation.zero_rows
    zero_row_examples: list[int]  # the first (at most 5), absolute


def _chunk_scan(path: str, p: int, start: int, stop: int, idx: np.ndarray) -> tuple[_ChunkSummary, np.ndarray]:
    """One read of a row chunk, checked to be finite: its summary, and its rows `idx` (absolute, inside
    start:stop; the landmark sample), sparse for a sparse view."""
    store = MultiViewStore(path)
    X = store.read_rows(p, start, stop)
    check_finite(X, view_label(p, store.view_names), start)
    sample = X[idx - start]
    zr = zero_rows(X)
    return (_ChunkSummary(*value_summary(X), stop - start, *column_range(X), zr.size, (zr[:5] + start).tolist()),
            sample)


def _chunk_distinct_rows(path: str, p: int, start: int, stop: int,
                         at_least: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct rows (validation.row_keys) of a chunk of view p and each row's index into them, or None when
    there are at least `at_least` (the view alone then has enough distinct samples)."""
    keys, inverse = np.unique(row_keys(MultiViewStore(path).read_rows(p, start, stop)), return_inverse=True)
    return None if len(keys) >= at_least else (keys, inverse)


def _view_row_ids(chunks: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """validation.row_ids of a whole view from its chunks' distinct rows."""
    where = np.unique(np.concatenate([keys for keys, _ in chunks]), return_inverse=True)[1]
    starts = np.cumsum([0] + [len(keys) for keys, _ in chunks])
    return np.concatenate([where[s:s + len(keys)][inverse] for s, (keys, inverse) in zip(starts, chunks)])


def check_store_distinct(store: MultiViewStore, n_clusters: int, client: Any = None) -> None:
    """validation.check_distinct_samples out of core: the first rows of every view on the client and, only when
    they hold fewer than k distinct samples, each chunk's distinct rows on the workers."""
    first = min(store.n_samples, DISTINCT_CHECK_ROWS)
    if n_distinct((row_ids(store.read_rows(p, 0, first)) for p in range(store.n_views)), n_clusters) >= n_clusters:
        return
    path = store.location
    views = _compute(client, *[[dask.delayed(_chunk_distinct_rows, pure=True)(path, p, s, e, n_clusters)
                                for s, e in store.row_chunks(p)] for p in range(store.n_views)])
    if not any(c is None for chunks in views for c in chunks):
        check_n_distinct(n_distinct(map(_view_row_ids, views), n_clusters), n_clusters)


def _view_metric(summaries: list[_ChunkSummary], metric: str, label: str) -> tuple[str, int, list[int]]:
    """The view's metric (graph.metric_from_values) from its chunk summaries, after checking it is not constant,
    with its number of all-zero rows and the first of them."""
    rows = sum(s.rows for s in summaries)
    spread = np.max([s.col_max for s in summaries], axis=0) - np.min([s.col_min for s in summaries], axis=0)
    check_not_constant(spread, rows, label)
    check_scale(max(max(np.abs(s.col_min).max(), np.abs(s.col_max).max()) for s in summaries), label)
    resolved = metric_from_values(metric, min(s.min_value for s in summaries),
                                  sum(s.zero_fraction * s.rows for s in summaries) / rows,
                                  all(s.integer for s in summaries), spread.size, label)
    return (resolved, sum(s.n_zero_rows for s in summaries),
            [i for s in summaries for i in s.zero_row_examples][:5])


def _anchor_block(path: str, p: int, start: int, stop: int, landmarks: np.ndarray, n_nearest: int,
                  metric: str) -> sp.csr_matrix:
    """Rows start:stop of the anchor matrix Z of view p (graph.anchor_affinity, exact search), float64."""
    return anchor_affinity(_rows(path, p, start, stop), landmarks, n_nearest, metric)


def _tree_sum(items: list[Delayed]) -> Delayed:
    """Pairwise (log-depth) sum of delayed values."""
    add = dask.delayed(operator.add, pure=True)
    while len(items) > 1:
        items = [add(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def _stored(path: str, stage: str, name: str) -> Any:
    """A stage's stored result, read by a task: nothing a task needs lives only in a worker's memory (scattered
    data lost with a worker cannot be recomputed), so the scheduler reads it again after a worker is lost."""
    return MultiViewStore(path).read_result(stage, name)


def _z_rows(path: str, p: int, start: int, stop: int) -> sp.csr_matrix:
    """Rows start:stop of view p's stored anchor matrix Z."""
    return MultiViewStore(path).read_result_rows("anchor_graph", f"Z{p}", start, stop)


def _split(path: str, p: int, chunks: list[tuple[int, int]]) -> list[Delayed]:
    """Row blocks of the stored Z as tasks that read the store, so a block lost with a worker is recomputed."""
    return [dask.delayed(_z_rows, pure=True)(path, p, s, e) for s, e in chunks]


# ------------------------------------------------------------------ pipeline


def _compute(client: Any, *objs: Any) -> tuple:
    """Compute dask objects on `client`, or on the default scheduler when it is None."""
    return dask.compute(*objs) if client is None else dask.compute(*objs, scheduler=client)


def _gram_embedding(Zc: list[Any], k: int, seed: int) -> Delayed:
    """Delayed (n x k embedding, top-k eigenvalues) of the anchor graph given by row blocks Zc (method "gram")."""
    sums = _tree_sum([dask.delayed(anchor_column_sums, pure=True)(z) for z in Zc])
    pieces = dask.delayed(anchor_factor_pieces, pure=True)(sums)
    S = _tree_sum([dask.delayed(anchor_scaled_gram, pure=True)(z, pieces) for z in Zc])
    T, vals = dask.delayed(anchor_gram_transform, pure=True, nout=2)(S, k, seed)
    H = dask.delayed(np.vstack, pure=True)([dask.delayed(anchor_embed_rows, pure=True)(z, pieces, T) for z in Zc])
    return dask.delayed(tuple, pure=True)([dask.delayed(fix_signs, pure=True)(H), vals])


def _tsqr_embeddings(jobs: list[tuple[list[Any], list[tuple[int, int]], int]], k: int,
                     client: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """Embedding and eigenvalues of each job (row blocks, chunks, m) via tsqr of the row-chunked C (method "tsqr");
    jobs run concurrently (each eigvecs_from_factor call computes twice)."""
    sums = [_tree_sum([dask.delayed(anchor_column_sums, pure=True)(z) for z in Zc]) for Zc, *_ in jobs]
    pieces = [anchor_factor_pieces(s) for s in _compute(client, *sums)]

    def run(job: tuple, piece: dict) -> tuple[np.ndarray, np.ndarray]:
        Zc, chunks, m = job
        piece = dask.delayed(piece, pure=True)  # a graph constant the scheduler keeps (m-sized)
        C = da.concatenate([da.from_delayed(dask.delayed(anchor_factor_rows, pure=True)(z, piece), (e - s, m), float)
                            for z, (s, e) in zip(Zc, chunks)])
        return eigvecs_from_factor(C, k)

    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(run, jobs, pieces))


@dataclass
class _Run:
    """One fit_store call: its store and client, each stage's parameters (what a stored result must match to be
    reused), the seeds, and what was computed and how long each stage took."""

    store: MultiViewStore
    client: Any
    params: dict[str, dict[str, Any]]
    seeds: list[int]
    report: Callable[[str], None]
    timings: dict[str, float] = field(default_factory=dict)
    computed: list[str] = field(default_factory=list)

    @property
    def path(self) -> Any:
        return self.store.location

    def stage(self, name: str, results: list[str], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Read stage `name`'s results from the store, or compute, write and complete it (every stage after a
        recomputed one is recomputed)."""
        t0, step = time.perf_counter(), f"stage {STAGES.index(name) + 1}/{len(STAGES)} {name}"
        if not self.computed and self.store.has_stage(name, self.params[name], results):
            out = {r: self.store.read_result(name, r) for r in results}
            done = "read from the store (resumed)"
        else:
            self.report(f"{step} ...")
            out = compute()
            for r in results:
                self.store.write_result(name, r, out[r], self.params[name])
            self.store.mark_complete(name)
            self.computed.append(name)
            done = "computed"
        self.timings[name] = time.perf_counter() - t0
        self.report(f"{step} {done} in {self.timings[name]:.2f}s")
        return out


def _landmarks(run: _Run, k: int) -> dict[str, Any]:
    """Stage 1: each view's metric, all-zero rows and landmarks (graph.select_landmarks, its sample read chunk by
    chunk in parallel, with the value summaries and finiteness checks of the same read)."""
    store, lp = run.store, run.params["landmarks"]
    m, view_metrics, lms = lp["n_landmarks"], [], []
    for p in range(store.n_views):
        idx = landmark_rows(store.n_samples, m, lp["landmark_sample"], run.seeds[p])
        scans = [dask.delayed(_chunk_scan, pure=True, nout=2)(run.path, p, s, e, idx[(idx >= s) & (idx < e)])
                 for s, e in store.row_chunks(p)]
        view_metric = dask.delayed(_view_metric, pure=True, nout=3)(  # (metric, zero rows, their first rows)
            [summary for summary, _ in scans], lp["metric"][p], view_label(p, store.view_names))
        view_metrics.append(view_metric)
        lms.append(dask.delayed(landmark_centres, pure=True)([rows for _, rows in scans], m, run.seeds[p],
                                                             lp["landmark_init"], view_metric[0]))
    check_store_distinct(store, k, run.client)
    resolved, lms = _compute(run.client, view_metrics, lms)
    return {"metrics": {"metrics": [r[0] for r in resolved], "zero_rows": [list(r[1:]) for r in resolved]},
            **{f"L{p}": lms[p] for p in range(store.n_views)}}


def _anchor_graphs(run: _Run, metrics: list[str]) -> dict[str, Any]:
    """Stage 2: each view's Z, row chunk by row chunk (its landmarks read from the store by one task per view,
    whose result the workers share)."""
    blocks = []
    for p in range(run.store.n_views):
        L = dask.delayed(_stored, pure=False)(run.path, "landmarks", f"L{p}")  # a new key each run
        blocks.append([dask.delayed(_anchor_block, pure=True)(run.path, p, s, e, L,
                                                              run.params["anchor_graph"]["n_nearest_landmarks"],
                                                              metrics[p]) for s, e in run.store.row_chunks(p)])
    return {f"Z{p}": sp.vstack(b).tocsr() for p, b in enumerate(_compute(run.client, *blocks))}


def _average(Zc: list[list[Any]]) -> list[Any]:
    """Row blocks of the average graph of the views' anchor matrices (their columns side by side)."""
    return [dask.delayed(lambda *zs: sp.hstack(zs).tocsr() / len(zs), pure=True)(*zs) for zs in zip(*Zc)]


def _embed(run: _Run, jobs: list[list[Any]], widths: list[int], job_seeds: list[int]) -> list[tuple]:
    """Anchor embeddings and eigenvalues of the graphs given by row blocks (one list per graph), sign-fixed like
    the in-memory ones, with the run's method."""
    ep = run.params["embeddings"]
    if ep["method"] == "gram":
        return list(_compute(run.client, *[_gram_embedding(z, ep["n_components"], seed)
                                           for z, seed in zip(jobs, job_seeds)]))
    return _tsqr_embeddings([(z, run.store.row_chunks(0), w) for z, w in zip(jobs, widths)], ep["n_components"],
                            run.client)


def _embeddings(run: _Run, Zs: dict[str, Any]) -> dict[str, Any]:
    """Stage 3: H_p^(o) and their eigenvalues, the related views and F, the embedding of their average graph."""
    v, ep, seeds = run.store.n_views, run.params["embeddings"], run.seeds
    Zc = [_split(run.path, p, run.store.row_chunks(0)) for p in range(v)]
    widths = [Zs[f"Z{p}"].shape[1] for p in range(v)]
    *pairs, (F, _) = _embed(run, Zc + [_average(Zc)], widths + [sum(widths)], seeds[:v] + [seeds[-2]])
    H, lam = (np.stack(a) for a in zip(*[anchor_order_embeddings(h, vals, ep["order"]) for h, vals in pairs]))
    related, shares = related_views(H, drop=ep["drop_unrelated_views"])
    used = np.flatnonzero(related)
    if len(used) < v:  # F of the related views only
        F = _embed(run, [_average([Zc[p] for p in used])], [sum(widths[p] for p in used)], [seeds[-2]])[0][0]
    return {"H": H, "eigenvalues": lam, "F": F, "related": related, "shares": shares}


def _fusion(run: _Run, emb: dict[str, Any]) -> dict[str, Any]:
    """Stage 4: late fusion (Algorithm 1) of the related views: H*, its target T (for the labels), mu."""
    fp, used = run.params["fusion"], np.flatnonzero(emb["related"])
    fused = fuse_views(emb["H"], emb["eigenvalues"], emb["F"], used, fp["lambda1"], fp["lambda2"],
                       eigenvalue_scaling=fp["eigenvalue_scaling"], tol=fp["tol"], max_iter=fp["max_iter"])
    return {"embedding": fused.embedding, "target": fused.target,
            "view_weights": full_weights(fused.view_weights, used, run.store.n_views),
            "objective": np.asarray(fused.objective, dtype=float), "converged": np.asarray(fused.converged)}


def _labels(run: _Run, fus: dict[str, Any], Zs: dict[str, Any], related: np.ndarray, k: int) -> dict[str, Any]:
    """Stage 5: k-means of the read-out, refined on the related views' anchor graphs (on the client, which holds
    every Z: O(n r k) per move) when the run's ``refine`` is set."""
    lp = run.params["labels"]
    labels = assign_labels(readout(fus["embedding"], fus["target"], k), k, n_init=lp["n_init"],
                           random_state=run.seeds[-1])[0]
    if not lp["refine"]:
        return {"labels": labels, "refinement_objective": np.empty(0)}
    labels, trace = refine_labels([Zs[f"Z{p}"] for p in np.flatnonzero(related)], labels, k, anchor=True,
                                  tol=lp["tol"])
    return {"labels": labels, "refinement_objective": np.array(trace)}


def fit_store(store: MultiViewStore | str | os.PathLike, n_clusters: int, *, order: int = 2,
              n_landmarks: int | None = None, n_nearest_landmarks: int = 3, metric: str | Sequence[str] = "auto",
              lambda1: float | str = "auto", lambda2: float | str = "auto", n_components: int | None = None,
              n_init: int = 10, random_state: int | None = None, client: Any = None, landmark_init: str = "random",
              landmark_sample: int = 5000,
              method: str = "gram", tol: float = 1e-4, max_iter: int = 100, eigenvalue_scaling: bool = True,
              drop_unrelated_views: bool = True, refine: bool = True,
              progress: Callable[[str], None] | None = None) -> OutOfCoreResult:
    """ONMSC-LF with anchor graphs on the views of `store`, stage by stage, resuming completed stages.

    `store` is a MultiViewStore or its path. Parameters are those of ``ONMSC(embedding="anchor")`` (lambdas a
    number or ``"auto"``); in addition
    landmark_init, landmark_sample : k-means initialisation (graph.LANDMARK_INITS) and rows sampled per view
        for the landmarks (graph.select_landmarks, with the same defaults).
    method : ``"gram"`` or ``"tsqr"``, the eigen-solver of the anchor operator (module docstring).
    client : a ``distributed.Client``; None uses the current default scheduler.
    progress : called with a line as each stage starts and ends (the CLI prints them).

    Seeds derive from `random_state` like the in-memory estimator's, so the labels equal
    ``ONMSC(embedding="anchor", random_state=...)``'s on the same data.
    """
    if landmark_init not in LANDMARK_INITS:
        raise ValueError(f"landmark_init must be one of {LANDMARK_INITS}, got {landmark_init!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(store, (MultiViewStore, str, os.PathLike)):
        raise TypeError(f"fit_store reads a MultiViewStore or the path of one, got {type(store).__name__}; write "
                        "views with MultiViewStore.create(path, views), or fit them in memory with ONMSC")
    store = store if isinstance(store, MultiViewStore) else MultiViewStore(store)
    check_tol(tol)
    for name, value in (("refine", refine), ("eigenvalue_scaling", eigenvalue_scaling),
                        ("drop_unrelated_views", drop_unrelated_views)):
        check_bool(name, value)
    v, n = store.n_views, store.n_samples
    k, order = check_n_clusters(n_clusters, n), check_int("order", order)
    for name, value in (("n_init", n_init), ("max_iter", max_iter), ("landmark_sample", landmark_sample)):
        check_int(name, value)
    random_state, requested = check_seed(random_state), metric_list(metric, v)
    width = check_n_components(n_components, k, n)
    m = check_landmarks(n_landmarks, n_nearest_landmarks, k, n, width)
    lambda1 = 1.0 if lambda1 == "auto" else check_lambda("lambda1", lambda1, rules=["auto"])
    lambda2 = (float(width * order) if lambda2 == "auto"
               else check_lambda("lambda2", lambda2, positive=True, rules=["auto"]))
    params = {"landmarks": {"n_landmarks": m, "metric": requested, "random_state": random_state,
                            "landmark_init": landmark_init, "landmark_sample": landmark_sample}}
    params["anchor_graph"] = {**params["landmarks"], "n_nearest_landmarks": n_nearest_landmarks}
    params["embeddings"] = {**params["anchor_graph"], "n_clusters": k, "n_components": width, "order": order,
                            "method": method,
                            "drop_unrelated_views": drop_unrelated_views}
    params["fusion"] = {**params["embeddings"], "lambda1": lambda1, "lambda2": lambda2, "tol": tol,
                        "max_iter": max_iter, "eigenvalue_scaling": eigenvalue_scaling}
    params["labels"] = {**params["fusion"], "n_init": n_init, "refine": refine}
    run = _Run(store, client, params, fit_seeds(random_state, v), progress or (lambda line: None))
    lm = run.stage("landmarks", ["metrics"] + [f"L{p}" for p in range(v)], lambda: _landmarks(run, k))
    metrics = lm["metrics"]["metrics"]
    for p, (n_zero, examples) in enumerate(lm["metrics"].get("zero_rows", [(0, [])] * v)):  # also when resumed
        warn_zero_rows(n_zero, examples, metrics[p], view_label(p, store.view_names))
    Zs = run.stage("anchor_graph", [f"Z{p}" for p in range(v)], lambda: _anchor_graphs(run, metrics))
    for p in range(v):
        check_components(Zs[f"Z{p}"], view_label(p, store.view_names), k, anchor=True, width=width)
    emb = run.stage("embeddings", ["H", "eigenvalues", "F", "related", "shares"], lambda: _embeddings(run, Zs))
    warn_unrelated(emb["related"], emb["shares"], n, width, store.view_names)  # also when the stage is resumed
    fus = run.stage("fusion", ["embedding", "target", "view_weights", "objective", "converged"],
                    lambda: _fusion(run, emb))
    lab = run.stage("labels", ["labels", "refinement_objective"],
                    lambda: _labels(run, fus, Zs, np.asarray(emb["related"], bool), k))
    return OutOfCoreResult(labels=lab["labels"], embedding=fus["embedding"], target=fus["target"],
                           view_weights=fus["view_weights"],
                           objective=fus["objective"], view_embeddings=emb["H"],
                           view_eigenvalues=emb["eigenvalues"], average_embedding=emb["F"],
                           related_views=np.asarray(emb["related"], bool),
                           metrics=metrics, converged=bool(fus["converged"]), parameters=params["labels"],
                           timings=run.timings, computed_stages=run.computed,
                           refinement_objective=lab["refinement_objective"])
