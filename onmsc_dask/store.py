"""On-disk Zarr v3 store for multi-view data and resumable pipeline results.

Layout of a store directory::

    zarr.json            root attrs: format, format_version, n_samples, view_names, metadata, class_names when
                         the labels were given as class names (the name of each id 0..C-1), and column_names when a
                         view was a pandas table with named columns (a list per view, null for the others)
    views/<i>            dense view: row-chunked 2-D float array
    views/<i>/{data,indices,indptr}
                         sparse view: CSR arrays; attrs {"sparse": "csr", "shape", "chunk_rows"}
    labels               optional 1-D int64 array
    stages/<stage>/      attrs {"params", "params_hash", "complete", "files"}; one node per result; "files" (written
                         when the stage completes) holds the size and CRC-32 of each of its files
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import shutil
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import dask
import dask.array as da
import dask.threaded
import numpy as np
import scipy.sparse as sp
import zarr
from dask.system import CPU_COUNT

from .cluster import active_client
from .location import Location, location, unreachable
from .validation import (check_finite, check_int, check_known_shape, check_same_rows, check_view_names, float_dtype,
                         column_names, not_2d_message, rows_where, user_warning, view_label, view_list)

__all__ = ["MultiViewStore", "as_labels", "encode_labels"]

#: fill value of the stored labels, a label nobody uses: a missing chunk file is detected instead of read as labels
_LABEL_FILL = np.iinfo(np.int64).min

#: what to do about a damaged view chunk
RESTORE = "restore the store's files, or write the store again (for a CLI run's own store: delete it)"
FORMAT = "onmsc-dask-store"
FORMAT_VERSION = 1
_CHUNK_BYTES = 32 * 2**20
#: chunk size of the data / indices / indptr arrays of a stored CSR matrix: a read of some rows decompresses
#: only the ~1 MB chunks they lie in (Z of 1M rows x 3 links spans 36 MB)
_CSR_CHUNK_BYTES = 2**20
_MIN_CHUNK_ROWS = 1024
#: codec of the dense views, which a fit reads twice (landmark scan, anchor graph), and of the stage results: LZ4 on
#: byte-shuffled values. Fashion-MNIST 60k x (784 + 324 + 144) float32: 215 MB, written in 0.7 CPU-s and read in 0.3,
#: against zarr's default zstd's 130 MB in 3.3 and 0.9 (uncompressed: 300 MB, 0.5 and 0.2); its embeddings H and one
#: anchor matrix Z: 56 MB in 0.25 CPU-s against zstd's 55 MB in 0.85 (bench/RESULTS_scale.md). Each chunk ends in its
#: CRC-32C: Blosc reads a truncated chunk of incompressible float64 values without an error, from past its end.
_CODEC = (zarr.codecs.BloscCodec(cname="lz4", clevel=1, shuffle="shuffle"), zarr.codecs.Crc32cCodec())
#: every chunk written, also one that holds only the fill value: no comparison of each chunk with it (1M x 20 float64:
#: 1.1 s against 1.6), and every chunk has its file (a missing one is damage, never a chunk left out)
_WRITE = {"write_empty_chunks": True}

ViewInput = np.ndarray | sp.spmatrix | sp.sparray | da.Array


def is_missing(value: Any) -> bool:
    """Whether an entry of an object array of labels is a missing value: None, NaN, or pandas' NA or NaT."""
    return value is None or isinstance(value, float) and value != value or type(value).__name__ in ("NAType", "NaTType")


def encode_labels(y: Any, n_samples: int | None = None, *, name: str = "labels",
                  row_label: Callable[[int], str] = "row {}".format) -> tuple[np.ndarray, list[str] | None]:
    """Labels `y` (integer ids, or class names) as a new 1-D int64 array (:func:`as_labels`) and, for class names,
    the name of each id 0..C-1 (the names' sorted order, numbers' order for names that are all numbers; else None)."""
    y = y.toarray() if sp.issparse(y) else np.asarray(y)
    y = y.astype(object) if y.dtype.kind == "S" else y  # bytes: decoded below, as in an object array
    if y.dtype == object and y.size:
        values = y.ravel().tolist()
        texts = sum(isinstance(v, (str, bytes)) for v in values)
        if texts and not any(map(is_missing, values)):  # missing values: as_labels says where
            if texts < len(values):
                raise ValueError(f"{name}: mixes class names and numbers; give one kind of label")
            y = np.array([_text(v, name) for v in values], dtype=str).reshape(y.shape)
    if y.dtype.kind not in "US":
        return as_labels(y, n_samples, name=name, row_label=row_label), None
    names = np.char.strip(y.astype(str))
    if names.size and not names.all():
        raise ValueError(f"{name}: holds missing labels (an empty class name, e.g. in row "
                         f"{int(np.flatnonzero(names.ravel() == '')[0])}); every sample needs a label")
    classes, ids = np.unique(names, return_inverse=True)
    try:  # names that are all numbers ("1", "2", "10") in their numbers' order
        order = np.argsort([float(c) for c in classes], kind="stable")
        classes, ids = classes[order], np.argsort(order)[ids]
    except ValueError:
        pass
    return as_labels(ids.reshape(names.shape), n_samples, name=name, row_label=row_label), classes.tolist()


def _text(value: str | bytes, name: str) -> str:
    """A class name given as text or as UTF-8 bytes."""
    try:
        return value.decode("utf-8") if isinstance(value, bytes) else value
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: class names given as bytes that are not UTF-8 text ({exc.reason}); give them as "
                         "text") from None


def as_labels(y: Any, n_samples: int | None = None, *, name: str = "labels",
              row_label: Callable[[int], str] = "row {}".format) -> np.ndarray:
    """Return `y` as a new 1-D int64 array, checking it holds integers (and `n_samples` of them); `row_label` names
    the place of entry i in a message (a file's line)."""
    y = y.toarray() if sp.issparse(y) else np.asarray(y)  # MATLAB may save a label vector sparse
    if y.dtype == object and y.size:  # e.g. pandas' .astype(object) of class ids
        gaps = [i for i, v in enumerate(y.ravel().tolist()) if is_missing(v)]
        if gaps:
            raise ValueError(f"{name}: holds missing values (None, NaN or NA, e.g. in rows {gaps[:5]}); every sample "
                             "needs a label")
        try:
            values = np.asarray(y.tolist())
        except ValueError:  # ragged
            raise ValueError(f"{name}: holds entries of different lengths; labels are one class id per sample") \
                from None
        y = values if values.dtype.kind in "biuf" else y
    if sum(s > 1 for s in y.shape) > 1:
        raise ValueError(f"{name}: has shape {y.shape}, expected a vector (labels are one column of class ids or "
                         "names, one per sample)")
    y = y.ravel()
    if y.dtype.kind == "f" and not (np.isfinite(y).all() and np.array_equal(y, np.round(y))):
        missing = np.flatnonzero(np.isnan(y))
        if missing.size:
            raise ValueError(f"{name}: holds missing values (NaN, e.g. in rows {missing[:5].tolist()}); every sample "
                             "needs a label")
        row = np.flatnonzero(~np.isfinite(y) | (y != np.round(y)))[0]
        raise ValueError(f"{name}: holds non-integer values (e.g. {y[row]} at {row_label(row)}); labels are integer "
                         "class ids")
    if y.dtype.kind not in "biuf":
        raise ValueError(
            f"{name}: has dtype {y.dtype}, expected integers "
            "(encode them with np.unique(y, return_inverse=True))"
        )
    lo, hi = (v.item() for v in (y.min(), y.max())) if y.size else (0, 0)  # Python numbers: compared exactly
    if not _LABEL_FILL < lo <= hi < 2**63:
        raise ValueError(
            f"{name}: holds {lo if lo <= _LABEL_FILL else hi}, outside -2**63 < label < 2**63 (int64; -2**63 marks "
            "missing labels in a store); encode them with np.unique(y, return_inverse=True)"
        )
    if n_samples is not None and len(y) != n_samples:
        raise ValueError(f"{name}: has {len(y)} entries, expected {n_samples}, one per sample")
    return y.astype(np.int64)


