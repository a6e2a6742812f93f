"""Train a model by MAP or by the Laplace marginal likelihood and report its evidence and per-path diagnostics.

Seed 001 (van der Ouderaa, Immer & van der Wilk 2023, "Learning layer-wise equivariances automatically using
gradients") compares the two ways of training every layer type: ``"laplace"`` learns the prior precisions online
(:func:`~symkit.marglik.train_marglik`, App. F.6), ``"map"`` keeps them at their initial (unit) values. A MAP run
gets one closing Laplace fit at those precisions, so that both methods report ``L_η`` per datum and the effective
parameters per layer and path (:func:`~symkit.marglik.path_diagnostics`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from symkit._checks import check_int
from symkit.marglik.laplace import map_penalty, path_diagnostics, prior_groups
from symkit.marglik.omega import omega_parameters
from symkit.marglik.training import MarglikConfig, MarglikResult, hyper_update, train_marglik
from symkit.nn import parameter_like
from symkit.train import Trainer

__all__ = ["MarglikFit", "fit_with_marglik"]

#: the training methods of :func:`fit_with_marglik`
METHODS = ("laplace", "map")


@dataclass
class MarglikFit:
    """What :func:`fit_with_marglik` returns: the training result (its ``laplace`` is the last Laplace fit, for MAP
    the closing one), ``L_η`` per datum at the final prior precisions, :func:`~symkit.marglik.path_diagnostics`'
    rows per layer and path, and the seconds of training (without the closing fit)."""

    result: MarglikResult
    neg_log_marglik: float
    rows: list[dict[str, Any]]
    seconds: float


def _map_with_omega(model: nn.Module, x: torch.Tensor, y: torch.Tensor, config: MarglikConfig,
                    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None,
                    trainer_settings: dict[str, Any]) -> MarglikResult:
    """MAP training at the initial prior precisions in which the learnable length-scales ω train with θ on the MAP
    loss (they have no prior), as the authors' code trains them (its ω runs are MAP runs)."""
    groups = prior_groups(model, None, config.prior_structure)
    device = parameter_like(model)[0]
    log_prior_prec = torch.full((len(groups),), math.log(config.prior_prec_init), dtype=torch.float64,
                                device=device, requires_grad=True)
    fit = Trainer(model, F.cross_entropy, penalty=lambda m: map_penalty(m, groups, log_prior_prec, len(x)),
                  optimizer=config.optimizer, lr=config.lr, schedule="cosine", lr_min=config.lr_min,
                  epochs=config.n_epochs, batch_size=config.batch_size, augment=augment,
                  generator=torch.Generator().manual_seed(config.seed), accuracy=True, desc="MAP training",
                  **trainer_settings).fit((x, y))
    res = MarglikResult(log_prior_prec, groups, None)
    res.epoch_seconds = [r["seconds"] for r in fit.history]
    return res


def fit_with_marglik(model: nn.Module, x: torch.Tensor, y: torch.Tensor, method: str = "laplace", *,
                     config: MarglikConfig | None = None,
                     augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
                     precision: str = "32", max_epochs: int | None = None, max_batches: int | None = None
                     ) -> MarglikFit:
    """Train ``model`` (classification) by ``method`` and report ``L_η`` and the per-path diagnostics (seed 001).

    ``"laplace"``: :func:`~symkit.marglik.train_marglik` with ``config`` (default ``MarglikConfig()``). ``"map"``:
    the same θ training at the initial prior precisions (``config.burnin`` is ignored), with learnable
    length-scales ω trained with θ on the MAP loss, then one closing Laplace fit at those precisions (no
    hyperparameter steps) on the first ``max_batches`` batches of ``config.marglik_batch_size`` data, or all.
    ``augment(x, generator)`` transforms the batches of the θ steps only: the Laplace fits see the data as it is
    (App. F.6). ``precision`` / ``max_epochs`` / ``max_batches`` go to :class:`symkit.train.Trainer` (a smoke run's
    limits).
    """
    if method not in METHODS:
        raise ValueError(f"fit_with_marglik: method must be one of {METHODS}, got {method!r}")
    config = MarglikConfig() if config is None else config
    if not isinstance(config, MarglikConfig):
        raise TypeError(f"fit_with_marglik: config must be a MarglikConfig, got {type(config).__name__}")
    if max_batches is not None:
        check_int("fit_with_marglik: max_batches", max_batches, 1)
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"fit_with_marglik: x and y must be non-empty and equally long, got {len(x)} and {len(y)}")
    settings = {"precision": precision, "max_epochs": max_epochs, "max_batches": max_batches}
    t0 = time.perf_counter()
    if method == "map" and omega_parameters(model):
        res = _map_with_omega(model, x, y, config, augment, settings)
    else:
        if method == "map":  # no update within the epochs: plain MAP at the initial precisions
            config = dataclasses.replace(config, burnin=config.n_epochs + 1)
        res = train_marglik(model, x, y, config, augment=augment, **settings)
    seconds = time.perf_counter() - t0
    if res.laplace is None:  # MAP: fit the curvature once at the initial prior precisions, no hyperparameter steps
        opt = torch.optim.SGD([res.log_prior_prec], lr=0.0)
        batch = config.marglik_batch_size
        x_fit, y_fit = (x, y) if max_batches is None else (x[:max_batches * batch], y[:max_batches * batch])
        res.laplace, _ = hyper_update(model, x_fit, y_fit, res.log_prior_prec, res.groups, opt, 0, batch,
                                      config.mc_samples, config.seed)
    with torch.no_grad():
        neg_lml = float(res.laplace.neg_log_marglik(res.log_prior_prec))
    return MarglikFit(res, neg_lml, path_diagnostics(res.laplace, res.log_prior_prec), seconds)
