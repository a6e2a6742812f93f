"""Transition models for model-based RL on MuJoCo locomotion (thesis Sec. 3.6.2, App. A.2.3.4, Table 3.3).

A model predicts the next state from the state and action, ``x_{t+1} = x_t + NN(x_t, u_t)``; ``NN`` is an MLP, an
EMLP of the preset's group, or an RPP-EMLP (:func:`build_transition_net`) with input rep ``rho_X + rho_U`` and
output rep ``rho_X`` (Table A.10). It is trained by minimising the l1 norm of its 10-step rollout error on chunks of
trajectories (:func:`train_transition_model`) and scored by Table 3.3's metrics (:func:`evaluate_transition_model`):
the rollout relative error ``|a - b| / (|a| + |b|)``, geometric mean over the steps of 10-, 30- and 100-step
rollouts, and the equivariance error (eq. 3.3) of the 100-step rollout, ``RelErr(g . rollout(x, u),
rollout(g . x, g . u))``.

Data (:func:`collect_rollouts`) come from a uniformly random policy run locally (the thesis sampled 5000 chunks of
10 steps from the replay buffer of an SAC agent trained for 10^6 steps): the environments are run without their
early termination (a fallen hopper keeps moving), so every episode has the requested length.

Decisions where the thesis is silent:

- states and actions are standardised per object of their reps (:func:`~symkit.nn.rep_statistics`: scalars
  centred and scaled, other objects scaled by their RMS), and so is the predicted change, which keeps an
  equivariant network equivariant; the l1 rollout loss is taken in these standardised units, so that every state
  entry counts, whatever its physical unit;
- the RPP prior (variance ``10^6`` on the equivariant weights, ``3`` on the flexible ones, A.2.3.4) is the negative
  log prior of :func:`~symkit.nn.rpp_penalty` divided by the number of numbers the loss averages over (chunks x
  steps x state size), as for a unit-scale Laplace likelihood; the reference code's extra ``0.05 mean |Delta|^2``
  term is left out;
- Adam at ``lr`` with a cosine schedule, batch 256; hidden layers of ``136/256`` scalars and copies of the base
  rep ``V`` for the rest (the reference code's ``136 T0 + 60 T1`` for Z2 at 256 channels, :func:`hidden_rep`);
- errors are geometric means over (trajectory, step) pairs, the start state (shared by both rollouts) excluded.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from symkit.groups.base import Group, ProductGroup
from symkit.nn import EMLP, MLP, RPPEMLP, network, parameter_like, rep_statistics, rollout_error, rpp_penalty
from symkit.reps import Rep, Scalar, V
from symkit.rl.presets import LocomotionPreset
from symkit.train import Trainer
from symkit.train.trainer import TrainResult

__all__ = ["MODELS", "Rollouts", "TransitionModel", "collect_rollouts", "sample_chunks", "hidden_rep",
           "rl_code_hidden_rep",
           "build_transition_net", "scale_last_layer", "model_rollout", "train_transition_model",
           "evaluate_transition_model", "group_elements", "cached_rollouts", "Steps", "steps_from_replay",
           "held_out_episodes", "sample_windows"]

MODELS = ("mlp", "emlp", "rpp")
HORIZONS = (10, 30, 100)


@dataclass
class Rollouts:
    """Episodes of a policy in the preset's feature layout: ``states`` (E, T + 1, state size) and ``actions``
    (E, T, action size), float64."""

    states: torch.Tensor
    actions: torch.Tensor

    @property
    def episodes(self) -> int:
        return int(self.states.shape[0])

    @property
    def steps(self) -> int:
        return int(self.actions.shape[1])


def _no_termination(preset: LocomotionPreset) -> dict[str, Any]:
    """Environment settings that turn off early termination (the environments that have it)."""
    return {"terminate_when_unhealthy": False} if preset.name in ("Hopper", "Walker2d", "Ant", "Humanoid") else {}


def collect_rollouts(preset: LocomotionPreset, episodes: int, steps: int, seed: int = 0) -> Rollouts:
    """``episodes`` episodes of ``steps`` uniformly random actions each (seeded resets and actions), with early
    termination turned off; states and actions in the preset's feature layout."""
    env = preset.make_env(**_no_termination(preset))
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    states = np.empty((episodes, steps + 1, preset.state_size))
    actions = np.empty((episodes, steps, preset.action_size))
    base = env.unwrapped
    try:
        for e in range(episodes):
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
            states[e, 0] = preset.features(obs)
            for t in range(steps):
                a = rng.uniform(low, high)
                obs, *_ = base.step(a)
                states[e, t + 1] = preset.features(obs)
                actions[e, t] = preset.action_features(a)
    finally:
        env.close()
    return Rollouts(torch.as_tensor(states), torch.as_tensor(actions))


