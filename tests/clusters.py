"""A real Dask cluster for tests: a `dask scheduler` process and `dask worker` processes, and a worker plugin that
kills them."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import cloudpickle
from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import key_split

from processes import free_port, stop

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the worker processes cannot import this module

#: no instance-metadata lookup by botocore in a process without S3 credentials (no network in the tests)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "AWS_EC2_METADATA_DISABLED": "true"}


class Cluster:
    """A `dask scheduler` process and `dask worker` processes (each under a nanny, which restarts a killed
    worker), started and stopped by the test."""

    def __init__(self, tmp: Path, n_workers: int, nanny: bool = True, allowed_failures: int | None = None) -> None:
        """`allowed_failures`: the scheduler's distributed.scheduler.allowed-failures (distributed's default: 3), the
        times a task may be on a worker that dies before it is given up (KilledWorker)."""
        self.tmp, self.nanny, self.address = tmp, nanny, f"tcp://127.0.0.1:{free_port()}"
        config = {} if allowed_failures is None else {
            "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(allowed_failures)}
        self.scheduler = self._spawn(["dask", "scheduler", "--host", "127.0.0.1", "--port",
                                      self.address.rsplit(":", 1)[1], "--dashboard-address", ":0", "--no-show"], config)
        self.workers = [self.add_worker() for _ in range(n_workers)]

    def _spawn(self, command: list[str], config: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(command, env={**ENV, **(config or {})}, cwd=self.tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def add_worker(self) -> subprocess.Popen:
        return self._spawn(["dask", "worker", self.address, "--nworkers", "1", "--nthreads", "1",
                            "--memory-limit", "1GiB", "--local-directory", str(self.tmp / "workers"),
                            "--no-dashboard", "--nanny" if self.nanny else "--no-nanny"])

    def kill_workers(self) -> None:
        """SIGKILL every worker process and its nanny (a whole machine lost)."""
        with Client(self.address, timeout="30s") as client:
            pids = list(client.run(os.getpid).values())
        for proc in self.workers:
            proc.kill()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.workers:
            proc.wait()

    def stop(self) -> None:
        """The workers first, then the scheduler: a worker terminated after its scheduler waits for it to come back
        (20 s without a nanny, 8 s with one, before the kill; under 1 s this way)."""
        stop(self.workers)
        stop([self.scheduler])


class KillEvery(WorkerPlugin):
    """SIGKILL the worker process (its nanny starts another) as it starts any task of function `name`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish == "executing" and key_split(key) == self.name.lstrip("_"):  # key_split drops leading "_"
            os.kill(os.getpid(), signal.SIGKILL)
