"""``python -m onmsc_dask`` and the ``onmsc-dask`` command: the command line (onmsc_dask.cli), imported here so that
a Ctrl-C while its modules load is one line too."""
from __future__ import annotations

import sys


def entry() -> int:
    """``cli.main()``; a Ctrl-C before the run handles it (while dask, numpy and the rest are imported, or the
    arguments parsed) ends in one line and exit code 130, not a traceback."""
    try:
        from .cli import main

        return main()
    except KeyboardInterrupt:
        print("onmsc-dask: interrupted while starting; nothing was run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(entry())
