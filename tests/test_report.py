"""report.html rendered in real headless Chromium: every figure loads and the numbers shown are report.json's."""
from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from onmsc_dask.cli import main
from onmsc_dask.report import THUMBNAILS, hungarian_confusion, plot_thumbnails, thumbnails
from onmsc_dask.store import MultiViewStore

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
#: reads the rendered page in an iframe: every <img> (loaded, natural width) and each data-key element's visible text
PROBE = """<!DOCTYPE html><html><body><iframe id="f" src="{src}" width="1100" height="900"></iframe><script>
f.onload = () => {{ const d = f.contentDocument; const out = document.createElement("pre"); out.id = "result";
  out.textContent = JSON.stringify({{images: [...d.images].map(i => [i.dataset.figure, i.complete, i.naturalWidth]),
    keys: Object.fromEntries([...d.querySelectorAll("[data-key]")].map(e => [e.dataset.key, e.innerText]))}});
  document.body.appendChild(out); }};
</script></body></html>"""


def chromium(*args: str) -> str:
    """Headless Chromium's stdout (--no-sandbox: CI runs as root)."""
    assert CHROMIUM is not None, "chromium is not installed"
    return subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--allow-file-access-from-files", *args], capture_output=True, text=True, timeout=120,
                          check=True).stdout


def rendered(page: Path) -> dict:
    """The images and keyed values of `page` as Chromium rendered them."""
    probe = page.parent / "probe.html"
    probe.write_text(PROBE.format(src=page.name))
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert found, f"the page did not load in Chromium: {dom[:300]}"
    return json.loads(html.unescape(found.group(1)))


#: a view name that would break out of an HTML attribute (it did: its data-key cells' image ran the script)
PROFILES = 'pro"files"><img src=x onerror="document.title=1">'


@pytest.fixture(scope="module")
def run(tmp_path_factory, scheduler) -> Path:
    """The CLI on a store of 10 x 10 images (three classes: a bright square in one of three places) with three views,
    the pixels, a noisier copy of their row and column sums (named PROFILES), and noise (left out of the fusion, with
    a warning), with labels."""
    tmp = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(0)
    y = np.arange(150) % 3
    images = rng.uniform(0, 0.3, size=(150, 10, 10))
    for c in range(3):
        images[y == c, 1 + 3 * c:4 + 3 * c, 1 + 3 * c:4 + 3 * c] += 1
    profiles = np.hstack([images.sum(axis=1), images.sum(axis=2)]) + rng.normal(0, 0.2, (150, 20))
    store = MultiViewStore.create(tmp / "images.zarr", [images.reshape(150, -1), profiles, rng.normal(size=(150, 5))],
                                  y, view_names=["pixels", PROFILES, "noise"],
                                  metadata={"image_shape": {"view": 0, "shape": [10, 10]}})
    assert main(["run", "--data", str(store.path), "--out", str(tmp / "out"), "--scheduler", scheduler]) == 0
    return tmp / "out"


@needs_chromium
def test_report_renders_every_figure_and_the_numbers_of_report_json(run):
    report = json.loads((run / "report.json").read_text())
    shown = rendered(run / "report.html")
    assert sorted(figure for figure, _, _ in shown["images"]) == ["confusion", "map", "objective", "thumbnails"]
    assert all(complete and width > 0 for _, complete, width in shown["images"]), shown["images"]
    keys = shown["keys"]
    assert int(keys["n_samples"]) == report["dataset"]["n_samples"] == 150
    assert [int(keys[f"cluster_sizes.{c}"]) for c in range(3)] == report["cluster_sizes"]
    assert sum(report["cluster_sizes"]) == 150
    for name, mu in report["view_weights"].items():
        assert keys[f"view_weights.{name}"] == f"{mu:.4f}"
    for metric in ("acc", "nmi", "ari", "purity"):
        assert keys[f"metrics.{metric}"] == f"{report['metrics'][metric]:.4f}"
        for view, scores in report["single_view_scores"].items():
            assert keys[f"single_view_scores.{view}.{metric}"] == f"{scores[metric]:.4f}"
    assert set(report["single_view_scores"]) == {"pixels", PROFILES, "noise"}  # and no injected image above
    assert report["view_weights"]["noise"] == 0 and report["resolved"]["related_views"] == [True, True, False]
    assert [keys[f"warnings.{i}"] for i in range(len(report["warnings"]))] == report["warnings"]
    assert any(w.startswith("view 2 ('noise'): shares no cluster structure") for w in report["warnings"])
    assert f"warnings.{len(report['warnings'])}" not in keys


