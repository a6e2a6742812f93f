"""Equivariance assertions for users' own models and weights.

The error measure is the scale-adjusted relative error of the reference tests (notes §4.2):

    err(a, b; g) = rms(a - b) / max(rms(a) + rms(b), rms(g - I))

computed for rho_out(g) f(x) against f(rho_in(g) x), maximised over sampled g (and inputs). It is relative for
large outputs and absolute (against how far g moves things) for tiny ones. Default tolerances: 1e-9 for float64
arrays (exact constructions), 1e-4 for float32 networks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from symkit.reps.core import Rep
from symkit.reps.errors import equivariance_error, scale_adjusted_error

__all__ = ["assert_equivariant", "assert_invariant_basis", "equivariance_error", "function_equivariance_error"]


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def function_equivariance_error(
    f: Callable, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, batch: int = 4, seed: int = 0
) -> float:
    """Largest scale-adjusted error of f(rho_in(g) x) against rho_out(g) f(x), over n sampled g and a batch of
    standard normal inputs x (shape (batch, rep_in.size)). f may take numpy arrays or torch tensors; a torch
    module receives float32 tensors of its parameters' dtype."""
    if not isinstance(rep_in, Rep) or not isinstance(rep_out, Rep):
        raise TypeError(f"function_equivariance_error: rep_in and rep_out must be Reps, got {rep_in!r}, {rep_out!r}")
    G = G if G is not None else (rep_in >> rep_out).G
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, rep_in.size))
    call = f
    try:
        import torch

        if isinstance(f, torch.nn.Module):
            p = next(iter(f.parameters()), None)
            dt = p.dtype if p is not None else torch.float32

            def call(z: np.ndarray) -> Any:
                with torch.no_grad():
                    return f(torch.as_tensor(z, dtype=dt))
    except ImportError:  # pragma: no cover
        pass
    if G is None:
        return 0.0
    gs = G.samples(n, seed=seed)
    fx = _to_numpy(call(x))
    if fx.shape != (batch, rep_out.size):
        raise ValueError(f"f returned shape {fx.shape}, expected ({batch}, {rep_out.size}) for rep_out={rep_out!r}")
    err = 0.0
    for i in range(n):
        g = gs[i]
        Rin = rep_in.rho(g)
        Rout = rep_out.rho(g)
        a = _to_numpy(call(x @ Rin.T))
        b = fx @ Rout.T
        err = max(err, scale_adjusted_error(a, b, np.asarray(g)))
    return err


def assert_equivariant(
    f_or_W: Any, rep_in: Rep, rep_out: Rep, G: Any = None, tol: float | None = None, n: int = 5, seed: int = 0
) -> float:
    """Assert that a weight matrix W (rep_out.size x rep_in.size) or a function f: rep_in -> rep_out is
    equivariant; returns the measured error. Raises AssertionError naming the error and tolerance otherwise.

    `tol` defaults to 1e-9 for a float64 array and 1e-4 for functions (float32 networks)."""
    if callable(f_or_W) and not isinstance(f_or_W, np.ndarray):
        err = function_equivariance_error(f_or_W, rep_in, rep_out, G=G, n=n, seed=seed)
        tol = 1e-4 if tol is None else tol
    else:
        W = _to_numpy(f_or_W)
        err = equivariance_error(W, rep_in, rep_out, G=G, n=n, seed=seed)
        tol = (1e-9 if W.dtype in (np.float64, np.complex128) else 1e-4) if tol is None else tol
    if not err <= tol:
        raise AssertionError(f"not equivariant for {rep_in!r} -> {rep_out!r}: scale-adjusted error {err:.3g} > {tol:g}")
    return err


def assert_invariant_basis(Q: np.ndarray, rep: Rep, tol: float = 1e-9, n: int = 5, seed: int = 0) -> float:
    """Assert Q is orthonormal and every column is fixed by rho(g) and killed by d rho(A) for sampled g, A.

    The error is rms(rho(g) Q - Q) / (rms(Q) * max(1, largest column norm of rho(g))): rounding errors in Q are
    amplified by |rho(g)|, which for non-compact groups (Lorentz, Sp, SL) grows like |g|^k on rank-k tensors."""
    Q = np.asarray(Q)
    if Q.ndim != 2 or Q.shape[0] != rep.size:
        raise ValueError(f"assert_invariant_basis: Q has shape {Q.shape}, expected ({rep.size}, r)")
    orth = np.abs(Q.conj().T @ Q - np.eye(Q.shape[1])).max() if Q.shape[1] else 0.0
    if orth > tol * max(1, Q.shape[1]):
        raise AssertionError(f"basis of {rep!r} is not orthonormal: max |Q^H Q - I| = {orth:.3g}")
    G = rep.G
    err = 0.0
    if G is not None and Q.shape[1]:
        rq = float(np.sqrt(np.mean(np.abs(Q) ** 2)))
        gs = G.samples(n, seed=seed)
        As = G.lie_algebra_samples(n, seed=seed) if len(G.lie_algebra) else None
        for i in range(n):
            for M, target in [(rep.rho(gs[i]), Q)] + ([(rep.drho(As[i]), 0 * Q)] if As is not None else []):
                scale = max(1.0, float(np.linalg.norm(M, axis=0).max()))
                e = float(np.sqrt(np.mean(np.abs(M @ Q - target) ** 2))) / (rq * scale)
                err = max(err, e)
    if not err <= tol:
        raise AssertionError(f"basis of {rep!r} is not invariant: scale-adjusted error {err:.3g} > {tol:g}")
    return err
