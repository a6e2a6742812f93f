"""KFAC exactness, the Kronecker log-determinant, marginal-likelihood gradients, MacKay's fixed point, schedule."""

import math

import pytest
import torch
from torch import nn

from symkit.marglik import KroneckerLaplace, exact_ggn, fit_kfac, hyper_update_epochs, path_diagnostics, prior_groups
from symkit.nn.relaxed import FactoredFC2d, KLinear, RelaxedCNN, SparseFC2d, SpatialFC2d


class _Net(nn.Module):
    def __init__(self, first: nn.Module, width: int, k: int) -> None:
        super().__init__()
        self.first, self.head = first, KLinear(width, k)

    def forward(self, x):
        return self.head(torch.tanh(self.first(x)).flatten(1))


def _check_exact(model, x, y, names, likelihood):
    model = model.double()
    curv = fit_kfac(model, [(x, y)], likelihood=likelihood)
    params = dict(model.named_parameters())
    for name in names:
        ggn = exact_ggn(model, x, [params[name]], likelihood=likelihood)
        torch.testing.assert_close(curv.block(name).dense(), ggn, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("likelihood,k", [("regression", 1), ("classification", 4)])
def test_kfac_is_exact_for_one_datum_without_weight_sharing(likelihood, k):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 3, 3, dtype=torch.float64, generator=g)
    y = torch.randn(1, k, dtype=torch.float64) if likelihood == "regression" else torch.tensor([1])
    _check_exact(_Net(SpatialFC2d(2, 3, 3, generator=g), 27, k), x, y,
                 ["first.weight", "first.bias", "head.weight", "head.bias"], likelihood)
    # F-FC: θ₂ has no sharing when C = 1, θ₁ none when C' = 1 (App. C.1)
    _check_exact(_Net(FactoredFC2d(1, 3, 3, generator=g), 27, k), x[:, :1], y, ["first.theta2"], likelihood)
    _check_exact(_Net(FactoredFC2d(2, 1, 3, generator=g), 9, k), x, y, ["first.theta1", "first.bias1"], likelihood)
    # S-FC: the same with anchor values, through the basis projection (App. C.2)
    _check_exact(_Net(SparseFC2d(1, 2, 3, generator=g), 18, k), x[:, :1], y, ["first.u2"], likelihood)


def test_kfac_with_sharing_is_psd_and_differs_from_exact():
    g = torch.Generator().manual_seed(1)
    model = _Net(FactoredFC2d(2, 3, 3, generator=g), 27, 2).double()
    x = torch.randn(4, 2, 3, 3, dtype=torch.float64, generator=g)
    curv = fit_kfac(model, [(x, torch.randn(4, 2, dtype=torch.float64))], likelihood="regression")
    blk = curv.block("first.theta2")
    assert blk.A.shape == (2, 9, 9) and blk.G.shape == (3, 3)  # input factor block-diagonal over c, dim C·HW
    dense = blk.dense()
    assert torch.linalg.eigvalsh(dense).min() > -1e-10
    exact = exact_ggn(model, x, [model.first.theta2], likelihood="regression")
    assert (dense - exact).abs().max() > 1e-6  # the approximation is not exact with sharing over c


def test_log_det_posterior_precision_is_the_dense_kronecker_log_determinant():
    """symkit's log|G (x) A + delta I| from the factors' eigenvalues equals the dense log-determinant of each block's
    posterior precision, for per-group precisions (Kronecker identity, Immer et al. 2021 eq. 12)."""
    model, curv, groups, lap = _fitted(seed=4)
    gen = torch.Generator().manual_seed(5)
    log_delta = torch.randn(len(groups), dtype=torch.float64, generator=gen)
    group_of = {n: gi for gi, g in enumerate(groups) for n in g.params}
    dense = 0.0
    for block in curv.blocks:
        H = block.dense().double()
        delta = log_delta[group_of[block.name]].exp()
        dense = dense + torch.logdet(H + delta * torch.eye(H.shape[0], dtype=torch.float64))
    torch.testing.assert_close(lap.log_det_posterior_precision(log_delta), dense, rtol=1e-10, atol=1e-10)


def _fitted(seed=0, structure="tensor"):
    torch.manual_seed(seed)
    model = RelaxedCNN(1, 3, alpha=1, size=4, layer_type="ffc+conv", seed=seed).double()
    x = torch.randn(6, 1, 4, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (6,))
    curv = fit_kfac(model, [(x[:3], y[:3]), (x[3:], y[3:])])
    groups = prior_groups(model, curv, structure)
    return model, curv, groups, KroneckerLaplace(model, curv, groups)


