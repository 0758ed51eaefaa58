"""Input checks with errors that name the view and the problem (scikit-learn ``check_array`` style)."""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp


def _name(p: int, names: Sequence[str] | None) -> str:
    return f"view {p}" + (f" ({names[p]!r})" if names is not None else "")


def check_view(X, p: int = 0, names: Sequence[str] | None = None):
    """Return view ``X`` as float64 C-array or CSR, never aliasing a caller's writable buffer."""
    label = _name(p, names)
    if hasattr(X, "compute") and not sp.issparse(X):
        X = X.compute()
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    else:
        X = np.array(X, dtype=np.float64, copy=True, order="C")
        if X.ndim == 1:
            raise ValueError(f"{label}: expected a 2-D array (samples x features), got 1-D; use X.reshape(-1, 1)")
        if X.ndim != 2:
            raise ValueError(f"{label}: expected a 2-D array (samples x features), got {X.ndim}-D")
    n, d = X.shape
    if n == 0:
        raise ValueError(f"{label}: is empty (0 samples)")
    if d == 0:
        raise ValueError(f"{label}: has zero features (shape {X.shape})")
    check_finite(X, label)
    col_min, col_max = column_range(X)
    check_not_constant(col_max - col_min, n, label)
    return X


def check_finite(X, label: str, first_row: int = 0) -> None:
    """Raise naming `label` and a few rows (numbered from `first_row`) if X holds NaN or infinite values."""
    values = X.data if sp.issparse(X) else X
    bad = ~np.isfinite(values)
    if bad.any():
        kind = "NaN" if np.isnan(values).any() else "infinite"
        rows = np.unique(np.nonzero(bad)[0])[:5] if not sp.issparse(X) else np.unique(X.tocoo().row[bad.ravel()])[:5]
        raise ValueError(f"{label}: contains {kind} values (e.g. in rows {(rows + first_row).tolist()}); impute or "
                         "drop them first")


def column_range(X) -> tuple[np.ndarray, np.ndarray]:
    """Per-column minimum and maximum of a dense or sparse matrix (they combine over row chunks)."""
    lo, hi = X.min(axis=0), X.max(axis=0)
    return tuple(np.asarray(a.toarray() if sp.issparse(a) else a, dtype=np.float64).ravel() for a in (lo, hi))


def check_not_constant(spread: np.ndarray, n_samples: int, label: str) -> None:
    """Raise if no column varies (spread = column max - min) over more than one sample."""
    if n_samples > 1 and not (spread > 0).any():
        raise ValueError(f"{label}: is constant (every sample has the same features), so it carries no cluster "
                         "information")


def zero_rows(X) -> np.ndarray:
    """Indices of all-zero rows (e.g. documents without words)."""
    norms = np.asarray(abs(X).sum(axis=1)).ravel()
    return np.flatnonzero(norms == 0)


def check_views(views, view_names: Sequence[str] | None = None) -> list:
    """Validate a list of views: each 2-D, finite, non-constant, all with the same number of rows."""
    if sp.issparse(views) or isinstance(views, np.ndarray) or hasattr(views, "compute"):
        raise TypeError("views must be a list of arrays (one per view), not a single array; wrap it as [X]")
    views = list(views)
    if not views:
        raise ValueError("no views given: pass a list with at least one n x d array")
    if view_names is not None and len(view_names) != len(views):
        raise ValueError(f"{len(view_names)} view names for {len(views)} views")
    checked = [check_view(X, p, view_names) for p, X in enumerate(views)]
    n = checked[0].shape[0]
    for p, X in enumerate(checked[1:], start=1):
        if X.shape[0] != n:
            raise ValueError(f"{_name(p, view_names)}: has {X.shape[0]} rows, expected {n} like view 0 "
                             "(every view must describe the same samples; check for transposed views)")
    for p, X in enumerate(checked):
        zr = zero_rows(X)
        if zr.size:
            warnings.warn(f"{_name(p, view_names)}: {zr.size} all-zero rows (e.g. {zr[:5].tolist()}); they are "
                          "linked by distance only, since they have no direction", stacklevel=3)
    return checked


def check_n_clusters(n_clusters: int, n_samples: int) -> int:
    if not isinstance(n_clusters, (int, np.integer)) or isinstance(n_clusters, bool):
        raise TypeError(f"n_clusters must be an integer, got {n_clusters!r}")
    if not 2 <= n_clusters < n_samples:
        raise ValueError(f"n_clusters={n_clusters} must satisfy 2 <= n_clusters < n_samples={n_samples}")
    return int(n_clusters)


def check_n_neighbors(n_neighbors: int, n_samples: int) -> int:
    if not 1 <= n_neighbors < n_samples:
        raise ValueError(f"n_neighbors={n_neighbors} must satisfy 1 <= n_neighbors < n_samples={n_samples}")
    return int(n_neighbors)
