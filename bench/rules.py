"""Label-free rules for ``n_components`` and the per-view metric, scored afterwards with the labels.

- **cut**: c in {k, 1.25k, 1.5k, 2k}; per seed, the c whose k labels have the lowest mean normalized cut on the
  view graphs (the labels are always k clusters, so the cut compares across c).
- **consensus**: the k-cluster labels of every c = k..2k as one-hot columns (an anchor graph, no n x n matrix),
  clustered spectrally into k groups.
- **metric by cut** (exact-solver sets): for each dense view, among the graphs of the auto metric, euclidean,
  standardized euclidean and standardized cosine, the one whose own spectral clustering has the lowest
  normalized cut; then the default fit on the chosen graphs.

Seeds 0 and 1 (``random_state``), the sets and views of ``bench/components.py``. Prints markdown tables and writes
``bench/results/rules.json``; docs/solvers.md and docs/defaults.md discuss the results (all rules rejected).

    python bench/rules.py [--sets digits,MSRC-v5,...] [--out bench/results/rules.json]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from onmsc_dask import ONMSC
from onmsc_dask.assign import assign_labels
from onmsc_dask.graph import build_graph, resolve_graph_inputs
from onmsc_dask.metrics import evaluate
from onmsc_dask.spectral import anchor_embedding, exact_embedding, resolve_solver

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from components import RUNS, load, parse_args  # noqa: E402
from quality import _git_state  # noqa: E402

SEEDS = (0, 1)


def normalized_cut(graph: sp.csr_matrix, labels: np.ndarray, k: int, anchor: bool) -> float:
    """Mean over the k clusters of 1 - assoc(C, C) / vol(C), on A or, for an anchor matrix Z, on A = Z Lambda^-1 Z^T
    (whose degrees are 1)."""
    L = sp.csr_matrix((np.ones(len(labels)), (np.arange(len(labels)), labels)), shape=(len(labels), k))
    if anchor:
        B = graph @ sp.diags(1 / np.sqrt(np.maximum(np.asarray(graph.sum(axis=0)).ravel(), 1e-300)))
        within, volume = ((B.T @ L).toarray() ** 2).sum(axis=0), np.bincount(labels, minlength=k)
    else:
        within = (L.T @ graph @ L).diagonal()
        volume = L.T @ np.asarray(graph.sum(axis=1)).ravel()
    return float(np.mean(1 - within / np.maximum(volume, 1e-300)))


def view_graphs(views: list, k: int, solver: str, seed: int) -> list:
    """The default graph of every view: the kNN affinity, or the anchor matrix Z."""
    views, k, n_neighbors, metrics = resolve_graph_inputs(views, k, None, "auto")
    return [build_graph(X, solver, n_neighbors=n_neighbors, metric=m, n_landmarks=1000, n_nearest_landmarks=3,
                        random_state=seed)[0] for X, m in zip(views, metrics)]


def consensus(labelings: list[np.ndarray], k: int, seed: int) -> np.ndarray:
    """k clusters of the anchor graph whose columns are the one-hot labels of every labeling."""
    n = len(labelings[0])
    Z = sp.hstack([sp.csr_matrix((np.full(n, 1 / len(labelings)), (np.arange(n), lab)), shape=(n, k))
                   for lab in labelings]).tocsr()
    return assign_labels(anchor_embedding(Z, k, random_state=seed)[0], k, random_state=seed)[0]


def n_components_rules(views: list, y: np.ndarray, solver: str) -> list[dict]:
    k = len(np.unique(y))
    grid = sorted({k, round(1.25 * k), round(1.5 * k), 2 * k})
    rows = []
    for seed in SEEDS:
        graphs = view_graphs(views, k, solver, seed)
        labels = {c: ONMSC(k, embedding=solver, n_components=c, random_state=seed).fit(views).labels_
                  for c in range(k, 2 * k + 1)}
        acc = {c: evaluate(y, lab)["acc"] for c, lab in labels.items()}
        cuts = {c: np.mean([normalized_cut(g, labels[c], k, solver == "anchor") for g in graphs]) for c in grid}
        chosen = min(cuts, key=cuts.get)
        rows.append({"seed": seed, "acc": acc, "cut": cuts, "cut_rule_c": chosen, "cut_rule_acc": acc[chosen],
                     "consensus_acc": evaluate(y, consensus(list(labels.values()), k, seed))["acc"]})
    return rows


def standardized(X) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    scale = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1)


def metric_by_cut(views: list, y: np.ndarray) -> dict:
    """The per-view graph choice by its own clustering's cut, and the default fit with and without it."""
    k = len(np.unique(y))
    views, k, n_neighbors, metrics = resolve_graph_inputs(views, k, None, "auto")
    chosen_views, chosen_metrics, picks = [], [], []
    for X, metric in zip(views, metrics):
        candidates = {f"auto ({metric})": (X, metric)}
        if not sp.issparse(X):
            candidates |= {"euclidean": (X, "euclidean"), "standardized euclidean": (standardized(X), "euclidean"),
                           "standardized cosine": (standardized(X), "cosine")}
        cuts = {}
        for name, (data, m) in candidates.items():
            A = build_graph(data, "exact", n_neighbors=n_neighbors, metric=m, n_landmarks=0, n_nearest_landmarks=0,
                            random_state=0)[0]
            own = assign_labels(exact_embedding(A, k, 1, 0), k, random_state=0)[0]
            cuts[name] = normalized_cut(A, own, k, anchor=False)
        pick = min(cuts, key=cuts.get)
        picks.append(pick)
        chosen_views.append(candidates[pick][0])
        chosen_metrics.append(candidates[pick][1])
    return {"picks": picks, "acc": {
        rule: [evaluate(y, ONMSC(k, metric=m, random_state=seed).fit(v).labels_)["acc"] for seed in SEEDS]
        for rule, v, m in (("default", views, "auto"), ("metric by cut", chosen_views, chosen_metrics))}}


def main(argv: list[str] | None = None) -> dict:
    args, wanted = parse_args(argv, __doc__, "rules.json")
    results = []
    print("| set | solver | seed | ACC at c = k .. 2k | cut rule: c, ACC | consensus ACC |\n"
          "| --- | --- | ---: | --- | --- | ---: |")
    for name, solver in RUNS:
        data = None if wanted is not None and name not in wanted else load(name)
        if data is None or solver != resolve_solver("auto", len(data[1])):  # each set with its default solver
            continue
        views, y = data[0], np.asarray(data[1]).ravel()
        entry = {"set": name, "solver": solver, "n_components": n_components_rules(views, y, solver)}
        for r in entry["n_components"]:
            print(f"| {name} | {solver} | {r['seed']} | {' '.join(f'{a:.3f}' for a in r['acc'].values())} | "
                  f"{r['cut_rule_c']}, {r['cut_rule_acc']:.3f} | {r['consensus_acc']:.3f} |", flush=True)
        if solver == "exact":
            entry["metric_by_cut"] = metric_by_cut(views, y)
        results.append(entry)
    print("\n| set | graph chosen per view by its own cut | default ACC | ACC with the chosen graphs |\n"
          "| --- | --- | --- | --- |")
    for entry in results:
        if "metric_by_cut" in entry:
            m = entry["metric_by_cut"]
            print(f"| {entry['set']} | {', '.join(m['picks'])} | {' / '.join(f'{a:.3f}' for a in m['acc']['default'])}"
                  f" | {' / '.join(f'{a:.3f}' for a in m['acc']['metric by cut'])} |")
    report = {"seeds": list(SEEDS), "git": _git_state(), "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=float) + "\n")
    return report


if __name__ == "__main__":
    main()
