"""Sharing schemes as partitions and assignment matrices (Yeh et al. 2022, §4 and §4.3).

A partition of a layer's weights is the other face of a group action: a permutation group acting on the entries
induces the partition into orbits (:func:`orbit_partition`), and a partition implies the group of permutations that
preserve it (:func:`equivariance_group`). Learned parameter sharing (``symkit.discover``) finds partitions; this module
is where they meet the actions.

A sharing scheme ties the ``K`` entries of a parameter vector ``theta = A psi`` (Eq. 5). Row ``i`` of the
row-stochastic assignment matrix ``A`` (``K x C``) picks the free parameter that feeds ``theta_i``, so a hard ``A``
is the same thing as a partition of ``{0, ..., K-1}`` into clusters ``C_k = {j | A[j, k] = 1}`` (Eq. 23).

Throughout, a partition is held as an integer *label array* of length ``K`` (``labels[j]`` is the cluster of ``j``).
Every public function that takes a partition accepts a label array, a (soft or hard, square or rectangular)
assignment matrix, a torch tensor of either, or a list of clusters; :func:`as_labels` does the conversion.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

try:  # torch is optional here: partitions are pure numpy
    import torch
except ImportError:  # pragma: no cover
    torch = None  # type: ignore[assignment]

__all__ = [
    "as_labels",
    "canonical_labels",
    "labels_to_assignment",
    "assignment_to_labels",
    "clusters",
    "n_clusters",
    "same_partition",
    "partition_distance",
    "bell_number",
    "stirling2",
    "set_partitions",
    "random_partition",
    "one_cluster",
    "identity_partition",
    "even_odd",
    "toeplitz_partition",
    "toeplitz_matrix",
    "circulant_partition",
    "deepsets_partition",
    "orbit_partition",
    "partition_by_value",
    "equivariance_group",
    "symmetric_difference_size",
]


def _to_numpy(x: Any) -> np.ndarray:
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def as_labels(partition: Any, name: str = "partition") -> np.ndarray:
    """Cluster labels (int64, length K) of ``partition``.

    Accepts a 1-D integer label array, a 2-D (soft or hard) assignment matrix ``K x C`` (each row is assigned to its
    argmax column, as in the paper's evaluation), or a sequence of clusters (iterables of indices covering
    ``0..K-1`` exactly once). Labels are returned as given (not canonicalised).
    """
    if isinstance(partition, (list, tuple)) and partition and all(
        isinstance(c, (set, frozenset, list, tuple)) for c in partition
    ):
        members = [int(i) for c in partition for i in c]
        k = len(members)
        if sorted(members) != list(range(k)) or any(len(c) == 0 for c in partition):
            raise ValueError(
                f"{name}: a list of clusters must be non-empty and cover 0..K-1 exactly once, got {partition!r}"
            )
        labels = np.empty(k, dtype=np.int64)
        for c_idx, c in enumerate(partition):
            for i in c:
                labels[int(i)] = c_idx
        return labels
    arr = _to_numpy(partition)
    if arr.ndim == 1:
        if arr.size == 0:
            raise ValueError(f"{name}: expected at least one element, got an empty label array")
        if arr.dtype.kind == "f":
            if not np.all(np.equal(np.mod(arr, 1), 0)):
                raise TypeError(f"{name}: a 1-D partition must hold integer labels, got values {arr!r}")
        elif arr.dtype.kind not in "iub":
            raise TypeError(f"{name}: expected integer labels or an assignment matrix, got dtype {arr.dtype}")
        return arr.astype(np.int64)
    if arr.ndim == 2:
        if arr.shape[0] == 0 or arr.shape[1] == 0:
            raise ValueError(f"{name}: assignment matrix must be non-empty, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}: assignment matrix has non-finite entries")
        return np.argmax(arr, axis=1).astype(np.int64)
    raise ValueError(
        f"{name}: expected a label array (K,), an assignment matrix (K, C) or a list of clusters, got shape {arr.shape}"
    )


def canonical_labels(partition: Any) -> np.ndarray:
    """Labels renumbered 0, 1, 2, ... in order of first appearance, so equal partitions have equal labels."""
    labels = as_labels(partition)
    mapping: dict[int, int] = {}
    out = np.empty_like(labels)
    for i, lab in enumerate(labels.tolist()):
        if lab not in mapping:
            mapping[lab] = len(mapping)
        out[i] = mapping[lab]
    return out


def n_clusters(partition: Any) -> int:
    """Number of non-empty clusters, rk(A) for a hard assignment matrix A."""
    return int(np.unique(as_labels(partition)).size)


def clusters(partition: Any) -> list[list[int]]:
    """The clusters as sorted index lists, ordered by their smallest element."""
    labels = canonical_labels(partition)
    out: list[list[int]] = [[] for _ in range(int(labels.max()) + 1)]
    for i, lab in enumerate(labels.tolist()):
        out[lab].append(i)
    return out


def labels_to_assignment(partition: Any, n_columns: int | None = None, dtype: Any = np.float64) -> np.ndarray:
    """Hard assignment matrix ``A`` (K x C) with ``A[j, k] = 1`` iff ``j`` is in cluster ``k`` (Eq. 23).

    Columns follow the canonical cluster order. ``n_columns`` pads with empty columns (e.g. ``K`` for the paper's
    square A); it must be at least the number of clusters.
    """
    labels = canonical_labels(partition)
    c = int(labels.max()) + 1
    if n_columns is None:
        n_columns = c
    if n_columns < c:
        raise ValueError(f"n_columns={n_columns} is smaller than the number of clusters {c}")
    A = np.zeros((labels.size, n_columns), dtype=dtype)
    A[np.arange(labels.size), labels] = 1
    return A


def assignment_to_labels(A: Any) -> np.ndarray:
    """Canonical labels of the row-argmax hardening of ``A`` (the paper's ``A_val[i, argmax_j A[i, j]] = 1``)."""
    arr = _to_numpy(A)
    if arr.ndim != 2:
        raise ValueError(f"A: expected a 2-D assignment matrix, got shape {arr.shape}")
    return canonical_labels(arr)


def same_partition(a: Any, b: Any) -> bool:
    """True iff ``a`` and ``b`` are the same partition (up to relabelling / column permutation)."""
    la, lb = canonical_labels(a), canonical_labels(b)
    return la.shape == lb.shape and bool(np.all(la == lb))


def partition_distance(a: Any, b: Any) -> int:
    """Partition distance (Gusfield 2002; paper Def. 3): fewest elements to move so the partitions coincide.

    Computed as ``K - max_matching`` where the matching pairs clusters of ``a`` with clusters of ``b`` to maximise the
    total overlap ``|C^a_i ∩ C^b_j|`` (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``). Accepts label
    arrays, soft or hard assignment matrices (row argmax) or cluster lists.
    """
    la, lb = as_labels(a, "a"), as_labels(b, "b")
    if la.shape != lb.shape:
        raise ValueError(f"partitions cover different sets: a has {la.size} elements, b has {lb.size}")
    _, ia = np.unique(la, return_inverse=True)
    _, ib = np.unique(lb, return_inverse=True)
    overlap = np.zeros((ia.max() + 1, ib.max() + 1), dtype=np.int64)
    np.add.at(overlap, (ia, ib), 1)
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    return int(la.size - overlap[rows, cols].sum())


# ---------------------------------------------------------------------------------------------- enumeration


@cache
def stirling2(n: int, k: int) -> int:
    """Stirling number of the second kind: partitions of n elements into exactly k non-empty clusters."""
    if n < 0 or k < 0:
        raise ValueError(f"stirling2 needs n, k >= 0, got n={n}, k={k}")
    if n == k:
        return 1
    if n == 0 or k == 0 or k > n:
        return 0
    return k * stirling2(n - 1, k) + stirling2(n - 1, k - 1)


def bell_number(n: int) -> int:
    """Bell number B_n, the number of partitions of n elements (the size of the brute-force search, §4.2)."""
    if n < 0:
        raise ValueError(f"bell_number needs n >= 0, got {n}")
    return sum(stirling2(n, k) for k in range(n + 1))


def set_partitions(k: int, n_clusters: int | None = None) -> Iterator[np.ndarray]:
    """All partitions of ``{0..k-1}`` as canonical label arrays (restricted growth strings).

    With ``n_clusters`` only those with exactly that many clusters. There are B_k of them in all (Bell number).
    """
    if k < 1:
        raise ValueError(f"set_partitions needs k >= 1, got {k}")
    labels = [0] * k

    def rec(i: int, m: int) -> Iterator[np.ndarray]:
        if i == k:
            if n_clusters is None or m == n_clusters:
                yield np.array(labels, dtype=np.int64)
            return
        if n_clusters is not None and m + (k - i) < n_clusters:
            return
        for lab in range(m + 1):
            if n_clusters is not None and lab == m and m >= n_clusters:
                continue
            labels[i] = lab
            yield from rec(i + 1, max(m, lab + 1))

    labels[0] = 0
    yield from rec(1, 1)


def random_partition(k: int, rank: int, rng: np.random.Generator | int | None = None,
                     method: str = "uniform") -> np.ndarray:
    """A random partition of ``k`` elements with exactly ``rank`` clusters (canonical labels).

    ``method="uniform"``: uniform over all S(k, rank) such partitions (Stirling recursion: element ``n`` is a new
    singleton with probability S(n-1, r-1)/S(n, r), else it joins one of the r clusters uniformly).
    ``method="fixed_rank"``: the reference code's generator for large K: the first ``rank`` indices are cluster
    heads and every other index joins a uniformly random head.
    """
    if not 1 <= rank <= k:
        raise ValueError(f"rank must be in 1..k={k}, got {rank}")
    rng = np.random.default_rng(rng)
    if method == "fixed_rank":
        labels = np.concatenate([np.arange(rank), rng.integers(0, rank, size=k - rank)])
        return canonical_labels(labels)
    if method != "uniform":
        raise ValueError(f"method must be 'uniform' or 'fixed_rank', got {method!r}")
    # Build backwards: decide for element n-1, n-2, ... whether it is a singleton of the remaining prefix.
    labels = np.empty(k, dtype=np.int64)
    singleton = np.zeros(k, dtype=bool)
    r = rank
    joins: list[int] = []
    for n in range(k, 0, -1):
        total = stirling2(n, r)
        if rng.random() < stirling2(n - 1, r - 1) / total:
            singleton[n - 1] = True
            r -= 1
        else:
            joins.append(n - 1)
    # Now assign forwards: singletons open new clusters, the rest join an existing one uniformly.
    opened = 0
    for i in range(k):
        if singleton[i]:
            labels[i] = opened
            opened += 1
        else:
            labels[i] = rng.integers(0, opened)
    return canonical_labels(labels)


# ---------------------------------------------------------------------------------------------- known schemes


def _check_size(k: int, name: str = "k") -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{name} must be a positive int, got {k!r}")


def one_cluster(k: int) -> np.ndarray:
    """Everything shared: full permutation invariance over the k slots (sum of numbers, §5.2)."""
    _check_size(k)
    return np.zeros(k, dtype=np.int64)


def identity_partition(k: int) -> np.ndarray:
    """No sharing, A = I."""
    _check_size(k)
    return np.arange(k, dtype=np.int64)


def even_odd(k: int) -> np.ndarray:
    """Two clusters by parity of the position (the negated sum-of-numbers variant, §5.2)."""
    _check_size(k)
    return canonical_labels(np.arange(k) % 2)


def toeplitz_matrix(kernel: Sequence[float], k_in: int) -> np.ndarray:
    """The ``(k_in - G + 1) x k_in`` valid cross-correlation matrix of ``kernel`` (Eq. 27): G[m, m + j] = g[j]."""
    g = np.asarray(kernel, dtype=np.float64)
    if g.ndim != 1 or g.size < 1:
        raise ValueError(f"kernel must be a non-empty 1-D sequence, got shape {g.shape}")
    _check_size(k_in, "k_in")
    if g.size > k_in:
        raise ValueError(f"kernel of size {g.size} is longer than the input k_in={k_in}")
    k_out = k_in - g.size + 1
    G = np.zeros((k_out, k_in))
    for m in range(k_out):
        G[m, m : m + g.size] = g
    return G


def toeplitz_partition(k_in: int, kernel_size: int) -> np.ndarray:
    """Sharing of a flattened valid cross-correlation matrix (App. E.1): one cluster per kernel tap, zeros one cluster.

    Example: ``k_in=3, kernel_size=2`` gives G = [[g0, g1, 0], [0, g0, g1]] and clusters {0, 4}, {1, 5}, {2, 3}.
    """
    _check_size(k_in, "k_in")
    _check_size(kernel_size, "kernel_size")
    if kernel_size > k_in:
        raise ValueError(f"kernel_size={kernel_size} exceeds k_in={k_in}")
    k_out = k_in - kernel_size + 1
    m, n = np.meshgrid(np.arange(k_out), np.arange(k_in), indexing="ij")
    d = n - m
    labels = np.where((d >= 0) & (d < kernel_size), d, kernel_size)
    return canonical_labels(labels.reshape(-1))


def circulant_partition(n: int) -> np.ndarray:
    """Sharing of a flattened n x n circulant matrix, C[i, j] = c[(j - i) mod n] (cyclic-shift equivariance)."""
    _check_size(n, "n")
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return canonical_labels(((j - i) % n).reshape(-1))


def deepsets_partition(n: int) -> np.ndarray:
    """Sharing of a flattened n x n permutation-equivariant layer lambda I + gamma 11^T: diagonal vs off-diagonal."""
    _check_size(n, "n")
    return canonical_labels((1 - np.eye(n, dtype=np.int64)).reshape(-1))


def partition_by_value(values: Any, decimals: int = 9) -> np.ndarray:
    """Partition of the flattened ``values`` by equality (after rounding): the sharing a ground-truth matrix implies."""
    v = np.round(_to_numpy(values).astype(np.float64).reshape(-1), decimals)
    _, inv = np.unique(v, return_inverse=True)
    return canonical_labels(inv)


def orbit_partition(perms_out: Sequence[Sequence[int]], perms_in: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """Orbits of the index pairs ``(m, n)`` of an ``M x N`` weight under permutation pairs (Eq. 3).

    ``perms_out[g]`` / ``perms_in[g]`` are the permutations ``pi_M`` / ``pi_N`` of generator ``g`` (as index arrays).
    ``W[m, n] = W[pi_M(m), pi_N(n)]`` for every generator iff W is constant on these orbits, i.e. iff ``x -> W x`` is
    equivariant to the group they generate. With ``perms_in=None`` the generators act on a single vector of length M
    (orbits of indices, invariance of a parameter vector). Labels index the row-major flattening of W.
    """
    pout = [np.asarray(p, dtype=np.int64) for p in perms_out]
    if not pout:
        raise ValueError("orbit_partition needs at least one generator")
    m = pout[0].size
    for p in pout:
        if p.shape != (m,) or sorted(p.tolist()) != list(range(m)):
            raise ValueError(f"perms_out must be permutations of 0..{m - 1}, got {p.tolist()}")
    if perms_in is None:
        n, pin = 1, [np.zeros(1, dtype=np.int64)] * len(pout)
    else:
        pin = [np.asarray(p, dtype=np.int64) for p in perms_in]
        if len(pin) != len(pout):
            raise ValueError(f"perms_in has {len(pin)} generators but perms_out has {len(pout)}")
        n = pin[0].size
        for p in pin:
            if p.shape != (n,) or sorted(p.tolist()) != list(range(n)):
                raise ValueError(f"perms_in must be permutations of 0..{n - 1}, got {p.tolist()}")
    parent = np.arange(m * n)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for po, pi in zip(pout, pin):
        src = np.arange(m * n)
        dst = (po[src // n] * n + pi[src % n]).tolist()
        for s, d in zip(src.tolist(), dst):
            rs, rd = find(s), find(d)
            if rs != rd:
                parent[max(rs, rd)] = min(rs, rd)
    return canonical_labels(np.array([find(i) for i in range(m * n)]))


# ---------------------------------------------------------------------------------------------- Claim 3


def equivariance_group(partition: Any, kind: str = "union") -> frozenset[tuple[int, ...]]:
    """The permutations of ``{0..K-1}`` a sharing scheme is equivariant to (Eq. 24), for small K.

    ``kind="union"`` reads Eq. 24 literally: the union over clusters C of the permutations that move only indices
    inside C. ``kind="young"`` is the group those generate (the Young subgroup, permutations preserving every
    cluster). Both contain the identity. Enumerates K! permutations, so K is limited to 8.
    """
    labels = canonical_labels(partition)
    k = labels.size
    if k > 8:
        raise ValueError(f"equivariance_group enumerates K! permutations; K={k} > 8 is too large")
    if kind not in ("union", "young"):
        raise ValueError(f"kind must be 'union' or 'young', got {kind!r}")
    out = set()
    for perm in itertools.permutations(range(k)):
        p = np.asarray(perm)
        if not np.all(labels[p] == labels):
            continue
        if kind == "union":
            moved = np.flatnonzero(p != np.arange(k))
            if moved.size and np.unique(labels[moved]).size > 1:
                continue
        out.add(perm)
    return frozenset(out)


def symmetric_difference_size(a: Any, b: Any, kind: str = "union") -> int:
    """|G^(1) Δ G^(2)| (Eq. 25) of the equivariance groups of two schemes; Claim 3: PD <= |Δ| <= (K! - 1) PD."""
    return len(equivariance_group(a, kind) ^ equivariance_group(b, kind))


def claim3_bounds(a: Any, b: Any) -> tuple[int, int]:
    """The Claim 3 bracket ``(PD, (K! - 1) PD)`` for |G^(1) Δ G^(2)|."""
    d = partition_distance(a, b)
    return d, (math.factorial(as_labels(a).size) - 1) * d


def iter_labels(partitions: Iterable[Any]) -> Iterator[np.ndarray]:
    """Canonical labels of each partition in ``partitions``."""
    for p in partitions:
        yield canonical_labels(p)
