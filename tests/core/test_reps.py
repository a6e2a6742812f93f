"""The representation algebra: sizes, equality, canonical forms, rho/drho rules of Table 2.1, mixed groups, errors."""

import numpy as np
import pytest
import scipy.linalg
import torch
from core_strategies import rep_exprs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symkit.groups import SL, SO, SU, O, S, SO13p, Sp, Z
from symkit.reps import CustomRep, PseudoScalar, Scalar, SumRep, T, V


def test_sizes_and_constructors():
    G = SO(3)
    assert T(2, 1, G).size == 27
    assert T(0, 0, G) == Scalar
    assert (V(G) + V(G) ** 2).size == 12
    assert (3 * V(G)).size == 9 and (V(G) * 3).size == 9
    assert (0 * V(G)).size == 0
    assert (V(G) >> V(G) ** 2).size == 27
    assert T(2)(G) == V(G) ** 2
    assert (V**2 + V)(G) == V(G) ** 2 + V(G)
    assert (2 + V(G)).size == 5


def test_equality_hash_and_canonical_form():
    G = SO(3)
    a = V(G) ** 2 + V(G)
    b = V(G) + V(G) ** 2
    assert a != b and len({a, b, V(G) ** 2 + V(G)}) == 2
    ca, pa = a.canonicalize()
    cb, pb = b.canonicalize()
    assert ca == cb
    x = np.arange(12.0)
    # the same vector written in both layouts maps to the same canonical vector
    xa = np.concatenate([x[3:], x[:3]])  # layout of a: V**2 then V
    np.testing.assert_array_equal(xa[pa], x[pb])
    assert V(G) * 2 + V(G) == 3 * V(G)


def test_duals():
    assert V(SO(3)).T == V(SO(3))
    assert V(SL(3)).T != V(SL(3)) and V(SL(3)).T.T == V(SL(3))
    G = SO13p()
    g = G.samples(1, seed=0)[0]
    np.testing.assert_allclose(V(G).T.rho(g), np.linalg.inv(g).T)
    A = G.lie_algebra[2]
    np.testing.assert_allclose(V(G).T.drho(A), -A.T)
    np.testing.assert_allclose(T(1, 2, G).T.rho(g), (V(G).T * V(G) ** 2).rho(g), atol=1e-12)
    assert T(1, 2, G).T == V(G).T * V(G) ** 2