@needs_chromium
def test_screenshot_shows_the_page(run):
    shot = run / "shot.png"
    chromium("--window-size=1000,1400", f"--screenshot={shot}", (run / "report.html").as_uri())
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (1400, 1000)
    ink = (pixels < 0.5).all(axis=2)  # dark pixels: text and figures
    assert ink[:200].mean() > 0.002 and ink[400:].mean() > 0.002  # the tables and the figures below them


def test_the_confusion_figure_is_as_wide_as_its_clusters_and_as_tall_as_its_classes():
    """40 clusters of 3 classes: a wide, short figure (it was square, the matrix a strip in white space)."""
    from onmsc_dask.report import plot_confusion

    labels = np.arange(400) % 40
    width, height = plot_confusion(labels % 3, labels).get_size_inches()
    assert width > 3 * height


def test_the_confusion_figure_names_the_classes_and_has_a_colour_bar_and_the_map_a_legend():
    """Class names were drawn as their ids; the shading had no scale and the counts went at 400 cells; the map had
    no legend."""
    from onmsc_dask.report import RunPage, plot_confusion, plot_map

    y = np.arange(600) % 27
    fig = plot_confusion(y, y, [f"class {c}" for c in range(26)] + ["a name of more than twenty characters"])
    matrix, bar = fig.axes
    assert [t.get_text() for t in matrix.get_yticklabels()][-2:] == ["class 25", "a name of more than…"]
    assert bar.get_ylabel() == "fraction of the label" and len(matrix.texts) == 27  # a count in every non-empty cell
    page = RunPage(title="t", source="s", view_names=["a"], view_dims=[2], view_metrics=["euclidean"],
                   labels=y % 3, view_weights=np.ones(1), related_views=np.ones(1, bool), objective=np.ones(2),
                   readout=np.random.default_rng(0).normal(size=(600, 3)), y=y % 3, class_names=["x", "y", "z"])
    assert [t.get_text() for t in plot_map(page).axes[1].get_legend().get_texts()] == ["x", "y", "z"]
    page.y, page.class_names = y, None  # 27 classes: too many colours to list
    assert all(ax.get_legend() is None for ax in plot_map(page).axes)
    many = np.arange(20_000) % 100  # 100 x 100 non-empty cells: no counts (laying out 10,000 texts took 28 s)
    assert not plot_confusion(many, np.random.default_rng(0).permutation(many)).axes[0].texts


def test_the_cluster_sizes_go_in_rows_of_twenty_and_one_view_is_one(tmp_path):
    """45 clusters were one table row scrolled sideways (clusters 27-44 out of sight); "1 views"."""
    from onmsc_dask.report import RunPage, report_files

    labels = np.arange(450) % 45
    page = RunPage(title="t", source="s", view_names=["a"], view_dims=[2], view_metrics=["euclidean"], labels=labels,
                   view_weights=np.ones(1), related_views=np.ones(1, bool), objective=np.ones(2),
                   readout=np.random.default_rng(0).normal(size=(450, 3)))
    text = report_files(page)["report.html"].decode()
    rows = re.findall(r"<tr><th>cluster</th>((?:<th>\d+</th>)+)</tr>", text)
    assert [re.findall(r"\d+", row) for row in rows] == [[str(c) for c in range(a, b)]
                                                          for a, b in ((0, 20), (20, 40), (40, 45))]
    assert all(f'data-key="cluster_sizes.{c}">10<' in text for c in range(45)) and ": <b" in text
    assert "1 view, <b" in text


def test_hungarian_confusion_orders_clusters_by_their_matched_class():
    y = np.array([0, 0, 1, 1, 2, 2, 2])
    labels = np.array([5, 5, 3, 3, 4, 4, 3])
    counts, classes, clusters, matched = hungarian_confusion(y, labels)
    assert classes.tolist() == [0, 1, 2] and clusters.tolist() == [5, 3, 4] and matched.tolist() == [0, 1, 2]
    assert counts.tolist() == [[2, 0, 0], [0, 2, 0], [0, 1, 2]]


def test_the_map_colours_each_cluster_as_its_matched_class_when_k_differs_from_the_classes():
    """With fewer clusters than classes, cluster order[i] was drawn in class i's colour, though matched to another
    class (MSRC-v5 at k = 4: the cluster of label 3 drawn in label 2's colour); more than 20 clusters reused colours."""
    from onmsc_dask.report import RunPage, palette, plot_map

    y = np.repeat(np.arange(4), 10)
    labels = np.repeat([0, 1, 1, 2], 10)  # clusters 0, 1, 2: classes 0, (1 or 2), 3
    counts, classes, clusters, matched = hungarian_confusion(y, labels)
    assert clusters.tolist() == [0, 1, 2] and matched[[0, 2]].tolist() == [0, 3] and matched[1] in (1, 2)
    page = RunPage(title="t", source="s", view_names=["a"], view_dims=[2], view_metrics=["euclidean"], labels=labels,
                   view_weights=np.ones(1), related_views=np.ones(1, bool), objective=np.ones(2),
                   readout=np.random.default_rng(0).normal(size=(40, 3)), y=y)
    by_cluster, by_label = (ax.collections[0].get_facecolors()[:, :3] for ax in plot_map(page).axes)
    np.testing.assert_allclose(by_cluster[labels == 2], by_label[labels == 2])  # class 3's colour, not class 2's
    np.testing.assert_allclose(by_cluster[labels == 0], by_label[labels == 0])
    assert len({tuple(c) for c in palette(27)}) == 27 and len({tuple(c) for c in palette(90)}) == 90
    from matplotlib import colormaps

    for n in (10, 20, 30, 60):  # ten classes keep tab10 whatever k (k = 30 gave them tab20's pairs of one hue)
        np.testing.assert_array_equal(palette(n)[:10], colormaps["tab10"].colors)
        assert len({tuple(c) for c in palette(n)}) == n


