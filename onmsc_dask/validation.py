"""Input checks with errors that name the view and the problem (scikit-learn ``check_array`` style)."""
from __future__ import annotations

import math
import os
import re
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp


#: rows compared first by check_distinct_samples (all rows only when these hold fewer than k distinct samples)
DISTINCT_CHECK_ROWS = 2000
#: the per-view metrics (graph.metric_for chooses one for "auto")
METRICS = ("euclidean", "standardized", "cosine", "counts")
#: the metrics that compare directions: rows unit-normalized (graph._prepare), so all-zero rows have none
UNIT_ROW_METRICS = ("cosine", "counts")


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_warning(message: str) -> None:
    """A UserWarning attributed to the first caller outside this package, whatever the call depth."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


class KeptName(str):
    """The name of a view kept when others are left out (kept_names), with its input position; the name of an
    unnamed view is ``view P``."""

    position: int
    named: bool

    def __new__(cls, name: str | None, position: int) -> KeptName:
        self = super().__new__(cls, f"view {position}" if name is None else name)
        self.position, self.named = position, name is not None
        return self

    def __reduce__(self) -> tuple:  # to the workers as it is
        return KeptName, (str(self) if self.named else None, self.position)


def view_label(p: int, names: Sequence[str] | None = None) -> str:
    """How errors name view p: ``view 1`` or ``view 1 ('text')``, by its input position when names are
    kept_names."""
    name = None if names is None else names[p]
    if isinstance(name, KeptName):
        return f"view {name.position}" + (f" ({str(name)!r})" if name.named else "")
    return f"view {p}" + (f" ({name!r})" if name is not None else "")


def kept_names(names: Sequence[str] | None, kept: Sequence[int], n_views: int) -> list[str] | None:
    """The names of the views ``kept`` of ``n_views``: when some are left out, KeptName, so messages about the rest
    name each view by its input position, not its position among those kept."""
    if len(kept) == n_views:
        return None if names is None else list(names)
    return [names[p] if names is not None and isinstance(names[p], KeptName)
            else KeptName(None if names is None else names[p], p) for p in kept]


def check_known_shape(X, label: str) -> None:
    """A dask array's shape must be known (not NaN, as after boolean indexing)."""
    if any(math.isnan(size) for size in X.shape):
        raise ValueError(f"{label}: has unknown chunk sizes; call compute_chunk_sizes() first")


def check_same_rows(n_rows: Sequence[int], names: Sequence[str] | None = None) -> int:
    """The number of samples, checked to be every view's number of rows; the error names a view whose count differs
    from most views' (view 0's when no count is the most common)."""
    counts = [list(n_rows).count(rows) for rows in n_rows]
    like = int(np.argmax(counts)) if max(counts) > counts[0] else 0
    for p, rows in enumerate(n_rows):
        if rows != n_rows[like]:
            raise ValueError(f"{view_label(p, names)}: has {rows} rows, expected {n_rows[like]} like "
                             f"{view_label(like, names)} (every view must describe the same samples; check for "
                             "transposed views)")
    return int(n_rows[0])


def clear_fitted(estimator) -> None:
    """Remove an estimator's fitted attributes (those ending in ``_``)."""
    for name in [a for a in vars(estimator) if a.endswith("_") and not a.startswith("__")]:
        delattr(estimator, name)


