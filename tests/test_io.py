import gzip
import re
import warnings

import h5py
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from onmsc_dask.io import load, load_mat, load_mnist_dir, load_npz, load_view_files, read_idx
from onmsc_dask.store import MultiViewStore
from shared_data import shared_mats, shared_path

N = 30


@pytest.fixture
def dataset():
    """Three views (float, integer, sparse) of N samples and labels."""
    rng = np.random.default_rng(0)
    views = [
        rng.normal(size=(N, 4)),
        rng.integers(0, 9, size=(N, 7)).astype(np.uint8),
        sp.random(N, 12, density=0.3, format="csc", random_state=1),
    ]
    return views, np.arange(N) % 3


def _dense(view):
    return view.toarray() if sp.issparse(view) else view


def _assert_views_equal(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert sp.issparse(g) == sp.issparse(e)
        if sp.issparse(g):
            assert g.format == "csr"
        else:
            assert g.flags.c_contiguous
        assert g.dtype == np.float64
        np.testing.assert_array_equal(_dense(g), _dense(e).astype(np.float64))


def _cell(views, shape):
    cell = np.empty(shape, dtype=object)
    for p, view in enumerate(views):
        cell.flat[p] = view
    return cell


def _save_v5(path, views, y=None, shape=None, view_key="X", label_key="y"):
    variables = {view_key: _cell(views, shape or (1, len(views)))}
    if y is not None:
        variables[label_key] = np.asarray(y, dtype=float)[:, None]
    scipy.io.savemat(path, variables)
    return path


def _save_v73(path, views, y):
    """Write a MATLAB v7.3 file as MATLAB does: HDF5 after a 512-byte header, arrays transposed."""
    with h5py.File(path, "w", userblock_size=512) as f:
        refs_group = f.create_group("#refs#")
        refs = np.empty((len(views), 1), dtype=h5py.ref_dtype)  # a 1×v cell, transposed
        for p, view in enumerate(views):
            if sp.issparse(view):
                csc = sp.csc_matrix(view)
                obj = refs_group.create_group(f"v{p}")
                obj.attrs["MATLAB_sparse"] = np.uint64(csc.shape[0])
                obj["data"] = csc.data
                obj["ir"] = csc.indices.astype(np.uint64)
                obj["jc"] = csc.indptr.astype(np.uint64)
                matlab_class = "double"
            else:
                obj = refs_group.create_dataset(f"v{p}", data=np.asarray(view).T)
                matlab_class = "double" if view.dtype == np.float64 else str(view.dtype)
            obj.attrs["MATLAB_class"] = np.bytes_(matlab_class)
            refs[p, 0] = obj.ref
        f.create_dataset("X", data=refs).attrs["MATLAB_class"] = np.bytes_("cell")
        labels = f.create_dataset("y", data=np.asarray(y, dtype=float)[None, :])
        labels.attrs["MATLAB_class"] = np.bytes_("double")
    with open(path, "r+b") as f:
        f.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, HDF5 schema 1.00 .".ljust(116))
        f.write(bytes(8) + b"\x00\x02IM")
    return path


# ---------------------------------------------------------------------- MATLAB


@pytest.mark.parametrize("shape", [(1, 3), (3, 1)])
def test_mat_v5_cell_orientations(tmp_path, dataset, shape):
    views, y = dataset
    got, labels = load_mat(_save_v5(tmp_path / "d.mat", views, y, shape))
    _assert_views_equal(got, views)
    assert labels.dtype == np.int64 and labels.shape == (N,)
    np.testing.assert_array_equal(labels, y)


def test_mat_v5_alternative_keys_and_no_labels(tmp_path, dataset):
    views, y = dataset
    got, labels = load_mat(_save_v5(tmp_path / "a.mat", views, y, view_key="fea", label_key="gnd"))
    _assert_views_equal(got, views)
    np.testing.assert_array_equal(labels, y)
    got, labels = load_mat(_save_v5(tmp_path / "b.mat", views, view_key="views"))
    _assert_views_equal(got, views)
    assert labels is None


def test_mat_transposed_views_are_oriented_by_labels(tmp_path, dataset):
    views, y = dataset
    stored = [views[0].T, views[1], views[2].T]
    got, _ = load_mat(_save_v5(tmp_path / "t.mat", stored, y))
    _assert_views_equal(got, views)


def test_mat_transposed_views_without_labels_use_shared_dimension(tmp_path, dataset):
    views, _ = dataset
    got, labels = load_mat(_save_v5(tmp_path / "t.mat", [views[0], views[1].T, views[2]]))
    assert labels is None
    _assert_views_equal(got, views)


def test_mat_ambiguous_orientation_without_labels_warns(tmp_path):
    """Two 20 x 100 views and no labels: 20 or 100 samples? The rule picks the row count, and says it guessed."""
    views = [np.arange(2000.0).reshape(20, 100), np.ones((20, 100))]
    with pytest.warns(UserWarning, match=r"both \[20, 100\] among its dimensions .* a guess: 20"):
        got, _ = load_mat(_save_v5(tmp_path / "a.mat", views))
    assert [v.shape for v in got] == [(20, 100), (20, 100)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_mat(_save_v5(tmp_path / "y.mat", views, np.arange(20) % 2))  # labels settle it


def test_mat_square_view_is_kept(tmp_path):
    square = np.arange(16.0).reshape(4, 4)
    with pytest.warns(UserWarning, match="view 0 is square .*: neither its rows nor its columns agree"):
        got, _ = load_mat(_save_v5(tmp_path / "s.mat", [square, np.ones((4, 2))], [0, 1, 0, 1]))
    np.testing.assert_array_equal(got[0], square)


def test_mat_plain_matrix_is_one_view_with_a_warning(tmp_path):
    """A .mat whose X is a matrix, not a cell of views, is read as one view, and says so; a cell of one view does
    not warn."""
    X, y = np.random.default_rng(0).random((12, 3)), np.arange(12) % 3
    scipy.io.savemat(tmp_path / "m.mat", {"X": X, "y": y})
    with pytest.warns(UserWarning, match=r"m.mat: X is one matrix, not a cell array of views, so it is clustered as "
                                         r"a single view"):
        got, labels = load_mat(tmp_path / "m.mat")
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], X)
    np.testing.assert_array_equal(labels, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_mat(_save_v5(tmp_path / "c.mat", [X], y))[0]) == 1


def test_mat_view_matching_no_sample_count_is_named(tmp_path):
    path = _save_v5(tmp_path / "bad.mat", [np.ones((5, 2)), np.ones((4, 3))], np.zeros(5))
    with pytest.raises(ValueError, match=r"view 1: has shape \(4, 3\).*5 samples"):
        load_mat(path)


def test_mat_v73_matches_v5(tmp_path, dataset):
    views, y = dataset
    v5 = load_mat(_save_v5(tmp_path / "v5.mat", views, y))
    v73 = load_mat(_save_v73(tmp_path / "v73.mat", views, y))
    with pytest.raises(NotImplementedError):  # the file really is a v7.3 .mat to scipy
        scipy.io.loadmat(tmp_path / "v73.mat")
    _assert_views_equal(v73[0], v5[0])
    np.testing.assert_array_equal(v73[1], v5[1])


