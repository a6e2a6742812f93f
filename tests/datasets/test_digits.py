import pytest
import torch

from symkit.datasets.digits import load_digits_images


def test_digits_shapes_range_and_labels():
    x, y = load_digits_images(size=16, dtype=torch.float64)
    assert x.shape == (1797, 1, 16, 16) and y.shape == (1797,)
    assert x.dtype == torch.float64 and float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    assert sorted(torch.unique(y).tolist()) == list(range(10))
    # the 8x8 originals are scikit-learn's images / 16 with its labels, and the 2x upsampling is bilinear on them:
    # with half-pixel centres, output pixel 2i+1 sits a quarter pixel past input pixel i (weights 3/4, 1/4 per axis)
    from sklearn.datasets import load_digits

    ref = load_digits()
    x8, y8 = load_digits_images(size=8, dtype=torch.float64)
    torch.testing.assert_close(x8[:, 0], torch.as_tensor(ref.images) / 16.0, rtol=0, atol=0)
    assert torch.equal(y8, torch.as_tensor(ref.target)) and torch.equal(y, y8)
    a, b = x8[:, 0, :-1, :-1], x8[:, 0, 1:, 1:]
    right, down = x8[:, 0, :-1, 1:], x8[:, 0, 1:, :-1]
    expected = 9 / 16 * a + 3 / 16 * (right + down) + 1 / 16 * b
    torch.testing.assert_close(x[:, 0, 1:-1:2, 1:-1:2], expected, rtol=1e-12, atol=1e-12)
    assert float(x.max()) > 0.9 and float(x.min()) == 0.0  # ink and background both present


def test_digits_rejects_downsampling():
    with pytest.raises(ValueError, match="size must be an int >= 8"):
        load_digits_images(size=4)
