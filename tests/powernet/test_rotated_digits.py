"""Rotated and augmented digits (offline data for the PowerNet experiments)."""

import math

import numpy as np
import pytest
import torch
from scipy import ndimage

from symkit.datasets.rotated_digits import (
    affine_transform,
    augmented_digits,
    centred_digits,
    rotate_images,
    rotated_digits,
    split_indices,
)


def _blob(n: int = 21) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(n) - n // 2, torch.arange(n) - n // 2, indexing="ij")
    return torch.exp(-((yy - 4.0) ** 2 / 4 + (xx - 1.0) ** 2 / 10)).double()[None, None]


@pytest.mark.parametrize("angle", [0.4, -1.1, math.pi / 2])
def test_rotation_sense_matches_scipy_and_rot90(angle):
    img = _blob()
    out = rotate_images(img, torch.tensor([angle], dtype=torch.float64))[0, 0].numpy()
    ref = ndimage.rotate(img[0, 0].numpy(), math.degrees(angle), reshape=False, order=1)
    np.testing.assert_allclose(out, ref, atol=1e-3)
    if angle == math.pi / 2:
        np.testing.assert_allclose(out, np.rot90(img[0, 0].numpy()), atol=1e-12)


def test_shift_and_scale_conventions():
    img = _blob()
    moved = affine_transform(img, torch.zeros(1, dtype=torch.float64), 1.0, torch.tensor([[2.0, -3.0]]).double())
    torch.testing.assert_close(moved[0, 0, 2:, :-3], img[0, 0, :-2, 3:], atol=1e-12, rtol=0)
    yy = (torch.arange(21) - 10).double()[:, None]
    small = affine_transform(img, torch.zeros(1, dtype=torch.float64), 0.5)[0, 0]
    com = lambda im: float((yy * im).sum() / im.sum())  # noqa: E731
    assert com(small) == pytest.approx(com(img[0, 0]) * 0.5, abs=1e-4)
    with pytest.raises(ValueError, match="scale"):
        affine_transform(img, torch.zeros(1), -1.0)
    with pytest.raises(ValueError, match="images"):
        rotate_images(img[0], torch.zeros(1))


def test_centred_digits_and_split():
    images, labels = centred_digits(20, 28)
    assert images.shape == (1797, 1, 28, 28) and labels.shape == (1797,)
    assert images[:, :, :4].abs().max() == 0 and images[:, :, :, -4:].abs().max() == 0
    tr, te = split_indices(1797, 0.2, seed=0)
    assert len(set(tr.tolist()) & set(te.tolist())) == 0 and len(tr) + len(te) == 1797
    assert torch.equal(split_indices(1797, 0.2, seed=0)[1], te)
    with pytest.raises(ValueError, match="digit_size"):
        centred_digits(30, 28)
    with pytest.raises(ValueError, match="test_fraction"):
        split_indices(10, 1.5, 0)


def test_rotated_and_augmented_sets_are_seeded_and_in_range():
    images, labels = centred_digits(10, 16)
    x, a, idx = rotated_digits(images[:50], 3, generator=torch.Generator().manual_seed(1))
    x2, a2, _ = rotated_digits(images[:50], 3, generator=torch.Generator().manual_seed(1))
    assert x.shape == (150, 1, 16, 16) and torch.equal(x, x2) and torch.equal(a, a2)
    assert a.min() >= -math.pi and a.max() < math.pi and a.std() > 1.0
    # rotating back recovers the digit up to interpolation blur
    back = rotate_images(x, -a)
    err = (back - images[:50][idx]).norm() / images[:50][idx].norm()
    assert err < 0.5
    y, src = augmented_digits(images[:50], 2, max_shift=2.0, generator=torch.Generator().manual_seed(2))
    assert y.shape == (100, 1, 16, 16) and torch.equal(src, torch.arange(50).repeat(2))
    assert not torch.allclose(y, images[:50][src])
    with pytest.raises(ValueError, match="copies"):
        rotated_digits(images, 0)