def sample_chunks(data: Rollouts, n: int, horizon: int, seed: int = 0) -> Rollouts:
    """``n`` windows of ``horizon`` steps drawn uniformly (with replacement) from the episodes of ``data``."""
    if horizon > data.steps:
        raise ValueError(f"sample_chunks: horizon {horizon} is longer than the episodes ({data.steps} steps)")
    g = torch.Generator().manual_seed(seed)
    ep = torch.randint(data.episodes, (n,), generator=g)
    start = torch.randint(data.steps - horizon + 1, (n,), generator=g)
    idx = start[:, None] + torch.arange(horizon + 1)
    states = data.states[ep[:, None], idx]
    actions = data.actions[ep[:, None], idx[:, :-1]]
    return Rollouts(states, actions)


@dataclass
class Steps:
    """Single steps of a policy in time order, as a replay buffer holds them, in the preset's feature layout:
    ``states`` and ``next_states`` (N, state size), ``actions`` (N, action size), float64, and ``episode`` (N,), one
    id per episode (an episode's steps are consecutive and share it)."""

    states: torch.Tensor
    next_states: torch.Tensor
    actions: torch.Tensor
    episode: torch.Tensor

    def __len__(self) -> int:
        return int(self.states.shape[0])

    def select(self, keep: torch.Tensor) -> Steps:
        """The steps where ``keep`` (a boolean mask) holds, in order."""
        return Steps(self.states[keep], self.next_states[keep], self.actions[keep], self.episode[keep])


def steps_from_replay(preset: LocomotionPreset, arrays: dict[str, np.ndarray]) -> Steps:
    """The steps of a replay buffer (:func:`symkit.rl.replay.buffer_steps`: raw observations, actions scaled to
    [-1, 1] as SAC stores them) in the preset's feature layout, actions in the environment's units. An episode ends
    where the buffer marks it done and wherever a step's next observation is not the following step's observation
    (a run resumed from a checkpoint starts a new episode without marking the old one done)."""
    obs, nxt = np.asarray(arrays["observations"]), np.asarray(arrays["next_observations"])
    scaled, dones = np.asarray(arrays["actions"], dtype=float), np.asarray(arrays["dones"]).reshape(-1)
    if not len(obs) == len(nxt) == len(scaled) == len(dones):
        raise ValueError(f"steps_from_replay: the arrays have {len(obs)}, {len(nxt)}, {len(scaled)} and {len(dones)} "
                         "rows; a replay buffer has one per step in each")
    env = preset.make_env()
    low, high = env.action_space.low.astype(float), env.action_space.high.astype(float)
    env.close()
    ends = dones.astype(bool)
    ends[:-1] |= (nxt[:-1] != obs[1:]).any(axis=1)
    episode = np.concatenate([[0], np.cumsum(ends[:-1])]) if len(ends) else np.zeros(0, np.int64)
    return Steps(torch.as_tensor(preset.features(obs)), torch.as_tensor(preset.features(nxt)),
                 torch.as_tensor(preset.action_features(low + 0.5 * (scaled + 1) * (high - low))),
                 torch.as_tensor(episode, dtype=torch.long))


def held_out_episodes(steps: Steps, every: int = 10) -> tuple[Steps, Steps]:
    """``steps`` split by episode: every ``every``-th episode (ids ``every - 1``, ``2 every - 1``, ...) held out,
    so that both parts span the whole of the agent's training."""
    test = steps.episode % every == every - 1
    return steps.select(~test), steps.select(test)


