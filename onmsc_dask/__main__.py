"""``python -m onmsc_dask``: the ``onmsc-dask`` command line."""
from .cli import main

raise SystemExit(main())
