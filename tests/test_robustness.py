"""Robustness: bad inputs give clear errors naming the view and the problem, degenerate data still clusters,
corrupt files and stores are rejected, and the out-of-core pipeline is deterministic, resumable and tolerant of
a lost worker. docs/reliability.md lists every case with the message a user sees."""
import os
import signal
import threading
import time
import warnings

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp
import zarr
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

from onmsc_dask import outofcore
from onmsc_dask.api import ONMSC
from onmsc_dask.io import load, load_mat, read_idx
from onmsc_dask.metrics import accuracy
from onmsc_dask.outofcore import STAGES, fit_store
from onmsc_dask.store import MultiViewStore

N = 40
OOC = dict(n_landmarks=60, random_state=0, n_init=3)


@pytest.fixture(autouse=True, scope="module")
def _single_threaded():
    """2 shared cores: no BLAS/OpenMP oversubscription; the in-memory fits run on the sync scheduler."""
    with threadpool_limits(1), dask.config.set(scheduler="sync"):
        yield


@pytest.fixture(scope="module")
def views():
    rng = np.random.default_rng(0)
    return [rng.normal(size=(N, 4)), rng.random((N, 5))]


def _fit(views, k=3, **kw):
    return ONMSC(k, random_state=0, n_init=2, keep_intermediate=True, **kw).fit(views)


def _valid(model, n, k):
    labels = model.labels_
    assert labels.shape == (n,) and labels.min() >= 0 and labels.max() < k
    assert np.isfinite(model.embedding_).all()
    assert np.isfinite(model.view_embeddings_).all() and np.isfinite(model.view_weights_).all()


# ------------------------------------------------------------------ bad inputs -> clear errors


def _with(views, p, fn):
    out = [v.copy() for v in views]
    out[p] = fn(out[p])
    return out


def _set(value, row, col):
    def fn(X):
        X[row, col] = value
        return X
    return fn


