"""Residual pathway priors: the prior's algebra (eq. 3.1), the penalty, and the exactness limit."""

import math

import pytest
import torch

from symkit.groups import O, S
from symkit.nn.rpp import RPPEMLP, RPPGatedNonlinearity, RPPLinear, equivariant_fraction, rpp_penalty
from symkit.reps import Scalar, V


def test_rpp_linear_is_the_sum_of_its_two_paths():
    G = O(3)
    layer = RPPLinear(V(G) + Scalar, V(G), dtype=torch.float64)
    x = torch.randn(7, 4, dtype=torch.float64)
    expected = x @ (layer.equivariant.weight + layer.basic.weight).T + layer.equivariant.bias + layer.basic.bias
    assert torch.allclose(layer(x), expected)


@pytest.mark.parametrize("rep", [2 * V(O(3)) + 3 * Scalar, V(S(4)) + 2 * Scalar])
def test_rpp_nonlinearity_is_the_gate_plus_a_weighted_swish(rep):
    """``gated(x) + w * swish(v)``, values and gradients, both with gates (O(3) vectors) and without (scalars and a
    permutation rep, which take the one-swish path)."""
    torch.manual_seed(0)
    layer = RPPGatedNonlinearity(rep, dtype=torch.float64)
    assert layer.gated.pointwise == (rep.size == 6)
    with torch.no_grad():
        layer.basic.normal_()
    x = torch.randn(5, layer.gated.gated_size, dtype=torch.float64, requires_grad=True)
    v = x[:, : rep.size]
    gates = torch.sigmoid(x.index_select(1, layer.gated.gate_index))
    expected = v * gates + layer.basic * v * torch.sigmoid(v)
    got = layer(x)
    assert torch.allclose(got, expected, rtol=0, atol=1e-14)
    cotangent = torch.randn_like(got)
    grads = torch.autograd.grad(got, (x, layer.basic), cotangent)
    expected_grads = torch.autograd.grad(expected, (x, layer.basic), cotangent)
    for a, b in zip(grads, expected_grads):
        assert torch.allclose(a, b, rtol=0, atol=1e-13)


def test_rpp_with_zero_flexible_path_is_exactly_equivariant():
    G = O(3)
    torch.manual_seed(0)
    model = RPPEMLP(2 * V(G), V(G), G, ch=24, num_layers=2, dtype=torch.float64)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("basic.weight") or name.endswith("basic.bias") or name.endswith("nonlinearity.basic"):
                p.zero_()
    x = torch.randn(5, 6, dtype=torch.float64)
    for g in G.samples(3, seed=0):
        R_in = torch.as_tensor((2 * V(G)).rho(g))
        R_out = torch.as_tensor(V(G).rho(g))
        assert torch.allclose(model(x @ R_in.T), model(x) @ R_out.T, atol=1e-12)
    assert equivariant_fraction(model) == pytest.approx(1.0)



def test_the_flexible_paths_initial_scale_is_a_setting():
    """``basic_init_scale`` scales every flexible path's initial draw (the same draw: the RNG is used alike), the
    gated residual weights start at it, 0 starts the network exactly equivariant, and a reset keeps it."""
    G = O(3)
    nets = {}
    for scale in (1e-3, 1.0, 0.0):
        torch.manual_seed(0)
        nets[scale] = RPPEMLP(2 * V(G), V(G), G, ch=24, num_layers=2, dtype=torch.float64, basic_init_scale=scale)
    small, large, zero = (dict(nets[s].named_parameters()) for s in (1e-3, 1.0, 0.0))
    flexible = [n for n in small if ".basic." in n or n.endswith("basic")]
    assert len(flexible) == 2 * 2 + 2 + 2  # two blocks' linear (weight, bias) and nonlinearity, the head's linear
    for name in flexible:
        assert torch.allclose(large[name] * 1e-3, small[name], rtol=1e-12, atol=0), name
        assert not zero[name].any(), name
    for name in small:
        if name not in flexible:  # the equivariant paths are drawn as before
            assert torch.equal(small[name], large[name]), name
    for block in nets[1.0].blocks:
        assert torch.equal(block.nonlinearity.basic, torch.ones_like(block.nonlinearity.basic))
    assert equivariant_fraction(nets[0.0]) == 1.0 and equivariant_fraction(nets[1.0]) < 0.9
    x = torch.randn(5, 6, dtype=torch.float64)
    for g in G.samples(2, seed=1):
        R_in, R_out = torch.as_tensor((2 * V(G)).rho(g)), torch.as_tensor(V(G).rho(g))
        assert torch.allclose(nets[0.0](x @ R_in.T), nets[0.0](x) @ R_out.T, atol=1e-12)
    nets[1.0].reset_parameters()
    assert nets[1.0].blocks[0].nonlinearity.basic.eq(1.0).all()
    for bad, error in ((-0.1, ValueError), (float("nan"), ValueError), ("1", TypeError)):
        with pytest.raises(error, match="basic_init_scale"):
            RPPLinear(V(G), V(G), basic_init_scale=bad)
        with pytest.raises(error, match="basic_init_scale"):
            RPPGatedNonlinearity(V(G), basic_init_scale=bad)


