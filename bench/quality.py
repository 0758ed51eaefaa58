"""Quality of the label-free defaults against the baselines a skeptical reviewer would run, over every ``.mat`` in
``../shared/data`` (or ``--data-dir``), seeds 0..S-1 (k = the number of distinct labels).

Methods: ONMSC (defaults); A-MVSC (average graph); SB-SC (single view picked label-free by eigengap); spectral
clustering and k-means of the concatenated views (``baselines.concatenate_views``); and, as a reference picked WITH
labels, each view's own spectral clustering (the best view by ACC). Results are cached in
``bench/results/quality_cache.json`` by (set and a hash of its file, seed, method, hash of the package code they
run: the baselines' module for baselines, the whole package for the defaults), so a re-run after a change of the
defaults refits only the defaults; the cache keeps only fits of the code as it is.

Prints one markdown table (per set: mean ACC / NMI of each method, the best label-free baseline, the defaults'
margin over it and the defaults' seed spread; summary rows) and the issue's targets, writes
``bench/results/quality.json`` and, for a run over every set, the "quality" block of bench/RESULTS.md.

    python bench/quality.py [--data-dir DIR] [--sets BBCSport,...] [--seeds 3] [--out bench/results/quality.json]
                            [--results-md bench/RESULTS.md | none] [--no-cache]
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import platform
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np

import onmsc_dask
from onmsc_dask import ONMSC
from onmsc_dask.baselines import AverageGraphSC, ConcatKMeans, ConcatSC, SingleBestView
from onmsc_dask.io import load_mat
from onmsc_dask.metrics import evaluate

from results_md import RESULTS_MD, write_block

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CACHE = ROOT / "bench" / "results" / "quality_cache.json"

#: the issue's ACC targets for the label-free defaults (mean over the seeds)
TARGETS = {"BBCSport": 0.976, "Handwritten": 0.970, "ProteinFold": 0.37}
#: paper Table 5 (../shared/paper/results.md), fractions; Handwritten is the paper's Mfeat (bench/paper.py)
PAPER = {
    "BBCSport": {"paper_name": "BBCSport", "acc_lf": 0.9761, "acc_ef": 0.9577, "nmi_lf": 0.9200,
                 "nmi_ef": 0.8719, "purity_lf": 0.9761, "acc_amvsc": 0.6618, "acc_sbsc": 0.7665},
    "Handwritten": {"paper_name": "Mfeat", "acc_lf": 0.9700, "acc_ef": 0.9810, "nmi_lf": 0.9343,
                    "nmi_ef": 0.9551, "purity_lf": 0.9700, "acc_amvsc": 0.9520, "acc_sbsc": 0.8600},
}
DEFAULTS = "ONMSC defaults"
#: the label-free baselines every set's defaults must reach (minus 0.01), in table order
BASELINES = ("A-MVSC", "eigengap view", "concat SC", "concat k-means")
PICKED = "label-picked view"
METHODS = (DEFAULTS, *BASELINES, PICKED)
TOLERANCE = 0.01


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def code_hash(module: str) -> str:
    """Hash of the source of ``onmsc_dask.<module>`` and of every package module it imports, transitively."""
    package, seen, todo = Path(onmsc_dask.__file__).parent, set(), [module]
    while todo:
        name = todo.pop()
        if name in seen or not (package / f"{name}.py").exists():
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((package / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                todo += [node.module] if node.module else [a.name for a in node.names]
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update((package / f"{name}.py").read_bytes())
    return digest.hexdigest()[:16]


def data_key(path: Path) -> str:
    """A set's name and a hash of its file's bytes: cached fits of another file of the same name are not reused."""
    return f"{path.stem}@{hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"


def _fit(method: str, views: list, y: np.ndarray, k: int, seed: int) -> dict:
    """Labels' scores of one method at one seed; SB-SC's per-view labels give the label-picked view too."""
    if method == DEFAULTS:
        est = ONMSC(k, random_state=seed).fit(views)
        return {**evaluate(y, est.labels_), "view_weights": _jsonable(est.view_weights_),
                "n_neighbors": est.n_neighbors_, "metric": est.metric_}
    if method == "eigengap view":  # every view's scores too, for the label-picked view
        sb = SingleBestView(k, random_state=seed).fit(views)
        return {**evaluate(y, sb.labels_), "view": sb.best_view_, "per_view": sb.score_views(y),
                "kept": [int(p) for p in sb.kept_views_]}
    est = {"A-MVSC": AverageGraphSC, "concat SC": ConcatSC, "concat k-means": ConcatKMeans}[method]
    return evaluate(y, est(k, random_state=seed).fit(views).labels_)


def run_dataset(path: Path, seeds: int, cache: dict, hashes: dict) -> dict:
    views, y = load_mat(path)
    k, data = len(np.unique(y)), data_key(path)
    out = {"dataset": path.stem, "n": int(len(y)), "n_views": len(views), "k": int(k),
           "view_dims": [int(X.shape[1]) for X in views], "methods": {}}
    for method in METHODS:
        runs = []
        for seed in range(seeds):
            key = f"{data}|{seed}|{method}|{hashes[method]}"
            if method == PICKED and key not in cache:  # the best of the eigengap run's views
                eigengap = cache[f"{data}|{seed}|eigengap view|{hashes[method]}"]
                best = int(np.argmax([v["acc"] for v in eigengap["per_view"]]))
                cache[key] = {**eigengap["per_view"][best], "view": eigengap["kept"][best]}  # a given view's position
            if key not in cache:
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cache[key] = {**_fit(method, views, y, k, seed), "seconds": time.perf_counter() - t0}
            runs.append(cache[key])
        acc = [r["acc"] for r in runs]
        out["methods"][method] = {"acc_seeds": acc, "nmi_seeds": [r["nmi"] for r in runs], "acc": float(np.mean(acc)),
                                  "nmi": float(np.mean([r["nmi"] for r in runs])),
                                  "spread": float(np.ptp(acc)), "runs": runs}
        print(f"  {path.stem:12s} {method:18s} ACC {np.mean(acc):.3f} (seeds {' '.join(f'{a:.3f}' for a in acc)})",
              flush=True)
    best = max(BASELINES, key=lambda m: out["methods"][m]["acc"])
    out["best_baseline"], out["margin"] = best, out["methods"][DEFAULTS]["acc"] - out["methods"][best]["acc"]
    return out


def summary(results: list[dict]) -> dict:
    """Mean ACC and mean rank (1 = best, ties share the mean rank) of each method, the defaults' wins / ties /
    losses against each other method (a difference above TOLERANCE), the worst margin and the issue's targets."""
    acc = np.array([[r["methods"][m]["acc"] for m in METHODS] for r in results])
    ranks = np.array([[1 + np.sum(row > a) + (np.sum(row == a) - 1) / 2 for a in row] for row in acc])
    record = {"mean_acc": dict(zip(METHODS, acc.mean(axis=0).tolist())),
              "mean_rank": dict(zip(METHODS, ranks.mean(axis=0).tolist())), "wins_ties_losses": {}}
    for j, m in enumerate(METHODS[1:], 1):
        d = acc[:, 0] - acc[:, j]
        record["wins_ties_losses"][m] = [int(np.sum(d > TOLERANCE)), int(np.sum(abs(d) <= TOLERANCE)),
                                         int(np.sum(d < -TOLERANCE))]
    record["worst_margin"] = min(r["margin"] for r in results)
    best_mean = max(record["mean_acc"][m] for m in BASELINES)
    record["targets"] = {
        "every set >= best label-free baseline - 0.01": [r["dataset"] for r in results if r["margin"] < -TOLERANCE],
        "sets >= label-picked view - 0.01 (need 8/10)": sum(
            r["methods"][DEFAULTS]["acc"] >= r["methods"][PICKED]["acc"] - TOLERANCE for r in results),
        "tuned numbers": {r["dataset"]: [r["methods"][DEFAULTS]["acc"], TARGETS[r["dataset"]]]
                          for r in results if r["dataset"] in TARGETS},
        "suite mean - best baseline mean (need >= 0.03)": record["mean_acc"][DEFAULTS] - best_mean,
        "sets with seed spread > 0.03": [r["dataset"] for r in results if r["methods"][DEFAULTS]["spread"] > 0.03]}
    return record


