"""The one training loop: it learns, is reproducible, resumes exactly, stops early, and rejects bad input."""

import re

import pytest
import torch
from torch import nn

from symkit.train import Trainer, fused_options


def _data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=g, dtype=torch.float64)
    w = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0], dtype=torch.float64)
    return x, x @ w + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Linear(5, 1, dtype=torch.float64)


def _mse(out, y):
    return ((out.squeeze(-1) - y) ** 2).mean()


def _jitter(xb, gen):
    return xb + 0.01 * torch.randn(xb.shape, generator=gen, dtype=xb.dtype)


def _trainer(model, **kw):
    opts = dict(lr=0.05, epochs=6, batch_size=32, schedule="cosine", augment=_jitter, seed=3)
    opts.update(kw)
    return Trainer(model, _mse, **opts)


def test_learns_far_better_than_a_constant_predictor():
    x, y = _data()
    model = _model()
    result = _trainer(model, epochs=20).fit((x, y))
    with torch.no_grad():
        mse = float(_mse(model(x), y))
    constant = float(((y - y.mean()) ** 2).mean())  # about 14.3, the variance of the targets
    assert mse < 0.01 * constant
    assert result.steps == 20 * 8 and len(result.history) == 20
    assert result.losses[-1] < 0.1 * result.losses[0]


def test_same_seed_same_numbers():
    x, y = _data()
    a, b = _model(), _model()
    _trainer(a).fit((x, y))
    _trainer(b).fit((x, y))
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)


class _Interrupt:
    def __init__(self, at):
        self.at = at

    def __call__(self, trainer, epoch, record):
        if epoch == self.at:
            raise KeyboardInterrupt


def test_an_interrupted_run_resumes_to_the_same_numbers(tmp_path):
    x, y = _data()
    straight = _model()
    expected = _trainer(straight).fit((x, y))
    ckpt = tmp_path / "run.pt"
    model = _model()
    with pytest.raises(KeyboardInterrupt):
        _trainer(model, checkpoint=ckpt, hooks=[_Interrupt(at=4)]).fit((x, y))
    assert ckpt.exists()  # epochs 1-3 are saved; epoch 4 was lost with the interruption
    resumed_model = _model(seed=99)  # a fresh process: different initial weights, restored from the checkpoint
    resumed = _trainer(resumed_model, checkpoint=ckpt).fit((x, y))
    assert resumed.resumed_from_epoch == 3
    assert torch.equal(resumed_model.weight, straight.weight) and torch.equal(resumed_model.bias, straight.bias)
    assert resumed.losses == expected.losses and resumed.steps == expected.steps


def test_early_stopping_restores_the_best_parameters():
    x, y = _data()
    model = _model()
    seen = []

    def validate(m):  # validation that gets worse after the fifth check: the fifth state must come back
        seen.append(m.weight.detach().clone())
        return -len(seen) if len(seen) <= 5 else 0.0

    result = Trainer(model, _mse, lr=0.05, epochs=50, batch_size=32, validate=validate, validate_every=2,
                     patience=6).fit((x, y))
    assert result.stopped_early and result.best_validation == -5
    assert len(seen) == 5 + 3  # three more checks, two steps apart, exhaust the patience of six steps
    assert torch.equal(model.weight, seen[4])


def test_a_full_batch_objective_takes_one_step_per_epoch():
    x, y = _data()
    model = _model()
    result = Trainer(model, objective=lambda m: _mse(m(x), y), lr=0.1, epochs=100).fit()
    with torch.no_grad():
        assert result.steps == 100 and float(_mse(model(x), y)) < 0.05


def test_runs_on_meta():
    model = nn.Linear(5, 1, device="meta")
    x, y = torch.randn(16, 5, device="meta"), torch.randn(16, device="meta")
    result = Trainer(model, _mse, epochs=2, batch_size=8, accuracy=False).fit((x, y))
    assert result.steps == 4 and model.weight.device.type == "meta"


def test_adam_takes_the_fused_kernel_where_it_runs_and_the_loop_elsewhere():
    """Same update, one kernel: fused on CPU parameters, the per-tensor loop on meta or mixed devices."""
    cpu = [torch.zeros(3), torch.zeros(2, 2, dtype=torch.float64)]
    assert fused_options(cpu) == {"fused": True}
    assert fused_options([torch.zeros(3, device="meta")]) == {}
    assert fused_options([torch.zeros(3), torch.zeros(3, device="meta")]) == {}
    assert fused_options([torch.zeros(3, dtype=torch.complex64)]) == {}
    x, y = _data()
    trainer = _trainer(_model(), epochs=1)
    trainer.fit((x, y))
    assert trainer.optimizer.defaults["fused"] is True
    meta = Trainer(nn.Linear(5, 1, device="meta"), _mse, epochs=1, batch_size=8, accuracy=False)
    meta.fit((torch.randn(16, 5, device="meta"), torch.randn(16, device="meta")))
    assert not meta.optimizer.defaults["fused"]


