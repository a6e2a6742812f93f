"""Lie derivatives and sampled errors between matrix-group representations (notes §6 item 8)."""

import numpy as np
import pytest
import torch
from torch import nn

from symkit.groups import SO, S
from symkit.measure import (
    generator_lie_derivatives,
    linear_lie_derivative,
    rep_lie_derivative,
    sampled_equivariance_error,
)
from symkit.reps import Scalar, V

D = torch.float64


def linear(W):
    m = nn.Linear(W.shape[1], W.shape[0], bias=False).double()
    m.weight.data = torch.as_tensor(W, dtype=D)
    return m


def x_for(size, seed=0):
    return torch.randn(5, size, generator=torch.Generator().manual_seed(seed), dtype=D)


def test_linear_map_lie_derivative_closed_form():
    G = SO(3)
    rep_in, rep_out = V(G) + Scalar, V(G) ** 2
    W = np.random.default_rng(0).standard_normal((rep_out.size, rep_in.size))
    x = x_for(rep_in.size)
    for A in G.lie_algebra:
        expected = x @ torch.as_tensor(linear_lie_derivative(W, rep_in, rep_out, A)).T
        got = rep_lie_derivative(linear(W), x, A, rep_in, rep_out)
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
        assert expected.abs().max() > 1e-3


def test_so2_examples_from_the_notes():
    G = SO(2)
    A = np.asarray(G.lie_algebra[0])
    J = np.array([[0.0, -1.0], [1.0, 0.0]])
    sign = float(np.sign((A * J).sum()))  # the core may use J or -J as the basis element
    assert np.allclose(A, sign * J)
    r = V(G)
    assert np.abs(linear_lie_derivative(2.0 * np.eye(2) + 3.0 * J, r, r, A)).max() < 1e-15
    # W = diag(1, 2): [W, J] = [[0, 1], [1, 0]] (for A = J)
    torch.testing.assert_close(
        torch.as_tensor(linear_lie_derivative(np.diag([1.0, 2.0]), r, r, A)),
        torch.as_tensor(sign * np.array([[0.0, 1.0], [1.0, 0.0]])),
    )


def test_zero_iff_intertwiner_and_linear_in_generator():
    G = SO(3)
    r = V(G)
    x = x_for(3)
    rot_invariant = linear(2.5 * np.eye(3))
    L = generator_lie_derivatives(rot_invariant, x, r, r)
    assert L.shape == (3, 5, 3) and L.abs().max() < 1e-14
    W = np.random.default_rng(1).standard_normal((3, 3))
    A0, A1 = G.lie_algebra[0], G.lie_algebra[1]
    combo = rep_lie_derivative(linear(W), x, 0.3 * A0 - 2.0 * A1, r, r)
    parts = 0.3 * rep_lie_derivative(linear(W), x, A0, r, r) - 2.0 * rep_lie_derivative(linear(W), x, A1, r, r)
    torch.testing.assert_close(combo, parts, rtol=1e-12, atol=1e-12)


class Norms(nn.Module):
    """|x|^2 of a 3-vector: SO(3)-invariant and nonlinear; declares its reps."""

    def __init__(self, G):
        super().__init__()
        self.rep_in, self.rep_out = V(G), Scalar

    def forward(self, x):
        return x.pow(2).sum(1, keepdim=True)


class Skewed(Norms):
    def forward(self, x):
        return (x * torch.tensor([1.0, 2.0, 3.0], dtype=x.dtype)).pow(2).sum(1, keepdim=True)


def test_audit_of_declared_models():
    G = SO(3)
    good = sampled_equivariance_error(Norms(G), batch=6)
    assert good.max_error < 1e-12 and good.max_lie < 1e-24 and len(good.lie_lee) == 3
    bad = sampled_equivariance_error(Skewed(G), batch=6)
    assert bad.max_error > 1e-2 and bad.max_lie > 1e-2
    assert all(0 <= r <= 1 for r in bad.relative_errors)


def test_finite_group_uses_discrete_generators():
    G = S(4)
    r = V(G)
    perm_equivariant = linear(np.eye(4) + 0.5 * np.ones((4, 4)))
    rep = sampled_equivariance_error(perm_equivariant, x_for(4), r, r)
    assert rep.lie_lee == [] and len(rep.discrete_errors) == 2 and rep.max_error < 1e-12
    broken = sampled_equivariance_error(linear(np.diag([1.0, 2.0, 3.0, 4.0])), x_for(4), r, r)
    assert max(broken.discrete_errors) > 1e-2


def test_weight_matrix_goes_to_the_core():
    G = SO(3)
    r = V(G)
    rep = sampled_equivariance_error(np.eye(3), rep_in=r, rep_out=r)
    assert rep.extra["matrix_error"] < 1e-12 and rep.max_lie < 1e-28
    rep = sampled_equivariance_error(np.diag([1.0, 2.0, 3.0]), rep_in=r, rep_out=r)
    assert rep.extra["matrix_error"] > 1e-2 and rep.max_lie > 1e-2


def test_errors_name_the_problem():
    G = SO(3)
    with pytest.raises(TypeError, match="rep_in must be a symkit Rep"):
        sampled_equivariance_error(nn.Linear(3, 3))
    with pytest.raises(ValueError, match=r"\(B, 3\)"):
        rep_lie_derivative(linear(np.eye(3)), torch.zeros(2, 4, dtype=D), G.lie_algebra[0], V(G), V(G))
    with pytest.raises(ValueError, match="expected \\(B, 1\\)"):
        sampled_equivariance_error(linear(np.eye(3)), x_for(3), V(G), Scalar)
