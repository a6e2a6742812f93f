"""Solver paths agree, bases are invariant and orthonormal, projectors are lazy and right, the disk cache heals."""


import numpy as np
import pytest
from core_strategies import rep_exprs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symkit.groups import GL, O13, SL, SO, SU, C, D, O, RubiksCube, S, SO13p, Sp, U, Z, ZksZnxZn
from symkit.linalg import cache as disk
from symkit.reps import Scalar, T, V, clear_memory_cache
from symkit.reps import solve as solve_mod
from symkit.reps.core import canonical_counts
from symkit.reps.solve import segment_methods
from symkit.testing import assert_equivariant, assert_invariant_basis

PATH_CASES = [
    (S(4), 2, 0), (S(3), 4, 0), (Z(5), 3, 0), (ZksZnxZn(2, 2), 1, 1), (C(4), 3, 0), (D(3), 3, 0),
    (SO(3), 4, 0), (SO(2), 3, 0), (O(2), 4, 0), (SO(4), 4, 0), (Sp(1), 2, 2), (Sp(2), 4, 0),
    (SO13p(), 3, 1), (O13(), 2, 2), (SU(2), 2, 2), (SU(3), 3, 0), (U(2), 2, 2), (SL(2), 2, 2), (GL(2), 2, 1),
    (SO(3), 5, 0),
]


@pytest.mark.parametrize("G,p,q", PATH_CASES)
def test_every_applicable_path_gives_the_same_invariant_subspace(G, p, q):
    rep = T(p, q, G)
    leaves = canonical_counts(rep)[0][0]
    methods = segment_methods(G, leaves)
    ranks = {}
    bases = {}
    for m in methods:
        clear_memory_cache()
        ranks[m] = rep.rank(method=m)
        bases[m] = rep.equivariant_basis(method=m)
        assert bases[m].shape == (rep.size, ranks[m])
        assert_invariant_basis(bases[m], rep, tol=1e-9)
    assert len(set(ranks.values())) == 1, ranks
    ref = bases["dense"]
    for m, Q in bases.items():
        # same subspace: projectors agree
        np.testing.assert_allclose(Q @ Q.conj().T, ref @ ref.conj().T, atol=1e-8, err_msg=m)


def test_iterative_path_really_iterates_and_finds_large_ranks():
    # 3^6 = 729 dims, rank 15 > initial block: exercises the growing block
    rep = T(6, 0, SO(3))
    clear_memory_cache()
    Q = rep.equivariant_basis(method="iterative")
    assert Q.shape[1] == 15
    assert_invariant_basis(Q, rep, tol=1e-9)
    rep2 = T(4, 0, Z(4))  # 256 dims, rank 64: several doublings
    Q2 = rep2.equivariant_basis(method="iterative")
    assert Q2.shape[1] == 64 == rep2.rank(method="orbit")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_expressions_bases_are_invariant_and_paths_agree(data):
    G = data.draw(st.sampled_from([SO(3), O(2), S(4), Z(3), Sp(1), SO13p(), SU(2), C(3)]))
    rep = data.draw(rep_exprs(G, max_size=100))
    Q = rep.equivariant_basis()
    assert Q.shape == (rep.size, rep.rank())
    assert_invariant_basis(Q, rep, tol=1e-9)
    # every solver path that applies to all the blocks spans the same subspace, with the same rank
    P_auto = Q @ Q.conj().T
    compared = []
    for m in solve_mod.METHODS[1:]:
        clear_memory_cache()
        try:
            Qm = rep.equivariant_basis(method=m)
        except ValueError as exc:  # the path does not apply to some block of this rep
            assert "does not apply" in str(exc), exc
            continue
        assert Qm.shape == Q.shape and rep.rank(method=m) == Q.shape[1], m
        np.testing.assert_allclose(Qm @ Qm.conj().T, P_auto, atol=1e-8, err_msg=m)
        compared.append(m)
    assert {"dense", "iterative"} <= set(compared), compared
    P = rep.equivariant_projector()
    x = np.random.default_rng(0).standard_normal(rep.size)
    np.testing.assert_allclose(P @ x, Q @ (Q.conj().T @ x), atol=1e-10)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mixed_group_expressions(data):
    G1 = data.draw(st.sampled_from([SO(3), O(2)]))
    G2 = data.draw(st.sampled_from([S(3), Z(3)]))
    a = data.draw(rep_exprs(G1, max_size=9))
    b = data.draw(rep_exprs(G2, max_size=9))
    rep = a * b + (a * b).T
    Q = rep.equivariant_basis()  # with no group (a or b only scalars) every vector is invariant: rank = size
    assert Q.shape[1] == rep.rank() == 2 * a.rank() * b.rank()
    assert_invariant_basis(Q, rep, tol=1e-9)