BAD_INPUTS = {
    "nan": (lambda v: _with(v, 1, _set(np.nan, 3, 1)), {}, ["view 1", "NaN", "rows [3]"]),
    "inf": (lambda v: _with(v, 1, _set(np.inf, 5, 0)), {}, ["view 1", "infinite", "rows [5]"]),
    "neg-inf-sparse": (lambda v: [v[0], sp.csr_matrix(_set(-np.inf, 8, 2)(v[1].copy()))], {},
                       ["view 1", "infinite", "[8]"]),
    "row-mismatch": (lambda v: [v[0], v[1][:N - 1]], {}, ["view 1", f"{N - 1} rows", f"expected {N}"]),
    "transposed": (lambda v: [v[0], v[1].T.copy()], {}, ["view 1", "5 rows", "transposed"]),
    "empty-view": (lambda v: [v[0], np.empty((0, 5))], {}, ["view 1", "empty (0 samples)"]),
    "empty-view0": (lambda v: [np.empty((0, 4)), v[1]], {}, ["view 0", "empty (0 samples)"]),
    "zero-columns": (lambda v: [v[0], np.empty((N, 0))], {}, ["view 1", "zero features", f"({N}, 0)"]),
    "all-constant": (lambda v: [np.full((N, 4), 1.0), np.full((N, 5), 3.0)], {}, ["no view can separate 3"]),
    "1-d": (lambda v: [v[0], v[1][:, 0].copy()], {}, ["view 1", "1-D", "reshape"]),
    # a dask view's said "is 1-D, expected a 2-D matrix", without the reshape (found by a new-user helper)
    "1-d dask": (lambda v: [v[0], da.from_array(v[1][:, 0].copy())], {}, ["view 1", "1-D", "X.reshape(-1, 1)"]),
    "3-d images": (lambda v: [v[0], np.zeros((N, 2, 3))], {}, ["view 1", "got 3-D", "X.reshape(len(X), -1)"]),
    "3-d dask images": (lambda v: [v[0], da.zeros((N, 2, 3))], {}, ["view 1", "got 3-D", "X.reshape(len(X), -1)"]),
    # a Series was told to use X.reshape(-1, 1), which it does not have
    "series": (lambda v: [v[0], pd.Series(v[1][:, 0])], {}, ["view 1", "is a pandas Series (1-D)", "X.to_frame()"]),
    "n_clusters=1": (lambda v: v, {"k": 1}, ["n_clusters=1", "2 <= n_clusters", f"n_samples={N}"]),
    "n_clusters=n": (lambda v: v, {"k": N}, [f"n_clusters={N}", f"< n_samples={N}"]),
    "n_neighbors=n": (lambda v: v, {"n_neighbors": N}, [f"n_neighbors={N}", f"n_neighbors < n_samples={N}"]),
    "no-views": (lambda v: [], {}, ["no views given"]),
    # numpy's messages used to name no view
    "text": (lambda v: [v[0], np.full((N, 2), "abc")], {}, ["view 1: has dtype <U3, expected a numeric matrix",
                                                            "categories: encode them", "get_dummies"]),
    # text that is no number was told to be converted with X.astype(float), which fails on it
    "categorical column": (lambda v: [v[0], pd.DataFrame(v[1]).assign(c=pd.Categorical(["a", "b"] * (N // 2)))], {},
                           ["view 1: holds text in column 5 (e.g. 'a', in rows [0, 1, 2, 3, 4])", "pandas.get_dummies(table)"]),
    "decimal commas": (lambda v: [v[0], np.char.replace(v[1].round(3).astype(str), ".", ",").astype(object)], {},
                       ["view 1: holds text in column 0 (e.g. '", "and 4 more columns", "decimal commas: parse them with pandas.to_numeric"]),
    "numbers as text": (lambda v: [v[0], v[1].astype(str)], {}, ["view 1: has dtype <U32, expected a numeric matrix",
                                                                   "X.astype(float)"]),
    "bytes": (lambda v: [v[0], v[1].astype("S8")], {}, ["view 1: has dtype |S8, expected a numeric matrix"]),
    # numbers as text in an object array (a pandas column of strings) used to be converted, silently
    "text as objects": (lambda v: [v[0], v[1].astype(str).astype(object)], {},
                        ["view 1: holds text in column 0 (e.g. '", "in rows [0, 1, 2, 3, 4]", "X.astype(float)"]),
    # pandas' missing value gave "is not a numeric n x d array (float() argument must be ... not 'NAType')"
    # pandas tables were matched by position whatever their index: a reordered view paired the wrong rows, silently
    "reordered table": (lambda v: [pd.DataFrame(v[0]), pd.DataFrame(v[1]).iloc[::-1]], {},
                        [f"view 1: its row index differs from view 0's (row 0: {N - 1} here, 0 there)",
                         "X.loc[first.index]"]),
    "0-d objects": (lambda v: [v[0], np.array(None, dtype=object)], {}, ["view 1: expected a 2-D array", "got 0-D"]),
    # numbers as objects were converted before the mask was seen, then: the masked entries' values used, silently
    "masked objects": (lambda v: [v[0], np.ma.masked_array(v[1].astype(object), mask=np.eye(N, 5, dtype=bool))],
                       {}, ["view 1: is a masked array with 5 masked values"]),
    "pandas NA": (lambda v: [v[0], _missing_at(v[1], 2)], {},
                  ["view 1: contains missing values (None, pd.NA or pd.NaT; e.g. in rows [2])"]),
    "ragged": (lambda v: [v[0], [[1.0, 2.0], [3.0]] * (N // 2)], {}, ["view 1: is not a numeric n x d array"]),
}


def _missing_at(X: np.ndarray, row: int) -> pd.DataFrame:
    """X as a pandas table of nullable floats, its entry (row, 0) missing (pd.NA)."""
    table = pd.DataFrame(X).astype("Float64")
    table.iloc[row, 0] = pd.NA
    return table


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_error_names_view_and_problem(views, case):
    make, kw, parts = BAD_INPUTS[case]
    kw = dict(kw)
    with pytest.raises(ValueError) as info:
        _fit(make(views), kw.pop("k", 3), **kw)
    for part in parts:
        assert part in str(info.value), (part, str(info.value))


@pytest.mark.parametrize("fusion", ["late", "early"])
def test_a_view_of_few_distinct_rows_is_explained(fusion):
    """A binary view with 8 distinct rows: groups of identical rows larger than N link only to themselves. Late
    fusion leaves it out with a warning saying why; early fusion, which fuses the graphs themselves, stops. The
    message used to advise only 'raise n_neighbors', which did not help below the largest group (113)."""
    rng = np.random.default_rng(0)
    y = np.arange(600) % 3
    blobs = [rng.normal(size=(600, d)) + 3 * y[:, None] for d in (4, 5)]
    binary = (rng.random((600, 3)) < 0.2 + 0.6 * (y[:, None] == np.arange(3))).astype(float)
    message = (r"view 2: its graph falls apart into 8 disconnected pieces.*only 8 distinct rows among 600 samples, up "
               r"to 113 identical.*n_neighbors above the largest")
    if fusion == "early":
        with pytest.raises(ValueError, match=message):
            ONMSC(3, fusion=fusion, random_state=0).fit([*blobs, binary])
        return
    with pytest.warns(UserWarning, match=message):
        est = ONMSC(3, fusion=fusion, random_state=0).fit([*blobs, binary])
    assert est.view_weights_[2] == 0 and not est.related_views_[2] and accuracy(y, est.labels_) > 0.95


@pytest.mark.parametrize("factor", [1e155, 1e300, 1e-200, 1e-309])
def test_extreme_feature_scales_are_an_error_naming_the_view(views, factor):
    """Squared distances overflowed (1e155: ACC 0.84 -> 0.42 on digits, silently) or underflowed (1e-200). The fit
    then rescaled such a view by a power of two, but predict took new rows unscaled (1e200: its labels agreed with
    the fit's on 1/3 of the same rows): the user scales the view. New rows that would overflow are refused too;
    tiny ones are near zero, as they are."""
    match = r"view 1: its largest magnitude is .*, beyond 2\*\*\+-100, where squared distances overflow or underflow"
    for big in (views[1] * factor, sp.csr_matrix(views[1] * factor)):
        with pytest.raises(ValueError, match=match + r"; multiply the view by a constant \(the clustering does not "
                                               r"depend on its scale\)$"):
            _fit([views[0], big])
    model = ONMSC(3, embedding="anchor", n_landmarks=20, random_state=0).fit(views)
    new = [views[0], views[1] * factor]
    if factor > 1:
        with pytest.raises(ValueError, match=r"view 1: new rows reach .* \(e\.g\. in rows \[0, 1, 2, 3, 4\]\), beyond "
                                             r"2\*\*100, where squared distances overflow; a fit refuses such a view"):
            model.predict(new)
    else:
        assert model.predict(new).shape == (N,)


@pytest.mark.parametrize("factor", [1e20, 1e-25])
def test_float32_views_far_from_unit_scale(tmp_path, views, factor):
    """The anchor solver keeps float32 views float32, whose squared distances overflow from about 2**64 and
    underflow much sooner than in float64: in memory such a view gave ACC 0.51 at 1e20 and 0.38 at 1e-25, silently;
    now it is fitted in float64. Out of core (ACC 0.5 at 1e19), a store's or a dask array's float32 view beyond
    2**+-50 is an error naming it and the two ways out."""
    import dask.array as da

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 50)
    blobs = [rng.normal(size=(3, d))[y] * 4 + rng.normal(size=(150, d)) for d in (5, 8)]
    expected = ONMSC(3, embedding="anchor", random_state=0).fit(blobs).labels_
    assert accuracy(y, expected) == 1.0
    scaled = [(X * factor).astype(np.float32) for X in blobs]
    np.testing.assert_array_equal(ONMSC(3, embedding="anchor", random_state=0).fit(scaled).labels_, expected)
    store = MultiViewStore.create(tmp_path / "s.zarr", scaled, view_names=["a", "b"])
    message = (r"view [01]( \('[ab]'\))?: its largest magnitude is .*, beyond 2\*\*\+-50 \(float32 values\), where "
               r"squared distances overflow or underflow; multiply the view by a constant \(the clustering does not "
               r"depend on its scale\), or give it as float64 values$")
    for given in (lambda: fit_store(store, 3, **OOC),
                  lambda: ONMSC(3, embedding="anchor", **OOC).fit([da.from_array(X, chunks=50) for X in scaled])):
        with pytest.raises(ValueError, match=message):
            given()


def test_extreme_scales_out_of_core(tmp_path, views):
    """Out of core 1e155 ended in a misleading 'only 1 distinct landmarks' (cosine norms overflowed to zero rows)."""
    store = MultiViewStore.create(tmp_path / "s.zarr", [views[0], views[1] * 1e155], view_names=["a", "big"])
    with pytest.raises(ValueError, match=r"view 1 \('big'\): its largest magnitude is 9\.97e\+154, beyond 2\*\*\+-100.*"
                                         r"depend on its scale\)$"):
        fit_store(store, 3, **OOC)


def test_masked_values_are_an_error(views):
    """np.array() used to drop the mask, so masked entries were clustered as their hidden values."""
    masked = np.ma.masked_array(views[1], mask=np.zeros(views[1].shape, bool))
    np.testing.assert_array_equal(_fit([views[0], masked]).labels_, _fit(views).labels_)  # nothing masked: fine
    masked[3, 1] = np.ma.masked
    with pytest.raises(ValueError, match=r"view 1: is a masked array with 1 masked values; fill them"):
        _fit([views[0], masked])


def test_few_distinct_rows_make_few_landmarks(tmp_path):
    """k-means asked for more landmarks than a view has distinct rows returned repeated centres with scikit-learn's
    ConvergenceWarning; now each distinct centre is one landmark, and a view with too few of them for the embedding
    is left out with a warning naming it while another view's graph is usable (it used to stop the fit, though the
    exact solver keeps such a view), in memory and out of core; with no usable view, an error naming it."""
    from onmsc_dask.graph import landmark_centres

    rng = np.random.default_rng(0)
    y = np.arange(600) % 3
    blobs = [rng.normal(size=(600, d)) + 3 * y[:, None] for d in (4, 5)]
    binary = (rng.random((600, 3)) < 0.2 + 0.6 * (y[:, None] == np.arange(3))).astype(float) - 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        centres = landmark_centres([binary], 50, 0)
    assert len(centres) == len(np.unique(binary, axis=0)) == 8
    match = (r"view 2 \('bits'\): only 8 distinct landmarks \(its rows take few distinct values\), not more than "
             r"n_clusters=8, so the anchor graph has too few eigenvectors; it is left out \(weight 0\)")
    with pytest.warns(UserWarning, match=match):
        model = ONMSC(8, embedding="anchor", n_landmarks=50, random_state=0).fit([*blobs, binary],
                                                                                view_names=["a", "b", "bits"])
    assert model.view_weights_[2] == 0 and model.view_weights_[:2].sum() == pytest.approx(1.0)
    store = MultiViewStore.create(tmp_path / "s.zarr", [*blobs, binary], view_names=["a", "b", "bits"])
    with pytest.warns(UserWarning, match=match):
        result = fit_store(store, 8, n_landmarks=50, random_state=0)
    np.testing.assert_array_equal(result.labels, model.labels_)
    assert result.view_weights[2] == 0
    alone = r"view 0 \('bits'\): only 8 distinct landmarks \(its rows take few distinct values\), not more than"
    with pytest.raises(ValueError, match=alone):
        ONMSC(8, embedding="anchor", n_landmarks=50, random_state=0).fit([binary], view_names=["bits"])


def test_bad_store_view_names_the_view(tmp_path, views):
    with pytest.raises(ValueError, match=r"view 1 \('text'\): has 39 rows, expected 40 like view 0 \('img'\)"):
        MultiViewStore.create(tmp_path / "s.zarr", [views[0], views[1][:39]], view_names=["img", "text"])
    with pytest.raises(ValueError, match=r"view 1 \('view1'\): is empty \(shape \(40, 0\)\)"):
        MultiViewStore.create(tmp_path / "s.zarr", [views[0], np.empty((N, 0))])
    table = pd.DataFrame(views[0], index=[f"s{i}" for i in range(N)])
    y = pd.Series(np.arange(N) % 3, index=table.index[::-1])  # labels of the same samples, reversed: paired wrongly
    with pytest.raises(ValueError, match=r"the labels: its row index differs from view 0's \(row 0: 's39' here, 's0' "
                                         r"there\)"):
        MultiViewStore.create(tmp_path / "s.zarr", [table, views[1]], y)
    with pytest.raises(ValueError, match=r"the labels: its row index differs from view 0 \('img'\)'s"):  # an IndexError
        MultiViewStore.create(tmp_path / "s.zarr", [table, views[1]], y, view_names=["img", "text"])
    assert not (tmp_path / "s.zarr").exists()


# ------------------------------------------------------------------ degenerate but valid data


@pytest.mark.parametrize("sparse", [False, True])
def test_all_zero_rows_warn_and_still_cluster(views, sparse):
    B = views[1].copy()
    B[[2, 9]] = 0
    with pytest.warns(UserWarning, match=r"view 1: 2 all-zero rows \(e\.g\. \[2, 9\]\); they have no direction "
                                         r"under the cosine metric"):
        model = _fit([views[0], sp.csr_matrix(B) if sparse else B])
    _valid(model, N, 3)


@pytest.mark.parametrize("fusion", ["late", "early"])
def test_in_memory_messages_use_the_view_names(tmp_path, views, fusion):
    """Names given to fit, or a store's (also when a store is fitted in memory), label warnings and errors."""
    B = views[1].copy()
    B[[2, 9]] = 0
    model = ONMSC(3, fusion=fusion, random_state=0, n_init=2)
    with pytest.warns(UserWarning, match=r"view 1 \('text'\): 2 all-zero rows"):
        model.fit([views[0], B], view_names=["img", "text"])
    store = MultiViewStore.create(tmp_path / "s.zarr", [views[0], B], view_names=["img", "words"])
    with pytest.warns(UserWarning, match=r"view 1 \('words'\): 2 all-zero rows"):
        model.fit(store.path)
    with pytest.raises(ValueError, match=r"view 1 \('text'\): contains NaN"):
        model.fit(_with(views, 1, _set(np.nan, 3, 1)), view_names=["img", "text"])
    with pytest.raises(ValueError, match="view_names: has 3 names for 2 views"):
        model.fit(views, view_names=["a", "b", "c"])
    with pytest.raises(TypeError, match="view_names: must be a list of strings"):
        model.fit(views, view_names="ab")
    for names in (["a", "a"], ["a", " "], ["", "b"]):  # blank names made report rows without a name
        with pytest.raises(ValueError, match=r"view_names: must be distinct, non-blank strings, got \["):
            model.fit(views, view_names=names)


def test_all_zero_rows_of_a_euclidean_view_are_points_like_any_other(views):
    A = views[0].copy()
    A[[2, 9]] = 0  # the origin: no warning, the view has negative values so it is euclidean
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*all-zero rows")
        _valid(_fit([A, views[1]]), N, 3)


def test_all_zero_rows_warn_out_of_core_and_when_resumed(tmp_path):
    digits = load_digits()
    X, y = digits.data[:300], digits.target[:300]
    X[[5, 170]] = 0  # rows of the second chunk are numbered in the whole view
    store = MultiViewStore.create(tmp_path / "z.zarr", [X, -X[:, ::-1]], y, chunk_rows=128)
    for resumed in (False, True):
        with pytest.warns(UserWarning, match=r"view 0 \('view0'\): 2 all-zero rows \(e\.g\. \[5, 170\]\)") as rec:
            result = fit_store(store, 10, **OOC)
        assert not any("view 1" in str(w.message) and "all-zero" in str(w.message) for w in rec)
        assert (result.computed_stages == []) == resumed


def test_duplicate_samples_finite_and_valid(views):
    dup = [np.repeat(v[: N // 2], 2, axis=0) for v in views]  # every sample appears exactly twice
    model = _fit(dup)
    _valid(model, N, 3)
    np.testing.assert_array_equal(model.labels_[0::2], model.labels_[1::2])  # twins share a cluster


def test_all_identical_pairs_in_one_view_only(views):
    A = views[0].copy()
    A[1::2] = A[0::2]
    _valid(_fit([A, views[1]]), N, 3)


def test_disconnected_knn_graph_warns_but_stays_finite():
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(20, 3)), rng.normal(size=(20, 3)) + 1000.0])
    with pytest.warns(UserWarning, match="view 0: its graph has 2 disconnected pieces"):
        model = _fit([X, X[:, ::-1] * 2 + 5], k=2, n_neighbors=3)
    _valid(model, N, 2)
    assert len(np.unique(model.labels_[:20])) == 1 and len(np.unique(model.labels_[20:])) == 1
    assert model.labels_[0] != model.labels_[-1]


def test_disconnected_graph_warning_reaches_the_caller_from_a_process_cluster():
    """The warning is raised on the client: one raised inside a worker's task never reaches the caller (and the
    sync scheduler of the test above cannot tell the two apart)."""
    from distributed import get_task_stream

    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(20, 3)), rng.normal(size=(20, 3)) + 1000.0])
    cluster, client = _cluster(1)
    with cluster, client, dask.config.set(scheduler=client), get_task_stream(client) as stream:
        with pytest.warns(UserWarning, match="view 0: its graph has 2 disconnected pieces"):
            _fit([X, X[:, ::-1] * 2 + 5], k=2, n_neighbors=3)
    assert any("_embed_view" in str(t["key"]) for t in stream.data), "the views were not embedded on the worker"


def test_graph_in_more_pieces_than_clusters_is_left_out_or_an_error_naming_the_view():
    """A view whose graph is in more pieces than clusters is left out with a warning while another view remains;
    alone, it is an error. Before: a warning inside the Dask task and labels from an arbitrary choice of pieces."""
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(20, 3)) + 1000.0 * i for i in range(4)])
    message = "view 1: its graph falls apart into 4 disconnected pieces, more than n_clusters=2"
    with pytest.warns(UserWarning, match=message + "; it is left out"):
        est = _fit([rng.normal(size=(80, 3)), X], k=2, n_neighbors=3)
    assert list(est.view_weights_) == [1, 0]
    with pytest.raises(ValueError, match=message.replace("view 1", "view 0")):
        _fit([X], k=2, n_neighbors=3)


