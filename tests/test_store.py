import copy
import re

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import zarr

from onmsc_dask.store import MultiViewStore, _default_chunk_rows

N = 50


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _sparse(rng, n=N, d=9):
    return sp.random(n, d, density=0.3, format="csr", random_state=rng, dtype=np.float64)


@pytest.mark.parametrize(
    "dtype, stored",
    [
        (np.float32, np.float32),
        (np.float64, np.float64),
        (np.int32, np.float64),
        (bool, np.float64),
    ],
)
def test_dense_round_trip_dtypes(tmp_path, rng, dtype, stored):
    view = (rng.normal(size=(N, 5)) * 10).astype(dtype)
    store = MultiViewStore.create(tmp_path / "s.zarr", [view], chunk_rows=16)
    got = MultiViewStore(tmp_path / "s.zarr").read_view(0)
    assert got.dtype == stored
    np.testing.assert_array_equal(got, view.astype(stored))
    assert store.row_chunks(0) == [(0, 16), (16, 32), (32, 48), (48, 50)]
    assert store.view_dask(0).chunks == ((16, 16, 16, 2), (5,))
    np.testing.assert_array_equal(store.view_dask(0).compute(), got)


def test_view_dask_of_a_deleted_chunk_file_is_an_error_naming_its_rows(tmp_path, rng):
    """view_dask reads each chunk as read_rows does: a deleted chunk file was NaN rows (da.from_zarr's fill value),
    which a cache store written from them then called "NaN values" (a review)."""
    store = MultiViewStore.create(tmp_path / "s.zarr", [rng.normal(size=(N, 5))], chunk_rows=16)
    (store.path / "views" / "0" / "c" / "1" / "0").unlink()
    with pytest.raises(ValueError, match=r"view 0 \('view0'\) rows 16:32 hold missing values: a chunk file was "
                                         "deleted"):
        store.view_dask(0).compute()


def test_a_path_through_a_symbolic_link_and_dot_dot_is_where_the_system_puts_it(tmp_path, rng, monkeypatch):
    """link/../s.zarr with link -> real/sub is real/s.zarr to the system; create wrote ./s.zarr (its path made absolute
    by text), then failed to open link/../s.zarr; copy with stages=False emptied the source's stages (a review)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "sub")
    views = [rng.normal(size=(N, 3)), rng.normal(size=(N, 2))]
    store = MultiViewStore.create("link/../s.zarr", views)
    assert (tmp_path / "real" / "s.zarr").is_dir() and not (tmp_path / "s.zarr").exists()
    np.testing.assert_array_equal(store.read_view(1), views[1])
    source = MultiViewStore.create("src.zarr", views)
    source.write_result("stage1", "x", np.arange(3.0), {})
    source.mark_complete("stage1")
    for odd in ("newdir/..", "."):  # a name the system resolves: the directory it names (newdir/.. crashed, after
        with pytest.raises(FileExistsError, match=f"^{re.escape(str(tmp_path))} exists and is not a zarr store"):
            MultiViewStore.create(odd, views, overwrite=True)  # writing a whole store to newdir/...onmsc-dask-partial)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    source.copy("~/c.zarr")  # it wrote a directory named ~ here
    assert (tmp_path / "home" / "c.zarr").is_dir() and not (tmp_path / "~").exists()
    source.copy("link/../c.zarr", stages=False)
    assert (tmp_path / "real" / "c.zarr").is_dir() and MultiViewStore("src.zarr").finished_stages() == ["stage1"]


def test_view_dask_of_a_store_rewritten_without_content_id_reads_the_new_one(tmp_path, rng):
    """Stores written before content_id have none: view_dask's chunk tasks, which keep opened stores by path and
    content_id, read the old store's arrays after another such store replaced it (a review)."""
    def legacy(values):
        MultiViewStore.create(tmp_path / "s.zarr", [values], chunk_rows=25, overwrite=True)
        group = zarr.open_group(tmp_path / "s.zarr", mode="r+")
        attrs = dict(group.attrs)
        del attrs["content_id"]
        group.attrs.clear()
        group.attrs.update(attrs)
        return MultiViewStore(tmp_path / "s.zarr")

    first, second = rng.normal(size=(N, 5)), rng.normal(size=(N, 3))
    np.testing.assert_array_equal(legacy(first).view_dask(0).compute(scheduler="sync"), first)
    np.testing.assert_array_equal(legacy(second).view_dask(0).compute(scheduler="sync"), second)


def test_metadata_labels_and_shapes(tmp_path, rng):
    views = [rng.normal(size=(N, 3)), _sparse(rng)]
    y = np.arange(N) % 4
    MultiViewStore.create(
        tmp_path / "s.zarr", views, y.astype(np.uint8), view_names=["a", "b"], metadata={"k": [1]}
    )
    store = MultiViewStore(tmp_path / "s.zarr")
    assert (store.n_samples, store.n_views, store.view_names) == (N, 2, ["a", "b"])
    assert store.metadata == {"k": [1]}
    assert store.labels.dtype == np.int64
    np.testing.assert_array_equal(store.labels, y)
    assert [store.is_sparse(p) for p in range(2)] == [False, True]
    assert [store.view_shape(p) for p in range(2)] == [(N, 3), (N, 9)]
    root = zarr.open_group(tmp_path / "s.zarr", mode="r")
    assert root.attrs["format"] == "onmsc-dask-store" and root.attrs["format_version"] == 1
    assert MultiViewStore.create(tmp_path / "n.zarr", views[:1]).labels is None


