import errno
import json
from pathlib import Path

import numpy as np
import pytest

from onmsc_dask.outputs import RUN_FILES, labels_files, write_run_files


def _full_disk_at_the_second(monkeypatch, method: str) -> None:
    """Path.`method` (replace, write_bytes) failing with a full disk at its second call."""
    real, calls = getattr(Path, method), []

    def full(self, *args):
        calls.append(self)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args)

    monkeypatch.setattr(Path, method, full)


def test_run_files_replace_an_earlier_runs_as_one_set(tmp_path, monkeypatch):
    """A run killed or out of disk while it wrote its files left new labels beside the earlier run's report (nothing
    said which was which), or a truncated figure; an earlier run's files are now removed first and each new one is
    written aside and renamed into place. A symbolic link among them is removed, never written through."""
    for name in RUN_FILES:
        (tmp_path / name).write_text("an earlier run")
    (tmp_path / "labels.csv").unlink()
    (tmp_path / "mine.csv").write_text("the user's")
    (tmp_path / "labels.csv").symlink_to(tmp_path / "mine.csv")
    files = {"report.json": json.dumps({"n_clusters": 2}).encode(), **labels_files(np.array([0, 1, 1]))}
    _full_disk_at_the_second(monkeypatch, "replace")
    with pytest.raises(OSError, match="No space left"):
        write_run_files(tmp_path, files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.csv", "report.json"]
    assert json.loads((tmp_path / "report.json").read_text()) == {"n_clusters": 2}
    monkeypatch.undo()
    write_run_files(tmp_path, files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.csv", "labels.npy", "mine.csv", "report.json"]
    np.testing.assert_array_equal(np.load(tmp_path / "labels.npy"), [0, 1, 1])
    assert (tmp_path / "labels.csv").read_text() == "sample,cluster\n0,0\n1,1\n2,1\n"
    assert (tmp_path / "mine.csv").read_text() == "the user's" and not (tmp_path / "labels.csv").is_symlink()


def test_a_file_that_cannot_be_written_leaves_the_earlier_runs_files(tmp_path, monkeypatch):
    """The earlier run's files were removed before the new ones were written: a new file that could not be written
    (a full disk, a directory in its way) left no results at all. A directory where a file goes is said first."""
    for name in RUN_FILES:
        (tmp_path / name).write_text("an earlier run")
    files = {"report.json": b"{}", **labels_files(np.array([0, 1, 1]))}
    _full_disk_at_the_second(monkeypatch, "write_bytes")
    with pytest.raises(OSError, match="No space left"):
        write_run_files(tmp_path, files)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(RUN_FILES)
    assert all((tmp_path / name).read_text() == "an earlier run" for name in RUN_FILES)
    for way in (tmp_path / ".labels.csv.onmsc-dask-partial", tmp_path / "labels.npy"):
        (tmp_path / "labels.npy").unlink(missing_ok=True)
        way.mkdir()
        with pytest.raises(ValueError, match=f"{way} is a directory, where the run writes its labels\\.(csv before "
                                             "renaming it|npy); move it away$"):
            write_run_files(tmp_path, files)
        assert sorted(p.name for p in tmp_path.iterdir() if p != way) == sorted(set(RUN_FILES) - {"labels.npy"})
        way.rmdir()


def test_files_of_a_run_s_names_are_refused_before_a_run_unless_a_run_s_report_is_beside_them(tmp_path):
    """check_run_files(before_run=True): a report.json of a run (versions naming onmsc-dask, or the cluster_sizes of
    pipelines/mnist60k.py's reports before they had versions) lets a run replace the files; another one, or none
    beside them, is refused, for each of the names given (mnist60k's anchor_sweep.png too)."""
    from onmsc_dask.outputs import check_run_files

    (tmp_path / "anchor_sweep.png").write_bytes(b"mine")
    check_run_files(tmp_path, before_run=True)  # not among the CLI's names
    with pytest.raises(ValueError, match=r"holds anchor_sweep\.png, which no onmsc-dask run wrote"):
        check_run_files(tmp_path, (*RUN_FILES, "anchor_sweep.png"), before_run=True)
    check_run_files(tmp_path, (*RUN_FILES, "anchor_sweep.png"))  # after a run's fit: only directories are refused
    for report, ours in [({"versions": {"onmsc-dask": "0.1.0"}}, True), ({"cluster_sizes": {"0": 5}}, True),
                         ({"versions": {"numpy": "2"}}, False), ([1, 2], False)]:
        (tmp_path / "report.json").write_text(json.dumps(report))
        if ours:
            check_run_files(tmp_path, (*RUN_FILES, "anchor_sweep.png"), before_run=True)
        else:
            with pytest.raises(ValueError, match=r"holds report\.json, anchor_sweep\.png, which no onmsc-dask run"):
                check_run_files(tmp_path, (*RUN_FILES, "anchor_sweep.png"), before_run=True)
