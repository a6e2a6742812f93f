"""Synthetic regression tasks of thesis Sec. 2.7.1 and 3.5.1, generated from their formulas (nothing downloads).

Each task is a :class:`~symkit.datasets.tasks.SymmetricTask` (registered by name: ``"o5"``, ``"inertia"``,
``"modified-inertia"``) that declares its reps and group; the functions below return ``(x, y)`` float64 tensors in
the layout of those reps, so they plug straight into an :class:`~symkit.nn.EMLP` with that ``rep_in``/``rep_out``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symkit.datasets.tasks import SymmetricTask, register_task
from symkit.groups import Group, O
from symkit.reps import Scalar, V

__all__ = ["o5_synthetic", "inertia", "modified_inertia", "O5", "INERTIA", "MODIFIED_INERTIA"]


def _o5_inputs(n: int, g: torch.Generator) -> torch.Tensor:
    return torch.randn(n, 10, generator=g, dtype=torch.float64)


def _o5_target(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[:, :5], x[:, 5:]
    r1, r2 = x1.norm(dim=1), x2.norm(dim=1)
    return (torch.sin(r1) - 0.5 * r2**3 + (x1 * x2).sum(1) / (r1 * r2))[:, None]


def _inertia_inputs(n: int, g: torch.Generator) -> torch.Tensor:
    """5 masses ``softplus(N(0, 1))``, then 5 positions ``N(0, I_3)``."""
    m = F.softplus(torch.randn(n, 5, generator=g, dtype=torch.float64))
    pos = torch.randn(n, 5, 3, generator=g, dtype=torch.float64)
    return torch.cat([m, pos.reshape(n, 15)], dim=1)


def _inertia_tensor(x: torch.Tensor) -> torch.Tensor:
    m, pos = x[:, :5], x[:, 5:].reshape(-1, 5, 3)
    eye = torch.eye(3, dtype=x.dtype, device=x.device)
    sq = (pos**2).sum(-1)  # (n, 5)
    outer = pos[..., :, None] * pos[..., None, :]
    return (m[..., None, None] * (sq[..., None, None] * eye - outer)).sum(1)


def _inertia_target(x: torch.Tensor) -> torch.Tensor:
    return _inertia_tensor(x).reshape(-1, 9)


def _modified_inertia_target(x: torch.Tensor, strength: float = 0.3) -> torch.Tensor:
    I = _inertia_tensor(x)
    z = torch.tensor([0.0, 0.0, 1.0], dtype=x.dtype, device=x.device)
    return (I + strength * (I @ z)[:, :, None] * z[None, None, :]).reshape(-1, 9)


def _inertia_reps(G: Group) -> tuple:
    return 5 * Scalar + 5 * V(G), V(G) ** 2


O5 = register_task(SymmetricTask(
    "o5", _o5_inputs, _o5_target, lambda G: (2 * V(G), Scalar), O(5),
    description="2 T1 -> T0 in 5 dimensions: sin|x1| - |x2|^3 / 2 + x1.x2 / (|x1||x2|) (Sec. 2.7.1)"))
INERTIA = register_task(SymmetricTask(
    "inertia", _inertia_inputs, _inertia_target, _inertia_reps, O(3),
    description="5 T0 + 5 T1 -> T2: the moment of inertia sum_i m_i (|x_i|^2 I - x_i x_i^T) (Sec. 2.7.1)"))
MODIFIED_INERTIA = register_task(SymmetricTask(
    "modified-inertia", _inertia_inputs, _modified_inertia_target, _inertia_reps, O(3), exact=False,
    description="approximately O(3): I + 0.3 (I z) z^T with z the unit z-vector (Sec. 3.5.1, the authors' code)"))


def o5_synthetic(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``2 T1 -> T0`` in 5 dimensions: ``sin|x1| - |x2|^3 / 2 + x1.x2 / (|x1||x2|)`` (Sec. 2.7.1)."""
    return O5.generate(n, seed)


def inertia(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``5 T0 + 5 T1 -> T2``: masses ``m_i ~ softplus(N(0,1))`` and positions ``x_i ~ N(0, I_3)`` to the inertia
    tensor ``sum_i m_i (|x_i|^2 I - x_i x_i^T)`` (Sec. 2.7.1). Input layout: 5 masses, then 5 positions."""
    return INERTIA.generate(n, seed)


def modified_inertia(n: int, seed: int = 0, strength: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    """Approximately O(3)-equivariant: ``I + strength (I z) z^T`` with ``z`` the unit z-vector (Sec. 3.5.1).

    The thesis text prints a garbled formula; this is the form of the authors' dataset code, which only breaks
    the symmetry through the preferred axis ``z``.
    """
    x, _ = MODIFIED_INERTIA.generate(n, seed)
    return x, _modified_inertia_target(x, strength)
