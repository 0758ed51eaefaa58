"""A run's output files (labels and report) in its output directory, replacing an earlier run's as one set."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

#: the files a run writes into its output directory (beside its store)
RUN_FILES = ("report.json", "report.html", "convergence.png", "labels.npy", "labels.csv")


def write_run_files(out: Path, files: dict[str, bytes], earlier: tuple[str, ...] = RUN_FILES) -> None:
    """Put `files` (name: content) into `out` as one run's outputs: every file of `earlier` (a run's file names) an
    earlier run left is removed first (a symbolic link, not its target), and each file is written aside and renamed
    into place, so `out` never holds a half-written file, nor files of two runs."""
    for name in earlier:
        (out / name).unlink(missing_ok=True)
    for name, content in files.items():
        partial = out / f".{name}.onmsc-dask-partial"
        try:
            partial.write_bytes(content)
            partial.replace(out / name)
        finally:
            partial.unlink(missing_ok=True)


def labels_files(labels: np.ndarray) -> dict[str, bytes]:
    """``labels.npy`` and ``labels.csv`` (header ``sample,cluster``, one row per sample)."""
    labels = np.asarray(labels)
    npy, csv = io.BytesIO(), io.StringIO()
    np.save(npy, labels)
    np.savetxt(csv, np.column_stack([np.arange(len(labels)), labels]), fmt="%d", delimiter=",",
               header="sample,cluster", comments="")
    return {"labels.npy": npy.getvalue(), "labels.csv": csv.getvalue().encode()}
