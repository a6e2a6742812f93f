"""How the finished rl-sac runs' policies end their episodes (docs/rl.md, "Where the RPP stands"): for every run of
``--env`` checkpointed under ``$SYMKIT_CHECKPOINTS/rl-sac`` (default ``runs/checkpoints``) that has finished, the
stochastic policy (as it acts while training; with ``--deterministic`` its mean action, as the evaluations that
make the learning curves play) plays ``--episodes`` episodes; a table counts those that ended with the
torso above the environment's healthy height range, below it, unhealthy otherwise (Hopper's and Walker2d's angle, a
non-finite state), or at the time limit, with the mean episode length and forward reward per step (the
environment's ``reward_forward``: the torso's forward speed, what a gait earns beyond staying up), the mean absolute
action, the share of the mean actions' energy in
a finite group's invariant part (for Ant: all legs together, in matched joint signs; for a Z2 mirror: the
symmetric part), the policy's mean standard deviation over the visited states, and how the critics' value of the
actions taken (the smaller of SAC's two Q estimates) compares with what followed: the discounted return from each
step (discount 0.99, SAC's), over the steps whose return is known to within 5% (every step of an episode that
terminated; a time-limited episode's but its last 300), over all of them and over the episodes that ended early
(terminated, where a misjudged ending shows); for critics with bilinear layers, the largest of their
layers' mean output-to-input norm ratio (``|scale W(h) h| / |h|``) over those evaluations.

    .venv/bin/python benchmarks/rl_episode_ends.py [--env Ant] [--episodes 10] [--seed 300] [--runs 'Ant-rpp-*']
        [--deterministic]

Not a timing: it reads saved policies (``sac.zip``), one thread, about a second per 1,000 steps.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch


def invariant_projection(p) -> np.ndarray | None:
    """The projection onto the invariant part of the preset's action features, the mean of ``rho(g)`` over the
    elements of a finite group of one factor (``Group.elements``; None for another group)."""
    if len(p.group.factors) != 1 or not p.group.is_finite:
        return None
    return np.mean([p.action_rep.rho(g) for g in p.group.elements()], axis=0)


#: SAC's discount, and the steps at a time-limited episode's end whose discounted return the cut hides (0.99^300 < 5%)
DISCOUNT, UNKNOWN_TAIL = 0.99, 300


def returns_to_go(rewards: list[float], discount: float = DISCOUNT) -> np.ndarray:
    """``G_t = r_t + discount G_{t+1}``, with ``G = 0`` after the last reward."""
    out, g = np.zeros(len(rewards)), 0.0
    for t in reversed(range(len(rewards))):
        g = rewards[t] + discount * g
        out[t] = g
    return out


def bilinear_ratios(net: torch.nn.Module) -> tuple[dict[str, list[float]], list]:
    """Forward hooks on every bilinear layer of ``net`` that record ``|output| / |input|`` per sample, averaged over
    the batch, into the returned dict (one list per layer); remove the returned handles when done."""
    from symkit.nn import BiLinear

    ratios: dict[str, list[float]] = {}

    def hook(name):
        def record(module, inputs, output):
            ratio = output.detach().norm(dim=-1) / inputs[0].detach().norm(dim=-1).clamp_min(1e-12)
            ratios[name].append(float(ratio.mean()))
        return record

    handles = []
    for name, module in net.named_modules():
        if isinstance(module, BiLinear):
            ratios[name] = []
            handles.append(module.register_forward_hook(hook(name)))
    return ratios, handles


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def episode_ends(model, env, episodes: int, seed: int, projection: np.ndarray | None = None,
                 to_features=None, deterministic: bool = False) -> dict[str, float]:
    """Counts of how ``episodes`` stochastic (``deterministic``: mean-action) episodes of ``model`` in ``env``
    ended, the mean |action|, the share of the deterministic actions' energy that ``projection`` keeps (of their
    ``to_features``), the mean standard deviation of the policy over the visited states, and the mean critic value
    ``min(Q1, Q2)`` of the actions taken beside the mean discounted return that followed them (over all episodes,
    and over those that ended early), and the critics' largest bilinear ratio (module docstring; NaN without
    bilinear layers)."""
    import mujoco

    low, high = env.unwrapped._healthy_z_range
    free = env.unwrapped.model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    height = 2 if free else 1  # a free root joint's qpos is x, y, z, ...; a planar robot's x, z, angle
    counts = {"above": 0, "below": 0, "other": 0, "time limit": 0}
    actions, stds, kept, energy, forward = [], [], 0.0, 0.0, 0.0
    values: dict[bool, list[float]] = {True: [], False: []}  # by whether the episode ended early (terminated)
    returns: dict[bool, list[float]] = {True: [], False: []}
    ratios, handles = bilinear_ratios(model.critic)
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        qs, rewards = [], []
        while True:
            with torch.no_grad():
                mu, log_std, _ = model.policy.actor.get_action_dist_params(
                    torch.as_tensor(obs, dtype=torch.float32)[None])
            stds.append(float(log_std.exp().mean()))
            if projection is not None:  # the deterministic action, squashed and scaled as predict gives it
                mean = to_features(model.policy.unscale_action(np.tanh(mu[0].numpy())))
                kept, energy = kept + float(np.sum((projection @ mean) ** 2)), energy + float(np.sum(mean ** 2))
            action, _ = model.predict(obs, deterministic=deterministic)
            actions.append(np.abs(action).mean())
            with torch.no_grad():
                taken = torch.as_tensor(model.policy.scale_action(action), dtype=torch.float32)[None]
                qs.append(float(torch.min(*model.critic(torch.as_tensor(obs, dtype=torch.float32)[None], taken))))
            obs, reward, terminated, truncated, info = env.step(action)
            rewards.append(float(reward))
            forward += float(info["reward_forward"])
            if terminated or truncated:
                break
        known = len(rewards) if terminated else max(len(rewards) - UNKNOWN_TAIL, 0)
        values[terminated] += qs[:known]
        returns[terminated] += list(returns_to_go(rewards)[:known])
        z = float(env.unwrapped.data.qpos[height])
        if not terminated:
            counts["time limit"] += 1
        elif z > high:
            counts["above"] += 1
        elif z < low:
            counts["below"] += 1
        else:
            counts["other"] += 1
    for handle in handles:
        handle.remove()
    return {**counts, "episode length": len(actions) / episodes, "forward reward per step": forward / len(actions),
            "mean |action|": float(np.mean(actions)), "policy std": float(np.mean(stds)),
            "invariant share": kept / energy if energy > 0 else float("nan"),
            "critic value": _mean(values[True] + values[False]),
            "return that followed": _mean(returns[True] + returns[False]),
            "critic value, ended early": _mean(values[True]), "return that followed, ended early": _mean(returns[True]),
            "critic bilinear ratio": max((float(np.mean(r)) for r in ratios.values() if r), default=float("nan"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Ant", help="a symkit.rl preset (default Ant)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per run (default 10)")
    parser.add_argument("--seed", type=int, default=300, help="the first episode's reset seed (default 300)")
    parser.add_argument("--runs", default=None, help="a glob of the run folders to read (default: '<env>-*')")
    parser.add_argument("--deterministic", action="store_true",
                        help="play the mean actions (as the evaluations do) instead of sampling them")
    args = parser.parse_args()
    from symkit.lab.experiments.rl_sac import NETWORK_FIELDS, SACConfig
    from symkit.rl import preset
    from symkit.rl.sac import load_sac

    p = preset(args.env)
    torch.set_num_threads(1)
    root = Path(os.environ.get("SYMKIT_CHECKPOINTS", "runs/checkpoints")) / "rl-sac"
    env = p.make_env()
    if not hasattr(env.unwrapped, "_healthy_z_range"):
        parser.error(f"--env {p.name}: the environment has no healthy height range")
    low, high = env.unwrapped._healthy_z_range
    kind = "deterministic (mean-action)" if args.deterministic else "stochastic"
    print(f"{p.name}: how {args.episodes} {kind} episodes end (healthy torso height {low:g}..{high:g})")
    print("| run | steps | above | below | other | time limit | episode length | forward reward per step "
          "| mean abs action | invariant share | policy std "
          "| critic value / return that followed | the same, episodes that ended early | critic bilinear ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    defaults = {k: getattr(SACConfig(), k) for k in NETWORK_FIELDS}
    projection = invariant_projection(p)
    signs = p.signs("matched")[1] if any(p.sign_flips) else np.ones(p.action_size)

    def to_features(action):
        return signs * p.action_features(action)

    pattern = args.runs or f"{p.name}-*"
    if not pattern.startswith(f"{p.name}-"):
        parser.error(f"--runs {pattern!r}: a glob of {p.name}'s run folders, starting '{p.name}-'")
    for folder in sorted(root.glob(pattern)):
        config_file, curve_file = folder / "config.json", folder / "curve.json"
        if not (config_file.exists() and curve_file.exists() and (folder / "sac.zip").exists()):
            continue
        config, done = json.loads(config_file.read_text()), json.loads(curve_file.read_text())["num_timesteps"]
        if done < config.get("steps", 0):
            continue  # still training, or stopped part way
        settings = [f"{k}={config[k]}" for k in NETWORK_FIELDS if k in config and config[k] != defaults[k]]
        label = ", ".join([str(config.get("model")), *settings, f"seed {config.get('seed')}"])
        ends = episode_ends(load_sac(folder / "sac.zip"), env, args.episodes, args.seed, projection,
                            to_features, deterministic=args.deterministic)
        print(f"| {label} | {done:,} | {ends['above']} | {ends['below']} | {ends['other']} | {ends['time limit']} "
              f"| {ends['episode length']:.0f} | {ends['forward reward per step']:.2f} "
              f"| {ends['mean |action|']:.2f} | {ends['invariant share']:.2f} | {ends['policy std']:.3f} "
              f"| {ends['critic value']:.1f} / {ends['return that followed']:.1f} "
              f"| {ends['critic value, ended early']:.1f} / {ends['return that followed, ended early']:.1f} "
              f"| {ends['critic bilinear ratio']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
