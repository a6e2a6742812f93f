"""Learned dynamics (thesis Sec. 2.7.2): Hamiltonian networks, Neural ODEs, rollouts through an ODE solver, and the
rollout error of Table 2.2.

- :class:`NeuralODE` ``(f)``: the vector field ``dz/dt = F(z)`` is a network (``F`` equivariant when ``f`` is, e.g. an
  :class:`~symkit.nn.EMLP` with ``rep_out = rep_in``).
- :class:`HamiltonianNet` ``(h)``: ``dz/dt = J grad H(z)`` with ``z = (q, p)``, ``J = [[0, I], [-I, 0]]`` and ``H`` a
  scalar network (an EMLP with ``rep_out = Scalar`` makes ``H`` invariant; Noether's theorem then conserves the
  quantities of its continuous symmetries, such as the angular momentum about z for SO(2)).
- :func:`rollout`: ``(z(t_1), ..., z(t_T)) = ODESolve(z0, F, (t_1, ..., t_T))`` by torchdiffeq's ``odeint``,
  differentiable (backpropagation through the solver's steps), so a model is trained on the MSE of its rollouts
  against observed trajectories, ``L = 1/T sum_t |z_t - z^_t|^2``.
- :func:`rollout_error`: ``exp(mean_t log max(|a_t - b_t| / (|a_t| + |b_t|), 1e-7))``, the geometric mean over time of
  the relative error on the full state (Table 2.2; the clamp at 1e-7 is the authors' code's, which keeps an exact
  ``t = 0`` from sending the logarithm to minus infinity).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from symkit._checks import check_number
from symkit.nn._equivariance import Equivariant

__all__ = ["HamiltonianNet", "NeuralODE", "rollout", "rollout_or_nan", "rollout_error", "symplectic_gradient",
           "ADAPTIVE_METHODS", "RolloutDiverged"]

#: torchdiffeq's solvers with step-size control (they take ``rtol``/``atol``); the others step on a fixed grid
ADAPTIVE_METHODS = ("dopri5", "dopri8", "bosh3", "fehlberg2", "adaptive_heun")
_FIXED_METHODS = ("euler", "midpoint", "heun2", "heun3", "rk4", "explicit_adams", "implicit_adams")


def symplectic_gradient(grad: torch.Tensor) -> torch.Tensor:
    """``J grad`` with ``J = [[0, I], [-I, 0]]``: ``(dH/dp, -dH/dq)`` for ``grad = (dH/dq, dH/dp)`` in the last
    dimension (even). A permutation and a sign, so no ``J`` is ever built."""
    n = grad.shape[-1]
    if n % 2:
        raise ValueError(f"a Hamiltonian state z = (q, p) has an even number of entries, got {n}")
    return torch.cat([grad[..., n // 2:], -grad[..., : n // 2]], dim=-1)


def _register_scale(module: nn.Module, input_scale: float | torch.Tensor | None, who: str) -> None:
    """Store ``input_scale`` (None, a number, or a 1-D tensor of per-entry scales) as the buffer ``input_scale``."""
    if input_scale is None:
        module.register_buffer("input_scale", None)
        return
    if isinstance(input_scale, (int, float)) and not isinstance(input_scale, bool):
        input_scale = torch.tensor(float(input_scale))
    if not isinstance(input_scale, torch.Tensor) or not input_scale.is_floating_point() or input_scale.ndim > 1:
        raise TypeError(f"{who}: input_scale must be None, a number or a 1-D floating tensor of per-entry scales, "
                        f"got {input_scale!r}")
    if input_scale.device.type != "meta" and not bool((input_scale > 0).all()):
        raise ValueError(f"{who}: input_scale must be > 0 everywhere, got {input_scale}")
    module.register_buffer("input_scale", input_scale.detach().clone())


def _scaled(module: nn.Module, z: torch.Tensor) -> torch.Tensor:
    s = module.input_scale
    if s is None:
        return z
    return z / (s if s.dtype == z.dtype and s.device == z.device else s.to(z))


class HamiltonianNet(Equivariant, nn.Module):
    """The Hamiltonian vector field ``F(z) = J grad H(z)`` of a scalar network ``h`` (Sec. 2.7.2, HNN).

    ``h`` maps states ``(batch, 2n)`` to energies ``(batch, 1)`` or ``(batch,)``, one per sample, computed
    independently per sample (no batch statistics), so the gradient of their sum is every sample's own gradient.
    ``grad H`` is taken by autograd; with gradients enabled (training) it is kept differentiable
    (``create_graph=True``), so a loss on rollouts trains ``h``; under ``torch.no_grad()`` it is computed all the same
    and returned without a graph. ``h`` may be any callable; a module is registered (its parameters are this
    module's). ``input_scale`` (a number or one positive number per state entry, kept as a buffer) divides the state
    before ``h``: ``H(z) = h(z / s)``; one scale per object (per 3-vector, say, as
    :func:`~symkit.nn.rep_statistics` gives) keeps every symmetry of ``h``.

    Symmetry: when ``h`` declares ``rep_in`` and a one-dimensional ``rep_out`` (an EMLP to ``Scalar``), the field
    declares ``rep_in -> rep_in``. It is equivariant when ``H`` is invariant and ``rho(g)`` is orthogonal and acts
    alike on ``q`` and ``p`` (``rho = 2 * rho_q``, which commutes with ``J``): ``F(rho z) = J rho^-T grad H(z) =
    rho F(z)``. That holds for ``4 * V(G)`` with ``G`` a subgroup of O(3) (the pendulum); :meth:`check_equivariance`
    tests it.

    >>> from symkit.groups import O2eR3
    >>> from symkit.nn import EMLP
    >>> from symkit.reps import V, Scalar
    >>> G = O2eR3()
    >>> field = HamiltonianNet(EMLP(4 * V(G), Scalar, G, ch=32, num_layers=2))
    """

    def __init__(self, h: Callable[[torch.Tensor], torch.Tensor],
                 input_scale: float | torch.Tensor | None = None) -> None:
        super().__init__()
        if not callable(h):
            raise TypeError(f"HamiltonianNet: h must be a callable (a torch module) from states to energies, got "
                            f"{type(h).__name__}")
        self.h = h
        _register_scale(self, input_scale, "HamiltonianNet")

    @property
    def rep_in(self) -> Any:
        rep_in, rep_out = getattr(self.h, "rep_in", None), getattr(self.h, "rep_out", None)
        if rep_in is None or rep_out is None or getattr(rep_out, "size", None) != 1:
            raise AttributeError("HamiltonianNet: h declares no rep_in with a scalar rep_out")
        return rep_in

    @property
    def rep_out(self) -> Any:
        return self.rep_in

    def hamiltonian(self, z: torch.Tensor) -> torch.Tensor:
        """``H(z)``, shape ``z.shape[:-1]``."""
        H = self.h(_scaled(self, z))
        if H.shape == z.shape[:-1]:
            return H
        if H.shape == (*z.shape[:-1], 1):
            return H[..., 0]
        raise ValueError(f"HamiltonianNet: h must give one energy per state, shape {tuple(z.shape[:-1])} or "
                         f"{(*z.shape[:-1], 1)}, got {tuple(H.shape)}")

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``dz/dt = J grad H(z)`` for states ``z`` ``(..., 2n)``."""
        if not isinstance(z, torch.Tensor) or not z.is_floating_point():
            raise TypeError(f"HamiltonianNet expects a floating torch.Tensor of states, got "
                            f"{getattr(z, 'dtype', type(z).__name__)}")
        create_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            zz = z if z.requires_grad else z.detach().requires_grad_(True)
            energy = self.hamiltonian(zz).sum()
            (grad,) = torch.autograd.grad(energy, zz, create_graph=create_graph)
        return symplectic_gradient(grad)

    def reset_parameters(self) -> None:
        """Re-initialise ``h``."""
        if hasattr(self.h, "reset_parameters"):
            self.h.reset_parameters()


class NeuralODE(Equivariant, nn.Module):
    """The vector field ``dz/dt = F(z)`` of a network ``f`` mapping states to their time derivatives (Sec. 2.7.2,
    Neural ODE). Declares ``f``'s ``rep_in``/``rep_out`` (equal sizes) when ``f`` does: an EMLP ``4 V -> 4 V``
    gives an equivariant field, though unlike :class:`HamiltonianNet` it conserves nothing. ``input_scale`` as for
    :class:`HamiltonianNet`: ``F(z) = f(z / s)``."""

    def __init__(self, f: Callable[[torch.Tensor], torch.Tensor],
                 input_scale: float | torch.Tensor | None = None) -> None:
        super().__init__()
        if not callable(f):
            raise TypeError(f"NeuralODE: f must be a callable (a torch module) from states to their derivatives, "
                            f"got {type(f).__name__}")
        self.f = f
        _register_scale(self, input_scale, "NeuralODE")

    @property
    def rep_in(self) -> Any:
        rep_in = getattr(self.f, "rep_in", None)
        if rep_in is None or getattr(self.f, "rep_out", None) is None:
            raise AttributeError("NeuralODE: f declares no rep_in/rep_out")
        return rep_in

    @property
    def rep_out(self) -> Any:
        rep_out = getattr(self.f, "rep_out", None)
        if rep_out is None:
            raise AttributeError("NeuralODE: f declares no rep_out")
        return rep_out

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``dz/dt = F(z)``, the shape of ``z``."""
        out = self.f(_scaled(self, z))
        if out.shape != z.shape:
            raise ValueError(f"NeuralODE: f must map states to derivatives of the same shape {tuple(z.shape)}, got "
                             f"{tuple(out.shape)}")
        return out

    def reset_parameters(self) -> None:
        """Re-initialise ``f``."""
        if hasattr(self.f, "reset_parameters"):
            self.f.reset_parameters()


class RolloutDiverged(RuntimeError):
    """An adaptive solver's step size underflowed: the vector field is stiff or its solution blows up there."""


def rollout(dynamics: Callable[[torch.Tensor], torch.Tensor], z0: torch.Tensor, times: torch.Tensor, *,
            rtol: float = 1e-4, atol: float = 1e-6, method: str = "dopri5",
            step_size: float | None = None) -> torch.Tensor:
    """Integrate ``dz/dt = dynamics(z)`` from ``z0`` (``(batch, d)`` or ``(d,)``) and return the states at ``times``
    (1-D, increasing, starting at the time of ``z0``): shape ``(batch, len(times), d)`` (or ``(len(times), d)``).

    torchdiffeq's ``odeint``: ``method`` one of :data:`ADAPTIVE_METHODS` with tolerances ``rtol``/``atol`` (the
    defaults are the training tolerance of the authors' code, rtol 1e-4), or a fixed-grid method (``"rk4"``, ...)
    with ``step_size`` (default: the spacing of ``times``). Gradients flow to the parameters of ``dynamics`` through
    the solver's steps. ``times`` is used in ``z0``'s dtype and on its device. Raises :class:`RolloutDiverged` when
    an adaptive method's step size underflows (the batch shares its steps, so one diverging trajectory stops all:
    :func:`rollout_or_nan` keeps the others).
    """
    from torchdiffeq import odeint

    if not isinstance(z0, torch.Tensor) or not z0.is_floating_point() or z0.ndim not in (1, 2):
        raise TypeError(f"rollout: z0 must be a floating tensor of shape (batch, d) or (d,), got "
                        f"{getattr(z0, 'shape', type(z0).__name__)}")
    if not isinstance(times, torch.Tensor) or times.ndim != 1 or len(times) < 1:
        raise ValueError(f"rollout: times must be a 1-D tensor of increasing times, got {times!r}")
    times = times.to(dtype=z0.dtype, device=z0.device)
    for name, tol in (("rtol", rtol), ("atol", atol)):
        check_number(f"rollout: {name}", tol, above=True)
    if method in ADAPTIVE_METHODS:
        if step_size is not None:
            raise ValueError(f"rollout: step_size is for the fixed-grid methods {_FIXED_METHODS}, not {method!r}")
        options = None
    elif method in _FIXED_METHODS:
        if step_size is None:
            step_size = float(times[1] - times[0]) if len(times) > 1 else 1.0
        check_number("rollout: step_size", step_size, above=True)
        options = {"step_size": step_size}
    else:
        raise ValueError(f"rollout: method must be one of {ADAPTIVE_METHODS + _FIXED_METHODS}, got {method!r}")

    def f(t: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return dynamics(z)

    try:
        out = odeint(f, z0, times, rtol=rtol, atol=atol, method=method, options=options)
    except AssertionError as exc:  # torchdiffeq's check that the adaptive step still advances time
        if "underflow in dt" not in str(exc):
            raise
        raise RolloutDiverged(f"rollout: the {method} step size underflowed before t = {float(times[-1]):g} (the "
                              "vector field is stiff or its solution blows up; a fixed-step method such as 'rk4' "
                              "always finishes)") from None
    return out.movedim(0, -2)


def rollout_or_nan(dynamics: Callable[[torch.Tensor], torch.Tensor], z0: torch.Tensor, times: torch.Tensor,
                   **kwargs: Any) -> torch.Tensor:
    """:func:`rollout` of a batch ``(batch, d)`` in which a trajectory that diverges is returned as NaN instead of
    stopping the others: after a :class:`RolloutDiverged` the trajectories are solved one by one. For evaluating
    trained models, whose long rollouts may leave the data's region."""
    try:
        return rollout(dynamics, z0, times, **kwargs)
    except RolloutDiverged:
        rows = []
        for z in z0:
            try:
                rows.append(rollout(dynamics, z[None], times, **kwargs)[0])
            except RolloutDiverged:
                rows.append(torch.full((len(times), z0.shape[-1]), float("nan"), dtype=z0.dtype, device=z0.device))
        return torch.stack(rows)


def rollout_error(pred: torch.Tensor, true: torch.Tensor, clamp: float = 1e-7) -> torch.Tensor:
    """The geometric mean over time of the relative error ``|a - b| / (|a| + |b|)`` on the full state (Table 2.2):
    ``pred`` and ``true`` of shape ``(..., T, d)`` give ``(...)``, one value per trajectory. Each error is clamped
    below at ``clamp`` before the logarithm (the authors' code; an exact state, such as the shared start, would
    otherwise give ``log 0``). The geometric mean of the result over trajectories is the geometric mean over all
    (trajectory, time) pairs, the number Table 2.2 reports."""
    if not isinstance(pred, torch.Tensor) or not isinstance(true, torch.Tensor):
        raise TypeError(f"rollout_error: pred and true must be tensors, got {type(pred).__name__} and "
                        f"{type(true).__name__}")
    if pred.shape != true.shape or pred.ndim < 2:
        raise ValueError(f"rollout_error: pred and true must have the same shape (..., T, d), got "
                         f"{tuple(pred.shape)} and {tuple(true.shape)}")
    if not isinstance(clamp, (int, float)) or not clamp > 0:
        raise ValueError(f"rollout_error: clamp must be a number > 0, got {clamp!r}")
    scale = (pred.norm(dim=-1) + true.norm(dim=-1)).clamp_min(torch.finfo(pred.dtype).tiny)  # 0 / 0 counts as 0
    err = (pred - true).norm(dim=-1) / scale
    return err.clamp_min(clamp).log().mean(-1).exp()
