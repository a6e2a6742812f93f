"""Soft Actor-Critic with RPP-EMLP policies and Q-functions on MuJoCo locomotion (thesis Sec. 3.6.1, Figure 3.4).

One run trains SAC (stable-baselines3, :mod:`symkit.rl.sac`) with ``model`` networks (``rpp``, ``emlp``,
``relu-mlp``, the thesis's baseline: the reference code's standard SAC networks, or ``mlp``, symkit's swish MLP,
which the runs stored before ``relu-mlp`` existed used) in actor and critics, or ``rpp-policy`` (an RPP actor with
``relu-mlp`` critics, Figure A.2: RPP in the policy only), on one environment for ``steps``
environment steps, evaluating the deterministic policy every ``eval_every`` steps, and reports the learning curve
(``curve_steps``, ``curve_returns``), the final and best evaluation returns and ``mean_return``, the mean over the
curve (its area divided by its length: equal steps, so a measure of data efficiency). The critic target speed is
Table A.9's (``tau=0``); Adam betas (0.5, 0.999) for the RPP networks; gradients clipped to a global norm of
``max_grad_norm`` (0.5, the reference code's) for every model; the EMLP's and RPP-EMLP's bilinear layers scaled by
``bilinear_scale`` (0.03, the RL code's), hidden reps ``hidden`` (``"rl-code"``: the RL code's per environment), a
target entropy of ``-target_entropy_scale x |A|`` (0.5, the RL code's) and a standard deviation ``std_param``
(``"softplus"`` of the actor's head, clipped, the RL code's). Runs stored before these settings existed had emlp's
0.1, uniform hidden reps and stable-baselines3's ``-|A|`` and ``exp`` (:data:`LEGACY`): they keep their identity in
the results store and their checkpoint folders, and the report reads them so.

Runs checkpoint themselves every ``checkpoint_every`` steps to ``$SYMKIT_CHECKPOINTS/rl-sac/<run>`` (default
``runs/checkpoints``) and resume from there when started again with the same config; a finished run keeps its
policy and curve there, and, when it is shorter than the full size (``FULL_STEPS``), its replay buffer too, so that
a longer budget continues it: a run that finds no checkpoint of its own starts from the longest finished run whose
config differs from its own only in ``steps`` and ``checkpoint_every`` (:func:`shorter_run`), and trains the
remaining steps. That run's files are linked, not changed. Budgets grow over sessions this way (30k, then 60k, then
100k steps) without training again what is done. A continued run is the shorter one's run carried on: equal to one
long run except that the episode under way at the shorter run's end is cut (as at every resume) and the random
streams restart from the checkpoint.

The full size is the thesis's: 10^6 steps, updates from step 10^4, 4 seeds, the six environments of Table A.10 (the
thesis ran RPP on Humanoid and reports that its critic never trained). That is about 8 GPU-hours a run in the
thesis; on two shared CPU cores a step takes about 0.1 s with the RPP (0.05 s with the MLP), so full runs are for
better machines or Ray sweeps. The quick size
takes 600 steps of Hopper at 64 channels (updates from step 300), enough to check the set-up, not to learn.
Measured figures: docs/rl.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from symkit._checks import require
from symkit._locks import exclusive, holder
from symkit.lab import runtime
from symkit.lab._text import count
from symkit.lab.experiments.fields import Count, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, Plot, Unfinished, register
from symkit.nn.rpp import BASIC_INIT_SCALE
from symkit.rl.presets import PRESETS, preset, simulator_versions
from symkit.rl.replay import replay_file
from symkit.rl.settings import (
    HIDDEN,
    KINDS,
    MLP_KINDS,
    RL_BILINEAR_SCALE,
    RL_TARGET_ENTROPY_SCALE,
    RPP_BETAS,
    STD_PARAMS,
    check_beta1,
)
from symkit.stats import difference, standard_error

__all__ = ["SACConfig", "run", "checkpoint_dir", "shorter_run", "in_progress", "unfinished", "comparisons",
           "comparison_figure", "figures", "FULL_STEPS", "agent_replay"]

#: the thesis's run length; a finished run this long or longer drops its replay buffer (a run shorter keeps it, so
#: a longer budget can continue it: 200 MB for Hopper's 10^6 transitions, stored whole however many are filled)
FULL_STEPS = 1_000_000
#: the settings a longer run may differ in from the shorter run it continues (neither changes what is trained)
BUDGET_FIELDS = ("steps", "checkpoint_every")
#: settings added after runs were stored, with the value those runs had (:attr:`Experiment.legacy`): emlp's bilinear
#: scale, symkit's uniform hidden reps, stable-baselines3's target entropy ``-|A|`` and ``exp`` standard deviation,
#: the environment's joint signs (``raw``, also the default: runs of it keep their identity and folders) and Table
#: A.10's scalar torso, the RPP's Adam beta 0.5 and its flexible paths' initial scale 1e-3 (all also the defaults)
LEGACY = {"bilinear_scale": 0.1, "hidden": "uniform", "target_entropy_scale": 1.0, "std_param": "exp",
          "joint_signs": "raw", "torso": "scalars", "rpp_beta1": RPP_BETAS[0], "rpp_basic_init": BASIC_INIT_SCALE}
#: the report's verdict (:func:`comparisons`): an equivariant model is ahead of (behind) the MLP run with the same
#: settings when its late return is higher (lower) with Welch's one-sided p-value below ``SIGNIFICANCE``, with at
#: least ``MIN_SEEDS`` seeds on each side; otherwise level
SIGNIFICANCE = 0.05
MIN_SEEDS = 3
#: characters per line of a comparison panel's settings text (about a 5-inch panel's width at 9 points)
TITLE_WIDTH = 72
#: settings of the equivariant networks alone: an MLP run is the baseline of every value of them
NETWORK_FIELDS = ("bilinear_scale", "hidden", "joint_signs", "torso", "rpp_beta1", "rpp_basic_init")


@dataclass
class SACConfig:
    """The settings of one rl-sac run (SAC on a MuJoCo preset, thesis Sec. 3.6.1 and Table A.9); the
    defaults follow the RL code's settings, ``quick`` shrinks the budget."""
    env: str = "Hopper"  # a preset: Walker2d, Hopper, HalfCheetah, Swimmer, Ant, Humanoid (or InvertedPendulum)
    model: str = "rpp"  # actor and critics: "rpp", "emlp", "relu-mlp" (the thesis's baseline) or "mlp" (swish);
    # "rpp-policy": an RPP actor with ReLU MLP critics (Figure A.2)
    steps: Count = 1_000_000
    learning_starts: Count = 10_000
    batch_size: Count = 256
    buffer_size: Count = 1_000_000
    lr: Positive = 3e-4
    ch: Count = 256
    num_layers: Count = 2
    tau: NonNegative = 0.0  # the critic target speed; 0: Table A.9's
    equivariant_wd: NonNegative = 0.0  # RPP prior as weight decays (the reference code's flags)
    basic_wd: NonNegative = 1e-6
    max_grad_norm: NonNegative = 0.5  # the reference code's gradient clipping (global norm per update); 0: off
    bilinear_scale: NonNegative = RL_BILINEAR_SCALE  # the RL code's (emlp's: 0.1); no effect on the MLPs
    hidden: str = "rl-code"  # the equivariant networks' hidden reps: "rl-code" (per environment) or "uniform"
    target_entropy_scale: NonNegative = RL_TARGET_ENTROPY_SCALE  # target entropy -scale x |A| (SB3's: 1)
    std_param: str = "softplus"  # the policy's std from its head: "softplus" (the RL code's) or "exp" (SB3's)
    joint_signs: str = "raw"  # "matched": Ant's reversed ankles negated in the features (the legs' cycle then maps
    # joint ranges onto joint ranges); an equivariant networks' setting, the MLPs are indifferent to it
    torso: str = "scalars"  # "turned": Ant's torso orientation and angular velocity turn with the leg cycle (with
    # joint_signs=matched an exact symmetry); the equivariant networks' alone, an MLP sees Table A.10's layout
    rpp_beta1: NonNegative = RPP_BETAS[0]  # the RPP networks' first Adam beta (the thesis's 0.5; Adam's own: 0.9)
    rpp_basic_init: NonNegative = BASIC_INIT_SCALE  # the RPP networks' flexible paths' initial scale relative to
    # their equivariant paths' (the RPP code's 1e-3: nearly exactly equivariant at first; 1: both drawn alike)
    eval_every: Count = 10_000
    eval_episodes: Count = 10
    checkpoint_every: Count = 50_000
    seed: Seed = 0


