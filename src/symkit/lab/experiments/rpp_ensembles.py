"""Posterior levels of equivariance (thesis Sec. 3.5.2): two deep ensembles of RPP-EMLPs, one trained on exact
inertia and one on modified inertia, and the equivariance error of their members through training.

One run is one ensemble member: an RPP-EMLP of ``(R + V)^5 -> V (x) V`` for O(3), trained as in rpp-levels'
inertia panels (Sec. 3.5.1): ``setting="exact"`` is the inertia data, ``"approximate"`` the modified inertia
(:data:`symkit.lab.experiments.rpp_levels.PANELS`), with rpp-levels' seeded data
(:func:`~symkit.lab.experiments.rpp_levels.regression_data`), model (``symkit.nn.network``), ``Standardize`` wrapper,
sizes and RPP priors (the authors' decays on the mean squared error, ``equivariant_wd = 1e-3``, ``basic_wd =
1e2``). An ensemble is the runs of one setting over seeds; the default sweep is both settings x seeds 0-9, the
thesis's 10 members per ensemble, at the thesis's sizes (rpp-levels' ``size="thesis"``: 1000 training and 1000 test
points, 3 layers of 384 channels, 500 epochs of Adam at 3e-3 in batches of 500), a few minutes per member on one
CPU core. ``paper_scale`` is None: the defaults are the thesis's setup.

Equivariance error (Eq. 3.3): ``EquivErr(f, x) = ||rho_2(g) f(x) - f(rho_1(g) x)|| / (||rho_2(g) f(x)|| +
||f(rho_1(g) x)||)``, measured by :func:`symkit.measure.sampled_equivariance_error`, whose ``relative_errors``
are this RelErr per input, averaged over the inputs, for each of ``group_samples`` elements ``G.samples(n,
seed=seed)`` (the member's seed: the same elements at every epoch, and for the two ensembles' members of one
seed). :func:`symkit.testing.function_equivariance_error` is not the thesis's quantity: it is the assertion
helper's worst case over elements of an error pooled over the whole batch (``rms(a - b) / (rms(a) + rms(b))``), in
which the inputs with the largest outputs dominate; the scale-adjusted ``sample_errors`` of the same report divide
by ``max(rms(a) + rms(b), rms(g - I))`` and are absolute when the outputs are small. The inputs are the first
``equivariance_inputs`` held-out (test) points; the metric ``equivariance_error`` is the mean over the sampled
elements, measured before training (epoch 0), every ``record_every`` epochs and after the last
(``equivariance_curve`` at ``curve_epochs``). Beside it: the test MSE and the RPP's ``equivariant_fraction`` (the
share of the linear weights' squared norm in the equivariant path, as rpp-levels reports it), also as a curve.

The thesis's claim is an ordering without numbers (its figure is missing, "Figure ??"): throughout training the
members trained on modified inertia concentrate on "substantially higher equivariance error" than those trained on
exact inertia. No paper value is registered; :func:`claims` checks the ordering for docs/reproductions.md (the two
ensembles' final errors do not overlap), and ``summarize`` prints each ensemble's median and range and the ratio
approximate / exact of the median final equivariance errors, and the ``figures`` hook draws the curves (median and
range per ensemble against the epoch), which the registry's :class:`~symkit.lab.experiments.registry.Plot` (one
number per run) cannot.

The quick scale is rpp-levels' ``size="quick"`` data and width (500 points, 128 channels) trained for 6 epochs of
batches of 50 and measured after every epoch, 3 members per ensemble (about 20 s on one core for the sweep): a check
that the pipeline runs, not a result.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from symkit.datasets.tasks import task
from symkit.groups import Group
from symkit.lab import runtime
from symkit.lab.experiments import rpp_levels
from symkit.lab.experiments.fields import Count, CountOrZero, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, Plot, register
from symkit.measure import sampled_equivariance_error
from symkit.nn import Standardize, network
from symkit.nn.rpp import equivariant_fraction
from symkit.reps import Rep
from symkit.train import Trainer

SETTINGS = ("exact", "approximate")
SIZES = ("thesis", "quick")

#: the quick scale's overrides (module docstring)
QUICK = {"size": "quick", "epochs": 6, "batch_size": 50, "record_every": 1}


@dataclass
class Config:
    """The settings of one rpp-ensembles run (one member of the exact or the approximate ensemble, thesis Sec.
    3.5.2); a size field left at 0 takes its value from rpp-levels' inertia sizes for ``size``."""
    setting: str = "approximate"  # "exact": inertia; "approximate": modified inertia (rpp-levels' inertia panels)
    size: str = "thesis"  # "thesis" or "quick": rpp-levels' SIZES, for the fields left at 0
    n_train: CountOrZero = 0
    n_test: CountOrZero = 0
    ch: CountOrZero = 0
    num_layers: CountOrZero = 0
    epochs: CountOrZero = 0
    batch_size: CountOrZero = 0
    lr: Positive = 3e-3
    equivariant_wd: NonNegative = 0.0  # 0: rpp-levels' inertia decays (DECAYS)
    basic_wd: NonNegative = 0.0
    record_every: Count = 10  # epochs between two measurements of the equivariance error
    equivariance_inputs: Count = 256  # held-out inputs the equivariance error is measured on
    group_samples: Count = 5  # sampled group elements per measurement
    seed: Seed = 0


