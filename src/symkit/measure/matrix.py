"""Equivariance of any torch model between matrix-group representations (thesis Ch. 4 Sec. 4.4 with Ch. 2 reps).

For a model ``f: V_in -> V_out`` with representations ``rho_in``, ``rho_out`` of a group ``G`` (from
:mod:`symkit.reps`) and a Lie algebra element ``A``,

    L_A f(x) = d/dt rho_out(e^{tA})^{-1} f(rho_in(e^{tA}) x) |_{t=0} = J_f(x) drho_in(A) x - drho_out(A) f(x)

(Eq. 4.3 with ``rho(exp tA) = exp(t drho(A))``). For a linear map ``f(x) = W x`` this is
``(W drho_in(A) - drho_out(A) W) x`` (notes §6 item 8); it vanishes for every generator of a connected group exactly
when ``f`` is equivariant. Discrete generators and sampled group elements are checked with the finite error
``||f(rho_in(g) x) - rho_out(g) f(x)||`` (the core's scale-adjusted error, and RelErr of Eq. 3.3).

Representations come from the arguments or from the model's ``rep_in`` / ``rep_out`` attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
from torch import Tensor

from symkit.nn import parameter_like
from symkit.reps import Rep
from symkit.reps import equivariance_error as matrix_equivariance_error
from symkit.reps.errors import scale_adjusted_error


def _reps(model: Any, rep_in: Rep | None, rep_out: Rep | None) -> tuple[Rep, Rep]:
    rep_in = rep_in if rep_in is not None else getattr(model, "rep_in", None)
    rep_out = rep_out if rep_out is not None else getattr(model, "rep_out", None)
    for label, rep in (("rep_in", rep_in), ("rep_out", rep_out)):
        if not isinstance(rep, Rep):
            raise TypeError(
                f"{label} must be a symkit Rep, given as an argument or as {type(model).__name__}.{label}; got {rep!r}"
            )
    return rep_in, rep_out


def _group(rep_in: Rep, rep_out: Rep, G: Any) -> Any:
    if G is not None:
        return G
    G = (rep_in >> rep_out).G
    if G is None:
        raise ValueError(f"cannot tell the group of {rep_in!r} -> {rep_out!r}; pass G=")
    return G


def _torch(a: Any, like: Tensor) -> Tensor:
    arr = np.asarray(a)
    if np.iscomplexobj(arr):
        if np.abs(arr.imag).max(initial=0.0) > 0:
            raise ValueError("complex representations are not supported by the torch measurements")
        arr = arr.real
    return torch.as_tensor(arr, dtype=like.dtype, device=like.device)


def _inputs(x: Tensor | None, rep_in: Rep, dtype: torch.dtype, batch: int, seed: int,
            device: torch.device | str | None = None) -> Tensor:
    if x is None:  # drawn on the CPU with a seeded generator, then moved: the same inputs on every device
        g = torch.Generator().manual_seed(seed)
        return torch.randn(batch, rep_in.size, generator=g, dtype=dtype).to(device)
    if not isinstance(x, Tensor) or x.ndim != 2 or x.shape[1] != rep_in.size:
        raise ValueError(f"x must be a (B, {rep_in.size}) tensor for rep_in={rep_in!r}, got {getattr(x, 'shape', x)}")
    return x


def _placement(model: Any) -> tuple[torch.device | None, torch.dtype]:
    """Where a model's drawn inputs go: a module's parameters' device and dtype (:func:`symkit.nn.parameter_like`);
    for a plain callable, or a module with no floating tensors, the CPU in float64 (exactness)."""
    if isinstance(model, torch.nn.Module) and any(t.is_floating_point() for t in (*model.parameters(),
                                                                                 *model.buffers())):
        return parameter_like(model)
    return None, torch.float64


def linear_lie_derivative(W: Tensor | np.ndarray, rep_in: Rep, rep_out: Rep, A: Any) -> np.ndarray:
    """``L_A(W) = W drho_in(A) - drho_out(A) W`` for a matrix ``W`` (rep_out.size x rep_in.size), float64 numpy."""
    W = W.detach().cpu().numpy() if isinstance(W, Tensor) else np.asarray(W)
    if W.shape != (rep_out.size, rep_in.size):
        raise ValueError(
            f"W has shape {W.shape}, expected ({rep_out.size}, {rep_in.size}) for {rep_in!r} -> {rep_out!r}"
        )
    return W @ np.asarray(rep_in.drho(A)) - np.asarray(rep_out.drho(A)) @ W


def rep_lie_derivative(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    A: Any,
    rep_in: Rep | None = None,
    rep_out: Rep | None = None,
) -> Tensor:
    """``L_A f(x) = J_f(x) drho_in(A) x - drho_out(A) f(x)``, shape (B, rep_out.size); one forward-mode pass."""
    rep_in, rep_out = _reps(model, rep_in, rep_out)
    if x is None:
        raise ValueError("rep_lie_derivative needs inputs x of shape (B, rep_in.size)")
    x = _inputs(x, rep_in, x.dtype, 0, 0)
    din = _torch(rep_in.drho(A), x)
    dout = _torch(rep_out.drho(A), x)
    with fwAD.dual_level():
        y = model(fwAD.make_dual(x, x @ din.T))
        if not isinstance(y, Tensor):
            raise TypeError(f"model {type(model).__name__} must return a tensor, got {type(y).__name__}")
        primal, tangent = fwAD.unpack_dual(y)
    if primal.ndim != 2 or primal.shape[1] != rep_out.size:
        raise ValueError(f"model returned shape {tuple(primal.shape)}, expected (B, {rep_out.size}) for {rep_out!r}")
    tangent = torch.zeros_like(primal) if tangent is None else tangent
    return tangent - primal @ dout.T


def generator_lie_derivatives(
    model: Callable[[Tensor], Tensor],
    x: Tensor | None = None,
    rep_in: Rep | None = None,
    rep_out: Rep | None = None,
    G: Any = None,
    *,
    batch: int = 16,
    seed: int = 0,
) -> Tensor:
    """Lie derivatives along every Lie algebra basis element of ``G``: (D, B, rep_out.size); D = 0 for finite groups.

    ``x`` defaults to ``batch`` standard normal inputs drawn with ``seed``.
    """
    rep_in, rep_out = _reps(model, rep_in, rep_out)
    G = _group(rep_in, rep_out, G)
    device, dtype = _placement(model)
    x = _inputs(x, rep_in, dtype, batch, seed, device)
    algebra = np.asarray(G.lie_algebra)
    out = [rep_lie_derivative(model, x, A, rep_in, rep_out) for A in algebra]
    if not out:
        return x.new_zeros((0, x.shape[0], rep_out.size))
    return torch.stack(out)


@dataclass
class EquivarianceReport:
    """Audit of a model between two reps.

    ``lie_lee[i]``: mean ``||L_{A_i} f(x)||^2 / dim`` over the inputs for Lie algebra basis element ``i``;
    ``discrete_errors[k]`` / ``sample_errors[k]``: scale-adjusted error (the core's measure) for discrete generator
    ``k`` / sampled element ``k``; ``relative_errors``: RelErr (Eq. 3.3) per sampled element, averaged over inputs.
    """

    lie_lee: list[float]
    discrete_errors: list[float]
    sample_errors: list[float]
    relative_errors: list[float]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def max_error(self) -> float:
        """Largest finite-element error (discrete generators and samples)."""
        return max([*self.discrete_errors, *self.sample_errors], default=0.0)

    @property
    def max_lie(self) -> float:
        return max(self.lie_lee, default=0.0)


def _call(model: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    with torch.no_grad():
        y = model(x)
    if not isinstance(y, Tensor):
        raise TypeError(f"model {type(model).__name__} must return a tensor, got {type(y).__name__}")
    return y


def sampled_equivariance_error(
    model: Callable[[Tensor], Tensor] | Tensor | np.ndarray,
    x: Tensor | None = None,
    rep_in: Rep | None = None,
    rep_out: Rep | None = None,
    G: Any = None,
    *,
    n_samples: int = 8,
    batch: int = 16,
    seed: int = 0,
) -> EquivarianceReport:
    """Audit ``model`` (a callable, or a weight matrix) between ``rep_in`` and ``rep_out``.

    Checks each discrete generator of ``G`` and ``n_samples`` elements from ``G.samples(n, seed)`` with the finite
    error, and each Lie algebra basis element with the Lie derivative. A weight matrix is handed to the core's
    :func:`symkit.reps.equivariance_error` (reported as ``extra["matrix_error"]``) and its Lie derivatives use the
    closed form ``W drho_in(A) - drho_out(A) W``.
    """
    if isinstance(model, (np.ndarray, Tensor)):
        if rep_in is None or rep_out is None:
            raise TypeError("a weight matrix needs rep_in and rep_out")
        W = model.detach().cpu().numpy() if isinstance(model, Tensor) else np.asarray(model)
        G = _group(rep_in, rep_out, G)
        err = matrix_equivariance_error(W, rep_in, rep_out, G=G, n=n_samples, seed=seed)
        lie = [float(np.mean(linear_lie_derivative(W, rep_in, rep_out, A) ** 2)) for A in np.asarray(G.lie_algebra)]
        return EquivarianceReport(lie, [], [err], [], extra={"matrix_error": err})
    rep_in, rep_out = _reps(model, rep_in, rep_out)
    G = _group(rep_in, rep_out, G)
    device, dtype = _placement(model)
    x = _inputs(x, rep_in, dtype, batch, seed, device)
    fx = _call(model, x)
    if fx.ndim != 2 or fx.shape[1] != rep_out.size:
        raise ValueError(f"model returned shape {tuple(fx.shape)}, expected (B, {rep_out.size}) for {rep_out!r}")

    def errors(g: np.ndarray) -> tuple[float, float]:
        a = _call(model, x @ _torch(rep_in.rho(g), x).T)
        b = fx @ _torch(rep_out.rho(g), x).T
        sae = scale_adjusted_error(a.double().cpu().numpy(), b.double().cpu().numpy(), np.asarray(g))
        num = (a - b).norm(dim=1)
        den = a.norm(dim=1) + b.norm(dim=1)
        rel = torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(num))
        return sae, float(rel.mean())

    discrete = [errors(np.asarray(h))[0] for h in np.asarray(G.discrete_generators)]
    sampled = [errors(np.asarray(g)) for g in np.asarray(G.samples(n_samples, seed=seed))]
    with torch.no_grad():
        L = generator_lie_derivatives(model, x, rep_in, rep_out, G)
    lie = [float(v) for v in L.pow(2).mean(dim=(1, 2))] if L.shape[0] else []
    return EquivarianceReport(lie, discrete, [s for s, _ in sampled], [r for _, r in sampled])
