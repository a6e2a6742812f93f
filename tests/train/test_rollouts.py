"""symkit.train.train_dynamics: a vector field fitted to trajectory chunks through ODE rollouts; and
symkit.train.evaluate_dynamics: Table 2.2's rollout metrics on the pendulum's test chunks."""

import math

import pytest
import torch
from torch import nn

from symkit.datasets.pendulum import long_trajectories, pendulum_data, vector_field
from symkit.train import evaluate_dynamics, train_dynamics


class Chunks:
    def __init__(self, z0, times, z):
        self.z0, self.times, self.z = z0, times, z


def _rotation_chunks(n: int = 64, steps: int = 5) -> Chunks:
    """Chunks of dz/dt = A z with A a rotation generator: z(t) = expm(t A) z0, exactly."""
    A = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64)
    z0 = torch.randn(n, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    times = torch.linspace(0, 1, steps, dtype=torch.float64)
    z = torch.stack([z0 @ torch.linalg.matrix_exp(t * A).T for t in times], dim=1)
    return Chunks(z0, times, z)


def test_a_linear_field_learns_the_rotation_it_was_shown():
    """From a zero field (the constant prediction, MSE 0.30 here) to within 1e-3 of the generator."""
    chunks = _rotation_chunks()
    field = nn.Linear(2, 2, bias=False, dtype=torch.float64)
    nn.init.zeros_(field.weight)
    constant = float((chunks.z - chunks.z0[:, None]).square().mean())
    result = train_dynamics(field, chunks, epochs=300, lr=3e-2, batch_size=16, method="rk4", seed=0)
    A = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64)
    assert float((field.weight.detach() - A).abs().max()) < 1e-2
    assert result.losses[-1] < constant / 1000 and math.isfinite(result.losses[-1])
    assert result.steps == 300 * 4  # batches of 16 of the 64 chunks


def test_limits_stop_it_and_bad_chunks_are_named():
    chunks = _rotation_chunks(8)
    field = nn.Linear(2, 2, bias=False, dtype=torch.float64)
    before = field.weight.detach().clone()
    train_dynamics(field, chunks, epochs=100, method="rk4", max_epochs=1)
    assert not torch.equal(before, field.weight.detach())  # it trained, one step
    with pytest.raises(TypeError, match="chunks must have z0, times and z"):
        train_dynamics(field, object())
    with pytest.raises(ValueError, match=r"z \(n, T, d\); got z0 \(8, 2\), times \(5,\), z \(8, 4, 2\)"):
        train_dynamics(field, Chunks(chunks.z0, chunks.times, chunks.z[:, :4]))
    with pytest.raises(ValueError, match="no parameters"):
        train_dynamics(nn.Identity(), chunks)


class TruePendulumField(nn.Module):
    """The closed-form ``J grad H`` of the pendulum that made the data (no parameters: evaluated in float64)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return vector_field(z)


class ZeroField(nn.Module):
    """``dz/dt = 0``: its rollouts are the constant prediction ``z(t) = z0``."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(z)


def _constant_error(starts: torch.Tensor, duration: float) -> float:
    """Table 2.2's number for ``z(t) = z0``, written out: the geometric mean over systems and the times 0, 0.2, ...
    of ``|z0 - z(t)| / (|z0| + |z(t)|)``, clamped below at 1e-7."""
    _, truth = long_trajectories(starts, duration)
    a = starts[:, None, :]
    err = ((a - truth).norm(dim=-1) / (a.norm(dim=-1) + truth.norm(dim=-1))).clamp_min(1e-7)
    return float(err.log().mean().exp())


def test_the_true_field_rolls_out_the_test_systems_and_the_zero_field_is_the_constant_predictor():
    """8 test systems, 10 s rollouts (50 times). Measured (seeds 0-2): the true field's rollout error 1.5e-5 to
    2.2e-5 (dopri5 at the evaluation's rtol 1e-4 against the data's tighter solve), test MSE about 1e-10, L_z drift
    5e-4 of its spread; the constant predictor's error 0.16 to 0.20. The zero field's rollouts are ``z0`` up to the
    solver's interpolation (1e-14), so its errors are the constant predictor's to rounding."""
    data = pendulum_data(1, 1, 8, seed=0)
    truth = evaluate_dynamics(TruePendulumField(), data, rollout_time=10.0)
    constant = _constant_error(data.test.z0, 10.0)
    assert truth["constant_rollout_error"] == pytest.approx(constant, rel=1e-12)
    assert 0.1 < constant < 0.3
    assert truth["rollout_error"] < 1e-4 and truth["rollout_error"] < constant / 1000
    assert truth["test_mse"] < 1e-8 and truth["lz_drift"] < 5e-3 and truth["finite_rollouts"] == 1.0

    zero = evaluate_dynamics(ZeroField(), data, rollout_time=10.0)
    assert zero["rollout_error"] == pytest.approx(zero["constant_rollout_error"], rel=1e-12)
    assert zero["rollout_error"] == pytest.approx(constant, rel=1e-12)
    chunk_mse = float((data.test.z - data.test.z0[:, None]).square().mean())
    assert zero["test_mse"] == pytest.approx(chunk_mse, rel=1e-12)
    assert zero["lz_drift"] < 1e-12 and zero["finite_rollouts"] == 1.0