def _unreadable(path: Path | Location, exc: BaseException) -> str:
    """Why no group could be opened at `path`, in place of zarr's "No group found in store ..." where it is known."""
    if isinstance(exc, zarr.errors.GroupNotFoundError):
        if isinstance(path, Location) and not _exists(path):
            return "nothing is stored there (check the URL)"
        if isinstance(path, Path) and path.is_file():
            return ("it is a file, not a store (a .zarr directory): read a file's views with onmsc_dask.io.load(path), "
                    "several files with onmsc_dask.io.load_view_files(paths), and pass the views they return")
        if (v2 := _zarr_v2_arrays(path)) is not None:
            return f"it is zarr format 2 data (zarr-python 2's or xarray's), not a store{_foreign_arrays_hint(v2)}"
    return str(exc)


def _foreign_arrays_hint(arrays: dict[str, tuple[int, ...]]) -> str:
    """How to fit zarr arrays of one's own (``arrays``: their paths in the group and shapes, "." for the array
    itself); the views are the 2-D ones, and a 1-D array is said to be labels, not a view."""
    if not arrays:
        return ""
    shown = list(arrays.items())[:6]
    held = "" if list(arrays) == ["."] else "; it holds zarr arrays " + ", ".join(
        f"{name!r} ({' x '.join(map(str, shape))})" for name, shape in shown) + (" ..." if len(arrays) > 6 else "")
    component = "" if list(arrays) == ["."] else ", component=NAME"
    vectors = [name for name, shape in shown if len(shape) == 1 and name != "."]
    labels = f" ({', '.join(map(repr, vectors))}: 1-D, so labels y, not a view)" if vectors else ""
    return (f"{held}: fit your own 2-D arrays as dask arrays, ONMSC(k).fit([da.from_zarr(url{component}), ...]) "
            f"(read chunk by chunk where they live), or write a store of them for the CLI, MultiViewStore.create(path, "
            f"[da.from_zarr(url{component}), ...], y){labels}")


