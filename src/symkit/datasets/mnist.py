"""MNIST and Fashion-MNIST from files the user already has (the idx format of the original distribution, plain or
gzipped); nothing downloads.

``load_mnist(data_dir, split)`` looks in ``data_dir`` (or the run's ``--data-dir``, or ``$SYMKIT_DATA``), and in its
``mnist`` and ``MNIST/raw`` subfolders, for ``train-images-idx3-ubyte`` / ``train-labels-idx1-ubyte``
(``split="train"``) or the ``t10k-`` pair (``split="test"``), each optionally ending in ``.gz``, and says which files
it expected when they are absent. ``load_fashion_mnist`` reads Fashion-MNIST's files, which have the same names, from
the ``fashion-mnist``, ``fashion`` or ``FashionMNIST/raw`` subfolder (or the folder itself). A ``.gz`` file with the
size of the published archive is checked against its MD5 (:mod:`symkit.datasets.files`).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import torch

from symkit.datasets.files import check_known_archive, data_dir_of

__all__ = ["FASHION_MNIST_CLASSES", "data_dir_of", "load_fashion_mnist", "load_idx", "load_mnist"]

FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")

#: the idx element types (the third byte of the magic number)
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"),
              0x0E: np.dtype(">f8")}
_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
#: where each kind's files may sit below the data folder
_SUBFOLDERS = {"mnist": (".", "mnist", "MNIST/raw"),
               "fashion-mnist": ("fashion-mnist", "fashion", "FashionMNIST/raw", ".")}


def load_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one idx file (plain or ``.gz``): a 4-byte magic number ``0 0 type ndim``, ``ndim`` big-endian sizes,
    then the data. Raises ``ValueError`` naming the file when the header or the size does not match."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read()
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        raise ValueError(f"{path}: cannot be read ({type(exc).__name__}: {exc}); is it a complete copy?") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise ValueError(f"{path}: not an idx file (magic bytes {raw[:4]!r}; expected 0 0 <type> <ndim>)")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(f"{path}: the header declares shape {shape} ({expected} bytes) but the file has {len(raw)} "
                         "bytes")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)


def _find(folder: Path, name: str, kind: str = "mnist") -> Path | None:
    for base in (folder / sub for sub in _SUBFOLDERS[kind]):
        for candidate in (base / name, base / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def load_mnist(data_dir: str | os.PathLike | None = None, split: str = "train",
               dtype: torch.dtype = torch.float32, kind: str = "mnist") -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(N, 1, 28, 28)`` scaled to [0, 1] and labels ``(N,)`` (long) of MNIST (``kind="mnist"``) or
    Fashion-MNIST (``kind="fashion-mnist"``, same format) from the idx files in ``data_dir`` (module docstring)."""
    if split not in _FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if kind not in _SUBFOLDERS:
        raise ValueError(f"kind must be one of {', '.join(_SUBFOLDERS)}, got {kind!r}")
    folder = data_dir_of(data_dir)
    paths = [_find(folder, name, kind) for name in _FILES[split]]
    missing = [name for name, p in zip(_FILES[split], paths) if p is None]
    if missing:
        places = ", ".join(repr(s) if s != "." else "the folder itself" for s in _SUBFOLDERS[kind])
        raise FileNotFoundError(f"{folder}: missing {', '.join(missing)} of {kind} (plain or .gz, in {places}); "
                                "symkit never downloads data")
    for p in paths:
        check_known_archive(kind, p)
    images, labels = (load_idx(p) for p in paths)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{paths[0]} and {paths[1]}: expected (N, H, W) images and N labels, got {images.shape} and "
                         f"{labels.shape}")
    if labels.size and int(labels.max()) > 9:
        raise ValueError(f"{paths[1]}: label {int(labels.max())} is not a class of {kind} (0-9)")
    x = torch.as_tensor(images.astype(np.float64) / 255.0, dtype=dtype).unsqueeze(1)
    return x, torch.as_tensor(labels.astype(np.int64))


def load_fashion_mnist(data_dir: str | os.PathLike | None = None, split: str = "train",
                       dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST's images and labels (:data:`FASHION_MNIST_CLASSES`) from its idx files (module docstring)."""
    return load_mnist(data_dir, split, dtype, kind="fashion-mnist")