def validate(config: Config) -> None:
    """Reject a setting other than exact / approximate and a size other than thesis / quick."""
    for name, allowed in (("setting", SETTINGS), ("size", SIZES)):
        if getattr(config, name) not in allowed:
            raise ValueError(f"rpp-ensembles: {name} must be one of {', '.join(allowed)}, "
                             f"got {getattr(config, name)!r}")


def levels_config(config: Config) -> rpp_levels.Config:
    """The rpp-levels config of the RPP on the inertia panel of ``config.setting``, with this run's sizes, decays
    and seed: the panel whose data, sizes and priors a member uses."""
    return rpp_levels.Config(
        dataset="inertia", setting=config.setting, model="rpp", size=config.size, n_train=config.n_train,
        n_test=config.n_test, ch=config.ch, num_layers=config.num_layers, epochs=config.epochs,
        batch_size=config.batch_size, lr=config.lr, equivariant_wd=config.equivariant_wd, basic_wd=config.basic_wd,
        seed=config.seed)


def effective(config: Config) -> dict[str, Any]:
    """The sizes and decays a run uses (rpp-levels' where the config says 0)."""
    levels = levels_config(config)
    return {**rpp_levels.sizes(levels), **dict(zip(("equivariant_wd", "basic_wd"), rpp_levels.decays(levels)))}


def equivariance_error(model: torch.nn.Module, x: torch.Tensor, rep_in: Rep, rep_out: Rep, G: Group,
                       n_samples: int, seed: int) -> float:
    """Eq. 3.3's ``EquivErr`` of ``model`` at the inputs ``x``, averaged over the inputs and ``n_samples`` group
    elements ``G.samples(n_samples, seed=seed)`` (the ``relative_errors`` of
    :func:`symkit.measure.sampled_equivariance_error`); the model is measured in eval mode."""
    was_training = model.training
    model.eval()
    try:
        report = sampled_equivariance_error(model, x, rep_in, rep_out, G, n_samples=n_samples, seed=seed)
    finally:
        model.train(was_training)
    return float(np.mean(report.relative_errors))


@dataclass
class Member:
    """A trained ensemble member: its metrics, the ``Standardize``d RPP-EMLP, its reps and group, and the held-out
    inputs its equivariance error is measured on."""

    metrics: dict[str, Any]
    model: torch.nn.Module
    rep_in: Rep
    rep_out: Rep
    group: Group
    probe: torch.Tensor