class MultiViewStore:
    """A multi-view data set (views, labels) and pipeline stage results in a Zarr v3 directory.

    Opening only reads metadata, so several processes may open and read one store at once.

    Parameters
    ----------
    path : str, os.PathLike or location.Location
        Directory of an existing store, as written by :meth:`create`, or its fsspec URL (``s3://bucket/x.zarr``,
        ``gs://``, ``memory://``, ``file://``; location.py).
    storage_options : dict, optional
        Options of the URL's fsspec file system (credentials, ``client_kwargs={"endpoint_url": ...}``).
    """

    def __init__(self, path: str | os.PathLike | Location, storage_options: dict | None = None) -> None:
        self.path = location(path, storage_options)
        if isinstance(self.path, Location):
            self.path.check_bucket()
        try:
            self._root = _open_group(self.path, "r")
            attrs = self._root.attrs.asdict()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            unreadable = _unreadable(self.path, exc)
        else:
            unreadable = None
        if unreadable is not None and "array already exists" in unreadable:  # zarr's words for a plain array
            unreadable = f"it is one zarr array, not a store{_foreign_arrays_hint({'.': ()})}"
        if unreadable is not None:  # raised outside the except: with zarr's GroupNotFoundError as its context, a
            # worker's ValueError would reach the client as a bare Exception (tblib cannot rebuild zarr's errors)
            where = (" (a memory:// store lives in the memory of the process that wrote it: Dask worker processes "
                     "cannot read it; give them a local path or an object store)"
                     if isinstance(self.path, Location) and self.path.protocol == "memory" and _on_worker() else "")
            raise ValueError(f"no readable onmsc-dask store at {self.path}: {unreadable}{where}")
        if attrs.get("format") != FORMAT:
            arrays = {name: node.shape for name, node in sorted(self._root.members(max_depth=None))
                      if isinstance(node, zarr.Array)}
            raise ValueError(
                f"{self.path} is not an onmsc-dask store (no format={FORMAT!r} attribute; "
                f"a foreign zarr group or an interrupted create){_foreign_arrays_hint(arrays)}"
            )
        version = _format_version(attrs.get("format_version"))
        if version is None:
            raise ValueError(f"store at {self.path}: attribute format_version is {attrs.get('format_version')!r}, "
                             f"not a version number (this onmsc-dask reads version {FORMAT_VERSION})")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"store at {self.path} was written by format version {version}, "
                f"this onmsc-dask reads version {FORMAT_VERSION}"
            )
        try:
            self.n_samples = int(attrs["n_samples"])
            self.view_names = [str(v) for v in attrs["view_names"]]
            self.metadata = dict(attrs.get("metadata", {}))
            names = attrs.get("class_names")
            if names is not None and not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
                raise _StoreMismatch(f"store at {self.path}: attribute class_names is {names!r:.80}, not a list of "
                                     "class names")
            self.class_names = names
            self.column_names = self._column_names(attrs.get("column_names"))
            stored = sorted(self._root["views"].keys(), key=lambda key: (len(key), key))
            if stored != [str(p) for p in range(len(self.view_names))]:
                raise _StoreMismatch(f"store at {self.path}: attribute view_names lists {len(self.view_names)} "
                                     f"views {self.view_names}, but group views holds arrays "
                                     f"{['views/' + key for key in stored]}")
            self._views = [self._root[f"views/{p}"] for p in range(len(self.view_names))]
        except _StoreMismatch:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"store at {self.path} is corrupt: {exc!r}") from exc
        self.n_views = len(self.view_names)
        for p, columns in enumerate(self.column_names):
            if columns is not None and len(columns) != self.view_shape(p)[1]:
                raise ValueError(f"store at {self.path}: attribute column_names names {len(columns)} columns of "
                                 f"view {p}, but it has {self.view_shape(p)[1]}")
        self._whole: dict[str, zarr.Group] = {}  # groups of the stages has_stage found whole: read_result does not
        # look them up or check their files again
        self._check_arrays()

    def _column_names(self, stored: Any) -> list[np.ndarray | None]:
        """Attribute column_names as one array of names (or None) per view, checked to be that."""
        if stored is None:
            return [None] * len(self.view_names)
        if not (isinstance(stored, list) and len(stored) == len(self.view_names) and all(
                names is None or isinstance(names, list) and all(isinstance(c, str) for c in names)
                for names in stored)):
            raise _StoreMismatch(f"store at {self.path}: attribute column_names is {stored!r:.80}, not a list of "
                                 f"{len(self.view_names)} lists of column names (or nulls)")
        return [None if names is None else np.asarray(names, dtype=object) for names in stored]

    def _check_arrays(self) -> None:
        """The attributes checked against the arrays (rows, label length), and every array whose fill value could
        pass for data checked to have all its chunk files: a ValueError naming both, and the fix, otherwise."""
        again = ("; the store was changed after it was written: write it again from its views with "
                 "MultiViewStore.create (or the CLI's --data with the view files)")
        for p, node in enumerate(self._views):
            rows, cols = self.view_shape(p)
            if rows != self.n_samples:
                raise ValueError(f"store at {self.path}: attribute n_samples is {self.n_samples}, but array views/{p} "
                                 f"({view_label(p, self.view_names)}) has {rows} rows{again}")
            arrays = {"": node} if isinstance(node, zarr.Array) else {f"/{key}": node[key] for key in
                                                                      ("data", "indices", "indptr")}
            if isinstance(node, zarr.Group) and arrays["/indptr"].shape[0] != rows + 1:
                raise ValueError(f"store at {self.path}: array views/{p}/indptr has {arrays['/indptr'].shape[0]} "
                                 f"entries, but attribute shape of views/{p} says {rows} rows (+1){again}")
            for key, array in arrays.items():
                _check_written(array, f"views/{p}{key}", self.path)
        if "labels" in self._root:
            labels = self._root["labels"]
            if labels.shape != (self.n_samples,):
                raise ValueError(f"store at {self.path}: array labels has shape {labels.shape}, but attribute "
                                 f"n_samples is {self.n_samples}{again}")
            _check_written(labels, "labels", self.path)

    @property
    def location(self) -> str | Location:
        """What tasks open the store from on any worker: the resolved local path, or the URL with its options."""
        return self.path if isinstance(self.path, Location) else str(self.path.resolve())

    def __repr__(self) -> str:
        return (
            f"MultiViewStore({str(self.path)!r}, n_samples={self.n_samples}, "
            f"view_names={self.view_names})"
        )

    @classmethod
    def create(
        cls,
        path: str | os.PathLike | Location,
        views: Sequence[ViewInput],
        y: Any = None,
        *,
        view_names: Sequence[str] | None = None,
        chunk_rows: int | None = None,
        metadata: dict | None = None,
        overwrite: bool = False,
        storage_options: dict | None = None,
    ) -> "MultiViewStore":
        """Write `views` (numpy, scipy.sparse or dask arrays, n rows each) and labels `y` to `path`: integer ids,
        or class names, stored as ids 0..C-1 in the names' sorted order with the names as ``class_names``.

        Dense float32/float64 views keep their dtype, other numeric views become float64;
        sparse views are stored as CSR. Dask arrays are written block by block, never
        computed whole, but for a dask array of scipy.sparse chunks, gathered as one CSR matrix (its non-zeros: it was
        written as a dense array; such chunks under a dense `_meta` are an error); NaN or infinite values are an
        error. `chunk_rows` defaults to ~32 MB chunks for the widest view, at least 1024 rows, at most n. The store is
        written next to `path` and replaces it only when complete: a failed create leaves
        `path` as it was, and dask views of the store being replaced are read before it goes. `path` may be an
        fsspec URL with `storage_options`, as for opening.
        """
        path = location(path, storage_options)
        views = view_list(views, view_names, y)
        columns = [column_names(v) for v in views]  # of pandas tables, kept for predict's check (feature_names_in_)
        views = [sp.csr_matrix(v.compute()) if isinstance(v, da.Array) and sp.issparse(v._meta) else
                 v if sp.issparse(v) or isinstance(v, da.Array) else np.asarray(v)
                 for v in views]
        names = check_view_names(view_names, len(views))
        n = check_view_shapes(views, names)
        labels, class_names = (None, None) if y is None else encode_labels(y, n)
        metadata = _to_json({} if metadata is None else metadata, "metadata")
        image_view(metadata, [view.shape[1] for view in views], names)
        rows = _default_chunk_rows(views, n) if chunk_rows is None else check_int("chunk_rows", chunk_rows)
        chunk_rows = min(rows, n)

        def write(target: Path | Location) -> None:
            root = _open_group(target, "w")
            for p, view in enumerate(views):
                _write_view(root, f"views/{p}", view, chunk_rows, view_label(p, names))
            if labels is not None:
                root.create_array("labels", data=labels, fill_value=_LABEL_FILL, dimension_names=["sample"],
                                  config=_WRITE)
            # Written last: a store whose create was interrupted has no format and fails to open.
            root.attrs.update(
                {
                    "format": FORMAT,
                    "format_version": FORMAT_VERSION,
                    "n_samples": n,
                    "view_names": names,
                    "metadata": metadata,
                    "content_id": uuid.uuid4().hex,  # new at every create; a copy keeps it (api.cache_store)
                    **({} if class_names is None else {"class_names": class_names}),
                    **({"column_names": [None if c is None else list(c) for c in columns]}
                       if any(c is not None for c in columns) else {}),
                }
            )

        (_write_then_replace_url if isinstance(path, Location) else _write_then_replace)(path, overwrite, write)
        return cls(path)

    def copy(self, path: str | os.PathLike, *, stages: bool = True, overwrite: bool = False) -> "MultiViewStore":
        """Copy the store file by file (no view is read whole) to `path`; ``stages=False`` leaves out the stage
        results, so every stage of a run on the copy is computed."""
        if isinstance(self.path, Location) or isinstance(location(path), Location):
            raise ValueError(f"cannot copy store {self.path} to {path}: copy() copies local stores; an object store "
                             "is read where it is")
        path, source = Path(path).expanduser(), self.path.resolve()
        target = path.resolve()
        if target == source or source in target.parents or target in source.parents:
            raise ValueError(f"cannot copy store {self.path} to {path}: the target is the store, inside it or "
                             "contains it")
        _write_then_replace(path, overwrite, lambda partial: _copy_files(source, partial, stages))
        return MultiViewStore(path)

    # ------------------------------------------------------------------ views

    @property
    def labels(self) -> np.ndarray | None:
        """Labels as a 1-D int64 array, or None if the store has none."""
        if "labels" not in self._root:
            return None
        try:
            labels = self._root["labels"][...]
        except Exception as exc:  # zarr/codec errors on a damaged chunk file
            raise ValueError(f"store {self.path}: labels are damaged (a chunk file is corrupt or truncated: "
                             f"{type(exc).__name__}: {exc})") from exc
        if (labels == _LABEL_FILL).any():  # a missing chunk file reads as the fill value
            raise ValueError(f"store {self.path}: labels are damaged (a chunk file was deleted)")
        if self.class_names is not None and labels.size and not 0 <= labels.min() <= labels.max() < len(
                self.class_names):
            raise ValueError(f"store {self.path}: its labels hold ids {labels.min()}..{labels.max()}, but attribute "
                             f"class_names names {len(self.class_names)} classes")
        return labels

    @property
    def given_labels(self) -> np.ndarray | None:
        """The labels as they were given: class names (strings) when the store keeps them, else ``labels``."""
        labels = self.labels
        return labels if labels is None or self.class_names is None else np.asarray(self.class_names)[labels]

    def is_sparse(self, p: int) -> bool:
        """Whether view `p` is stored as CSR."""
        return isinstance(self._view(p), zarr.Group)

    def view_shape(self, p: int) -> tuple[int, int]:
        """Shape (n_samples, n_features) of view `p`."""
        node = self._view(p)
        shape = node.attrs["shape"] if isinstance(node, zarr.Group) else node.shape
        return int(shape[0]), int(shape[1])

    def read_view(self, p: int) -> np.ndarray | sp.csr_matrix:
        """Whole view `p` in memory."""
        return self.read_rows(p, 0, self.n_samples)

    def read_rows(self, p: int, start: int, stop: int) -> np.ndarray | sp.csr_matrix:
        """Rows `start:stop` of view `p` (dense array or CSR matrix)."""
        node = self._view(p)
        if not 0 <= start <= stop <= self.n_samples:
            raise IndexError(f"rows {start}:{stop} out of range for {self.n_samples} samples")
        try:
            rows = _node_rows(node, start, stop)
        except Exception as exc:  # zarr/codec errors on a damaged chunk file
            if unreachable(exc) is not None:  # an object store out of reach: nothing to mend
                raise
            first, last = next(((s, e) for s, e in self._chunks_in(p, start, stop) if not self._readable(node, s, e)),
                                (start, stop))
            raise ValueError(f"store {self.path}: {view_label(p, self.view_names)} rows {first}:{last} cannot be "
                             f"read, a chunk file is corrupt or truncated ({type(exc).__name__}: {exc}); "
                             f"{RESTORE}") from exc
        values = rows.data if sp.issparse(rows) else rows
        if np.isnan(values).any():  # dense views are filled with NaN where a chunk file is missing
            row = start + int(rows_where(rows, np.isnan(values))[0])
            first, last = next((s, e) for s, e in self._chunks_in(p, start, stop) if s <= row < e)
            raise ValueError(f"store {self.path}: {view_label(p, self.view_names)} rows {first}:{last} hold missing "
                             f"values: a chunk file was deleted, or NaN was stored; {RESTORE}")
        return rows

    def _chunks_in(self, p: int, start: int, stop: int) -> list[tuple[int, int]]:
        """The stored row chunks of view `p` that rows start:stop overlap, clipped to them."""
        return [(max(s, start), min(e, stop)) for s, e in self.row_chunks(p) if s < stop and e > start]

    @staticmethod
    def _readable(node: zarr.Array | zarr.Group, start: int, stop: int) -> bool:
        try:
            _node_rows(node, start, stop)
        except Exception:  # noqa: BLE001 - as read_rows
            return False
        return True

    def view_dask(self, p: int) -> da.Array:
        """View `p` as a dask array of its stored row chunks, each read by read_rows where its task runs (a damaged or
        deleted chunk file is an error naming it; a sparse view's chunks are CSR matrices)."""
        node = self._view(p)
        sparse = isinstance(node, zarr.Group)
        dtype = node["data"].dtype if sparse else node.dtype
        meta = sp.csr_matrix((0, 0), dtype=dtype) if sparse else np.empty((0, 0), dtype)
        width = self.view_shape(p)[1]
        read = dask.delayed(_stored_rows, pure=True)  # its key: the store's location and content_id, the rows
        return da.concatenate([da.from_delayed(read(self.location, self.content_id, p, s, e), (e - s, width), dtype,
                                               meta=meta) for s, e in self.row_chunks(p)])

    def row_chunks(self, p: int) -> list[tuple[int, int]]:
        """(start, stop) row ranges of the stored chunks of view `p`."""
        node = self._view(p)
        step = node.attrs["chunk_rows"] if isinstance(node, zarr.Group) else node.chunks[0]
        return [(s, min(s + step, self.n_samples)) for s in range(0, self.n_samples, step)]

    def _view(self, p: int) -> zarr.Array | zarr.Group:
        if not 0 <= p < self.n_views:
            raise IndexError(f"view {p} out of range: store has {self.n_views} views")
        return self._views[p]

    # ----------------------------------------------------------------- stages

    def write_result(
        self, stage: str, name: str, value: np.ndarray | sp.spmatrix | dict, params: dict
    ) -> None:
        """Store result `name` of `stage`, computed with `params`.

        A stage holding results of other params is cleared first. The stage is marked
        incomplete until :meth:`mark_complete` is called.
        """
        _check_key(stage, "stage")
        _check_key(name, "result name")
        params = _to_json(params, "params")
        digest = _params_hash(params)
        root = _open_group(self.path, "r+")
        stages = _stages_group(self.path, root)
        try:
            same = _stage_group(root, stage).attrs.get("params_hash") == digest
        except (KeyError, _Unreadable):  # absent, or metadata that cannot be parsed: written anew
            same = False
        if not same:
            del stages[stage]
        self._whole.pop(stage, None)
        group = stages.require_group(stage)
        group.attrs.update({"params": params, "params_hash": digest, "complete": False, "files": None})
        del group[name]  # (deleting reads no metadata: also a damaged one's)
        _write_result(group, name, value)

    def _result(self, stage: str, name: str, group: zarr.Group | None = None) -> zarr.Array | zarr.Group:
        """Result `name` of `stage` (of its `group`, if given): KeyError if absent."""
        try:
            return (self._stage(stage) if group is None else group)[name]
        except KeyError:
            raise KeyError(f"stage {stage!r} of store {self.path} has no result {name!r}") from None

    def read_result(self, stage: str, name: str) -> np.ndarray | sp.csr_matrix | dict:
        """Result `name` of `stage`, its files checked against the stage's record first (unless has_stage found the
        stage whole); KeyError if absent, ValueError naming the stage if damaged."""
        group = self._stage(stage)
        node = self._result(stage, name, group)
        recorded = group.attrs.get("files")  # recorded when the stage completed
        if recorded is not None and stage not in self._whole:
            self._raise_damaged(stage, _stage_file_damage(self.path, stage, recorded, name))
        if isinstance(node, zarr.Array):
            return self._read(stage, name, lambda: node[...])
        if "sparse" in node.attrs:
            return self._read(stage, name, lambda: _read_csr(node, 0, node.attrs["shape"][0]))
        return node.attrs["json"]

    def read_results(self, stage: str, names: Sequence[str]) -> dict[str, np.ndarray | sp.csr_matrix | dict]:
        """read_result of each of `names`, concurrently (RESULT_READERS threads: on an object store each result's
        requests wait on the network, not on each other's)."""
        with ThreadPoolExecutor(max(1, min(len(names), RESULT_READERS))) as pool:
            return dict(zip(names, pool.map(lambda name: self.read_result(stage, name), names)))

    def read_result_rows(self, stage: str, name: str, start: int, stop: int) -> np.ndarray | sp.csr_matrix:
        """Rows start:stop of the array or sparse result `name` of `stage`, reading only the chunks they lie in."""
        node = self._result(stage, name)
        if isinstance(node, zarr.Array):
            return self._read(stage, name, lambda: node[start:stop])
        if "sparse" in node.attrs:
            return self._read(stage, name, lambda: _read_csr(node, start, stop))
        raise TypeError(f"result {name!r} of stage {stage!r} is a dict, it has no rows")

    def _read(self, stage: str, name: str, read: Callable[[], Any]) -> Any:
        """`read()`, any error of a damaged chunk file (codec errors, _read_csr's checks) as _raise_damaged's."""
        try:
            return read()
        except Exception as exc:  # zarr and its codecs raise many types on a damaged chunk file
            self._raise_damaged(stage, f"result {name!r} cannot be read: {type(exc).__name__}: {exc}", exc)

    def _raise_damaged(self, stage: str, damage: str | None, cause: BaseException | None = None) -> None:
        if damage is not None:
            raise self._damaged(stage, damage) from cause

    def _damaged(self, stage: str, damage: str) -> ValueError:
        return ValueError(f"store {self.path}: stage {stage!r} is damaged ({damage}); delete "
                          f"{self.path}/stages/{stage} and run again to recompute it")

    def stage_damage(self, stage: str, name: str | None = None, checksums: bool = True) -> str | None:
        """What is wrong with the files of `stage` (of its result `name` only, if given) against the sizes and
        (with ``checksums``) CRC-32s recorded when it completed, or None; a stage without that record, or whose
        metadata cannot be read, is reported as such; KeyError if there is no such stage."""
        try:
            recorded = _stage_group(self._root, stage).attrs.get("files")
        except _Unreadable as exc:
            return str(exc)
        return _stage_file_damage(self.path, stage, recorded, name, checksums)

    def has_stage(self, stage: str, params: dict, names: Sequence[str]) -> bool:
        """Whether `stage` was completed with `params` and holds all results `names` (one read of its metadata,
        then its recorded files checked before anything is read: a missing chunk must not read as data)."""
        try:
            group = _stage_group(self._root, stage)
            attrs = group.attrs.asdict()
        except KeyError:
            return False
        except _Unreadable as exc:
            damage = str(exc)
        else:
            if not (attrs.get("complete") is True
                    and attrs.get("params_hash") == _params_hash(_to_json(params, "params"))):
                return False
            damage = _stage_file_damage(self.path, stage, attrs.get("files"))
        if damage is not None:
            user_warning(f"store {self.path}: stage {stage!r} is damaged ({damage}); it is recomputed")
            return False
        if not set(names) <= {rel.split("/", 1)[0] for rel in attrs["files"]}:  # the record lists every result
            return False
        self._whole[stage] = group
        return True

    def mark_complete(self, stage: str) -> None:
        """Flag `stage` complete, recording the size and CRC-32 of each of its files (checked by has_stage and
        read_result); call after all its results are written."""
        self._stage(stage)
        group = _open_group(self.path, "r+")[f"stages/{stage}"]
        fs, folder = _files(self.path, f"stages/{stage}")
        files = {rel: record for rel, record in _file_record(fs, folder, crc=True).items()
                 if "/" in rel}  # the stage's own zarr.json, which these attributes go into, is not recorded
        group.attrs.update({"complete": True, "files": files})

    def record_data_files(self) -> None:
        """Record the size of each file of the views and labels in the metadata (``data_files``), for
        :meth:`damaged_data_file`: the CLI's check that its copy of the input is still whole."""
        self.update_metadata(data_files={f"{key}/{rel}": record for key in ("views", "labels")
                                         for rel, record in _file_record(*_files(self.path, key), crc=False).items()})

    def damaged_data_file(self) -> str | None:
        """The first file of the views and labels that is missing or has another size than record_data_files
        found, or None (also for a store without that record)."""
        recorded = self.metadata.get("data_files") or {}
        return _file_damage(*_files(self.path), recorded, named=False)

    def finished_stages(self) -> list[str]:
        """Names of the stages marked complete, and of those whose metadata cannot be read (stage_damage names
        them damaged)."""
        return [name for name, attrs in self._stage_attrs().items() if attrs is None or attrs.get("complete") is True]

    @property
    def content_id(self) -> str | None:
        """A random id written by ``create`` (None for a store written before it): the same views keep it, a store
        written again at the same path gets a new one."""
        return self._root.attrs.get("content_id")

    def image_view(self) -> tuple[int, tuple[int, int]] | None:
        """The view of images and their (height, width), from the metadata's ``image_shape`` (:func:`image_view`)."""
        try:
            return image_view(self.metadata, [self.view_shape(p)[1] for p in range(self.n_views)], self.view_names)
        except ValueError as exc:
            raise ValueError(f"store {self.path}: {exc}; correct it with update_metadata(image_shape=...), or "
                             "image_shape=None for no sample images") from None

    def update_metadata(self, **items: Any) -> None:
        """Add or replace entries of the store's ``metadata`` attribute."""
        items = _to_json(items, "metadata")
        image_view(items, [self.view_shape(p)[1] for p in range(self.n_views)], self.view_names)
        self.metadata = {**self.metadata, **items}
        _open_group(self.path, "r+").attrs["metadata"] = self.metadata

    def stages(self) -> dict[str, dict]:
        """Params of every stage in the store (complete or not) whose metadata can be read."""
        return {name: attrs.get("params", {}) for name, attrs in self._stage_attrs().items() if attrs is not None}

    def _stage_attrs(self) -> dict[str, dict | None]:
        """The attributes of each stage, by name (None where its metadata cannot be read), from a listing of the
        store's files: listing the zarr group would parse every stage's metadata."""
        fs, folder = _files(self.path, "stages")
        if not fs.exists(folder):
            return {}
        attrs = {}
        for entry in sorted(fs.ls(folder, detail=True), key=lambda entry: entry["name"]):
            if entry["type"] == "directory":
                name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
                try:
                    attrs[name] = _stage_group(self._root, name).attrs.asdict()
                except _Unreadable:
                    attrs[name] = None
                except (KeyError, ValueError):  # not a zarr group, or not a stage's name (e.g. .ipynb_checkpoints)
                    continue
        return attrs

    def _stage(self, stage: str) -> zarr.Group:
        """The group of `stage` (the one has_stage found whole, if it did): KeyError if absent, ValueError naming the
        stage if its metadata cannot be read."""
        if stage in self._whole:
            return self._whole[stage]
        try:
            return _stage_group(self._root, stage)
        except KeyError:
            raise KeyError(f"store {self.path} has no stage {stage!r}") from None
        except _Unreadable as exc:
            raise self._damaged(stage, str(exc)) from exc.__cause__


