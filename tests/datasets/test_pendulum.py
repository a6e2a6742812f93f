"""The double spring pendulum's data (thesis Sec. 2.7.2, A.1.10) and its windy variant (Sec. 3.5.1). The generic
task tests (tests/datasets/test_tasks.py) check the flow's O(2) equivariance and the windy flow's lack of it."""

from __future__ import annotations

import pytest
import torch

from symkit.datasets import pendulum as P
from symkit.datasets.tasks import task


def _z0(n=8, seed=0):
    return P.sample_initial_conditions(n, torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def trajectories():
    z0 = _z0()
    times = P.trajectory_times()  # 30 s every 0.2 s
    return {(wind, spring): P.integrate(z0, times, wind=wind, spring=spring)
            for wind in (False, True) for spring in P.SPRING_FORMS}


@pytest.mark.parametrize("spring", P.SPRING_FORMS)
@pytest.mark.parametrize("wind", [False, True])
def test_the_data_integrator_conserves_the_energy_over_30_seconds(trajectories, wind, spring):
    z = trajectories[(wind, spring)]
    assert z.shape == (8, 150, 12) and z.dtype == torch.float64
    H = P.hamiltonian(z, wind=wind, spring=spring)
    drift = ((H - H[:, :1]).abs() / H[:, :1].abs()).max()
    assert drift < 1e-6, float(drift)
    # the energy of the other spring form is not conserved: the option changes the dynamics
    other = P.hamiltonian(z, wind=wind, spring="thesis" if spring == "code" else "code")
    assert ((other - other[:, :1]).abs() / other[:, :1].abs()).max() > 1e-3


def test_rotations_about_z_conserve_the_angular_momentum_and_the_wind_does_not(trajectories):
    still, windy = (P.angular_momentum_z(trajectories[(w, "code")]) for w in (False, True))
    spread = float(still.std())
    assert float((still - still[:, :1]).abs().max()) < 1e-7 * spread
    assert float((windy - windy[:, :1]).abs().max()) > 0.1 * spread


@pytest.mark.parametrize("spring", P.SPRING_FORMS)
@pytest.mark.parametrize("wind", [False, True])
def test_the_closed_form_field_is_J_grad_H(wind, spring):
    z = _z0(5, seed=3).requires_grad_(True)
    (grad,) = torch.autograd.grad(P.hamiltonian(z, wind=wind, spring=spring).sum(), z)
    expected = torch.cat([grad[:, 6:], -grad[:, :6]], dim=1)
    torch.testing.assert_close(P.vector_field(z, wind=wind, spring=spring), expected, rtol=1e-12, atol=1e-12)


def test_the_two_spring_forms_differ_by_half_the_second_spring():
    z = _z0(5)
    stretch = (z[:, 0:3] - z[:, 3:6]).norm(dim=1) - 1.0
    torch.testing.assert_close(P.hamiltonian(z) - P.hamiltonian(z, spring="thesis"), 0.5 * stretch**2)


def test_chunks_are_seeded_pieces_of_true_trajectories():
    a = P.pendulum_chunks(6, seed=4, duration=10.0)
    assert a.z0.shape == (6, 12) and a.z.shape == (6, 5, 12) and len(a) == 6
    torch.testing.assert_close(a.times, torch.tensor([0.0, 0.2, 0.4, 0.6, 0.8], dtype=torch.float64))
    assert torch.equal(a.z[:, 0], a.z0)
    # chunks start on whole seconds of the 30 s trajectory, and continue it: integrating from the start agrees
    assert torch.equal(a.start_times, a.start_times.round()) and bool((a.start_times <= 9).all())
    torch.testing.assert_close(P.integrate(a.z0, a.times), a.z, rtol=0, atol=1e-7)
    b, c = P.pendulum_chunks(6, seed=4, duration=10.0), P.pendulum_chunks(6, seed=5, duration=10.0)
    assert torch.equal(a.z, b.z) and not torch.equal(a.z0, c.z0)


def test_the_data_set_splits_and_the_long_test_trajectories():
    data = P.pendulum_data(4, 3, 2, seed=1, duration=10.0)
    assert (len(data.train), len(data.val), len(data.test)) == (4, 3, 2)
    whole = P.pendulum_chunks(9, seed=1, duration=10.0)
    assert torch.equal(data.test.z, whole.z[7:])
    times, z = P.long_trajectories(data.test.z0, duration=3.0)
    assert times.shape == (15,) and z.shape == (2, 15, 12)
    torch.testing.assert_close(z[:, :5], data.test.z, rtol=0, atol=1e-7)


def test_the_initial_conditions_of_the_thesis():
    z0 = _z0(20000)
    torch.testing.assert_close(z0.mean(0), torch.tensor([0, 0, -1.5, 0, 0, -3.0] + [0.0] * 6, dtype=torch.float64),
                               rtol=0, atol=0.02)
    torch.testing.assert_close(z0.std(0), torch.tensor([0.2] * 6 + [0.4] * 6, dtype=torch.float64), rtol=0.03, atol=0)


def test_the_tasks_declare_four_vectors_to_sixteen():
    t = task("pendulum")
    assert t.exact and not task("windy-pendulum").exact
    assert (t.rep_in.size, t.rep_out.size) == (12, 48)
    x, y = t.generate(3, seed=0)
    torch.testing.assert_close(y.reshape(3, 4, 12), P.integrate(x, torch.arange(5, dtype=x.dtype) * 0.2)[:, 1:])


def test_argument_errors_name_what_was_wrong():
    with pytest.raises(ValueError, match="spring must be one of"):
        P.hamiltonian(_z0(), spring="textbook")
    with pytest.raises(ValueError, match=r"\(\.\.\., 12\)"):
        P.vector_field(torch.zeros(3, 6))
    with pytest.raises(TypeError, match="torch.Tensor"):
        P.integrate([0.0] * 12, torch.zeros(2))
    with pytest.raises(ValueError, match="times must be a 1-D tensor"):
        P.integrate(_z0(), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="dt must be a finite number > 0, got 0.0"):
        P.trajectory_times(30.0, 0.0)
    with pytest.raises(ValueError, match=r"duration \(at least dt = 0.2\) must be a finite number >= 0.2"):
        P.trajectory_times(0.1, 0.2)
    with pytest.raises(TypeError, match="dt must be a number > 0, got str"):
        P.trajectory_times(30.0, "0.2")
    with pytest.raises(ValueError, match="fewer than chunk_len"):
        P.pendulum_chunks(2, chunk_len=200)