def check_view(X, p: int = 0, names: Sequence[str] | None = None, float32: bool = False,
               constant: bool = False):
    """Return view ``X`` as float64 C-array or CSR (float32 kept with ``float32``), never aliasing a caller's
    writable buffer; a constant view is an error (ConstantViewError) unless ``constant``."""
    label = view_label(p, names)
    if hasattr(X, "compute") and not sp.issparse(X):
        X = X.compute()
    if not sp.issparse(X) and not hasattr(X, "dtype"):
        try:  # a list of rows: numpy's errors would not name the view
            X = np.asarray(X)
        except ValueError as exc:
            raise ValueError(f"{label}: is not a numeric n x d array ({exc})") from None
    if np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"{label}: has complex values; pass real features (e.g. np.abs(X) or [X.real, X.imag])")
    if X.dtype.kind in "SUV":  # as predict and stores take them: numbers held as text are not converted here either
        raise ValueError(f"{label}: has dtype {X.dtype}, expected a numeric matrix{_text_hint(X)}")
    if np.ma.isMaskedArray(X) and np.ma.count_masked(X):
        raise ValueError(f"{label}: is a masked array with {np.ma.count_masked(X)} masked values; fill them "
                         "(X.filled(value)) or drop those rows first")
    if not sp.issparse(X) and X.dtype == object and X.ndim == 2:  # e.g. a pandas table of mixed or nullable columns
        X = numeric_objects(np.asarray(X), label)
    dtype = np.float32 if float32 and X.dtype == np.float32 else np.float64
    try:
        X = sp.csr_matrix(X, dtype=dtype, copy=True) if sp.issparse(X) else np.array(X, dtype=dtype, copy=True,
                                                                                     order="C")
    except (TypeError, ValueError) as exc:  # text, objects
        raise ValueError(f"{label}: is not a numeric n x d array ({exc})") from None
    if sp.issparse(X):
        X.sum_duplicates()  # canonical entries (the copy's), so value summaries see each entry once
    else:
        if X.ndim != 2:
            raise ValueError(not_2d_message(label, X.ndim))
    n, d = X.shape
    if n == 0:
        raise ValueError(f"{label}: is empty (0 samples)")
    if d == 0:
        raise ValueError(f"{label}: has zero features (shape {X.shape})")
    check_finite(X, label)
    col_min, col_max = column_range(X)
    if not constant:
        check_not_constant(col_max - col_min, n, label)
    top = largest_magnitude(col_min, col_max)
    if X.dtype == np.float32 and not within_scale(top, X.dtype):
        X = X.astype(np.float64)  # in memory, float64 holds its squared distances
    check_scale(top, label, X.dtype)
    return X


def _object_kind(value: Any) -> int:
    """1 for text, 2 for a missing value (None, pandas' NA or NaT), else 0."""
    if isinstance(value, (str, bytes, bytearray)):
        return 1
    return 2 if value is None or type(value).__name__ in ("NAType", "NaTType") else 0


def _text_hint(texts: np.ndarray) -> str:
    """How to make a view of these texts numeric: X.astype(float) when every one reads as a number, a number parser
    when they are numbers with blanks or decimal commas, else encode the categories."""
    try:
        np.asarray(texts).astype(float)
        return " (numbers read as text: convert them with X.astype(float))"
    except (TypeError, ValueError):
        pass
    sample = [str(t).strip() for t in np.asarray(texts).ravel()[:1000]]
    if all(re.fullmatch(r"[-+]?[0-9.,]*([eE][-+]?[0-9]+)?", t) for t in sample):
        return (" (numbers read as text, with blanks or decimal commas: parse them with pandas.to_numeric, or read the "
                "file with decimal=','; blanks become NaN, to impute or drop)")
    return " (categories: encode them as numbers first, e.g. pandas.get_dummies(table) for one 0/1 column per category)"


def float_dtype(dtype: np.dtype) -> np.dtype:
    """float32 and float64 as they are, every other numeric dtype as float64 (uint8 squared norms wrap around): how
    stores hold views and the anchor chain reads them."""
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def numeric_objects(X: np.ndarray, label: str) -> np.ndarray:
    """A 2-D object array as float64: text is refused as the text dtypes are (not converted), named by its first
    column (by position) and rows; missing values (None, pd.NA, pd.NaT) are named with their rows as NaN is."""
    kind = np.frompyfunc(_object_kind, 1, 1)(X).astype(np.int8)
    if (kind == 1).any():
        texts = np.flatnonzero((kind == 1).any(axis=0))
        j = texts[0]
        more = f", and {len(texts) - 1} more column{'s' * (len(texts) > 2)}" if len(texts) > 1 else ""
        rows = np.flatnonzero(kind[:, j] == 1)[:5].tolist()
        raise ValueError(f"{label}: holds text in column {j} (e.g. {str(X[rows[0], j])!r}, in rows {rows}{more}), "
                         f"expected a numeric matrix{_text_hint(X[kind == 1])}")
    if (kind == 2).any():
        raise ValueError(f"{label}: contains missing values (None, pd.NA or pd.NaT; e.g. in rows "
                         f"{rows_where(X, kind == 2)[:5].tolist()}); impute or drop them first")
    try:
        return X.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{label}: is not a numeric n x d array ({exc})") from None


