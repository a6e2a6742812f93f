"""Rotated and affinely augmented handwritten digits (rotated MNIST and augmented 2xMNIST, PowerNet §4.2, and their
offline stand-ins).

The offline source is scikit-learn's 8x8 digits (:func:`symkit.datasets.digits.load_digits_images`), upsampled to
``digit_size`` and centred on a ``canvas x canvas`` frame, like MNIST's 20x20 digits on a 28x28 frame;
:func:`centred_images` also reads MNIST or Fashion-MNIST from the run's data folder. Transforms use bilinear
``grid_sample`` with zero fill, on the images' device (random draws come from CPU generators, so a seed gives the same
transforms on every device). Angles are in radians; a positive angle rotates the content counter-clockwise as
displayed (row 0 at the top), the same sense as ``scipy.ndimage.rotate`` and ``np.rot90``.
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F

from symkit.datasets.digits import load_digits_images

__all__ = ["affine_transform", "augmented_digits", "centred_digits", "centred_images", "rotate_images",
           "rotated_digits", "split_indices"]


def _check_images(images: torch.Tensor) -> torch.Tensor:
    if not isinstance(images, torch.Tensor) or images.ndim != 4:
        raise ValueError(f"images must be a tensor (N, C, H, W), got {getattr(images, 'shape', images)!r}")
    return images


def affine_transform(images: torch.Tensor, angle: torch.Tensor, scale: torch.Tensor | float = 1.0,
                     shift: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate by ``angle`` (radians, counter-clockwise), scale by ``scale`` about the centre, then translate by
    ``shift`` (``(N, 2)`` pixels, (rows down, columns right)); bilinear, zero outside the frame.

    Output pixel ``p`` (centred coordinates) samples the input at ``R(angle)^-1 (p - shift) / scale``.
    """
    images = _check_images(images)
    n, _, h, w = images.shape
    f = dict(dtype=images.dtype, device=images.device)
    angle = torch.as_tensor(angle, **f).reshape(-1).expand(n)
    scale = torch.as_tensor(scale, **f).reshape(-1).expand(n)
    shift = torch.zeros(n, 2, **f) if shift is None else torch.as_tensor(shift, **f).reshape(n, 2)
    if (scale <= 0).any():
        raise ValueError("scale must be positive")
    # grid_sample works in normalised (x = column, y = row) coordinates in [-1, 1] (align_corners=False). With y
    # pointing down, a display counter-clockwise rotation by a is the matrix R(-a) in (x, y) axes, so the inverse map
    # in pixel units is q = R(a) (p - t) / scale.
    c, s = torch.cos(angle), torch.sin(angle)
    a11, a12, a21, a22 = c / scale, -s / scale, s / scale, c / scale
    tx, ty = shift[:, 1], shift[:, 0]
    # convert pixel units to normalised units per axis
    sx, sy = 2.0 / w, 2.0 / h
    theta = torch.stack(
        [
            torch.stack([a11, a12 * sy / sx, -(a11 * tx + a12 * ty) * sx], -1),
            torch.stack([a21 * sx / sy, a22, -(a21 * tx + a22 * ty) * sy], -1),
        ],
        1,
    )
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def rotate_images(images: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each image by its angle (radians, counter-clockwise as displayed), bilinear, zero fill."""
    return affine_transform(images, angles)


def centred_digits(digit_size: int = 20, canvas: int = 28, dtype: torch.dtype = torch.float32
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The 1797 digits upsampled to ``digit_size`` and zero-padded to the centre of a ``canvas`` frame."""
    if not isinstance(canvas, int) or not isinstance(digit_size, int) or not 8 <= digit_size <= canvas:
        raise ValueError(f"need ints 8 <= digit_size <= canvas, got digit_size={digit_size!r}, canvas={canvas!r}")
    images, labels = load_digits_images(size=digit_size, dtype=dtype)
    return _pad_to(images, canvas), labels


def _pad_to(images: torch.Tensor, canvas: int) -> torch.Tensor:
    lo = (canvas - images.shape[-1]) // 2
    hi = canvas - images.shape[-1] - lo
    return F.pad(images, (lo, hi, lo, hi))


def centred_images(source: str = "digits", split: str = "train", digit_size: int = 20, canvas: int = 28,
                   dtype: torch.dtype = torch.float32, data_dir: str | os.PathLike | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Digits of ``source`` resized to ``digit_size`` and zero-padded to the centre of a ``canvas`` frame: the bundled
    digits (:func:`centred_digits`, one split: ``train``) or ``mnist`` / ``fashion-mnist`` from ``data_dir``
    (else ``$SYMKIT_DATA``; :func:`symkit.datasets.sources.load_images`; their 28x28 frames already hold a centred
    20x20 digit)."""
    if source == "digits":
        if split != "train":
            raise ValueError("the bundled digits have one split: load split='train' and split it yourself")
        return centred_digits(digit_size, canvas, dtype)
    if source not in ("mnist", "fashion-mnist"):
        raise ValueError(f"source must be 'digits', 'mnist' or 'fashion-mnist', got {source!r}")
    if not isinstance(canvas, int) or not isinstance(digit_size, int) or not 1 <= digit_size <= canvas:
        raise ValueError(f"need ints 1 <= digit_size <= canvas, got digit_size={digit_size!r}, canvas={canvas!r}")
    from symkit.datasets.sources import load_images

    images, labels = load_images(source, split, size=digit_size, dtype=dtype, data_dir=data_dir)
    return _pad_to(images, canvas), labels


def split_indices(n: int, test_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded random split of ``range(n)`` into train and test indices (digits never appear in both)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_test = max(1, int(round(n * test_fraction)))
    return perm[n_test:], perm[:n_test]


def rotated_digits(images: torch.Tensor, copies: int = 1, max_angle: float = math.pi,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``copies`` rotations of every image with angles uniform in ``[-max_angle, max_angle)``.

    Returns ``(rotated (N*copies, C, H, W), angles (N*copies,), source index (N*copies,))``.
    """
    images = _check_images(images)
    if not isinstance(copies, int) or copies < 1:
        raise ValueError(f"copies must be a positive int, got {copies!r}")
    idx = torch.arange(images.shape[0], device=images.device).repeat(copies)
    angles = (torch.rand(idx.numel(), generator=generator, dtype=torch.float64) * 2 - 1) * max_angle
    angles = angles.to(dtype=images.dtype, device=images.device)
    return rotate_images(images[idx], angles), angles, idx


def augmented_digits(images: torch.Tensor, copies: int = 1, scale_range: tuple[float, float] = (0.8, 1.2),
                     max_shift: float = 5.0, max_angle: float = math.pi, generator: torch.Generator | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Random rotation (uniform in ``[-max_angle, max_angle)``), scale (uniform in ``scale_range``) and translation
    (uniform in ``[-max_shift, max_shift]`` pixels per axis) of every image, ``copies`` times (paper §4.2 2xMNIST).

    Returns ``(augmented images (N*copies, C, H, W), source index (N*copies,))``.
    """
    images = _check_images(images)
    if not isinstance(copies, int) or copies < 1:
        raise ValueError(f"copies must be a positive int, got {copies!r}")
    lo, hi = scale_range
    if not 0 < lo <= hi:
        raise ValueError(f"scale_range must satisfy 0 < low <= high, got {scale_range!r}")
    idx = torch.arange(images.shape[0], device=images.device).repeat(copies)
    m = idx.numel()
    u = torch.rand(m, 4, generator=generator, dtype=torch.float64)
    angle = (u[:, 0] * 2 - 1) * max_angle
    scale = lo + (hi - lo) * u[:, 1]
    shift = (u[:, 2:] * 2 - 1) * max_shift
    f = dict(dtype=images.dtype, device=images.device)  # drawn in float64 on the CPU, then placed
    return affine_transform(images[idx], angle.to(**f), scale.to(**f), shift.to(**f)), idx