def markdown(results: list[dict], record: dict) -> str:
    def cell(m: dict) -> str:
        return f"{m['acc']:.3f} / {m['nmi']:.3f}"

    lines = ["Mean ACC / NMI over the seeds; *best* is the best label-free baseline (by mean ACC), *margin* the "
             "defaults' ACC minus its ACC, *spread* the defaults' max - min ACC over the seeds. "
             f"The {PICKED} is picked WITH labels (a reference, not a method).", "",
             "| set (n, views, k) | " + " | ".join(METHODS) + " | best | margin | spread |",
             "| --- |" + " ---: |" * len(METHODS) + " --- | ---: | ---: |"]
    for r in results:
        lines.append(f"| {r['dataset']} ({r['n']}, {r['n_views']}, {r['k']}) | "
                     + " | ".join(cell(r["methods"][m]) for m in METHODS)
                     + f" | {r['best_baseline']} | {r['margin']:+.3f} | {r['methods'][DEFAULTS]['spread']:.3f} |")
    blank = " |" * 4
    lines.append("| **mean ACC** | " + " | ".join(f"{record['mean_acc'][m]:.3f}" for m in METHODS) + blank)
    lines.append("| **mean rank** | " + " | ".join(f"{record['mean_rank'][m]:.2f}" for m in METHODS) + blank)
    lines.append("| **defaults: wins / ties / losses** (±0.01) | – | "
                 + " | ".join("/".join(map(str, record["wins_ties_losses"][m])) for m in METHODS[1:]) + blank)
    lines.append(f"| **worst margin** | {record['worst_margin']:+.3f} |" + " |" * len(METHODS) + " | |")
    t = record["targets"]
    lines += ["", "Targets (issue 21):", "",
              "- every set within 0.01 of the best label-free baseline: "
              + ("met" if not t["every set >= best label-free baseline - 0.01"] else
                 "**not met** on " + ", ".join(t["every set >= best label-free baseline - 0.01"])),
              f"- within 0.01 of the label-picked view on {t['sets >= label-picked view - 0.01 (need 8/10)']} of "
              f"{len(results)} sets (target 8 of 10)",
              *(f"- {name}: {a:.3f} (target {goal}: {'met' if a >= goal else '**not met**'})"
                for name, (a, goal) in t["tuned numbers"].items()),
              f"- suite mean ACC minus the best baseline's mean: {t['suite mean - best baseline mean (need >= 0.03)']:+.3f}"
              " (target +0.03)",
              "- seed spread at most 0.03: " + ("met" if not t["sets with seed spread > 0.03"] else
                                                 "**not met** on " + ", ".join(t["sets with seed spread > 0.03"]))]
    return "\n".join(lines)


