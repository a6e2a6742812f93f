"""symkit.measure.zoo: model specs, local weights, timm's path (with a stand-in module), and the acceptance test of
issue 17: small convnets, MLP-Mixers and ViTs built here, with weights written by the test and loaded back through
the user-facing path, give layer-wise contributions that sum to the end-to-end Lie derivative to 1e-6 (float64)."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from torch import nn

from symkit.lab.experiments import get_experiment
from symkit.measure import layerwise_lie_derivative, lie_derivative
from symkit.measure.zoo import (
    ZOO,
    Normalize,
    evaluate_model,
    load_model,
    load_state_dict,
    model_family,
    parse_spec,
    zoo_leaf_types,
)

#: one small model of each family, as a user names them: an importable constructor with keyword arguments
SPECS = {
    "cnn": "symkit.measure.zoo:tiny_convnet(in_channels=3, num_classes=10, width=6)",
    "cnn-blur": "symkit.measure.zoo:tiny_convnet(in_channels=3, num_classes=10, width=6, blur=True)",
    "mlp": "symkit.measure.zoo:tiny_mixer(in_channels=3, num_classes=10, image_size=16, dim=12, depth=2)",
    "vit": "symkit.measure.zoo:tiny_vit(in_channels=3, num_classes=10, image_size=16, dim=12, depth=2, heads=2)",
}


def _trained_looking(model: nn.Module, seed: int) -> nn.Module:
    """Random parameters and batch-norm statistics far from the initial ones (so loading them matters)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in model.state_dict().values():  # parameters and saved buffers (not the fixed blur filter)
            if t.is_floating_point():
                t.copy_(0.3 * torch.randn(t.shape, generator=gen) + (1.0 if t.ndim == 1 else 0.0))
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_var.uniform_(0.5, 2.0, generator=gen)
    return model.eval()


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """The state dict of each family's model, written to a temporary file: {family: (spec with @path, model)}."""
    folder = tmp_path_factory.mktemp("weights")
    out = {}
    for i, (family, spec) in enumerate(SPECS.items()):
        model = _trained_looking(load_model(spec).model, i)
        path = folder / f"{family}.pt"
        torch.save(model.state_dict(), path)
        out[family] = (f"{family}={spec}@{path}", model)
    return out