def train_member(config: Config) -> Member:
    """Train one member (module docstring), measuring its equivariance error and equivariant fraction before
    training, every ``record_every`` epochs and after the last epoch."""
    validate(config)
    levels = levels_config(config)
    task_name, group = rpp_levels.PANELS["inertia", config.setting]
    G, data, size = group(), task(task_name), rpp_levels.sizes(levels)
    rep_in, rep_out = data.reps(G)
    torch.manual_seed(config.seed)
    start = time.perf_counter()
    x_train, y_train, x_test, y_test = rpp_levels.regression_data(levels, data, size)
    probe = x_test[: config.equivariance_inputs]
    device = runtime.device()
    net = network("rpp", rep_in, rep_out, G, ch=size["ch"], num_layers=size["num_layers"]).to(device)
    model = Standardize(net, rep_in, rep_out, x_train, y_train).to(device)
    epochs: list[int] = []
    errors: list[float] = []
    fractions: list[float] = []

    def record(epoch: int) -> None:
        epochs.append(epoch)
        errors.append(equivariance_error(model, probe, rep_in, rep_out, G, config.group_samples, config.seed))
        fractions.append(equivariant_fraction(net))

    def hook(trainer: Trainer, epoch: int, _record: dict[str, Any]) -> None:
        if epoch % config.record_every == 0:
            record(epoch)

    record(0)
    result = Trainer(model, lambda out, y: torch.mean((out - y) ** 2), penalty=rpp_levels._penalty(levels),
                     lr=config.lr, epochs=size["epochs"], batch_size=size["batch_size"], seed=config.seed,
                     hooks=[hook], desc=f"rpp-ensembles/{config.setting}/{config.seed}",
                     **runtime.trainer_settings()).fit((x_train, y_train))
    trained = len(result.history)  # fewer than the epochs in a smoke run
    if epochs[-1] != trained:
        record(trained)
    model.eval()
    with torch.no_grad():
        test_mse = float(torch.mean((model(x_test) - y_test) ** 2))
        constant_mse = float(torch.mean((y_test - y_train.mean(0)) ** 2))
    metrics = {
        "test_mse": test_mse,
        "constant_mse": constant_mse,
        "equivariance_error": errors[-1],
        "equivariant_fraction": fractions[-1],
        "equivariance_curve": errors,
        "equivariant_fraction_curve": fractions,
        "curve_epochs": epochs,
        "train_seconds": time.perf_counter() - start,
    }
    return Member(metrics, model, rep_in, rep_out, G, probe)


def run(config: Config) -> dict[str, Any]:
    """One ensemble member: test MSE, the final equivariance error and equivariant fraction, and their curves."""
    return train_member(config).metrics


def _spread(values: Sequence[float]) -> str:
    """``median [min, max]`` of a member metric."""
    return f"{statistics.median(values):.3g} [{min(values):.3g}, {max(values):.3g}]"


def _members(row: Mapping[str, Any], metric: str) -> list[float]:
    return [float(m[metric]) for m in row["by_seed"].values() if isinstance(m.get(metric), (int, float))]


def _rest(config: Mapping[str, Any]) -> str:
    """A config without its setting and seed: the key that pairs an exact ensemble with its approximate one."""
    return json.dumps({k: v for k, v in config.items() if k not in ("setting", "seed")}, sort_keys=True, default=str)


