"""Relaxed layers: exact equivariance at zero prior variance, F-FC = rank-1 dense FC, the paper's parameter counts."""

import math

import pytest
import torch

from symkit.nn.relaxed import (
    AnchorBasis,
    EquivConv2d,
    FactoredFC2d,
    RelaxedCNN,
    RelaxedLayer,
    SparseConv2d,
    SparseFC2d,
    SpatialFC2d,
    aps_subsample,
    lift_p4,
    n_anchors,
    paper_parameter_count,
)


def _shift(x, dx, dy):
    return torch.roll(x, shifts=(dx, dy), dims=(2, 3))


def _layer(kind, c=3, co=4, size=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "fc+conv":
        paths = {"fc": SpatialFC2d(c, co, size, generator=g), "conv": EquivConv2d(c, co, size, generator=g)}
    elif kind == "ffc+conv":
        paths = {"fc": FactoredFC2d(c, co, size, generator=g), "conv": EquivConv2d(c, co, size, generator=g)}
    else:
        paths = {"fc": SparseFC2d(c, co, size, generator=g), "conv": SparseConv2d(c, co, size, generator=g)}
    layer = RelaxedLayer(paths).double()
    with torch.no_grad():  # non-zero biases everywhere, so the test also covers them
        for p in layer.parameters():
            if p.dim() == 1:
                p.normal_(generator=g)
    return layer


@pytest.mark.parametrize("kind", ["fc+conv", "ffc+conv", "sfc+sconv"])
def test_zero_prior_variance_on_fc_path_gives_exact_equivariance(kind):
    layer = _layer(kind)
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    shifted = layer(_shift(x, 2, 5))
    assert (shifted - _shift(layer(x), 2, 5)).abs().max() > 1e-3  # the free path breaks equivariance
    layer.zero_path("fc")
    torch.testing.assert_close(layer(_shift(x, 2, 5)), _shift(layer(x), 2, 5), rtol=0, atol=1e-12)
    torch.testing.assert_close(layer(_shift(x, -3, 1)), _shift(layer(x), -3, 1), rtol=0, atol=1e-12)


def test_conv_network_with_aps_is_exactly_shift_invariant():
    torch.manual_seed(0)
    model = RelaxedCNN(1, 5, alpha=2, size=16, layer_type="ffc+conv", seed=0).double()
    for layer in model.layers:
        layer.zero_path("ffc")
    x = torch.randn(3, 1, 16, 16, dtype=torch.float64)
    for dx, dy in [(1, 0), (3, 7), (-5, 2)]:
        torch.testing.assert_close(model(_shift(x, dx, dy)), model(x), rtol=0, atol=1e-10)


def test_aps_subsampling_is_per_sample_and_shift_consistent():
    x = torch.randn(4, 2, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    y = aps_subsample(x)
    ys = aps_subsample(_shift(x, 1, 0))
    for i in range(4):  # shifting by one pixel keeps the same polyphase content, circularly shifted
        matches = [torch.equal(ys[i], torch.roll(y[i], (a, b), (1, 2))) for a in range(4) for b in range(4)]
        assert any(matches)
    # per-sample choice: each sample is one of its own polyphase components
    comps = [x[1:2, :, i::2, j::2] for i in range(2) for j in range(2)]
    assert any(torch.equal(y[1:2], c) for c in comps)


def test_p4_pointwise_network_is_rotation_and_shift_invariant():
    model = RelaxedCNN(1, 6, alpha=1, size=8, layer_type="ffc+conv+gconv", seed=0).double()
    x = torch.randn(2, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    rot = torch.rot90(x, 1, dims=(2, 3))
    assert (model(rot) - model(x)).abs().max() > 1e-6  # the CONV and FC paths are not rotation-equivariant
    for layer in model.layers:
        layer.zero_path("ffc")
        layer.zero_path("conv")
    torch.testing.assert_close(model(rot), model(x), rtol=0, atol=1e-10)
    torch.testing.assert_close(model(_shift(x, 3, 1)), model(x), rtol=0, atol=1e-10)
    assert lift_p4(x).shape == (2, 4, 8, 8)


def test_factored_fc_equals_dense_fc_with_rank_one_blocks():
    g = torch.Generator().manual_seed(0)
    layer = FactoredFC2d(3, 4, size=4, stride=2, bias=False, generator=g).double()
    x = torch.randn(5, 3, 4, 4, dtype=torch.float64, generator=g)
    w = layer.dense_weight()
    torch.testing.assert_close(layer(x).flatten(1), x.flatten(1) @ w.T, rtol=1e-12, atol=1e-12)
    blocks = w.view(4, 4, 3, 16)  # (c', x'y', c, xy)
    for d in range(4):
        for c in range(3):
            s = torch.linalg.svdvals(blocks[d, :, c, :])
            assert s[0] > 1e-3 and s[1] < 1e-12 * s[0]
    # for a fixed output channel, the block over all input channels has rank <= C, not full
    assert int(torch.linalg.matrix_rank(blocks[0].reshape(4, 48))) <= 3


def test_paper_parameter_counts_cifar_and_quadrant():
    assert paper_parameter_count("conv") == 338_770
    assert paper_parameter_count("fc") == 133_635_690
    assert paper_parameter_count("sfc+sconv") == 959_420
    assert paper_parameter_count("fc+conv") == 133_865_010
    assert paper_parameter_count("ffc") == 1_542_625
    assert paper_parameter_count("ffc+conv") == 1_771_945
    assert paper_parameter_count("sfc") == 831_820
    assert paper_parameter_count("sconv") == 237_050
    assert paper_parameter_count("fc", 1, 40) == 112_683_400
    assert paper_parameter_count("conv", 1, 40) == 357_820
    assert paper_parameter_count("ffc+conv", 1, 40) == 1_750_035


def test_meta_count_matches_a_built_model():
    model = RelaxedCNN(3, 10, alpha=1, size=8, layer_type="sfc+sconv", seed=0)
    assert sum(p.numel() for p in model.parameters()) == paper_parameter_count("sfc+sconv", 3, 10, 1, 8)


def test_anchor_count_rounds_half_upwards():
    assert n_anchors(9) == 5 and n_anchors(1024) == 512 and n_anchors(3) == 2


def test_anchors_on_full_grid_reproduce_dense_filter():
    basis = AnchorBasis(3, factor=1.0, noise=1e-4).double()
    phi = basis()
    dense = torch.randn(4, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    u = torch.linalg.lstsq(phi.T, dense.T).solution.T
    torch.testing.assert_close(u @ phi, dense, rtol=1e-8, atol=1e-8)


def test_small_lengthscale_makes_sparse_fc_translation_invariant():
    g = torch.Generator().manual_seed(0)
    layer = SparseFC2d(2, 3, size=4, generator=g).double()
    for b in (layer.basis1, layer.basis2):
        b.log_omega_fixed.fill_(math.log(1e-6))
    x = torch.randn(2, 2, 4, 4, dtype=torch.float64, generator=g)
    y = layer(x)
    # ω → 0: weights constant over space, so every output pixel of a channel is equal and shifts change nothing
    torch.testing.assert_close(y, y[:, :, :1, :1].expand_as(y), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(layer(_shift(x, 1, 2)), y, rtol=1e-6, atol=1e-6)


def test_sparse_conv_filter_is_basis_combination():
    layer = SparseConv2d(2, 3, size=6, generator=torch.Generator().manual_seed(0)).double()
    assert layer.u.shape == (3, 2, 5)
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64)
    ref = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (1, 1, 1, 1), mode="circular"), layer.filter(),
                                     layer.bias)
    torch.testing.assert_close(layer(x), ref)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="in_channels"):
        EquivConv2d(0, 2, 8)
    with pytest.raises(ValueError, match="divisible"):
        SpatialFC2d(1, 2, 5, stride=2)
    with pytest.raises(ValueError, match="layer_type"):
        RelaxedCNN(1, 10, 2, 16, "mlp")
    with pytest.raises(ValueError, match="expects input"):
        FactoredFC2d(2, 2, 4)(torch.zeros(1, 3, 4, 4))
    with pytest.raises(ValueError, match="power of two"):
        RelaxedCNN(1, 10, 2, 12)
    with pytest.raises(ValueError, match="anchor factor"):
        n_anchors(9, 0.0)
    with torch.no_grad():
        out = RelaxedCNN(1, 3, 1, 8)(torch.zeros(1, 1, 8, 8))  # 8 is a power of two: accepted
        assert out.shape == (1, 3) and bool(torch.isfinite(out).all())
