"""LEE's readings: normalised, border-masked / cropped, logits vs probabilities (float64)."""

import math

import pytest
import torch
from torch import nn

from symkit.actions import get_transform, pixels_per_unit
from symkit.measure import crop_border, lee, lie_derivative, with_scores, zero_border

D = torch.float64
ZERO_LEE = 1e-20  # LEE of an exact symmetry in float64: |L f| below 1e-10 where entries are O(1)-O(10)


@pytest.fixture(autouse=True)
def no_grad():
    with torch.no_grad():  # Lie derivatives here are read, not trained on
        yield


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=D)


@pytest.fixture
def x() -> torch.Tensor:
    return randn(4, 2, 12, 12)


def circular_conv(seed=0):
    torch.manual_seed(seed)
    return nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular").double()


def mean_pool_model(seed=0):
    # invariant by construction to any permutation of the pixels (cyclic shifts, rot90, ...)
    torch.manual_seed(seed)
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 5)).double()


@pytest.mark.parametrize("name", ["translate_x", "translate_y"])
def test_circular_conv_border_crop_is_exactly_equivariant(x, name):
    m = circular_conv()
    L = lie_derivative(m, x, name)
    # circular padding (conv) and reflection (flow) disagree at the far edge only: the flow's last-column stencil
    # reads x[W - 2], and the kernel carries it to columns W - 2, W - 1 and (wrapped) 0
    dim = -1 if name == "translate_x" else -2
    live = L.abs().amax(dim=tuple(d for d in range(4) if d != dim % 4)) > 1e-10
    assert live.nonzero().flatten().tolist() == [0, 10, 11]
    assert lee(m, x, name, on="logits").value > 0.1  # the unmasked LEE is the border's share ...
    assert lee(m, x, name, on="logits", border=1).value > 0.1  # ... column W - 2 is still in with border=1
    for normalize in (False, True):
        assert lee(m, x, name, on="logits", border=2, normalize=normalize).value < ZERO_LEE
    cropped = lie_derivative(m, x, name, border=2)
    assert cropped.shape == (4, 3, 8, 8)
    torch.testing.assert_close(cropped, L[..., 2:-2, 2:-2], rtol=0, atol=0)
    # the unmasked value is exactly the frame's squared Lie derivative spread over the whole output
    frame = L.pow(2).sum() - cropped.pow(2).sum()
    assert lee(m, x, name, on="logits").value == pytest.approx(float(frame / L.numel()), rel=1e-12)


def test_normalised_lee_is_invariant_to_output_scale(x):
    torch.manual_seed(0)
    base = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 5)).double()

    def scaled(c):
        return lambda z: c * base(z)

    for reduction, power in (("mean_sq", 2), ("mean_abs", 1)):
        one = lee(base, x, "rotate", on="logits", reduction=reduction, normalize=True)
        big = lee(scaled(7.0), x, "rotate", on="logits", reduction=reduction, normalize=True)
        torch.testing.assert_close(big.per_sample, one.per_sample, rtol=1e-12, atol=0)
        raw_one = lee(base, x, "rotate", on="logits", reduction=reduction).value
        raw_big = lee(scaled(7.0), x, "rotate", on="logits", reduction=reduction).value
        assert raw_big == pytest.approx(7.0**power * raw_one, rel=1e-12)
        assert one.value > 1e-6 and one.normalize and not lee(base, x, "rotate", on="logits").normalize
    # the normalised value is the per-sample ratio of the two reductions
    ratio = lie_derivative(base, x, "rotate").pow(2).sum(1) / base(x).pow(2).sum(1)
    torch.testing.assert_close(lee(base, x, "rotate", on="logits", normalize=True).per_sample, ratio)


def _forward_difference(fn, h=1e-5):
    # second-order one-sided difference: the flows' derivative at 0 is the forward (t -> 0+) one
    return (4 * fn(h / 2) - fn(h) - 3 * fn(0.0)) / h


