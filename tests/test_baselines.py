"""SB-SC, A-MVSC and BL / BL+HCI / BL+NLM baselines on three views of scikit-learn's digits."""
import numpy as np
import pytest
from sklearn.datasets import load_digits

from onmsc_dask.baselines import AverageGraphSC, LinearCombination, SingleBestView
from onmsc_dask.early_fusion import fit_early_fusion
from onmsc_dask.metrics import accuracy

K = 10


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).choice(len(y), 500, replace=False)
    X, y = X[idx], y[idx]
    chance = max(accuracy(y, np.random.default_rng(s).permutation(y)) for s in range(5))
    return [X[:, :24], X[:, 24:40], X[:, 40:]], y, chance


def test_single_best_view(digits):
    views, y, chance = digits
    sb = SingleBestView(K, random_state=0).fit(views)
    assert len(sb.per_view_labels_) == 3 and sb.best_view_ == int(np.argmax(sb.eigengaps_))
    np.testing.assert_array_equal(sb.labels_, sb.per_view_labels_[sb.best_view_])
    scores = [s["acc"] for s in sb.score_views_(y)]
    assert scores[sb.best_view_] == pytest.approx(accuracy(y, sb.labels_)) and max(scores) > 2 * chance
    assert accuracy(y, sb.labels_) > 2 * chance


def test_average_graph(digits):
    views, y, chance = digits
    labels = AverageGraphSC(K, random_state=0).fit_predict(views)
    assert accuracy(y, labels) > 4 * chance


@pytest.mark.parametrize("order", [1, 2])
def test_linear_combination(digits, order):
    views, y, chance = digits
    bl = LinearCombination(K, order=order, random_state=0).fit(views)
    J = np.array(bl.objective_)
    assert np.all(np.diff(J) <= 1e-9 * np.abs(J[1:]))  # alternating exact minimisers
    assert np.all(bl.view_weights_ >= 0) and bl.view_weights_.sum() == pytest.approx(1.0)
    assert accuracy(y, bl.labels_) > 3 * chance


def test_bl_nlm_is_early_fusion_order_one(digits):
    views, y, chance = digits
    fit = fit_early_fusion(views, K, order=1, random_state=0)
    assert accuracy(y, fit.labels) > 4 * chance
