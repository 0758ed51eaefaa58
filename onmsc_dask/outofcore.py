"""The anchor chain of ONMSC-LF (``ONMSC(embedding="anchor")``): views as row chunks -> labels, no process holding
a whole view (docs/pipeline.md).

Every pass over a view is one Dask task per row chunk (rows.RowChunks: stored chunks, dask chunks, or in-memory
chunks sent to the workers once); only m x m matrices (per view) and the n x width embeddings are gathered on the
client. Each stage writes its output to the estimator's ``cache`` store (else keeps it in memory), so a rerun
resumes after the last completed stage and a changed parameter recomputes only the stages that depend on it:

    landmarks -> anchor_graph -> embeddings -> fusion -> labels

The anchor operator G = C C^T, C = D^-1/2 B, B = Z Lambda^-1/2 (spectral.anchor_factor_rows) is split into sums
over row chunks (Lambda, C^T C), m-sized pieces, and row-wise products. Its eigenvectors, the same for every
order (spectral.py), are computed once per view, either from the m x m Gram C^T C = B^T D^-1 B, a sum of
sparse per-chunk products (``anchor_method="gram"``, the default: O(n r^2) per view), or from ``da.linalg.tsqr``
of the row-chunked C (``anchor_method="tsqr"``, spectral.tsqr_transform: O(n m^2)).
"""
from __future__ import annotations

import operator
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.delayed import Delayed

from .assign import assign_labels, readout, refine_labels
from .cluster import scattered
from .fusion import full_weights, related_among, warn_unrelated
from .graph import (LANDMARK_INITS, LINE_VIEW_COLUMNS, anchor_affinity, column_scale, effective_columns,
                    landmark_centres, landmark_rows, metric_from_values, usable_graphs, value_metric, value_summary)
from .rows import RowChunks, read_rows
from .selection import fuse
from .spectral import (anchor_embed_rows, anchor_factor_pieces, anchor_factor_rows,
                       anchor_column_sums, anchor_gram_transform, anchor_order_embeddings, anchor_scaled_gram,
                       fix_signs, tsqr_transform)
from .store import MultiViewStore
from .validation import (DISTINCT_CHECK_ROWS, ConstantViewError, check_finite, check_int, check_n_distinct,
                         check_not_constant, check_scale, column_range, fit_seeds, largest_magnitude, n_distinct,
                         row_ids, row_keys, view_label, warn_zero_rows, zero_rows)

__all__ = ["ConstantViews", "OutOfCoreResult", "fit_store", "run_chain", "stage_parameters", "STAGES"]

STAGES = ("landmarks", "anchor_graph", "embeddings", "fusion", "labels")
#: rows of Z per task of the embeddings stage's "gram" method (3.6 MB of a 3-nearest Z, its Gram m x m): a task of
#: 10,000 rows spent longer reading its block from the store (20-60 ms) than computing with it (5-20 ms). The "tsqr"
#: method densifies its blocks (rows x m float64), so it keeps the views' row chunks
Z_BLOCK_ROWS = 100_000
#: rows sampled per landmark for the landmarks' k-means by default, and at least as many rows (all when fewer; the
#: former default, kept for data that the rule was not measured on: docs/defaults.md, "Landmark sample")
LANDMARK_SAMPLE_PER_LANDMARK, LANDMARK_SAMPLE_MIN = 7.5, 5000
METHODS = ("gram", "tsqr")


@dataclass
class OutOfCoreResult:
    """Output of :func:`fit_store`: the fitted estimator's results under their fit_store names."""

    labels: np.ndarray  # (n,)
    embedding: np.ndarray  # H*, n x width (k, or n_components)
    target: np.ndarray  # T = S + lambda1 F (Eq. 12); the labels are k-means of its rows when wider than k
    view_weights: np.ndarray  # mu, (v,)
    objective: np.ndarray  # J after each late-fusion iteration
    view_embeddings: np.ndarray  # H_p^(o), (v', O, n, width), of the v' views not in left_out_views
    view_eigenvalues: np.ndarray  # their eigenvalues, (v', O, width) (spectral.embed_graph)
    average_embedding: np.ndarray  # F, n x width, of the related views
    related_views: np.ndarray  # (v,) bool, views kept by fusion.related_views (the others have weight 0)
    metrics: list[str]  # resolved metric of each view
    converged: bool  # late fusion met its tolerance before max_iter
    parameters: dict[str, Any]  # every stage parameter of the run, lambda2 resolved
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per stage (resumed: reading it back)
    computed_stages: list[str] = field(default_factory=list)  # stages computed in this call (others resumed)
    refinement_objective: np.ndarray = field(default_factory=lambda: np.empty(0))  # refine_labels' trace (refine)
    left_out_views: np.ndarray = field(default_factory=lambda: np.empty(0, int))  # constant views (weight 0)

    @classmethod
    def of(cls, model: Any) -> "OutOfCoreResult":
        """The results of an anchor-chain fit of ONMSC with ``keep_intermediate=True``."""
        return cls(model.labels_, model.embedding_, model.fusion_target_, model.view_weights_, model.objective_,
                   model.view_embeddings_, model.view_eigenvalues_, model.average_embedding_, model.related_views_,
                   model.metric_, bool(model.converged_), model.stage_parameters_, model.timings_,
                   model.computed_stages_, model.refinement_objective_, model.left_out_views_)


