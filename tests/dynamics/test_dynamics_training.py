"""Dynamics on a small C4 MLP with an invariant loss (notes D.11-18): Lemma 3, Lemma 4, Prop. 1, Prop. 2,
Corollaries 1-2, sampled and biased augmentation, biases (App. F), the penalty, the Hessian spectrum on E^perp."""

import numpy as np
import pytest
import torch
from torch.func import grad

from symkit.actions import Permutations, Rotations90, act
from symkit.dynamics import (
    LayerSpec,
    ProjectNet,
    flat_params,
    full_batch_gradient,
    hvp_fn,
    lift_flat,
    perp_hessian_eigs,
    project_flat,
    projectnet_equivariance_error,
    risk_fn,
    train,
)
from symkit.dynamics.model import ACTIVATIONS

N = 4
ROT = Rotations90(N)


def _model(seed=1, bias=False, rot=ROT):
    specs = [LayerSpec(rot, rot, 1, 2), LayerSpec(rot, rot, 2, 1)]
    return ProjectNet(specs, activation="tanh", dtype=torch.float64, seed=seed, bias=bias)


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(24, 1, N, N, generator=gen, dtype=torch.float64)
    M = torch.randn(N * N, N * N, generator=gen, dtype=torch.float64) / 4
    Y = torch.tanh(X.reshape(24, -1) @ M.T).reshape(24, 1, N, N)  # not C4-symmetric
    return X, Y


def test_lemma3_input_transform_equals_layer_transform(data):
    # D.17: Phi_A(rho_X(g) x) = rho_Y(g) Phi_{rho_bar(g)^{-1} A}(x) for an arbitrary (non-equivariant) A
    X, _ = data
    m = _model()
    gen = torch.Generator().manual_seed(5)
    w = flat_params(m) + torch.randn(flat_params(m).shape, dtype=torch.float64, generator=gen)
    from torch.func import functional_call

    from symkit.dynamics.hessian import unflatten

    for g in ROT.elements():
        lhs = functional_call(m, unflatten(m, w), (act(ROT, X, g),))
        w_inv = lift_flat(m, w, ROT.inverse(g))
        rhs = act(ROT, functional_call(m, unflatten(m, w_inv), (X,)), g)
        assert (lhs - rhs).abs().max() < 1e-12
    assert projectnet_equivariance_error(m, X) < 1e-12  # A in E: exactly equivariant
    m2 = _model()
    with torch.no_grad():
        m2.weights[0][0, 0, 0, 0, 1, 2] += 0.5  # one entry: not C4-invariant
    assert projectnet_equivariance_error(m2, X) > 1e-3