#: a view's largest magnitude must lie within 2**+-SCALE_EXPONENT, or its squared distances overflow or underflow;
#: within 2**+-FLOAT32_SCALE_EXPONENT for float32 values, which the anchor chain keeps float32 (out of core, float32
#: views at 1e19 gave ACC 0.5 and at 1e-25 0.38; in memory such a view is fitted in float64)
SCALE_EXPONENT, FLOAT32_SCALE_EXPONENT = 100, 50


def largest_magnitude(col_min: np.ndarray, col_max: np.ndarray) -> float:
    """The largest |value| of a view from its column_range."""
    return float(max(np.abs(col_min).max(), np.abs(col_max).max()))


def within_scale(top: float, dtype) -> bool:
    """Whether a largest magnitude `top` (0 for an all-zero view) is one whose squared distances `dtype` holds."""
    e = FLOAT32_SCALE_EXPONENT if np.dtype(dtype) == np.float32 else SCALE_EXPONENT
    return not top or 2.0**-e <= top <= 2.0**e


def check_scale(top: float, label: str, dtype=np.float64) -> None:
    """Raise naming `label` when the view's largest magnitude `top` is beyond within_scale's bounds for its `dtype`.
    A rescaled view would cluster alike, but predict could not know the factor for new rows, so the user scales it."""
    if not within_scale(top, dtype):
        f32 = np.dtype(dtype) == np.float32
        bound = f"2**+-{FLOAT32_SCALE_EXPONENT} (float32 values)" if f32 else f"2**+-{SCALE_EXPONENT}"
        raise ValueError(f"{label}: its largest magnitude is {top:.3g}, beyond {bound}, where squared distances "
                         "overflow or underflow; multiply the view by a constant (the clustering does not depend on "
                         f"its scale){', or give it as float64 values' * f32}")


def rows_where(X, mask: np.ndarray) -> np.ndarray:
    """The distinct rows of X, in order, holding an entry where ``mask`` (over X's values: X.data when sparse) is
    true."""
    return np.unique(X.tocoo().row[mask.ravel()] if sp.issparse(X) else np.nonzero(mask)[0])


def check_finite(X, label: str, first_row: int = 0) -> None:
    """Raise naming `label` and a few rows (numbered from `first_row`) if X holds NaN or infinite values."""
    values = X.data if sp.issparse(X) else X
    bad = ~np.isfinite(values)
    if bad.any():
        kind = "NaN" if np.isnan(values).any() else "infinite"
        rows = rows_where(X, bad)[:5]
        raise ValueError(f"{label}: contains {kind} values (e.g. in rows {(rows + first_row).tolist()}); impute or "
                         "drop them first")


def column_range(X) -> tuple[np.ndarray, np.ndarray]:
    """Per-column minimum and maximum of a dense or sparse matrix (they combine over row chunks)."""
    lo, hi = X.min(axis=0), X.max(axis=0)
    return tuple(np.asarray(a.toarray() if sp.issparse(a) else a, dtype=np.float64).ravel() for a in (lo, hi))


class ConstantViewError(ValueError):
    """A view whose features do not vary over the samples."""


def constant_view_message(label: str) -> str:
    """What a constant view is told (check_not_constant)."""
    return f"{label}: is constant (every sample has the same features), so it carries no cluster information"


def check_not_constant(spread: np.ndarray, n_samples: int, label: str) -> None:
    """Raise if no column varies (spread = column max - min) over more than one sample."""
    if n_samples > 1 and not (spread > 0).any():
        raise ConstantViewError(constant_view_message(label))


def zero_rows(X) -> np.ndarray:
    """Indices of all-zero rows (e.g. documents without words)."""
    norms = np.asarray(abs(X).sum(axis=1)).ravel()
    return np.flatnonzero(norms == 0)


def not_2d_message(label: str, ndim: int) -> str:
    """The error of a view that is not samples x features, with the reshape that makes it one."""
    fix = "X.reshape(-1, 1) (one feature)" if ndim == 1 else "X.reshape(len(X), -1) (each sample's values in a row)"
    return f"{label}: expected a 2-D array (samples x features), got {ndim}-D; use {fix}"


def _ndim(X) -> int:
    """np.ndim, or 2 for ragged nested lists (check_view then names the view)."""
    try:
        return np.ndim(X)
    except (ValueError, TypeError):  # TypeError: an array-like refusing NumPy functions (np.asarray reads it)
        return 2


