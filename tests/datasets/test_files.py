"""The data folder (argument, the run's --data-dir, $SYMKIT_DATA) and the published checksums; the Fashion-MNIST
and CIFAR-10-archive paths of the loaders, with tiny files written here."""

from __future__ import annotations

import gzip
import io
import tarfile

import numpy as np
import pytest
import torch

from symkit.datasets import files
from symkit.datasets.cifar import load_cifar10
from symkit.datasets.mnist import load_fashion_mnist, load_mnist
from symkit.lab import runtime


def _idx(array: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape) + array.tobytes()


def _write_idx_pair(folder, n=3, seed=0, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    for name, arr in (("t10k-images-idx3-ubyte", images), ("t10k-labels-idx1-ubyte", labels)):
        data = _idx(arr)
        (folder / (name + ".gz" if gz else name)).write_bytes(gzip.compress(data) if gz else data)
    return images, labels


def test_the_data_folder_comes_from_the_argument_then_the_environment_never_the_run_context(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.setenv("SYMKIT_DATA", str(b))
    assert files.data_dir_of() == b
    assert files.data_dir_of(a) == a
    with runtime.using(runtime.RunSettings(data_dir=str(a))):  # the library does not read the command's settings
        assert files.data_dir_of() == b
    monkeypatch.delenv("SYMKIT_DATA")
    with pytest.raises(ValueError, match="no data directory"):
        files.data_dir_of()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        files.data_dir_of(tmp_path / "nowhere")


def test_fashion_mnist_reads_its_own_subfolder_and_not_mnist(tmp_path):
    images, labels = _write_idx_pair(tmp_path / "fashion-mnist", seed=1)
    other, _ = _write_idx_pair(tmp_path, seed=2)  # MNIST's files in the folder itself
    x, y = load_fashion_mnist(tmp_path, "test")
    assert torch.equal((x[:, 0] * 255).round().to(torch.uint8), torch.as_tensor(images))
    assert torch.equal(y, torch.as_tensor(labels.astype(np.int64)))
    xm, _ = load_mnist(tmp_path, "test")
    assert torch.equal((xm[:, 0] * 255).round().to(torch.uint8), torch.as_tensor(other))
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.*fashion-mnist"):
        load_fashion_mnist(tmp_path, "train")


def test_a_truncated_gzip_file_is_named(tmp_path):
    _write_idx_pair(tmp_path)
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte.gz: cannot be read"):
        load_mnist(tmp_path, "test")


def test_a_file_of_the_published_size_must_have_the_published_md5(tmp_path, monkeypatch):
    _write_idx_pair(tmp_path)
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    size = path.stat().st_size
    table = dict(files.KNOWN_ARCHIVES)
    table["mnist", path.name] = (size, "0" * 32)  # pretend the published file has this size and another MD5
    monkeypatch.setattr(files, "KNOWN_ARCHIVES", table)
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte.gz: MD5 [0-9a-f]{32} differs from the published"):
        load_mnist(tmp_path, "test")
    table["mnist", path.name] = (size, files.md5_of(path))  # the right MD5 passes
    assert load_mnist(tmp_path, "test")[1].shape == (3,)
    table["mnist", path.name] = (size + 1, "0" * 32)  # another size: a user's own file, no known checksum
    assert load_mnist(tmp_path, "test")[1].shape == (3,)


def test_the_published_checksums_are_md5_hex_and_sizes_positive():
    for (kind, name), (size, md5) in files.KNOWN_ARCHIVES.items():
        assert kind in ("mnist", "fashion-mnist", "cifar10") and name.endswith(".gz")
        assert size > 0 and len(md5) == 32 and int(md5, 16) >= 0


def _cifar_archive(path, n=3):
    rng = np.random.default_rng(0)
    batches = {}
    with tarfile.open(path, "w:gz") as tar:
        for name in ["test_batch.bin", *(f"data_batch_{i}.bin" for i in range(1, 6))]:
            labels = rng.integers(0, 10, n, dtype=np.uint8)
            images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
            data = np.concatenate([labels[:, None], images.reshape(n, -1)], axis=1).tobytes()
            info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            batches[name] = (images, labels)
    return batches


def test_cifar10_is_read_straight_from_the_published_archive(tmp_path):
    batches = _cifar_archive(tmp_path / "cifar-10-binary.tar.gz")
    x, y = load_cifar10(tmp_path, "test")
    images, labels = batches["test_batch.bin"]
    assert torch.equal((x * 255).round().to(torch.uint8), torch.as_tensor(images))
    assert torch.equal(y, torch.as_tensor(labels.astype(np.int64)))
    assert load_cifar10(tmp_path, "train")[0].shape == (15, 3, 32, 32)
    (tmp_path / "cifar-10-binary.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="cifar-10-binary.tar.gz: not a readable tar.gz archive"):
        load_cifar10(tmp_path, "test")


def test_load_images_reads_each_source_from_the_data_folder_and_resizes(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    from tiny_files import write_tiny_data

    from symkit.datasets.sources import IMAGE_SOURCES, load_images

    write_tiny_data(tmp_path, n_train=20, n_test=10)
    shapes = {s: tuple(load_images(s, "train", size=14, limit=5, data_dir=tmp_path)[0].shape) for s in IMAGE_SOURCES}
    x, y = load_images("mnist", "test", data_dir=tmp_path)
    assert shapes == {"digits": (5, 1, 14, 14), "mnist": (5, 1, 14, 14), "fashion-mnist": (5, 1, 14, 14),
                      "cifar10": (5, 3, 14, 14), "image-folder": (5, 3, 14, 14)}
    assert x.shape == (10, 1, 28, 28) and y.shape == (10,) and x.dtype == torch.float32
    # area averaging: a 28x28 image halved is the mean of each 2x2 block
    from symkit.datasets.sources import resize_images

    assert torch.allclose(resize_images(x, 14), x.reshape(10, 1, 14, 2, 14, 2).mean((3, 5)))
    with pytest.raises(ValueError, match="one split"):
        load_images("digits", "test")
    with pytest.raises(ValueError, match="image source must be one of"):
        load_images("imagenet")
