"""How the small-cluster refit's criterion would decide if the refit ran on every set: seed 0, each ``.mat`` of the
suite fitted at its default N0 and at N1: the rule's (half the smallest cluster found) where it fires, N0 / 2 (at
least 5) elsewhere; labels used only for scoring.

For each pair: ACC of both fits, the k-means distortion of each read-out (selection.distortion, median of 5 seeds),
the mean normalized cut of both fits' labels on both fits' graphs (assign.mean_normalized_cut), and which N each
criterion keeps: "cut" (the rule: the N1 labels cut the graphs of both N more cleanly) and "distortion" (any lower
distortion at N1, the former rule without its noise guard). A criterion is right when it keeps the fit of higher ACC.
Prints a markdown table and writes ``bench/results/refit_criterion.json``; docs/defaults.md ("Imbalanced clusters").

    python bench/refit_criterion.py [--data-dir DIR] [--sets A,B] [--out bench/results/refit_criterion.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from onmsc_dask import ONMSC
from onmsc_dask.assign import mean_normalized_cut, readout
from onmsc_dask.graph import default_n_neighbors, smallest_cluster_neighbors
from onmsc_dask.io import load_mat
from onmsc_dask.metrics import evaluate
from onmsc_dask.selection import distortion

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from quality import DEFAULT_DATA, _git_state, dataset_files  # noqa: E402


def compare(views: list, y: np.ndarray, seed: int = 0) -> dict:
    k = len(np.unique(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        N0 = default_n_neighbors(len(y), k)
        first = ONMSC(k, n_neighbors=N0, random_state=seed, keep_intermediate=True).fit(views)
        N1 = smallest_cluster_neighbors(first.labels_, k, N0)  # the rule's N1 where it fires, else half N0
        fits = [first, ONMSC(k, n_neighbors=N1 if N1 != N0 else max(5, round(N0 / 2)), random_state=seed,
                             keep_intermediate=True).fit(views)]
    # related_views_ covers every input view, view_graphs_ the views not left out
    graphs = [[g for g, kept in zip(f.view_graphs_, np.delete(f.related_views_, f.left_out_views_)) if kept]
              for f in fits]
    cuts = [[mean_normalized_cut(g, f.labels_, k) for f in fits] for g in graphs]
    acc = [evaluate(y, f.labels_)["acc"] for f in fits]
    dist = [float(np.median([distortion(readout(f.embedding_, f.fusion_target_, k), k, np.random.default_rng(r))
                             for r in range(5)])) for f in fits]
    keep = {"cut": int(all(c[1] < c[0] for c in cuts)), "distortion": int(dist[1] < dist[0])}
    return {"N": [f.n_neighbors_ for f in fits], "acc": acc, "distortion": dist, "cuts": cuts, "keeps": keep,
            "right": {name: acc[kept] >= max(acc) for name, kept in keep.items()},
            "acc_change": {name: acc[kept] - acc[0] for name, kept in keep.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", type=lambda s: s.split(","), default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "refit_criterion.json")
    args = ap.parse_args(argv)
    rows = {}
    print("| set | N0 / N1 | ACC N0 / N1 | distortion N0 / N1 | cut on N0 graphs (labels N0 / N1) | on N1 graphs "
          "| cut keeps | distortion keeps |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in dataset_files(args.data_dir, args.sets):
        r = rows[path.stem] = compare(*load_mat(path))
        pair = lambda xs, f: " / ".join(f"{x:{f}}" for x in xs)  # noqa: E731
        kept = {name: f"N = {r['N'][i]} ({'right' if r['right'][name] else 'wrong'})" for name, i in r["keeps"].items()}
        print(f"| {path.stem} | {pair(r['N'], 'd')} | {pair(r['acc'], '.3f')} | {pair(r['distortion'], '.4f')} | "
              f"{pair(r['cuts'][0], '.4f')} | {pair(r['cuts'][1], '.4f')} | {kept['cut']} | {kept['distortion']} |",
              flush=True)
    for name in ("cut", "distortion"):
        print(f"{name}: right on {sum(r['right'][name] for r in rows.values())} of {len(rows)}, summed ACC change "
              f"{sum(r['acc_change'][name] for r in rows.values()):+.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"git": _git_state(), "sets": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
