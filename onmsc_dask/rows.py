"""The chain's input: every view as row chunks that tasks read on the workers (docs/pipeline.md).

A MultiViewStore's chunks are read by the task that uses them (``StoredRows``); a dask array's chunks are its own
tasks, computed on the workers; numpy and scipy.sparse views are split into row chunks sent to the workers once
(cluster.scattered). No view is gathered whole on the client.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .cluster import scattered
from .validation import float_dtype

#: rows per chunk of in-memory views (numpy, scipy.sparse)
CHUNK_ROWS = 8192


class StoredRows(NamedTuple):
    """Rows start:stop of view p of the store at ``location``, read by the task that takes them."""

    location: Any
    p: int
    start: int
    stop: int

    def read(self) -> np.ndarray | sp.csr_matrix:
        from .store import MultiViewStore

        return MultiViewStore(self.location).read_rows(self.p, self.start, self.stop)


def read_rows(block: Any) -> np.ndarray | sp.csr_matrix:
    """A row chunk's rows (a StoredRows is read here, on the worker; other chunks arrive as data), integer, boolean
    and float16 values as float64 (squared norms of uint8 rows wrapped around), float32 and float64 as they are."""
    rows = block.read() if isinstance(block, StoredRows) else block
    return rows.astype(float_dtype(rows.dtype), copy=False)


@dataclass
class RowChunks:
    """The views of one fit as row chunks: per view the (start, stop) ranges and one block per range (a
    StoredRows, a dask Delayed, a Future or an array), and the first rows of each view on the client."""

    n_samples: int
    n_features: list[int]
    chunks: list[list[tuple[int, int]]]
    blocks: list[list[Any]]
    view_names: list[str] | None
    sources: list[Any]  # per view: its StoredRows (all rows), the dask array or the in-memory view (first_rows)

    @property
    def n_views(self) -> int:
        return len(self.chunks)

    def first_rows(self, p: int, count: int) -> np.ndarray | sp.csr_matrix:
        """The first ``count`` rows of view p, on the client."""
        source = self.sources[p]
        if isinstance(source, StoredRows):
            return source._replace(stop=min(count, source.stop)).read()
        rows = source[:count]
        return rows.compute() if hasattr(rows, "compute") else rows


def store_rows(store: Any, views: list[int] | None = None) -> RowChunks:
    """A MultiViewStore's views (those at positions ``views``, default all), each stored row chunk read by the task
    that uses it."""
    views = list(range(store.n_views)) if views is None else views
    chunks = [store.row_chunks(p) for p in views]
    return RowChunks(store.n_samples, [store.view_shape(p)[1] for p in views], chunks,
                     [[StoredRows(store.location, p, s, e) for s, e in c] for p, c in zip(views, chunks)],
                     None if store.view_names is None else [store.view_names[p] for p in views],
                     [StoredRows(store.location, p, 0, store.n_samples) for p in views])


def _ranges(sizes: tuple[int, ...]) -> list[tuple[int, int]]:
    stops = np.cumsum(sizes).tolist()
    return list(zip([0] + stops[:-1], stops))


def array_rows(views: list, view_names: list[str] | None = None, chunk_rows: int = CHUNK_ROWS) -> RowChunks:
    """numpy / scipy.sparse views split into row chunks of ``chunk_rows``, sent to the workers once; dask arrays
    by their own row chunks (one column chunk each), computed on the workers."""
    n = views[0].shape[0]
    chunks, blocks = [], []
    for X in views:
        if hasattr(X, "to_delayed"):
            X = X.rechunk({1: -1})
            chunks.append(_ranges(X.chunks[0]))
            blocks.append(list(X.to_delayed().ravel()))
        else:
            chunks.append([(s, min(s + chunk_rows, n)) for s in range(0, n, chunk_rows)])
            parts = [X[s:e] for s, e in chunks[-1]]
            sent = scattered(parts)
            blocks.append(list(sent))
    return RowChunks(n, [X.shape[1] for X in views], chunks, blocks, view_names, list(views))
