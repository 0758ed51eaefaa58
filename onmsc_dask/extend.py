"""New samples (``ONMSC.predict`` / ``transform``): each view's new row -> its r nearest landmarks -> its row z of
an anchor matrix Z -> its share z P_p of the fusion target T (Eq. 12) -> H* = polar factor -> the read-out's label.

P_p (m x width) folds the view's embedding map M_p^(o) (H_p^(o) = Z_p M_p^(o)), its eigenvalue scaling, rotation
W_p^(o), weight mu_p and its block of F's map, so T(x) = sum_p z_p(x) P_p. For an anchor graph M_p is exact: its
eigenvectors satisfy A H = H diag(s), A = Z Lambda^-1 Z^T, so H = Z (Lambda^-1 Z^T H diag(s)^-1) (``anchor_map``;
the anchor-graph out-of-sample extension). A kNN graph has no landmarks: its H_p^(o) and F are regressed on an anchor
matrix of landmarks chosen for the purpose (``regression_map``), an approximation (docs/predict.md).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.sparse as sp
from .assign import normalize_rows
from .cluster import again_on_lost_data, one_blas_thread, scattered
from .rows import read_rows
from .fusion import polar_transform
from .graph import anchor_affinity, column_scale, inv_sqrt, select_landmarks
from .spectral import anchor_column_sums, anchor_factor_pieces, anchor_half
from .validation import (SCALE_EXPONENT, check_column_names, check_finite, check_int, check_known_shape,
                         check_landmarks, check_same_rows, check_view_names, column_names, default_n_landmarks,
                         numeric_objects, rows_where, user_warning, view_label, view_list)

__all__ = ["ViewExtension", "Extension", "anchor_map", "regression_map", "landmark_graph", "build_extension", "apply"]

#: ridge of regression_map, relative to the mean diagonal of Z^T Z
RIDGE = 1e-6


def extension_landmarks(n_landmarks: int | None, n_nearest: int, n_clusters: int, n_samples: int,
                        width: int) -> int | None:
    """m of a kNN fit's extension landmarks (validation.check_landmarks, as for an anchor graph: a bad n_landmarks
    or n_nearest_landmarks is an error), or None when the samples or the given n_landmarks are too few for more
    landmarks than the embedding width."""
    m = default_n_landmarks(n_samples, width) if n_landmarks is None else check_int("n_landmarks", n_landmarks)
    if min(m, n_samples) <= width:
        return None
    return check_landmarks(n_landmarks, n_nearest, n_clusters, n_samples, width)


def landmark_graph(X, n_landmarks: int, n_nearest: int, metric: str,
                   seed: int | None) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray | None]:
    """Landmarks (graph.select_landmarks) and the anchor matrix Z of a view, for a kNN fit's extension, and the
    view's column_scale new rows are standardized by (None for other metrics)."""
    scale = column_scale(X) if metric == "standardized" else None
    landmarks = select_landmarks(X, n_landmarks, seed, metric=metric, scale=scale)
    return landmarks, anchor_affinity(X, landmarks, n_nearest, metric, scale), scale


def anchor_map(Z: sp.spmatrix, H: np.ndarray) -> np.ndarray:
    """M with H = Z M for eigenvectors H of the anchor graph A = Z Lambda^-1 Z^T (Lambda = Z^T 1): M = Lambda^-1 Z^T
    H diag(s)^-1, s = diag(H^T A H) their eigenvalues."""
    lam = anchor_column_sums(Z)
    ZtH = np.asarray(Z.T @ H)
    inverse = inv_sqrt(lam) ** 2  # Lambda^-1, 0 for a landmark no row links to
    s = np.einsum("mk,mk,m->k", ZtH, ZtH, inverse)
    return inverse[:, None] * ZtH / np.maximum(s, np.finfo(float).tiny)


def regression_map(Z: sp.spmatrix, H: np.ndarray) -> np.ndarray:
    """M minimising ||Z M - H||^2 + ridge ||M||^2 (ridge = RIDGE x the mean diagonal of Z^T Z)."""
    G = np.asarray((Z.T @ Z).todense())
    ridge = RIDGE * max(np.trace(G) / len(G), np.finfo(float).tiny)
    return np.linalg.solve(G + ridge * np.eye(len(G)), np.asarray(Z.T @ H))


