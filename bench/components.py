"""ACC with more eigenvectors than clusters: ``ONMSC(k, n_components=c)`` for c = k, 1.5k and 2k (the default is
k below 500 samples per cluster, else 2k: validation.default_n_components).

Three seeds (``random_state`` 0, 1, 2) for c = k, 1.5k and 2k on the embedded digits, the ``.mat`` sets of
``../shared/data``, the MNIST test set (``../shared/data/mnist-t10k``, exact and anchor) and Fashion-MNIST 60k
(``/usr/share/datasets/fashion-mnist``, anchor), the image sets as the three views of ``pipelines/mnist60k.py``.
Sets whose files are missing are skipped. Prints a markdown table and writes ``bench/results/components.json``.

    python bench/components.py [--sets digits,MSRC-v5,...] [--out bench/results/components.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from onmsc_dask import ONMSC
from onmsc_dask.datasets import load_digits_views
from onmsc_dask.io import load_mat, load_mnist_dir
from onmsc_dask.metrics import evaluate
from onmsc_dask.validation import default_n_components

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
FASHION = Path("/usr/share/datasets/fashion-mnist")
sys.path[:0] = [str(ROOT / "pipelines"), str(ROOT / "bench")]
import mnist60k  # noqa: E402
from quality import _git_state  # noqa: E402

#: (set, solver): the solver each set is measured with (the default one, plus anchor for MNIST)
RUNS = [("digits", "exact"), ("BBCSport", "exact"), ("Handwritten", "exact"), ("MSRC-v5", "exact"),
        ("3Sources", "exact"), ("mnist-t10k", "exact"), ("mnist-t10k", "anchor"), ("fashion-mnist", "anchor")]
SEEDS = (0, 1, 2)


def load(name: str) -> tuple[list, np.ndarray] | None:
    """Views and labels of a set, or None when its files are not on this machine."""
    if name == "digits":
        return load_digits_views()[:2]
    if name in ("mnist-t10k", "fashion-mnist"):
        directory = SHARED / name if name == "mnist-t10k" else FASHION
        if not directory.is_dir():
            return None
        images, y = load_mnist_dir(directory, "t10k" if name == "mnist-t10k" else "train")
        return mnist60k.image_views(images), y
    path = SHARED / f"{name}.mat"
    return load_mat(path) if path.exists() else None


def measure(views: list, y: np.ndarray, solver: str) -> list[dict]:
    k = len(np.unique(y))
    rows, default = [], default_n_components(len(y), k)
    for c in (k, int(round(1.5 * k)), 2 * k):
        accs, seconds = [], []
        for seed in SEEDS:
            t = time.perf_counter()
            est = ONMSC(k, embedding=solver, n_components=c, random_state=seed).fit(views)
            seconds.append(time.perf_counter() - t)
            accs.append(evaluate(y, est.labels_)["acc"])
        rows.append({"n_components": c, "default": c == default, "acc": accs, "mean_acc": float(np.mean(accs)),
                     "median_seconds": float(np.median(seconds))})
    return rows


def parse_args(argv: list[str] | None, doc: str, out_name: str) -> tuple[argparse.Namespace, set[str] | None]:
    """--sets (a subset of RUNS' sets; None: all) and --out (default bench/results/`out_name`)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--sets", help="comma-separated subset of " + ", ".join(dict.fromkeys(n for n, _ in RUNS)))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / out_name)
    args = ap.parse_args(argv)
    return args, None if args.sets is None else set(args.sets.split(","))


def main(argv: list[str] | None = None) -> dict:
    args, wanted = parse_args(argv, __doc__, "components.json")
    results = []
    print("| set | solver | n_components | ACC per seed | mean | fit s |\n| --- | --- | ---: | --- | ---: | ---: |")
    for name, solver in RUNS:
        data = None if wanted is not None and name not in wanted else load(name)
        if data is None:
            continue
        views, y = data
        for row in measure(views, np.asarray(y).ravel(), solver):
            results.append({"set": name, "solver": solver, **row})
            c = f"{row['n_components']}{' (default)' if row['default'] else ''}"
            print(f"| {name} | {solver} | {c} | {' / '.join(f'{a:.4f}' for a in row['acc'])} | "
                  f"{row['mean_acc']:.4f} | {row['median_seconds']:.1f} |", flush=True)
    report = {"seeds": list(SEEDS), "git": _git_state(), "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
