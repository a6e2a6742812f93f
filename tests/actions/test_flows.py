"""The bilinear sampler and the one-parameter flows: conventions, identity at 0, AD support (notes §1.2)."""

import pytest
import torch
import torch.nn.functional as F

from symkit.actions import TRANSFORM_NAMES, bilinear_sample, get_transform, pixels_per_unit, translate_pixels

D = torch.float64


@pytest.fixture
def img() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 9, 11, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("name", TRANSFORM_NAMES)
def test_identity_at_zero_exactly(img, name):
    assert torch.equal(get_transform(name).apply(img, 0.0), img)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("padding", ["reflection", "zeros", "border"])
def test_sampler_matches_grid_sample_off_nodes(img, padding, align_corners):
    # At generic (non-node) coordinates our sampler must equal F.grid_sample with the same conventions.
    flow = (get_transform("rotate") + 0.3 * get_transform("translate_x")).with_options(
        padding=padding, align_corners=align_corners
    )
    t = torch.tensor(0.37, dtype=torch.float64)
    px, py = flow.sample_coords(t, (9, 11))
    if align_corners:
        gx, gy = px / 10 * 2 - 1, py / 8 * 2 - 1
    else:
        gx, gy = (2 * px + 1) / 11 - 1, (2 * py + 1) / 9 - 1
    grid = torch.stack([gx, gy], -1)[None].expand(2, -1, -1, -1)
    ref = F.grid_sample(img, grid, mode="bilinear", padding_mode=padding, align_corners=align_corners)
    torch.testing.assert_close(flow.apply(img, t), ref, rtol=0, atol=1e-12)


def test_units_translation_moves_s_pixels(img):
    # t = 1/s normalized units is one pixel: output column j samples input column j + 1.
    s = pixels_per_unit((9, 11), align_corners=True)
    assert s == 5.0
    out = get_transform("translate_x").apply(img, 1.0 / s)
    torch.testing.assert_close(out[..., :-1], img[..., 1:], rtol=0, atol=1e-12)
    assert pixels_per_unit(64, align_corners=False) == 32.0


def test_reflection_padding_about_pixel_centres():
    x = torch.arange(5.0, dtype=D).reshape(1, 1, 1, 5)
    # columns -2..6 fold to 2 1 0 1 2 3 4 3 2 with align_corners=True
    px = torch.arange(-2.0, 7.0, dtype=D).reshape(1, 9)
    out = bilinear_sample(x, px, torch.zeros(1, 9, dtype=D), align_corners=True)
    assert out.flatten().tolist() == [2, 1, 0, 1, 2, 3, 4, 3, 2]
    out = bilinear_sample(x, px, torch.zeros(1, 9, dtype=D), align_corners=False)
    assert out.flatten().tolist() == [1, 0, 0, 1, 2, 3, 4, 4, 3]


@pytest.mark.parametrize("name", ["translate_x", "rotate", "scale", "shear_y", "hyperbolic_rotate", "brightness"])
def test_forward_and_reverse_mode_agree(img, name):
    flow = get_transform(name)
    t0 = torch.tensor(0.0, dtype=D)
    fwd = torch.func.jvp(lambda t: flow.apply(img, t), (t0,), (torch.ones_like(t0),))[1]
    t = t0.clone().requires_grad_(True)
    y = flow.apply(img, t)
    rev = torch.stack([torch.autograd.grad(y.flatten()[i], t, retain_graph=True)[0] for i in range(0, y.numel(), 37)])
    torch.testing.assert_close(fwd.flatten()[::37], rev, rtol=1e-12, atol=1e-12)


def test_tangent_is_forward_difference_at_nodes(img):
    # Translation at t = 0: d/dt x(u + t) = s * (x[j + 1] - x[j]) everywhere (consistent one-sided stencil),
    # with the right edge reflected (x[W] := x[W - 2]).
    s = pixels_per_unit((9, 11))
    tan = get_transform("translate_x").tangent(img)
    padded = torch.cat([img, img[..., -2:-1]], dim=-1)
    torch.testing.assert_close(tan, s * (padded[..., 1:] - padded[..., :-1]), rtol=0, atol=1e-12)


