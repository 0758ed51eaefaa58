"""Injected faults on a real cluster (a `dask scheduler` process and `dask worker` processes with nannies): a worker
killed in any out-of-core stage, every worker lost, the scheduler lost, two runs into one --out, an interrupted
run and its rerun. docs/reliability.md lists each case with what the user sees."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import dask
import numpy as np
import pytest
from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import key_split
from sklearn.datasets import load_digits

from clusters import Cluster, KillEvery

from onmsc_dask import outofcore, supervision
from onmsc_dask.cli import main
from onmsc_dask.outofcore import fit_store
from onmsc_dask.store import MultiViewStore

#: how the CLI's lines qualify the finished stages they list
EACH = "; a finished stage is reused if made with the same parameters"

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the worker processes cannot import this module
PARAMS = dict(n_landmarks=60, random_state=0, n_init=3)


def _views(n: int = 1000) -> tuple[list[np.ndarray], np.ndarray]:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], X[:n] @ rng.standard_normal((64, 16)), np.sqrt(X[:n])], y[:n]


def _cluster(tmp: Path, n_workers: int):
    c = Cluster(tmp, n_workers)
    try:
        with Client(c.address, timeout="60s") as client:
            client.wait_for_workers(n_workers, timeout=120)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    """A scheduler and one worker: whatever a killed worker held, no other worker holds."""
    yield from _cluster(tmp_path_factory.mktemp("cluster1"), 1)


class KillOnce(WorkerPlugin):
    """SIGKILL the worker process as it starts its `nth` task of function `name`, once in the whole cluster
    (the first worker to get there creates `flag`)."""

    def __init__(self, name: str, nth: int, flag: str) -> None:
        self.name, self.nth, self.flag, self.seen = name, nth, flag, 0

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing" or key_split(key) != self.name.lstrip("_"):  # key_split drops leading "_"
            return
        self.seen += 1
        if self.seen == self.nth:
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The labels of an undisturbed run with each embedding method, on the sync scheduler (the "gram" embeddings'
    Z in blocks of 100 rows, as in the runs with a killed worker)."""
    views, y = _views()
    store = MultiViewStore.create(tmp_path_factory.mktemp("ref") / "r.zarr", views, y, chunk_rows=100)
    with dask.config.set(scheduler="sync"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(outofcore, "Z_BLOCK_ROWS", 100)
        return {method: fit_store(store, 10, method=method, **PARAMS).labels for method in ("gram", "tsqr")}


@pytest.mark.parametrize("task, method", [("_chunk_scan", "gram"), ("_anchor_block", "gram"),
                                          ("anchor_scaled_gram", "gram"), ("qr", "tsqr")],
                         ids=["landmarks", "anchor_graph", "embeddings", "embeddings-tsqr"])
def test_a_worker_killed_in_any_stage_gives_the_same_labels(tmp_path, one_worker, reference, task, method,
                                                             monkeypatch):
    """Nothing a task needs lives only in a worker's memory: the worker SIGKILLed as it starts a stage's task is
    replaced by its nanny, what it held is recomputed from the store, and the run ends with the undisturbed
    labels. (The landmarks used to be scattered, so a worker lost in the anchor_graph stage holding their only
    copy failed the run: `… cancelled for reason: already forgotten`; the tsqr pieces were scattered as a dict,
    under the keys "scale" and "u" shared by every graph: a dimension mismatch on any distributed cluster.)"""
    monkeypatch.setattr(outofcore, "Z_BLOCK_ROWS", 100)  # several Z blocks in the embeddings stage
    views, y = _views()
    store = MultiViewStore.create(tmp_path / "k.zarr", views, y, chunk_rows=100)
    flag = tmp_path / "killed"
    with Client(one_worker.address, timeout="60s") as client:
        client.wait_for_workers(1, timeout=120)
        pids = set(client.run(os.getpid).values())
        client.register_plugin(KillOnce(task, 2, str(flag)), name="kill-once")
        try:
            labels = fit_store(store, 10, client=client, method=method, **PARAMS).labels
        finally:
            client.unregister_worker_plugin("kill-once")
        client.wait_for_workers(1, timeout=120)
        assert flag.exists() and set(client.run(os.getpid).values()) != pids  # a worker was killed and replaced
    np.testing.assert_array_equal(labels, reference[method])


class KillPids(WorkerPlugin):
    """SIGKILL processes as a worker starts a task of function `name`: the worker and its nanny (`pids` None: the
    whole `dask worker` process tree, on every worker that gets there), or the given `pids` (e.g. the scheduler)."""

    def __init__(self, name: str, pids: list[int] | None = None) -> None:
        self.name, self.pids = name, pids

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish == "executing" and key_split(key) == self.name.lstrip("_"):
            for pid in self.pids or [os.getppid(), os.getpid()]:
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two workers of this test only (the faults below kill them)."""
    yield from _cluster(tmp_path, 2)


@pytest.fixture(scope="module")
def npz_reference(tmp_path_factory):
    """An .npz file of three digit views and the labels an undisturbed anchor run gives them."""
    tmp = tmp_path_factory.mktemp("reference")
    views, y = _views()
    np.savez(tmp / "d.npz", **{f"view{p}": v for p, v in enumerate(views)}, y=y)
    with dask.config.set(scheduler="sync"):
        labels = fit_store(MultiViewStore.create(tmp / "ref.zarr", views, y), 10, n_landmarks=60,
                           random_state=0).labels
    return tmp / "d.npz", labels


@pytest.fixture
def data(tmp_path, npz_reference):
    """npz_reference's .npz file, copied for one test (which may change it), and its labels."""
    shutil.copy2(npz_reference[0], tmp_path / "d.npz")
    return tmp_path / "d.npz", npz_reference[1]


def _in_thread(call, limit: float = 150.0):
    """call() in a thread; fails when it has not returned after `limit` seconds (it used to wait forever)."""
    out = {}
    thread = threading.Thread(target=lambda: out.update(value=call()), daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still waiting after {limit:g} s"
    return out["value"]


def _anchor_run(data: Path, out: Path, scheduler: str) -> list[str]:
    """The arguments of an anchor run of `data` into `out` on the cluster at `scheduler`."""
    return ["run", "--data", str(data), "--out", str(out), "--scheduler", scheduler, "--embedding", "anchor",
            "--n-landmarks", "60"]


def _main_in_thread(argv: list[str], limit: float = 150.0) -> int:
    """main(argv) (onmsc-dask run) in a thread, as _in_thread."""
    return _in_thread(lambda: main(argv), limit)


@pytest.mark.parametrize("line, embedding", [("stage 2/5 anchor_graph ...", "anchor"),
                                             ("stage 3/5 embeddings ...", "anchor"),
                                             ("graphs and embeddings:", "exact")],
                         ids=["anchor_graph", "embeddings", "exact"])
def test_a_worker_lost_with_data_sent_from_memory_gives_the_same_labels(cluster, line, embedding):
    """An in-memory fit sends its views' row chunks and stage results to the workers, with no store to read them
    again: a worker SIGKILLed as a stage starts left fit waiting forever in the scheduler's replication, or ended
    it in a CommClosedError traceback. Now the data is sent again to the workers left, or the fit starts again
    (saying so), and gives the labels of an undisturbed fit."""
    from onmsc_dask import ONMSC

    views, _ = _views()
    params = dict(embedding=embedding, n_landmarks=60, random_state=0, n_init=3)
    with dask.config.set(scheduler="sync"):
        expected = ONMSC(10, **params).fit(views).labels_
    lines = []

    def progress(text: str) -> None:
        lines.append(text)
        if line in text and sum(line in seen for seen in lines) == 1:
            os.kill(pid, signal.SIGKILL)

    with Client(cluster.address, timeout="60s") as client:
        pid = next(iter(client.run(os.getpid).values()))
        labels = _in_thread(lambda: ONMSC(10, **params).fit(views, progress=progress).labels_)
        assert pid not in client.run(os.getpid).values()  # the worker was killed
    np.testing.assert_array_equal(labels, expected)


class KillHolder(KillOnce):
    """KillOnce, of the first worker that starts a task whose key holds `name` (dask fuses tasks:
    `from-value-store_rows-concatenate-…`) while it holds data scattered as a `held` (its key's prefix)."""

    def __init__(self, name: str, held: str, flag: str) -> None:
        super().__init__(name, 1, flag)
        self.held = held

    def setup(self, worker) -> None:
        self.worker = worker

    def transition(self, key, start, finish, **kwargs) -> None:
        if (finish == "executing" and self.name in str(key)
                and any(key_split(held) == self.held for held in self.worker.data)):
            super().transition(self.name, start, finish)


def test_predict_from_a_store_with_the_model_lost_gives_the_same_labels(tmp_path, cluster):
    """predict of a store's rows sends the model (its Extension) to one worker; that worker SIGKILLed as it starts
    mapping a row chunk used to end predict in FutureCancelledError (lost dependencies). It is sent again and
    predict gives the labels it gives on one machine."""
    from onmsc_dask import ONMSC

    views, y = _views()
    with dask.config.set(scheduler="sync"):
        model = ONMSC(10, embedding="anchor", **PARAMS).fit([v[:600] for v in views])
        expected = model.predict([v[600:] for v in views])
    store = MultiViewStore.create(tmp_path / "new.zarr", [v[600:] for v in views], chunk_rows=100)
    with Client(cluster.address, timeout="60s") as client:
        pids = set(client.run(os.getpid).values())
        client.register_plugin(KillHolder("store_rows", "Extension", str(tmp_path / "killed")), name="kill-holder")
        labels = _in_thread(lambda: model.predict(store))
        assert set(client.run(os.getpid).values()) != pids  # the worker holding the model was killed
    np.testing.assert_array_equal(labels, expected)


def test_a_lazy_predict_computed_after_the_model_s_worker_is_lost_gives_the_same_labels(tmp_path, cluster):
    """predict of dask views returns a lazy array whose tasks take the model (its Extension) as a graph key, not as
    data scattered to one worker: that worker SIGKILLed as it starts mapping a block used to make computing it raise
    FutureCancelledError (the scattered model cannot be recomputed). The scheduler now runs the key again."""
    import dask.array as da

    from onmsc_dask import ONMSC

    views, _ = _views()
    with dask.config.set(scheduler="sync"):
        model = ONMSC(10, embedding="anchor", **PARAMS).fit([v[:600] for v in views])
        expected = model.predict([v[600:] for v in views])
    with Client(cluster.address, timeout="60s") as client:
        lazy = model.predict([da.from_array(v[600:], chunks=(100, -1)) for v in views])
        pids = set(client.run(os.getpid).values())
        client.register_plugin(KillHolder("_block", "Extension", str(tmp_path / "killed")), name="kill-holder")
        labels = _in_thread(lambda: lazy.compute())
        assert set(client.run(os.getpid).values()) != pids  # the worker holding the model was killed
    np.testing.assert_array_equal(labels, expected)


def test_every_worker_lost_is_one_line_and_the_same_command_resumes(tmp_path, cluster, data, monkeypatch, capsys):
    """Both workers and their nannies SIGKILLed as the anchor_graph stage starts: the run stops once the cluster
    has had no worker for NO_WORKER_TIMEOUT (30 s; 2 s here) with one line and exit 1 (it used to wait forever,
    printing nothing); with new workers the same command resumes after the landmarks and gives the labels of an
    undisturbed run."""
    monkeypatch.setattr(supervision, "NO_WORKER_TIMEOUT", 2.0)
    path, reference = data
    out = tmp_path / "out"
    argv = _anchor_run(path, out, cluster.address)
    with Client(cluster.address, timeout="60s") as client:
        client.register_plugin(KillPids("_anchor_block"), name="kill-all")
        assert _main_in_thread(argv) == 1
        client.unregister_worker_plugin("kill-all")
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (f"onmsc-dask: error: no Dask worker left for 2 s; {out / 'views.zarr'} keeps the finished "
                       f"stages (landmarks{EACH}); start workers with `dask worker {cluster.address} --nthreads 1`, then run the "
                       "same command again to resume after the last of them"), err
    assert not any("Traceback" in line for line in err)
    assert any(re.search(r"the Dask cluster lost \d workers? \(0 left\); the run waits up to 2 s for one \(start "
                         rf"workers with `dask worker {cluster.address} --nthreads 1`\)$", line) for line in err), err
    assert not (out / supervision.LOCK_NAME).exists()
    cluster.workers = [cluster.add_worker() for _ in range(2)]
    assert _main_in_thread(argv) == 0
    err = capsys.readouterr().err
    assert f"resuming: {out / 'views.zarr'} holds this input (finished stages: landmarks{EACH})" in err
    assert "stage 1/5 landmarks read from the store (resumed)" in err and "stage 2/5 anchor_graph computed" in err
    np.testing.assert_array_equal(np.load(out / "labels.npy"), reference)


def test_a_task_that_kills_every_worker_is_one_line(tmp_path, one_worker, data, capsys):
    """A task that kills each worker that runs it (out of memory, a crash in native code) ends, once distributed
    gives up on it (KilledWorker), in one line saying so and how to resume, exit 1 (it was a KilledWorker
    traceback)."""
    path, _ = data
    out = tmp_path / "out"
    argv = _anchor_run(path, out, one_worker.address)
    with Client(one_worker.address, timeout="60s") as client:
        client.register_plugin(KillEvery("_anchor_block"), name="kill-every")
        try:
            assert _main_in_thread(argv, 300) == 1
        finally:
            client.unregister_worker_plugin("kill-every")
        client.wait_for_workers(1, timeout=120)
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("onmsc-dask: error: a task killed every Dask worker that ran it: a worker process dies "
                              "when it runs out of memory (give the workers more) or crashes in native code, as its "
                              "log says (Attempted to run task "), err
    assert err[-1].endswith(f"{out / 'views.zarr'} keeps the finished stages (landmarks{EACH}); run the same command "
                            "again to resume after the last of them"), err
    assert not any("Traceback" in line for line in err)


@pytest.mark.parametrize("moment", ["before-compute", "in-anchor-graph"])
def test_scheduler_lost_at_any_moment_is_one_line(tmp_path, cluster, data, monkeypatch, capsys, moment):
    """The scheduler SIGKILLed before the fit's first computation (while the store is written) or as the
    anchor_graph stage starts: one line and exit 1, within SCHEDULER_LOST_TIMEOUT (10 s; 2 s here) of the loss;
    before the computation it used to be a 60 s wait and a ClosedClientError traceback (then a 60 s wait in the check
    of the workers' memory)."""
    from onmsc_dask import cli

    monkeypatch.setattr(supervision, "SCHEDULER_LOST_TIMEOUT", 2.0)
    path, _ = data
    out = tmp_path / "out"
    if moment == "before-compute":
        open_store = cli._open_store

        def kill_then_open(*args, **kwargs):
            cluster.scheduler.kill()
            cluster.scheduler.wait()
            return open_store(*args, **kwargs)
        monkeypatch.setattr(cli, "_open_store", kill_then_open)
    else:
        with Client(cluster.address, timeout="60s") as client:
            client.register_plugin(KillPids("_anchor_block", [cluster.scheduler.pid]), name="kill-scheduler")
    # before the computation, the workers' memory check asked the lost scheduler and waited distributed's connect
    # timeout (60 s) before the watch could say so
    assert _main_in_thread(_anchor_run(path, out, cluster.address), 30 if moment == "before-compute" else 150) == 1
    err = capsys.readouterr().err.splitlines()
    restart = (f"restart the Dask scheduler ({cluster.address}) and its workers (`dask worker` exits with its "
               "scheduler), then run the same command again")
    if moment == "before-compute":
        assert err[-1] == (f"onmsc-dask: error: the Dask scheduler {cluster.address} was lost for 2 s; "
                           f"{out / 'views.zarr'} is kept (no stage finished); {restart} to reuse it")
    else:
        assert err[-1].startswith("onmsc-dask: error: the Dask cluster lost the computation (")
        assert err[-1].endswith(f"{out / 'views.zarr'} keeps the finished stages (landmarks{EACH}); {restart} to "
                                "resume after the last of them")
    assert not any("Traceback" in line for line in err), err


def test_one_run_per_output_directory(tmp_path, one_worker, capsys):
    """A second run into the --out of a running one (a real process) fails with one line naming it, and the first
    ends as if alone (both used to exit 0, the later one silently replacing the earlier one's results, and they
    shared views.zarr.onmsc-dask-partial); a lock left by a process that no longer runs on this host (or whose PID now
    belongs to a process started later) is taken over with a warning; a lock from another host or PID namespace is
    kept."""
    out = tmp_path / "out"
    argv = ["run", "--dataset", "digits", "--out", str(out), "--scheduler", one_worker.address]
    first = subprocess.Popen([sys.executable, "-m", "onmsc_dask", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lock = out / supervision.LOCK_NAME
    while not lock.exists() and first.poll() is None:
        time.sleep(0.05)
    holder = json.loads(lock.read_text())
    assert holder["pid"] == first.pid and holder["host"] == socket.gethostname()
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"onmsc-dask: error: another onmsc-dask run (PID {first.pid} on {socket.gethostname()}, started "
                   f"{holder['started']}) is writing to {out}; wait for it to end or give another --out (if that run "
                   f"is gone, delete {lock})"]
    assert first.wait(300) == 0, first.stderr.read()
    assert json.loads((out / "report.json").read_text())["metrics"]["acc"] > 0.85 and not lock.exists()

    gone = subprocess.Popen(["true"])
    gone.wait()  # its PID no longer runs
    lock.write_text(json.dumps({"pid": gone.pid, "host": socket.gethostname(), "started": "then"}))
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"onmsc-dask: warning: {lock}: taking over the lock of PID" in err and "no longer runs on this host" in err
    assert not lock.exists()
    # its PID used again (PIDs are recycled), here by this very process: the lock was judged live, and the same
    # command refused to run until the lock was deleted by hand
    lock.write_text(json.dumps({"pid": os.getpid(), "pid_namespace": supervision._pid_namespace(),
                                "process_start": "an earlier boot:1", "host": socket.gethostname(), "started": "then"}))
    assert main(argv) == 0
    assert f"taking over the lock of PID {os.getpid()} (started then)" in capsys.readouterr().err
    assert not lock.exists()
    # a run in another PID namespace (a container sharing the host name and the volume): its PIDs are not ours to
    # check, running or not here, so its lock is kept (it was taken over while that run went on)
    for pid in (os.getpid(), gone.pid):
        lock.write_text(json.dumps({"pid": pid, "pid_namespace": "pid:[1]", "process_start": "x:1",
                                    "host": socket.gethostname(), "started": "now"}))
        assert main(argv) == 2
        assert f"another onmsc-dask run (PID {pid} in another PID namespace (a container) on {socket.gethostname()}" \
            in capsys.readouterr().err
    lock.unlink()
    lock.write_text(json.dumps({"pid": os.getpid(), "host": "elsewhere", "started": "now"}))
    assert main(argv) == 2
    assert f"another onmsc-dask run (PID {os.getpid()} on elsewhere, started now)" in capsys.readouterr().err


@pytest.mark.parametrize("delay", [0.0, 0.3])
def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path, delay):
    """Ctrl-C while `python -m onmsc_dask` imports dask, numpy and the rest (its first second or so): one line, no
    traceback (it used to be a KeyboardInterrupt traceback from the import under way). A signal that lands later is
    the run's own one line; either way exit 130 or death by SIGINT, which a shell reports as 130 too. The signal is
    sent once the command's first module is imported (-X importtime says when): before that Python itself is
    starting (a slow site-packages ends in Python's own fatal error) or runpy is compiling __main__, which no package
    can change."""
    run = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "onmsc_dask", "run", "--dataset", "digits",
                            "--out", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    line = ""
    while not line.rstrip().endswith("| onmsc_dask"):
        line = run.stderr.readline()
        assert line, "the process ended before the package was imported"
    assert run.stderr.readline(), "no module of the command was imported"  # one was: entry() runs
    time.sleep(delay)
    run.send_signal(signal.SIGINT)
    _, rest = run.communicate(timeout=120)
    err = "\n".join(line for line in rest.splitlines() if not line.startswith("import time:"))
    assert run.returncode in (130, -signal.SIGINT) and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith("onmsc-dask: interrupted"), err


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_is_one_line_and_the_same_command_resumes(tmp_path, data, how):
    """SIGINT to the process group of a run on its LocalCluster (Ctrl-C in a terminal), or SIGTERM to the run (kill,
    timeout, a batch scheduler), as the anchor_graph stage starts: one line saying what is kept and how to resume,
    exit 130 / 143, no traceback from it or its workers (it used to be a KeyboardInterrupt traceback; SIGTERM ended it
    at once, with multiprocessing's leaked-semaphore warning and its lock file left), the lock released, the landmarks
    kept whole; after Ctrl-C the same command then resumes after them (it used to replace the store and recompute
    every stage) to the labels of an undisturbed run, and with the input changed it starts over (neither depends on
    the signal that ended the run: the store it left is the same)."""
    path, reference = data
    out = tmp_path / "out"
    command = [sys.executable, "-m", "onmsc_dask", "run", "--data", str(path), "--out", str(out), "--embedding",
               "anchor", "--n-landmarks", "60"]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    err = []
    for line in run.stderr:
        err.append(line.rstrip("\n"))
        if line.endswith("stage 2/5 anchor_graph ...\n"):
            os.killpg(run.pid, signal.SIGINT) if how == "ctrl-c" else run.send_signal(signal.SIGTERM)
    assert run.wait(120) == (130 if how == "ctrl-c" else 143), err
    said = "interrupted" if how == "ctrl-c" else "terminated (SIGTERM)"
    assert err[-1].startswith(f"onmsc-dask: {said}; {out / 'views.zarr'} keeps the finished stages (landmarks"), err
    assert err[-1].endswith("); run the same command again to resume after the last of them")
    assert not any(word in line for line in err for word in ("Traceback", "KeyboardInterrupt", "leaked")), \
        "\n".join(err)
    assert not (out / supervision.LOCK_NAME).exists()
    kept = MultiViewStore(out / "views.zarr")
    assert kept.finished_stages() == ["landmarks"] and kept.stage_damage("landmarks") is None
    if how == "sigterm":
        return
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"resuming: {out / 'views.zarr'} holds this input (finished stages: landmarks" in again.stderr
    assert "stage 1/5 landmarks read from the store (resumed)" in again.stderr
    np.testing.assert_array_equal(np.load(out / "labels.npy"), reference)
    os.utime(path)  # the input changed (as far as a rerun can tell): start over
    third = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0 and "replacing the previous run's store" in third.stderr
    assert "stage 1/5 landmarks computed" in third.stderr


@pytest.mark.parametrize("fails, reason", [(1, "lost dependencies"), (3, "lost dependencies"),
                                           (1, "scheduler-connection-lost")])
def test_a_fit_starts_again_only_when_a_lost_worker_took_data(monkeypatch, fails, reason):
    """ONMSC.fit starts again, saying so, when a computation lost data only a lost worker held (cluster.lost_data),
    and after FIT_ATTEMPTS fits raises one WorkersLost; a lost scheduler is no such loss and ends the fit as it is."""
    from distributed.client import FutureCancelledError

    from onmsc_dask import ONMSC, api, cluster

    views, _ = _views(300)
    with dask.config.set(scheduler="sync"):
        expected = ONMSC(10, random_state=0).fit(views).labels_
    real, calls, lines = api.ONMSC._fit_views, [], []

    def losing(self, *args):
        calls.append(1)
        if len(calls) <= fails:
            raise FutureCancelledError("getitem-1", reason)
        return real(self, *args)

    monkeypatch.setattr(api.ONMSC, "_fit_views", losing)
    model = ONMSC(10, random_state=0)
    with dask.config.set(scheduler="sync"):
        if reason != "lost dependencies":
            with pytest.raises(FutureCancelledError, match=reason):
                model.fit(views, progress=lines.append)
            assert len(calls) == 1 and not lines
        elif fails >= cluster.FIT_ATTEMPTS:
            with pytest.raises(cluster.WorkersLost, match=r"^Dask workers were lost with data this process sent them, "
                                                          r"3 times \(getitem-1 cancelled for reason: lost dependencies"
                                                          r"\.\); fit again once the cluster is steady, or fit from a "
                                                          r"store \(cache=\.\.\.\)"):
                model.fit(views, progress=lines.append)
            assert len(calls) == 3 and not hasattr(model, "labels_")
        else:
            np.testing.assert_array_equal(model.fit(views, progress=lines.append).labels_, expected)
            assert lines[0] == ("a Dask worker was lost with data this process sent it (getitem-1 cancelled for "
                                "reason: lost dependencies.); fitting again from the start")


def test_data_sent_to_a_worker_that_goes_away_is_sent_again(monkeypatch):
    """cluster.scattered sends again when the connection to a worker closes mid-send (CommClosedError), up to
    SEND_ATTEMPTS times, then raises WorkersLost; any other error (no worker at all: a TimeoutError) is raised at
    once, as distributed gives it."""
    from distributed.comm.core import CommClosedError

    from onmsc_dask import cluster

    class Client:
        def __init__(self, errors):
            self.errors, self.calls = errors, 0

        def scatter(self, value, hash):
            self.calls += 1
            if self.errors:
                raise self.errors.pop(0)
            return f"future of {value}"

    monkeypatch.setattr("time.sleep", lambda seconds: None)
    flaky = Client([CommClosedError("Stream is closed"), CommClosedError("Stream is closed")])
    monkeypatch.setattr(cluster, "active_client", lambda: flaky)
    assert cluster.scattered("x") == "future of x" and flaky.calls == 3
    lost = Client([CommClosedError("Stream is closed")] * 3)
    monkeypatch.setattr(cluster, "active_client", lambda: lost)
    with pytest.raises(cluster.WorkersLost, match=r"^Dask workers were lost while this process sent them data, 3 "
                                                  r"times \(Stream is closed\); run again once the cluster is steady$"):
        cluster.scattered("x")
    none = Client([TimeoutError("No valid workers found")])
    monkeypatch.setattr(cluster, "active_client", lambda: none)
    with pytest.raises(TimeoutError, match="No valid workers found"):
        cluster.scattered("x")
    assert none.calls == 1


def test_workers_with_too_little_memory_are_one_line_before_any_work():
    """Workers whose memory_limit is below cluster.WORKER_MEMORY_MIN: one error naming the limit, before any work (at
    200 MB a worker is over its limit once the package is imported; the fit waited without end while the nannies
    restarted the workers). At 1 GiB the fit runs."""
    from distributed import LocalCluster

    from onmsc_dask import ONMSC

    views, _ = _views(300)
    with LocalCluster(n_workers=2, processes=False, memory_limit="200MB", dashboard_address=None) as small, \
            Client(small):
        with pytest.raises(ValueError, match=r"^2 of the 2 Dask workers have a memory_limit of 191 MiB, below the 384 "
                                             r"MiB a worker needs .*start them with memory_limit='1GiB' or more$"):
            ONMSC(10, random_state=0).fit(views)
    with LocalCluster(n_workers=1, processes=False, memory_limit="1GiB", dashboard_address=None) as enough, \
            Client(enough):
        assert len(ONMSC(10, random_state=0, n_init=3).fit(views).labels_) == 300


def test_the_cluster_watch_says_when_workers_leave_or_join():
    """A worker lost mid-run (its tasks recomputed by Dask) went unsaid by the CLI, and with none left the task line
    repeated "tasks 0/44 done" until the run stopped (found by a new-user helper)."""
    from types import SimpleNamespace

    lines = []
    client = SimpleNamespace(status="running", scheduler=SimpleNamespace(address="tcp://127.0.0.1:1"), futures={},
                             _scheduler_identity={"n_workers": 3})
    with supervision.ClusterWatch(client, poll=0.02, report=lines.append):
        for n in (2, 0, 1, 3):
            time.sleep(0.15)
            client._scheduler_identity = {"n_workers": n}
        time.sleep(0.15)
    assert lines == [
        "the Dask cluster lost 1 worker (2 left); its tasks run again on the 2 others",
        "the Dask cluster lost 2 workers (0 left); the run waits up to 30 s for one (start workers with `dask worker "
        "tcp://127.0.0.1:1 --nthreads 1`)",
        "1 Dask worker joined the cluster (1 now)", "2 Dask workers joined the cluster (3 now)"]


def test_the_cluster_watch_says_a_lost_scheduler_once_the_client_has_dropped_it():
    """A client that has lost its scheduler sets its `scheduler` to None: the watch read the address from it, died
    with an AttributeError, and never cancelled the fit's futures, which then waited forever (CI, under load)."""
    from types import SimpleNamespace

    cancelled = []
    client = SimpleNamespace(status="running", scheduler=SimpleNamespace(address="tcp://127.0.0.1:1"), futures={},
                             loop=SimpleNamespace(add_callback=lambda f: cancelled.append(f)))
    watch = supervision.ClusterWatch(client, scheduler_timeout=0.2, poll=0.05)
    client.status, client.scheduler = "closed", None
    with watch:
        time.sleep(0.6)
    assert str(watch.lost) == "the Dask scheduler tcp://127.0.0.1:1 was lost for 0.2 s" and cancelled