def _validate(config: SACConfig) -> None:
    preset(config.env)
    if config.model not in KINDS:
        raise ValueError(f"model must be one of {KINDS}, got {config.model!r}")
    if config.hidden not in HIDDEN:
        raise ValueError(f"hidden must be one of {HIDDEN}, got {config.hidden!r}")
    if config.std_param not in STD_PARAMS:
        raise ValueError(f"std_param must be one of {STD_PARAMS}, got {config.std_param!r}")
    preset(config.env).signs(config.joint_signs)  # "matched" needs a preset with joints to negate (Ant)
    preset(config.env).with_torso(config.torso, config.joint_signs)  # "turned": Ant, with matched joint signs
    check_beta1("rl-sac", config.rpp_beta1)
    if config.learning_starts >= config.steps:
        raise ValueError(f"learning_starts ({config.learning_starts}) must be below steps ({config.steps})")


def _checkpoints() -> Path:
    """The folder of the rl-sac checkpoints: ``$SYMKIT_CHECKPOINTS`` (default ``runs/checkpoints``) ``/rl-sac``."""
    return Path(os.environ.get("SYMKIT_CHECKPOINTS", "runs/checkpoints")) / "rl-sac"


def checkpoint_dir(config: SACConfig) -> Path:
    """Where a run keeps its checkpoints: in :func:`_checkpoints`, the environment, model, seed and a hash of the
    config (without the legacy settings at their old values, so a run stored before a setting existed keeps its
    folder)."""
    values = EXPERIMENT.identity(dataclasses.asdict(config))  # legacy settings at their old values: the old folder
    digest = hashlib.sha1(json.dumps(values, sort_keys=True).encode()).hexdigest()[:10]
    return _checkpoints() / f"{config.env}-{config.model}-seed{config.seed}-{digest}"