def refinement_map(Z: sp.spmatrix, labels: np.ndarray, k: int) -> np.ndarray:
    """C (m x k) with z(x) C = the distances of a sample with anchor row z(x) to each cluster in one step of
    assign.refine_labels on this anchor graph: d(x) within_c / vol_c^2 - 2 links_c(x) / vol_c, where with b = z
    Lambda^-1/2 (B = Z Lambda^-1/2, A = B B^T) links_c(x) = b (B^T Y)_c and the degree d(x) = b B^T 1."""
    pieces = anchor_factor_pieces(anchor_column_sums(Z))
    B, scale, u = anchor_half(Z, pieces), pieces["scale"], pieces["u"]  # u = B^T 1
    K = np.asarray(B.T @ np.eye(k)[labels])  # B^T Y, m x k
    within, volume = np.einsum("mc,mc->c", K, K), u @ K  # assoc(c, c) = ||B^T y_c||^2, vol(c) = 1^T B B^T y_c
    volume = np.where(volume > 0, volume, np.inf)
    return scale[:, None] * (np.outer(u, within / volume**2) - 2 * K / volume)


@dataclass
class ViewExtension:
    """What a new row of one (fused) view needs: its landmarks and the maps of its anchor row."""

    landmarks: np.ndarray  # m x d, in the metric's space (graph.landmark_centres)
    metric: str
    n_nearest: int
    target: np.ndarray  # P_p, m x width: z_p(x) P_p is the view's share of T(x)
    refinement: np.ndarray | None  # m x k: the view's share of the label refinement's distances (anchor graphs)
    scale: np.ndarray | None = None  # the fitted view's column_scale (standardized metric), applied to new rows

    def anchor_rows(self, X) -> sp.csr_matrix:
        return anchor_affinity(X, self.landmarks, self.n_nearest, self.metric, self.scale)


@dataclass
class Extension:
    """ONMSC's fitted model for new samples: per view its ViewExtension (None for a view left out of the fusion)."""

    views: list[ViewExtension | None]
    to_embedding: np.ndarray  # R, width x width: H*(x) = T(x) R (polar factor of T)
    readout_target: bool  # labels from T's rows (width > k) or from H*'s (assign.readout)
    centres: np.ndarray  # k x width, mean row-normalized read-out of each cluster's fitted samples

    def target(self, views: list) -> tuple[np.ndarray, np.ndarray | None]:
        """T(x) of rows of every view, and the refinement distances (None without refinement maps): the views'
        anchor rows side by side times their maps [P_p | C_p] stacked, one product."""
        used = [(X, ext) for X, ext in zip(views, self.views) if ext is not None]
        Z = sp.hstack([ext.anchor_rows(X) for X, ext in used], format="csr")
        maps = [ext.target if ext.refinement is None else np.hstack([ext.target, ext.refinement]) for _, ext in used]
        out = np.asarray(Z @ np.vstack(maps))
        width = self.to_embedding.shape[0]
        return out[:, :width], out[:, width:] if out.shape[1] > width else None

    def transform(self, views: list) -> np.ndarray:
        """H*(x), n_new x width."""
        return self.target(views)[0] @ self.to_embedding

    def predict(self, views: list) -> np.ndarray:
        """Labels: the label refinement's assignment step when fitted with it on anchor graphs, else the nearest
        centre of the row-normalized read-out."""
        T, D = self.target(views)
        if D is not None:
            return np.asarray(D).argmin(axis=1).astype(np.int64)
        R = normalize_rows(T if self.readout_target else T @ self.to_embedding)
        return ((R[:, None, :] - self.centres[None]) ** 2).sum(axis=2).argmin(axis=1).astype(np.int64)


def build_extension(graphs: list[tuple[np.ndarray, sp.csr_matrix, str, int, np.ndarray | None]], H: np.ndarray,
                    scales: np.ndarray, F: np.ndarray, fused, used: np.ndarray, lambda1: float, labels: np.ndarray,
                    k: int, anchor: bool, refined: np.ndarray | None) -> Extension:
    """The Extension of a late fusion: ``graphs`` per view (landmarks, Z, metric, r, column scale or None), H
    (v, O, n, width) and the per-order scales its eigenvectors were fused with (v, O, width: eigenvalues^1/2, or
    ones), F, the fusion.LateFusionResult ``fused`` of the views ``used`` (indices), lambda1 and the final labels.
    ``anchor``: the Z are the view graphs (exact maps), else regressions; ``refined``: the partition the label
    refinement's last step assigned to (assign.refine_labels' basis), whose step predict takes, so that the fitted
    rows get their labels; None: the nearest centre."""
    fit_map = anchor_map if anchor else regression_map
    F_map = fit_map(_average_anchor_matrix([graphs[p][1] for p in used]), F)
    offsets = np.cumsum([0] + [graphs[p][1].shape[1] for p in used])
    views: list[ViewExtension | None] = [None] * len(graphs)
    for i, p in enumerate(used):
        landmarks, Z, metric, r, scale = graphs[p]
        P = lambda1 * F_map[offsets[i]:offsets[i + 1]] / len(used)  # F(x) = z_avg(x) F_map, z_avg = [z_p] / v
        M = fit_map(Z, H[p, 0])
        for o in range(fused.rotations.shape[1]):
            if o and not anchor:  # an anchor graph's H^(o) is H^(1)
                M = fit_map(Z, H[p, o])
            P = P + fused.view_weights[i] * (M * scales[p, o]) @ fused.rotations[i, o]  # Eq. 12's T, for z(x)
        views[p] = ViewExtension(landmarks, metric, r, P, None if refined is None else refinement_map(Z, refined, k),
                                 scale)
    readout_target, to_embedding = fused.embedding.shape[1] > k, polar_transform(fused.target)
    R = normalize_rows(fused.target if readout_target else fused.embedding)
    centres = np.stack([R[labels == c].mean(axis=0) if np.any(labels == c) else np.full(R.shape[1], np.inf)
                        for c in range(k)])
    return Extension(views, to_embedding, readout_target, centres)


