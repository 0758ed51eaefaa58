"""What keeps a CLI run safe: one run per output directory (:class:`OutputLock`) and per object store that receives
its stages (:class:`StoreLock`), and a watch on its Dask cluster
(:class:`ClusterWatch`) that ends, within a bounded time, a computation the cluster can no longer finish."""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from .location import unreachable
from .progress import counted

LOCK_NAME = ".onmsc-dask.lock"
#: seconds the cluster may have no worker (a nanny restarts a killed one within a few) before a run is abandoned
NO_WORKER_TIMEOUT = 30.0
#: seconds the client may be without its scheduler before a run is abandoned (the scheduler's state is lost anyway)
SCHEDULER_LOST_TIMEOUT = 10.0


class ClusterLost(RuntimeError):
    """The Dask cluster can no longer finish the computation: the scheduler gone (`scheduler`), or no worker left."""

    def __init__(self, message: str, scheduler: bool) -> None:
        super().__init__(message)
        self.scheduler = scheduler


class ClusterWatch:
    """While in use, a thread checks `client` every `poll` seconds; once it has had no worker for
    NO_WORKER_TIMEOUT seconds, or no scheduler connection for `scheduler_timeout` seconds, it cancels every
    future of the client (what a computation waits for), so the waiting call raises CancelledError, and keeps
    the reason in ``lost``, a ClusterLost (None while the cluster is usable). `report`, if given, is told when
    workers leave or join."""

    def __init__(self, client: Any, scheduler_timeout: float | None = None, poll: float = 0.5,
                 report: Callable[[str], None] | None = None) -> None:
        self.client, self.poll, self.report = client, poll, report
        self.address = client.scheduler.address  # kept: the client drops its scheduler (None) once it loses it
        self.limits = {"workers": NO_WORKER_TIMEOUT,
                       "scheduler": SCHEDULER_LOST_TIMEOUT if scheduler_timeout is None else scheduler_timeout}
        self.lost: ClusterLost | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="onmsc-dask cluster watch", daemon=True)

    def __enter__(self) -> "ClusterWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _problem(self) -> str | None:
        """"scheduler" or "workers" when the cluster lacks one, else None."""
        if self.client.status != "running":
            return "scheduler"
        return None if worker_count(self.client) else "workers"

    def _workers_changed(self, before: int, now: int) -> None:
        """Tell `report` that workers left (their tasks run again on the others, or the run waits for one) or joined."""
        if self.report is None or now == before:
            return
        if now > before:
            self.report(f"{counted(now - before, 'Dask worker')} joined the cluster ({now} now)")
            return
        then = (f"; {'its' if before - now == 1 else 'their'} tasks run again on the "
                f"{'other' if now == 1 else f'{now} others'}" if now else
                f"; the run waits up to {self.limits['workers']:g} s for one (start workers with `dask worker "
                f"{self.address} --nthreads 1`)")
        self.report(f"the Dask cluster lost {counted(before - now, 'worker')} ({now} left){then}")

    def _watch(self) -> None:
        since: dict[str, float] = {}
        workers = None
        while not self._stop.wait(self.poll):
            if self.client.status == "running":
                workers, before = worker_count(self.client), workers
                if before is not None:
                    self._workers_changed(before, workers)
            problem = self._problem()
            since = {problem: since.get(problem, time.monotonic())} if problem else {}
            if problem and time.monotonic() - since[problem] >= self.limits[problem]:
                limit = self.limits[problem]
                self.lost = ClusterLost(f"no Dask worker left for {limit:g} s" if problem == "workers" else
                                        f"the Dask scheduler {self.address} was lost for {limit:g} s",
                                        scheduler=problem == "scheduler")
                self.client.loop.add_callback(self._cancel)

    def _cancel(self) -> None:
        """Cancel every future of the client, as distributed does when it loses its scheduler (in its loop)."""
        for key in list(self.client.futures):
            self.client.futures.pop(key).cancel(reason="cluster-lost", msg=str(self.lost))


def worker_count(client: Any) -> int:
    """The number of workers in the client's latest view of its scheduler, which the client refreshes itself (every
    2 s): never waits on a scheduler that may be gone (asking it waits up to distributed's connect timeout)."""
    info = client._scheduler_identity  # noqa: SLF001 - distributed's cache of the scheduler's identity
    return int(info.get("n_workers", len(info.get("workers", {}))))


class OutputLocked(OSError):
    """Another run writes to the output directory."""


class OutputLock:
    """One run per output directory: ``DIR/.onmsc-dask.lock`` holds the PID and host of the run that writes to
    `out`. A lock of a process that no longer runs on this host is taken over with a warning; any other lock is an
    OutputLocked error naming its holder. `out` is created when missing, and removed on release when it is still empty
    (so a run that stops before writing anything leaves nothing behind)."""

    def __init__(self, out: Path) -> None:
        self.out, self.path = out, out / LOCK_NAME
        self.content = _lock_content()
        self.created_out = False

    def __enter__(self) -> "OutputLock":
        self.created_out = not self.out.exists()
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            while not self._create():
                holder = self._holder()
                if holder is None:  # released meanwhile
                    continue
                if not holder:
                    raise OutputLocked(f"{self.path} is not an onmsc-dask lock; delete it if no run writes to "
                                       f"{self.out}")
                if _live(holder):
                    raise OutputLocked(f"another onmsc-dask run ({_holder_text(holder)}) is writing to {self.out}; "
                                       f"wait for it to end or give another --out (if that run is gone, delete "
                                       f"{self.path})")
                self._take_over(holder)
        except BaseException:
            self._remove_out()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._holder() == json.loads(self.content):
            self.path.unlink(missing_ok=True)
        self._remove_out()

    def _create(self) -> bool:
        """Put our lock in place, whole (written aside, then hard-linked: no run ever reads a half-written lock);
        False when there is one already."""
        mine = self.path.with_name(f"{LOCK_NAME}.{os.getpid()}")
        mine.write_text(self.content)
        try:
            os.link(mine, self.path)
        except FileExistsError:
            return False
        finally:
            mine.unlink()
        return True

    def _holder(self, path: Path | None = None) -> dict | None:
        """The lock at `path` (ours by default) as a dict ({} when it is not one of ours), None when missing."""
        try:
            return _parsed((path or self.path).read_text())
        except FileNotFoundError:
            return None

    def _take_over(self, holder: dict) -> None:
        """Move the stale lock aside (one run wins the rename) and put it back if it was not the one judged stale."""
        aside = self.path.with_name(f"{LOCK_NAME}.stale-{os.getpid()}")
        try:
            self.path.rename(aside)
        except FileNotFoundError:
            return
        if self._holder(aside) != holder:  # another run took it over first: its lock, back in place
            try:
                os.link(aside, self.path)
            finally:
                aside.unlink()
            return
        aside.unlink()
        _warn_taking_over(self.path, holder)

    def _remove_out(self) -> None:
        if self.created_out:
            try:
                self.out.rmdir()
            except OSError:  # not empty: the run wrote something
                pass