def test_sparse_round_trip_and_rows_across_chunks(tmp_path, rng):
    dense = rng.normal(size=(N, 6))
    sparse = _sparse(rng).astype(np.float32)
    store = MultiViewStore.create(tmp_path / "s.zarr", [dense, sparse], chunk_rows=16)
    got = store.read_view(1)
    assert sp.isspmatrix_csr(got) and got.dtype == np.float32
    np.testing.assert_array_equal(got.toarray(), sparse.toarray())
    assert store.row_chunks(1) == store.row_chunks(0) == [(0, 16), (16, 32), (32, 48), (48, 50)]
    for start, stop in [(10, 40), (15, 17), (0, N), (20, 20)]:
        np.testing.assert_array_equal(store.read_rows(0, start, stop), dense[start:stop])
        rows = store.read_rows(1, start, stop)
        np.testing.assert_array_equal(rows.toarray(), sparse[start:stop].toarray())
    lazy = store.view_dask(1)  # CSR chunks (a URL store's sparse view given to a cache was refused: a review)
    assert lazy.chunks == ((16, 16, 16, 2), (sparse.shape[1],)) and sp.issparse(lazy._meta)
    np.testing.assert_array_equal(lazy.compute().toarray(), sparse.toarray())
    with pytest.raises(IndexError):
        store.read_rows(0, 40, N + 1)
    with pytest.raises(IndexError, match="store has 2 views"):
        store.read_view(2)


def test_dask_view_is_written_block_by_block(tmp_path, rng, monkeypatch):
    full = rng.integers(0, 100, size=(N, 4))
    bounds = [(0, 13), (13, 31), (31, N)]
    computed = []

    def block(start, stop):
        computed.append((start, stop))
        return full[start:stop]

    view = da.concatenate(
        [da.from_delayed(dask.delayed(block)(a, b), (b - a, 4), full.dtype) for a, b in bounds]
    )

    def no_whole_array(*args, **kwargs):
        raise AssertionError("the dask view was computed as a whole")

    monkeypatch.setattr(da.Array, "__array__", no_whole_array)
    monkeypatch.setattr(da.Array, "compute", no_whole_array)
    store = MultiViewStore.create(tmp_path / "s.zarr", [view], chunk_rows=10)
    monkeypatch.undo()
    assert sorted(computed) == bounds  # each source block computed exactly once
    assert store.row_chunks(0) == [(0, 10), (10, 20), (20, 30), (30, 40), (40, 50)]
    got = store.read_view(0)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, full)


def test_mismatched_rows_and_labels_name_the_problem(tmp_path, rng):
    views = [rng.normal(size=(N, 2)), rng.normal(size=(N, 3)), rng.normal(size=(N - 1, 4))]
    expected = r"view 2 \('LBP'\): has 49 rows, expected 50 like view 0 \('CM'\)"
    with pytest.raises(ValueError, match=expected):
        MultiViewStore.create(tmp_path / "s.zarr", views, view_names=["CM", "HOG", "LBP"])
    with pytest.raises(ValueError, match="labels: has 49 entries, expected 50"):
        MultiViewStore.create(tmp_path / "s.zarr", views[:2], np.zeros(N - 1, int))
    with pytest.raises(ValueError, match=r"view 1 \('view1'\): expected a 2-D array \(samples x features\), got 1-D; "
                                         r"use X\.reshape\(-1, 1\)"):
        MultiViewStore.create(tmp_path / "s.zarr", [views[0], np.ones(N)])
    assert not (tmp_path / "s.zarr").exists()


