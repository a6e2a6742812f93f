"""Bilevel solvers for learned parameter sharing (Yeh et al. 2022, Eq. 6 and Algorithm 1).

``min_A L(A psi*(A), V)  s.t.  psi*(A) = argmin_psi L(A psi, T)``, A row-stochastic.

- :func:`brute_force_search`: enumerate every partition (Bell number many) and keep the best (the paper's Ours*).
- :func:`relaxed_closed_form`: A = row-softmax(S); the lower level in closed form as ``theta*(A) = P(A) w*`` with the
  cluster-averaging projector ``P(A) = A Abar^T`` (mean estimation, OLS); S by autograd through it. Batched over
  independent problems and restarts.
- :func:`implicit_hypergradient` and :func:`fit_implicit`: deep models, where the lower level is a few hundred
  optimiser steps and the hypergradient comes from the implicit function theorem,
  ``dL_V/dlambda = dL_V/dlambda - (d^2 L_T / dlambda dw^T) H^{-1} dL_V/dw``, with ``H^{-1} v`` by conjugate
  gradient, a Neumann series, a dense solve, or the identity.

Every solver that trains takes ``max_epochs`` (a smoke run's limit on its outer or optimiser steps; None: none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from symkit.actions.partition import bell_number, set_partitions
from symkit.nn.sharing import (
    SoftAssignment,
    column_group_norm,
    column_normalize,
    entropy_penalty,
    hyper_parameters,
    model_parameters,
    nuclear_norm,
)
from symkit.progress import progress_bar
from symkit.train import Trainer

__all__ = [
    "sharing_penalty",
    "brute_force_search",
    "RelaxedResult",
    "relaxed_closed_form",
    "inverse_hvp",
    "implicit_hypergradient",
    "ImplicitResult",
    "fit_implicit",
    "harden_",
    "fit_model_parameters",
]



def sharing_penalty(
    A: torch.Tensor, entropy_weight: float = 1e-2, rank_weight: float = 1e-2, rank_penalty: str = "colnorm"
) -> torch.Tensor:
    """``entropy_weight * H(A) + rank_weight * R(A)`` (§4.2), batched over leading dims of A.

    ``H`` is the mean row entropy (Eq. 20, reference reduction). ``R`` is ``"colnorm"`` (sum of column norms, what the
    reference code computes and with which Table 1 reproduces) or ``"nuclear"`` (Eq. 21 literally).
    """
    out = torch.zeros(A.shape[:-2], dtype=A.dtype, device=A.device)
    if entropy_weight:
        out = out + entropy_weight * entropy_penalty(A)
    if rank_weight:
        if rank_penalty == "colnorm":
            out = out + rank_weight * column_group_norm(A)
        elif rank_penalty == "nuclear":
            out = out + rank_weight * nuclear_norm(A)
        else:
            raise ValueError(f"rank_penalty must be 'colnorm' or 'nuclear', got {rank_penalty!r}")
    return out


# ---------------------------------------------------------------------------------------------- brute force


def brute_force_search(
    k: int, score: Callable[[np.ndarray], Any], max_k: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Ours*: evaluate ``score(labels)`` on every partition of ``k`` elements and keep the lowest (§4.2).

    ``score`` returns a scalar, or an array ``(B,)`` to search B independent problems at once. Returns
    ``(best_labels (B, k), best_scores (B,))``. There are B_k partitions (Bell number), so ``k <= max_k``.
    """
    if k > max_k:
        raise ValueError(f"brute force over {bell_number(k)} partitions of k={k} exceeds max_k={max_k}")
    best_labels: np.ndarray | None = None
    best: np.ndarray | None = None
    for labels in progress_bar(set_partitions(k), total=bell_number(k), desc="partitions"):
        s = np.atleast_1d(np.asarray(score(labels), dtype=np.float64))
        if best is None:
            best = s.copy()
            best_labels = np.tile(labels, (s.size, 1))
            continue
        better = s < best
        best[better] = s[better]
        best_labels[better] = labels
    assert best is not None and best_labels is not None
    return best_labels, best


# ---------------------------------------------------------------------------------------------- closed form


@dataclass
class RelaxedResult:
    """Output of :func:`relaxed_closed_form`: hardened labels (B, K), the soft A (B, K, C), and final objectives."""

    labels: np.ndarray
    A: torch.Tensor
    objective: np.ndarray
    history: list[float] = field(default_factory=list)