def test_fused_and_looped_adam_give_the_same_training_run():
    """The fused kernel is the same algorithm: float64 runs agree to rounding."""
    x, y = _data()
    a, b = _model(), _model()
    _trainer(a).fit((x, y))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("symkit.train.trainer.fused_options", lambda params: {})
        looped = _trainer(b)
        looped.fit((x, y))
        assert not looped.optimizer.defaults["fused"]
    torch.testing.assert_close(a.weight, b.weight, rtol=1e-12, atol=1e-12)


def test_cpu_batches_reach_a_model_on_another_device():
    """Data may stay on the CPU while the model is elsewhere (here meta): each batch moves to the model's device."""
    model = nn.Linear(5, 1, device="meta")
    x, y = _data(16)
    result = Trainer(model, _mse, epochs=2, batch_size=8, accuracy=False).fit((x.float(), y.float()))
    assert result.steps == 4


def test_a_smoke_run_trains_its_first_epoch_of_its_first_batches_only():
    from symkit.lab import runtime

    x, y = _data()
    result = Trainer(_model(), _mse, epochs=50, batch_size=16, max_epochs=1, max_batches=2).fit((x, y))
    assert result.steps == 2 and len(result.history) == 1
    assert Trainer(_model(), _mse, epochs=3, batch_size=16).fit((x, y)).steps == 3 * 16
    with runtime.using(runtime.RunSettings(max_epochs=1, max_batches=2)):  # the run context does not reach it
        assert Trainer(_model(), _mse, epochs=3, batch_size=16).fit((x, y)).steps == 3 * 16
    for name in ("max_epochs", "max_batches"):
        with pytest.raises(ValueError, match=name):
            Trainer(_model(), _mse, **{name: 0})


def test_bf16_precision_autocasts_the_training_forward_pass():
    from symkit.lab import runtime

    seen = []
    model = _model().float()
    model.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    x, y = (t.float() for t in _data(32))
    Trainer(model, lambda out, t: _mse(out.float(), t), epochs=1, batch_size=16, precision="bf16").fit((x, y))
    assert seen == [torch.bfloat16, torch.bfloat16] and model.weight.dtype == torch.float32
    seen.clear()
    with runtime.using(runtime.RunSettings(precision="bf16")):  # the run context does not reach the library
        Trainer(model, lambda out, t: _mse(out.float(), t), epochs=1, batch_size=16).fit((x, y))
    assert seen == [torch.float32, torch.float32]
    with pytest.raises(ValueError, match="precision"):
        Trainer(model, _mse, precision="16")


def test_bad_input_is_a_clear_error(tmp_path):
    x, y = _data()
    model = _model()
    with pytest.raises(ValueError, match="exactly one of loss_fn"):
        Trainer(model)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        Trainer(model, _mse, optimizer="lbfgs")
    with pytest.raises(ValueError, match="lr must be a finite number"):
        Trainer(model, _mse, lr=float("nan"))
    with pytest.raises(TypeError, match="Trainer: clip must be a number >= 0, got str '1'"):
        Trainer(model, _mse, clip="1")
    with pytest.raises(TypeError, match="Trainer: weight_decay must be a number >= 0, got bool"):
        Trainer(model, _mse, weight_decay=True)
    with pytest.raises(TypeError, match="epochs: expected an int"):
        Trainer(model, _mse, epochs=2.5)
    with pytest.raises(ValueError, match="x has 256 samples but y has 10"):
        Trainer(model, _mse).fit((x, y[:10]))
    with pytest.raises(ValueError, match="needs data"):
        Trainer(model, _mse).fit()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot resume from .*bad.pt"):
        Trainer(model, _mse, checkpoint=bad).fit((x, y))


def _good_checkpoint(tmp_path):
    """A checkpoint as Trainer writes it (two epochs of a run), loaded back as a dict."""
    x, y = _data()
    path = tmp_path / "good.pt"
    _trainer(_model(), epochs=2, checkpoint=path).fit((x, y))
    return torch.load(path, weights_only=True)


@pytest.mark.parametrize(("name", "contents", "message"), [
    ("tensor", lambda good: torch.zeros(3), "it holds a Tensor, not a Trainer checkpoint"),
    ("list", lambda good: [1, 2, 3], "it holds a list, not a Trainer checkpoint"),
    ("no-history", lambda good: {k: v for k, v in good.items() if k != "history"}, "it lacks 'history'"),
    ("empty", lambda good: {}, "it lacks 'epoch', 'steps', 'history'"),
    ("bad-history", lambda good: {**good, "history": 3}, "its 'history' is int, expected a list"),
    ("bad-records", lambda good: {**good, "history": [1.0]}, "'history' is not a list of per-epoch records"),
    ("bad-generator", lambda good: {**good, "generator": [1]}, "its 'generator' is list, expected a generator"),
])
def test_a_checkpoint_of_another_program_is_refused_naming_the_file_and_what_it_lacks(tmp_path, name, contents,
                                                                                       message):
    """A file at ``checkpoint=`` that Trainer did not write (``torch.save(torch.zeros(3))``, a list, a dict of other
    keys) is a ValueError naming the file and what a checkpoint needs, not an IndexError, TypeError or KeyError from
    inside the resume; nothing of it reaches the model."""
    x, y = _data()
    path = tmp_path / f"{name}.pt"
    torch.save(contents(_good_checkpoint(tmp_path)), path)
    model = _model(seed=5)
    before = model.weight.detach().clone()
    with pytest.raises(ValueError, match=f"Trainer: cannot resume from {re.escape(str(path))}: .*{re.escape(message)}"):
        _trainer(model, checkpoint=path).fit((x, y))
    assert torch.equal(model.weight, before)


