"""A run's output files (labels and report) in its output directory, replacing an earlier run's as one set."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

#: the files a run writes into its output directory (beside its store)
RUN_FILES = ("report.json", "report.html", "convergence.png", "labels.npy", "labels.csv")


def _partial(out: Path, name: str) -> Path:
    """Where `name` is written before it is renamed into place."""
    return out / f".{name}.onmsc-dask-partial"


def _run_report(path: Path) -> bool:
    """Whether `path` is a report.json a run wrote: its ``versions`` name onmsc-dask, or (pipelines/mnist60k.py
    before it wrote versions) it has the ``cluster_sizes`` every run's report has."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and ("onmsc-dask" in (report.get("versions") or {}) or "cluster_sizes" in report)


def check_run_files(out: Path, names: tuple[str, ...] = RUN_FILES, before_run: bool = False) -> None:
    """ValueError when a directory stands where a run writes one of `names` in `out` (or writes it aside first): the
    run would end there after its fit, every time; with `before_run`, also when `out` holds files of those names
    that no run wrote (a run's report.json is renamed into place first, so an earlier run's files are always beside
    it): the run would replace the user's files."""
    present = [name for name in names if (out / name).is_file() or (out / name).is_symlink()]
    if before_run and present and not _run_report(out / "report.json"):
        raise ValueError(f"--out {out} holds {', '.join(present)}, which no onmsc-dask run wrote ({out / 'report.json'} "
                         "is no run's report) and the run would replace; give another --out, or move them away")
    for name in names:
        for path in (out / name, _partial(out, name)):
            if path.is_dir() and not path.is_symlink():
                raise ValueError(f"{path} is a directory, where the run writes its {name}"
                                 f"{'' if path.name == name else ' before renaming it'}; move it away")


def write_run_files(out: Path, files: dict[str, bytes], earlier: tuple[str, ...] = RUN_FILES) -> None:
    """Put `files` (name: content) into `out` as one run's outputs: each is written aside first (check_run_files),
    then every file of `earlier` (a run's file names) an earlier run left is removed (a symbolic link, not its
    target) and the new ones are renamed into place, so `out` never holds a half-written file, nor files of two
    runs, and a file that cannot be written leaves the earlier run's as they were."""
    check_run_files(out, tuple(files))
    written = []
    try:
        for name, content in files.items():
            _partial(out, name).write_bytes(content)
            written.append(name)
        for name in earlier:
            (out / name).unlink(missing_ok=True)
        for name in files:
            _partial(out, name).replace(out / name)
    finally:
        for name in written:
            _partial(out, name).unlink(missing_ok=True)


def labels_files(labels: np.ndarray) -> dict[str, bytes]:
    """``labels.npy`` and ``labels.csv`` (header ``sample,cluster``, one row per sample)."""
    labels = np.asarray(labels)
    npy, csv = io.BytesIO(), io.StringIO()
    np.save(npy, labels)
    np.savetxt(csv, np.column_stack([np.arange(len(labels)), labels]), fmt="%d", delimiter=",",
               header="sample,cluster", comments="")
    return {"labels.npy": npy.getvalue(), "labels.csv": csv.getvalue().encode()}
