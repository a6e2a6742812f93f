"""The anchor length-scales ω as hyperparameters: ∂L_η/∂log ω against finite differences, and online learning."""

import pytest
import torch
from torch import nn

from symkit.marglik import KroneckerLaplace, MarglikConfig, fit_kfac, prior_groups, train_marglik
from symkit.marglik.omega import omega_gradient, omega_parameters
from symkit.nn.relaxed import KLinear, RelaxedCNN, SparseConv2d, SparseFC2d


class _TwoLayers(nn.Module):
    """Two anchor layers with learnable ω, tanh, a linear head (smooth in ω, so central differences apply)."""

    def __init__(self, kind: str, gen: torch.Generator) -> None:
        super().__init__()
        if kind == "fc":  # S-FC: an ω for each side of each layer
            self.first = SparseFC2d(1, 2, 4, omega=0.8, learn_omega=True, generator=gen)
            self.second = SparseFC2d(2, 2, 4, stride=2, omega=1.3, learn_omega=True, generator=gen)
            width = 2 * 2 * 2
        else:
            self.first = SparseConv2d(1, 2, 4, omega=0.8, learn_omega=True, generator=gen)
            self.second = SparseConv2d(2, 2, 4, omega=1.3, learn_omega=True, generator=gen)
            width = 2 * 4 * 4
        self.head = KLinear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.second(torch.tanh(self.first(x)))).flatten(1))


def _setup(kind):
    gen = torch.Generator().manual_seed(0)
    model = _TwoLayers(kind, gen).double()
    x = torch.randn(10, 1, 4, 4, dtype=torch.float64, generator=gen)
    y = torch.randint(0, 3, (10,), generator=gen)
    batches = [(x[:6], y[:6]), (x[6:], y[6:])]
    groups = prior_groups(model, None, "tensor")
    log_delta = torch.linspace(-1.0, 1.0, len(groups), dtype=torch.float64)
    return model, batches, groups, log_delta


def _marglik(model, batches, groups, log_delta, mc_samples):
    curv = fit_kfac(model, batches, mc_samples=mc_samples, seed=3)
    return float(KroneckerLaplace(model, curv, groups).neg_log_marglik(log_delta))


@pytest.mark.parametrize("kind,mc_samples", [("fc", None), ("conv", None), ("fc", 2)])
def test_omega_gradient_matches_central_differences(kind, mc_samples):
    """∂L_η/∂log ω by autograd, both the two-pass omega_gradient and one graph through fit_kfac(differentiable=
    True), equals a central difference of L_η refitted at log ω ± h, to 1e-6 relative (float64)."""
    model, batches, groups, log_delta = _setup(kind)
    omegas = omega_parameters(model)
    assert len(omegas) == (4 if kind == "fc" else 2)
    og = omega_gradient(model, batches, groups, log_delta, mc_samples=mc_samples, seed=3)
    assert og.value == pytest.approx(_marglik(model, batches, groups, log_delta, mc_samples), rel=1e-12)
    curv = fit_kfac(model, batches, mc_samples=mc_samples, seed=3, differentiable=True)
    value = KroneckerLaplace(model, curv, groups).neg_log_marglik(log_delta)
    one_graph = torch.autograd.grad(value, list(omegas.values()))
    h = 1e-4
    for (name, p), g_graph in zip(omegas.items(), one_graph):
        values = []
        for step in (h, -2 * h, h):  # up, down, back (the fit needs gradients enabled)
            with torch.no_grad():
                p += step
            values.append(_marglik(model, batches, groups, log_delta, mc_samples))
        fd = (values[0] - values[1]) / (2 * h)
        assert abs(fd) > 1e-4, (name, fd)  # a real dependence, not a vanishing one
        assert float(og.grads[name]) == pytest.approx(fd, rel=1e-6), name
        assert float(g_graph) == pytest.approx(fd, rel=1e-6), name