def _average_anchor_matrix(Zs: list[sp.csr_matrix]) -> sp.csr_matrix:
    """[Z_1 ... Z_v] / v, the anchor matrix of the views' average graph, scaled in place (one n x v m copy)."""
    Z = sp.hstack(Zs, format="csr", dtype=np.float64)
    Z.data *= 1.0 / len(Zs)  # as Z / v computes it
    return Z


# ------------------------------------------------------------------ inputs

#: most rows of numpy / sparse input handled at once (bounds the n x m distances of the landmark search)
BLOCK_ROWS = 8192


def _threads() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _row_blocks(n: int, threads: int) -> list[tuple[int, int]]:
    """(start, stop) of equal row blocks of at most BLOCK_ROWS rows, as many as a multiple of ``threads``."""
    count = -(-max(n, 1) // BLOCK_ROWS)
    count = min(max(n, 1), -(-count // threads) * threads)
    bounds = np.linspace(0, n, count + 1).astype(int)
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def _check_rows(views: list, n_features: list[int], names: list[str] | None) -> list:
    """Each view 2-D with its fitted number of features, finite, all with the same number of rows."""
    if len(views) != len(n_features):
        raise ValueError(f"got {len(views)} views, the model was fitted on {len(n_features)}")
    for p, (X, d) in enumerate(zip(views, n_features)):
        if X.dtype.kind == "O" and X.ndim == 2:  # numbers held as objects, as fit takes them
            views[p] = X = numeric_objects(X, view_label(p, names))
        check_known_shape(X, view_label(p, names))
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"{view_label(p, names)}: has shape {X.shape}, expected (n, {d}) as in the fit")
        if X.dtype.kind not in "biuf":
            raise ValueError(f"{view_label(p, names)}: has dtype {X.dtype}, expected a numeric matrix")
    check_same_rows([X.shape[0] for X in views], names)
    return views


def _block(ext: Extension, method: str, *blocks, names: list[str] | None = None, first_row: int = 0,
           block_info: dict | None = None) -> np.ndarray:
    """``method`` ("predict" or "transform") of row blocks of every view, after checking they are finite (errors
    name the views by ``names`` and the rows in the whole input: the block starts at ``first_row``, or, as a dask
    block, where ``block_info`` places it)."""
    first_row = block_info[None]["array-location"][0][0] if block_info is not None else first_row
    _check_values(ext, blocks, names, first_row)
    return getattr(ext, method)([None if X is None else read_rows(X) for X in blocks])  # float, as the fit's rows


def _check_values(ext: Extension, blocks, names: list[str] | None, first_row: int) -> None:
    """New rows (blocks starting at ``first_row`` of the input; None for a view not read) are finite, below the
    magnitude where squared distances overflow (validation.SCALE_EXPONENT), and non-negative in a view fitted with
    the ``counts`` metric (log(1 + count) of a negative value is NaN or -inf: the rows' labels would be silently
    arbitrary)."""
    for p, X in enumerate(blocks):
        if X is None:
            continue
        label = view_label(p, names)
        check_finite(X, label, first_row)
        values = X.data if sp.issparse(X) else np.asarray(X)
        top = float(np.abs(values).max()) if values.size else 0.0
        if top > 2.0**SCALE_EXPONENT:
            raise ValueError(f"{label}: new rows reach {top:.3g} (e.g. in rows "
                             f"{(rows_where(X, np.abs(values) > 2.0**SCALE_EXPONENT)[:5] + first_row).tolist()}), "
                             f"beyond 2**{SCALE_EXPONENT}, where squared distances overflow; a fit refuses such a view")
        if ext.views[p] is not None and ext.views[p].metric == "counts":
            negative = rows_where(X, values < 0)
            if negative.size:
                raise ValueError(f"{label}: has negative values (e.g. in rows {(negative[:5] + first_row).tolist()}), "
                                 "but the fitted view's metric 'counts' (cosine on log(1 + count)) needs counts of "
                                 "0 or more")


def _store_rows(path, content_id: str | None, ext: Extension, method: str, start: int, stop: int) -> np.ndarray:
    """``method`` of rows start:stop of a store's views (one task: read and map a row chunk; the store opened once
    per process for its content `content_id`)."""
    from .store import opened_once

    store = opened_once(path, content_id)
    blocks = [store.read_rows(p, start, stop) if ext.views[p] is not None else None for p in range(store.n_views)]
    _check_values(ext, blocks, store.view_names, start)
    return getattr(ext, method)(blocks)


def _map_store(ext: Extension, store, method: str) -> np.ndarray:
    """``method`` of a MultiViewStore's rows, one task per stored row chunk, with ``ext`` sent to the workers."""
    import dask
    import dask.array as da

    shared, width = scattered(ext), ext.to_embedding.shape[0]
    rows = dask.delayed(_store_rows, pure=True)
    return da.concatenate([da.from_delayed(rows(store.location, store.content_id, shared, method, s, e),
                                           (e - s,) if method == "predict" else (e - s, width),
                                           np.int64 if method == "predict" else np.float64)
                           for s, e in store.row_chunks(0)]).compute()


def apply(ext: Extension, views, method: str, n_features: list[int], names: list[str] | None = None,
          storage_options: dict | None = None, feature_names: list | None = None):
    """``method`` of the new samples ``views``: numpy or scipy.sparse views (numpy out; row blocks on one thread per
    core), dask arrays (dask out, computed chunk by chunk, row-chunked like the first view; under a distributed
    client, the model is a key of its graph, sent with it), or a MultiViewStore,
    its path or URL (numpy out, each stored row chunk read and mapped by one task; run again after such a loss)."""
    import dask
    import dask.array as da

    from .location import Location
    from .store import MultiViewStore, unchanged_store

    width = ext.to_embedding.shape[0]
    if isinstance(views, (str, os.PathLike, Location)):
        views = MultiViewStore(views, storage_options)
    if isinstance(views, MultiViewStore):
        if names is not None and sorted(views.view_names) == sorted(names) and list(views.view_names) != list(names):
            raise ValueError(f"store {views.path} holds the fitted views in another order ({list(views.view_names)}, "
                             f"fitted as {list(names)}); views are matched by position: write them in the fit's order")
        if names is not None and list(views.view_names) not in (list(names), check_view_names(None, len(names))):
            user_warning(f"store {views.path} names its views {list(views.view_names)}, the fit {list(names)}; they are "
                         "taken by position")
        _check_rows([_Shape(views.view_shape(p)) for p in range(views.n_views)], n_features, views.view_names)
        check_column_names(views.column_names, feature_names, views.view_names)  # of the tables it was written from
        with unchanged_store(views), one_blas_thread():
            return again_on_lost_data(partial(_map_store, ext, views, method), method,
                                      f"call {method} again once the cluster is steady")
    views = view_list(views, names)
    check_column_names([column_names(X, distinct=False) for X in views], feature_names, names)  # of pandas tables
    views = _check_rows([X if isinstance(X, da.Array) else sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)
                         for X in views], n_features, names)
    if any(isinstance(X, da.Array) for X in views):
        views = [X if isinstance(X, da.Array) else da.from_array(X) for X in views]
        rows = views[0].chunks[0]
        views = [X.rechunk((rows, -1)) for X in views]
        kwargs = dict(drop_axis=1, dtype=np.int64) if method == "predict" else dict(chunks=(rows, (width,)),
                                                                                     dtype=np.float64)
        # the model as a key of the graph, not scattered: a worker lost with it later is run again, not fatal
        model = dask.delayed(ext, pure=True, traverse=False)
        return da.map_blocks(partial(_block, names=names), model, method, *views,
                             meta=np.empty((0,) * (1 + (method != "predict"))), **kwargs)
    n, threads = views[0].shape[0], _threads()
    if not n:
        return np.empty(0, np.int64) if method == "predict" else np.empty((0, width))
    # one thread per core, each with a one-thread BLAS: the landmark search's GEMM and the rest of each block (argmin,
    # distances, sparse products) run in parallel, with less CPU than one BLAS spread over the cores
    with one_blas_thread(), ThreadPoolExecutor(threads) as pool:
        return np.concatenate(list(pool.map(lambda b: _block(ext, method, *(X[b[0]:b[1]] for X in views), names=names,
                                                              first_row=b[0]),
                                            _row_blocks(n, threads))))


@dataclass
class _Shape:
    """A stand-in with a store view's shape, for _check_rows."""

    shape: tuple[int, int]
    ndim: int = 2
    dtype: np.dtype = np.dtype(np.float64)
