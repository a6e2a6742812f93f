"""Equivariance assertions for users' own models and weights.

The error of a sampled group element g is relative at every output scale,

    err(g) = rms(a - b) / (rms(a) + rms(b)),   a = f(rho_in(g) x),  b = rho_out(g) f(x)

(0 when both are exactly zero), and the check passes when, for every sampled g,

    err(g) <= tol * k(g),   k(g) = sqrt(||rho_in(g)||_2 ||rho_out(g)||_2)  (at least 1).

k(g) is how much the group element amplifies rounding: 1 for orthogonal and permutation groups, ``|g|^p`` on
rank-p tensors of Sp(n), SL(n) or a Lorentz boost. ``tol`` defaults to ``64 * eps`` of the output's dtype for
functions (7.6e-6 in float32, 1.4e-14 in float64) and to 1e-9 (float64) or ``64 * eps`` (float32) for weight
matrices. Measured on EMLPs of every built-in group (docs/core.md, "How equivariance is checked"), a true float32
model stays below ``13 * eps * k(g)`` and a 0.1% non-equivariant part is above ``175 * eps * k(g)``.
Non-finite outputs always fail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from symkit.reps.core import Rep
from symkit.reps.errors import element_scale, equivariance_error, nanmax, relative_error, weight_errors

__all__ = [
    "action_errors", "assert_equivariant", "assert_invariant_basis", "default_tolerance", "equivariance_error",
    "finite_difference_lie_derivative", "function_equivariance_error", "function_errors",
]

#: tolerance per unit of the element scale k(g), in units of the dtype's machine epsilon
EPS_FACTOR = 64


def default_tolerance(dtype: Any, weights: bool = False) -> float:
    """``64 * eps(dtype)``; weight matrices in float64 get 1e-9 (bases from the iterative solvers are that exact)."""
    if hasattr(dtype, "is_floating_point"):  # a torch dtype
        dtype = _np_dtype(dtype)
    eps = float(np.finfo(np.dtype(dtype)).eps)
    if weights and eps < 1e-15:
        return 1e-9
    return EPS_FACTOR * eps


def _np_dtype(torch_dtype: Any) -> np.dtype:
    import torch

    return torch.empty((), dtype=torch_dtype).numpy().dtype if torch_dtype != torch.bfloat16 else np.dtype(np.float32)


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _caller(f: Callable) -> tuple[Callable[[np.ndarray], np.ndarray], Any]:
    """A numpy-in, numpy-out view of f, and the dtype it computes in (a torch module gets tensors of its
    parameters' dtype and device)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return (lambda z: _to_numpy(f(z))), None
    if isinstance(f, torch.nn.Module):
        p = next(iter(f.parameters()), None)
        if p is None:
            p = next(iter(f.buffers()), None)
        dt = p.dtype if p is not None and p.is_floating_point() else torch.get_default_dtype()
        dev = p.device if p is not None else torch.device("cpu")
        if dev.type == "meta":
            raise ValueError("assert_equivariant: the module is on the meta device and computes no values")

        def call(z: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return _to_numpy(f(torch.as_tensor(z, dtype=dt, device=dev)))

        return call, dt
    return (lambda z: _to_numpy(f(z))), None


def function_errors(
    f: Callable, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, batch: int = 4, seed: int = 0,
    elements: Any = None,
) -> tuple[list[tuple[float, float]], np.dtype]:
    """Per sampled g: (err(g), k(g)) of f (see the module docstring), and the dtype of f's output."""
    if not isinstance(rep_in, Rep) or not isinstance(rep_out, Rep):
        raise TypeError(f"function_equivariance_error: rep_in and rep_out must be Reps, got {rep_in!r}, {rep_out!r}")
    G = G if G is not None else (rep_in >> rep_out).G
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, rep_in.size))
    call, _ = _caller(f)
    fx = call(x)
    if fx.shape != (batch, rep_out.size):
        raise ValueError(f"f returned shape {fx.shape}, expected ({batch}, {rep_out.size}) for rep_out={rep_out!r}")
    out_dtype = fx.dtype if np.issubdtype(fx.dtype, np.inexact) else np.dtype(np.float64)
    if not np.all(np.isfinite(fx)):
        return [(float("nan"), 1.0)], out_dtype
    if G is None and elements is None:
        return [], out_dtype
    gs = np.asarray(G.samples(n, seed=seed)) if elements is None else np.asarray(elements)
    errs = []
    for g in gs:
        Rin, Rout = rep_in.rho(g), rep_out.rho(g)
        a = call(x @ Rin.T)
        errs.append((relative_error(a, fx @ Rout.T), element_scale(Rin, Rout)))
    return errs, out_dtype