def relaxed_closed_form(
    w_star: torch.Tensor,
    val_loss: Callable[[torch.Tensor], torch.Tensor],
    c: int | None = None,
    entropy_weight: float = 1e-2,
    rank_weight: float = 1e-2,
    rank_penalty: str = "colnorm",
    optimizer: str = "rmsprop",
    lr: float = 2e-2,
    weight_decay: float = 1e-4,
    iters: int = 1000,
    restarts: int = 3,
    init: str = "normal",
    init_scale: float = 0.1,
    seed: int = 0,
    max_epochs: int | None = None,
) -> RelaxedResult:
    """Relaxed bilevel search with a closed-form lower level (§4.2, App. F.1 / F.3).

    ``w_star`` (B, K): the unshared lower-level solution of B independent problems (the training mean, or the
    flattened OLS weights). For logits S (R, B, K, C), ``A = softmax(S)``, ``theta = A Abar^T w*`` (the tied solution)
    and the upper objective ``val_loss(theta) + penalty(A)`` is minimised over S. ``val_loss`` maps ``theta``
    (R, B, K) to (R, B). Each problem keeps the restart with the lowest final objective; A is hardened by row argmax.
    """
    if not isinstance(w_star, torch.Tensor) or w_star.ndim != 2:
        raise ValueError(f"w_star must be a tensor (B, K), got {getattr(w_star, 'shape', type(w_star))}")
    if restarts < 1 or iters < 0:
        raise ValueError(f"need restarts >= 1 and iters >= 0, got restarts={restarts}, iters={iters}")
    b, k = w_star.shape
    c = k if c is None else c
    gen = torch.Generator().manual_seed(seed)
    shape = (restarts, b, k, c)
    if init == "normal":
        S0 = torch.randn(shape, generator=gen, dtype=w_star.dtype) * init_scale
    elif init == "uniform":
        S0 = (torch.rand(shape, generator=gen, dtype=w_star.dtype) * 2 - 1) * init_scale
    else:
        raise ValueError(f"init must be 'normal' or 'uniform', got {init!r}")
    if optimizer not in ("rmsprop", "adam"):
        raise ValueError(f"optimizer must be 'rmsprop' or 'adam', got {optimizer!r}")
    holder = nn.Module()
    holder.S = nn.Parameter(S0)
    S = holder.S

    def objective() -> tuple[torch.Tensor, torch.Tensor]:
        A = torch.softmax(S, -1)
        # theta = P(A) w* = A (Abar^T w*), as two matrix-vector products: the same value as soft_projector(A) @ w*
        # without forming the (R, B, K, K) projector (batched K x K matmuls dominate the cost of small problems)
        psi = (column_normalize(A) * w_star[:, :, None]).sum(-2)
        theta = (A * psi[..., None, :]).sum(-1)
        val = val_loss(theta)
        if val.shape != (restarts, b):
            raise ValueError(f"val_loss must map theta {tuple(theta.shape)} to shape {(restarts, b)}, got {val.shape}")
        return val + sharing_penalty(A, entropy_weight, rank_weight, rank_penalty), A

    history: list[float] = []

    def total(_: nn.Module) -> torch.Tensor:
        obj, _A = objective()
        history.append(float(obj.detach().mean()))
        return obj.sum()

    if iters:
        Trainer(holder, objective=total, optimizer=optimizer, lr=lr, weight_decay=weight_decay, epochs=iters,
                desc="sharing", max_epochs=max_epochs).fit()
    with torch.no_grad():
        obj, A = objective()
        best = obj.argmin(0)  # (B,)
        A_best = A[best, torch.arange(b)]
        labels = A_best.argmax(-1).cpu().numpy()
        return RelaxedResult(labels=labels, A=A_best, objective=obj[best, torch.arange(b)].cpu().numpy(),
                             history=history)


# ---------------------------------------------------------------------------------------------- implicit


def _flat_dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    return sum((x * y).sum() for x, y in zip(a, b))


