"""Bilevel solvers: brute force, closed-form relaxation, implicit hypergradients (§4.2, Alg. 1)."""

import numpy as np
import pytest
import torch

from symkit.datasets.sharing import linear_map_data, sum_of_numbers
from symkit.discover import (
    brute_force_search,
    deepsets_partition,
    even_odd,
    implicit_hypergradient,
    inverse_hvp,
    one_cluster,
    partition_distance,
    set_partitions,
)
from symkit.discover.linear import discover_linear_sharing, ols, tied_least_squares


def test_brute_force_finds_minimum_batched():
    target = np.array([[0, 0, 1, 1], [0, 1, 2, 3]])

    def score(labels):
        return np.array([partition_distance(labels, t) for t in target], dtype=float)

    best, scores = brute_force_search(4, score)
    assert np.all(scores == 0)
    assert all(partition_distance(b, t) == 0 for b, t in zip(best, target))
    with pytest.raises(ValueError, match="max_k"):
        brute_force_search(12, score)


def _ridge_problem():
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(30, 4, generator=g, dtype=torch.float64), torch.randn(30, generator=g, dtype=torch.float64)
    Xv, yv = torch.randn(20, 4, generator=g, dtype=torch.float64), torch.randn(20, generator=g, dtype=torch.float64)
    return X, y, Xv, yv


def _ridge_solution(lam, X, y):
    return torch.linalg.solve(X.T @ X + torch.exp(lam) * torch.eye(4, dtype=X.dtype), X.T @ y)


@pytest.mark.parametrize("method,kw,tol", [("exact", {}, 1e-6), ("cg", {"iters": 50, "tol": 1e-12}, 1e-6),
                                           ("neumann", {"iters": 3000, "alpha": 5e-3}, 1e-3)])
def test_implicit_hypergradient_matches_closed_form(method, kw, tol):
    """Ridge: w*(lam) = (X^T X + e^lam I)^{-1} X^T y; the IFT hypergradient equals autograd through the solve."""
    X, y, Xv, yv = _ridge_problem()
    lam = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    truth = torch.autograd.grad(((Xv @ _ridge_solution(lam, X, y) - yv) ** 2).sum(), lam)[0]
    w = torch.nn.Parameter(_ridge_solution(lam.detach(), X, y))
    hg = implicit_hypergradient(
        lambda: 0.5 * ((X @ w - y) ** 2).sum() + 0.5 * torch.exp(lam) * (w**2).sum(),
        lambda: ((Xv @ w - yv) ** 2).sum(),
        [w], [lam], method=method, **kw,
    )[0]
    assert hg.item() == pytest.approx(truth.item(), rel=tol, abs=tol)


def test_neumann_reference_scaling_and_identity():
    H = torch.diag(torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64))
    v = [torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64)]

    def hvp(p):
        return [H @ p[0]]

    std = inverse_hvp(v, hvp, "neumann", iters=2000, alpha=0.1)[0]
    assert torch.allclose(std, torch.tensor([1.0, 0.5, 0.25], dtype=torch.float64), atol=1e-8)
    ref = inverse_hvp(v, hvp, "neumann", iters=2000, alpha=0.1, neumann_scale="reference")[0]
    assert torch.allclose(ref, std / 0.1)  # the released code drops the leading alpha
    assert torch.equal(inverse_hvp(v, hvp, "identity")[0], v[0])
    with pytest.raises(ValueError, match="method"):
        inverse_hvp(v, hvp, "lbfgs")


def test_tied_least_squares_recovers_tied_weights():
    W = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0]])
    d = linear_map_data(W, 200, noise_std=0.0, seed=0)
    assert np.allclose(tied_least_squares(d.x, d.y, d.labels_gt), W)
    assert np.allclose(ols(d.x, d.y), W)


@pytest.mark.parametrize("n", [3, 4])
def test_deepsets_layer_sharing_is_discovered(n):
    """Notes §7.3 item 18: from y = (2 I + 0.5 11^T) x + noise the search finds {diagonal}, {off-diagonal}."""
    W = 2.0 * np.eye(n) + 0.5
    data = [linear_map_data(W, 150, noise_std=0.1, seed=s) for s in range(3)]
    X, Y = np.stack([d.x for d in data]), np.stack([d.y for d in data])
    res = discover_linear_sharing(X[:, :50], Y[:, :50], X[:, 50:], Y[:, 50:], iters=600, seed=0)
    pds = [partition_distance(lab, deepsets_partition(n)) for lab in res.labels]
    assert np.median(pds) == 0, pds


def test_sum_of_numbers_linear_proxy():
    """Notes §7.3 item 17: a linear model on numeric inputs recovers one cluster (standard) / even-odd (negated)."""
    for variant, target in (("standard", one_cluster(4)), ("negated", even_odd(4))):
        data = [sum_of_numbers(4, 250, variant=variant, seed=s) for s in range(3)]
        X = np.stack([d.tokens.numpy().astype(float) for d in data])
        Y = np.stack([d.y.numpy()[:, None].astype(float) for d in data])
        res = discover_linear_sharing(X[:, :100], Y[:, :100], X[:, 100:], Y[:, 100:], iters=600, seed=0)
        pds = [partition_distance(lab, target) for lab in res.labels]
        assert max(pds) <= (0 if variant == "standard" else 2), (variant, pds)


def test_sum_of_numbers_data():
    d = sum_of_numbers(4, 50, variant="negated", noise=0.0, seed=0)
    expected = (-d.tokens[:, 0] + d.tokens[:, 1] - d.tokens[:, 2] + d.tokens[:, 3]).float()
    assert torch.equal(d.y, expected)
    assert int(d.tokens.min()) >= 1 and int(d.tokens.max()) <= 9
    noisy = sum_of_numbers(4, 500, seed=0)
    assert float((noisy.y - noisy.y_clean).abs().max()) <= 0.5
    assert len(list(set_partitions(4))) == 15
    with pytest.raises(ValueError, match="variant"):
        sum_of_numbers(4, 10, variant="reversed")


def test_relaxed_closed_form_passes_the_projected_solution_to_the_validation_loss():
    """theta = P(A) w* with P(A) = A Abar^T (the cluster-averaging projector), A = softmax(S0): the value the
    optimiser's upper objective sees, computed here from the documented initialisation with soft_projector."""
    from symkit.discover.bilevel import relaxed_closed_form
    from symkit.nn.sharing import soft_projector

    r, b, k = 2, 5, 4
    w = torch.randn(b, k, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    seen = []

    def val_loss(theta):
        seen.append(theta.detach().clone())
        return (theta**2).sum(-1)

    relaxed_closed_form(w, val_loss, entropy_weight=0.0, rank_weight=0.0, iters=0, restarts=r, init_scale=2.0, seed=3)
    S0 = torch.randn((r, b, k, k), generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2.0
    expected = torch.einsum("rbij,bj->rbi", soft_projector(torch.softmax(S0, -1)), w)
    torch.testing.assert_close(seen[-1], expected, rtol=1e-12, atol=1e-12)
    assert (expected - w).abs().max() > 0.1  # a soft A mixes the entries: theta is not w* itself
