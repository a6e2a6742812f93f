"""Hamiltonian networks, Neural ODEs, rollouts and the rollout error (symkit.nn.ode, thesis Sec. 2.7.2)."""

from __future__ import annotations

import math

import pytest
import torch

from symkit.datasets.pendulum import angular_momentum_z, hamiltonian, integrate, sample_initial_conditions
from symkit.groups import O2eR3, SO2eR3
from symkit.nn import EMLP, MLP, HamiltonianNet, NeuralODE, rollout, rollout_error
from symkit.reps import Scalar, V


def _states(n=6, seed=0):
    return sample_initial_conditions(n, torch.Generator().manual_seed(seed))


def test_the_field_of_the_true_hamiltonian_reproduces_the_data_trajectories():
    """J grad H by autograd, integrated by rollout, against the closed-form field the data integrator uses: a wrong
    sign or block order in J, or a wrong gradient, moves the states by O(1) within seconds."""
    z0 = _states()
    times = torch.linspace(0, 5, 26, dtype=torch.float64)
    truth = integrate(z0, times)
    field = HamiltonianNet(lambda z: hamiltonian(z))
    with torch.no_grad():
        pred = rollout(field, z0, times, rtol=1e-10, atol=1e-10)
    assert pred.shape == truth.shape == (6, 26, 12)
    assert (pred - truth).abs().max() < 1e-7
    assert (truth[:, -1] - truth[:, 0]).abs().max() > 0.5  # the states do move


def test_J_on_a_harmonic_oscillator():
    """H = (q^2 + p^2) / 2: dq/dt = p, dp/dt = -q, and the rollout is a rotation of the phase plane."""
    field = HamiltonianNet(lambda z: 0.5 * z.square().sum(-1))
    z = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    assert torch.equal(field(z), torch.tensor([[3.0, 4.0, -1.0, -2.0]], dtype=torch.float64))
    times = torch.tensor([0.0, math.pi / 2], dtype=torch.float64)
    end = rollout(field, torch.tensor([1.0, 0.0], dtype=torch.float64), times, rtol=1e-10, atol=1e-10)[-1]
    assert torch.allclose(end, torch.tensor([0.0, -1.0], dtype=torch.float64), atol=1e-8)


def test_an_emlp_hnn_has_an_o2_equivariant_vector_field_and_an_mlp_hnn_declares_none():
    G = O2eR3()
    torch.manual_seed(0)
    field = HamiltonianNet(EMLP(4 * V(G), Scalar, G, ch=32, num_layers=2, dtype=torch.float64))
    assert field.check_equivariance() < 1e-13
    node = NeuralODE(EMLP(4 * V(G), 4 * V(G), G, ch=32, num_layers=1, dtype=torch.float64))
    assert node.check_equivariance() < 1e-13
    with pytest.raises(TypeError, match="declares no symmetry"):
        HamiltonianNet(MLP(12, 1, ch=8, num_layers=1)).check_equivariance()


def test_a_rotation_invariant_hamiltonian_conserves_angular_momentum_and_a_generic_one_does_not():
    """Noether: an SO(2)-invariant H (about z) conserves L_z along its flow; an MLP's H does not."""
    torch.manual_seed(1)
    G = SO2eR3()
    fields = {"emlp": HamiltonianNet(EMLP(4 * V(G), Scalar, G, ch=24, num_layers=2, dtype=torch.float64), 2.0),
              "mlp": HamiltonianNet(MLP(12, 1, ch=24, num_layers=2, dtype=torch.float64), 2.0)}
    z0 = _states(4)
    times = torch.linspace(0, 1, 6, dtype=torch.float64)
    drift = {}
    for name, field in fields.items():
        with torch.no_grad():
            lz = angular_momentum_z(rollout(field, z0, times, rtol=1e-9, atol=1e-9))
        drift[name] = float((lz - lz[:, :1]).abs().max())
    assert drift["emlp"] < 1e-6 and drift["mlp"] > 1e-3, drift


def test_training_through_a_rollout_reaches_the_parameters_through_the_gradient_of_H():
    """The loss on a rollout depends on the parameters only through grad H, so create_graph must be on (without it
    no parameter would get a gradient). The output bias shifts H by a constant and moves nothing: no gradient."""
    torch.manual_seed(0)
    field = HamiltonianNet(MLP(12, 1, ch=8, num_layers=1, dtype=torch.float64))
    z0 = _states(3)
    pred = rollout(field, z0, torch.tensor([0.0, 0.1, 0.2], dtype=torch.float64), method="rk4")
    pred.square().mean().backward()
    *weights, out_bias = field.parameters()
    assert all(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in weights)
    assert out_bias.grad is None
    with torch.no_grad():  # evaluation: the field is computed all the same, without a graph
        out = field(z0)
    assert not out.requires_grad and out.shape == z0.shape