@pytest.mark.parametrize("sparse", [False, True])
def test_fewer_distinct_samples_than_clusters_is_an_error(sparse):
    """Views of fewer distinct rows than clusters are left out; with none left, an error. Before: 50 identical
    samples were split over 3 clusters and the CLI printed ACC 0.80."""
    A = np.r_[np.zeros((50, 5)), np.ones((50, 5))]
    B = np.r_[np.zeros((50, 4)), np.ones((50, 4))] + 1
    with pytest.warns(UserWarning, match="view 1: only 2 distinct rows, fewer than n_clusters=3"), \
            pytest.raises(ValueError, match="no view can separate 3 clusters"):
        _fit([sp.csr_matrix(A) if sparse else A, B], k=3)
    B[0] = 7.0  # a third distinct sample in one view: valid, the other view left out
    with pytest.warns(UserWarning, match="view 0: only 2 distinct rows"):
        _valid(_fit([sp.csr_matrix(A) if sparse else A, B], k=3, n_neighbors=60), 100, 3)


def test_distinct_samples_beyond_the_first_rows_count(monkeypatch):
    """check_distinct_samples compares the first rows first; distinct samples after them still count."""
    from onmsc_dask import validation

    monkeypatch.setattr(validation, "DISTINCT_CHECK_ROWS", 10)
    A = np.zeros((60, 3))
    A[40:] = np.arange(60).reshape(20, 3)  # rows 0..39 identical; 40 (all zero) to 59 each different
    validation.check_distinct_samples([A, sp.csr_matrix(A)], 5)
    B = A[:42].copy()
    B[:20] *= -1.0  # rows 0..19 hold -0.0, rows 20..39 +0.0: the same samples
    with pytest.raises(ValueError, match="only 3 distinct samples"):
        validation.check_distinct_samples([B, A[:42]], 4)


