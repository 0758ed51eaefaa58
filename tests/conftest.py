"""Shared test settings: hypothesis runs derandomized so CI is reproducible (a fixed, broad set of examples), Ctrl-C
as a terminal delivers it, the single-threaded BLAS fixture of the modules that ask for it, and a module's one-worker
cluster for CLI runs."""
import signal

import pytest
from distributed import LocalCluster
from hypothesis import settings
from threadpoolctl import threadpool_limits

settings.register_profile("reproducible", derandomize=True, deadline=None)
settings.load_profile("reproducible")

# A shell starts background jobs (`pytest &`, nohup) with SIGINT ignored, and commands the tests start inherit that,
# so the Ctrl-C tests' SIGINT would do nothing; a terminal's foreground command has it handled.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module")
def single_threaded_blas():
    """The test machine has 2 shared cores: OpenMP/BLAS thread pools oversubscribe it badly (k-means alone slows down
    ~50x), so a module that uses this runs single-threaded."""
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def scheduler():
    """Address of a one-worker process LocalCluster, for the CLI runs of a module with --scheduler (each run's own
    LocalCluster costs it about 6 s)."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        yield cluster.scheduler_address