# ---------------------------------------------------------------- validation


def view_inputs(views, view_names: Sequence[str] | None,
                storage_options: dict | None = None) -> tuple[MultiViewStore | list, list[str] | None]:
    """The views as given, not read: a MultiViewStore (also from a path or URL), or a list of views (an iterator is
    consumed; array-likes become numpy, dask arrays stay lazy); and their names (``view_names``, else a store's)."""
    if isinstance(views, (str, os.PathLike, Location)):
        views = MultiViewStore(views, storage_options)
    if isinstance(views, MultiViewStore):
        data, names = views, views.view_names
    else:
        data = [X if is_lazy(X) or sp.issparse(X) or isinstance(X, np.ndarray) or not hasattr(X, "__array__")
                else np.asarray(X) for X in view_list(views, view_names)]
        names = None
    n_views = data.n_views if isinstance(data, MultiViewStore) else len(data)
    names = names if view_names is None else check_view_names(view_names, n_views)
    if not isinstance(data, MultiViewStore) and any(is_lazy(X) for X in data):
        check_view_shapes(data, names)  # from the metadata: unknown chunk sizes, dimensions, rows
    return data, names


def in_memory_views(views, view_names: Sequence[str] | None = None,
                    storage_options: dict | None = None) -> tuple[list, list[str] | None]:
    """``view_inputs`` read into memory: a store's views read whole (dask arrays are computed by the checks that
    follow); and their names."""
    data, names = view_inputs(views, view_names, storage_options)
    if isinstance(data, MultiViewStore):
        data = [data.read_view(p) for p in range(data.n_views)]
    return data, names


