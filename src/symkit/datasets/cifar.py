"""CIFAR-10 from the files the user already has: the binary version (``cifar-10-batches-bin``), never the pickled
Python version (symkit does not unpickle files it did not make) and never a download.

Each file is a run of 3,073-byte records: one label byte (0–9) and a 32x32 image as 1,024 red, 1,024 green and
1,024 blue bytes, row-major. The training set is ``data_batch_1.bin`` … ``data_batch_5.bin`` (10,000 records each),
the test set ``test_batch.bin``. The files are read from the extracted folder or, when only the published archive
``cifar-10-binary.tar.gz`` is there, straight from it (its regular members of those names only; nothing is
extracted); an archive of the published size is checked against its MD5 (:mod:`symkit.datasets.files`).
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import numpy as np
import torch

from symkit.datasets.files import check_known_archive, data_dir_of

__all__ = ["CIFAR10_CLASSES", "load_cifar10", "read_cifar10_batch"]

RECORD = 1 + 3 * 32 * 32
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
_FILES = {"train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)), "test": ("test_batch.bin",)}
ARCHIVE = "cifar-10-binary.tar.gz"


def read_cifar10_batch(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """One binary batch: ``(images (N, 3, 32, 32) uint8, labels (N,) uint8)``. Raises ``ValueError`` naming the file
    when its size is not a whole number of records or a label is not in 0–9."""
    path = Path(path)
    return _records(np.fromfile(path, dtype=np.uint8), str(path))


def _records(raw: np.ndarray, path: str) -> tuple[np.ndarray, np.ndarray]:
    if raw.size == 0 or raw.size % RECORD:
        raise ValueError(f"{path}: {raw.size} bytes is not a whole number of {RECORD}-byte CIFAR-10 records "
                         "(a label byte and 3x32x32 pixels); is it the binary version?")
    records = raw.reshape(-1, RECORD)
    labels = records[:, 0]
    if labels.max() > 9:
        raise ValueError(f"{path}: label {int(labels.max())} is not a CIFAR-10 class (0-9)")
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def _folder(root: Path) -> Path | None:
    for candidate in (root, root / "cifar-10-batches-bin", root / "cifar10" / "cifar-10-batches-bin"):
        if (candidate / "test_batch.bin").is_file() or (candidate / "data_batch_1.bin").is_file():
            return candidate
    return None


def _from_archive(archive: Path, names: tuple[str, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The batches ``names`` read from the published archive's regular members (any folder inside it)."""
    check_known_archive("cifar10", archive)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile() and Path(m.name).name in names}
            missing = [name for name in names if name not in members]
            if missing:
                raise FileNotFoundError(f"{archive}: the archive holds no {', '.join(missing)}")
            out = []
            for name in names:
                fh = tar.extractfile(members[name])
                assert fh is not None  # a regular member always has a file object
                out.append(_records(np.frombuffer(fh.read(), dtype=np.uint8), f"{archive}:{name}"))
            return out
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{archive}: not a readable tar.gz archive ({type(exc).__name__}: {exc})") from None


def load_cifar10(data_dir: str | os.PathLike | None = None, split: str = "train",
                 dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(N, 3, 32, 32)`` scaled to [0, 1] and labels ``(N,)`` (long) of CIFAR-10's ``split`` from the binary
    batches in ``data_dir`` (or the run's ``--data-dir``, or ``$SYMKIT_DATA``; also its ``cifar-10-batches-bin``
    subfolder), or from the published archive there (module docstring)."""
    if split not in _FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = data_dir_of(data_dir)
    folder = _folder(root) or root
    missing = [name for name in _FILES[split] if not (folder / name).is_file()]
    archives = [p for p in (root / ARCHIVE, root / "cifar10" / ARCHIVE) if p.is_file()]
    if missing and archives:
        parts = _from_archive(archives[0], _FILES[split])
    elif missing:
        raise FileNotFoundError(f"{folder}: missing {', '.join(missing)} (CIFAR-10's binary version, "
                                f"cifar-10-batches-bin, or the archive {ARCHIVE}); symkit never downloads data")
    else:
        parts = [read_cifar10_batch(folder / name) for name in _FILES[split]]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    x = torch.as_tensor(images.astype(np.float64) / 255.0, dtype=dtype)
    return x, torch.as_tensor(labels.astype(np.int64))
