"""fit_with_marglik: seed 001's two training methods on a tiny relaxed network, with the closing Laplace fit of MAP."""

import math

import pytest
import torch

from symkit.marglik import KroneckerLaplace, MarglikConfig, fit_kfac, fit_with_marglik, omega_parameters
from symkit.nn.relaxed import RelaxedCNN
from symkit.train import batch_indices


def _data(n=48, size=8, seed=0):
    """Images whose mean is shifted by +-0.5 with the label (as in test_training.py)."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=gen)
    x = torch.randn(n, 1, size, size, generator=gen) + 0.5 * (2 * y - 1).view(-1, 1, 1, 1)
    return x, y


def _model(layer_type="ffc+conv", **sparse):
    return RelaxedCNN(1, 2, alpha=1, size=8, layer_type=layer_type, combine="rms", seed=0,
                      sparse_kwargs=sparse or None)


# burnin=1, frequency=1: two updates under "laplace"; "map" ignores the schedule
CONFIG = MarglikConfig(n_epochs=2, burnin=1, frequency=1, n_hypersteps=3, batch_size=16, marglik_batch_size=16,
                       mc_samples=2, prior_prec_init=2.0)


def _laplace_on(model, x, y, groups, config):
    """The closing fit rebuilt by hand: KFAC on ``(x, y)`` in batches of ``marglik_batch_size``."""
    model.eval()
    batches = [(x[b], y[b]) for b in batch_indices(len(x), config.marglik_batch_size)]
    return KroneckerLaplace(model, fit_kfac(model, batches, mc_samples=config.mc_samples, seed=config.seed), groups)


@pytest.mark.parametrize("max_batches", [None, 2])
def test_map_keeps_the_initial_precisions_and_closes_with_one_laplace_fit_on_at_most_max_batches(max_batches):
    x, y = _data()
    model = _model()
    seen = []

    def augment(xb, gen):
        seen.append(len(xb))
        return xb

    fit = fit_with_marglik(model, x, y, "map", config=CONFIG, augment=augment, max_batches=max_batches)
    res = fit.result
    torch.testing.assert_close(res.log_prior_prec.detach(), torch.full_like(res.log_prior_prec, math.log(2.0)))
    assert all("neg_log_marglik" not in h for h in res.history) and res.hyper_seconds == []  # no update
    # augment saw the θ steps' batches only, never the closing fit's (App. F.6)
    assert seen == [16] * (2 * (3 if max_batches is None else max_batches))
    n_fit = len(x) if max_batches is None else max_batches * CONFIG.marglik_batch_size
    assert res.laplace.n_data == n_fit
    assert math.isfinite(fit.neg_log_marglik)
    assert fit.neg_log_marglik == float(res.laplace.neg_log_marglik(res.log_prior_prec).detach())
    again = _laplace_on(model, x[:n_fit], y[:n_fit], res.groups, CONFIG)  # rebuilt by hand on the first n_fit data
    assert fit.neg_log_marglik == pytest.approx(float(again.neg_log_marglik(res.log_prior_prec).detach()), rel=1e-12)
    assert len(fit.rows) == 2 * 6 and {r["path"] for r in fit.rows} == {"ffc", "conv"}  # two paths, six layers


def test_laplace_reports_the_last_updates_fit_and_moves_the_precisions():
    x, y = _data()
    fit = fit_with_marglik(_model(), x, y, config=CONFIG)
    res = fit.result
    updates = [h for h in res.history if "neg_log_marglik" in h]
    assert [h["epoch"] for h in updates] == [1, 2] and len(res.hyper_seconds) == 2
    assert fit.neg_log_marglik == updates[-1]["neg_log_marglik"]
    assert not torch.allclose(res.log_prior_prec.detach(), torch.full_like(res.log_prior_prec, math.log(2.0)))


def test_map_trains_learnable_length_scales_with_theta():
    x, y = _data(n=32)
    model = _model("sfc+sconv", learn_omega=True)
    before = {n: float(p.detach()) for n, p in omega_parameters(model).items()}
    fit = fit_with_marglik(model, x, y, "map", config=CONFIG)
    after = {n: float(p.detach()) for n, p in omega_parameters(model).items()}
    assert any(after[n] != before[n] for n in before)  # trained on the MAP loss
    torch.testing.assert_close(fit.result.log_prior_prec.detach(),
                               torch.full_like(fit.result.log_prior_prec, math.log(2.0)))
    assert math.isfinite(fit.neg_log_marglik) and fit.result.laplace.n_data == 32


def test_bad_arguments_are_named():
    x, y = _data(n=8)
    with pytest.raises(ValueError, match="method.*'mle'"):
        fit_with_marglik(_model(), x, y, "mle", config=CONFIG)
    with pytest.raises(TypeError, match="MarglikConfig"):
        fit_with_marglik(_model(), x, y, config={"n_epochs": 2})
    with pytest.raises(ValueError, match="max_batches"):
        fit_with_marglik(_model(), x, y, config=CONFIG, max_batches=0)
    with pytest.raises(ValueError, match="equally long"):
        fit_with_marglik(_model(), x, y[:4], config=CONFIG)