def is_lazy(X) -> bool:
    """Whether X is a dask array (read chunk by chunk)."""
    return hasattr(X, "compute") and not sp.issparse(X)


def check_view_shapes(views: list[ViewInput], names: list[str] | None) -> int:
    """Check every view (numpy, scipy.sparse or dask) is a non-empty numeric matrix with as many rows as view 0, from
    its metadata; return n."""
    for p, view in enumerate(views):
        label = view_label(p, names)
        if view.ndim != 2:
            raise ValueError(not_2d_message(label, view.ndim))
        if view.dtype.kind not in "biuf":
            raise ValueError(f"{label}: has dtype {view.dtype}, expected a numeric matrix")
        check_known_shape(view, label)
        if 0 in view.shape:
            raise ValueError(f"{label}: is empty (shape {view.shape})")
    return check_same_rows([view.shape[0] for view in views], names)


def image_view(metadata: dict, view_dims: Sequence[int], names: Sequence[str]) -> tuple[int, tuple[int, int]] | None:
    """The image view and (height, width) that ``metadata["image_shape"]`` ({"view": p, "shape": [h, w]}, for the
    report's sample images) gives, None without one: a view out of range or h x w other than its dimension is a
    ValueError naming the entry."""
    info = metadata.get("image_shape")
    if not info:
        return None
    try:
        view, (height, width) = info["view"], info["shape"]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()
                   for v in (view, height, width)):
            raise TypeError
        view, height, width = int(view), int(height), int(width)
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"metadata image_shape {info!r}: expected {{'view': p, 'shape': [height, width]}} "
                         "(integers)") from None
    if not 0 <= view < len(view_dims):
        raise ValueError(f"metadata image_shape {info!r}: no view {view} (the store has {len(view_dims)})")
    if height < 1 or width < 1 or height * width != view_dims[view]:
        raise ValueError(f"metadata image_shape {info!r}: {height} x {width} pixels, but {view_label(view, names)} has "
                         f"{view_dims[view]} features")
    return view, (height, width)