@pytest.fixture(scope="module")
def digit_views():
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).choice(len(y), 200, replace=False)
    X = X[idx]  # integer-valued pixels: exact in every dtype below
    return [X[:, :32], X[:, 32:]]


@pytest.mark.parametrize("kind", ["int64", "uint8", "float32", "csr", "csc-float32"])
def test_dtypes_and_sparse_give_same_labels(digit_views, kind):
    ref = _fit(digit_views, 10).labels_
    convert = {"int64": lambda X: X.astype(np.int64), "uint8": lambda X: X.astype(np.uint8),
               "float32": lambda X: X.astype(np.float32), "csr": sp.csr_matrix,
               "csc-float32": lambda X: sp.csc_matrix(X.astype(np.float32))}[kind]
    inputs = [convert(X) for X in digit_views]
    before = [X.copy() for X in inputs]
    np.testing.assert_array_equal(_fit(inputs, 10).labels_, ref)
    for b, a in zip(before, inputs):  # inputs untouched
        assert a.dtype == b.dtype and type(a) is type(b)
        np.testing.assert_array_equal(a.toarray() if sp.issparse(a) else a, b.toarray() if sp.issparse(b) else b)


# ------------------------------------------------------------------ corrupt files and stores


@pytest.fixture
def small_store(tmp_path, views):
    return MultiViewStore.create(tmp_path / "s.zarr", views, np.arange(N) % 3, chunk_rows=10)


