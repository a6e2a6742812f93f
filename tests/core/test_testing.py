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


# ----------------------------------------------------------------------------- non-finite values and empty bases
def test_nan_outputs_and_weights_fail_loudly():
    G = SO(3)
    rep = V(G)
    with pytest.raises(AssertionError, match="non-finite"):
        assert_equivariant(lambda x: np.full_like(x, np.nan), rep, rep)
    with pytest.raises(AssertionError, match="non-finite"):
        assert_equivariant(lambda x: x * np.inf, rep, rep)
    W = np.eye(3)
    W[0, 1] = np.nan
    assert np.isnan(equivariance_error(W, rep, rep))
    with pytest.raises(AssertionError, match="non-finite"):
        assert_equivariant(W, rep, rep)
    with np.errstate(invalid="ignore"):
        assert np.isnan(function_equivariance_error(lambda x: np.log(x - x - 1), rep, rep))


def test_invariant_basis_check_rejects_nan_and_missing_columns():
    rep = T(2, 0, SO(3))
    Q = rep.equivariant_basis()
    bad = Q.copy()
    bad[0, 0] = np.nan
    with pytest.raises(AssertionError, match="non-finite"):
        assert_invariant_basis(bad, rep)
    with pytest.raises(AssertionError, match="columns, but the rank is 1"):
        assert_invariant_basis(np.zeros((9, 0)), rep)
    assert assert_invariant_basis(np.zeros((3, 0)), V(SO(3))) == 0.0  # rank 0: the empty basis is right


# ------------------------------------------------------------------ the tolerance scales with dtype and |rho(g)|
def _all_groups():
    from symkit.groups import GL, O13, SL, SO13, D, O, Sp, Z
    return [SO(2), O(2), SO(3), O(3), S(5), Z(5), D(4), Sp(2), SO13p(), SO13(), O13(), SL(2), GL(2)]


def _perturbed(model, rep_in, rep_out, size=1e-3):
    """model plus a fixed generic linear map of x scaled to `size` times the output's rms: 0.1% not equivariant."""
    A = torch.randn(rep_out.size, rep_in.size, generator=torch.Generator().manual_seed(1))

    def f(x):
        x = torch.as_tensor(x, dtype=torch.float32)
        with torch.no_grad():
            y = model(x)
        p = x @ A.T
        return y + size * y.pow(2).mean().sqrt() * p / p.pow(2).mean().sqrt()

    return f


@pytest.mark.parametrize("G", _all_groups(), ids=str)
def test_true_float32_models_pass_and_a_0_1_percent_perturbation_fails(G):
    from symkit.nn import EMLP

    torch.manual_seed(0)
    for rep_in, rep_out in [(2 * V(G) + Scalar, V(G)), (V(G) ** 2, V(G) ** 2)]:
        model = EMLP(rep_in, rep_out, G, ch=64, num_layers=2)
        assert next(model.parameters()).dtype == torch.float32
        assert assert_equivariant(model, rep_in, rep_out) < 1e-3
        with pytest.raises(AssertionError, match="not equivariant"):
            assert_equivariant(_perturbed(model, rep_in, rep_out), rep_in, rep_out)


@pytest.mark.parametrize("p", [3, 4])
def test_sp2_high_order_tensors_pass_in_float32(p):
    """|g| ~ 20 for Sp(2) samples: rho(g) on T(4) has norm ~1e5, so float32 rounding alone gives errors ~1e-2."""
    from symkit.groups import Sp
    from symkit.nn import EMLP

    G = Sp(2)
    torch.manual_seed(0)
    rep = T(p, 0, G)
    model = EMLP(rep, rep, G, ch=32, num_layers=1)
    # rounding is amplified by |rho(g)|: well above float32's epsilon, so a tolerance unaware of |rho(g)| (10 eps)
    # would reject this true model
    assert function_equivariance_error(model, rep, rep) > 10 * np.finfo(np.float32).eps
    assert_equivariant(model, rep, rep)


def test_large_lorentz_boosts_pass_and_small_outputs_cannot_hide_an_error():
    from scipy.linalg import expm

    from symkit.groups import O13
    from symkit.nn import EMLP

    G = O13()
    K = np.zeros((4, 4))
    K[0, 1] = K[1, 0] = 1.0
    boosts = np.stack([expm(r * K) @ G.samples(1, seed=i)[0] for i, r in enumerate([2.0, 3.0, 4.0])])
    assert np.linalg.norm(boosts[-1], 2) > 50
    torch.manual_seed(0)
    rep_in, rep_out = 2 * V(G) + Scalar, V(G)
    model = EMLP(rep_in, rep_out, G, ch=64, num_layers=2)
    assert_equivariant(model, rep_in, rep_out, elements=boosts)
    # a tiny output (1e-6 of the input scale) keeps a 0.1% error relative: the old rms(g - I) floor hid it
    tiny = lambda x: 1e-6 * model(torch.as_tensor(x, dtype=torch.float32)).detach()  # noqa: E731
    assert_equivariant(tiny, rep_in, rep_out)
    with pytest.raises(AssertionError, match="not equivariant"):
        assert_equivariant(_perturbed(tiny, rep_in, rep_out), rep_in, rep_out)


def test_tolerance_follows_the_dtype():
    from symkit.testing import default_tolerance

    assert default_tolerance(np.float32) == pytest.approx(64 * np.finfo(np.float32).eps)
    assert default_tolerance(torch.float64) == pytest.approx(64 * np.finfo(np.float64).eps)
    assert default_tolerance(np.float64, weights=True) == 1e-9
    G = SO(3)
    rep = V(G)
    lin = torch.nn.Linear(3, 3, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(torch.eye(3, dtype=torch.float64) * 2)
    assert_equivariant(lin, rep, rep)  # float64: the tolerance is 1.4e-14
    with torch.no_grad():
        lin.weight[0, 1] += 1e-9
    with pytest.raises(AssertionError):
        assert_equivariant(lin, rep, rep)  # 1e-9 is far above float64 rounding
