"""Input and output scaling that keeps a model's symmetry (the reference code's ``Standardize``, thesis A.1.9).

Per-feature standardisation breaks equivariance: rotating a vector mixes entries with different scales. Here each
object of a representation gets one scale (the RMS of its entries over the data), and only scalars, which every
group element fixes, are also centred. Then ``x -> (x - mu) / s`` commutes with ``rho(g)`` for every ``g``, and

    Standardize(model)(x) = s_out * model((x - mu_in) / s_in) + mu_out

is exactly as equivariant as ``model``.
"""

from __future__ import annotations

import torch
from torch import nn

from symkit.nn._equivariance import Equivariant
from symkit.reps.core import Rep

__all__ = ["Standardize", "rep_statistics"]


def rep_statistics(x: torch.Tensor, rep: Rep, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, scale)`` of the samples ``x`` (N, rep.size) per object of ``rep``: scalars get their mean and
    standard deviation, every other object (a vector, a tensor, a permutation representation) mean 0 and the RMS
    of its entries. Both tensors have shape ``(rep.size,)``, the dtype and device of ``x``."""
    if not isinstance(rep, Rep):
        raise TypeError(f"rep_statistics: rep must be a symkit Rep, got {type(rep).__name__}")
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[1] != rep.size:
        raise ValueError(f"rep_statistics: expected samples of shape (N, {rep.size}), got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.shape[0] < 2:
        raise ValueError(f"rep_statistics: need at least 2 samples, got {x.shape[0]}")
    mean = torch.zeros(rep.size, dtype=x.dtype, device=x.device)
    scale = torch.ones(rep.size, dtype=x.dtype, device=x.device)
    for block in rep.blocks():
        for positions in block.pos:
            idx = torch.as_tensor(positions, device=x.device)
            values = x[:, idx]
            if not block.leaves:  # a scalar: invariant, so it may be centred
                mean[idx] = values.mean()
                scale[idx] = values.std().clamp_min(eps)
            else:
                scale[idx] = values.square().mean().sqrt().clamp_min(eps)
    return mean, scale


class Standardize(Equivariant, nn.Module):
    """``s_out * model((x - mu_in) / s_in) + mu_out`` with the statistics of :func:`rep_statistics` taken from
    training inputs ``x`` and targets ``y``; declares ``rep_in``/``rep_out`` (so ``check_equivariance()`` works).
    The statistics follow ``x`` and ``y``'s device and dtype (build it with data where the model lives)."""

    def __init__(self, model: nn.Module, rep_in: Rep, rep_out: Rep, x: torch.Tensor, y: torch.Tensor) -> None:
        super().__init__()
        self.model, self.rep_in, self.rep_out = model, rep_in, rep_out
        mu_in, s_in = rep_statistics(x, rep_in)
        mu_out, s_out = rep_statistics(y, rep_out)
        for name, t in (("mu_in", mu_in), ("s_in", s_in), ("mu_out", mu_out), ("s_out", s_out)):
            self.register_buffer(name, t)

    def reset_parameters(self) -> None:
        """Re-initialise the wrapped model (the statistics are the data's, not drawn)."""
        self.model.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model((x - self.mu_in) / self.s_in) * self.s_out + self.mu_out
