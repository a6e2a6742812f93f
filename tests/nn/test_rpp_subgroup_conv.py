"""RPP between a group and a subgroup (Sec. 3.4) and the convolutional RPP (eq. 3.2)."""

from __future__ import annotations

import math

import pytest
import torch

from symkit.groups import SO, O, SO2eR3
from symkit.nn.rpp import RPPEMLP, RPPConv2d, RPPLinear, equivariant_fraction, rpp_penalty
from symkit.reps import Scalar, V
from symkit.testing import assert_equivariant


def _break_to_subgroup(model):
    """Give every flexible (subgroup) path coefficients as large as the equivariant path's."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, RPPLinear):
                for p in m.basic.weight_basis.parameters():
                    p.normal_(0.0, 0.5)


def test_a_subgroup_rpp_is_exactly_equivariant_under_the_subgroup_and_not_under_the_group():
    G, H = O(3), SO2eR3()
    torch.manual_seed(0)
    rep_in, rep_out = 2 * V(G) + Scalar, V(G)
    model = RPPEMLP(rep_in, rep_out, G, ch=24, num_layers=2, subgroup=H, dtype=torch.float64)
    _break_to_subgroup(model)
    x = torch.randn(6, rep_in.size, dtype=torch.float64)
    assert_equivariant(model, rep_in.restrict(H), rep_out.restrict(H), inputs=x)  # exact under H
    with pytest.raises(AssertionError):
        assert_equivariant(model, rep_in, rep_out, inputs=x)  # a reflection or a tilt of z breaks it


def test_a_subgroup_rpp_with_zero_flexible_paths_is_equivariant_under_the_group():
    G = O(3)
    torch.manual_seed(1)
    rep_in, rep_out = 2 * V(G), V(G)
    model = RPPEMLP(rep_in, rep_out, G, ch=24, num_layers=2, subgroup=SO(3), dtype=torch.float64)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, RPPLinear):
                for p in m.basic.parameters():
                    p.zero_()
    assert_equivariant(model, rep_in, rep_out, inputs=torch.randn(5, 6, dtype=torch.float64))
    assert equivariant_fraction(model) == pytest.approx(1.0)


@torch.no_grad()
def test_the_subgroup_path_spans_the_subgroup_maps_and_its_penalty_is_its_frobenius_norm():
    G, H = O(3), SO2eR3()
    layer = RPPLinear(V(G), V(G), subgroup=H, dtype=torch.float64)
    gamma = torch.cat([p.reshape(-1) for p in layer.basic.weight_basis.parameters()])
    assert gamma.numel() == (V(H) >> V(H)).rank() == 3  # a plane rotation-scaling and the z scale
    assert float(gamma.norm()) == pytest.approx(float(layer.basic.weight.norm()), rel=1e-12)
    beta = torch.cat([p.reshape(-1) for p in layer.equivariant.weight_basis.parameters()])
    sa, sb = 3.0, 0.1
    expected = beta.pow(2).sum() / (2 * sa**2) + gamma.pow(2).sum() / (2 * sb**2)
    assert float(rpp_penalty(layer, sa, sb).detach()) == pytest.approx(float(expected.detach()), rel=1e-12)
    # the flexible path starts 1e-3 times smaller than the equivariant one
    assert float(layer.basic.weight.norm()) < 1e-2 * float(layer.equivariant.weight.norm())


def test_a_subgroup_of_another_space_is_refused():
    with pytest.raises(ValueError, match="acts on R\\^2"):
        RPPLinear(V(O(3)), V(O(3)), subgroup=SO(2))
    with pytest.raises(TypeError, match="subgroup must be a symkit Group"):
        RPPLinear(V(O(3)), V(O(3)), subgroup="SO(3)")


def test_the_rpp_convolution_is_a_convolution_plus_a_dense_map_with_their_own_priors():
    torch.manual_seed(0)
    layer = RPPConv2d(2, 3, size=6, dtype=torch.float64)
    conv, fc = layer.paths["conv"], layer.paths["fc"]
    x = torch.randn(4, 2, 6, 6, dtype=torch.float64)
    assert torch.allclose(layer(x), conv(x) + fc(x))
    sa, sb = math.sqrt(1e4), 0.1
    expected = conv.weight.pow(2).sum() / (2 * sa**2) + fc.weight.pow(2).sum() / (2 * sb**2)
    assert float(rpp_penalty(layer, sa, sb).detach()) == pytest.approx(float(expected.detach()), rel=1e-12)
    # the dense path starts small, and once it is zero the layer is exactly translation-equivariant
    assert float(fc.weight.detach().abs().max()) <= 1e-3 / math.sqrt(2 * 36) + 1e-15
    layer.zero_path("fc")
    layer.check_equivariance()
