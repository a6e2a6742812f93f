import pytest
import torch

from symkit.datasets.digits import load_digits_images


def test_digits_shapes_range_and_labels():
    x, y = load_digits_images(size=16, dtype=torch.float64)
    assert x.shape == (1797, 1, 16, 16) and y.shape == (1797,)
    assert x.dtype == torch.float64 and float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    assert sorted(torch.unique(y).tolist()) == list(range(10))


def test_digits_rejects_downsampling():
    with pytest.raises(ValueError, match="size must be an int >= 8"):
        load_digits_images(size=4)