def _chunk_files(store, p):
    return sorted(f for f in (store.path / "views" / str(p) / "c").rglob("*") if f.is_file())


def test_store_missing_chunk_is_an_error(small_store):
    """A deleted chunk file reads as the NaN fill value and is reported, never returned as zeros."""
    os.remove(_chunk_files(small_store, 1)[1])  # rows 10:20: the whole view's rows 0:40 used to be named
    with pytest.raises(ValueError, match=r"view 1 \('view1'\) rows 10:20 hold missing values: a chunk file was "
                                         r"deleted, or NaN was stored; restore the store's files"):
        MultiViewStore(small_store.path).read_view(1)


def test_store_missing_labels_chunk_is_an_error(small_store):
    """Labels used to be filled with 0 (one class) where their chunk file was missing."""
    assert small_store.labels is not None
    for f in (small_store.path / "labels" / "c").rglob("*"):
        if f.is_file():
            os.remove(f)
    with pytest.raises(ValueError, match=r"labels are damaged \(a chunk file was deleted\)"):
        MultiViewStore(small_store.path).labels


def test_store_truncated_chunk_is_a_value_error(small_store):
    f = _chunk_files(small_store, 0)[2]  # rows 20:30: the whole view's rows 0:40 used to be named
    f.write_bytes(f.read_bytes()[:10])
    with pytest.raises(ValueError, match=r"view 0 \('view0'\) rows 20:30 cannot be read, a chunk file is corrupt or "
                                         r"truncated \(.*\); restore the store's files"):
        MultiViewStore(small_store.path).read_view(0)
    assert MultiViewStore(small_store.path).read_rows(0, 30, 40).shape == (10, 4)  # the other chunks read


