"""Every layer family built for a symmetry has ``check_equivariance()``: it passes on layers that are equivariant by
construction (float32 and float64), fails on a 0.1% non-equivariant part, and a layer built to break the symmetry
says so instead of passing."""

from __future__ import annotations

import pytest
import torch

from symkit.actions import CyclicTranslations2D, Rotations90
from symkit.actions.partition import circulant_partition, deepsets_partition, identity_partition
from symkit.dynamics import LayerSpec, ProjectNet
from symkit.groups import SO, S
from symkit.nn import EMLP, EquivariantLinear
from symkit.nn._equivariance import parameter_like
from symkit.nn.emlp import BiLinear, EMLPBlock, GatedNonlinearity, gated
from symkit.nn.groupconv import P4CNN, P4BatchNorm2d, P4Conv2d, P4LiftConv2d
from symkit.nn.powernet import PowerLayer
from symkit.nn.powernet.bases import GridShift, Rot90
from symkit.nn.relaxed import RelaxedLayer
from symkit.nn.relaxed.layers import EquivConv2d, SpatialFC2d
from symkit.nn.rpp import RPPEMLP, RPPLinear
from symkit.nn.sharing import HardSharedLinear
from symkit.reps import Scalar, V


def _emlp_family(dtype):
    G = SO(3)
    f = {"dtype": dtype}
    return [
        EMLP(2 * V(G), V(G), G, ch=24, num_layers=1, **f),
        EMLPBlock(V(G) + Scalar, V(G) ** 2, **f),
        EquivariantLinear(V(G), V(G) ** 2, **f),
        BiLinear(gated(V(G) ** 2), **f),
        GatedNonlinearity(V(G) + V(G) ** 2, **f),
        EquivariantLinear(V(S(5)), V(S(5)), **f),
    ]


def _grid_family(dtype):
    torch.manual_seed(0)
    conv = EquivConv2d(2, 3, 6, dtype=dtype)
    layer = RelaxedLayer({"conv": EquivConv2d(2, 3, 6, dtype=dtype), "fc": SpatialFC2d(2, 3, 6, dtype=dtype)})
    layer.zero_path("fc")
    power = PowerLayer([GridShift((5, 5), 0), GridShift((5, 5), 1)], 2, 3, 3, activation=torch.nn.Tanh(),
                       dtype=dtype)
    rot = Rotations90(4)
    net = ProjectNet([LayerSpec(rot, rot, 1, 3), LayerSpec(rot, rot.trivial(), 3, 2)], dtype=dtype)
    shared = HardSharedLinear(circulant_partition(5), 5, 5, dtype=dtype)  # the sharing of a circular convolution
    return [conv, layer, power, net, shared]


