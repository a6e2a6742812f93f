"""Offline stand-ins for the paper's quadrant-MNIST (Table 1) and rotated/translated MNIST (Table 3).

Built from scikit-learn's bundled 8x8 handwritten digits (``symkit.datasets.digits``); nothing downloads.

- :func:`quadrant_digits`: each digit is placed in one of the 4 quadrants of a ``2s × 2s`` canvas (``s`` the digit
  size). Task ``'digit'`` has 10 classes (translation-invariant); ``'digit_quadrant'`` has 40, label
  ``digit + 10·quadrant`` (cannot be solved by a translation-invariant model: at most about a quarter of the
  digit accuracy).
- :func:`transformed_digits`: digits on a canvas with a fixed per-image random rotation (``U[-180°, 180°]``) and/or
  integer translation, bilinear, as in the paper's rotated / translated MNIST.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from symkit.datasets.digits import load_digits_images

TASKS = ("digit", "digit_quadrant")


def _split(n: int, n_test: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    if not 0 < n_test < n:
        raise ValueError(f"n_test must be in (0, {n}), got {n_test!r}")
    perm = torch.randperm(n, generator=gen)
    return perm[n_test:], perm[:n_test]


def _standardise(train: torch.Tensor, test: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean, std = train.mean(), train.std()
    return (train - mean) / std, (test - mean) / std


def quadrant_digits(task: str = "digit_quadrant", digit_size: int = 8, n_test: int = 497, seed: int = 0
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)``; images ``(N, 1, 2s, 2s)`` standardised with train statistics.

    The quadrant of every image is drawn uniformly with ``seed`` (fixed per image, as in the paper's code).
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    images, digits = load_digits_images(size=digit_size)
    gen = torch.Generator().manual_seed(seed)
    n, s = len(images), digit_size
    quadrant = torch.randint(0, 4, (n,), generator=gen)
    canvas = torch.zeros(n, 1, 2 * s, 2 * s)
    for q in range(4):
        sel = quadrant == q
        r, c = divmod(q, 2)
        canvas[sel, :, r * s:(r + 1) * s, c * s:(c + 1) * s] = images[sel]
    labels = digits if task == "digit" else digits + 10 * quadrant
    tr, te = _split(n, n_test, gen)
    xtr, xte = _standardise(canvas[tr], canvas[te])
    return xtr, labels[tr], xte, labels[te]


def _rotate_translate(x: torch.Tensor, angles: torch.Tensor, shifts: torch.Tensor) -> torch.Tensor:
    """Rotate each image by ``angles`` (radians) about its centre and shift by ``shifts`` pixels (bilinear)."""
    n, _, h, w = x.shape
    cos, sin = torch.cos(angles), torch.sin(angles)
    theta = torch.zeros(n, 2, 3, dtype=x.dtype)
    theta[:, 0, 0], theta[:, 0, 1], theta[:, 1, 0], theta[:, 1, 1] = cos, -sin, sin, cos
    theta[:, 0, 2] = -2 * shifts[:, 0] / w
    theta[:, 1, 2] = -2 * shifts[:, 1] / h
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def transformed_digits(transform: str = "rotated", digit_size: int = 8, canvas: int = 16, max_shift: int = 4,
                       n_test: int = 497, seed: int = 0
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Digits centred on a ``canvas`` grid, then ``'none'``, ``'rotated'`` (U[-180°,180°]), ``'translated'``
    (integer shifts in ``[-max_shift, max_shift]``) or ``'rotated_translated'``; fixed per image by ``seed``."""
    kinds = ("none", "rotated", "translated", "rotated_translated")
    if transform not in kinds:
        raise ValueError(f"transform must be one of {kinds}, got {transform!r}")
    if canvas < digit_size:
        raise ValueError(f"canvas ({canvas}) must be at least digit_size ({digit_size})")
    images, labels = load_digits_images(size=digit_size)
    gen = torch.Generator().manual_seed(seed + 1)
    n = len(images)
    pad = canvas - digit_size
    x = F.pad(images, (pad // 2, pad - pad // 2, pad // 2, pad - pad // 2))
    angles = torch.zeros(n)
    shifts = torch.zeros(n, 2)
    if "rotated" in transform:
        angles = (torch.rand(n, generator=gen) * 2 - 1) * math.pi
    if "translated" in transform:
        shifts = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=gen).float()
    x = _rotate_translate(x, angles, shifts)
    tr, te = _split(n, n_test, torch.Generator().manual_seed(seed))  # the same split for every transform
    xtr, xte = _standardise(x[tr], x[te])
    return xtr, labels[tr], xte, labels[te]
