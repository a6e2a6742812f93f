"""symkit.reps.isotypic_decomposition: each object type of an orthogonal rep split into irreducible subspaces by an
orthogonal P, one basis per irrep across all the reps decomposed together, None where the irreps are not of real
type or the action is not orthogonal, and each type and pair of types decomposed once per process (a model asking
for one hidden rep in several layers)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import symkit.reps.isotypic as isotypic
from symkit.groups import SO, O, S, SO13p
from symkit.reps import ProductRep, Scalar, T, V, clear_memory_cache, isotypic_decomposition

TOL = 1e-10  # float64, relative to the largest entry of the matrix checked (at least 1)


def _type_rep(leaves: tuple):
    return Scalar if not leaves else leaves[0] if len(leaves) == 1 else ProductRep(list(leaves))


def _generators(G, rep) -> list[np.ndarray]:
    """The action of every discrete and Lie algebra generator of G, and of two random elements, on ``rep``."""
    return ([rep.rho(h) for h in G.discrete_generators] + [rep.drho(A) for A in G.lie_algebra]
            + [rep.rho(g) for g in G.samples(2, seed=0)])


def _irreducible_blocks(G, dec, td) -> list[list[np.ndarray]]:
    """Per generator, the diagonal blocks of ``P^T rho P`` at ``td``'s subspaces, after checking that ``P`` is
    orthogonal, that the subspaces tile the type by the stated irrep dimensions and that nothing lies outside them."""
    P = td.P
    d = P.shape[0]
    assert P.shape == (d, d) and np.abs(P.T @ P - np.eye(d)).max() < TOL
    starts = [j for j, _ in td.subspaces]
    sizes = [dec.irrep_dims[label] for _, label in td.subspaces]
    assert starts == list(np.cumsum([0, *sizes[:-1]])) and sum(sizes) == d
    mask = np.zeros((d, d), dtype=bool)
    for j, n in zip(starts, sizes):
        mask[j:j + n, j:j + n] = True
    blocks = []
    for M in _generators(G, _type_rep(td.leaves)):
        B = P.T @ M @ P
        assert np.abs(B[~mask]).max(initial=0.0) < TOL * max(np.abs(B).max(), 1.0)
        blocks.append([B[j:j + n, j:j + n] for j, n in zip(starts, sizes)])
    return blocks


O3, SO3, S4 = O(3), SO(3), S(4)


@pytest.mark.parametrize("G, reps, dims", [
    (O3, [V(O3)], {"V": [3]}),
    (O3, [T(2)(O3)], {"VV": [1, 3, 5]}),
    (O3, [T(2)(O3) + V(O3)], {"VV": [1, 3, 5], "V": [3]}),
    (O3, [T(3)(O3)], {"VVV": [1, 3, 3, 3, 5, 5, 7]}),
    (SO3, [V(SO3) + T(2)(SO3)], {"V": [3], "VV": [1, 3, 5]}),
    (S4, [V(S4)], {"V": [1, 3]}),
    (S4, [Scalar + T(2)(S4)], {"": [1], "VV": [1, 1, 2, 3, 3, 3, 3]}),
    (S4, [T(3)(S4)], {"VVV": [1] * 6 + [2] * 5 + [3] * 16}),
], ids=["O3-V", "O3-VV", "O3-T2+V", "O3-T3", "SO3-V+T2", "S4-V", "S4-Scalar+T2", "S4-T3"])
def test_each_type_is_turned_by_an_orthogonal_P_into_blocks_of_the_stated_irreps(G, reps, dims):
    dec = isotypic_decomposition(*reps)
    assert dec is not None
    found = {"V" * len(td.leaves): sorted(dec.irrep_dims[lab] for _, lab in td.subspaces) for td in dec.types}
    assert found == dims
    for td in dec.types:
        _irreducible_blocks(G, dec, td)  # orthogonal, tiled, block diagonal on every generator
        assert dec.of(td.leaves) is td


@pytest.mark.parametrize("G, reps, n_irreps", [
    # O(3): 0e (Scalar, VV), 1o (V x 4), 1e, 2e (VV), 0o, 2o, 3o (VVV): seven irreps
    (O3, [T(3)(O3) + V(O3), T(2)(O3) + Scalar], 7),
    # SO(3): the antisymmetric part of V (x) V is V itself: 0, 1, 2, 3
    (SO3, [T(3)(SO3) + V(SO3), T(2)(SO3) + Scalar], 4),
    # S(4): trivial, standard, the 2-dimensional one, sign (x) standard, sign
    (S4, [T(3)(S4) + V(S4), T(2)(S4) + Scalar], 5),
], ids=["O3", "SO3", "S4"])
def test_isomorphic_irreps_share_one_basis_across_types_and_reps(G, reps, n_irreps):
    """Every copy of an irrep, in any type of any of the reps, carries the action as the same matrices; copies of
    different irreps do not (they are told apart, no class is split in two)."""
    dec = isotypic_decomposition(*reps)
    assert dec is not None and len(dec.irrep_dims) == n_irreps
    first: dict[int, list[np.ndarray]] = {}
    copies = Counter()
    for td in dec.types:
        per_generator = _irreducible_blocks(G, dec, td)
        for k, (_, label) in enumerate(td.subspaces):
            mats = [blocks[k] for blocks in per_generator]
            ref = first.setdefault(label, mats)
            assert all(np.abs(a - b).max() < TOL * max(np.abs(b).max(), 1.0) for a, b in zip(mats, ref)), label
            copies[label] += 1
    assert sum(copies.values()) > n_irreps  # some irrep has copies in several places: the alignment was tested
    # distinct irreps: the characters on the generators and samples differ, or the dimensions do
    chars = {lab: (dec.irrep_dims[lab], tuple(np.round([np.trace(m) for m in mats], 6))) for lab, mats in first.items()}
    assert len(set(chars.values())) == n_irreps


@pytest.mark.parametrize("rep_of, why", [
    (lambda: V(SO(2)), "SO(2)'s rotations of the plane are of complex type"),
    (lambda: 120 * Scalar + 90 * V(SO(2)), "the same with scalars"),
    (lambda: V(SO13p()), "the Lorentz group does not act orthogonally"),
    (lambda: 32 * Scalar + 4 * V(SO13p()) + T(2)(SO13p()), "the same with scalars and tensors"),
], ids=["so2", "so2-sum", "lorentz", "lorentz-sum"])
def test_no_real_decomposition_where_the_irreps_are_complex_or_the_action_not_orthogonal(rep_of, why):
    """Reported as None, as the layers see it (they then keep the dense product); the real-type groups and the
    scalars of the same reps do decompose."""
    rep = rep_of()
    assert isotypic_decomposition(rep) is None, why
    assert isotypic_decomposition(V(SO(3)), 3 * Scalar) is not None


def test_the_answer_depends_on_the_reps_only_and_each_pair_of_types_is_aligned_once(monkeypatch):
    """The pieces are keyed by type and by pair of types, a pair in one canonical order: asking for the reps in the
    other order first, or not, gives the same arrays, and a pair asked both ways is aligned once."""
    G = O3
    a, b = T(2)(G) + V(G) + Scalar, T(3)(G) + V(G)
    clear_memory_cache()
    fresh = isotypic_decomposition(a, b)
    clear_memory_cache()
    aligned: Counter = Counter()
    align = isotypic._align_pair

    def counted(first, second):
        aligned[frozenset([tuple(map(repr, first)), tuple(map(repr, second))])] += 1
        return align(first, second)

    monkeypatch.setattr(isotypic, "_align_pair", counted)
    isotypic_decomposition(b, a)  # the pairs of types asked the other way round
    isotypic_decomposition(b)
    later = isotypic_decomposition(a, b)
    assert later is not fresh  # recomputed, not read back from the first call
    assert [td.subspaces for td in later.types] == [td.subspaces for td in fresh.types]
    assert all(np.array_equal(x.P, y.P) for x, y in zip(later.types, fresh.types))
    assert len(aligned) >= 3 and set(aligned.values()) == {1}, aligned


def test_building_an_emlp_decomposes_each_type_and_pair_of_types_once(monkeypatch):
    """EMLP(2 V, Scalar, O(3), ch=384, num_layers=3): two of its layers map the hidden rep to its gated form through
    the irreducible basis; its four object types, their pairs and the (hidden, gated) pair are each decomposed
    once, counted at the uncached computations."""
    from symkit.nn import EMLP, EquivariantLinear

    clear_memory_cache()
    calls: Counter = Counter()

    def counted(name):
        fn = getattr(isotypic, name)

        def wrapper(*args):
            calls[(name, tuple(tuple(map(repr, a)) if isinstance(a, tuple) else a for a in args))] += 1
            return fn(*args)
        return wrapper

    for name in ("_split_type", "_align_pair", "_assemble"):
        monkeypatch.setattr(isotypic, name, counted(name))
    model = EMLP(2 * V, Scalar, O3, ch=384, num_layers=3)
    irreducible = [m for m in model.modules() if isinstance(m, EquivariantLinear) and m.irrep_product is not None]
    assert len(irreducible) == 2
    split = sorted(args[0] for (name, args), _ in calls.items() if name == "_split_type")
    assert split == [(), ("V(O(3))",), ("V(O(3))",) * 2, ("V(O(3))",) * 3]
    assert sum(name == "_assemble" for name, _ in calls) == 1
    assert any(name == "_align_pair" for name, _ in calls)
    assert set(calls.values()) == {1}, {key: n for key, n in calls.items() if n > 1}
    clear_memory_cache()