def test_the_input_scale_divides_the_state():
    field = HamiltonianNet(lambda z: 0.5 * z.square().sum(-1), input_scale=2.0)
    z = torch.tensor([[2.0, 4.0]], dtype=torch.float64)
    # H = |z / 2|^2 / 2, so grad H = z / 4 and J grad H = (p / 4, -q / 4)
    assert torch.equal(field(z), torch.tensor([[1.0, -0.5]], dtype=torch.float64))
    node = NeuralODE(torch.nn.Identity(), input_scale=torch.tensor([1.0, 4.0]))
    assert torch.equal(node(torch.tensor([[2.0, 4.0]])), torch.tensor([[2.0, 1.0]]))
    with pytest.raises(ValueError, match="> 0"):
        HamiltonianNet(lambda z: z.sum(-1), input_scale=torch.tensor([1.0, 0.0]))


def test_fixed_step_rk4_and_dopri5_agree_on_a_smooth_field():
    z0 = _states(4)
    times = torch.linspace(0, 0.8, 5, dtype=torch.float64)
    truth = integrate(z0, times)
    field = HamiltonianNet(lambda z: hamiltonian(z))
    with torch.no_grad():
        rk4 = rollout(field, z0, times, method="rk4")
        fine = rollout(field, z0, times, method="rk4", step_size=0.05)
    # RK4 is fourth order: a quarter of the step gives about 256 times less error
    coarse_err, fine_err = float((rk4 - truth).abs().max()), float((fine - truth).abs().max())
    assert coarse_err < 1e-3 and fine_err < coarse_err / 50, (coarse_err, fine_err)


def test_rollout_error_on_hand_values():
    true = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [2.0, 0.0]]])
    pred = torch.tensor([[[1.0, 0.0], [0.0, 0.0], [1.0, 0.0]]])
    # per time: 0 (clamped to 1e-7), |1| / (0 + 1) = 1, |1| / (1 + 2) = 1/3
    expected = (1e-7 * 1.0 * (1 / 3)) ** (1 / 3)
    assert rollout_error(pred, true).shape == (1,)
    assert math.isclose(float(rollout_error(pred, true)), expected, rel_tol=1e-5)
    # a looser clamp raises only the exact time's term
    assert math.isclose(float(rollout_error(pred, true, clamp=1e-2)), (1e-2 / 3) ** (1 / 3), rel_tol=1e-5)
    # two zero states count as an exact match (not 0 / 0)
    zero = torch.zeros(2, 4, 3)
    assert torch.allclose(rollout_error(zero, zero), torch.full((2,), 1e-7))
    # the geometric mean, not the arithmetic one: errors 1e-4 and 1e-2 give 1e-3
    a = torch.tensor([[[1.0], [1.0]]], dtype=torch.float64)
    b = torch.tensor([[[1.0 - 2e-4 / (1 + 1e-4)], [1.0 - 2e-2 / (1 + 1e-2)]]], dtype=torch.float64)
    assert math.isclose(float(rollout_error(b, a)), 1e-3, rel_tol=1e-9)


def test_argument_errors_name_what_was_wrong():
    with pytest.raises(TypeError, match="h must be a callable"):
        HamiltonianNet(3)
    with pytest.raises(TypeError, match="f must be a callable"):
        NeuralODE("f")
    with pytest.raises(ValueError, match="even number of entries"):
        HamiltonianNet(lambda z: z.sum(-1))(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="one energy per state"):
        HamiltonianNet(lambda z: z)(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="same shape"):
        NeuralODE(lambda z: z[..., :1])(torch.zeros(2, 4))
    z0, times = torch.zeros(2, 4), torch.tensor([0.0, 0.1])
    with pytest.raises(ValueError, match="method must be one of"):
        rollout(lambda z: z, z0, times, method="leapfrog")
    with pytest.raises(ValueError, match="step_size is for the fixed-grid methods"):
        rollout(lambda z: z, z0, times, step_size=0.1)
    with pytest.raises(ValueError, match="rtol must be"):
        rollout(lambda z: z, z0, times, rtol=0.0)
    with pytest.raises(ValueError, match="times must be a 1-D tensor"):
        rollout(lambda z: z, z0, torch.zeros(2, 2))
    with pytest.raises(ValueError, match="same shape"):
        rollout_error(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="clamp"):
        rollout_error(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), clamp=0.0)


def test_a_diverging_rollout_is_a_clear_error_and_rollout_or_nan_keeps_the_other_trajectories():
    """dz/dt = z^2 from z0 = 1 blows up at t = 1: dopri5's step underflows there. The batch shares its steps, so
    rollout() stops with RolloutDiverged; rollout_or_nan solves the rest one by one and returns NaN for it."""
    from symkit.nn.ode import RolloutDiverged, rollout_or_nan

    def field(z):
        return z.square()

    z0 = torch.tensor([[1.0], [0.1], [-0.5]], dtype=torch.float64)
    times = torch.linspace(0, 2, 5, dtype=torch.float64)
    with pytest.raises(RolloutDiverged, match="step size underflowed before t = 2"):
        rollout(field, z0, times)
    out = rollout_or_nan(field, z0, times)
    assert out.shape == (3, 5, 1) and bool(out[0].isnan().all())
    exact = z0[1:, None, :] / (1 - z0[1:, None, :] * times[None, :, None])  # z(t) = z0 / (1 - z0 t)
    assert torch.allclose(out[1:], exact, rtol=1e-3)
