"""Every torch module of symkit follows PyTorch's factory conventions: ``device=`` and ``dtype=`` keywords,
``torch.get_default_dtype()`` when no dtype is given, and forward and backward on any device (here ``meta``, where
no value is computed, so a tensor made on the CPU inside a forward pass is caught).

The walk finds every ``nn.Module`` subclass defined in symkit; each one has an example below (private helpers are
covered by the public module that builds them), so a new module without one fails the first test.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch
from torch import nn

import symkit

# ---------------------------------------------------------------- examples: build(**factory) and an input maker


def _reps():
    from symkit.groups import SO
    from symkit.reps import Scalar, V

    G = SO(3)
    return G, 2 * V(G) + Scalar, V(G)


def _emlp(cls_name):
    def build(**f):
        from symkit import nn as snn

        G, rin, rout = _reps()
        if cls_name in ("EMLP", "RPPEMLP"):
            return getattr(snn, cls_name)(rin, rout, G, ch=16, num_layers=1, **f)
        if cls_name == "EMLPBlock":
            from symkit.nn.emlp import EMLPBlock, uniform_rep

            return EMLPBlock(rin, uniform_rep(16, G), **f)
        if cls_name in ("GatedNonlinearity", "RPPGatedNonlinearity", "BiLinear"):
            from symkit.nn import emlp, rpp
            from symkit.nn.emlp import gated, uniform_rep

            cls = getattr(emlp, cls_name, None) or getattr(rpp, cls_name)
            rep = uniform_rep(16, G)  # the nonlinearities map gated(rep) to rep; BiLinear maps gated(rep) to itself
            return cls(gated(rep) if cls_name == "BiLinear" else rep, **f)
        from symkit.nn import emlp, rpp

        cls = getattr(emlp, cls_name, None) or getattr(rpp, cls_name)
        return cls(rin, rout, **f)

    return build


def _emlp_input(cls_name):
    def make(**f):
        from symkit.nn.emlp import gated, uniform_rep

        G, rin, _ = _reps()
        if cls_name in ("GatedNonlinearity", "RPPGatedNonlinearity", "BiLinear"):
            return torch.randn(3, gated(uniform_rep(16, G)).size, **f)
        return torch.randn(3, rin.size, **f)

    return make


def _image(c=1, n=8):
    return lambda **f: torch.randn(3, c, n, n, **f)


def _vector(d):
    return lambda **f: torch.randn(3, d, **f)


def _tokens(length=4, vocab=11):
    return lambda **f: torch.randint(vocab, (3, length), device=f.get("device"))


def _none(**f):
    return None


def _bases(**f):
    from symkit.nn.powernet import make_base

    return [make_base("rotation", 8).to(**f), make_base("shift_up", 8).to(**f)]


def _project_net(**f):
    from symkit.actions import CyclicTranslations2D
    from symkit.dynamics import LayerSpec, ProjectNet

    a = CyclicTranslations2D(4)
    return ProjectNet([LayerSpec(a, a, 1, 2), LayerSpec(a, a.trivial(), 2, 1)], **f)


def _sum_net(**f):
    from symkit.nn.sharing import SumOfNumbersNet

    return SumOfNumbersNet(4, vocab=11, embed=8, hidden=6, **f)


def _mae(**f):
    from symkit.nn import MaskedAutoencoder
    from symkit.nn.vision import ViT

    vit = ViT(1, 4, image_size=8, patch=4, dim=8, depth=1, heads=2, **f)
    return MaskedAutoencoder(vit, 4, decoder_dim=8, decoder_depth=1, heads=2, **f)


def _transition_rollout(**f):
    from symkit.nn import MLP
    from symkit.rl.presets import preset
    from symkit.rl.transitions import Rollouts, TransitionModel, _Rollout

    p = preset("Swimmer")
    g = torch.Generator().manual_seed(0)
    data = Rollouts(torch.randn(2, 4, p.state_size, generator=g, dtype=torch.float64),
                    torch.randn(2, 3, p.action_size, generator=g, dtype=torch.float64))
    net = MLP(p.state_size + p.action_size, p.state_size, ch=8, num_layers=1, **f)
    return _Rollout(TransitionModel(net, p, data), horizon=2)


def _packed_rollout(**f):
    from symkit.rl.presets import preset

    p = preset("Swimmer")
    return torch.randn(3, p.state_size + 2 * p.action_size, **f)


def _b(path, *args, **kw):
    module, name = path.rsplit(".", 1)

    def build(**f):
        return getattr(importlib.import_module(module), name)(*args, **kw, **f)

    return build


def _augmented(**f):
    from symkit.nn import MLP, GroupAugmented

    G, rin, rout = _reps()
    return GroupAugmented(MLP(rin.size, rout.size, ch=8, num_layers=1, **f), rin, rout, G)


def _standardized(**f):
    from symkit.nn import Standardize

    G, rin, rout = _reps()
    model = _emlp("EMLP")(**f)
    dtype = f.get("dtype") or torch.get_default_dtype()
    device = f.get("device")
    x = torch.randn(8, rin.size, dtype=dtype).to(device) if device != "meta" else torch.empty(8, rin.size,
                                                                                            dtype=dtype, device=device)
    y = torch.randn(8, rout.size, dtype=dtype).to(device) if device != "meta" else torch.empty(8, rout.size,
                                                                                             dtype=dtype, device=device)
    return Standardize(model, rin, rout, x, y)


def _hamiltonian_net(**f):
    """J grad H of an invariant energy of a state (q, p), two 3-vectors."""
    from symkit.nn import EMLP, HamiltonianNet
    from symkit.reps import Scalar, V

    G, _, _ = _reps()
    return HamiltonianNet(EMLP(2 * V(G), Scalar, G, ch=16, num_layers=1, **f))


def _neural_ode(**f):
    from symkit.nn import EMLP, NeuralODE
    from symkit.reps import V

    G, _, _ = _reps()
    return NeuralODE(EMLP(2 * V(G), 2 * V(G), G, ch=16, num_layers=1, **f))


def _projector(kind):
    def build(**f):
        from symkit.pacbayes import make_projector

        mask = torch.arange(60) % 3 == 0 if kind.startswith("film") else None
        return make_projector(kind, 60, 5, film_mask=mask, **f)

    return build


def _subspace(**f):
    from symkit.nn.vision import SmallCNN
    from symkit.pacbayes import SubspaceModel

    return SubspaceModel(SmallCNN(1, 4, width=2, norm="batch", **f), 10)


def _irrep_linear(**f):
    """An EquivariantLinear large enough to run through its irreducible basis (IrrepProduct), on a batch of 8."""
    from symkit.groups import SO
    from symkit.nn.emlp import EquivariantLinear, gated, uniform_rep

    rep = uniform_rep(256, SO(3))
    layer = EquivariantLinear(rep, gated(rep), **f)
    assert layer.irrep_product is not None
    return layer


EXAMPLES = {
    "symkit.nn.emlp.EquivariantLinear": (_emlp("EquivariantLinear"), _emlp_input("EquivariantLinear")),
    "symkit.nn._isotypic.IrrepProduct": (_irrep_linear, lambda **f: torch.randn(8, 256, **f)),
    "symkit.nn.emlp.GatedNonlinearity": (_emlp("GatedNonlinearity"), _emlp_input("GatedNonlinearity")),
    "symkit.nn.bilinear.BiLinear": (_emlp("BiLinear"), _emlp_input("BiLinear")),
    "symkit.nn.emlp.EMLPBlock": (_emlp("EMLPBlock"), _emlp_input("EMLPBlock")),
    "symkit.nn.emlp.EMLP": (_emlp("EMLP"), _emlp_input("EMLP")),
    "symkit.nn.emlp.MLP": (_b("symkit.nn.emlp.MLP", 7, 3, ch=16, num_layers=2), _vector(7)),
    "symkit.nn.rpp.RPPLinear": (_emlp("RPPLinear"), _emlp_input("RPPLinear")),
    "symkit.nn.rpp.RPPGatedNonlinearity": (_emlp("RPPGatedNonlinearity"), _emlp_input("RPPGatedNonlinearity")),
    "symkit.nn.rpp.RPPEMLP": (_emlp("RPPEMLP"), _emlp_input("RPPEMLP")),
    "symkit.nn.rpp.RPPConv2d": (_b("symkit.nn.rpp.RPPConv2d", 1, 2, 8), _image()),
    "symkit.nn.powernet.bases.PermutationBase": (_b("symkit.nn.powernet.bases.PermutationBase", [2, 0, 1]),
                                                 _vector(3)),
    "symkit.nn.powernet.bases.DenseBase": (_b("symkit.nn.powernet.bases.DenseBase", [[0.0, 1.0], [1.0, 0.0]]),
                                           _vector(2)),
    "symkit.nn.powernet.bases.GridShift": (_b("symkit.nn.powernet.bases.GridShift", (3, 3), 0), _vector(9)),
    "symkit.nn.powernet.bases.Rot90": (_b("symkit.nn.powernet.bases.Rot90", 3), _vector(9)),
    "symkit.nn.powernet.layer.PowerLayer": (
        lambda **f: importlib.import_module("symkit.nn.powernet").PowerLayer(_bases(**f), 2, 3, 3, **f),
        lambda **f: torch.randn(3, 2, 64, **f)),
    "symkit.nn.powernet.net.PowerBlock": (
        lambda **f: importlib.import_module("symkit.nn.powernet").PowerBlock(_bases(**f), 2, 3, 1, 3, **f),
        _image(2)),
    "symkit.nn.powernet.net.PowerNet": (
        _b("symkit.nn.powernet.PowerNet", ["rotation", "shift_up"], (1, 8, 8), (2, 3), 5, num_layers=1,
           kernel_size=3), _image()),
    "symkit.nn.powernet.net.ConvNet": (_b("symkit.nn.powernet.ConvNet", (1, 8, 8), (2, 3), 5, num_layers=1,
                                          kernel_size=3), _image()),
    "symkit.lab.experiments.rpp_conv.RPPConvNet": (_b("symkit.lab.experiments.rpp_conv.RPPConvNet", ("conv", "fc"),
                                                      1, 10, 1, 8), _image()),
    "symkit.nn.relaxed.container.RelaxedCNN": (_b("symkit.nn.relaxed.RelaxedCNN", 1, 4, alpha=1, size=8),
                                               _image()),
    "symkit.nn.relaxed.container.RelaxedLayer": (
        lambda **f: importlib.import_module("symkit.nn.relaxed").RelaxedLayer(
            {"conv": importlib.import_module("symkit.nn.relaxed").EquivConv2d(1, 2, 8, **f)}), _image()),
    "symkit.nn.relaxed.layers.EquivConv2d": (_b("symkit.nn.relaxed.layers.EquivConv2d", 1, 2, 8), _image()),
    "symkit.nn.relaxed.layers.SpatialFC2d": (_b("symkit.nn.relaxed.layers.SpatialFC2d", 1, 2, 8), _image()),
    "symkit.nn.relaxed.layers.FactoredFC2d": (_b("symkit.nn.relaxed.layers.FactoredFC2d", 1, 2, 8), _image()),
    "symkit.nn.relaxed.layers.SparseConv2d": (_b("symkit.nn.relaxed.layers.SparseConv2d", 1, 2, 8), _image()),
    "symkit.nn.relaxed.layers.SparseFC2d": (_b("symkit.nn.relaxed.layers.SparseFC2d", 1, 2, 8), _image()),
    "symkit.nn.relaxed.layers.P4PointwiseConv2d": (_b("symkit.nn.relaxed.layers.P4PointwiseConv2d", 1, 2, 8),
                                                   _image(4)),  # a P4 feature map: 4 rotations per channel
    "symkit.nn.relaxed.layers.AnchorBasis": (_b("symkit.nn.relaxed.layers.AnchorBasis", 8), _none),
    "symkit.nn.relaxed.record.KLinear": (_b("symkit.nn.relaxed.record.KLinear", 5, 2), _vector(5)),
    "symkit.nn.sharing.SoftAssignment": (_b("symkit.nn.sharing.SoftAssignment", 6, 3), _none),
    "symkit.nn.sharing.SharedParameter": (_b("symkit.nn.sharing.SharedParameter", (2, 3), 3), _none),
    "symkit.nn.sharing.SharedLinear": (_b("symkit.nn.sharing.SharedLinear", 5, 2, c=4), _vector(5)),
    "symkit.nn.sharing.BlockSharedLinear": (_b("symkit.nn.sharing.BlockSharedLinear", 4, 3, 2),
                                            lambda **f: torch.randn(3, 4, 3, **f)),
    "symkit.nn.sharing.HardSharedLinear": (_b("symkit.nn.sharing.HardSharedLinear", [0, 1, 1, 0, 2, 2], 3, 2),
                                           _vector(2)),
    "symkit.nn.sharing.SumOfNumbersNet": (_sum_net, _tokens()),
    "symkit.discover.baselines.AugerinoPermutation": (
        lambda **f: importlib.import_module("symkit.discover.baselines").AugerinoPermutation(_sum_net(**f), 4, **f),
        _tokens()),
    "symkit.discover.baselines.AugerinoShift": (
        lambda **f: importlib.import_module("symkit.discover.baselines").AugerinoShift(nn.Linear(5, 3, **f), **f),
        _vector(5)),
    "symkit.dynamics.model.ProjectNet": (_project_net, lambda **f: torch.randn(3, 1, 4, 4, **f)),
    "symkit.nn.standardize.Standardize": (_standardized, _emlp_input("EMLP")),
    "symkit.nn.augment.GroupAugmented": (_augmented, _emlp_input("EMLP")),
    "symkit.nn.ode.HamiltonianNet": (_hamiltonian_net, _vector(6)),
    "symkit.nn.ode.NeuralODE": (_neural_ode, _vector(6)),
    "symkit.nn.vision.GlobalAvgPool": (_b("symkit.nn.vision.GlobalAvgPool"), _image(2)),
    "symkit.nn.vision.TokenMean": (_b("symkit.nn.vision.TokenMean"), lambda **f: torch.randn(3, 5, 4, **f)),
    "symkit.nn.vision.ClassToken": (_b("symkit.nn.vision.ClassToken"), lambda **f: torch.randn(3, 5, 4, **f)),
    "symkit.nn.vision.PatchEmbed": (_b("symkit.nn.vision.PatchEmbed", 1, 8, 4), _image()),
    "symkit.nn.vision.SmallCNN": (_b("symkit.nn.vision.SmallCNN", 1, 4, width=4), _image()),
    "symkit.nn.vision.TokenMixing": (_b("symkit.nn.vision.TokenMixing", 4, 6), lambda **f: torch.randn(3, 4, 5, **f)),
    "symkit.nn.vision.ChannelMLP": (_b("symkit.nn.vision.ChannelMLP", 5, 6), lambda **f: torch.randn(3, 4, 5, **f)),
    "symkit.nn.vision.MixerBlock": (_b("symkit.nn.vision.MixerBlock", 4, 5, 6, 6),
                                    lambda **f: torch.randn(3, 4, 5, **f)),
    "symkit.nn.vision.MLPMixer": (_b("symkit.nn.vision.MLPMixer", 1, 4, image_size=8, patch=4, dim=8, depth=1),
                                  _image()),
    "symkit.nn.vision.Attention": (_b("symkit.nn.vision.Attention", 8, 2), lambda **f: torch.randn(3, 5, 8, **f)),
    "symkit.nn.vision.ViTBlock": (_b("symkit.nn.vision.ViTBlock", 8, 2, 16), lambda **f: torch.randn(3, 5, 8, **f)),
    "symkit.nn.vision.AddClassToken": (_b("symkit.nn.vision.AddClassToken", 4, 8),
                                       lambda **f: torch.randn(3, 4, 8, **f)),
    "symkit.nn.vision.ViT": (_b("symkit.nn.vision.ViT", 1, 4, image_size=8, patch=4, dim=8, depth=1, heads=2),
                             _image()),
    "symkit.nn.vision.BasicBlock": (_b("symkit.nn.vision.BasicBlock", 2, 4, stride=2), _image(2)),
    "symkit.nn.vision.ResNet18": (_b("symkit.nn.vision.ResNet18", 1, 4, width=4, stem="cifar"), _image(1, 16)),
    "symkit.nn.groupconv.P4LiftConv2d": (_b("symkit.nn.groupconv.P4LiftConv2d", 1, 2), _image()),
    "symkit.nn.groupconv.P4Conv2d": (_b("symkit.nn.groupconv.P4Conv2d", 1, 2), _image(4)),
    "symkit.nn.groupconv.P4BatchNorm2d": (_b("symkit.nn.groupconv.P4BatchNorm2d", 2), _image(8)),
    "symkit.nn.groupconv.P4CNN": (_b("symkit.nn.groupconv.P4CNN", 1, 4, width=2), _image()),
    "symkit.pacbayes.projectors.DenseProjector": (_projector("dense"), lambda **f: torch.randn(5, **f)),
    "symkit.pacbayes.projectors.SparseProjector": (_projector("sparse"), lambda **f: torch.randn(5, **f)),
    "symkit.pacbayes.projectors.KronSumProjector": (_projector("kron-sum"), lambda **f: torch.randn(5, **f)),
    "symkit.pacbayes.projectors.KronProjector": (_projector("kron"), lambda **f: torch.randn(5, **f)),
    "symkit.pacbayes.projectors.FiLMProjector": (_projector("film"), lambda **f: torch.randn(5, **f)),
    "symkit.pacbayes.projectors.FiLMKronProjector": (_projector("film+kron"), lambda **f: torch.randn(5, **f)),
    "symkit.pacbayes.quantize.Quantizer": (_b("symkit.pacbayes.quantize.Quantizer", 7), _vector(20)),
    "symkit.pacbayes.subspace.SubspaceModel": (_subspace, _image()),
    "symkit.measure.zoo.BlurPool2d": (_b("symkit.measure.zoo.BlurPool2d"), _image(2)),
    "symkit.measure.zoo.TinyConvNet": (_b("symkit.measure.zoo.TinyConvNet", 1, 4, width=2, blur=True), _image()),
    "symkit.measure.zoo.Normalize": (_b("symkit.measure.zoo.Normalize", (0.5, 0.4), (0.2, 0.3)), _image(2)),
    "symkit.nn.vision.MaskedAutoencoder": (_mae, _image(1, 8)),
    "symkit.rl.transitions._Rollout": (_transition_rollout, _packed_rollout),
    "symkit.rl.sac._SoftplusLogStd": (_b("symkit.rl.sac._SoftplusLogStd"), _vector(3)),
}

#: private helpers and abstract bases, and the example that builds them
COVERED_BY = {
    "symkit.rl.transitions.TransitionModel": "symkit.rl.transitions._Rollout",
    "symkit.nn.emlp._BasisExpansion": "symkit.nn.emlp.EquivariantLinear",
    "symkit.nn.rpp._RPPBlock": "symkit.nn.rpp.RPPEMLP",
    "symkit.nn.emlp._GatedBlock": "symkit.nn.emlp.EMLPBlock",
    "symkit.nn.emlp._BlockNetwork": "symkit.nn.emlp.EMLP",
    "symkit.nn.powernet.bases.Base": "symkit.nn.powernet.bases.DenseBase",
    "symkit.nn.powernet.net._Head": "symkit.nn.powernet.net.PowerNet",
    "symkit.nn.powernet.net._ConvBlock": "symkit.nn.powernet.net.ConvNet",
    "symkit.nn.relaxed.layers._Path": "symkit.nn.relaxed.layers.EquivConv2d",
    "symkit.pacbayes.projectors.Projector": "symkit.pacbayes.projectors.DenseProjector",
    "symkit.nn.groupconv._P4Conv": "symkit.nn.groupconv.P4Conv2d",
    "symkit.pacbayes.pipeline._Quantized": "symkit.pacbayes.subspace.SubspaceModel",  # tests/pacbayes/test_pipeline
    "symkit.pacbayes.pipeline._Masked": "symkit.pacbayes.subspace.SubspaceModel",
}

#: subclasses of stable-baselines3's SAC policy and its parts: stable-baselines3 builds them (no factory keywords) and
#: moves the whole policy to its device; tests/rl trains them
BUILT_BY_STABLE_BASELINES3 = {"symkit.rl.sac.PresetFeatures", "symkit.rl.sac.SymmetricActor",
                              "symkit.rl.sac.SymmetricCritic", "symkit.rl.sac.SymmetricSACPolicy",
                              "symkit.rl.sac._QNet", "symkit.rl.sac._Select"}

#: modules without parameters or buffers of their own take no factory keywords (PyTorch's pooling layers do not)
NO_FACTORY = {"symkit.nn.vision.GlobalAvgPool", "symkit.measure.zoo.BlurPool2d", "symkit.nn.vision.TokenMean",
              "symkit.nn.vision.ClassToken",
              "symkit.nn.relaxed.container.RelaxedLayer", "symkit.rl.sac._SoftplusLogStd"}


def _all_module_classes() -> set[str]:
    names = set()
    for info in pkgutil.walk_packages(symkit.__path__, "symkit."):
        if info.name.startswith("symkit.lab.cli"):
            continue
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if inspect.isclass(obj) and issubclass(obj, nn.Module) and obj.__module__ == info.name:
                names.add(f"{obj.__module__}.{obj.__qualname__}")
    return names


def test_every_module_class_has_an_example():
    found = _all_module_classes()
    missing = found - set(EXAMPLES) - set(COVERED_BY) - BUILT_BY_STABLE_BASELINES3
    assert not missing, f"modules without an example in {__name__}: {sorted(missing)}"
    assert not set(EXAMPLES) - found, f"examples of modules that no longer exist: {sorted(set(EXAMPLES) - found)}"


def _factory(name, **f):
    return {} if name in NO_FACTORY else f


def _run(module, make_input, **f):
    x = make_input(**f)
    out = module() if x is None else module(x)
    if isinstance(out, (tuple, list)):
        out = out[0]
    loss = out.float().sum() if out.is_floating_point() else out.sum()
    params = [p for p in module.parameters() if p.requires_grad]
    if params and loss.requires_grad:
        loss.backward()
    return out, params


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_follows_the_default_dtype(name, float64_default):
    build, make_input = EXAMPLES[name]
    module = build()
    floats = [t for t in [*module.parameters(), *module.buffers()] if t.is_floating_point()]
    assert all(t.dtype == torch.float64 for t in floats), [t.dtype for t in floats]
    out, params = _run(module, make_input, dtype=torch.float64)
    if out.is_floating_point():
        assert out.dtype == torch.float64
    assert all(p.grad is None or p.grad.dtype == torch.float64 for p in params)


@pytest.mark.parametrize("name", sorted(set(EXAMPLES) - NO_FACTORY))
def test_takes_an_explicit_dtype(name, float64_default):
    build, make_input = EXAMPLES[name]
    module = build(dtype=torch.float32)
    floats = [t for t in [*module.parameters(), *module.buffers()] if t.is_floating_point()]
    assert all(t.dtype == torch.float32 for t in floats), [t.dtype for t in floats]
    out, _ = _run(module, make_input, dtype=torch.float32)
    if out.is_floating_point():
        assert out.dtype == torch.float32


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_builds_and_runs_forward_and_backward_on_meta(name):
    build, make_input = EXAMPLES[name]
    module = build(**_factory(name, device="meta"))
    if name in NO_FACTORY:
        module = module.to("meta")
    tensors = [*module.parameters(), *module.buffers()]
    assert all(t.device.type == "meta" for t in tensors), [(t.shape, t.device) for t in tensors]
    out, params = _run(module, make_input, device="meta")
    assert out.device.type == "meta"
    assert all(p.grad is None or p.grad.device.type == "meta" for p in params)


@pytest.fixture
def float64_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def _floats(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items() if v.is_floating_point()}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_reset_parameters_draws_the_construction_values_again(name):
    """Every module with parameters has reset_parameters(): under the same RNG state it gives back the values of
    construction, in place (the same Parameter objects), after they were changed; it also runs on meta."""
    build, _ = EXAMPLES[name]
    torch.manual_seed(5)
    module = build()
    params = list(module.parameters())
    if not params:
        return
    assert hasattr(module, "reset_parameters"), f"{name} has parameters but no reset_parameters()"
    built = _floats(module)
    with torch.no_grad():
        for p in params:
            p.add_(1.0)
    torch.manual_seed(5)
    module.reset_parameters()
    assert [id(p) for p in module.parameters()] == [id(p) for p in params]
    again = _floats(module)
    assert built.keys() == again.keys()
    for key in built:
        torch.testing.assert_close(again[key], built[key], rtol=0, atol=0, msg=f"{name}: {key}")
    meta = build(**_factory(name, device="meta"))
    if name in NO_FACTORY:
        meta = meta.to("meta")
    meta.reset_parameters()
    assert all(p.device.type == "meta" for p in meta.parameters())
