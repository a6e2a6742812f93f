"""Layer-wise attribution (Eq. 4.6): exact decomposition sums to the end-to-end value; the probe estimator is
unbiased; repeated modules, in-place operations and skipped modules are handled."""

import pytest
import torch
from torch import nn

from symkit.lab.experiments.figures import plot_cumulative_contributions
from symkit.measure import lie_derivative, with_scores
from symkit.measure.layerwise import find_leaves, layerwise_lie_derivative
from symkit.nn.vision import MLPMixer, ResNet18, SmallCNN, ViT

D = torch.float64


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=D)


def make(arch):
    torch.manual_seed(0)
    if arch == "cnn":
        m, x = SmallCNN(in_channels=2, num_classes=4, width=3), randn(2, 2, 10, 10)
    elif arch == "mixer":
        m, x = MLPMixer(in_channels=1, num_classes=4, image_size=8, patch=2, dim=6, depth=1), randn(2, 1, 8, 8)
    elif arch == "vit":
        m, x = ViT(in_channels=1, num_classes=4, image_size=8, patch=2, dim=6, depth=1, heads=2), randn(2, 1, 8, 8)
    else:
        m, x = ResNet18(in_channels=1, num_classes=4, width=2), randn(2, 1, 16, 16)
    m = m.double().eval()
    for bn in m.modules():
        if isinstance(bn, nn.BatchNorm2d):
            bn.running_mean.uniform_(-0.3, 0.3)
            bn.running_var.uniform_(0.5, 2.0)
            bn.bias.data.uniform_(-0.3, 0.3)
    return m, x


@pytest.mark.parametrize(
    "arch,transform",
    [("cnn", "rotate"), ("mixer", "translate_y"), ("vit", "scale"), ("resnet", "translate_x"), ("cnn", "brightness")],
)
def test_exact_contributions_sum_to_end_to_end(arch, transform):
    m, x = make(arch)
    r = layerwise_lie_derivative(m, x, transform, method="exact")
    with torch.no_grad():
        L = lie_derivative(with_scores(m, "probs"), x, transform)
    torch.testing.assert_close(r.end_to_end, L)
    assert (r.contributions.sum(0) - L).abs().max() < 1e-8
    assert L.abs().max() > 1e-4  # the check is not vacuous
    # triangle inequality: the norm of the sum is at most the sum of the norms (per sample)
    assert torch.all(L.flatten(1).norm(dim=1) <= r.sq_norms.sqrt().sum(0) * (1 + 1e-12))


def test_probe_estimator_is_unbiased():
    m, x = make("cnn")
    exact = layerwise_lie_derivative(m, x, "translate_x", method="exact")
    est = layerwise_lie_derivative(m, x, "translate_x", method="probes", num_probes=400, seed=1)
    assert est.names == exact.names
    live = exact.sq_norms > 1e-12
    assert live.sum() >= 5
    z = (est.sq_norms - exact.sq_norms)[live] / est.sq_stderr[live]
    # fixed seed; a 5-sigma band for each of the live (layer, sample) pairs
    assert z.abs().max() < 5
    # probes that never see a layer give exactly zero, e.g. layers whose Lie derivative vanishes
    assert torch.all(est.sq_norms[~live].abs() < 1e-20)
    # the standard error shrinks like 1/sqrt(N): 100 probes give about twice the error bars of 400
    est100 = layerwise_lie_derivative(m, x, "translate_x", method="probes", num_probes=100, seed=1)
    ratio = (est100.sq_stderr[live] / est.sq_stderr[live]).median()
    assert 1.5 < ratio < 2.7