@pytest.mark.parametrize("family", list(SPECS))
def test_layer_contributions_sum_to_the_lie_derivative(weights, family):
    spec, original = weights[family]
    loaded = load_model(spec, dtype=torch.float64)
    assert loaded.label == family and loaded.family == family.split("-")[0]
    x = torch.rand(4, 3, 16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # the file's weights were loaded, not the constructor's
        assert torch.allclose(loaded.model(x), original.double()(x), atol=1e-12)
    for transform in ("translate_x", "rotate"):
        lw = layerwise_lie_derivative(loaded.model, x, transform, method="exact",
                                      leaf_types=zoo_leaf_types(loaded.model))
        end_to_end = lie_derivative(torch.nn.Sequential(loaded.model, nn.Softmax(1)), x, transform)
        assert torch.allclose(lw.end_to_end, end_to_end, atol=1e-12)
        gap = (lw.contributions.sum(0) - lw.end_to_end).abs().max()
        assert gap < 1e-6 * max(1.0, float(lw.end_to_end.abs().max())), (family, transform, float(gap))
        assert lw.end_to_end.abs().max() > 1e-4  # not trivially zero


@pytest.mark.parametrize("family", ["cnn", "mlp", "vit"])
def test_lee_zoo_run_on_local_weights_closes_the_decomposition(weights, family):
    from symkit.lab.experiments.lee_zoo import load_data

    spec, original = weights[family]
    exp = get_experiment("lee-zoo")
    cfg = exp.make_config(quick=True, model=spec, double=True, n_images=8, layer_images=3)
    m = exp.run(cfg)
    assert m["label"] == family and "train_seconds" not in m  # the file's weights, no training
    assert m["layer_residual"] < 1e-6
    assert m["lee_translate_x"] > 0 and m["eqt_db"] > 0
    # the accuracy is that of the file's weights on the run's labelled images, counted here
    images, labels = load_data(cfg, need_train=False).accuracy_on
    with torch.no_grad():
        correct = int((original.double()(images.double()).argmax(1) == labels).sum())
    assert m["n_accuracy"] == len(labels) and m["accuracy"] == correct / len(labels), (m["accuracy"], correct)


def test_spec_syntax():
    s = parse_spec("big=pkg.mod:build(width=2, name='a')@/tmp/w@1(2).pt")
    assert (s.label, s.kind, s.target, dict(s.kwargs), s.weights) == (
        "big", "import", "pkg.mod:build", {"width": 2, "name": "a"}, "/tmp/w@1(2).pt")
    s = parse_spec("timm:vit_small_patch16_224@w.pth")
    assert (s.label, s.kind, s.target, s.weights) == ("vit_small_patch16_224", "timm", "vit_small_patch16_224",
                                                       "w.pth")
    assert parse_spec("vit-m").kind == "zoo" and parse_spec("vit-m(dim=8)").kwargs == {"dim": 8}
    for bad, match in (("nonsense", "neither"), ("m:f(1, 2)", "keyword"), ("m:f(width=len)", "keyword"),
                       ("", "non-empty"), ("=m:f", "empty label")):
        with pytest.raises(ValueError, match=match):
            parse_spec(bad)


def test_state_dicts_are_unwrapped_and_mismatches_named(tmp_path):
    model = load_model("vit-s").model
    state = {f"module.{k}": v for k, v in model.state_dict().items()}
    torch.save({"epoch": 3, "state_dict": state}, tmp_path / "ckpt.pth")
    assert set(load_state_dict(tmp_path / "ckpt.pth")) == set(model.state_dict())
    load_model(f"vit-s@{tmp_path / 'ckpt.pth'}")
    with pytest.raises(ValueError, match="ckpt.pth: does not fit"):
        load_model(f"vit-m@{tmp_path / 'ckpt.pth'}")
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_model(f"vit-s@{tmp_path / 'missing.pt'}")
    # timm's training script keeps the EMA weights beside the raw ones; the EMA ones are read, as timm reads them
    ema = {k: v + 1 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save({"state_dict": state, "model_ema": ema}, tmp_path / "ema.pth")
    read = load_state_dict(tmp_path / "ema.pth")
    assert all(torch.equal(read[k], ema[k]) for k in ema)
    torch.save({"not": "tensors"}, tmp_path / "odd.pt")
    with pytest.raises(ValueError, match="state dict"):
        load_state_dict(tmp_path / "odd.pt")


class _FakeTimmNet(nn.Module):
    """Stands in for a timm model: a fused-attention flag and a declared input normalisation."""

    def __init__(self, num_classes: int = 5) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.attn = nn.Identity()
        self.attn.fused_attn = True
        self.head = nn.Linear(4, num_classes)
        self.pretrained_cfg = {"mean": (0.5, 0.4, 0.3), "std": (0.2, 0.25, 0.3)}

    def forward(self, x):
        return self.head(self.conv(x).mean((-2, -1)))


def test_timm_names_build_without_downloading(monkeypatch, tmp_path):
    calls = []

    def create_model(name, pretrained=True, **kwargs):
        calls.append((name, pretrained, kwargs))
        return _FakeTimmNet(**kwargs)

    monkeypatch.setitem(sys.modules, "timm", types.SimpleNamespace(create_model=create_model))
    torch.save(_FakeTimmNet(num_classes=7).state_dict(), tmp_path / "net.pth")
    loaded = load_model(f"timm:fake_net(num_classes=7)@{tmp_path / 'net.pth'}")
    assert calls == [("fake_net", False, {"num_classes": 7})]
    assert isinstance(loaded.model.normalize, Normalize) and loaded.model.model.attn.fused_attn is False
    x = torch.rand(2, 3, 8, 8)
    with torch.no_grad():
        expected = loaded.model.model((x - torch.tensor([0.5, 0.4, 0.3])[:, None, None])
                                   / torch.tensor([0.2, 0.25, 0.3])[:, None, None])
        assert torch.allclose(loaded.model(x), expected)
    assert load_model("timm:fake_net", normalize="none").model.__class__ is _FakeTimmNet


def test_timm_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)
    with pytest.raises(ImportError, match="needs timm"):
        load_model("timm:resnet50")


def test_families_and_the_built_in_zoo():
    for name, (fn, kwargs) in ZOO.items():
        model = load_model(name, defaults={"in_channels": 3, "num_classes": 10, "image_size": 16, "patch": 4}).model
        assert fn(**kwargs).__class__ is model.__class__
        assert model_family(model) == {"convnet": "cnn", "mixer": "mlp", "vit": "vit"}[name.split("-")[0]]


def test_evaluate_model_reports_every_measure():
    model = load_model("convnet-s", defaults={"in_channels": 1}).model.eval()
    x = torch.rand(6, 1, 16, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        pred = model(x).argmax(1)
    y = torch.cat([pred[:4], (pred[4:] + 1) % 10])  # the model's own answer on 4 images, another on 2
    r = evaluate_model(model, x, y, transforms=("translate_x", "rotate"), layer_images=2, num_probes=4,
                       eqt_shifts=2)
    m = r.metrics()
    assert set(r.lee) == {"translate_x", "rotate"} and r.layerwise.method == "probes"
    assert m["accuracy"] == 4 / 6 and m["lee_rotate"] > 0 and "layer_residual" not in m
    assert m["layer_eqt_frac_total"] > 0 and m["eqt_frac_db"] > 0
    with pytest.raises(ValueError, match="labels"):
        evaluate_model(model, x)