def test_big_direct_sums():
    for G in (SO(3), S(6)):
        rep = 100 * V(G) + 30 * V(G) ** 2 + 10 * V(G) ** 3
        r1 = V(G).rank()
        assert rep.rank() == 100 * r1 + 30 * T(2, 0, G).rank() + 10 * T(3, 0, G).rank()
        Q = rep.equivariant_basis()
        assert_invariant_basis(Q, rep, tol=1e-9)
        hom = rep >> rep
        if G == SO(3):  # (840 x 840 maps; the S(6) maps are 3840 x 3840, too slow to check densely in CI)
            P = hom.equivariant_projector()
            W = P @ np.random.default_rng(1).standard_normal(hom.size)
            assert_equivariant(W.reshape(rep.size, rep.size), rep, rep)
        assert hom.rank() == sum(
            m1 * m2 * T(k1 + k2, 0, G).rank() for m1, k1 in [(100, 1), (30, 2), (10, 3)] for m2, k2 in
            [(100, 1), (30, 2), (10, 3)]
        )


def test_sparse_orbit_basis_for_permutation_groups():
    rep = T(3, 0, RubiksCube())
    Qs = rep.equivariant_basis(sparse=True)
    assert Qs.shape == (48**3, 51)
    vals = np.unique(np.round(Qs.data**-2))  # orbit sizes are integers
    assert np.allclose(vals, np.round(vals)) and vals.sum() > 0
    np.testing.assert_allclose((Qs.T @ Qs).toarray(), np.eye(51), atol=1e-12)


def test_trivial_groups_and_pickling():
    import pickle

    from symkit.groups import Group, Trivial

    assert T(2, 0, Trivial(3)).rank() == 9
    np.testing.assert_array_equal(T(2, 0, Trivial(3)).equivariant_basis(), np.eye(9))
    assert T(1, 1, Group(d=2)).rank() == 4
    for rep in (T(2, 1, SO13p()) + 3 * V(SO13p()), 3 * V(S(4)) * V(SO(3))):
        assert pickle.loads(pickle.dumps(rep)) == rep
    assert pickle.loads(pickle.dumps(RubiksCube("reference"))) == RubiksCube("reference")


def test_rank_of_scalar_and_zero_reps():
    assert Scalar.rank() == 1
    assert (0 * V(SO(3))).equivariant_basis().shape == (0, 0)
    assert (V(SO(3)) + Scalar).rank() == 1


_WRITER = """
import sys
import numpy as np
from symkit.linalg import cache
key = sys.argv[1]
arr = np.arange(50_000, dtype=float) * (1 + len(key))
for _ in range(20):
    cache.cache_put(key, arr)
"""


