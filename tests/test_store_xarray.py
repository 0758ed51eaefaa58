"""A MultiViewStore opens in xarray: every array names its dimensions (Zarr v3 dimension_names)."""
import numpy as np
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
