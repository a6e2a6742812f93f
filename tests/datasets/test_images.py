"""The image-folder loader: a tiny ImageNet-style folder written here with Pillow and read back."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from symkit.datasets.images import load_image_folder


def _folder(root, classes=("cat", "dog"), per_class=3, shape=(40, 30)):
    rng = np.random.default_rng(0)
    for name in classes:
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}.png")


def test_round_trip_of_a_folder_with_exact_pixels(tmp_path):
    (tmp_path / "val" / "a").mkdir(parents=True)
    pixels = np.arange(16 * 16 * 3, dtype=np.uint8).reshape(16, 16, 3)
    Image.fromarray(pixels).save(tmp_path / "val" / "a" / "x.png")
    # a square image already at size * 256 / 224 would be cropped; at 14 -> 16 px it is only cropped by one each side
    x, y, classes = load_image_folder(tmp_path, "val", size=14)
    assert classes == ("a",) and y.tolist() == [0] and x.shape == (1, 3, 14, 14) and x.dtype == torch.float32
    assert torch.equal((x[0] * 255).round().to(torch.uint8), torch.as_tensor(pixels[1:15, 1:15].transpose(2, 0, 1)))


def test_labels_follow_sorted_class_names_and_limit_takes_classes_in_turn(tmp_path):
    _folder(tmp_path, classes=("zebra", "ant", "cat"))
    x, y, classes = load_image_folder(tmp_path, size=8, dtype=torch.float64)
    assert classes == ("ant", "cat", "zebra") and x.shape == (9, 3, 8, 8) and x.dtype == torch.float64
    assert y.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert 0 <= float(x.min()) and float(x.max()) <= 1
    _, y4, _ = load_image_folder(tmp_path, size=8, limit=4)
    assert y4.tolist() == [0, 0, 1, 2]


def test_errors_name_the_folder_or_the_image(tmp_path):
    with pytest.raises(FileNotFoundError, match="no images"):
        load_image_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        load_image_folder(tmp_path, "val")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match="broken.jpg: not a readable image"):
        load_image_folder(tmp_path)
    with pytest.raises(ValueError, match="size must be a positive integer"):
        load_image_folder(tmp_path, size=0)
