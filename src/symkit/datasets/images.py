"""An image folder the user already has, laid out as ImageNet's validation set is for most tools:
``root/[split/]class_name/image.(jpg|jpeg|png|bmp|webp)``, one folder per class (sorted names give the labels).

Images are decoded with Pillow (which comes with matplotlib), converted to RGB, resized so their shorter side is
``size * 256 / 224`` and centre-cropped to ``size x size`` (the usual evaluation transform of ImageNet models), and
scaled to [0, 1]. ``limit`` takes that many images in turn from each class (the first of each class, then the
second, ...), so a small limit still covers the classes. Nothing downloads; an unreadable image is named.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from symkit.datasets.files import data_dir_of

__all__ = ["IMAGE_SUFFIXES", "image_folder_files", "load_image", "load_image_folder"]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def image_folder_files(data_dir: str | os.PathLike | None = None,
                       split: str | None = None) -> tuple[list[tuple[Path, int]], tuple[str, ...]]:
    """The ``(path, label)`` of every image under the class folders of ``data_dir[/split]``, sorted by class and
    name, and the class names. Raises ``FileNotFoundError`` naming the folder when it holds no class folder with
    images."""
    root = data_dir_of(data_dir)
    folder = root / split if split else root
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder (expected {root}/{split}/<class>/<images>)")
    classes = tuple(sorted(d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith(".")))
    files = [(p, label) for label, name in enumerate(classes) for p in sorted((folder / name).iterdir())
             if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
    if not files:
        raise FileNotFoundError(f"{folder}: no images ({', '.join(IMAGE_SUFFIXES)}) in class folders; expected "
                                f"{folder}/<class>/<image>; symkit never downloads data")
    return files, classes


def load_image(path: str | os.PathLike, size: int = 224) -> np.ndarray:
    """One image as ``(3, size, size)`` uint8: RGB, shorter side resized to ``size * 256 / 224``, centre crop."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        raise ImportError("reading image folders needs Pillow: pip install 'symkit[lab]'") from None

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            w, h = img.size
            scale = round(size * 256 / 224) / min(w, h)
            img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.Resampling.BILINEAR)
            w, h = img.size
            left, top = (w - size) // 2, (h - size) // 2
            img = img.crop((left, top, left + size, top + size))
            return np.asarray(img, dtype=np.uint8).transpose(2, 0, 1).copy()
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable image ({type(exc).__name__}: {exc})") from None


def _round_robin(files: list[tuple[Path, int]], limit: int | None) -> list[tuple[Path, int]]:
    if limit is None or limit >= len(files):
        return files
    by_class: dict[int, list[tuple[Path, int]]] = {}
    for item in files:
        by_class.setdefault(item[1], []).append(item)
    out: list[tuple[Path, int]] = []
    rank = 0
    while len(out) < limit:
        for items in by_class.values():
            if rank < len(items) and len(out) < limit:
                out.append(items[rank])
        rank += 1
    return sorted(out, key=lambda item: (item[1], item[0].name))


def load_image_folder(data_dir: str | os.PathLike | None = None, split: str | None = None, size: int = 224,
                      limit: int | None = None,
                      dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
    """Images ``(N, 3, size, size)`` in [0, 1], labels ``(N,)`` (long) and the class names of the image folder in
    ``data_dir`` (or the run's ``--data-dir``, or ``$SYMKIT_DATA``), optionally its ``split`` subfolder
    (module docstring)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    files, classes = image_folder_files(data_dir, split)
    chosen = _round_robin(files, limit)
    images = np.stack([load_image(p, size) for p, _ in chosen])
    labels = torch.tensor([label for _, label in chosen], dtype=torch.long)
    return torch.as_tensor(images.astype(np.float64) / 255.0, dtype=dtype), labels, classes