def _git_state() -> dict:
    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
    status = git("status", "--porcelain", "--", "onmsc_dask")
    return {"commit": git("rev-parse", "HEAD"), "package_dirty": bool(status), "package_status": status}


def _current(key: str, hashes: dict[str, str]) -> bool:
    """Whether a cache key, set|seed|method|hash, is a fit of the code as it is now."""
    parts = key.split("|")
    return len(parts) == 4 and parts[3] == hashes.get(parts[2])


def dataset_files(data_dir: Path, sets: list[str] | None = None) -> list[Path]:
    """The .mat files of `data_dir` (only ``sets`` when given), the target datasets first."""
    order = list(TARGETS)
    files = sorted(data_dir.glob("*.mat"), key=lambda p: (order.index(p.stem) if p.stem in order else 99, p.stem))
    if sets is not None:
        missing = set(sets) - {p.stem for p in files}
        if missing:
            raise SystemExit(f"no {', '.join(sorted(missing))}.mat in {data_dir}")
        files = [p for p in files if p.stem in sets]
    if not files:
        raise SystemExit(f"no .mat files in {data_dir}")
    return files


def stamp(command: str, git: dict, seconds: float) -> str:
    """The line under a generated block: command, commit, date and run time."""
    state = " with local changes to onmsc_dask" if git.get("package_dirty") else ""
    return (f"Generated by `{command}` at commit {str(git.get('commit'))[:7]}{state}, {time.strftime('%Y-%m-%d')}, "
            f"in {seconds:.0f} s.")


def results_md_arg(value: str) -> Path | None:
    """``--results-md``: a path, or "none" to leave the markdown file alone."""
    return None if value.lower() == "none" else Path(value)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", type=lambda s: s.split(","), default=None, help="comma-separated subset of the sets")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..S-1")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "quality.json")
    ap.add_argument("--results-md", type=results_md_arg, default=RESULTS_MD,
                    help='markdown file whose "quality" block gets the table ("none": leave it alone; a run over '
                         "--sets never writes it)")
    ap.add_argument("--cache", type=Path, default=CACHE,
                    help="results cache (keyed by set and its file's hash, seed, method, code hash)")
    ap.add_argument("--no-cache", action="store_true", help="refit everything (the cache is still updated)")
    args = ap.parse_args(argv)
    files = dataset_files(args.data_dir, args.sets)
    cache = {} if args.no_cache or not args.cache.exists() else json.loads(args.cache.read_text())
    hashes = {m: code_hash("api" if m == DEFAULTS else "baselines") for m in METHODS}
    t0 = time.perf_counter()
    results = []
    try:
        for f in files:
            results.append(run_dataset(f, args.seeds, cache, hashes))
    finally:
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        stored = {} if not args.cache.exists() else json.loads(args.cache.read_text())
        current = {key: fit for key, fit in {**stored, **cache}.items() if _current(key, hashes)}
        args.cache.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    record = summary(results)
    md = markdown(results, record)
    command = "python bench/quality.py" + (f" --seeds {args.seeds}" if args.seeds != 3 else "") + (
        f" --sets {','.join(args.sets)}" if args.sets else "")
    git = _git_state()
    print()
    print(md)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": command, "seeds": args.seeds, "code_hashes": hashes,
                                    "onmsc_dask_version": getattr(onmsc_dask, "__version__", None),
                                    "python": platform.python_version(), "git": git, "results": results,
                                    "summary": record, "markdown": md}, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    if args.results_md and not args.sets:
        write_block(args.results_md, "quality", f"{md}\n\n{stamp(command, git, time.perf_counter() - t0)}",
                    "Quality on the shared benchmarks (label-free defaults)")
        print(f"wrote the quality block of {args.results_md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
