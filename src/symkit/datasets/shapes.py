"""Triangle / pentagon segmentation images (the Rot task of Nordenfors et al., App. D), rasterised with numpy.

A regular pentagon or an equilateral triangle (vertices on the unit circle, one vertex pointing up; probability 1/2
each) is scaled by a uniform factor in ``scale`` and shifted by a uniform offset in ``(-shift, shift]^2`` on the
canvas [-1, 1]^2. The image is the area coverage of each pixel (``supersample^2`` sub-pixel samples per pixel, in
place of the reference's matplotlib rendering and OpenCV resize); the two target masks (pentagon, triangle) are the
coverage thresholded at 1/2. All shapes have the same orientation, so the data are not C4-symmetric.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["regular_polygon", "polygon_coverage", "shapes_segmentation"]


def regular_polygon(k: int, scale: float = 1.0, center: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """Vertices ``(k, 2)`` (x, y) of a regular k-gon with circumradius ``scale``, one vertex straight up."""
    if not isinstance(k, int) or k < 3:
        raise ValueError(f"regular_polygon: k must be an int >= 3, got {k!r}")
    t = np.pi / 2 + 2 * np.pi * np.arange(k) / k
    return np.stack([center[0] + scale * np.cos(t), center[1] + scale * np.sin(t)], axis=1)


def polygon_coverage(vertices: np.ndarray, size: int = 14, supersample: int = 4) -> np.ndarray:
    """Fraction of each of the ``size x size`` pixels of [-1, 1]^2 inside the convex polygon ``vertices``.

    Row 0 is the top of the canvas (y = 1). Points are tested against every edge of the counter-clockwise polygon.
    """
    v = np.asarray(vertices, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3:
        raise ValueError(f"polygon_coverage: vertices must be (k >= 3, 2), got shape {v.shape}")
    if not isinstance(size, int) or size < 1 or not isinstance(supersample, int) or supersample < 1:
        raise ValueError(f"polygon_coverage: size and supersample must be positive ints, got {size}, {supersample}")
    m = size * supersample
    c = -1 + (np.arange(m) + 0.5) * 2 / m
    xs, ys = np.meshgrid(c, c[::-1])  # row 0 at the top
    inside = np.ones((m, m), dtype=bool)
    for a, b in zip(v, np.roll(v, -1, axis=0)):
        cross = (b[0] - a[0]) * (ys - a[1]) - (b[1] - a[1]) * (xs - a[0])
        inside &= cross >= 0
    return inside.reshape(size, supersample, size, supersample).mean(axis=(1, 3))


def shapes_segmentation(
    num: int = 3000,
    size: int = 14,
    scale: tuple[float, float] = (0.7, 0.8),
    shift: float = 0.5,
    center: bool = True,
    supersample: int = 4,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(num, 1, size, size)`` (coverage minus 0.5 when ``center``) and masks ``(num, 2, size, size)``
    (channel 0: pentagon, channel 1: triangle)."""
    if not isinstance(num, int) or num < 1:
        raise ValueError(f"shapes_segmentation: num must be a positive int, got {num!r}")
    lo, hi = scale
    if not 0 < lo <= hi:
        raise ValueError(f"shapes_segmentation: scale must be (low, high) with 0 < low <= high, got {scale!r}")
    rng = np.random.default_rng(seed)
    images = np.zeros((num, 1, size, size))
    masks = np.zeros((num, 2, size, size))
    for i in range(num):
        pentagon = rng.random() < 0.5
        s = rng.uniform(lo, hi)
        off = shift - rng.random(2) * 2 * shift  # uniform on (-shift, shift]
        cover = polygon_coverage(regular_polygon(5 if pentagon else 3, s, (off[0], off[1])), size, supersample)
        images[i, 0] = cover
        masks[i, 0 if pentagon else 1] = cover >= 0.5
    x = torch.as_tensor(images - 0.5 if center else images, dtype=dtype)
    return x, torch.as_tensor(masks, dtype=dtype)