def test_store_garbage_root_json(small_store):
    (small_store.path / "zarr.json").write_bytes(b"\x00garbage{")
    with pytest.raises(ValueError, match=r"no readable onmsc-dask store at .*s\.zarr"):
        MultiViewStore(small_store.path)
    with pytest.raises(ValueError, match="no readable onmsc-dask store"):
        load(small_store.path)


def test_store_garbage_view_json(small_store):
    (small_store.path / "views" / "0" / "zarr.json").write_text("{garbage")
    with pytest.raises(ValueError, match=r"store at .*s\.zarr is corrupt: JSONDecodeError"):
        MultiViewStore(small_store.path)


def test_store_format_version_changed(small_store):
    zarr.open_group(small_store.path, mode="r+").attrs.update({"format_version": 99})
    with pytest.raises(ValueError, match="written by format version 99, this onmsc-dask reads version 1"):
        MultiViewStore(small_store.path)
    with pytest.raises(ValueError, match="format version 99"):
        ONMSC(3).fit(str(small_store.path))


def test_truncated_mat_v5(tmp_path, views):
    path = tmp_path / "d.mat"
    cell = np.empty((1, 2), dtype=object)
    cell[0, 0], cell[0, 1] = views
    scipy.io.savemat(path, {"X": cell, "y": np.arange(N) % 3})
    data = path.read_bytes()
    for cut in (len(data) - 7, len(data) // 2, 130, 10):
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=r"d\.mat: corrupt, truncated or not a multi-view \.mat"):
            load_mat(path)


def _idx_bytes(array):
    return bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, ">u4").tobytes() + array.tobytes()


def test_truncated_idx(tmp_path):
    path = tmp_path / "t10k-images-idx3-ubyte"
    data = _idx_bytes(np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4))
    cases = {len(data) - 1: "truncated IDX file: dims (2, 3, 4) need 24 bytes, got 23",
             10: "truncated IDX header", 3: "truncated or empty IDX file (no header)"}
    for cut, message in cases.items():
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            read_idx(path)


# ------------------------------------------------------------------ out-of-core: determinism, resume, faults


def _digits3(n=600):
    X, _ = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], X[:n] @ rng.standard_normal((64, 16)), np.sqrt(X[:n])]


def _cluster(n_workers):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=50)
    return cluster, Client(cluster)


def test_fit_store_same_labels_for_chunkings_and_worker_counts(tmp_path):
    views = _digits3()
    from distributed import get_task_stream

    stores = [MultiViewStore.create(tmp_path / f"c{r}.zarr", views, chunk_rows=r) for r in (128, 450)]
    labels = {}
    for n_workers in (1, 2):
        cluster, client = _cluster(n_workers)
        with cluster, client:
            for store in stores:
                # fresh copy of the store per run, so nothing is resumed
                fresh = MultiViewStore.create(tmp_path / f"w{n_workers}-{store.path.name}", views,
                                              chunk_rows=store.row_chunks(0)[0][1])
                with get_task_stream(client) as stream:
                    labels[n_workers, store.path.name] = fit_store(fresh, 10, client=client, **OOC).labels
                # the chunk tasks ran on the cluster's worker processes, all of them
                assert any("_anchor_block" in str(t["key"]) for t in stream.data)
                assert {t["worker"] for t in stream.data} == set(client.scheduler_info()["workers"])
    first = next(iter(labels.values()))
    for key, got in labels.items():
        np.testing.assert_array_equal(got, first, err_msg=str(key))


def _file_state(path):
    return {f: f.stat().st_mtime_ns for f in path.rglob("*") if f.is_file()}


def test_fit_store_rerun_writes_nothing_and_n_clusters_keeps_upstream_files(tmp_path):
    store = MultiViewStore.create(tmp_path / "r.zarr", _digits3(300), chunk_rows=100)
    first = fit_store(store, 10, **OOC)
    state = _file_state(store.path)
    again = fit_store(store, 10, **OOC)
    assert _file_state(store.path) == state, "a resumed run must not rewrite any file of the store"
    assert all(again.timings[s] < first.timings[s] + 0.5 for s in STAGES)
    fit_store(store, 7, **OOC)
    after = _file_state(store.path)
    for stage in ("landmarks", "anchor_graph"):
        files = {f: t for f, t in state.items() if f"stages/{stage}/" in str(f)}
        assert files and all(after.get(f) == t for f, t in files.items()), stage
    assert all(after.get(f) != t for f, t in state.items() if "stages/embeddings/" in str(f))
    assert store.stages()["embeddings"]["n_clusters"] == 7


@pytest.mark.parametrize("interrupted", ["embeddings", "fusion"])
def test_incomplete_stage_is_recomputed_on_resume(tmp_path, interrupted):
    """A stage left with complete=False (a run killed while writing it) is recomputed on the rerun; the
    upstream stages are reused and the labels equal the undisturbed run's."""
    store = MultiViewStore.create(tmp_path / "i.zarr", _digits3(300), chunk_rows=100)
    ref = fit_store(store, 10, **OOC).labels
    zarr.open_group(store.path, mode="r+")[f"stages/{interrupted}"].attrs.update({"complete": False})
    resumed = fit_store(store, 10, **OOC)
    assert resumed.computed_stages[0] == interrupted
    np.testing.assert_array_equal(resumed.labels, ref)