# ---------------------------------------------------------------- chunk tasks


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
    dtype: np.dtype  # as read (rows.read_rows)


def _chunk_scan(block: Any, label: str, start: int, idx: np.ndarray) -> tuple[_ChunkSummary, np.ndarray]:
    """One read of a row chunk (rows.read_rows: float32 views stay float32), checked to be finite: its summary,
    and its rows `idx` (absolute, from `start` on; the landmark sample), sparse for a sparse view."""
    X = read_rows(block)
    check_finite(X, label, start)
    sample = X[idx - start]
    zr = zero_rows(X)
    return (_ChunkSummary(*value_summary(X), X.shape[0], *column_range(X), zr.size, (zr[:5] + start).tolist(),
                          X.dtype), sample)


def _chunk_distinct_rows(block: Any, at_least: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct rows (validation.row_keys) of a row chunk and each row's index into them, or None when there
    are at least `at_least` (the view alone then has enough distinct samples)."""
    keys, inverse = np.unique(row_keys(read_rows(block)), return_inverse=True)
    return None if len(keys) >= at_least else (keys, inverse)


def _view_row_ids(chunks: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """validation.row_ids of a whole view from its chunks' distinct rows."""
    where = np.unique(np.concatenate([keys for keys, _ in chunks]), return_inverse=True)[1]
    starts = np.cumsum([0] + [len(keys) for keys, _ in chunks])
    return np.concatenate([where[s:s + len(keys)][inverse] for s, (keys, inverse) in zip(starts, chunks)])


def check_distinct(rows: RowChunks, n_clusters: int, client: Any = None) -> None:
    """validation.check_distinct_samples over row chunks: the first rows of every view on the client and, only when
    they hold fewer than k distinct samples, each chunk's distinct rows on the workers."""
    first = min(rows.n_samples, DISTINCT_CHECK_ROWS)
    if n_distinct((row_ids(rows.first_rows(p, first)) for p in range(rows.n_views)), n_clusters) >= n_clusters:
        return
    views = _compute(client, *[[dask.delayed(_chunk_distinct_rows, pure=True)(block, n_clusters)
                                for block in blocks] for blocks in rows.blocks])
    if not any(c is None for chunks in views for c in chunks):
        check_n_distinct(n_distinct(map(_view_row_ids, views), n_clusters), n_clusters)


class ConstantViews(ConstantViewError):
    """Views the landmark stage found constant, by position (check_not_constant's message for each): the estimator
    leaves them out, with a warning, and runs the chain on the others."""

    def __init__(self, messages: dict[int, str]) -> None:
        super().__init__("; ".join(messages.values()))
        self.messages = messages


def _view_metric(summaries: list[_ChunkSummary], metric: str, label: str,
                 sample: np.ndarray | sp.csr_matrix) -> tuple[str, int, list[int], list[float] | None] | str:
    """The view's metric (graph.metric_from_values) from its chunk summaries and, for ``auto``, the effective
    columns of its landmark sample (the line-view rule), with its number of all-zero rows, the first of them and,
    for ``standardized``, the column scales of that sample (rows in the same order whatever the chunks: the same
    scales for every chunking); or, for a constant view, check_not_constant's message."""
    rows = sum(s.rows for s in summaries)
    spread = np.max([s.col_max for s in summaries], axis=0) - np.min([s.col_min for s in summaries], axis=0)
    try:
        check_not_constant(spread, rows, label)
    except ConstantViewError as exc:
        return str(exc)
    check_scale(max(largest_magnitude(s.col_min, s.col_max) for s in summaries), label, summaries[0].dtype)
    values = (min(s.min_value for s in summaries), sum(s.zero_fraction * s.rows for s in summaries) / rows,
              all(s.integer for s in summaries), spread.size)
    effective = effective_columns(sample, value_metric(*values)) if metric == "auto" else np.inf
    resolved = metric_from_values(metric, *values, label, effective)
    scale = column_scale(sample) if resolved == "standardized" else None
    return (resolved, sum(s.n_zero_rows for s in summaries), [i for s in summaries for i in s.zero_row_examples][:5],
            None if scale is None else scale.tolist())


def _view_landmarks(scans: list[tuple[_ChunkSummary, Any]], metric: str, label: str, n_landmarks: int, seed: int,
                    init: str) -> tuple[tuple[str, int, list[int], list[float] | None] | str, np.ndarray | None]:
    """The view's _view_metric from its chunk scans and graph.landmark_centres of its sample in that metric (None for
    a constant view). One task: a separate metric task would queue behind another view's k-means on the worker
    that holds its inputs, and hold back this view's k-means while the other worker idles."""
    samples = [sample for _, sample in scans]
    sample = sp.vstack(samples, format="csr") if sp.issparse(samples[0]) else np.concatenate(samples)
    view_metric = _view_metric([summary for summary, _ in scans], metric, label, sample)
    if isinstance(view_metric, str):
        return view_metric, None
    scale = None if view_metric[3] is None else np.asarray(view_metric[3])
    return view_metric, landmark_centres([sample], n_landmarks, seed, init, view_metric[0], scale)


def _anchor_block(block: Any, landmarks: np.ndarray, n_nearest: int, metric: str,
                  scale: np.ndarray | None) -> sp.csr_matrix:
    """The rows of the anchor matrix Z of a row chunk (graph.anchor_affinity, exact search; ``scale``: the view's,
    for standardized), float64."""
    if metric == "standardized" and scale is None:  # anchor_affinity would take the chunk's own
        raise ValueError("standardized anchor rows need the view's column scales")
    return anchor_affinity(read_rows(block), landmarks, n_nearest, metric, scale)


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
    return dask.delayed(tuple, pure=True)([_embed_rows(Zc, pieces, T), vals])


def _embed_rows(Zc: list[Any], pieces: Any, T: Any) -> Delayed:
    """Delayed sign-fixed H = D^-1/2 B T of the anchor graph given by row blocks Zc, block by block."""
    H = dask.delayed(np.vstack, pure=True)([dask.delayed(anchor_embed_rows, pure=True)(z, pieces, T) for z in Zc])
    return dask.delayed(fix_signs, pure=True)(H)


def _tsqr_embeddings(jobs: list[tuple[list[Any], list[tuple[int, int]], int]], k: int,
                     client: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """Embedding and eigenvalues of each job (row blocks, chunks, m) via R of the tsqr of the row-chunked C (method
    "tsqr"; the jobs' QRs run concurrently), then H = D^-1/2 B T block by block, as for "gram"."""
    sums = [_tree_sum([dask.delayed(anchor_column_sums, pure=True)(z) for z in Zc]) for Zc, *_ in jobs]
    # m-sized graph constants the scheduler keeps
    pieces = [dask.delayed(anchor_factor_pieces(s), pure=True) for s in _compute(client, *sums)]

    def transform(job: tuple, piece: Delayed) -> tuple[np.ndarray, np.ndarray]:
        Zc, chunks, m = job
        C = da.concatenate([da.from_delayed(dask.delayed(anchor_factor_rows, pure=True)(z, piece), (e - s, m), float)
                            for z, (s, e) in zip(Zc, chunks)])
        return tsqr_transform(C, k)

    with ThreadPoolExecutor(len(jobs)) as pool:
        transforms = list(pool.map(transform, jobs, pieces))
    Hs = _compute(client, *[_embed_rows(Zc, piece, dask.delayed(T, pure=True))
                            for (Zc, *_), piece, (T, _) in zip(jobs, pieces, transforms)])
    return [(H, vals) for H, (_, vals) in zip(Hs, transforms)]


class InMemory:
    """Stage results of a fit without a ``cache`` store, kept in memory (the MultiViewStore stage interface it
    needs): nothing is resumed, nothing written."""

    def __init__(self) -> None:
        self.results: dict[tuple[str, str], Any] = {}

    def has_stage(self, stage: str, params: dict, names: Sequence[str]) -> bool:
        return False

    def write_result(self, stage: str, name: str, value: Any, params: dict) -> None:
        self.results[stage, name] = value

    def read_result(self, stage: str, name: str) -> Any:
        return self.results[stage, name]

    def mark_complete(self, stage: str) -> None:
        pass


@dataclass
class _Run:
    """One run of the chain: its row chunks, where the stage results go (a MultiViewStore, resumable, or InMemory)
    and its client, each stage's parameters (what a stored result must match to be reused), the seeds, and what was
    computed and how long each stage took."""

    rows: RowChunks
    results: MultiViewStore | InMemory
    client: Any
    params: dict[str, dict[str, Any]]
    seeds: list[int]
    report: Callable[[str], None]
    timings: dict[str, float] = field(default_factory=dict)
    computed: list[str] = field(default_factory=list)

    def stage(self, name: str, results: list[str], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Read stage `name`'s results from the store, or compute, write and complete it (every stage after a
        recomputed one is recomputed)."""
        t0, step = time.perf_counter(), f"stage {STAGES.index(name) + 1}/{len(STAGES)} {name}"
        if not self.computed and self.results.has_stage(name, self.params[name], results):
            out = self.results.read_results(name, results)
            done = "read from the store (resumed)"
        else:
            self.report(f"{step} ...")
            out = compute()
            for r in results:
                self.results.write_result(name, r, out[r], self.params[name])
            self.results.mark_complete(name)
            self.computed.append(name)
            done = "computed"
        self.timings[name] = time.perf_counter() - t0
        self.report(f"{step} {done} in {self.timings[name]:.2f}s")
        return out

    def result(self, stage: str, name: str) -> Any:
        """A stage result as a task input: read from the store by a task (a new key each run), or sent to the
        workers once (cluster.scattered)."""
        if isinstance(self.results, InMemory):
            return scattered(self.results.read_result(stage, name))
        return dask.delayed(_stored, pure=False)(self.results.location, stage, name)

    @property
    def z_chunks(self) -> list[tuple[int, int]]:
        """Row blocks of the embeddings stage's tasks: Z_BLOCK_ROWS rows each for the "gram" method, the views' row
        chunks for "tsqr"."""
        if self.params["embeddings"]["method"] != "gram":
            return self.rows.chunks[0]
        n = self.rows.n_samples
        return [(s, min(s + Z_BLOCK_ROWS, n)) for s in range(0, n, Z_BLOCK_ROWS)]

    def z_blocks(self, p: int, chunks: list[tuple[int, int]]) -> list[Any]:
        """Row blocks of view p's Z as task inputs: tasks that read the store (a block lost with a worker is read
        again), or blocks sent to the workers once."""
        if isinstance(self.results, InMemory):
            Z = self.results.read_result("anchor_graph", f"Z{p}")
            return list(scattered([Z[s:e] for s, e in chunks]))
        return [dask.delayed(_z_rows, pure=True)(self.results.location, p, s, e) for s, e in chunks]


def _landmarks(run: _Run, k: int) -> dict[str, Any]:
    """Stage 1: each view's metric, all-zero rows and landmarks (graph.select_landmarks, its sample read chunk by
    chunk in parallel, with the value summaries and finiteness checks of the same read). Raises ConstantViews,
    before anything is written, when that read finds views constant."""
    rows, lp = run.rows, run.params["landmarks"]
    m, view_metrics, lms = lp["n_landmarks"], [], []
    for p in range(rows.n_views):
        label = view_label(p, rows.view_names)
        idx = landmark_rows(rows.n_samples, m, lp["landmark_sample"], run.seeds[p])
        # the widest view first: its k-means (O(sample m d)) is the stage's longest task and waits for its scans
        with dask.annotate(priority=rows.n_features[p]):
            scans = [dask.delayed(_chunk_scan, pure=True)(block, label, s, idx[(idx >= s) & (idx < e)])
                     for (s, e), block in zip(rows.chunks[p], rows.blocks[p])]
            # (metric, zero rows, their first rows) or a message; the landmarks
            view_metric, lm = dask.delayed(_view_landmarks, pure=True, nout=2)(scans, lp["metric"][p], label, m,
                                                                               run.seeds[p], lp["landmark_init"])
        view_metrics.append(view_metric)
        lms.append(lm)
    check_distinct(rows, k, run.client)
    resolved, lms = _compute(run.client, view_metrics, lms)
    constant = {p: r for p, r in enumerate(resolved) if isinstance(r, str)}
    if constant:
        raise ConstantViews(constant)
    return {"metrics": {"metrics": [r[0] for r in resolved], "zero_rows": [list(r[1:3]) for r in resolved],
                        "scales": [r[3] for r in resolved]},
            **{f"L{p}": lms[p] for p in range(rows.n_views)}}


def _anchor_graphs(run: _Run, metrics: list[str], scales: list[np.ndarray | None]) -> dict[str, Any]:
    """Stage 2: each view's Z, row chunk by row chunk (its landmarks a task input the workers share)."""
    blocks = []
    for p in range(run.rows.n_views):
        L = run.result("landmarks", f"L{p}")
        blocks.append([dask.delayed(_anchor_block, pure=True)(block, L,
                                                              run.params["anchor_graph"]["n_nearest_landmarks"],
                                                              metrics[p], scales[p]) for block in run.rows.blocks[p]])
    return {f"Z{p}": sp.vstack(b).tocsr() for p, b in enumerate(_compute(run.client, *blocks))}


