"""Groups: generators define the right groups, flags, sampling, enumeration, products, bad input."""

import math

import numpy as np
import pytest
import scipy.linalg
from scipy.sparse.linalg import aslinearoperator

from symkit.groups import (
    GL,
    O11,
    O13,
    SL,
    SO,
    SO13,
    SU,
    C,
    Cube,
    D,
    DkeR3,
    Group,
    O,
    O2eR3,
    ProductGroup,
    RubiksCube,
    S,
    Scaling,
    SO2eR3,
    SO11p,
    SO13p,
    Sp,
    Trivial,
    U,
    Z,
    ZksZnxZn,
)

ETA = np.diag([1.0, -1, -1, -1])


def _omega(m):
    Om = np.zeros((2 * m, 2 * m))
    Om[:m, m:] = np.eye(m)
    Om[m:, :m] = -np.eye(m)
    return Om


@pytest.mark.parametrize(
    "G,form",
    [(SO(3), np.eye(3)), (O(4), np.eye(4)), (SO13p(), ETA), (SO13(), ETA), (O13(), ETA), (Sp(2), _omega(2)),
     (Sp(1), _omega(1)), (SO11p(), np.diag([1.0, -1])), (O11(), np.diag([1.0, -1]))],
)
def test_classical_groups_preserve_their_form(G, form):
    for A in G.lie_algebra:
        np.testing.assert_allclose(A.T @ form + form @ A, 0, atol=1e-12)
    for h in G.discrete_generators:
        np.testing.assert_allclose(h.T @ form @ h, form, atol=1e-12)
    for g in G.samples(4, seed=3):
        np.testing.assert_allclose(g.T @ form @ g, form, atol=1e-9 * np.abs(g).max() ** 2)


def test_lie_algebra_dimensions():
    assert len(SO(5).lie_algebra) == 10
    assert len(Sp(3).lie_algebra) == 3 * 7
    assert len(SU(3).lie_algebra) == 8
    assert len(U(3).lie_algebra) == 9
    assert len(SL(3).lie_algebra) == 8
    assert len(GL(3).lie_algebra) == 9
    assert len(SO13p().lie_algebra) == 6
    # the Lie algebra bases are linearly independent
    for G in (SO(5), Sp(3), SU(3), SL(3), SO13p()):
        M = G.lie_algebra.reshape(len(G.lie_algebra), -1)
        assert np.linalg.matrix_rank(M) == len(G.lie_algebra)


def test_special_unitary_samples():
    for g in SU(3).samples(4, seed=0):
        np.testing.assert_allclose(g.conj().T @ g, np.eye(3), atol=1e-10)
        assert abs(np.linalg.det(g) - 1) < 1e-9
    for A in SU(3).lie_algebra:
        assert abs(np.trace(A)) < 1e-14 and np.allclose(A, -A.conj().T)


def test_rotation_samples_have_det_one_and_O_reaches_both_components():
    dets = [np.linalg.det(g) for g in SO(3).samples(10, seed=0)]
    np.testing.assert_allclose(dets, 1.0, atol=1e-9)
    dets = np.round([np.linalg.det(g) for g in O(3).samples(40, seed=0)])
    assert set(dets) == {-1.0, 1.0}
    for G in (SL(3),):
        for g in G.samples(3, seed=0):
            assert abs(np.linalg.det(g) - 1) < 1e-8


@pytest.mark.parametrize(
    "G,order",
    [(Z(7), 7), (S(5), 120), (S(1), 1), (C(8), 8), (D(6), 12), (Cube(), 24), (ZksZnxZn(4, 3), 36), (Trivial(3), 1),
     (RubiksCube(), 43_252_003_274_489_856_000)],
)
def test_orders(G, order):
    assert G.is_finite
    assert G.order() == order


def test_flags():
    assert S(4).is_permutation and S(4).is_orthogonal and S(4).is_finite
    assert not SO(3).is_permutation and SO(3).is_orthogonal and not SO(3).is_finite
    assert not SO13p().is_orthogonal and not Sp(2).is_orthogonal and not SL(2).is_orthogonal
    assert SU(2).is_complex and not SU(2).is_orthogonal and SU(2).is_unitary
    assert C(4).is_finite and not C(4).is_permutation
    assert not Scaling(2).is_finite
    assert Cube().is_permutation and RubiksCube().is_permutation
    assert SO2eR3().d == 3 and O2eR3().d == 3 and DkeR3(6).is_finite and DkeR3(6).order() == 12


def test_elements_closed_and_distinct():
    els = D(4).elements()
    assert len(els) == 8
    keys = {np.round(e, 8).tobytes() for e in els}
    for a in els:
        for b in els:
            assert (np.round(a @ b, 8) + 0.0).tobytes() in {(np.round(e, 8) + 0.0).tobytes() for e in els}
    assert len(keys) == 8
    with pytest.raises(ValueError, match="Lie algebra"):
        SO(3).elements()


