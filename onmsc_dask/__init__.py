"""onmsc-dask: Optimal Neighborhood Multi-view Spectral Clustering with high-order Laplacians on Dask."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import ONMSC
    from .metrics import evaluate
    from .store import MultiViewStore

__version__ = "0.1.0"
__all__ = ["ONMSC", "MultiViewStore", "__version__", "evaluate"]
_MODULES = {"ONMSC": ".api", "MultiViewStore": ".store", "evaluate": ".metrics"}


def __getattr__(name: str) -> Any:
    """The top-level names, imported on first use: importing one submodule (e.g. onmsc_dask.store) then loads only
    what it needs, not scikit-learn and the fit."""
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(_MODULES[name], __name__), name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
