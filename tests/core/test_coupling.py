"""The coupling path: SO(3) and O(3) invariant tensors from angular-momentum coupling, exact, orthonormal, and lazy
where a dense basis would not fit (T(12): 531,441 x 4,213)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.groups import SO, O
from symkit.linalg.operators import KronOp, KronSumOp
from symkit.nn import EquivariantLinear
from symkit.reps import T, V, solve
from symkit.reps.brauer import brauer_rank
from symkit.reps.coupling import CoupledInvariants, coupled_invariants, coupling_rank

#: OEIS A005043 (Riordan numbers): the number of SO(3) invariants of V^{⊗k}, k = 0..14
RIORDAN = [1, 0, 1, 1, 3, 6, 15, 36, 91, 232, 603, 1585, 4213, 11298, 30537]


def test_ranks_are_the_riordan_numbers_and_agree_with_the_brauer_ranks():
    assert [coupling_rank(k) for k in range(15)] == RIORDAN
    assert [coupling_rank(k, o3=True) for k in range(15)] == [r if k % 2 == 0 else 0 for k, r in enumerate(RIORDAN)]
    for k in range(1, 9):
        assert coupling_rank(k) == brauer_rank(SO(3), ["V"] * k)
        assert coupling_rank(k, o3=True) == brauer_rank(O(3), ["V"] * k)


@pytest.mark.parametrize("k", range(2, 8))
def test_the_basis_spans_the_brauer_invariants_and_is_orthonormal(k):
    G = SO(3)
    Q = coupled_invariants(G, k).to_dense()
    B = T(k, 0, G).equivariant_basis(method="brauer")
    assert Q.shape == B.shape
    assert np.abs(Q.T @ Q - np.eye(Q.shape[1])).max() < 1e-13
    assert np.abs(B @ (B.T @ Q) - Q).max() < 1e-12  # the same subspace
    for A in G.lie_algebra:
        assert np.abs(KronSumOp([A] * k).matmat(Q)).max() < 1e-13


def test_duals_and_o3_reflections():
    G = O(3)
    Q = (T(2, 2, G)).equivariant_basis(method="coupling")  # V* is V for an orthogonal group
    assert Q.shape == (81, 3)
    assert np.abs(Q - T(4, 0, G).equivariant_basis(method="coupling")).max() == 0.0
    for h in G.discrete_generators:
        assert np.abs(KronOp([h] * 4).matmat(Q) - Q).max() < 1e-13
    assert T(5, 0, G).equivariant_basis(method="coupling").shape == (243, 0)


def test_the_operator_and_its_transpose_are_adjoint_and_match_the_dense_matrix():
    Q = coupled_invariants(SO(3), 7)
    dense = Q.to_dense()
    rng = np.random.default_rng(0)
    c, x = rng.standard_normal((Q.shape[1], 3)), rng.standard_normal((Q.shape[0], 3))
    assert np.abs(Q @ c - dense @ c).max() < 1e-13
    assert np.abs(Q.T @ x - dense.T @ x).max() < 1e-13
    assert np.abs(Q.H @ x[:, 0] - dense.T @ x[:, 0]).max() < 1e-13


@settings(max_examples=25, deadline=None)
@given(k=st.integers(2, 9), seed=st.integers(0, 2**16))
def test_every_synthesised_tensor_is_rotation_invariant_and_keeps_its_norm(k, seed):
    """Q is an isometry onto invariants: |Q c| = |c| and R^{⊗k} Q c = Q c for a random rotation R = exp(A)."""
    G = SO(3)
    rng = np.random.default_rng(seed)
    Q = coupled_invariants(G, k)
    c = rng.standard_normal(Q.shape[1])
    y = Q @ c
    assert abs(np.linalg.norm(y) - np.linalg.norm(c)) < 1e-12 * max(1.0, np.linalg.norm(c))
    R = scipy.linalg.expm(np.tensordot(rng.standard_normal(3) * 2, G.lie_algebra, 1))
    assert np.abs(KronOp([R] * k).matvec(y) - y).max() < 1e-12 * max(1.0, np.abs(y).max())
    assert np.abs(Q.T @ y - c).max() < 1e-12 * max(1.0, np.abs(c).max())


def test_auto_takes_the_coupling_path_from_eleven_slots_and_twelve_stays_lazy():
    G = SO(3)
    assert solve._pick(G, (V(G),) * 10, "auto") == "brauer"
    assert solve._pick(G, (V(G),) * 11, "auto") == "coupling"
    rep = T(12, 0, G)
    assert rep.rank() == 4213 and T(13, 0, G).rank() == 11298 and T(12, 0, O(3)).rank() == 4213
    assert T(11, 0, O(3)).rank() == 0
    x = np.random.default_rng(0).standard_normal(rep.size)
    P = rep.equivariant_projector()
    y = P @ x
    assert np.abs(P @ y - y).max() < 1e-12  # a projector
    for A in G.lie_algebra:
        assert np.abs(KronSumOp([A] * 12).matvec(y)).max() < 1e-12  # onto invariants
    (pos, Q), = rep.structured_basis().parts
    assert isinstance(Q, CoupledInvariants) and Q.shape == (531441, 4213)
    with pytest.raises(ValueError, match="lazy operator .*17.9 GB"):
        rep.equivariant_basis()
    with pytest.raises(ValueError, match="EquivariantLinear: .*lazy operator"):
        EquivariantLinear(T(6, 0, G), T(6, 0, G))


def test_coupling_blocks_stay_lazy_until_a_matrix_is_asked_for_and_the_byte_limit_holds(monkeypatch):
    G = SO(3)
    sb = T(8, 0, G).structured_basis(method="coupling")
    (_, Q), = sb.parts
    assert isinstance(Q, CoupledInvariants)  # the projector applies the factors, no matrix is built
    dense = sb.to_dense()  # under the limit: made dense once, kept read-only by the operator
    assert dense.shape == (6561, 91) and not dense.flags.writeable and np.shares_memory(sb.to_dense(), dense)
    x = np.random.default_rng(1).standard_normal((sb.size, 2))
    assert np.abs(sb.project(x) - dense @ (dense.T @ x)).max() < 1e-12
    monkeypatch.setattr(solve, "LAZY_BASIS_BYTES", 6561 * 91 * 8 - 1)
    fresh = CoupledInvariants(G.lie_algebra, 8)
    with pytest.raises(ValueError, match="SYMKIT_LAZY_BASIS_BYTES"):
        solve.dense_block(fresh)