GROUPS = [SO(3), O(2), S(4), Z(3), Sp(1), SO13p(), SL(2)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rho_is_a_homomorphism_and_drho_its_derivative(data):
    G = data.draw(st.sampled_from(GROUPS))
    rep = data.draw(rep_exprs(G))
    g1, g2 = G.samples(2, seed=data.draw(st.integers(0, 100)))
    np.testing.assert_allclose(rep.rho(g1 @ g2), rep.rho(g1) @ rep.rho(g2), atol=1e-8 * max(1, np.abs(g1).max()) ** 6)
    np.testing.assert_allclose(rep.rho(np.linalg.inv(g1)), np.linalg.inv(rep.rho(g1)), atol=1e-6)
    if len(G.lie_algebra):
        A = G.lie_algebra_samples(1, seed=1)[0]
        t = 1e-6
        fd = (rep.rho(scipy.linalg.expm(t * A)) - rep.rho(scipy.linalg.expm(-t * A))) / (2 * t)
        np.testing.assert_allclose(rep.drho(A), fd, atol=1e-5)
        # eq. 2.1: rho(exp(A)) = exp(d rho(A))
        np.testing.assert_allclose(rep.rho(scipy.linalg.expm(0.3 * A)), scipy.linalg.expm(0.3 * rep.drho(A)), atol=1e-8)


def test_hom_space_bases_are_equivariant_maps():
    G = SO(3)
    rin, rout = V(G) + Scalar, V(G) ** 2 + V(G)
    Q = (rin >> rout).equivariant_basis()
    assert Q.shape[1] == 3  # V->V**2: eps ; V->V: I ; 1->V**2: delta
    for g in G.samples(3, seed=0):
        for q in Q.T:
            W = q.reshape(rout.size, rin.size)
            np.testing.assert_allclose(rout.rho(g) @ W, W @ rin.rho(g), atol=1e-12)


def test_pseudoscalar_and_autodiff_drho():
    G = O(3)
    P = PseudoScalar(G)
    assert P.rho(np.diag([-1.0, 1, 1]))[0, 0] == -1
    np.testing.assert_array_equal(P.drho(G.lie_algebra[0]), np.zeros((1, 1)))
    assert T(3, 0, G).rank() == 0
    assert (V(G) ** 3 * P).rank() == 1  # the Levi-Civita tensor is an O(3) pseudotensor
    assert (V(G) * P).rank() == 0


def test_custom_rep_drho_by_jvp_matches_tensor_square():
    G = SO13p()
    sq = CustomRep(G, lambda M: torch.kron(M, M), 16, "Square")
    A = G.lie_algebra_samples(1, seed=0)[0]
    np.testing.assert_allclose(sq.drho(A), (V(G) ** 2).drho(A), atol=1e-12)
    g = G.samples(1, seed=0)[0]
    np.testing.assert_allclose(sq.rho(g), np.kron(g, g), atol=1e-12)
    assert sq.rank() == T(2, 0, G).rank() == 1
    assert (sq * V(G).T ** 2).rank(method="dense") == T(2, 2, G).rank() == 4


def test_mixed_group_reps():
    G1, G2 = SO(3), S(4)
    rep = V(G1) ** 2 * V(G2) ** 2
    assert rep.G.d == 12 and rep.size == 144
    assert rep.rank() == 1 * 2
    Q = rep.equivariant_basis()
    g = rep.G.samples(3, seed=0)
    for i in range(3):
        np.testing.assert_allclose(rep.rho(g[i]) @ Q, Q, atol=1e-12)
    # a rep of G1 lifts to G1 x G2 inside a sum
    mixed = V(G1) ** 2 + V(G1) * V(G2)
    assert mixed.rank() == 1
    with pytest.raises(ValueError, match="factor elements|no component|expected"):
        rep.rho(np.eye(rep.size))
    # interleaved factors are transposed to canonical order and back
    inter = V(G1) * V(G2) * V(G1)
    Qi = inter.equivariant_basis()
    assert Qi.shape[1] == 1
    for i in range(3):
        np.testing.assert_allclose(inter.rho(g[i]) @ Qi, Qi, atol=1e-12)


def test_bad_rep_input():
    with pytest.raises(ValueError, match="different groups"):
        V(SO(3)) + V(S(4))
    with pytest.raises(ValueError, match=">= 0"):
        -1 * V(SO(3))
    with pytest.raises(TypeError, match="multiplicity must be an int"):
        2.5 * V(SO(3))
    with pytest.raises(TypeError, match="int"):
        V(SO(3)) ** 1.5
    with pytest.raises(TypeError, match="int"):
        T(2.0, 0, SO(3))
    with pytest.raises(ValueError, match="not bound"):
        _ = V.size
    with pytest.raises(ValueError, match="not bound"):
        T(2).equivariant_basis()
    with pytest.raises(TypeError, match="Group"):
        V("SO(3)")
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        V(SO(3)).rho(np.eye(4))
    with pytest.raises(ValueError, match="unknown solver method"):
        V(SO(3)).rank(method="svd")
    with pytest.raises(ValueError, match="does not apply"):
        T(2, 0, SO(3)).rank(method="orbit")
    with pytest.raises(TypeError, match="Rep"):
        SumRep(["V"])


def test_complex_group_basis():
    G = SU(2)
    Q = T(2, 2, G).equivariant_basis()
    assert Q.shape == (16, 2)
    for g in G.samples(2, seed=0):
        np.testing.assert_allclose(T(2, 2, G).rho(g) @ Q, Q, atol=1e-12)
