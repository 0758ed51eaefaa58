"""The one chain behind ONMSC.fit (docs/pipeline.md): every input kind gives the in-memory labels, lazy views are
read on the workers (never on the client), and ``cache`` makes the anchor chain's stages resumable."""
from collections.abc import Iterator
from contextlib import contextmanager

import dask.array as da
import numpy as np
import pytest
from distributed import Client
from sklearn.datasets import load_digits

from clusters import Cluster

from onmsc_dask.api import ONMSC
from onmsc_dask import outofcore
from onmsc_dask.outofcore import STAGES
from onmsc_dask.store import MultiViewStore

SOLVERS = {"exact": dict(embedding="exact"), "anchor": dict(embedding="anchor", n_landmarks=60)}


FIRST_ROWS = 100


def _views(n: int = 500) -> tuple[list[np.ndarray], np.ndarray]:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], X[:n] @ rng.standard_normal((64, 16))], y[:n]


def _refused(*args, **kwargs):
    raise AssertionError("a whole view was read on the client")


@contextmanager
def _client_without_views(tmp_path, monkeypatch, store: MultiViewStore, compute=_refused) -> Iterator[list]:
    """A real scheduler with 2 worker processes while the client process cannot read a whole view of ``store`` nor
    turn a dask array into numpy (``compute`` replaces dask's compute); yields the store's views as dask arrays."""
    cluster = Cluster(tmp_path, 2, nanny=False)
    try:
        with Client(cluster.address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
            lazy = [store.view_dask(p) for p in range(store.n_views)]
            monkeypatch.setattr(MultiViewStore, "read_view", _refused)
            monkeypatch.setattr(da.Array, "compute", compute)
            monkeypatch.setattr(da.Array, "__array__", _refused)
            yield lazy
    finally:
        cluster.stop()


def test_lazy_views_are_read_on_the_workers_with_the_in_memory_labels(tmp_path, monkeypatch):
    """A store and dask arrays read from it, fitted on a real scheduler with 2 worker processes while the client
    process cannot read a whole view nor compute a dask array: the labels of the same views in memory, with the
    exact and the anchor solver."""
    views, y = _views()
    store = MultiViewStore.create(tmp_path / "v.zarr", views, y, chunk_rows=128)
    expected = {name: ONMSC(10, n_init=3, random_state=0, **kw).fit(views).labels_ for name, kw in SOLVERS.items()}
    compute = da.Array.compute
    monkeypatch.setattr(outofcore, "DISTINCT_CHECK_ROWS", FIRST_ROWS)

    def first_rows_only(X, *args, **kwargs):  # the distinct-samples check reads the first rows on the client
        if X.shape[0] > FIRST_ROWS:
            _refused()
        return compute(X, *args, **kwargs)

    with _client_without_views(tmp_path, monkeypatch, store, first_rows_only) as lazy:
        for name, kw in SOLVERS.items():
            for given in (store, lazy):
                model = ONMSC(10, n_init=3, random_state=0, **kw).fit(given)
                np.testing.assert_array_equal(model.labels_, expected[name])
                assert model.n_features_in_.tolist() == [64, 16]


def test_early_fusion_of_lazy_views_builds_the_graphs_on_the_workers(tmp_path, monkeypatch):
    """ONMSC(fusion="early") on a store and on dask arrays read from it, on a real scheduler with 2 worker processes
    while the client process cannot read a whole view nor compute a dask array (views loaded, checked and turned
    into kNN graphs on the workers): the labels, N and view warnings of the same views in memory, with the default
    N (from the late fit) and a given N; a constant view is left out with numpy input's warning."""
    digits, y = _views()
    views = [digits[0], np.full((len(y), 5), 2.5), digits[1]]
    settings, names = [{}, {"n_neighbors": 12}], ["a", "flat", "c"]

    def fit(given, kw: dict) -> tuple[ONMSC, list[str]]:
        with pytest.warns(UserWarning, match=r"view 1 \('flat'\): is constant.*it is left out") as record:
            model = ONMSC(10, fusion="early", n_init=3, random_state=0, **kw).fit(given, view_names=names)
        return model, sorted(str(w.message) for w in record if "view" in str(w.message))

    expected = [fit(views, kw) for kw in settings]
    store = MultiViewStore.create(tmp_path / "v.zarr", views, y, view_names=names, chunk_rows=128)
    with _client_without_views(tmp_path, monkeypatch, store) as lazy:
        for given in (store, lazy):
            for kw, (reference, messages) in zip(settings, expected):
                model, warned = fit(given, kw)
                np.testing.assert_array_equal(model.labels_, reference.labels_)
                assert model.n_neighbors_ == reference.n_neighbors_ and warned == messages
                assert model.left_out_views_.tolist() == [1] and model.view_weights_[1] == 0
                np.testing.assert_allclose(model.view_weights_, reference.view_weights_)


def test_cache_keeps_the_stages_of_in_memory_views_and_resumes(tmp_path):
    """cache=path: the views are written there with the stages; the same fit again resumes every stage, other
    views replace the store, and the cache store given as input keeps its stages next to its views."""
    views, _ = _views()
    plain = ONMSC(10, n_init=3, random_state=0, **SOLVERS["anchor"]).fit(views)
    cached = ONMSC(10, n_init=3, random_state=0, cache=tmp_path / "c.zarr", **SOLVERS["anchor"])
    assert cached.fit(views).computed_stages_ == list(STAGES)
    np.testing.assert_array_equal(cached.labels_, plain.labels_)
    assert cached.fit(views).computed_stages_ == []
    np.testing.assert_array_equal(cached.labels_, plain.labels_)
    np.testing.assert_array_equal(cached.predict(views), plain.predict(views))
    store = MultiViewStore(tmp_path / "c.zarr")
    assert cached.fit(store).computed_stages_ == []  # the cache store itself
    assert cached.set_params(n_clusters=8).fit(views).computed_stages_ == ["embeddings", "fusion", "labels"]
    other = [X[::-1].copy() for X in views]
    assert cached.fit(other).computed_stages_ == list(STAGES)


def test_an_unseeded_fit_reuses_no_cached_stage(tmp_path):
    """random_state=None is fresh randomness on every fit, with a cache too: no stage of an earlier unseeded fit is
    reused (their parameters compared equal, so every stage was, and two unseeded fits gave the same labels); a
    seeded fit still resumes every stage."""
    views, _ = _views()
    cached = ONMSC(10, n_init=3, random_state=None, cache=tmp_path / "c.zarr", **SOLVERS["anchor"])
    assert cached.fit(views).computed_stages_ == list(STAGES)
    assert cached.fit(views).computed_stages_ == list(STAGES)
    cached.set_params(random_state=0)
    assert cached.fit(views).computed_stages_ == list(STAGES)
    assert cached.fit(views).computed_stages_ == []


def test_cache_needs_the_anchor_solver(tmp_path):
    with pytest.raises(ValueError, match="cache holds the stages of the anchor chain"):
        ONMSC(10, embedding="exact", cache=tmp_path / "c.zarr").fit(_views()[0])
    assert not (tmp_path / "c.zarr").exists()


def test_a_fit_without_cache_leaves_a_store_unchanged(tmp_path):
    views, y = _views()
    store = MultiViewStore.create(tmp_path / "v.zarr", views, y, chunk_rows=128)
    ONMSC(10, n_init=3, random_state=0, **SOLVERS["anchor"]).fit(store)
    assert store.stages() == {}


def test_integer_dask_views_are_fitted_as_their_float64_values():
    """Chunks of integer, boolean and float16 views reach the chain's tasks as float64: squared norms of uint8 rows
    wrapped around (cosine rows were not of unit length; other weights and labels than the same values as float64)."""
    views, _ = _views()
    U = np.clip(views[0] * 16, 0, 255).astype(np.uint8)  # digits' pixels up to 255: uint8 squares overflow
    flags = views[1] > 0
    lazy = ONMSC(10, n_init=3, random_state=0, **SOLVERS["anchor"]).fit([da.from_array(U, chunks=(128, -1)),
                                                                          da.from_array(flags, chunks=(100, -1))])
    floats = ONMSC(10, n_init=3, random_state=0, **SOLVERS["anchor"]).fit([U.astype(float), flags.astype(float)])
    np.testing.assert_array_equal(lazy.labels_, floats.labels_)
    np.testing.assert_array_equal(lazy.view_weights_, floats.view_weights_)


def test_float32_views_stay_float32_in_the_anchor_chain():
    """float32 in memory is fitted as float32 (as a float32 store is); its labels match the float64 fit's on
    digits."""
    views, y = _views()
    f64 = ONMSC(10, n_init=3, random_state=0, **SOLVERS["anchor"]).fit(views)
    f32 = ONMSC(10, n_init=3, random_state=0, **SOLVERS["anchor"]).fit([X.astype(np.float32) for X in views])
    assert f32.extension_.views[0].landmarks.dtype == np.float32  # k-means of the float32 sample
    assert f64.extension_.views[0].landmarks.dtype == np.float64
    assert np.mean(f32.labels_ == f64.labels_) > 0.99


def test_cache_of_a_store_follows_a_store_written_again_at_the_same_path(tmp_path):
    """A cache copied from an input store is reused while that store is the same, and recomputed once a store with
    other views is written at the same path (its content_id changes), never fitted on the stale copy."""
    views, y = _views()
    path, cache = tmp_path / "v.zarr", tmp_path / "c.zarr"
    est = ONMSC(10, n_init=3, random_state=0, cache=cache, **SOLVERS["anchor"])
    est.fit(MultiViewStore.create(path, views, y, chunk_rows=128))
    assert est.fit(MultiViewStore(path)).computed_stages_ == []
    other = [X[::-1].copy() for X in views]
    est.fit(MultiViewStore.create(path, other, y[::-1], chunk_rows=128, overwrite=True))
    assert est.computed_stages_ == list(STAGES)
    np.testing.assert_array_equal(MultiViewStore(cache).read_view(0), other[0])


def test_cache_of_dask_views_follows_the_values_they_read(tmp_path):
    """A cache made from dask views is reused while they read the same values, and recomputed once the data behind
    them is written again: a store at the same path (view_dask) or a zarr array overwritten in place (da.from_zarr),
    whose dask names stay the same (the stale cache used to be fitted: the old data's labels, no stage computed)."""
    import zarr

    views, y = _views()
    path = tmp_path / "v.zarr"
    array = zarr.open_array(tmp_path / "a.zarr", mode="w", shape=views[1].shape, chunks=(128, 16), dtype="f8")
    array[:] = views[1]
    est = ONMSC(10, n_init=3, random_state=0, cache=tmp_path / "c.zarr", **SOLVERS["anchor"])

    def lazy():
        return [MultiViewStore(path).view_dask(0), da.from_zarr(str(tmp_path / "a.zarr"))]

    MultiViewStore.create(path, views[:1], chunk_rows=128)
    assert est.fit(lazy()).computed_stages_ == list(STAGES)
    assert est.fit(lazy()).computed_stages_ == []
    array[:] = views[1][::-1]
    assert est.fit(lazy()).computed_stages_ == list(STAGES)
    np.testing.assert_array_equal(MultiViewStore(tmp_path / "c.zarr").read_view(1), views[1][::-1])
    MultiViewStore.create(path, [views[0][::-1].copy()], chunk_rows=128, overwrite=True)
    assert est.fit(lazy()).computed_stages_ == list(STAGES)
    np.testing.assert_array_equal(MultiViewStore(tmp_path / "c.zarr").read_view(0), views[0][::-1])


def test_cache_never_overwrites_a_store_or_files_it_did_not_make(tmp_path):
    """cache= naming a user's store (not made as a cache) or a directory with files is an error, and both are left
    as they were."""
    views, y = _views()
    store = MultiViewStore.create(tmp_path / "data.zarr", views, y, chunk_rows=128)
    with pytest.raises(ValueError, match="is a MultiViewStore not made as a cache"):
        ONMSC(10, cache=store.path, **SOLVERS["anchor"]).fit([X[:400] for X in views])
    np.testing.assert_array_equal(MultiViewStore(store.path).read_view(0), views[0])
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds something that is not a MultiViewStore"):
        ONMSC(10, cache=folder, **SOLVERS["anchor"]).fit(views)
    assert (folder / "notes.txt").read_text() == "mine"
