"""Table 1 of van der Ouderaa, Immer & van der Wilk (2023) on offline digits placed in quadrants.

The 8x8 scikit-learn digits go into one of the 4 quadrants of a 16x16 canvas (``source="digits"``, the quick and
default scales). Task 'digit' (10 classes) is translation-invariant; 'digit_quadrant' (40 classes) is not.
The same learned model (F-FC+CONV in every layer, prior variances by the Laplace marginal likelihood) is trained
on both tasks, next to the strictly convolutional model. The network is the paper's, trimmed to a 16x16 input
(7 relaxable layers) with width ``alpha`` (paper: 10).

Paper scale (``--scale paper --data-dir D``): the paper's quadrant MNIST from MNIST's files in ``D`` (28x28 digits
on a 56x56 canvas resized to 32x32, all 60,000 training and 10,000 test images), the full network with α = 10,
1000 epochs and the paper's optimiser settings (:data:`~symkit.lab.experiments.layerwise_common.PAPER_OPTIMISER`),
FC, CONV and F-FC+CONV under MAP and Laplace on both tasks, one seed (the paper reports one run per cell).
See docs/layerwise.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from symkit.datasets.quadrant_digits import quadrant_digits, quadrant_mnist
from symkit.lab import runtime
from symkit.lab.experiments.layerwise_common import (
    EVAL_BATCH,
    PAPER_OPTIMISER,
    LayerwiseConfig,
    check_layerwise,
    device_data,
    fit_layerwise,
    smoke_cut,
)
from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, register
from symkit.marglik import effective_layer_types
from symkit.nn.relaxed import RelaxedCNN, count_parameters
from symkit.train import accuracy


@dataclass
class LayerwiseQuadrantConfig(LayerwiseConfig):
    """The settings of one layerwise-quadrant run (learned layer-wise equivariance against CONV on quadrant
    digits, seed 001); the defaults are the default scale, ``quick`` and ``paper`` change them."""
    task: str = "digit_quadrant"  # or "digit"
    model: str = "ffc+conv"  # layer type in every layer: conv, fc, ffc+conv, sfc+sconv, ...


SOURCES = ("digits", "mnist")


def validate(cfg: LayerwiseQuadrantConfig) -> None:
    """Methods and sources offered; MNIST needs the data folder (named before any run starts)."""
    check_layerwise(cfg, SOURCES)


def quadrant_data(cfg: LayerwiseQuadrantConfig) -> tuple[torch.Tensor, ...]:
    """``(x_train, y_train, x_test, y_test)`` of the config's source: quadrant digits or quadrant MNIST."""
    if cfg.source == "mnist":
        return quadrant_mnist(cfg.task, cfg.n_train, cfg.n_test, cfg.seed, data_dir=runtime.data_dir())
    return quadrant_digits(cfg.task, cfg.digit_size, cfg.n_test, cfg.seed)