def function_equivariance_error(
    f: Callable, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, batch: int = 4, seed: int = 0,
    elements: Any = None,
) -> float:
    """Largest relative error of f(rho_in(g) x) against rho_out(g) f(x), over n sampled g (or the given
    ``elements``) and a batch of standard normal inputs x (shape (batch, rep_in.size)); ``nan`` if f returns a
    non-finite value. f may take numpy arrays, or be a torch module (it gets tensors of its parameters' dtype and
    device)."""
    errs, _ = function_errors(f, rep_in, rep_out, G=G, n=n, batch=batch, seed=seed, elements=elements)
    return nanmax(e for e, _ in errs)


def _declared(f: Any, rep_in: Any, rep_out: Any) -> tuple[Any, Any]:
    """rep_in / rep_out given, or declared by the module (``rep_in``/``rep_out`` or ``action_in``/``action_out``)."""
    for a, b in (("rep_in", "rep_out"), ("action_in", "action_out")):
        if rep_in is None and rep_out is None and hasattr(f, a) and hasattr(f, b):
            return getattr(f, a), getattr(f, b)
    if rep_in is None:
        raise TypeError(
            f"assert_equivariant: {type(f).__name__} declares no rep_in/rep_out (or action_in/action_out); "
            "pass them"
        )
    return rep_in, rep_out


def action_errors(f: Callable, action_in: Any, action_out: Any, inputs: Any, n: int = 5,
                  seed: int = 0) -> tuple[list[float], Any]:
    """err(g) of ``f(act(x, g))`` against ``act(f(x), g)`` for a grid action (module docstring, ``k(g) = 1`` for
    permutations) over the action's generators and ``n`` sampled elements; ``action_out=None`` means invariant."""
    import torch

    from symkit.actions import PermAction, act

    if not isinstance(action_in, PermAction) or not (action_out is None or isinstance(action_out, PermAction)):
        raise TypeError(
            f"assert_equivariant: actions must be PermActions (or action_out=None for an invariant output), got "
            f"{type(action_in).__name__} and {type(action_out).__name__}"
        )
    if not isinstance(inputs, torch.Tensor):
        raise TypeError(
            f"assert_equivariant: an action needs inputs= (a tensor whose trailing axes have the grid shape "
            f"{action_in.shape}), got {type(inputs).__name__}"
        )
    held = [*f.parameters(), *f.buffers()] if isinstance(f, torch.nn.Module) else []
    if inputs.is_meta or any(t.is_meta for t in held):
        raise ValueError("assert_equivariant: the module or its inputs are on the meta device and compute no values")
    gen = torch.Generator().manual_seed(seed)
    elements = list(action_in.generators()) + [action_in.sample(gen) for _ in range(n)]
    with torch.no_grad():
        fx = f(inputs)
        errs = []
        for g in elements:
            a = f(act(action_in, inputs, g))
            b = fx if action_out is None or action_out.is_trivial else act(action_out, fx, g)
            errs.append(relative_error(_to_numpy(a), _to_numpy(b)))
    return errs, fx.dtype