def view_list(views, names: Sequence[str] | None = None, y: Any = None) -> list:
    """``views`` as a list of views, rejecting a single table (array, sparse matrix, dask array, DataFrame, a
    list of rows) or a mapping with an error saying how to pass it; an xarray DataArray as its array (numpy or dask;
    it failed inside the anchor chain's tasks); pandas tables among them, and labels ``y`` as a pandas Series, must
    agree on their row index (check_row_index; ``names`` name the views)."""
    if sp.issparse(views) or isinstance(views, np.ndarray) or hasattr(views, "compute"):
        raise TypeError("views must be a list of arrays (one per view), not a single array; wrap it as [X]")
    if isinstance(views, Mapping):
        raise TypeError(f"views must be a list of arrays (one per view), not a {type(views).__name__}; pass "
                        "list(views.values()) (and view_names=list(views) to fit or MultiViewStore.create to name them)")
    if hasattr(views, "iloc"):
        raise TypeError(f"views must be a list of arrays (one per view), not a {type(views).__name__}; wrap a "
                        "single table as [X]")
    if hasattr(views, "array_keys"):  # a zarr Group iterates over its member names
        raise TypeError("views must be a list of arrays (one per view), not a zarr Group; pass its arrays, "
                        "[dask.array.from_zarr(group[name]) for name in names], or the path of an onmsc-dask store")
    views = [_xarray_data(X, p) for p, X in enumerate(views)]
    if not views:
        raise ValueError("no views given: pass a list with at least one n x d array")
    paths = [p for p, X in enumerate(views) if isinstance(X, (str, bytes, os.PathLike))]
    if paths:
        raise TypeError(f"{view_label(paths[0], names)}: is a path ({views[paths[0]]!r}), not an array: read files "
                        "with onmsc_dask.io.load_view_files(paths) or onmsc_dask.io.load(path), zarr arrays with "
                        "dask.array.from_zarr(url)")
    if all(_ndim(X) < 2 for X in views):
        raise ValueError("views must be a list of n x d arrays, but every entry is 1-D: a single table given as a "
                         "list of rows? wrap it as [X]; a view with one feature is an n x 1 array")
    series = [p for p, X in enumerate(views) if hasattr(X, "to_frame") and _ndim(X) == 1]
    if series:  # its fix is not numpy's
        raise ValueError(f"{view_label(series[0], names)}: is a pandas Series (1-D); a view of one feature is an n x 1 "
                         "table: X.to_frame()")
    check_row_index(views, names, y)
    return views


def _xarray_data(X: Any, p: int) -> Any:
    """An xarray DataArray's or Variable's array (numpy or dask); a Dataset is refused (it holds several arrays)."""
    if hasattr(X, "data_vars"):
        raise TypeError(f"view {p}: is an xarray Dataset, which holds several arrays; pass one of them, ds['name']")
    return X.data if hasattr(X, "dims") and hasattr(X, "data") and not _indexed(X) else X


def check_row_index(views: list, names: Sequence[str] | None = None, y: Any = None) -> None:
    """Views are matched row by row, by position: pandas tables of as many rows must have the same row index, else a
    view reordered, or of other samples, would be paired with the wrong rows silently; so must labels ``y`` given
    as a pandas Series."""
    names = names if names is not None and len(names) == len(views) else None
    tables = [(view_label(p, names), X.index) for p, X in enumerate(views) if _indexed(X)]
    if _indexed(y):
        tables.append(("the labels", y.index))
    for label, index in tables[1:]:
        first_label, first = tables[0]
        if len(index) == len(first) and not index.equals(first):
            raise ValueError(f"{label}: its row index differs from {first_label}'s{_first_difference(index, first)}, "
                             "and rows are matched by position; align them first (X.loc[first.index]), or, if the "
                             "rows already match, give them the same index (reset_index(drop=True))")


def column_names(X: Any, distinct: bool = True) -> np.ndarray | None:
    """A pandas table's column names when all are strings (scikit-learn's rule for ``feature_names_in_``) and, if
    ``distinct``, each names one column; else None."""
    if not _indexed(X) or not hasattr(X, "columns"):
        return None
    names = np.asarray(X.columns, dtype=object)
    if not len(names) or not all(isinstance(c, str) for c in names):
        return None
    return names if not distinct or len(set(names)) == len(names) else None


