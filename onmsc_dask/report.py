"""``report.html``: one self-contained page (figures as base64 PNG, no network) describing a run, written by the CLI
and ``pipelines/mnist60k.py`` together with ``convergence.png``, the page's objective figure.

The page shows the data set (n, views, dimensions, metrics), the clustering (cluster sizes, view weights mu and the
views left out, objective trace), scores against the labels when there are any (ACC / NMI / ARI, the confusion
matrix in Hungarian order, each view's single-view spectral clustering), a 2-D map of the read-out coloured by
cluster (and label), and sample thumbnails per cluster for image data.
"""
from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.figure import Figure  # the Agg canvas: no GUI backend needed
from matplotlib.lines import Line2D
from scipy.optimize import linear_sum_assignment

from .assign import assign_labels, normalize_rows
from .metrics import evaluate
from .progress import counted
from .validation import view_label

#: samples drawn in the 2-D map at most, thumbnails per cluster, colours the map's legend lists at most
MAP_POINTS, THUMBNAILS, LEGEND = 5000, 12, 12
#: non-empty cells of the confusion matrix whose counts are drawn at most (each is a text to lay out: 10,000 took 28 s)
COUNTED_CELLS = 1000
#: resolution of every figure
FIGURE_DPI = 90
#: why a view has weight 0: left out before the graphs (validation.informative_views), or of the fusion
LEFT_OUT = {"before": "constant, or fewer distinct rows than clusters: no graph, weight 0",
            "fusion": "its graph falls into more pieces than clusters, its anchor graph has too few distinct "
                      "landmarks, or it shares no cluster structure with any other view: weight 0, not in F's graph"}


@dataclass
class RunPage:
    """What report.html shows about one run."""

    title: str
    source: str
    view_names: list[str]
    view_dims: list[int]
    view_metrics: list[str]
    labels: np.ndarray
    view_weights: np.ndarray
    related_views: np.ndarray
    objective: np.ndarray
    readout: np.ndarray  # the rows k-means clustered (assign.readout)
    refinement_objective: np.ndarray = field(default_factory=lambda: np.empty(0))
    y: np.ndarray | None = None
    scores: dict[str, float] | None = None
    single_view_scores: dict[str, dict[str, float]] | None = None
    thumbnails: np.ndarray | None = None  # (k, THUMBNAILS, h, w), NaN where a cluster has fewer samples
    facts: dict[str, Any] = field(default_factory=dict)  # parameters and timings, shown as they are
    left_out_views: list[int] = field(default_factory=list)  # left out before the graphs (ONMSC.left_out_views_)
    warnings: list[str] = field(default_factory=list)  # the run's warning messages, e.g. why a view was left out
    class_names: list[str] | None = None  # the name of each label id, for labels given as class names


def cluster_sizes(labels: np.ndarray, n_clusters: int) -> list[int]:
    """Samples per cluster 0..k-1."""
    return np.bincount(np.asarray(labels), minlength=n_clusters).tolist()


def sizes_line(sizes: list[int]) -> str:
    """The stdout line of cluster sizes."""
    return "cluster sizes: " + "  ".join(f"{c}:{s}" for c, s in enumerate(sizes))


#: how the stdout line of scores names metrics.evaluate's keys
SCORE_NAMES = {"acc": "ACC", "nmi": "NMI", "purity": "purity", "ari": "ARI"}


def scores_line(scores: dict[str, float]) -> str:
    """The stdout line of scores against the labels: ``ACC 0.8920  NMI 0.8747  purity 0.8920  ARI 0.8226``."""
    return "  ".join(f"{SCORE_NAMES[key]} {value:.4f}" for key, value in scores.items())


def single_view_scores(view_embeddings: np.ndarray, y: np.ndarray, n_clusters: int, names: list[str],
                       random_state: int = 0) -> dict[str, dict[str, float]]:
    """Scores of each view clustered alone: k-means on the first k eigenvectors of its first-order embedding
    H_p^(1) (the view's spectral clustering, SB-SC's per-view labels)."""
    return {name: evaluate(y, assign_labels(H[0][:, :n_clusters], n_clusters, n_init=4,
                                            random_state=random_state)[0])
            for name, H in zip(names, view_embeddings)}