@torch.no_grad()
def test_rpp_penalty_is_the_gaussian_negative_log_prior():
    G = O(3)
    layer = RPPLinear(V(G), V(G), dtype=torch.float64)
    beta = torch.cat([p.reshape(-1) for p in layer.equivariant.weight_basis.parameters()])
    # orthonormal Q: the coefficient norm is the Frobenius norm of the equivariant weight
    assert float(beta.norm()) == pytest.approx(float(layer.equivariant.weight.norm()), rel=1e-12)
    sa, sb = math.sqrt(10.0), 0.5
    expected = beta.pow(2).sum() / (2 * sa**2) + layer.basic.weight.pow(2).sum() / (2 * sb**2)
    assert float(rpp_penalty(layer, sa, sb)) == pytest.approx(float(expected), rel=1e-12)


def test_rpp_penalty_rejects_bad_sigmas_and_models_without_rpp_layers():
    G = O(3)
    layer = RPPLinear(V(G), V(G))
    with pytest.raises(ValueError, match="sigma_basic must be a positive number"):
        rpp_penalty(layer, 1.0, 0.0)
    with pytest.raises(ValueError, match="has no RPP layers"):
        rpp_penalty(torch.nn.Linear(3, 3), 1.0, 1.0)


def test_the_fused_rpp_layer_is_the_sum_of_its_two_paths():
    """RPPLinear runs one matmul with A + B; it equals the equivariant path plus the dense one, values and gradients."""
    from symkit.groups import SO
    from symkit.nn.rpp import RPPLinear
    from symkit.reps import Scalar, V

    G = SO(3)
    torch.manual_seed(0)
    layer = RPPLinear(2 * V(G) + Scalar, V(G) ** 2 + V(G), dtype=torch.float64)
    with torch.no_grad():
        layer.basic.weight.normal_()  # a non-trivial free path
        layer.basic.bias.normal_()
    x = torch.randn(5, layer.rep_in.size, dtype=torch.float64)
    fused = layer(x)
    separate = layer.equivariant(x) + layer.basic(x)
    torch.testing.assert_close(fused, separate, rtol=1e-12, atol=1e-12)
    params = [p for p in layer.parameters() if p.requires_grad]
    g1 = torch.autograd.grad(fused.square().sum(), params)
    g2 = torch.autograd.grad(separate.square().sum(), params)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def _paths_by_name(model):
    """The RPP's two penalised paths read off the parameter names: the equivariant coefficients, and the flexible
    weights (dense, a subgroup's coefficients, or the nonlinearities' residual weights); biases in neither."""
    equivariant, basic = [], []
    for name, p in model.named_parameters():
        if p.numel() == 0:  # a block of rank 0 has no coefficients
            continue
        if ".equivariant.weight_basis." in f".{name}":
            equivariant.append(p)
        elif name.endswith(("basic.weight", "nonlinearity.basic")) or ".basic.weight_basis." in name:
            basic.append(p)
    return equivariant, basic


@pytest.mark.parametrize("subgroup", [None, "SO(3)"])
def test_each_prior_width_reaches_its_own_path_of_a_whole_rpp_emlp(subgroup):
    """Over a whole RPP-EMLP (linear layers, gated nonlinearities' residual weights, head; a subgroup's flexible
    path), sigma_a weighs the equivariant coefficients and sigma_b the flexible ones, never the other way round."""
    from symkit.groups import SO

    G = O(3)
    torch.manual_seed(0)
    model = RPPEMLP(2 * V(G), V(G) + Scalar, G, ch=16, num_layers=2, subgroup=None if subgroup is None else SO(3),
                    dtype=torch.float64, basic_init_scale=1.0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("nonlinearity.basic"):
                p.normal_()
    equivariant, basic = _paths_by_name(model)
    a2 = sum(float(p.detach().square().sum()) for p in equivariant)
    b2 = sum(float(p.detach().square().sum()) for p in basic)
    assert a2 > 0.1 and b2 > 0.1
    sa, sb = math.sqrt(10.0), 0.5
    assert float(rpp_penalty(model, sa, sb).detach()) == pytest.approx(a2 / (2 * sa**2) + b2 / (2 * sb**2), rel=1e-12)
    # the gradient of the penalty on each path is theta / sigma^2 of that path
    model.zero_grad()
    rpp_penalty(model, sa, sb).backward()
    for params, s in ((equivariant, sa), (basic, sb)):
        for p in params:
            torch.testing.assert_close(p.grad, p.detach() / s**2)