def check_column_names(columns: list, fitted: list | None, names: Sequence[str] | None = None) -> None:
    """New views whose columns are named (``columns``: a pandas table's column_names, or a store's) must have the
    fitted view's names in its order (``fitted``: feature_names_in_), else their values would be matched to other
    features silently. A view with names where the fit had none, or none where it had, is taken by position with a
    warning (as scikit-learn's)."""
    for p, (new, known) in enumerate(zip(columns, fitted or [])):
        if new is None or known is None or np.array_equal(new, known):
            if (new is None or len(set(new)) < len(new)) != (known is None):  # as the fit records them: distinct
                warnings.warn(f"{view_label(p, names)}: " + ("has column names, but the fit's had none" if known is None
                                                            else "has no column names, but the fit's had")
                              + "; its columns are taken by position", UserWarning, stacklevel=5)
            continue
        at = next((i for i, (a, b) in enumerate(zip(new, known)) if a != b), min(len(new), len(known)))
        found = f"{new[at]!r}" if at < len(new) else "no column"
        wanted = f"{known[at]!r}" if at < len(known) else "no column"
        how = ("the same names in another order" if sorted(new) == sorted(known) else
               "other names")
        raise ValueError(f"{view_label(p, names)}: its columns differ from the fit's ({how}: column {at} is {found}, "
                         f"was {wanted}); give the fitted columns in their order, X[model.feature_names_in_[{p}]]")


def _indexed(X: Any) -> bool:
    """Whether X is a pandas table or series (it has a row index)."""
    return hasattr(X, "iloc") and hasattr(X, "index")


def _first_difference(index: Any, first: Any) -> str:
    """`` (row r: a here, b there)`` for the first row where two pandas indexes differ, "" if none is found (equal
    values that Index.equals tells apart, e.g. the same times in two time zones)."""
    try:
        same = np.asarray(index == first, bool) | (np.asarray(index.isna()) & np.asarray(first.isna()))
    except (NotImplementedError, TypeError, ValueError):  # MultiIndex has no isna
        same = np.asarray(index == first, bool)
    rows = np.flatnonzero(~same)
    if not rows.size:
        return ""
    row = int(rows[0])
    shown = [repr(v) if isinstance(v, str) else str(v) for v in (index[row], first[row])]
    return f" (row {row}: {shown[0]} here, {shown[1]} there)"


def check_view_names(view_names: Sequence[str] | None, n_views: int) -> list[str]:
    """One distinct string per view (``view0``, ``view1``, ... for None)."""
    if view_names is None:
        return [f"view{p}" for p in range(n_views)]
    if isinstance(view_names, str):
        raise TypeError(f"view_names: must be a list of strings (one per view), not the string {view_names!r}")
    names = list(view_names)
    if len(names) != n_views:
        raise ValueError(f"view_names: has {len(names)} name{'s' * (len(names) != 1)} for {n_views} view"
                         f"{'s' * (n_views != 1)}")
    if not all(isinstance(s, str) and s.strip() for s in names) or len(set(names)) != n_views:
        raise ValueError(f"view_names: must be distinct, non-blank strings, got {names}")
    return names


def check_views(views, view_names: Sequence[str] | None = None, constant: bool = False) -> list:
    """Validate a list of views: each 2-D, finite, non-constant (unless ``constant``: such a view is kept, for a fit
    that leaves it out with a warning), all with the same number of rows."""
    views = view_list(views, view_names)
    if view_names is not None:
        check_view_names(view_names, len(views))
    checked, constant_views = [], 0
    for p, X in enumerate(views):
        try:
            checked.append(check_view(X, p, view_names))
        except ConstantViewError:
            if not constant:
                raise
            checked.append(check_view(X, p, view_names, constant=True))
            constant_views += 1
    if constant_views == len(checked):
        raise ValueError(f"every view is constant (every sample has the same features), so none carries cluster "
                         f"information: {', '.join(view_label(p, view_names) for p in range(len(checked)))}")
    check_same_rows([X.shape[0] for X in checked], view_names)
    return checked