def test_the_views_table_says_why_a_view_has_no_weight(tmp_path):
    """A view left out showed every possible reason (the warning said which), a fused view of weight 0 only 'yes',
    and a tolerance of 1e-4 read 0.00."""
    from onmsc_dask.outputs import write_run_files
    from onmsc_dask.report import RunPage, report_files

    labels = np.repeat(np.arange(3), 10)
    said = "view 2 ('c'): shares no cluster structure with any other view (…); it is left out of the fusion"
    page = RunPage(title="t", source="s", view_names=["a", "b", "c"], view_dims=[2, 3, 4],
                   view_metrics=["euclidean"] * 3, labels=labels, view_weights=np.array([1.0, 0.0, 0.0]),
                   related_views=np.array([True, True, False]), objective=np.ones(2),
                   readout=np.random.default_rng(0).normal(size=(30, 3)), warnings=[said],
                   facts={"parameters": {"tol": 1e-4}})
    write_run_files(tmp_path, report_files(page))
    text = (tmp_path / "report.html").read_text()
    cells = re.findall(r"<td(?: class=\"words\")?>(yes[^<]*|no:[^<]*)</td>", text)
    assert cells == ["yes", "yes, with μ = 0 (the fusion&#x27;s weight step gives it none)",
                     "no: shares no cluster structure with any other view (…); it is left out of the fusion"], cells
    assert "tol: 0.0001" in text


def test_thumbnails_show_each_sample_in_its_cell_and_leave_missing_ones_blank():
    images = np.random.default_rng(0).uniform(0, 1, (3, 4, 5, 6))
    images[2, 3] = np.nan  # cluster 2 has only three samples
    fig = plot_thumbnails(images, [7, 8, 3])
    (ax,) = fig.axes
    mosaic = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
    gap = 1  # a tenth of the 6-pixel side, rounded
    for c in range(3):
        for j in range(4):
            cell = mosaic[c * (5 + gap):c * (5 + gap) + 5, j * (6 + gap):j * (6 + gap) + 6]
            np.testing.assert_array_equal(cell, images[c, j])
    assert mosaic.shape == (3 * 5 + 2 * gap, 4 * 6 + 3 * gap) and np.isnan(mosaic[5, :]).all()
    assert [t.get_text() for t in ax.texts] == ["0 (7)", "1 (8)", "2 (3)"]
    for h, w in ((5, 6), (8, 24), (24, 8)):  # square pixels: 8 x 24 images were drawn in square cells (a trial)
        fig = plot_thumbnails(np.zeros((3, 4, h, w)), [7, 8, 3])
        box = fig.axes[0].get_position()
        rows, cols = fig.axes[0].images[0].get_array().shape
        np.testing.assert_allclose((box.width * fig.get_figwidth()) / (box.height * fig.get_figheight()), cols / rows)


def test_image_views_of_idx_directories_and_digits(tmp_path):
    """The thumbnails' source: an IDX directory's images, rows x cols from the header of the file io.load reads
    (12 x 3 images used to be drawn 6 x 6, and 10 x 14 ones not at all), the digits' 8 x 8 pixels, nothing for other
    data."""
    from onmsc_dask.cli import _image_metadata, build_parser

    def idx(path: Path, *shape: int) -> None:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(bytes([0, 0, 8, 3]) + np.asarray(shape, ">u4").tobytes() + bytes(int(np.prod(shape))))

    parse = build_parser().parse_args
    for name, shape in [("square", (5, 28, 28)), ("tall", (5, 12, 3)), ("wide", (5, 10, 14))]:
        idx(tmp_path / name / "t10k-images-idx3-ubyte", *shape)
        assert _image_metadata(parse(["run", "--data", str(tmp_path / name), "--out", "o"])) == {
            "image_shape": {"view": 0, "shape": list(shape[1:])}}
    idx(tmp_path / "tall" / "train-images-idx3-ubyte", 5, 4, 4)
    assert _image_metadata(parse(["run", "--data", str(tmp_path / "tall"), "--out", "o"]))["image_shape"]["shape"] == [
        4, 4]  # train when present, as io.load
    assert _image_metadata(parse(["run", "--out", "o"])) == {"image_shape": {"view": 0, "shape": [8, 8]}}
    assert _image_metadata(parse(["run", "--data", str(tmp_path / "a.npz"), "--out", "o"])) == {}


