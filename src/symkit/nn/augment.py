"""The augmentation baseline of the thesis (MLP+Aug, Sec. 2.7.1): ``rho_out(g)^-1 f(rho_in(g) x)`` with a fresh
random group element per sample while training, and plain ``f(x)`` in evaluation (the reference code's
``GroupAugmentation``). Training it on the symmetric task averages the model towards equivariance without
constraining its weights."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from symkit.groups.base import Group
from symkit.reps.core import Rep

__all__ = ["GroupAugmented"]


class GroupAugmented(nn.Module):
    """Wrap ``model`` (rep_in -> rep_out) so that each training forward pass sees ``rho_in(g_i) x_i`` and answers
    ``rho_out(g_i)^-1 model(rho_in(g_i) x_i)``, ``g_i`` drawn by ``group.samples`` from a seeded generator."""

    def __init__(self, model: nn.Module, rep_in: Rep, rep_out: Rep, group: Group, seed: int = 0) -> None:
        super().__init__()
        for name, rep in (("rep_in", rep_in), ("rep_out", rep_out)):
            if not isinstance(rep, Rep):
                raise TypeError(f"GroupAugmented: {name} must be a symkit Rep, got {type(rep).__name__}")
        if not isinstance(group, Group):
            raise TypeError(f"GroupAugmented: group must be a symkit Group, got {type(group).__name__}")
        self.model, self.rep_in, self.rep_out, self.group = model, rep_in, rep_out, group
        self._rng = np.random.default_rng(seed)

    def transforms(self, n: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rho_in(g_i), rho_out(g_i)^-1)`` for ``n`` fresh elements, as ``(n, d, d)`` tensors like ``like``."""
        gs = self.group.samples(n, seed=int(self._rng.integers(2**62)))
        r_in = np.stack([self.rep_in.rho(g) for g in gs])
        r_out_inv = np.linalg.inv(np.stack([self.rep_out.rho(g) for g in gs]))
        return (torch.as_tensor(r_in).to(device=like.device, dtype=like.dtype),
                torch.as_tensor(r_out_inv).to(device=like.device, dtype=like.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return self.model(x)
        r_in, r_out_inv = self.transforms(x.shape[0], x)
        y = self.model(torch.einsum("nij,nj->ni", r_in, x))
        return torch.einsum("nij,nj->ni", r_out_inv, y)

    def reset_parameters(self) -> None:
        """Re-initialise the wrapped model."""
        self.model.reset_parameters()
