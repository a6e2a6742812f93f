"""Gaussian priors per group of parameters, the Laplace log marginal likelihood and effective parameters.

With the prior ``p(θ) = Π_l N(θ_l | 0, δ_l⁻¹ I)`` and a KFAC-GGN ``H_lik`` (``symkit.marglik.kfac``), the objective
for the precisions ``δ`` (paper Eq. 9; the 2π terms cancel) is, per datum,

    L_η = (1/N) [ −log p(D|θ*) + Σ_l (δ_l/2 |θ_l|² − P_l/2 log δ_l) + ½ Σ_blocks Σ_{i,j} log(λ^G_i λ^A_j + δ_l) ],

using ``log|G⊗A + δI| = Σ_{i,j} log(λ^G_i λ^A_j + δ)``. The eigenvalues are computed once per curvature fit, so
``L_η`` and its gradient in ``log δ`` are cheap for any ``δ``. Effective parameters (MacKay 1992; App. D.2):
``γ_l = Σ λ/(λ + δ_l)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn

from symkit.marglik.kfac import KronCurvature

PRIOR_STRUCTURES = ("tensor", "path", "scalar")


@dataclass(frozen=True)
class PriorGroup:
    """Parameters sharing one prior precision; ``layer``/``path`` locate it in a relaxed network (or None)."""

    name: str
    params: tuple[str, ...]
    layer: int | None
    path: str | None
    symmetry: str | None


_PATH_RE = re.compile(r"^(?:.*\.)?layers\.(\d+)\.paths\.([^.]+)\.")


def _locate(name: str, model: nn.Module) -> tuple[str, int | None, str | None, str | None]:
    m = _PATH_RE.match(name)
    if m:
        prefix = name[: m.end() - 1]
        sym = getattr(model.get_submodule(prefix), "symmetry", None)
        return prefix, int(m.group(1)), m.group(2), sym
    return name.rsplit(".", 1)[0] if "." in name else name, None, None, None


def prior_groups(model: nn.Module, curvature: KronCurvature | None = None, structure: str = "tensor"
                 ) -> list[PriorGroup]:
    """Prior groups over the parameters with a curvature block (all parameters if ``curvature`` is None).

    ``'tensor'``: one precision per parameter tensor (the paper's code, incl. biases and each F-FC factor);
    ``'path'``: one per path of each relaxed layer (the paper's text, σ_l per layer and path) and per other module;
    ``'scalar'``: one for all.
    """
    if structure not in PRIOR_STRUCTURES:
        raise ValueError(f"prior structure must be one of {PRIOR_STRUCTURES}, got {structure!r}")
    if curvature is not None:
        names = [b.name for b in curvature.blocks]
    else:
        names = [n for n, p in model.named_parameters() if p.requires_grad and "omega" not in n]
    if structure == "scalar":
        return [PriorGroup("all", tuple(names), None, None, None)]
    groups: dict[str, list] = {}
    for n in names:
        prefix, layer, path, sym = _locate(n, model)
        key = n if structure == "tensor" else prefix
        groups.setdefault(key, [[], layer, path, sym])[0].append(n)
    return [PriorGroup(k, tuple(v[0]), v[1], v[2], v[3]) for k, v in groups.items()]


class KroneckerLaplace:
    """Laplace approximation with a KFAC-GGN and one isotropic prior precision per :class:`PriorGroup`."""

    def __init__(self, model: nn.Module, curvature: KronCurvature, groups: list[PriorGroup]) -> None:
        params = dict(model.named_parameters())
        index = {}
        for gi, g in enumerate(groups):
            for n in g.params:
                if n in index:
                    raise ValueError(f"parameter {n!r} is in two prior groups")
                index[n] = gi
        missing = [b.name for b in curvature.blocks if b.name not in index]
        if missing:
            raise ValueError(f"curvature blocks without a prior group: {', '.join(missing)}")
        self.groups = groups
        self.curvature = curvature
        self.n_data = curvature.n_data
        lam, idx = [], []
        for b in curvature.blocks:
            ev = b.eigenvalues()
            lam.append(ev)
            idx.append(torch.full((ev.numel(),), index[b.name], dtype=torch.long, device=ev.device))
        self.eigenvalues = torch.cat(lam)
        self.eig_group = torch.cat(idx)
        device = self.eigenvalues.device
        sizes = torch.zeros(len(groups), dtype=torch.float64, device=device)
        sq = torch.zeros(len(groups), dtype=torch.float64, device=device)
        for gi, g in enumerate(groups):
            for n in g.params:
                if n not in params:
                    raise ValueError(f"prior group {g.name!r}: the model has no parameter {n!r}")
                sizes[gi] += params[n].numel()
                sq[gi] += params[n].detach().double().pow(2).sum().to(device)
        self.sizes = sizes
        self.theta_sq = sq

    def _delta(self, log_prior_prec: torch.Tensor) -> torch.Tensor:
        if not isinstance(log_prior_prec, torch.Tensor) or log_prior_prec.shape != (len(self.groups),):
            raise ValueError(f"log_prior_prec must be a tensor of shape ({len(self.groups)},), "
                             f"got {getattr(log_prior_prec, 'shape', log_prior_prec)!r}")
        return log_prior_prec.double().exp()

    def log_det_posterior_precision(self, log_prior_prec: torch.Tensor) -> torch.Tensor:
        """``log|G⊗A + δ I|`` summed over blocks (the Kronecker identity)."""
        delta = self._delta(log_prior_prec)
        return torch.log(self.eigenvalues + delta[self.eig_group]).sum()

    def neg_log_marglik(self, log_prior_prec: torch.Tensor) -> torch.Tensor:
        """``L_η`` per datum (Eq. 9), differentiable in ``log_prior_prec``."""
        delta = self._delta(log_prior_prec)
        prior = 0.5 * (delta * self.theta_sq).sum() - 0.5 * (self.sizes * delta.log()).sum()
        total = self.curvature.nll + prior + 0.5 * self.log_det_posterior_precision(log_prior_prec)
        return total / self.n_data

    def log_marginal_likelihood(self, log_prior_prec: torch.Tensor) -> torch.Tensor:
        """``log p(D|η)`` under the Laplace approximation (total, not per datum)."""
        return -self.neg_log_marglik(log_prior_prec) * self.n_data

    def effective_parameters(self, log_prior_prec: torch.Tensor) -> torch.Tensor:
        """``γ_l = Σ λ/(λ + δ_l)`` per group (0 ≤ γ_l ≤ P_l)."""
        delta = self._delta(log_prior_prec).detach()
        r = self.eigenvalues / (self.eigenvalues + delta[self.eig_group])
        return torch.zeros(len(self.groups), dtype=torch.float64, device=r.device).index_add_(0, self.eig_group, r)


def expand_prior_precision(model: nn.Module, groups: list[PriorGroup], log_prior_prec: torch.Tensor
                           ) -> dict[str, torch.Tensor]:
    """``δ`` of each parameter tensor by name (the per-parameter expansion of the grouped precisions)."""
    delta = log_prior_prec.detach().exp()
    return {n: delta[gi] for gi, g in enumerate(groups) for n in g.params}


def map_penalty(model: nn.Module, groups: list[PriorGroup], log_prior_prec: torch.Tensor, n_data: int
                ) -> torch.Tensor:
    """``½ Σ_l δ_l |θ_l|² / N`` (the prior term of the per-datum MAP loss; δ detached)."""
    params = dict(model.named_parameters())
    tensors = [params[n] for g in groups for n in g.params]
    owner = [gi for gi, g in enumerate(groups) for _ in g.params]
    if not tensors:
        raise ValueError("map_penalty: the prior groups hold no parameters (expected prior_groups(model))")
    # one stacked |θ_t|² per tensor and one weighted sum: a few autograd nodes per step instead of six per group
    sq = torch.stack([t.square().sum() for t in tensors])
    delta = log_prior_prec.detach().exp()[owner].to(sq.dtype)
    return 0.5 * (delta * sq).sum() / n_data


def path_diagnostics(lap: KroneckerLaplace, log_prior_prec: torch.Tensor) -> list[dict]:
    """Per relaxed layer and path: precision, |θ|², γ, γ/P (normalised) and relative effective parameters (D.2).

    ``precision`` is that of the path's largest tensor, ``precisions`` the ``(size, δ)`` of all its tensors.

    The relative measure is ``(γ_k/P_k) / Σ_j (γ_j/P_j)`` over the paths ``j`` of the layer; the effective type of a
    layer is its path with the largest relative measure. If every path of a layer has ``γ = 0`` (e.g. a network
    whose ReLUs all died) the shares are undefined: they are reported as ``1/n`` and the row has ``dead=True``.
    """
    gam = lap.effective_parameters(log_prior_prec)
    delta = log_prior_prec.detach().double().exp()
    per: dict[tuple[int, str], dict] = {}
    for gi, g in enumerate(lap.groups):
        if g.layer is None:
            continue
        d = per.setdefault((g.layer, g.path), {"layer": g.layer, "path": g.path, "symmetry": g.symmetry,
                                               "gamma": 0.0, "P": 0.0, "theta_sq": 0.0, "prec": []})
        d["gamma"] += float(gam[gi])
        d["P"] += float(lap.sizes[gi])
        d["theta_sq"] += float(lap.theta_sq[gi])
        d["prec"].append((float(lap.sizes[gi]), float(delta[gi])))
    rows = sorted(per.values(), key=lambda r: (r["layer"], r["path"]))
    for r in rows:
        r["normalised"] = r["gamma"] / r["P"]
        prec = sorted(r.pop("prec"), reverse=True)
        r["precision"] = prec[0][1]  # of the largest tensor (the weight)
        # every tensor's (size, precision), largest first: a factored path (F-FC) stays on if *one* factor keeps a
        # small precision, since θ₁θ₂ is unchanged under θ₁ → cθ₁, θ₂ → θ₂/c (and δ₁ → δ₁/c², δ₂ → δ₂c²)
        r["precisions"] = prec
    for layer in {r["layer"] for r in rows}:
        mine = [r for r in rows if r["layer"] == layer]
        tot = sum(r["normalised"] for r in mine)
        for r in mine:
            r["relative"] = r["normalised"] / tot if tot > 0 else 1.0 / len(mine)
            r["dead"] = not tot > 0
    return rows


def effective_layer_types(rows: list[dict]) -> list[str]:
    """The path with the largest relative effective number of parameters, per layer (Fig. 3)."""
    out = []
    for layer in sorted({r["layer"] for r in rows}):
        mine = [r for r in rows if r["layer"] == layer]
        out.append(max(mine, key=lambda r: r["relative"])["path"])
    return out
