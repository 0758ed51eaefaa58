"""A MultiViewStore opens in xarray: every array names its dimensions (Zarr v3 dimension_names)."""
import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr

from onmsc_dask.store import MultiViewStore


def test_xarray_opens_views_labels_and_results(tmp_path):
    rng = np.random.default_rng(0)
    dense, sparse = rng.random((30, 4)), sp.random(30, 6, density=0.3, format="csr", random_state=0)
    store = MultiViewStore.create(tmp_path / "s.zarr", [dense, sparse], np.arange(30) % 3, view_names=["a", "b"])
    store.write_result("onmsc", "labels", np.arange(30) % 3, {"k": 3})
    store.write_result("onmsc", "embedding", rng.random((30, 3)), {"k": 3})
    views = xr.open_zarr(store.path, group="views", consolidated=False)
    assert views["0"].dims == ("sample", "feature0")
    np.testing.assert_array_equal(views["0"].values, dense)
    root = xr.open_zarr(store.path, consolidated=False)
    np.testing.assert_array_equal(root["labels"].values, np.arange(30) % 3)
    assert root.attrs["view_names"] == ["a", "b"]
    csr = xr.open_zarr(store.path, group="views/1", consolidated=False)
    matrix = sp.csr_matrix((csr["data"].values, csr["indices"].values, csr["indptr"].values), shape=(30, 6))
    assert (matrix != sparse).nnz == 0
    results = xr.open_zarr(store.path, group="stages/onmsc", consolidated=False)
    assert results["embedding"].shape == (30, 3)
    np.testing.assert_array_equal(results["labels"].values, store.read_result("onmsc", "labels"))


def test_xarray_data_arrays_are_views_as_their_arrays():
    """xarray DataArrays (dask-backed, as xarray.open_zarr gives them, or loaded) are fitted and predicted as their
    arrays (the anchor chain failed inside a task: `IndexError: too many indices`)."""
    import xarray as xr
    from sklearn.datasets import make_blobs

    from onmsc_dask import ONMSC

    X, _ = make_blobs(1200, 6, centers=3, random_state=0)
    arrays = [X, X[:, ::-1] + 1]
    ds = xr.Dataset({"a": (("sample", "f0"), arrays[0]), "b": (("sample", "f1"), arrays[1])}).chunk({"sample": 500})
    params = dict(embedding="anchor", n_landmarks=100, random_state=0)
    reference = ONMSC(3, **params).fit(arrays)
    for data in (ds, ds.load()):
        model = ONMSC(3, **params).fit([data["a"], data["b"]])
        np.testing.assert_array_equal(model.labels_, reference.labels_)
        np.testing.assert_array_equal(np.asarray(model.predict([data["a"], data["b"]])), reference.predict(arrays))
    variables = [ds["a"].variable, ds["b"].variable]  # an xarray Variable too
    np.testing.assert_array_equal(ONMSC(3, **params).fit(variables).labels_, reference.labels_)
    with pytest.raises(TypeError, match=r"view 0: is an xarray Dataset, which holds several arrays; pass one of them"):
        ONMSC(3, **params).fit([ds, arrays[1]])
