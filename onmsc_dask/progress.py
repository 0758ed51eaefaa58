"""Progress on stderr: stage lines with the elapsed time, and while a Dask client works, a line at least every
HEARTBEAT seconds with the running stage's tasks done / total (the scheduler's task groups, what the dashboard's
progress bars count) and the time those tasks need at the rate so far (a stage may submit more tasks)."""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

#: seconds without output after which a progress line is printed; seconds between two lines about tasks
HEARTBEAT, TASK_LINES = 5.0, 2.0
_LEFT = ("waiting", "queued", "no-worker", "processing")


def counted(n: int, noun: str) -> str:
    """"n noun", the noun plural unless n is 1."""
    return f"{n} {noun}{'s' * (int(n) != 1)}"


def task_groups(dask_scheduler: Any) -> dict[str, tuple[int, int]]:
    """(finished, total) tasks of each task group on the scheduler (run with ``client.run_on_scheduler``)."""
    out = {}
    for name, group in dask_scheduler.task_groups.items():
        total = sum(group.states.values())
        out[str(name)] = (total - sum(group.states.get(state, 0) for state in _LEFT), total)
    return out


def _label(message: str, width: int = 70) -> str:
    """A stage line's label for the heartbeat: its text before ": ", at most `width` characters, cut between words."""
    label = message.strip().split(": ")[0].rstrip(". ")
    return label if len(label) <= width else label[:width - 4].rsplit(" ", 1)[0] + " ..."


class Progress:
    """Callable with a stage line, printed as ``[elapsed] line`` on `stream`. Within :meth:`watch`, unless
    `quiet`, a background thread adds a line about the current stage (the last line printed) at least every
    HEARTBEAT s, and whenever the tasks of ``client`` (set it when there is one) progress, at most every
    TASK_LINES s, with an estimate of the time left."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.start = time.perf_counter()
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()
        self._stage, self._stage_start, self._last_output = "starting", self.start, self.start
        self._seen: dict[str, tuple[int, int]] = {}  # every task group's last counts
        self._before: dict[str, tuple[int, int]] = {}  # their counts when the stage started
        self._reported: tuple[int, int] | None = None
        self.client: Any = None

    def _print(self, line: str) -> None:
        with self._lock:
            print(f"[{time.perf_counter() - self.start:7.1f}s] {line}", file=self.stream, flush=True)
            self._last_output = time.perf_counter()

    def __call__(self, message: str) -> None:
        with self._lock:
            self._stage, self._stage_start = _label(message), time.perf_counter()
            self._before, self._reported = dict(self._seen), None
        self._print(message)

    def _tasks(self) -> tuple[int, int]:
        """Tasks finished and in total of the task groups that changed since the current stage started."""
        changed = [counts for name, counts in self._seen.items() if self._before.get(name) != counts]
        return sum(c[0] for c in changed), sum(c[1] for c in changed)

    def _tick(self) -> None:
        client = self.client
        try:
            if client is not None:
                self._seen.update(client.run_on_scheduler(task_groups))
        except Exception:  # noqa: BLE001 - a scheduler gone or without this package: stage and heartbeat lines only
            pass
        now = time.perf_counter()
        done, total = self._tasks()
        moved = total > 0 and (done, total) != self._reported and now - self._last_output >= TASK_LINES
        if not (moved or now - self._last_output >= HEARTBEAT):
            return
        elapsed = now - self._stage_start
        line = f"    ... {elapsed:.0f} s since: {self._stage}"
        if total:
            line += f"; tasks {done}/{total} done"
            if 0 < done < total:
                line += f" (est. {elapsed * (total - done) / done:.0f} s left for the tasks so far)"
            self._reported = (done, total)
        self._print(line)

    @contextmanager
    def watch(self) -> Iterator[None]:
        """The heartbeat and the task lines, until the block ends."""
        if self.quiet:
            yield
            return
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(1.0):
                self._tick()

        thread = threading.Thread(target=loop, name="onmsc-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2.0)  # a call to a scheduler gone away may hang: the daemon thread is left to it