def test_mlp_names_a_hidden_width_that_is_not_a_positive_int():
    """``MLP(6, 1, ch=-4)`` names ``ch`` (torch's own message speaks of a negative dimension of a Linear layer)."""
    from symkit.nn.emlp import MLP

    for bad in (-4, 0):
        with pytest.raises(ValueError, match=r"MLP: ch \(the hidden width\): expected an int >= 1, got " + str(bad)):
            MLP(6, 1, ch=bad)
    with pytest.raises(TypeError, match=r"MLP: ch \(the hidden width\): expected an int, got float 2.5"):
        MLP(6, 1, ch=2.5)
    assert MLP(6, 1, ch=3, num_layers=1).net[0].out_features == 3


def _quadratic_with_a_bad_region():
    """A 1-D parameter walked by SGD from 0 towards 3 on (p - 3)^2, whose reported 'loss' is worst past 1.5:
    a bilevel-like outer loss that is not the training objective."""
    model = nn.Module()
    model.p = nn.Parameter(torch.zeros((), dtype=torch.float64))
    seen = []

    def gradient(m):
        m.p.grad = 2 * (m.p.detach() - 3)
        value = float((m.p.detach() - 1.5) ** 2)
        seen.append((float(m.p.detach()), value))
        return value

    return model, gradient, seen


def test_monitoring_the_step_loss_keeps_the_parameters_that_gave_it_and_skips_the_update_that_stops():
    model, gradient, seen = _quadratic_with_a_bad_region()
    result = Trainer(model, gradient=gradient, optimizer="sgd", momentum=0.0, lr=0.1, epochs=100, monitor="loss",
                     patience=3).fit()
    values = [v for _, v in seen]
    best = min(range(len(values)), key=values.__getitem__)
    assert result.stopped_early and len(result.history) == best + 4  # 3 worse steps after the best one, then stop
    assert result.steps == best + 3  # the step that ran out of patience took no update
    assert float(model.p.detach()) == seen[best][0] and result.best_validation == values[best]
    assert result.losses == values


def test_the_improvement_threshold_and_a_validate_function_do_not_mix():
    model, gradient, seen = _quadratic_with_a_bad_region()
    Trainer(model, gradient=gradient, optimizer="sgd", momentum=0.0, lr=0.01, epochs=200, monitor="loss",
            improvement=0.5, patience=2).fit()
    best, expected = None, None
    for p, v in seen:  # only a value below best / 1.5 counts as an improvement
        if best is None or v < best / 1.5:
            best, expected = v, p
    assert float(model.p.detach()) == expected
    assert min(v for _, v in seen) < best  # the threshold kept an earlier, slightly worse point
    with pytest.raises(ValueError, match="monitor='loss'"):
        Trainer(model, gradient=gradient, monitor="loss", validate=lambda m: 0.0)
    with pytest.raises(ValueError, match="monitor must be"):
        Trainer(model, gradient=gradient, monitor="val")


def test_plateau_schedule_cuts_the_rate_after_warmup_and_clip_bounds_the_step():
    model = nn.Module()
    model.p = nn.Parameter(torch.zeros((), dtype=torch.float64))

    def flat(m):  # a loss that never improves, with a huge gradient
        m.p.grad = torch.tensor(1e6, dtype=torch.float64)
        return 1.0

    trainer = Trainer(model, gradient=flat, optimizer="sgd", momentum=0.0, lr=0.1, epochs=12, schedule="plateau",
                      plateau_patience=2, plateau_factor=0.5, warmup=4, clip=1.0)
    trainer.fit()
    # steps 0-3: warm-up, no schedule; from step 4 the plateau scheduler sees 1.0 every step: its first call sets the
    # best, then it cuts the rate after more than 2 non-improving calls (at calls 4 and 7 of 8)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**2)
    assert abs(float(model.p.detach())) <= 12 * 0.1 + 1e-12  # each step moved p by at most lr * 1 (clipped)


def test_rmsprop_is_an_optimizer_choice():
    model = nn.Linear(2, 1, dtype=torch.float64)
    x = torch.randn(64, 2, dtype=torch.float64)
    y = x @ torch.tensor([[1.0], [-2.0]], dtype=torch.float64)
    with torch.no_grad():
        first = float(((model(x) - y) ** 2).mean())
    Trainer(model, objective=lambda m: ((m(x) - y) ** 2).mean(), optimizer="rmsprop", lr=0.05, epochs=200).fit()
    with torch.no_grad():
        assert float(((model(x) - y) ** 2).mean()) < 0.01 * first
