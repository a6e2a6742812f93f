"""Synthetic data for equivariance discovery by learned parameter sharing (Yeh et al. 2022, §5 and App. F).

- :func:`gaussian_shared_means`: i.i.d. Gaussian vectors whose means are tied by a random partition (§4.1, Eq. 7).
- :func:`sum_of_numbers`: sequences of digits and their (optionally alternately negated) sum (§5.2, Eqs. 63-64).
- :func:`cross_correlation`: ``y = G x + eps`` with G a valid cross-correlation (Toeplitz) matrix (§5.3, Eq. 27).
- :func:`linear_map_data`: ``y = W x + eps`` for any weight, e.g. a DeepSets layer ``a I + b 11^T``.

All generators are seeded and run on the fly; nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from symkit._checks import check_int
from symkit.actions.partition import (
    canonical_labels,
    even_odd,
    one_cluster,
    partition_by_value,
    random_partition,
    set_partitions,
    toeplitz_matrix,
    toeplitz_partition,
)

__all__ = [
    "GaussianSharedMeans",
    "gaussian_shared_means",
    "SumOfNumbers",
    "sum_of_numbers",
    "LinearData",
    "cross_correlation",
    "linear_map_data",
]


@dataclass
class GaussianSharedMeans:
    """``y ~ N(theta_gt, sigma^2 I)`` with ``theta_gt = A_gt psi_gt`` (Eq. 7); ``y`` split into train / validation."""

    y: np.ndarray  # (n, K)
    n_train: int
    theta_gt: np.ndarray  # (K,)
    labels_gt: np.ndarray  # (K,)
    sigma: float

    @property
    def train(self) -> np.ndarray:
        return self.y[: self.n_train]

    @property
    def val(self) -> np.ndarray:
        return self.y[self.n_train :]


def gaussian_shared_means(
    k: int,
    rank: int = 1,
    n: int = 100,
    n_train: int = 30,
    sigma: float = 1.0,
    mu_step: float = 3.0,
    seed: int = 0,
    method: str | None = None,
    legacy: bool = False,
) -> GaussianSharedMeans:
    """Gaussian vectors with shared means (App. F.1; the reference generator's settings).

    The ground-truth partition has exactly ``rank`` clusters, drawn uniformly among all such partitions
    (``method="uniform"``, default for K <= 6) or by the reference code's "fixed rank" rule (default for K > 6).
    Cluster ``c`` has mean ``mu_step * c`` (so ``theta_gt = 0`` for rank 1). The first ``n_train`` rows are T.

    ``legacy=True`` draws from ``np.random.RandomState(seed)`` in the reference generator's order (one partition
    index, then the ``n x K`` normal draws), so for rank 1 the samples are those of the reference code's seeds; for
    rank > 1 our enumeration order of partitions differs from the reference, so only the distribution matches.
    """
    k = check_int("k", k, 1)
    rank = check_int("rank", rank, 1)
    n = check_int("n", n, 1)
    if not 1 <= n_train < n:
        raise ValueError(f"n_train must be in 1..n-1 = {n - 1}, got {n_train}")
    if rank > k:
        raise ValueError(f"rank={rank} exceeds the dimension k={k}")
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    method = method or ("uniform" if k <= 6 else "fixed_rank")
    psi = mu_step * np.arange(rank, dtype=np.float64)
    if legacy:
        rs = np.random.RandomState(seed)
        if method == "fixed_rank":
            labels = canonical_labels(np.concatenate([np.arange(rank), [rs.randint(0, rank) for _ in range(k - rank)]]))
        else:
            parts = list(set_partitions(k, rank))
            labels = parts[rs.randint(0, len(parts))]
        theta = psi[labels]
        y = rs.randn(n, k) * sigma + theta
    else:
        rng = np.random.default_rng(seed)
        labels = random_partition(k, rank, rng, method=method)
        theta = psi[labels]
        y = theta + sigma * rng.standard_normal((n, k))
    return GaussianSharedMeans(y=y, n_train=n_train, theta_gt=theta, labels_gt=labels, sigma=float(sigma))


@dataclass
class SumOfNumbers:
    """Digit sequences: ``tokens`` (n, L) int64 in 1..high, ``y = weights . tokens + noise`` (float32)."""

    tokens: torch.Tensor
    y: torch.Tensor
    y_clean: torch.Tensor
    weights: np.ndarray
    labels_gt: np.ndarray


def sum_of_numbers(
    length: int,
    n: int,
    variant: str = "standard",
    noise: float = 0.5,
    high: int = 9,
    seed: int = 0,
) -> SumOfNumbers:
    """Sum of a sequence of numbers (§5.2, Eq. 63); ``variant="negated"`` negates even (0-based) positions (Eq. 64).

    Digits are uniform on ``{1..high}`` (the reference code: 9; the paper's text says 10). Label noise is
    ``U[-noise, noise]``; pass ``noise=0`` for a clean test set. The ground-truth sharing of the position blocks is
    one cluster (standard) or even/odd (negated).
    """
    length = check_int("length", length, 1)
    n = check_int("n", n, 1)
    high = check_int("high", high, 1)
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if variant == "standard":
        weights, labels = np.ones(length), one_cluster(length)
    elif variant == "negated":
        weights = np.where(np.arange(length) % 2 == 0, -1.0, 1.0)
        labels = even_odd(length)
    else:
        raise ValueError(f"variant must be 'standard' or 'negated', got {variant!r}")
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, high + 1, size=(n, length))
    clean = tokens @ weights
    y = clean + rng.uniform(-noise, noise, size=n) if noise > 0 else clean.copy()
    return SumOfNumbers(
        tokens=torch.as_tensor(tokens, dtype=torch.long),
        y=torch.as_tensor(y, dtype=torch.float32),
        y_clean=torch.as_tensor(clean, dtype=torch.float32),
        weights=weights,
        labels_gt=labels,
    )


@dataclass
class LinearData:
    """``y = x W^T + eps``; ``labels_gt`` is the sharing of the flattened W implied by equal values."""

    x: np.ndarray  # (n, K_in)
    y: np.ndarray  # (n, K_out)
    W: np.ndarray  # (K_out, K_in)
    labels_gt: np.ndarray


def linear_map_data(
    W: Any, n: int, noise_std: float = 0.1, seed: int = 0, labels_gt: Any | None = None
) -> LinearData:
    """Samples ``x ~ N(0, I)``, ``y = W x + N(0, noise_std^2)``. ``labels_gt`` defaults to value equality in W."""
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"W must be a matrix (K_out, K_in), got shape {W.shape}")
    n = check_int("n", n, 1)
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, W.shape[1]))
    y = x @ W.T + noise_std * rng.standard_normal((n, W.shape[0]))
    labels = partition_by_value(W) if labels_gt is None else canonical_labels(labels_gt)
    if labels.size != W.size:
        raise ValueError(f"labels_gt covers {labels.size} entries but W has {W.size}")
    return LinearData(x=x, y=y, W=W, labels_gt=labels)


def cross_correlation(
    k_in: int,
    kernel_size: int,
    n: int,
    noise_std: float = 0.1**0.5,
    seed: int = 0,
    kernel: Any | None = None,
) -> LinearData:
    """Valid 1-D cross-correlation data ``y[k] = sum_j x[k + j] g[j] + eps`` (Eq. 27, App. F.3).

    The kernel defaults to ``1 + 2 * arange(kernel_size)`` ("increase by two for every position"); ``noise_std``
    defaults to sqrt(0.1) (reading the paper's N(0, 0.1) as a variance). The target sharing is
    :func:`~symkit.actions.partition.toeplitz_partition` (zeros form one cluster); A is ``K_out K_in`` square.
    """
    k_in = check_int("k_in", k_in, 1)
    kernel_size = check_int("kernel_size", kernel_size, 1)
    g = 1.0 + 2.0 * np.arange(kernel_size) if kernel is None else np.asarray(kernel, dtype=np.float64)
    if g.shape != (kernel_size,):
        raise ValueError(f"kernel must have {kernel_size} taps, got shape {g.shape}")
    G = toeplitz_matrix(g, k_in)
    return linear_map_data(G, n, noise_std, seed, labels_gt=toeplitz_partition(k_in, kernel_size))