def assert_equivariant(
    f_or_W: Any, rep_in: Any = None, rep_out: Any = None, G: Any = None, tol: float | None = None, n: int = 5,
    seed: int = 0, elements: Any = None, inputs: Any = None,
) -> float:
    """Assert that a weight matrix W (rep_out.size x rep_in.size) or a function f: rep_in -> rep_out is
    equivariant: ``err(g) <= tol * k(g)`` for every sampled g (module docstring). Returns the largest err(g).

    ``rep_in``/``rep_out`` are core reps, or grid actions (:class:`~symkit.actions.PermAction`; then ``inputs``
    gives the tensor to transform, and ``rep_out=None`` asks for invariance). Left out, they are read from the
    module's ``rep_in``/``rep_out`` (EMLP layers) or ``action_in``/``action_out`` (projected networks).
    Raises AssertionError naming the error, the tolerance and the element scale otherwise, and for any non-finite
    value. ``tol`` defaults to :func:`default_tolerance` of the output's (or W's) dtype."""
    from symkit.actions import PermAction

    rep_in, rep_out = _declared(f_or_W, rep_in, rep_out)
    if isinstance(rep_in, PermAction):
        errs_a, dtype = action_errors(f_or_W, rep_in, rep_out, inputs, n=n, seed=seed)
        tol = default_tolerance(dtype) if tol is None else tol
        for err in errs_a:
            if not np.isfinite(err):
                raise AssertionError(f"not equivariant for {rep_in!r} -> {rep_out!r}: non-finite values (nan or inf)")
            if not err <= tol:
                raise AssertionError(f"not equivariant for {rep_in!r} -> {rep_out!r}: relative error {err:.3g} > "
                                     f"tol {tol:.3g}")
        return nanmax(errs_a)
    if callable(f_or_W) and not isinstance(f_or_W, np.ndarray) and not hasattr(f_or_W, "detach"):
        errs, dtype = function_errors(f_or_W, rep_in, rep_out, G=G, n=n, seed=seed, elements=elements)
        tol = default_tolerance(dtype) if tol is None else tol
    else:
        W = _to_numpy(f_or_W)
        errs = weight_errors(W, rep_in, rep_out, G=G, n=n, seed=seed, elements=elements)
        dtype = W.dtype if np.issubdtype(W.dtype, np.inexact) else np.dtype(np.float64)
        tol = default_tolerance(dtype, weights=True) if tol is None else tol
    for err, k in errs:
        if not np.isfinite(err):
            raise AssertionError(f"not equivariant for {rep_in!r} -> {rep_out!r}: non-finite values (nan or inf)")
        if not err <= tol * k:
            raise AssertionError(
                f"not equivariant for {rep_in!r} -> {rep_out!r}: relative error {err:.3g} > tol {tol:.3g} x "
                f"element scale {k:.3g}"
            )
    return nanmax(e for e, _ in errs)


def assert_invariant_basis(Q: np.ndarray, rep: Rep, tol: float = 1e-9, n: int = 5, seed: int = 0) -> float:
    """Assert Q is a finite orthonormal basis of the invariants of ``rep``: ``rep.rank()`` columns, each fixed by
    rho(g) and killed by d rho(A) for sampled g, A.

    The error is rms(rho(g) Q - Q) / (rms(Q) * max(1, largest column norm of rho(g))): rounding errors in Q are
    amplified by |rho(g)|, which for non-compact groups (Lorentz, Sp, SL) grows like |g|^k on rank-k tensors."""
    Q = np.asarray(Q)
    if Q.ndim != 2 or Q.shape[0] != rep.size:
        raise ValueError(f"assert_invariant_basis: Q has shape {Q.shape}, expected ({rep.size}, r)")
    if not np.all(np.isfinite(Q)):
        raise AssertionError(f"basis of {rep!r} has non-finite entries (nan or inf)")
    r = rep.rank()
    if Q.shape[1] != r:
        raise AssertionError(f"basis of {rep!r} has {Q.shape[1]} columns, but the rank is {r}")
    orth = float(np.abs(Q.conj().T @ Q - np.eye(Q.shape[1])).max()) if Q.shape[1] else 0.0
    if not orth <= tol * max(1, Q.shape[1]):
        raise AssertionError(f"basis of {rep!r} is not orthonormal: max |Q^H Q - I| = {orth:.3g}")
    G = rep.G
    errs = [0.0]
    if G is not None and Q.shape[1]:
        rq = float(np.sqrt(np.mean(np.abs(Q) ** 2)))
        gs = G.samples(n, seed=seed)
        As = G.lie_algebra_samples(n, seed=seed) if len(G.lie_algebra) else None
        for i in range(n):
            for M, target in [(rep.rho(gs[i]), Q)] + ([(rep.drho(As[i]), 0 * Q)] if As is not None else []):
                scale = max(1.0, float(np.linalg.norm(M, axis=0).max()))
                errs.append(float(np.sqrt(np.mean(np.abs(M @ Q - target) ** 2))) / (rq * scale))
    err = nanmax(errs)
    if not err <= tol:
        raise AssertionError(f"basis of {rep!r} is not invariant: scale-adjusted error {err:.3g} > {tol:g}")
    return err


