"""rpp-conv (thesis Table 3.1): the three networks have the paths and sizes of the D-Conv layout, the prior is the
negative log prior per image with the RPP's tighter variance on its dense path only, quick runs learn with the RPP's
weight norm in its convolutions, bad settings are refused, and Table 3.1's CIFAR-10 values are registered."""

import math

import pytest
import torch

from symkit.lab.experiments import get_experiment
from symkit.lab.experiments.rpp_conv import MODELS, TABLE31, RPPConvNet, build_model, dense_share, prior_penalty
from symkit.nn.relaxed import count_parameters

EXP = get_experiment("rpp-conv")


def _expected_parameters(model: str, alpha: int) -> int:
    """Parameters of the layout at a 16x16 image, counted from the shapes (module docstring)."""
    chans = [alpha * c for c in (1, 2, 2, 4, 4, 8, 8)]
    strides = (1, 2, 1, 2, 1, 2, 2)
    total, cin, size = 0, 3, 16
    for cout, stride in zip(chans, strides):
        out = size // stride
        if "conv" in MODELS[model]:
            total += cout * cin * 9 + cout
        if "fc" in MODELS[model]:
            total += (cin * size * size) * (cout * out * out) + cout * out * out
        total += 2 * cout  # BatchNorm
        cin, size = cout, out
    return total + (cin * 64 * alpha + 64 * alpha) + (64 * alpha * 10 + 10)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_model_has_its_paths_in_every_layer_and_the_layouts_size(model):
    net = build_model(EXP.make_config(model=model, alpha=2))
    assert len(net.layers) == 7  # a 16x16 image: the strides reach one pixel after seven layers
    for layer in net.layers:
        assert tuple(sorted(layer.paths)) == tuple(sorted(MODELS[model]))
    assert count_parameters(net) == _expected_parameters(model, 2)
    assert net(torch.randn(5, 3, 16, 16)).shape == (5, 10)


def test_the_same_seed_draws_the_same_network_and_another_seed_another():
    a, b = build_model(EXP.make_config(seed=3)), build_model(EXP.make_config(seed=3))
    c = build_model(EXP.make_config(seed=4))
    wa, wb, wc = (n.layers[0].paths["fc"].weight for n in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_penalty_is_the_negative_log_prior_per_image(model):
    cfg = EXP.make_config(model=model, alpha=1, prior_variance=0.5, basic_prior_variance=0.02)
    net = build_model(cfg)
    n = 700
    expected = 0.0
    for layer in net.layers:
        for kind, path in layer.paths.items():
            variance = 0.02 if (model == "rpp" and kind == "fc") else 0.5
            expected += float(path.weight.detach().double().pow(2).sum()) / (2 * variance * n)
    assert math.isclose(float(prior_penalty(net, cfg, n).detach()), expected, rel_tol=1e-5)
    with torch.no_grad():  # biases are unpenalised
        for layer in net.layers:
            for path in layer.paths.values():
                path.bias.add_(1.0)
    assert math.isclose(float(prior_penalty(net, cfg, n).detach()), expected, rel_tol=1e-5)


def test_the_network_runs_in_float64_and_on_meta():
    net = build_model(EXP.make_config(model="rpp", alpha=1)).double()
    assert net(torch.randn(2, 3, 16, 16, dtype=torch.float64)).dtype == torch.float64
    with torch.device("meta"):
        meta = RPPConvNet(MODELS["rpp"], 3, 10, 1, 16)
        out = meta(torch.empty(2, 3, 16, 16))
    assert out.device.type == "meta" and out.shape == (2, 10)


def test_the_cnn_is_exactly_invariant_to_circular_shifts_and_the_mlp_is_not():
    """The convolution paths are circular and subsample by APS (module docstring): the CNN's ("conv") logits do not
    move when the image is rolled (a zero-padded convolution would see the rolled-in border); the dense MLP's do."""
    x = torch.randn(3, 3, 16, 16, dtype=torch.float64)
    rolled = torch.roll(x, shifts=(5, -3), dims=(2, 3))
    for model, invariant in (("conv", True), ("mlp", False)):
        net = build_model(EXP.make_config(model=model, alpha=1)).double().eval()  # BatchNorm by its statistics
        with torch.no_grad():
            gap = float((net(x) - net(rolled)).abs().max() / net(x).abs().max())
        assert (gap < 1e-10) == invariant, (model, gap)


@pytest.fixture(scope="module")
def quick_runs():
    return {m: EXP.run(EXP.make_config(quick=True, model=m)) for m in MODELS}


def test_quick_runs_learn_and_the_rpp_keeps_its_weight_in_its_convolutions(quick_runs):
    for model, m in quick_runs.items():
        assert 0.0 <= m["test_error"] < 80.0, (model, m["test_error"])  # chance is 90 %
        assert m["n_train"] == 1797 - 300
    assert quick_runs["conv"]["dense_share"] == 0.0 and quick_runs["mlp"]["dense_share"] == 1.0
    # the dense path's prior is 100 times tighter: it carries a small share of the weight norm (0.3 % measured)
    assert 0 < quick_runs["rpp"]["dense_share"] < 0.05


def test_dense_share_reads_the_paths_weight_norms():
    net = build_model(EXP.make_config(model="rpp", alpha=1))
    with torch.no_grad():
        for layer in net.layers:
            layer.paths["fc"].weight.fill_(1.0)
            layer.paths["conv"].weight.fill_(1.0)
    fc = sum(layer.paths["fc"].weight.numel() for layer in net.layers)
    conv = sum(layer.paths["conv"].weight.numel() for layer in net.layers)
    assert dense_share(net) == pytest.approx(fc / (fc + conv))


@pytest.mark.parametrize("setting, message", [
    ({"model": "cnn"}, "model must be one of mlp, rpp, conv"),
    ({"source": "mnist"}, "source must be one of digits, cifar10"),
    ({"augment": "flip"}, "augment must be one of none, crop, flip+crop"),
    ({"canvas": 12}, "canvas must be a power of two"),
    ({"canvas": 4}, "canvas (4) must be at least digit_size (8)"),
    ({"momentum": 1.0}, "momentum must be below 1"),
])
def test_bad_settings_are_refused_naming_the_setting(setting, message):
    with pytest.raises(ValueError) as err:
        EXP.run(EXP.make_config(**setting))
    assert message in str(err.value)


def test_table_31s_cifar_values_are_registered_with_their_standard_errors():
    values = {v.where["model"]: v for v in EXP.paper}
    assert set(values) == set(TABLE31) == {"mlp", "rpp", "conv"}
    assert values["mlp"].value == 37.61 and values["rpp"].value == 12.62 and values["conv"].value == 12.03
    assert values["rpp"].stderr == pytest.approx(0.34 / math.sqrt(10))
    assert all(v.metric == "test_error" and v.source == "Table 3.1" for v in values.values())