def sample_windows(steps: Steps, n: int, horizon: int, seed: int = 0) -> Rollouts:
    """``n`` windows of ``horizon`` consecutive steps of one episode each, drawn uniformly (with replacement) from
    every such window in ``steps`` (as :func:`sample_chunks` draws them from equal-length episodes)."""
    starts = torch.arange(max(len(steps) - horizon + 1, 0))
    starts = starts[steps.episode[starts] == steps.episode[starts + horizon - 1]] if len(starts) else starts
    if not len(starts):
        raise ValueError(f"sample_windows: no episode has {horizon} steps ({len(steps)} steps in "
                         f"{int(steps.episode.unique().numel())} episodes)")
    g = torch.Generator().manual_seed(seed)
    idx = starts[torch.randint(len(starts), (n,), generator=g)][:, None] + torch.arange(horizon)
    states = torch.cat([steps.states[idx], steps.next_states[idx[:, -1:]]], dim=1)
    return Rollouts(states, steps.actions[idx])


def hidden_rep(group: Group, ch: int) -> Rep:
    """``round(ch * 136 / 256)`` scalars plus copies of the base rep for the rest of ``ch`` (the reference code's
    hidden layers, ``136 T0 + 60 T1`` for Z2 at 256 channels). The base rep of a product group is the tensor
    product of its factors' ``V``: ``V`` of the product itself would not couple to reps of the factors (a
    pseudoscalar of one mirror), and the network would ignore its input."""
    base = V(group)
    if isinstance(group, ProductGroup):
        base = functools.reduce(operator.mul, [V(f) for f in group.factors])
    scalars = round(ch * 136 / 256)
    return scalars * Scalar + max(1, (ch - scalars) // base.size) * base


#: the presets whose hidden layers in the RL code (its ``middle_rep``) hold ``126 T0 + 55 V + 5 V⊗V`` at 256 channels
#: (Hopper and HalfCheetah; Walker2d's and Ant's are :func:`hidden_rep`'s, and symkit's Swimmer and Humanoid groups
#: are not the RL code's ``Z2``)
RL_CODE_TENSOR_HIDDEN = ("Hopper", "HalfCheetah")


def rl_code_hidden_rep(p: LocomotionPreset, ch: int) -> Rep:
    """The SAC networks' hidden rep in the RL code at ``ch`` channels: for :data:`RL_CODE_TENSOR_HIDDEN`,
    ``round(ch * 126 / 256)`` scalars, ``round(ch * 5 / 256)`` (at least one) copies of ``V ⊗ V`` and copies of
    ``V`` for the rest (``126 T0 + 55 V + 5 V⊗V`` at 256); :func:`hidden_rep` for the other presets."""
    if p.name not in RL_CODE_TENSOR_HIDDEN:
        return hidden_rep(p.group, ch)
    base = V(p.group)
    scalars, tensors = round(ch * 126 / 256), max(1, round(ch * 5 / 256))
    vectors = max(1, (ch - scalars - tensors * base.size ** 2) // base.size)
    return scalars * Scalar + vectors * base + tensors * (base * base)


@torch.no_grad()
def scale_last_layer(net: nn.Module, factor: float) -> nn.Module:
    """Multiply the parameters of the last layer of an MLP, EMLP or RPP-EMLP by ``factor`` (in place)."""
    last = net.head if isinstance(net, (EMLP, RPPEMLP)) else net.net[-1] if isinstance(net, MLP) else None
    if last is None:
        raise TypeError(f"scale_last_layer: expected an MLP, EMLP or RPPEMLP, got {type(net).__name__}")
    for p in last.parameters():
        p.mul_(factor)
    return net


def build_transition_net(kind: str, preset: LocomotionPreset, ch: int = 256, num_layers: int = 2,
                         head_scale: float = 0.01, dtype: torch.dtype | None = None) -> nn.Module:
    """The network ``(x, u) -> Delta x``: an MLP (swish), an EMLP or an RPP-EMLP of the preset's group with input
    rep ``state_rep + action_rep`` and output rep ``state_rep`` (thesis Sec. 3.6.2: 2 hidden layers of 256). The
    last layer starts ``head_scale`` times its default size: an untrained EMLP's bilinear layers otherwise make
    10-step rollouts diverge (Ant: 1e17 after 7 steps), the instability of Sec. 3.7."""
    if kind not in MODELS:
        raise ValueError(f"kind must be one of {MODELS}, got {kind!r}")
    G = preset.group
    net = network(kind, preset.state_rep + preset.action_rep, preset.state_rep, G,
                  ch=ch if kind == "mlp" else hidden_rep(G, ch), num_layers=num_layers, dtype=dtype)
    return scale_last_layer(net, head_scale)


class TransitionModel(nn.Module):
    """``x' = x + s_D * net((x - m_x) / s_x, (u - m_u) / s_u) + m_D`` with per-object statistics of the states,
    actions and one-step changes of ``data`` (:func:`~symkit.nn.rep_statistics`): exactly as equivariant as
    ``net``."""

    def __init__(self, net: nn.Module, preset: LocomotionPreset, data: Rollouts, max_rms: float = 5.0) -> None:
        super().__init__()
        self.net, self.preset, self.max_rms = net, preset, float(max_rms)
        device, dtype = parameter_like(net)
        x = data.states[:, :-1].reshape(-1, preset.state_size)
        dx = (data.states[:, 1:] - data.states[:, :-1]).reshape(-1, preset.state_size)
        u = data.actions.reshape(-1, preset.action_size)
        stats = {"x": rep_statistics(x, preset.state_rep), "u": rep_statistics(u, preset.action_rep),
                 "d": rep_statistics(dx, preset.state_rep)}
        for key, (mean, scale) in stats.items():
            self.register_buffer(f"mean_{key}", mean.to(device=device, dtype=dtype))
            self.register_buffer(f"scale_{key}", scale.to(device=device, dtype=dtype))

    def reset_parameters(self) -> None:
        """Re-initialise the network (the statistics are the data's, not drawn)."""
        self.net.reset_parameters()

    def delta(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The standardised change ``net(z)``, whose entries are of order one; ``z``, the standardised state and
        action, is shrunk to an RMS of at most ``max_rms`` (an invariant of every orthogonal rep, so the model
        stays equivariant): a rollout that leaves the data cannot feed the bilinear layers ever larger inputs."""
        z = torch.cat([(x - self.mean_x) / self.scale_x, (u - self.mean_u) / self.scale_u], -1)
        rms = z.square().mean(-1, keepdim=True).sqrt()
        return self.net(z * (self.max_rms / rms.clamp_min(self.max_rms)))

    def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return x + self.delta(x, u) * self.scale_d + self.mean_d


def model_rollout(model: TransitionModel, x0: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """States ``(N, H + 1, d)`` of the model from ``x0`` (N, d) under ``actions`` (N, H, a), the start included."""
    xs = [x0]
    for t in range(actions.shape[1]):
        xs.append(model(xs[-1], actions[:, t]))
    return torch.stack(xs, 1)


class _Rollout(nn.Module):
    """Packs a chunk as one tensor for the Trainer: ``[x0, u_0, ..., u_{H-1}] -> [x_1, ..., x_H]`` (flat)."""

    def __init__(self, model: TransitionModel, horizon: int) -> None:
        super().__init__()
        self.model, self.horizon = model, horizon

    def reset_parameters(self) -> None:
        """Re-initialise the wrapped transition model's network."""
        self.model.reset_parameters()

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        ds, da = self.model.preset.state_size, self.model.preset.action_size
        x0, u = packed[:, :ds], packed[:, ds:].reshape(-1, self.horizon, da)
        return model_rollout(self.model, x0, u)[:, 1:].reshape(len(packed), -1)


def train_transition_model(model: TransitionModel, chunks: Rollouts, *, epochs: int = 500, lr: float = 1e-3,
                           batch_size: int = 256, sigma_equivariant: float = 1e3, sigma_basic: float = math.sqrt(3),
                           clip: float | None = 1.0, seed: int = 0, desc: str = "transition",
                           precision: str = "32", max_epochs: int | None = None, max_batches: int | None = None
                           ) -> TrainResult:
    """Minimise the l1 norm of the chunks' rollout error (thesis Sec. 3.6.2), in standardised state units, with
    Adam at ``lr`` on a cosine schedule; an RPP-EMLP adds its prior (``rpp_penalty`` with the two standard
    deviations, divided by the number of numbers the loss averages over). Returns the Trainer's record;
    ``precision`` / ``max_epochs`` / ``max_batches`` go to :class:`symkit.train.Trainer`."""
    dtype = model.mean_x.dtype
    n, horizon = chunks.episodes, chunks.steps
    ds = model.preset.state_size
    packed = torch.cat([chunks.states[:, 0], chunks.actions.reshape(n, -1)], 1).to(dtype)
    target = chunks.states[:, 1:].reshape(n, -1).to(dtype)
    scale = model.scale_x.repeat(horizon)

    def loss(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ((pred - y) / scale).abs().mean()

    penalty = None
    if isinstance(model.net, RPPEMLP):
        count = n * horizon * ds

        def penalty(_: nn.Module) -> torch.Tensor:
            return rpp_penalty(model.net, sigma_equivariant, sigma_basic) / count

    trainer = Trainer(_Rollout(model, horizon), loss, penalty=penalty, lr=lr, epochs=epochs, batch_size=batch_size,
                      schedule="cosine", seed=seed, desc=desc, clip=clip,
                      precision=precision, max_epochs=max_epochs, max_batches=max_batches)
    return trainer.fit((packed, target))


def group_elements(group: Group, n: int, seed: int = 0) -> list[Any]:
    """``n`` sampled elements of ``group`` other than the identity (the identity would score a zero error)."""
    out: list[Any] = []
    draw = 0
    while len(out) < n:
        samples = group.samples(4 * n, seed=seed + draw)
        out += [g for g in samples if not np.allclose(np.asarray(g), np.eye(group.d))]
        draw += 1
        if draw > 10:
            raise ValueError(f"group_elements: {group} has no element other than the identity")
    return out[:n]


def _finite(x: torch.Tensor) -> torch.Tensor:
    """A diverged rollout clipped to +-1e6, so that its relative error is about 1 rather than nan."""
    return x.nan_to_num(1e6, 1e6, -1e6).clamp(-1e6, 1e6)


def _geomean(x: torch.Tensor) -> float:
    return float(x.clamp_min(1e-12).log().mean().exp())


@torch.no_grad()
def evaluate_transition_model(model: TransitionModel, test: Rollouts, horizons: Sequence[int] = HORIZONS,
                              seed: int = 0) -> dict[str, float]:
    """Table 3.3's metrics on the test episodes, in percent: ``rollout_error_{H}`` for every horizon ``H`` (relative
    error of the model's ``H``-step rollout from each episode's start, geometric mean over episodes and steps) and
    their mean ``rollout_error``; the same for the constant prediction ``x_t = x_0`` (``constant_error_{H}``);
    ``equivariance_error`` (eq. 3.3 along the longest rollout, one sampled non-identity element of the preset's
    group per episode); ``finite``, the share of the model's rollouts that did not diverge (a diverged state is
    clipped to 1e6, a relative error of about 1)."""
    model.eval()
    preset, dtype = model.preset, model.mean_x.dtype
    states, actions = test.states.to(dtype), test.actions.to(dtype)
    longest = max(horizons)
    if longest > test.steps:
        raise ValueError(f"evaluate_transition_model: horizon {longest} is longer than the test episodes")
    pred = model_rollout(model, states[:, 0], actions[:, :longest])
    out: dict[str, float] = {"finite": float(torch.isfinite(pred).all(-1).all(-1).double().mean())}
    pred = _finite(pred)
    for h in horizons:
        true = states[:, 1:h + 1]
        out[f"rollout_error_{h}"] = 100 * _geomean(rollout_error(pred[:, 1:h + 1], true, clamp=1e-12))
        const = states[:, :1].expand_as(true)
        out[f"constant_error_{h}"] = 100 * _geomean(rollout_error(const, true, clamp=1e-12))
    out["rollout_error"] = float(np.mean([out[f"rollout_error_{h}"] for h in horizons]))
    out["constant_error"] = float(np.mean([out[f"constant_error_{h}"] for h in horizons]))
    gs = group_elements(preset.group, test.episodes, seed=seed)
    Rx = torch.as_tensor(np.stack([preset.state_rep.rho(g) for g in gs]), dtype=dtype)
    Ru = torch.as_tensor(np.stack([preset.action_rep.rho(g) for g in gs]), dtype=dtype)
    moved = _finite(model_rollout(model, torch.einsum("nij,nj->ni", Rx, states[:, 0]),
                                  torch.einsum("nij,ntj->nti", Ru, actions[:, :longest])))
    out["equivariance_error"] = 100 * _geomean(rollout_error(moved[:, 1:], torch.einsum("nij,ntj->nti", Rx,
                                                                                           pred[:, 1:]), clamp=1e-12))
    model.train()
    return out


@functools.lru_cache(maxsize=8)
def cached_rollouts(name: str, episodes: int, steps: int, seed: int) -> Rollouts:
    """:func:`collect_rollouts` of the preset ``name``, kept for the runs of one process that share it."""
    from symkit.rl.presets import preset

    return collect_rollouts(preset(name), episodes, steps, seed)