def _stored_rows(path: Path | Location, content_id: str | None, p: int, start: int,
                 stop: int) -> np.ndarray | sp.csr_matrix:
    """Rows start:stop of view `p` of the store at `path` (a view_dask task; `content_id` names the content read)."""
    return opened_once(path, content_id).read_rows(p, start, stop)


def _exists(where: Path | Location) -> bool:
    """Whether anything is stored at `where` (True when that cannot be told: the error said is the reader's)."""
    try:
        return where.exists()
    except Exception:  # noqa: BLE001 - fsspec's file systems raise their own types
        return True


@contextmanager
def unchanged_store(views, storage_options: dict | None = None) -> Iterator[Any]:
    """A fit or predict of `views` meanwhile (yielded as they are, a store's path or URL as the store opened), checked
    to have read one content when they are a store: a store written again since it was opened (its content_id
    changed, or it is unreadable after the run) is a ValueError saying so, also in place of the run's own error (a
    chunk missing while it was replaced); a store written before content_id existed is not checked."""
    if not isinstance(views, (str, os.PathLike, Location, MultiViewStore)):
        yield views
        return
    store = views if isinstance(views, MultiViewStore) else MultiViewStore(views, storage_options)
    before = store.content_id

    def replaced() -> bool:
        try:
            return MultiViewStore(store.location).content_id != before
        except ValueError:  # unreadable now: being written (else removed: the run's own error says it)
            return _exists(store.path)
        except Exception:  # noqa: BLE001 - out of reach (fsspec's own types): the run's own error, if any, stands
            return False

    said = (f"store {store.location}: written again (MultiViewStore.create over it) since it was opened or while "
            "it was read; run again on the store as it is now (open it again), once it is written")
    try:
        yield store
    except Exception as exc:
        if before is not None and replaced():
            raise ValueError(said) from exc
        raise
    if before is not None and replaced():
        raise ValueError(said)


def opened_once(path: Path | Location, content_id: str | None) -> "MultiViewStore":
    """The store at `path`, for a task reading its content `content_id`: opened once per process for all such tasks
    (opening reads every view's metadata, and on an object store checks the bucket); a store written before
    content_id existed is opened by each task."""
    return MultiViewStore(path) if content_id is None else _opened(path, content_id)


@functools.lru_cache(maxsize=8)
def _opened(path: Path | Location, content_id: str) -> "MultiViewStore":
    return MultiViewStore(path)


def _node_rows(node: zarr.Array | zarr.Group, start: int, stop: int) -> np.ndarray | sp.csr_matrix:
    """Rows start:stop of a stored view: a dense array, or a CSR group (_read_csr)."""
    return _read_csr(node, start, stop) if isinstance(node, zarr.Group) else node[start:stop]


def _on_worker() -> bool:
    """Whether this runs in a task on a Dask worker."""
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):  # no distributed, or not on a worker
        return False
    return True


class _StoreMismatch(ValueError):
    """A store attribute that disagrees with the store's arrays."""


def _format_version(value: Any) -> int | None:
    """The format_version attribute as an int (also given as a string of digits, or a whole float), else None."""
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    return None


def _check_written(array: zarr.Array, name: str, path: Path) -> None:
    """An array whose fill value could pass for data (not NaN, -1 in CSR indices, or the labels' mark) must have
    every chunk file: zarr would read a missing one as that value."""
    fill = array.fill_value
    sentinel = (np.isnan(fill) if array.dtype.kind == "f"
                else fill == _LABEL_FILL if name == "labels" else name.endswith(("indices", "indptr")) and fill < 0)
    if not sentinel and array.nchunks_initialized < array.nchunks:
        raise ValueError(f"store at {path}: array {name} has {array.nchunks - array.nchunks_initialized} of its "
                         f"{array.nchunks} chunk files missing, and its fill value {fill} would be read there as "
                         "data; write the store with MultiViewStore.create (its fill values mark missing chunks)")


def _files(path: Path | Location, key: str = "") -> tuple[Any, str]:
    """The fsspec file system of a store and the path of its node `key` there (of the store itself by default),
    freshly listed."""
    import fsspec

    if isinstance(path, Location):
        fs = path.filesystem()
        fs.invalidate_cache()  # zarr wrote through its own instance
        root = fs._strip_protocol(path.url)
        return fs, f"{root}/{key}" if key else root
    return fsspec.filesystem("file"), (path.resolve() / key).as_posix()


def _file_sizes(fs: Any, folder: str, under: Iterable[str] = ("",)) -> dict[str, int]:
    """The size of each file under ``folder`` (under its subfolders `under` only), by its path there, from one listing
    per subfolder (one request per 1000 files on an object store, not one per file); none when it is missing."""
    sizes = {}
    for sub in under:
        found = fs.find(f"{folder}/{sub}".rstrip("/"), detail=True)  # {} when missing
        sizes.update({file[len(folder) + 1:]: info["size"] for file, info in found.items() if info["type"] == "file"})
    return sizes


def _file_record(fs: Any, folder: str, crc: bool) -> dict[str, list[int]]:
    """[size] (and CRC-32 with ``crc``) of each file under ``folder``, by its path there (none when it is missing)."""
    sizes = dict(sorted(_file_sizes(fs, folder).items()))
    crcs = crc32s(fs, {f"{folder}/{rel}": size for rel, size in sizes.items()}) if crc else {}
    return {rel: [size, *([crcs[f"{folder}/{rel}"]] if crc else [])] for rel, size in sizes.items()}


def _file_damage(fs: Any, folder: str, recorded: dict[str, list[int]], named: bool = True) -> str | None:
    """What differs from a _file_record of ``folder`` (the files recorded only): "file REL is missing" or has
    another size or checksum (sizes checked first, from a listing: no file is read if one is wrong); just REL when
    not ``named``; None when nothing does."""
    sizes = _file_sizes(fs, folder, sorted({rel.split("/", 1)[0] for rel in recorded}))
    problems = {rel: "is missing" if rel not in sizes else f"has {sizes[rel]} bytes, {size} were written"
                for rel, (size, *_) in recorded.items() if sizes.get(rel) != size}
    if not problems:
        crcs = crc32s(fs, {f"{folder}/{rel}": size for rel, (size, *crc) in recorded.items() if crc})
        problems = {rel: "does not match the checksum written with it" for rel, (_, *crc) in recorded.items()
                    if crc and crcs[f"{folder}/{rel}"] != crc[0]}
    rel, problem = next(iter(problems.items()), (None, None))
    return None if rel is None else f"file {rel} {problem}" if named else rel


