"""Ranks counted without solving: set partitions for S(n), Burnside for small permutation groups, the Schur-Weyl
count of the classical groups, the mean character of finite groups; each agrees with a solver, and orbit labels
that would not fit in memory are refused before anything is allocated."""

import numpy as np
import pytest

from symkit.groups import GL, SL, SO, SU, C, Cube, D, Group, O, RubiksCube, S, SO11p, SO13p, Sp, U, Z
from symkit.linalg import orbits as orbits_mod
from symkit.linalg.orbits import burnside_count, orbit_count, perm_closure, set_partition_count
from symkit.reps import T, V, clear_memory_cache
from symkit.reps import solve as solve_mod
from symkit.reps.brauer import brauer_rank, classical_rank
from symkit.reps.core import canonical_counts


@pytest.fixture
def tiny_label_memory(monkeypatch):
    """Orbit labels of more than 1 MB are refused, so a count that returns used no labels."""
    monkeypatch.setattr(orbits_mod, "ORBIT_MAX_BYTES", 1_000_000)
    clear_memory_cache()
    yield
    clear_memory_cache()


def test_set_partition_counts_are_the_stirling_sums():
    # Bell numbers where the blocks are unbounded; S(4, 1) + S(4, 2) = 1 + 7 with at most 2 blocks
    assert [set_partition_count(k, k) for k in range(8)] == [1, 1, 2, 5, 15, 52, 203, 877]
    assert set_partition_count(4, 2) == 8 and set_partition_count(3, 0) == 0 and set_partition_count(0, 0) == 1
    with pytest.raises(ValueError, match="k and blocks"):
        set_partition_count(-1, 2)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_symmetric_group_counts_agree_with_the_orbit_labels_and_the_solver(n):
    perms = S(n).perm_generators if n > 1 else np.zeros((0, 1), dtype=np.int64)
    for k in range(6):
        labels = orbit_count(perms, k)  # no order given: the labels
        assert labels == set_partition_count(k, n) == T(k, 0, S(n)).rank()
    assert T(2, 3, S(4)).rank() == set_partition_count(5, 4) == 51
    clear_memory_cache()
    assert T(3, 0, S(3)).rank(method="dense") == set_partition_count(3, 3) == 5


def test_s12_t9_rank_is_counted_without_orbit_labels(tiny_label_memory):
    """12^9 = 5.2e9 tuples (their labels would take about 190 GB): the rank is the set partition count."""
    assert T(9, 0, S(12)).rank() == set_partition_count(9, 12) == 21147  # the Bell number B_9 (9 <= 12 blocks)
    assert T(5, 4, S(12)).rank() == 21147
    # B_14 less the partitions into 13 blocks (one pair: C(14, 2) = 91) and into 14
    assert T(14, 0, S(12)).rank() == set_partition_count(14, 12) == 190_899_322 - 91 - 1


def test_the_basis_of_a_rep_too_large_to_index_is_refused_with_its_size():
    with pytest.raises(ValueError, match="size 5,159,780,352"):
        T(9, 0, S(12)).equivariant_basis()


def test_burnside_counts_agree_with_the_orbit_labels(monkeypatch, tiny_label_memory):
    cube = Cube()
    user = Group(discrete_generators=[np.eye(5)[[1, 0, 2, 3, 4]], np.eye(5)[[0, 1, 3, 4, 2]]], name="S2xZ3")
    expected = {}
    for G, k in [(Z(5), 4), (cube, 3), (user, 4)]:
        expected[G.name, k] = orbit_count(G.perm_generators, k)  # labels (small)
    monkeypatch.setattr(orbits_mod, "LABEL_MAX_TUPLES", 0)  # Burnside from here on
    for G, k in [(Z(5), 4), (cube, 3), (user, 4)]:
        elems = perm_closure(G.perm_generators, 1000)
        assert len(elems) == G.order()
        assert burnside_count(elems, k) == orbit_count(G.perm_generators, k, order=G.order()) == expected[G.name, k]
    # Z(12) T(9): only the identity fixes points, so 12^9 / 12 orbits
    assert T(9, 0, Z(12)).rank() == 12**8
    with pytest.raises(ArithmeticError, match="not the elements of a group"):
        burnside_count(np.array([[0, 1, 2], [1, 2, 0]]), 2)


