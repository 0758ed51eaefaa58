"""onmsc-dask: Optimal Neighborhood Multi-view Spectral Clustering with high-order Laplacians on Dask."""
from .api import ONMSC
from .metrics import evaluate
from .store import MultiViewStore

__version__ = "0.1.0"
__all__ = ["ONMSC", "MultiViewStore", "evaluate", "__version__"]