def inverse_hvp(
    v: Sequence[torch.Tensor],
    hvp: Callable[[Sequence[torch.Tensor]], Sequence[torch.Tensor]],
    method: str = "neumann",
    iters: int = 20,
    alpha: float = 1e-2,
    neumann_scale: str = "standard",
    tol: float = 1e-4,
    damping: float = 0.0,
) -> list[torch.Tensor]:
    """Approximate ``H^{-1} v`` from Hessian-vector products.

    - ``"neumann"``: ``alpha sum_{j=0}^{J} (I - alpha H)^j v`` (Lorraine et al. 2020); ``neumann_scale="reference"``
      drops the leading ``alpha`` as the paper's released code does (so the result is ``~H^{-1} v / alpha``).
    - ``"cg"``: conjugate gradient on ``(H + damping I) p = v``, ``iters`` steps or residual below ``tol``.
    - ``"exact"``: dense Hessian (from unit-vector products) plus ``max(damping, 1e-6) I``, solved; small models only.
    - ``"identity"``: ``H^{-1} ~ I``, the greedy one-step approximation.
    """
    v = [t.detach() for t in v]
    if method == "identity":
        return [t.clone() for t in v]
    if method == "neumann":
        if neumann_scale not in ("standard", "reference"):
            raise ValueError(f"neumann_scale must be 'standard' or 'reference', got {neumann_scale!r}")
        cur = [t.clone() for t in v]
        acc = [t.clone() for t in v]
        for _ in range(iters):
            hv = hvp(cur)
            cur = [c - alpha * h.detach() for c, h in zip(cur, hv)]
            acc = [a + c for a, c in zip(acc, cur)]
        if neumann_scale == "standard":
            acc = [alpha * a for a in acc]
        return acc
    if method == "cg":
        x = [torch.zeros_like(t) for t in v]
        r = [t.clone() for t in v]
        p = [t.clone() for t in v]
        rs = _flat_dot(r, r)
        for _ in range(iters):
            if float(rs) ** 0.5 < tol:
                break
            hp = [h.detach() + damping * q for h, q in zip(hvp(p), p)]
            a = rs / _flat_dot(p, hp).clamp_min(1e-30)
            x = [xi + a * pi for xi, pi in zip(x, p)]
            r = [ri - a * hi for ri, hi in zip(r, hp)]
            rs_new = _flat_dot(r, r)
            p = [ri + (rs_new / rs) * pi for ri, pi in zip(r, p)]
            rs = rs_new
        return x
    if method == "exact":
        sizes = [t.numel() for t in v]
        n = sum(sizes)
        if n > 4000:
            raise ValueError(f"exact inverse-HVP builds a dense {n}x{n} Hessian; use 'cg' or 'neumann'")
        H = torch.zeros(n, n, dtype=v[0].dtype)
        for i in range(n):
            e = torch.zeros(n, dtype=v[0].dtype)
            e[i] = 1.0
            es = list(torch.split(e, sizes))
            H[:, i] = torch.cat([h.detach().reshape(-1) for h in hvp([x.reshape(t.shape) for x, t in zip(es, v)])])
        H = 0.5 * (H + H.T) + max(damping, 1e-6) * torch.eye(n, dtype=H.dtype)
        sol = torch.linalg.solve(H, torch.cat([t.reshape(-1) for t in v]))
        return [s.reshape(t.shape) for s, t in zip(torch.split(sol, sizes), v)]
    raise ValueError(f"method must be 'neumann', 'cg', 'exact' or 'identity', got {method!r}")


def implicit_hypergradient(
    train_loss: Callable[[], torch.Tensor],
    val_loss: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    hparams: Sequence[torch.Tensor],
    **inverse_kw: Any,
) -> list[torch.Tensor]:
    """IFT hypergradient ``dL_V/dlambda - (d^2 L_T/dlambda dw^T) H^{-1} dL_V/dw`` at the current lower-level w.

    ``train_loss`` and ``val_loss`` are closures recomputing the losses from the current parameters (the validation
    objective may include penalties on the hyperparameters). ``inverse_kw`` go to :func:`inverse_hvp`.
    """
    params, hparams = list(params), list(hparams)
    lv = val_loss()
    grads = torch.autograd.grad(lv, params + hparams, allow_unused=True)
    gw = [torch.zeros_like(p) if g is None else g for g, p in zip(grads[: len(params)], params)]
    direct = [torch.zeros_like(h) if g is None else g for g, h in zip(grads[len(params) :], hparams)]
    lt = train_loss()
    gt = torch.autograd.grad(lt, params, create_graph=True)

    def hvp(vec: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
        out = torch.autograd.grad(gt, params, grad_outputs=list(vec), retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p) if o is None else o for o, p in zip(out, params)]

    p = inverse_hvp(gw, hvp, **inverse_kw)
    mixed = torch.autograd.grad(gt, hparams, grad_outputs=p, allow_unused=True)
    return [d - (torch.zeros_like(d) if m is None else m.detach()) for d, m in zip(direct, mixed)]


@dataclass
class ImplicitResult:
    """Output of :func:`fit_implicit`: hardened labels of each assignment, the best objective and the history."""

    labels: list[np.ndarray]
    best_objective: float
    history: list[float]
    outer_steps: int


@torch.no_grad()
def harden_(module: nn.Module) -> list[np.ndarray]:
    """Row-argmax harden every :class:`SoftAssignment` in ``module`` in place (logits ``10 A - 5``); returns labels."""
    out = []
    for m in module.modules():
        if isinstance(m, SoftAssignment):
            labels = m.labels()
            m.load_partition_(labels)
            out.append(labels)
    return out


