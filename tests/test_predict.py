"""ONMSC.predict / transform of new samples (extend.py): exact for anchor graphs, a landmark regression for kNN."""
import pickle
import warnings

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_blobs
from sklearn.exceptions import NotFittedError

from onmsc_dask import extend
from onmsc_dask.api import INTERMEDIATE, ONMSC
from onmsc_dask.metrics import evaluate
from onmsc_dask.store import MultiViewStore

ANCHOR = dict(embedding="anchor", n_landmarks=60, n_init=3, random_state=0)


def _views(n: int = 700) -> tuple[list[np.ndarray], np.ndarray]:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], X[:n] @ rng.standard_normal((64, 16)), np.sqrt(X[:n])], y[:n]


@pytest.fixture(scope="module")
def anchor_fit():
    views, y = _views()
    return ONMSC(10, **ANCHOR).fit([X[:600] for X in views]), views, y


@pytest.mark.parametrize("refine", [True, False])
def test_anchor_extension_is_exact_on_the_fitted_samples(refine):
    views, _ = _views(600)
    model = ONMSC(10, **ANCHOR, refine=refine).fit(views)
    np.testing.assert_allclose(model.transform(views), model.embedding_, atol=1e-8)
    np.testing.assert_array_equal(model.predict(views), model.labels_)