def _stage_file_damage(path: Path | Location, stage: str, recorded: dict[str, list[int]] | None,
                       name: str | None = None, checksums: bool = True) -> str | None:
    """_file_damage of the files of `stage` (of its result `name` only, if given) against their `recorded` sizes
    (and, with ``checksums``, CRC-32s); a stage without that record is reported as such."""
    if recorded is None:
        return "no record of its files, written by an older onmsc-dask"
    fs, folder = _files(path, f"stages/{stage}")
    return _file_damage(fs, folder, {rel: record if checksums else record[:1] for rel, record in recorded.items()
                                     if name is None or rel.split("/", 1)[0] == name})


def crc32(fs: Any, file: str) -> int:
    """CRC-32 of a file's bytes, read in blocks."""
    crc = 0
    with fs.open(file, "rb") as f:
        while block := f.read(1 << 24):
            crc = zlib.crc32(block, crc)
    return crc


#: threads read_results reads a stage's results with
RESULT_READERS = 8

#: bytes of files crc32s reads at once (one batch of concurrent requests on an object store)
CRC_BATCH_BYTES = 1 << 26


def crc32s(fs: Any, sizes: dict[str, int]) -> dict[str, int]:
    """CRC-32 of each file of ``sizes`` (path -> size): files of at most CRC_BATCH_BYTES read together in batches
    of that many bytes (fs.cat_ranges: concurrent requests on an object store, not one after another), a larger
    file alone, in blocks."""
    crcs = {file: crc32(fs, file) for file, size in sizes.items() if size > CRC_BATCH_BYTES}
    crcs |= {file: 0 for file, size in sizes.items() if size == 0}  # nothing to read (a range of 0 bytes is none)
    batches, total = [[]], 0
    for file in (f for f, size in sizes.items() if 0 < size <= CRC_BATCH_BYTES):
        if total + sizes[file] > CRC_BATCH_BYTES:
            batches.append([])
            total = 0
        batches[-1].append(file)
        total += sizes[file]
    for batch in filter(None, batches):
        data = fs.cat_ranges(batch, 0, [sizes[f] for f in batch], on_error="raise")
        crcs |= {file: zlib.crc32(block) for file, block in zip(batch, data)}
    return crcs


def _check_key(key: str, what: str) -> None:
    if not isinstance(key, str) or not key or "/" in key or key.startswith("."):
        raise ValueError(f"{what} must be a non-empty string without '/', got {key!r}")


def _to_json(obj: Any, what: str) -> Any:
    """A JSON round-tripped copy of `obj` (numpy scalars and arrays become Python values)."""

    def default(o: Any) -> Any:
        if isinstance(o, (np.generic, np.ndarray)):
            return o.tolist()
        raise TypeError(f"{type(o).__name__} is not JSON-serialisable")

    try:
        return json.loads(json.dumps(obj, sort_keys=True, default=default))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable: {exc}") from exc


def _params_hash(params: Any) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def _prepare_target(path: Path, overwrite: bool) -> None:
    """Refuse an existing path, unless `overwrite` and it is an empty dir or a zarr store."""
    if path.is_symlink():
        raise FileExistsError(f"{path} is a symbolic link; give the store's own path")
    if not path.exists():
        return
    if not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True to replace it")
    if not path.is_dir() or not ((path / "zarr.json").exists() or not any(path.iterdir())):
        raise FileExistsError(f"{path} exists and is not a zarr store; refusing to overwrite it")


#: the suffix of the store being written before it replaces the one at its path (_write_then_replace)
PARTIAL = ".onmsc-dask-partial"


def _copy_files(source: Path, target: Path, stages: bool) -> None:
    """Copy the files of the directory `source` (but its stages unless `stages`) to a new `target`, the first failure
    raised as it is (shutil.copytree copies on and raises one error listing every failed file: a full disk made a
    1,300-character line)."""
    def unreadable(error: OSError) -> None:  # os.walk skips a directory it cannot list, unless told
        raise error

    for folder, folders, files in os.walk(source, onerror=unreadable, followlinks=True):
        here = target / Path(folder).relative_to(source)
        here.mkdir(parents=True)
        if not stages and Path(folder) == source and "stages" in folders:
            folders.remove("stages")
        for name in files:
            shutil.copy2(Path(folder) / name, here / name)