def _average(Zc: list[list[Any]]) -> list[Any]:
    """Row blocks of the average graph of the views' anchor matrices (their columns side by side)."""
    return [dask.delayed(lambda *zs: sp.hstack(zs).tocsr() / len(zs), pure=True)(*zs) for zs in zip(*Zc)]


def _embed(run: _Run, jobs: list[list[Any]], widths: list[int], job_seeds: list[int]) -> list[tuple]:
    """Anchor embeddings and eigenvalues of the graphs given by row blocks (one list per graph), sign-fixed like
    spectral.anchor_embedding's, with the run's method."""
    ep = run.params["embeddings"]
    if ep["method"] == "gram":
        return list(_compute(run.client, *[_gram_embedding(z, ep["n_components"], seed)
                                           for z, seed in zip(jobs, job_seeds)]))
    return _tsqr_embeddings([(z, run.z_chunks, w) for z, w in zip(jobs, widths)], ep["n_components"],
                            run.client)


def _embeddings(run: _Run, Zs: dict[str, Any], usable: np.ndarray) -> dict[str, Any]:
    """Stage 3: H_p (v x 1 x n x width: H_p^(o) = H_p for every order o of an anchor graph) and the eigenvalues of
    each order, the related views among the ``usable`` ones (fusion.related_views) and F, the embedding of their
    average graph."""
    v, ep, seeds = run.rows.n_views, run.params["embeddings"], run.seeds
    Zc = [run.z_blocks(p, run.z_chunks) for p in range(v)]
    widths = [Zs[f"Z{p}"].shape[1] for p in range(v)]
    *pairs, (F, _) = _embed(run, Zc + [_average([Zc[p] for p in usable])], widths + [sum(widths[p] for p in usable)],
                            seeds[:v] + [seeds[-2]])
    H, lam = anchor_order_embeddings(np.stack([h for h, _ in pairs]), np.stack([vals for _, vals in pairs]),
                                     ep["order"])  # every order a view of one H per view
    related, shares = related_among(H, usable, drop=ep["drop_unrelated_views"])
    used = np.flatnonzero(related)
    if len(used) < len(usable):  # F of the related views only
        F = _embed(run, [_average([Zc[p] for p in used])], [sum(widths[p] for p in used)], [seeds[-2]])[0][0]
    # H of the first order, the one every order shares, is what the stage stores (run_chain broadcasts it)
    return {"H": H[:, :1], "eigenvalues": lam, "F": F, "related": related, "shares": shares}


