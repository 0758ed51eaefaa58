"""Shared test settings: hypothesis runs derandomized so CI is reproducible (a fixed, broad set of examples), and the
single-threaded BLAS fixture of the modules that ask for it."""
import pytest
from hypothesis import settings
from threadpoolctl import threadpool_limits

settings.register_profile("reproducible", derandomize=True, deadline=None)
settings.load_profile("reproducible")


@pytest.fixture(scope="module")
def single_threaded_blas():
    """The test machine has 2 shared cores: OpenMP/BLAS thread pools oversubscribe it badly (k-means alone slows down
    ~50x), so a module that uses this runs single-threaded."""
    with threadpool_limits(1):
        yield
