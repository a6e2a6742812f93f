"""The data of seed 001 (van der Ouderaa, Immer & van der Wilk 2023): quadrant MNIST (Table 1), rotated /
translated MNIST (Table 3) and a CIFAR-10 stand-in (Tables 2 and 4), each as an offline stand-in built from
scikit-learn's bundled 8x8 handwritten digits (``symkit.datasets.digits``) and, for the paper scale, from MNIST's
files in the run's data folder (:func:`symkit.datasets.sources.load_images`); nothing downloads.

- :func:`quadrant_digits`: each digit is placed in one of the 4 quadrants of a ``2s × 2s`` canvas (``s`` the digit
  size). Task ``'digit'`` has 10 classes (translation-invariant); ``'digit_quadrant'`` has 40, label
  ``digit + 10·quadrant`` (cannot be solved by a translation-invariant model: at most about a quarter of the
  digit accuracy).
- :func:`quadrant_mnist`: the paper's quadrant MNIST (§6.1): every 28x28 MNIST digit in one quadrant of a 56x56
  canvas, resized to 32x32 (bilinear, no antialiasing, as the authors' code).
- :func:`transformed_digits`: digits on a canvas with a fixed per-image random rotation (``U[-180°, 180°]``) and/or
  integer translation, bilinear, as in the paper's rotated / translated MNIST.
- :func:`transformed_mnist`: rotated / translated MNIST (§6.3, F.5): fixed per image, ±8 pixels on 28x28, then
  resized to 32x32.
- :func:`colour_digits`: three-channel images for the CIFAR-10 experiments at CI and default size: every digit in a
  random light colour, shifted a little from the centre, on a noisy dark background of another colour.
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F

from symkit.datasets.digits import load_digits_images
from symkit.datasets.sources import load_images

TASKS = ("digit", "digit_quadrant")
TRANSFORMS = ("none", "rotated", "translated", "rotated_translated")
#: the network input of the paper's MNIST experiments (App. F.5: MNIST resized to 32x32)
PAPER_SIZE = 32


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
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}")
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


Split = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _mnist(split: str, limit: int, data_dir: str | os.PathLike | None) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST's ``split`` from ``data_dir`` (else ``$SYMKIT_DATA``), ``(N, 1, 28, 28)`` in [0, 1]; ``limit`` > 0 keeps
    the first."""
    return load_images("mnist", split, limit=limit or None, data_dir=data_dir)