def _fusion(run: _Run, emb: dict[str, Any], k: int) -> dict[str, Any]:
    """Stage 4: late fusion (Algorithm 1) of the related views, or the "select" search (selection.fuse): H*, its
    target T (for the labels), mu, the rotations W (for predict) and the settings used."""
    fp, used = run.params["fusion"], np.flatnonzero(emb["related"])
    fused, settings = fuse(emb["H"], emb["eigenvalues"], emb["F"], used, k, fp["lambda1"], fp["lambda2"],
                           order=fp["order"], eigenvalue_scaling=fp["eigenvalue_scaling"], tol=fp["tol"],
                           max_iter=fp["max_iter"], random_state=run.seeds[-2])
    return {"embedding": fused.embedding, "target": fused.target, "rotations": fused.rotations,
            "view_weights": full_weights(fused.view_weights, used, run.rows.n_views),
            "objective": np.asarray(fused.objective, dtype=float), "converged": np.asarray(fused.converged),
            "settings": settings}


def _labels(run: _Run, fus: dict[str, Any], Zs: dict[str, Any], related: np.ndarray, k: int) -> dict[str, Any]:
    """Stage 5: k-means of the read-out, refined on the related views' anchor graphs (on the client, which holds
    every Z: O(n r k) per move) when the run's ``refine`` is set, with the refinement's basis (assign.refine_labels;
    empty when none)."""
    lp = run.params["labels"]
    labels, inertia = assign_labels(readout(fus["embedding"], fus["target"], k), k, n_init=lp["n_init"],
                                    random_state=run.seeds[-1])
    trace, basis = np.empty(0), None
    if lp["refine"]:
        labels, steps, basis = refine_labels([Zs[f"Z{p}"] for p in np.flatnonzero(related)], labels, k, anchor=True,
                                             tol=lp["tol"])
        trace = np.array(steps)
    return {"labels": labels, "refinement_objective": trace, "inertia": np.asarray(inertia),
            "refinement_basis": np.empty(0, np.int64) if basis is None else basis}


