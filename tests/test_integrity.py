"""What a store holds is checked before it is used: finished stages against the sizes and checksums recorded when
they completed (a deleted or truncated chunk file is recomputed with a warning or named in one error, never read as
zeros), and a store's attributes against its arrays when it is opened."""
import shutil
import warnings
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

from onmsc_dask.cli import main
from onmsc_dask.outofcore import STAGES, fit_store
from onmsc_dask.store import MultiViewStore

OOC = dict(n_landmarks=60, random_state=0, n_init=3)


@pytest.fixture(autouse=True, scope="module")
def _single_threaded():
    with threadpool_limits(1), dask.config.set(scheduler="sync"):
        yield


def _digits3(n=300):
    X, _ = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    return [X[:n], X[:n] @ rng.standard_normal((64, 16)), np.sqrt(X[:n])]


def _chunk_files(stage_dir):
    """Every chunk file of a stage's results (under a `c/` directory of one of its arrays)."""
    return sorted(f for f in stage_dir.rglob("*") if f.is_file() and "c" in f.relative_to(stage_dir).parts)


def _damage(file, how):
    if how == "delete":
        file.unlink()
    else:
        file.write_bytes(file.read_bytes()[: max(1, file.stat().st_size // 2)])


def _results(store, stage):
    return list(zarr.open_group(store.path / "stages" / stage, mode="r").keys())


def _check_every_chunk_file_is_detected(path, tmp_path):
    """Each chunk file of each finished stage, deleted or truncated in a copy of the store: has_stage says no, with a
    warning naming the stage, and read_result stops with one line naming it and how to recompute it."""
    stages = MultiViewStore(path).stages()
    checked = 0
    for stage, params in stages.items():
        for i, file in enumerate(_chunk_files(path / "stages" / stage)):
            how = ("delete", "truncate")[i % 2]
            copy = tmp_path / f"copy{checked}.zarr"
            shutil.copytree(path, copy)
            _damage(copy / file.relative_to(path), how)
            store = MultiViewStore(copy)
            names = _results(store, stage)
            with pytest.warns(UserWarning, match=f"stage '{stage}' is damaged .*; it is recomputed"):
                assert not store.has_stage(stage, params, names), (stage, file, how)
            result = file.relative_to(path / "stages" / stage).parts[0]
            with pytest.raises(ValueError, match=f"stage '{stage}' is damaged .* run again to recompute it") as err:
                store.read_result(stage, result)
            assert "\n" not in str(err.value)
            shutil.rmtree(copy)
            checked += 1
    return stages, checked


def test_every_chunk_file_of_the_cli_in_memory_stages_is_checked(tmp_path, scheduler):
    views = _digits3(120)
    y = np.repeat(np.arange(3), 40)
    np.savez(tmp_path / "d.npz", view0=views[0], view1=views[2], y=y)
    assert main(["run", "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "out"), "--scheduler",
                 scheduler, "--embedding", "exact"]) == 0
    stages, checked = _check_every_chunk_file_is_detected(tmp_path / "out" / "views.zarr", tmp_path)
    assert set(stages) == {"view_graphs", "view_embeddings", "onmsc"} and checked >= 15


def test_the_resuming_line_names_a_damaged_stage_apart(tmp_path, scheduler, capsys):
    """It used to list a damaged stage among the finished ones, then warn that it is recomputed; and the stages of
    another seed as finished."""
    views = _digits3(120)
    np.savez(tmp_path / "d.npz", view0=views[0], view1=views[2])
    out = tmp_path / "out"
    command = ["run", "--data", str(tmp_path / "d.npz"), "--n-clusters", "3", "--out", str(out), "--scheduler", scheduler,
               "--embedding", "anchor", "--n-landmarks", "40"]
    assert main(command) == 0
    first = np.load(out / "labels.npy")
    _damage(_chunk_files(out / "views.zarr" / "stages" / "fusion")[0], "truncate")
    capsys.readouterr()
    assert main(command) == 0
    err = capsys.readouterr().err
    assert (f"resuming: {out / 'views.zarr'} holds this input (finished stages: landmarks, anchor_graph, embeddings; "
            "fusion is damaged: it and the stages after it are recomputed; a finished stage is reused if made "
            "with the same parameters)\n") in err
    np.testing.assert_array_equal(np.load(out / "labels.npy"), first)
    # another seed: no stage is said to be resumed (it listed all five, then computed them again)
    assert main([*command, "--random-state", "1"]) == 0
    assert (f"computing every stage: {out / 'views.zarr'} holds this input (finished stages: none; its stages were "
            "made with random_state 0, not 1: they are computed again)\n") in capsys.readouterr().err


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A store with every out-of-core stage finished, and its labels."""
    path = tmp_path_factory.mktemp("ooc") / "s.zarr"
    store = MultiViewStore.create(path, _digits3(), chunk_rows=100)
    return path, fit_store(store, 10, **OOC).labels


def test_every_chunk_file_of_the_out_of_core_stages_is_checked(fitted, tmp_path):
    stages, checked = _check_every_chunk_file_is_detected(fitted[0], tmp_path)
    assert set(stages) == set(STAGES) and checked >= 20


def test_a_resumed_stage_s_files_are_read_once_for_their_checksums(fitted, tmp_path, monkeypatch):
    """has_stage checks every file of a stage; reading its results then checks none again (on an object store each
    check is a request per file: a resumed run's reads took twice as long). A store that did not check the stage
    still checks each result's files before reading it."""
    from onmsc_dask import store as store_module

    path = tmp_path / "s.zarr"
    shutil.copytree(fitted[0], path)
    crc32s = store_module.crc32s
    read = []
    monkeypatch.setattr(store_module, "crc32s", lambda fs, sizes: read.extend(sizes) or crc32s(fs, sizes))
    recorded = MultiViewStore(path)._stage("embeddings").attrs["files"]
    names = _results(MultiViewStore(path), "embeddings")
    store = MultiViewStore(path)
    assert store.has_stage("embeddings", store.stages()["embeddings"], names)
    results = {name: store.read_result("embeddings", name) for name in names}
    assert len(read) == len(set(read)) == len(recorded)
    read.clear()
    again = MultiViewStore(path)
    for name in names:
        np.testing.assert_array_equal(again.read_result("embeddings", name), results[name])
    assert len(read) == len(set(read)) == len(recorded)
    store.write_result("embeddings", names[0], results[names[0]] + 1, store.stages()["embeddings"])
    store.mark_complete("embeddings")
    read.clear()
    np.testing.assert_array_equal(store.read_result("embeddings", names[0]), results[names[0]] + 1)
    assert read  # a stage written again is checked again


def test_has_stage_reads_the_stage_s_metadata_once(fitted, monkeypatch):
    """has_stage looks the stage up once (each lookup is a request on an object store), and reading its results
    looks it up no more; it knows the results from the record of its files: a name the stage does not hold is not
    there."""
    from onmsc_dask import store as store_module

    store = MultiViewStore(fitted[0])
    params, names = store.stages()["embeddings"], _results(store, "embeddings")
    lookups = []
    stage_group = store_module._stage_group
    monkeypatch.setattr(store_module, "_stage_group",
                        lambda root, stage: lookups.append(stage) or stage_group(root, stage))
    assert store.has_stage("embeddings", params, names)
    for name in names:
        store.read_result("embeddings", name)
    assert lookups == ["embeddings"]
    assert not store.has_stage("embeddings", params, [*names, "absent"])
    assert not store.has_stage("embeddings", {**params, "other": 1}, names)


@pytest.mark.parametrize("how", ["delete", "truncate"])
@pytest.mark.parametrize("stage", STAGES)
def test_a_damaged_stage_is_recomputed_with_a_warning_and_the_same_labels(fitted, tmp_path, stage, how):
    """A chunk file of a finished stage deleted (it used to read as zeros: other labels, silently) or truncated (a
    raw Zstd decompression error on every rerun): the rerun warns, recomputes that stage on, same labels."""
    path, labels = fitted
    copy = tmp_path / "s.zarr"
    shutil.copytree(path, copy)
    files = _chunk_files(copy / "stages" / stage)
    _damage(files[0 if how == "delete" else -1], how)
    with pytest.warns(UserWarning, match=f"stage '{stage}' is damaged"):
        result = fit_store(copy, 10, **OOC)
    assert result.computed_stages == list(STAGES[STAGES.index(stage):])
    np.testing.assert_array_equal(result.labels, labels)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*damaged")  # the recomputed stage is whole again
        assert fit_store(copy, 10, **OOC).computed_stages == []


@pytest.mark.parametrize("stage", ["landmarks", "fusion"])
@pytest.mark.parametrize("node", ["stage", "result"])
def test_a_stage_whose_metadata_cannot_be_parsed_is_recomputed(fitted, tmp_path, stage, node):
    """A stage's own zarr.json (which holds its record) or one of its results' made unparseable: every rerun used to
    stop with the JSON parser's bare message, naming no file; now the stage is recomputed with a warning."""
    path, labels = fitted
    copy = tmp_path / "s.zarr"
    shutil.copytree(path, copy)
    folder = copy / "stages" / stage
    target = folder / "zarr.json" if node == "stage" else next(folder.glob("*/zarr.json"))
    target.write_text("{")
    (copy / "stages" / ".ipynb_checkpoints").mkdir()  # a directory that is no stage is passed over
    store = MultiViewStore(copy)
    assert stage in store.finished_stages() and store.stage_damage(stage) is not None
    match = "its metadata cannot be read: JSONDecodeError" if node == "stage" else r"file \w+/zarr.json has 1 bytes"
    with pytest.warns(UserWarning, match=f"stage '{stage}' is damaged \\({match}.*; it is recomputed"):
        result = fit_store(copy, 10, **OOC)
    assert result.computed_stages == list(STAGES[STAGES.index(stage):])
    np.testing.assert_array_equal(result.labels, labels)
    assert fit_store(copy, 10, **OOC).computed_stages == []


@pytest.mark.parametrize("damage", ["unparseable", "a file"])
def test_the_stages_group_made_unparseable_or_a_file_is_made_anew(fitted, tmp_path, damage):
    """stages/zarr.json unparseable: every rerun read the finished stages, then stopped writing the results with the
    JSON parser's bare message; a file in place of stages/: every rerun computed every stage, then stopped with
    'file exists'. That file holds nothing of the stages: it is made anew, the stages in it kept."""
    path, labels = fitted
    copy = tmp_path / "s.zarr"
    shutil.copytree(path, copy)
    if damage == "unparseable":
        (copy / "stages" / "zarr.json").write_text("{")
    else:
        shutil.rmtree(copy / "stages")
        (copy / "stages").write_text("")
    store = MultiViewStore(copy)
    store.write_result("report", "sizes", np.arange(3), {"k": 10})  # as the CLI writes its results after the fit
    store.mark_complete("report")
    assert sorted(store.finished_stages()) == sorted([*STAGES, "report"] if damage == "unparseable" else ["report"])
    np.testing.assert_array_equal(store.read_result("report", "sizes"), np.arange(3))
    result = fit_store(copy, 10, **OOC)
    assert result.computed_stages == ([] if damage == "unparseable" else list(STAGES))
    np.testing.assert_array_equal(result.labels, labels)


def test_an_in_memory_run_writes_a_stage_whose_metadata_cannot_be_parsed_again(tmp_path, scheduler, capsys):
    """The CLI's in-memory stages: the run used to print its results, then fail writing them ('Expecting property
    name enclosed in double quotes'), leaving the previous run's labels, on every rerun."""
    views = _digits3(120)
    np.savez(tmp_path / "d.npz", view0=views[0], view1=views[2])
    out = tmp_path / "out"
    command = ["run", "--data", str(tmp_path / "d.npz"), "--n-clusters", "3", "--out", str(out), "--scheduler", scheduler,
               "--embedding", "exact"]
    assert main(command) == 0
    first = np.load(out / "labels.npy")
    (out / "views.zarr" / "stages" / "view_graphs" / "zarr.json").write_text("{")
    next((out / "views.zarr" / "stages" / "onmsc").glob("*/zarr.json")).write_text("{")
    (out / "labels.npy").unlink()
    assert main(command) == 0
    np.testing.assert_array_equal(np.load(out / "labels.npy"), first)
    assert MultiViewStore(out / "views.zarr").stage_damage("view_graphs") is None


def test_a_stage_without_a_record_of_its_files_is_recomputed(fitted, tmp_path):
    """A finished stage written before stages recorded their files cannot be checked: recomputed, with a warning."""
    copy = tmp_path / "s.zarr"
    shutil.copytree(fitted[0], copy)
    group = zarr.open_group(copy / "stages" / "fusion", mode="r+")
    group.attrs.put({key: value for key, value in group.attrs.asdict().items() if key != "files"})
    with pytest.warns(UserWarning, match="stage 'fusion' is damaged \\(no record of its files"):
        result = fit_store(copy, 10, **OOC)
    assert result.computed_stages == ["fusion", "labels"]
    np.testing.assert_array_equal(result.labels, fitted[1])


@pytest.fixture
def small(tmp_path):
    rng = np.random.default_rng(0)
    views = [rng.normal(size=(40, 5)), rng.normal(size=(40, 3))]
    return MultiViewStore.create(tmp_path / "s.zarr", views, np.arange(40) % 3, view_names=["a", "b"],
                                 chunk_rows=10).path


def _set_attrs(path, **attrs):
    zarr.open_group(path, mode="r+").attrs.update(attrs)


@pytest.mark.parametrize("change, error", [
    (dict(n_samples=30), r"attribute n_samples is 30, but array views/0 \(view 0 \('a'\)\) has 40 rows; the store "
                         r"was changed after it was written: write it again from its views with "
                         r"MultiViewStore\.create \(or the CLI's --data with the view files\)$"),
    (dict(n_samples=50), r"attribute n_samples is 50, but array views/0 \(view 0 \('a'\)\) has 40 rows"),
    (dict(view_names=["a"]), r"attribute view_names lists 1 views \['a'\], but group views holds arrays "
                             r"\['views/0', 'views/1'\]"),
    (dict(view_names=["a", "b", "c"]), r"attribute view_names lists 3 views .*, but group views holds arrays"),
    (dict(format_version="one"), r"attribute format_version is 'one', not a version number"),
])
def test_attributes_are_checked_against_the_arrays_on_open(small, change, error):
    """n_samples smaller than the arrays used to fit their first rows, a name short to drop a view, silently."""
    _set_attrs(small, **change)
    with pytest.raises(ValueError, match=error):
        MultiViewStore(small)


def test_format_version_as_a_string_is_read(small):
    """`format_version: "1"` used to be refused with "written by format version 1, this onmsc-dask reads version 1"."""
    _set_attrs(small, format_version="1")
    assert MultiViewStore(small).n_samples == 40
    _set_attrs(small, format_version="2")
    with pytest.raises(ValueError, match="written by format version 2, this onmsc-dask reads version 1"):
        MultiViewStore(small)


@pytest.mark.parametrize("n_labels", [39, 41])
def test_labels_of_another_length_are_an_error_on_open(small, n_labels):
    root = zarr.open_group(small, mode="r+")
    del root["labels"]
    root.create_array("labels", data=np.zeros(n_labels, np.int64), fill_value=np.iinfo(np.int64).min)
    with pytest.raises(ValueError, match=rf"array labels has shape \({n_labels},\), but attribute n_samples is 40; "
                                         "the store was changed after it was written: write it again"):
        MultiViewStore(small)


@pytest.mark.parametrize("array", ["views/0", "views/1/indices", "labels"])
def test_a_hand_made_store_whose_fill_value_could_pass_for_data(tmp_path, array):
    """A store made with zarr directly, zarr's default fill value 0: a missing chunk would read as zeros; all chunks
    present, it is read as it is."""
    rng = np.random.default_rng(0)
    root = zarr.open_group(tmp_path / "h.zarr", mode="w", zarr_format=3)
    root.create_array("views/0", data=rng.normal(size=(40, 4)), chunks=(10, 4))
    sparse = root.create_group("views/1", attributes={"sparse": "csr", "shape": [40, 6], "chunk_rows": 10})
    indices = np.tile(np.arange(2, 6), 40)  # no row of zeros, so every chunk is written
    for key, values in {"data": rng.uniform(1, 2, 160), "indices": indices, "indptr": np.arange(0, 161, 4)}.items():
        sparse.create_array(key, data=values, chunks=(16,))
    root.create_array("labels", data=np.arange(40) % 3 + 1, chunks=(10,))
    root.attrs.update({"format": "onmsc-dask-store", "format_version": 1, "n_samples": 40,
                       "view_names": ["v0", "v1"], "metadata": {}})
    assert MultiViewStore(root.store.root).labels[0] == 1
    chunk = next(f for f in (tmp_path / "h.zarr" / array / "c").rglob("*") if f.is_file())
    chunk.unlink()
    with pytest.raises(ValueError, match=rf"array {array} has 1 of its \d+ chunk files missing, and its fill value 0(\.0)? "
                                         "would be read there as data"):
        MultiViewStore(tmp_path / "h.zarr")


def test_codec_errors_reading_a_result_name_the_stage(fitted, tmp_path):
    """Read without the stage check (read_result_rows, as the embeddings stage reads Z; a stage without the record of
    its files): a truncated chunk file's checksum or codec error becomes the
    one line naming the stage."""
    copy = tmp_path / "s.zarr"
    shutil.copytree(fitted[0], copy)
    _damage(_chunk_files(copy / "stages" / "anchor_graph" / "Z0" / "data")[0], "truncate")
    _damage(_chunk_files(copy / "stages" / "fusion" / "embedding")[0], "truncate")
    group = zarr.open_group(copy / "stages" / "fusion", mode="r+")
    group.attrs.put({key: value for key, value in group.attrs.asdict().items() if key != "files"})
    store = MultiViewStore(copy)
    for read, stage, result in ((lambda: store.read_result_rows("anchor_graph", "Z0", 0, 100), "anchor_graph", "Z0"),
                                (lambda: store.read_result("fusion", "embedding"), "fusion", "embedding")):
        with pytest.raises(ValueError, match=rf"stage '{stage}' is damaged \(result '{result}' cannot be read: "
                                             r"\w+: .*\); delete .* and run again to recompute it") as err:
            read()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("batch", [1, 100, 1 << 26])
def test_checksums_read_in_batches_are_those_of_the_files(tmp_path, monkeypatch, batch):
    """crc32s reads files together up to CRC_BATCH_BYTES, a larger one alone in blocks: the same CRC-32 each way,
    for empty files and names fsspec would take for glob patterns."""
    import fsspec
    import zlib

    from onmsc_dask import store as store_module

    rng = np.random.default_rng(0)
    contents = {f"{tmp_path}/{name}": rng.bytes(size) for name, size in
                [("a", 0), ("b[1]", 7), ("c*", 150), ("d", 90), ("e?", 1), ("f", 400)]}
    for file, data in contents.items():
        Path(file).write_bytes(data)
    monkeypatch.setattr(store_module, "CRC_BATCH_BYTES", batch)
    crcs = store_module.crc32s(fsspec.filesystem("file"), {file: len(data) for file, data in contents.items()})
    assert crcs == {file: zlib.crc32(data) for file, data in contents.items()}


def test_read_results_reads_what_read_result_reads_and_names_a_damaged_stage(fitted, tmp_path):
    """A resumed stage's results read concurrently are those read one by one (arrays, sparse, dicts); a damaged one
    among them is still the one line naming the stage."""
    store = MultiViewStore(fitted[0])
    for stage in STAGES:
        names = _results(store, stage)
        together = store.read_results(stage, names)
        assert list(together) == names
        for name in names:
            alone = store.read_result(stage, name)
            if isinstance(alone, dict):
                assert together[name] == alone
            else:
                assert type(together[name]) is type(alone)
                np.testing.assert_array_equal(_dense(together[name]), _dense(alone))
    copy = tmp_path / "s.zarr"
    shutil.copytree(fitted[0], copy)
    _damage(_chunk_files(copy / "stages" / "anchor_graph" / "Z1" / "data")[0], "truncate")
    damaged = MultiViewStore(copy)
    with pytest.raises(ValueError, match=r"stage 'anchor_graph' is damaged .*; delete .* and run again") as err:
        damaged.read_results("anchor_graph", _results(damaged, "anchor_graph"))
    assert "\n" not in str(err.value)


def _dense(value):
    return value.toarray() if hasattr(value, "toarray") else np.asarray(value)
