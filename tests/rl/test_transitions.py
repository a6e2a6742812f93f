"""Transition models of symkit.rl.transitions: data collection and chunks, the equivariance of the EMLP models
of every preset (through the standardisation and the input shrinking), and the rollout metrics."""

import numpy as np
import pytest
import torch

from symkit.rl import PRESETS, preset
from symkit.rl.transitions import (
    Rollouts,
    TransitionModel,
    build_transition_net,
    evaluate_transition_model,
    group_elements,
    hidden_rep,
    model_rollout,
    sample_chunks,
)


def _fake_rollouts(p, episodes=3, steps=20, seed=0) -> Rollouts:
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(episodes, steps + 1, p.state_size, generator=g, dtype=torch.float64).cumsum(1) * 0.1
    return Rollouts(states, torch.rand(episodes, steps, p.action_size, generator=g, dtype=torch.float64) * 2 - 1)


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_emlp_transition_model_is_equivariant_and_uses_its_input(name):
    p = PRESETS[name]
    torch.manual_seed(0)
    net = build_transition_net("emlp", p, ch=32, head_scale=1.0, dtype=torch.float64)
    model = TransitionModel(net, p, _fake_rollouts(p))
    ds = p.state_size

    def step(z):
        z = torch.as_tensor(z, dtype=torch.float64)
        with torch.no_grad():
            return model(z[..., :ds], z[..., ds:])

    z = torch.randn(16, ds + p.action_size, dtype=torch.float64)
    for scale in (1.0, 20.0):  # inside and beyond the radius the standardised input is shrunk to
        for g in group_elements(p.group, 3, seed=1):
            R_in = torch.as_tensor((p.state_rep + p.action_rep).rho(g))
            R_out = torch.as_tensor(p.state_rep.rho(g))
            a, b = step(scale * z @ R_in.T), step(scale * z) @ R_out.T
            assert ((a - b).norm() / (a.norm() + b.norm())) < 1e-12
    change = step(20 * z) - 20 * z[:, :ds]
    assert change.std(0).min() > 1e-6  # every state entry responds to the input (a product group's hidden rep)


def test_hidden_reps_follow_the_reference_code():
    assert hidden_rep(PRESETS["Hopper"].group, 256).size == 136 + 60 * 2
    assert hidden_rep(PRESETS["Ant"].group, 256).size == 136 + 30 * 4
    assert hidden_rep(PRESETS["Swimmer"].group, 256).size == 136 + 30 * 4  # V(left-right) x V(front-back)


def test_chunks_are_windows_of_one_episode():
    p = PRESETS["Hopper"]
    data = _fake_rollouts(p, episodes=4, steps=30)
    chunks = sample_chunks(data, 50, 10, seed=3)
    assert chunks.states.shape == (50, 11, p.state_size) and chunks.actions.shape == (50, 10, p.action_size)
    flat = data.states.reshape(-1, p.state_size)
    for s, a in zip(chunks.states[:5], chunks.actions[:5]):
        i = int((flat - s[0]).abs().sum(-1).argmin())
        e, t = divmod(i, 31)
        assert torch.equal(data.states[e, t:t + 11], s) and torch.equal(data.actions[e, t:t + 10], a)
    with pytest.raises(ValueError, match="longer than the episodes"):
        sample_chunks(data, 5, 31)


def test_group_elements_leave_out_the_identity():
    for name in ("Hopper", "Swimmer", "Ant", "Humanoid"):
        G = PRESETS[name].group
        for g in group_elements(G, 6, seed=2):
            assert not np.allclose(np.asarray(g), np.eye(G.d))


def test_the_metrics_of_a_perfect_and_a_constant_model():
    """A model that predicts nothing scores the constant prediction's error; the truth scores (about) zero."""
    p = PRESETS["Swimmer"]
    data = _fake_rollouts(p, episodes=4, steps=100, seed=1)
    net = build_transition_net("mlp", p, ch=16, head_scale=0.0, dtype=torch.float64)
    model = TransitionModel(net, p, data)
    model.mean_d.zero_()
    out = evaluate_transition_model(model, data)
    for h in (10, 30, 100):
        assert out[f"rollout_error_{h}"] == pytest.approx(out[f"constant_error_{h}"])
    assert out["equivariance_error"] < 1e-8 and out["finite"] == 1.0  # the constant map is equivariant
    pred = model_rollout(model, data.states[:, 0], data.actions)
    assert torch.equal(pred, data.states[:, :1].expand_as(pred))


def test_random_policy_rollouts_are_seeded_and_never_terminate():
    pytest.importorskip("gymnasium")
    from symkit.rl.transitions import collect_rollouts

    p = preset("Hopper")
    a = collect_rollouts(p, 2, 300, seed=5)  # a random hopper falls within 100 steps; termination is off
    b = collect_rollouts(p, 2, 300, seed=5)
    assert a.states.shape == (2, 301, 11) and a.actions.shape == (2, 300, 3)
    assert torch.equal(a.states, b.states) and torch.isfinite(a.states).all()
    assert a.actions.abs().max() <= 1


def test_the_rpp_transition_models_prior_puts_each_width_on_its_own_path(monkeypatch):
    """train_transition_model adds ``(|beta|^2 / 2 sigma_a^2 + |B|^2 / 2 sigma_b^2) / count`` (count: chunks x steps
    x state size), sigma_a on the equivariant coefficients and sigma_b on the flexible weights, read off the names."""
    import symkit.rl.transitions as transitions

    p = PRESETS["Hopper"]
    torch.manual_seed(0)
    net = build_transition_net("rpp", p, ch=16, dtype=torch.float64)
    with torch.no_grad():
        for name, q in net.named_parameters():
            if "basic" in name:
                q.normal_()
    chunks = sample_chunks(_fake_rollouts(p, episodes=3, steps=30), 8, 5, seed=0)
    model = TransitionModel(net, p, chunks)
    captured = {}

    class Capture:
        def __init__(self, *args, penalty=None, **kwargs):
            captured["penalty"] = penalty

        def fit(self, data):
            return None

    monkeypatch.setattr(transitions, "Trainer", Capture)
    transitions.train_transition_model(model, chunks, sigma_equivariant=2.0, sigma_basic=0.5)
    a2 = sum(float(q.detach().square().sum()) for name, q in net.named_parameters()
             if ".equivariant.weight_basis." in f".{name}")
    b2 = sum(float(q.detach().square().sum()) for name, q in net.named_parameters()
             if name.endswith(("basic.weight", "nonlinearity.basic")))
    assert a2 > 0.1 and b2 > 0.1
    want = (a2 / (2 * 2.0**2) + b2 / (2 * 0.5**2)) / (8 * 5 * p.state_size)
    assert float(captured["penalty"](model).detach()) == pytest.approx(want, rel=1e-10)