def test_lemma4_and_prop1(small):
    X, Y = small
    m = _model(rot=ROT3)
    R = risk_fn(m, X, Y, "mse")
    Ra = risk_fn(m, X, Y, "mse", "augmented")
    Re = risk_fn(m, X, Y, "mse", "equivariant")
    w_any = torch.randn(flat_params(m).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    # D.11: R^aug(A) = mean_g R(rho_bar(g) A) for an arbitrary A
    lifted = sum(R(lift_flat(m, w_any, g)) for g in ROT3.elements()) / ROT3.order
    assert abs(float(Ra(w_any) - lifted)) < 1e-13
    # D.12: at A in E, grad R^aug = Pi_E grad R = grad R^eqv, while grad R has an E^perp part
    w = flat_params(m)
    gn, ga, ge = grad(R)(w), grad(Ra)(w), grad(Re)(w)
    assert (ga - project_flat(m, gn)).abs().max() < 1e-14
    assert (ga - ge).abs().max() < 1e-14
    assert (gn - project_flat(m, gn)).norm() > 1e-2


def _dense(hvp, n):
    return torch.vmap(hvp)(torch.eye(n, dtype=torch.float64)).T


ROT3 = Rotations90(3)


@pytest.fixture(scope="module")
def small():
    """A 3x3 C4 problem (324 parameters) for dense Hessians."""
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(12, 1, 3, 3, generator=gen, dtype=torch.float64)
    M = torch.randn(9, 9, generator=gen, dtype=torch.float64) / 3
    Y = torch.tanh(X.reshape(12, -1) @ M.T).reshape(12, 1, 3, 3)
    return X, Y


def test_prop2_hessian_blocks(small):
    # D.13: H^aug = mean_g rho_bar(g) H rho_bar(g)^T; Pi_E H^aug Pi_perp = 0; Pi_E H^aug Pi_E = Pi_E H Pi_E
    X, Y = small
    m = _model(rot=ROT3)
    w = flat_params(m)
    n = w.numel()
    H = _dense(hvp_fn(risk_fn(m, X, Y, "mse"), w), n)
    Ha = _dense(hvp_fn(risk_fn(m, X, Y, "mse", "augmented"), w), n)
    eye = torch.eye(n, dtype=torch.float64)
    P = torch.stack([project_flat(m, e) for e in eye], dim=1)
    Q = eye - P
    lifts = [torch.stack([lift_flat(m, e, g) for e in eye], dim=1) for g in ROT3.elements()]
    avg = sum(L @ H @ L.T for L in lifts) / len(lifts)
    assert (Ha - avg).abs().max() < 1e-12
    assert (P @ Ha @ Q).abs().max() < 1e-12
    assert (P @ H @ Q).abs().max() > 1e-4  # the nominal Hessian is not block diagonal
    assert (P @ Ha @ P - P @ H @ P).abs().max() < 1e-12


def test_corollary1_exact_augmentation_stays_in_E_and_tracks_equivariant(data):
    # D.14, with sampled (D.15) and biased (D.16) augmentation for contrast
    X, Y = data
    m = _model()
    steps, lr = 60, 0.1
    nom = train(m.copy(), X, Y, "nominal", steps, lr)
    aug_m = m.copy()
    aug = train(aug_m, X, Y, "augmented", steps, lr, exact=True)
    eq_m = m.copy()
    eq = train(eq_m, X, Y, "equivariant", steps, lr)
    samp = train(m.copy(), X, Y, "augmented", steps, lr, aug_passes=1, seed=0)
    assert aug.total()[-1] < 1e-13 and eq.total()[-1] < 1e-13
    assert (flat_params(aug_m) - flat_params(eq_m)).abs().max() < 1e-13
    assert nom.total()[-1] > 1e-2
    assert 1e-8 < samp.total()[-1] < nom.total()[-1]
    # every mode moved a comparable distance: the drift is not explained by standing still
    assert eq.total("travelled")[-1] > 0.3 * nom.total("travelled")[-1]

    # biased augmentation: exact expectation under weights (0.4, 0.2, 0.2, 0.2) on C4 leaves E
    weights = {(0, 0, 0): 0.4, (0, 0, 1): 0.2, (0, 0, 2): 0.2, (0, 0, 3): 0.2}
    biased = m.copy()
    start = [p.detach().clone() for p in biased.parameters()]
    for _ in range(steps):
        biased.zero_grad()
        loss = sum(w * ((biased(act(ROT, X, g)) - act(ROT, Y, g)) ** 2).mean() for g, w in weights.items())
        loss.backward()
        with torch.no_grad():
            for p in biased.parameters():
                p.sub_(p.grad, alpha=lr)
    off = project_flat(biased, flat_params(biased))
    assert (flat_params(biased) - off).norm() > 1e-4
    assert sum(float((p.detach() - s).norm()) for p, s in zip(biased.parameters(), start)) > 0


def test_augmentation_samples_are_uniform():
    gen = torch.Generator().manual_seed(0)
    counts = {}
    for _ in range(4000):
        g = ROT.sample(gen)
        counts[g] = counts.get(g, 0) + 1
    assert set(counts) == set(ROT.elements())
    # binomial(4000, 1/4): sd = 27.4, so 5 sd is 137
    assert all(abs(c - 1000) < 137 for c in counts.values())


def test_biases_projected_to_invariant_vectors(data):
    # D.18: an affine layer with A in E and invariant b is equivariant; a non-invariant b breaks it
    X, Y = data
    m = _model(bias=True)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(2)
        m.biases[0].copy_(torch.randn(m.biases[0].shape, dtype=torch.float64, generator=gen))
    assert projectnet_equivariance_error(m, X) > 1e-3
    with torch.no_grad():
        m.biases[0].copy_(m.project_tensor(0, "bias", m.biases[0]))
    assert projectnet_equivariance_error(m, X) < 1e-12
    traj = train(m, X, Y, "augmented", 10, 0.1, exact=True)
    assert traj.to_e.shape[1] == 4 and traj.total()[-1] < 1e-13


def test_penalty_pulls_back_towards_E(data):
    X, Y = data
    m = _model()
    a = train(m.copy(), X, Y, "nominal", 30, 0.1)
    b = train(m.copy(), X, Y, "nominal", 30, 0.1, penalty=2.0)
    assert b.total()[-1] < 0.5 * a.total()[-1]


def test_full_batch_gradient_is_the_mean_over_minibatches(data):
    X, Y = data
    m = _model()
    full_batch_gradient(m, X, Y, "nominal", batch_size=None)
    g1 = [p.grad.clone() for p in m.parameters()]
    full_batch_gradient(m, X, Y, "nominal", batch_size=8)
    for a, b in zip(g1, (p.grad for p in m.parameters())):
        assert (a - b).abs().max() < 1e-14  # equal batch sizes: mean of batch means = full mean


def test_norms_total_is_root_sum_of_squares(data):
    X, Y = data
    traj = train(_model(), X, Y, "nominal", 5, 0.1)
    per = traj.to_e[-1]
    assert traj.total()[-1] == pytest.approx(float(np.sqrt((per**2).sum())), rel=1e-12)
    assert traj.travelled[0].max() == 0.0


def test_perp_hessian_spectrum_matches_dense(small):
    X, Y = small
    m = _model(rot=ROT3)
    w = flat_params(m)
    n = w.numel()
    Ha = _dense(hvp_fn(risk_fn(m, X, Y, "mse", "augmented"), w), n)
    eye = torch.eye(n, dtype=torch.float64)
    P = torch.stack([project_flat(m, e) for e in eye], dim=1)
    Q = eye - P
    # eigenvalues of the restriction to E^perp: of Q Ha Q in an orthonormal basis of range(Q)
    U, S, _ = torch.linalg.svd(Q)
    B = U[:, S > 0.5]
    dense = np.sort(torch.linalg.eigvalsh(B.T @ Ha @ B).numpy())
    vals = perp_hessian_eigs(m, X, Y, "mse", k=3)
    # Lanczos may return a repeated eigenvalue once: compare the smallest, and check every value is in the spectrum
    assert vals[0] == pytest.approx(dense[0], abs=1e-6)
    assert all(np.abs(dense - v).min() < 1e-6 for v in vals)
    assert vals[-1] <= dense[5] + 1e-6


def test_training_input_errors(data):
    X, Y = data
    m = _model()
    with pytest.raises(ValueError, match="mode"):
        train(m, X, Y, "sideways")
    with pytest.raises(ValueError, match="samples"):
        full_batch_gradient(m, X, Y[:3])
    with pytest.raises(ValueError, match="loss"):
        full_batch_gradient(m, X, Y, loss="hinge")
    with pytest.raises(ValueError, match="input of shape"):
        m(torch.zeros(2, 1, 5, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="activation"):
        ProjectNet([LayerSpec(ROT, ROT)], activation="swish")
    assert "leaky_relu" in ACTIVATIONS
    with pytest.raises(TypeError, match="float64"):
        perp_hessian_eigs(ProjectNet([LayerSpec(ROT, ROT)]), X.float(), Y.float())
    with pytest.raises(ValueError, match="too many"):
        P = Permutations(10, "matrix")
        big = ProjectNet([LayerSpec(P, P)], dtype=torch.float64)
        full_batch_gradient(big, torch.zeros(2, 1, 10, 10, dtype=torch.float64), torch.zeros(2, 1, 10, 10),
                            "augmented", exact=True)


def test_permutation_net_invariant_head_is_equivariant():
    # a graph-style net: S_5 on matrices -> invariant features -> FC head; its output is S_5-invariant
    P = Permutations(5, "matrix")
    specs = [LayerSpec(P, P, 1, 3), LayerSpec(P, P.trivial(), 3, 4), LayerSpec(P.trivial(), P.trivial(), 4, 1)]
    m = ProjectNet(specs, norm_after=(1,), dtype=torch.float64)
    X = torch.randn(6, 1, 5, 5, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    assert projectnet_equivariance_error(m, X, [P.sample(gen) for _ in range(10)]) < 1e-12
