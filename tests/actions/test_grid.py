"""Group actions and the lifted representation (paper Ex. 2-4, Eq. 8, Lemmas 1, 5, 6, 7)."""

import itertools

import pytest
import torch

from symkit.actions import (
    CyclicTranslations1D,
    CyclicTranslations2D,
    Permutations,
    Rotations90,
    TranslationsRotations,
    act,
    lift,
)
from symkit.dynamics import LayerSpec, ProjectNet, flat_params, lift_bilinear, project, project_bilinear, project_flat

ACTIONS = [CyclicTranslations2D(3), CyclicTranslations1D(4, 0), Rotations90(4), TranslationsRotations(3),
           Permutations(4, "matrix"), Permutations(4, "vector")]


def test_conventions_match_the_paper():
    n = 5
    x = torch.arange(n * n, dtype=torch.float64).reshape(n, n)
    y = act(CyclicTranslations2D(n), x, (1, 2, 0))
    for i, j in itertools.product(range(n), range(n)):
        assert y[i, j] == x[(i - 1) % n, (j - 2) % n]  # (rho(k, l) x)_ij = x_{i-k, j-l}
    y1 = act(CyclicTranslations1D(n, 1), x, (0, 3, 0))
    assert torch.equal(y1, torch.roll(x, 3, 1))
    assert torch.equal(act(Rotations90(n), x, (0, 0, 1)), torch.rot90(x, 1, (0, 1)))
    pi = (2, 0, 1, 4, 3)  # (rho(pi) v)_i = v_{pi^{-1}(i)}, and A -> P A P^T on matrices
    v = torch.arange(5.0)
    inv = [pi.index(i) for i in range(5)]
    assert torch.equal(act(Permutations(5, "vector"), v, pi), v[inv])
    P = torch.zeros(5, 5)
    P[list(pi), range(5)] = 1.0  # P e_j = e_{pi(j)}
    A = torch.randn(5, 5)
    assert torch.allclose(act(Permutations(5, "matrix"), A, pi), P @ A @ P.T)


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_group_structure_and_perm_agree_with_act(action):
    els = list(action.elements())
    assert len(els) == action.order and len(set(els)) == action.order
    x = torch.randn(2, *action.shape, dtype=torch.float64)
    for g in els[:12]:
        flat = x.reshape(2, -1)[:, torch.as_tensor(action.perm(g))].reshape(x.shape)
        assert torch.equal(act(action, x, g), flat)
        assert torch.equal(act(action, act(action, x, g), action.inverse(g)), x)
    assert torch.equal(act(action, x, action.identity()), x)


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_lift_is_an_orthogonal_representation(action):
    # rho_bar(g) rho_bar(h) = rho_bar(gh) (checked through perms), ||rho_bar(g) A|| = ||A|| (Lemma 7), and
    # <rho_bar(g) A, B> = <A, rho_bar(g)^{-1} B>
    spec = LayerSpec(action, action, 2, 2)
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(spec.shape, generator=gen, dtype=torch.float64)
    B = torch.randn(spec.shape, generator=gen, dtype=torch.float64)
    for _ in range(5):
        g, h = action.sample(gen), action.sample(gen)
        gh = lift(lift(A, h, action, action), g, action, action)
        composed = action.perm(h)[action.perm(g)]  # rho(g) rho(h) x = x[p_h][p_g]
        match = [k for k in action.elements() if (action.perm(k) == composed).all()]
        assert len(match) == 1 and torch.equal(gh, lift(A, match[0], action, action))
        assert abs(float(lift(A, g, action, action).norm() - A.norm())) < 1e-12
        lhs = float((lift(A, g, action, action) * B).sum())
        rhs = float((A * lift(B, action.inverse(g), action, action)).sum())
        assert abs(lhs - rhs) < 1e-10


def test_lemma1_fixed_points_of_the_lift_are_E():
    action = Rotations90(4)
    spec = LayerSpec(action, action, 1, 2)
    A = torch.randn(spec.shape, dtype=torch.float64)
    E = project(A, spec)
    assert all(torch.allclose(lift(E, g, action, action), E, atol=1e-14) for g in action.elements())
    assert not all(torch.allclose(lift(A, g, action, action), A) for g in action.elements())


def test_lemma5_and_6_invariant_bilinear_forms_are_block_diagonal():
    rot = Rotations90(3)
    model = ProjectNet([LayerSpec(rot, rot, 1, 1), LayerSpec(rot, rot, 1, 1)], dtype=torch.float64)
    n = flat_params(model).numel()
    M = torch.randn(n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    Pi = project_bilinear(model, M)
    assert (project_bilinear(model, Pi) - Pi).abs().max() < 1e-12  # a projection
    for g in rot.elements():
        assert (lift_bilinear(model, Pi, g) - Pi).abs().max() < 1e-12  # invariant
    eye = torch.eye(n, dtype=torch.float64)
    PE = torch.stack([project_flat(model, e) for e in eye], dim=1)
    assert (PE @ Pi @ (eye - PE)).abs().max() < 1e-12  # Lemma 6: M[A, B] = 0 for A in E, B in E^perp
    assert (PE @ M @ (eye - PE)).abs().max() > 1e-2
    with pytest.raises(ValueError, match="matrix"):
        lift_bilinear(model, M[:3], (0, 0, 1))


def test_act_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="grid shape"):
        act(Rotations90(4), torch.zeros(2, 5, 5), (0, 0, 1))
    with pytest.raises(TypeError, match="torch.Tensor"):
        Rotations90(4).act([[0.0]], (0, 0, 1), (0, 1))
    with pytest.raises(ValueError, match="axis"):
        CyclicTranslations1D(4, 2)
    with pytest.raises(ValueError, match="on must be"):
        Permutations(3, "tensor")