def check_anchor_options(landmark_init: str, landmark_sample: int | None, method: str) -> None:
    """The anchor chain's own options are valid (checked by every fit, whichever its solver)."""
    if landmark_init not in LANDMARK_INITS:
        raise ValueError(f"landmark_init must be one of {LANDMARK_INITS}, got {landmark_init!r}")
    if method not in METHODS:
        raise ValueError(f"anchor_method must be one of {METHODS}, got {method!r}")
    if landmark_sample is not None:
        check_int("landmark_sample", landmark_sample)


def stage_parameters(n_clusters: int, *, width: int, n_landmarks: int, n_nearest_landmarks: int, order: int,
                     metric: list[str], lambda1: float | str, lambda2: float | str, tol: float, max_iter: int,
                     eigenvalue_scaling: bool, drop_unrelated_views: bool, n_init: int, refine: bool,
                     random_state: int | None, landmark_init: str, landmark_sample: int | None,
                     method: str, views: list[int] | None = None) -> dict[str, dict[str, Any]]:
    """Each stage's parameters, those of the stages before it included (a stored stage is reused only when they
    match); ``views``: the positions of the views the chain runs on, when not all of the input's."""
    check_anchor_options(landmark_init, landmark_sample, method)
    if landmark_sample is None:
        landmark_sample = max(LANDMARK_SAMPLE_MIN, round(LANDMARK_SAMPLE_PER_LANDMARK * n_landmarks))
    params = {"landmarks": {"n_landmarks": n_landmarks, "metric": metric, "random_state": random_state,
                            # what "auto" resolves to: a store's stage of an earlier rule is not reused
                            **({"line_view_columns": LINE_VIEW_COLUMNS} if "auto" in metric else {}),
                            "landmark_init": landmark_init, "landmark_sample": landmark_sample,
                            **({} if views is None else {"views": views}),
                            **({"unseeded_fit": uuid.uuid4().hex} if random_state is None else {})}}  # fresh: no reuse
    params["anchor_graph"] = {**params["landmarks"], "n_nearest_landmarks": n_nearest_landmarks}
    params["embeddings"] = {**params["anchor_graph"], "n_clusters": n_clusters, "n_components": width,
                            "order": order, "method": method, "drop_unrelated_views": drop_unrelated_views}
    params["fusion"] = {**params["embeddings"], "lambda1": lambda1, "lambda2": lambda2, "tol": tol,
                        "max_iter": max_iter, "eigenvalue_scaling": eigenvalue_scaling}
    params["labels"] = {**params["fusion"], "n_init": n_init, "refine": refine}
    return params