def test_omega_gradient_of_the_relaxed_sfc_sconv_network_matches_central_differences():
    """The same for RelaxedCNN 'sfc+sconv' (ReLU, APS; no kink within ±h here): every S-FC and S-CONV length-scale
    to 1e-6, and exactly 0 for a basis on a 1x1 grid (one anchor on one pixel: Φ does not depend on ω)."""
    gen = torch.Generator().manual_seed(0)
    model = RelaxedCNN(1, 3, alpha=1, size=4, layer_type="sfc+sconv", combine="rms", seed=0,
                       sparse_kwargs={"learn_omega": True}).double()
    x = torch.randn(10, 1, 4, 4, dtype=torch.float64, generator=gen)
    y = torch.randint(0, 3, (10,), generator=gen)
    batches = [(x[:6], y[:6]), (x[6:], y[6:])]
    groups = prior_groups(model, None, "tensor")
    log_delta = torch.linspace(-1.0, 1.0, len(groups), dtype=torch.float64)
    og = omega_gradient(model, batches, groups, log_delta)
    grid = {n: m.n for n, m in model.named_modules() if hasattr(m, "log_omega")}
    h = 1e-4
    for name, p in omega_parameters(model).items():
        values = []
        for step in (h, -2 * h, h):
            with torch.no_grad():
                p += step
            values.append(float(KroneckerLaplace(model, fit_kfac(model, batches), groups).neg_log_marglik(log_delta)))
        fd = (values[0] - values[1]) / (2 * h)
        if grid[name.rpartition(".")[0]] == 1:
            assert float(og.grads[name]) == 0.0 and fd == 0.0, name
        else:
            assert float(og.grads[name]) == pytest.approx(fd, rel=1e-6), name


def test_omega_gradient_of_a_model_without_learnable_omega_is_empty():
    model, batches, groups, log_delta = _setup("conv")
    for m in model.modules():
        if hasattr(m, "log_omega") and m.log_omega is not None:
            m.log_omega.requires_grad_(False)
    og = omega_gradient(model, batches, groups, log_delta)
    assert og.grads == {} and og.value == pytest.approx(_marglik(model, batches, groups, log_delta, None))
    with pytest.raises(TypeError, match="read twice"):
        omega_gradient(model, iter(batches), groups, log_delta)


def _log_omegas(model):
    return {n: float(p.detach()) for n, p in omega_parameters(model).items()}


def _data(n=32, size=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=gen)
    return torch.randn(n, 1, size, size, generator=gen) + 0.5 * (2 * y - 1).view(-1, 1, 1, 1), y


def test_online_marglik_training_learns_omega_as_a_hyperparameter():
    x, y = _data()
    cfg = dict(n_epochs=4, burnin=2, frequency=2, n_hypersteps=5, batch_size=16, lr=0.05, mc_samples=2)

    def model():
        return RelaxedCNN(1, 2, alpha=1, size=8, layer_type="sfc+sconv", combine="rms", seed=0,
                          sparse_kwargs={"learn_omega": True})

    # MAP mode (no updates): ω is a hyperparameter, so the MAP loss leaves it at its initial value
    m0 = model()
    start = _log_omegas(m0)
    train_marglik(m0, x, y, MarglikConfig(**{**cfg, "burnin": 10}))
    assert _log_omegas(m0) == start
    # online updates at epochs 2 and 4 move every log ω, one Adam step each (|Δ| <= lr_omega)
    m1 = model()
    res = train_marglik(m1, x, y, MarglikConfig(**cfg, lr_omega=0.1))
    updates = [r for r in res.history if "log_omega" in r]
    assert [r["epoch"] for r in updates] == [2, 4]
    end = _log_omegas(m1)
    assert set(end) == set(start) and len(end) == 3 * len(m1.layers)  # S-FC (two sides) and S-CONV per layer
    grid = {n: m.n for n, m in m1.named_modules() if hasattr(m, "log_omega")}
    for name in start:  # at most two Adam steps of about lr_omega; a basis on a 1x1 grid does not depend on ω
        moved = abs(end[name] - start[name])
        assert (moved == 0.0) if grid[name.rpartition(".")[0]] == 1 else (0.01 < moved < 0.25), (name, moved)
    assert updates[-1]["log_omega"] == end
    # the stored Laplace approximation is that of the final (θ, ω): a fresh fit (seed: config seed + epoch) agrees
    fresh = KroneckerLaplace(m1, fit_kfac(m1, [(x, y)], mc_samples=2, seed=4), res.groups)
    log_delta = res.log_prior_prec.detach()
    assert float(res.laplace.neg_log_marglik(log_delta)) == pytest.approx(float(fresh.neg_log_marglik(log_delta)),
                                                                         rel=1e-6)
