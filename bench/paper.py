"""The paper's experimental section, reproduced on every ``.mat`` in ``../shared/data`` (or ``--data-dir``).

(a) main table: ONMSC-LF / ONMSC-EF with the label-free defaults, the same methods on a grid **tuned with
    labels** (best ACC over the grid, as the paper does), and the baselines SB-SC and A-MVSC, beside the paper;
(b) ablation BL, BL+HCI, BL+NLM, BL+NLM+HCI (= ONMSC-EF, order 2) with defaults, averaged over the datasets;
(c) order O = 1..5 of ONMSC-LF with defaults, averaged over the datasets;
(d) sensitivity of ACC to lambda1, lambda2 (LF) and N, one PNG per dataset;
(e) convergence (objective per iteration) of LF and EF, one PNG per dataset;
(f) the fused embedding H* (first two principal components of the row-normalized H*) coloured by cluster.

Default grid (small, a few minutes on 2 cores): LF lambda1 in {2^-2, 2^0, 2^2}, lambda2 in {2^-2, 2^0, 2^2} x k*O,
EF alpha in {2^-2, 2^0, 2^2} x its "auto" value, N in {0.1, 0.5, 1} x n/k capped at 50 plus the default N.
``--full``: the paper's grid, lambda1, lambda2 (and EF alpha) in 2^-15, 2^-12, ..., 2^15 and
N in {0.1, 0.2, ..., 1} x n/k (slow).  Seed 0 everywhere.

    python bench/paper.py [--data-dir DIR] [--sets A,B] [--out-dir bench/results/paper] [--full]
                          [--results-md bench/RESULTS.md | none]

Writes ``paper.json`` and the plots to ``--out-dir`` and the tables into the "paper-*" blocks of bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import (DEFAULT_DATA, PAPER, ROOT, TARGETS, _git_state, _jsonable, dataset_files,  # noqa: E402
                     results_md_arg, stamp)
from results_md import RESULTS_MD, relative_link, write_block  # noqa: E402

import onmsc_dask  # noqa: E402
from onmsc_dask.api import ONMSC  # noqa: E402
from onmsc_dask.assign import assign_labels, normalize_rows  # noqa: E402
from onmsc_dask.baselines import AverageGraphSC, LinearCombination, SingleBestView  # noqa: E402
from onmsc_dask.api import fit_early_fusion  # noqa: E402
from onmsc_dask.fusion import late_fusion  # noqa: E402
from onmsc_dask.io import load_mat  # noqa: E402
from onmsc_dask.metrics import evaluate  # noqa: E402

SEED = 0
#: paper Tables 3-4 (EF version, ACC % averaged over its eight datasets) and its order study
PAPER_ABLATION = {"BL": 64.00, "BL+HCI": 66.04, "BL+NLM": 67.63, "BL+NLM+HCI": 68.64}
PAPER_ORDER = {2: 68.64, 3: 68.94, 4: 67.58, 5: 65.76}


def grids(n: int, k: int, full: bool) -> dict:
    s = n / k
    if full:
        pw = [2.0 ** e for e in range(-15, 16, 3)]
        Ns = sorted({max(2, int(round(f * s))) for f in np.arange(1, 11) / 10})
        return {"lambda1": pw, "lambda2": pw, "lambda2_scaled": False, "alpha": pw, "alpha_scaled": False,
                "N": Ns}
    Ns = sorted({max(2, min(50, int(round(f * s)))) for f in (0.1, 0.5, 1.0)})
    mult = [0.25, 1.0, 4.0]
    return {"lambda1": mult, "lambda2": mult, "lambda2_scaled": True, "alpha": mult, "alpha_scaled": True,
            "N": Ns}


def score(y, labels) -> dict:
    return {k: float(v) for k, v in evaluate(y, labels).items()}


def run_dataset(path: Path, full: bool, out_dir: Path) -> dict:
    views, y = load_mat(path)
    k = int(len(np.unique(y)))
    n = int(len(y))
    O = 2
    g = grids(n, k, full)
    res = {"dataset": path.stem, "n": n, "k": k, "n_views": len(views), "paper": PAPER.get(path.stem),
           "target_acc": TARGETS.get(path.stem)}
    t_start = time.perf_counter()
    log = lambda msg: print(f"  {path.stem:12s} {msg}", flush=True)  # noqa: E731

    # ---- (a) defaults + baselines
    main = {}
    lf = ONMSC(k, keep_intermediate=True, random_state=SEED).fit(views)
    ef = ONMSC(k, fusion="early", random_state=SEED).fit(views)
    N0 = int(lf.n_neighbors_)
    main["ONMSC-LF (defaults)"] = {**score(y, lf.labels_), "N": N0, "lambda1": lf.lambda1_, "lambda2": lf.lambda2_,
                                   "n_iter": int(lf.n_iter_)}
    main["ONMSC-EF (defaults)"] = {**score(y, ef.labels_), "N": int(ef.n_neighbors_), "alpha": float(ef.alpha_),
                                   "n_iter": int(ef.n_iter_)}
    for name, est in [("A-MVSC (average graph)", AverageGraphSC(k, random_state=SEED)),
                      ("SB-SC (single best view, label-free)", SingleBestView(k, random_state=SEED))]:
        est.fit(views)
        main[name] = score(y, est.labels_)
    log(f"defaults done ({time.perf_counter() - t_start:.1f} s)")

    # ---- (a)/(d) LF grid tuned with labels: graphs/H_p^(o) once per N, then Algorithm 1 per (lambda1, lambda2)
    Ns = sorted(set(g["N"]) | {N0})
    l1s = g["lambda1"]
    l2s = [m * k * O for m in g["lambda2"]] if g["lambda2_scaled"] else g["lambda2"]
    lf_grid = []
    for N in Ns:
        base = lf if N == N0 else ONMSC(k, n_neighbors=N, keep_intermediate=True, random_state=SEED).fit(views)
        H, F = base.view_embeddings_, base.average_embedding_
        for a in l1s:
            for b in l2s:
                fused = late_fusion(H, F, a, b, tol=base.tol, max_iter=base.max_iter)
                labels, _ = assign_labels(fused.embedding, k, n_init=base.n_init, random_state=SEED)
                lf_grid.append({"N": int(N), "lambda1": float(a), "lambda2": float(b), **score(y, labels)})
    best = max(lf_grid, key=lambda r: r["acc"])
    main["ONMSC-LF (tuned with labels)"] = dict(best)
    log(f"LF grid {len(lf_grid)} points, best ACC {best['acc']:.4f} ({time.perf_counter() - t_start:.1f} s)")

    # ---- EF grid tuned with labels: N x alpha
    ef_grid = []
    for N in Ns:
        auto = ONMSC(k, fusion="early", n_neighbors=N, random_state=SEED).fit(views)
        a_auto = float(auto.alpha_)
        alphas = [m * a_auto for m in g["alpha"]] if g["alpha_scaled"] else g["alpha"]
        for a in alphas:
            est = auto if (g["alpha_scaled"] and a == a_auto) else \
                ONMSC(k, fusion="early", n_neighbors=N, alpha=a, random_state=SEED).fit(views)
            ef_grid.append({"N": int(N), "alpha": float(a), **score(y, est.labels_)})
    best = max(ef_grid, key=lambda r: r["acc"])
    main["ONMSC-EF (tuned with labels)"] = dict(best)
    log(f"EF grid {len(ef_grid)} points, best ACC {best['acc']:.4f} ({time.perf_counter() - t_start:.1f} s)")
    res["main"] = main
    res["lf_grid"], res["ef_grid"] = lf_grid, ef_grid

    # ---- (b) ablation (defaults)
    N_ef = main["ONMSC-EF (defaults)"]["N"]  # every variant on the graphs of the full method
    abl = {"BL": score(y, LinearCombination(k, order=1, n_neighbors=N_ef, random_state=SEED).fit(views).labels_),
           "BL+HCI": score(y, LinearCombination(k, order=2, n_neighbors=N_ef, random_state=SEED).fit(views).labels_),
           "BL+NLM": score(y, fit_early_fusion(views, k, order=1, n_neighbors=N_ef, random_state=SEED).labels),
           "BL+NLM+HCI": main["ONMSC-EF (defaults)"]}
    res["ablation"] = {m: {kk: v[kk] for kk in ("acc", "nmi", "purity")} for m, v in abl.items()}

    # ---- (c) order 1..5 (LF defaults)
    order = {}
    for o in range(1, 6):
        est = lf if o == O else ONMSC(k, order=o, random_state=SEED).fit(views)
        order[o] = score(y, est.labels_)
    res["order"] = order
    log(f"ablation + orders done ({time.perf_counter() - t_start:.1f} s)")

    # ---- (d) sensitivity plot: ACC over lambda1 (lambda2 = k*O), lambda2 (lambda1 = 1) at the default N, and N
    # (defaults lambda for LF, auto alpha for EF)
    lam2_0, lam1_0 = float(k * O), 1.0
    at = lambda rows, **kw: [r for r in rows if all(np.isclose(r[a], b) for a, b in kw.items())]  # noqa: E731
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    r1 = sorted(at(lf_grid, N=N0, lambda2=lam2_0), key=lambda r: r["lambda1"])
    r2 = sorted(at(lf_grid, N=N0, lambda1=lam1_0), key=lambda r: r["lambda2"])
    for ax, rows, key, xl in [(axes[0], r1, "lambda1", f"λ1 (λ2 = kO = {lam2_0:g}, N = {N0})"),
                              (axes[1], r2, "lambda2", f"λ2 (λ1 = 1, N = {N0})")]:
        ax.plot([r[key] for r in rows], [r["acc"] for r in rows], "o-", label="ONMSC-LF")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xl)
    rn = sorted(at(lf_grid, lambda1=lam1_0, lambda2=lam2_0), key=lambda r: r["N"])
    axes[2].plot([r["N"] for r in rn], [r["acc"] for r in rn], "o-", label="ONMSC-LF (λ defaults)")
    if g["alpha_scaled"]:
        # auto alpha is the middle multiplier (x1) of each N's three values
        en = [sorted([q for q in ef_grid if q["N"] == N], key=lambda q: q["alpha"])[1] for N in Ns]
        axes[2].plot(Ns, [r["acc"] for r in en], "s--", label="ONMSC-EF (auto α)")
    axes[2].axvline(N0, color="grey", lw=0.8, ls=":")
    axes[2].set_xlabel(f"N (default {N0}; n/k = {n / k:.0f})")
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.set_ylabel("ACC")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{path.stem}: sensitivity of ACC (labels used only to score)")
    fig.tight_layout()
    files = {"sensitivity": f"sensitivity_{path.stem}.png"}
    fig.savefig(out_dir / files["sensitivity"], dpi=110)
    plt.close(fig)

    # ---- (e) convergence
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, est, name in [(axes[0], lf, "ONMSC-LF (Eq. 11, maximised)"), (axes[1], ef, "ONMSC-EF (Eq. 10)")]:
        obj = np.asarray(est.objective_, dtype=float)
        ax.plot(np.arange(len(obj)), obj, "o-", ms=3)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("iteration")
        ax.set_ylabel("objective")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{path.stem}: convergence (defaults)")
    fig.tight_layout()
    files["convergence"] = f"convergence_{path.stem}.png"
    fig.savefig(out_dir / files["convergence"], dpi=110)
    plt.close(fig)
    res["objective_lf"] = np.asarray(lf.objective_, float).tolist()
    res["objective_ef"] = np.asarray(ef.objective_, float).tolist()

    # ---- (f) embedding
    Z = normalize_rows(np.asarray(lf.embedding_))
    Z = Z - Z.mean(axis=0)
    U, S, Vt = np.linalg.svd(Z, full_matrices=False)
    P = Z @ Vt[:2].T
    fig, ax = plt.subplots(figsize=(5, 4.5))
    sc = ax.scatter(P[:, 0], P[:, 1], c=lf.labels_, cmap="tab10" if k <= 10 else "tab20", s=8)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(f"{path.stem}: H* (ONMSC-LF defaults), ACC {main['ONMSC-LF (defaults)']['acc']:.3f}", fontsize=9)
    fig.colorbar(sc, ax=ax, label="predicted cluster")
    fig.tight_layout()
    files["embedding"] = f"embedding_{path.stem}.png"
    fig.savefig(out_dir / files["embedding"], dpi=110)
    plt.close(fig)
    res["plots"] = files
    res["seconds"] = time.perf_counter() - t_start
    log(f"done in {res['seconds']:.1f} s")
    return res


def _f(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def _params(m: dict) -> str:
    parts = []
    for key, lab in (("N", "N"), ("lambda1", "λ1"), ("lambda2", "λ2"), ("alpha", "α")):
        if key in m:
            parts.append(f"{lab}={m[key]:.4g}")
    return " ".join(parts)


def markdown(results: list[dict], full: bool) -> dict:
    out = {}
    L = ["| dataset | method | ACC | NMI | purity | paper ACC | paper NMI | paper purity | parameters |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        p = r["paper"] or {}
        label = r["dataset"] + (f" (paper: {p['paper_name']})" if p and p["paper_name"] != r["dataset"] else "")
        for name, m in r["main"].items():
            pa = pn = pp = None
            if p and name.startswith("ONMSC-LF (tuned"):
                pa, pn, pp = p["acc_lf"], p["nmi_lf"], p["purity_lf"]
            elif p and name.startswith("ONMSC-EF (tuned"):
                pa, pn = p["acc_ef"], p["nmi_ef"]
            elif p and name.startswith("A-MVSC"):
                pa = p["acc_amvsc"]
            elif p and name.startswith("SB-SC"):
                pa = p["acc_sbsc"]
            nm = f"**{name}**" if "tuned" in name else name
            L.append(f"| {label} | {nm} | {m['acc']:.3f} | {m['nmi']:.3f} | {m['purity']:.3f} | {_f(pa)} | "
                     f"{_f(pn)} | {_f(pp)} | {_params(m)} |")
    out["main"] = "\n".join(L)

    names = list(PAPER_ABLATION)
    avg = {m: {s: float(np.mean([r["ablation"][m][s] for r in results])) for s in ("acc", "nmi", "purity")}
           for m in names}
    L = ["| | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for r in results:
        L.append(f"| {r['dataset']} ACC | " + " | ".join(f"{r['ablation'][m]['acc']:.3f}" for m in names) + " |")
    for s in ("acc", "nmi", "purity"):
        L.append(f"| **mean {s.upper() if s != 'purity' else 'purity'}** | "
                 + " | ".join(f"{avg[m][s]:.3f}" for m in names) + " |")
    L.append("| paper mean ACC (8 datasets) | " + " | ".join(f"{PAPER_ABLATION[m] / 100:.4f}" for m in names) + " |")
    checks = [("BL < BL+HCI (64.00 < 66.04)", "BL", "BL+HCI"),
              ("BL+NLM < BL+NLM+HCI (67.63 < 68.64)", "BL+NLM", "BL+NLM+HCI"),
              ("BL < BL+NLM (64.00 < 67.63)", "BL", "BL+NLM"),
              ("BL+HCI < BL+NLM+HCI (66.04 < 68.64)", "BL+HCI", "BL+NLM+HCI")]
    L += ["", "| paper's direction (mean ACC) | ours | reproduced |", "| --- | --- | --- |"]
    direction = {}
    for lab, a, b in checks:
        ok = avg[b]["acc"] > avg[a]["acc"]
        direction[lab] = ok
        L.append(f"| {lab} | {avg[a]['acc']:.3f} vs {avg[b]['acc']:.3f} | {'yes' if ok else '**NO**'} |")
    out["ablation"] = "\n".join(L)
    out["ablation_mean"], out["ablation_direction"] = avg, direction

    L = ["| order O | mean ACC | mean NMI | mean purity | " + " | ".join(f"{r['dataset']} ACC" for r in results)
         + " | paper ACC (EF, 8 datasets) |",
         "| ---: |" + " ---: |" * (4 + len(results))]
    order_mean = {}
    for o in range(1, 6):
        m = {s: float(np.mean([r["order"][o][s] for r in results])) for s in ("acc", "nmi", "purity")}
        order_mean[o] = m
        L.append(f"| {o}{' (default)' if o == 2 else ''} | {m['acc']:.3f} | {m['nmi']:.3f} | {m['purity']:.3f} | "
                 + " | ".join(f"{r['order'][o]['acc']:.3f}" for r in results)
                 + f" | {_f(PAPER_ORDER.get(o, None) and PAPER_ORDER[o] / 100)} |")
    out["order"] = "\n".join(L)
    out["order_mean"] = order_mean

    L = ["| dataset | sensitivity (λ1, λ2, N) | convergence (LF, EF) | embedding H* |", "| --- | --- | --- | --- |"]
    for r in results:
        pl = r["plots"]
        L.append(f"| {r['dataset']} | ![]({pl['sensitivity']}) | ![]({pl['convergence']}) | ![]({pl['embedding']}) |")
    out["plots"] = "\n".join(L)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", type=lambda s: s.split(","), default=None, help="comma-separated subset of the sets")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results" / "paper")
    ap.add_argument("--full", action="store_true", help="the paper's full grid (slow)")
    ap.add_argument("--results-md", type=results_md_arg, default=RESULTS_MD,
                    help='markdown file whose "paper-*" blocks get the tables ("none": leave it alone)')
    args = ap.parse_args(argv)
    files = dataset_files(args.data_dir, args.sets)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = [run_dataset(f, args.full, args.out_dir) for f in files]
    md = markdown(results, args.full)
    for title, key in [("Main table (bold = tuned with labels, best ACC over the grid)", "main"),
                       ("Ablation (defaults; BL+NLM+HCI = ONMSC-EF order 2)", "ablation"),
                       ("Order O (ONMSC-LF defaults)", "order"), ("Plots", "plots")]:
        print(f"\n### {title}\n\n{md[key]}")
    seconds = time.perf_counter() - t0
    cmd = "python bench/paper.py" + (" --full" if args.full else "") + (f" --sets {','.join(args.sets)}" if args.sets
                                                                        else "")
    (args.out_dir / "paper.json").write_text(json.dumps(_jsonable_deep({
        "command": cmd, "seed": SEED, "full_grid": args.full, "seconds": seconds,
        "onmsc_dask_version": getattr(onmsc_dask, "__version__", None), "python": platform.python_version(),
        "git": _git_state(), "paper_ablation": PAPER_ABLATION, "paper_order": PAPER_ORDER,
        "results": results, "ablation_mean": md["ablation_mean"], "ablation_direction": md["ablation_direction"],
        "order_mean": md["order_mean"], "markdown": {k: md[k] for k in ("main", "ablation", "order", "plots")}}),
        indent=1) + "\n")
    print(f"\nwrote {args.out_dir / 'paper.json'} ({seconds:.0f} s)")
    if args.results_md:
        write_results_md(args.results_md, md, args.out_dir, stamp(cmd, _git_state(), seconds))
        print(f"wrote the paper-* blocks of {args.results_md}")
    return 0


def write_results_md(path: Path, md: dict, out_dir: Path, footer: str) -> None:
    """The four tables into their blocks of ``path``, the plots linked relative to it; ``footer`` under the main
    table."""
    plots = md["plots"].replace("![](", f"![]({relative_link(out_dir, path)}/")
    for key, text, heading in [("main", f"{md['main']}\n\n{footer}", "Paper experiments: main table"),
                               ("ablation", md["ablation"], "Paper experiments: ablation"),
                               ("order", md["order"], "Paper experiments: order O"),
                               ("plots", plots, "Paper experiments: plots")]:
        write_block(path, f"paper-{key}", text, heading)


def _jsonable_deep(x):
    if isinstance(x, dict):
        return {str(k): _jsonable_deep(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable_deep(v) for v in x]
    return _jsonable(x)


if __name__ == "__main__":
    raise SystemExit(main())
