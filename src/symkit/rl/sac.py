"""Soft Actor-Critic with RPP-EMLP actor and critic on MuJoCo locomotion (thesis Sec. 3.6.1, A.2.2, A.2.3.3).

SAC itself is stable-baselines3's (learned temperature, stochastic squashed-Gaussian policy, two critics with
target networks): a maintained, tested implementation that takes custom networks. :class:`SymmetricSACPolicy`
swaps its networks for symkit's: the actor maps the state rep to the action rep (mean) plus the rep of the action
magnitudes (log standard deviation, :attr:`~symkit.rl.presets.LocomotionPreset.action_scale_rep`), each critic maps
``state rep + action rep`` to a scalar (Table A.10). ``kind`` picks the network family for both: ``"rpp"`` (the
thesis's RPP-EMLP), ``"emlp"`` (exactly equivariant), ``"relu-mlp"`` (the thesis's baseline: the standard SAC
networks of the reference code, ReLU MLPs of the same widths) or ``"mlp"`` (symkit's swish MLP, the EMLP chapters'
baseline, which symkit's rl-sac runs used before ``"relu-mlp"`` existed); or ``"rpp-policy"``, an RPP-EMLP actor
with the baseline's ReLU MLP critics (Figure A.2: RPP in the policy only; :func:`~symkit.rl.settings.network_kinds`).
The
observation is put into the rep's layout by :class:`PresetFeatures`, actions in and out of the networks are
reordered, so the environment sees its own order.

What follows the thesis: RPP in both policy and Q-function (A.2.2: an RPP policy against an MLP critic would fit the
critic's non-equivariant parts), the last policy layer initialised 100x smaller for every model (Andrychowicz et al.
2020), Adam betas (0.5, 0.999) for the RPP networks' optimisers, the critic target speeds of Table A.9 (``tau``;
0.005 for the baseline, for the MLP critics of ``rpp-policy`` and where the table has none), the RL code's bilinear
output scale (0.03, where emlp's layers have 0.1: :data:`RL_BILINEAR_SCALE`) and hidden reps (``126 T0 + 55 V + 5
V⊗V`` for Hopper and HalfCheetah, :func:`~symkit.rl.transitions.rl_code_hidden_rep`), the reference code's SAC
settings (learning rate 3e-4, two hidden layers of 256, discount 0.99, initial temperature 1, target entropy
``-|A|/2``: :data:`RL_TARGET_ENTROPY_SCALE`, where stable-baselines3 would take ``-|A|``, the standard deviation a
clipped softplus of the actor's head, where stable-baselines3 takes ``exp``: :data:`STD_PARAMS`, batch 256, updates
from step 10^4). The RPP prior is a weight decay per path (``equivariant_wd``, ``basic_wd``: the loss gains ``wd
|w|^2``, the reference code's flags, whose ``basic_wd`` defaults to 1e-6), and the reference code's gradient
clipping (global norm 0.5 per network update, ``max_grad_norm``; stable-baselines3's SAC has none, so a step
pre-hook on the actor's and the critics' optimisers clips their gradients before each step; 0 turns it off). Adam
runs as torch's fused kernel where it can (:func:`symkit.train.fused_options`: the same update, a few times cheaper
over the RPP's many small tensors).

:func:`train_sac` adds symkit's progress bar, deterministic evaluations every ``eval_every`` steps (the learning
curve) and checkpoints (model, replay buffer and curve, written atomically every ``checkpoint_every`` steps): a run
stopped at any point resumes from its last checkpoint with the same replay buffer, optimiser state and step count.
The environment's internal random state is not part of a checkpoint, so a resumed run follows a different (equally
valid) trajectory from an uninterrupted one. A checkpoint holds plain data only, read back without unpickling
anything: the model as JSON settings and state dicts (:func:`save_sac`, :func:`load_sac`), the replay buffer as
arrays (:mod:`symkit.rl.replay`), the curve as JSON. The pickles of earlier versions (stable-baselines3's
``sac.zip``, ``replay.pkl``) are refused (:class:`LegacyCheckpointError`) until the user converts a folder they
trust (:func:`convert_legacy_checkpoint`).
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.policies import ContinuousCritic
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.sac.policies import Actor, SACPolicy
from torch import nn

from symkit._checks import check_number
from symkit._locks import exclusive
from symkit._stopping import deferred_stop
from symkit.nn import network
from symkit.nn._weight_cache import WeightCache
from symkit.nn.rpp import BASIC_INIT_SCALE, RPPGatedNonlinearity, RPPLinear
from symkit.progress import progress_bar
from symkit.reps import Scalar
from symkit.rl.presets import LocomotionPreset, preset
from symkit.rl.replay import LEGACY_REPLAY_FILE, REPLAY_FILE, load_replay, replay_file, save_replay
from symkit.rl.settings import (
    HIDDEN,
    KINDS,
    MLP_KINDS,
    RL_BILINEAR_SCALE,
    RL_TARGET_ENTROPY_SCALE,
    RPP_BETAS,
    STD_PARAMS,
    check_beta1,
    network_kinds,
)
from symkit.rl.transitions import hidden_rep, rl_code_hidden_rep, scale_last_layer
from symkit.train import fused_options

__all__ = ["KINDS", "MLP_KINDS", "HIDDEN", "STD_PARAMS", "BASELINE_TAU", "RL_BILINEAR_SCALE", "RL_TARGET_ENTROPY_SCALE",
           "PresetFeatures", "SymmetricSACPolicy", "SACResult", "make_sac", "train_sac", "critic_tau",
           "area_under_curve", "best_so_far", "late_return", "LATE_FRACTION", "MODEL_FILE", "save_sac", "load_sac",
           "LegacyCheckpointError", "convert_legacy_checkpoint"]

BASELINE_TAU = 0.005  # Table A.9, every baseline


class _SoftplusLogStd(nn.Module):
    """``log(clip(softplus(h), e^-10, e^2))``: the RL code's standard deviation, as the log that stable-baselines3's
    actor expects (its own clamp to ``[-20, 2]`` then changes nothing). Clamping before the log keeps the gradient
    finite where softplus underflows."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return nn.functional.softplus(h).clamp(math.exp(-10.0), math.exp(2.0)).log()


