"""EQ-T and fractional EQ-T (Karras et al. 2021) as the thesis uses them (App. A.3.3.1): integer shifts are exact,
so layers that commute with them score 0; fractional shifts expose the aliasing of non-linearities and pooling."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from symkit.measure.eqt import eqt, lanczos_weights, layerwise_eqt, shift_images


def _smooth(n=2, c=2, size=32, seed=0):
    x = torch.randn(n, c, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False)


def test_integer_shifts_are_exact_and_masked():
    x = torch.randn(2, 1, 10, 12, dtype=torch.float64)
    y, mask = shift_images(x, 3, -2)
    assert torch.equal(y[..., 0:8, 3:], x[..., 2:10, 0:9])  # content moved 3 right and 2 up
    assert mask.sum() == 8 * 9 and mask[0:8, 3:].all()
    k, w = lanczos_weights(0.0)
    assert torch.allclose(w, (k == 0).double(), atol=1e-15)


def test_fractional_shifts_of_smooth_images_invert():
    x = _smooth(size=64)
    y, m1 = shift_images(x, 1.5, -0.25)
    z, m2 = shift_images(y, -1.5, 0.25)
    inside = m1 & m2
    assert ((z - x)[..., inside]).abs().max() < 5e-3 * x.abs().max()


def test_layerwise_eqt_separates_exact_layers_from_aliasing_ones():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 3)).double().eval()
    x = torch.randn(3, 2, 16, 16, dtype=torch.float64)
    integer = layerwise_eqt(model, x, fractional=False)
    frac = layerwise_eqt(model, x, fractional=True)
    assert integer.names == ["0", "1", "2", "3", "4", "5", "6"]
    assert integer.errors.max() < 1e-25  # convolutions, ReLU, stride-2 pooling on the common lattice, global mean
    e = dict(zip(frac.names, frac.errors.tolist()))
    assert e["0"] < 1e-25 and e["3"] < 1e-25 and e["4"] < 1e-25  # convolutions commute with any shift
    assert e["1"] > 1e-3 and e["2"] > 1e-3  # ReLU and max pooling alias
    assert frac.fractions.sum() == pytest.approx(1.0)
    sums = layerwise_eqt(model, x, fractional=True, normalization="sum")
    sqrt = layerwise_eqt(model, x, fractional=True, normalization="sqrt")
    assert sums.errors[1] > sqrt.errors[1] > frac.errors[1]  # 1, 1/sqrt(N), 1/N with N > 1 values compared


def test_end_to_end_eqt():
    constant = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 4)).double()
    with torch.no_grad():
        constant[1].weight.zero_()
    x = torch.rand(4, 3, 16, 16, dtype=torch.float64)
    r = eqt(constant, x)
    assert r.mse == 0 and math.isinf(r.db)
    pooled = nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 4)).double()
    a, b = eqt(pooled, x, fractional=False), eqt(pooled, x, fractional=True)
    assert 0 < a.mse and 0 < b.mse and a.db == pytest.approx(10 * math.log10(1 / a.mse))
    image_to_image = nn.Conv2d(3, 3, 3, padding=1).double()
    assert eqt(image_to_image, x, on="logits").mse < 1e-25  # image outputs are shifted back and masked
    with pytest.raises(ValueError, match="max_shift"):
        eqt(pooled, x, max_shift=1.5)