def test_class_ids_in_an_object_array_are_labels(tmp_path, rng):
    """pandas' Series.astype(object) of integer ids was "has dtype object, expected integers" (a review); class
    names are stored as ids with their names; an object array of anything else is still refused."""
    import pandas as pd

    y = np.arange(N) % 3
    store = MultiViewStore.create(tmp_path / "s.zarr", [rng.normal(size=(N, 2))], pd.Series(y).astype(object))
    np.testing.assert_array_equal(store.labels, y)
    lists, pairs = np.empty(N, object), np.empty(N, object)
    lists[:], pairs[:] = [[v] for v in y], [(v, v) for v in y]  # 2-D once unpacked: they were returned 2-D (a review)
    np.testing.assert_array_equal(MultiViewStore.create(tmp_path / "t.zarr", [rng.normal(size=(N, 2))], lists).labels, y)
    with pytest.raises(ValueError, match=r"labels: has shape \(50, 2\), expected a vector"):
        MultiViewStore.create(tmp_path / "u.zarr", [rng.normal(size=(N, 2))], pairs)
    named = MultiViewStore.create(tmp_path / "n.zarr", [rng.normal(size=(N, 2))], pd.Series(["b", "a"] * (N // 2)))
    assert named.labels.tolist() == [1, 0] * (N // 2) and named.class_names == ["a", "b"]
    assert MultiViewStore(tmp_path / "s.zarr").class_names is None
    for bad, said in ((np.array([0, "a"] * (N // 2), object), "mixes class names and numbers"),
                      (np.array([{}, {}] * (N // 2), object), "has dtype object"),
                      (np.array(["a", " "] * (N // 2)), r"holds missing labels \(an empty class name, e\.g\. in row 1\)"),
                      (np.array([0, None] * (N // 2), object), r"holds missing values \(None, NaN or NA, e\.g\. in rows "
                                                               r"\[1, 3, 5, 7, 9\]\)"),
                      (np.array([[0], [1, 2]] * (N // 2), object), "holds entries of different lengths"),
                      (pd.Series([0, pd.NA] * (N // 2), dtype="Int64").astype(object), "holds missing values"),
                      (np.array([1.5, 2] * (N // 2), object), "holds non-integer values")):
        with pytest.raises(ValueError, match=f"labels: {said}"):
            MultiViewStore.create(tmp_path / "t.zarr", [rng.normal(size=(N, 2))], bad)


def test_class_names_are_kept_in_copies_and_caches_and_checked_on_open(tmp_path, rng):
    """A URL cache of a store was written from its ids, the names lost; class_names that do not fit the labels gave
    a bare IndexError where they were used; bytes that are UTF-8 text were an ascii error; names that are numbers
    took the text order ('1', '10', '2')."""
    import zarr

    from onmsc_dask.api import cache_store
    from onmsc_dask.io import load

    views = [rng.normal(size=(N, 2))]
    y = np.array(["dog", "cat"] * (N // 2))
    store = MultiViewStore.create("memory://bucket/named.zarr", views, y)
    for cache in (cache_store("memory://bucket/cache.zarr", store, None), cache_store(tmp_path / "c.zarr", store, None)):
        assert cache.class_names == ["cat", "dog"] and cache.given_labels.tolist() == y.tolist()
    local = MultiViewStore.create(tmp_path / "s.zarr", views, y)
    assert MultiViewStore(local.copy(tmp_path / "copy.zarr").path).given_labels.tolist() == y.tolist()
    zarr.open_group(tmp_path / "s.zarr", mode="r+").attrs["class_names"] = ["cat"]
    with pytest.raises(ValueError, match=r"s\.zarr: its labels hold ids 0\.\.1, but attribute class_names names 1 "
                                         r"classes"):
        load(tmp_path / "s.zarr")
    zarr.open_group(tmp_path / "s.zarr", mode="r+").attrs["class_names"] = "abc"
    with pytest.raises(ValueError, match=r"attribute class_names is 'abc', not a list of class names"):
        MultiViewStore(tmp_path / "s.zarr")
    numbers = MultiViewStore.create(tmp_path / "n.zarr", views, np.array(["10", "2", "1", "2"] * (N // 4) + ["1"] * 2))
    assert numbers.class_names == ["1", "2", "10"] and numbers.labels[:4].tolist() == [2, 1, 0, 1]
    for dtype in (None, object):  # an object array of bytes was "has dtype object"
        encoded = MultiViewStore.create(tmp_path / "b.zarr", views, np.array(["é".encode(), b"b"] * (N // 2), dtype),
                                        overwrite=True)
        assert encoded.class_names == ["b", "é"]
    with pytest.raises(ValueError, match=r"labels: class names given as bytes that are not UTF-8 text"):
        MultiViewStore.create(tmp_path / "x.zarr", views, np.array([b"\xff", b"b"] * (N // 2)))


def test_default_chunk_rows():
    assert _default_chunk_rows([np.zeros((3000, 4))], 3000) == 3000  # capped at n
    wide = da.zeros((100_000, 20_000), dtype=np.float64, chunks=(1000, 20_000))
    assert _default_chunk_rows([wide], 100_000) == 1024  # at least 1024 rows
    narrow = da.zeros((10**7, 8), dtype=np.float32, chunks=(10**6, 8))
    assert _default_chunk_rows([narrow], 10**7) == 32 * 2**20 // 32  # ~32 MB chunks


def test_overwrite_refusal(tmp_path, rng):
    view = rng.normal(size=(N, 2))
    MultiViewStore.create(tmp_path / "s.zarr", [view])
    with pytest.raises(FileExistsError, match="overwrite=True"):
        MultiViewStore.create(tmp_path / "s.zarr", [view])
    store = MultiViewStore.create(tmp_path / "s.zarr", [view[:10]], overwrite=True)
    assert store.n_samples == 10
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not a zarr store"):
        MultiViewStore.create(tmp_path / "other", [view], overwrite=True)
    assert (tmp_path / "other" / "keep.txt").exists()


def test_zarr_arrays_of_one_s_own_are_refused_with_the_way_to_fit_them(tmp_path, rng):
    """A zarr group of the user's arrays (or one array) given as a store said only 'a foreign zarr group or an
    interrupted create' (found by a new-user helper); the error lists the arrays and the two ways to use them, and
    the first, dask arrays read from the zarr arrays, fits as the arrays themselves do."""
    from sklearn.datasets import make_blobs

    from onmsc_dask import ONMSC

    X, y = make_blobs(300, n_features=6, centers=3, random_state=0)
    group = zarr.open_group(tmp_path / "mine.zarr", mode="w")
    for name, view in (("colour", X[:, :3]), ("shape", X[:, 3:])):
        group.create_array(name, data=view, chunks=(64, 3))
    group.create_array("labels", data=y)  # listed as labels, not as a view
    with pytest.raises(ValueError, match=r"mine\.zarr is not an onmsc-dask store \(.*\); it holds zarr arrays "
                                         r"'colour' \(300 x 3\), 'labels' \(300\), 'shape' \(300 x 3\): fit your own "
                                         r"2-D arrays as dask arrays, "
                                         r"ONMSC\(k\)\.fit\(\[da\.from_zarr\(url, component=NAME\), \.\.\.\]\) .*, "
                                         r"or write a store of them for the CLI, MultiViewStore\.create\(path, .*, y\) "
                                         r"\('labels': 1-D, so labels y, not a view\)$"):
        MultiViewStore(tmp_path / "mine.zarr")
    with pytest.raises(ValueError, match=r"no readable onmsc-dask store at .*colour: it is one zarr array, not a "
                                         r"store: fit your own 2-D arrays as dask arrays, "
                                         r"ONMSC\(k\)\.fit\(\[da\.from_zarr\(url\)"):
        MultiViewStore(tmp_path / "mine.zarr" / "colour")
    old = zarr.open_group(tmp_path / "v2.zarr", mode="w", zarr_format=2)  # zarr-python 2's format: "No group found"
    old.create_array("colour", data=X[:, :3], chunks=(64, 3))
    with pytest.raises(ValueError, match=r"v2\.zarr: it is zarr format 2 data \(zarr-python 2's or xarray's\), not a "
                                         r"store; it holds zarr arrays 'colour' \(300 x 3\): fit your own 2-D arrays"):
        MultiViewStore(tmp_path / "v2.zarr")
    with pytest.raises(ValueError, match=r"colour: it is zarr format 2 data .*, not a store: fit your own 2-D arrays as "
                                         r"dask arrays, ONMSC\(k\)\.fit\(\[da\.from_zarr\(url\)"):
        MultiViewStore(tmp_path / "v2.zarr" / "colour")
    np.testing.assert_array_equal(da.from_zarr(str(tmp_path / "v2.zarr"), component="colour").compute(), X[:, :3])
    nested = zarr.open_group(tmp_path / "nested.zarr", mode="w")  # arrays in a subgroup: no hint before
    nested.create_group("views").create_array("0", data=X[:, :3])
    with pytest.raises(ValueError, match=r"nested\.zarr is not an onmsc-dask store \(.*\); it holds zarr arrays "
                                         r"'views/0' \(300 x 3\): fit your own 2-D arrays"):
        MultiViewStore(tmp_path / "nested.zarr")
    np.save(tmp_path / "A.npy", X)  # a file: zarr's "No group found in store PosixPath(...)" before
    with pytest.raises(ValueError, match=r"no readable onmsc-dask store at .*A\.npy: it is a file, not a store \(a "
                                         r"\.zarr directory\): read a file's views with onmsc_dask\.io\.load\(path\)"):
        MultiViewStore(tmp_path / "A.npy")
    views = [da.from_zarr(str(tmp_path / "mine.zarr"), component=name) for name in ("colour", "shape")]
    fitted = ONMSC(3, random_state=0).fit(views).labels_
    np.testing.assert_array_equal(fitted, ONMSC(3, random_state=0).fit([X[:, :3], X[:, 3:]]).labels_)
    store = MultiViewStore.create(tmp_path / "s.zarr", views, y, view_names=["colour", "shape"])
    np.testing.assert_array_equal(store.read_view(1), X[:, 3:])


def test_open_errors(tmp_path, rng):
    with pytest.raises(ValueError, match="no readable onmsc-dask store"):
        MultiViewStore(tmp_path / "missing.zarr")
    zarr.open_group(tmp_path / "foreign.zarr", mode="w")
    with pytest.raises(ValueError, match="not an onmsc-dask store"):
        MultiViewStore(tmp_path / "foreign.zarr")
    MultiViewStore.create(tmp_path / "s.zarr", [rng.normal(size=(N, 2))])
    zarr.open_group(tmp_path / "s.zarr", mode="r+").attrs.update({"format_version": 2})
    with pytest.raises(ValueError, match="by format version 2, this onmsc-dask reads version 1"):
        MultiViewStore(tmp_path / "s.zarr")
    (tmp_path / "bad.zarr").mkdir()
    (tmp_path / "bad.zarr" / "zarr.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.zarr"):
        MultiViewStore(tmp_path / "bad.zarr")


def test_stage_results_and_params_invalidation(tmp_path, rng):
    store = MultiViewStore.create(tmp_path / "s.zarr", [rng.normal(size=(N, 2))])
    params = {"k": 10, "metric": "euclidean", "gamma": np.float64(0.5)}
    graph = _sparse(rng, N, N)
    embedding = rng.normal(size=(N, 3)).astype(np.float32)
    names = ["graph", "embedding", "info"]
    assert not store.has_stage("knn", params, names)

    store.write_result("knn", "graph", graph, params)
    store.write_result("knn", "embedding", embedding, params)
    store.write_result("knn", "info", {"iterations": 7, "objective": [1.0, 0.5]}, params)
    assert not store.has_stage("knn", params, names)  # not yet marked complete
    store.mark_complete("knn")

    reopened = MultiViewStore(tmp_path / "s.zarr")
    assert reopened.has_stage("knn", dict(reversed(params.items())), names)
    assert not reopened.has_stage("knn", params, [*names, "missing"])
    assert not reopened.has_stage("knn", {**params, "k": 11}, names)
    assert reopened.stages() == {"knn": {"gamma": 0.5, "k": 10, "metric": "euclidean"}}
    np.testing.assert_array_equal(reopened.read_result("knn", "graph").toarray(), graph.toarray())
    got = reopened.read_result("knn", "embedding")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, embedding)
    assert reopened.read_result("knn", "info") == {"iterations": 7, "objective": [1.0, 0.5]}
    with pytest.raises(KeyError, match="no result 'labels'"):
        reopened.read_result("knn", "labels")
    with pytest.raises(KeyError, match="no stage 'spectral'"):
        reopened.read_result("spectral", "labels")

    store.write_result("knn", "embedding", embedding[:, :2], params)  # rewrite: incomplete again
    assert not store.has_stage("knn", params, names)
    store.mark_complete("knn")

    new_params = {**params, "k": 5}
    store.write_result("knn", "embedding", embedding, new_params)  # other params clear the stage
    with pytest.raises(KeyError):
        store.read_result("knn", "graph")
    assert store.stages()["knn"]["k"] == 5
    assert not store.has_stage("knn", new_params, ["embedding"])
    store.mark_complete("knn")
    assert store.has_stage("knn", new_params, ["embedding"])
    assert not store.has_stage("knn", params, ["embedding"])


def _parts(x):
    """The arrays making up a dense, CSR or COO input."""
    if sp.issparse(x):
        return [x.data, *((x.indices, x.indptr) if x.format == "csr" else (x.row, x.col))]
    return [np.asarray(x)]


def test_inputs_not_modified(tmp_path):
    unsorted = sp.csr_matrix(
        (np.array([3.0, 1.0, 2.0]), np.array([2, 0, 1]), np.array([0, 2, 3, 3])), shape=(3, 4)
    )
    duplicates = sp.coo_matrix((np.ones(3), ([0, 0, 2], [1, 1, 3])), shape=(3, 4))
    views = [np.arange(12, dtype=np.int64).reshape(3, 4), unsorted, duplicates]
    y = np.array([2.0, 0.0, 1.0])
    metadata, params, result = {"nested": {"a": [1, 2]}}, {"k": 3, "ks": [1, 2]}, {"x": [1, 2]}
    before = copy.deepcopy([views, y, metadata, params, result])

    store = MultiViewStore.create(tmp_path / "s.zarr", views, y, metadata=metadata)
    store.write_result("stage", "graph", unsorted, params)
    store.write_result("stage", "info", result, params)

    assert [metadata, params, result] == before[2:]
    for got, expected in zip([*views, y], [*before[0], before[1]]):
        assert type(got) is type(expected)
        for a, b in zip(_parts(got), _parts(expected), strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(store.read_view(2).toarray(), duplicates.toarray())


def test_copy_with_and_without_stages(tmp_path, rng):
    view = rng.normal(size=(N, 3))
    store = MultiViewStore.create(tmp_path / "s.zarr", [view, _sparse(rng)], np.arange(N) % 3, chunk_rows=20)
    store.write_result("fit", "x", np.arange(4.0), {"a": 1})
    store.mark_complete("fit")
    full = store.copy(tmp_path / "full.zarr")
    np.testing.assert_array_equal(full.read_view(0), view)
    assert (full.read_view(1) != store.read_view(1)).nnz == 0
    np.testing.assert_array_equal(full.labels, store.labels)
    assert full.has_stage("fit", {"a": 1}, ["x"])
    bare = store.copy(tmp_path / "bare.zarr", stages=False)
    assert bare.stages() == {} and bare.view_names == store.view_names
    assert not (tmp_path / "bare.zarr.onmsc-dask-partial").exists()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        store.copy(tmp_path / "bare.zarr")
    assert store.copy(tmp_path / "bare.zarr", overwrite=True).has_stage("fit", {"a": 1}, ["x"])


def test_copy_refuses_itself_its_inside_and_its_parent(tmp_path, rng):
    store = MultiViewStore.create(tmp_path / "d" / "s.zarr", [rng.normal(size=(N, 2))])
    for target in (store.path, store.path / "views" / "copy.zarr", tmp_path / "d"):
        with pytest.raises(ValueError, match="inside it or contains it"):
            store.copy(target, overwrite=True)
    np.testing.assert_array_equal(MultiViewStore(store.path).read_view(0).shape, (N, 2))  # source intact
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not a zarr store"):
        store.copy(tmp_path / "other", overwrite=True)
    assert (tmp_path / "other" / "keep.txt").exists()


def test_read_result_rows_reads_only_the_chunks_of_those_rows(tmp_path, rng, monkeypatch):
    """Out of core every row-chunk task reads its rows of Z: before, each read the whole matrix (I/O quadratic
    in n). With the later chunks of the CSR arrays deleted, the first rows still read; the whole result does not."""
    from onmsc_dask import store as store_module

    monkeypatch.setattr(store_module, "_CSR_CHUNK_BYTES", 80)  # 10 values per chunk
    store = MultiViewStore.create(tmp_path / "s.zarr", [rng.normal(size=(200, 2))])
    Z, dense = sp.random(200, 30, density=0.1, format="csr", random_state=1), rng.normal(size=(200, 3))
    store.write_result("g", "Z", Z, {})
    store.write_result("g", "H", dense, {})
    for start, stop in [(0, 7), (50, 120), (190, 200), (13, 13)]:
        np.testing.assert_array_equal(store.read_result_rows("g", "Z", start, stop).toarray(),
                                      Z[start:stop].toarray())
        np.testing.assert_array_equal(store.read_result_rows("g", "H", start, stop), dense[start:stop])
    first = store.read_result_rows("g", "Z", 0, 5)
    root = store.path / "stages" / "g" / "Z"
    for name in ("data", "indices", "indptr"):
        chunks = sorted((root / name / "c").iterdir(), key=lambda f: int(f.name))
        for f in chunks[max(2, len(chunks) // 2):]:
            f.unlink()
    np.testing.assert_array_equal(store.read_result_rows("g", "Z", 0, 5).toarray(), first.toarray())
    with pytest.raises(ValueError, match="rows 0:200 are damaged"):
        store.read_result("g", "Z")


@pytest.mark.parametrize("array, chunk", [("data", 3), ("indices", 3), ("indptr", 0), ("indptr", 5)])
def test_any_missing_chunk_of_a_stored_sparse_matrix_is_detected(tmp_path, rng, monkeypatch, array, chunk):
    """CSR arrays are written with fill values no valid matrix holds (NaN, -1): a deleted chunk of any of them
    is an error, never a silently different matrix (zeros were valid column indices and values)."""
    from onmsc_dask import store as store_module

    monkeypatch.setattr(store_module, "_CSR_CHUNK_BYTES", 80)
    store = MultiViewStore.create(tmp_path / "s.zarr", [rng.normal(size=(200, 2))])
    store.write_result("g", "Z", sp.random(200, 30, density=0.1, format="csr", random_state=1), {})
    (store.path / "stages" / "g" / "Z" / array / "c" / str(chunk)).unlink()
    with pytest.raises(ValueError, match="are damaged"):
        store.read_result("g", "Z")


def test_overwrite_with_dask_views_of_the_store_itself(tmp_path, rng):
    """create(overwrite=True) used to delete the old store (zarr mode "w") before reading its lazy views: the new
    store held missing chunks. It is written to path.onmsc-dask-partial and replaces the old one when complete."""
    X0, X1 = rng.normal(size=(N, 4)), rng.normal(size=(N, 5))
    store = MultiViewStore.create(tmp_path / "s.zarr", [X0, X1], np.arange(N) % 3, chunk_rows=16)
    new = MultiViewStore.create(tmp_path / "s.zarr", [store.view_dask(0), store.view_dask(1), X1[:, :3]],
                                store.labels, overwrite=True)
    for p, expected in enumerate([X0, X1, X1[:, :3]]):
        np.testing.assert_array_equal(new.read_view(p), expected)
    np.testing.assert_array_equal(new.labels, np.arange(N) % 3)
    assert not (tmp_path / "s.zarr.onmsc-dask-partial").exists()
    assert not (tmp_path / "s.zarr.onmsc-dask-old").exists()


def test_a_users_old_and_partial_directories_beside_the_store_are_kept(tmp_path, rng):
    """create and copy write beside the target under names no user picks: a user's `data.zarr.old` (a backup) and
    `data.zarr.partial` were deleted by every create or copy of `data.zarr`."""
    X = rng.normal(size=(N, 3))
    for name in ("data.zarr.old", "data.zarr.partial", "copy.zarr.old"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text(name)
    store = MultiViewStore.create(tmp_path / "data.zarr", [X])
    MultiViewStore.create(tmp_path / "data.zarr", [X + 1], overwrite=True)
    store.copy(tmp_path / "copy.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.zarr", "copy.zarr.old", "data.zarr", "data.zarr.old",
                                                          "data.zarr.partial"]
    for name in ("data.zarr.old", "data.zarr.partial", "copy.zarr.old"):
        assert (tmp_path / name / "mine.txt").read_text() == name
    np.testing.assert_array_equal(MultiViewStore(tmp_path / "copy.zarr").read_view(0), X + 1)


def test_a_symlinked_target_is_refused_before_writing(tmp_path, rng):
    """Overwriting through a symbolic link wrote the new store, then failed in the replacement (NotADirectoryError),
    leaving path.onmsc-dask-partial behind."""
    X = rng.normal(size=(N, 3))
    MultiViewStore.create(tmp_path / "real.zarr", [X])
    (tmp_path / "link.zarr").symlink_to(tmp_path / "real.zarr")
    with pytest.raises(FileExistsError, match="link.zarr is a symbolic link; give the store's own path"):
        MultiViewStore.create(tmp_path / "link.zarr", [X + 1], overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.zarr", "real.zarr"]
    np.testing.assert_array_equal(MultiViewStore(tmp_path / "real.zarr").read_view(0), X)


def _block_raising(rng, error: Exception) -> da.Array:
    """A dask view of N rows whose last block raises `error` when computed."""
    def fail():
        raise error
    return da.concatenate([da.from_array(rng.normal(size=(30, 2))),
                           da.from_delayed(dask.delayed(fail)(), (N - 30, 2), np.float64)])


def _slow_block_or_failing_first(i: int) -> np.ndarray:
    import time

    if i == 0:
        raise OSError("source file vanished")
    time.sleep(0.5)  # still writing when block 0 fails
    return np.ones((10, 2))


@pytest.mark.parametrize("scheduler", ["threads", "distributed"])
def test_a_failing_block_leaves_no_partial_store_behind(tmp_path, scheduler):
    """dask raises a block's error while other blocks may still be writing: the write waits for them, so the partial
    store it removes is not created again by a late block (it was, before, on both schedulers)."""
    import contextlib
    import time

    from distributed import Client, LocalCluster

    view = da.concatenate([da.from_delayed(dask.delayed(_slow_block_or_failing_first)(i), (10, 2), np.float64)
                           for i in range(6)])
    with contextlib.ExitStack() as stack:
        if scheduler == "distributed":
            cluster = stack.enter_context(LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                                       dashboard_address=None))
            stack.enter_context(Client(cluster))
        with pytest.raises(OSError, match="source file vanished"):
            MultiViewStore.create(tmp_path / "new.zarr", [np.ones((60, 2)), view], chunk_rows=10)
        time.sleep(1.0)  # a block written after the error would have recreated new.zarr.onmsc-dask-partial by now
    assert list(tmp_path.iterdir()) == []


def _with_value(X, row: int, value: float):
    X = X.copy()
    X[row, 1] = value
    return X


@pytest.mark.parametrize("bad, error", [
    (lambda rng: _with_value(rng.normal(size=(N, 3)), 3, np.nan),
     r"view 1 \('text'\): contains NaN values \(e.g. in rows \[3\]\); impute or drop them first"),
    (lambda rng: sp.csr_matrix(_with_value(rng.normal(size=(N, 3)), 8, -np.inf)).tolil(),
     r"view 1 \('text'\): contains infinite values \(e.g. in rows \[8\]\)"),
    (lambda rng: da.from_array(_with_value(rng.normal(size=(N, 3)), 37, np.inf), chunks=(10, 3)),
     r"view 1 \('text'\): contains infinite values \(e.g. in rows \[37\]\)"),
    (lambda rng: _block_raising(rng, OSError("source file vanished")), "source file vanished"),
], ids=["nan-numpy", "inf-sparse", "inf-dask-later-block", "dask-source-fails"])
def test_bad_or_failing_view_writes_nothing_and_keeps_the_old_store(tmp_path, rng, bad, error):
    """NaN/inf used to be stored (and read back as "a chunk file was deleted"); a failure part-way through an
    overwrite used to leave neither the old nor a new store."""
    old = rng.normal(size=(N, 2))
    MultiViewStore.create(tmp_path / "s.zarr", [old], np.arange(N) % 2, chunk_rows=16)
    views = [rng.normal(size=(N, 2)), bad(rng)]
    for path, overwrite in [(tmp_path / "new.zarr", False), (tmp_path / "s.zarr", True)]:
        with pytest.raises((ValueError, OSError), match=error):
            MultiViewStore.create(path, views, chunk_rows=10, view_names=["img", "text"], overwrite=overwrite)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["s.zarr"]
    kept = MultiViewStore(tmp_path / "s.zarr")
    np.testing.assert_array_equal(kept.read_view(0), old)
    np.testing.assert_array_equal(kept.labels, np.arange(N) % 2)


@pytest.mark.parametrize("views, names, error", [
    (np.eye(N), None, r"not a single array; wrap it as \[X\]"),
    (sp.eye(N, format="csr"), None, r"not a single array; wrap it as \[X\]"),
    (da.eye(N, chunks=10), None, r"not a single array; wrap it as \[X\]"),
    ([np.eye(N)] * 2, "ab", "view_names: must be a list of strings .*not the string 'ab'"),
], ids=["numpy", "sparse", "dask", "names-str"])
def test_single_table_views_and_string_view_names_are_rejected(tmp_path, views, names, error):
    """A single array or sparse matrix used to be written as one view per row; "ab" as the names ['a', 'b']."""
    with pytest.raises(TypeError, match=error):
        MultiViewStore.create(tmp_path / "s.zarr", views, view_names=names)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("last, shown", [
    (np.float64(1e30), "1e+30"),
    (np.int64(np.iinfo(np.int64).min), str(np.iinfo(np.int64).min)),  # the fill value marking missing labels
    (np.uint64(2**63 + 5), str(2**63 + 5)),  # used to wrap to a negative label
])
def test_labels_int64_cannot_store_are_rejected(tmp_path, last, shown):
    """They used to be written, and read back as "labels are damaged (a chunk file was deleted)"."""
    y = np.append(np.zeros(N - 1, dtype=np.asarray(last).dtype), last)
    with pytest.raises(ValueError, match=rf"labels: holds {re.escape(shown)}, outside -2\*\*63 < label < 2\*\*63"):
        MultiViewStore.create(tmp_path / "s.zarr", [np.eye(N)], y)
    assert not any(tmp_path.iterdir())
    extremes = np.r_[np.iinfo(np.int64).min + 1, np.iinfo(np.int64).max, np.zeros(N - 2, np.int64)]
    np.testing.assert_array_equal(MultiViewStore.create(tmp_path / "s.zarr", [np.eye(N)], extremes).labels, extremes)


@pytest.mark.parametrize("chunk_rows", [2.5, 0, -3, True, "16"])
def test_chunk_rows_must_be_a_positive_integer(tmp_path, chunk_rows):
    """2.5 used to be truncated to 2 and True taken as 1."""
    with pytest.raises(ValueError, match=f"chunk_rows must be a positive integer, got {chunk_rows!r}"):
        MultiViewStore.create(tmp_path / "s.zarr", [np.eye(N)], chunk_rows=chunk_rows)
    assert not any(tmp_path.iterdir())
    assert MultiViewStore.create(tmp_path / "s.zarr", [np.eye(N)], chunk_rows=np.int64(16)).row_chunks(0)[0] == (0, 16)


def test_a_path_under_home_is_expanded(tmp_path, monkeypatch):
    """"~/views.zarr" is the home directory's store, as a shell would read it (pathlib leaves "~" as it is, so it was
    a directory named "~" in the working directory)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    views = [np.arange(40.0).reshape(20, 2), np.arange(60.0).reshape(20, 3) ** 2]
    store = MultiViewStore.create("~/views.zarr", views)
    assert store.path == tmp_path / "home" / "views.zarr" and not (tmp_path / "~").exists()
    np.testing.assert_array_equal(MultiViewStore("~/views.zarr").read_view(1), views[1])
    with pytest.raises(ValueError, match="~nosuchuser-onmsc/views.zarr: Could not determine home directory"):
        MultiViewStore("~nosuchuser-onmsc/views.zarr")  # a RuntimeError of pathlib's: not one-line for the CLI


def test_a_dask_array_of_sparse_chunks_is_stored_as_csr(tmp_path):
    """A dask array whose chunks are scipy.sparse matrices (a wide text view read out of core) is stored as CSR, as
    the in-memory matrix is (it was written as a dense array: `ValueError: setting an array element with a
    sequence` deep in zarr, so ONMSC(cache=...) failed on such a view)."""
    X = sp.random(300, 2000, density=0.003, format="csr", random_state=0)
    lazy = [da.concatenate([da.from_delayed(dask.delayed(lambda s: X[s:s + 100])(s), shape=(100, 2000), dtype=float,
                                            meta=meta) for s in range(0, 300, 100)])
            for meta in (sp.csr_matrix((0, 0)), np.empty((0, 0)))]
    store = MultiViewStore.create(tmp_path / "s.zarr", [lazy[0], np.ones((300, 2))])
    assert store.is_sparse(0) and not store.is_sparse(1)
    assert (store.read_view(0) != X).nnz == 0
    # under a dense meta (not known before a chunk is computed): one error naming the view and the fix
    with pytest.raises(TypeError, match=r"^view 1 \('view1'\): its dask chunks are scipy.sparse matrices under a "
                                        r"dense meta; make it with meta=scipy.sparse.csr_matrix\(\(0, 0\)\)"):
        MultiViewStore.create(tmp_path / "t.zarr", [np.ones((300, 2)), lazy[1]])
    assert not (tmp_path / "t.zarr").exists()


def test_a_copy_that_fails_raises_its_first_error_and_leaves_nothing(tmp_path, rng, monkeypatch):
    """A full disk while a store is copied (the CLI copies a given store into --out) was shutil.Error's list of every
    failed file, a 1,300-character line; it is the first failure itself, and the partial copy is removed."""
    import errno
    import os
    import shutil
    from pathlib import Path

    from onmsc_dask import store as store_module

    store = MultiViewStore.create(tmp_path / "s.zarr", [rng.normal(size=(N, 3))], chunk_rows=10)
    copies = []

    def full(source, target):
        copies.append(target)
        if len(copies) >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return shutil.copy2(source, target)

    monkeypatch.setattr(store_module.shutil, "copy2", full)
    with pytest.raises(OSError) as raised:
        store.copy(tmp_path / "c.zarr")
    assert type(raised.value) is OSError and raised.value.errno == errno.ENOSPC and len(copies) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]
    monkeypatch.undo()
    # a directory of the store that cannot be listed (no permission) was skipped: a copy without its chunks
    scandir = os.scandir

    def unlistable(path="."):
        if isinstance(path, (str, os.PathLike)) and Path(path) == store.path / "views" / "0" / "c":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", unlistable)
    with pytest.raises(PermissionError, match="Permission denied"):
        store.copy(tmp_path / "c.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]


@pytest.mark.parametrize("solver", ["anchor", "exact"])
def test_a_store_written_again_while_a_fit_reads_it_is_said(tmp_path, solver):
    """MultiViewStore.create over a store while a fit read it (here as its second stage starts): the fit used to end
    in a 'chunk file was deleted' error, or silently in labels mixing both contents; now one error saying so. A fit
    of the store as it is then gives its own labels."""
    from onmsc_dask import ONMSC

    rng = np.random.default_rng(0)
    y = np.arange(600) % 3
    views = [rng.normal(size=(600, 5)) + 3 * y[:, None], rng.normal(size=(600, 4)) + 2 * y[:, None]]
    path = tmp_path / "s.zarr"
    MultiViewStore.create(path, views)
    order = rng.permutation(600)
    written = []

    def write_again(line: str) -> None:
        if not written and ("stage 2" in line or line.startswith("graphs")):
            written.append(MultiViewStore.create(path, [X[order] for X in views], overwrite=True))

    with pytest.raises(ValueError, match=rf"^store {re.escape(str(path))}: written again \(MultiViewStore\.create "
                                         r"over it\) since it was opened or while it was read; run again on the store "
                                         r"as it is now \(open it again\), once it is written$"):
        ONMSC(3, embedding=solver, random_state=0).fit(str(path), progress=write_again)
    assert written
    again = ONMSC(3, embedding=solver, random_state=0).fit(str(path)).labels_
    alone = ONMSC(3, embedding=solver, random_state=0).fit([X[order] for X in views]).labels_
    np.testing.assert_array_equal(again, alone)


def test_an_url_where_nothing_is_stored_says_so():
    """It said zarr's "No group found in store 'memory://…' at path ''"."""
    with pytest.raises(ValueError, match=r"^no readable onmsc-dask store at memory://nothing/here\.zarr: nothing is "
                                         r"stored there \(check the URL\)$"):
        MultiViewStore("memory://nothing/here.zarr")