def critic_tau(p: LocomotionPreset, kind: str) -> float:
    """The critic target's moving-average speed of Table A.9: the RPP row for RPP critics (``kind="rpp"``; 0.005
    where it has none), 0.005 otherwise (the baseline's row, also for ``rpp-policy``'s MLP critics)."""
    rpp_critics = network_kinds(kind)[1] == "rpp"
    return p.tau_rpp if rpp_critics and p.tau_rpp is not None else BASELINE_TAU


def _sign_tensor(signs: np.ndarray | None) -> torch.Tensor | None:
    """+1/-1 factors as a tensor; None when there are none or all are +1 (nothing to multiply)."""
    return None if signs is None or (np.asarray(signs) == 1).all() else torch.as_tensor(signs, dtype=torch.float32)


class PresetFeatures(BaseFeaturesExtractor):
    """Raw observations to the preset's state layout (Humanoid's quaternion to its rotation matrix, Walker2d's and
    Ant's regrouping; with ``joint_signs="matched"`` Ant's two reversed ankles negated; with ``torso="turned"``
    Ant's torso in the leg cycle's frame, :meth:`~symkit.rl.presets.LocomotionPreset.with_torso`), as torch
    operations."""

    def __init__(self, observation_space: spaces.Box, preset_name: str, joint_signs: str = "raw",
                 torso: str = "scalars") -> None:
        p = preset(preset_name).with_torso(torso, joint_signs)
        super().__init__(observation_space, features_dim=p.state_size)
        self.quaternion = p.quaternion
        order = p.state_order if p.state_order is not None else range(p.state_size)
        self.register_buffer("order", torch.as_tensor(list(order), dtype=torch.long), persistent=False)
        factors = p.signs(joint_signs)[0] * (1.0 if p.state_factors is None else np.asarray(p.state_factors))
        self.register_buffer("signs", _sign_tensor(factors), persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.quaternion is not None:
            i = self.quaternion
            q = obs[..., i:i + 4] / obs[..., i:i + 4].norm(dim=-1, keepdim=True).clamp_min(1e-12)
            w, x, y, z = q.unbind(-1)
            rot = torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                               2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                               2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)
            obs = torch.cat([obs[..., :i], rot, obs[..., i + 4:]], -1)
        obs = obs.index_select(-1, self.order)
        return obs if self.signs is None else obs * self.signs.to(obs)


def _torso_of(net_kind: str, torso: str) -> str:
    """The torso layout a network of ``net_kind`` takes: the turned torso is a prior of the equivariant networks, an
    MLP takes Table A.10's whatever ``torso`` says (so its runs are the baseline of both values)."""
    return "scalars" if net_kind in MLP_KINDS else torso


def _network(kind: str, p: LocomotionPreset, rep_in: Any, rep_out: Any, ch: int, num_layers: int,
             bilinear_scale: float, hidden: str, rpp_basic_init: float) -> nn.Module:
    if kind in MLP_KINDS:
        return network("mlp", rep_in, rep_out, p.group, ch=ch, num_layers=num_layers, activation=MLP_KINDS[kind])
    rep = rl_code_hidden_rep(p, ch) if hidden == "rl-code" else hidden_rep(p.group, ch)
    extra = {"basic_init_scale": rpp_basic_init} if kind == "rpp" else {}
    return network(kind, rep_in, rep_out, p.group, ch=rep, num_layers=num_layers, bilinear_scale=bilinear_scale,
                   **extra)


