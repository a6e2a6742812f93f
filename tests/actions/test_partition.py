"""Partitions, assignment matrices and the partition distance (paper §4.3; notes §7.1)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.discover import (
    as_labels,
    bell_number,
    canonical_labels,
    circulant_partition,
    clusters,
    deepsets_partition,
    equivariance_group,
    even_odd,
    identity_partition,
    labels_to_assignment,
    n_clusters,
    one_cluster,
    orbit_partition,
    partition_by_value,
    partition_distance,
    random_partition,
    same_partition,
    set_partitions,
    stirling2,
    symmetric_difference_size,
    toeplitz_matrix,
    toeplitz_partition,
)


@st.composite
def partitions(draw, k=None, max_k=7):
    k = draw(st.integers(1, max_k)) if k is None else k
    return np.array(draw(st.lists(st.integers(0, k - 1), min_size=k, max_size=k)))


@st.composite
def partition_triples(draw):
    k = draw(st.integers(1, 7))
    return draw(partitions(k)), draw(partitions(k)), draw(partitions(k))


def brute_pd(a, b):
    """Fewest moves by trying every injective matching of clusters (tiny sizes only)."""
    ca, cb = [set(c) for c in clusters(a)], [set(c) for c in clusters(b)]
    if len(ca) < len(cb):
        ca, cb = cb, ca
    import itertools

    best = 0
    for perm in itertools.permutations(range(len(ca)), len(cb)):
        best = max(best, sum(len(ca[i] & cb[j]) for j, i in enumerate(perm)))
    return len(a) - best


@settings(max_examples=150, deadline=None)
@given(partition_triples())
def test_pd_is_a_metric(triple):
    a, b, c = triple
    assert partition_distance(a, a) == 0
    assert partition_distance(a, b) == partition_distance(b, a)
    assert partition_distance(a, c) <= partition_distance(a, b) + partition_distance(b, c)
    assert (partition_distance(a, b) == 0) == same_partition(a, b)
    assert 0 <= partition_distance(a, b) <= len(a) - 1


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6).flatmap(lambda k: st.tuples(partitions(k), partitions(k))))
def test_pd_matches_brute_force_matching(pair):
    a, b = pair
    assert partition_distance(a, b) == brute_pd(a, b)


@settings(max_examples=100, deadline=None)
@given(partitions(), st.randoms(use_true_random=False))
def test_pd_invariant_to_relabelling_and_column_permutation(a, rnd):
    k = len(a)
    relabel = list(range(k))
    rnd.shuffle(relabel)
    b = np.array(relabel)[a]
    assert partition_distance(a, b) == 0
    A = labels_to_assignment(a, n_columns=k)
    perm = list(range(k))
    rnd.shuffle(perm)
    assert partition_distance(A, A[:, perm]) == 0  # "A is unique up to permutations"
    # a soft matrix whose row argmax is A is the same partition
    soft = torch.softmax(torch.as_tensor(5.0 * A[:, perm]), 1)
    assert partition_distance(soft, a) == 0


@settings(max_examples=60, deadline=None)
@given(partitions())
def test_assignment_roundtrip(a):
    A = labels_to_assignment(a)
    assert np.all(A.sum(1) == 1)
    assert A.shape[1] == n_clusters(a) == np.linalg.matrix_rank(A)
    assert np.array_equal(canonical_labels(A), canonical_labels(a))
    assert np.array_equal(canonical_labels(clusters(a)), canonical_labels(a))


@pytest.mark.parametrize("L,pd_id_one,pd_id_eo,pd_one_eo", [(2, 1, 0, 1), (4, 3, 2, 2), (6, 5, 4, 3), (8, 7, 6, 4),
                                                             (10, 9, 8, 5)])
def test_known_distances(L, pd_id_one, pd_id_eo, pd_one_eo):
    assert partition_distance(identity_partition(L), one_cluster(L)) == pd_id_one
    assert partition_distance(identity_partition(L), even_odd(L)) == pd_id_eo
    assert partition_distance(one_cluster(L), even_odd(L)) == pd_one_eo


def test_bell_and_stirling_numbers():
    assert [bell_number(k) for k in range(2, 8)] == [2, 5, 15, 52, 203, 877]
    for k in range(1, 8):
        parts = list(set_partitions(k))
        assert len(parts) == bell_number(k)
        assert len({tuple(p) for p in parts}) == len(parts)  # all distinct
        for r in range(1, k + 1):
            assert sum(1 for _ in set_partitions(k, r)) == stirling2(k, r)


def test_random_partition_uniform_over_rank():
    rng = np.random.default_rng(0)
    counts: dict = {}
    n = 7000
    for _ in range(n):
        p = tuple(random_partition(4, 2, rng))
        counts[p] = counts.get(p, 0) + 1
    assert len(counts) == stirling2(4, 2) == 7
    # each of the 7 has probability 1/7: chi-square with 6 dof, 99.9% quantile 22.5
    chi2 = sum((c - n / 7) ** 2 / (n / 7) for c in counts.values())
    assert chi2 < 22.5
    fixed = random_partition(10, 3, rng, method="fixed_rank")
    assert n_clusters(fixed) == 3 and list(fixed[:3]) == [0, 1, 2]


def test_toeplitz_app_e1_example():
    G = toeplitz_matrix([2, 1], 3)
    assert np.array_equal(G, [[2, 1, 0], [0, 2, 1]])
    assert G.reshape(-1).tolist() == [2, 1, 0, 0, 2, 1]
    labels = toeplitz_partition(3, 2)
    assert clusters(labels) == [[0, 4], [1, 5], [2, 3]]
    assert partition_distance(labels, partition_by_value(G)) == 0
    assert toeplitz_partition(5, 3).size == 15 and toeplitz_partition(10, 3).size == 80


def test_toeplitz_matrix_is_shift_tied():
    G = toeplitz_matrix([1, 3, 5], 7)
    for m in range(G.shape[0] - 1):
        for n in range(G.shape[1] - 1):
            assert G[m, n] == G[m + 1, n + 1]  # Eq. 3 with shift pairs, away from the boundary


def test_demo_elementwise_distance_differs_but_pd_zero():
    """Notes §7.1 item 7: two assignment matrices of the same partition differ element-wise yet have PD 0."""
    A = labels_to_assignment(toeplitz_partition(3, 2), n_columns=6)
    B = A[:, [5, 3, 4, 0, 1, 2]]
    assert ((A - B) ** 2).sum() > 0
    assert partition_distance(A, B) == 0


def test_orbit_partition_matches_known_schemes():
    n = 5
    shift = np.roll(np.arange(n), 1)
    assert same_partition(orbit_partition([shift], [shift]), circulant_partition(n))
    transp = np.array([1, 0, 2, 3, 4])
    assert same_partition(orbit_partition([shift, transp], [shift, transp]), deepsets_partition(n))
    # invariance of a vector under S_n: one cluster; under the parity-preserving shift by two of a length-6 vector
    assert same_partition(orbit_partition([shift, transp]), one_cluster(n))
    assert same_partition(orbit_partition([np.roll(np.arange(6), 2)]), even_odd(6))


def test_claim3_exhaustive_small():
    """PD <= |G1 Δ G2| <= (K! - 1) PD for every pair of partitions, K = 2..5, both readings of Eq. 24."""
    for k in range(2, 6):
        parts = list(set_partitions(k))
        for kind in ("union", "young"):
            groups = [equivariance_group(p, kind) for p in parts]
            for i, a in enumerate(parts):
                for j, b in enumerate(parts):
                    pd = partition_distance(a, b)
                    diff = len(groups[i] ^ groups[j])
                    assert pd <= diff <= (math.factorial(k) - 1) * pd
    assert symmetric_difference_size(one_cluster(3), identity_partition(3)) == 5


def test_bad_input_raises():
    with pytest.raises(ValueError, match="different sets"):
        partition_distance([0, 1], [0, 1, 2])
    with pytest.raises(TypeError, match="integer labels"):
        as_labels(np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="cover"):
        as_labels([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="rank"):
        random_partition(3, 4)
    with pytest.raises(ValueError, match="kernel_size"):
        toeplitz_partition(2, 3)
    with pytest.raises(ValueError, match="permutations"):
        orbit_partition([[0, 0, 1]])
