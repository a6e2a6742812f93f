"""The idx reader: tiny files in the MNIST format, written here and read back; clear errors when files are absent
or malformed."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from symkit.datasets.mnist import load_idx, load_mnist


def _idx(array: np.ndarray, code: int) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    return header + array.tobytes()


def _write(folder, split="train", n=5, gz=False):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    prefix = "train" if split == "train" else "t10k"
    for name, arr in ((f"{prefix}-images-idx3-ubyte", images), (f"{prefix}-labels-idx1-ubyte", labels)):
        data = _idx(arr, 0x08)
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return images, labels


@pytest.mark.parametrize("gz", [False, True])
def test_round_trip(tmp_path, gz):
    images, labels = _write(tmp_path, "test", gz=gz)
    x, y = load_mnist(tmp_path, "test")
    assert x.shape == (5, 1, 28, 28) and x.dtype == torch.float32 and y.dtype == torch.long
    assert torch.equal((x[:, 0] * 255).round().to(torch.uint8), torch.as_tensor(images))
    assert torch.equal(y, torch.as_tensor(labels.astype(np.int64)))


def test_other_types_and_the_environment_variable(tmp_path, monkeypatch):
    a = np.arange(6, dtype=">i4").reshape(2, 3)
    (tmp_path / "a.idx").write_bytes(_idx(a, 0x0C))
    assert np.array_equal(load_idx(tmp_path / "a.idx"), a)
    _write(tmp_path)
    monkeypatch.setenv("SYMKIT_DATA", str(tmp_path))
    assert load_mnist(split="train")[0].shape[0] == 5


def test_errors_name_what_is_missing_or_wrong(tmp_path, monkeypatch):
    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    with pytest.raises(ValueError, match="no data directory"):
        load_mnist()
    with pytest.raises(FileNotFoundError, match="missing train-images-idx3-ubyte, train-labels-idx1-ubyte"):
        load_mnist(tmp_path)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an idx file"):
        load_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(_idx(np.zeros((2, 2), np.uint8), 0x08)[:-1])
    with pytest.raises(ValueError, match="the header declares shape"):
        load_idx(tmp_path / "short")
    with pytest.raises(ValueError, match="split must be"):
        load_mnist(tmp_path, "val")
