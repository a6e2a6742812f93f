"""Lie derivatives and LEE: the checkable facts of the notes' §6 (items 1-4, 7) in float64."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from symkit.actions import SPATIAL_TRANSFORMS, TRANSFORM_NAMES, get_transform
from symkit.measure import lee, lie_derivative, lie_derivative_penalty
from symkit.nn.vision import SmallCNN, ViT

D = torch.float64
EXACT = 1e-12  # "zero" in float64: tangents are O(10), so this is ~1e-13 relative


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=D)


@pytest.fixture
def x() -> torch.Tensor:
    return randn(2, 3, 12, 12)


def conv(k, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Conv2d(3, 4, k, padding=k // 2, bias=bias).double()


@pytest.mark.parametrize("name", TRANSFORM_NAMES)
def test_equivariant_models_have_zero_lie_derivative(x, name):
    const = torch.arange(5, dtype=D)
    cases = {
        "constant": (lambda z: const.expand(z.shape[0], 5), "invariant"),
        "identity": (lambda z: z, "auto"),
        "scaling": (lambda z: 2 * z, "auto"),
        "conv1x1": (conv(1, bias=False), "auto"),
        "relu_on_positive": (nn.ReLU(), "auto"),
    }
    for label, (model, output) in cases.items():
        inp = x.abs() + 0.1 if label == "relu_on_positive" else x
        L = lie_derivative(model, inp, name, output=output)
        assert L.abs().max() < EXACT, (label, name, float(L.abs().max()))


@pytest.mark.parametrize("name", SPATIAL_TRANSFORMS)
def test_conv1x1_with_bias_is_equivariant_to_spatial_flows(x, name):
    assert lie_derivative(conv(1, bias=True), x, name).abs().max() < EXACT


def test_bias_breaks_brightness_equivariance(x):
    # a bias does not scale with the input: L = -b on every pixel for brightness
    m = conv(1, bias=True)
    L = lie_derivative(m, x, "brightness")
    torch.testing.assert_close(L, -m.bias.detach()[None, :, None, None].expand_as(L))


@pytest.mark.parametrize("name", SPATIAL_TRANSFORMS)
def test_relu_on_mixed_sign_inputs_breaks_equivariance(x, name):
    # pointwise non-linearities alias under interpolation (thesis Sec. 4.2; notes §6 item 2)
    assert lee(nn.ReLU(), x, name, on="logits").value > 1.0


@pytest.mark.parametrize("name", SPATIAL_TRANSFORMS)
def test_stride2_subsampling_breaks_equivariance(name):
    x = randn(2, 3, 13, 13)
    assert lee(lambda z: z[..., ::2, ::2], x, name, on="logits").value > 1.0


@pytest.mark.parametrize("name", ["translate_x", "translate_y"])
def test_conv3x3_interior_translation_lie_derivative_vanishes(x, name):
    L = lie_derivative(conv(3), x, name)
    assert L[..., 2:-2, 2:-2].abs().max() < 1e-10
    # the boundary (zero padding of the conv vs reflection of the sampler) is not equivariant
    assert L.abs().max() > 1e-3


def test_brightness_facts(x):
    # x / ||x|| is invariant to brightness, a linear functional is not (notes §6 item 4)
    def normalize(z):
        return (z / z.flatten(1).norm(dim=1)[:, None, None, None]).flatten(1)

    assert lie_derivative(normalize, x, "brightness", output="invariant").abs().max() < 1e-14
    L = lie_derivative(lambda z: z.sum((1, 2, 3))[:, None], x, "brightness", output="invariant")
    torch.testing.assert_close(L[:, 0], x.sum((1, 2, 3)))


@pytest.fixture
def cnn() -> nn.Module:
    torch.manual_seed(0)
    m = SmallCNN(in_channels=3, num_classes=5, width=4).double().eval()
    for bn in m.modules():  # non-trivial running statistics so eval batch norm is not the identity
        if isinstance(bn, nn.BatchNorm2d):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return m


def test_linearity_in_the_generator(cnn, x):
    a, b = 0.7, -1.3
    combo = a * get_transform("translate_x") + b * get_transform("rotate") + 0.5 * get_transform("brightness")
    lhs = lie_derivative(cnn, x, combo)
    rhs = (
        a * lie_derivative(cnn, x, "translate_x")
        + b * lie_derivative(cnn, x, "rotate")
        + 0.5 * lie_derivative(cnn, x, "brightness")
    )
    torch.testing.assert_close(lhs, rhs, rtol=1e-10, atol=1e-12)
    assert rhs.abs().max() > 1e-3


@pytest.mark.parametrize("name", ["translate_y", "scale", "hyperbolic_rotate"])
def test_methods_agree(cnn, x, name):
    ref = lie_derivative(cnn, x, name, method="double_vjp")
    torch.testing.assert_close(lie_derivative(cnn, x, name, method="jvp"), ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(lie_derivative(cnn, x, name, method="func_jvp"), ref, rtol=1e-10, atol=1e-12)
    assert ref.abs().max() > 1e-3


def test_lie_derivative_matches_finite_difference_for_smooth_flow(cnn, x):
    # brightness has no interpolation kink, so a central difference converges to the Lie derivative
    flow = get_transform("brightness")
    h = 1e-5
    fd = (cnn(flow.apply(x, h)) - cnn(flow.apply(x, -h))) / (2 * h)
    torch.testing.assert_close(lie_derivative(cnn, x, flow), fd, rtol=1e-6, atol=1e-8)


def test_image_outputs_are_transformed_back(x):
    # identity measured as invariant is the generator itself, measured as image-like it is zero
    flow = get_transform("rotate")
    torch.testing.assert_close(lie_derivative(lambda z: z, x, flow, output="invariant"), flow.tangent(x))
    assert lie_derivative(lambda z: z, x, flow, output="image").abs().max() < EXACT


def test_token_outputs(x):
    # tokens (B, 1 + 16, C) from a 4x4 patch grid: a token-wise linear map is equivariant, the class token fixed
    torch.manual_seed(0)
    lin = nn.Linear(3, 6).double()
    cls = torch.randn(1, 1, 6, dtype=D)

    def tokens(z):
        z = nn.functional.avg_pool2d(z, 3)  # 12x12 -> 4x4
        t = lin(z.flatten(2).transpose(1, 2))
        return torch.cat([cls.expand(z.shape[0], 1, 6), t], 1)

    def tokens_no_pool(z):
        t = lin(z.flatten(2).transpose(1, 2))
        return torch.cat([cls.expand(z.shape[0], 1, 6), t], 1)

    assert lie_derivative(tokens_no_pool, x, "rotate").abs().max() < EXACT
    # the pooled version aliases, so it is not zero, but its class token stays exactly invariant
    L = lie_derivative(tokens, x, "rotate")
    assert L[:, 0].abs().max() == 0 and L[:, 1:].abs().max() > 1e-3


def test_custom_output_action(x):
    # a model that returns flattened feature maps: the user's action unflattens, transforms back, flattens
    flow = get_transform("rotate")
    m = conv(1)

    def back(z, t):
        return flow.apply(z.reshape(2, 4, 12, 12), -t).flatten(1)

    assert lie_derivative(lambda z: m(z).flatten(1), x, flow, output=back).abs().max() < EXACT
    assert lie_derivative(lambda z: m(z).flatten(1), x, flow).abs().max() > 1e-3  # "auto" reads it as invariant


def test_lee_reductions_and_standard_error(cnn, x):
    with torch.no_grad():
        L = lie_derivative(lambda z: torch.softmax(cnn(z), 1), x, "rotate")
    r = lee(cnn, x, "rotate")
    torch.testing.assert_close(r.per_sample, L.pow(2).mean(1))
    assert r.value == pytest.approx(float(L.pow(2).mean()))
    assert r.stderr == pytest.approx(float(r.per_sample.std() / 2**0.5))
    r_abs = lee(cnn, x, "rotate", reduction="mean_abs")
    assert r_abs.value == pytest.approx(float(L.abs().mean()))
    r_logits = lee(cnn, x, "rotate", on="logits")
    with torch.no_grad():
        assert r_logits.value == pytest.approx(float(lie_derivative(cnn, x, "rotate").pow(2).mean()))
    batched = lee(cnn, [(x[:1], 0), (x[1:], 1)], "rotate")
    torch.testing.assert_close(batched.per_sample, r.per_sample)


def test_vit_supports_forward_mode():
    torch.manual_seed(0)
    m = ViT(in_channels=1, num_classes=3, image_size=8, patch=2, dim=8, depth=1, heads=2).double().eval()
    x = randn(2, 1, 8, 8)
    torch.testing.assert_close(
        lie_derivative(m, x, "rotate"), lie_derivative(m, x, "rotate", method="double_vjp"), rtol=1e-9, atol=1e-12
    )


def test_penalty_backpropagates_to_parameters(cnn, x):
    cnn.zero_grad()
    lie_derivative_penalty(cnn, x, ["translate_x", "rotate"]).backward()
    g = cnn.head.weight.grad.clone()
    cnn.zero_grad()
    ref = sum(lie_derivative(cnn, x, t, method="double_vjp").pow(2).mean() for t in ["translate_x", "rotate"])
    ref.backward()
    torch.testing.assert_close(g, cnn.head.weight.grad, rtol=1e-9, atol=1e-12)
    assert g.abs().max() > 0


def test_bad_arguments(cnn, x):
    with pytest.raises(ValueError, match="method must be"):
        lie_derivative(cnn, x, "rotate", method="magic")
    with pytest.raises(ValueError, match="output must be one of"):
        lie_derivative(cnn, x, "rotate", output="vector")
    with pytest.raises(ValueError, match="on='probs' needs"):
        lee(lambda z: z, x, "rotate")
    with pytest.raises(ValueError, match="reduction"):
        lee(cnn, x, "rotate", reduction="max")
    with pytest.raises(TypeError, match="floating-point"):
        lie_derivative(cnn, torch.zeros(2, 3, 4, 4, dtype=torch.long), "rotate")


_LIN_X = randn(1, 3, 8, 8, seed=3)


@settings(max_examples=6, deadline=None)
@given(coeffs=st.lists(st.floats(-3, 3, allow_nan=False), min_size=4, max_size=4))
def test_linearity_in_the_generator_hypothesis(coeffs):
    # L_{sum a_i X_i} f = sum a_i L_{X_i} f for a nonlinear model and any coefficients (notes §6 item 7)
    torch.manual_seed(1)
    m = nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2)).double()
    names = ["translate_y", "shear_x", "hyperbolic_rotate", "brightness"]
    combo = sum((a * get_transform(n) for a, n in zip(coeffs, names)), 0.0 * get_transform("rotate"))
    lhs = lie_derivative(m, _LIN_X, combo)
    rhs = sum(a * lie_derivative(m, _LIN_X, n) for a, n in zip(coeffs, names))
    torch.testing.assert_close(lhs, rhs, rtol=1e-9, atol=1e-10)


def test_training_on_the_penalty_reduces_lee():
    # the Lie-derivative penalty is a usable training signal: a few Adam steps on it lower the rotation LEE
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(64, 3))
    m = m.double()
    x = randn(8, 1, 8, 8, seed=5)
    before = lee(m, x, "rotate", on="logits").value
    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    for _ in range(30):
        opt.zero_grad()
        lie_derivative_penalty(m, x, ["rotate"]).backward()
        opt.step()
    after = lee(m, x, "rotate", on="logits").value
    assert after < 0.2 * before
