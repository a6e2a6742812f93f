"""The online marginal-likelihood training loop (Immer et al. 2021, Alg. 1) on a tiny relaxed network."""

import math

import pytest
import torch

from symkit.marglik import MarglikConfig, hyper_update_epochs, train_marglik
from symkit.marglik.kfac import fit_kfac
from symkit.marglik.laplace import KroneckerLaplace, map_penalty, prior_groups
from symkit.nn.relaxed import RelaxedCNN
from symkit.train import accuracy


def _data(n=48, size=8, seed=0):
    """Images whose mean is shifted by +-0.5 with the label: a translation-invariant rule the CONV path can learn."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=gen)
    x = torch.randn(n, 1, size, size, generator=gen) + 0.5 * (2 * y - 1).view(-1, 1, 1, 1)
    return x, y


def _majority(y):
    return float(torch.bincount(y).max()) / len(y)


def _model():
    return RelaxedCNN(1, 2, alpha=4, size=8, layer_type="ffc+conv", combine="rms", seed=0)


def test_update_schedule_follows_burnin_and_frequency():
    assert hyper_update_epochs(12, 4, 4) == [4, 8, 12]
    assert hyper_update_epochs(10, 10, 5) == [10]
    assert hyper_update_epochs(5, 6, 1) == []  # burn-in longer than training: plain MAP


@pytest.mark.parametrize("structure", ["tensor", "path", "scalar"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_map_penalty_is_half_the_precision_weighted_squared_norm_per_datum(structure, dtype):
    """½ Σ_g δ_g Σ_{θ ∈ g} |θ|² / N with δ = exp(log δ), summed here group by group; the gradient is δ_g θ / N."""
    model = _model().to(dtype)
    groups = prior_groups(model, None, structure)
    log_prec = torch.linspace(-1.0, 2.0, len(groups), dtype=torch.float64)
    params = dict(model.named_parameters())
    want = sum(math.exp(float(lp)) * sum(float(params[n].detach().double().square().sum()) for n in g.params)
               for lp, g in zip(log_prec, groups)) / (2 * 48)
    got = map_penalty(model, groups, log_prec, 48)
    assert got.dtype == dtype and got.shape == ()
    assert float(got.detach()) == pytest.approx(want, rel=1e-6 if dtype == torch.float32 else 1e-12)
    got.backward()
    for lp, g in zip(log_prec, groups):
        for n in g.params:
            torch.testing.assert_close(params[n].grad, math.exp(float(lp)) * params[n].detach() / 48)
    with torch.device("meta"):
        meta = _model()
    assert map_penalty(meta, prior_groups(meta, None, structure), log_prec.to("meta"), 48).device.type == "meta"
    with pytest.raises(ValueError, match="no parameters"):
        map_penalty(model, [], log_prec, 48)


def test_training_updates_precisions_on_schedule_and_ends_at_the_mackay_fixed_point():
    torch.manual_seed(0)
    x, y = _data()
    model = _model()
    cfg = MarglikConfig(n_epochs=6, burnin=3, frequency=3, n_hypersteps=300, lr=0.1, lr_hyp=0.1, batch_size=16,
                        optimizer="sgd", mc_samples=None)
    res = train_marglik(model, x, y, cfg)
    updated = [r["epoch"] for r in res.history if "neg_log_marglik" in r]
    assert updated == [3, 6] and len(res.hyper_seconds) == 2 and len(res.epoch_seconds) == 6
    assert res.history[-1]["train_acc"] >= _majority(y) + 0.2  # learned: the constant predictor scores 0.60
    assert not torch.allclose(res.log_prior_prec.detach(), torch.zeros_like(res.log_prior_prec))
    # after many steps on L_η at fixed θ and curvature, every group sits at d L_η / d log δ = 0, i.e. MacKay's
    # δ |θ|² = γ = Σ λ / (λ + δ); checked on the final Laplace fit, whose θ is the trained model's
    lap = res.laplace
    delta = res.log_prior_prec.detach().exp()
    gamma = lap.effective_parameters(res.log_prior_prec)
    lhs = delta * lap.theta_sq
    assert torch.allclose(lhs, gamma, rtol=0.05, atol=0.05 * float(gamma.max())), (lhs, gamma)


def test_laplace_of_the_trained_model_matches_a_fresh_fit():
    x, y = _data(32)
    model = _model()
    res = train_marglik(model, x, y, MarglikConfig(n_epochs=2, burnin=2, frequency=1, n_hypersteps=2,
                                                   batch_size=16, optimizer="sgd", lr=0.01, mc_samples=None))
    fresh = KroneckerLaplace(model, fit_kfac(model, [(x, y)]), res.groups)
    v1 = float(res.laplace.neg_log_marglik(res.log_prior_prec.detach()))
    v2 = float(fresh.neg_log_marglik(res.log_prior_prec.detach()))
    assert v1 == pytest.approx(v2, rel=1e-6)  # the stored approximation is that of the final θ
    assert accuracy(model, x, y) == pytest.approx(float((model(x).argmax(1) == y).float().mean()))


def test_bad_inputs_are_rejected_with_clear_errors():
    x, y = _data(8)
    model = _model()
    with pytest.raises(TypeError, match="MarglikConfig"):
        train_marglik(model, x, y, {"n_epochs": 1})
    with pytest.raises(ValueError, match="equally long"):
        train_marglik(model, x, y[:4], MarglikConfig(n_epochs=1))
    with pytest.raises(ValueError, match="optimizer must be 'adam' or 'sgd'"):
        train_marglik(model, x, y, MarglikConfig(n_epochs=1, optimizer="lbfgs"))
    # a burn-in longer than the run: plain training, no hyperparameter update and no Laplace fit
    res = train_marglik(model, x, y, MarglikConfig(n_epochs=1, burnin=2))
    assert math.isfinite(res.history[0]["loss"]) and "neg_log_marglik" not in res.history[0]
    assert res.laplace is None and res.hyper_seconds == []


def test_the_map_loss_uses_the_learned_precisions_after_each_update(monkeypatch):
    """Every step's prior term is ``map_penalty`` at the precisions of the latest hyperparameter update: the initial
    ones before the first update, the learned ones after it."""
    from symkit.marglik import training

    x, y = _data(32)
    model = _model()
    groups = prior_groups(model, None, "tensor")
    current = {"log_prec": torch.full((len(groups),), math.log(2.0), dtype=torch.float64)}
    seen = []

    class Spy(training.Trainer):
        def __init__(self, *args, penalty=None, **kwargs):
            def spy(m):
                value = penalty(m)
                want = map_penalty(m, groups, current["log_prec"], len(x))
                seen.append((float(value.detach()), float(want.detach())))
                return value
            super().__init__(*args, penalty=None if penalty is None else spy, **kwargs)

    def follow(epoch, entry):
        if "log_prior_prec" in entry:
            current["log_prec"] = torch.tensor(entry["log_prior_prec"], dtype=torch.float64)

    monkeypatch.setattr(training, "Trainer", Spy)
    cfg = MarglikConfig(n_epochs=3, burnin=1, frequency=1, n_hypersteps=50, lr=0.05, lr_hyp=0.1, batch_size=16,
                        prior_prec_init=2.0, optimizer="sgd", mc_samples=None)
    res = train_marglik(model, x, y, cfg, callback=follow)
    assert len(seen) == 3 * 2  # two batches of 16 per epoch, every step with its prior term
    torch.testing.assert_close(res.log_prior_prec.detach(), current["log_prec"])
    moved = (res.log_prior_prec.detach() - math.log(2.0)).abs().max()
    assert moved > 0.5, moved  # the updates moved the precisions far enough to tell them from the initial ones
    for got, want in seen:
        assert got == pytest.approx(want, rel=1e-6)
    initial = torch.full((len(groups),), math.log(2.0), dtype=torch.float64)
    final = float(map_penalty(model, groups, initial, len(x)).detach())
    assert seen[-1][0] != pytest.approx(final, rel=0.05)  # after the updates the term differs from the initial one