def test_probabilities_follow_the_softmax_jacobian(x):
    torch.manual_seed(1)
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Tanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(4, 6)).double()
    flow = get_transform("translate_x")
    L_logits = lie_derivative(m, x, flow)
    L_probs = lie_derivative(with_scores(m, "probs"), x, flow)
    p = torch.softmax(m(x), 1)
    fd = _forward_difference(lambda t: torch.softmax(m(flow.apply(x, t)), 1))
    J_L = p * (L_logits - (p * L_logits).sum(1, keepdim=True))  # (diag p - p p^T) L f
    torch.testing.assert_close(L_probs, J_L, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(L_probs, fd, rtol=1e-6, atol=1e-9)
    assert (L_probs - L_logits).abs().max() > 1e-3  # the two readings differ
    r = lee(m, x, flow)
    torch.testing.assert_close(r.per_sample, J_L.pow(2).mean(1))


def test_mean_pool_reading_comes_from_the_border(x):
    pool = nn.AdaptiveAvgPool2d(1)
    model = mean_pool_model()
    torch.testing.assert_close(model(torch.roll(x, 3, -1)), model(x), rtol=0, atol=1e-14)  # invariant by design
    H, W = x.shape[-2:]
    s = pixels_per_unit((H, W))
    L = lie_derivative(lambda z: pool(z).flatten(1), x, "translate_x")
    # reflection padding: sum_j (x[j+1] - x[j]) telescopes, and the last column's stencil reads x[W - 2]
    expected = s / (H * W) * (x[..., :, W - 2] - x[..., :, 0]).sum(-1)
    torch.testing.assert_close(L, expected, rtol=1e-12, atol=1e-14)
    zeros = lie_derivative(lambda z: pool(z).flatten(1), x, get_transform("translate_x", padding="zeros"))
    torch.testing.assert_close(zeros, -s / (H * W) * x[..., :, 0].sum(-1), rtol=1e-12, atol=1e-14)
    assert lee(model, x, "translate_x").value > 1e-7
    for name in ("translate_x", "translate_y", "rotate", "shear_x"):
        assert lee(model, x, name, border=2).value < ZERO_LEE, name
        assert lee(model, x, name, border=2, on="logits", normalize=True).value < ZERO_LEE, name
    # border=1 is not enough under reflection padding: the mirrored column W - 2 is still content
    assert lee(model, x, "translate_x", border=1).value > 1e-9
    # the window removes only the border: scaling changes the mean of any content, L mean = 2 mean
    xw = zero_border(x, 2)
    L_scale = lie_derivative(lambda z: pool(z).flatten(1), x, "scale", border=2)
    torch.testing.assert_close(L_scale, 2 * xw.mean((-2, -1)), rtol=1e-12, atol=1e-14)


def test_border_reads_and_defaults(x):
    m = circular_conv()
    # defaults are the thesis's Eq. 4.4 unchanged
    plain = lee(m, x, "translate_x", on="logits")
    L = lie_derivative(m, x, "translate_x")
    assert plain.value == pytest.approx(float(L.pow(2).mean()), rel=1e-14)
    assert plain.border == 0 and not plain.normalize
    # the crop follows the output's resolution: 2 input pixels are 1 pixel of a half-resolution output
    half = lambda z: m(z)[..., ::2, ::2]  # noqa: E731
    assert lie_derivative(half, x, "translate_x", border=2).shape == (4, 3, 4, 4)
    assert lie_derivative(half, x, "translate_x", border=3).shape == (4, 3, 2, 2)
    # token outputs keep their class token and crop the grid
    z = randn(2, 1 + 36, 4)
    cropped = crop_border(z, "tokens", 2, (12, 12))
    assert cropped.shape == (2, 1 + 16, 4)
    torch.testing.assert_close(cropped[:, 0], z[:, 0])
    grid = z[:, 1:].transpose(1, 2).reshape(2, 4, 6, 6)
    torch.testing.assert_close(cropped[:, 1:], grid[..., 1:5, 1:5].reshape(2, 4, 16).transpose(1, 2))
    # an invariant output windows the input instead: the frame of the input is zero
    def summed(z):
        return m(z).sum((2, 3))

    windowed = zero_border(x, 3)
    torch.testing.assert_close(lie_derivative(summed, x, "translate_x", border=3),
                               lie_derivative(summed, windowed, "translate_x"), rtol=0, atol=0)
    assert windowed[..., :3, :].abs().max() == 0 and windowed[..., :, -3:].abs().max() == 0
    assert math.isclose(float(windowed[..., 3:-3, 3:-3].sum()), float(x[..., 3:-3, 3:-3].sum()))
    assert lie_derivative(summed, x, "translate_x", border=3).shape == (4, 3)


def test_bad_form_arguments(x):
    m = circular_conv()
    with pytest.raises(ValueError, match="border"):
        lee(m, x, "translate_x", on="logits", border=6)
    with pytest.raises(ValueError, match="border"):
        lee(mean_pool_model(), x, "translate_x", border=-1)
    with pytest.raises(TypeError, match="border"):
        lie_derivative(m, x, "translate_x", border=1.5)
    with pytest.raises(TypeError, match="normalize"):
        lee(m, x, "translate_x", on="logits", normalize="yes")
    with pytest.raises(ValueError, match="leaves nothing of the output"):
        lie_derivative(lambda z: m(z)[..., ::4, ::4], x, "translate_x", border=5)