def _checkpointed(pattern: str = "*") -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """``(folder, config, curve)`` of every checkpoint folder matching ``pattern`` that holds a stored config and a
    curve (folders of runs from before configs were stored, and runs not yet checkpointed, are passed over)."""
    for folder in sorted(_checkpoints().glob(pattern)):
        try:
            config = json.loads((folder / "config.json").read_text())
            curve = json.loads((folder / "curve.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict) and isinstance(curve, dict):
            yield folder, config, curve


def _without_budget(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config's identity without the budget: what two runs of which one may continue the other share (a stored
    config that predates a legacy setting reads it as its legacy value)."""
    values = EXPERIMENT.identity(EXPERIMENT.complete(config))
    return {k: v for k, v in values.items() if k not in BUDGET_FIELDS}


def shorter_run(config: SACConfig) -> Path | None:
    """The checkpoint a run of ``config`` continues: among the finished runs in ``checkpoint_dir(config).parent``
    whose stored config (``config.json``) equals ``config`` but for :data:`BUDGET_FIELDS` and whose ``steps`` are
    fewer, the longest that kept its replay buffer; None when there is none."""
    mine = _without_budget(dataclasses.asdict(config))
    best: tuple[int, Path] | None = None
    for folder, theirs, curve in _checkpointed(f"{config.env}-{config.model}-seed{config.seed}-*"):
        steps = theirs.get("steps")
        if (isinstance(steps, int) and steps < config.steps and curve.get("num_timesteps") == steps
                and _without_budget(theirs) == mine and replay_file(folder) is not None
                and (folder / "sac.zip").exists() and (best is None or steps > best[0])):
            best = (steps, folder)
    return best[1] if best else None


def _start_from(source: Path, folder: Path) -> None:
    """Give ``folder`` the checkpoint of ``source`` (hard links where the file system allows, else copies; checkpoints
    are replaced, never written in place, so the source stays as it was); ``curve.json`` last, as a run resumes only
    when it is there."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in (replay_file(source).name, "sac.zip", "curve.json"):
        tmp = folder / f"{name}.link"
        tmp.unlink(missing_ok=True)
        try:
            os.link(source / name, tmp)
        except OSError:
            shutil.copyfile(source / name, tmp)
        os.replace(tmp, folder / name)


def run(config: SACConfig) -> dict[str, Any]:
    """Train SAC on one environment and report its learning curve (module docstring). The run holds its checkpoint
    folder while it trains (:func:`symkit._locks.exclusive`): a second process given the same run is refused."""
    return _train(config, keep_replay=config.steps < FULL_STEPS)[0]


def agent_replay(config: SACConfig) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The replay buffer of the run ``config`` (trained here, resumed, or read from its finished checkpoint) as
    :func:`symkit.rl.replay.buffer_steps` gives it, and the run's metrics; the run keeps its buffer whatever its
    length. A finished run of the full length that dropped its buffer (``rl-sac`` runs of ``FULL_STEPS``) raises
    ``ValueError`` naming its folder."""
    from symkit.rl.replay import buffer_steps, replay_steps

    metrics, model = _train(config, keep_replay=True)
    folder = checkpoint_dir(config)
    if runtime.current().smoke:  # no checkpoint: the buffer in memory
        return buffer_steps(model.replay_buffer), metrics
    path = replay_file(folder)
    if path is None or path.suffix != ".npz":
        raise ValueError(f"agent_replay: the finished run in {folder} kept no replay buffer (replay.npz); delete "
                         "the folder to train it again with its buffer kept")
    return replay_steps(path), metrics


def _train(config: SACConfig, keep_replay: bool) -> tuple[dict[str, Any], Any]:
    """:func:`run`, keeping the replay buffer of a finished run if ``keep_replay``; also the trained model."""
    from symkit.rl.sac import area_under_curve, train_sac

    _validate(config)
    p = preset(config.env)
    steps, learning_starts, eval_every = config.steps, config.learning_starts, config.eval_every
    eval_episodes, checkpoints, buffer_size = config.eval_episodes, checkpoint_dir(config), config.buffer_size
    if runtime.current().smoke:  # check the set-up only: a few random steps, two updates, no checkpoints to resume
        learning_starts = min(learning_starts, 64)
        steps = eval_every = buffer_size = min(steps, learning_starts + (runtime.current().max_batches or 2))
        eval_episodes, checkpoints = 1, None
    with exclusive(checkpoints, "rl-sac"):  # creates the folder
        source = None
        if checkpoints is not None:
            if not (checkpoints / "curve.json").exists():
                source = shorter_run(config)
                if source is not None:
                    _start_from(source, checkpoints)
            (checkpoints / "config.json").write_text(json.dumps(dataclasses.asdict(config), sort_keys=True))
        result = train_sac(
            p, config.model, steps, seed=config.seed, eval_every=eval_every,
            eval_episodes=eval_episodes, checkpoint_dir=checkpoints,
            checkpoint_every=config.checkpoint_every, ch=config.ch, num_layers=config.num_layers,
            learning_starts=learning_starts, batch_size=config.batch_size, buffer_size=buffer_size,
            lr=config.lr, tau=config.tau or None, equivariant_wd=config.equivariant_wd, basic_wd=config.basic_wd,
            max_grad_norm=config.max_grad_norm, bilinear_scale=config.bilinear_scale, hidden=config.hidden,
            target_entropy_scale=config.target_entropy_scale, std_param=config.std_param,
            joint_signs=config.joint_signs, torso=config.torso, rpp_beta1=config.rpp_beta1,
            rpp_basic_init=config.rpp_basic_init,
            keep_replay=keep_replay, device=runtime.device(), compile=runtime.current().compile)
    updates = steps - learning_starts
    return {
        "final_return": result.returns[-1], "best_return": max(result.returns),
        "mean_return": area_under_curve(result), "mean_best_return": area_under_curve(result, best=True),
        "curve_steps": result.steps, "curve_returns": result.returns,
        "train_episodes": len(result.train_returns),
        "last_train_return": result.train_returns[-1] if result.train_returns else math.nan,
        "train_seconds": result.seconds, "seconds_per_update": result.seconds / max(updates, 1),
        "resumed_from": result.resumed_from, "continued_from": source.name if source is not None else None,
        "tau": result.model.tau,
        # compiled networks compute the same functions with other float rounding: counted apart, as other versions
        "libraries": simulator_versions() + (", networks compiled (torch.compile)" if result.compiled else ""),
    }, result.model


def _curve_means(metrics: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """A run's final return, late return (the last fifth of the steps), mean return over the curve and mean of
    Figure 3.4's best-so-far curve, from its stored curve (so runs stored before a metric existed are summarised
    alike)."""
    from symkit.rl.sac import SACResult, area_under_curve, late_return

    result = SACResult(steps=list(metrics["curve_steps"]), returns=list(metrics["curve_returns"]))
    return result.returns[-1], late_return(result), area_under_curve(result), area_under_curve(result, best=True)


def _settings(config: Mapping[str, Any]) -> str:
    """A stored run's SAC settings as the report shows them (a setting it lacks has its :data:`LEGACY` value): the
    bilinear scale and hidden reps of the equivariant networks (the MLPs have neither), the target entropy and the
    standard deviation's form."""
    value = {k: config.get(k, v) for k, v in LEGACY.items()}
    signs = [] if value["joint_signs"] == "raw" else [f"{value['joint_signs']} joint signs"]
    torso = [] if value["torso"] == "scalars" else [f"{value['torso']} torso"]
    beta1 = [] if value["rpp_beta1"] == RPP_BETAS[0] else [f"RPP Adam beta1 {value['rpp_beta1']:g}"]
    basic = ([] if value["rpp_basic_init"] == BASIC_INIT_SCALE
             else [f"RPP flexible paths start at {value['rpp_basic_init']:g}"])
    parts = [] if config.get("model") in MLP_KINDS else [f"bilinear {value['bilinear_scale']:g}",
                                                          f"{value['hidden']} hidden", *signs, *torso, *beta1, *basic]
    return ", ".join([*parts, f"entropy -{value['target_entropy_scale']:g} dim A", f"{value['std_param']} std"])


def _row_order(row: Mapping[str, Any]) -> tuple:
    """The report's order of result rows: environment, steps, model, settings."""
    config = row["config"]
    return str(config.get("env")), config.get("steps") or 0, str(config.get("model")), _settings(config)


def _mean_se(values: Sequence[float]) -> str:
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return f"{v.mean():.1f}" if len(v) else "nan"
    return f"{v.mean():.1f} ± {v.std(ddof=1) / math.sqrt(len(v)):.1f}"


def summarize(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per environment and model, over seeds (mean ± standard error): the final evaluation return, the late return
    (mean of the evaluations in the last fifth of the steps), the mean return over the curve, and the mean of Figure
    3.4's curve (the best return reached up to each evaluation), and each seed's late and final return (``seed: late
    (final)``, so a mean carried by one seed shows, and the late returns the verdicts compare can be checked)."""
    lines = ["| env | steps | model | settings | seeds | final return | late return (last fifth) "
             "| mean return over the curve | mean best so far (Fig. 3.4) | late (final) return per seed "
             "| s per update |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=_row_order):
        seeds = sorted((seed, _curve_means(m)) for seed, m in r.get("by_seed", {}).items() if "curve_returns" in m)
        columns = [_mean_se([c[i] for _, c in seeds]) for i in range(4)]
        per_seed = ", ".join(f"{seed}: {c[1]:.0f} ({c[0]:.0f})" for seed, c in seeds)
        lines.append(f"| {r['config'].get('env')} | {r['config'].get('steps', '')} | {r['config'].get('model')} | "
                     f"{_settings(r['config'])} | {r['n']} | " + " | ".join(columns)
                     + f" | {per_seed} | {r['mean'].get('seconds_per_update', math.nan):.3f} |")
    lines += ["", _libraries_line(rows)]
    compared = comparisons(rows)
    if compared:
        lines += ["", "Against the MLP of the same settings (difference of seed means ± its standard error; p: Welch's "
                  "one-sided t-test that the model is ahead; the verdict reads the late return at p < "
                  f"{SIGNIFICANCE:g} with at least {MIN_SEEDS} seeds a side):", "",
                  "| env | steps | model | settings | against | seeds | late return | p | mean return over the curve "
                  "| p | final return | p | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in compared:
            cells = [_difference_cells(d) for d in (c["late"], c["curve"], c["final"])]
            lines.append(f"| {c['env']} | {c['steps']} | {c['model']} | {c['settings']} | {c['against']} | "
                         f"{c['seeds'][0]} vs {c['seeds'][1]} | " + " | ".join(cells) + f" | {c['verdict']} |")
        lines += ["", _verdicts_by_environment(compared)]
    lines += _returns_along_the_curve(rows)
    running = in_progress()
    if running:
        lines += ["", "Runs in progress (read from their checkpoints; not results until they finish):", "",
                  "| env | steps | model | settings | seed | done | return at the last evaluation | best so far "
                  "| time so far | time left (at its latest pace) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['config'].get('env')} | {r['config'].get('steps')} | {r['config'].get('model')} | "
                  f"{_settings(r['config'])} | {r['config'].get('seed')} | {r['done']} | {r['returns'][-1]:.0f} | "
                  f"{max(r['returns']):.0f} | {_duration(r['seconds'])} | {_duration(_time_left(r))} |"
                  for r in running]
    return "\n".join(lines)


def _returns_along_the_curve(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A table of each seed's evaluation return at every tenth of its steps (the last evaluation at or before
    ``k x steps / 10``), per row: where in the run a late or final return was made, without the store's curves."""
    points, table = 10, []
    for r in sorted(rows, key=_row_order):
        for seed, metrics in sorted(r.get("by_seed", {}).items()):
            steps, returns = metrics.get("curve_steps") or [], metrics.get("curve_returns") or []
            if not steps:
                continue
            marks = [steps[-1] * k / points for k in range(1, points + 1)]
            at = [returns[int(np.searchsorted(steps, mark, side="right")) - 1] for mark in marks]
            table.append((r["config"], seed, marks, at))
    if not table:
        return []
    lines = ["", "Evaluation return per seed at every tenth of its steps (the last evaluation at or before it):",
             ""]
    shared = {tuple(marks) for _, _, marks, _ in table}
    head = ([f"{m:,.0f}" if m == int(m) else f"{m:,.1f}" for m in table[0][2]] if len(shared) == 1
            else [f"{k}/{points}" for k in range(1, points + 1)])
    lines += ["| env | steps | model | settings | seed | " + " | ".join(head) + " |",
              "|---" * (5 + points) + "|"]
    lines += [f"| {c.get('env')} | {c.get('steps', '')} | {c.get('model')} | {_settings(c)} | {seed} | "
              + " | ".join(f"{v:.0f}" for v in at) + " |" for c, seed, _, at in table]
    return lines


def _p_value(p: float, equals: str = "") -> str:
    """A p-value to three decimals, ``"< 0.001"`` below that (not ``0.000``); ``equals`` goes before a value."""
    return "< 0.001" if p < 0.001 else f"{equals}{p:.3f}"


def _difference_cells(d: Any) -> str:
    """``"+455.6 ± 120.3 | 0.012"``: a difference, its standard error and the one-sided p-value; ``–`` for what one
    seed on a side leaves undefined."""
    error = f" ± {d.error:.1f}" if math.isfinite(d.error) else ""
    p = _p_value(d.p_greater) if math.isfinite(d.p_greater) else "–"
    return f"{d.mean:+.1f}{error} | {p}"


def _libraries_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """How many runs were made with each set of simulator and SAC libraries (:func:`simulator_versions`), so a
    table that mixes physics versions says so."""
    counts: dict[str, int] = {}
    for r in rows:
        for metrics in r.get("by_seed", {}).values():
            key = metrics.get("libraries") or "not recorded (runs stored before symkit recorded them)"
            counts[key] = counts.get(key, 0) + 1
    return "Libraries: " + "; ".join(f"{key} ({count(n, 'run')})" for key, n in sorted(counts.items())) + "."


def _time_left(running: Mapping[str, Any]) -> float:
    """Seconds an unfinished run still needs: the steps left times its training seconds per step between its last
    two checkpoints (``saves``; both after ``learning_starts``, where the updates, not the environment, take the
    time), so a run that shared its cores earlier is judged by its pace now; for a run without two such
    checkpoints, its seconds per update so far."""
    config, done = running["config"], running["done"]
    starts, left = int(config.get("learning_starts") or 0), int(config["steps"]) - done
    saves = [(int(n), float(t)) for n, t in running.get("saves") or [] if int(n) > starts]
    if len(saves) >= 2 and saves[-1][0] > saves[-2][0]:
        (n0, t0), (n1, t1) = saves[-2:]
        return (t1 - t0) / (n1 - n0) * left
    updates = done - starts
    if updates <= 0 or not math.isfinite(running["seconds"]):
        return math.nan
    return running["seconds"] / updates * left


def _duration(seconds: float) -> str:
    """``"48 min"``, ``"3.2 h"``; ``"?"`` when unknown."""
    if not math.isfinite(seconds):
        return "?"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _steps(steps: Any) -> str:
    """``60,000``; a run stored without ``steps`` shows ``?``."""
    return f"{steps:,}" if isinstance(steps, int) else "?"


def _verdicts_by_environment(compared: Sequence[Mapping[str, Any]]) -> str:
    """One line: the environments where some row is ahead (with the rows' steps and model), and how many of the
    compared environments that is."""
    envs = sorted({c["env"] for c in compared}, key=str)
    ahead = {env: [f"{c['model']} against {c['against']} at {_steps(c['steps'])} steps" for c in compared
                   if c["env"] == env and c["outcome"] == "ahead"] for env in envs}
    named = ", ".join(f"{env} ({'; '.join(rows)})" for env, rows in ahead.items() if rows) or "none"
    return (f"Ahead by the rule on {sum(bool(r) for r in ahead.values())} of the {len(envs)} environments compared: "
            f"{named}.")


def _baseline_key(config: Mapping[str, Any]) -> tuple:
    """What an equivariant run and its MLP baseline share: every setting but the model, the seed and the
    equivariant networks' own (a setting a stored run lacks has its :data:`LEGACY` value)."""
    full = EXPERIMENT.complete(config)
    return tuple(sorted((k, repr(v)) for k, v in full.items() if k not in ("model", "seed", *NETWORK_FIELDS)))


def comparisons(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every equivariant row (``rpp``, ``emlp``, ``rpp-policy``) against each MLP row (``relu-mlp``, ``mlp``) of the
    same settings (:func:`_baseline_key`: environment, steps, target entropy, std, ...): the differences of the
    seeds' final, late and curve-mean returns (:class:`symkit.stats.Difference`) and the verdict on the late return
    (``SIGNIFICANCE``, ``MIN_SEEDS``): ``"ahead (p = ...)"``, ``"behind (p = ...)"``, ``"level"`` or ``"too few
    seeds"`` (``outcome`` holds the word alone); ``rows`` holds the two rows compared."""
    def per_seed(row: Mapping[str, Any]) -> list[tuple[float, float, float, float]]:
        return [_curve_means(m) for m in row.get("by_seed", {}).values() if "curve_returns" in m]

    baselines: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["config"].get("model") in MLP_KINDS:
            baselines.setdefault(_baseline_key(r["config"]), []).append(r)
    out = []
    for r in sorted(rows, key=_row_order):
        if r["config"].get("model") in MLP_KINDS:
            continue
        ours = per_seed(r)
        for b in sorted(baselines.get(_baseline_key(r["config"]), []), key=lambda b: str(b["config"].get("model"))):
            theirs = per_seed(b)
            if not ours or not theirs:
                continue
            final, late, curve = (difference([c[i] for c in ours], [c[i] for c in theirs]) for i in (0, 1, 2))
            if min(len(ours), len(theirs)) < MIN_SEEDS:
                outcome, verdict = "too few seeds", "too few seeds"
            elif late.p_greater < SIGNIFICANCE:
                outcome, verdict = "ahead", f"ahead (p {_p_value(late.p_greater, '= ')})"
            elif late.p_less < SIGNIFICANCE:
                outcome, verdict = "behind", f"behind (p {_p_value(late.p_less, '= ')})"
            else:
                outcome, verdict = "level", "level"
            out.append({"env": r["config"].get("env"), "steps": r["config"].get("steps"),
                        "model": r["config"].get("model"), "settings": _settings(r["config"]),
                        "against": b["config"].get("model"), "seeds": (len(ours), len(theirs)), "final": final,
                        "late": late, "curve": curve, "outcome": outcome, "verdict": verdict,
                        "rows": (r, b)})
    return out


def in_progress() -> list[dict[str, Any]]:
    """The runs under ``$SYMKIT_CHECKPOINTS/rl-sac`` that have checkpointed but not finished (a sweep stopped, or
    one still running): each one's stored ``config``, steps ``done``, evaluation ``returns`` and training
    ``seconds`` so far, and its checkpoint ``folder``, ordered by environment, model and seed. Folders of runs from
    before configs were stored are passed over."""
    running = []
    for folder, config, curve in _checkpointed():
        done, steps, returns = curve.get("num_timesteps"), config.get("steps"), curve.get("returns")
        if isinstance(done, int) and isinstance(steps, int) and done < steps and returns:
            running.append({"config": config, "done": done, "returns": list(returns),
                            "seconds": float(curve.get("seconds", math.nan)), "saves": curve.get("saves", []),
                            "folder": folder})
    return sorted(running, key=lambda r: (str(r["config"].get("env")), str(r["config"].get("model")),
                                          int(r["config"].get("seed", 0))))


def unfinished() -> list[Unfinished]:
    """:func:`in_progress` for ``symkit runs``: each run's steps done, its last evaluation return, the time it still
    needs at its latest pace (as the report estimates it), when it saved and the process training it now (read from
    its folder's lock)."""
    out = []
    for r in in_progress():
        try:
            saved_at = (r["folder"] / "curve.json").stat().st_mtime
        except OSError:  # finished and removed since
            continue
        left = _time_left(r)
        note = f"last evaluation {r['returns'][-1]:.0f}" + (
            f", about {_duration(left)} left at its latest pace" if math.isfinite(left) else "")
        out.append(Unfinished(r["config"], r["done"], r["config"]["steps"], "steps", saved_at,
                              holder(r["folder"] / ".lock"), note))
    return out


def curve_groups(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[tuple[str, int], list[tuple[list, list]]]]:
    """The runs' learning curves ``(steps, returns)`` by environment, then by ``(model, run length in steps)``; the
    model reads ``"rpp (bilinear 0.03, rl-code hidden, entropy -0.5 dim A, softplus std)"``, with its settings
    (:func:`_settings`), so runs of other settings are other curves."""
    curves: dict[str, dict[tuple[str, int], list[tuple[list, list]]]] = {}
    for r in runs:
        m = r["metrics"]
        if "curve_steps" in m:
            env, model = str(r["config"].get("env")), str(r["config"].get("model"))
            model += f" ({_settings(r['config'])})"
            key = (model, int(r["config"].get("steps") or m["curve_steps"][-1]))
            curves.setdefault(env, {}).setdefault(key, []).append((m["curve_steps"], m["curve_returns"]))
    return curves


def _rows(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The runs grouped as the report's rows: one per config but the seed, ``{"config", "n", "by_seed"}``."""
    rows: dict[str, dict[str, Any]] = {}
    for r in runs:
        config = {k: v for k, v in r["config"].items() if k != "seed"}
        row = rows.setdefault(json.dumps(config, sort_keys=True, default=str),
                              {"config": config, "n": 0, "mean": {}, "by_seed": {}})
        row["by_seed"][r["seed"]] = r["metrics"]
        row["n"] = len(row["by_seed"])
    return list(rows.values())


def _cut_to_shortest(curves: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """Seeds' ``(steps, returns)`` curves as one steps array and a seeds x evaluations array, cut to the shortest."""
    n = min(len(s) for s, _ in curves)
    return np.asarray(curves[0][0][:n], dtype=float), np.asarray([r[:n] for _, r in curves], dtype=float)


def comparison_figure(runs: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike) -> Path | None:
    """The report's comparisons drawn (``rl-sac_comparisons.png``): a panel per row of "Against the MLP of the same
    settings", the equivariant model's and its MLP's evaluation return against environment steps (mean over seeds
    ± one standard error, the table's convention), the last fifth of the steps (the late return the verdict reads)
    shaded, the verdict in the title. ``None`` when no row has a baseline."""
    from symkit.rl.sac import LATE_FRACTION

    compared = comparisons(_rows(runs))
    if not compared:
        return None
    matplotlib = require("matplotlib", "the rl-sac figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(compared))
    rows = math.ceil(len(compared) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    for ax, c in zip(axes.flat, compared):
        for colour, row, name in (("C0", c["rows"][1], c["against"]), ("C1", c["rows"][0], c["model"])):
            steps, returns = _cut_to_shortest([(m["curve_steps"], m["curve_returns"]) for m in row["by_seed"].values()
                                               if "curve_returns" in m])
            mean, error = returns.mean(0), standard_error(returns, axis=0)  # nan (no band) for one seed
            ax.plot(steps, mean, color=colour, label=f"{name} ({count(len(returns), 'seed')})")
            ax.fill_between(steps, mean - error, mean + error, color=colour, alpha=0.2)
        ax.axvspan((1 - LATE_FRACTION) * steps[-1], steps[-1], color="0.9", zorder=0, label="late return")
        settings = textwrap.fill(c["settings"], width=TITLE_WIDTH)  # a long settings text would run into the next
        ax.set_title(f"{c['env']}, {_steps(c['steps'] or int(steps[-1]))} steps: {c['verdict']}\n{settings}",
                     fontsize=9)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("evaluation return")
        ax.legend(fontsize=7, loc="upper left")
    for ax in list(axes.flat)[len(compared):]:
        ax.set_visible(False)
    fig.tight_layout()
    out = Path(out_dir) / "rl-sac_comparisons.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out


def figures(runs: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike) -> list[Path]:
    """Figure 3.4: per environment (columns), the best evaluation return reached so far against environment steps
    (the thesis's curve, top row) and the evaluation return itself (bottom row); the mean over seeds of each model
    with a band of one standard deviation. Runs of different lengths (``steps``) are drawn as separate lines, so a
    longer run is not cut to a shorter one's length."""
    from symkit.rl.sac import best_so_far

    curves = curve_groups(runs)
    if not curves:
        return []
    matplotlib = require("matplotlib", "the rl-sac figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = [e for e in PRESETS if e in curves] + sorted(set(curves) - set(PRESETS))
    fig, axes = plt.subplots(2, len(envs), figsize=(5.0 * len(envs), 6.4), squeeze=False, sharex="col")
    for col, env in enumerate(envs):
        lengths = {budget for _, budget in curves[env]}
        by_length = sorted(curves[env], key=lambda key: (key[1], key[0]))  # (model, steps): shorter runs first
        for colour, (model, budget) in enumerate(by_length):
            runs_ = curves[env][(model, budget)]
            label = f"{model}, {budget:,} steps" if len(lengths) > 1 else model
            steps, raw = _cut_to_shortest(runs_)
            for row, values in enumerate((np.asarray([best_so_far(v) for v in raw]), raw)):
                ax = axes[row][col]
                mean, std = values.mean(0), values.std(0)
                ax.plot(steps, mean, label=f"{label} ({count(len(runs_), 'seed')})", color=f"C{colour}")
                ax.fill_between(steps, mean - std, mean + std, color=f"C{colour}", alpha=0.2)
        axes[0][col].set_title(env)
        axes[0][col].set_ylabel("best return so far (Fig. 3.4)")
        axes[1][col].set_ylabel("evaluation return")
        axes[1][col].set_xlabel("environment steps")
        # below the column, not over the curves: the labels carry each run's settings
        axes[1][col].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.tight_layout()
    out = Path(out_dir) / "rl-sac_curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    compared = comparison_figure(runs, out_dir)
    return [out] if compared is None else [out, compared]


EXPERIMENT = register(
    Experiment(
        name="rl-sac",
        description="SAC with RPP-EMLP (or MLP, EMLP) actor and critics on MuJoCo locomotion: evaluation return "
                    "against environment steps",
        reproduces="thesis Sec. 3.6.1, Figure 3.4: RPP-EMLP policies and Q-functions make SAC more data efficient "
                   "on every environment but Humanoid",
        config=SACConfig,
        run=run,
        validate=_validate,
        quick={"steps": 600, "learning_starts": 300, "batch_size": 64, "buffer_size": 10_000, "ch": 64,
               "eval_every": 300, "eval_episodes": 2, "checkpoint_every": 300},
        legacy=LEGACY,
        unfinished=unfinished,
        facts=("resumed_from", "continued_from", "libraries"),
        sweep={"env": tuple(PRESETS), "model": ("relu-mlp", "rpp"), "seed": (0, 1, 2, 3)},
        quick_sweep={"env": ("Hopper",), "model": ("relu-mlp", "rpp"), "seed": (0,)},
        summarize=summarize,
        figures=figures,
        plots=(Plot(x="env", y="mean_return", hue="model", kind="bar",
                    title="Mean evaluation return over the learning curve"),),
    )
)
