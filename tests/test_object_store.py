"""Stores in object stores: a real S3 server (moto in server mode on 127.0.0.1) holds the views, and a real Dask
scheduler with two worker processes, in a directory of their own, reads their chunks from it."""
import json
import re
import os
import subprocess
import sys
import time
import urllib.request

import fsspec
from fsspec.registry import known_implementations
import numpy as np
import pytest
from sklearn.datasets import load_digits

from onmsc_dask.api import ONMSC
from onmsc_dask.outofcore import fit_store
from onmsc_dask.store import MultiViewStore
from clusters import Cluster
from processes import free_port, stop

boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

PARAMS = dict(n_landmarks=60, random_state=0, n_init=3)


def _moto(env: dict | None = None):
    """A moto S3 server subprocess on a free port of 127.0.0.1, and its endpoint URL, once it answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            return proc, endpoint
        except OSError:
            time.sleep(0.1)
    stop([proc])
    pytest.fail("the moto S3 server did not start")


def _options(endpoint: str, key: str = "testing", secret: str = "testing") -> dict:
    return {"key": key, "secret": secret, "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}


def _s3(endpoint: str, options: dict):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=options["key"],
                        aws_secret_access_key=options["secret"], region_name="us-east-1")


@pytest.fixture(scope="module")
def s3():
    """Storage options of a running moto S3 server with a bucket "views"."""
    proc, endpoint = _moto()
    options = _options(endpoint)
    _s3(endpoint, options).create_bucket(Bucket="views")
    yield options
    stop([proc])


def _views(n: int = 600) -> tuple[list[np.ndarray], np.ndarray]:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], (X[:n] @ rng.standard_normal((64, 16))).astype(np.float32), np.sqrt(X[:n])], y[:n]


def test_memory_url_is_no_local_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    views, y = _views(200)
    store = MultiViewStore.create("memory://onmsc-test/a.zarr", views, y, chunk_rows=64)
    again = MultiViewStore("memory://onmsc-test/a.zarr")
    np.testing.assert_array_equal(again.read_view(1), views[1])
    assert again.read_view(1).dtype == np.float32 and again.row_chunks(0)[1] == (64, 128)
    store.write_result("s", "x", np.arange(3.0), {"p": 1})
    store.mark_complete("s")
    assert again.has_stage("s", {"p": 1}, ["x"])
    with pytest.raises(FileExistsError, match="already exists"):
        MultiViewStore.create("memory://onmsc-test/a.zarr", views)
    assert list(tmp_path.iterdir()) == []  # nothing local, no "memory:" directory


def test_chained_and_file_urls_are_never_a_directory_of_their_own_name(tmp_path, monkeypatch):
    """fsspec's chained URL simplecache::memory://b/x.zarr was taken for a local path: the store was written to a
    directory "simplecache::memory:" (a review); file://~/x.zarr made a directory "~"."""
    from onmsc_dask.location import location

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for chained in ("simplecache::memory://b/x.zarr", "blockcache::s3://b/x.zarr", "zip://x.zarr::file:///a.zip",
                    "memory://a.zarr::memory://b"):  # the last two: "is a directory" or a stray memory://a.zarr
        with pytest.raises(ValueError, match=f"^{re.escape(chained)}: chained fsspec URLs are not supported; give the "
                                             "store's own URL"):
            MultiViewStore.create(chained, _views(50)[0])
    assert location("http://[::1]:8000/x.zarr").url == "http://[::1]:8000/x.zarr"  # IPv6, not a chain
    assert location("file://~/x.zarr") == tmp_path / "home" / "x.zarr"
    with pytest.raises(ValueError, match="storage_options apply to URLs"):
        location(f"file://{tmp_path}/x.zarr", {"auto_mkdir": True})  # they were dropped without a word
    assert list(tmp_path.iterdir()) == []


