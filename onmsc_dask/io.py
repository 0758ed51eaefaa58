"""Readers for multi-view data sets: MATLAB .mat (v5 and v7.3), MNIST IDX, .npz, .npy, CSV and stores.

Every loader returns ``(views, y)``: a list of n×d_p views (dense float64 C-contiguous arrays
or float64 CSR matrices; a store's views keep their float32/float64 dtype) and 1-D int64
labels, or None when the source has none.
"""

from __future__ import annotations

import gzip
import itertools
import math
import os
import re
import subprocess
import sys
import warnings
import zipfile
import zlib
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import h5py
import numpy as np
import scipy.io
import scipy.sparse as sp

from .store import MultiViewStore, as_labels, encode_labels
from .validation import check_same_rows, user_warning, view_label

__all__ = ["load", "load_mat", "read_idx", "load_mnist_dir", "load_npz", "load_view_files"]

View = np.ndarray | sp.csr_matrix
PathLike = str | os.PathLike

_VIEW_KEYS = ("X", "data", "fea", "views")
_LABEL_KEYS = ("y", "Y", "gt", "gnd", "truth", "labels")
_MATLAB_NUMERIC = {
    "double", "single", "logical",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
}  # fmt: skip
_IDX_DTYPES = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_MNIST_FILE = re.compile(r"^(train|t10k)-(images|labels)[.-]idx\d-ubyte(\.gz)?$")
_SPLITS = {"train": "train", "t10k": "t10k", "test": "t10k"}


def is_store(path: PathLike) -> bool:
    """Whether `path` is a Zarr directory (read as a MultiViewStore)."""
    path = Path(path)
    return path.is_dir() and (path.suffix == ".zarr" or (path / "zarr.json").exists())


def load(path: PathLike) -> tuple[list[View], np.ndarray | None]:
    """Load views and labels from a .mat, .npz, .npy or .csv file, a MultiViewStore or an MNIST directory.

    An .npz holds views view0, view1, ... (or X0 / X_0 ..., or arr_0, arr_1, ... as ``np.savez(f, X0, X1)``
    names them), or views by name (``np.savez(f, colour=A, texture=B)``), and optional labels y; see
    :func:`load_npz`. A .csv or .npy is one view, without labels; see
    :func:`load_view_files` for several.
    An MNIST directory gives one view of flattened float64 images (the train split when
    present, else t10k). Labels are int64 class ids, or strings where the file (or store) holds class names.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        if is_store(path):
            store = MultiViewStore(path)
            return [store.read_view(p) for p in range(store.n_views)], store.given_labels
        splits = mnist_splits(path)
        if not splits:
            raise ValueError(
                f"{path}: directory is neither a .zarr store nor holds MNIST IDX files"
            )
        images, labels = load_mnist_dir(path, _default_split(splits))
        return [images.reshape(len(images), -1).astype(np.float64)], labels
    readers = {**dict.fromkeys(VIEW_FILE_READERS, load_view_files), ".mat": load_mat, ".npz": load_npz}
    if path.suffix.lower() not in readers:
        raise ValueError(
            f"{path}: unsupported format {path.suffix!r}; expected .mat, .npz, .npy, .csv, "
            "a .zarr store or a directory of MNIST IDX files"
        )
    return readers[path.suffix.lower()](path)


# ---------------------------------------------------------------------- MATLAB


def load_mat(path: PathLike) -> tuple[list[View], np.ndarray | None]:
    """Load a MATLAB .mat (v5 or v7.3) file holding a cell array of views and labels.

    Views come from the first of the variables X, data, fea, views; labels from y, Y, gt,
    gnd, truth, labels. Views stored transposed (d×n) are turned to n×d. A plain matrix there is one view, with a
    warning.
    """
    path = Path(path)
    variables = _read_mat_variables(path)
    view_key = next((k for k in _VIEW_KEYS if k in variables), None)
    if view_key is None:
        raise ValueError(
            f"{path}: not a multi-view .mat file: no views variable "
            f"(looked for {', '.join(_VIEW_KEYS)})"
        )
    label_key = next((k for k in _LABEL_KEYS if k in variables), None)
    y = None if label_key is None else _labels(variables[label_key], f"{path}: {label_key}")
    views = [_as_view(v, p, path) for p, v in enumerate(_cell_items(variables[view_key], path, view_key))]
    return _orient(views, y, path), y


def _labels(value: Any, name: str) -> np.ndarray:
    """Labels of a .mat or .npz variable: class ids, or class names (a string array, a MATLAB char matrix or cell of
    strings) as :func:`_file_labels` gives them."""
    if isinstance(value, np.ndarray) and value.dtype == object and value.size and all(
            isinstance(v, np.ndarray) and v.dtype.kind in "US" and v.size <= 1 for v in value.flat):
        value = np.array([v.item() if v.size else "" for v in value.flat])
    return _file_labels(value, None, name)


def _probe_loadmat(path: Path, names: list[str]) -> None:
    """Parse a v5 .mat in a child process first: scipy's reader can segfault on damaged files (found by
    fuzzing, scipy 1.17), and a crash must become a ValueError, not kill the user's process."""
    code = "import sys, scipy.io; scipy.io.loadmat(sys.argv[1], variable_names=sys.argv[2:])"
    if subprocess.run([sys.executable, "-c", code, str(path), *names], capture_output=True).returncode < 0:
        raise ValueError(f"{path}: corrupt .mat file (scipy's reader crashed on it)")