def test_run_interrupted_in_fusion_resumes_there(tmp_path, monkeypatch):
    """A k=7 run that crashes in the fusion stage, after a complete k=10 run: the rerun keeps the k=10
    landmarks/anchor graph and the k=7 embeddings it had written, redoes fusion and labels, and matches a
    fresh k=7 run."""
    import onmsc_dask.outofcore as oc

    views = _digits3(300)
    store = MultiViewStore.create(tmp_path / "i.zarr", views, chunk_rows=100)
    fit_store(store, 10, **OOC)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("simulated interruption")

    with monkeypatch.context() as m:
        m.setattr(oc, "fuse", crash)  # the fusion stage's call
        with pytest.raises(KeyboardInterrupt):
            fit_store(store, 7, **OOC)
    resumed = fit_store(store, 7, **OOC)
    assert resumed.computed_stages == ["fusion", "labels"]
    fresh = fit_store(MultiViewStore.create(tmp_path / "f.zarr", views, chunk_rows=100), 7, **OOC)
    np.testing.assert_array_equal(resumed.labels, fresh.labels)


def test_interrupted_create_is_not_a_store(tmp_path, views):
    store = MultiViewStore.create(tmp_path / "x.zarr", views)
    attrs = zarr.open_group(store.path, mode="r+").attrs
    attrs.update({"format": None})  # create writes the format attribute last
    with pytest.raises(ValueError, match="interrupted create"):
        MultiViewStore(store.path)