def test_repeated_modules_and_inplace_ops():
    m, x = make("resnet")
    assert m.layer1[0].relu.inplace
    r = layerwise_lie_derivative(m, x, "rotate")
    # the block's ReLU runs twice: two entries, in call order
    i0, i1 = r.names.index("layer1.0.relu"), r.names.index("layer1.0.relu#1")
    assert i1 > r.names.index("layer1.0.bn2") > i0
    assert m.layer1[0].relu.inplace  # flags restored
    # same numbers with out-of-place ReLUs
    for mod in m.modules():
        if isinstance(mod, nn.ReLU):
            mod.inplace = False
    r2 = layerwise_lie_derivative(m, x, "rotate")
    torch.testing.assert_close(r.contributions, r2.contributions)
    probes = layerwise_lie_derivative(m, x, "rotate", method="probes", num_probes=8)
    assert probes.names == r.names


def test_skipped_modules_and_leaf_types():
    m, x = make("cnn")
    names = [n for n, _ in find_leaves(m)]
    assert "features.2" in names  # the first ReLU
    r = layerwise_lie_derivative(m, x, "rotate", skip=["features.2"])
    assert "features.2" not in r.names
    # the skipped ReLU still breaks equivariance, so the decomposition no longer closes; this is reported
    assert r.residual > 1e-3
    full = layerwise_lie_derivative(m, x, "rotate")
    assert full.residual < 1e-10
    # treating a whole stage as one leaf attributes its error in one piece and still closes
    staged = layerwise_lie_derivative(m, x, "rotate", leaf_types=[nn.Sequential])
    assert staged.names == ["features", "pool", "head"]
    assert staged.residual < 1e-10
    # ViT attention is a leaf by default (its softmax is not a module)
    vit, _ = make("vit")
    assert "blocks.0.attn" in [n for n, _ in find_leaves(vit)]


def test_single_module_is_its_own_leaf():
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1).double()
    x = randn(2, 2, 9, 9)
    r = layerwise_lie_derivative(conv, x, "rotate", on="logits")
    assert r.names == ["Conv2d"]
    torch.testing.assert_close(r.contributions[0], r.end_to_end)


def test_table_and_plot():
    m, x = make("mixer")
    r = layerwise_lie_derivative(m, x, "rotate")
    rows = r.table()
    assert len(rows) == len(r.names)
    assert sum(row["fraction"] for row in rows) == pytest.approx(1.0)
    ax = plot_cumulative_contributions({"rotate": r, "again": r})
    assert len(ax.lines) == 2


def test_bad_arguments():
    m, x = make("cnn")
    with pytest.raises(ValueError, match="method"):
        layerwise_lie_derivative(m, x, "rotate", method="hutch")
    with pytest.raises(ValueError, match="num_probes"):
        layerwise_lie_derivative(m, x, "rotate", method="probes", num_probes=1)
    with pytest.raises(TypeError, match="nn.Module"):
        layerwise_lie_derivative(lambda z: z, x, "rotate")


def test_equivariant_network_has_no_contributions():
    # 1x1 convolutions and an identity: every layer's Lie derivative vanishes (a pointwise non-linearity would not:
    # sigma(x[j + 1]) - sigma(x[j]) differs from sigma'(x[j]) (x[j + 1] - x[j]))
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 3, 1), nn.Identity(), nn.Conv2d(3, 2, 1)).double()
    x = randn(2, 2, 6, 6)
    for method in ("exact", "probes"):
        r = layerwise_lie_derivative(m, x, "rotate", method=method, on="logits", num_probes=4)
        assert r.sq_norms.abs().max() < 1e-24 and r.end_to_end.abs().max() < 1e-12


@pytest.mark.parametrize("arch", ["cnn", "vit"])
def test_batched_probes_equal_one_by_one(arch):
    m, x = make(arch)
    a = layerwise_lie_derivative(m, x, "rotate", method="probes", num_probes=12, probe_batch=5, seed=3)
    b = layerwise_lie_derivative(m, x, "rotate", method="probes", num_probes=12, probe_batch=1, seed=3)
    torch.testing.assert_close(a.sq_norms, b.sq_norms, rtol=1e-10, atol=1e-20)
    assert a.sq_norms.max() > 0