def test_uninstalled_scheme_missing_bucket_and_bad_options_are_one_line_errors(s3, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing = next((p for p in sorted(known_implementations) if not _importable(p)), None)
    if missing is not None:
        with pytest.raises(ValueError, match=f"URL scheme '{missing}' is not available"):
            MultiViewStore(f"{missing}://bucket/x.zarr")
    with pytest.raises(ValueError, match="bucket 'no-such-bucket' does not exist"):
        MultiViewStore.create("s3://no-such-bucket/x.zarr", _views(50)[0], storage_options=s3)
    with pytest.raises(ValueError, match="bucket 'no-such-bucket' does not exist"):
        MultiViewStore("s3://no-such-bucket/x.zarr", storage_options=s3)
    with pytest.raises(ValueError, match="no readable onmsc-dask store at s3://views/absent.zarr"):
        MultiViewStore("s3://views/absent.zarr", storage_options=s3)
    with pytest.raises(ValueError, match="storage_options apply to URLs"):
        MultiViewStore(tmp_path / "x.zarr", storage_options=s3)
    # an option s3fs hands on to its client, which rejects it when used: it read as an unreachable bucket
    # (it listed every key as not suiting s3://; found by a new-user helper)
    with pytest.raises(ValueError, match=r"^s3://views/x\.zarr: storage_options key 'bogus' is not an option of "
                                         r"s3:// \(.*bogus"):
        MultiViewStore("s3://views/x.zarr", storage_options={**s3, "bogus": 1})
    with pytest.raises(ValueError, match=r"^s3://views/x\.zarr: storage_options key 'endpoint' is not an option of "
                                         r"s3://; s3fs takes the endpoint as client_kwargs=\{'endpoint_url': URL\} "):
        MultiViewStore("s3://views/x.zarr", storage_options={"key": s3["key"], "secret": s3["secret"],
                                                             "endpoint": s3["client_kwargs"]["endpoint_url"]})
    # a cache URL: botocore's raw EndpointConnectionError, where --data and a fit's URL had this one line
    with pytest.raises(ValueError, match="bucket 'no-such-bucket' does not exist"):
        ONMSC(10, embedding="anchor", cache="s3://no-such-bucket/c.zarr").fit(_views(50)[0], storage_options=s3)
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_endpoint_is_a_one_line_error():
    """botocore's errors are no OSError: an endpoint where nothing listens used to end in a 140-line traceback."""
    options = {**_options(f"http://127.0.0.1:{free_port()}"), "config_kwargs": {"retries": {"max_attempts": 1}}}
    with pytest.raises(ValueError, match=r"^s3://views/x\.zarr: cannot reach bucket 'views' \(EndpointConnectionError: "
                                         r"Could not connect to the endpoint URL.*\); check the endpoint") as info:
        MultiViewStore("s3://views/x.zarr", storage_options=options)
    assert "\n" not in str(info.value)


def _importable(protocol: str) -> bool:
    try:
        fsspec.get_filesystem_class(protocol)
        return True
    except (ImportError, ValueError):
        return False


def test_bad_credential_is_a_one_line_error_naming_the_bucket():
    """moto checks signatures and IAM policies once its first 6 (setup) calls are done: a user with S3 rights, a
    user who may only read, and a bucket."""
    proc, endpoint = _moto({"INITIAL_NO_AUTH_ACTION_COUNT": "6"})
    try:
        iam = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="setup", aws_secret_access_key="setup",
                           region_name="us-east-1")
        keys = {}
        for user, actions in (("onmsc", ["s3:*"]), ("reader", ["s3:GetObject", "s3:ListBucket", "s3:HeadBucket"])):
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
        for user in ("onmsc", "reader"):
            key = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = _options(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
        _s3(endpoint, keys["onmsc"]).create_bucket(Bucket="private")
        bad = _options(endpoint, keys["onmsc"]["key"], "not-the-secret")
        for call in (lambda: MultiViewStore("s3://private/x.zarr", storage_options=bad),
                     lambda: MultiViewStore.create("s3://private/x.zarr", _views(50)[0], storage_options=bad)):
            with pytest.raises(ValueError, match="access to bucket 'private' denied; check the credentials") as info:
                call()
            assert "\n" not in str(info.value)
        # a credential that may read the bucket, not write it, passes the bucket check; create's refused write was a
        # bare PermissionError traceback
        with pytest.raises(ValueError, match=r"^s3://private/y\.zarr: writing refused; check that the credentials") \
                as info:
            MultiViewStore.create("s3://private/y.zarr", _views(50)[0], storage_options=keys["reader"])
        assert "\n" not in str(info.value)
        assert "Contents" not in _s3(endpoint, keys["onmsc"]).list_objects_v2(Bucket="private")  # nothing written
    finally:
        stop([proc])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A `dask scheduler` and two `dask worker` processes that run in a directory of their own (they share no
    files with the test, which keeps its stores in its own temporary directory or in S3)."""
    from distributed import Client

    home = tmp_path_factory.mktemp("cluster")
    real = Cluster(home, 2, nanny=False)  # every process runs in `home`
    try:
        with Client(real.address, timeout="60s", set_as_default=False) as client:
            client.wait_for_workers(2, timeout=120)
        yield real.address
    finally:
        real.stop()


def test_workers_without_the_clients_credentials_are_said_before_the_fit(s3, cluster, tmp_path, monkeypatch, capsys):
    """Credentials and endpoint in this process's environment only (the workers were started without them): the
    run failed at the workers' first read as "the store could not be reached mid-run ... run the same command
    again" (which fails alike), and succeeded when every stage was stored (found by a new-user helper). Now one
    line before the fit says that the workers cannot read the store and what they need."""
    from onmsc_dask.cli import main

    views, y = _views(200)
    url = "s3://views/environment.zarr"
    MultiViewStore.create(url, views, y, chunk_rows=64, storage_options=s3, overwrite=True)
    for name, value in (("AWS_ACCESS_KEY_ID", s3["key"]), ("AWS_SECRET_ACCESS_KEY", s3["secret"]),
                        ("AWS_ENDPOINT_URL", s3["client_kwargs"]["endpoint_url"]), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    assert MultiViewStore(url).n_samples == 200  # this process reads it through its environment
    capsys.readouterr()
    assert main(["run", "--data", url, "--embedding", "anchor", "--n-landmarks", "40", "--scheduler", cluster,
                 "--out", str(tmp_path / "run")]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.match(rf"onmsc-dask: error: 2 of 2 Dask workers cannot read {url}, which this process reads \(worker "
                    rf"tcp://127\.0\.0\.1:\d+: .*credentials.*\); the workers read the store themselves, so they "
                    r"need its endpoint and credentials too: give them in --storage-options, or in the workers' "
                    r"environment$", last), last
    assert MultiViewStore(url).stages() == {} and not (tmp_path / "run" / "labels.npy").exists()


def test_workers_read_the_views_from_s3_and_match_a_local_store(s3, cluster, tmp_path, capsys):
    """The CLI on an s3:// store, on a scheduler whose two workers read every chunk from S3 themselves: the labels
    of a local-store fit with the same seed, and the run's stages are in the bucket."""
    from distributed import Client, get_task_stream

    views, y = _views()
    local = MultiViewStore.create(tmp_path / "local.zarr", views, y, chunk_rows=128)
    expected = fit_store(local, 10, n_landmarks=60, random_state=0).labels  # in this process only
    url = "s3://views/digits.zarr"
    MultiViewStore.create(url, views, y, chunk_rows=128, storage_options=s3, overwrite=True)
    out = tmp_path / "run"
    with Client(cluster, set_as_default=False) as client, get_task_stream(client) as stream:
        proc = subprocess.run([sys.executable, "-m", "onmsc_dask", "run", "--data", url, "--storage-options",
                               json.dumps(s3), "--embedding", "anchor", "--n-landmarks", "60", "--scheduler", cluster,
                               "--out", str(out)], capture_output=True, text=True, timeout=300)
        workers = set(client.scheduler_info()["workers"])
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(out / "labels.npy"), expected)
    assert sorted(p.name for p in out.iterdir()) == ["convergence.png", "labels.csv", "labels.npy", "report.html",
                                                     "report.json"]  # no store
    ran = {(t["key"][0] if isinstance(t["key"], tuple) else t["key"]).rsplit("-", 1)[0] for t in stream.data}
    assert {"_chunk_scan", "_anchor_block", "_z_rows"} <= ran, ran
    assert {t["worker"] for t in stream.data} == workers and len(workers) == 2
    stored = MultiViewStore(url, storage_options=s3)
    assert {"landmarks", "anchor_graph", "labels", "onmsc"} <= set(stored.stages())
    np.testing.assert_array_equal(stored.read_result("labels", "labels"), expected)
    fs = fsspec.filesystem("s3", **s3)
    assert not fs.exists("views/digits.zarr/.onmsc-dask.lock")  # released
    # another run writing its stages into the same store: a second run stops at once, in one line (two runs used to
    # delete each other's stages, one ending in a KeyError traceback)
    lock = json.dumps({"pid": 1, "host": "elsewhere", "started": "now"}).encode()
    fs.pipe("views/digits.zarr/.onmsc-dask.lock", lock)
    from onmsc_dask.cli import main

    capsys.readouterr()
    assert main(["run", "--data", url, "--storage-options", json.dumps(s3), "--embedding", "anchor", "--n-landmarks",
                 "60", "--scheduler", cluster, "--out", str(tmp_path / "second")]) == 2  # in this process: no import
    err = capsys.readouterr().err
    assert err.strip().endswith(
        "onmsc-dask: error: another onmsc-dask run (PID 1 on elsewhere, started now) writes its stages into "
        f"{url}; wait for it to end (if that run is gone, delete {url}/.onmsc-dask.lock)"), err
    assert err.count("onmsc-dask: error") == 1 and "resuming" not in err  # said before the lock
    # the same command once that run is gone: it says which stages it resumes after, and gives the same labels
    fs.rm("views/digits.zarr/.onmsc-dask.lock")
    proc = subprocess.run([sys.executable, "-m", "onmsc_dask", "run", "--data", url, "--storage-options",
                           json.dumps(s3), "--embedding", "anchor", "--n-landmarks", "60", "--scheduler", cluster,
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (f"resuming: {url} holds finished stages (landmarks, anchor_graph, embeddings, fusion, labels; a finished "
            "stage is reused if made with the same parameters)") in proc.stderr
    np.testing.assert_array_equal(np.load(out / "labels.npy"), expected)


def test_store_lock_of_a_process_gone_from_this_host_is_taken_over():
    import socket

    from onmsc_dask.location import location
    from onmsc_dask.supervision import StoreLock

    store = location("memory://onmsc-lock/s.zarr")
    fs = store.filesystem()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    fs.pipe("/onmsc-lock/s.zarr/.onmsc-dask.lock", json.dumps(
        {"pid": int(dead.stdout), "host": socket.gethostname(), "started": "then"}).encode())
    with pytest.warns(UserWarning, match=rf"taking over the lock of PID {int(dead.stdout)} \(started then\)"):
        with StoreLock(store):
            assert json.loads(fs.cat("/onmsc-lock/s.zarr/.onmsc-dask.lock"))["pid"] == os.getpid()
    assert not fs.exists("/onmsc-lock/s.zarr/.onmsc-dask.lock")


def test_estimator_fits_a_store_url(s3):
    views, y = _views(300)
    MultiViewStore.create("s3://views/small.zarr", views, y, chunk_rows=100, storage_options=s3, overwrite=True)
    est = ONMSC(10, n_init=3, random_state=0)
    np.testing.assert_array_equal(est.fit("s3://views/small.zarr", storage_options=s3).labels_,
                                  ONMSC(10, n_init=3, random_state=0).fit(views).labels_)
    # fit_store of a URL takes its storage_options (it had no such parameter: a TypeError from ONMSC)
    stored = fit_store("s3://views/small.zarr", 10, storage_options=s3, **PARAMS)
    np.testing.assert_array_equal(stored.labels, fit_store(MultiViewStore("s3://views/small.zarr", s3), 10,
                                                           **PARAMS).labels)
    with pytest.raises(ValueError, match="storage_options go with a path or URL; a MultiViewStore has its own"):
        fit_store(MultiViewStore("s3://views/small.zarr", s3), 10, storage_options=s3, **PARAMS)


def test_a_url_store_with_a_sparse_view_is_fitted_with_a_cache(s3, tmp_path):
    """A URL store's views are written to a cache from their dask views (MultiViewStore.view_dask), which refused a
    sparse view: "view 1 ('view1') is sparse; read it block by block" (a review). With a local cache and an S3 one,
    the fit now gives the labels it gives without a cache."""
    import scipy.sparse as sp

    views, y = _views(300)
    views[1] = sp.csr_matrix(np.where(views[0] > 8, views[0], 0))
    MultiViewStore.create("s3://views/sparse.zarr", views, y, chunk_rows=100, storage_options=s3, overwrite=True)
    params = dict(embedding="anchor", random_state=0, **{k: v for k, v in PARAMS.items() if k != "random_state"})
    plain = ONMSC(10, **params).fit("s3://views/sparse.zarr", storage_options=s3).labels_
    for cache in (tmp_path / "cache.zarr", "s3://views/sparse-cache.zarr"):
        cached = ONMSC(10, cache=cache, **params).fit("s3://views/sparse.zarr", storage_options=s3)
        np.testing.assert_array_equal(cached.labels_, plain)
        assert MultiViewStore(cache, **({"storage_options": s3} if isinstance(cache, str) else {})).is_sparse(1)


def test_overwrite_replaces_an_s3_store(s3):
    views, y = _views(120)
    MultiViewStore.create("s3://views/o.zarr", views, y, storage_options=s3, overwrite=True)
    again = MultiViewStore.create("s3://views/o.zarr", views[:2], storage_options=s3, overwrite=True)
    assert again.n_views == 2 and again.labels is None
    assert not fsspec.filesystem("s3", **s3).exists("views/o.zarr.onmsc-dask-partial")


def test_a_memory_store_on_worker_processes_says_why_they_cannot_read_it(cluster):
    """memory:// lives in the process that wrote it: a fit on real worker processes ends in the ValueError that says so
    (it used to read as if the store did not exist, "no readable onmsc-dask store at memory://...: No group found", and
    reached the client as a bare Exception: distributed could not unpickle its zarr cause)."""
    from distributed import Client

    from onmsc_dask.api import ONMSC

    views, y = _views()
    store = MultiViewStore.create("memory://workers/views.zarr", views, y)
    with Client(cluster), pytest.raises(ValueError) as info:
        ONMSC(10, random_state=0).fit(store)
    assert str(info.value).startswith("no readable onmsc-dask store at memory://workers/views.zarr: ")
    assert str(info.value).endswith("(a memory:// store lives in the memory of the process that wrote it: Dask worker "
                                    "processes cannot read it; give them a local path or an object store)")
    with pytest.raises(ValueError) as info:  # a wrong URL in the process itself: no word about workers
        MultiViewStore("memory://workers/typo.zarr")
    assert str(info.value).startswith("no readable onmsc-dask store at memory://workers/typo.zarr: ")
    assert "Dask worker processes" not in str(info.value)


def test_an_object_store_lost_mid_run_is_one_line_naming_it_and_how_to_resume(tmp_path, monkeypatch, capsys):
    """The S3 server gone as the anchor chain's second stage starts: the run ended in three chained tracebacks, the
    last one raised while the store's lock was released (botocore's EndpointConnectionError is no OSError). Now one
    line names the store and the error and says the stages finished before are kept there, and a warning says the
    lock is left."""
    from onmsc_dask.cli import main
    from onmsc_dask.progress import Progress

    proc, endpoint = _moto()
    options = _options(endpoint)
    _s3(endpoint, options).create_bucket(Bucket="lost")
    options["config_kwargs"] = {"retries": {"max_attempts": 1}}  # botocore's 5 tries within each of s3fs's 5: 30 s
    views, y = _views(600)
    MultiViewStore.create("s3://lost/v.zarr", views, y, chunk_rows=100, storage_options=options)
    log = Progress.__call__

    def stop_the_server_at_stage_2(self, line: str) -> None:
        if "stage 2/" in line:
            stop([proc])
        log(self, line)

    monkeypatch.setattr(Progress, "__call__", stop_the_server_at_stage_2)
    try:
        code = main(["run", "--data", "s3://lost/v.zarr", "--storage-options", json.dumps(options), "--embedding",
                     "anchor", "--n-landmarks", "60", "--workers", "1", "--out", str(tmp_path / "out"), "--quiet"])
    finally:
        stop([proc])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err
    said = [line for line in err.splitlines() if line.startswith("onmsc-dask:")]
    assert said[-1].startswith("onmsc-dask: error: the store could not be reached mid-run: s3://lost/v.zarr: "), said
    assert "EndpointConnectionError" in said[-1] and said[-1].count("s3://lost/v.zarr") == 2, said  # not named twice over
    assert said[-1].endswith("s3://lost/v.zarr keeps the stages finished before; once it can be reached, run the same "
                             "command again to resume after them"), said
    assert any("s3://lost/v.zarr/.onmsc-dask.lock: the lock could not be removed" in line for line in said), said


def test_an_object_store_deleted_mid_run_is_one_line_saying_so(s3, tmp_path, monkeypatch, capsys):
    """The store deleted (or the S3 server restarted empty) mid-run: `onmsc-dask: error: No group found in store …`,
    exit 2, as if the input were bad. Now one line says the store is gone and what to do, exit 1."""
    from onmsc_dask.cli import main
    from onmsc_dask.progress import Progress

    views, y = _views(600)
    url = "s3://views/deleted.zarr"
    MultiViewStore.create(url, views, y, chunk_rows=100, storage_options=s3, overwrite=True)
    log = Progress.__call__

    def delete_the_store_at_stage_3(self, line: str) -> None:
        if "stage 3/" in line:
            fsspec.filesystem("s3", **s3).rm("views/deleted.zarr", recursive=True)
        log(self, line)

    monkeypatch.setattr(Progress, "__call__", delete_the_store_at_stage_3)
    code = main(["run", "--data", url, "--storage-options", json.dumps(s3), "--embedding", "anchor", "--n-landmarks",
                 "60", "--workers", "1", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("onmsc-dask: error")]
    assert code == 1 and "Traceback" not in err and len(said) == 1, err
    assert said[0].startswith(f"onmsc-dask: error: the store {url} is gone mid-run ("), said
    assert said[0].endswith("it was deleted or emptied meanwhile; write it again and run the same command (every "
                            "stage is then computed again)"), said


def test_only_a_store_whose_root_is_gone_is_called_gone(s3, monkeypatch):
    """cli._mid_run: a run's error on a --data URL store is reported as the store gone only when its root metadata is
    gone. A first version probed by opening the store, so an access denied mid-run (a credential revoked, the store
    intact) read "deleted or emptied; write it again" (found by a review)."""
    from onmsc_dask.cli import StoreOutOfReach, _mid_run, build_parser
    from onmsc_dask.location import Location

    url = "s3://views/probe.zarr"
    MultiViewStore.create(url, _views(60)[0], storage_options=s3, overwrite=True)
    args = build_parser().parse_args(["run", "--data", url, "--storage-options", json.dumps(s3), "--out", "o"])
    denied = ValueError(f"{url}: access to bucket 'views' denied; check the credentials")
    with pytest.raises(ValueError, match="denied"), _mid_run(args):
        raise denied  # the store is there: the run's own error
    class Denied:  # the server refuses every request now
        def __getattr__(self, name):
            def refused(*args, **kwargs):
                raise PermissionError("Forbidden")
            return refused

    with monkeypatch.context() as server_denies:
        server_denies.setattr(Location, "filesystem", lambda self: Denied())
        with pytest.raises(ValueError, match="denied"), _mid_run(args):
            raise denied  # cannot tell: the run's own error
    fsspec.filesystem("s3", **s3).rm("views/probe.zarr", recursive=True)
    with pytest.raises(StoreOutOfReach), _mid_run(args):
        raise ValueError("No group found in store")


def test_a_store_served_over_http_is_fitted_where_it_is_and_the_cli_says_it_cannot_write_there(tmp_path, capsys):
    """A store on a read-only web server (Python's http.server): fit reads it as a local copy; the CLI, which writes
    its stages into a --data URL store, says in one line that it cannot and what to do (it was aiohttp's 501
    traceback), and an http:// URL with no server was "bucket 'http:' does not exist" (found by a trial)."""
    from onmsc_dask.cli import main

    views, y = _views(300)
    MultiViewStore.create(tmp_path / "served" / "views.zarr", views, y)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "served").rglob("*"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(port)],
                            cwd=tmp_path / "served", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/views.zarr"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{url}/zarr.json", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        served = ONMSC(10, random_state=0).fit(url).labels_
        np.testing.assert_array_equal(served, ONMSC(10, random_state=0).fit(tmp_path / "served" / "views.zarr").labels_)
        code = main(["run", "--data", url, "--out", str(tmp_path / "out"), "--quiet"])
    finally:
        stop([proc])
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("onmsc-dask: error")]
    assert code == 2 and "Traceback" not in err and len(said) == 1, err
    assert said[0].startswith(f"onmsc-dask: error: {url}: this run cannot write into the store ("), said
    assert said[0].endswith("copy it where the run may write (a local path or a bucket) and run on the copy"), said
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "served").rglob("*")) == before
    with pytest.raises(ValueError, match=f"^no readable onmsc-dask store at {url}: Cannot connect"):
        MultiViewStore(url)  # the server is gone


def test_dask_views_written_to_a_relative_path_on_a_cluster_land_in_the_store(cluster, tmp_path, monkeypatch):
    """The workers, which write a dask view's chunks, run in a directory of their own: a relative path was resolved
    there, so the store at the client's path held no chunk ("rows 0:100 hold missing values: a chunk file was
    deleted") and the chunks stayed in the workers' directory (found by a trial)."""
    import dask.array as da
    from distributed import Client

    monkeypatch.chdir(tmp_path)
    views, _ = _views(300)
    with Client(cluster, set_as_default=True):
        MultiViewStore.create("rel.zarr", [da.from_array(views[0], chunks=(100, 64)), views[1]], chunk_rows=100)
    np.testing.assert_array_equal(MultiViewStore(tmp_path / "rel.zarr").read_view(0), views[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel.zarr"]
