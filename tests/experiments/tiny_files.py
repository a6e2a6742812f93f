"""Tiny data files in every format symkit reads (MNIST and Fashion-MNIST idx, CIFAR-10 binary, an image folder),
for the tests that run experiments at paper scale on them."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np


def _idx(array: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape) + array.tobytes()


def _digit_like(rng: np.random.Generator, n: int, size: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """Images with a bright blob whose place depends on the label (so a model has something to learn)."""
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    images = rng.integers(0, 40, (n, size, size)).astype(np.uint8)
    for img, label in zip(images, labels):
        r, c = 4 + 2 * (label // 5) * 4, 4 + (label % 5) * 4
        img[r:r + 6, c:c + 3] = 255
    return images, labels.astype(np.uint8)


def write_tiny_data(root: Path, n_train: int = 60, n_test: int = 30, seed: int = 0) -> Path:
    """Write MNIST (folder itself), Fashion-MNIST (``fashion-mnist/``), CIFAR-10 (``cifar-10-batches-bin/``) and an
    image folder (``train/<class>/`` and ``val/<class>/``) into ``root``; return ``root``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for folder in (root, root / "fashion-mnist"):
        folder.mkdir(parents=True, exist_ok=True)
        for prefix, n in (("train", n_train), ("t10k", n_test)):
            images, labels = _digit_like(rng, n)
            (folder / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images)))
            (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(_idx(labels))
    cifar = root / "cifar-10-batches-bin"
    cifar.mkdir(exist_ok=True)
    for name, n in [*((f"data_batch_{i}.bin", max(1, n_train // 5)) for i in range(1, 6)), ("test_batch.bin", n_test)]:
        labels = (np.arange(n) % 10).astype(np.uint8)
        images = rng.integers(0, 256, (n, 3 * 32 * 32), dtype=np.uint8)
        np.concatenate([labels[:, None], images], axis=1).tofile(cifar / name)
    for split, per_class in (("train", 4), ("val", 2)):
        for name in ("n01", "n02", "n03"):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                pixels = rng.integers(0, 256, (48, 40, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")
    return root
