"""Where the time of one cold ``python pipelines/mnist60k.py`` goes: wall and CPU seconds of each phase.

Run in a fresh interpreter (so the imports are cold), it imports the pipeline, then calls its ``main`` with the
given arguments, and splits the run at the pipeline's own progress lines (view building, cluster start, each fit
stage, the report). Without ``--scheduler`` the "building the three views" phase is the forked child's build and,
meanwhile, this process's imports of the fit's modules; "Dask dashboard" ends when the child's store is ready. CPU
time is summed over this process and every process it started (the view-building child, the LocalCluster's nannies
and workers with --processes), read with psutil at each line, so it is much less sensitive to a loaded machine
than the wall time. Prints a table and writes JSON.

    python bench/profile_cold.py --json bench/results/profile_cold.json -- --out /tmp/run --quiet
"""
from __future__ import annotations

import time

T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import psutil  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(proc: psutil.Process) -> float:
    """CPU seconds (user + system) of `proc`, its live descendants, and the descendants they have reaped (children_*:
    a child's whole time once it has been waited for)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:  # ended between the listing and the reading: counted by its parent once reaped
            pass
    return total


class Marks:
    """(label, wall, cpu of the process tree) at each progress line."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.marks: list[tuple[str, float, float]] = []

    def __call__(self, label: str) -> None:
        self.marks.append((label, time.perf_counter() - T0, cpu_seconds(self.proc)))

    def phases(self) -> list[dict]:
        """Each interval between consecutive marks, named by the mark that starts it."""
        return [{"phase": a[0], "wall": round(b[1] - a[1], 2), "cpu": round(b[2] - a[2], 2)}
                for a, b in zip(self.marks, self.marks[1:])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the phases here")
    parser.add_argument("pipeline_args", nargs=argparse.REMAINDER, help="after --: pipelines/mnist60k.py's arguments")
    args = parser.parse_args()
    marks = Marks()
    marks.marks.append(("interpreter start", 0.0, 0.0))
    marks("import pipelines/mnist60k.py")
    sys.path.insert(0, str(ROOT / "pipelines"))
    import mnist60k

    class Progress(mnist60k.Progress):
        def __call__(self, message: str) -> None:
            if not message.startswith("  ") or message.endswith("..."):  # phase starts (stage lines end "...")
                marks(message.strip().split(" (")[0][:60])
            super().__call__(message)

    mnist60k.Progress = Progress
    marks("parse arguments")
    load = os.getloadavg()
    mnist60k.main([a for a in args.pipeline_args if a != "--"])
    marks("end")
    phases = marks.phases()
    total_wall, total_cpu = marks.marks[-1][1], marks.marks[-1][2]
    print(f"\n{'phase':62s} {'wall s':>7s} {'cpu s':>7s}")
    for ph in phases:
        print(f"{ph['phase']:62s} {ph['wall']:7.2f} {ph['cpu']:7.2f}")
    print(f"{'total (from interpreter start)':62s} {total_wall:7.2f} {total_cpu:7.2f}")
    print(f"load average at start / end: {load} / {os.getloadavg()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"phases": phases, "wall": total_wall, "cpu": total_cpu,
                                         "load_start": load, "load_end": os.getloadavg(),
                                         "argv": args.pipeline_args}, indent=2))


if __name__ == "__main__":
    main()