def test_marglik_matches_dense_formula_and_its_gradient():
    model, curv, groups, lap = _fitted()
    log_delta = torch.linspace(-1.0, 1.0, len(groups), dtype=torch.float64, requires_grad=True)
    value = lap.neg_log_marglik(log_delta)
    value.backward()
    # dense reference: same blocks, explicit log-determinants
    delta = log_delta.detach().exp()
    params = dict(model.named_parameters())
    gi = {n: i for i, grp in enumerate(groups) for n in grp.params}
    ref = curv.nll
    grad = torch.zeros(len(groups), dtype=torch.float64)
    for b in curv.blocks:
        d = delta[gi[b.name]]
        H = b.dense() + d * torch.eye(b.numel, dtype=torch.float64)
        th2 = float(params[b.name].detach().pow(2).sum())
        ref = ref + 0.5 * d * th2 - 0.5 * b.numel * math.log(d) + 0.5 * torch.logdet(H)
        # dL/dlogδ = δ [½|θ|² − P/(2δ) + ½ tr(H⁻¹)]
        grad[gi[b.name]] += d * (0.5 * th2 - 0.5 * b.numel / d + 0.5 * torch.linalg.inv(H).trace())
    torch.testing.assert_close(value.detach(), torch.as_tensor(float(ref) / curv.n_data, dtype=torch.float64),
                               rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(log_delta.grad, grad / curv.n_data, rtol=1e-8, atol=1e-10)


def test_mackay_fixed_point_and_effective_parameter_bounds():
    model, curv, groups, lap = _fitted(1, "path")
    log_delta = torch.zeros(len(groups), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_delta], lr=1.0, max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-15)

    def closure():
        opt.zero_grad()
        loss = lap.neg_log_marglik(log_delta)
        loss.backward()
        return loss

    opt.step(closure)
    gamma = lap.effective_parameters(log_delta)
    delta = log_delta.detach().exp()
    torch.testing.assert_close(delta * lap.theta_sq, gamma, rtol=1e-5, atol=1e-7)  # δ_l |θ_l|² = γ_l
    assert bool(((gamma >= 0) & (gamma <= lap.sizes)).all())
    larger = lap.effective_parameters(log_delta.detach() + 1.0)
    assert bool((larger < gamma).all())  # γ decreases with δ
    rows = path_diagnostics(lap, log_delta)
    for layer in {r["layer"] for r in rows}:
        assert sum(r["relative"] for r in rows if r["layer"] == layer) == pytest.approx(1.0, abs=1e-12)


def test_path_switched_off_by_large_precision():
    model, curv, groups, lap = _fitted(2, "path")
    log_delta = torch.zeros(len(groups), dtype=torch.float64)
    fc = [i for i, g in enumerate(groups) if g.symmetry == "fc"]
    log_delta[fc] = 30.0
    gamma = lap.effective_parameters(log_delta)
    assert float(gamma[fc].sum()) < 1e-6
    rows = path_diagnostics(lap, log_delta)
    assert all(r["relative"] < 1e-6 for r in rows if r["path"] == "ffc")


def test_mc_curvature_is_unbiased_for_the_output_factor():
    g = torch.Generator().manual_seed(3)
    model = _Net(SpatialFC2d(1, 2, 2, generator=g), 8, 3).double()
    x = torch.randn(5, 1, 2, 2, dtype=torch.float64, generator=g)
    y = torch.randint(0, 3, (5,))
    exact = fit_kfac(model, [(x, y)]).block("head.weight").G
    mc = fit_kfac(model, [(x, y)], mc_samples=4000, seed=0).block("head.weight").G
    torch.testing.assert_close(mc, exact, rtol=0.1, atol=0.02 * float(exact.abs().max()))


def test_schedule_matches_the_paper():
    assert len(hyper_update_epochs(4000, 10, 5)) == 799
    assert hyper_update_epochs(4000, 10, 5)[:2] == [10, 15]
    assert hyper_update_epochs(100, 101, 5) == []


