"""symkit.testing: the assertions accept equivariant objects and reject non-equivariant ones."""

import numpy as np
import pytest
import torch

from symkit.groups import SO, S, SO13p
from symkit.reps import Scalar, T, V, equivariance_error
from symkit.testing import assert_equivariant, assert_invariant_basis, function_equivariance_error


def test_equivariant_weight_passes_and_random_weight_fails():
    G = SO(3)
    rin, rout = V(G) + Scalar, V(G) ** 2
    Q = (rin >> rout).equivariant_basis()
    W = (Q @ np.random.default_rng(0).standard_normal(Q.shape[1])).reshape(rout.size, rin.size)
    err = assert_equivariant(W, rin, rout)
    assert err < 1e-12
    with pytest.raises(AssertionError, match="not equivariant"):
        assert_equivariant(np.random.default_rng(1).standard_normal(W.shape), rin, rout)
    assert equivariance_error(np.random.default_rng(1).standard_normal(W.shape), rin, rout) > 1e-2


def test_functions_and_torch_modules():
    G = S(4)
    rep = V(G)

    def deepsets(x):
        return 2 * x + x.sum(-1, keepdims=True)

    assert function_equivariance_error(deepsets, rep, rep) < 1e-12
    assert_equivariant(deepsets, rep, rep)
    lin = torch.nn.Linear(4, 4, bias=False)
    with pytest.raises(AssertionError):
        assert_equivariant(lin, rep, rep)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(4) * 3 + 1)
    assert_equivariant(lin, rep, rep, tol=1e-5)


def test_invariant_basis_check_rejects_a_wrong_basis_and_scales_for_noncompact_groups():
    G = SO13p()
    rep = T(2, 2, G)
    Q = rep.equivariant_basis()
    assert assert_invariant_basis(Q, rep) < 1e-9
    bad = np.linalg.qr(Q + 1e-3 * np.random.default_rng(0).standard_normal(Q.shape))[0]
    with pytest.raises(AssertionError, match="not invariant"):
        assert_invariant_basis(bad, rep)
    with pytest.raises(AssertionError, match="orthonormal"):
        assert_invariant_basis(2 * Q, rep)
    with pytest.raises(ValueError, match="shape"):
        assert_invariant_basis(Q[:5], rep)


def test_bad_shapes():
    G = SO(3)
    with pytest.raises(ValueError, match="expected"):
        equivariance_error(np.zeros((2, 2)), V(G), V(G))
    with pytest.raises(TypeError):
        equivariance_error(np.zeros((3, 3)), "V", V(G))