def test_report_html_embeds_convergence_png(run):
    """convergence.png is the page's objective figure, byte for byte (drawn once)."""
    page = (run / "report.html").read_text()
    embedded = re.search(r'data-figure="objective" alt="objective" src="data:image/png;base64,([^"]+)"', page)
    assert embedded and base64.b64decode(embedded.group(1)) == (run / "convergence.png").read_bytes()


def test_thumbnails_come_from_the_fewest_leading_chunks_that_hold_enough_of_every_cluster(tmp_path, monkeypatch):
    y = np.arange(400) % 4
    y[:100] = np.where(y[:100] == 3, 0, y[:100])  # cluster 3 first appears in the second 100-row chunk
    pixels = np.arange(400 * 4, dtype=float).reshape(400, 4)  # each row its own values
    store = MultiViewStore.create(tmp_path / "s.zarr", [pixels], y, chunk_rows=100)
    read = []
    monkeypatch.setattr(store, "read_rows", lambda p, start, stop: read.append(start) or pixels[start:stop])
    images = thumbnails(store, 0, (2, 2), y, 4, random_state=0)
    assert read == [0, 100]  # cluster 3's twelfth sample is in the second chunk; the last two are never read
    rows = images.reshape(4, THUMBNAILS, 4)[..., 0] / 4
    assert np.isfinite(rows).all() and (rows < 200).all()
    for c in range(4):
        assert (y[rows[c].astype(int)] == c).all() and len(set(rows[c])) == THUMBNAILS
    edge = np.arange(400) % 3
    edge[np.arange(11) * 9] = 3  # cluster 3: eleven samples in the first chunk, the twelfth the second's first row
    edge[100] = 3
    read.clear()
    images = thumbnails(store, 0, (2, 2), edge, 4, random_state=0)
    assert read == [0, 100] and 100 in images.reshape(4, THUMBNAILS, 4)[3, :, 0] / 4
    few = np.where(np.arange(400) == 399, 5, y)  # a cluster of one sample, in the last chunk: all chunks are read
    read.clear()
    images = thumbnails(store, 0, (2, 2), few, 6, random_state=0)
    assert read == [0, 100, 200, 300] and np.isnan(images[4]).all()
    assert images[5, 0].ravel().tolist() == pixels[399].tolist() and np.isnan(images[5, 1:]).all()


WIDTH_PROBE = """<!DOCTYPE html><html><body><iframe id="f" src="{src}" width="1100" height="900"></iframe><script>
f.onload = () => {{ const d = f.contentDocument, e = d.documentElement; const out = document.createElement("pre");
  const lines = c => {{ const r = d.createRange(); r.selectNodeContents(c);
    return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }};
  const split = [...d.querySelectorAll("td, th")].filter(c => c.innerText.length <= 12 && !/\\s/.test(c.innerText)
    && lines(c) > 1).map(c => c.innerText);
  out.id = "result"; out.textContent = JSON.stringify([e.scrollWidth, e.clientWidth, split]);
  document.body.appendChild(out); }};
</script></body></html>"""


@needs_chromium
def test_long_view_names_and_many_clusters_stay_within_the_page(tmp_path, scheduler):
    """View names of 500 characters and 40 clusters: the page is no wider than its window (the names pushed the
    weight and score columns 4,500 px to the right; the cluster table, one row of k cells, ran past the page)."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(400, 6, centers=40, random_state=0)
    np.save(tmp_path / "a.npy", X)
    np.save(tmp_path / "b.npy", X[:, ::-1] + 0.1)
    assert main(["run", "--data", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--n-clusters", "40",
                 "--view-names", "A" * 500, "B" * 500, "--out", str(tmp_path / "out"), "--scheduler",
                 scheduler, "--quiet"]) == 0
    probe = tmp_path / "out" / "probe.html"
    probe.write_text(WIDTH_PROBE.format(src="report.html"))
    found = re.search(r'<pre id="result">(.*?)</pre>', chromium("--virtual-time-budget=10000", "--dump-dom",
                                                                  probe.as_uri()), re.S)
    assert found, "the page did not load in Chromium"
    scroll_width, client_width, split = json.loads(found.group(1))
    assert scroll_width <= client_width
    assert split == []  # cells of one word or number on one line (with overflow-wrap:anywhere, "13/1", "weig/ht")