def warn_zero_rows(n_zero: int, examples: Sequence[int], metric: str, label: str) -> None:
    """Warn about the all-zero rows of a cosine or counts view: they have no direction (under euclidean they are
    points at the origin like any other)."""
    if n_zero and metric in UNIT_ROW_METRICS:
        user_warning(f"{label}: {n_zero} all-zero rows (e.g. {list(examples)[:5]}); they have no direction under "
                     f"the {metric} metric, so they are linked by distance only")


def check_n_clusters(n_clusters: int, n_samples: int) -> int:
    if not isinstance(n_clusters, (int, np.integer)) or isinstance(n_clusters, bool):
        raise TypeError(f"n_clusters must be an integer, got {n_clusters!r}")
    if not 2 <= n_clusters < n_samples:
        raise ValueError(f"n_clusters={n_clusters} must satisfy 2 <= n_clusters < n_samples={n_samples}")
    return int(n_clusters)


def n_clusters_of(n_clusters: int | None, y: np.ndarray | None, n_samples: int, source: str) -> int:
    """k: ``n_clusters`` when given, else the number of distinct labels ``y`` of ``source``; checked against n."""
    if n_clusters is None:
        if y is None:
            raise ValueError(f"{source} has no labels, so the number of clusters is unknown; pass --n-clusters K")
        classes = np.unique(y)
        n_clusters = len(classes)
        if n_clusters < 2:
            raise ValueError(f"the labels of {source} hold a single class, so they do not give the number of "
                             "clusters; pass --n-clusters K")
        negative = classes[classes < 0] if classes.dtype.kind in "iuf" else classes[:0]  # not class names
        if negative.size:
            user_warning(f"the labels of {source} hold negative classes ({', '.join(map(str, negative[:5]))}; "
                         f"{int((np.asarray(y) < 0).sum())} samples), counted among the {n_clusters} clusters; if "
                         "they mark unlabelled samples (scikit-learn's -1), pass --n-clusters K")
    elif not n_clusters < n_samples:
        raise ValueError(f"--n-clusters {n_clusters}: must be below the {n_samples} samples of {source}")
    return check_n_clusters(n_clusters, n_samples)


def check_n_neighbors(n_neighbors: int, n_samples: int) -> int:
    n_neighbors = check_int("n_neighbors", n_neighbors)
    if not n_neighbors < n_samples:
        raise ValueError(f"n_neighbors={n_neighbors} must satisfy 1 <= n_neighbors < n_samples={n_samples}")
    return n_neighbors


def check_int(name: str, value: int, minimum: int = 1) -> int:
    """An integer parameter (not a float, bool or string) of at least ``minimum``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return int(value)


def check_bool(name: str, value: bool, allowed: str = "True or False") -> bool:
    """A switch: True or False (a numpy bool too), not a string such as "False"; `allowed` words the values the
    error lists."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return bool(value)


