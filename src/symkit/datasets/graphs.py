"""Stochastic-block-model graphs labelled by connectivity (the Perm task of Nordenfors et al., App. D).

Graphs on ``clusters * size`` nodes: nodes are split into clusters, an edge joins two nodes of the same cluster with
probability ``p`` and of different clusters with probability ``q`` (undirected, no self-loops), then the node labels
are permuted uniformly at random. The label is 1 when the graph is connected. Connectivity is decided exactly with
``scipy.sparse.csgraph.connected_components`` (the reference code thresholds the Fiedler value of the Laplacian,
which agrees up to floating point).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse.csgraph import connected_components

from symkit._checks import check_int

__all__ = ["sbm_adjacency", "sbm_connectivity"]


def _check_prob(name: str, value: object) -> float:
    if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def sbm_adjacency(
    num: int, clusters: int = 2, size: int = 5, p: float = 0.5, q: float = 0.05, permute: bool = True, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``num`` symmetric 0/1 adjacency matrices ``(num, n, n)`` (n = clusters * size) and the cluster of each node
    ``(num, n)`` after the random relabelling (identity order when ``permute=False``)."""
    num = check_int("num", num, 1)
    clusters = check_int("clusters", clusters, 1)
    size = check_int("size", size, 1)
    p, q = _check_prob("p", p), _check_prob("q", q)
    rng = np.random.default_rng(seed)
    n = clusters * size
    block = np.repeat(np.arange(clusters), size)
    prob = np.where(block[:, None] == block[None, :], p, q)
    upper = np.triu(rng.random((num, n, n)) < prob, k=1)
    adj = (upper | upper.transpose(0, 2, 1)).astype(np.float64)
    member = np.broadcast_to(block, (num, n)).copy()
    if permute:
        for k in range(num):
            perm = rng.permutation(n)
            adj[k] = adj[k][np.ix_(perm, perm)]
            member[k] = member[k][perm]
    return adj, member


def sbm_connectivity(
    num: int = 1000,
    clusters: int = 2,
    size: int = 5,
    p: float = 0.5,
    q: float = 0.05,
    center: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``(num, 1, n, n)`` (adjacency minus 0.5 when ``center``) and connectivity labels ``(num, 1)``."""
    adj, _ = sbm_adjacency(num, clusters, size, p, q, permute=True, seed=seed)
    labels = np.array([connected_components(a, directed=False)[0] == 1 for a in adj], dtype=np.float64)
    x = torch.as_tensor(adj - 0.5 if center else adj, dtype=dtype).unsqueeze(1)
    return x, torch.as_tensor(labels, dtype=dtype).unsqueeze(1)
