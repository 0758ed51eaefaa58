"""Clustering metrics (onmsc_dask.metrics) on hand-computed cases."""
import numpy as np
import pytest

from onmsc_dask.metrics import accuracy, evaluate, purity


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


def test_perfect_clustering_with_renamed_clusters():
    y_true = [0, 0, 1, 1, 2, 2]
    y_pred = [5, 5, 3, 3, 9, 9]
    res = evaluate(y_true, y_pred)
    assert set(res) == {"acc", "nmi", "purity", "ari"}
    assert all(isinstance(v, float) for v in res.values())
    for key in res:
        assert res[key] == pytest.approx(1.0)


def test_hand_computed_case_acc_differs_from_purity():
    # contingency (rows: classes 0, 1; columns: clusters 0, 1, 2) = [[2, 2, 0], [0, 0, 2]]
    y_true = [0, 0, 0, 0, 1, 1]
    y_pred = [0, 0, 1, 1, 2, 2]
    # purity: every cluster is pure -> 6/6; accuracy: one-to-one, best 0<->c0 (2) + 1<->c2 (2) -> 4/6
    assert purity(y_true, y_pred) == pytest.approx(1.0)
    assert accuracy(y_true, y_pred) == pytest.approx(4 / 6)
    res = evaluate(y_true, y_pred)
    assert res["acc"] == pytest.approx(4 / 6)
    assert res["purity"] == pytest.approx(1.0)
    # NMI (arithmetic mean): the clusters determine the class, so I = H(class)
    h_true = -(4 / 6 * np.log(4 / 6) + 2 / 6 * np.log(2 / 6))
    h_pred = np.log(3)
    assert res["nmi"] == pytest.approx(2 * h_true / (h_true + h_pred))
    # ARI: sum C(n_ij,2) = 3, rows C(4,2)+C(2,2) = 7, cols 3 * C(2,2) = 3, C(6,2) = 15
    expected = 7 * 3 / 15
    assert res["ari"] == pytest.approx((3 - expected) / ((7 + 3) / 2 - expected))


def test_hand_computed_case_with_errors():
    # contingency rows classes [a, b, c], columns clusters [0, 1]:
    # a: [3, 1], b: [0, 3], c: [2, 0]
    y_true = ["a"] * 4 + ["b"] * 3 + ["c"] * 2
    y_pred = [0, 0, 0, 1] + [1, 1, 1] + [0, 0]
    # accuracy: a<->0 (3) + b<->1 (3) = 6/9 ; purity: cluster 0 majority a (3), cluster 1 majority b (3) = 6/9
    assert accuracy(y_true, y_pred) == pytest.approx(6 / 9)
    assert purity(y_true, y_pred) == pytest.approx(6 / 9)
    # more clusters than classes: every sample its own cluster -> purity 1, accuracy = #classes / n
    own = np.arange(9)
    assert purity(y_true, own) == pytest.approx(1.0)
    assert accuracy(y_true, own) == pytest.approx(3 / 9)
    # a single cluster: accuracy = purity = largest class share
    one = np.zeros(9, int)
    assert accuracy(y_true, one) == pytest.approx(4 / 9)
    assert purity(y_true, one) == pytest.approx(4 / 9)


def test_accuracy_needs_hungarian_not_greedy():
    # contingency [[3, 2, 0], [2, 0, 0], [0, 0, 1]]: greedy (largest cell first, 0<->c0) gives 3 + 0 + 1 = 4,
    # the optimal one-to-one matching 0<->c1 (2) + 1<->c0 (2) + 2<->c2 (1) = 5
    y_true = [0] * 5 + [1] * 2 + [2]
    y_pred = [0, 0, 0, 1, 1] + [0, 0] + [2]
    assert accuracy(y_true, y_pred) == pytest.approx(5 / 8)


def test_invariance_to_label_permutation():
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, 4, size=200)
    y_pred = np.where(rng.random(200) < 0.7, y_true, rng.integers(0, 5, size=200))
    base = evaluate(y_true, y_pred)
    perm_pred = rng.permutation(5)[y_pred]
    perm_true = np.array([10, 20, 30, 40])[rng.permutation(4)][y_true]
    for t, p in [(y_true, perm_pred), (perm_true, y_pred), (perm_true, perm_pred)]:
        res = evaluate(t, p)
        for key in base:
            assert res[key] == pytest.approx(base[key], abs=1e-12)
    # list / column-vector inputs are accepted like 1-D arrays
    res = evaluate(list(y_true), y_pred.reshape(-1, 1))
    assert res == pytest.approx(base)


def test_metric_ranges():
    rng = np.random.default_rng(1)
    y_true = rng.integers(0, 3, 90)
    y_pred = rng.integers(0, 3, 90)
    res = evaluate(y_true, y_pred)
    assert 0 < res["acc"] <= 1
    assert 0 <= res["nmi"] <= 1 and -1 <= res["ari"] <= 1 and 0 < res["purity"] <= 1
    # with as many clusters as classes, accuracy never exceeds purity
    assert res["acc"] <= res["purity"] + 1e-12


@pytest.mark.parametrize("func", [accuracy, purity, evaluate])
def test_mismatched_lengths_raise(func):
    with pytest.raises(ValueError, match="labels"):
        func([0, 1, 1], [0, 1])


@pytest.mark.parametrize("func", [accuracy, purity, evaluate])
def test_empty_raises(func):
    with pytest.raises(ValueError):
        func([], [])


@pytest.mark.parametrize("func", [accuracy, purity, evaluate])
def test_labels_of_two_columns_raise_and_a_column_vector_is_one(func):
    """2-D labels were flattened: scores of nothing, no error (found by a user trial)."""
    y = np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"y_true must hold one label per sample \(1-D\), got shape \(4, 2\)"):
        func(np.c_[y, y], np.r_[y, y])
    assert func(y[:, None], y) == func(y, y)
