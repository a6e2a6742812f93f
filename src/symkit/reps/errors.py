"""Sampled equivariance errors of linear maps and vectors (the scale-aware relative error of eq. 3.3)."""

from __future__ import annotations

from typing import Any

import numpy as np

from symkit.reps.core import Rep

__all__ = ["equivariance_error", "scale_adjusted_error"]


def scale_adjusted_error(a: np.ndarray, b: np.ndarray, g: np.ndarray | None = None) -> float:
    """rms(a - b) / max(rms(a) + rms(b), rms(g - I), 1e-12): relative when a, b are large, absolute when they are
    small compared with how far g is from the identity (so a near-identity g cannot hide an error)."""
    a = np.asarray(a)
    b = np.asarray(b)
    rms = lambda x: float(np.sqrt(np.mean(np.abs(x) ** 2))) if np.size(x) else 0.0  # noqa: E731
    scale = rms(a) + rms(b)
    if g is not None:
        g = np.asarray(g)
        scale = max(scale, rms(g - np.eye(g.shape[-1])))
    return rms(a - b) / max(scale, 1e-12)


def equivariance_error(W: Any, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, seed: int = 0) -> float:
    """Largest scale-adjusted error of rho_out(g) W = W rho_in(g) over n sampled g (eq. 2.2).

    W has shape (rep_out.size, rep_in.size); a vector of size rep_out.size * rep_in.size is reshaped. G defaults to
    the group of the hom-space rep_in >> rep_out.
    """
    if not isinstance(rep_in, Rep) or not isinstance(rep_out, Rep):
        raise TypeError(f"equivariance_error: rep_in and rep_out must be Reps, got {rep_in!r}, {rep_out!r}")
    W = np.asarray(W)
    if W.ndim == 1:
        W = W.reshape(rep_out.size, rep_in.size)
    if W.shape != (rep_out.size, rep_in.size):
        raise ValueError(
            f"equivariance_error: W has shape {W.shape}, expected ({rep_out.size}, {rep_in.size}) for {rep_in!r} -> "
            f"{rep_out!r}"
        )
    if G is None:
        G = (rep_in >> rep_out).G
    if G is None:
        return 0.0
    gs = G.samples(n, seed=seed)
    err = 0.0
    for i in range(n):
        g = gs[i]
        a = rep_out.rho(g) @ W
        b = W @ rep_in.rho(g)
        err = max(err, scale_adjusted_error(a, b, np.asarray(g)))
    return err
