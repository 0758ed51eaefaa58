"""scikit-learn's estimator checks on ONMSC through a one-view adapter (the checks pass one X, ONMSC takes a list
of views); docs/sklearn.md lists the checks that do not apply and why."""
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.estimator_checks import parametrize_with_checks

from onmsc_dask.api import ONMSC


class OneView(ClusterMixin, BaseEstimator):
    """ONMSC on the single view [X]: its errors, attributes and tags are ONMSC's own. It clusters into
    max(n_clusters, 2) clusters: several checks set n_clusters=1, which ONMSC refuses (k >= 2), and would otherwise
    stop at that error before what they check."""

    def __init__(self, n_clusters: int = 3, random_state: int | None = 0):
        self.n_clusters = n_clusters
        self.random_state = random_state

    def fit(self, X, y=None):
        self.model_ = ONMSC(max(self.n_clusters, 2), n_init=2, random_state=self.random_state).fit([X])
        self.labels_, self.n_features_in_ = self.model_.labels_, int(self.model_.n_features_in_[0])
        return self

    def predict(self, X):
        return getattr(self, "model_", ONMSC()).predict([X])  # ONMSC's NotFittedError before fit

    def transform(self, X):
        return getattr(self, "model_", ONMSC()).transform([X])

    def fit_transform(self, X, y=None):
        return self.fit(X).model_.transform([X])

    def __sklearn_tags__(self):
        return ONMSC().__sklearn_tags__()


#: checks that do not apply to a multi-view spectral clusterer, with the reason (docs/sklearn.md)
NOT_APPLICABLE = {
    "check_n_features_in_after_fitting": "its error must read 'X has d features, but ... is expecting d'; ONMSC's "
                                         "names the view: 'view 0: has shape (n, d), expected (n, d') as in the fit'",
    "check_complex_data": "its error must read 'Complex data not supported'; ONMSC's names the view and the fix",
    "check_estimators_empty_data_messages": "its error must read '0 feature(s) (shape=(n, 0)) while a minimum of 1 "
                                            "is required'; ONMSC's names the view",
    "check_fit2d_predict1d": "its error must read 'Reshape your data'; ONMSC's says a 1-D entry is not a view and how "
                             "to pass one",
    "check_dtype_object": "it expects numpy's TypeError for a view holding a dict; ONMSC raises ValueError naming the "
                          "view (every error about a view's values is a ValueError: the CLI's exit code 2)",
}


@parametrize_with_checks([OneView()], expected_failed_checks=lambda est: NOT_APPLICABLE)
def test_sklearn_check(estimator, check):
    check(estimator)
