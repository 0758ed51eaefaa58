"""Fault-injection benchmark: worker processes SIGKILLed during `onmsc-dask run` (out of core) on a scheduler and two
workers, on the first 30k Fashion-MNIST images as three views (pipelines/mnist60k.py: pixels, HOG, DCT).

1. A reference run, undisturbed.
2. For each stage of outofcore.STAGES (the reference times are those of a second undisturbed run, on warm workers), `--repeats` runs (default 5) of the same command into a copy of the
   reference's output directory whose stages from that one on are removed, so the run resumes the earlier stages and
   computes that stage and the later ones; one worker process (of two, each under a nanny that restarts it) is
   SIGKILLed at a random moment of the stage (uniform over its reference duration). Every run must exit 0 with the
   reference labels, without a rerun.
3. Every worker lost: the worker processes and their nannies SIGKILLed at a random moment of the anchor_graph stage;
   the run must end with one line and exit 1 within 2 minutes; with new workers the same command must resume to the
   reference labels.

    nice python bench/faults.py               # writes bench/results/faults.json, prints the table
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from distributed import Client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pipelines"))
import mnist60k  # noqa: E402

from onmsc_dask.outofcore import STAGES  # noqa: E402
from onmsc_dask.outputs import RUN_FILES  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
ALL_LOST_LIMIT = 120.0  # seconds from losing every worker to the run's exit


def start_workers(address: str, log_dir: Path) -> subprocess.Popen:
    """`dask worker` with two single-threaded workers, each under its own nanny, in a new process group."""
    return subprocess.Popen(["dask", "worker", address, "--nworkers", "2", "--nthreads", "1", "--memory-limit", "2GiB",
                             "--local-directory", str(log_dir), "--no-dashboard"], env=ENV, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def worker_pids(client: Client) -> list[int]:
    client.wait_for_workers(2, timeout=180)
    while len(pids := list(client.run(os.getpid).values())) < 2:
        time.sleep(0.5)
    return pids


def run_command(command: list[str], stage: str | None, delay: float, kill) -> dict:
    """Run `command`; `delay` seconds after it starts `stage` call kill(); returns exit code, stderr lines, where the
    kill landed and the seconds from the kill to the exit."""
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line.rstrip("\n")) for line in proc.stderr], daemon=True)
    reader.start()
    seen, current, deadline, killed_in, t_kill = [], None, None, None, None
    while reader.is_alive() or not lines.empty():
        try:
            line = lines.get(timeout=0.02)
        except queue.Empty:
            line = None
        if line is not None:
            seen.append(line)
            for i, name in enumerate(STAGES, 1):
                if line.endswith(f"stage {i}/{len(STAGES)} {name} ..."):
                    current = name
                    if name == stage and deadline is None:
                        deadline = time.monotonic() + delay
        if deadline is not None and t_kill is None and time.monotonic() >= deadline:
            killed_in, t_kill = current, time.monotonic()
            kill()
    proc.wait()
    return {"returncode": proc.returncode, "stderr": seen, "killed_in": killed_in,
            "exit_after_kill": None if t_kill is None else time.monotonic() - t_kill}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=mnist60k.DEFAULT_DATA_DIR)
    parser.add_argument("--limit", type=int, default=30000, help="first N images (default: 30000)")
    parser.add_argument("--chunk-rows", type=int, default=2000, help="rows per store chunk (default: 2000)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per stage (default: 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments (default: 0)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "faults.json")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="onmsc-faults-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    scheduler = subprocess.Popen(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--dashboard-address", ":0", "--no-show"], env=ENV,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = start_workers(address, work / "workers")
    try:
        store = mnist60k.build_store(args.data_dir, work / "input.zarr", args.limit, args.chunk_rows)

        def command(out: Path) -> list[str]:
            return [sys.executable, "-m", "onmsc_dask", "run", "--data", str(store.path), "--out", str(out),
                    "--scheduler", address, "--embedding", "anchor"]

        with Client(address, timeout="60s") as client:
            worker_pids(client)
            for name in ("warm-up", "ref"):  # the stage times of the second run: workers warm, as in those below
                t0 = time.perf_counter()
                ref = run_command(command(work / name), None, 0.0, lambda: None)
                assert ref["returncode"] == 0, "\n".join(ref["stderr"])
            reference = np.load(work / "ref" / "labels.npy")
            report = json.loads((work / "ref" / "report.json").read_text())
            durations = report["timings"]["fit_stages"]
            print(f"reference: {time.perf_counter() - t0:.1f} s, ACC {report['metrics']['acc']:.4f}, stages "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in durations.items()), flush=True)
            runs = []
            for i, stage in enumerate(STAGES):
                for r in range(args.repeats):
                    out = work / f"{stage}-{r}"
                    shutil.copytree(work / "ref", out)
                    for later in STAGES[i:]:
                        shutil.rmtree(out / "views.zarr" / "stages" / later)
                    for name in RUN_FILES:  # the run writes them all again
                        (out / name).unlink(missing_ok=True)
                    pids = worker_pids(client)
                    victim = rng.choice(pids)
                    delay = rng.uniform(0.0, durations[stage])
                    t0 = time.perf_counter()
                    result = run_command(command(out), stage, delay, lambda: os.kill(victim, signal.SIGKILL))
                    same = result["returncode"] == 0 and np.array_equal(np.load(out / "labels.npy"), reference)
                    runs.append({"stage": stage, "repeat": r, "delay": delay, "killed_in": result["killed_in"],
                                 "returncode": result["returncode"], "same_labels": bool(same),
                                 "seconds": time.perf_counter() - t0,
                                 "error": None if result["returncode"] == 0
                                 else result["stderr"][-1].replace(str(work), "<work>")})
                    print(f"{stage:12s} #{r} kill after {delay:5.2f} s (landed in {result['killed_in']}): exit "
                          f"{result['returncode']}, same labels {same}", flush=True)
                    shutil.rmtree(out)

            # every worker lost, then the same command with new workers
            out = work / "all"
            delay = rng.uniform(0.0, durations["anchor_graph"])

            def kill_all() -> None:
                os.killpg(workers.pid, signal.SIGKILL)
            lost = run_command(command(out), "anchor_graph", delay, kill_all)
            workers.wait()
            errors = [line.replace(str(work), "<work>") for line in lost["stderr"]
                      if line.startswith("onmsc-dask: error:")]
        workers = start_workers(address, work / "workers")
        with Client(address, timeout="60s") as client:
            worker_pids(client)
            resumed = run_command(command(out), None, 0.0, lambda: None)
        all_lost = {"delay": delay, "killed_in": lost["killed_in"], "returncode": lost["returncode"],
                    "exit_after_kill": lost["exit_after_kill"],
                    "within_limit": lost["exit_after_kill"] is not None and lost["exit_after_kill"] < ALL_LOST_LIMIT,
                    "error_lines": errors,
                    "last_line": lost["stderr"][-1].replace(str(work), "<work>"), "resume_returncode": resumed["returncode"],
                    "resumed_stages": [line.split("stage ", 1)[1].split(" read")[0] for line in resumed["stderr"]
                                       if "read from the store (resumed)" in line],
                    "resume_same_labels": bool(resumed["returncode"] == 0
                                               and np.array_equal(np.load(out / "labels.npy"), reference))}
    finally:
        if workers.poll() is None:
            os.killpg(workers.pid, signal.SIGTERM)
            workers.wait()
        scheduler.terminate()
        scheduler.wait()
        shutil.rmtree(work, ignore_errors=True)

    table = {stage: {"runs": sum(r["stage"] == stage for r in runs),
                     "exit_0_same_labels": sum(r["stage"] == stage and r["same_labels"] for r in runs),
                     "killed_in_stage": sum(r["stage"] == stage and r["killed_in"] == stage for r in runs)}
             for stage in STAGES}
    print(f"\n{'stage':12s} {'runs':>4s} {'kill landed in stage':>20s} {'exit 0, reference labels':>24s}")
    for stage, row in table.items():
        print(f"{stage:12s} {row['runs']:4d} {row['killed_in_stage']:20d} {row['exit_0_same_labels']:24d}")
    print(f"\nevery worker lost in {all_lost['killed_in']}: exit {all_lost['returncode']} "
          f"{all_lost['exit_after_kill']:.1f} s after the kill, {len(all_lost['error_lines'])} error line: "
          f"{all_lost['last_line']}\nsame command again: exit {all_lost['resume_returncode']}, resumed "
          f"{all_lost['resumed_stages']}, reference labels {all_lost['resume_same_labels']}")
    result = {"command": "nice python bench/faults.py " + " ".join(argv or sys.argv[1:]),
              "n_samples": store.n_samples, "chunk_rows": args.chunk_rows, "repeats": args.repeats,
              "seed": args.seed, "reference_acc": report["metrics"]["acc"], "reference_stage_seconds": durations,
              "table": table, "runs": runs, "all_workers_lost": all_lost}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