def test_second_derivatives_exist(img):
    # Second derivative in t of a smooth function of the sampled image, by forward-over-forward and
    # reverse-over-reverse; the bilinear weights are linear in each coordinate, so a rotation's second
    # derivative is nonzero only through the curvature of the flow and mixed terms.
    flow = get_transform("rotate")

    def g(t):
        return flow.apply(img, t).pow(2).sum()

    t0 = torch.tensor(0.05, dtype=D)
    one = torch.ones_like(t0)
    d2_fwd = torch.func.jvp(lambda t: torch.func.jvp(g, (t,), (one,))[1], (t0,), (one,))[1]
    t = t0.clone().requires_grad_(True)
    (d1,) = torch.autograd.grad(g(t), t, create_graph=True)
    (d2_rev,) = torch.autograd.grad(d1, t)
    h = 1e-6
    fd = (torch.func.grad(g)(t0 + h) - torch.func.grad(g)(t0 - h)) / (2 * h)
    torch.testing.assert_close(d2_fwd, d2_rev, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(d2_rev, fd, rtol=1e-5, atol=1e-5)
    assert d2_rev.abs() > 1e-3


def test_flows_are_one_parameter_groups(img):
    # Phi_s o Phi_t = Phi_{s+t}: composing sample coordinates of 0.3 then 0.4 gives those of 0.7 (the flow of a
    # non-commuting combination), and two one-pixel translations equal one two-pixel translation away from the edge.
    flow = get_transform("rotate") + 0.5 * get_transform("scale") + get_transform("translate_y")
    size = (9, 11)
    px3, py3 = flow.sample_coords(torch.tensor(0.3, dtype=D), size)
    # Phi_0.4 applied to the points (px3, py3): sample the coordinate fields themselves bilinearly is inexact, so
    # apply the 3x3 group element in normalized coordinates directly.
    s = pixels_per_unit(size)
    c = torch.tensor([(11 - 1) / 2, (9 - 1) / 2], dtype=D)
    u = torch.stack([(px3 - c[0]) / s, (py3 - c[1]) / s, torch.ones_like(px3)])
    u2 = torch.einsum("ij,jhw->ihw", torch.linalg.matrix_exp(0.4 * flow.generator), u)
    px7, py7 = flow.sample_coords(torch.tensor(0.7, dtype=D), size)
    torch.testing.assert_close(c[0] + s * u2[0], px7)
    torch.testing.assert_close(c[1] + s * u2[1], py7)
    tx = get_transform("translate_x")
    s = pixels_per_unit((9, 11))
    two = tx.apply(tx.apply(img, 1 / s), 1 / s)
    torch.testing.assert_close(two[..., :-2], tx.apply(img, 2 / s)[..., :-2])


def test_linear_combination_of_generators():
    f = 2.0 * get_transform("translate_x") - get_transform("rotate")
    assert f.generator[0, 2] == 2.0 and f.generator[0, 1] == -1.0 and f.generator[1, 0] == 1.0


def test_translate_pixels_integer_shift_has_no_wraparound(img):
    out = translate_pixels(img, 2.0, 0.0, padding="zeros")
    torch.testing.assert_close(out[..., 2:], img[..., :-2])
    assert out[..., :2].abs().max() == 0


def test_bad_inputs_raise(img):
    with pytest.raises(ValueError, match="unknown transform 'spin'"):
        get_transform("spin")
    with pytest.raises(TypeError, match="a name, an ImageFlow or an action, got int"):
        get_transform(3)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        get_transform("rotate").apply(img[0], 0.1)
    with pytest.raises(ValueError, match="padding"):
        get_transform("rotate", padding="circular")
    with pytest.raises(ValueError, match="t has 3 values"):
        get_transform("rotate").apply(img, torch.zeros(3, dtype=D))


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("padding", ["reflection", "zeros", "border"])
def test_direct_tangent_equals_forward_mode_derivative_of_apply(img, padding, align_corners):
    # ImageFlow.tangent computes the generator with a stencil; it must be the t-derivative of apply at 0
    for name in TRANSFORM_NAMES:
        flow = get_transform(name, padding=padding, align_corners=align_corners)
        t0 = torch.zeros((), dtype=D)
        ref = torch.func.jvp(lambda t, f=flow: f.apply(img, t), (t0,), (torch.ones_like(t0),))[1]
        torch.testing.assert_close(flow.tangent(img), ref, rtol=0, atol=1e-12)


def test_translate_pixels_per_sample_offsets(img):
    out = translate_pixels(img, torch.tensor([1.0, 0.0], dtype=D), torch.tensor([0.0, 2.0], dtype=D))
    torch.testing.assert_close(out[0, :, :, 1:], img[0, :, :, :-1])
    torch.testing.assert_close(out[1, :, 2:, :], img[1, :, :-2, :])
