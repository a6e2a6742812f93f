"""Sampled equivariance errors of linear maps and vectors (the relative error of eq. 3.3).

Two measures live here:

* :func:`relative_error` ``rms(a - b) / (rms(a) + rms(b))`` (0 when both are exactly zero): what
  :func:`equivariance_error` and :mod:`symkit.testing` report. It is relative at every output scale, so a small
  output cannot hide a non-equivariant part.
* :func:`scale_adjusted_error` the reference tests' measure (notes §4.2), with an absolute floor ``rms(g - I)``;
  kept for the audits of :mod:`symkit.measure`, which report it beside the relative error.

Both return ``nan`` when ``a`` or ``b`` holds a non-finite value, and the maxima over samples propagate ``nan``
(``max(err, nan)`` would keep ``err``): a check that compares ``nan <= tol`` fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symkit.reps.core import Rep

__all__ = ["equivariance_error", "relative_error", "scale_adjusted_error", "element_scale", "nanmax"]


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.abs(x) ** 2))) if np.size(x) else 0.0


def nanmax(values: Any) -> float:
    """The largest value, or ``nan`` if any value is ``nan`` (Python's ``max`` silently drops it)."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return 0.0
    return float("nan") if np.isnan(arr).any() else float(arr.max())


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """``rms(a - b) / (rms(a) + rms(b))``, 0 when both are exactly zero, ``nan`` when either is not finite."""
    a, b = np.asarray(a), np.asarray(b)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("nan")
    scale = _rms(a) + _rms(b)
    return _rms(a - b) / scale if scale > 0 else 0.0


def scale_adjusted_error(a: np.ndarray, b: np.ndarray, g: np.ndarray | None = None) -> float:
    """rms(a - b) / max(rms(a) + rms(b), rms(g - I), 1e-12): relative when a, b are large, absolute when they are
    small compared with how far g is from the identity. ``nan`` when a or b is not finite."""
    a, b = np.asarray(a), np.asarray(b)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("nan")
    scale = _rms(a) + _rms(b)
    if g is not None:
        g = np.asarray(g)
        scale = max(scale, _rms(g - np.eye(g.shape[-1])))
    return _rms(a - b) / max(scale, 1e-12)


def element_scale(rho_in_g: np.ndarray, rho_out_g: np.ndarray) -> float:
    """``k(g) = sqrt(||rho_in(g)||_2 ||rho_out(g)||_2)`` (at least 1): how much rounding a group element amplifies.

    1 for orthogonal and permutation reps; it grows like ``|g|^p`` on rank-p tensors of non-compact groups
    (Sp(n), Lorentz boosts, SL(n)), where the rounding of ``rho_in(g) x`` alone is ``eps * |rho_in(g)| |x|``."""
    n_in = float(np.linalg.norm(np.asarray(rho_in_g), 2)) if np.size(rho_in_g) else 1.0
    n_out = float(np.linalg.norm(np.asarray(rho_out_g), 2)) if np.size(rho_out_g) else 1.0
    k = float(np.sqrt(n_in * n_out))
    return max(1.0, k) if np.isfinite(k) else float("inf")


def _check_weight(W: Any, rep_in: Rep, rep_out: Rep, who: str) -> np.ndarray:
    if not isinstance(rep_in, Rep) or not isinstance(rep_out, Rep):
        raise TypeError(f"{who}: rep_in and rep_out must be Reps, got {rep_in!r}, {rep_out!r}")
    W = np.asarray(W)
    if W.ndim == 1 and W.size == rep_out.size * rep_in.size:
        W = W.reshape(rep_out.size, rep_in.size)
    if W.shape != (rep_out.size, rep_in.size):
        raise ValueError(
            f"{who}: W has shape {W.shape}, expected ({rep_out.size}, {rep_in.size}) for {rep_in!r} -> {rep_out!r}"
        )
    return W


def weight_errors(
    W: Any, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, seed: int = 0, elements: Any = None
) -> list[tuple[float, float]]:
    """Per sampled g: (relative error of rho_out(g) W against W rho_in(g), the element scale k(g))."""
    W = _check_weight(W, rep_in, rep_out, "equivariance_error")
    if not np.all(np.isfinite(W)):
        return [(float("nan"), 1.0)]
    if G is None:
        G = (rep_in >> rep_out).G
    if G is None and elements is None:
        return []  # maps between reps of no group (Scalar -> Scalar) are all equivariant
    gs = np.asarray(G.samples(n, seed=seed)) if elements is None else np.asarray(elements)
    out = []
    for g in gs:
        Rin, Rout = rep_in.rho(g), rep_out.rho(g)
        out.append((relative_error(Rout @ W, W @ Rin), element_scale(Rin, Rout)))
    return out


def equivariance_error(
    W: Any, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, seed: int = 0, elements: Any = None
) -> float:
    """Largest relative error ``rms(rho_out(g) W - W rho_in(g)) / (rms(rho_out(g) W) + rms(W rho_in(g)))`` over n
    sampled g (eq. 2.2), ``nan`` if W or a product is not finite.

    W has shape (rep_out.size, rep_in.size); a vector of size rep_out.size * rep_in.size is reshaped. G defaults to
    the group of the hom-space rep_in >> rep_out; ``elements`` replaces the sampled elements.
    """
    return nanmax(e for e, _ in weight_errors(W, rep_in, rep_out, G=G, n=n, seed=seed, elements=elements))