def fit_implicit(
    model: nn.Module,
    train_loss: Callable[[nn.Module], torch.Tensor],
    val_loss: Callable[[nn.Module], torch.Tensor],
    penalty: Callable[[nn.Module], torch.Tensor] | None = None,
    inner_steps: int = 250,
    outer_steps: int = 500,
    inner_lr: float = 1e-3,
    inner_weight_decay: float = 1e-3,
    outer_lr: float = 1e-2,
    method: str = "neumann",
    neumann_iters: int = 20,
    neumann_alpha: float | None = None,
    neumann_scale: str = "standard",
    cg_iters: int = 30,
    clip: float | None = 25.0,
    warmup: int = 30,
    plateau_patience: int = 50,
    patience: int = 100,
    callback: Callable[[int, nn.Module, float], None] | None = None,
    max_epochs: int | None = None,
) -> ImplicitResult:
    """Algorithm 1 for a deep model with structure hyperparameters (:func:`hyper_parameters`).

    The outer loop is a :class:`~symkit.train.Trainer` over the hyperparameters: each of its steps runs
    ``inner_steps`` AdamW steps on the training loss (warm-started), then one Adam step with the IFT hypergradient of
    ``val_loss + penalty``. Gradient clipping, a plateau schedule after ``warmup`` outer steps, and early stopping with
    ``patience`` on the outer objective (``monitor='loss'``), keeping the best hyperparameters, follow the reference
    code. The model ends with the best hyperparameters loaded (not hardened).
    ``callback(step, model, objective)`` is called after each hypergradient evaluation.
    """
    params = list(model_parameters(model))
    hparams = list(hyper_parameters(model))
    if not hparams:
        raise ValueError(f"{type(model).__name__} has no SoftAssignment, so there is no sharing to learn")
    inner_opt = torch.optim.AdamW(params, lr=inner_lr, weight_decay=inner_weight_decay)  # warm-started throughout

    def objective() -> torch.Tensor:
        v = val_loss(model)
        return v + penalty(model) if penalty is not None else v

    def hyper_step(m: nn.Module) -> float:
        """Solve the inner problem, then set the hyperparameters' gradients to the IFT hypergradient; returns the
        outer objective at the current hyperparameters (what the outer trainer monitors)."""
        for _ in range(inner_steps):
            inner_opt.zero_grad()
            train_loss(m).backward(inputs=params)
            inner_opt.step()
        alpha = neumann_alpha if neumann_alpha is not None else outer.optimizer.param_groups[0]["lr"]
        hg = implicit_hypergradient(
            lambda: train_loss(m), objective, params, hparams, method=method,
            iters=neumann_iters if method == "neumann" else cg_iters, alpha=alpha, neumann_scale=neumann_scale,
        )
        for h, g in zip(hparams, hg):
            h.grad = g
        with torch.no_grad():
            return float(objective())

    hooks = [] if callback is None else [lambda trainer, epoch, record: callback(epoch - 1, model, record["loss"])]
    outer = Trainer(
        model, gradient=hyper_step, params=hparams, optimizer="adam", lr=outer_lr, epochs=outer_steps,
        monitor="loss", improvement=1e-4, patience=patience, clip=clip, schedule="plateau",
        plateau_patience=plateau_patience, plateau_factor=0.5, warmup=warmup, hooks=hooks, desc="outer",
        max_epochs=max_epochs,
    )
    result = outer.fit()
    labels = [m.labels() for m in model.modules() if isinstance(m, SoftAssignment)]
    return ImplicitResult(labels=labels, best_objective=result.best_validation, history=result.losses,
                          outer_steps=len(result.history))


def fit_model_parameters(
    model: nn.Module,
    loss: Callable[[nn.Module], torch.Tensor],
    stop_loss: Callable[[nn.Module], torch.Tensor] | None = None,
    steps: int = 2000,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    patience: int = 200,
    eval_every: int = 10,
    max_epochs: int | None = None,
) -> float:
    """Train only the model parameters (hyperparameters frozen) with Adam; early stopping on ``stop_loss``.

    Used for the refit on T ∪ V (Algorithm 1, line 10) and for the baselines. Restores the best model parameters
    by ``stop_loss`` and returns that loss (or the final training loss when ``stop_loss`` is None).
    """
    result = Trainer(model, objective=loss, params=model_parameters(model), lr=lr, weight_decay=weight_decay,
                     epochs=steps, validate=stop_loss, validate_every=eval_every, patience=patience,
                     desc="refit", max_epochs=max_epochs).fit()
    if result.best_validation is not None:
        return result.best_validation
    with torch.no_grad():
        return float(loss(model))