def check_lambda(name: str, value: float, positive: bool = False, rules: Sequence[str] = ("auto", "select")) -> float:
    """A finite lambda, >= 0 (> 0 when ``positive``); ``rules`` are the names accepted instead of a number."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        names = f" or one of {list(rules)}" if rules else ""
        raise ValueError(f"{name} must be a number{names}, got {value!r}") from None
    if not np.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be finite and {'> 0' if positive else '>= 0'}, got {value}")
    return value


def check_tol(tol: float) -> float:
    """The late-fusion stopping tolerance: a finite number >= 0."""
    return check_lambda("tol", tol, rules=())


#: seeds are 0 <= seed <= SEED_MAX, the range scikit-learn's estimators accept
SEED_MAX = 2**32 - 1


def check_seed(random_state) -> int | None:
    """An int or None: every stage derives its seeds from it, so the labels are the same on any cluster."""
    if random_state is None:
        return None
    message = f"random_state must be an int in [0, 2**32 - 1] or None (a seed), got {random_state!r}"
    if isinstance(random_state, (np.random.Generator, np.random.RandomState)):
        raise TypeError(f"{message}; draw a seed from the generator, e.g. int(rng.integers(2**32)) (every stage and "
                        "worker derives its own streams from one seed)")
    if not isinstance(random_state, (int, np.integer)) or isinstance(random_state, bool):
        raise TypeError(message)
    if not 0 <= random_state <= SEED_MAX:
        raise ValueError(message)
    return int(random_state)


def fit_seeds(random_state: int | None, n_views: int) -> list[int]:
    """The seeds of one fit, from the checked ``random_state``: one per view (its graph, landmarks and eigensolver),
    then the average graph's (also the "select" search's), then k-means'. ONMSC and fit_store share them, so they
    give the same labels."""
    return [int(s) for s in np.random.SeedSequence(random_state).generate_state(n_views + 2)]


#: samples per cluster from which the default embedding is 2k wide instead of k (docs/solvers.md)
WIDE_EMBEDDING_SAMPLES_PER_CLUSTER = 500


def default_n_components(n_samples: int, n_clusters: int) -> int:
    """The width for ``n_components=None``: k, or 2k when there are at least 500 samples per cluster, where the
    leading eigenvectors follow variations within the clusters and k of them miss cluster boundaries."""
    return 2 * n_clusters if n_samples >= WIDE_EMBEDDING_SAMPLES_PER_CLUSTER * n_clusters else n_clusters


def check_n_components(n_components: int | None, n_clusters: int, n_samples: int) -> int:
    """The embedding width: ``default_n_components`` when None, else k <= n_components < n eigenvectors per graph
    (as scikit-learn's SpectralClustering(n_components=...))."""
    if n_components is None:
        return default_n_components(n_samples, n_clusters)
    n_components = check_int("n_components", n_components)
    if not n_clusters <= n_components < n_samples:
        raise ValueError(f"n_components={n_components} must satisfy n_clusters={n_clusters} <= n_components < "
                         f"n_samples={n_samples}")
    return n_components


def width_label(width: int, n_clusters: int) -> str:
    """How errors name the embedding width: ``n_clusters=k``, or ``n_components=c`` when it is wider than k (with
    the default rule, which makes it 2k without the user asking)."""
    if width == n_clusters:
        return f"n_clusters={n_clusters}"
    return (f"n_components={width} (the embedding width: given, or by default 2k from "
            f"{WIDE_EMBEDDING_SAMPLES_PER_CLUSTER} samples per cluster)")


def default_n_landmarks(n_samples: int, width: int) -> int:
    """m for ``n_landmarks=None``: 1000, but at most n / 10 (a landmark stands for 10 samples or more; with about
    one sample per landmark the anchor graph falls apart), and at least twice the embedding width."""
    return max(min(1000, n_samples // 10), 2 * width)


def check_landmarks(n_landmarks: int | None, n_nearest: int | None, n_clusters: int, n_samples: int,
                    width: int | None = None) -> int:
    """The number of landmarks used, min(n_landmarks, n) (``default_n_landmarks`` for None), checked to exceed the
    embedding width (k, or the checked n_components: the landmark graph has at most m eigenvectors), and, for an
    anchor graph (``n_nearest`` given), 2 <= n_nearest <= m."""
    width = n_clusters if width is None else width
    m = min(default_n_landmarks(n_samples, width) if n_landmarks is None else check_int("n_landmarks", n_landmarks),
            n_samples)
    n_nearest = None if n_nearest is None else check_int("n_nearest_landmarks", n_nearest, minimum=2)
    if m <= width:
        raise ValueError(f"n_landmarks={m} must be larger than {width_label(width, n_clusters)}: the "
                         f"landmark graph has at most n_landmarks eigenvectors and the embedding needs {width}")
    if n_nearest is not None and not 2 <= n_nearest <= m:
        raise ValueError(f"n_nearest_landmarks={n_nearest} must satisfy 2 <= n_nearest_landmarks <= n_landmarks={m}"
                         " (with one landmark per sample the anchor graph falls apart into one piece per landmark)")
    return m


def metric_list(metric: str | Sequence[str], n_views: int) -> list[str]:
    """One metric per view from a single metric or a sequence of them, each "auto" or one of METRICS."""
    if isinstance(metric, str):
        metrics = [metric] * n_views
    else:
        metrics = list(metric) if isinstance(metric, (list, tuple, np.ndarray)) else []
    if not metrics or any(m != "auto" and m not in METRICS for m in metrics):
        raise ValueError(f"metric must be 'auto' or one of {METRICS}, or a list of them (one per view), "
                         f"got {metric!r}")
    if len(metrics) != n_views:
        raise ValueError(f"metric lists {len(metrics)} entries for {n_views} views")
    return metrics


def row_keys(X) -> np.ndarray:
    """A key per row, equal for identical rows (exact: the rows' bytes; -0.0 counts as 0.0)."""
    if sp.issparse(X):
        X = sp.csr_matrix(X, copy=True)
        X.sum_duplicates()
        X.eliminate_zeros()
        X.sort_indices()
        return np.array([X.indices[a:b].tobytes() + X.data[a:b].tobytes()
                         for a, b in zip(X.indptr[:-1], X.indptr[1:])], dtype=object)
    X = np.ascontiguousarray(X) + 0.0  # -0.0 -> 0.0
    return X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()


def n_distinct(view_row_ids: Iterable[np.ndarray], at_least: int) -> int:
    """Number of distinct samples (rows differing in some view) from each view's row ids (equal for identical
    rows), counted until it reaches `at_least`."""
    ids = None
    for row_ids in view_row_ids:  # ids of the distinct combinations of rows over the views seen so far
        ids = row_ids if ids is None else np.unique(ids * (row_ids.max() + 1) + row_ids, return_inverse=True)[1]
        if ids.max() + 1 >= at_least:
            break
    return int(ids.max() + 1)


def check_n_distinct(found: int, n_clusters: int) -> None:
    """Raise if `found` distinct samples cannot make n_clusters clusters."""
    if found < n_clusters:
        raise ValueError(f"only {found} distinct samples (rows identical in every view), fewer than "
                         f"n_clusters={n_clusters}")


def row_ids(X) -> np.ndarray:
    """An id per row, 0..(distinct rows - 1), equal for identical rows."""
    return np.unique(row_keys(X), return_inverse=True)[1]


def informative_views(views, n_clusters: int, names: Sequence[str] | None = None,
                      float32: bool = False) -> tuple[list, list[int]]:
    """The views checked (check_view, with ``float32``) that can help a clustering into ``n_clusters``, and their
    positions (keep_informative). Bad input (NaN or infinite values, views of different lengths, ...) stays an
    error."""
    raw = view_list(views, names)
    if names is not None:
        check_view_names(names, len(raw))
    checked, constant = {}, []
    for p, X in enumerate(raw):
        try:
            checked[p] = check_view(X, p, names, float32)
        except ConstantViewError as exc:
            constant.append((p, str(exc)))
            checked[p] = None
    n = check_same_rows([np.shape(X)[0] if checked[p] is None else checked[p].shape[0] for p, X in enumerate(raw)],
                        names)
    n_clusters = check_n_clusters(n_clusters, n)
    distinct: list[int | str] = []
    for p, X in checked.items():
        if X is None:
            distinct.append(dict(constant)[p])
            continue
        found = n_distinct([row_ids(X[:DISTINCT_CHECK_ROWS])], n_clusters)
        distinct.append(found if found >= n_clusters else n_distinct([row_ids(X)], n_clusters))
    kept = keep_informative(distinct, n_clusters, names)
    return [checked[p] for p in kept], kept


def keep_informative(distinct: Sequence[int | str], n_clusters: int, names: Sequence[str] | None = None) -> list[int]:
    """Positions of the views that can help a clustering into ``n_clusters``, from each view's number of distinct
    rows, or for a constant view check_view's message: a constant view, or one with fewer distinct rows than
    clusters, is left out with a warning naming it; leaving out every view is an error."""
    for message in distinct:
        if isinstance(message, str):
            user_warning(f"{message}; it is left out")
    kept = []
    for p, found in enumerate(distinct):
        if isinstance(found, str):
            continue
        if found < n_clusters:
            user_warning(f"{view_label(p, names)}: only {found} distinct rows, fewer than n_clusters={n_clusters}, "
                         "so it cannot separate the clusters; it is left out")
        else:
            kept.append(p)
    if not kept:
        raise ValueError(f"no view can separate {n_clusters} clusters: every view is constant or has fewer distinct "
                         "rows than clusters")
    return kept


def check_distinct_samples(views: list, n_clusters: int) -> None:
    """Raise if fewer than k samples differ in some view: no clustering can then separate k clusters, and
    spectral clustering would split identical samples. The first rows usually settle it; all rows are compared
    only when they do not."""
    if n_distinct((row_ids(X[:DISTINCT_CHECK_ROWS]) for X in views), n_clusters) >= n_clusters:
        return
    check_n_distinct(n_distinct(map(row_ids, views), n_clusters), n_clusters)
