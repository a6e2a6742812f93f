"""The CIFAR-10 binary reader: tiny batches in the format, written here and read back; errors name the file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from symkit.datasets.cifar import RECORD, load_cifar10, read_cifar10_batch


def _batch(path, n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    np.concatenate([labels[:, None], images.reshape(n, -1)], axis=1).tofile(path)
    return images, labels


def test_round_trip_of_the_test_and_training_batches(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    images, labels = _batch(folder / "test_batch.bin", 4, 0)
    parts = [_batch(folder / f"data_batch_{i}.bin", 2, i) for i in range(1, 6)]
    x, y = load_cifar10(tmp_path, "test")
    assert x.shape == (4, 3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.long
    assert torch.equal((x * 255).round().to(torch.uint8), torch.as_tensor(images))
    assert torch.equal(y, torch.as_tensor(labels.astype(np.int64)))
    xt, yt = load_cifar10(folder, "train", dtype=torch.float64)
    assert xt.shape == (10, 3, 32, 32) and xt.dtype == torch.float64
    assert torch.equal(yt, torch.as_tensor(np.concatenate([p[1] for p in parts]).astype(np.int64)))
    # the channel order is red, green, blue, each plane row-major
    assert xt[0, 1, 0, 0] == parts[0][0][0, 1, 0, 0] / 255


def test_errors_name_the_file_and_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing test_batch.bin"):
        load_cifar10(tmp_path, "test")
    (tmp_path / "test_batch.bin").write_bytes(b"\x00" * (RECORD + 5))
    with pytest.raises(ValueError, match="not a whole number of 3073-byte CIFAR-10 records"):
        load_cifar10(tmp_path, "test")
    bad = np.zeros(RECORD, np.uint8)
    bad[0] = 12
    bad.tofile(tmp_path / "test_batch.bin")
    with pytest.raises(ValueError, match="label 12 is not a CIFAR-10 class"):
        read_cifar10_batch(tmp_path / "test_batch.bin")
    with pytest.raises(ValueError, match="split must be"):
        load_cifar10(tmp_path, "val")