def _truncated_v5(tmp_path, dataset):
    data = _save_v5(tmp_path / "full.mat", *dataset).read_bytes()
    return data[: len(data) // 2]


def _truncated_v73(tmp_path, dataset):
    data = _save_v73(tmp_path / "full.mat", *dataset).read_bytes()
    return data[: len(data) // 2]


@pytest.mark.parametrize(
    "content",
    [
        _truncated_v5,
        _truncated_v73,
        lambda tmp_path, dataset: b"",
        lambda tmp_path, dataset: b"not a mat file at all" * 20,
    ],
    ids=["truncated-v5", "truncated-v73", "empty", "garbage"],
)
def test_corrupt_mat_raises_value_error_naming_file(tmp_path, dataset, content):
    path = tmp_path / "broken.mat"
    path.write_bytes(content(tmp_path, dataset))
    with pytest.raises(ValueError, match=r"broken\.mat.*(corrupt|truncated|not a multi-view)"):
        load_mat(path)


def test_mat_without_views_variable(tmp_path):
    scipy.io.savemat(tmp_path / "other.mat", {"A": np.ones((3, 3))})
    with pytest.raises(ValueError, match="not a multi-view .mat"):
        load_mat(tmp_path / "other.mat")


# ------------------------------------------------------------------------- IDX


def _write_idx(path, array, code):
    header = bytes([0, 0, code, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(payload)
    return path


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize(
    "array, code",
    [
        (np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4), 0x08),
        (np.array([-5, 7, 1 << 20], dtype=np.int32), 0x0C),
        (np.linspace(0, 1, 6).reshape(2, 3), 0x0E),
    ],
)
def test_idx_round_trip(tmp_path, array, code, suffix):
    got = read_idx(_write_idx(tmp_path / f"a.idx{suffix}", array, code))
    assert got.dtype.isnative and got.dtype.kind == array.dtype.kind
    np.testing.assert_array_equal(got, array)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_truncated(tmp_path, suffix):
    images = np.random.default_rng(0).integers(0, 256, size=(10, 5, 5), dtype=np.uint8)
    data = _write_idx(tmp_path / f"a.idx{suffix}", images, 0x08).read_bytes()
    path = tmp_path / f"a.idx{suffix}"
    path.write_bytes(data[: len(data) - 40])
    with pytest.raises(ValueError, match=r"a\.idx.*truncated"):
        read_idx(path)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_shape_reads_the_header_only_and_a_missing_file_stays_missing(tmp_path, suffix):
    """idx_shape gives the header's dimensions (a file cut after its header too); a missing file is the
    FileNotFoundError of opening it, not "corrupt or truncated"."""
    from onmsc_dask.io import idx_shape

    path = _write_idx(tmp_path / f"a.idx{suffix}", np.zeros((7, 3, 2), np.uint8), 0x08)
    assert idx_shape(path) == (7, 3, 2)
    data = gzip.decompress(path.read_bytes()) if suffix else path.read_bytes()
    path.write_bytes(gzip.compress(data[:16]) if suffix else data[:16])
    assert idx_shape(path) == (7, 3, 2)
    for read in (idx_shape, read_idx):
        with pytest.raises(FileNotFoundError):
            read(tmp_path / "missing.idx")


def test_idx_dimensions_are_checked_from_the_header(tmp_path):
    """read_idx(path, ndim): another number of dimensions is a ValueError naming the file (a KeyError for ndim 2);
    labels of one column, (n, 1), are labels (an MNIST directory's labels file of that shape was refused)."""
    images = _write_idx(tmp_path / "i.idx", np.zeros((4, 3, 2), np.uint8), 0x08)
    with pytest.raises(ValueError, match=r"i\.idx: its header gives 3-D data \(4, 3, 2\), expected 2-D data"):
        read_idx(images, 2)
    directory = tmp_path / "mnist"
    directory.mkdir()
    _write_idx(directory / "train-images-idx3-ubyte", np.zeros((5, 3, 2), np.uint8), 0x08)
    _write_idx(directory / "train-labels-idx1-ubyte", np.arange(5, dtype=np.uint8)[:, None], 0x08)
    np.testing.assert_array_equal(load_mnist_dir(directory)[1], np.arange(5))


def test_idx_bad_magic_and_trailing_data(tmp_path):
    path = _write_idx(tmp_path / "a.idx", np.zeros(4, np.uint8), 0x08)
    path.write_bytes(b"\x01\x02\x03\x04" + path.read_bytes()[4:])
    with pytest.raises(ValueError, match=r"a\.idx.*bad magic"):
        read_idx(path)
    path = _write_idx(tmp_path / "b.idx", np.zeros(4, np.uint8), 0x08)
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(ValueError, match=r"b\.idx.*beyond"):
        read_idx(path)


@pytest.fixture
def mnist_dir(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(12, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=12, dtype=np.uint8)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", images, 0x08)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels, 0x08)
    return tmp_path, images, labels


def test_load_mnist_dir(mnist_dir):
    directory, images, labels = mnist_dir
    for split in ("t10k", "test"):
        got_images, got_labels = load_mnist_dir(directory, split)
        np.testing.assert_array_equal(got_images, images)
        np.testing.assert_array_equal(got_labels, labels)


def test_an_idx_labels_file_of_another_length_says_one_label_per_sample(mnist_dir):
    """It said "expected 12 like the views" of a directory of images."""
    directory, _, labels = mnist_dir
    _write_idx(directory / "t10k-labels-idx1-ubyte.gz", labels[:10], 0x08)
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte\.gz: has 10 entries, expected 12, one per sample$"):
        load_mnist_dir(directory, "t10k")


def test_load_mnist_dir_missing_split_lists_files(mnist_dir):
    with pytest.raises(FileNotFoundError, match=r"'train'.*t10k-images-idx3-ubyte\.gz"):
        load_mnist_dir(mnist_dir[0], "train")


def test_load_mnist_directory_as_one_flat_view(mnist_dir):
    directory, images, labels = mnist_dir
    views, y = load(directory)
    assert len(views) == 1 and views[0].shape == (12, 784) and views[0].dtype == np.float64
    np.testing.assert_array_equal(views[0], images.reshape(12, -1))
    np.testing.assert_array_equal(y, labels)


# ------------------------------------------------------------------ NPZ / CSV


@pytest.mark.parametrize("prefix", ["view", "X", "X_"])
def test_load_npz(tmp_path, dataset, prefix):
    views, y = dataset
    dense = [_dense(v) for v in views]
    np.savez(tmp_path / "d.npz", y=y, **{f"{prefix}{p}": v for p, v in enumerate(dense)})
    got, labels = load_npz(tmp_path / "d.npz")
    _assert_views_equal(got, dense)
    np.testing.assert_array_equal(labels, y)


def test_load_npz_of_named_arrays_takes_them_as_views_by_name(tmp_path, dataset):
    """np.savez(f, dense=A, counts=B, y=y) was refused ("expected arrays view0, view1, ..."): its arrays are views, in
    the file's order, named by npz_view_names; numbered arrays keep no names; an archive of labels only says so."""
    from onmsc_dask.io import npz_view_names

    views, y = dataset
    dense = [_dense(v) for v in views]
    np.savez(tmp_path / "n.npz", texture=dense[1], colour=dense[0], y=y)
    got, labels = load_npz(tmp_path / "n.npz")
    _assert_views_equal(got, [dense[1], dense[0]])
    np.testing.assert_array_equal(labels, y)
    assert npz_view_names(tmp_path / "n.npz") == ["texture", "colour"]
    np.savez(tmp_path / "v.npz", view0=dense[0], view1=dense[1])
    assert npz_view_names(tmp_path / "v.npz") is None
    np.savez(tmp_path / "bad.npz", colour=dense[0], names=np.array(["a"] * len(y)))
    with pytest.raises(ValueError, match=r"bad\.npz: view 'names': is not a numeric matrix"):
        load_npz(tmp_path / "bad.npz")
    np.savez(tmp_path / "y.npz", y=y)
    with pytest.raises(ValueError, match=r"y\.npz: holds no views \(only \['y'\]\)"):
        load_npz(tmp_path / "y.npz")
    # labels under another name were read as a view ("view 'target': has shape (n,)", found by a review)
    np.savez(tmp_path / "t.npz", data=dense[0], target=y)
    with pytest.raises(ValueError, match=r"t\.npz: array 'target' looks like labels, but labels are read from the "
                                         r"first of y / Y / gt / gnd / truth / labels: save them as y="):
        load_npz(tmp_path / "t.npz")
    np.savez(tmp_path / "two.npz", data=dense[0], y=y, label=y)
    with pytest.raises(ValueError, match=r"array 'label' looks like labels, .* \(y here\): keep one of them"):
        load_npz(tmp_path / "two.npz")
    # with labels, a view of the wrong row count was named by its position only (found by a review)
    np.savez(tmp_path / "short.npz", colour=dense[0], texture=dense[1][:-1], y=y)
    with pytest.raises(ValueError, match=rf"short\.npz: view 1 \('texture'\): has shape \({len(y) - 1}, \d+\), "
                                         rf"neither dimension matches {len(y)} samples \(len\(y\)\)"):
        load_npz(tmp_path / "short.npz")


def test_load_npz_errors(tmp_path):
    np.savez(tmp_path / "gap.npz", view0=np.ones((3, 2)), view2=np.ones((3, 2)))
    with pytest.raises(ValueError, match="numbered from 0"):
        load_npz(tmp_path / "gap.npz")
    np.savez(tmp_path / "rows.npz", view0=np.ones((3, 2)), view1=np.ones((4, 2)))
    with pytest.raises(ValueError, match="view 1: has 4 rows, expected 3"):
        load_npz(tmp_path / "rows.npz")


def test_load_npz_positional_arrays(tmp_path, dataset):
    """``np.savez(f, X0, X1, y=y)`` names the views arr_0, arr_1; they used to be rejected."""
    views, y = dataset
    dense = [_dense(v) for v in views]
    np.savez(tmp_path / "d.npz", *dense, y=y)
    got, labels = load(tmp_path / "d.npz")
    _assert_views_equal(got, dense)
    np.testing.assert_array_equal(labels, y)
    np.savez(tmp_path / "both.npz", np.zeros((N, 2)), view0=dense[0])  # named views win, the others are said to be
    with pytest.warns(UserWarning, match=r"both\.npz: arrays \['arr_0'\] are left out: they are not named as the "
                                         r"views are \(view0, view1, \.\.\. or X0 / X_0 \.\.\.\)"):  # silent before
        _assert_views_equal(load_npz(tmp_path / "both.npz")[0], dense[:1])


def test_load_npz_object_array_is_refused_as_pickled(tmp_path):
    """It used to be reported as 'corrupt or not an .npz archive'."""
    np.savez(tmp_path / "o.npz", view0=np.array([np.ones(2), np.ones(3)], dtype=object))
    with pytest.raises(ValueError, match=r"o\.npz: holds pickled data \(object arrays\), which is not read for safety"):
        load_npz(tmp_path / "o.npz")


def test_load_npz_transposed_view_is_oriented_by_labels(tmp_path, dataset):
    """As in .mat files (it used to be an error); without labels the rows are the samples, with no guess."""
    views, y = dataset
    dense = [_dense(v) for v in views]
    np.savez(tmp_path / "t.npz", view0=dense[0], view1=dense[1].T, y=y)
    _assert_views_equal(load_npz(tmp_path / "t.npz")[0], dense[:2])
    np.savez(tmp_path / "u.npz", view0=dense[0], view1=dense[1].T)
    with pytest.raises(ValueError, match=r"view 1: has 7 rows, expected 30 like view 0"):
        load_npz(tmp_path / "u.npz")


def test_labels_of_the_wrong_length_are_blamed(tmp_path, dataset):
    """They used to be reported as 'view 0: has 30 rows, expected 31 like len(y)'."""
    views, y = dataset
    y = np.append(y, 0)
    np.savez(tmp_path / "d.npz", view0=views[0], view1=views[1], y=y)
    _save_v5(tmp_path / "d.mat", views, y)
    for path in (tmp_path / "d.npz", tmp_path / "d.mat"):
        with pytest.raises(ValueError, match=rf"{path.name}: labels: have 31 entries, but no view has 31 rows"):
            load(path)
    np.savetxt(tmp_path / "v.csv", views[0], delimiter=",")
    np.savetxt(tmp_path / "y.csv", y, fmt="%d")
    with pytest.raises(ValueError, match=r"y\.csv: has 31 entries, expected 30, one per sample"):
        load_view_files(tmp_path / "v.csv", y_path=tmp_path / "y.csv")


def test_load_view_files_with_and_without_header(tmp_path, dataset):
    views, y = dataset
    a, b = views[0], views[1].astype(float)
    np.savetxt(tmp_path / "a.csv", a, delimiter=",")
    np.savetxt(tmp_path / "b.csv", b, delimiter=",", header="f0,f1,f2,f3,f4,f5,f6", comments="")
    np.savetxt(tmp_path / "y.csv", y, delimiter=",", fmt="%d", header="label", comments="")
    got, labels = load_view_files([tmp_path / "a.csv", tmp_path / "b.csv"], y_path=tmp_path / "y.csv")
    _assert_views_equal(got, [a, b])
    np.testing.assert_array_equal(labels, y)


def test_load_view_files_errors(tmp_path):
    (tmp_path / "a.csv").write_text("1,2\n3,4\n")
    (tmp_path / "b.csv").write_text("1,2\n3,x\n")
    (tmp_path / "c.csv").write_text("1,2\n3,4\n5,6\n")
    with pytest.raises(ValueError, match=r"b\.csv.*not a numeric CSV"):
        load_view_files([tmp_path / "a.csv", tmp_path / "b.csv"])
    with pytest.raises(ValueError, match=r"view 1 \('c'\): has 3 rows, expected 2 like view 0 \('a'\)"):
        load_view_files([tmp_path / "a.csv", tmp_path / "c.csv"])


def test_load_view_files_first_row_with_byte_order_mark_or_empty_field_is_data(tmp_path):
    """The first data row used to be taken for a header (and dropped) when it began with a UTF-8 byte-order mark
    or had an empty field."""
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf1,2\n3,4\n5,7\n")
    np.testing.assert_array_equal(load_view_files(tmp_path / "bom.csv")[0][0], [[1, 2], [3, 4], [5, 7]])
    (tmp_path / "bomhead.csv").write_bytes(b"\xef\xbb\xbfa,b\n3,4\n")
    np.testing.assert_array_equal(load_view_files(tmp_path / "bomhead.csv")[0][0], [[3, 4]])
    (tmp_path / "empty.csv").write_text("1,,2\n3,4,1\n")
    with pytest.raises(ValueError, match=r"empty\.csv: not a numeric CSV file \(line 1: .*'' to float64, column 2"):
        load_view_files(tmp_path / "empty.csv")


def _pandas_csv(path, array, index=True, columns=None):
    """`array` written as pandas' ``DataFrame(array, columns=columns).to_csv(path, index=index)`` writes it."""
    array = np.asarray(array).reshape(len(array), -1)
    names = [str(c) for c in (range(array.shape[1]) if columns is None else columns)]
    rows = [[""] * index + names] + [[str(i)] * index + [str(v.item()) for v in row] for i, row in enumerate(array)]
    path.write_text("".join(",".join(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("columns", [None, ["f0", "f1", "f2", "f3"]], ids=["default-names", "named"])
def test_load_view_files_drops_pandas_index_column(tmp_path, dataset, columns):
    """``df.to_csv(path)`` writes the index 0..n-1 as a first column under an empty header field; it used to be
    read as a feature (ACC on 4 blobs fell from 0.995 to 0.285), or, under names 0..d-1, to fail on the empty field."""
    views, y = dataset
    got, labels = load_view_files(_pandas_csv(tmp_path / "v.csv", views[0], columns=columns),
                           y_path=_pandas_csv(tmp_path / "y.csv", y))
    _assert_views_equal(got, views[:1])
    np.testing.assert_array_equal(labels, y)


def test_load_view_files_pandas_default_column_names_are_a_header(tmp_path, dataset):
    """``to_csv(index=False)`` writes the header 0,1,...,d-1, which used to be read as a sample (N + 1 rows)."""
    views, y = dataset
    assert views[0].shape[1] >= 3
    with pytest.warns(UserWarning, match=r"v\.csv: first row 0,1,2.* taken as column names \(evenly spaced"):
        got, _ = load_view_files(_pandas_csv(tmp_path / "v.csv", views[0], index=False))
    _assert_views_equal(got, views[:1])
    np.savetxt(tmp_path / "y.csv", y, fmt="%d")  # one column starting with 0: labels, not a header
    with pytest.warns(UserWarning):
        np.testing.assert_array_equal(load_view_files(tmp_path / "v.csv", y_path=tmp_path / "y.csv")[1], y)
    one_hot = np.eye(2)[[1, 0, 1, 1]]  # a first sample 0,1 is data (d < 3), not pandas' names
    np.savetxt(tmp_path / "h.csv", one_hot, delimiter=",", fmt="%d")
    _assert_views_equal(load_view_files(tmp_path / "h.csv")[0], [one_hot])


@pytest.mark.parametrize(
    "text, line",
    [('"1","2"\n3,x\n', 2), ("a,b\n\n1,2\n5,x\n", 4), ("1,2\n# note\n3,4\n5,6,7\n", 4)],
    ids=["quoted-header", "header-blank-line", "comment-ragged"],
)
def test_load_view_files_errors_give_file_line_numbers(tmp_path, text, line):
    """numpy's row numbers skip the header, blank and comment lines, and count from 0 or 1 by the error: a header
    of quoted numbers made 'row 0' of the file's second line."""
    (tmp_path / "a.csv").write_text(text)
    with pytest.raises(ValueError, match=rf"a\.csv: not a numeric CSV file \(line {line}: ") as info:
        load_view_files(tmp_path / "a.csv")
    assert "row" not in str(info.value)


def test_labels_file_of_class_names_with_a_header_and_a_label_missing_is_said(tmp_path, dataset):
    """A header over one name fewer than the samples (the last label missing, its line left empty) used to be read
    as a class of its own, every label shifted by one line: an error. Without the empty line it may be a rare first
    class (iris' setosa once): a warning. Not for ids, whose missing mark is the error."""
    views, y = dataset
    np.save(tmp_path / "v.npy", views[0])
    names = np.array(["cat", "dog", "fox", "owl"])[y]
    said = r"line 1 \('{}'\) is the only class of one sample, as a header would be: if it is a header, a label is " \
           r"missing and every label after it is read one line early"
    (tmp_path / "y.csv").write_text("label\n" + "\n".join(names[:-1]) + "\n\n")
    with pytest.raises(ValueError, match=rf"y\.csv: {said.format('label')} \(the file's last line is empty; if line 1 "
                                         r"is a label, remove that line\)"):
        load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.csv")
    (tmp_path / "y.csv").write_text("label\n" + "\n".join(names) + "\n")  # whole: read
    np.testing.assert_array_equal(load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.csv")[1], names)
    names[0] = "emu"  # a class of one sample, and no header
    (tmp_path / "y.csv").write_text("\n".join(names) + "\n")
    with pytest.warns(UserWarning, match=rf"y\.csv: {said.format('emu')}$"):
        got = load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.csv")[1]
    np.testing.assert_array_equal(got, names)
    ids = np.where(np.arange(len(y)) == 4, "NA", y.astype(str))
    ids[0] = "7"  # the only id 7, before a missing id: the missing id is the error (it said line 1 looked a header)
    (tmp_path / "y.csv").write_text("\n".join(ids) + "\n")
    with pytest.raises(ValueError, match=r"y\.csv: holds missing labels \(e\.g\. on line 5: 'NA'\)"):
        load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.csv")


def test_labels_file_of_ids_under_pandas_header_0_says_what_line_1_is(tmp_path, dataset):
    """``pd.Series(y).to_csv(path, index=False)`` writes the header 0: it said only 'has 31 entries, expected 30'."""
    views, y = dataset
    np.save(tmp_path / "v.npy", views[0])
    (tmp_path / "y.csv").write_text("0\n" + "".join(f"{c}\n" for c in y))
    with pytest.raises(ValueError, match=rf"y\.csv: has {len(y) + 1} entries, expected {len(y)}, one per sample; if "
                                         r"its first line \(0\) is a header \(pandas writes 0 for an unnamed Series\), "
                                         r"name the column"):
        load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.csv")
    (tmp_path / "y.csv").write_text("label\n0\n" + "".join(f"{c}\n" for c in y))  # a header, and one id too many
    with pytest.raises(ValueError, match=rf"y\.csv: has {len(y) + 1} entries, expected {len(y)}, one per sample$"):
        load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.csv")
    # a headerless view whose first sample reads 0,1,2,3,4 is taken as column names (with a warning): the labels'
    # error names that too (it blamed the labels only; found by a new-user helper)
    rows = np.vstack([np.arange(5), views[1][1:, :5]])
    (tmp_path / "v.csv").write_text("".join(",".join(map(str, row)) + "\n" for row in rows))
    (tmp_path / "y.csv").write_text("".join(f"{c}\n" for c in y))
    with pytest.warns(UserWarning, match=r"first row 0,1,2,3,4 taken as column names"), \
            pytest.raises(ValueError, match=r"or remove it; or v\.csv's first line \(0,1,2,3,4\) is a sample, taken as "
                                            r"column names: then add a header line naming its columns$"):
        load_view_files(tmp_path / "v.csv", y_path=tmp_path / "y.csv")


def test_numeric_header_not_evenly_spaced_is_named_when_the_rows_disagree(tmp_path, dataset):
    """A header of wavelengths 400,450,550,700 is read as a sample (its spacing is uneven); the views' or labels' row
    counts then differ by one, an error that blamed the other view (or the labels) only."""
    views, y = dataset
    with_header = tmp_path / "h.csv"
    with_header.write_text("400,450,550,700\n" + "".join(",".join(map(str, row[:4])) + "\n" for row in views[0]))
    np.save(tmp_path / "v.npy", views[1])
    np.save(tmp_path / "y.npy", y)
    hint = r"; h\.csv's first line \(400,450,550,700\) was read as a sample: if it names the columns, make the names " \
           r"non-numeric \(e\.g\. x400\) or remove it"
    for files in ([with_header, tmp_path / "v.npy"], [tmp_path / "v.npy", with_header]):
        with pytest.raises(ValueError, match=r"has \d+ rows, expected \d+ like view 0 .*" + hint):
            load_view_files(files)
    with pytest.raises(ValueError, match=rf"y\.npy: has {len(y)} entries, expected {len(y) + 1}, one per sample{hint}"):
        load_view_files(with_header, y_path=tmp_path / "y.npy")
    excel = tmp_path / "excel.csv"  # after Excel's sep=, line
    excel.write_text("sep=,\n" + with_header.read_text())
    with pytest.raises(ValueError, match=hint.replace("h\\.csv", "excel\\.csv")):
        load_view_files([excel, tmp_path / "v.npy"])
    (tmp_path / "c.csv").write_text("5,1,7,2\n" + "".join(",".join(map(str, row[:4])) + "\n" for row in views[0]))
    with pytest.raises(ValueError, match=r"like view 0 \('c'\) \(every view must describe the same samples; check "
                                         r"for transposed views\)$"):  # not increasing: no hint
        load_view_files([tmp_path / "c.csv", tmp_path / "v.npy"])


def test_label_minus_one_beside_ids_0_1_warns_it_is_a_class(tmp_path, dataset):
    """scikit-learn marks unlabelled samples -1: such labels used to count as a class without a word."""
    views, y = dataset
    np.save(tmp_path / "v.npy", views[0])
    np.save(tmp_path / "y.npy", y - 1)
    with pytest.warns(UserWarning, match=rf"y\.npy: label -1 \({np.sum(y == 0)} samples\) is read as a class of its "
                                         "own; scikit-learn marks unlabelled samples with -1"):
        np.testing.assert_array_equal(load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.npy")[1], y - 1)
    np.savez(tmp_path / "d.npz", view0=views[0], y=y - 1)
    with pytest.warns(UserWarning, match=r"d\.npz: y: label -1"):
        load(tmp_path / "d.npz")
    np.save(tmp_path / "y.npy", np.where(y % 2, 1, -1))  # -1 / +1: two classes, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_view_files(tmp_path / "v.npy", y_path=tmp_path / "y.npy")


def test_csv_read_errors_name_the_column_by_its_header_and_quote_the_value_whole(tmp_path):
    """numpy's error ended 'column 3.)' and lost the closing quote of a long value (a semicolon-separated line); the
    column is now named by its header too."""
    (tmp_path / "n.csv").write_text("length_m,temp_c,pressure_pa\n1,2,3\n4,5,\n")
    with pytest.raises(ValueError, match=r"n\.csv: not a numeric CSV file \(line 3: could not convert string '' to "
                                         r"float64, column 3 \('pressure_pa'\)\); it holds missing values"):
        load_view_files(tmp_path / "n.csv")
    (tmp_path / "s.csv").write_text("a;b\n" + ";".join(["-4.144423676928577e-06"] * 5) + "\n")
    with pytest.raises(ValueError, match=r"s\.csv: not a numeric CSV file \(line 2: could not convert string "
                                         r"'-4\.144423676928577e-06;[^']{34}\.\.\.' to float64, column 1 \('a;b'\)\); "
                                         r"fields must be separated by commas \(this file uses semicolons\)"):
        load_view_files(tmp_path / "s.csv")


@pytest.mark.parametrize("text, error", [
    ('a,b\n"-1,646.54",2\n3,4\n', r"line 2: .*column 1 \('a'\)\); it writes numbers with thousands separators "
                                     r"\('-1,646\.54'\): write them without$"),
    ("a,b,c\n1,2\n3,4,5\n", r"line 3: 3 fields where the lines before it have 2; every line needs as many fields as "
                             r"the others\)$"),
])
def test_csv_hints_for_thousands_separators_and_ragged_rows(tmp_path, text, error):
    """A quoted thousands separator in column 1 was said to be 'text, such as sample names'; ragged rows gave numpy's
    advice to 'use `usecols`'."""
    (tmp_path / "a.csv").write_text(text)
    with pytest.raises(ValueError, match=r"a\.csv: not a numeric CSV file \(" + error):
        load_view_files(tmp_path / "a.csv")


@pytest.mark.parametrize("value, kind", [("inf", "infinite"), ("nan", "missing")])
def test_csv_non_finite_values_are_named_by_file_line(tmp_path, value, kind):
    """They were named by 0-based row (e.g. 'in rows [2]' for line 5, after a header and a comment)."""
    (tmp_path / "a.csv").write_text(f"a,b\n\n# note\n1,2\n3,4\n5,{value}\n")
    with pytest.raises(ValueError, match=rf"a\.csv: holds {kind} values \(e\.g\. line 6, column 2: {value}\); every "
                                         "value must be a finite number"):
        load_view_files(tmp_path / "a.csv")


def test_csv_as_excel_numpy_and_wide_tables_write_it(tmp_path, dataset):
    """A first row with NA was taken as a header (the sample lost, every label shifted by one); Excel's `sep=,`
    line got 'its lines end with a comma', `sep=;` only 'semicolons'; np.savetxt's spaces got no hint; a header
    of 3000 numbers was quoted whole in the warning."""
    views, _ = dataset
    rows = "".join(",".join(map(str, row[:3])) + "\n" for row in views[0][1:])
    (tmp_path / "na.csv").write_text("0.5,NA,1.5\n" + rows)
    with pytest.raises(ValueError, match=r"na\.csv: not a numeric CSV file \(line 1: could not convert string 'NA'.*; "
                                         r"it holds missing values"):
        load_view_files(tmp_path / "na.csv")
    (tmp_path / "excel.csv").write_text("sep=,\na,b,c\n" + rows)
    np.testing.assert_array_equal(load_view_files(tmp_path / "excel.csv")[0][0], views[0][1:, :3])
    (tmp_path / "semi.csv").write_text("sep=;\na;b\n1,5;2\n")
    with pytest.raises(ValueError, match=r"semi\.csv: its first line 'sep=;' \(Excel's\) says fields are separated by "
                                         r"';'; CSV files are read comma-separated with decimal points"):
        load_view_files(tmp_path / "semi.csv")
    np.savetxt(tmp_path / "spaces.csv", views[0])
    with pytest.raises(ValueError, match=r"fields must be separated by commas \(this file uses spaces\)$"):
        load_view_files(tmp_path / "spaces.csv")
    (tmp_path / "mass.csv").write_text("Body mass\n1.5\n2.5\nNA\n3\n")  # a name with a space: no such hint
    with pytest.raises(ValueError, match=r"line 4: could not convert string 'NA'.*; it holds missing values"):
        load_view_files(tmp_path / "mass.csv")
    (tmp_path / "sodium.csv").write_text("Na\n1\n2\n3\n")  # a column name, though NA is a missing mark
    np.testing.assert_array_equal(load_view_files(tmp_path / "sodium.csv")[0][0], [[1], [2], [3]])
    (tmp_path / "y.csv").write_text("sep=,\r\nlabel\r\n" + "".join(["cat\r\n", "dog\r\n"] * 6))  # labels after sep=,
    np.save(tmp_path / "twelve.npy", views[0][:12])
    np.testing.assert_array_equal(load_view_files(tmp_path / "twelve.npy", y_path=tmp_path / "y.csv")[1],
                                  ["cat", "dog"] * 6)
    wide = np.arange(3 * 3000).reshape(3, 3000) % 7
    (tmp_path / "wide.csv").write_text("".join(",".join(map(str, row)) + "\n" for row in [range(3000), *wide]))
    with pytest.warns(UserWarning, match=r"wide\.csv: first row 0,1,2,.{50,80} \.\.\. taken as column names") as info:
        np.testing.assert_array_equal(load_view_files(tmp_path / "wide.csv")[0][0], wide)
    assert max(len(str(w.message)) for w in info) < 400


def test_class_names_differing_in_case_and_a_view_file_given_twice_are_said(tmp_path, dataset):
    """'Cat' and 'cat' became two classes (k one more) without a word; a view file given twice became two views
    without a word."""
    views, y = dataset
    np.save(tmp_path / "v.npy", views[0])
    (tmp_path / "y.csv").write_text("".join(f"{['Cat', 'cat ', 'dog'][c]}\n" for c in y))
    with pytest.warns(UserWarning) as info:
        got, labels = load_view_files([tmp_path / "v.npy", tmp_path / "." / "v.npy"], y_path=tmp_path / "y.csv")
    messages = [str(w.message) for w in info]
    assert any(m.endswith("v.npy: given twice as a view; each copy is a view of its own, weighted as such")
               for m in messages), messages
    assert any(m.endswith("y.csv: class names 'Cat' and 'cat' differ only in case: two classes")
               for m in messages), messages
    assert len(got) == 2 and np.array_equal(labels, np.array(["Cat", "cat", "dog"])[y])


def test_csv_read_errors_name_the_file(tmp_path):
    """A binary file named .csv (here a .npy), or a latin-1 CSV, used to raise UnicodeDecodeError naming no file."""
    np.savetxt(tmp_path / "a.csv", np.ones((3, 2)), delimiter=",")
    np.save(tmp_path / "y.npy", np.arange(3))
    (tmp_path / "y.csv").write_bytes((tmp_path / "y.npy").read_bytes())
    with pytest.raises(ValueError, match=r"y\.csv: not a UTF-8 text file.*byte 0x93"):
        load_view_files(tmp_path / "a.csv", y_path=tmp_path / "y.csv")
    (tmp_path / "latin.csv").write_bytes("caf\xe9,b\n1,2\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.csv: not a UTF-8 text file.*byte 0xe9"):
        load(tmp_path / "latin.csv")


def test_an_empty_line_between_rows_of_a_csv_is_an_error_naming_it(tmp_path, dataset):
    """numpy skipped it: a view then had a row fewer than the others ('has 1796 rows, expected 1797 ... check for
    transposed views'), and numeric labels an entry fewer, naming no line (found by a new-user helper). Empty lines
    before the data or at the end, and comments between rows, are still skipped."""
    views, y = dataset
    rows = ["".join(",".join(map(str, row[:3])) + "\n") for row in views[0]]
    (tmp_path / "v.csv").write_text("a,b,c\n\n" + "".join(rows[:3]) + "# note\n" + "".join(rows[3:]) + "\n\n")
    got, labels = load_view_files(tmp_path / "v.csv")
    np.testing.assert_array_equal(got[0], views[0][:, :3])
    (tmp_path / "gap.csv").write_text("a,b,c\n" + "".join(rows[:10]) + "\n\n" + "".join(rows[10:]))
    with pytest.raises(ValueError, match=r"^.*gap\.csv: line 12 is empty, between rows of data \(2 such lines\): each "
                                         r"line is one sample's, so one sample has nothing there; remove the line if "
                                         r"it is not a sample$"):
        load_view_files([tmp_path / "v.csv", tmp_path / "gap.csv"])
    labels = [f"{c}\n" for c in y]
    (tmp_path / "y.csv").write_text("".join(labels[:9]) + "\n" + "".join(labels[9:]))
    with pytest.raises(ValueError, match=r"y\.csv: line 10 is empty, between rows of data \(1 such line\)"):
        load_view_files(tmp_path / "v.csv", y_path=tmp_path / "y.csv")
    names = [f"class{c}\n" for c in y]  # class names under a header: it was "first column holds text" (a review)
    (tmp_path / "names.csv").write_text("label\n" + "".join(names[:5]) + "\n" + "".join(names[5:]))
    with pytest.raises(ValueError, match=r"names\.csv: line 7 is empty, between labels \(1 such line\): each line is "
                                         r"one sample's label; remove the line if it is not a sample$"):
        load_view_files(tmp_path / "v.csv", y_path=tmp_path / "names.csv")


def test_empty_and_header_only_csv_files_are_named(tmp_path):
    """They used to print numpy's 'loadtxt: input contained no data: "<generator object …>"' warning, then fail as
    'view 1: has shape (0, 1)' (also for a header of 3 columns)."""
    np.savetxt(tmp_path / "a.csv", np.ones((3, 2)), delimiter=",")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text("x,y,z\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^.*empty\.csv: holds no data rows$"):
            load_view_files([tmp_path / "a.csv", tmp_path / "empty.csv"])
        with pytest.raises(ValueError, match=r"header\.csv: holds no data rows \(only a header row\)$"):
            load_view_files([tmp_path / "a.csv", tmp_path / "header.csv"])


@pytest.mark.parametrize("labels, error", [
    ("a,1\nb,2\na,1\n", r"y\.csv: not a numeric CSV file \(line 2: .*\); labels are one column of class ids or "
                         r"names, one per sample"),
    ("label\na\n", r"y\.csv: not a numeric CSV file \(line 2: .*\); labels are one column of class ids or names, "
                    r"one per sample"),  # 1 name for 3 samples
    ("0\nnan\n1\n", r"y\.csv: holds missing values \(e\.g\. line 2, column 1: nan\); every value must be a finite "
                   r"number"),
    ("0,1\n1,0\n2,2\n", r"y\.csv: has shape \(3, 2\), expected a vector \(labels are one column of class ids or "
                        r"names, one per sample\)"),
    ("0\n1.5\n1\n", r"y\.csv: holds non-integer values \(e\.g\. 1\.5 at line 2\); labels are integer class ids"),
    ("label\n\n0\n1\n2.5\n", r"y\.csv: holds non-integer values \(e\.g\. 2\.5 at line 5\)"),  # was "in row 2"
])
def test_label_file_errors_say_what_labels_must_be(tmp_path, labels, error):
    """Text that is not one class name per sample used to give only 'not a numeric CSV file', NaN labels 'holds
    non-integer values'."""
    np.savetxt(tmp_path / "a.csv", np.ones((3, 2)), delimiter=",")
    (tmp_path / "y.csv").write_text(labels)
    with pytest.raises(ValueError, match=error):
        load_view_files(tmp_path / "a.csv", y_path=tmp_path / "y.csv")
    (tmp_path / "y.csv").write_text("0,1\n1\n2,0\n")  # ragged: no word for the hint to be about
    with pytest.raises(ValueError, match=r"y\.csv: not a numeric CSV file") as ragged:
        load_view_files(tmp_path / "a.csv", y_path=tmp_path / "y.csv")
    assert "class ids" not in str(ragged.value)


@pytest.mark.parametrize("header", ["", "species\n"])
def test_class_names_are_labels_kept_by_name(tmp_path, header):
    """A labels file of class names (.csv, with a header line or not; .npy of text) was an error asking the user to
    encode them, then labels 0..C-1 whose names only a warning gave (the report's figures showed the ids): they are
    read as the names, which a store keeps beside their ids (0..C-1 in sorted order)."""
    np.savetxt(tmp_path / "a.csv", np.arange(8.0).reshape(4, 2), delimiter=",")
    (tmp_path / "y.csv").write_text(header + "dog\ncat\n\"emu, large\"\n cat\n")
    np.save(tmp_path / "y.npy", np.array(["dog", "cat", "emu, large", "cat "]))
    for path in (tmp_path / "y.csv", tmp_path / "y.npy"):
        views, y = load_view_files(tmp_path / "a.csv", y_path=path)
        assert y.tolist() == ["dog", "cat", "emu, large", "cat"]
        store = MultiViewStore.create(tmp_path / "s.zarr", views, y, overwrite=True)
        assert store.labels.tolist() == [1, 0, 2, 0] and store.class_names == ["cat", "dog", "emu, large"]
        assert load(tmp_path / "s.zarr")[1].tolist() == y.tolist()
        assert MultiViewStore(store.copy(tmp_path / "c.zarr", overwrite=True).path).class_names == store.class_names


# -------------------------------------------------------------------- dispatch


def test_load_dispatches_by_extension(tmp_path, dataset):
    views, y = dataset
    _assert_views_equal(load(_save_v5(tmp_path / "d.mat", views, y))[0], views)
    np.savez(tmp_path / "d.npz", view0=views[0], y=y)
    _assert_views_equal(load(tmp_path / "d.npz")[0], views[:1])
    np.savetxt(tmp_path / "d.csv", views[0], delimiter=",")
    _assert_views_equal(load(tmp_path / "d.csv")[0], views[:1])
    np.save(tmp_path / "d.npy", views[0])
    assert load(tmp_path / "d.npy")[1] is None
    _assert_views_equal(load(tmp_path / "d.npy")[0], views[:1])
    MultiViewStore.create(tmp_path / "d.zarr", views, y)
    got, labels = load(tmp_path / "d.zarr")
    _assert_views_equal(got, views)
    np.testing.assert_array_equal(labels, y)
    (tmp_path / "d.txt").write_text("1\n")
    with pytest.raises(ValueError, match="unsupported format '.txt'"):
        load(tmp_path / "d.txt")


# ------------------------------------------------------- real benchmark data


_SHARED_MATS = shared_mats()
_NO_SHARED = pytest.mark.skip(reason="benchmark data not available: no .mat files in ../shared/data")


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=p.name) for p in _SHARED_MATS] or [pytest.param(None, marks=_NO_SHARED)],
)
def test_shared_benchmark_mat_views_have_one_row_per_label(path):
    views, y = load_mat(path)
    assert y is not None and len(views) >= 2
    for view in views:
        assert view.shape[0] == len(y)


def test_shared_mnist_t10k():
    images, labels = load_mnist_dir(shared_path("mnist-t10k"), "test")
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert set(np.unique(labels)) == set(range(10))


def test_mat_sparse_labels_are_read(tmp_path):
    """A label vector MATLAB saved sparse was refused as 'has dtype object'."""
    X = np.empty((1, 2), dtype=object)
    X[0, 0], X[0, 1] = np.random.default_rng(0).random((30, 4)), np.random.default_rng(1).random((30, 3))
    y = np.repeat([0, 1, 2], 10)
    scipy.io.savemat(tmp_path / "s.mat", {"X": X, "y": sp.csr_matrix(y[:, None].astype(float))})
    np.testing.assert_array_equal(load_mat(tmp_path / "s.mat")[1], y)


def test_load_view_files_npy_views_and_labels(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(12, 3)).astype(np.float32), rng.integers(0, 5, size=(12, 4))
    y = np.repeat([3, 7, 9], 4)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "y.npy", y)
    np.savetxt(tmp_path / "y.csv", y, fmt="%d")
    views, labels = load_view_files([tmp_path / "a.npy", tmp_path / "b.npy"], tmp_path / "y.npy")
    assert [v.dtype for v in views] == [np.float64, np.float64] and all(v.flags.c_contiguous for v in views)
    np.testing.assert_array_equal(views[0], a.astype(np.float64))
    np.testing.assert_array_equal(views[1], b)
    np.testing.assert_array_equal(labels, y)
    np.testing.assert_array_equal(load_view_files([tmp_path / "a.npy"], tmp_path / "y.csv")[1], y)


def test_load_view_files_npy_errors_name_the_file(tmp_path):
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    (tmp_path / "broken.npy").write_bytes(b"\x93NUMPY not really")
    np.save(tmp_path / "vector.npy", np.arange(5.0))
    np.save(tmp_path / "short.npy", np.ones((4, 2)))
    np.save(tmp_path / "ok.npy", np.ones((5, 2)))
    np.save(tmp_path / "words.npy", np.array([["a", "b"]] * 5))
    (tmp_path / "y.txt").write_text("1\n")
    np.savetxt(tmp_path / "text.npy", np.ones((5, 2)))
    np.savez(tmp_path / "archive.npy.npz", view0=np.ones((5, 2)))
    (tmp_path / "archive.npy.npz").rename(tmp_path / "archive.npy")
    for paths, y_path, message in (
        (["objects.npy"], None, "objects.npy: holds pickled data"),
        (["broken.npy"], None, "broken.npy: corrupt or not a .npy file"),
        (["text.npy"], None, "text.npy: not a .npy file (no .npy header: it starts with b'1.0000')"),
        (["archive.npy"], None, "archive.npy: not a .npy file (no .npy header: a zip archive, as .npz files are)"),
        (["vector.npy"], None, "vector.npy: view 0: has shape (5,), expected a non-empty 2-D matrix"),
        (["ok.npy", "short.npy"], None, "view 1 ('short'): has 4 rows, expected 5 like view 0 ('ok') (every view must "
                                        "describe the same samples; check for transposed views)"),
        (["words.npy"], None, "words.npy: view 0: is not a numeric matrix"),
        (["ok.npy"], "y.txt", "y.txt: unsupported format '.txt' for a view or labels file"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            load_view_files([tmp_path / p for p in paths], None if y_path is None else tmp_path / y_path)
    with pytest.raises(FileNotFoundError):
        load_view_files([tmp_path / "missing.npy"])


@pytest.mark.parametrize("tail", [b"\0" * 64, bytes(range(256)), b"\x0e\0\0\0\xff\xff\0\0"],
                         ids=["zeros", "bytes", "tag"])
def test_mat_with_bytes_after_its_last_variable_is_read(tmp_path, dataset, tail):
    """Bytes that are not a variable after the views and labels (as in some public sets): scipy reads each variable
    when asked for it, but asked for every candidate name it reads on into them, and the file used to be refused
    as corrupt. Without labels before those bytes the file stays refused: the labels may lie in them."""
    views, y = dataset
    cell = np.empty((1, 3), dtype=object)
    cell[0, :] = views
    scipy.io.savemat(tmp_path / "d.mat", {"X": cell, "Y": y[:, None]})
    (tmp_path / "e.mat").write_bytes((tmp_path / "d.mat").read_bytes() + tail)
    got, labels = load_mat(tmp_path / "e.mat")
    _assert_views_equal(got, views)
    np.testing.assert_array_equal(labels, y)
    scipy.io.savemat(tmp_path / "u.mat", {"X": cell})
    (tmp_path / "u.mat").write_bytes((tmp_path / "u.mat").read_bytes() + tail)
    with pytest.raises(ValueError, match="u.mat: corrupt, truncated or not a multi-view .mat file"):
        load_mat(tmp_path / "u.mat")


def test_csv_header_of_consecutive_integers_is_not_a_sample(tmp_path):
    """A header of years 2000, 2001, ... used to be read as a sample (N + 1 rows). The rule: consecutive integers
    in the first row, at least 3 of them, and a second row that is not."""
    X = np.random.default_rng(0).normal(size=(5, 4))
    np.savetxt(tmp_path / "y.csv", X, delimiter=",", header="2000,2001,2002,2003", comments="")
    with pytest.warns(UserWarning, match=r"y\.csv: first row 2000,2001,2002,2003 taken as column names "
                                         r"\(evenly spaced increasing numbers, as pandas writes numeric column names"):
        got, _ = load_view_files(tmp_path / "y.csv")
    np.testing.assert_allclose(got[0], X)
    counts = np.array([[3, 4, 5, 6], [7, 8, 9, 10], [1, 0, 2, 5]])  # rows of counting data: every row is a sample
    np.savetxt(tmp_path / "c.csv", counts, delimiter=",", fmt="%d")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(load_view_files(tmp_path / "c.csv")[0][0], counts)
    (tmp_path / "e.csv").write_text("2000,2001,2002\n1,,2\n")
    with pytest.warns(UserWarning), pytest.raises(ValueError, match=r"e\.csv: not a numeric CSV file \(line 2:"):
        load_view_files(tmp_path / "e.csv")


def _blob_views(n=60, seed=0):
    """A 5-feature view and a square (n x n) view of the same 3 blobs, and their labels."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    return [rng.normal(size=(3, d))[y] * 4 + rng.normal(size=(n, d)) for d in (5, n)], y


@pytest.mark.parametrize("sparse", [False, True])
def test_square_view_stored_transposed_is_turned_by_the_other_views(tmp_path, sparse):
    """A square view stored d x n next to an n x 5 view, in a labelled .mat: its shape cannot tell, so the
    orientation whose sample distances agree with view 0's is taken, with a warning (it used to be used as stored:
    ACC 0.75 -> 0.19 on the issue's data). Stored the right way, it is kept, silently."""
    (V0, V1), y = _blob_views()
    square = sp.csr_matrix(V1) if sparse else V1
    for stored, warns in ((square.T, True), (square, False)):
        cell = np.empty((1, 2), dtype=object)
        cell[0, :] = [V0, stored]
        scipy.io.savemat(tmp_path / "s.mat", {"X": cell, "y": y})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            views, _ = load_mat(tmp_path / "s.mat")
        np.testing.assert_allclose(_dense(views[1]), V1)
        messages = [str(w.message) for w in caught]
        assert [m for m in messages if "view 1 is square (60 x 60): its columns agree" in m] == ([messages[0]] if warns
                                                                                               else [])


def test_square_view_whose_orientation_cannot_be_told_warns(tmp_path):
    """A square view of noise (nothing to agree with), or square views only: kept as stored, with a warning that
    says how to tell; a symmetric one (both orientations the same) silently."""
    (V0, _), y = _blob_views()
    noise = np.random.default_rng(1).normal(size=(60, 60))
    np.savez(tmp_path / "n.npz", view0=V0, view1=noise, y=y)
    with pytest.warns(UserWarning, match=r"view 1 is square \(60 x 60\): neither its rows nor its columns agree "
                                         r"clearly .*\(transpose it if its columns are\)"):
        np.testing.assert_array_equal(load_npz(tmp_path / "n.npz")[0][1], noise)
    np.savez(tmp_path / "o.npz", view0=noise, y=y)
    with pytest.warns(UserWarning, match=r"view 0 is square \(60 x 60\) and no other view has a different shape"):
        load_npz(tmp_path / "o.npz")
    np.savez(tmp_path / "k.npz", view0=V0, view1=noise + noise.T, y=y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_npz(tmp_path / "k.npz")


def test_scipy_sparse_npz_is_one_view(tmp_path):
    """load and load_view_files read a scipy.sparse.save_npz file as one sparse view; as a view file, an .npz of
    several arrays is named as such (also one that holds arrays named format and shape), a damaged one as damaged,
    complex values are refused, and labels do not come from an .npz."""
    X = sp.random(20, 7, density=0.3, random_state=0, format="csr")
    sp.save_npz(tmp_path / "words.npz", X)
    views, y = load(tmp_path / "words.npz")
    assert y is None and len(views) == 1 and sp.issparse(views[0]) and (views[0] != X).nnz == 0
    sp.save_npz(tmp_path / "coo.npz", X.tocoo())
    views, _ = load_view_files([tmp_path / "words.npz", tmp_path / "coo.npz"], names=["a", "b"])
    assert len(views) == 2 and all(sp.issparse(v) and (v != X).nnz == 0 for v in views)
    np.savez(tmp_path / "multi.npz", view0=np.ones((20, 2)), format=np.array("csr"), shape=np.array([20, 2]))
    (tmp_path / "damaged.npz").write_bytes((tmp_path / "words.npz").read_bytes()[:100])
    sp.save_npz(tmp_path / "complex.npz", X * 1j)
    np.save(tmp_path / "y.npy", np.arange(20) % 2)
    for paths, y_path, message in [
            (["multi.npz"], None, r"multi\.npz: an \.npz of several arrays \(np\.savez\), not one scipy\.sparse"),
            (["damaged.npz"], None, r"damaged\.npz: corrupt or not a scipy\.sparse \.npz matrix"),
            (["complex.npz"], None, r"complex\.npz: view 0: is not a numeric matrix \(got complex128\)"),
            (["words.npz"], "coo.npz", r"coo\.npz: labels go in a \.npy or \.csv file")]:
        with pytest.raises(ValueError, match=message):
            load_view_files([tmp_path / p for p in paths], None if y_path is None else tmp_path / y_path)
    with pytest.raises(FileNotFoundError):
        load_view_files([tmp_path / "gone.npz"])
    views, _ = load(tmp_path / "multi.npz")  # as --data alone: its view0
    assert len(views) == 1 and views[0].shape == (20, 2)


def test_csv_numeric_headers_a_named_index_and_read_errors(tmp_path, dataset):
    """A new user's CSV files: evenly spaced numeric column names (wavelengths 400, 410, ..., or 0.0, 1.5, ...) are a
    header (they used to be read as sample 0, shifting every label by one); increasing but uneven ones stay a sample,
    with a warning; pandas' named index column (``id,0,1,...``) is dropped with a warning (it was read as a feature);
    semicolons and missing values are named in the error."""
    X = np.random.default_rng(0).normal(size=(6, 4))
    for names in ([400, 410, 420, 430], [0.0, 1.5, 3.0, 4.5]):
        _pandas_csv(tmp_path / "w.csv", X, index=False, columns=names)
        with pytest.warns(UserWarning, match=r"w\.csv: first row .* taken as column names"):
            np.testing.assert_allclose(load_view_files(tmp_path / "w.csv")[0][0], X)
    uneven = [400, 415.5, 433, 460, 471, 480, 502, 530]
    _pandas_csv(tmp_path / "u.csv", np.hstack([X, X]), index=False, columns=uneven)
    with pytest.warns(UserWarning, match=r"u\.csv: first row 400,415.5,433,.* read as a sample, though"):
        assert load_view_files(tmp_path / "u.csv")[0][0].shape == (7, 8)
    _pandas_csv(tmp_path / "few.csv", X, index=False, columns=uneven[:4])  # 1 sample in 4! increases by chance
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_view_files(tmp_path / "few.csv")[0][0].shape == (7, 4)
    years = [2019, 2020, 2021, 2023, 2024]
    _pandas_csv(tmp_path / "years.csv", np.hstack([X, X[:, :1]]), index=False, columns=years)  # integers over reals
    with pytest.warns(UserWarning, match=r"years\.csv: first row 2019,2020,2021,2023,2024 read as a sample, though"):
        assert load_view_files(tmp_path / "years.csv")[0][0].shape == (7, 5)
    for name, rows, names in [("counts.csv", np.arange(30).reshape(6, 5) * 5 % 7, [1, 3, 7, 8, 9]),  # over integers
                              ("three.csv", X[:, :3], [1, 3, 4])]:  # 3 columns: 1 sample in 3! increases by chance
        _pandas_csv(tmp_path / name, rows, index=False, columns=names)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert load_view_files(tmp_path / name)[0][0].shape == (7, len(names))
    text = _pandas_csv(tmp_path / "i.csv", X).read_text().replace(",0,1,2,3\n", "id,0,1,2,3\n", 1)
    (tmp_path / "i.csv").write_text(text)
    with pytest.warns(UserWarning, match=r"i\.csv: first column 'id' taken as pandas' index"):
        np.testing.assert_allclose(load_view_files(tmp_path / "i.csv")[0][0], X)
    (tmp_path / "s.csv").write_text("1;2;3\n4;5;6\n")
    with pytest.raises(ValueError, match=r"s\.csv: not a numeric CSV file .*; fields must be separated by commas "
                                         r"\(this file uses semicolons\)"):
        load_view_files(tmp_path / "s.csv")
    (tmp_path / "na.csv").write_text("1,5,2\n4,NA,6\n")
    with pytest.raises(ValueError, match=r"na\.csv: not a numeric CSV file \(line 2: .*'NA'.*\); it holds missing "
                                         r"values: impute them or drop their rows first"):
        load_view_files(tmp_path / "na.csv")
    (tmp_path / "trail.csv").write_text("1,5,2,\n4,3,6,\n")
    with pytest.raises(ValueError, match=r"trail\.csv: .*; its lines end with a comma \(an empty last field\)$"):
        load_view_files(tmp_path / "trail.csv")
    _pandas_csv(tmp_path / "ui.csv", X, columns=[400, 415.5, 433, 460])  # index and uneven numeric names
    with pytest.raises(ValueError, match=r"ui\.csv: not a numeric CSV file \(line 1: .*\); a first line with an "
                                         r"empty first field is read as pandas' header"):
        load_view_files(tmp_path / "ui.csv")
    (tmp_path / "two.csv").write_text("id,0,1\n1,2\n3,4\n")  # a header over two columns: no index to drop
    np.testing.assert_array_equal(load_view_files(tmp_path / "two.csv")[0][0], [[1, 2], [3, 4]])
    (tmp_path / "steps.csv").write_text("0,1,2\n1,3,5\n2,2,7\n")  # a sample spaced unlike pandas' names
    with pytest.warns(UserWarning, match=r"steps\.csv: first row 0,1,2 taken as column names"):
        np.testing.assert_array_equal(load_view_files(tmp_path / "steps.csv")[0][0], [[1, 3, 5], [2, 2, 7]])
    with warnings.catch_warnings():  # pandas' own index under an empty name: dropped without a word
        warnings.simplefilter("error")
        np.testing.assert_allclose(load_view_files(_pandas_csv(tmp_path / "p.csv", X))[0][0], X)


def test_a_sparse_first_view_goes_with_a_labels_file(tmp_path, dataset):
    """--data counts.npz --labels y.npy ended in "TypeError: sparse array length is ambiguous"."""
    views, y = dataset
    counts = sp.csr_matrix(np.random.default_rng(0).poisson(0.3, size=(len(y), 20)).astype(float))
    sp.save_npz(tmp_path / "counts.npz", counts)
    np.save(tmp_path / "y.npy", y)
    got, labels = load_view_files([tmp_path / "counts.npz"], y_path=tmp_path / "y.npy")
    assert (got[0] != counts).nnz == 0
    np.testing.assert_array_equal(labels, y)


def test_new_users_csv_and_label_files_are_read_as_written_or_refused(tmp_path):
    """Files a trial wrote with pandas and editors, each once read silently wrong (a review): a missing label (an
    empty field, "NA") became a class of its own and k one more; a blank line in class names with a header shifted
    every label before it by one; a BOM made a class of its own; a one-column view with decimal commas became two
    columns; pandas' header 0,1 over two columns a sample; an index column named "id" or without a header a feature;
    a shuffled index dropped without a word; a csr_array saved with save_npz was "an .npz of several arrays"."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n, X = 30, rng.normal(size=(30, 3))
    names = np.array(["cat", "dog", "emu"])[np.arange(n) % 3]
    a = _pandas_csv(tmp_path / "a.csv", X, index=False, columns=["x", "y", "z"])

    def labels(y):
        return load_view_files(a, y_path=tmp_path / "y.csv")[1]

    for series, line, said in ((pd.Series(np.arange(n) % 3, name="label", dtype=float), 7, "empty"),
                               (pd.Series(names, name="label", dtype=object), 7, "empty")):
        series[5] = np.nan
        series.to_csv(tmp_path / "y.csv", index=False)
        with pytest.raises(ValueError, match=rf"y\.csv: holds missing labels \(e\.g\. on line {line}, {said}\); every "
                                             "sample needs a label"):
            labels(None)
    (tmp_path / "y.csv").write_text("".join(f"{v}\n" for v in ["label", *(np.arange(n) % 3)[:4], "NA",
                                                                 *(np.arange(n) % 3)[5:]]))
    with pytest.raises(ValueError, match=r"y\.csv: holds missing labels \(e\.g\. on line 6: 'NA'\)"):
        labels(None)
    (tmp_path / "y.csv").write_text("label\n" + "".join(f"{v}\n" for v in names[:14]) + "\n"
                                    + "".join(f"{v}\n" for v in names[15:]))
    with pytest.raises(ValueError, match=r"y\.csv: holds missing labels \(e\.g\. on line 16, empty\)"):
        labels(None)
    (tmp_path / "y.csv").write_text("".join(f"{v}\n" for v in names), encoding="utf-8-sig")
    assert labels(None).tolist() == names.tolist()
    (tmp_path / "y.csv").write_text('"species"\n' + "".join("NA\n" if i == 4 else f'"{v}"\n' for i, v in enumerate(names)))
    with pytest.raises(ValueError, match=r"y\.csv: holds missing labels \(e\.g\. on line 6: 'NA'\)"):
        labels(None)  # R's write.csv of a factor with a missing value (NA was a class of its own: a review)
    for mark in ("?", "-", "na", "none"):  # among ids, missing in any case (a class of its own; ids read as names)
        (tmp_path / "y.csv").write_text("".join(f"{mark if i == 3 else v}\n" for i, v in enumerate(np.arange(n) % 3)))
        with pytest.raises(ValueError, match=rf"holds missing labels \(e\.g\. on line 4: '{re.escape(mark)}'\)"):
            labels(None)
    classes = np.array(["none", "mild", "severe"])[np.arange(n) % 3]  # names that only look like missing marks
    (tmp_path / "y.csv").write_text("".join(f"{v}\n" for v in classes))
    assert labels(None).tolist() == classes.tolist()
    (tmp_path / "y.csv").write_text("label\n" + "".join(f"{v}\n" for v in np.arange(n) % 12) + " \n")
    with warnings.catch_warnings():  # ids under a header, a line of spaces last: ids, not names in string order
        warnings.simplefilter("error")
        assert labels(None).tolist() == (np.arange(n) % 12).tolist()
    pd.Series(names, name="species").to_csv(tmp_path / "y.csv")  # with pandas' index: it was refused
    assert labels(None).tolist() == names.tolist()

    pd.DataFrame(X[:, :1], columns=["g0"]).to_csv(tmp_path / "euro.csv", index=False, sep=";", decimal=",")
    with pytest.raises(ValueError, match=r"euro\.csv: its header names 1 columns and its rows hold 2: an unnamed first "
                                         r"column \(R's row names: .*\), decimals written with a comma, or fields"):
        load_view_files(tmp_path / "euro.csv")
    (tmp_path / "ie.csv").write_text(",x\n" + "".join(f"{i},{i},{i * 3}\n" for i in range(5)))  # index, decimal commas
    with pytest.raises(ValueError, match=r"ie\.csv: its header names 1 columns and its rows hold 2 besides the index"):
        load_view_files(tmp_path / "ie.csv")
    (tmp_path / "dc.csv").write_text("value\n" + "".join(f"{i},{(i * 37) % 100:02d}\n" for i in range(12)))
    with pytest.raises(ValueError, match=r"dc\.csv: its header names 1 columns"):  # integer parts 0..11: no row numbers
        load_view_files(tmp_path / "dc.csv")
    (tmp_path / "r.csv").write_text("x,y,z\n" + "".join(f"{i + 1},{a},{b},{c}\n" for i, (a, b, c) in enumerate(X[:5])))
    with pytest.warns(UserWarning, match=r"r\.csv: its first column, not named in the header, holds the row numbers "
                                         r"1\.\.5"):  # R's write.table(sep=","): row names 1..n under no header name
        np.testing.assert_allclose(load_view_files(tmp_path / "r.csv")[0][0], X[:5])
    pd.DataFrame(X[:, :2]).to_csv(tmp_path / "two.csv", index=False)
    with pytest.warns(UserWarning, match=r"two\.csv: first row 0,1 taken as column names"):
        np.testing.assert_allclose(load_view_files(tmp_path / "two.csv")[0][0], X[:, :2])
    pd.DataFrame(X, columns=["g0", "g1", "g2"]).rename_axis("id").to_csv(tmp_path / "id.csv")
    pd.DataFrame(X).to_csv(tmp_path / "bare.csv", header=False)
    for path in (tmp_path / "id.csv", tmp_path / "bare.csv"):
        with pytest.warns(UserWarning, match=rf"{path.name}: its first column holds the row numbers 0\.\.29, taken as "
                                             "an index"):
            np.testing.assert_allclose(load_view_files(path)[0][0], X)
    pd.DataFrame(X).sample(frac=1, random_state=0).to_csv(tmp_path / "shuffled.csv")
    with pytest.warns(UserWarning, match=r"shuffled\.csv: its index column is not in increasing order"):
        load_view_files(tmp_path / "shuffled.csv")
    pd.DataFrame({"sample": np.arange(n), "cluster": np.arange(n) % 3}).to_csv(tmp_path / "y.csv", index=False)
    with pytest.warns(UserWarning, match="row numbers"):  # a run's own labels.csv
        assert labels(None).tolist() == (np.arange(n) % 3).tolist()
    with warnings.catch_warnings():  # data whose first column only starts like row numbers: no index
        warnings.simplefilter("error")
        np.testing.assert_array_equal(load_view_files(_pandas_csv(tmp_path / "c.csv", np.c_[np.arange(n) ** 2, X],
                                                                  index=False, columns=["sq", "x", "y", "z"]))[0][0],
                                      np.c_[np.arange(n) ** 2, X])

    pd.DataFrame(X, columns=["x", "y", "z"]).to_csv(tmp_path / "quoted.csv", index=False, quoting=1)  # QUOTE_ALL
    np.testing.assert_allclose(load_view_files(tmp_path / "quoted.csv")[0][0], X)
    pd.DataFrame(X, index=[f"s{i:03d}" for i in range(n)]).to_csv(tmp_path / "named.csv")
    with pytest.raises(ValueError, match=r"named\.csv: not a numeric CSV file \(line 2: .*'s000'.*\); its first column "
                                         r"holds text, such as sample names: remove it"):
        load_view_files(tmp_path / "named.csv")
    pd.DataFrame(X.T, index=["length", "mass", "age"]).to_csv(tmp_path / "transposed.csv")  # features as rows
    with pytest.raises(ValueError, match=r"transposed\.csv: .*'length'.*; its first column holds text, such as sample "
                                         r"names: remove it \(rows are matched by position\); if it names features, the "
                                         r"table is transposed: rows must be samples \(df\.T\)$"):
        load_view_files(tmp_path / "transposed.csv")
    pd.DataFrame({"id": [f"s{i}" for i in range(n)], "label": np.arange(n) % 2}).to_csv(tmp_path / "y.csv", index=False)
    with pytest.raises(ValueError, match=r"y\.csv: .*'s0'.*; its first column holds text, such as sample names: remove "
                                         r"it \(rows are matched by position\); labels are one column") as info:
        load_view_files(tmp_path / "quoted.csv", tmp_path / "y.csv")
    assert "transposed" not in str(info.value)  # labels are no table of features (found by a review)
    sp.save_npz(tmp_path / "arr.npz", sp.csr_array(np.where(X > 0, X, 0)))
    np.testing.assert_allclose(load_view_files(tmp_path / "arr.npz")[0][0].toarray(), np.where(X > 0, X, 0))


def test_class_names_in_mat_and_npz_files_are_labels(tmp_path, dataset):
    """Labels stored as text, a MATLAB cell of strings or char matrix (v5 or v7.3) or an .npz string array, were
    "has dtype object, expected integers (encode them with np.unique …)", while --labels files take class names (a
    trial): they are class names, as there; an empty name is a missing label."""
    views, y = dataset
    views = [v.toarray() if sp.issparse(v) else v for v in views]  # np.savez would pickle a sparse matrix
    names = np.array(["cat", "dog", "emu"])[y]  # y: 0, 1, 2
    cellstr = np.empty((len(y), 1), dtype=object)
    cellstr[:, 0] = list(names)
    v5 = [tmp_path / "c.mat", tmp_path / "ch.mat"]
    for path, labels in zip(v5, (cellstr, names)):
        scipy.io.savemat(path, {"X": _cell(views, (1, len(views))), "y": labels})
    np.savez(tmp_path / "s.npz", **{f"view{p}": v for p, v in enumerate(views)}, y=names)
    char, cell = (_save_v73(tmp_path / f"{kind}73.mat", views, y) for kind in ("char", "cell"))
    width = max(map(len, names))
    codes = np.array([[ord(c) for c in name.ljust(width)] for name in names], dtype=np.uint16)  # MATLAB pads rows
    with h5py.File(char, "r+") as f:
        del f["y"]
        f.create_dataset("y", data=codes.T).attrs["MATLAB_class"] = np.bytes_("char")
    with h5py.File(cell, "r+") as f:
        del f["y"]
        refs = np.empty((len(names), 1), dtype=h5py.ref_dtype)
        for i, name in enumerate(names):
            item = f["#refs#"].create_dataset(f"y{i}", data=np.array([[ord(c)] for c in name], dtype=np.uint16))
            item.attrs["MATLAB_class"] = np.bytes_("char")
            refs[i, 0] = item.ref
        f.create_dataset("y", data=refs).attrs["MATLAB_class"] = np.bytes_("cell")
    for path in (*v5, tmp_path / "s.npz", char, cell):
        got, labels = load(path)
        np.testing.assert_array_equal(labels, names)
        _assert_views_equal(got, views)
    names[3] = ""
    np.savez(tmp_path / "e.npz", **{f"view{p}": v for p, v in enumerate(views)}, y=names)
    with pytest.raises(ValueError, match=r"e\.npz: y: holds missing labels \(an empty class name, e\.g\. in row 3\)"):
        load(tmp_path / "e.npz")
