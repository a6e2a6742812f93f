"""SAC with symkit networks (symkit.rl.sac): the EMLP actor and critics are equivariant in the environment's own
observation and action order, the RPP gets its optimiser settings and Table A.9's critic speeds, and a run resumes
from its checkpoint."""

import os
import signal

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")

from rl_ant_legs import ant_relabelling  # noqa: E402
from stable_baselines3.common.logger import Logger  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402

from symkit.nn import EquivariantLinear, equivariant_fraction  # noqa: E402
from symkit.nn._weight_cache import WeightCache  # noqa: E402
from symkit.reps.errors import element_scale, relative_error  # noqa: E402
from symkit.rl import PRESETS  # noqa: E402
from symkit.rl.sac import (  # noqa: E402
    SACResult,
    area_under_curve,
    best_so_far,
    critic_tau,
    late_return,
    make_sac,
    train_sac,
)
from symkit.rl.transitions import group_elements  # noqa: E402
from symkit.testing import default_tolerance  # noqa: E402

#: symkit's tolerance for a float32 function (symkit.testing): err(g) <= 64 eps x k(g)
TOL = default_tolerance(torch.float32)


def _assert_close_to_float32(a, b, what, k=1.0):
    """``rms(a - b) / (rms(a) + rms(b))`` within :data:`TOL` times the element scale ``k``: a relative error, so
    the policy's means, kept below 0.05 by its small last layer, are held to the same share as the Q-values."""
    err = relative_error(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    assert err <= TOL * k, f"{what}: relative error {err:.3g} > {TOL:.3g} x {k:.3g}"


def _sac(name, kind, **kw):
    """A small SAC of ``kind`` on preset ``name``, logging nowhere (SB3's default logger would make a folder in the
    temporary directory at every ``learn()``; a symkit run sets the same quiet logger)."""
    p = PRESETS[name]
    model = make_sac(p, kind, Monitor(p.make_env()), ch=32, buffer_size=1000, learning_starts=100, **kw)
    model.set_logger(Logger(folder=None, output_formats=[]))
    return p, model


@pytest.mark.parametrize(("name", "joint_signs"),
                         [("Walker2d", "raw"), ("Swimmer", "raw"), ("Ant", "raw"), ("Ant", "matched")])
def test_the_emlp_actor_and_critics_are_equivariant_in_the_environments_order(name, joint_signs):
    """In the environment's order and signs: with ``joint_signs="matched"`` the group acts on Ant's features after
    its two reversed ankles are negated, so in raw coordinates it is the signed leg cycle. Held to symkit's float32
    tolerance for a function (relative error at most 64 eps x k(g), symkit.testing)."""
    p, model = _sac(name, "emlp", joint_signs=joint_signs)
    policy = model.policy
    s_state, s_action = p.signs(joint_signs)

    def act(rep, g, x, signs):  # g on raw features: negate, transform, negate back
        return signs * ((signs * x) @ rep.rho(g).T)

    env = p.make_env()
    obs = np.stack([env.reset(seed=s)[0] for s in range(6)])
    for _ in range(3):  # move away from the reset pose
        obs = np.stack([env.step(env.action_space.sample())[0] for _ in range(6)])
    a = np.random.default_rng(0).uniform(-1, 1, (6, p.action_size))
    with torch.no_grad():
        for g in group_elements(p.group, 2, seed=3):
            g_obs = p.raw_observation(act(p.state_rep, g, p.features(obs), s_state))
            g_a = p.raw_action(act(p.action_rep, g, p.action_features(a), s_action))
            mean, log_std, _ = policy.actor.get_action_dist_params(torch.as_tensor(obs, dtype=torch.float32))
            g_mean, g_log_std, _ = policy.actor.get_action_dist_params(torch.as_tensor(g_obs, dtype=torch.float32))
            k_mean = element_scale(p.state_rep.rho(g), p.action_rep.rho(g))
            _assert_close_to_float32(
                g_mean.numpy(), p.raw_action(act(p.action_rep, g, p.action_features(mean.numpy()), s_action)),
                "mean", k_mean)
            _assert_close_to_float32(
                g_log_std.numpy(), p.raw_action(p.action_features(log_std.numpy()) @ p.action_scale_rep.rho(g).T),
                "log std", element_scale(p.state_rep.rho(g), p.action_scale_rep.rho(g)))
            q = policy.critic(torch.as_tensor(obs, dtype=torch.float32), torch.as_tensor(a, dtype=torch.float32))
            gq = policy.critic(torch.as_tensor(g_obs, dtype=torch.float32),
                               torch.as_tensor(g_a, dtype=torch.float32))
            k_q = element_scale((p.state_rep + p.action_rep).rho(g), np.eye(1))
            for q1, q2 in zip(q, gq):
                _assert_close_to_float32(q1.numpy(), q2.numpy(), "Q", k_q)
            assert not torch.allclose(q[0], q[0].mean())  # the critic depends on its input
    env.close()


def test_with_the_turned_torso_the_emlp_policy_and_critics_are_invariant_to_relabelling_ants_legs():
    """``torso="turned"`` with ``joint_signs="matched"``: the observation of the relabelled simulator state
    (rl_ant_legs, read off the MuJoCo model) gives the relabelled action mean, the same standard deviations up to
    the relabelling, and the same Q-values for the relabelled action, to float32 rounding (symkit's tolerance:
    relative error at most 64 eps; the relabelling permutes and negates, k = 1)."""
    p, model = _sac("Ant", "emlp", joint_signs="matched", torso="turned")
    policy = model.policy
    assert policy.actor.features_extractor.features_dim == 40
    env = p.make_env()
    relabel, relabel_action = ant_relabelling(env)
    env.reset(seed=0)
    obs, g_obs = [], []
    for _ in range(6):
        for _ in range(5):
            env.step(env.action_space.sample())
        qpos, qvel = env.unwrapped.data.qpos.copy(), env.unwrapped.data.qvel.copy()
        obs.append(env.unwrapped._get_obs())
        env.unwrapped.set_state(*relabel(qpos, qvel))
        g_obs.append(env.unwrapped._get_obs())
        env.unwrapped.set_state(qpos, qvel)
    env.close()
    obs, g_obs = (torch.as_tensor(np.stack(o), dtype=torch.float32) for o in (obs, g_obs))
    a = np.random.default_rng(0).uniform(-1, 1, (6, 8))
    g_a = np.stack([relabel_action(x) for x in a])
    with torch.no_grad():
        mean, log_std, _ = policy.actor.get_action_dist_params(obs)
        g_mean, g_log_std, _ = policy.actor.get_action_dist_params(g_obs)
        _assert_close_to_float32(g_mean.numpy(), np.stack([relabel_action(x) for x in mean.numpy()]), "mean")
        std = np.abs(np.stack([relabel_action(x) for x in np.exp(log_std.numpy())]))  # a std has no sign
        _assert_close_to_float32(g_log_std.numpy(), np.log(std), "log std")
        q = policy.critic(obs, torch.as_tensor(a, dtype=torch.float32))
        gq = policy.critic(g_obs, torch.as_tensor(g_a, dtype=torch.float32))
        for q1, q2 in zip(q, gq):
            _assert_close_to_float32(q1.numpy(), q2.numpy(), "Q")
        assert not torch.allclose(q[0], q[0].mean())


def test_the_turned_torso_is_the_equivariant_networks_prior_an_mlp_sees_the_table_layout():
    """An MLP's actor and critics take Table A.10's 27 features whatever ``torso`` says (its runs are the baseline of
    both values); ``rpp-policy``'s RPP actor takes the turned torso's 40, its ReLU MLP critics the 27; "turned"
    without matched signs, or on a preset without the layout, is refused when the policy is built."""
    _, mlp = _sac("Ant", "relu-mlp", joint_signs="matched", torso="turned")
    _, table = _sac("Ant", "relu-mlp", joint_signs="matched")
    assert {k: v.shape for k, v in mlp.policy.state_dict().items()} == \
        {k: v.shape for k, v in table.policy.state_dict().items()}
    assert mlp.policy.actor.features_extractor.features_dim == 27
    _, mixed = _sac("Ant", "rpp-policy", joint_signs="matched", torso="turned")
    assert mixed.policy.actor.features_extractor.features_dim == 40
    assert mixed.policy.critic.features_extractor.features_dim == 27
    assert mixed.policy.critic_target.features_extractor.features_dim == 27
    with pytest.raises(ValueError, match="needs joint_signs='matched'"):
        _sac("Ant", "rpp", torso="turned")
    with pytest.raises(ValueError, match="only Ant has one"):
        _sac("Hopper", "rpp", torso="turned")


def test_the_rpp_optimisers_speeds_and_small_first_policies():
    p, rpp = _sac("Walker2d", "rpp", basic_wd=1e-3, equivariant_wd=1e-5)
    for opt in (rpp.policy.actor.optimizer, rpp.policy.critic.optimizer):
        assert all(g["betas"] == (0.5, 0.999) for g in opt.param_groups)
        assert opt.defaults["fused"] is True  # one kernel over the many small tensors, on the CPU
        assert sorted(g["weight_decay"] for g in opt.param_groups) == [0.0, 2e-5, 2e-3]
        assert sum(len(g["params"]) for g in opt.param_groups) == len({id(q) for g in opt.param_groups
                                                                       for q in g["params"]})
    assert rpp.tau == 0.004
    _, gentle = _sac("Walker2d", "rpp", rpp_beta1=0.8)
    assert {g["betas"] for net in (gentle.policy.actor, gentle.policy.critic)
            for g in net.optimizer.param_groups} == {(0.8, 0.999)}
    with pytest.raises(ValueError, match="rpp_beta1"):
        _sac("Walker2d", "rpp", rpp_beta1=1.0)
    _, mlp = _sac("Walker2d", "mlp", rpp_beta1=0.8)  # the MLPs' Adam keeps its own betas
    assert mlp.tau == 0.005 and len(mlp.policy.actor.optimizer.param_groups) == 1
    assert mlp.policy.actor.optimizer.param_groups[0]["betas"] == (0.9, 0.999)
    obs = torch.as_tensor(np.stack([p.make_env().reset(seed=s)[0] for s in range(4)]), dtype=torch.float32)
    for model in (rpp, mlp):  # the last policy layer starts 100x smaller: near-zero means
        mean, _, _ = model.policy.actor.get_action_dist_params(obs)
        assert mean.abs().max() < 0.05
    assert {n: critic_tau(q, "rpp") for n, q in PRESETS.items()} == {
        "Hopper": 0.005, "Swimmer": 0.004, "HalfCheetah": 0.005, "Walker2d": 0.004, "Ant": 0.005, "Humanoid": 0.005}
    assert critic_tau(PRESETS["Swimmer"], "mlp") == 0.005


def test_the_networks_have_the_rl_codes_bilinear_scale_and_keep_it_when_loaded(tmp_path):
    """make_sac builds the EMLP and RPP-EMLP with the RL code's bilinear output scale (0.03, emlp's is 0.1); a saved
    model comes back with the scale it was built with."""
    from stable_baselines3 import SAC

    from symkit.nn import BiLinear

    def scales(model):
        return {m.scale for net in (model.policy.actor, model.policy.critic) for m in net.modules()
                if isinstance(m, BiLinear)}

    p, model = _sac("Hopper", "rpp")
    assert scales(model) == {0.03}
    _, other = _sac("Hopper", "emlp", bilinear_scale=0.1)
    assert scales(other) == {0.1}
    other.save(tmp_path / "sac.zip")
    assert scales(SAC.load(tmp_path / "sac.zip", env=Monitor(p.make_env()))) == {0.1}


def test_the_thesis_baseline_is_a_relu_mlp_and_symkits_swish_mlp_stays_available(tmp_path):
    """``relu-mlp`` is the reference code's standard SAC network (ReLU); ``mlp`` symkit's swish MLP (what runs stored
    before ``relu-mlp`` existed used); both have the same widths and no symmetry, and a saved one loads as built."""
    from stable_baselines3 import SAC

    def activations(model):
        return {type(m).__name__ for net in (model.policy.actor, model.policy.critic) for m in net.modules()
                if isinstance(m, (torch.nn.ReLU, torch.nn.SiLU))}

    p, relu = _sac("Hopper", "relu-mlp")
    _, swish = _sac("Hopper", "mlp")
    assert activations(relu) == {"ReLU"} and activations(swish) == {"SiLU"}
    assert [q.shape for q in relu.policy.parameters()] == [q.shape for q in swish.policy.parameters()]
    assert relu.tau == 0.005 and relu.policy.actor.optimizer.param_groups[0]["betas"] == (0.9, 0.999)
    relu.save(tmp_path / "sac.zip")
    assert activations(SAC.load(tmp_path / "sac.zip", env=Monitor(p.make_env()))) == {"ReLU"}
    with pytest.raises(ValueError, match="kind must be one of"):
        _sac("Hopper", "tanh-mlp")


def test_rpp_in_the_policy_only_has_an_rpp_actor_and_the_baselines_critics(tmp_path):
    """``rpp-policy`` (thesis Figure A.2): the actor is the RPP-EMLP with the RPP's Adam betas; the critics and their
    targets are the baseline's ReLU MLPs with its betas and Table A.9's baseline speed (Walker2d: 0.005, where RPP
    critics take 0.004). It trains, and a saved model loads with the same networks."""
    from stable_baselines3 import SAC

    from symkit.nn import RPPEMLP
    from symkit.rl.settings import network_kinds

    def families(model):
        policy = model.policy
        return tuple(sorted({type(m).__name__ for m in net.modules() if isinstance(m, (RPPEMLP, torch.nn.ReLU))})
                     for net in (policy.actor, policy.critic, policy.critic_target))

    assert network_kinds("rpp-policy") == ("rpp", "relu-mlp") and network_kinds("emlp") == ("emlp", "emlp")
    with pytest.raises(ValueError, match="kind must be one of"):
        network_kinds("rpp-critic")
    p, model = _sac("Walker2d", "rpp-policy")
    assert families(model) == (["RPPEMLP"], ["ReLU"], ["ReLU"])
    assert all(g["betas"] == (0.5, 0.999) for g in model.policy.actor.optimizer.param_groups)
    assert all(g["betas"] == (0.9, 0.999) for g in model.policy.critic.optimizer.param_groups)
    assert model.tau == 0.005 and critic_tau(p, "rpp-policy") == 0.005 and critic_tau(p, "rpp") == 0.004
    _, adam = _sac("Walker2d", "rpp-policy", rpp_beta1=0.9)  # Adam's own beta for the RPP actor; critics unchanged
    assert all(g["betas"] == (0.9, 0.999) for net in (adam.policy.actor, adam.policy.critic)
               for g in net.optimizer.param_groups)
    _, relu = _sac("Walker2d", "relu-mlp")
    critic = [q.shape for q in model.policy.critic.parameters()]
    assert critic == [q.shape for q in relu.policy.critic.parameters()]  # the baseline's critics, as built
    nets = (model.policy.actor, model.policy.critic)
    before = [[q.detach().clone() for q in net.parameters()] for net in nets]
    model.learn(150)  # 50 updates after learning_starts=100
    for net, old in zip(nets, before):  # both train
        assert any(not torch.equal(a, b) for a, b in zip(old, net.parameters())), type(net).__name__
    model.save(tmp_path / "sac.zip")
    assert families(SAC.load(tmp_path / "sac.zip", env=Monitor(p.make_env()))) == families(model)
    adam.save(tmp_path / "adam.zip")
    loaded = SAC.load(tmp_path / "adam.zip", env=Monitor(p.make_env())).policy
    assert loaded.rpp_beta1 == 0.9 and loaded.actor.optimizer.param_groups[0]["betas"] == (0.9, 0.999)
    _, drawn_alike = _sac("Walker2d", "rpp-policy", rpp_basic_init=1.0)  # the actor's flexible paths start large
    assert equivariant_fraction(drawn_alike.policy.actor) < 0.9 < equivariant_fraction(adam.policy.actor)  # untrained
    critic = [q.shape for q in drawn_alike.policy.critic.parameters()]
    assert critic == [q.shape for q in relu.policy.critic.parameters()]  # MLP critics: nothing to start
    drawn_alike.save(tmp_path / "alike.zip")
    loaded = SAC.load(tmp_path / "alike.zip", env=Monitor(p.make_env())).policy
    assert loaded.symkit_kwargs["rpp_basic_init"] == 1.0
    assert equivariant_fraction(loaded.actor) == equivariant_fraction(drawn_alike.policy.actor)
    with pytest.raises(ValueError, match="rpp_basic_init"):
        _sac("Walker2d", "rpp", rpp_basic_init=-1.0)


def test_the_rl_codes_hidden_reps_and_target_entropy(tmp_path):
    """make_sac takes the RL code's hidden reps (126 T0 + 55 V + 5 V⊗V for Hopper at 256 channels) and target entropy
    (-|A|/2, where stable-baselines3 would take -|A|); a policy saved without the setting loads as uniform."""
    from stable_baselines3 import SAC

    from symkit.groups import Z
    from symkit.reps import Scalar, V
    from symkit.rl.transitions import hidden_rep, rl_code_hidden_rep

    v = V(Z(2))
    assert rl_code_hidden_rep(PRESETS["Hopper"], 256) == 126 * Scalar + 55 * v + 5 * (v * v)
    assert rl_code_hidden_rep(PRESETS["HalfCheetah"], 256).size == 256
    assert rl_code_hidden_rep(PRESETS["Walker2d"], 256) == hidden_rep(Z(2), 256) == 136 * Scalar + 60 * v
    p, model = _sac("Hopper", "rpp")
    assert model.target_entropy == -1.5 and model.policy.symkit_kwargs["hidden"] == "rl-code"
    from symkit.nn.rpp import RPPGatedNonlinearity

    hidden = {m.rep_in for net in (model.policy.actor, model.policy.critic) for m in net.modules()
              if isinstance(m, RPPGatedNonlinearity)}
    assert hidden == {rl_code_hidden_rep(p, 32)} == {16 * Scalar + 6 * v + v * v}  # ch=32
    _, uniform = _sac("Hopper", "emlp", hidden="uniform", target_entropy_scale=1.0)
    assert uniform.target_entropy == -3.0
    uniform.save(tmp_path / "sac.zip")
    loaded = SAC.load(tmp_path / "sac.zip", env=Monitor(p.make_env()))
    assert loaded.target_entropy == -3.0 and loaded.policy.symkit_kwargs["hidden"] == "uniform"
    with pytest.raises(ValueError, match="hidden must be one of"):
        _sac("Hopper", "rpp", hidden="wide")
    with pytest.raises(ValueError, match="target_entropy_scale"):
        _sac("Hopper", "rpp", target_entropy_scale=-1.0)


def test_the_policys_standard_deviation_is_the_rl_codes_clipped_softplus(tmp_path):
    """make_sac's actor turns its second head into a standard deviation as the RL code does, ``clip(softplus(h),
    e^-10, e^2)`` (stable-baselines3 takes ``exp`` of the head clamped to [-20, 2]); the gradient stays finite where
    softplus underflows, and a policy saved without the setting loads with ``exp``."""
    import math

    from stable_baselines3 import SAC

    from symkit.rl.sac import _SoftplusLogStd

    h = torch.tensor([-200.0, -3.0, 0.0, 1.5, 50.0], dtype=torch.float64, requires_grad=True)
    log_std = _SoftplusLogStd()(h)
    expected = torch.nn.functional.softplus(h.detach()).clamp(math.exp(-10), math.exp(2)).log()
    torch.testing.assert_close(log_std, expected)
    assert log_std[0] == -10.0 and log_std[-1] == 2.0 and abs(log_std[2] - math.log(math.log(2))) < 1e-12
    log_std.sum().backward()
    assert torch.isfinite(h.grad).all() and h.grad[0] == 0 and h.grad[-1] == 0
    p, model = _sac("Hopper", "relu-mlp")
    obs = torch.as_tensor(np.stack([p.make_env().reset(seed=s)[0] for s in range(4)]), dtype=torch.float32)
    _, log_std, _ = model.policy.actor.get_action_dist_params(obs)
    # the small last layer: heads near 0, so the std starts near softplus(0) = log 2 (exp would give 1)
    torch.testing.assert_close(log_std.exp(), torch.full_like(log_std, math.log(2)), atol=0.02, rtol=0)
    _, sb3 = _sac("Hopper", "relu-mlp", std_param="exp")
    _, log_std, _ = sb3.policy.actor.get_action_dist_params(obs)
    torch.testing.assert_close(log_std.exp(), torch.ones_like(log_std), atol=0.03, rtol=0)
    assert model.policy.state_dict().keys() == sb3.policy.state_dict().keys()
    sb3.save(tmp_path / "sac.zip")
    assert SAC.load(tmp_path / "sac.zip", env=Monitor(p.make_env())).policy.symkit_kwargs["std_param"] == "exp"
    with pytest.raises(ValueError, match="std_param must be one of"):
        _sac("Hopper", "rpp", std_param="tanh")


def test_freezing_the_critics_for_the_actors_loss_changes_no_update():
    """Between a critic step and the next actor step the critics take no weight gradients (cheaper); three updates
    give the same parameters with and without it, and the critics train again after each actor step."""
    models = []
    for freeze in (True, False):
        p, model = _sac("Hopper", "rpp", seed=5)
        if not freeze:
            for handle in model.policy.critic_frozen_hooks:
                handle.remove()
        model.learn(120)  # 100 random steps, then 20 updates
        models.append(model)
    frozen, plain = models
    for a, b in zip(frozen.policy.parameters(), plain.policy.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    _, untrained = _sac("Hopper", "rpp", seed=5)
    for net in ("actor", "critic"):  # both trained: the equality above is of two updated models
        before = torch.cat([q.flatten() for q in getattr(untrained.policy, net).parameters()])
        after = torch.cat([q.flatten() for q in getattr(frozen.policy, net).parameters()])
        assert (before - after).abs().max() > 1e-4
    assert all(q.requires_grad for q in frozen.policy.critic.parameters())
    frozen.policy.critic.optimizer.step()  # a critic step freezes them until the actor's next step
    assert not any(q.requires_grad for q in frozen.policy.critic.parameters())
    frozen.policy.actor.optimizer.step()
    assert all(q.requires_grad for q in frozen.policy.critic.parameters())


@pytest.mark.parametrize("kind", ["emlp", "rpp"])
def test_the_target_critics_follow_their_polyak_updates(kind):
    """stable-baselines3 averages the target critics (in eval mode for good) through ``p.data``, which bumps no
    version counter: their layers must not serve a cached weight, or the targets would stay at their start."""
    from stable_baselines3.common.utils import polyak_update

    p, model = _sac("Walker2d", kind)
    policy = model.policy
    layers = [m for m in policy.critic_target.modules() if isinstance(m, WeightCache)]
    assert len(layers) >= 6 and not any(m.cache_weights for m in layers) and not policy.critic_target.training
    assert all(m.cache_weights for m in policy.critic.modules() if isinstance(m, WeightCache))
    obs = torch.randn(5, model.observation_space.shape[0])
    act = torch.rand(5, p.action_size) * 2 - 1
    with torch.no_grad():
        before = policy.critic_target(obs, act)[0]
        for q in policy.critic.parameters():
            q.add_(0.05 * torch.randn_like(q))
        polyak_update(policy.critic.parameters(), policy.critic_target.parameters(), 0.5)
        after = policy.critic_target(obs, act)[0]
        policy.critic_target.train()  # a mode switch rebuilds everything: the reference value
        expected = policy.critic_target(obs, act)[0]
        policy.critic_target.eval()
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected, rtol=1e-6, atol=1e-6)


def test_predict_reuses_the_actors_weights_until_an_update_changes_them():
    """stable-baselines3 puts the policy in eval mode before every ``predict``; symkit's policy skips that call
    when nothing would change, so the actor's assembled weights (``WeightCache``) serve every environment and
    evaluation step between two updates. Its optimiser is fused (bumps no version counter): the first ``predict``
    after an update switches the mode back and must act with the new weights, as an actor that caches nothing."""
    p, model = _sac("Hopper", "rpp")
    model.learn(120)  # 20 updates after learning_starts
    obs = np.random.default_rng(0).normal(size=(3, model.observation_space.shape[0])).astype(np.float32)
    layers = [m for m in model.policy.actor.modules() if isinstance(m, WeightCache)]
    assert {type(m).__name__ for m in layers} == {"RPPLinear", "BiLinear", "EquivariantLinear"}

    def uncached() -> np.ndarray:
        for m in layers:
            m.cache_weights = False
        try:
            return model.predict(obs, deterministic=True)[0]
        finally:
            for m in layers:
                m.cache_weights = True

    before = model.predict(obs, deterministic=True)[0]
    cached = [m.__dict__.get("_eval_cache") for m in layers]
    assert all(c is not None for m, c in zip(layers, cached) if not isinstance(m, EquivariantLinear))
    assert np.array_equal(model.predict(obs, deterministic=True)[0], before)
    assert all(m.__dict__.get("_eval_cache") is c for m, c in zip(layers, cached))  # reused, not rebuilt
    model.train(gradient_steps=1, batch_size=32)
    after = model.predict(obs, deterministic=True)[0]
    assert not np.array_equal(after, before)
    np.testing.assert_array_equal(after, uncached())


def test_compile_reaches_the_actor_and_every_critic_in_place(tmp_path, monkeypatch):
    """``compile=True`` (the command's ``--compile``) compiles the actor's network and each critic's and target
    critic's with ``module.compile()``, which keeps the state dict's keys (the checkpoint loads either way); the run
    reports that it was compiled. The run context does not reach the library."""
    from symkit.lab import runtime

    compiled = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: compiled.append(self))
    result = train_sac(PRESETS["Hopper"], "rpp", 20, eval_every=20, eval_episodes=1, ch=8, learning_starts=10,
                       batch_size=8, buffer_size=100, checkpoint_dir=tmp_path, compile=True)
    policy = result.model.policy
    expected = [policy.actor.latent_pi, *policy.critic.q_networks, *policy.critic_target.q_networks]
    assert result.compiled and [id(m) for m in compiled] == [id(m) for m in expected]
    compiled.clear()
    with runtime.using(runtime.RunSettings(compile=True)):
        assert not train_sac(PRESETS["Hopper"], "rpp", 20, eval_every=20, eval_episodes=1, ch=8, learning_starts=10,
                             batch_size=8, buffer_size=100).compiled
    assert compiled == []


