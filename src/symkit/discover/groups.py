"""From a discovered sharing scheme to the symmetry group it implies (Yeh et al. 2022, Eq. 3 and Claim 3).

For a permutation group G acting on the positions, the weights of an equivariant layer are exactly the vectors
constant on the orbits of the index pairs (Eq. 3), so the equivariant basis of ``V(G) >> V(G)`` (or the invariant
basis of ``V(G)`` for a vector of tied parameters) determines a partition: two entries share a parameter iff their
rows in any basis ``Q`` of the equivariant space are equal. :func:`group_sharing` computes that partition with
``symkit.reps``; :func:`implied_group` compares a discovered partition against known groups and names the one it
matches (partition distance 0), so a discovered sharing is reported as, e.g., ``Z(5)`` (cyclic shifts) or
``S(4)`` (all permutations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symkit.actions.partition import canonical_labels, partition_by_value, partition_distance, toeplitz_partition

__all__ = ["group_sharing", "parity_group", "known_groups", "ImpliedGroup", "implied_group"]


def group_sharing(G: Any, kind: str = "hom") -> np.ndarray:
    """The sharing scheme that makes a layer G-equivariant, from the equivariant basis of ``symkit.reps``.

    ``kind="hom"``: the flattened ``d x d`` weight of an equivariant linear map ``V(G) -> V(G)`` (Eq. 3).
    ``kind="vector"``: a length-d parameter vector invariant under G (e.g. the per-position blocks of §5.2).
    G must act by permutation matrices.
    """
    from symkit.reps import V

    if not getattr(G, "is_permutation", False):
        raise ValueError(f"group_sharing needs a permutation group, got {getattr(G, 'name', G)!r}")
    if kind == "hom":
        rep = V(G) >> V(G)
    elif kind == "vector":
        rep = V(G)
    else:
        raise ValueError(f"kind must be 'hom' or 'vector', got {kind!r}")
    Q = np.asarray(rep.equivariant_basis(), dtype=np.float64)
    if Q.shape[1] == 0:
        return np.arange(rep.size)
    # Rows of Q are equal exactly within an orbit; canonicalise the sign/scale-free row pattern by rounding.
    scale = np.abs(Q).max()
    keys = np.round(Q / scale, 8)
    _, inv = np.unique(keys, axis=0, return_inverse=True)
    return canonical_labels(inv.reshape(-1))


def _perm_matrix(p: Sequence[int]) -> np.ndarray:
    n = len(p)
    M = np.zeros((n, n))
    M[np.asarray(p), np.arange(n)] = 1.0
    return M


def parity_group(n: int) -> Any:
    """S(evens) x S(odds): all permutations of the even positions and of the odd positions (§5.2 negated variant)."""
    from symkit.groups import Group

    gens = []
    for start in (0, 1):
        idx = list(range(start, n, 2))
        if len(idx) >= 2:
            cyc = list(range(n))
            for a, b in zip(idx, idx[1:] + idx[:1]):
                cyc[a] = b
            gens.append(_perm_matrix(cyc))
            sw = list(range(n))
            sw[idx[0]], sw[idx[1]] = idx[1], idx[0]
            gens.append(_perm_matrix(sw))
    if not gens:
        gens = [np.eye(n)]
    return Group(discrete_generators=gens, name=f"S_even x S_odd ({n})")


def known_groups(n: int) -> list[Any]:
    """Candidate permutation groups on n positions, most symmetric first: S(n), Z(n), parity, trivial."""
    from symkit.groups import S, Trivial, Z

    out = [S(n), Z(n)]
    if n >= 3:
        out.append(parity_group(n))
    out.append(Trivial(n))
    return out


@dataclass
class ImpliedGroup:
    """The best-matching known symmetry: its name, the group object (None for a non-group scheme) and the PD."""

    name: str
    group: Any
    partition_distance: int
    exact: bool


def implied_group(labels: Any, shape: tuple[int, ...], candidates: Sequence[Any] | None = None) -> ImpliedGroup:
    """Name the symmetry a discovered sharing implies.

    ``shape=(L,)``: tied parameter blocks over L positions (invariance, ``kind="vector"``).
    ``shape=(n, n)``: a square weight (equivariance, ``kind="hom"``). ``shape=(K_out, K_in)`` with ``K_out < K_in``
    is checked against the valid cross-correlation (Toeplitz) scheme, which is shift-tied but not a group action.
    Returns the candidate with the smallest partition distance (``exact`` iff it is 0).
    """
    lab = canonical_labels(labels)
    if int(np.prod(shape)) != lab.size:
        raise ValueError(f"labels cover {lab.size} entries but shape {shape} has {int(np.prod(shape))}")
    results: list[ImpliedGroup] = []
    if len(shape) == 2 and shape[0] < shape[1]:
        ks = shape[1] - shape[0] + 1
        d = partition_distance(lab, toeplitz_partition(shape[1], ks))
        results.append(ImpliedGroup(f"shift (valid cross-correlation, kernel {ks})", None, d, d == 0))
    else:
        if len(shape) == 1:
            n, kind = shape[0], "vector"
        elif len(shape) == 2 and shape[0] == shape[1]:
            n, kind = shape[0], "hom"
        else:
            raise ValueError(f"shape must be (L,) or (n, n) or (K_out, K_in) with K_out < K_in, got {shape}")
        for G in candidates if candidates is not None else known_groups(n):
            d = partition_distance(lab, group_sharing(G, kind))
            results.append(ImpliedGroup(G.name, G, d, d == 0))
    best = min(results, key=lambda r: r.partition_distance)  # stable: the most symmetric of equal matches
    return best


def value_partition_matches(W: Any, labels: Any) -> bool:
    """True iff the partition by equal entries of W coincides with ``labels`` (a check on a refit tied weight)."""
    return partition_distance(partition_by_value(W), labels) == 0
