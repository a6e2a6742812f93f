"""Gaussian theory (Claims 1 and 2; notes §7.2)."""

import math

import numpy as np
import pytest
import torch

from symkit.datasets.sharing import gaussian_shared_means
from symkit.discover import (
    claim1_mse,
    claim2_bound,
    cluster_average,
    identity_partition,
    labels_to_assignment,
    monte_carlo_mse,
    mse_no_sharing,
    one_cluster,
    optimal_train_ratio,
    set_partitions,
)
from symkit.nn.sharing import soft_projector


def test_claim1_matches_monte_carlo():
    labels, theta = [0, 0, 1, 1, 2], np.array([0.0, 1.0, 2.0, 3.0, 5.0])
    exact = claim1_mse(labels, theta, sigma=1.0, n=20)
    assert exact == pytest.approx(0.5**2 * 4 + 3 / 20)  # bias 0.25 per tied entry, rank 3
    assert monte_carlo_mse(labels, theta, 1.0, 20, reps=20000, seed=1) == pytest.approx(exact, rel=0.01)
    # a biased scheme and the unbiased oracle
    assert monte_carlo_mse(one_cluster(5), theta, 2.0, 10, reps=20000) == pytest.approx(
        claim1_mse(one_cluster(5), theta, 2.0, 10), rel=0.01
    )


@pytest.mark.parametrize("k,expected", [(2, 0.02), (4, 0.04), (6, 0.06)])
def test_no_sharing_mse(k, expected):
    assert mse_no_sharing(k, 1.0, 100) == pytest.approx(expected)
    assert claim1_mse(identity_partition(k), np.zeros(k), 1.0, 100) == pytest.approx(expected)
    assert claim1_mse(one_cluster(k), np.zeros(k), 1.0, 100) == pytest.approx(0.01)


def test_hard_projector_is_pinv_and_soft_pinv_is_identity():
    A = torch.as_tensor(labels_to_assignment([0, 1, 0, 2, 1]), dtype=torch.float64)
    Abar = A / A.sum(0, keepdim=True)
    assert torch.allclose(Abar.T, torch.linalg.pinv(A), atol=1e-12)
    assert torch.allclose(soft_projector(A), A @ torch.linalg.pinv(A), atol=1e-8)
    S = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    soft = torch.softmax(S, 1)
    # the pseudo-inverse lower level is A-independent for an invertible soft A; the averaging projector is not
    assert torch.allclose(soft @ torch.linalg.pinv(soft), torch.eye(5, dtype=torch.float64), atol=1e-8)
    assert not torch.allclose(soft_projector(soft), torch.eye(5, dtype=torch.float64), atol=1e-2)
    assert torch.allclose(soft_projector(soft).sum(1), torch.ones(5, dtype=torch.float64), atol=1e-6)


def test_train_loss_is_minimised_by_no_sharing():
    """§4 trivial solution: on T alone, A = I has the lowest loss among all partitions."""
    d = gaussian_shared_means(5, 2, n=60, n_train=30, seed=3)
    ybar = d.train.mean(0)

    def loss(labels):
        return ((d.train - cluster_average(labels, ybar)) ** 2).sum()

    base = loss(identity_partition(5))
    assert all(base <= loss(p) + 1e-12 for p in set_partitions(5))


def test_claim2_formula_and_optimal_ratio():
    alpha = math.exp(-0.6)
    b = claim2_bound(1, 0.3, 100, alpha, sigma=1.0, k=5)
    assert b == pytest.approx(-40 * math.log(alpha) / (0.7 * 100))
    # the bound with rank 1 grows with r; r* is the grid minimiser for rank > 1
    assert claim2_bound(1, 0.5, 100, alpha) > claim2_bound(1, 0.2, 100, alpha)
    for rk in (2, 4, 5):
        grid = np.linspace(0.01, 0.99, 9801)
        vals = [claim2_bound(rk, r, 100, alpha) for r in grid]
        assert optimal_train_ratio(rk, alpha) == pytest.approx(grid[int(np.argmin(vals))], abs=2e-4)
    with pytest.raises(ValueError, match="alpha < exp"):
        claim2_bound(1, 0.3, 100, 0.9, k=5)


def test_gaussian_generator():
    d = gaussian_shared_means(6, 3, seed=0)
    assert d.y.shape == (100, 6) and d.train.shape == (30, 6) and d.val.shape == (70, 6)
    assert len(set(d.labels_gt.tolist())) == 3
    assert np.allclose(d.theta_gt, 3.0 * d.labels_gt)
    legacy = gaussian_shared_means(2, 1, seed=0, legacy=True)
    rs = np.random.RandomState(0)
    rs.randint(0, 1)
    assert np.allclose(legacy.y, rs.randn(100, 2))  # the reference code's draws for rank 1
    with pytest.raises(ValueError, match="rank"):
        gaussian_shared_means(3, 4)
