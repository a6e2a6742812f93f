"""Online marginal-likelihood training (Immer et al. 2021, Alg. 1; paper App. F.6 and the authors' code).

θ is trained on the per-datum MAP loss ``CE_mean + ½ Σ_l δ_l |θ_l|² / N``. After ``burnin`` epochs and then every
``frequency`` epochs, a KFAC-GGN Laplace approximation is fitted on the (non-augmented) marginal-likelihood data and
``n_hypersteps`` Adam steps on ``L_η`` (per datum) update ``log δ``. ``burnin > n_epochs`` gives plain MAP training
with the initial (unit) prior variances.

Learnable anchor length-scales (``learn_omega=True`` in the S-FC / S-CONV layers) are hyperparameters too
(:mod:`symkit.marglik.omega`): the MAP loss does not train them; each update first takes ``omega_steps`` Adam steps
on ``log ω`` along ``∂L_η/∂log ω`` (a fresh fit for each), then refits at the new ω for the ``log δ`` steps, so the
stored Laplace approximation is that of the final ``(θ, ω)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from symkit._checks import check_int
from symkit.marglik.kfac import fit_kfac
from symkit.marglik.laplace import KroneckerLaplace, PriorGroup, map_penalty, prior_groups
from symkit.marglik.omega import omega_gradient, omega_parameters
from symkit.nn import parameter_like
from symkit.train import Trainer, batch_indices


@dataclass
class MarglikConfig:
    """Schedule and optimisers (defaults: the authors' code, except epochs)."""

    n_epochs: int = 100
    burnin: int = 10
    frequency: int = 5
    n_hypersteps: int = 20
    lr: float = 0.01
    lr_min: float = 1e-6
    lr_hyp: float = 0.1
    lr_hyp_min: float = 0.1
    prior_prec_init: float = 1.0
    batch_size: int = 128
    marglik_batch_size: int = 150
    # θ: SGD with momentum 0.9 (the authors' code). "adam" is the paper's text (App. F.6); under Adam the prior's
    # gradient is rescaled per parameter, so θ is not the MAP estimate the Laplace approximation assumes and learned
    # precisions barely shrink their paths (docs/marglik.md: 7.4 points lost on the quadrant digit task).
    optimizer: str = "sgd"
    prior_structure: str = "tensor"
    mc_samples: int | None = None  # None: exact GGN (one backward pass per class); int: KFAC-MC
    seed: int = 0
    # learnable length-scales ω (if the model has any): Adam steps on log ω per update, and their rate
    omega_steps: int = 1
    lr_omega: float = 0.1


def hyper_update_epochs(n_epochs: int, burnin: int, frequency: int) -> list[int]:
    """Epochs (1-based) after which η is updated: ``e ≥ burnin`` and ``e % frequency == 0`` (the code's rule)."""
    return [e for e in range(1, n_epochs + 1) if e >= burnin and e % frequency == 0]


@dataclass
class MarglikResult:
    """What :func:`train_marglik` returns: the learned log prior precisions per prior group, the last
    Laplace fit (None before the first update), one dict per epoch (loss, accuracy and, at updates, the negative log
    marginal likelihood and precisions), and the seconds of each epoch and hyperparameter update."""
    log_prior_prec: torch.Tensor
    groups: list[PriorGroup]
    laplace: KroneckerLaplace | None
    history: list[dict] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)
    hyper_seconds: list[float] = field(default_factory=list)


def hyper_update(model: nn.Module, x_ml: torch.Tensor, y_ml: torch.Tensor, log_prior_prec: torch.Tensor,
                 groups: list[PriorGroup], opt_hyp: torch.optim.Optimizer, n_steps: int, batch_size: int,
                 mc_samples: int | None = None, seed: int = 0, opt_omega: torch.optim.Optimizer | None = None,
                 omega_steps: int = 1) -> tuple[KroneckerLaplace, float]:
    """One hyperparameter update: with ``opt_omega``, ``omega_steps`` steps on ``log ω`` (each at a fresh two-pass
    gradient, :func:`symkit.marglik.omega.omega_gradient`); then a KFAC fit on ``(x_ml, y_ml)`` and ``n_steps``
    optimiser steps on ``L_η`` in ``log δ``."""
    model.eval()
    batches = [(x_ml[b], y_ml[b]) for b in batch_indices(len(x_ml), batch_size)]
    if opt_omega is not None:
        omegas = omega_parameters(model)
        for _ in range(omega_steps):
            og = omega_gradient(model, batches, groups, log_prior_prec, mc_samples=mc_samples, seed=seed)
            opt_omega.zero_grad()
            for name, p in omegas.items():
                p.grad = og.grads[name].to(p.dtype)
            opt_omega.step()
    curv = fit_kfac(model, batches, mc_samples=mc_samples, seed=seed)
    lap = KroneckerLaplace(model, curv, groups)
    value = math.nan
    for _ in range(n_steps):
        opt_hyp.zero_grad()
        loss = lap.neg_log_marglik(log_prior_prec)
        loss.backward()
        opt_hyp.step()
        value = float(loss.detach())
    with torch.no_grad():
        value = float(lap.neg_log_marglik(log_prior_prec))
    return lap, value