def finite_difference_lie_derivative(
    f: Callable, x: Any, direction: str = "x", h: float = 1e-7, padding: str = "reflection"
) -> Any:
    """An independent reference for the translation Lie derivative of :mod:`symkit.measure`: a one-sided finite
    difference with Richardson extrapolation, ``2 D(h/2) - D(h)``, ``D(h) = (f(S_h x) - f(x)) / h``, where ``S_h``
    shifts the image by ``h`` normalized units (``h (max(H, W) - 1) / 2`` pixels) with ``torch``'s own
    ``F.grid_sample`` (bilinear, ``align_corners=True``), sampling the input at ``u + h e`` as symkit's flows do.

    One-sided, because at ``t = 0`` every sample sits on a pixel centre, where bilinear interpolation has a kink:
    symkit defines the derivative as the limit from ``t > 0`` (docs/measure.md). ``S_h x`` is exactly linear in ``h``
    while the shift is under a pixel, so for a smooth ``f`` the error is ``O(h^2)`` plus ``eps |f| / h`` rounding.
    A piecewise-linear network (ReLU, max pool) adds an ``O(h)`` error from the units whose kink lies within the
    step, until ``h`` is below the distance to the nearest kink: measured on a ReLU CNN (32x32, float64), 1e-2
    relative at ``h = 1e-3``, 6e-4 at ``1e-5``, 2e-8 at ``1e-7`` (the default, for float64). In float32 rounding
    needs ``h >= 1e-3``, so agreement is at the 1e-2 level there. ``f`` maps ``(N, C, H, W)`` to outputs that do not
    move with the image (class scores)."""
    import torch
    import torch.nn.functional as F

    if direction not in ("x", "y"):
        raise ValueError(f"direction must be 'x' or 'y', got {direction!r}")
    if not isinstance(x, torch.Tensor) or x.ndim != 4 or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor of shape (N, C, H, W)")
    if not 0 < h * (max(x.shape[-2:]) - 1) / 2 < 1:
        raise ValueError(f"h = {h} must shift the image by less than one pixel")
    n, _, H, W = x.shape
    ys = torch.linspace(-1, 1, H, dtype=x.dtype, device=x.device)
    xs = torch.linspace(-1, 1, W, dtype=x.dtype, device=x.device)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    pixels_per_unit = (max(H, W) - 1) / 2

    def shifted(t: float) -> Any:
        grid = torch.stack([gx, gy], dim=-1).expand(n, H, W, 2).clone()
        axis, size = (0, W) if direction == "x" else (1, H)
        grid[..., axis] += t * pixels_per_unit / ((size - 1) / 2)
        return F.grid_sample(x, grid, mode="bilinear", padding_mode=padding, align_corners=True)

    with torch.no_grad():
        f0 = f(x)
        d = lambda t: (f(shifted(t)) - f0) / t  # noqa: E731
        return 2 * d(h / 2) - d(h)
