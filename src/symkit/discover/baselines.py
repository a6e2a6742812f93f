"""An Augerino-style learned-augmentation baseline (Benton et al. 2020) as used by Yeh et al. 2022 (§5.2, App. D.2).

The model's output is averaged over ``n_samples`` sampled transformations of its input features; the distribution of
transformations is learned with the model. For permutations the samples are Gumbel-Sinkhorn relaxed permutation
matrices (Mena et al. 2018) of learnable logits; for shifts they are integer shifts with learnable probabilities.
Cost grows linearly with ``n_samples`` (memory and time), which is what Table A1 measures.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from symkit.nn._factory import Resettable, place

__all__ = ["gumbel_sinkhorn", "AugerinoPermutation"]


def gumbel_sinkhorn(
    logits: torch.Tensor,
    n_samples: int,
    tau: float = 0.1,
    iters: int = 20,
    generator: torch.Generator | None = None,
    noise: bool = True,
) -> torch.Tensor:
    """``n_samples`` doubly-stochastic matrices ``Sinkhorn((logits + Gumbel) / tau)``, shape (S, L, L).

    Sinkhorn normalisation alternates row and column log-normalisation ``iters`` times (Mena et al. 2018); as
    ``tau -> 0`` the samples approach permutation matrices.
    """
    if logits.ndim != 2 or logits.shape[0] != logits.shape[1]:
        raise ValueError(f"logits must be a square (L, L) matrix, got {tuple(logits.shape)}")
    if tau <= 0 or n_samples < 1:
        raise ValueError(f"need tau > 0 and n_samples >= 1, got tau={tau}, n_samples={n_samples}")
    x = logits.expand(n_samples, *logits.shape)
    if noise:
        u = torch.rand(x.shape, generator=generator, dtype=logits.dtype, device=logits.device)
        x = x - torch.log(-torch.log(u.clamp_min(1e-20)) + 1e-20)
    x = x / tau
    for _ in range(iters):
        x = x - torch.logsumexp(x, -1, keepdim=True)
        x = x - torch.logsumexp(x, -2, keepdim=True)
    return x.exp()


class AugerinoPermutation(Resettable, nn.Module):
    """Output averaging over sampled permutations of the positions of a sequence model.

    ``model`` must expose ``features(tokens) -> (B, L, E)`` and ``head(features) -> (B,)`` (as
    :class:`~symkit.nn.sharing.SumOfNumbersNet` does). ``entropy_weight`` rewards spread of the learned
    permutation distribution (the Augerino width regulariser, here the mean row entropy of ``softmax(logits)``).
    """

    def __init__(
        self,
        model: nn.Module,
        length: int,
        n_samples: int = 3,
        tau: float = 0.1,
        sinkhorn_iters: int = 20,
        entropy_weight: float = 1e-2,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        for attr in ("features", "head"):
            if not callable(getattr(model, attr, None)):
                raise TypeError(f"AugerinoPermutation needs a model with a {attr}() method, got {type(model).__name__}")
        self.model, self.length, self.n_samples = model, length, n_samples
        self.tau, self.sinkhorn_iters, self.entropy_weight = tau, sinkhorn_iters, entropy_weight
        self.perm_logits = nn.Parameter(torch.zeros(length, length))
        self.generator: torch.Generator | None = None
        place(self, device, dtype)

    def regularizer(self) -> torch.Tensor:
        p = torch.softmax(self.perm_logits, -1)
        return -self.entropy_weight * (-(p * torch.log(p + 1e-12)).sum(-1).mean())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        emb = self.model.features(tokens)  # (B, L, E)
        P = gumbel_sinkhorn(self.perm_logits, self.n_samples, self.tau, self.sinkhorn_iters, self.generator)
        permuted = torch.einsum("slm,bme->sble", P, emb)  # (S, B, L, E)
        out = self.model.head(permuted.reshape(-1, *emb.shape[1:]))
        return out.reshape(self.n_samples, -1).mean(0)