def test_disk_cache_concurrent_writers_and_corruption(tmp_path, monkeypatch):
    """Four processes write the same entry 20 times each at once: the entry is whole and no temporary file is left.
    The writers are plain subprocesses with a time limit (a multiprocessing pool that loses a task waits forever)."""
    import os
    import subprocess
    import sys

    monkeypatch.setenv("SYMKIT_CACHE_DIR", str(tmp_path))
    key = disk.cache_key("concurrency-test")
    env = {**os.environ, "SYMKIT_CACHE_DIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, key], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    for w in writers:
        out, _ = w.communicate(timeout=300)
        assert w.returncode == 0, out
    got = disk.cache_get(key)
    np.testing.assert_array_equal(got, np.arange(50_000, dtype=float) * (1 + len(key)))
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    # a corrupted entry is removed and reported missing
    (tmp_path / f"{key}.npz").write_bytes(b"garbage")
    assert disk.cache_get(key) is None
    assert not (tmp_path / f"{key}.npz").exists()


def test_solver_uses_and_rebuilds_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(solve_mod, "DISK_CACHE_MIN_SECONDS", 0.0)
    rep = T(3, 0, SO(3))
    clear_memory_cache()
    Q1 = rep.equivariant_basis(method="dense")
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1
    clear_memory_cache()
    np.testing.assert_array_equal(rep.equivariant_basis(method="dense"), Q1)
    files[0].write_bytes(b"\x93NUMPY broken")
    clear_memory_cache()
    Q3 = rep.equivariant_basis(method="dense")
    np.testing.assert_allclose(Q3 @ Q3.T, Q1 @ Q1.T, atol=1e-12)
    assert np.load(files[0])["payload"].shape == Q1.shape


def test_auto_uses_the_weight_path_above_dense_max(monkeypatch):
    from symkit.groups import Embed, SO2eR3

    monkeypatch.setattr(solve_mod, "DENSE_MAX", 100)
    G = SO2eR3()
    rep = T(5, 0, G)
    leaves = canonical_counts(rep)[0][0]
    assert solve_mod._pick(G, leaves, "auto") == "weight"
    clear_memory_cache()
    Q = rep.equivariant_basis()
    assert Q.shape[1] == rep.rank(method="dense") == rep.rank(method="iterative")
    assert_invariant_basis(Q, rep, tol=1e-9)
    # a finite group has no weight path
    with pytest.raises(ValueError, match="does not apply"):
        T(3, 0, Embed(C(4), 3, slice(0, 2))).rank(method="weight")


def test_auto_leaves_the_brauer_path_when_its_diagrams_are_many():
    """SO+(1,1) T(5,5) has 5,670 spanning diagrams (a dense 1024 x 5670 matrix and its Gram matrix: 41 s); its
    zero-weight space gives the same subspace in a fraction of a second. Few diagrams keep the Brauer path."""
    from symkit.groups import SO11p
    from symkit.reps.brauer import brauer_rank

    G = SO11p()
    many, few = T(5, 5, G), T(2, 2, G)
    assert solve_mod._pick(G, canonical_counts(many)[0][0], "auto") == "weight"
    assert solve_mod._pick(G, canonical_counts(few)[0][0], "auto") == "brauer"
    clear_memory_cache()
    Q = many.equivariant_basis()
    assert Q.shape[1] == brauer_rank(G, ["V"] * 5 + ["D"] * 5) == 252
    assert_invariant_basis(Q, many, tol=1e-9)
    P = many.equivariant_projector()
    v = np.random.default_rng(0).standard_normal(many.size)
    np.testing.assert_allclose(P @ v, Q @ (Q.T @ v), atol=1e-10)


@pytest.mark.parametrize("group_name,p,q", [
    ("SO(3)", 4, 0), ("SO(3)", 3, 0), ("O13()", 2, 2), ("Sp(2)", 4, 0), ("SO11p()", 2, 2), ("SU(2)", 2, 2),
])
def test_the_sparse_brauer_build_spans_what_the_dense_one_does(group_name, p, q, monkeypatch):
    """Above SPARSE_ABOVE entries the diagram matrix is built sparse and orthonormalised through its Gram matrix
    alone; forced on small cases, it gives the same invariant subspace as the dense build (projectors agree)."""
    from symkit import groups
    from symkit.reps import brauer

    G = eval(group_name, vars(groups))
    kinds = ["V"] * p + ["D"] * q
    diagrams = brauer.brauer_diagrams(G, kinds)
    dense = brauer._diagram_vectors(G, kinds, diagrams)
    np.testing.assert_array_equal(brauer._diagram_matrix_sparse(G, kinds, diagrams).toarray(), dense)
    Q_dense = brauer.brauer_basis(G, kinds)
    monkeypatch.setattr(brauer, "SPARSE_ABOVE", 0)
    Q_sparse = brauer.brauer_basis(G, kinds)
    assert Q_sparse.shape == Q_dense.shape
    np.testing.assert_allclose(Q_sparse.T @ Q_sparse, np.eye(Q_sparse.shape[1]), atol=1e-10)
    np.testing.assert_allclose(Q_sparse @ Q_sparse.T, Q_dense @ Q_dense.T, atol=1e-10)


def test_a_gram_rank_without_a_clear_gap_is_settled_exactly():
    """Eigenvalues 1 and 1e-9 (relative) are no clear gap: the integer Gram matrix goes to the modular rank."""
    from symkit.reps.brauer import _gram_rank

    big = 10**9
    gram = np.array([[big, big], [big, big + 1]], dtype=float)  # rank 2, smallest eigenvalue ~0.5 of ~2e9
    assert _gram_rank(gram) == 2
    assert _gram_rank(np.array([[4.0, 2.0], [2.0, 1.0]])) == 1