def train_marglik(model: nn.Module, x: torch.Tensor, y: torch.Tensor, config: MarglikConfig,
                  x_ml: torch.Tensor | None = None, y_ml: torch.Tensor | None = None,
                  augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
                  callback: Callable[[int, dict], None] | None = None, *,
                  precision: str = "32", max_epochs: int | None = None, max_batches: int | None = None
                  ) -> MarglikResult:
    """Train ``model`` (classification) with online marginal-likelihood updates of per-group prior precisions;
    ``precision`` / ``max_epochs`` / ``max_batches`` go to :class:`symkit.train.Trainer` (a smoke run's limits)."""
    if not isinstance(config, MarglikConfig):
        raise TypeError(f"config must be a MarglikConfig, got {type(config).__name__}")
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y must be non-empty and equally long, got {len(x)} and {len(y)}")
    if config.optimizer not in ("adam", "sgd"):
        raise ValueError(f"optimizer must be 'adam' or 'sgd', got {config.optimizer!r}")
    check_int("MarglikConfig.omega_steps", config.omega_steps, 0)
    x_ml = x if x_ml is None else x_ml
    y_ml = y if y_ml is None else y_ml
    n = len(x)
    gen = torch.Generator().manual_seed(config.seed)
    groups = prior_groups(model, None, config.prior_structure)
    device = parameter_like(model)[0]
    log_prior_prec = torch.full((len(groups),), math.log(config.prior_prec_init), dtype=torch.float64,
                                device=device, requires_grad=True)
    opt_hyp = torch.optim.Adam([log_prior_prec], lr=config.lr_hyp)
    updates = hyper_update_epochs(config.n_epochs, config.burnin, config.frequency)
    sched_hyp = torch.optim.lr_scheduler.CosineAnnealingLR(opt_hyp, T_max=max(1, len(updates) * config.n_hypersteps),
                                                           eta_min=config.lr_hyp_min)
    result = MarglikResult(log_prior_prec, groups, None)
    update_set = set(updates)
    omegas = omega_parameters(model)  # hyperparameters: not in the MAP loss's optimiser
    theta = [p for name, p in model.named_parameters() if name not in omegas]
    opt_omega = (torch.optim.Adam(list(omegas.values()), lr=config.lr_omega)
                 if omegas and config.omega_steps else None)

    def marglik_hook(trainer: Trainer, epoch: int, record: dict) -> None:
        """After the epoch's gradient steps: the hyperparameter update of the schedule (seed 001, Alg. 1)."""
        result.epoch_seconds.append(record["seconds"])
        entry = {"epoch": epoch, "loss": record["loss"], "train_acc": record["train_acc"]}
        if epoch in update_set:
            t0 = time.perf_counter()
            lap, value = hyper_update(model, x_ml, y_ml, log_prior_prec, groups, opt_hyp, config.n_hypersteps,
                                      config.marglik_batch_size, config.mc_samples, config.seed + epoch, opt_omega,
                                      config.omega_steps)
            for _ in range(config.n_hypersteps):
                sched_hyp.step()
            result.hyper_seconds.append(time.perf_counter() - t0)
            result.laplace = lap
            entry["neg_log_marglik"] = value
            entry["log_prior_prec"] = log_prior_prec.detach().tolist()
            if omegas:
                entry["log_omega"] = {name: float(p.detach()) for name, p in omegas.items()}
        result.history.append(entry)
        if callback is not None:
            callback(epoch, entry)

    Trainer(model, F.cross_entropy, penalty=lambda m: map_penalty(m, groups, log_prior_prec, n), params=theta,
            optimizer=config.optimizer, lr=config.lr, schedule="cosine", lr_min=config.lr_min,
            epochs=config.n_epochs, batch_size=config.batch_size, augment=augment, generator=gen, accuracy=True,
            hooks=[marglik_hook], desc="marglik training",
            precision=precision, max_epochs=max_epochs, max_batches=max_batches).fit((x, y))
    return result
