"""In-memory data as one input of Dask graphs: sent to the workers once, never inside a task graph; data loaded by
tasks, kept on the workers; and the scheduler settings of the LocalClusters onmsc-dask starts."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from . import supervision

T = TypeVar("T")


#: the scheduler settings of the LocalClusters onmsc-dask starts (cluster_configs/dask.yaml has them for others): one
#: root task sent to a worker per thread (distributed's default 1.1 sends a one-thread worker two), so none waits
#: there behind a long task the worker starts while another worker idles (Fashion-MNIST 60k landmarks stage: a
#: view's chunk scan sat behind the pixels' k-means for 1.5 s)
SCHEDULER_CONFIG = {"distributed.scheduler.worker-saturation": 1.0}

#: sends of one value to the workers when a worker is lost meanwhile (cluster.scattered), and runs of a computation
#: (ONMSC.fit, predict and transform) when a worker is lost with what it was sent (again_on_lost_data)
SEND_ATTEMPTS = FIT_ATTEMPTS = 3


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread in this process for a fit, predict or transform, as in worker processes (which Dask starts
    with one BLAS thread), and the limits it found restored after. A call that finds one thread already (another
    call's limit, nested or from another thread, or the process's own) changes nothing, so it cannot restore a limit
    after the call that set it has restored the process's: overlapping limits restored each other's. While the
    limit holds, the local scheduler's threads cannot change OpenBLAS's (threadpoolctl >= 3.6 lets the thread that
    set it change it); they used to run scikit-learn's k-means side by side, each restoring the limit another had
    set, and leave the user's process on one BLAS thread."""
    from threadpoolctl import threadpool_info, threadpool_limits

    if all(lib["num_threads"] == 1 for lib in threadpool_info() if lib["user_api"] == "blas"):
        yield
        return
    with threadpool_limits(1, user_api="blas"):
        yield


def active_client() -> Any:
    """The running distributed client when it is the active scheduler, else None."""
    from dask.base import get_scheduler

    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    return client if get_scheduler() == client.get else None  # not when a local scheduler is configured over it


def persisted(tasks: list) -> list:
    """Delayed ``tasks`` computed and kept where they ran: Futures on the workers of the running distributed client
    (tasks take them as arguments), else their values."""
    import dask

    client = active_client()
    return list(dask.compute(*tasks)) if client is None else client.compute(tasks)


def scattered(value: Any) -> Any:
    """`value` sent to the workers of the running distributed client, as a Future that tasks take as an argument;
    `value` itself when no distributed client is the active scheduler (the local schedulers share memory and
    serialise no graph). A list is scattered as a list of Futures, one per item. One copy each: the scheduler's
    replication (and so a broadcast) waits forever for a worker lost meanwhile, blocking every later one. A worker
    lost while the value is sent makes it send again to the workers left (SEND_ATTEMPTS); one lost later with what
    it held fails the computations that need it (lost_data), which ONMSC.fit then runs again from the start."""
    import time

    client = active_client()
    if client is None:
        return value
    from distributed.comm.core import CommClosedError

    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            return client.scatter(value, hash=False)  # a fresh key: no release of an equal earlier one
        except CommClosedError as exc:  # the worker went away while the data went to it
            if attempt == SEND_ATTEMPTS:
                raise WorkersLost(f"Dask workers were lost while this process sent them data, {attempt} times ({exc});"
                                  " run again once the cluster is steady") from None
            time.sleep(attempt)  # until the scheduler has removed the lost worker


#: the least memory_limit of a Dask worker a fit runs on: a worker process takes about 200 MB once onmsc-dask's
#: modules are imported (62 MB bare), and one above 80% of its limit is paused, above 95% restarted by its nanny
#: (at 200 MB the fit waited without end while the workers were restarted)
WORKER_MEMORY_MIN = 384 * 2**20


def check_worker_memory() -> None:
    """The running distributed client's workers each have a memory_limit of at least WORKER_MEMORY_MIN (or none).
    A scheduler that does not answer within supervision.SCHEDULER_LOST_TIMEOUT is not waited for (asking it waited
    distributed's connect timeout, 60 s in the CLI): the fit's ClusterWatch then says it was lost."""
    client = active_client()
    if client is None or client.status != "running":
        return
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1,
                           callback_timeout=supervision.SCHEDULER_LOST_TIMEOUT)
    except (TimeoutError, OSError):
        return
    limits = [worker.get("memory_limit") or 0 for worker in info.get("workers", {}).values()]
    small = [limit for limit in limits if 0 < limit < WORKER_MEMORY_MIN]
    if small:
        raise ValueError(f"{len(small)} of the {len(limits)} Dask workers have a memory_limit of "
                         f"{min(small) / 2**20:.0f} MiB, below the {WORKER_MEMORY_MIN // 2**20} MiB a worker needs "
                         "(about 200 MB once "
                         "onmsc-dask's modules are imported; a worker above 80% of its limit is paused, above 95% "
                         "restarted, and the fit would not finish); start them with memory_limit='1GiB' or more")


class WorkersLost(RuntimeError):
    """Dask workers were lost with data sent to them, every time it was sent (SEND_ATTEMPTS, FIT_ATTEMPTS)."""


#: the reasons distributed gives for a computation cancelled because an input it needed was lost with a worker
LOST_DATA_REASONS = ("lost dependencies", "already forgotten")


def lost_data(exc: BaseException) -> bool:
    """Whether `exc` is distributed's report that a computation lost an input held only by a lost worker (data
    this process scattered cannot be recomputed); not a lost scheduler."""
    try:
        from distributed.client import FutureCancelledError
    except ImportError:
        return False
    return isinstance(exc, FutureCancelledError) and exc.reason in LOST_DATA_REASONS


def again_on_lost_data(run: Callable[[], T], action: str, hint: str,
                       report: Callable[[str], None] = lambda line: None) -> T:
    """run(), which sends its data to the workers itself, run again (saying so: "…; `action` again from the start")
    when a worker was lost with data only it held (lost_data); after FIT_ATTEMPTS runs one WorkersLost ending in
    `hint`."""
    for attempt in range(1, FIT_ATTEMPTS + 1):
        try:
            return run()
        except BaseException as exc:
            if not lost_data(exc):
                raise
            if attempt == FIT_ATTEMPTS:
                raise WorkersLost(f"Dask workers were lost with data this process sent them, {attempt} times ({exc});"
                                  f" {hint}") from None
            report(f"a Dask worker was lost with data this process sent it ({exc}); {action} again from the start")