def test_a_compiled_actor_computes_what_the_eager_one_does_and_acts_with_every_update(monkeypatch):
    """Compiled in place (``runtime.compile_module``), the actor's network gives the eager network's outputs (its
    ``forward``) to float rounding, and ``predict`` after an update acts with the new weights, not with weights
    cached in eval mode before it. Traced by dynamo and AOTAutograd as ``--compile`` does, with their eager backend
    (inductor's C++ kernels take minutes to build; ``benchmarks/bench_sac.py`` times them)."""
    from symkit.lab import runtime

    compile_module = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: compile_module(self, backend="aot_eager", **kw))
    p, model = _sac("Hopper", "rpp", num_layers=1)
    policy, net = model.policy, model.policy.actor.latent_pi
    with runtime.using(runtime.RunSettings(compile=True)):
        runtime.compile_module(net)
    assert net._compiled_call_impl is not None and not [k for k in policy.state_dict() if "_orig_mod" in k]
    obs = np.random.default_rng(0).normal(size=(5, model.observation_space.shape[0])).astype(np.float32)
    x = torch.as_tensor(obs)
    torch.testing.assert_close(net(x), net.forward(x), rtol=1e-5, atol=1e-6)  # forward(): the eager network
    model.learn(110)  # 10 updates after learning_starts
    before = model.predict(obs, deterministic=True)[0]
    model.train(gradient_steps=1, batch_size=32)
    after = model.predict(obs, deterministic=True)[0]
    with torch.no_grad():
        eager = torch.tanh(policy.actor.mu(net.forward(x))).numpy()  # the deterministic action, eager
    assert not np.array_equal(after, before)
    np.testing.assert_allclose(after, eager, rtol=1e-5, atol=1e-6)


