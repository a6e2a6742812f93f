"""Sample-based metrics and consistency losses (notes §4, §6 item 12)."""

import pytest
import torch
from torch import nn

from symkit.actions import get_transform, translate_pixels
from symkit.measure import (
    discrete_shift_consistency,
    lie_derivative,
    pi_consistency_loss,
    sample_equivariance_error,
    sample_rotation_error,
    sample_translation_error,
)

D = torch.float64


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=D)


class Pool(nn.Module):
    """Global average pool then a linear head: invariant to integer shifts with wrap-around only."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.head = nn.Linear(3, 4).double()

    def forward(self, x):
        return self.head(torch.tanh(x).mean((2, 3)))


def test_sample_errors_vanish_for_equivariant_maps_and_not_otherwise():
    x = randn(3, 3, 16, 16)
    conv1 = nn.Conv2d(3, 2, 1).double()
    assert sample_rotation_error(conv1, x, on="logits").value < 1e-12
    assert sample_translation_error(conv1, x, on="logits").value < 1e-12
    relu_sub = lambda z: torch.relu(z)[..., ::2, ::2]  # noqa: E731
    assert sample_translation_error(relu_sub, x, on="logits").value > 1e-2
    r = sample_equivariance_error(relu_sub, x, "shear_x", max_t=0.1, on="logits")
    assert r.value > 1e-2 and r.per_sample.shape == (3,)


def test_sample_translation_uses_pixels():
    """On a linear ramp (value = column index, or row index) a translation by d pixels changes the centre pixel by
    exactly d (bilinear interpolation is exact on a ramp): the error of one draw is |dx| (or |dy|) in pixels, with
    (dx, dy) ~ U(-max_pixels, max_pixels) drawn from the documented generator."""
    n = 21
    cols = torch.arange(n, dtype=torch.float64).expand(n, n)
    centre = lambda z: z[..., n // 2: n // 2 + 1, n // 2: n // 2 + 1].flatten(1)  # noqa: E731
    for seed in (0, 1, 2):
        dx, dy = ((2 * torch.rand(2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 1) * 3.0)
        for ramp, expected in ((cols, abs(float(dx))), (cols.T, abs(float(dy)))):
            x = ramp.reshape(1, 1, n, n).clone()
            r = sample_translation_error(centre, x, max_pixels=3.0, n_samples=1, seed=seed, on="logits")
            assert r.value == pytest.approx(expected, abs=1e-9), (seed, expected, r.value)
            assert expected > 0.05  # a draw that moves the image: the check is not trivially 0
    zero = sample_translation_error(centre, cols.reshape(1, 1, n, n).clone(), max_pixels=0.0, on="logits")
    assert zero.value == 0.0


def test_discrete_shift_consistency_has_no_wraparound():
    x = randn(8, 3, 12, 12)
    m = Pool()
    # a circular shift would leave a global pool unchanged (consistency 1); a padded shift changes the content
    rolled = torch.roll(x, 3, dims=-1)
    torch.testing.assert_close(m(rolled), m(x))
    shifted = translate_pixels(x, 3.0, 0.0)
    assert not torch.allclose(m(shifted), m(x))
    # the value by hand: the documented draws, a zero-padded integer shift by slicing, the fraction of equal argmaxes
    # (a model that compares the left and right halves, so that shifts change some of its predictions)
    def m(z):
        return torch.stack([z[:, 0, :, :6].sum((1, 2)), z[:, 0, :, 6:].sum((1, 2))], 1)

    x = randn(40, 3, 12, 12, seed=1)
    r = discrete_shift_consistency(m, x, max_shift=4, n_shifts=6, padding="zeros")
    gen = torch.Generator().manual_seed(0)
    same = torch.zeros(40, dtype=D)
    ref = m(x).argmax(1)
    for _ in range(6):
        dx, dy = torch.randint(-4, 5, (2,), generator=gen).tolist()
        moved = torch.zeros_like(x)
        moved[..., max(dy, 0): 12 + min(dy, 0), max(dx, 0): 12 + min(dx, 0)] = \
            x[..., max(-dy, 0): 12 + min(-dy, 0), max(-dx, 0): 12 + min(-dx, 0)]
        same += (m(moved).argmax(1) == ref).to(D)
    torch.testing.assert_close(r.per_sample, same / 6, rtol=0, atol=0)
    assert r.value == pytest.approx(float(same.mean() / 6))
    assert 0.2 < r.value < 0.95, r.value  # some predictions change, others do not: the count is exercised
    assert discrete_shift_consistency(lambda z: z.new_zeros(z.shape[0], 2), x).value == 1.0
    # zero shift range means nothing changes
    assert discrete_shift_consistency(m, x, max_shift=0).value == 1.0


def test_pi_consistency_matches_lie_derivative_for_small_sigma():
    # Eq. A.12 for a smooth flow (brightness): E||f(T_a x) - f(T_b x)||^2 / (2 sigma^2) -> ||L f||^2
    x = randn(4, 3, 6, 6)
    m = Pool()
    L2 = lie_derivative(m, x, "brightness").pow(2).sum(1).mean().detach()
    sigma = 1e-4
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        est = torch.stack([pi_consistency_loss(m, x, "brightness", sigma=sigma, generator=gen) for _ in range(800)])
    ratio = est.mean() / (2 * sigma**2 * L2)
    # Monte Carlo: (a - b)^2 / (2 sigma^2) is chi^2_1, averaged over 800 x 4 draws -> ~2.5% relative error
    assert abs(ratio - 1) < 0.1


def test_pi_loss_is_differentiable():
    x = randn(2, 3, 6, 6)
    m = Pool()
    pi_consistency_loss(m, x, get_transform("rotate"), sigma=0.1, seed=0).backward()
    assert m.head.weight.grad.abs().max() > 0


def test_bad_arguments():
    x = randn(2, 3, 6, 6)
    with pytest.raises(ValueError, match="n_samples"):
        sample_rotation_error(Pool(), x, n_samples=0)
    with pytest.raises(ValueError, match="max_shift"):
        discrete_shift_consistency(Pool(), x, max_shift=-1)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        sample_translation_error(Pool(), x[0])
