"""The marginal likelihood of any model in three calls, as laplace-torch reads:
``LaplaceApproximation(model, "classification").fit(batches).log_marginal_likelihood(prior_prec)``.

The model may be built from ``nn.Linear`` and ``nn.Conv2d`` (their curvature rules are forward hooks) and from the
relaxed layers of ``symkit.nn.relaxed`` (which record themselves). The posterior is the Kronecker-factored Laplace
approximation of :mod:`symkit.marglik.laplace` (seed 001, Eq. 9), with one prior precision per group of parameters.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from symkit._checks import check_int
from symkit.marglik.kfac import LIKELIHOODS, fit_kfac
from symkit.marglik.laplace import KroneckerLaplace, PriorGroup, prior_groups

__all__ = ["LaplaceApproximation"]


class LaplaceApproximation:
    """Kronecker-factored Laplace approximation of ``model`` at its current parameters.

    ``prior_structure``: ``"tensor"`` (a precision per parameter tensor), ``"path"`` (per relaxed path) or
    ``"scalar"`` (one for all). ``mc_samples=None`` uses the exact output Hessian factor.
    """

    def __init__(self, model: nn.Module, likelihood: str = "classification", *, sigma_noise: float = 1.0,
                 prior_structure: str = "tensor", mc_samples: int | None = None, seed: int = 0) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"LaplaceApproximation: model must be an nn.Module, got {type(model).__name__}")
        if likelihood not in LIKELIHOODS:
            raise ValueError(f"LaplaceApproximation: likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
        self.model, self.likelihood, self.sigma_noise = model, likelihood, float(sigma_noise)
        self.prior_structure, self.mc_samples, self.seed = prior_structure, mc_samples, seed
        self.laplace: KroneckerLaplace | None = None

    def fit(self, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> LaplaceApproximation:
        """Fit the curvature on ``batches`` of ``(x, y)`` (a DataLoader or a list); returns ``self``."""
        curvature = fit_kfac(self.model, batches, likelihood=self.likelihood, sigma_noise=self.sigma_noise,
                             mc_samples=self.mc_samples, seed=self.seed)
        groups = prior_groups(self.model, curvature, self.prior_structure)
        self.laplace = KroneckerLaplace(self.model, curvature, groups)
        return self

    @property
    def groups(self) -> list[PriorGroup]:
        return self._fitted().groups

    def _fitted(self) -> KroneckerLaplace:
        if self.laplace is None:
            raise RuntimeError("LaplaceApproximation: call fit(batches) first")
        return self.laplace

    def _log_prec(self, prior_prec: float | torch.Tensor) -> torch.Tensor:
        lap = self._fitted()
        n = len(lap.groups)
        device = lap.eigenvalues.device
        if isinstance(prior_prec, torch.Tensor):
            p = prior_prec.to(device=device, dtype=torch.float64)
            if p.numel() == 1:
                p = p.reshape(1).expand(n)
            if p.shape != (n,):
                raise ValueError(f"LaplaceApproximation: prior_prec must be a scalar or have {n} entries (one per "
                                 f"group), got shape {tuple(prior_prec.shape)}")
            if p.device.type != "meta" and not bool(torch.isfinite(p).all() and (p > 0).all()):
                raise ValueError("LaplaceApproximation: prior_prec must be finite and positive, got "
                                 f"{prior_prec.tolist()}")
            return p.log()
        if not (math.isfinite(float(prior_prec)) and prior_prec > 0):
            raise ValueError(f"LaplaceApproximation: prior_prec must be positive, got {prior_prec!r}")
        return torch.full((n,), math.log(float(prior_prec)), dtype=torch.float64, device=device)

    def log_marginal_likelihood(self, prior_prec: float | torch.Tensor = 1.0) -> torch.Tensor:
        """``log p(D | prior_prec)`` (total over the data), differentiable in a tensor ``prior_prec``."""
        return self._fitted().log_marginal_likelihood(self._log_prec(prior_prec))

    def optimize_prior_precision(self, steps: int = 100, lr: float = 0.1, init: float = 1.0) -> torch.Tensor:
        """Maximise the marginal likelihood over the per-group precisions (Adam on their logs); returns them."""
        check_int("Laplace.optimize_prior_precision: steps", steps, minimum=1)
        log_prec = self._log_prec(init).clone().requires_grad_(True)
        opt = torch.optim.Adam([log_prec], lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            loss = self._fitted().neg_log_marglik(log_prec)
            loss.backward()
            opt.step()
        return log_prec.detach().exp()
