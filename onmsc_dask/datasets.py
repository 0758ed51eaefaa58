"""Embedded example data: scikit-learn's 8x8 handwritten digits as three complementary views.

The digits ship with scikit-learn (1797 images of 10 classes, grey levels 0..16), so the default
``onmsc-dask run`` needs neither a download nor a data file.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: orientation bins of the gradient view, sectors of the zoning view
N_BINS = 8
#: ring boundaries (in pixels from the image centre) of the zoning view
RING_EDGES = (2.2, 3.2)


def gradient_histograms(images: np.ndarray, cell: int = 4, stride: int = 2, n_bins: int = N_BINS) -> np.ndarray:
    """HOG-like view: magnitude-weighted histograms of gradient orientation on overlapping cells.

    Gradients are central differences (``np.gradient``); each pixel votes its gradient magnitude into the
    two nearest of ``n_bins`` signed-orientation bins (bin b centred at b * 360 / n_bins degrees, linear
    interpolation). Pixel votes are summed over ``cell`` x ``cell`` cells placed every ``stride`` pixels
    (3 x 3 overlapping 4 x 4 cells on an 8 x 8 image, so 72 features), and each descriptor is scaled to
    unit length so stroke contrast does not matter.
    """
    n, h, w = images.shape
    gy, gx = np.gradient(images.astype(np.float64), axis=(1, 2))
    magnitude = np.hypot(gx, gy)
    position = np.arctan2(gy, gx) % (2 * np.pi) / (2 * np.pi / n_bins)
    low = np.floor(position).astype(int) % n_bins
    frac = position - np.floor(position)
    one_hot = np.eye(n_bins)
    votes = ((magnitude * (1 - frac))[..., None] * one_hot[low]
             + (magnitude * frac)[..., None] * one_hot[(low + 1) % n_bins])
    cells = [votes[:, i:i + cell, j:j + cell].sum(axis=(1, 2))
             for i in range(0, h - cell + 1, stride) for j in range(0, w - cell + 1, stride)]
    features = np.concatenate(cells, axis=1)
    return features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)


def radial_zoning(images: np.ndarray, ring_edges: tuple[float, ...] = RING_EDGES,
                  n_sectors: int = N_BINS) -> np.ndarray:
    """Polar zoning view: mean ink in each zone of (len(ring_edges) + 1) rings x ``n_sectors`` sectors.

    Rings are centred on the image centre; sectors are centred on the compass directions (0, 45, ...
    degrees) so no pixel centre falls on a sector boundary. The default rings split an 8 x 8 image into an
    inner and a middle ring of 16 pixels each and an outer ring of 32 (with the corners), so each of the 24
    zones holds 2 to 6 pixels and none is empty. Mean rather than summed ink keeps larger zones from
    dominating. The view describes where ink lies relative to the centre (loops, strokes through
    the middle, open sides) coarsely, so it tolerates the small shifts that change many raw pixels.
    """
    n, h, w = images.shape
    yy, xx = np.mgrid[0:h, 0:w] - np.array([(h - 1) / 2, (w - 1) / 2])[:, None, None]
    ring = np.searchsorted(ring_edges, np.hypot(yy, xx))
    width = 2 * np.pi / n_sectors
    sector = np.floor((np.arctan2(yy, xx) + np.pi + width / 2) / width).astype(int) % n_sectors
    zones = np.eye((len(ring_edges) + 1) * n_sectors)[(ring * n_sectors + sector).ravel()]
    return images.reshape(n, -1).astype(np.float64) @ (zones / zones.sum(axis=0))


def load_digits_views() -> tuple[list[np.ndarray], np.ndarray, list[str]]:
    """scikit-learn's digits (n = 1797, k = 10) as three views, their labels and view names.

    - ``pixels`` (64): the raw 8 x 8 grey levels, exact stroke positions.
    - ``gradient_histograms`` (72): local edge orientation (:func:`gradient_histograms`), which separates
      digits by stroke direction (e.g. the diagonal of a 7 from the vertical of a 1) and ignores contrast.
    - ``radial_zoning`` (24): coarse polar ink layout around the centre (:func:`radial_zoning`), tolerant to
      small shifts and stroke width.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images
    views = [images.reshape(len(images), -1).astype(np.float64), gradient_histograms(images), radial_zoning(images)]
    return views, digits.target.astype(np.int64), ["pixels", "gradient_histograms", "radial_zoning"]


#: built-in data sets by name, for ``onmsc-dask run --dataset NAME``
DATASETS: dict[str, Callable[[], tuple[list[np.ndarray], np.ndarray, list[str]]]] = {"digits": load_digits_views}
#: the image view and its shape of each built-in data set that has one (report.html shows thumbnails)
IMAGE_SHAPES: dict[str, dict] = {"digits": {"view": 0, "shape": [8, 8]}}
