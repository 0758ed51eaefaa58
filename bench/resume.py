"""Resuming a finished out-of-core fit: a local store against the same store on an S3 server (moto, 127.0.0.1).

The Fashion-MNIST store of ``pipelines/mnist60k.py`` (pixels, HOG, DCT; first ``--n`` images) is written locally and
uploaded to a moto S3 server in its own process. For each backend, ``fit_store`` computes every stage into a
stage-less copy ("first fit"), then a new ``fit_store`` call on the same URL, as a rerun of the same command would,
finds every stage finished and whole (each file's size and CRC-32 checked against the record made when the stage
completed) and reads the results ("resume"). Both runs must give the same labels. On a LocalCluster of 2
single-threaded workers.

    pip install -e '.[test]'          # moto[server], s3fs
    python bench/resume.py [--n 60000] [--repeats 3]    # writes bench/results/resume.json, prints the table
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pipelines"))
import mnist60k  # noqa: E402

from onmsc_dask.outofcore import fit_store  # noqa: E402
from onmsc_dask.store import MultiViewStore  # noqa: E402


def moto_server(bucket: str) -> tuple[subprocess.Popen, dict]:
    """A moto S3 server process on a free local port holding an empty `bucket`, and the storage options for it."""
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise RuntimeError("the moto S3 server did not start") from None
            time.sleep(0.2)
    options = {"key": "bench", "secret": "bench", "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                 region_name="us-east-1").create_bucket(Bucket=bucket)
    return server, options


def timed_fit(url: str, options: dict | None, client) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fit_store(url, 10, client=client, storage_options=options, random_state=0)
    return time.perf_counter() - t0, result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=60000)
    parser.add_argument("--chunk-rows", type=int, default=10000, help="rows per Zarr chunk (the pipeline's default)")
    parser.add_argument("--repeats", type=int, default=3, help="resumed runs per backend (the median is shown)")
    parser.add_argument("--data-dir", type=Path, default=mnist60k.DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "resume.json")
    args = parser.parse_args(argv)
    import fsspec
    from distributed import Client, LocalCluster

    rows = []
    with tempfile.TemporaryDirectory() as work, \
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        source = mnist60k.build_store(args.data_dir, Path(work) / "views.zarr", args.n, args.chunk_rows)
        server, options = moto_server("bench")
        try:
            fsspec.filesystem("s3", **options).put(str(source.path), "bench/views.zarr", recursive=True)
            stores = {"local": (str(source.copy(Path(work) / "run.zarr", stages=False).path), None),
                      "S3 (moto)": ("s3://bench/views.zarr", options)}
            for backend, (url, opts) in stores.items():
                first, computed = timed_fit(url, opts, client)
                resumed = [timed_fit(url, opts, client) for _ in range(args.repeats)]
                store = MultiViewStore(url, opts)
                files = sum(len(store._stage(s).attrs["files"]) for s in store.finished_stages())
                assert all(r.computed_stages == [] for _, r in resumed), "a resumed run computed a stage"
                assert all(np.array_equal(r.labels, computed.labels) for _, r in resumed), "resumed labels differ"
                rows.append({"backend": backend, "n": args.n, "stages": len(computed.computed_stages),
                             "stage_files": files, "first_fit_s": round(first, 1),
                             "resume_s": [round(t, 2) for t, _ in resumed],
                             "resume_median_s": round(float(np.median([t for t, _ in resumed])), 2)})
        finally:
            server.kill()
            server.wait()
    print("| backend | n | stages | files in them | first fit (s) | resume, median (s) | resume runs (s) |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['backend']} | {r['n']} | {r['stages']} | {r['stage_files']} | {r['first_fit_s']} | "
              f"{r['resume_median_s']} | {' / '.join(map(str, r['resume_s']))} |")
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return {"rows": rows}


if __name__ == "__main__":
    main()