def _resize(x: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear resize without antialiasing (``torchvision.transforms.Resize(size, antialias=False)`` on tensors)."""
    if x.shape[-1] == size:
        return x
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=False)


def _chunked(fn, x: torch.Tensor, *args: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """``fn(x[i:j], *(a[i:j] for a in args))`` over chunks of the first axis, concatenated (bounded memory)."""
    return torch.cat([fn(x[i:i + chunk], *(a[i:i + chunk] for a in args)) for i in range(0, len(x), chunk)])


def _split_seed(seed: int, split: str) -> int:
    return 2 * seed + (split == "train")  # train and test draw independently, and differently for every seed


def quadrant_mnist(task: str = "digit_quadrant", n_train: int = 0, n_test: int = 0, seed: int = 0,
                   size: int = PAPER_SIZE, data_dir: str | os.PathLike | None = None) -> Split:
    """Quadrant MNIST (§6.1, the authors' code): every 28x28 digit at offset ``(0|28, 0|28)`` of a 56x56 canvas, the
    quadrant uniform and fixed per image (drawn from ``seed``), the canvas resized to ``size`` (bilinear, no
    antialiasing); label ``digit`` or ``digit + 10·quadrant``. MNIST's own train and test files from ``data_dir``
    (else ``$SYMKIT_DATA``) (``n_train`` / ``n_test`` > 0 keep the first images); standardised with train statistics."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    out = []
    for split, limit in (("train", n_train), ("test", n_test)):
        images, digits = _mnist(split, limit, data_dir)
        gen = torch.Generator().manual_seed(_split_seed(seed, split))
        quadrant = torch.randint(0, 4, (len(images),), generator=gen)
        s = images.shape[-1]

        def place(img: torch.Tensor, quad: torch.Tensor, s: int = s) -> torch.Tensor:
            canvas = img.new_zeros(len(img), 1, 2 * s, 2 * s)
            for q in range(4):
                sel = quad == q
                r, c = divmod(q, 2)
                canvas[sel, :, r * s:(r + 1) * s, c * s:(c + 1) * s] = img[sel]
            return _resize(canvas, size)

        out += [_chunked(place, images, quadrant), digits if task == "digit" else digits + 10 * quadrant]
    xtr, xte = _standardise(out[0], out[2])
    return xtr, out[1], xte, out[3]


def transformed_mnist(transform: str = "rotated", max_shift: int = 8, n_train: int = 0, n_test: int = 0,
                      seed: int = 0, size: int = PAPER_SIZE, data_dir: str | os.PathLike | None = None) -> Split:
    """Rotated / translated MNIST (§6.3, F.5): every 28x28 digit rotated by a fixed ``U[-180°, 180°]`` angle and/or
    shifted by fixed integer offsets in ``[-max_shift, max_shift]`` (bilinear, zeros outside), then resized to
    ``size``; drawn per image from ``seed``. MNIST's train and test files from ``data_dir`` (else
    ``$SYMKIT_DATA``; ``n_train`` / ``n_test`` > 0 keep the first images); standardised with train statistics."""
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}")
    out = []
    for split, limit in (("train", n_train), ("test", n_test)):
        images, labels = _mnist(split, limit, data_dir)
        gen = torch.Generator().manual_seed(_split_seed(seed, split))
        n = len(images)
        angles, shifts = torch.zeros(n), torch.zeros(n, 2)
        if "rotated" in transform:
            angles = (torch.rand(n, generator=gen) * 2 - 1) * math.pi
        if "translated" in transform:
            shifts = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=gen).float()
        moved = _chunked(lambda x, a, t: _resize(_rotate_translate(x, a, t), size), images, angles, shifts)
        out += [moved, labels]
    xtr, xte = _standardise(out[0], out[2])
    return xtr, out[1], xte, out[3]


def colour_digits(canvas: int = 16, digit_size: int = 8, n_test: int = 497, seed: int = 0, noise: float = 0.1,
                  max_shift: int = 2) -> Split:
    """The CIFAR-10 stand-in: ``(N, 3, canvas, canvas)`` images of the 1,797 bundled digits, each a light digit of a
    random colour (every channel in [0.6, 1]) on a dark background of another (every channel in [0, 0.4]), shifted
    from the centre by integers in ``[-max_shift, max_shift]`` (as objects sit roughly centred in CIFAR-10's
    images), plus Gaussian pixel noise of standard deviation ``noise``; the label is the digit. Drawn per image from
    ``seed``, split as :func:`quadrant_digits` does (``n_test`` test images) and standardised per channel with
    train statistics (as CIFAR-10 is)."""
    if canvas < digit_size:
        raise ValueError(f"canvas ({canvas}) must be at least digit_size ({digit_size})")
    images, labels = load_digits_images(size=digit_size)
    n = len(images)
    gen = torch.Generator().manual_seed(seed + 2)
    bg = 0.4 * torch.rand(n, 3, 1, 1, generator=gen)
    fg = 0.6 + 0.4 * torch.rand(n, 3, 1, 1, generator=gen)
    room = canvas - digit_size
    offsets = (room // 2 + torch.randint(-max_shift, max_shift + 1, (n, 2), generator=gen)).clamp(0, room)
    ink = torch.zeros(n, 1, canvas, canvas)
    for i, (r, c) in enumerate(offsets.tolist()):
        ink[i, :, r:r + digit_size, c:c + digit_size] = images[i]
    x = bg * (1 - ink) + fg * ink + noise * torch.randn(n, 3, canvas, canvas, generator=gen)
    tr, te = _split(n, n_test, torch.Generator().manual_seed(seed))
    xtr, xte = standardise_channels(x[tr], x[te])
    return xtr, labels[tr], xte, labels[te]


def standardise_channels(train: torch.Tensor, test: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel standardisation of ``(N, C, H, W)`` images with the training set's mean and standard deviation."""
    mean = train.mean(dim=(0, 2, 3), keepdim=True)
    std = train.std(dim=(0, 2, 3), keepdim=True)
    return (train - mean) / std, (test - mean) / std