def summarize(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per ensemble (setting, at each stored scale): the members, the median [min, max] over members of the final
    equivariance error and of the test MSE; and the ratio approximate / exact of the median equivariance errors of
    the ensembles that share every other setting (thesis Sec. 3.5.2 expects it well above 1)."""
    lines = ["| setting | scale | members | equivariance error, median [min, max] | test MSE, median [min, max] |",
             "|---|---|---|---|---|"]
    medians: dict[str, dict[str, float]] = {}
    scales: dict[str, str] = {}
    for row in sorted(rows, key=lambda r: (str(r.get("scale")), SETTINGS.index(r["config"].get("setting"))
                                           if r["config"].get("setting") in SETTINGS else len(SETTINGS))):
        setting = str(row["config"].get("setting"))
        errors, mses = _members(row, "equivariance_error"), _members(row, "test_mse")
        if not errors:
            continue
        lines.append(f"| {setting} | {row.get('scale', '')} | {len(errors)} | {_spread(errors)} | "
                     f"{_spread(mses) if mses else '–'} |")
        key = _rest(row["config"])
        medians.setdefault(key, {})[setting] = statistics.median(errors)
        scales[key] = str(row.get("scale", ""))
    ratios = [(scales[k], m["approximate"] / m["exact"]) for k, m in medians.items()
              if {"exact", "approximate"} <= set(m) and m["exact"] > 0]
    if ratios:
        lines += ["", "Median final equivariance error, approximate / exact (the thesis: substantially above 1):", ""]
        lines += [f"- {scale} scale: {ratio:.3g}" for scale, ratio in ratios]
    return "\n".join(lines)


def claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Sec. 3.5.2's claim for docs/reproductions.md: the members trained on modified inertia end at a higher
    equivariance error than those trained on exact inertia, read as the two ensembles not overlapping (every
    approximate member's final error above every exact member's), for each pair of ensembles that share every other
    setting (the check holds where it holds for each)."""
    errors: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        members = _members(row, "equivariance_error")
        if members:
            errors.setdefault(_rest(row["config"]), {})[str(row["config"].get("setting"))] = members
    pairs = [m for m in errors.values() if {"exact", "approximate"} <= set(m)]
    if not pairs:
        return {}
    return {"modified_inertia_members_all_above_exact": all(min(m["approximate"]) > max(m["exact"]) for m in pairs)}


def figures(runs: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """The equivariance error against the epoch, median and range over each ensemble's members (the thesis's
    missing figure of Sec. 3.5.2, left): one figure per stored configuration of the two ensembles."""
    from symkit._checks import require

    by_config: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    shared: dict[str, Mapping[str, Any]] = {}
    for run_ in runs:
        metrics = run_["metrics"]
        if "equivariance_curve" in metrics and "curve_epochs" in metrics:
            key = _rest(run_["config"])
            by_config.setdefault(key, {}).setdefault(str(run_["config"].get("setting")), []).append(metrics)
            shared[key] = run_["config"]
    if not by_config:
        return []
    matplotlib = require("matplotlib", "figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    colours = {"exact": "tab:blue", "approximate": "tab:red"}
    labels = {"exact": "inertia (exact)", "approximate": "modified inertia (approximate)"}
    paths = []
    names = {f.name for f in dataclasses.fields(Config)}
    for i, (key, ensembles) in enumerate(sorted(by_config.items())):
        size = effective(Config(**{k: v for k, v in shared[key].items() if k in names}))
        fig, ax = plt.subplots(figsize=(5.5, 3.5), layout="constrained")
        for setting, members in ensembles.items():
            length = min(len(m["equivariance_curve"]) for m in members)  # members of one config share the epochs
            epochs = list(members[0]["curve_epochs"])[:length]
            curves = np.array([list(m["equivariance_curve"])[:length] for m in members], dtype=float)
            colour = colours.get(setting)
            ax.plot(epochs, np.median(curves, axis=0), color=colour,
                    label=f"{labels.get(setting, setting)}, {len(members)} members")
            ax.fill_between(epochs, curves.min(axis=0), curves.max(axis=0), color=colour, alpha=0.2)
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel("equivariance error (Eq. 3.3)")
        ax.set_title(f"RPP-EMLP ensembles, median and range (N = {size['n_train']}, {size['num_layers']} x "
                     f"{size['ch']} channels)", fontsize=9)
        ax.legend(fontsize=7)
        path = out / f"rpp-ensembles_curves{'' if len(by_config) == 1 else f'_{i}'}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


register(
    Experiment(
        name="rpp-ensembles",
        description="Deep ensembles of RPP-EMLPs on exact and modified inertia: equivariance error through training",
        reproduces="thesis Sec. 3.5.2, posterior levels of equivariance: the ensemble trained on modified inertia "
                   "settles at a higher equivariance error than the one trained on exact inertia",
        config=Config,
        run=run,
        quick=QUICK,
        sweep={"setting": SETTINGS, "seed": tuple(range(10))},
        quick_sweep={"setting": SETTINGS, "seed": (0, 1, 2)},
        validate=validate,
        plots=(Plot(x="setting", y="equivariance_error", kind="box", logy=True,
                    title="Final equivariance error per ensemble (Sec. 3.5.2)"),
               Plot(x="setting", y="test_mse", kind="box", logy=True, title="Test MSE per ensemble")),
        summarize=summarize,
        claims=claims,
        figures=figures,
        effective=effective,
    )
)