def hungarian_confusion(y: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Counts (classes x clusters) with the clusters ordered by the class each is matched to (the matching of ACC),
    unmatched clusters last; returns the matrix, the class values, the cluster order and, per cluster in that order,
    the index of its matched class (-1 unmatched: more clusters than classes)."""
    classes, yi = np.unique(y, return_inverse=True)
    clusters, li = np.unique(labels, return_inverse=True)
    counts = np.zeros((len(classes), len(clusters)), np.int64)
    np.add.at(counts, (yi, li), 1)
    rows, cols = linear_sum_assignment(-counts)  # rows ascending
    unmatched = [c for c in range(len(clusters)) if c not in set(cols)]
    order = list(cols) + unmatched
    return counts[:, order], classes, clusters[order], np.concatenate([rows, np.full(len(unmatched), -1)])


def palette(n: int) -> np.ndarray:
    """``n`` distinguishable RGB colours: matplotlib's qualitative maps (tab10 first, so up to ten classes keep its
    colours whatever k; then tab20's light shades, tab20b and tab20c), and evenly spaced hues beyond their 60."""
    from matplotlib import colormaps

    if n <= 60:
        return np.vstack([colormaps["tab10"].colors, colormaps["tab20"].colors[1::2], colormaps["tab20b"].colors,
                          colormaps["tab20c"].colors])[:n]
    return colormaps["hsv"](np.linspace(0, 1, n, endpoint=False))[:, :3]


def thumbnails(store: Any, view: int, shape: tuple[int, int], labels: np.ndarray, n_clusters: int,
               random_state: int = 0) -> np.ndarray:
    """Up to THUMBNAILS random samples of each cluster from `store`'s image view, as (k, THUMBNAILS, h, w) images
    (NaN where a cluster has fewer), drawn from the fewest leading row chunks that hold THUMBNAILS samples of every
    cluster (or all of a smaller one's): only those chunks are read."""
    rng = np.random.default_rng(random_state)
    members = [np.flatnonzero(labels == c) for c in range(n_clusters)]
    chunks = store.row_chunks(view)
    stops = np.array([stop for _, stop in chunks])
    last = max((m[min(THUMBNAILS, len(m)) - 1] for m in members if len(m)), default=-1)  # the last row needed
    end = stops[np.searchsorted(stops, last, side="right")] if last >= 0 else 0
    chosen = np.full((n_clusters, THUMBNAILS), -1)
    for c, m in enumerate(members):
        m = m[m < end]
        picked = np.sort(rng.choice(m, min(THUMBNAILS, len(m)), replace=False))
        chosen[c, :len(picked)] = picked
    images = np.full((n_clusters, THUMBNAILS, shape[0] * shape[1]), np.nan)
    for start, stop in chunks:
        inside = (chosen >= start) & (chosen < stop)
        if inside.any():
            rows = store.read_rows(view, start, stop)
            images[inside] = np.asarray(rows.todense() if hasattr(rows, "todense") else rows)[chosen[inside] - start]
    return images.reshape(n_clusters, THUMBNAILS, *shape)


def plot_objective(objective: np.ndarray, refinement: np.ndarray | None = None) -> Figure:
    """The late-fusion objective J per iteration (Eq. 11), on an axis spanning at least 1 % of |J| so that a change
    of a few hundredths of a percent looks as flat as it is; with the label refinement's trace beside it."""
    objective = np.asarray(objective, float)
    panels = 1 + (refinement is not None and len(refinement) > 0)
    fig = Figure(figsize=(5 * panels, 3.2), layout="constrained")
    ax = fig.add_subplot(1, panels, 1)
    ax.plot(np.arange(1, len(objective) + 1), objective, marker="o")
    change = (objective[-1] - objective[0]) / abs(objective[0]) if len(objective) and objective[0] else 0.0
    ax.set(xlabel="iteration", ylabel="objective J (Eq. 11, maximised)",
           title=f"late fusion: {counted(len(objective), 'iteration')}, change {change:+.3%}")
    _pad(ax, objective, first=1)
    if panels == 2:
        ax = fig.add_subplot(1, 2, 2)
        ax.plot(np.arange(len(refinement)), refinement, marker="o", color="C1")
        ax.set(xlabel="move", ylabel="normalized association", title="label refinement")
        _pad(ax, np.asarray(refinement, float), first=0)
    return fig


def _pad(ax: Any, values: np.ndarray, first: int) -> None:
    """y limits spanning at least 1 % of the values' magnitude, without an offset in the tick labels; integer x
    ticks from `first`, half a step of margin on both sides."""
    if not len(values):
        return
    ax.set_xlim(first - 0.5, first + len(values) - 0.5)
    if len(values) <= 12:
        ax.set_xticks(range(first, first + len(values)))
    else:
        ax.xaxis.get_major_locator().set_params(integer=True)
    low, high, scale = values.min(), values.max(), max(abs(values).max(), 1e-12)
    middle, half = (low + high) / 2, max((high - low) * 0.6, 0.005 * scale)
    ax.set_ylim(middle - half, middle + half)
    ax.ticklabel_format(axis="y", useOffset=False)


def map_2d(readout: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The row-normalized read-out projected on the two directions along which the cluster centres spread most
    (principal axes of the size-weighted centres): the plane that separates the clusters best among linear ones."""
    X = normalize_rows(readout)
    ids, counts = np.unique(labels, return_counts=True)
    centres = np.stack([X[labels == c].mean(axis=0) for c in ids])
    mean = counts @ centres / counts.sum()
    _, _, vt = np.linalg.svd(np.sqrt(counts)[:, None] * (centres - mean), full_matrices=False)
    axes = vt[:2].T if len(vt) >= 2 else np.eye(X.shape[1], 2)
    return (X - mean) @ axes


def plot_map(page: RunPage) -> Figure:
    """:func:`map_2d` of at most MAP_POINTS random samples, coloured by cluster and, beside, by label; with labels a
    cluster takes the colour of the class it is matched to. A legend names the colours when there are at most
    LEGEND."""
    n = len(page.labels)
    keep = np.sort(np.random.default_rng(0).choice(n, min(n, MAP_POINTS), replace=False))
    xy = map_2d(page.readout, page.labels)[keep]
    clusters = np.unique(page.labels, return_inverse=True)[1]
    colourings = [("cluster", clusters)]
    if page.y is not None:
        classes = np.unique(page.y, return_inverse=True)[1]
        _, _, order, matched = hungarian_confusion(page.y, page.labels)
        unmatched = matched < 0  # clusters beyond the classes: colours after theirs
        matched[unmatched] = classes.max() + 1 + np.arange(unmatched.sum())
        colour = np.empty(len(order), np.int64)
        colour[np.searchsorted(np.unique(page.labels), order)] = matched
        colourings = [("cluster (colour of the matched label)", colour[clusters]), ("label", classes)]
    colours = palette(max(int(codes.max()) + 1 for _, codes in colourings))
    keys = [np.unique(page.labels).tolist(), [] if page.y is None else
            [c if page.class_names is None else page.class_names[c] for c in np.unique(page.y)]]
    fig = Figure(figsize=(4.4 * len(colourings) + 1.2 * (len(keys[-1] or keys[0]) <= LEGEND), 4.0),
                 layout="constrained")
    for i, ((what, codes), names) in enumerate(zip(colourings, keys)):
        ax = fig.add_subplot(1, len(colourings), i + 1)
        ax.scatter(xy[:, 0], xy[:, 1], color=colours[codes[keep]], s=4, linewidths=0)
        ax.set(title=f"coloured by {what}", xticks=[], yticks=[])
        if i == len(colourings) - 1 and len(names) <= LEGEND:  # with labels: the classes' colours, else clusters'
            shown = [str(name) if len(str(name)) <= 20 else str(name)[:19] + "…" for name in names]
            ax.legend(handles=[Line2D([], [], ls="", marker="o", color=colours[c]) for c in range(len(names))],
                      labels=shown, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    return fig


def plot_confusion(y: np.ndarray, labels: np.ndarray, class_names: list[str] | None = None) -> Figure:
    """The Hungarian-ordered confusion matrix, shaded by the fraction of the class (with its colour bar), counts in
    its cells while at most COUNTED_CELLS are non-empty; the classes named by `class_names` (of ids 0..C-1),
    shortened to 20 characters."""
    counts, classes, clusters, _ = hungarian_confusion(y, labels)
    names = [str(c) if class_names is None else class_names[c] for c in classes]
    names = [name if len(name) <= 20 else name[:19] + "…" for name in names]
    rows, cols = (1.4 + 0.3 * s for s in counts.shape)  # classes x clusters
    fig = Figure(figsize=(max(cols + 1.6 + 0.06 * max(map(len, names)), 4.6), rows), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(counts / np.maximum(counts.sum(axis=1, keepdims=True), 1), cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, shrink=min(1.0, 3 / rows) if rows > 3 else 1.0, label="fraction of the label")
    cells = np.argwhere(counts)
    for i, j in cells if len(cells) <= COUNTED_CELLS else ():
        c = counts[i, j]
        ax.text(j, i, str(c), ha="center", va="center", fontsize=7 if c < 1000 else 5,
                color="white" if c > counts[i].sum() / 2 else "black")
    ax.set_xticks(range(len(clusters)), [str(c) for c in clusters], fontsize=9)
    ax.set_yticks(range(len(classes)), names, fontsize=9)
    ax.set(xlabel="cluster (in the order of the matched label)", ylabel="label")
    return fig


def plot_thumbnails(images: np.ndarray, sizes: list[int]) -> Figure:
    """One row of sample images per cluster, labelled with the cluster and its size: one mosaic image (empty cells
    are NaN, left blank) with gaps of a tenth of an image between the samples."""
    k, per, h, w = images.shape
    gap = max(1, round(0.1 * max(h, w)))
    padded = np.full((k, per, h + gap, w + gap), np.nan)
    padded[:, :, :h, :w] = images
    mosaic = padded.transpose(0, 2, 1, 3).reshape(k * (h + gap), per * (w + gap))[:-gap, :-gap]
    pixel = 0.55 / (max(h, w) + gap)  # inches: an image's longer side and its gap take 0.55 in, square pixels
    box_height, box_width = mosaic.shape[0] * pixel, mosaic.shape[1] * pixel
    width, height = box_width + 1.25, box_height + 0.25
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes([1.2 / width, 0.2 / height, box_width / width, box_height / height])
    ax.set_axis_off()
    finite = images[np.isfinite(images)]
    low, high = (finite.min(), finite.max()) if finite.size else (0, 1)
    ax.imshow(mosaic, cmap="gray_r", vmin=low, vmax=high, interpolation="nearest", aspect="auto")
    for c in range(k):
        ax.text(-0.5 - 0.3 * w, c * (h + gap) + (h - 1) / 2, f"{c} ({sizes[c]})", ha="right", va="center",
                fontsize=8)
    return fig


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes, at FIGURE_DPI."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI)
    return buffer.getvalue()


def figures(page: RunPage) -> dict[str, bytes]:
    """The page's figures as PNGs, by key: the confusion matrix (with scores against labels), the 2-D map, the
    thumbnails (image data) and the objective."""
    pngs = {} if page.scores is None else {"confusion": png(plot_confusion(page.y, page.labels, page.class_names))}
    pngs["map"] = png(plot_map(page))
    if page.thumbnails is not None:
        pngs["thumbnails"] = png(plot_thumbnails(page.thumbnails, cluster_sizes(page.labels, _n_clusters(page))))
    pngs["objective"] = png(plot_objective(page.objective, page.refinement_objective))
    return pngs


def _img(pngs: dict[str, bytes], key: str, alt: str) -> str:
    """An <img> with the figure `key` as an embedded base64 PNG, shrunk to the page's width; the confusion matrix,
    whose size grows with k, scrolls sideways instead, so that its counts stay readable."""
    data = base64.b64encode(pngs[key]).decode("ascii")
    return (f'<div class="{"wide" if key == "confusion" else "figure"}"><img data-figure="{key}" '
            f'alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></div>')


def _table(header: list[str], rows: list[list[Any]], keys: list[list[str | None]] | None = None) -> str:
    """An HTML table; a cell with a key carries it as data-key (the tests read the rendered values by key)."""
    def cell(value: Any, key: str | None) -> str:
        text = f"{value:.4f}" if isinstance(value, float) else "–" if value is None else html.escape(str(value))
        words = ' class="words"' if isinstance(value, str) and " " in value else ""  # left-aligned, not a number
        return f'<td data-key="{html.escape(key)}"{words}>{text}</td>' if key else f"<td{words}>{text}</td>"

    keys = keys or [[None] * len(r) for r in rows]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cell(v, k) for v, k in zip(r, ks)) + "</tr>" for r, ks in zip(rows, keys))
    return f"<table><tr>{head}</tr>{body}</table>"


def _n_clusters(page: RunPage) -> int:
    """k: the largest label + 1."""
    return int(page.labels.max()) + 1 if len(page.labels) else 0


def _fused(page: RunPage, p: int) -> str:
    """Whether view p is in the fusion, and if not why: the run's warning that left it out, else LEFT_OUT's
    reasons."""
    if page.related_views[p]:
        return "yes" if page.view_weights[p] > 0 else "yes, with μ = 0 (the fusion's weight step gives it none)"
    label = view_label(p, page.view_names)
    said = next((w[len(label) + 2:] for w in page.warnings if w.startswith(f"{label}: ") and "left out" in w), None)
    return f"no: {said or LEFT_OUT['before' if p in page.left_out_views else 'fusion']}"


def report_files(page: RunPage, pngs: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """``report.html`` for `page` and ``convergence.png`` (its objective figure); `pngs`: figures(page), when they
    are rendered already."""
    pngs = figures(page) if pngs is None else pngs
    k = _n_clusters(page)
    sizes = cluster_sizes(page.labels, k)
    views = _table(["view", "dimension", "metric", "weight μ", "fused"],
                   [[name, d, m or "-", float(mu), _fused(page, p)]
                    for p, (name, d, m, mu) in enumerate(zip(page.view_names, page.view_dims, page.view_metrics,
                                                             page.view_weights))],
                   [[None, None, None, f"view_weights.{name}", None] for name in page.view_names])
    parts = [f"<h1>{html.escape(page.title)}</h1>",
             f'<p>{html.escape(page.source)}: <b data-key="n_samples">{len(page.labels)}</b> samples, '
             f'{counted(len(page.view_names), "view")}, <b data-key="n_clusters">{k}</b> clusters.</p>',
             "<h2>Views</h2>", views]
    if page.warnings:
        parts += ["<h2>Warnings</h2>", "<ul>" + "".join(f'<li data-key="warnings.{i}">{html.escape(w)}</li>'
                                                       for i, w in enumerate(page.warnings)) + "</ul>"]
    blocks = [range(start, min(start + 20, k)) for start in range(0, k, 20)]  # rows of 20: no sideways scrolling
    parts += ["<h2>Clusters</h2>"] + [_table(["cluster"] + [str(c) for c in block],
                                             [["samples"] + [sizes[c] for c in block]],
                                             [[None] + [f"cluster_sizes.{c}" for c in block]]) for block in blocks]
    if page.scores is not None:
        parts += ["<h2>Against the labels</h2>",
                  _table(["", "ACC", "NMI", "ARI", "purity"],
                         [["ONMSC"] + [page.scores[m] for m in ("acc", "nmi", "ari", "purity")]]
                         + [[f"{name} alone"] + [s[m] for m in ("acc", "nmi", "ari", "purity")]
                            for name, s in (page.single_view_scores or {}).items()],
                         [[None] + [f"metrics.{m}" for m in ("acc", "nmi", "ari", "purity")]]
                         + [[None] + [f"single_view_scores.{name}.{m}" for m in ("acc", "nmi", "ari", "purity")]
                            for name in (page.single_view_scores or {})]),
                  "<p>A view alone: k-means on its own spectral embedding (first order).</p>",
                  _img(pngs, "confusion", "confusion matrix")]
    parts += ["<h2>Map of the embedding</h2>",
              "<p>The read-out rows (H*, or the fusion target when wider than k) projected on the plane where the "
              "cluster centres spread most"
              + ("; a cluster has the colour of the label the confusion matrix matches it to" if page.y is not None
                 else "") + (f" ({MAP_POINTS} of the samples, drawn at random)" if len(page.labels) > MAP_POINTS
                             else "") + ".</p>",
              _img(pngs, "map", "2-D map")]
    if page.thumbnails is not None:
        parts += ["<h2>Samples of each cluster</h2>", _img(pngs, "thumbnails", "thumbnails")]
    parts += ["<h2>Objective</h2>", _img(pngs, "objective", "objective")]
    if page.facts:
        parts += ["<h2>Parameters and times</h2>",
                  _table(["", "value"], [[name, value if not isinstance(value, (dict, list)) else
                                          ", ".join(f"{a}: {b:.4g}" if isinstance(b, float) else
                                                    f"{a}: {'–' if b is None else b}"
                                                    for a, b in (value.items() if isinstance(value, dict)
                                                                 else enumerate(value)))]
                                         for name, value in page.facts.items()])]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:1em auto;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0;display:block;max-width:100%;overflow-x:auto}"
             "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"  # numbers and words never split
             "td:first-child,th:first-child{text-align:left;max-width:40em;min-width:8em;overflow-wrap:anywhere}"
             "td.words{text-align:left}th{white-space:nowrap}li{overflow-wrap:anywhere}"
             ".figure img{max-width:100%}.wide{max-width:100%;overflow-x:auto}")
    text = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(page.title)}'
            f"</title><style>{style}</style></head><body>{''.join(parts)}</body></html>\n")
    return {"report.html": text.encode("utf-8"), "convergence.png": pngs["objective"]}


def store_page(store: Any, title: str, source: str, *, labels: np.ndarray, readout: np.ndarray,
               view_weights: np.ndarray, related_views: np.ndarray, objective: np.ndarray,
               refinement_objective: np.ndarray, view_metrics: list[str], scores: dict | None,
               single_scores: dict | None, facts: dict, random_state: int = 0,
               left_out_views: list[int] = (), warnings: list[str] = ()) -> RunPage:
    """The RunPage of a fit of `store`'s views (thumbnails when its metadata names an image view)."""
    image = store.image_view()
    k = int(np.max(labels)) + 1
    return RunPage(title=title, source=source, view_names=list(store.view_names),
                   view_dims=[store.view_shape(p)[1] for p in range(store.n_views)], view_metrics=list(view_metrics),
                   labels=np.asarray(labels), view_weights=np.asarray(view_weights),
                   related_views=np.asarray(related_views, bool), objective=np.asarray(objective),
                   refinement_objective=np.asarray(refinement_objective), readout=np.asarray(readout),
                   y=store.labels, scores=scores, single_view_scores=single_scores,
                   thumbnails=None if image is None else thumbnails(store, *image, np.asarray(labels), k, random_state),
                   facts=facts, left_out_views=list(left_out_views), warnings=list(warnings),
                   class_names=store.class_names)
