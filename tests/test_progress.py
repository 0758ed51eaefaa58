"""Progress lines: the tasks of a running Dask stage (on a real scheduler) and a heartbeat, off with quiet."""
import io
import re
import time

import dask
import pytest
from distributed import Client, LocalCluster

from onmsc_dask import progress
from onmsc_dask.progress import Progress


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


def slow(i: int) -> int:
    time.sleep(0.4)
    return i


def test_task_progress_and_heartbeat(client, monkeypatch):
    monkeypatch.setattr(progress, "TASK_LINES", 0.0)
    monkeypatch.setattr(progress, "HEARTBEAT", 1.5)
    out = io.StringIO()
    log = Progress(stream=out)
    log.client = client
    with log.watch():
        log("stage one: sleeping tasks")
        dask.compute(*[dask.delayed(slow)(i) for i in range(8)])
        log.client = None
        log("stage two at tcp://127.0.0.1:8786: no tasks")  # the label used to end at "tcp"
        time.sleep(3.5)
    lines = out.getvalue().splitlines()
    tasks = [tuple(map(int, m.groups())) for m in (re.search(r"since: stage one; tasks (\d+)/(\d+) done", x)
                                                   for x in lines) if m]
    assert tasks and all(total == 8 for _, total in tasks) and 0 < tasks[-1][0] <= 8
    assert [done for done, _ in tasks] == sorted(done for done, _ in tasks)
    assert any(re.search(r"\(est\. \d+ s left for the tasks so far\)$", x) for x in lines if "stage one" in x)
    beats = [x for x in lines if re.search(r"\.\.\. \d+ s since: stage two at tcp://127\.0\.0\.1:8786$", x)]
    assert len(beats) >= 1, lines


def test_a_long_stage_label_is_cut_between_words():
    """The heartbeat's label was cut at 70 characters, mid-word ("(trying for up t")."""
    label = progress._label("connecting to the Dask scheduler at tcp://127.0.0.1:1 (trying for up to 60 s)")
    assert label == "connecting to the Dask scheduler at tcp://127.0.0.1:1 (trying for ..." and len(label) <= 70
    assert progress._label("stage one: sleeping tasks") == "stage one"


def test_quiet_prints_stage_lines_only(client):
    out = io.StringIO()
    log = Progress(quiet=True, stream=out)
    log.client = client
    with log.watch():
        log("stage: sleeping tasks")
        dask.compute(*[dask.delayed(slow)(i) for i in range(6)])
    assert len(out.getvalue().splitlines()) == 1