def test_uniform_sampling_of_finite_groups():
    g = S(3).samples(6000, seed=0)
    perms = np.argmax(g, axis=1)
    _, counts = np.unique(perms, axis=0, return_counts=True)
    assert len(counts) == 6
    assert counts.min() > 850 and counts.max() < 1150  # 6 sigma is about 170
    # large permutation groups: uniform through the stabiliser chain, always group elements
    R = RubiksCube()
    for h in R.samples(3, seed=1):
        assert np.allclose(h.sum(0), 1) and np.allclose(h.sum(1), 1)
    assert not np.allclose(R.samples(2, seed=1), R.samples(2, seed=2))


def test_samples_are_reproducible():
    np.testing.assert_array_equal(SO(3).samples(3, seed=5), SO(3).samples(3, seed=5))
    assert not np.allclose(SO(3).samples(3, seed=5), SO(3).samples(3, seed=6))


def test_reference_rubik_generators_generate_a_larger_group():
    ref = RubiksCube("reference")
    assert ref.is_permutation and ref.d == 48 and len(ref.discrete_generators) == 6
    assert ref.order() > RubiksCube().order()


def test_physical_rubik_turns_have_order_four_and_move_twenty_facets():
    for h in RubiksCube().discrete_generators:
        np.testing.assert_array_equal(np.linalg.matrix_power(h, 4), np.eye(48))
        assert not np.allclose(np.linalg.matrix_power(h, 2), np.eye(48))
        assert int(np.sum(np.diag(h) == 0)) == 20


def test_user_group_from_generators_and_linear_operators():
    flip = np.array([[0.0, 1.0], [1.0, 0.0]])
    G = Group(discrete_generators=[flip], name="Flip")
    assert G.d == 2 and G.is_permutation and G.order() == 2
    G2 = Group(discrete_generators=[aslinearoperator(flip)], name="Flip")
    np.testing.assert_array_equal(G2.discrete_generators, G.discrete_generators)
    rot = Group(lie_algebra=[np.array([[0.0, -1.0], [1.0, 0.0]])], name="Rot2")
    assert rot.is_orthogonal and not rot.is_finite
    g = rot.samples(2, seed=0)
    np.testing.assert_allclose(g[0] @ g[0].T, np.eye(2), atol=1e-12)


def test_bad_group_input():
    with pytest.raises(ValueError, match="expected"):
        Group(discrete_generators=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="not invertible"):
        Group(discrete_generators=[np.array([[1.0, 0], [0, 0]])])
    with pytest.raises(ValueError, match="dimension"):
        Group(discrete_generators=[np.eye(2)], lie_algebra=[np.zeros((3, 3))])
    with pytest.raises(ValueError, match="shape"):
        Group(discrete_generators=[np.eye(2), np.eye(3)])
    with pytest.raises(TypeError, match="int"):
        S(3.0)
    with pytest.raises(ValueError, match=">= 1"):
        SO(0)
    with pytest.raises(TypeError, match="int"):
        SO(3).samples(2.5)
    with pytest.raises(ValueError, match="variant"):
        RubiksCube("broken")
    with pytest.raises(ValueError, match="k must be 2 or 4"):
        ZksZnxZn(3, 3)


def test_product_group():
    P = SO(3) * S(4)
    assert isinstance(P, ProductGroup) and P.d == 12
    assert len(P.lie_algebra) == 3 and len(P.discrete_generators) == 2
    g = P.samples(3, seed=0)
    assert [f.shape for f in g.factors] == [(3, 3, 3), (3, 4, 4)]
    np.testing.assert_allclose(g[1], np.kron(g.factors[0][1], g.factors[1][1]))
    assert g[1].factors[0].shape == (3, 3)
    ZZ = Z(3) * Z(3)
    assert ZZ.is_permutation and ZZ.d == 9 and ZZ.order() == 9
    assert SO(3) * S(4) == SO(3) * S(4) and SO(3) * S(4) != S(4) * SO(3)


def test_equality_and_hash():
    assert SO(3) == SO(3) and hash(SO(3)) == hash(SO(3))
    assert SO(3) != O(3) and SO(3) != SO(4)
    assert len({SO(3), SO(3), O(3)}) == 2


def test_exp_of_algebra_is_in_group():
    A = np.einsum("k,kij->ij", np.array([0.3, -0.2, 0.5]), SO(3).lie_algebra)
    R = scipy.linalg.expm(A)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert math.isclose(np.linalg.det(R), 1.0, abs_tol=1e-12)