def run(cfg: LayerwiseQuadrantConfig) -> dict:
    """Train one model on one task; accuracy, L_η and the per-layer effective path shares."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    xtr, ytr, xte, yte = device_data(*quadrant_data(cfg))
    n_classes = 10 if cfg.task == "digit" else 40
    model = RelaxedCNN(1, n_classes, cfg.alpha, xtr.shape[-1], cfg.model, combine=cfg.combine, seed=cfg.seed)
    fitted = fit_layerwise(cfg, model.to(xtr.device), xtr, ytr)
    res, neg_lml, rows, seconds = fitted.result, fitted.neg_log_marglik, fitted.rows, fitted.seconds
    types = effective_layer_types(rows)
    nonequiv = [r for r in rows if r["symmetry"] == "fc"]
    metrics = {
        "test_acc": 100 * accuracy(model, *smoke_cut(xte, yte, EVAL_BATCH)),
        "train_acc": 100 * accuracy(model, *smoke_cut(xtr, ytr, EVAL_BATCH)),
        "neg_log_marglik": neg_lml,
        "n_params": count_parameters(model),
        "effective_types": ",".join(types),
        "fc_relative_mean": (sum(r["relative"] for r in nonequiv) / len(nonequiv)) if nonequiv else 0.0,
        "fc_relative_per_layer": [round(r["relative"], 6) for r in nonequiv],
        "fc_precision_per_layer": [r["precision"] for r in nonequiv],
        # all tensors of the path, largest first (F-FC: θ₂, θ₁, then the biases)
        "fc_tensor_precisions_per_layer": [[round(d, 3) for _, d in r["precisions"]] for r in nonequiv],
        "n_fc_layers": sum(t in ("fc", "ffc", "sfc") for t in types),
        "seconds": seconds,
        "seconds_per_epoch": sum(res.epoch_seconds) / len(res.epoch_seconds),
        "seconds_per_hyper_update": (sum(res.hyper_seconds) / len(res.hyper_seconds)) if res.hyper_seconds else 0.0,
    }
    if cfg.plot_dir and len({r["path"] for r in rows}) > 1:
        from symkit.lab.experiments.figures import plot_layer_types

        plot_layer_types(rows, f"{cfg.plot_dir}/layer_types_{cfg.task}_{cfg.model}_{cfg.method}_s{cfg.seed}.png",
                         f"{cfg.model} on {cfg.task} ({cfg.method})")
    return metrics


def summarize(rows: Sequence[Mapping[str, Any]]) -> str:
    """Learned (F-FC+CONV) minus CONV test accuracy per task and method; s.e. of a difference of two means."""
    by_key = {(r["config"].get("task"), r["config"].get("method"), r["config"].get("model")): r for r in rows}
    lines = ["| task | method | F-FC+CONV % | CONV % | learned − CONV (points) | seeds |", "|---|---|---|---|---|---|"]
    for task, method in sorted({(t, m) for t, m, _ in by_key}):
        learned, conv = by_key.get((task, method, "ffc+conv")), by_key.get((task, method, "conv"))
        if learned is None or conv is None:
            continue
        (a, sa), (b, sb) = ((r["mean"]["test_acc"], r["stderr"].get("test_acc") or 0.0) for r in (learned, conv))
        lines.append(f"| {task} | {method} | {a:.2f} ± {sa:.2f} | {b:.2f} ± {sb:.2f} | {a - b:+.2f} ± "
                     f"{math.hypot(sa, sb):.2f} | {learned['n']}, {conv['n']} |")
    return "\n".join(lines) if len(lines) > 2 else ""


register(Experiment(
    name="layerwise-quadrant",
    stand_in="scikit-learn's 8x8 digits on a 16x16 canvas, not MNIST; tens of epochs, not 1000",
    description="Learned layer-wise equivariance (F-FC+CONV + Laplace marginal likelihood) vs CONV on digits "
                "placed in quadrants: classify the digit, then digit and quadrant.",
    reproduces="van der Ouderaa, Immer & van der Wilk 2023, Table 1 (quadrant MNIST)",
    config=LayerwiseQuadrantConfig,
    run=run,
    summarize=summarize,
    validate=validate,
    quick={"n_epochs": 8, "burnin": 4, "frequency": 4, "n_hypersteps": 10, "alpha": 2, "n_test": 300,
           "mc_samples": 1, "batch_size": 64},
    sweep={"task": ["digit", "digit_quadrant"], "model": ["conv", "ffc+conv"], "method": ["map", "laplace"],
           "seed": [0, 1, 2, 3, 4]},
    quick_sweep={"task": ["digit_quadrant"], "model": ["ffc+conv"], "method": ["laplace"], "seed": [0]},
    paper_scale={"source": "mnist", "alpha": 10, "n_epochs": 1000, "n_test": 10_000, **PAPER_OPTIMISER},
    paper_sweep={"task": ["digit", "digit_quadrant"], "model": ["conv", "fc", "ffc+conv"], "method": ["map", "laplace"],
                 "seed": [0]},
    paper=[
        PaperValue("test_acc", 95.73, {"task": "digit", "model": "fc", "method": "map"}, "Table 1"),
        PaperValue("test_acc", 97.04, {"task": "digit", "model": "fc", "method": "laplace"}, "Table 1"),
        PaperValue("test_acc", 95.10, {"task": "digit_quadrant", "model": "fc", "method": "map"}, "Table 1"),
        PaperValue("test_acc", 95.46, {"task": "digit_quadrant", "model": "fc", "method": "laplace"}, "Table 1"),
        PaperValue("test_acc", 99.38, {"task": "digit", "model": "conv", "method": "map"}, "Table 1"),
        PaperValue("test_acc", 99.23, {"task": "digit", "model": "conv", "method": "laplace"}, "Table 1"),
        PaperValue("test_acc", 98.86, {"task": "digit", "model": "ffc+conv", "method": "laplace"}, "Table 1"),
        PaperValue("test_acc", 24.68, {"task": "digit_quadrant", "model": "conv", "method": "map"}, "Table 1"),
        PaperValue("test_acc", 24.50, {"task": "digit_quadrant", "model": "conv", "method": "laplace"}, "Table 1"),
        PaperValue("test_acc", 99.00, {"task": "digit_quadrant", "model": "ffc+conv", "method": "laplace"},
                   "Table 1"),
    ],
    plots=[
        Plot(x="task", y="test_acc", hue="model", kind="bar", title="Quadrant digits: test accuracy"),
        Plot(x="task", y="fc_relative_mean", hue="model", kind="bar",
             title="Mean relative effective parameters of the FC path"),
    ],
))