@dataclass
class ChainResult:
    """Every stage's output of one run of the anchor chain (run_chain)."""

    landmarks: list[Any]  # per view, m x d in the metric's space
    metrics: list[str]
    scales: list[np.ndarray | None]  # per view, its column scales for standardized
    graphs: list[sp.csr_matrix]  # Z per view
    usable: np.ndarray  # views whose graph holds together (the others are left out, with a warning)
    embeddings: dict[str, Any]  # stage 3: H, eigenvalues, F, related, shares
    fusion: dict[str, Any]  # stage 4
    labels: dict[str, Any]  # stage 5
    timings: dict[str, float]
    computed: list[str]


def run_chain(rows: RowChunks, results: MultiViewStore | InMemory, n_clusters: int, params: dict[str, dict],
              client: Any = None, progress: Callable[[str], None] | None = None) -> ChainResult:
    """The anchor chain on the views ``rows``, stage by stage, each stage read back from ``results`` when it holds
    it with the same parameters (``stage_parameters``), else computed and written there."""
    v, k = rows.n_views, n_clusters
    width = params["embeddings"]["n_components"]
    run = _Run(rows, results, client, params, fit_seeds(params["landmarks"]["random_state"], v),
               progress or (lambda line: None))
    lm = run.stage("landmarks", ["metrics"] + [f"L{p}" for p in range(v)], lambda: _landmarks(run, k))
    metrics = lm["metrics"]["metrics"]
    for p, (n_zero, examples) in enumerate(lm["metrics"].get("zero_rows", [(0, [])] * v)):  # also when resumed
        warn_zero_rows(n_zero, examples, metrics[p], view_label(p, rows.view_names))
    scales = [None if s is None else np.asarray(s) for s in lm["metrics"].get("scales", [None] * v)]
    Zs = run.stage("anchor_graph", [f"Z{p}" for p in range(v)], lambda: _anchor_graphs(run, metrics, scales))
    usable = usable_graphs([Zs[f"Z{p}"] for p in range(v)], [view_label(p, rows.view_names) for p in range(v)], k,
                           width, anchor=True)
    emb = run.stage("embeddings", ["H", "eigenvalues", "F", "related", "shares"],
                    lambda: _embeddings(run, Zs, usable))
    H = np.ascontiguousarray(emb["H"][:, :1])  # (stages written before stored every order: the same H)
    emb = {**emb, "H": np.broadcast_to(H, (v, params["embeddings"]["order"], *H.shape[2:]))}
    related = np.asarray(emb["related"], bool)
    warn_unrelated(related[usable], emb["shares"], rows.n_samples, width,  # also when the stage is resumed
                   [view_label(p, rows.view_names) for p in usable], labelled=True)
    fus = run.stage("fusion", ["embedding", "target", "rotations", "view_weights", "objective", "converged",
                               "settings"], lambda: _fusion(run, emb, k))
    lab = run.stage("labels", ["labels", "refinement_objective", "inertia", "refinement_basis"],
                    lambda: _labels(run, fus, Zs, related, k))
    return ChainResult([lm[f"L{p}"] for p in range(v)], metrics, scales, [Zs[f"Z{p}"] for p in range(v)], usable,
                       emb, fus, lab, run.timings, run.computed)