def test_a_run_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    """stable-baselines3's default logger makes an ``SB3-<time>`` folder in the system's temporary folder at each
    ``learn()``; symkit's runs give it a logger with no outputs, so thousands of runs leave no trace there."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = train_sac(PRESETS["Hopper"], "relu-mlp", 20, eval_every=20, eval_episodes=1, ch=8, learning_starts=10,
                       batch_size=8, buffer_size=100)
    assert result.steps == [0, 20]
    assert [name for name in os.listdir(scratch) if name.startswith("SB3-")] == []  # (torch keeps its own caches)


def test_a_run_resumes_from_its_checkpoint(tmp_path):
    p = PRESETS["Hopper"]  # short evaluation episodes: an untrained hopper falls
    kw = dict(seed=1, eval_every=100, eval_episodes=1, checkpoint_dir=tmp_path, checkpoint_every=100, ch=16,
              learning_starts=100, batch_size=32, buffer_size=1000)
    first = train_sac(p, "rpp", 200, keep_replay=True, **kw)
    assert first.steps == [0, 100, 200] and first.resumed_from == 0
    assert sorted(os.listdir(tmp_path)) == [".lock", "curve.json", "replay.npz", "sac.zip"]  # .lock: symkit._locks
    second = train_sac(p, "rpp", 300, **kw)  # a longer run with the same checkpoint goes on from step 200
    assert second.resumed_from == 200 and second.steps == [0, 100, 200, 300]
    assert second.returns[:3] == first.returns and second.model.num_timesteps == 300
    assert second.model.replay_buffer.size() == 300
    assert sorted(os.listdir(tmp_path)) == [".lock", "curve.json", "sac.zip"]  # a finished run drops its replay buffer
    again = train_sac(p, "rpp", 300, **kw)  # finished: nothing to train, the stored curve comes back
    assert again.returns == second.returns and again.resumed_from == 300


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stopped_run_saves_where_it_stands_and_goes_on_from_there(tmp_path, monkeypatch, signum):
    """SIGTERM (a scheduler, ``timeout``, a sweep stopping its workers) or Ctrl-C mid-run: the run ends between two
    whole steps with a checkpoint at the step it reached, then stops as the signal would have (here: the symkit
    command's SIGTERM handler, Python's Ctrl-C); run again, it goes on from that step, not from its last periodic
    checkpoint."""
    import json

    from symkit.rl import sac as sac_module

    p = PRESETS["Hopper"]
    kw = dict(seed=1, eval_every=100, eval_episodes=1, checkpoint_dir=tmp_path, checkpoint_every=100, ch=16,
              learning_starts=100, batch_size=32, buffer_size=1000)
    on_step = sac_module._Callback._on_step

    def signalled_at_150(self):
        if self.num_timesteps == 150:
            os.kill(os.getpid(), signum)
        return on_step(self)

    def as_interrupt(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(sac_module._Callback, "_on_step", signalled_at_150)
    # what `symkit reproduce` installs for SIGTERM, and Python's own Ctrl-C (pytest-xdist's workers ignore it)
    previous = signal.signal(signal.SIGTERM, as_interrupt), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            train_sac(p, "rpp", 200, **kw)
        assert signal.getsignal(signal.SIGTERM) is as_interrupt  # the handlers are given back
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    curve = json.loads((tmp_path / "curve.json").read_text())
    assert curve["num_timesteps"] == 150 and [n for n, _ in curve["saves"]] == [100, 150]
    assert (tmp_path / "replay.npz").exists()
    monkeypatch.setattr(sac_module._Callback, "_on_step", on_step)
    result = train_sac(p, "rpp", 200, **kw)
    assert result.resumed_from == 150 and result.steps == [0, 100, 200]


def test_a_checkpoint_is_whole_or_refused(tmp_path, monkeypatch):
    """A run killed while writing a checkpoint resumes from the previous one, whole; a folder whose policy, curve and
    replay buffer are of different steps is refused, naming the files, not resumed from the mixture."""
    import shutil

    from symkit.rl import sac

    p = PRESETS["Hopper"]
    kw = dict(seed=1, eval_every=100, eval_episodes=1, checkpoint_every=100, ch=16, learning_starts=50,
              batch_size=16, buffer_size=1000, keep_replay=True)
    train_sac(p, "relu-mlp", 100, checkpoint_dir=tmp_path / "a", **kw)
    saves, save_replay = [], sac.save_replay

    def killed_at_the_second_save(buffer, path):
        saves.append(path)
        if len(saves) == 2:
            raise KeyboardInterrupt  # as a kill while the buffer is written
        save_replay(buffer, path)

    monkeypatch.setattr(sac, "save_replay", killed_at_the_second_save)
    with pytest.raises(KeyboardInterrupt):
        train_sac(p, "relu-mlp", 200, checkpoint_dir=tmp_path / "b", **kw)
    monkeypatch.undo()
    resumed = train_sac(p, "relu-mlp", 200, checkpoint_dir=tmp_path / "b", **kw)
    assert resumed.resumed_from == 100 and resumed.steps == [0, 100, 200]
    shutil.copy(tmp_path / "a" / "replay.npz", tmp_path / "b")  # the buffer of step 100 beside the policy of 200
    # 199 in b: stable-baselines3 stores a step's transition after the callback that saved at step 100 (a's final
    # save, after learning, has all 100)
    with pytest.raises(ValueError, match=r"mixes two saves \(the replay buffer holds 100 transitions, curve.json was "
                                         r"saved with 199\)"):
        train_sac(p, "relu-mlp", 300, checkpoint_dir=tmp_path / "b", **kw)
    shutil.copy(tmp_path / "a" / "curve.json", tmp_path / "b")
    with pytest.raises(ValueError, match=r"sac.zip is at step 200, curve.json at step 100\); it cannot be resumed"):
        train_sac(p, "relu-mlp", 300, checkpoint_dir=tmp_path / "b", **kw)


def test_gradients_are_clipped_to_the_reference_norm_before_every_optimiser_step():
    """The reference code clips each update's gradients to a global norm of 0.5; SB3's SAC has no option for it, so
    the policy registers a step pre-hook: a huge gradient reaches the step at norm 0.5, and 0 turns it off."""
    import torch

    from symkit.rl import PRESETS
    from symkit.rl.sac import make_sac

    p = PRESETS["Hopper"]
    for max_norm, expect in ((0.5, 0.5), (0.0, None)):
        model = make_sac(p, "rpp", p.make_env(), ch=16, learning_starts=10, buffer_size=100, max_grad_norm=max_norm)
        opt = model.policy.critic.optimizer
        params = [q for g in opt.param_groups for q in g["params"]]
        for q in params:
            q.grad = torch.full_like(q, 10.0)
        seen = {}

        def record(optimizer, args, kwargs, params=params, seen=seen):  # registered later: runs after the clip
            seen["norm"] = float(torch.nn.utils.get_total_norm([q.grad for q in params]))

        opt.register_step_pre_hook(record)
        opt.step()
        if expect is None:
            assert seen["norm"] > 100
        else:
            assert abs(seen["norm"] - expect) < 1e-4, seen
    import pytest

    with pytest.raises(ValueError, match="max_grad_norm"):
        make_sac(p, "mlp", p.make_env(), ch=16, learning_starts=10, buffer_size=100, max_grad_norm=-1.0)


def test_figure_3_4s_curve_is_the_best_return_so_far_and_its_mean_is_taken_over_steps():
    assert best_so_far([3.0, 1.0, 5.0, 4.0]) == [3.0, 3.0, 5.0, 5.0] and best_so_far([]) == []
    result = SACResult(steps=[0, 10, 30], returns=[2.0, 0.0, 6.0])
    assert area_under_curve(result) == pytest.approx((10 * 1.0 + 20 * 3.0) / 30)  # trapezoids
    assert area_under_curve(result, best=True) == pytest.approx((10 * 2.0 + 20 * 4.0) / 30)
    assert area_under_curve(SACResult(steps=[0], returns=[7.0]), best=True) == 7.0


def test_the_late_return_averages_the_evaluations_of_the_last_fifth_of_the_steps():
    result = SACResult(steps=[0, 2500, 5000, 7500, 10000], returns=[0.0, 10.0, 20.0, 30.0, 50.0])
    assert late_return(result) == 50.0  # steps >= 8000
    assert late_return(result, fraction=0.5) == pytest.approx((20.0 + 30.0 + 50.0) / 3)  # steps >= 5000
    assert late_return(SACResult(steps=[0], returns=[7.0])) == 7.0
    with pytest.raises(ValueError, match="fraction must be in"):
        late_return(result, fraction=0.0)
