"""Smoke tests of the core API (groups, reps, the three solver paths)."""

import numpy as np
import pytest

from symkit.groups import SO, SU, C, O, S, SO13p, Sp, Z
from symkit.reps import Scalar, T, V


@pytest.mark.parametrize(
    "G,p,q,r",
    [(SO(3), 2, 0, 1), (SO(3), 3, 0, 1), (O(3), 3, 0, 0), (S(4), 3, 0, 5), (Z(3), 3, 0, 9), (Sp(1), 4, 0, 2),
     (SU(2), 3, 1, 2), (SO13p(), 2, 2, 4), (C(3), 3, 0, 2)],
)
def test_rank_and_invariance(G, p, q, r):
    rep = T(p, q, G)
    Q = rep.equivariant_basis()
    assert Q.shape == (rep.size, r)
    assert rep.rank() == r
    np.testing.assert_allclose(Q.conj().T @ Q, np.eye(r), atol=1e-12)
    for g in G.samples(3, seed=1):
        if r == 0:
            break
        assert np.abs(rep.rho(g) @ Q - Q).max() < 1e-9 * max(1.0, np.abs(g).max() ** (p + q))


def test_hom_space_projector_matches_basis():
    G = SO(3)
    rep = 2 * V(G) + V(G) ** 2 + Scalar
    hom = rep >> rep
    Q = hom.equivariant_basis()
    P = hom.equivariant_projector()
    x = np.random.default_rng(0).standard_normal(hom.size)
    np.testing.assert_allclose(P @ x, Q @ (Q.T @ x), atol=1e-12)
