"""Synthetic regression tasks of thesis Sec. 2.7.1 and 3.5.1, generated from their formulas (nothing downloads).

Each function returns ``(x, y)`` float64 tensors; inputs are flattened in the layout of the rep given in the
docstring, so they plug straight into an :class:`~symkit.nn.EMLP` with that ``rep_in``/``rep_out``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symkit._checks import check_int

__all__ = ["o5_synthetic", "inertia", "modified_inertia"]


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(check_int("seed", seed, 0))


def _check_n(n: int) -> int:
    return check_int("n", n, 1)


def o5_synthetic(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``2 T1 -> T0`` in 5 dimensions: ``sin|x1| - |x2|^3 / 2 + x1.x2 / (|x1||x2|)`` (Sec. 2.7.1)."""
    g = _generator(seed)
    x = torch.randn(_check_n(n), 10, generator=g, dtype=torch.float64)
    x1, x2 = x[:, :5], x[:, 5:]
    r1, r2 = x1.norm(dim=1), x2.norm(dim=1)
    y = torch.sin(r1) - 0.5 * r2**3 + (x1 * x2).sum(1) / (r1 * r2)
    return x, y[:, None]


def _masses_and_positions(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    m = F.softplus(torch.randn(n, 5, generator=g, dtype=torch.float64))
    pos = torch.randn(n, 5, 3, generator=g, dtype=torch.float64)
    return m, pos


def _inertia_tensor(m: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    eye = torch.eye(3, dtype=pos.dtype)
    sq = (pos**2).sum(-1)  # (n, 5)
    outer = pos[..., :, None] * pos[..., None, :]
    return (m[..., None, None] * (sq[..., None, None] * eye - outer)).sum(1)


def inertia(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``5 T0 + 5 T1 -> T2``: masses ``m_i ~ softplus(N(0,1))`` and positions ``x_i ~ N(0, I_3)`` to the inertia
    tensor ``sum_i m_i (|x_i|^2 I - x_i x_i^T)`` (Sec. 2.7.1). Input layout: 5 masses, then 5 positions."""
    m, pos = _masses_and_positions(_check_n(n), _generator(seed))
    x = torch.cat([m, pos.reshape(n, 15)], dim=1)
    return x, _inertia_tensor(m, pos).reshape(n, 9)


def modified_inertia(n: int, seed: int = 0, strength: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    """Approximately O(3)-equivariant: ``I + strength (I z) z^T`` with ``z`` the unit z-vector (Sec. 3.5.1).

    The thesis text prints a garbled formula; this is the form of the authors' dataset code, which only breaks
    the symmetry through the preferred axis ``z``.
    """
    m, pos = _masses_and_positions(_check_n(n), _generator(seed))
    x = torch.cat([m, pos.reshape(n, 15)], dim=1)
    I = _inertia_tensor(m, pos)
    z = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    y = I + strength * (I @ z)[:, :, None] * z[None, None, :]
    return x, y.reshape(n, 9)
