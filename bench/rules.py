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

``--suite A,B,...``: the defaults and variants of them (``VARIANTS``: patched package rules or other ONMSC
arguments) on every ``.mat`` of the suite, mean ACC per set over ``--seeds``, and the leave-one-set-out check of each
variant against the first (adopted when the other 9 sets' mean ACC rises; the held-out set's change). Fits are cached
in ``bench/results/rules_cache.json`` by (variant, set and its file's hash, seed, package code hash); docs/defaults.md
has the results.

    python bench/rules.py [--sets digits,MSRC-v5,...] [--out bench/results/rules.json]
    python bench/rules.py --suite "defaults,N cap 30,no refine" [--seeds 0,1,2] [--data-dir DIR] [--sets ...]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from onmsc_dask import ONMSC
from onmsc_dask.assign import assign_labels, mean_normalized_cut
from onmsc_dask.graph import build_graph, resolve_graph_inputs
from onmsc_dask.metrics import evaluate
from onmsc_dask.spectral import anchor_embedding, exact_embedding, resolve_solver

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from components import RUNS, load, parse_args  # noqa: E402
from quality import _git_state  # noqa: E402

SEEDS = (0, 1)


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
        cuts = {c: mean_normalized_cut(graphs, labels[c], k, anchor=solver == "anchor") for c in grid}
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
            cuts[name] = mean_normalized_cut([A], own, k)
        pick = min(cuts, key=cuts.get)
        picks.append(pick)
        chosen_views.append(candidates[pick][0])
        chosen_metrics.append(candidates[pick][1])
    return {"picks": picks, "acc": {
        rule: [evaluate(y, ONMSC(k, metric=m, random_state=seed).fit(v).labels_)["acc"] for seed in SEEDS]
        for rule, v, m in (("default", views, "auto"), ("metric by cut", chosen_views, chosen_metrics))}}


def main(argv: list[str] | None = None) -> dict:
    if argv is None and "--suite" in sys.argv or argv is not None and "--suite" in argv:
        return suite_main(sys.argv[1:] if argv is None else argv)
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



# ---- suite ablations of the defaults (issue 21): python bench/rules.py --suite VARIANT,... ----

SUITE_CACHE = ROOT / "bench" / "results" / "rules_cache.json"


def _patched(patches: dict):
    """A context manager setting ``module.attribute`` to each value of ``patches`` ({"graph.x": value}, or
    {"api.ONMSC.method": value}, an attribute of a class) meanwhile."""
    import contextlib
    import functools
    import importlib

    @contextlib.contextmanager
    def manager():
        old = {}
        try:
            for target, value in patches.items():
                module, *path, name = target.split(".")
                mod = functools.reduce(getattr, path, importlib.import_module(f"onmsc_dask.{module}"))
                old[(mod, name)] = mod.__dict__[name] if isinstance(mod, type) else getattr(mod, name)
                setattr(mod, name, value)
            yield
        finally:
            for (mod, name), value in old.items():
                setattr(mod, name, value)
    return manager()


def _scaled_lambda2(factor: float):
    """ONMSC._fixed_lambda with lambda2="auto" at ``factor`` times its rule (width * O)."""
    fixed = ONMSC.__dict__["_fixed_lambda"].__func__

    def rule(name: str, value, auto: float):
        return fixed(name, value, auto * factor if name == "lambda2" else auto)
    return staticmethod(rule)


def _capped_neighbors(cap: int):
    import onmsc_dask.graph as graph

    def rule(n_samples: int, n_clusters: int) -> int:
        return int(min(n_samples - 1, np.clip(round(n_samples / (2 * n_clusters)), 5, cap)))
    rule.__doc__ = graph.default_n_neighbors.__doc__
    return rule


def _regularized_affinity():
    """graph.NormalizedHighOrderAffinity with degrees d + mean(d) (degree-regularized spectral clustering, Qin & Rohe
    2013): weakly linked groups of samples no longer take the top eigenvectors."""
    import onmsc_dask.graph as graph

    class Regularized(graph.NormalizedHighOrderAffinity):
        def __init__(self, A, order: int):
            super().__init__(A, order)
            degrees = self.power(np.ones(A.shape[0]))
            self.inv_sqrt_degrees = graph.inv_sqrt(degrees + degrees.mean())
    return Regularized


def _without_narrow_views(views, n_clusters: int, names=None):
    """validation.informative_views, also leaving out the views with fewer features than clusters."""
    from onmsc_dask.validation import informative_views

    checked, kept = informative_views(views, n_clusters, names)
    wide = [i for i, X in enumerate(checked) if X.shape[1] >= n_clusters] or list(range(len(checked)))
    return [checked[i] for i in wide], [kept[i] for i in wide]


def _without_line_views(views, n_clusters: int, names=None, float32: bool = False):
    """validation.informative_views, also leaving out the line views (fewer than graph.LINE_VIEW_COLUMNS
    graph.effective_columns in their value metric) instead of standardizing them, unless all are."""
    from onmsc_dask.graph import LINE_VIEW_COLUMNS, effective_columns, value_metric, value_summary
    from onmsc_dask.validation import informative_views

    checked, kept = informative_views(views, n_clusters, names, float32)
    wide = [i for i, X in enumerate(checked)
            if effective_columns(X, value_metric(*value_summary(X), X.shape[1])) >= LINE_VIEW_COLUMNS]
    wide = wide or list(range(len(checked)))
    return [checked[i] for i in wide], [kept[i] for i in wide]


def _sublinear_term_weights(min_value: float, zero_fraction: float, integer: bool, n_features: int) -> str:
    """graph.value_metric without its integer condition: non-negative views of at least 90% zeros (counts or term
    weights, dense or sparse) get log(1 + x) and cosine."""
    if min_value < 0 or n_features == 1:
        return "euclidean"
    return "counts" if zero_fraction >= 0.9 else "cosine"


def _standardized_euclidean():
    """graph.metric_for, with ``standardized`` (columns divided by their standard deviation) where it gives
    ``euclidean`` to a view of more than one feature (real values of either sign)."""
    import onmsc_dask.graph as graph
    original = graph.metric_for

    def metric_for(min_value, zero_fraction, integer, n_features, effective=np.inf):
        metric = original(min_value, zero_fraction, integer, n_features, effective)
        return "standardized" if metric == "euclidean" and n_features > 1 else metric
    return metric_for


def column_scale_spread(X) -> float:
    """The 95th over the 5th percentile of a view's column standard deviations (of the columns that vary)."""
    X = X.toarray() if hasattr(X, "toarray") else np.asarray(X, float)
    sd = X.std(axis=0)
    sd = sd[sd > 0]
    return float(np.percentile(sd, 95) / np.percentile(sd, 5)) if sd.size else 1.0


def _scale_spread_views(spread: float):
    """graph.view_facts, with no effective columns (so ``auto`` gives ``standardized``) for a view of more than one
    feature whose column scales (column_scale_spread) differ by at least `spread`: columns in different units."""
    import onmsc_dask.graph as graph
    original = graph.view_facts

    def view_facts(X, with_row_ids=True):
        facts = original(X, with_row_ids)
        if X.shape[1] > 1 and column_scale_spread(X) >= spread:
            facts["effective"] = 0.0
        return facts
    return view_facts


def _columns_below_clusters():
    """graph.resolve_view_inputs with the line-view threshold at k (fewer effective columns than clusters, so fewer
    directions than a k-wide embedding) instead of graph.LINE_VIEW_COLUMNS (2, which k = 2 gives too)."""
    import onmsc_dask.graph as graph
    original = graph.resolve_view_inputs

    def resolve_view_inputs(facts, n_clusters, *args, **kwargs):
        k = max(int(n_clusters), 2)
        facts = [{**f, "effective": f["effective"] * graph.LINE_VIEW_COLUMNS / k} for f in facts]
        return original(facts, n_clusters, *args, **kwargs)
    return resolve_view_inputs


def _equal_diagonal_alignment():
    """fusion.alignment_matrix scaled to an equal diagonal (M_pq / sqrt(M_pp M_qq) times the mean M_pp): the
    diversity term then penalizes redundancy only, not a view's strength (with the eigenvalue scaling a view whose
    graph separates the clusters weakly has a smaller M_pp, so a smaller penalty on its own weight). It reaches
    fusion.shared_structure too (the related-views test), whose bare eigenvectors have M_pp = 1 already."""
    import onmsc_dask.fusion as fusion
    original = fusion.alignment_matrix

    def alignment_matrix(H):
        M = original(H)
        d = np.sqrt(np.maximum(np.diag(M), np.finfo(float).tiny))
        return M / np.outer(d, d) * np.mean(np.diag(M))
    return alignment_matrix


def _bare_alignment():
    """fusion.alignment_matrix of the bare eigenvectors (the paper's orthonormal H_p^(o), M_pp = O) while late fusion
    keeps fusing the eigenvalue-scaled factors: the diversity term then measures the views' shared subspaces only,
    and a weakly separating graph's smaller eigenvalues no longer lower the penalty on its own weight."""
    import onmsc_dask.fusion as fusion
    original = fusion.alignment_matrix

    def alignment_matrix(H):
        return original(fusion.ScaledViews(H.H, None, H.used) if isinstance(H, fusion.ScaledViews) else H)
    return alignment_matrix


def _refit_below_2n(labels: np.ndarray, n_clusters: int, n_neighbors: int) -> int:
    """graph.smallest_cluster_neighbors as it was until commit 0de2cdc: firing for a smallest cluster found below 2N
    (half its size below N), not only for one of at most N samples (the refit kept by today's criterion,
    the cuts of ONMSC._refit_for_cluster_sizes, not by the lower distortion of that commit)."""
    return int(min(n_neighbors, max(5, round(np.bincount(labels, minlength=n_clusters).min() / 2))))


#: variants of the defaults: name -> (patches of package attributes, ONMSC keyword arguments)
VARIANTS = {
    "defaults": ({}, {}),
    "N cap 15": ({"graph.default_n_neighbors": _capped_neighbors(15)}, {}),
    "N cap 30": ({"graph.default_n_neighbors": _capped_neighbors(30)}, {}),
    "N cap 50": ({"graph.default_n_neighbors": _capped_neighbors(50)}, {}),
    "N cap 100": ({"graph.default_n_neighbors": _capped_neighbors(100)}, {}),
    "order 1": ({}, {"order": 1}),
    "order 3": ({}, {"order": 3}),
    "no eigenvalue scaling": ({}, {"eigenvalue_scaling": False}),
    "lambda1 0.5": ({}, {"lambda1": 0.5}),
    "lambda1 2": ({}, {"lambda1": 2.0}),
    **{f"lambda2 {factor} x auto": ({"api.ONMSC._fixed_lambda": _scaled_lambda2(factor)}, {}) for factor in (0.5, 2)},
    "no refine": ({}, {"refine": False}),
    "refine on kNN graphs": ({}, {"refine": True}),
    "leave out views with fewer features than clusters": ({"api.informative_views": _without_narrow_views}, {}),
    "regularized degrees": ({"graph.NormalizedHighOrderAffinity": _regularized_affinity(),
                             "spectral.NormalizedHighOrderAffinity": _regularized_affinity()}, {}),
    "average F": ({}, {"consensus_graph": "average"}),
    "keep unrelated": ({}, {"drop_unrelated_views": False}),
    "no line-view rule": ({"graph.LINE_VIEW_COLUMNS": 0.0}, {}),
    "leave out line views": ({"api.informative_views": _without_line_views}, {}),
    "sublinear term weights": ({"graph.value_metric": _sublinear_term_weights}, {}),
    "standardized euclidean views": ({"graph.metric_for": _standardized_euclidean()}, {}),
    "effective columns below k": ({"graph.resolve_view_inputs": _columns_below_clusters(),
                                   "api.resolve_view_inputs": _columns_below_clusters()}, {}),
    "equal-diagonal M": ({"fusion.alignment_matrix": _equal_diagonal_alignment()}, {}),
    "bare M": ({"fusion.alignment_matrix": _bare_alignment()}, {}),
    "small-cluster refit below 2N": ({"api.smallest_cluster_neighbors": _refit_below_2n}, {}),
    **{f"column scales spread {spread}": ({"graph.view_facts": _scale_spread_views(spread),
                                           "api.view_facts": _scale_spread_views(spread)}, {})
       for spread in (100, 1000)},
}


def suite_fit(variant: str, path: Path, seed: int) -> float:
    import warnings

    from onmsc_dask.io import load_mat

    patches, kwargs = VARIANTS[variant]
    views, y = load_mat(path)
    with _patched(patches), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ONMSC(len(np.unique(y)), random_state=seed, **kwargs).fit(views)
    return evaluate(y, est.labels_)["acc"]


def leave_one_set_out(acc: dict, base: str, variant: str) -> list[dict]:
    """For each set: is the variant adopted on the other sets (their mean ACC rises), and what does that do to the
    held-out set."""
    sets = list(acc[base])
    rows = []
    for held in sets:
        others = [s for s in sets if s != held]
        gain = np.mean([acc[variant][s] - acc[base][s] for s in others])
        rows.append({"held_out": held, "gain_on_others": float(gain), "adopted": bool(gain > 0),
                     "held_out_change": float(acc[variant][held] - acc[base][held]) if gain > 0 else 0.0})
    return rows


def suite(variants: list[str], data_dir: Path, seeds: list[int], sets: list[str] | None) -> dict:
    from quality import code_hash, data_key, dataset_files

    cache = json.loads(SUITE_CACHE.read_text()) if SUITE_CACHE.exists() else {}
    h = code_hash("api")
    acc = {}
    for variant in variants:
        acc[variant] = {}
        for path in dataset_files(data_dir, sets):
            runs, data = [], data_key(path)
            for seed in seeds:
                key = f"{variant}|{data}|{seed}|{h}"
                if key not in cache:
                    cache[key] = suite_fit(variant, path, seed)
                    stored = json.loads(SUITE_CACHE.read_text()) if SUITE_CACHE.exists() else {}  # parallel runs
                    SUITE_CACHE.write_text(json.dumps({**stored, **cache}, indent=1, sort_keys=True) + "\n")
                runs.append(cache[key])
            acc[variant][path.stem] = float(np.mean(runs))
            print(f"  {variant:16s} {path.stem:12s} {acc[variant][path.stem]:.3f}", flush=True)
    base, names = variants[0], list(acc[variants[0]])
    print(f"\n| variant | {' | '.join(names)} | mean | vs {base} | LOSO: adopted / held-out gain |\n"
          "| --- |" + " ---: |" * (len(names) + 3))
    report = {"seeds": seeds, "code_hash": h, "acc": acc, "loso": {}}
    for v in variants:
        mean = np.mean(list(acc[v].values()))
        loso = leave_one_set_out(acc, base, v) if v != base else []
        report["loso"][v] = loso
        adopted = sum(r["adopted"] for r in loso)
        held = np.mean([r["held_out_change"] for r in loso]) if loso else 0.0
        print(f"| {v} | " + " | ".join(f"{acc[v][s]:.3f}" for s in names) + f" | {mean:.3f} | "
              f"{mean - np.mean(list(acc[base].values())):+.3f} | {adopted}/{len(loso)} / {held:+.3f} |")
    return report


def suite_main(argv: list[str]) -> dict:
    import argparse

    ap = argparse.ArgumentParser(description="suite ablations of the defaults")
    ap.add_argument("--suite", required=True, help="comma-separated VARIANTS, the first is the base")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--sets", default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "rules_suite.json")
    args = ap.parse_args(argv)
    report = suite(args.suite.split(","), args.data_dir, [int(s) for s in args.seeds.split(",")],
                   None if args.sets is None else args.sets.split(","))
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
