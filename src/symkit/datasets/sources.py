"""One entry point for the image-classification data of the experiments: scikit-learn's bundled 8x8 digits (the CI
and default scale) or a real data set from the run's data folder (the paper scale), by name.

``load_images("mnist", "test", size=14)`` reads MNIST's test files from ``data_dir`` (else ``$SYMKIT_DATA``) and
resizes them to 14x14 (area averaging when shrinking, bilinear when growing, as the papers' resizes do). Sources:
``digits`` (1,797 images, one split: ask for ``train``), ``mnist``, ``fashion-mnist``, ``cifar10`` and
``image-folder`` (``train``/``val`` subfolders of the data folder, or a ``val`` folder only, ImageNet-style).
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

__all__ = ["IMAGE_SOURCES", "load_images", "resize_images"]

IMAGE_SOURCES = ("digits", "mnist", "fashion-mnist", "cifar10", "image-folder")


def resize_images(x: torch.Tensor, size: int) -> torch.Tensor:
    """``(N, C, H, W)`` images resized to ``size x size``: area averaging when shrinking, bilinear when growing."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    if x.shape[-1] == size and x.shape[-2] == size:
        return x
    if size < min(x.shape[-2:]):
        return F.interpolate(x, size=(size, size), mode="area")
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).clamp(0.0, 1.0)


def load_images(source: str, split: str = "train", size: int | None = None, limit: int | None = None,
                dtype: torch.dtype = torch.float32, data_dir: str | os.PathLike | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(N, C, size, size)`` in [0, 1] and labels ``(N,)`` of ``source``'s ``split`` (module docstring);
    ``limit`` keeps the first ``limit`` images (the files' own order; MNIST's and CIFAR's are shuffled). Files are
    read from ``data_dir`` (else ``$SYMKIT_DATA``); the bundled digits need none."""
    if source not in IMAGE_SOURCES:
        raise ValueError(f"image source must be one of {', '.join(IMAGE_SOURCES)}, got {source!r}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    if source == "digits":
        if split != "train":
            raise ValueError("the bundled digits have one split: load split='train' and split it yourself")
        from symkit.datasets.digits import load_digits_images

        x, y = load_digits_images(8, dtype=torch.float64)
    elif source in ("mnist", "fashion-mnist"):
        from symkit.datasets.mnist import load_mnist

        x, y = load_mnist(data_dir, split, torch.float64, kind=source)
    elif source == "cifar10":
        from symkit.datasets.cifar import load_cifar10

        x, y = load_cifar10(data_dir, split, torch.float64)
    else:
        from symkit.datasets.images import load_image_folder

        x, y, _ = load_image_folder(data_dir, "train" if split == "train" else "val", size=size or 224, limit=limit,
                                    dtype=torch.float64)
    if limit is not None:
        x, y = x[:limit], y[:limit]
    if size is not None:
        x = resize_images(x, size)
    return x.to(dtype), y
