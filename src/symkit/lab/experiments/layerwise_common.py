"""Settings and the training step shared by the layer-wise equivariance experiments (``layerwise-*``).

The experiments train a :class:`~symkit.nn.relaxed.RelaxedCNN` with online Laplace marginal-likelihood updates of
the per-path prior precisions (van der Ouderaa, Immer & van der Wilk 2023, App. F.6) and report the effective
number of parameters of every path; they differ in the data and the paths per layer.

Every run puts its model and data on the run's device (``--device``, :func:`symkit.lab.runtime.device`); a smoke run
(``--smoke``) trains one epoch of two batches (:func:`fit_layerwise` passes the command's limits on to
:func:`symkit.marglik.fit_with_marglik`) and fits its closing Laplace approximation and evaluates on as many images
as two batches hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from symkit.datasets.files import data_dir_of
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, CountOrZero, Positive, Seed
from symkit.marglik import MarglikConfig, MarglikFit, fit_with_marglik
from symkit.marglik.fit import METHODS

#: the batch size of the Laplace fits (the authors' ``marglik_batch_size``)
MARGLIK_BATCH = 150
#: the batch size of test-set evaluation
EVAL_BATCH = 500
#: the optimiser settings of the paper scale, shared by every ``layerwise-*`` experiment (App. F.6 and the
#: authors' code): SGD with momentum 0.9 at rate 0.01 for θ (cosine-annealed), Adam at a constant 0.1 for the prior
#: precisions, batch 128, an update every 5 epochs after 10, 20 steps each, the exact GGN (``mc_samples=0``), the
#: paths averaged (``combine="mean"``), as the code does
PAPER_OPTIMISER: dict[str, Any] = {"optimizer": "sgd", "lr": 0.01, "lr_hyp": 0.1, "batch_size": 128, "burnin": 10,
                                   "frequency": 5, "n_hypersteps": 20, "mc_samples": 0, "combine": "mean"}


@dataclass
class LayerwiseConfig:
    """Training settings of a layer-wise run (defaults of the quadrant experiment; see docs/marglik.md)."""

    method: str = "laplace"  # "laplace" (learned prior variances) or "map" (unit prior variances)
    combine: str = "rms"  # paths summed / sqrt(n); the paper's code averages ("mean"), see docs/marglik.md
    alpha: CountOrZero = 4
    digit_size: Count = 8
    n_epochs: Count = 60
    burnin: CountOrZero = 10
    frequency: Count = 5
    n_hypersteps: Count = 20
    # for θ: SGD with momentum 0.9, as in the authors' code. With Adam (the paper's text; use lr=0.003, since 0.01
    # killed every ReLU of these narrow, BN-free networks) the learned quadrant model stayed 7.4 points below CONV on
    # the digit task: Adam rescales the prior's gradient per parameter, so a growing precision does not shrink a path.
    optimizer: str = "sgd"
    lr: Positive = 0.03  # SGD; 0.1 collapsed to a constant predictor here
    lr_hyp: Positive = 0.1
    batch_size: Count = 32  # 1300 images: 128 gives too few steps per epoch
    mc_samples: CountOrZero = 4  # labels sampled per datum for the KFAC-MC curvature; 0: the exact GGN
    prior_prec_init: Positive = 1.0  # every group's initial prior precision
    prior_structure: str = "tensor"  # one precision per parameter tensor (the code); "path": per layer and path
    n_test: Count = 497  # bundled digits: the test split; files: the first n_test images of the test set
    source: str = "digits"  # the bundled digits, or a data set from the run's data folder (docs/layerwise.md)
    n_train: CountOrZero = 0  # files: the first n_train training images (0: all)
    threads: CountOrZero = 1
    plot_dir: str = ""
    seed: Seed = 0


def check_layerwise(cfg: LayerwiseConfig, sources: tuple[str, ...]) -> None:
    """Raise ``ValueError`` for a method or source not offered; a source read from files needs a data folder (the
    error names the missing setting before any run starts)."""
    if cfg.method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {cfg.method!r}")
    if cfg.source not in sources:
        raise ValueError(f"source must be one of {sources}, got {cfg.source!r}")
    if cfg.source != "digits":
        data_dir_of(runtime.data_dir())


def device_data(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors on the run's device (:func:`symkit.lab.runtime.device`)."""
    device = runtime.device()
    return tuple(t.to(device) for t in tensors)


def smoke_cut(x: torch.Tensor, y: torch.Tensor, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)``, or in a smoke run only the first ``max_batches`` batches of ``batch`` images."""
    limit = runtime.current().max_batches
    return (x, y) if limit is None else (x[:limit * batch], y[:limit * batch])


@torch.no_grad()
def mean_nll(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = EVAL_BATCH) -> float:
    """Mean negative log-likelihood (cross-entropy) of the network's point prediction on ``(x, y)``."""
    model.eval()
    total = sum(float(F.cross_entropy(model(x[i:i + batch_size]), y[i:i + batch_size], reduction="sum"))
                for i in range(0, len(x), batch_size))
    return total / len(x)


def fit_layerwise(cfg: LayerwiseConfig, model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                  augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
                  **marglik: Any) -> MarglikFit:
    """:func:`symkit.marglik.fit_with_marglik` with the run's settings: ``cfg``'s method and schedule, the Laplace
    fits' batch of :data:`MARGLIK_BATCH`, and the command's precision and smoke limits
    (:func:`symkit.lab.runtime.trainer_settings`; a smoke run's closing MAP fit sees two batches).

    ``augment`` transforms the batches of the θ steps only (the Laplace fits see the data as it is, App. F.6);
    ``marglik`` passes further :class:`~symkit.marglik.MarglikConfig` fields (``omega_steps``, ``lr_omega``).
    """
    config = MarglikConfig(n_epochs=cfg.n_epochs, burnin=cfg.burnin, frequency=cfg.frequency,
                           n_hypersteps=cfg.n_hypersteps, lr=cfg.lr, lr_hyp=cfg.lr_hyp, lr_hyp_min=cfg.lr_hyp,
                           batch_size=cfg.batch_size, mc_samples=cfg.mc_samples or None, optimizer=cfg.optimizer,
                           prior_prec_init=cfg.prior_prec_init, prior_structure=cfg.prior_structure, seed=cfg.seed,
                           marglik_batch_size=MARGLIK_BATCH, **marglik)
    return fit_with_marglik(model, x, y, cfg.method, config=config, augment=augment, **runtime.trainer_settings())