def test_bad_arguments():
    model, curv, groups, lap = _fitted()
    with pytest.raises(ValueError, match="log_prior_prec"):
        lap.neg_log_marglik(torch.zeros(len(groups) + 1))
    with pytest.raises(ValueError, match="likelihood"):
        fit_kfac(model, [], likelihood="poisson")
    with pytest.raises(ValueError, match="prior structure"):
        prior_groups(model, curv, "layer")
    with pytest.raises(ValueError, match="no layers with a curvature rule"):
        fit_kfac(nn.Tanh(), [(torch.zeros(1, 3), torch.tensor([0]))])


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_linear_kfac_agrees_with_asdl():
    import asdl
    import torch.nn.functional as F

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).double()
    ours = nn.Sequential(KLinear(5, 4), nn.Tanh(), KLinear(4, 3)).double()
    ours.load_state_dict(net.state_dict())
    x, y = torch.randn(7, 5, dtype=torch.float64), torch.randint(0, 3, (7,))
    cfg = asdl.FisherConfig(fisher_type="fisher_exact", fisher_shapes=["kron"], loss_type="cross_entropy",
                            data_size=7)
    fm = asdl.get_fisher_maker(net, cfg)
    dummy = fm.setup_model_call(net, x)
    fm.setup_loss_call(F.cross_entropy, dummy, y)
    fm.forward_and_backward()
    curv = fit_kfac(ours, [(x, y)])
    for i in (0, 2):
        blk, kron = curv.block(f"{i}.weight"), net[i].fisher.kron
        torch.testing.assert_close(blk.A[0], kron.A, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(blk.G, 7 * kron.B, rtol=1e-10, atol=1e-12)  # ASDL reports the per-datum Fisher



def test_factored_path_scale_symmetry_leaves_marglik_unchanged():
    # θ₁ → cθ₁, (θ₂, b₂) → (θ₂, b₂)/c keeps the function; with δ₁ → δ₁/c², δ₂ → δ₂c² the Laplace evidence is the
    # same, so per-tensor priors can keep an F-FC path on by moving its scale into one factor (docs/marglik.md)
    model, curv, groups, lap = _fitted(4, "tensor")
    log_delta = torch.linspace(-0.5, 1.5, len(groups), dtype=torch.float64)
    before = lap.neg_log_marglik(log_delta)
    c = 3.0
    ffc = model.layers[0].paths["ffc"]
    with torch.no_grad():
        ffc.theta1.mul_(c)
        ffc.theta2.div_(c)
        ffc.bias2.div_(c)
    shift = {"theta1": -2.0, "theta2": 2.0, "bias2": 2.0}
    shifted = log_delta.clone()
    for i, grp in enumerate(groups):
        prefix, _, tensor = grp.params[0].rpartition(".")
        if prefix == "layers.0.paths.ffc":
            shifted[i] += shift.get(tensor, 0.0) * math.log(c)
    torch.manual_seed(4)  # the data of _fitted(4)
    RelaxedCNN(1, 3, alpha=1, size=4, layer_type="ffc+conv", seed=4)
    x = torch.randn(6, 1, 4, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (6,))
    curv2 = fit_kfac(model, [(x[:3], y[:3]), (x[3:], y[3:])])
    torch.testing.assert_close(curv2.nll, curv.nll, rtol=1e-12, atol=1e-12)  # same function, same data
    after = KroneckerLaplace(model, curv2, prior_groups(model, curv2, "tensor")).neg_log_marglik(shifted)
    torch.testing.assert_close(after, before, rtol=1e-10, atol=1e-10)
    assert abs(float(lap.neg_log_marglik(shifted) - before)) > 1e-3  # the shift alone does change it



@pytest.mark.parametrize("likelihood,k", [("regression", 2), ("classification", 3)])
def test_plain_torch_layers_get_exact_kfac_through_forward_hooks(likelihood, k):
    """Any model built from nn.Linear gets curvature blocks (hooks, as in asdl/BackPACK); for one datum KFAC is the
    exact GGN (no weight sharing)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, k)).double()
    x = torch.randn(1, 4, dtype=torch.float64)
    y = torch.randn(1, k, dtype=torch.float64) if likelihood == "regression" else torch.tensor([2])
    _check_exact(model, x, y, ["0.weight", "0.bias", "2.weight", "2.bias"], likelihood)
    assert not model[0]._forward_hooks  # the hooks are removed after the fit


def test_a_circular_nn_conv2d_has_the_curvature_of_the_relaxed_conv():
    from symkit.nn.relaxed import EquivConv2d

    g = torch.Generator().manual_seed(2)
    ours = _Net(EquivConv2d(2, 3, 4, generator=g), 48, 3).double()
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular").double()
    with torch.no_grad():
        conv.weight.copy_(ours.first.weight)
        conv.bias.copy_(ours.first.bias)
    plain = _Net(conv, 48, 3)
    plain.head = ours.head
    x = torch.randn(5, 2, 4, 4, dtype=torch.float64, generator=g)
    y = torch.tensor([0, 1, 2, 1, 0])
    a, b = fit_kfac(ours, [(x, y)]), fit_kfac(plain, [(x, y)])
    for name in ("first.weight", "first.bias", "head.weight"):
        torch.testing.assert_close(a.block(name).dense(), b.block(name).dense(), rtol=1e-10, atol=1e-12)


def test_the_marginal_likelihood_of_a_plain_torch_model_reads_like_laplace_torch():
    from symkit.marglik import LaplaceApproximation

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(2 * 16, 3)).double()
    x = torch.randn(12, 1, 4, 4, dtype=torch.float64)
    y = torch.randint(3, (12,))
    la = LaplaceApproximation(model, "classification").fit([(x[:6], y[:6]), (x[6:], y[6:])])
    assert [g.name for g in la.groups] == ["0.weight", "0.bias", "3.weight", "3.bias"]
    value = la.log_marginal_likelihood(1.0)
    direct = KroneckerLaplace(model, fit_kfac(model, [(x, y)]), prior_groups(model, None, "tensor"))
    torch.testing.assert_close(value, direct.log_marginal_likelihood(torch.zeros(4, dtype=torch.float64)))
    best = la.optimize_prior_precision(steps=200, lr=0.1)
    assert best.shape == (4,) and bool((best > 0).all())
    assert float(la.log_marginal_likelihood(best)) > float(value)  # the optimised precisions explain the data better
    with pytest.raises(ValueError, match="one per group"):
        la.log_marginal_likelihood(torch.ones(3))
    with pytest.raises(RuntimeError, match="call fit"):
        LaplaceApproximation(model).log_marginal_likelihood(1.0)
    with pytest.raises(ValueError, match="finite and positive"):
        la.log_marginal_likelihood(torch.tensor([1.0, 0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="positive"):
        la.log_marginal_likelihood(float("inf"))
    with pytest.raises(TypeError, match="steps"):
        la.optimize_prior_precision(steps=2.5)


def _circular_patches(x, k, stride):
    """Brute-force patches of a circularly padded 'same' convolution: (N, R, C*k*k) by modular indexing."""
    n, c, h, w = x.shape
    half = k // 2
    rows = []
    for i in range(0, h, stride):
        for j in range(0, w, stride):
            rows.append(torch.stack([x[:, ci, (i + di) % h, (j + dj) % w] for ci in range(c)
                                     for di in range(-half, half + 1) for dj in range(-half, half + 1)], dim=1))
    return torch.stack(rows, dim=1)


def test_circular_conv_kfac_equals_a_brute_force_reference():
    """Both factors of circular convolutions (nn.Conv2d with padding_mode='circular', stride 1 and 2, and the
    relaxed EquivConv2d with APS) against G = Σ_{n,r} J_{n,r}ᵀ Λ_n J_{n,r} from per-output Jacobians and
    A = (1/NR) Σ a aᵀ from patches gathered index by index, over two batches (float64)."""
    from symkit.nn.relaxed import EquivConv2d

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"), nn.Tanh(),
                          EquivConv2d(3, 4, 6, stride=2), nn.Tanh(),
                          nn.Conv2d(4, 2, 3, stride=2, padding=1, padding_mode="circular"), nn.Tanh(),
                          nn.Flatten(), nn.Linear(2 * 4, 5)).double()
    x = torch.randn(7, 2, 6, 6, dtype=torch.float64)
    y = torch.randint(0, 5, (7,))
    curv = fit_kfac(model, [(x[:4], y[:4]), (x[4:], y[4:])])
    convs = {"0.weight": (model[0], 1), "2.weight": (model[2], 1), "4.weight": (model[4], 2)}
    captured = {}
    hooks = [m.register_forward_hook(lambda m, i, o, name=name: captured.__setitem__(name, (i[0], o)))
             for name, (m, _) in convs.items()]
    f = model(x)
    for h in hooks:
        h.remove()
    p = torch.softmax(f.detach(), -1)
    lam = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    for name, (_, stride) in convs.items():
        inp, out = captured[name]
        rows = []
        for n in range(len(x)):
            jac = torch.stack([torch.autograd.grad(f[n, j], out, retain_graph=True)[0][n] for j in range(5)])
            jac = jac.flatten(2).transpose(0, 2)  # (R, C', K)
            rows.append(jac @ lam[n] @ jac.transpose(1, 2))
        g_ref = torch.stack(rows).sum((0, 1))
        a = _circular_patches(inp.detach(), 3, stride)
        a_ref = torch.einsum("nrd,nre->de", a, a) / (a.shape[0] * a.shape[1])
        block = curv.block(name)
        torch.testing.assert_close(block.G, g_ref, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(block.A[0], a_ref, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(curv.block(name.replace("weight", "bias")).G, g_ref, rtol=1e-10, atol=1e-12)
        zero = torch.nn.functional.unfold(inp.detach(), 3, padding=1, stride=stride).transpose(1, 2)
        assert (torch.einsum("nrd,nre->de", zero, zero) / zero.shape[0] / zero.shape[1] - a_ref).abs().max() > 1e-2