def fit_store(store: MultiViewStore | str | os.PathLike, n_clusters: int, *, client: Any = None,
              method: str = "gram", progress: Callable[[str], None] | None = None,
              storage_options: dict | None = None, **params: Any) -> OutOfCoreResult:
    """``ONMSC(n_clusters, embedding="anchor", cache=store, **params).fit(store)`` as an OutOfCoreResult: the anchor
    chain on the views of `store` (a MultiViewStore, or its path or fsspec URL with `storage_options`), its stages
    written to and resumed from the store. ``method`` is the estimator's ``anchor_method``; ``client`` a
    ``distributed.Client`` (None: the current default scheduler)."""
    from .api import ONMSC

    if not isinstance(store, (MultiViewStore, str, os.PathLike)):
        raise TypeError(f"fit_store reads a MultiViewStore or the path of one, got {type(store).__name__}; write "
                        "views with MultiViewStore.create(path, views), or fit them in memory with ONMSC")
    if not isinstance(store, MultiViewStore):
        store = MultiViewStore(store, storage_options)
    elif storage_options is not None:
        raise ValueError("storage_options go with a path or URL; a MultiViewStore has its own")
    # the client as the current one, not in dask.config, which a nanny pickles for the workers it restarts
    with client.as_current() if client is not None else nullcontext():
        model = ONMSC(n_clusters, embedding="anchor", anchor_method=method, cache=store, keep_intermediate=True,
                      **params).fit(store, progress=progress)
    return OutOfCoreResult.of(model)