def test_orbit_labels_above_the_memory_limit_are_refused_before_allocating(tiny_label_memory):
    """The Rubik's cube group is too large for Burnside: its T(4) needs the labels of 48^4 tuples."""
    with pytest.raises(ValueError, match=r"\[48\]\^4 \(5,308,416 tuples\).*ORBIT_MAX_BYTES"):
        T(4, 0, RubiksCube()).rank()
    with pytest.raises(ValueError, match="ORBIT_MAX_BYTES"):
        T(4, 0, RubiksCube()).equivariant_basis(sparse=True)


CLASSICAL = [SO(2), SO(3), SO(4), O(2), O(3), Sp(1), Sp(2), SO13p(), SO11p(), U(2), SU(2), SU(3), GL(2), SL(3)]


@pytest.mark.parametrize("G", CLASSICAL, ids=repr)
def test_the_schur_weyl_count_agrees_with_the_brauer_rank(G):
    form = G.brauer[0] == "form"
    for k in range(7):
        for p in ([k] if form else range(k + 1)):
            kinds = ["V"] * p + ["D"] * (k - p)
            assert classical_rank(G, kinds) == brauer_rank(G, kinds), (G, kinds)


def test_the_schur_weyl_count_of_known_cases():
    assert classical_rank(SO(3), ["V"] * 12) == 4213  # the Riordan number R_12
    assert classical_rank(O(3), ["V"] * 5) == 0 and classical_rank(SO(3), ["V"] * 5) == 6
    assert classical_rank(SO(2), ["V"] * 4) == 6  # weights +-1 summing to zero: C(4, 2)
    assert classical_rank(U(3), ["V"] * 4 + ["D"] * 4) == 23  # permutations of 4 with no decreasing run of 4
    assert classical_rank(SU(3), ["V"] * 3) == 1  # the determinant
    bad = Group(lie_algebra=[np.array([[0.0, 1.0], [0.0, 0.0]])], name="odd form")
    bad.brauer = ("form", np.array([[1.0, 2.0], [0.0, 1.0]]), False)
    assert classical_rank(bad, ["V", "V"]) is None


_W3 = Group(discrete_generators=[np.array([[np.exp(2j * np.pi / 3)]])], name="W3")  # Z_3 acting on C
FINITE = [T(4, 0, D(4)), T(3, 0, D(6)), T(2, 1, C(3)), T(3, 0, C(4)),
          T(2, 0, Group(discrete_generators=[np.array([[0.0, 1.0], [-1.0, 0.0]])], name="R4")),
          T(1, 1, _W3), T(2, 0, _W3), T(3, 0, _W3), T(2, 1, _W3)]  # complex: the dual's character differs


@pytest.mark.parametrize("rep", FINITE, ids=repr)
def test_the_mean_character_of_a_finite_group_is_the_solved_rank(rep):
    ((leaves, _),) = canonical_counts(rep)
    clear_memory_cache()
    assert solve_mod._independent_rank(leaves[0].G, leaves) == rep.rank(method="dense")


def test_no_count_for_groups_symkit_cannot_count():
    """An infinite discrete group, a Lie group without closed-form metadata, a custom slot of a Lie group."""
    from symkit.groups import SO2eR3
    from symkit.reps.core import PseudoScalar

    shear = Group(discrete_generators=[np.array([[1.0, 1.0], [0.0, 1.0]])], name="shear")
    for rep in (T(2, 0, shear), T(3, 0, SO2eR3()), PseudoScalar(O(3)) * V(O(3))):
        ((leaves, _),) = canonical_counts(rep)
        assert solve_mod._independent_rank(leaves[0].G, leaves) is None


def test_v_and_dual_slots_of_a_lorentz_group_count_alike():
    G = SO13p()
    clear_memory_cache()
    for p, q in [(2, 0), (1, 1), (2, 2), (3, 1)]:
        rep = T(p, q, G)
        ((leaves, _),) = canonical_counts(rep)
        assert solve_mod._independent_rank(G, leaves) == rep.rank(method="dense")
    assert V(G).rank() == 0
