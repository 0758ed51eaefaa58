"""Labels from the fused embedding (assign.py): k-means on the row-normalized rows, lowest inertia of the restarts."""
from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from onmsc_dask.assign import assign_labels, normalize_rows, readout
from onmsc_dask.metrics import accuracy


def _directions_with_spread_norms(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows along three directions (the clusters), their lengths spread over two orders of magnitude."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), 40)
    directions = np.linalg.qr(rng.normal(size=(4, 3)))[0].T  # 3 orthonormal directions in R^4
    lengths = 10.0 ** rng.uniform(-1, 1, size=len(y))
    H = lengths[:, None] * (directions[y] + 0.05 * rng.normal(size=(len(y), 4)))
    return H, y


def test_normalize_rows_unit_length_and_zero_rows_kept():
    H = np.array([[3.0, 4.0], [0.0, 0.0], [-1e-3, 0.0]])
    np.testing.assert_allclose(normalize_rows(H), [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]])


def test_assign_labels_is_kmeans_on_unit_rows_with_restarts():
    H, _ = _directions_with_spread_norms()
    for seed in (0, 1):
        labels, inertia = assign_labels(H, 3, random_state=seed)
        km = KMeans(3, n_init=10, random_state=seed).fit(normalize_rows(H))
        np.testing.assert_array_equal(labels, km.labels_)
        assert labels.dtype == np.int64 and inertia == km.inertia_
        raw, raw_inertia = assign_labels(H, 3, row_normalize=False, n_init=4, random_state=seed)
        km = KMeans(3, n_init=4, random_state=seed).fit(H)
        np.testing.assert_array_equal(raw, km.labels_)
        assert raw_inertia == km.inertia_


def test_row_normalization_clusters_directions_not_lengths():
    H, y = _directions_with_spread_norms()
    assert accuracy(y, assign_labels(H, 3, random_state=0)[0]) == 1.0
    assert accuracy(y, assign_labels(H, 3, row_normalize=False, random_state=0)[0]) < 0.9


def test_more_restarts_never_raise_the_kept_inertia():
    rng = np.random.default_rng(1)
    H = rng.normal(size=(300, 6))
    single = [assign_labels(H, 8, n_init=1, random_state=s)[1] for s in range(5)]
    assert assign_labels(H, 8, n_init=20, random_state=0)[1] <= min(single) + 1e-9


def test_readout_is_the_embedding_at_width_k_and_the_target_when_wider():
    rng = np.random.default_rng(2)
    embedding, target = rng.normal(size=(10, 3)), rng.normal(size=(10, 3))
    assert readout(embedding, target, 3) is embedding
    wide, wide_target = rng.normal(size=(10, 6)), rng.normal(size=(10, 6))
    assert readout(wide, wide_target, 3) is wide_target