class _Select(nn.Module):
    """Entries ``index`` of the last axis (one head of the actor's output, in the environment's action order),
    times ``signs`` (+1/-1 per selected entry; none: all +1)."""

    def __init__(self, index: list[int], signs: np.ndarray | None = None) -> None:
        super().__init__()
        self.register_buffer("index", torch.as_tensor(index, dtype=torch.long), persistent=False)
        self.register_buffer("signs", _sign_tensor(signs), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.index_select(-1, self.index)
        return x if self.signs is None else x * self.signs.to(x)


class _QNet(nn.Module):
    """``Q([state, action in the environment's order])``: reorders the action into the rep's layout first."""

    def __init__(self, net: nn.Module, state_size: int, action_order: list[int],
                 action_signs: np.ndarray | None = None) -> None:
        super().__init__()
        self.net, self.state_size = net, state_size
        self.action = _Select(action_order, action_signs)  # environment order -> rep layout

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        s = self.state_size
        return self.net(torch.cat([z[..., :s], self.action(z[..., s:])], -1))


class SymmetricActor(Actor):
    """SAC's actor with one network ``state rep -> action rep + action scale rep`` (mean, log std)."""

    def __init__(self, *args: Any, preset_name: str, kind: str, ch: int, num_layers: int, bilinear_scale: float,
                 hidden: str, std_param: str, head_scale: float, joint_signs: str = "raw", torso: str = "scalars",
                 rpp_basic_init: float = BASIC_INIT_SCALE, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        p = preset(preset_name).with_torso(_torso_of(network_kinds(kind)[0], torso), joint_signs)
        da = p.action_size
        net = _network(network_kinds(kind)[0], p, p.state_rep, p.action_rep + p.action_scale_rep, ch, num_layers,
                       bilinear_scale, hidden, rpp_basic_init)
        self.latent_pi = scale_last_layer(net, head_scale)
        order = list(p.action_order) if p.action_order is not None else list(range(da))
        inverse = list(np.argsort(order))  # rep layout -> environment order
        self.mu = _Select(inverse, p.signs(joint_signs)[1][inverse])  # a std has no sign: log_std is not flipped
        self.log_std = _Select([da + i for i in inverse])
        if std_param == "softplus":  # no parameters: the state dict is the same either way
            self.log_std = nn.Sequential(self.log_std, _SoftplusLogStd())


class SymmetricCritic(ContinuousCritic):
    """SAC's ``n_critics`` Q-functions, each a network ``state rep + action rep -> Scalar``."""

    def __init__(self, *args: Any, preset_name: str, kind: str, ch: int, num_layers: int, bilinear_scale: float,
                 hidden: str, joint_signs: str = "raw", torso: str = "scalars",
                 rpp_basic_init: float = BASIC_INIT_SCALE, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        p = preset(preset_name).with_torso(_torso_of(network_kinds(kind)[1], torso), joint_signs)
        order = list(p.action_order) if p.action_order is not None else list(range(p.action_size))
        self.q_networks = []
        for idx in range(self.n_critics):
            net = _network(network_kinds(kind)[1], p, p.state_rep + p.action_rep, Scalar, ch, num_layers,
                           bilinear_scale, hidden, rpp_basic_init)
            q = _QNet(net, p.state_size, order, p.signs(joint_signs)[1])
            self.add_module(f"qf{idx}", q)
            self.q_networks.append(q)


def _rpp_groups(module: nn.Module, equivariant_wd: float, basic_wd: float) -> list[dict[str, Any]]:
    """Optimiser parameter groups: the RPP layers' equivariant and flexible weights with their decays (Adam's
    ``weight_decay = 2 wd``: the gradient of ``wd |w|^2``), everything else undecayed."""
    equivariant, basic = [], []
    for m in module.modules():
        if isinstance(m, RPPLinear):
            equivariant += list(m.equivariant.weight_basis.parameters())
            basic.append(m.basic.weight)
        elif isinstance(m, RPPGatedNonlinearity):
            basic.append(m.basic)
    seen = {id(q) for q in equivariant + basic}
    rest = [q for q in module.parameters() if id(q) not in seen]
    groups = [{"params": rest, "weight_decay": 0.0}]
    if equivariant:
        groups.append({"params": equivariant, "weight_decay": 2 * equivariant_wd})
    if basic:
        groups.append({"params": basic, "weight_decay": 2 * basic_wd})
    return groups


def _clip_before_step(max_norm: float) -> Any:
    """An optimiser step pre-hook clipping the global gradient norm of the optimiser's parameters to ``max_norm``."""

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        params = [q for group in optimizer.param_groups for q in group["params"] if q.grad is not None]
        if params:
            torch.nn.utils.clip_grad_norm_(params, max_norm)

    return hook


def _freeze_for_the_actor(critic: nn.Module, actor_optimizer: torch.optim.Optimizer) -> tuple[Any, Any]:
    """From each critic step to the next actor step the critics' parameters take no gradient: the actor's loss
    backpropagates through the critics to the actions only, not into weight gradients that the next critic update
    zeroes unused (an update is the same, 12-17% cheaper with RPP-EMLPs: benchmarks/bench_sac.py). Correct in any
    order of the two steps: the critics are frozen only between a critic step and an actor step, where nothing
    trains them. Returns the two hook handles (``.remove()`` them to turn it off)."""
    params = list(critic.parameters())

    def freeze(*_: Any) -> None:
        for q in params:
            q.requires_grad_(False)

    def thaw(*_: Any) -> None:
        for q in params:
            q.requires_grad_(True)

    return critic.optimizer.register_step_post_hook(freeze), actor_optimizer.register_step_post_hook(thaw)


class SymmetricSACPolicy(SACPolicy):
    """stable-baselines3's SAC policy with symkit networks for the actor and the critics (module docstring).
    ``preset_name``: a :data:`~symkit.rl.presets.PRESETS` name; ``kind``: one of :data:`KINDS` (the actor's and
    the critics' networks: :func:`~symkit.rl.settings.network_kinds`; an RPP network's Adam gets the betas
    ``(rpp_beta1, 0.999)``, the RPP's (0.5, 0.999) by default, unless ``optimizer_kwargs`` names betas);
    ``bilinear_scale``: the EMLP's and RPP-EMLP's bilinear output scale (0.1, symkit's default and what a saved
    policy without the setting was built with; :func:`make_sac` passes the RL code's 0.03); ``hidden``: their hidden
    reps, ``"uniform"`` (:func:`~symkit.rl.transitions.hidden_rep`, what a saved policy without the setting was
    built with) or ``"rl-code"`` (:func:`~symkit.rl.transitions.rl_code_hidden_rep`, :func:`make_sac`'s);
    ``std_param``: the policy's standard deviation from the actor's second head, ``"exp"`` (stable-baselines3's, what
    a saved policy without the setting was built with) or ``"softplus"`` (the RL code's, :func:`make_sac`'s);
    ``joint_signs``: :data:`~symkit.rl.settings.JOINT_SIGNS`, ``"raw"`` (the environment's, Table A.10's) or
    ``"matched"`` (:meth:`~symkit.rl.presets.LocomotionPreset.signs`: Ant's reversed ankles negated in every
    network's state and action features; an MLP is indifferent to it up to its initialisation's draw);
    ``torso``: :data:`~symkit.rl.settings.TORSO`, ``"scalars"`` (Table A.10's) or ``"turned"``
    (:meth:`~symkit.rl.presets.LocomotionPreset.with_torso`: Ant's torso orientation and angular velocity in the
    leg cycle's frame, with ``joint_signs="matched"`` an exact symmetry); ``rpp_basic_init``: the RPP networks'
    flexible paths' initial scale relative to their equivariant paths' (``BASIC_INIT_SCALE``, 1e-3, the RPP code's;
    1: both paths drawn alike)."""

    def __init__(self, *args: Any, preset_name: str = "Hopper", kind: str = "rpp", ch: int = 256,
                 num_layers: int = 2, head_scale: float = 0.01, equivariant_wd: float = 0.0,
                 basic_wd: float = 1e-6, max_grad_norm: float = 0.5, bilinear_scale: float = 0.1,
                 hidden: str = "uniform", std_param: str = "exp", joint_signs: str = "raw", torso: str = "scalars",
                 rpp_beta1: float = RPP_BETAS[0], rpp_basic_init: float = BASIC_INIT_SCALE, **kwargs: Any) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if hidden not in HIDDEN:
            raise ValueError(f"hidden must be one of {HIDDEN}, got {hidden!r}")
        if std_param not in STD_PARAMS:
            raise ValueError(f"std_param must be one of {STD_PARAMS}, got {std_param!r}")
        self.max_grad_norm = check_number("SymmetricSACPolicy: max_grad_norm (0: no clipping)", max_grad_norm)
        self.rpp_beta1 = check_beta1("SymmetricSACPolicy", rpp_beta1)
        preset(preset_name).signs(joint_signs)  # refuses an unknown value, or "matched" without joints to match
        preset(preset_name).with_torso(torso, joint_signs)  # "turned": Ant's, with matched signs
        self.symkit_kwargs = {"preset_name": preset(preset_name).name, "kind": kind, "ch": ch,
                              "num_layers": num_layers, "bilinear_scale": bilinear_scale, "hidden": hidden,
                              "std_param": std_param, "joint_signs": joint_signs, "torso": torso,
                              "rpp_basic_init": check_number("SymmetricSACPolicy: rpp_basic_init", rpp_basic_init)}
        self.head_scale, self.equivariant_wd, self.basic_wd = head_scale, equivariant_wd, basic_wd
        kwargs.setdefault("features_extractor_class", PresetFeatures)
        kwargs.setdefault("features_extractor_kwargs", {"preset_name": self.symkit_kwargs["preset_name"],
                                                        "joint_signs": joint_signs, "torso": torso})
        super().__init__(*args, **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        for layer in self.critic_target.modules():  # in eval mode for good, Polyak-averaged through p.data
            if isinstance(layer, WeightCache):
                layer.cache_weights = False
        # the same optimiser class and settings for both, with the RPP's decays; an RPP network's Adam takes
        # (rpp_beta1, 0.999) unless the settings name betas (policies saved before rpp_beta1 existed name them)
        for net, net_kind in zip((self.actor, self.critic), network_kinds(self.symkit_kwargs["kind"]), strict=True):
            options = dict(self.optimizer_kwargs)
            adam = self.optimizer_class in (torch.optim.Adam, torch.optim.AdamW)
            if adam and net_kind == "rpp":
                options.setdefault("betas", (self.rpp_beta1, RPP_BETAS[1]))
            if adam and not {"fused", "foreach"} & set(options):
                options.update(fused_options(net.parameters()))  # one kernel over the many small RPP tensors
            net.optimizer = self.optimizer_class(_rpp_groups(net, self.equivariant_wd, self.basic_wd),
                                                 lr=lr_schedule(1), **options)
            if self.max_grad_norm > 0:
                net.optimizer.register_step_pre_hook(_clip_before_step(self.max_grad_norm))
        self.critic_frozen_hooks = _freeze_for_the_actor(self.critic, self.actor.optimizer)

    def set_training_mode(self, mode: bool) -> None:
        """Set the mode unless every module already has it: stable-baselines3 calls this with ``False`` before each
        ``predict`` (every environment step and evaluation step), and a redundant ``eval()`` would drop the layers'
        inference caches (``symkit.nn._weight_cache``) each time. Its updates set ``True`` first, so the first
        ``predict`` after them changes the mode and starts from the new parameters."""
        if all(m.training == mode for net in (self.actor, self.critic) for m in net.modules()):
            self.training = mode
            return
        super().set_training_mode(mode)

    def _features_for(self, net_kind: str) -> BaseFeaturesExtractor:
        """A new features extractor for a network of ``net_kind``, with the torso layout it takes (``_torso_of``)."""
        kwargs = dict(self.features_extractor_kwargs)
        if "torso" in kwargs:
            kwargs["torso"] = _torso_of(net_kind, kwargs["torso"])
        return self.features_extractor_class(self.observation_space, **kwargs)

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> Actor:
        if features_extractor is None:
            features_extractor = self._features_for(network_kinds(self.symkit_kwargs["kind"])[0])
        kwargs = self._update_features_extractor(self.actor_kwargs, features_extractor)
        return SymmetricActor(**kwargs, **self.symkit_kwargs, head_scale=self.head_scale).to(self.device)

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> ContinuousCritic:
        if features_extractor is None:
            features_extractor = self._features_for(network_kinds(self.symkit_kwargs["kind"])[1])
        kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
        settings = {k: v for k, v in self.symkit_kwargs.items() if k != "std_param"}  # the actor's alone
        return SymmetricCritic(**kwargs, **settings).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(self.symkit_kwargs, head_scale=self.head_scale, equivariant_wd=self.equivariant_wd,
                    basic_wd=self.basic_wd, max_grad_norm=self.max_grad_norm, rpp_beta1=self.rpp_beta1)
        return data


def make_sac(p: LocomotionPreset, kind: str, env: Any, *, seed: int = 0, ch: int = 256, num_layers: int = 2,
             learning_starts: int = 10_000, batch_size: int = 256, buffer_size: int = 1_000_000, lr: float = 3e-4,
             tau: float | None = None, equivariant_wd: float = 0.0, basic_wd: float = 1e-6,
             max_grad_norm: float = 0.5, bilinear_scale: float = RL_BILINEAR_SCALE, hidden: str = "rl-code",
             target_entropy_scale: float = RL_TARGET_ENTROPY_SCALE, std_param: str = "softplus",
             joint_signs: str = "raw", torso: str = "scalars", rpp_beta1: float = RPP_BETAS[0],
             rpp_basic_init: float = BASIC_INIT_SCALE, device: str | torch.device = "cpu") -> SAC:
    """An SB3 ``SAC`` with :class:`SymmetricSACPolicy` and the thesis's settings (module docstring), on ``device``;
    ``tau=None``
    takes Table A.9's (:func:`critic_tau`); the target entropy is ``-target_entropy_scale x`` the action
    dimension; ``joint_signs``, ``torso``, ``rpp_beta1`` (the RPP networks' first Adam beta) and ``rpp_basic_init``
    (their flexible paths' initial scale) as :class:`SymmetricSACPolicy` takes them."""
    scale = check_number("make_sac: target_entropy_scale", target_entropy_scale)
    policy_kwargs: dict[str, Any] = {"preset_name": p.name, "kind": kind, "ch": ch, "num_layers": num_layers,
                                     "equivariant_wd": equivariant_wd, "basic_wd": basic_wd,
                                     "max_grad_norm": max_grad_norm, "bilinear_scale": bilinear_scale,
                                     "hidden": hidden, "std_param": std_param, "joint_signs": joint_signs,
                                     "torso": torso, "rpp_beta1": rpp_beta1, "rpp_basic_init": rpp_basic_init}
    return SAC(SymmetricSACPolicy, env, learning_rate=lr, buffer_size=buffer_size, learning_starts=learning_starts,
               batch_size=batch_size, tau=critic_tau(p, kind) if tau is None else tau, gamma=0.99,
               ent_coef="auto_1.0", target_entropy=-scale * p.action_size, policy_kwargs=policy_kwargs, seed=seed,
               device=torch.device(device), verbose=0)


#: a checkpoint's model: a zip of ``sac.json`` (settings and step counters) and ``state.pt`` (state dicts)
MODEL_FILE = "sac.zip"
MODEL_FORMAT = 1
#: the SAC settings :func:`make_sac` chooses, kept in ``sac.json`` beside the policy's (``policy_kwargs``)
_SAC_SETTINGS = ("learning_rate", "buffer_size", "learning_starts", "batch_size", "tau", "gamma", "ent_coef",
                 "target_entropy", "seed")
_COUNTERS = ("num_timesteps", "_episode_num", "_n_updates")


class LegacyCheckpointError(ValueError):
    """A checkpoint file that an earlier symkit version wrote as a pickle: symkit does not load it (unpickling a file
    can run any code); :func:`convert_legacy_checkpoint` converts a folder the user trusts."""


def _legacy_message(folder: Path, names: list[str]) -> str:
    return (f"{folder}: {' and '.join(names)} {'is a pickle' if len(names) == 1 else 'are pickles'} written by an "
            "earlier symkit version, which symkit does not load (unpickling a file can run any code); for a folder "
            f"you trust, convert it once with symkit.rl.sac.convert_legacy_checkpoint({str(folder)!r})")


def _is_stable_baselines_zip(path: Path) -> bool:
    """Whether ``path`` is stable-baselines3's own ``save`` (a zip with the pickled ``data`` member), read from the
    zip's directory alone."""
    try:
        with zipfile.ZipFile(path) as z:
            return "data" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def save_sac(model: SAC, path: str | os.PathLike[str]) -> None:
    """Write a SAC of :func:`make_sac` as plain data: a zip of ``sac.json`` (the policy's and SAC's settings and the
    step counters, as JSON) and ``state.pt`` (``torch.save`` of the state dicts of the policy and the optimisers and
    of the entropy coefficient), which :func:`load_sac` reads back with ``torch.load(weights_only=True)``."""
    if not isinstance(getattr(model, "policy", None), SymmetricSACPolicy):
        raise TypeError(f"save_sac: expected a SAC with a SymmetricSACPolicy (make_sac's), got "
                        f"{type(getattr(model, 'policy', model)).__name__}")
    settings = {"format": MODEL_FORMAT, "policy_kwargs": model.policy_kwargs,
                "sac": {name: getattr(model, name) for name in _SAC_SETTINGS},
                "counters": {name: int(getattr(model, name)) for name in _COUNTERS}}
    try:
        text = json.dumps(settings, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"save_sac: the model's settings must be plain data (numbers, strings, lists), as make_sac "
                         f"makes them ({exc})") from None
    variables = model._get_torch_save_params()[1]  # log_ent_coef (learned temperature) or ent_coef_tensor
    state = io.BytesIO()
    torch.save({"parameters": model.get_parameters(),
                "variables": {name: getattr(model, name).detach() for name in variables}}, state)
    with zipfile.ZipFile(path, "w") as z:  # stored, not compressed: float tensors do not compress
        z.writestr("sac.json", text)
        z.writestr("state.pt", state.getvalue())


def _read_model(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings and state of a :func:`save_sac` file; stable-baselines3's pickled ``sac.zip`` is refused."""
    what = f"{path}: not a symkit SAC model (a zip of sac.json and state.pt)"
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if "data" in names:
                raise LegacyCheckpointError(_legacy_message(path.parent, [path.name]))
            if not {"sac.json", "state.pt"} <= names:
                raise ValueError(f"{what}, holds {sorted(names)}")
            settings = json.loads(z.read("sac.json"))
            state = torch.load(io.BytesIO(z.read("state.pt")), map_location="cpu", weights_only=True)
    except zipfile.BadZipFile:
        raise ValueError(f"{what}, not a zip file") from None
    except pickle.UnpicklingError as exc:  # what torch.load(weights_only=True) raises for anything but plain data
        raise ValueError(f"{path}: state.pt holds more than tensors and plain data, which symkit does not load "
                         f"({str(exc).splitlines()[0]})") from None
    if not isinstance(settings, dict) or settings.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path}: sac.json is not of format {MODEL_FORMAT}, the one this symkit reads")
    sections = {"policy_kwargs": None, "sac": _SAC_SETTINGS, "counters": _COUNTERS}
    if sorted(settings) != sorted([*sections, "format"]) or not all(
            isinstance(settings[key], dict) and (names is None or sorted(settings[key]) == sorted(names))
            for key, names in sections.items()):
        raise ValueError(f"{path}: sac.json must hold policy_kwargs, sac {list(_SAC_SETTINGS)} and counters "
                         f"{list(_COUNTERS)}")
    if not isinstance(state, dict) or sorted(state) != ["parameters", "variables"]:
        raise ValueError(f"{path}: state.pt must hold the parameters and variables of save_sac")
    return settings, state


def load_sac(path: str | os.PathLike[str], env: Any = None, device: str | torch.device = "cpu") -> SAC:
    """The SAC that :func:`save_sac` wrote to ``path`` (a checkpoint's ``sac.zip``), built as :func:`make_sac` built it
    (the same seeding, so the same random state after loading as stable-baselines3's ``SAC.load``) on ``env``
    (default: a new environment of its preset), with its networks, optimisers, entropy coefficient and step
    counters. Reads JSON and tensors only; a ``sac.zip`` saved by stable-baselines3 (earlier symkit versions'
    checkpoints, a pickle) raises :class:`LegacyCheckpointError`."""
    path = Path(path)
    settings, state = _read_model(path)
    policy_kwargs = settings["policy_kwargs"]
    if env is None:
        env = preset(policy_kwargs.get("preset_name", "Hopper")).make_env()
    model = SAC(SymmetricSACPolicy, env, policy_kwargs=policy_kwargs, device=torch.device(device), verbose=0,
                **settings["sac"])
    parameters, variables = model._get_torch_save_params()
    if sorted(state["parameters"]) != sorted(parameters) or sorted(state["variables"]) != sorted(variables):
        raise ValueError(f"{path}: state.pt holds {sorted(state['parameters'])} and {sorted(state['variables'])}, "
                         f"this SAC has {sorted(parameters)} and {sorted(variables)}")
    try:
        model.set_parameters(state["parameters"], exact_match=True, device=model.device)
        with torch.no_grad():
            for name in variables:
                getattr(model, name).copy_(state["variables"][name])
    except (RuntimeError, KeyError, ValueError) as exc:
        raise ValueError(f"{path}: its state does not fit the SAC of its settings ({exc})") from None
    for name in _COUNTERS:
        setattr(model, name, int(settings["counters"][name]))
    return model


def convert_legacy_checkpoint(folder: str | os.PathLike[str]) -> list[str]:
    """Rewrite a checkpoint folder of an earlier symkit version in today's format; call it only for a folder you
    trust. Its ``sac.zip`` as stable-baselines3 saved it and its ``replay.pkl`` are pickles: this loads them
    (unpickling runs whatever code a file names) and writes them as :func:`save_sac` and
    :func:`~symkit.rl.replay.save_replay` do, each under a temporary name and then renamed (a linked file is
    replaced, its other name left as it was); ``curve.json`` stays. The run then resumes as it did from the old files.
    Returns the names of the files converted (none when the folder holds no pickle)."""
    from stable_baselines3.common.save_util import load_from_pkl

    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"convert_legacy_checkpoint: {folder} is not a folder")
    converted = []
    with exclusive(folder, "convert_legacy_checkpoint"):
        if _is_stable_baselines_zip(folder / MODEL_FILE):
            save_sac(SAC.load(folder / MODEL_FILE, device="cpu"), folder / "sac.tmp.zip")
            os.replace(folder / "sac.tmp.zip", folder / MODEL_FILE)
            converted.append(MODEL_FILE)
        if replay_file(folder) == folder / LEGACY_REPLAY_FILE:  # a replay.npz beside it is the newer
            save_replay(load_from_pkl(folder / LEGACY_REPLAY_FILE), folder / "replay.tmp.npz")
            os.replace(folder / "replay.tmp.npz", folder / REPLAY_FILE)
            (folder / LEGACY_REPLAY_FILE).unlink()
            converted.append(LEGACY_REPLAY_FILE)
    return converted


@dataclass
class SACResult:
    """A run's learning curve: ``steps[i]`` environment steps gave a mean deterministic return ``returns[i]`` over
    the evaluation episodes; ``train_returns`` are the returns of the training episodes as they ended."""

    steps: list[int] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    train_returns: list[float] = field(default_factory=list)
    seconds: float = 0.0
    resumed_from: int = 0
    model: Any = None
    #: ``(steps, training seconds so far)`` at each checkpoint: the recent pace, for an estimate of the time left
    saves: list[tuple[int, float]] = field(default_factory=list)
    #: whether this process trained with compiled networks (``train_sac(compile=True)``)
    compiled: bool = False


class _Callback(BaseCallback):
    """Progress bar, periodic evaluation and checkpoints."""

    def __init__(self, result: SACResult, total: int, eval_env: Any, eval_every: int, eval_episodes: int,
                 checkpoint: Path | None, checkpoint_every: int, desc: str) -> None:
        super().__init__()
        self.result, self.total, self.eval_env = result, total, eval_env
        self.eval_every, self.eval_episodes = eval_every, eval_episodes
        self.checkpoint, self.checkpoint_every, self.desc = checkpoint, checkpoint_every, desc
        self.start = time.perf_counter()
        #: read at every step: True once the run is asked to stop (:func:`symkit._stopping.deferred_stop`)
        self.stop_requested: Callable[[], bool] = lambda: False
        self.stopped = False  # stopped on request, after saving a checkpoint at the current step

    def _on_training_start(self) -> None:
        self.bar = progress_bar(desc=self.desc, total=self.total, initial=self.num_timesteps)
        if self.num_timesteps == 0:
            self._evaluate()  # the untrained policy: the curve's first point

    def _evaluate(self) -> None:
        mean, _ = evaluate_policy(self.model, self.eval_env, n_eval_episodes=self.eval_episodes, deterministic=True)
        self.result.steps.append(int(self.num_timesteps))
        self.result.returns.append(float(mean))
        self.bar.set_postfix(eval_return=f"{mean:.1f}")

    def save(self) -> None:
        """Write the policy, the replay buffer and the curve as temporary files (seconds for a large buffer), then
        rename the three in a row (microseconds): a run killed while saving keeps its previous checkpoint whole, and
        :func:`_check_resumable` refuses the unlikely mixture of a kill between the renames."""
        if self.checkpoint is None:
            return
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        seconds = self.result.seconds + time.perf_counter() - self.start
        self.result.saves.append((int(self.num_timesteps), seconds))
        written = {MODEL_FILE: "sac.tmp.zip", REPLAY_FILE: "replay.tmp.npz", "curve.json": "curve.json.tmp"}
        save_sac(self.model, self.checkpoint / written[MODEL_FILE])
        save_replay(self.model.replay_buffer, self.checkpoint / written[REPLAY_FILE])
        buffer = self.model.replay_buffer
        (self.checkpoint / written["curve.json"]).write_text(json.dumps(
            {"steps": self.result.steps, "returns": self.result.returns, "train_returns": self.result.train_returns,
             "seconds": seconds, "num_timesteps": int(self.num_timesteps), "saves": self.result.saves,
             "replay": {"pos": int(buffer.pos), "full": bool(buffer.full)}}))
        for final, tmp in written.items():
            os.replace(self.checkpoint / tmp, self.checkpoint / final)
        (self.checkpoint / LEGACY_REPLAY_FILE).unlink(missing_ok=True)  # a run resumed from an older checkpoint

    def _on_step(self) -> bool:
        self.bar.update(1)
        for info in self.locals.get("infos", []):
            if "episode" in info:
                self.result.train_returns.append(float(info["episode"]["r"]))
        t = self.num_timesteps
        if t % self.eval_every == 0 or t == self.total:
            self._evaluate()
        stop = self.stop_requested()  # SIGTERM or Ctrl-C: save where the run stands and end it
        if (t % self.checkpoint_every == 0 and t < self.total) or stop:
            self.save()
        if stop and t < self.total:
            self.stopped = True
            return False  # stable-baselines3 ends learn() here, between two whole steps
        return True

    def _on_training_end(self) -> None:
        self.bar.close()


def compile_networks(model: SAC) -> None:
    """Compile the actor's network and each critic's and target critic's in place (``module.compile()``: the
    checkpoint's keys stay the same). About 15% faster RPP-EMLP updates on the CPU after a minute or two of
    compiling."""
    policy = model.policy
    for net in (policy.actor.latent_pi, *policy.critic.q_networks, *policy.critic_target.q_networks):
        net.compile()


def train_sac(p: LocomotionPreset, kind: str, steps: int, *, seed: int = 0, eval_every: int = 10_000,
              eval_episodes: int = 10, checkpoint_dir: str | os.PathLike | None = None,
              checkpoint_every: int = 50_000, keep_replay: bool = False, device: str | torch.device = "cpu",
              compile: bool = False, **sac_kwargs: Any) -> SACResult:
    """Train SAC with ``kind`` networks for ``steps`` environment steps on the preset's environment (its standard
    task, termination included); evaluate the deterministic policy over ``eval_episodes`` episodes every
    ``eval_every`` steps and at the end. With ``checkpoint_dir`` the run saves itself every ``checkpoint_every``
    steps and resumes from there; the finished run keeps its model (``sac.zip``) and curve (``curve.json``) and
    deletes its replay buffer unless ``keep_replay``. The networks live on ``device``; ``sac_kwargs`` go to
    :func:`make_sac`. While it trains, the run
    holds ``checkpoint_dir`` (:func:`symkit._locks.exclusive`): a second process given the same folder is refused
    (:class:`symkit._locks.RunInUse`) rather than mixing its checkpoints with this one's. Stopped by SIGTERM or
    Ctrl-C, it saves a checkpoint at the step it reached and then stops as the signal would have
    (:func:`symkit._stopping.deferred_stop`); with ``compile`` its networks are compiled
    (:func:`compile_networks`). A checkpoint of an earlier symkit version (pickles) raises
    :class:`LegacyCheckpointError` before anything in it is read (:func:`convert_legacy_checkpoint`)."""
    if steps < 1 or eval_every < 1 or checkpoint_every < 1:
        raise ValueError(f"train_sac: steps, eval_every and checkpoint_every must be >= 1, got {steps}, "
                         f"{eval_every}, {checkpoint_every}")
    with exclusive(checkpoint_dir, f"train_sac ({p.name}, {kind})"):
        return _train_sac(p, kind, steps, seed, eval_every, eval_episodes, checkpoint_dir, checkpoint_every,
                          keep_replay, device, compile, sac_kwargs)


def _train_sac(p: LocomotionPreset, kind: str, steps: int, seed: int, eval_every: int, eval_episodes: int,
               checkpoint_dir: str | os.PathLike | None, checkpoint_every: int, keep_replay: bool,
               device: str | torch.device, compile: bool, sac_kwargs: dict[str, Any]) -> SACResult:
    from stable_baselines3.common.monitor import Monitor

    result = SACResult()
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    resume = None
    if ckpt is not None and (ckpt / MODEL_FILE).exists() and (ckpt / "curve.json").exists():
        curve = json.loads((ckpt / "curve.json").read_text())
        finished = int(curve["num_timesteps"]) >= steps
        replay = replay_file(ckpt)
        if finished or replay is not None:
            legacy = [MODEL_FILE] if _is_stable_baselines_zip(ckpt / MODEL_FILE) else []
            if not finished and replay.name == LEGACY_REPLAY_FILE:
                legacy.append(LEGACY_REPLAY_FILE)
            if legacy:  # refused before anything is read
                raise LegacyCheckpointError(f"train_sac: {_legacy_message(ckpt, legacy)}, then run again")
            resume = curve, finished, replay
    env = Monitor(p.make_env())
    eval_env = Monitor(p.make_env())
    eval_env.reset(seed=seed + 10_000)
    model = None
    if resume is not None:
        curve, finished, replay = resume
        model = load_sac(ckpt / MODEL_FILE, env=env, device=device)
        if not finished:
            load_replay(model.replay_buffer, replay)
        _check_resumable(ckpt, model, curve, replay=not finished)
        result.steps, result.returns = list(curve["steps"]), list(curve["returns"])
        result.train_returns, result.seconds = list(curve["train_returns"]), float(curve["seconds"])
        result.saves = [(int(n), float(t)) for n, t in curve.get("saves", [])]  # none before symkit kept them
        result.resumed_from = int(model.num_timesteps)
    if model is None:
        model = make_sac(p, kind, env, seed=seed, device=device, **sac_kwargs)
    # a logger with no outputs: left to itself, stable-baselines3 makes an empty SB3-<time> folder in the system's
    # temporary folder at every learn() (symkit keeps its own curve and progress bar)
    model.set_logger(Logger(folder=None, output_formats=[]))
    if compile:
        compile_networks(model)
    result.compiled = bool(compile)
    callback = _Callback(result, steps, eval_env, eval_every, eval_episodes, ckpt, checkpoint_every,
                         f"SAC {p.name}/{kind}")
    remaining = steps - int(model.num_timesteps)
    if remaining > 0:
        with deferred_stop() as stop:  # a stop request ends the run at its next step, checkpoint saved
            callback.stop_requested = stop
            model.learn(remaining, callback=callback, reset_num_timesteps=result.resumed_from == 0)
        if callback.stopped:  # the deferred signal, delivered again as the block ended, did not stop the process
            env.close()
            eval_env.close()
            raise KeyboardInterrupt(f"train_sac ({p.name}, {kind}): stopped at step {model.num_timesteps}"
                                    + (f", checkpoint saved in {ckpt}" if ckpt is not None else ""))
        if ckpt is not None:
            callback.save()
        result.seconds += time.perf_counter() - callback.start
        if ckpt is not None and not keep_replay:
            for name in (REPLAY_FILE, LEGACY_REPLAY_FILE):
                (ckpt / name).unlink(missing_ok=True)
    env.close()
    eval_env.close()
    result.model = model
    return result


def _check_resumable(folder: Path, model: SAC, curve: dict[str, Any], replay: bool) -> None:
    """Refuse a checkpoint whose files come from different saves: the policy (``sac.zip``) must be at the curve's
    step (``curve.json``), and the replay buffer where the curve says it was saved (its write position and whether
    it had filled; curves saved before this was recorded are not checked for it). The buffer is not simply one
    transition a step: stable-baselines3 stores a step's transition after the callback that saves, so each resume
    from a checkpoint taken mid-run drops one."""
    problems = []
    done = int(curve["num_timesteps"])
    if int(model.num_timesteps) != done:
        problems.append(f"sac.zip is at step {model.num_timesteps}, curve.json at step {done}")
    saved = curve.get("replay")
    buffer = model.replay_buffer
    if replay and saved is not None and (int(buffer.pos), bool(buffer.full)) != (saved["pos"], saved["full"]):
        problems.append(f"the replay buffer holds {buffer.size()} transitions, curve.json was saved with "
                        f"{saved['pos'] if not saved['full'] else buffer.buffer_size}")
    if problems:
        raise ValueError(f"train_sac: the checkpoint in {folder} mixes two saves ({'; '.join(problems)}); it cannot "
                         "be resumed. Delete the folder to run it again from the start")


def best_so_far(returns: list[float]) -> list[float]:
    """Figure 3.4's curve: at each evaluation, the best mean evaluation return reached so far (the thesis plots the
    "max average reward attained at each step")."""
    return np.maximum.accumulate(np.asarray(returns, dtype=float)).tolist() if len(returns) else []


def area_under_curve(result: SACResult, *, best: bool = False) -> float:
    """The mean evaluation return over the curve (trapezoids over steps): a learning curve's data efficiency. With
    ``best``, the mean of Figure 3.4's best-so-far curve (:func:`best_so_far`) instead."""
    returns = best_so_far(result.returns) if best else result.returns
    if len(result.steps) < 2:
        return float(returns[-1]) if returns else math.nan
    return float(np.trapezoid(returns, result.steps) / (result.steps[-1] - result.steps[0]))


#: The share of a run's steps whose evaluations :func:`late_return` averages (the last fifth).
LATE_FRACTION = 0.2


def late_return(result: SACResult, fraction: float = LATE_FRACTION) -> float:
    """The mean evaluation return over the last ``fraction`` of the run's steps (steps at or after
    ``(1 - fraction) x`` the last one; at least the last evaluation): the end of the curve with less of one
    evaluation's noise (a 30,000-step run evaluated every 2,500: the returns at 25,000, 27,500 and 30,000)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"late_return: fraction must be in (0, 1], got {fraction!r}")
    if not result.returns:
        return math.nan
    steps, returns = np.asarray(result.steps, dtype=float), np.asarray(result.returns, dtype=float)
    return float(returns[steps >= (1 - fraction) * steps[-1]].mean())
