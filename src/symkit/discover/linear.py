"""Sharing discovery for linear maps ``y = W x`` with a closed-form lower level (§5.3, App. F.3).

Lower level: ordinary least squares on T gives ``W*``; for a soft A the shared solution is approximated by the cluster
average ``vec(W(A)) = A Abar^T vec(W*)`` (exact for hard A when the inputs are white, and the form whose gradient
carries signal; the paper's printed ``A^+ vec(W*)`` is A-independent for invertible soft A). Upper level: validation
MSE plus penalties, by Adam through this map. After hardening, :func:`tied_least_squares` refits the tied weights
exactly (least squares in the free parameters psi) on T ∪ V.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from symkit.actions.partition import canonical_labels
from symkit.discover.bilevel import relaxed_closed_form

__all__ = ["ols", "tied_least_squares", "LinearSharingResult", "discover_linear_sharing"]


def _check_xy(X: np.ndarray, Y: np.ndarray, name: str) -> None:
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"{name}: expected X (N, K_in) and Y (N, K_out) with equal N, got {X.shape} and {Y.shape}")


def ols(X: Any, Y: Any) -> np.ndarray:
    """``W* = argmin ||X W^T - Y||^2`` (Eq. 65), shape (K_out, K_in)."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    _check_xy(X, Y, "ols")
    return np.linalg.lstsq(X, Y, rcond=None)[0].T


def tied_least_squares(X: Any, Y: Any, labels: Any) -> np.ndarray:
    """Least squares with ``W.flatten() = psi[labels]`` (row-major over K_out x K_in); returns W (K_out, K_in).

    ``y_m = sum_c psi_c sum_{n : labels[m, n] = c} x_n``, so psi solves an ordinary least-squares problem in the
    per-cluster summed features.
    """
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    _check_xy(X, Y, "tied_least_squares")
    k_out, k_in = Y.shape[1], X.shape[1]
    lab = canonical_labels(labels)
    if lab.size != k_out * k_in:
        raise ValueError(f"labels cover {lab.size} weights, expected K_out*K_in = {k_out * k_in}")
    c = int(lab.max()) + 1
    onehot = np.zeros((k_out * k_in, c))
    onehot[np.arange(lab.size), lab] = 1.0
    M = onehot.reshape(k_out, k_in, c)  # M[m, n, c] = 1 iff W[m, n] is psi_c
    Phi = np.einsum("Nn,mnc->Nmc", X, M).reshape(-1, c)
    psi = np.linalg.lstsq(Phi, Y.reshape(-1), rcond=None)[0]
    return psi[lab].reshape(k_out, k_in)


@dataclass
class LinearSharingResult:
    """Discovered labels per problem (B, K_out K_in), the refit weights (B, K_out, K_in), final objectives."""

    labels: np.ndarray
    W: np.ndarray
    objective: np.ndarray


def discover_linear_sharing(
    X_train: Any,
    Y_train: Any,
    X_val: Any,
    Y_val: Any,
    entropy_weight: float = 1e-2,
    rank_weight: float = 1e-2,
    lr: float = 0.1,
    iters: int = 1000,
    restarts: int = 3,
    optimizer: str = "adam",
    weight_decay: float = 0.0,
    seed: int = 0,
    refit: bool = True,
    max_epochs: int | None = None,
) -> LinearSharingResult:
    """Algorithm 1 for linear maps, batched over B independent problems (arrays with a leading B axis, or single).

    Returns hardened labels over the flattened (K_out x K_in) weight and, with ``refit``, the tied least-squares
    weights on T ∪ V (Algorithm 1, line 10). ``max_epochs`` cuts the search's optimiser steps (a smoke run).
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in (X_train, Y_train, X_val, Y_val)]
    single = arrays[0].ndim == 2
    if single:
        arrays = [a[None] for a in arrays]
    XT, YT, XV, YV = arrays
    if XT.ndim != 3 or any(a.ndim != 3 for a in arrays):
        raise ValueError(f"expected (B, N, K) arrays or single (N, K) arrays, got shapes {[a.shape for a in arrays]}")
    b, _, k_in = XT.shape
    k_out = YT.shape[2]
    w_star = np.stack([ols(XT[i], YT[i]).reshape(-1) for i in range(b)])
    XVt, YVt = torch.as_tensor(XV), torch.as_tensor(YV)

    def val_loss(theta: torch.Tensor) -> torch.Tensor:
        W = theta.reshape(*theta.shape[:2], k_out, k_in)
        pred = torch.einsum("bni,rboi->rbno", XVt, W)
        return ((pred - YVt[None]) ** 2).mean((-2, -1))

    res = relaxed_closed_form(
        torch.as_tensor(w_star),
        val_loss,
        entropy_weight=entropy_weight,
        rank_weight=rank_weight,
        optimizer=optimizer,
        lr=lr,
        weight_decay=weight_decay,
        iters=iters,
        restarts=restarts,
        seed=seed,
        max_epochs=max_epochs,
    )
    labels = np.stack([canonical_labels(lab) for lab in res.labels])
    if refit:
        W = np.stack(
            [
                tied_least_squares(np.concatenate([XT[i], XV[i]]), np.concatenate([YT[i], YV[i]]), labels[i])
                for i in range(b)
            ]
        )
    else:
        W = w_star.reshape(b, k_out, k_in)
    return LinearSharingResult(labels=labels, W=W, objective=res.objective)