class StoreLock:
    """One run per object store that receives a run's stages (``--data URL``): ``URL/.onmsc-dask.lock`` holds the
    PID and host of that run, as OutputLock's file does; a lock of a process that no longer runs on this host is
    taken over with a warning, any other is an OutputLocked error naming its holder. An object store has no
    exclusive create, so two runs started within the same moment can both pass; runs started apart cannot."""

    def __init__(self, location: Any) -> None:
        self.url = f"{location.url}/{LOCK_NAME}"
        self.fs = location.filesystem()
        self.path = f"{self.fs._strip_protocol(location.url)}/{LOCK_NAME}"
        self.content = _lock_content()

    def __enter__(self) -> "StoreLock":
        holder = self._holder()
        if holder is not None:
            if not holder or _live(holder):
                raise OutputLocked(f"another onmsc-dask run ({_holder_text(holder) if holder else 'unknown'}) writes "
                                   f"its stages into {self.url.rsplit('/', 1)[0]}; wait for it to end (if that run "
                                   f"is gone, delete {self.url})")
            _warn_taking_over(self.url, holder)
        try:
            self.fs.pipe(self.path, self.content.encode())
        except Exception as exc:  # noqa: BLE001 - each file system refuses a write in its own way (http: a 405)
            if unreachable(exc) is not None:
                raise
            raise ValueError(f"{self.url.rsplit('/', 1)[0]}: this run cannot write into the store "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())}), which receives the run's stages; "
                             "copy it where the run may write (a local path or a bucket) and run on the copy") from None
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._holder() == json.loads(self.content):
                self.fs.rm(self.path)
        except Exception as error:  # noqa: BLE001 - the store out of reach: the run's own outcome is reported
            warnings.warn(f"{self.url}: the lock could not be removed ({type(error).__name__}); a later run on this "
                          "host (in the same PID namespace) takes it over, a run elsewhere needs it deleted first",
                          stacklevel=2)

    def _holder(self) -> dict | None:
        """The lock as a dict ({} when it is not one of ours), None when there is none."""
        self.fs.invalidate_cache()
        try:
            return _parsed(self.fs.cat(self.path))
        except FileNotFoundError:
            return None


def _lock_content() -> str:
    """A lock's content: this process's PID, its PID namespace and start (_process_start), its host, and the time it
    started to hold it."""
    return json.dumps({"pid": os.getpid(), "pid_namespace": _pid_namespace(), "process_start": _process_start(),
                       "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")})


def _pid_namespace() -> str | None:
    """This process's PID namespace (Linux: ``pid:[inode]``; a container has its own), None where unknown."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _process_start(pid: int | None = None) -> str | None:
    """When process `pid` (this one by default) of this PID namespace started, in clock ticks since this host booted
    (Linux's /proc/PID/stat, field 22), with the boot's id: a PID used again has another; None where unknown."""
    try:
        stat = Path(f"/proc/{os.getpid() if pid is None else pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return f"{boot}:{stat.rsplit(')', 1)[1].split()[19]}"


def _parsed(content: str | bytes) -> dict:
    """A lock's content as a dict, {} when it is not one of ours."""
    try:
        holder = json.loads(content)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _live(holder: dict) -> bool:
    """Whether the run holding a lock may still run: on another host, or in another PID namespace (its PIDs are not
    ours to check), or a process of this host that runs and, where both starts are known, started when the lock's
    did (else its PID was used again)."""
    if holder.get("host") != socket.gethostname() or _elsewhere(holder):
        return True
    if not _running(holder.get("pid")):
        return False
    start = holder.get("process_start")
    return start is None or _process_start(holder["pid"]) in (None, start)


def _elsewhere(holder: dict) -> bool:
    """Whether a lock was taken in another PID namespace than this process's (a lock without one: the same)."""
    return holder.get("pid_namespace", _pid_namespace()) != _pid_namespace()


def _holder_text(holder: dict) -> str:
    return (f"PID {holder.get('pid')}{' in another PID namespace (a container)' * _elsewhere(holder)} on "
            f"{holder.get('host')}, started {holder.get('started')}")


def _warn_taking_over(lock: Any, holder: dict) -> None:
    warnings.warn(f"{lock}: taking over the lock of PID {holder.get('pid')} (started {holder.get('started')}), which "
                  "no longer runs on this host", stacklevel=3)


def _running(pid: Any) -> bool:
    """Whether process `pid` runs on this host (True when that cannot be told: the lock is then kept)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