def test_worker_killed_mid_run_completes_with_same_labels(tmp_path, monkeypatch):
    monkeypatch.setattr(outofcore, "Z_BLOCK_ROWS", 100)  # the embeddings stage's Z in 10 blocks a view
    views = _digits3(1000)
    ref_store = MultiViewStore.create(tmp_path / "ref.zarr", views, chunk_rows=100)
    store = MultiViewStore.create(tmp_path / "kill.zarr", views, chunk_rows=100)
    cluster, client = _cluster(2)
    with cluster, client:
        ref = fit_store(ref_store, 10, client=client, **OOC).labels
        out = {}

        def run():
            try:
                out["result"] = fit_store(store, 10, client=client, **OOC)
            except BaseException as exc:  # noqa: BLE001 -- reported by the assertion below
                out["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        # Kill once both workers hold row blocks of Z in the embeddings stage (deterministic point).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and thread.is_alive():
            holders = [w for w, keys in client.has_what().items() if any("_z_rows" in str(k) for k in keys)]
            if len(holders) == 2:
                break
            time.sleep(0.02)
        assert len(holders) == 2, "the embeddings stage was not reached"
        pid = client.run(os.getpid, workers=[holders[0]])[holders[0]]
        os.kill(pid, signal.SIGKILL)
        thread.join(120)
        client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            resumed = fit_store(store, 10, client=client, **OOC)  # a rerun always resumes and finishes
        np.testing.assert_array_equal(resumed.labels, ref)
        assert "error" not in out, f"run failed after a worker was killed: {out.get('error')!r}"
        np.testing.assert_array_equal(out["result"].labels, ref)


@pytest.mark.parametrize("dims", [(2**31, 2**31, 7), (2**32 - 1, 2**32 - 1, 2**32 - 1)])
def test_idx_header_claiming_a_huge_size_is_a_value_error(tmp_path, dims):
    """Found by fuzzing: a corrupt header with huge dims used to raise OverflowError / MemoryError."""
    import struct

    from onmsc_dask.io import read_idx

    path = tmp_path / "huge-idx1-ubyte"
    path.write_bytes(b"\0\0\x08\x03" + struct.pack(">III", *dims) + bytes(100))
    with pytest.raises(ValueError, match="truncated IDX file"):
        read_idx(path)


def test_fit_store_rejects_bad_views_naming_them_before_any_stage(tmp_path):
    """Out of core, the landmark stage's single read of each chunk checks it: infinite values are a ValueError
    naming the view, and a view constant over all chunks is left out with a warning naming it (the chain then runs
    on the others: tests/test_api.py); a bad k fails before anything is computed."""
    views = _digits3(300)
    store = MultiViewStore.create(tmp_path / "inf.zarr", views, view_names=["a", "b", "c"], chunk_rows=100)
    zarr.open_array(store.path / "views" / "1", mode="r+")[207, 3] = np.inf
    with pytest.raises(ValueError, match=r"view 1 \('b'\): contains infinite values \(e.g. in rows \[207\]\)"):
        fit_store(store, 10, **OOC)
    assert store.stages() == {}
    constant = [views[0], np.full((300, 4), 2.5), views[2]]
    store = MultiViewStore.create(tmp_path / "const.zarr", constant, chunk_rows=100)
    with pytest.warns(UserWarning, match=r"view 1 \('view1'\): is constant.*it is left out"):
        assert fit_store(store, 10, **OOC).view_weights[1] == 0
    store = MultiViewStore.create(tmp_path / "const.zarr", constant, chunk_rows=100, overwrite=True)
    for k in (1, 300):
        with pytest.raises(ValueError, match="n_clusters"):
            fit_store(store, k, **OOC)
    assert store.stages() == {}


def test_fit_store_landmarks_equal_in_memory_select_landmarks(tmp_path):
    """With a landmark sample smaller than n the chunked sample is the in-memory one, for both inits."""
    from onmsc_dask.graph import select_landmarks

    views = _digits3(300)
    store = MultiViewStore.create(tmp_path / "l.zarr", views, chunk_rows=70)
    seeds = [int(s) for s in np.random.SeedSequence(0).generate_state(len(views) + 2)]
    for init in ("random", "k-means++"):
        fit_store(store, 10, landmark_init=init, landmark_sample=120, n_landmarks=40, random_state=0, n_init=3)
        metrics = store.read_result("landmarks", "metrics")["metrics"]
        for p, X in enumerate(views):
            np.testing.assert_allclose(store.read_result("landmarks", f"L{p}"),
                                       select_landmarks(X.astype(np.float64), 40, seeds[p], 120, init, metrics[p]),
                                       atol=1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_fewer_distinct_samples_than_clusters_is_an_error_out_of_core(tmp_path, monkeypatch, sparse):
    """fit_store checks distinct samples too (it used to split 300 copies of 2 samples into 3 clusters): the
    first rows on the client, then chunk by chunk, so a distinct sample in the last chunk still counts (the run then
    passes that check and stops at the next one: view 0 has 2 distinct rows, so 2 landmarks, too few for k = 3)."""
    from onmsc_dask import outofcore

    monkeypatch.setattr(outofcore, "DISTINCT_CHECK_ROWS", 10)
    D = np.repeat(np.eye(2), 150, axis=0)
    wrap = sp.csr_matrix if sparse else np.asarray
    store = MultiViewStore.create(tmp_path / "two.zarr", [wrap(D), 3 * D], chunk_rows=100)
    with pytest.raises(ValueError, match=r"only 2 distinct samples \(rows identical in every view\), fewer than "
                                         "n_clusters=3"):
        fit_store(store, 3, n_landmarks=20, random_state=0)
    assert store.stages() == {}  # nothing was computed
    E = 3 * D
    E[-1] = 5.0  # a third sample, in the last chunk of the second view only
    with pytest.raises(ValueError, match=r"view 0 \('view0'\): only 2 distinct landmarks"):
        fit_store(MultiViewStore.create(tmp_path / "three.zarr", [wrap(D), E], chunk_rows=100), 3, n_landmarks=20,
                  random_state=0)


def test_csr_view_with_duplicate_entries_is_the_same_view(tmp_path):
    """A CSR matrix holding a count as two entries (c/2 + c/2) is the same matrix, but the metric rule read its
    non-integer entries and chose cosine instead of counts, changing the labels."""
    rng = np.random.default_rng(0)
    counts = sp.csr_matrix(rng.poisson(0.05, (90, 400)) * np.repeat(np.eye(3), 30, 0).repeat(134, 1)[:, :400]
                           + rng.poisson(0.02, (90, 400)))
    split = sp.csr_matrix((np.repeat(counts.data / 2, 2), np.repeat(counts.indices, 2), 2 * counts.indptr),
                          shape=counts.shape)
    assert abs(split - counts).max() == 0 and split.nnz == 2 * counts.nnz
    other = rng.normal(size=(90, 5)) + np.repeat(np.eye(3, 5) * 4, 30, 0)
    ref = ONMSC(3, random_state=0).fit([counts, other])
    got = ONMSC(3, random_state=0).fit([split, other])
    assert ref.metric_ == got.metric_ == ["counts", "euclidean"]
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    store = MultiViewStore.create(tmp_path / "s.zarr", [split, other])  # stored with one entry per position
    assert store.read_rows(0, 0, 90).nnz == counts.nnz
    assert split.nnz == 2 * counts.nnz  # the caller's matrix keeps its entries


def test_single_feature_view_is_euclidean(tmp_path):
    """A one-column non-negative view got cosine: every row became [1], a constant view that took the largest
    weight in memory, and out of core an error about "1 distinct landmarks" for 600 distinct values."""
    rng = np.random.default_rng(1)
    c = np.repeat(np.arange(3), 200)
    A = rng.normal(size=(600, 5)) * 1.5 + c[:, None] * 2
    B = c[:, None] * 5.0 + rng.random((600, 1)) + 1  # separates the clusters on its own
    est = ONMSC(3, random_state=0).fit([A, B])
    assert est.metric_ == ["euclidean", "euclidean"] and accuracy(c, est.labels_) > 0.99
    store = MultiViewStore.create(tmp_path / "s.zarr", [A, B], c)
    result = fit_store(store, 3, n_landmarks=60, random_state=0)
    assert result.metrics == ["euclidean", "euclidean"] and accuracy(c, result.labels) > 0.95  # measured 0.972
    with pytest.raises(ValueError, match=r"view 1: metric 'cosine' compares directions, and a single feature"):
        ONMSC(3, metric="cosine").fit([A, B])


def test_counts_metric_on_negative_values_is_an_error_naming_the_view(tmp_path):
    """log(1 + x) of values below -1 gave NaN and an error from scikit-learn that named no view."""
    rng = np.random.default_rng(0)
    good, bad = rng.integers(0, 5, (60, 4)).astype(float), rng.normal(size=(60, 3)) * 3
    with pytest.raises(ValueError, match=r"view 1: metric 'counts' \(cosine on log\(1 \+ count\)\) needs "
                                         r"non-negative values, found -"):
        ONMSC(3, metric="counts").fit([good, bad])
    store = MultiViewStore.create(tmp_path / "s.zarr", [good, bad], view_names=["words", "signed"])
    with pytest.raises(ValueError, match=r"view 1 \('signed'\): metric 'counts'.*non-negative values"):
        fit_store(store, 3, n_landmarks=20, metric="counts", random_state=0)
    assert ONMSC(3, metric=["counts", "euclidean"], random_state=0).fit([good, bad]).labels_.shape == (60,)
