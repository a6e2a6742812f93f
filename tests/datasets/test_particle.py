"""The e-mu scattering task (thesis A.1.10, symkit.datasets.particle): the formula on a hand-computed input, its
closed form, Lorentz invariance under a large boost and the discrete components, the relation between the
thesis's symmetrised form and the authors' unsymmetrised one, and the argument errors. (tests/datasets/test_tasks.py
checks the reps, seeds and the sampled O(1,3) symmetry of every registered task, this one included.)"""

from __future__ import annotations

import math

import pytest
import torch

from symkit.datasets.particle import minkowski_dot, particle_interaction, particle_target
from symkit.datasets.tasks import task
from symkit.groups import O13

# p = (2, 1, 0, 0), q = (1, 0, 0, 1), p~ = (1, 0, 1, 0), q~ = (3, 1, 0, 1), in the layout (p, q, p~, q~):
# p.p = 3, p.p~ = 2, q.q = 0, q.q~ = 2, p.q = 2, p~.q~ = 3, p.q~ = 5, p~.q = 1.
# Unsymmetrised: 4 [(p.q)(p~.q~) - (q.q~ - q.q)(p.p~) - (p.p~ - p.p)(q.q~) + 4 (p.p~ - p.p)(q.q~ - q.q)]
#              = 4 [6 - 4 + 2 - 8] = -16.
# Symmetrised: -16 + 2 [(p.q~)(p~.q) - (p.q)(p~.q~)] = -16 + 2 (5 - 6) = -18.
HAND_X = [2.0, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 3, 1, 0, 1]


def _boost(rapidity: float, axis: int) -> torch.Tensor:
    b = torch.eye(4, dtype=torch.float64)
    b[0, 0] = b[axis, axis] = math.cosh(rapidity)
    b[0, axis] = b[axis, 0] = math.sinh(rapidity)
    return b


def _apply(m: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The same 4x4 matrix on each of the four 4-vectors of every row."""
    return (x.reshape(-1, 4, 4) @ m.T).reshape(-1, 16)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs() / (a.abs() + b.abs())).max())


def test_a_hand_computed_input_gives_the_hand_computed_values():
    x = torch.tensor([HAND_X], dtype=torch.float64)
    assert particle_target(x).item() == pytest.approx(-16.0, abs=1e-12)
    assert particle_target(x, symmetrize=True).item() == pytest.approx(-18.0, abs=1e-12)
    assert particle_target(x).dtype == torch.float64 and particle_target(x).shape == (1, 1)


def test_the_target_equals_its_closed_form_in_invariants():
    x, y = particle_interaction(200, seed=4)
    p, q, pt, qt = x.reshape(-1, 4, 4).unbind(1)
    d = minkowski_dot
    a, b = d(p, pt) - d(p, p), d(q, qt) - d(q, q)
    closed = 4 * (d(p, q) * d(pt, qt) - b * d(p, pt) - a * d(q, qt) + 4 * a * b)
    assert torch.allclose(y[:, 0], closed, rtol=1e-12, atol=1e-14)


def test_the_momenta_are_off_shell_gaussians_with_standard_deviation_a_quarter():
    x, _ = particle_interaction(20000, seed=0)
    assert x.dtype == torch.float64 and x.shape == (20000, 16)
    assert abs(float(x.std()) - 0.25) < 0.005 and abs(float(x.mean())) < 0.005
    masses = minkowski_dot(x[:, :4], x[:, :4])
    assert float((masses < 0).float().mean()) > 0.5  # mostly space-like: no mass shell


@pytest.mark.parametrize("symmetrize", [False, True])
def test_both_forms_are_invariant_under_a_large_boost_and_the_discrete_lorentz_elements(symmetrize):
    x, _ = particle_interaction(64, seed=1)
    y = particle_target(x, symmetrize=symmetrize)
    boost = _boost(2.5, 1) @ _boost(-1.5, 3)  # gamma ~ 6 and ~ 2.4
    assert float(boost[0, 0]) > 10
    parity = torch.diag(torch.tensor([1.0, -1, -1, -1], dtype=torch.float64))
    time_reversal = torch.diag(torch.tensor([-1.0, 1, 1, 1], dtype=torch.float64))
    # float64 rounding, amplified by the boost (entries ~14) in the target's cancelling sums of products, reaches
    # 2.7e-9 (numpy 2.4); a non-Lorentz map below moves the target by more than 1e-2
    for g in (boost, parity, time_reversal, time_reversal @ boost):
        assert _rel(particle_target(_apply(g, x), symmetrize=symmetrize), y) < 1e-8
    # a Euclidean rotation of the (t, x) plane is not a Lorentz transformation: the target changes
    c, s = math.cos(0.7), math.sin(0.7)
    rot = torch.eye(4, dtype=torch.float64)
    rot[0, 0], rot[0, 1], rot[1, 0], rot[1, 1] = c, -s, s, c
    assert _rel(particle_target(_apply(rot, x), symmetrize=symmetrize), y) > 1e-2


def test_the_symmetrised_form_differs_by_the_exchange_term_and_is_invariant_under_sampled_elements():
    x, y = particle_interaction(128, seed=2)
    x2, y_sym = particle_interaction(128, seed=2, symmetrize=True)
    assert torch.equal(x, x2)  # the same draws
    p, q, pt, qt = x.reshape(-1, 4, 4).unbind(1)
    d = minkowski_dot
    exchange = 2 * (d(p, qt) * d(pt, q) - d(p, q) * d(pt, qt))
    assert torch.allclose(y_sym[:, 0] - y[:, 0], exchange, rtol=1e-12, atol=1e-14)
    assert float(exchange.abs().mean()) > 1e-3  # the forms are different functions
    rep_in = task("particle").rep_in
    for g in O13().samples(4, seed=3):
        rho = torch.as_tensor(rep_in.rho(g), dtype=torch.float64)
        assert _rel(particle_target(x @ rho.T, symmetrize=True), y_sym) < 1e-10


def test_the_registered_task_is_the_unsymmetrised_form_on_o13():
    t = task("particle")
    x, y = t.generate(16, seed=5)
    assert torch.equal(y, particle_target(x)) and isinstance(t.group, O13) and t.exact
    assert t.rep_in.size == 16 and t.rep_out.size == 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"shape \(N, 16\)"):
        particle_target(torch.zeros(3, 12, dtype=torch.float64))
    with pytest.raises(TypeError, match="symmetrize must be a bool"):
        particle_target(torch.zeros(3, 16, dtype=torch.float64), symmetrize=1)
    with pytest.raises(TypeError, match="symmetrize must be a bool"):
        particle_interaction(3, symmetrize="yes")
    with pytest.raises(ValueError, match="4-vectors"):
        minkowski_dot(torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="n"):
        particle_interaction(0)