def _write_then_replace(path: Path, overwrite: bool, write: Callable[[Path], None]) -> None:
    """Run `write` on `path`.onmsc-dask-partial, then replace `path` with it; on failure remove it and leave `path` as
    it was (no half-written store opens, and the inputs of `write` may be read from `path`). Only names no user picks
    are removed (a user's `path`.old or `path`.partial used to be)."""
    # absolute, as the system resolves it: the workers writing a dask view's chunks run in directories of their own
    path = path.resolve() if path.name in ("", ".", "..") else path.parent.resolve() / path.name
    _prepare_target(path, overwrite)
    partial = path.with_name(path.name + PARTIAL)
    shutil.rmtree(partial, ignore_errors=True)
    try:
        write(partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    old = path.with_name(path.name + ".onmsc-dask-old")  # renames only: the old store stays whole till the new is in
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    partial.rename(path)
    shutil.rmtree(old, ignore_errors=True)


class _Unreadable(Exception):
    """A stage whose zarr metadata cannot be parsed (its message says why)."""


def _stage_group(root: zarr.Group, stage: str) -> zarr.Group:
    """The group of `stage` in the store's ``root`` group: KeyError if absent, _Unreadable if its metadata cannot be
    parsed."""
    _check_key(stage, "stage")
    try:
        return root[f"stages/{stage}"]  # one lookup (KeyError if absent): each costs a request on an object store
    except KeyError:
        raise KeyError(stage) from None
    except (ValueError, TypeError) as exc:  # the JSON parser's errors, zarr's on invalid metadata (not I/O errors)
        raise _Unreadable(f"its metadata cannot be read: {type(exc).__name__}: {exc}") from exc


def _stages_group(path: Path | Location, root: zarr.Group) -> zarr.Group:
    """The group ``stages`` of the store at `path` (`root`, open for writing), made anew when its zarr.json cannot
    be parsed or a file stands in its place: that file says nothing else (each stage has its own metadata and is
    found by listing), so the stages in it are kept."""
    try:
        return root.require_group("stages")
    except (ValueError, TypeError, FileExistsError, NotADirectoryError):  # the JSON parser's, zarr's; a file there
        fs, folder = _files(path, "stages")
        fs.rm(folder if fs.isfile(folder) else f"{folder}/zarr.json")
        return root.require_group("stages")


def _zarr_v2_arrays(path: Path | Location) -> dict[str, tuple[int, ...]] | None:
    """The arrays of zarr format 2 data at `path` and their shapes ("." for one array, as _foreign_arrays_hint takes
    them), None if there is none."""
    url, options = (path.url, path.storage_options or None) if isinstance(path, Location) else (str(path), None)
    try:
        found = zarr.open(url, mode="r", zarr_format=2, storage_options=options)
    except Exception:  # noqa: BLE001 - not format 2 either: zarr's own error stands
        return None
    return ({".": found.shape} if isinstance(found, zarr.Array) else
            {name: found[name].shape for name in sorted(found.array_keys())})


def _open_group(path: Path | Location, mode: str) -> zarr.Group:
    return path.open_group(mode) if isinstance(path, Location) else zarr.open_group(path, mode=mode, zarr_format=3)


def _write_then_replace_url(target: Location, overwrite: bool, write: Callable[[Location], None]) -> None:
    """_write_then_replace for an object store: `write` to URL.onmsc-dask-partial, then the old store goes and the new
    one is copied in (object by object: unlike a local rename, not atomic). A refusal to list or write (a credential
    that may read the bucket, not write it) is a one-line ValueError, as check_bucket's."""
    target.check_bucket()
    try:
        _replace_url(target, overwrite, write)
    except PermissionError as exc:
        raise ValueError(f"{target.url}: writing refused; check that the credentials in storage_options or the "
                         f"environment may list and write the bucket ({' '.join(str(exc).split())})") from None


def _replace_url(target: Location, overwrite: bool, write: Callable[[Location], None]) -> None:
    """_write_then_replace_url's work once the bucket is known to be reachable."""
    if target.exists():
        if not overwrite:
            raise FileExistsError(f"{target} already exists; pass overwrite=True to replace it")
        if not target.filesystem().exists(f"{target.url}/zarr.json"):
            raise FileExistsError(f"{target} exists and is not a zarr store; refusing to overwrite it")
    partial = Location(f"{target.url}{PARTIAL}", target.storage_options)
    partial.remove()
    try:
        write(partial)
    except BaseException:
        partial.remove()
        raise
    target.remove()
    target.filesystem().copy(f"{partial.url}/", f"{target.url}/", recursive=True)
    partial.remove()


# ------------------------------------------------------------------- writing


def _default_chunk_rows(views: list[ViewInput], n: int) -> int:
    def row_bytes(view: ViewInput) -> int:
        itemsize = float_dtype(view.dtype).itemsize
        if sp.issparse(view):
            return math.ceil(view.nnz / n) * (itemsize + 8)
        return view.shape[1] * itemsize

    widest = max(max(row_bytes(v) for v in views), 1)
    return min(n, max(_MIN_CHUNK_ROWS, _CHUNK_BYTES // widest))


def _write_view(group: zarr.Group, name: str, view: ViewInput, chunk_rows: int, label: str) -> None:
    """Write `view` in row chunks, raising naming `label` on NaN or infinite values (each chunk checked once)."""
    dtype = float_dtype(view.dtype)
    if sp.issparse(view):
        view = sp.csr_matrix(view)
        if not view.has_canonical_format:  # one entry per position, on a copy (never the caller's matrix)
            view = view.copy()
            view.sum_duplicates()
        check_finite(view, label)
        _write_csr(group, name, view, dtype).attrs.update({"chunk_rows": chunk_rows})
        return
    n, d = view.shape
    array = group.create_array(name, shape=(n, d), dtype=dtype, chunks=(chunk_rows, d), fill_value=np.nan,
                               compressors=_CODEC, config=_WRITE,
                               dimension_names=["sample", f"feature{name.split('/')[-1]}"])  # as xarray reads them

    def finite(block: np.ndarray, start: int) -> np.ndarray:
        if sp.issparse(block):  # seen only here: probing a chunk first would compute it twice
            raise TypeError(f"{label}: its dask chunks are scipy.sparse matrices under a dense meta; make it with "
                            "meta=scipy.sparse.csr_matrix((0, 0)) (da.from_delayed, map_blocks) to store it as CSR")
        check_finite(block, label, first_row=start)
        return block

    if isinstance(view, da.Array):
        blocks = view.astype(dtype).rechunk((chunk_rows, d))
        checked = blocks.map_blocks(lambda b, block_id: finite(b, block_id[0] * chunk_rows), dtype=dtype)
        _store(checked, array)
        return
    for start in range(0, n, chunk_rows):
        array[start : start + chunk_rows] = finite(view[start : start + chunk_rows].astype(dtype), start)


def _store(source: da.Array, target: zarr.Array) -> None:
    """da.store(source, target), returning or raising once every block has finished. dask raises a block's error at
    once while other blocks may still be writing, and a write that ends after the caller removed the partial store
    would create it again. On a distributed client every block's task is waited for (but for one cancelled, by a
    lost connection or an interrupt, which may still be writing: a later create removes such a stale partial store
    first); on the threaded scheduler the blocks run in a pool of their own, shut down before the error
    propagates."""
    client = active_client()
    if client is not None:
        from distributed import futures_of, wait

        futures = futures_of(client.persist(da.store(source, target, lock=False, compute=False)))
        wait(futures)
        client.gather(futures)  # raises the first failed block's error
        return
    if dask.base.get_scheduler(collections=[source]) is not dask.threaded.get:
        da.store(source, target, lock=False)
        return
    pool = ThreadPoolExecutor(dask.config.get("num_workers", None) or CPU_COUNT)
    try:
        da.store(source, target, lock=False, scheduler="threads", pool=pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _write_csr(group: zarr.Group, name: str, matrix: Any, dtype: np.dtype) -> zarr.Group:
    """Write `matrix` as CSR arrays data/indices/indptr in a new subgroup `name`."""
    matrix = sp.csr_matrix(matrix)
    sub = group.create_group(name, attributes={"sparse": "csr", "shape": list(matrix.shape)})
    arrays = {"data": matrix.data.astype(dtype), "indices": matrix.indices, "indptr": matrix.indptr}
    for key, values in arrays.items():
        chunk = max(1, min(len(values), _CSR_CHUNK_BYTES // values.dtype.itemsize))
        # fill values no valid matrix holds, so a missing chunk file is detected by _read_csr
        fill = np.nan if values.dtype.kind == "f" else -1 if values.dtype.kind == "i" else 0
        sub.create_array(key, data=values, chunks=(chunk,), fill_value=fill, compressors=_CODEC, config=_WRITE,
                         dimension_names=["row_edge" if key == "indptr" else "nonzero"])
    return sub


def _write_result(group: zarr.Group, name: str, value: Any) -> None:
    if isinstance(value, dict):
        group.create_group(name, attributes={"json": _to_json(value, f"result {name!r}")})
    elif sp.issparse(value):
        _write_csr(group, name, value, value.dtype)
    elif isinstance(value, np.ndarray):  # NaN fill: a missing float chunk can never read as data
        group.create_array(name, data=value, fill_value=np.nan if value.dtype.kind == "f" else None,
                           compressors=_CODEC, config=_WRITE,
                           dimension_names=[f"{name}_{axis}" for axis in range(value.ndim)])
    else:
        raise TypeError(
            f"result {name!r}: expected a numpy array, scipy.sparse matrix or dict, "
            f"got {type(value).__name__}"
        )


def _read_csr(group: zarr.Group, start: int, stop: int) -> sp.csr_matrix:
    indptr = group["indptr"][start : stop + 1]
    lo, hi = int(indptr[0]), int(indptr[-1])
    data, indices = group["data"][lo:hi], group["indices"][lo:hi]
    shape = (stop - start, int(group.attrs["shape"][1]))
    # a missing chunk file reads as the fill value (-1, NaN; zeros in stores written before that, which only the
    # first two tests catch); an invalid CSR makes scipy crash instead of raising
    if (indptr[0] < 0 or (np.diff(indptr) < 0).any()
            or (len(indices) > 0 and not 0 <= indices.min() <= indices.max() < shape[1])
            or (data.dtype.kind == "f" and np.isnan(data).any())):
        raise ValueError(f"sparse array {group.path!r} rows {start}:{stop} are damaged (a chunk file is missing "
                         "or truncated)")
    return sp.csr_matrix((data, indices, indptr - lo), shape=shape)
