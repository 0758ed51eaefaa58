"""onmsc-dask: Optimal Neighborhood Multi-view Spectral Clustering with high-order Laplacians on Dask."""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["ONMSC", "MultiViewStore", "evaluate", "__version__"]
_MODULES = {"ONMSC": ".api", "MultiViewStore": ".store", "evaluate": ".metrics"}


def __getattr__(name: str) -> Any:
    """The top-level names, imported on first use: importing one submodule (e.g. onmsc_dask.store) then loads only
    what it needs, not scikit-learn and the fit."""
    if name in _MODULES:
        return getattr(importlib.import_module(_MODULES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