def test_predict_gives_the_fitted_rows_their_labels_when_the_refinement_stops_before_a_fixed_point():
    """The label refinement stops once a step gains at most tol, with a sample that would still move: predict, one
    step against the final clusters, gave that fitted row (1220 of 3000 here) another label than labels_. Predict now
    takes the step the labels came from (assign.refine_labels' basis). Found by a new-user trial."""
    rng = np.random.default_rng(0)
    X, y = make_blobs(n_samples=3000, centers=5, n_features=20, random_state=3, cluster_std=6.0)
    counts = rng.poisson(rng.gamma(0.3, 1.0, size=(5, 2000))[y] * 0.05).astype(np.int32)
    views = [X[:, :10], np.abs(X[:, 10:]).astype(np.float32), sp.csr_matrix(counts), (X[:, :5] > 0).astype(np.int8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sparse counts' and the binary view's notes
        model = ONMSC(5, embedding="anchor", random_state=0).fit(views)
    assert len(model.refinement_objective_) > 1  # refined
    np.testing.assert_array_equal(model.predict(views), model.labels_)


def test_new_samples_score_like_the_fitted_ones(anchor_fit):
    model, views, y = anchor_fit
    new = model.predict([X[600:] for X in views])
    assert new.shape == (100,) and new.dtype == np.int64
    fitted, held_out = evaluate(y[:600], model.labels_)["acc"], evaluate(y[600:], new)["acc"]
    assert held_out > fitted - 0.1, (fitted, held_out)


def test_numpy_sparse_dask_and_store_inputs_agree(anchor_fit, tmp_path):
    model, views, y = anchor_fit
    new = [X[600:] for X in views]
    expected, H = model.predict(new), model.transform(new)
    before = [X.copy() for X in new]
    out = model.predict([sp.csr_matrix(X) for X in new])
    np.testing.assert_array_equal(out, expected)
    lazy = model.predict([da.from_array(X, chunks=(30, -1)) for X in new])
    assert isinstance(lazy, da.Array) and lazy.numblocks == (4,)
    np.testing.assert_array_equal(lazy.compute(), expected)
    lazy_H = model.transform([da.from_array(new[0], chunks=(45, -1)), new[1], new[2]])
    assert isinstance(lazy_H, da.Array) and lazy_H.shape == H.shape
    np.testing.assert_allclose(lazy_H.compute(), H, atol=1e-12)
    store = MultiViewStore.create(tmp_path / "new.zarr", new, chunk_rows=32)
    np.testing.assert_array_equal(model.predict(store), expected)
    np.testing.assert_array_equal(model.predict(str(tmp_path / "new.zarr")), expected)
    for X, Y in zip(new, before):
        np.testing.assert_array_equal(X, Y)  # the input is not modified


def test_a_store_is_opened_once_per_process_for_its_row_chunks(anchor_fit, tmp_path, monkeypatch):
    """Each row chunk's task opened the store anew (every view's metadata read again; on an object store, the bucket
    checked); now once per process for a store's content. A store written again at the same path is read anew."""
    from onmsc_dask import store as store_module

    model, views, _ = anchor_fit
    new = [X[600:] for X in views]
    store = MultiViewStore.create(tmp_path / "new.zarr", new, chunk_rows=10)
    opened = []
    init = MultiViewStore.__init__
    monkeypatch.setattr(MultiViewStore, "__init__", lambda self, *a, **kw: opened.append(a) or init(self, *a, **kw))
    store_module._opened.cache_clear()
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(model.predict(store), model.predict(new))
        assert len(opened) == 2, opened  # the tasks' one store, and the check that it was not written again meanwhile
        MultiViewStore.create(tmp_path / "new.zarr", [X[::-1] for X in new], chunk_rows=25, overwrite=True)
        np.testing.assert_array_equal(model.predict(str(tmp_path / "new.zarr")), model.predict(new)[::-1])
        with pytest.raises(ValueError, match=r"new\.zarr: written again \(MultiViewStore\.create over it\) since it "
                                             r"was opened or while it was read; run again on the store as it is now "
                                             r"\(open it again\)"):
            model.predict(store)  # opened before: its chunks of 10 rows read a store of 25-row chunks as damaged


def test_inputs_on_a_cluster_send_no_large_graph(anchor_fit, tmp_path):
    """The model (landmarks and maps) goes to the workers once: scattered for a store's rows, one key of the lazy
    graph of dask views (so a worker lost with it is run again), not inside each task."""
    from distributed import Client, LocalCluster

    model, views, _ = anchor_fit
    store = MultiViewStore.create(tmp_path / "big.zarr", [np.tile(X, (40, 1)) for X in views], chunk_rows=4000)
    expected = np.tile(model.predict(views), 40)
    ext_bytes = len(pickle.dumps(model.extension_))
    assert store.view_dask(0).numblocks[0] > 2  # a model in each task would be a graph of several models
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster), warnings.catch_warnings(), \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": f"{3 * ext_bytes // 2}B"}):
        warnings.simplefilter("error")  # "Sending large graph" is a UserWarning
        lazy = model.predict([store.view_dask(p) for p in range(3)])
        np.testing.assert_array_equal(lazy.compute(), expected)
        np.testing.assert_array_equal(model.predict(store), expected)


def test_numpy_rows_go_in_equal_blocks_one_thread_per_core(anchor_fit, monkeypatch):
    """numpy input is split into equal row blocks of at most BLOCK_ROWS, as many as a multiple of the threads (one per
    core, each with a one-thread BLAS), covering every row once; the labels do not depend on the blocks."""

    for n, threads in [(1, 2), (10000, 2), (60000, 2), (8192, 1), (5, 4), (20000, 3)]:
        blocks = extend._row_blocks(n, threads)
        sizes = [e - s for s, e in blocks]
        assert blocks[0][0] == 0 and blocks[-1][1] == n and all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        assert max(sizes) <= extend.BLOCK_ROWS and max(sizes) - min(sizes) <= 1
        assert len(blocks) % threads == 0 or len(blocks) == n
    model, views, _ = anchor_fit
    whole = model.predict(views)
    monkeypatch.setattr(extend, "BLOCK_ROWS", 64)
    np.testing.assert_array_equal(model.predict(views), whole)
    np.testing.assert_allclose(model.transform(views), model.transform([X[:350] for X in views]).tolist()
                               + model.transform([X[350:] for X in views]).tolist(), atol=1e-12)


def test_numpy_row_blocks_run_with_a_one_thread_blas(anchor_fit, monkeypatch):
    """predict of numpy rows (called from the main thread) runs each row block with the BLAS limited to one thread,
    and leaves the limits as they were."""
    from threadpoolctl import threadpool_info


    model, views, _ = anchor_fit
    blas = lambda: [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]  # noqa: E731
    before, seen, block = blas(), [], extend._block
    monkeypatch.setattr(extend, "_block", lambda *a, **kw: seen.append(blas()) or block(*a, **kw))
    model.predict([X[600:] for X in views])
    assert seen and all(threads == [1] * len(before) for threads in seen) and blas() == before


CONCURRENT_CALLS = """
import json
import threading
import numpy as np
from sklearn.datasets import load_digits, make_blobs
from threadpoolctl import ThreadpoolController
from onmsc_dask import extend
from onmsc_dask.api import ONMSC

X = load_digits().data[:700]
views, out = [X, X @ np.random.default_rng(0).standard_normal((64, 16))], {}
blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
# the fit too in a thread: OpenBLAS ignores other threads' settings once the main thread has set its threads
fit = threading.Thread(target=lambda: out.update(model=ONMSC(10, embedding="anchor", n_landmarks=60, n_init=3,
                                                             random_state=0).fit([V[:600] for V in views])))
fit.start(); fit.join()
# two BLAS threads before the calls, set from a thread too
reset = threading.Thread(target=lambda: [c.set_num_threads(2) for c in blas])
reset.start(); reset.join()
model, new, before = out["model"], [V[600:] for V in views], [c.get_num_threads() for c in blas]
started, inside, first_done, block = threading.Event(), threading.Event(), threading.Event(), extend._block

def ordered(ext, method, *blocks, **kw):  # predict enters first; transform is called while it runs
    if method == "predict":
        started.set(); inside.wait(2)
    return block(ext, method, *blocks, **kw)

def run(method):
    if method == "transform":
        started.wait(2)
        inside.set()
    out[method] = getattr(model, method)(new).shape
    if method == "predict":
        first_done.set()

extend._block = ordered
threads = [threading.Thread(target=run, args=(m,)) for m in ("predict", "transform")]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps([before, [c.get_num_threads() for c in blas], out.get("predict"), out.get("transform")]))
"""


def test_concurrent_predicts_leave_the_blas_threads_as_they_were(tmp_path):
    """predict / transform of numpy rows called from two threads at once (a web server, a threaded scheduler), the
    later call entering while the earlier runs: once both return, the BLAS has the threads it had before, not the
    one thread of the later call's limit restored last (run in a fresh process, whose main thread sets no limit)."""
    import json
    import subprocess
    import sys

    script = tmp_path / "concurrent_calls.py"
    script.write_text(CONCURRENT_CALLS)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    before, after, predicted, transformed = json.loads(run.stdout.strip().splitlines()[-1])
    assert predicted == [100] and transformed == [100, 10], run.stderr  # both calls returned (a call failing in its
    # thread only printed its traceback)
    if max(before) == 1:
        pytest.skip("the BLAS runs one thread here: a limit of one cannot be left behind")
    assert after == before


FITS = """
import json
import numpy as np
from threadpoolctl import threadpool_info
from onmsc_dask.api import ONMSC
from onmsc_dask.baselines import SingleBestView
from onmsc_dask.datasets import load_digits_views

blas = lambda: [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
views, seen = [v[:500] for v in load_digits_views()[0]], []
before = blas()
fits = [ONMSC(5, random_state=0).fit(views) for _ in range(4)]
seen.append(blas())
SingleBestView(5, random_state=0).fit(views)
fits[0].predict(views)
seen.append(blas())
print(json.dumps([before, seen, all(np.array_equal(f.embedding_, fits[0].embedding_) for f in fits)]))
"""


def test_fits_leave_the_processs_blas_threads_as_they_found_them(tmp_path):
    """Threads of the local scheduler ran scikit-learn's k-means side by side, each restoring the BLAS limit another
    had set: a fit of 500 digits left the process on one BLAS thread (about one fit in two, a trial), and later fits
    computed with another thread count than earlier ones (embeddings bitwise different). Run in a fresh process,
    whose main thread sets no limit (a limit set there shields the fits from the race)."""
    import json
    import subprocess
    import sys

    script = tmp_path / "fits.py"
    script.write_text(FITS)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    before, seen, same = json.loads(run.stdout.strip().splitlines()[-1])
    if max(before) == 1:
        pytest.skip("the BLAS runs one thread here: a limit of one cannot be left behind")
    assert seen == [before, before] and same


def test_knn_extension_agrees_with_the_fit():
    views, y = _views(600)
    model = ONMSC(10, n_init=3, random_state=0).fit(views)
    assert model.embedding_solver_ == "exact"
    assert np.mean(model.predict(views) == model.labels_) >= 0.9  # 0.945 (docs/predict.md)
    H = model.transform(views)  # the same subspace as H*: small principal angles
    cosines = np.linalg.svd(model.embedding_.T @ (H / np.linalg.norm(H, axis=0)), compute_uv=False)
    assert cosines.min() > 0.9, cosines


def test_bad_new_samples_are_named_errors(anchor_fit):
    model, views, _ = anchor_fit
    new = [X[600:] for X in views]
    with pytest.raises(ValueError, match="got 2 views, the model was fitted on 3"):
        model.predict(new[:2])
    with pytest.raises(ValueError, match=r"view 1: has shape \(100, 15\), expected \(n, 16\)"):
        model.predict([new[0], new[1][:, :15], new[2]])
    bad = new[2].copy()
    bad[7, 3] = np.nan
    with pytest.raises(ValueError, match="view 2: contains NaN"):
        model.predict([new[0], new[1], bad])
    tables = [pd.DataFrame(X, index=range(600, 700)) for X in new]
    assert (model.predict(tables) == model.predict(new)).all()
    with pytest.raises(ValueError, match=r"view 2: its row index differs from view 0's \(row 0: 699 here, 600 "
                                         r"there\)"):
        model.predict(tables[:2] + [tables[2].iloc[::-1]])
    as_objects = new[2].astype(object)  # numbers as objects are taken, text among them is not, None is missing
    assert (model.predict([new[0], new[1], as_objects]) == model.predict(new)).all()
    as_objects[4, 1] = "0.5"
    with pytest.raises(ValueError, match=r"view 2: holds text in column 1 \(e\.g\. '0\.5', in rows \[4\]\)"):
        model.predict([new[0], new[1], as_objects])
    as_objects[4, 1] = None
    with pytest.raises(ValueError, match=r"view 2: contains missing values \(None, pd\.NA or pd\.NaT; e\.g\. in rows \[4\]\)"):
        model.predict([new[0], new[1], as_objects])
    masked = da.from_array(new[1], chunks=50)
    masked = masked[masked[:, 0] > -np.inf]  # NaN chunk sizes: used to fail as "has nan rows, expected nan"
    with pytest.raises(ValueError, match=r"view 1: has unknown chunk sizes; call compute_chunk_sizes\(\)"):
        model.predict([new[0], masked, new[2]])
    columns = da.from_array(new[1].T, chunks=(4, 50))
    columns = columns[columns[:, 0] > -np.inf].T  # unknown columns: used to fail as "has shape (100, nan)"
    with pytest.raises(ValueError, match=r"view 1: has unknown chunk sizes"):
        model.predict([new[0], columns, new[2]])
    with pytest.raises(NotFittedError):
        ONMSC(10).predict(new)
    early = ONMSC(10, fusion="early", n_init=2, random_state=0)
    with pytest.raises(ValueError, match="^transform needs a late-fusion fit"):  # before fitting (it fitted, then
        early.fit_transform([X[:200] for X in views])                           # failed)
    assert not hasattr(early, "labels_")
    early.fit([X[:200] for X in views])
    for method in (early.predict, early.transform):  # the message spoke of landmarks, of no use to early fusion
        with pytest.raises(ValueError, match=r"^(predict|transform) needs a late-fusion fit \(fusion='late'\): early "
                                             "fusion learns one affinity of the fitted samples, with no extension"):
            method(new)


def test_fitted_model_keeps_intermediates_only_on_request(anchor_fit):
    """The view graphs, H_p^(o) and F stay only with keep_intermediate=True; predict does not need them."""
    model, views, _ = anchor_fit
    assert not set(INTERMEDIATE) & set(vars(model))
    kept = ONMSC(10, **ANCHOR, keep_intermediate=True).fit([X[:600] for X in views])
    assert [G.shape for G in kept.view_graphs_] == [(600, 60)] * 3
    assert kept.view_embeddings_.shape == (3, 2, 600, 10) and kept.average_embedding_.shape == (600, 10)
    np.testing.assert_array_equal(kept.labels_, model.labels_)
    assert len(pickle.dumps(model)) < len(pickle.dumps(kept)) / 2
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict([X[600:] for X in views]), model.predict([X[600:] for X in views]))
    np.testing.assert_array_equal(model.n_features_in_, [64, 16, 64])


def test_pickle_holds_an_anchor_fits_shared_h_once():
    """An anchor fit's view_embeddings_ (every order a view of one H per view) is pickled as that H, once, not once
    per order, and unpickled as the same broadcast view; a kNN fit's distinct orders are pickled as they are."""
    views, _ = _views(600)
    for kw in (dict(ANCHOR, order=3), dict(n_init=3, random_state=0)):
        model = ONMSC(10, keep_intermediate=True, **kw).fit(views)
        H = model.view_embeddings_
        again = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(again.view_embeddings_, H)
        assert model.view_embeddings_ is H  # pickling leaves the model as it is
        without = pickle.loads(pickle.dumps(model))
        del without.view_embeddings_
        H_bytes = len(pickle.dumps(model)) - len(pickle.dumps(without))
        if kw.get("embedding") == "anchor":
            assert np.shares_memory(again.view_embeddings_[:, 0], again.view_embeddings_[:, 2])
            assert H_bytes < 1.05 * H[:, 0].nbytes, (H_bytes, H.nbytes)
        else:
            assert H_bytes > H.nbytes and not np.shares_memory(H[:, 0], H[:, 1])
        np.testing.assert_array_equal(again.predict(views), model.predict(views))


def test_fit_on_a_cluster_sends_the_views_once_not_in_the_graph():
    """ONMSC.fit scatters each in-memory view to the workers: no task graph carries one (threshold below a view)."""
    from distributed import Client, LocalCluster

    views, y = _views(600)
    expected = ONMSC(10, **ANCHOR).fit(views).labels_
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster), warnings.catch_warnings(), \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": f"{views[1].nbytes // 2}B"}):
        warnings.simplefilter("error", UserWarning)
        np.testing.assert_array_equal(ONMSC(10, **ANCHOR).fit(views).labels_, expected)


def test_a_view_left_out_of_the_fit_is_taken_and_checked_not_used():
    """A constant view left out of the fit (left_out_views_): predict and transform still take one view per input
    view, check the left-out one (width, finite values), and give what the fit on the other views gives."""
    views, _ = _views(500)
    constant = np.full((500, 5), 1.5)
    with pytest.warns(UserWarning, match="view 1: is constant"):
        model = ONMSC(10, **ANCHOR).fit([views[0][:400], constant[:400], views[2][:400]])
    reference = ONMSC(10, **ANCHOR).fit([views[0][:400], views[2][:400]])
    assert model.left_out_views_.tolist() == [1] and model.extension_.views[1] is None
    new = [views[0][400:], np.random.default_rng(0).random((100, 5)), views[2][400:]]  # any finite values in view 1
    np.testing.assert_array_equal(model.predict(new), reference.predict([new[0], new[2]]))
    np.testing.assert_allclose(model.transform(new), reference.transform([new[0], new[2]]))
    with pytest.raises(ValueError, match=r"view 1: has shape \(100, 3\), expected \(n, 5\)"):
        model.predict([new[0], new[1][:, :3], new[2]])
    new[1][7, 2] = np.nan
    with pytest.raises(ValueError, match="view 1: contains NaN"):
        model.predict(new)


def test_predict_errors_name_the_views_as_the_fit_did(monkeypatch):
    """The fit's view_names are kept (view_names_): predict's errors used to say "view 1:" where the fit's said
    "view 1 ('shape'):"."""
    rng = np.random.default_rng(0)
    views = [rng.normal(size=(300, 5)), rng.normal(size=(300, 4))]
    model = ONMSC(3, random_state=0).fit(views, view_names=["colour", "shape"])
    assert model.view_names_ == ["colour", "shape"] and ONMSC(3, random_state=0).fit(views).view_names_ is None
    bad = views[1].copy()
    bad[3, 1] = np.nan
    for new in ([views[0], bad], [da.from_array(views[0], chunks=100), da.from_array(bad, chunks=100)]):
        with pytest.raises(ValueError, match=r"^view 1 \('shape'\): contains NaN values \(e\.g\. in rows \[3\]\)"):
            np.asarray(model.predict(new))
    monkeypatch.setattr(extend, "_threads", lambda: 4)  # numpy rows in 4 blocks whatever the cores
    late = views[1].copy()
    late[250, 0] = np.inf  # past the first row block or dask chunk: its rows used to be numbered within the block
    for new in ([views[0], late], [da.from_array(views[0], chunks=100), da.from_array(late, chunks=100)]):
        with pytest.raises(ValueError, match=r"^view 1 \('shape'\): contains infinite values \(e\.g\. in rows \[250\]\)"):
            np.asarray(model.predict(new))
    with pytest.raises(ValueError, match=r"^view 1 \('shape'\): has shape \(300, 3\), expected \(n, 4\)"):
        model.predict([views[0], views[1][:, :3]])
    with pytest.warns(UserWarning, match=r"view 1 \('flat'\): is constant"):
        kept = ONMSC(3, random_state=0).fit([views[0], np.ones((300, 2)), views[1]],
                                            view_names=["colour", "flat", "shape"])
    assert kept.view_names_ == ["colour", "flat", "shape"]  # of the input views, the left-out one too
    with pytest.raises(ValueError, match=r"^view 2 \('shape'\): contains NaN values"):
        kept.predict([views[0], np.ones((300, 2)), bad])


@pytest.mark.parametrize("embedding", ["exact", "anchor"])
def test_negative_values_in_a_counts_view_are_a_named_error(embedding, tmp_path):
    """A view fitted with the counts metric (log(1 + count)): a negative value in new rows gave NaN from transform and
    label 0 from predict, silently; now an error naming the view and the rows, for numpy, sparse, dask and a store."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    P = rng.dirichlet(np.full(400, 0.1), size=3)
    words = np.vstack([rng.multinomial(15, P[c]) for c in y]).astype(float)
    dense = rng.normal(size=(600, 5)) + np.eye(3, 5)[y] * 4
    model = ONMSC(3, embedding=embedding, random_state=0).fit([dense, words], view_names=["dense", "words"])
    assert model.metric_[1] == "counts"
    new = words[:60].copy()
    new[[7, 12], 0] = -2.0
    message = (r"view 1 \('words'\): has negative values \(e.g. in rows \[7, 12\]\), but the fitted view's metric "
               r"'counts' \(cosine on log\(1 \+ count\)\) needs counts of 0 or more")
    for given in (new, sp.csr_matrix(new), da.from_array(new, chunks=(20, -1))):
        for method in (model.predict, model.transform):
            with pytest.raises(ValueError, match=message):
                out = method([dense[:60], given])
                out.compute() if hasattr(out, "compute") else out
    store = MultiViewStore.create(tmp_path / "new.zarr", [dense[:60], new], view_names=["dense", "words"])
    with pytest.raises(ValueError, match=message):
        model.predict(store)
    assert model.predict([dense[:60], words[:60]]).shape == (60,)  # counts of 0 or more: labels as before


def test_pandas_columns_are_recorded_and_checked_in_predict():
    """A fit on pandas tables records each view's column names (``feature_names_in_``, None for a view without
    string names); predict and transform refuse a table whose columns are reordered or renamed, naming the view (its
    values used to be taken by position: 1.7% of the labels changed, silently). Arrays without names are taken, with
    a warning (silent before: found by a user trial)."""
    views, _ = _views(400)
    tables = [pd.DataFrame(views[0], columns=[f"px{j}" for j in range(views[0].shape[1])]), views[1],
              pd.DataFrame(views[2])]  # named columns, an array, a table of integer column names
    model = ONMSC(10, embedding="anchor", n_landmarks=60, random_state=0).fit(tables)
    assert model.feature_names_in_[0].tolist() == list(tables[0].columns)
    assert model.feature_names_in_[1:] == [None, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fit's own kinds of views: no warning
        labels = model.predict(tables)
    # arrays where the fit had names, and names where it had none: taken by position, with scikit-learn's warning
    with pytest.warns(UserWarning, match=r"^view 0: has no column names, but the fit's had; its columns are taken "
                                         "by position$") as said:
        np.testing.assert_array_equal(model.predict(views), labels)
    assert said[0].filename == __file__  # the caller's line, as scikit-learn's (it named ONMSC.predict)
    named = pd.DataFrame(views[1], columns=[f"c{j}" for j in range(views[1].shape[1])])
    with pytest.warns(UserWarning, match=r"^view 1: has column names, but the fit's had none"):
        np.testing.assert_array_equal(model.predict([tables[0], named, tables[2]]), labels)
    reordered = tables[0][tables[0].columns[::-1]]
    for method in ("predict", "transform"):
        with pytest.raises(ValueError, match=r"^view 0: its columns differ from the fit's \(the same names in another "
                                             r"order: column 0 is 'px63', was 'px0'\); give the fitted columns in their "
                                             r"order, X\[model.feature_names_in_\[0\]\]$"):
            getattr(model, method)([reordered, *tables[1:]])
    with pytest.raises(ValueError, match=r"view 0: its columns differ from the fit's \(other names: column 0 is 'PX0'"):
        model.predict([tables[0].rename(columns=str.upper), *tables[1:]])
    with pytest.raises(ValueError, match=r"view 0: its columns differ from the fit's"):  # views from a generator too
        model.predict(X for X in [reordered, *tables[1:]])
    with pytest.raises(ValueError, match=r"view 0: its columns differ from the fit's"):  # or dict values
        model.predict(dict(enumerate([reordered, *tables[1:]])).values())
    repeated = reordered.set_axis(["px0", "px0", *reordered.columns[2:]], axis=1)
    with pytest.raises(ValueError, match=r"view 0: its columns differ from the fit's \(other names"):
        model.predict([repeated, *tables[1:]])  # names that repeat are checked too
    twice = [tables[0].set_axis(["a", "a", *tables[0].columns[2:]], axis=1), *tables[1:]]  # names that repeat
    fitted = ONMSC(10, embedding="anchor", n_landmarks=60, random_state=0).fit(twice)
    assert fitted.feature_names_in_ == [None] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its own tables: no "has column names, but the fit's had none"
        fitted.predict(twice)
    np.testing.assert_array_equal(model.predict([reordered[model.feature_names_in_[0]], *tables[1:]]), labels)
    assert ONMSC(10, embedding="anchor", n_landmarks=60, random_state=0).fit(views).feature_names_in_ == [None] * 3


def test_a_store_keeps_the_column_names_of_pandas_tables_for_predict(tmp_path):
    """MultiViewStore.create records the column names of each pandas view (it dropped them, so a fit on the store had
    none and predict took reordered tables by position with a warning); a fit on the store gets them as
    feature_names_in_, its copy keeps them, and a store whose attribute does not fit its views is an error."""
    views, _ = _views(300)
    tables = [pd.DataFrame(views[0], columns=[f"px{j}" for j in range(views[0].shape[1])]), views[1],
              pd.DataFrame(views[2])]
    store = MultiViewStore.create(tmp_path / "s.zarr", tables)
    assert store.column_names[0].tolist() == list(tables[0].columns) and store.column_names[1:] == [None, None]
    assert MultiViewStore.create(tmp_path / "a.zarr", views).column_names == [None] * 3
    model = ONMSC(10, embedding="anchor", n_landmarks=60, random_state=0).fit(store.copy(tmp_path / "c.zarr"))
    assert model.feature_names_in_[0].tolist() == list(tables[0].columns) and model.feature_names_in_[1:] == [None] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the store's own kinds of views: no warning
        model.predict(tables)
    with pytest.raises(ValueError, match=r"^view 0 \('view0'\): its columns differ from the fit's \(the same names "
                                         r"in another order: column 0 is 'px63', was 'px0'\)"):
        model.predict([tables[0][tables[0].columns[::-1]], *tables[1:]])
    reordered = MultiViewStore.create(tmp_path / "r.zarr", [tables[0][tables[0].columns[::-1]], *tables[1:]])
    with pytest.raises(ValueError, match=r"^view 0 \('view0'\): its columns differ from the fit's \(the same names "
                                         r"in another order"):  # predicted by position, silently (found by a review)
        model.predict(reordered)
    with pytest.warns(UserWarning, match=r"view 0 \('view0'\): has no column names, but the fit's had"):
        model.predict(MultiViewStore(tmp_path / "a.zarr"))
    import zarr

    root = zarr.open_group(tmp_path / "s.zarr", mode="r+")
    root.attrs["column_names"] = [["a", "b"], None, None]
    with pytest.raises(ValueError, match=r"attribute column_names names 2 columns of view 0, but it has 64"):
        MultiViewStore(tmp_path / "s.zarr")
    root.attrs["column_names"] = [["a"], None]
    with pytest.raises(ValueError, match=r"attribute column_names is .*, not a list of 3 lists of column names"):
        MultiViewStore(tmp_path / "s.zarr")


def test_a_knn_fit_checks_the_extension_landmarks_it_is_given():
    """A kNN fit sizes predict's extension with n_landmarks and n_nearest_landmarks: a bad pair given is an error
    before the graphs are built (it used to be taken, and the fit had no extension: predict then said it needs more
    landmarks); too few samples, or a given n_landmarks not above the width, still leave the model without one."""
    views, _ = _views(90)
    with pytest.raises(ValueError, match=r"n_nearest_landmarks=41 must satisfy 2 <= n_nearest_landmarks <= "
                                         r"n_landmarks=40"):
        ONMSC(3, n_landmarks=40, n_nearest_landmarks=41, random_state=0).fit(views)
    with pytest.raises(ValueError, match="n_landmarks must be a positive integer, got 0"):
        ONMSC(3, n_landmarks=0, random_state=0).fit(views)
    assert ONMSC(3, n_landmarks=3, random_state=0).fit(views).extension_ is None
    assert ONMSC(3, n_landmarks=40, n_nearest_landmarks=5, random_state=0).fit(views).extension_ is not None


def test_integer_and_float16_new_rows_are_mapped_as_their_float64_values():
    """predict / transform take uint8 and float16 rows as float64, as the fit does (uint8 squared norms wrapped
    around and float16 overflowed: transform of the fitted rows was 0.02 / 0.1 off embedding_)."""
    views, _ = _views(600)
    pixels = (views[0] * 11).astype(np.uint8)  # values up to 176
    model = ONMSC(10, **ANCHOR).fit([pixels, views[1], views[2]])
    for X in (pixels, pixels.astype(np.float16)):
        np.testing.assert_allclose(model.transform([X, views[1], views[2]]), model.embedding_, atol=1e-8)
        np.testing.assert_array_equal(model.predict([X, views[1], views[2]]), model.labels_)


def test_a_store_of_the_fitted_views_in_another_order_is_refused(tmp_path):
    """predict matches views by position: a store holding the fitted views (same names, same widths) in another
    order was predicted silently from the swapped views (found by a review); a store of other names is taken by
    position with a warning."""
    X, _ = make_blobs(200, 4, centers=3, random_state=0)
    views = [X, X[:, ::-1] + 1.0]
    fitted = MultiViewStore.create(tmp_path / "fit.zarr", views, view_names=["a", "b"])
    model = ONMSC(3, random_state=0).fit(fitted)
    swapped = MultiViewStore.create(tmp_path / "new.zarr", views[::-1], view_names=["b", "a"])
    with pytest.raises(ValueError, match=r"new\.zarr holds the fitted views in another order \(\['b', 'a'\], fitted "
                                         r"as \['a', 'b'\]\); views are matched by position"):
        model.predict(swapped)
    np.testing.assert_array_equal(model.predict(fitted), model.labels_)
    renamed = MultiViewStore.create(tmp_path / "renamed.zarr", views, view_names=["c", "d"])  # other names: by position
    with pytest.warns(UserWarning, match=r"renamed\.zarr names its views \['c', 'd'\], the fit \['a', 'b'\]; they are "
                                         r"taken by position$"):  # silent before (found by a new-user helper)
        np.testing.assert_array_equal(model.predict(renamed), model.labels_)
    unnamed = MultiViewStore.create(tmp_path / "unnamed.zarr", views)
    named = ONMSC(3, random_state=0).fit(unnamed, view_names=["colour", "shape"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fit's names, or a store of unnamed views (view0, ...): no warning
        model.predict(fitted)
        np.testing.assert_array_equal(named.predict(unnamed), named.labels_)  # it warned (found by a review)
