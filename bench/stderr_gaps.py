"""The longest silence on stderr of a command: each stderr line with the seconds since the command started, then
the longest gap between two lines (the start and the exit count as lines).

    python bench/stderr_gaps.py python pipelines/mnist60k.py --out runs/mnist60k
"""
from __future__ import annotations

import subprocess
import sys
import time


def main(command: list[str]) -> int:
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    times = [0.0]
    for line in proc.stderr:
        times.append(time.perf_counter() - t0)
        print(f"{times[-1]:7.1f} {line}", end="", flush=True)
    proc.wait()
    times.append(time.perf_counter() - t0)
    gaps = [b - a for a, b in zip(times, times[1:])]
    i = max(range(len(gaps)), key=gaps.__getitem__)
    print(f"exit {proc.returncode} after {times[-1]:.1f} s; longest silence on stderr {gaps[i]:.1f} s "
          f"(ending at {times[i + 1]:.1f} s)")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