def _p4_family(dtype):
    torch.manual_seed(0)
    norm = P4BatchNorm2d(3, dtype=dtype)
    with torch.no_grad():  # running statistics and affine parameters that differ per filter
        norm.running_mean.uniform_(-1, 1)
        norm.running_var.uniform_(0.5, 2)
        norm.weight.uniform_(0.5, 2)
        norm.bias.uniform_(-1, 1)
    return [P4LiftConv2d(2, 3, dtype=dtype), P4Conv2d(3, 2, 5, dtype=dtype), norm,
            P4CNN(1, 4, width=2, stages=2, dtype=dtype)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layers_equivariant_by_construction_pass(dtype):
    for layer in _emlp_family(dtype) + _grid_family(dtype) + _p4_family(dtype):
        err = layer.check_equivariance()
        computes_in = parameter_like(layer)[1]  # a layer without parameters computes in the default dtype
        assert computes_in == dtype or not any(p.is_floating_point() for p in layer.parameters())
        assert err <= 64 * torch.finfo(computes_in).eps, type(layer).__name__  # k(g) of SO(3) and S(5) is 1


def _add_a_non_equivariant_part(layer, size=1e-3):
    """A forward hook adding ``P <Q, x>`` (fixed random P over the output, Q over the input), scaled to ``size``
    of the output's RMS: a deterministic function that commutes with no non-trivial group element."""
    gen = torch.Generator().manual_seed(3)

    def hook(module, inputs, out):
        x = inputs[0]
        Q = torch.randn(x.shape[1:], generator=gen, dtype=torch.float64).to(x)
        P = torch.randn(out.shape[1:], generator=gen, dtype=torch.float64).to(out)
        gen.manual_seed(3)  # the same P and Q on every call
        term = P * (x * Q).flatten(1).sum(1).reshape(-1, *[1] * (out.ndim - 1))
        return out + size * out.pow(2).mean().sqrt() / term.pow(2).mean().sqrt() * term

    layer.register_forward_hook(hook)


def test_assert_equivariant_reads_the_declaration_check_equivariance_reads():
    """One protocol: ``assert_equivariant(layer)`` without reps checks what ``layer.declared_symmetry()`` says, for
    layers whose symmetry is derived (sharing pattern, PowerNet bases, relaxed paths) as for attribute ones."""
    from symkit.testing import assert_equivariant

    for layer in _emlp_family(torch.float64) + _grid_family(torch.float64):
        inputs = layer.example_input(generator=torch.Generator().manual_seed(0)) if hasattr(
            layer.declared_symmetry()[0], "act") else None
        assert assert_equivariant(layer, inputs=inputs) == layer.check_equivariance(inputs), type(layer).__name__
    with pytest.raises(TypeError, match="square layer without bias"):  # the layer's own reason, not "declares none"
        assert_equivariant(HardSharedLinear(circulant_partition(3), 3, 3, bias=True), inputs=torch.randn(2, 3))
    with pytest.raises(TypeError, match="rep_out given without rep_in"):
        assert_equivariant(torch.nn.Identity(), None, V(SO(3)))
    with pytest.raises(TypeError, match="declares no symmetry"):
        assert_equivariant(torch.nn.Identity())


def test_a_small_non_equivariant_part_fails_in_every_family():
    for layer in _emlp_family(torch.float32) + _grid_family(torch.float32) + _p4_family(torch.float32):
        assert layer.check_equivariance() < 1e-5
        _add_a_non_equivariant_part(layer)
        with pytest.raises(AssertionError, match="not equivariant"):
            layer.check_equivariance()


def test_soft_layers_measure_their_departure_and_pass_once_the_free_paths_are_zero():
    G = SO(3)
    rpp = RPPEMLP(V(G), V(G), G, ch=24, num_layers=1, dtype=torch.float64)
    with pytest.raises(AssertionError, match="relative error"):
        rpp.check_equivariance()
    with torch.no_grad():
        for m in rpp.modules():
            if isinstance(m, RPPLinear):
                m.basic.weight.zero_()
                m.basic.bias.zero_()
        for name, p in rpp.named_parameters():
            if name.endswith("nonlinearity.basic"):
                p.zero_()
    assert rpp.check_equivariance() < 1e-12
    layer = RelaxedLayer({"conv": EquivConv2d(1, 2, 6), "fc": SpatialFC2d(1, 2, 6)})
    with pytest.raises(AssertionError):
        layer.check_equivariance()
    layer.zero_path("fc")
    assert layer.check_equivariance() < 1e-6


def test_layers_built_to_break_a_symmetry_declare_none():
    with pytest.raises(TypeError, match="not built to commute"):
        SpatialFC2d(1, 2, 6).check_equivariance()
    with pytest.raises(TypeError, match="not built to commute"):
        EquivConv2d(1, 2, 6, stride=2).check_equivariance()
    with pytest.raises(TypeError, match="none of its paths"):
        RelaxedLayer({"fc": SpatialFC2d(1, 2, 6)}).check_equivariance()
    with pytest.raises(TypeError, match="do not commute"):
        PowerLayer([GridShift((4, 4), 0), Rot90(4)], 1, 1, 3).check_equivariance()
    with pytest.raises(TypeError, match="square layer without bias"):
        HardSharedLinear(circulant_partition(3), 3, 3, bias=True).check_equivariance()
    with pytest.raises(TypeError, match="no permutation but the identity"):
        HardSharedLinear(identity_partition(9), 3, 3).check_equivariance()
    with pytest.raises(TypeError, match="full"):
        PowerLayer([GridShift((4, 4), 0)], 1, 1, 3, bias="full").check_equivariance()


def test_the_declared_action_is_the_one_checked():
    conv = EquivConv2d(1, 1, 6, dtype=torch.float64)
    action_in, action_out = conv.declared_symmetry()
    assert action_in.group_key == CyclicTranslations2D(6).group_key == action_out.group_key
    # the convolution does not commute with quarter turns: checking it against them fails
    from symkit.testing import assert_equivariant

    with pytest.raises(AssertionError):
        assert_equivariant(conv, Rotations90(6), Rotations90(6), inputs=conv.example_input())


def test_a_layer_on_the_meta_device_says_it_computes_no_values():
    for layer in (EquivariantLinear(V(SO(3)), V(SO(3)), device="meta"), EquivConv2d(1, 2, 6, device="meta"),
                  P4Conv2d(2, 3, device="meta"), P4CNN(1, 4, width=2, device="meta")):
        with pytest.raises(ValueError, match="meta"):
            layer.check_equivariance()


def test_a_hardened_sharing_declares_the_group_its_partition_implies():
    """Circulant sharing implies the cyclic shifts Z(5); DeepSets sharing (diagonal / off-diagonal) all of S(4)."""
    cyclic, _ = HardSharedLinear(circulant_partition(5), 5, 5).declared_symmetry()
    sym, _ = HardSharedLinear(deepsets_partition(4), 4, 4).declared_symmetry()
    assert cyclic.order == 5 and sym.order == 24


def test_rep_layers_are_checked_at_the_given_inputs():
    """check_equivariance(inputs=x) on a rep layer calls it at x itself (first) and refuses inputs of another size."""
    G = SO(3)
    layer = EMLP(2 * V(G), V(G), G, ch=16, num_layers=1, dtype=torch.float64)
    seen = []
    layer.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    x = torch.randn(3, 6, dtype=torch.float64)
    assert layer.check_equivariance(x) < 1e-13
    assert torch.equal(seen[0], x)
    with pytest.raises(ValueError, match=r"shape \(3, 99\), expected \(batch, 6\)"):
        layer.check_equivariance(torch.randn(3, 99, dtype=torch.float64))