def _read_mat_variables(path: Path) -> dict[str, Any]:
    """The view and label variables of a .mat file, cells as object arrays in MATLAB shape."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    names = [*_VIEW_KEYS, *_LABEL_KEYS]
    try:
        if h5py.is_hdf5(path):
            with h5py.File(path, "r") as f:
                return {k: _h5_value(f, f[k]) for k in names if k in f}
        _probe_loadmat(path, names)
        try:
            return scipy.io.loadmat(path, variable_names=names)
        except Exception:  # asked for names the file lacks, scipy reads on past its last variable
            present = _mat_names_before_damage(path)
            wanted = [next((k for k in keys if k in present), None) for keys in (_VIEW_KEYS, _LABEL_KEYS)]
            if None in wanted:  # what is missing may lie in the part that cannot be read
                raise
            return scipy.io.loadmat(path, variable_names=wanted)
    except NotImplementedError as exc:  # scipy's answer to a v7.3 header on a non-HDF5 file
        raise ValueError(f"{path}: corrupt or truncated MATLAB v7.3 file ({exc})") from exc
    except Exception as exc:  # scipy.io and h5py raise many types on damaged input
        raise ValueError(
            f"{path}: corrupt, truncated or not a multi-view .mat file "
            f"({type(exc).__name__}: {exc})"
        ) from exc


def _mat_names_before_damage(path: Path) -> list[str]:
    """The names of a v4/v5 .mat file's variables, read header by header up to the end or to the first bytes
    that are not a variable (some public multi-view sets have such bytes after their last variable)."""
    from scipy.io.matlab._mio import mat_reader_factory  # loadmat's reader; whosmat also fails on those bytes

    names = []
    with open(path, "rb") as f:
        reader = mat_reader_factory(f)[0]
        reader.initialize_read()
        if hasattr(reader, "read_file_header"):  # v5
            reader.read_file_header()
        try:
            while not reader.end_of_stream():
                header, next_position = reader.read_var_header()
                names.append(header.name.decode("latin1") if isinstance(header.name, bytes) else str(header.name))
                f.seek(next_position)
        except Exception:  # noqa: BLE001 - the first bytes that are not a variable end the list
            pass
    return names


def _h5_value(f: h5py.File, obj: h5py.Dataset | h5py.Group) -> Any:
    """A MATLAB v7.3 variable as loadmat would give it: HDF5 data is stored transposed."""
    if isinstance(obj, h5py.Group):
        return _h5_sparse(obj) if "MATLAB_sparse" in obj.attrs else None
    if h5py.check_ref_dtype(obj.dtype) is not None:
        refs = obj[()].T
        cell = np.empty(refs.shape, dtype=object)
        for index, ref in np.ndenumerate(refs):
            cell[index] = _h5_value(f, f[ref])
        return cell
    matlab_class = obj.attrs.get("MATLAB_class", b"double")
    matlab_class = matlab_class.decode() if isinstance(matlab_class, bytes) else str(matlab_class)
    if matlab_class == "char":  # UTF-16 codes, one string per row
        return np.array(["".join(map(chr, row)) for row in np.atleast_2d(obj[()].T)])
    if matlab_class not in _MATLAB_NUMERIC:
        return None
    if obj.attrs.get("MATLAB_empty", 0):
        return np.empty((0, 0))
    return obj[()].T


def _h5_sparse(group: h5py.Group) -> sp.csc_matrix:
    """MATLAB v7.3 sparse: CSC arrays data/ir/jc, row count in the MATLAB_sparse attribute."""
    jc = group["jc"][()].astype(np.int64)
    ir = group["ir"][()].astype(np.int64) if "ir" in group else np.empty(0, np.int64)
    data = group["data"][()] if "data" in group else np.empty(0)
    shape = (int(group.attrs["MATLAB_sparse"]), len(jc) - 1)
    return sp.csc_matrix((data, ir, jc), shape=shape)


def _cell_items(cell: Any, path: Path, name: str) -> list[Any]:
    """Views of a 1×v or v×1 cell (variable `name`); a plain matrix is one view, with a warning."""
    if not (isinstance(cell, np.ndarray) and cell.dtype == object):
        user_warning(f"{path}: {name} is one matrix, not a cell array of views, so it is clustered as a single view; "
                     "give several views as a cell array ({X1, X2, ...} in MATLAB)")
        return [cell]
    if cell.ndim != 2 or min(cell.shape) != 1:
        raise ValueError(
            f"{path}: cell array of views has shape {cell.shape}, expected 1×v or v×1"
        )
    return list(cell.ravel())


def _as_view(view: Any, p: int | str, source: Path) -> View:
    """View `p` (a position, or an .npz array's name) as float64 CSR or C-contiguous float64 array."""
    p = p if isinstance(p, int) or p.isdigit() else repr(p)
    if sp.issparse(view) and view.dtype.kind in "biuf":
        view = sp.csr_matrix(view, dtype=np.float64)
    elif isinstance(view, np.ndarray) and view.dtype.kind in "biuf":
        view = np.ascontiguousarray(view, dtype=np.float64)
    else:
        kind = getattr(view, "dtype", type(view).__name__)
        raise ValueError(f"{source}: view {p}: is not a numeric matrix (got {kind})")
    if view.ndim != 2 or 0 in view.shape:
        raise ValueError(
            f"{source}: view {p}: has shape {view.shape}, expected a non-empty 2-D matrix"
        )
    return view


def _orient(views: list[View], y: np.ndarray | None, source: Path, names: list[str] | None = None) -> list[View]:
    """Transpose views stored d×n so each has n rows; errors name the views by ``names`` (an .npz's array names).

    n is len(y), or without labels the dimension shared by all views (the more common
    row count, with a warning, when every view shares both). Square views: :func:`_orient_square`.
    """
    shapes = ", ".join(f"{view_label(p, names)} {v.shape}" for p, v in enumerate(views))
    if y is not None:
        n = len(y)
        if not any(n in v.shape for v in views):
            raise ValueError(f"{source}: labels: have {n} entries, but no view has {n} rows or columns: {shapes}")
    else:
        shared = set.intersection(*(set(v.shape) for v in views))
        if not shared:
            raise ValueError(f"{source}: views share no dimension, cannot tell samples: {shapes}")
        rows = Counter(v.shape[0] for v in views if v.shape[0] in shared)
        n = rows.most_common(1)[0][0] if rows else min(shared)
        if len(shared) > 1:
            user_warning(f"{source}: every view has both {sorted(shared)} among its dimensions and there are no "
                         f"labels, so the samples are a guess: {n} (the more common row count); store labels y or "
                         f"views with one orientation to settle it")
    oriented = []
    for p, view in enumerate(views):
        if view.shape[0] != n and view.shape[1] == n:
            view = _transpose(view)
        if view.shape[0] != n:
            raise ValueError(
                f"{source}: {view_label(p, names)}: has shape {view.shape}, neither dimension matches "
                f"{n} samples" + ("" if y is None else " (len(y))")
            )
        oriented.append(view)
    others = [view for view in oriented if view.shape[1] != n]
    return [_orient_square(view, others, view_label(p, names), source) if view.shape == (n, n) else view
            for p, view in enumerate(oriented)]


def _transpose(view: View) -> View:
    return view.T.tocsr() if sp.issparse(view) else np.ascontiguousarray(view.T)


#: samples compared by _orient_square, and the margin by which one orientation's agreement must win
_ORIENT_SAMPLES, _ORIENT_MARGIN = 300, 0.1


def _orient_square(view: View, others: list[View], label: str, source: Path) -> View:
    """A square view (n = d) whose rows or columns may be the samples: its shape cannot tell, so the orientation
    whose distances between samples agree more with the other (non-square) views' is taken: the Spearman
    correlation of pairwise distances over up to _ORIENT_SAMPLES samples, mean over those views. It must win by
    _ORIENT_MARGIN; otherwise (or with no such view) the rows stay the samples, with a warning."""
    from scipy.spatial.distance import pdist
    from scipy.stats import spearmanr

    n, what = view.shape[0], f"{source}: {label} is square ({view.shape[0]} x {view.shape[0]})"
    if (view != view.T).nnz == 0 if sp.issparse(view) else np.array_equal(view, view.T):  # both orientations alike
        return view
    if not others:
        user_warning(f"{what} and no other view has a different shape, so its samples cannot be told from its "
                     "features; its rows are taken as the samples (transpose it if its columns are)")
        return view
    rows = np.sort(np.random.default_rng(0).choice(n, min(n, _ORIENT_SAMPLES), replace=False))

    def distances(X: View) -> np.ndarray:
        return pdist(X.toarray() if sp.issparse(X) else X)

    def agreement(X: View) -> float:  # 0 where a view's distances are constant (no ranking to agree with)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's ConstantInputWarning
            return float(np.mean([np.nan_to_num(spearmanr(distances(X), distances(W[rows]))[0]) for W in others]))

    as_rows, as_columns = agreement(view[rows]), agreement(view[:, rows].T)
    if as_columns > as_rows + _ORIENT_MARGIN:
        user_warning(f"{what}: its columns agree with the other views' samples (distance correlation "
                     f"{as_columns:.2f}, rows {as_rows:.2f}), so it is transposed")
        return _transpose(view)
    if as_rows <= as_columns + _ORIENT_MARGIN:
        user_warning(f"{what}: neither its rows nor its columns agree clearly with the other views' samples "
                     f"(distance correlation {as_rows:.2f} and {as_columns:.2f}); its rows are taken as the samples "
                     "(transpose it if its columns are)")
    return view


# ------------------------------------------------------------------------- IDX


def _read_at_most(f, size: int, block: int = 1 << 24) -> bytes:
    """Up to `size` bytes, read in blocks, so a corrupt header claiming a huge size costs only the file's
    real length in memory."""
    parts, remaining = [], size
    while remaining > 0:
        part = f.read(min(remaining, block))
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


def _open_idx(path: Path) -> Any:
    """An IDX file opened for reading, through gzip when it is compressed (a missing or unreadable file: the
    OSError of opening it)."""
    with path.open("rb") as f:
        compressed = f.read(2) == b"\x1f\x8b"
    return (gzip.open if compressed else open)(path, "rb")


def _idx_header(f: Any, path: Path) -> tuple[np.dtype, tuple[int, ...]]:
    """The value type and dimensions in the header of the IDX file `f` (at its start)."""
    magic = f.read(4)
    if len(magic) < 4:
        raise ValueError(f"{path}: truncated or empty IDX file (no header)")
    if magic[:2] != b"\0\0" or magic[2] not in _IDX_DTYPES or not magic[3]:
        raise ValueError(f"{path}: bad magic number 0x{magic.hex()}; not an IDX file")
    header = f.read(4 * magic[3])
    if len(header) < 4 * magic[3]:
        raise ValueError(f"{path}: truncated IDX header")
    return np.dtype(_IDX_DTYPES[magic[2]]), tuple(int(d) for d in np.frombuffer(header, ">u4"))


def idx_header(path: PathLike) -> tuple[np.dtype, tuple[int, ...]]:
    """The value type and dimensions an IDX file's header gives (its data are not read)."""
    path = Path(path)
    handle = _open_idx(path)
    try:
        with handle as f:
            return _idx_header(f, path)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: corrupt or truncated IDX file ({exc})") from exc


def idx_shape(path: PathLike) -> tuple[int, ...]:
    """The dimensions an IDX file's header gives (its data are not read)."""
    return idx_header(path)[1]


def read_idx(path: PathLike, ndim: int | None = None) -> np.ndarray:
    """Read one IDX file (MNIST format, optionally gzip-compressed) into a native-endian array, of `ndim` dimensions
    if given (checked from the header)."""
    path = Path(path)
    handle = _open_idx(path)
    try:
        with handle as f:
            dtype, dims = _idx_header(f, path)
            _check_idx_dims(path, dims, ndim)
            size = math.prod(dims) * dtype.itemsize
            payload = _read_at_most(f, size)
            trailing = f.read(1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: corrupt or truncated IDX file ({exc})") from exc
    if len(payload) < size:
        raise ValueError(
            f"{path}: truncated IDX file: dims {dims} need {size} bytes, got {len(payload)}"
        )
    if trailing:
        raise ValueError(f"{path}: IDX file has data beyond the {size} bytes of dims {dims}")
    return np.frombuffer(payload, dtype).reshape(dims).astype(dtype.newbyteorder("="))


#: what an MNIST directory's IDX files of each number of dimensions hold
_IDX_KINDS = {1: "labels (n)", 3: "images (n, rows, cols)"}


def _check_idx_dims(path: Path, dims: tuple[int, ...], ndim: int | None) -> None:
    """An IDX file's dimensions `dims` (from its header), checked to be `ndim` many (a vector may be one column)."""
    if ndim is not None and len(dims) != ndim and not (ndim == 1 and len(dims) == 2 and dims[1] == 1):
        raise ValueError(f"{path}: its header gives {len(dims)}-D data {dims}, expected "
                         f"{_IDX_KINDS.get(ndim, f'{ndim}-D data')} (the magic number's last byte is the number of "
                         "dimensions)")


def load_mnist_dir(
    directory: PathLike, split: str = "train"
) -> tuple[np.ndarray, np.ndarray | None]:
    """Images (n, rows, cols) and labels (None if no labels file) of an MNIST-style directory.

    Finds ``<split>-images-idx3-ubyte`` and ``<split>-labels-idx1-ubyte`` (optionally .gz),
    split being "train" or "t10k" (alias "test").
    """
    images_path, labels_path = _split_files(Path(directory), split)
    images = read_idx(images_path, 3)
    if labels_path is None:
        return images, None
    return images, as_labels(read_idx(labels_path, 1), len(images), name=str(labels_path))


def mnist_header(directory: PathLike, split: str = "train") -> tuple[np.dtype, tuple[int, ...], np.ndarray | None]:
    """The value type and dimensions (n, rows, cols) of a split's images, from their file's header, and its labels
    (None if no labels file): what checks a run's parameters before its images are read."""
    images, labels = _split_files(Path(directory), split)
    dtype, dims = idx_header(images)
    _check_idx_dims(images, dims, 3)
    if not dims[0]:
        raise ValueError(f"{images}: holds no images (its header gives dims {dims})")
    return dtype, dims, None if labels is None else as_labels(read_idx(labels, 1), dims[0], name=str(labels))


def _default_split(splits: set[str]) -> str:
    """The split load reads of an MNIST-style directory's splits: train when present, else t10k."""
    return "train" if "train" in splits else "t10k"


def mnist_image_file(directory: PathLike) -> Path:
    """The images file load reads from an MNIST-style directory."""
    return _split_files(Path(directory), _default_split(mnist_splits(directory)))[0]


def _split_files(directory: Path, split: str) -> tuple[Path, Path | None]:
    """The images file and the labels file (None if there is none) of `split` in an MNIST-style directory."""
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {sorted(_SPLITS)}, got {split!r}")
    split = _SPLITS[split]
    files = _mnist_files(directory)
    if (split, "images") not in files:
        found = sorted(p.name for p in files.values())
        raise FileNotFoundError(f"{directory}: no {split!r} images file ({split}-images-idx3-ubyte[.gz]); "
                                f"found: {found or 'no IDX files'}")
    return files[split, "images"], files.get((split, "labels"))


def mnist_splits(directory: PathLike) -> set[str]:
    """The splits ("train", "t10k") whose images file the MNIST-style `directory` holds."""
    return {split for split, kind in _mnist_files(Path(directory)) if kind == "images"}


def _mnist_files(directory: Path) -> dict[tuple[str, str], Path]:
    """(split, "images" | "labels") -> file, preferring uncompressed files."""
    files: dict[tuple[str, str], Path] = {}
    for path in sorted(directory.iterdir()):
        match = _MNIST_FILE.match(path.name)
        if match and path.is_file():
            files.setdefault((match[1], match[2]), path)
    return files


# ------------------------------------------------------------------ NPZ / CSV


def load_npz(path: PathLike) -> tuple[list[View], np.ndarray | None]:
    """Views from arrays named view0, view1, ... (or X0 / X_0 ...; without those, arr_0, arr_1, ... as
    ``np.savez(f, X0, X1)`` names them; without those, every other array, in the file's order, its name the view's:
    npz_view_names) and optional labels y (or another of the .mat label names); or the one sparse view of a
    ``scipy.sparse.save_npz`` file.

    With labels, views stored transposed (d×n) are turned to n×d as in :func:`load_mat`; without, rows are
    samples (numpy's convention: no guess). Object arrays are refused, since reading them runs pickle.
    """
    path = Path(path)
    if npz_kind(path) == "sparse":
        return [_as_view(_load_sparse(path), 0, path)], None
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except Exception as exc:  # numpy raises many types on damaged zip archives
        raise _numpy_read_error(path, exc, "an .npz archive") from exc
    label_key = next((k for k in _LABEL_KEYS if k in arrays), None)
    y = None if label_key is None else _labels(arrays[label_key], f"{path}: {label_key}")
    named = _npz_views(arrays, path, label_key)
    views = [_as_view(view, key, path) for key, view in named.items()]
    names = None if all(key.isdigit() for key in named) else list(named)
    return (_check_rows(views, path, names) if y is None else _orient(views, y, path, names)), y


def npz_view_names(path: PathLike) -> list[str] | None:
    """The view names of an .npz of named arrays (``np.savez(f, colour=A, texture=B, y=y)``), None for numbered
    ones (view0, arr_0, ...) or a sparse matrix."""
    path = Path(path)
    if npz_kind(path) == "sparse":
        return None
    with np.load(path, allow_pickle=False) as npz:
        keys = list(npz.files)
    label_key = next((k for k in _LABEL_KEYS if k in keys), None)
    names = list(_npz_views(dict.fromkeys(keys), path, label_key, warn=False))
    return None if all(key.isdigit() for key in names) else names


def _npz_views(arrays: dict[str, Any], path: Path, label_key: str | None, warn: bool = True) -> dict[str, Any]:
    """The arrays view0, view1, ... (or X0 / X_0 ...), else arr_0, arr_1, ..., in order, keyed by position
    ("0", "1", ...), the other arrays left out (with a warning when ``warn``); without such names, every array but the
    labels, in the file's order, keyed by its name (an array named like labels, not as they are read, is an error)."""
    for pattern, shown in ((r"(?:view|X)_?(\d+)", "view0, view1, ... or X0 / X_0 ..."),
                           (r"arr_(\d+)", "arr_0, arr_1, ...")):
        numbered: dict[int, Any] = {}
        for key, array in arrays.items():
            match = re.fullmatch(pattern, key)
            if match:
                if int(match[1]) in numbered:
                    raise ValueError(f"{path}: two arrays for view {match[1]}")
                numbered[int(match[1])] = array
        if numbered:
            if sorted(numbered) != list(range(len(numbered))):
                raise ValueError(f"{path}: expected arrays view0, view1, ... (or X0 / X_0 ..., or arr_0, arr_1, ...) "
                                 f"numbered from 0, found {sorted(arrays)}")
            left = [key for key in arrays if key != label_key and not re.fullmatch(pattern, key)]
            if left and warn:
                user_warning(f"{path}: arrays {left} are left out: they are not named as the views are ({shown}); "
                             "name every view so, or every view by its own name")
            return {str(p): numbered[p] for p in range(len(numbered))}
    named = {key: array for key, array in arrays.items() if key != label_key}
    like = [key for key in named if key.lower() in {"label", "labels", "target", "targets", "class", "classes", "y"}]
    if like:
        raise ValueError(f"{path}: array {like[0]!r} looks like labels, but labels are read from the first of "
                         f"{' / '.join(_LABEL_KEYS)}" + (f" ({label_key} here): keep one of them" if label_key else
                                                          ": save them as y=..."))
    if not named:
        raise ValueError(f"{path}: holds no views (only {sorted(arrays)}); save them as np.savez(f, view0=A, "
                         "view1=B, y=y) or by name, np.savez(f, colour=A, texture=B)")
    return named


def load_view_files(
    paths: PathLike | Sequence[PathLike], y_path: PathLike | None = None, names: Sequence[str] | None = None
) -> tuple[list[View], np.ndarray | None]:
    """Views from files, one per view, and labels from `y_path`: each file a numeric .npy array (n×d; read without
    pickle), a ``scipy.sparse.save_npz`` matrix (views only) or a numeric comma-separated UTF-8 .csv file. Errors
    name the views by ``names`` (default: view_file_names). Labels are int64 class ids, or the class names as strings
    (MultiViewStore.create stores them as ids with the names).

    A .csv's first line ``sep=,`` (Excel's) is skipped. Its first row is a header, and skipped, when it has a text
    field (not a missing-value mark such as NA: a sample with a missing value), or is evenly spaced increasing numbers
    (pandas' names 0, 1, ..., d-1 for unnamed columns, years, wavelengths) after an index column's empty name, or with
    d >= 3 when the second row is not spaced alike, or is 0, 1 over a second row that is not integers (with a warning;
    a first row 0, or 0, 1 over integers, e.g. labels or a one-hot sample, is data); uneven increasing numbers over
    d >= 8 columns, or increasing integers (years) over d >= 5 above a row that is not integers, stay a sample, with a
    warning. A header whose first field is empty, as pandas writes with its index
    (``df.to_csv(path)``), or that names the first column before columns named 0, 1, ..., d-2 (a named index, with a
    warning), marks an index column, which is dropped (it must be numeric like the rest; out of order, a warning);
    so is a first column holding the row numbers 0..n-1 or 1..n of n >= 10 rows, with a warning. A header naming
    fewer columns than its rows hold (a decimal comma), an empty field, or a missing label is an error. Errors give
    1-based file line and column numbers.
    """
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if y_path is not None and Path(y_path).suffix.lower() == ".npz":
        raise ValueError(f"{y_path}: labels go in a .npy or .csv file")
    files = [Path(p).resolve() for p in paths]
    again = [p for i, p in enumerate(paths) if files[i] in files[:i]]
    if again:
        user_warning(f"{again[0]}: given twice as a view; each copy is a view of its own, weighted as such")
    views = [_as_view(_read_view_file(Path(p)), i, Path(p)) for i, p in enumerate(paths)]
    counts = [view.shape[0] for view in views]
    extra = [Path(path) for path, rows in zip(paths, counts) if rows == min(counts) + 1]
    with _hint(_numeric_header_hint(extra[0]) if len(extra) == 1 and max(counts) == min(counts) + 1 else ""):
        views = _check_rows(views, ", ".join(map(str, paths)), view_file_names(paths) if names is None else names)
    if y_path is None:
        return views, None
    n, lines = views[0].shape[0], []
    try:
        y = (_read_csv(Path(y_path), lines, labels=True) if Path(y_path).suffix.lower() == ".csv" else
             _read_view_file(Path(y_path)))
    except ValueError as exc:
        if "could not convert string" not in str(exc):  # words where numbers go: class names
            raise
        y = _class_name_column(Path(y_path), n, exc)
    if y.shape == (n + 1, 1) and _is_number((first := _first_line(Path(y_path))).strip('"')):  # e.g. pandas' Series
        # name 0 over the ids
        named = [Path(path) for path in paths if _step(_first_line(Path(path)).split(",")) is not None
                 and len(_first_line(Path(path)).split(",")) > 1]  # the first line may be a sample read as names
        also = (f"; or {named[0].name}'s first line ({_first_line(named[0])[:60]}) is a sample, taken as column names: "
                "then add a header line naming its columns" if named else "")
        raise ValueError(f"{y_path}: has {n + 1} entries, expected {n}, one per sample; if its first line ({first}) is "
                         "a header (pandas writes 0 for an unnamed Series), name the column, e.g. "
                         f"y.to_csv(path, header=['label'], index=False), or remove it{also}")
    with _hint("".join(_numeric_header_hint(Path(path)) for path in paths) if len(y) == n - 1 else ""):
        return views, _file_labels(y, n, str(y_path), lambda row: f"line {lines[row]}" if len(lines) == len(y)
                                      else f"row {row}")  # a CSV read as numbers: its lines


@contextmanager
def _hint(hint: str) -> Iterator[None]:
    """A ValueError raised meanwhile, with `hint` appended to its message."""
    try:
        yield
    except ValueError as exc:
        if not hint:
            raise
        raise ValueError(f"{exc}{hint}") from None


def _numeric_header_hint(path: Path) -> str:
    """For a file read with one row more than the other views or the labels: when it is a CSV whose first line is
    increasing numbers, the hint that it may be a header of numeric column names (not evenly spaced: read as data)."""
    first = _first_line(path)
    if not _increasing([field.strip().strip('"') for field in first.split(",")]):
        return ""
    return (f"; {path.name}'s first line ({first[:60]}) was read as a sample: if it names the columns, make the names "
            "non-numeric (e.g. x400) or remove it")


def _first_line(path: Path) -> str:
    """The first line of a CSV file, after Excel's sep= line ("" for another format)."""
    if path.suffix.lower() != ".csv":
        return ""
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        first = f.readline()
        return (f.readline() if _excel_line(first) else first).strip()


def _excel_line(line: str) -> re.Match | None:
    """Excel's first line ``sep=X`` naming the field separator X, else None."""
    return re.fullmatch(r"\s*sep=(.)\s*", line, flags=re.IGNORECASE)


def _unlabelled_mark(y: np.ndarray, source: str) -> np.ndarray:
    """`y`, with a warning when it holds -1 beside ids 0, 1, ...: scikit-learn's mark of an unlabelled sample,
    here a class of its own."""
    if y.size and y.min() == -1 and (y == 0).any() and np.all(y >= -1):
        user_warning(f"{source}: label -1 ({int(np.sum(y == -1))} samples) is read as a class of its own; "
                     "scikit-learn marks unlabelled samples with -1: if these are, leave them out of the evaluation")
    return y


def _class_name_column(path: Path, n_samples: int, error: ValueError) -> np.ndarray:
    """A .csv of labels given as class names, one per line (a first line more than the samples: a header), else
    ``error`` (the numeric reader's). An empty line before the last name, or a missing-value mark (pandas' NA, n/a,
    null, ...), is a missing label: an error naming its line. Names that are all numbers are class ids."""
    import csv

    lines = path.read_text(encoding="utf-8-sig").splitlines()
    skip = int(bool(lines) and _excel_line(lines[0]) is not None)  # Excel's sep=, line (sep=; is refused before)
    written = len(lines) - skip
    while lines and not lines[-1].strip():
        lines.pop()
    rows = list(csv.reader(lines[skip:]))
    if all(len(row) == 2 for row in rows) and any([row[0].strip() for row in rows[-n_samples:]] == list(map(str, ids))
                                                  for ids in (range(n_samples), range(1, n_samples + 1))):
        rows = [row[1:] for row in rows]  # pandas' Series.to_csv(): the index, then the names
    empty = [i for i, row in enumerate(rows) if not "".join(row).strip()]
    if empty and len(rows) not in (n_samples, n_samples + 1) and len(rows) - len(empty) in (n_samples, n_samples + 1):
        raise _empty_line_error(path, skip + empty[0] + 1, len(empty), "labels", "one sample's label") from None
    if any(len(row) > 1 for row in rows) or len(rows) not in (n_samples, n_samples + 1):
        raise ValueError(f"{error}; labels are one column of class ids or names, one per sample") from None
    start = len(rows) - n_samples
    names = [row[0].strip() if row else "" for row in rows[start:]]
    ids = all(_is_number(name) or name.lower() in _ID_MARKS for name in names)
    missing = [i for i, name in enumerate(names) if (not _is_number(name) if ids else name in _MISSING)]
    if missing:
        raise ValueError(f"{path}: holds missing labels (e.g. on line {skip + start + missing[0] + 1}"
                         f"{': ' + repr(names[missing[0]]) if names[missing[0]] else ', empty'}); every sample needs "
                         "a label (a class of that name: rename it, or give the labels as ids)")
    counts = Counter(names)
    if not ids and not start and counts[names[0]] == 1 == sum(count == 1 for count in counts.values()):
        said = (f"{path}: line {skip + 1} ({names[0]!r}) is the only class of one sample, as a header would be: if it "
                "is a header, a label is missing and every label after it is read one line early")
        if written > n_samples:  # and the last line is empty: a header, and the last label missing
            raise ValueError(f"{said} (the file's last line is empty; if line {skip + 1} is a label, remove that "
                             "line)")
        user_warning(said)
    return np.array([float(name) for name in names]) if ids else np.array(names)  # ids: all numbers once none missing


def _empty_line_error(path: Path, line: int, count: int, between: str, each: str) -> ValueError:
    """The error for `count` empty lines between a CSV's rows (`between`: what the rows hold), the first at `line`."""
    return ValueError(f"{path}: line {line} is empty, between {between} ({count} such line{'s' * (count > 1)}): each "
                      f"line is {each}; remove the line if it is not a sample")


def _file_labels(y: Any, n_samples: int | None, source: str,
                 row_label: Callable[[int], str] = "row {}".format) -> np.ndarray:
    """Labels read from `source`, checked by store.encode_labels (`row_label` names an entry's place): int64 class
    ids (-1 beside 0 said), or class names as strings, surrounding spaces stripped (names differing only in case
    said)."""
    ids, classes = encode_labels(y, n_samples, name=source, row_label=row_label)
    if classes is None:
        return _unlabelled_mark(ids, source)
    alike = Counter(name.casefold() for name in classes)
    cases = [repr(name) for name in classes if alike[name.casefold()] > 1][:2]
    if cases:
        user_warning(f"{source}: class names {' and '.join(cases)} differ only in case: two classes")
    return np.asarray(classes)[ids]


def view_file_names(paths: Sequence[PathLike]) -> list[str] | None:
    """The views' names from their files' names without the suffix, when these differ (else None)."""
    stems = [Path(p).stem for p in paths]
    return stems if len(set(stems)) == len(stems) else None


def _read_view_file(path: Path) -> np.ndarray:
    """The array in a file of VIEW_FILE_READERS' formats (by suffix; :func:`load_view_files`)."""
    reader = VIEW_FILE_READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"{path}: unsupported format {path.suffix!r} for a view or labels file; expected "
                         f"{' or '.join(VIEW_FILE_READERS)}")
    return reader(path)


#: the entries every scipy.sparse.save_npz file holds, and those of its formats' indices (csr / csc / bsr, coo, dia)
_SPARSE_NPZ_ENTRIES = {"format.npy", "shape.npy", "data.npy"}
_SPARSE_INDEX_ENTRIES = {"indices.npy", "indptr.npy", "row.npy", "col.npy", "coords.npy", "offsets.npy",
                         "has_canonical_format.npy", "blocksize.npy", "_is_array.npy"}  # the last: a csr_array's


def npz_kind(path: PathLike) -> str | None:
    """What an .npz file holds, from its list of entries (no array read): "sparse" for one
    ``scipy.sparse.save_npz`` matrix, "views" for other arrays (``np.savez``); None when it is missing or not a
    readable zip archive."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return None
    return "sparse" if entries <= _SPARSE_NPZ_ENTRIES | _SPARSE_INDEX_ENTRIES and _SPARSE_NPZ_ENTRIES <= entries \
        else "views"


def _read_sparse_npz(path: Path) -> sp.spmatrix:
    """The matrix of a ``scipy.sparse.save_npz`` file given as one view."""
    path.stat()  # a missing file raises its OSError
    if npz_kind(path) == "views":
        raise ValueError(f"{path}: an .npz of several arrays (np.savez), not one scipy.sparse.save_npz matrix; "
                         "load it alone (io.load)")
    return _load_sparse(path)


def _load_sparse(path: Path) -> sp.spmatrix:
    """scipy.sparse.load_npz, a damaged file named as such."""
    try:
        return sp.load_npz(path)
    except Exception as exc:  # scipy raises several types on damaged files
        raise _numpy_read_error(path, exc, "a scipy.sparse .npz matrix") from exc


def _read_npy(path: Path) -> np.ndarray:
    """The array of a .npy file; object arrays are refused, since reading them runs pickle. A file without the
    .npy header (text, an .npz archive) is named as such: np.load would take it for a pickle."""
    with open(path, "rb") as f:  # a missing or unreadable file raises its OSError
        magic = f.read(len(np.lib.format.MAGIC_PREFIX))
        if magic != np.lib.format.MAGIC_PREFIX:
            what = "a zip archive, as .npz files are" if magic.startswith(b"PK") else f"it starts with {magic!r}"
            raise ValueError(f"{path}: not a .npy file (no .npy header: {what})")
        f.seek(0)
        try:
            return np.lib.format.read_array(f, allow_pickle=False)
        except Exception as exc:  # numpy raises several types on damaged files
            raise _numpy_read_error(path, exc, "a .npy file") from exc


def _numpy_read_error(path: Path, exc: Exception, kind: str) -> ValueError:
    """The error for a file numpy cannot read without pickle: object arrays, or a damaged file."""
    problem = ("holds pickled data (object arrays), which is not read for safety" if "allow_pickle" in str(exc)
               else f"corrupt or not {kind}")
    return ValueError(f"{path}: {problem} ({type(exc).__name__}: {exc})")


#: how CSV writers mark a missing value (pandas' default NA marks, as case-sensitive: R's NA is one of them)
_MISSING = ("", "NA", "N/A", "n/a", "NaN", "nan", "-NaN", "-nan", "NULL", "null", "None", "<NA>", "#N/A", "#NA")
#: the marks that are no column name in a first row of numbers (a sample with missing values): pandas' and UCI's ?, -
_NOT_NAMES = frozenset((*_MISSING, "?", "-"))
#: the same marks among numbers, in any case: no number reads so
_ID_MARKS = frozenset(mark.lower() for mark in _NOT_NAMES)


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _numbers(fields: list[str]) -> np.ndarray | None:
    """`fields` as finite numbers, else None."""
    try:
        values = np.array([float(field) for field in fields])
    except ValueError:
        return None
    return values if np.isfinite(values).all() else None


def _is_integer(field: str) -> bool:
    return re.fullmatch(r"\s*[+-]?\d+\s*", field) is not None


def _step(fields: list[str]) -> float | None:
    """s when `fields` are numbers a, a + s, a + 2s, ... with a step s > 0 (1 for one integer), else None: numeric
    column names (pandas' 0, 1, ..., d - 1, years, evenly spaced wavelengths or frequencies)."""
    if len(fields) == 1:
        return 1.0 if _is_integer(fields[0]) else None
    values = _numbers(fields)
    steps = np.diff(values) if values is not None and len(values) >= 2 else np.zeros(1)
    return float(steps[0]) if steps[0] > 0 and np.allclose(steps, steps[0], rtol=1e-6, atol=0) else None


def _increasing(fields: list[str]) -> bool:
    """Whether `fields` are numbers in strictly increasing order."""
    values = _numbers(fields)
    return values is not None and bool(np.all(np.diff(values) > 0))


def _csv_hint(first: str, line: int, message: str, labels: bool = False) -> str:
    """What a CSV read error at `line` of a view (or of `labels`) most likely means: another field separator, a comma
    ending every line, or missing values."""
    spaced = "," not in first and len(first.split()) > 1 and all(map(_is_number, first.split()))  # np.savetxt's
    if ";" in first or "\t" in first or spaced:
        used = "semicolons" if ";" in first else "tabs" if "\t" in first else "spaces"
        return f"; fields must be separated by commas (this file uses {used})"
    if first.rstrip("\r\n").endswith(","):
        return "; its lines end with a comma (an empty last field)"
    if line == 1 and first.startswith(","):
        return ("; a first line with an empty first field is read as pandas' header of an index column when its other "
                "fields are names or evenly spaced numbers")
    found = re.search(r"could not convert string '([^']*)'", message)
    if found and re.fullmatch(r"\s*[+-]?\d{1,3}(,\d{3})+(\.\d*)?\s*", found[1]):
        return f"; it writes numbers with thousands separators ({found[1]!r}): write them without"
    if found and found[1].strip().lower() in _ID_MARKS:
        return "; it holds missing values: impute them or drop their rows first"
    if line > 1 and found and re.search(r"column 1\b", message):
        return ("; its first column holds text, such as sample names: remove it (rows are matched by position)" +
                ("" if labels else "; if it names features, the table is transposed: rows must be samples (df.T)"))
    return ""


def _named_column(message: str, names: list[str]) -> str:
    """numpy's "could not convert string 'x' to float64, column c." with the string's closing quote (numpy drops it
    from long strings), at most 60 of its characters, and the column's header name, if any."""
    found = re.fullmatch(r"could not convert string '(.*?)'? to float64, column (\d+)\.?", message, re.DOTALL)
    if not found:
        return message
    def short(text: str) -> str:
        return text if len(text) <= 60 else text[:57] + "..."

    column = int(found[2])
    name = f" ({short(names[column - 1])!r})" if 0 < column <= len(names) and names[column - 1] else ""
    return f"could not convert string '{short(found[1])}' to float64, column {column}{name}"


def _read_csv(path: Path, lines: list[int] | None = None, labels: bool = False) -> np.ndarray:
    """A numeric CSV file (a view, or `labels`) as a 2-D float64 array, its header and index column dropped (see
    :func:`load_view_files`); `lines` is given the file line of each row."""
    line, first, lines = 0, "", [] if lines is None else lines  # lines: the file line of each data row
    fields, header, blanks = [], False, []  # blanks: the file's empty lines
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        excel = _excel_line(f.readline())
    if excel and excel[1] != ",":
        raise ValueError(f"{path}: its first line {excel[0].strip()!r} (Excel's) says fields are separated by "
                         f"{excel[1]!r}; CSV files are read comma-separated with decimal points: save it as "
                         "'CSV (Comma delimited)' with '.' as the decimal separator")

    def numbered(rows: Iterator[tuple[int, str]]) -> Iterator[str]:  # the file line np.loadtxt is at, to name it
        nonlocal line
        for line, text in rows:
            if text.split("#")[0].strip():  # np.loadtxt skips blank lines and comments
                lines.append(line)
            elif not text.strip():
                blanks.append(line)
            yield text

    try:
        with path.open(encoding="utf-8-sig") as f:
            rows = enumerate(f, 1)
            lead = next(rows, (1, ""))
            lead = next(rows, (2, "")) if excel else lead
            head = [lead, next(rows, (lead[0] + 1, ""))]
            first, second = head[0][1], head[1][1]
            fields = [field.strip().strip('"') for field in first.split(",")]
            # pandas' index column: under an empty header field, or under its name before columns named 0, 1, ...
            named_index = (len(fields) > 2 and fields[0] != "" and not _is_number(fields[0])
                           and fields[1:] == [str(j) for j in range(len(fields) - 1)]
                           and len(second.split(",")) == len(fields))
            index = (fields[0] == "" or named_index) and len(fields) > 1
            if named_index:
                user_warning(f"{path}: first column {fields[0]!r} taken as pandas' index (the header names the other "
                             "columns 0, 1, ...), not as a feature")
            names, next_row = fields[index:], [field.strip().strip('"') for field in second.split(",")[index:]]
            step = _step(names)  # e.g. pandas' names 0, 1, ... of unnamed columns, years
            numeric_names = step is not None
            next_step = _step(next_row)  # a sample spaced like the first row: both are data (counts 3, 4, 5, ...)
            pandas_names = names == ["0", "1"] and not all(map(_is_integer, next_row))  # d >= 3: spacing below
            header = (numeric_names and (index or pandas_names or len(names) >= 3
                                         and not (next_step and np.isclose(next_step, step)))
                      or any(name and not _is_number(name) and name not in _NOT_NAMES for name in names))
            shown = first.strip() if len(first.strip()) <= 80 else first.strip()[:76] + " ..."
            if header and numeric_names and not index:  # a sample could read 0, 1, 2, ... too
                user_warning(f"{path}: first row {shown} taken as column names (evenly spaced increasing "
                             "numbers, as pandas writes numeric column names, and the next row is not), not as a "
                             "sample")
            elif not header and _increasing(names) and not _increasing(next_row) and (
                    len(names) >= 8 or len(names) >= 5 and all(map(_is_integer, names))
                    and not all(map(_is_integer, next_row))):  # < 1 / 8! by chance in a sample; integers (years)
                # over a row that is not, < 1 / 5! (a sample of integers among real values is rarer still)
                user_warning(f"{path}: first row {shown} read as a sample, though its values increase like "
                             "numeric column names; if it is a header, make its names non-numeric (e.g. x400) or "
                             "remove it")
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "loadtxt: input contained no data")  # the error below says it
                data = np.loadtxt(numbered(itertools.chain(head[header:], rows)), delimiter=",", ndmin=2,
                                  dtype=np.float64, quotechar='"')  # "1.5": csv.QUOTE_ALL's numbers
    except UnicodeDecodeError as exc:
        byte = f"byte 0x{exc.object[exc.start]:02x}: {exc.reason}"  # exc.start counts from a buffer, not the file
        raise ValueError(f"{path}: not a UTF-8 text file, as CSV files must be ({byte})") from exc
    except ValueError as exc:  # numpy's own row numbers skip the header and blank lines, and start at 0 or 1
        message = _named_column(re.sub(r" at row \d+", "", str(exc)), fields if header else [])
        message = re.sub(r"the number of columns changed from (\d+) to (\d+);.*", r"\2 fields where the lines before "
                         r"it have \1; every line needs as many fields as the others", message)
        hint = _csv_hint(first, line, message, labels)
        raise ValueError(f"{path}: not a numeric CSV file (line {line}: {message}){hint}") from exc
    if not data.size:
        raise ValueError(f"{path}: holds no data rows" + (" (only a header row)" if header else ""))
    inner = [blank for blank in blanks if lines[0] < blank < lines[-1]]
    if inner:  # skipped, every later row would pair with the next sample's label and other views' rows
        raise _empty_line_error(path, inner[0], len(inner), "rows of data", "one sample's, so one sample has nothing "
                                "there")
    if not np.isfinite(data).all():
        row, column = np.argwhere(~np.isfinite(data))[0]
        kind = "missing" if np.isnan(data[row, column]) else "infinite"
        raise ValueError(f"{path}: holds {kind} values (e.g. line {lines[row]}, column {column + 1}: "
                         f"{data[row, column]}); every value must be a finite number")

    def numbered_from(start: int) -> bool:
        return data.shape[1] > 1 and np.array_equal(data[:, 0], np.arange(start, start + len(data)))

    if header and data.shape[1] - index > len(names):
        if not index and data.shape[1] == len(names) + 1 and numbered_from(1):  # R's write.table: row names 1..n
            user_warning(f"{path}: its first column, not named in the header, holds the row numbers 1..{len(data)}, "
                         "taken as an index, not as a feature")
            return data[:, 1:]
        raise ValueError(f"{path}: its header names {len(names)} columns and its rows hold {data.shape[1] - index}"
                         f"{' besides the index' if index else ''}: an unnamed first column (R's row names: "
                         "write.table(..., row.names = FALSE)), decimals written with a comma, or fields separated by "
                         "something other than commas")
    if header and index:
        if not np.all(np.diff(data[:, 0]) > 0):
            user_warning(f"{path}: its index column is not in increasing order; the rows are read in the file's order, "
                         "which must be that of the other views and the labels")
        return data[:, 1:]
    if len(data) >= 10 and (numbered_from(0) or numbered_from(1)):
        user_warning(f"{path}: its first column holds the row numbers {data[0, 0]:.0f}..{data[-1, 0]:.0f}, taken as an "
                     "index, not as a feature")
        return data[:, 1:]
    return data


#: the formats of one-view files (load_view_files, the CLI's --data / --labels files) and their readers
VIEW_FILE_READERS = {".csv": _read_csv, ".npy": _read_npy, ".npz": _read_sparse_npz}


def _check_rows(views: list[View], source: Any, names: list[str] | None = None) -> list[View]:
    """`views`, checked to have as many rows as view 0 (validation.check_same_rows, the error prefixed by `source`)."""
    try:
        check_same_rows([view.shape[0] for view in views], names)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    return views
