"""The Gaussian analysis of §4.1 (Claims 1 and 2) as formulas.

Setting: ``y ~ N(theta_gt, sigma^2 I)`` i.i.d., ``theta_gt = A_gt psi_gt`` (Eq. 7). A sharing scheme A estimates
``theta_hat = A Abar^T ybar`` (the MLE with tied entries: each entry is the mean of its cluster over all samples).

Claim 2 is exposed as the printed formula, but it is only heuristic guidance on the train / validation split: its
Eq. 19 corollary can never hold under the claim's own condition ``alpha < exp(-K/10)``, and the proof squares a
reverse triangle inequality (see docs/discover.md). Do not rely on it as a guarantee.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from symkit.actions.partition import as_labels, labels_to_assignment, n_clusters

__all__ = [
    "cluster_average",
    "claim1_mse",
    "mse_no_sharing",
    "claim2_bound",
    "optimal_train_ratio",
    "monte_carlo_mse",
]


def cluster_average(partition: Any, values: Any) -> np.ndarray:
    """``A Abar^T v`` for a hard A: every entry of ``v`` (last axis) replaced by the mean over its cluster."""
    labels = as_labels(partition)
    v = np.asarray(values, dtype=np.float64)
    if v.shape[-1] != labels.size:
        raise ValueError(f"values have {v.shape[-1]} entries on the last axis, the partition covers {labels.size}")
    A = labels_to_assignment(labels)
    Abar = A / A.sum(0, keepdims=True)
    return v @ (A @ Abar.T).T


def claim1_mse(partition: Any, theta_gt: Any, sigma: float, n: int) -> float:
    """Claim 1: ``MSE(theta_hat) = ||A Abar^T theta_gt - theta_gt||^2 + rk(A) sigma^2 / n``."""
    if sigma < 0 or n < 1:
        raise ValueError(f"need sigma >= 0 and n >= 1, got sigma={sigma}, n={n}")
    theta = np.asarray(theta_gt, dtype=np.float64)
    bias = cluster_average(partition, theta) - theta
    return float(bias @ bias + n_clusters(partition) * sigma**2 / n)


def mse_no_sharing(k: int, sigma: float, n: int) -> float:
    """Eq. 11: the unbiased no-sharing estimator (A = I) has ``MSE = K sigma^2 / n``."""
    if k < 1 or n < 1:
        raise ValueError(f"need k >= 1 and n >= 1, got k={k}, n={n}")
    return k * sigma**2 / n


def claim2_bound(rank_gt: int, r: float, n: int, alpha: float, sigma: float = 1.0, k: int | None = None) -> float:
    """Eq. 15: with probability 1 - alpha the MSE gap to the oracle is at most
    ``sigma^2 ((1 - r)/(r n) (rk(A_gt) - 1) - 40 ln(alpha) / ((1 - r) n))``, ``r = |T| / |D|``.

    With ``k`` given, checks the claim's domain ``alpha < exp(-K/10)``. Heuristic: see the module docstring.
    """
    if not 0 < r < 1:
        raise ValueError(f"train ratio r must be in (0, 1), got {r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if rank_gt < 1 or n < 1:
        raise ValueError(f"need rank_gt >= 1 and n >= 1, got rank_gt={rank_gt}, n={n}")
    if k is not None and not alpha < math.exp(-k / 10):
        raise ValueError(f"Claim 2 needs alpha < exp(-K/10) = {math.exp(-k / 10):.4g} for K={k}, got alpha={alpha}")
    return sigma**2 * ((1 - r) / (r * n) * (rank_gt - 1) - 40 * math.log(alpha) / ((1 - r) * n))


def optimal_train_ratio(rank_gt: int, alpha: float) -> float:
    """The r minimising the Claim 2 bound: ``sqrt(a) / (sqrt(a) + sqrt(b))``, ``a = rk - 1``, ``b = -40 ln alpha``."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    a, b = max(rank_gt - 1, 0), -40 * math.log(alpha)
    return math.sqrt(a) / (math.sqrt(a) + math.sqrt(b))


def monte_carlo_mse(
    partition: Any, theta_gt: Any, sigma: float, n: int, reps: int = 20000, seed: int = 0
) -> float:
    """Monte Carlo estimate of ``E ||theta_hat - theta_gt||^2`` for the tied MLE, to check Claim 1."""
    theta = np.asarray(theta_gt, dtype=np.float64)
    rng = np.random.default_rng(seed)
    y = theta + sigma * rng.standard_normal((reps, n, theta.size))
    err = cluster_average(partition, y.mean(1)) - theta  # tied MLE: cluster average of the sample mean
    return float((err**2).sum(1).mean())
