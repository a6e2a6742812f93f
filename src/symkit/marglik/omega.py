"""The anchor length-scales ω of S-FC / S-CONV as hyperparameters of the Laplace marginal likelihood.

``AnchorBasis`` interpolates anchor values onto the grid with the length-scale ω (seed 001 §3.2, Eqs. 6-7); with
``learn_omega=True`` its ``log_omega`` is a parameter. The paper lists ω among the quantities whose priors are
learned ("prior on ω", Table 2) but does not say how ω enters the marginal likelihood, and the authors' code trains
it on the MAP loss. symkit decides:

- ω is a **hyperparameter**, like the prior precisions δ: it has no prior, no Laplace posterior and no curvature
  block; the prior stays on the anchor values ``u`` (Eq. 8's placement on ``u``, Table 2's "u" rows).
- It is learned by gradients of the per-datum ``L_η`` of Eq. 9 at the current θ (θ held fixed, as the online
  algorithm does for δ; no implicit dependence of θ* on ω), through everything that depends on it: the NLL and both
  Kronecker factors of every layer (the anchor layers' ``ΦAΦᵀ`` and the Jacobians and inputs of all later layers).
  The prior term ``δ|u|²`` does not depend on ω.

:func:`omega_gradient` computes ``L_η`` and ``∂L_η/∂log ω`` in two passes over the data, holding one batch's graph
at a time: an ordinary KFAC fit, the adjoints ``∂L_η/∂G`` and ``∂L_η/∂A`` through the eigendecompositions, then per
batch the gradient of ``NLL_b/N + Σ_blocks ⟨∂L_η/∂G, G_b⟩ + ⟨∂L_η/∂A, A_b⟩`` (``L_η`` depends on the data only
through these sums). ``fit_kfac(..., differentiable=True)`` gives the same gradient through one graph of all
batches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from symkit.marglik.kfac import KronBlock, KronCurvature, batch_factors, fit_kfac
from symkit.marglik.laplace import KroneckerLaplace, PriorGroup


def omega_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """The learnable log length-scales (``AnchorBasis(learn_omega=True).log_omega``) of ``model`` by name."""
    return {n: p for n, p in model.named_parameters() if "omega" in n and p.requires_grad}


@dataclass
class OmegaGradient:
    """``L_η`` per datum at ``(θ, ω, δ)``, its gradient in every learnable ``log ω`` and the Laplace fit used."""

    value: float
    grads: dict[str, torch.Tensor]
    laplace: KroneckerLaplace


def _factor_adjoints(model: nn.Module, lap: KroneckerLaplace, log_prior_prec: torch.Tensor
                     ) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Per weight (by id): the adjoints of the log-determinant term of ``L_η`` in the sum ``Σ a aᵀ`` behind ``A``
    and in ``G`` (shared with the bias block), through the eigenvalues of leaf copies of the factors."""
    leaves: dict[int, torch.Tensor] = {}
    blocks = []
    for b in lap.curvature.blocks:
        g = leaves.setdefault(id(b.G), b.G.detach().double().requires_grad_(True))
        a = None if b.A is None else b.A.detach().double().requires_grad_(True)
        blocks.append(KronBlock(b.name, b.param, g, a, rows=b.rows))
    copy = KroneckerLaplace(model, KronCurvature(blocks, lap.n_data, 0.0), lap.groups)
    logdet = 0.5 * copy.log_det_posterior_precision(log_prior_prec.detach()) / lap.n_data
    weights = [b for b in blocks if b.A is not None]
    grads = torch.autograd.grad(logdet, [b.G for b in weights] + [b.A for b in weights], allow_unused=True)
    out = {}
    for i, b in enumerate(weights):
        g_adj, a_adj = grads[i], grads[len(weights) + i]
        g_adj = torch.zeros_like(b.G) if g_adj is None else g_adj
        a_adj = torch.zeros_like(b.A) if a_adj is None else a_adj
        out[id(b.param)] = (a_adj / b.rows, g_adj)
    return out


def omega_gradient(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
                   groups: list[PriorGroup], log_prior_prec: torch.Tensor, likelihood: str = "classification",
                   sigma_noise: float = 1.0, mc_samples: int | None = None, seed: int = 0) -> OmegaGradient:
    """``L_η`` (Eq. 9, per datum) and ``∂L_η/∂log ω`` at the current θ, in two passes over ``batches``.

    ``batches`` is read twice (a list or a DataLoader, not a one-shot iterator); ``mc_samples`` and ``seed`` are
    those of :func:`fit_kfac`, and both passes draw the same labels. Returns zeros for a model without learnable ω.
    """
    if iter(batches) is batches:
        raise TypeError("omega_gradient: batches is read twice; give a list or a DataLoader, not an iterator")
    curv = fit_kfac(model, batches, likelihood, sigma_noise, mc_samples, seed)
    lap = KroneckerLaplace(model, curv, groups)
    value = float(lap.neg_log_marglik(log_prior_prec.detach()))
    omegas = omega_parameters(model)
    grads = {n: torch.zeros_like(p) for n, p in omegas.items()}
    if not omegas:
        return OmegaGradient(value, grads, lap)
    adjoints = _factor_adjoints(model, lap, log_prior_prec)
    gen = torch.Generator().manual_seed(seed)
    for x, y in batches:
        part = batch_factors(model, x, y, likelihood, sigma_noise, mc_samples, gen, differentiable=True)
        objective = part.nll / curv.n_data
        for site, sa, _, sg in part.sites:
            a_adj, g_adj = adjoints[id(site.weight)]
            objective = objective + (a_adj * sa).sum() + (g_adj * sg).sum()
        got = torch.autograd.grad(objective, list(omegas.values()), allow_unused=True)
        for (n, _), g in zip(omegas.items(), got):
            if g is not None:
                grads[n] = grads[n] + g
    return OmegaGradient(value, grads, lap)

