"""An Augerino-style learned-augmentation baseline (Benton et al. 2020) as used by Yeh et al. 2022 (§5.2, App. D.2).

The model's output is averaged over ``n_samples`` sampled transformations of its input features; the distribution of
transformations is learned with the model. For permutations the samples are Gumbel-Sinkhorn relaxed permutation
matrices (Mena et al. 2018) of learnable logits; for shifts they are integer shifts with learnable probabilities.
Cost grows linearly with ``n_samples`` (memory and time), which is what Table A1 measures.

- :class:`AugerinoPermutation`: permutations of the positions of a sequence model (§5.2, Fig. 7, Table A1).
- :class:`AugerinoShift`: integer shifts of a sequence, "their augmentation over the set of shift transformations
  with five augmented samples" (§5.3, Fig. 8; App. D.1, Fig. A1), with :func:`shift_matrices`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from symkit.nn._factory import Resettable, place

__all__ = ["gumbel_sinkhorn", "AugerinoPermutation", "shift_matrices", "AugerinoShift"]

#: how a shift treats the ends of a finite sequence
BOUNDARIES = ("zero", "cyclic")


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


def shift_matrices(shifts: torch.Tensor, length: int, boundary: str = "zero") -> torch.Tensor:
    """The matrices ``S_s`` (len(shifts), length, length) of the shifts ``(S_s x)[n] = x[n - s]`` of a sequence.

    ``boundary="zero"`` fills the ``|s|`` entries shifted in with zeros (the padding of §5.3, under which no shift
    but 0 is an exact symmetry of a finite sequence); ``"cyclic"`` rolls the sequence (``x[(n - s) mod length]``),
    a group action of Z(length).
    """
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
    if shifts.ndim != 1 or length < 1:
        raise ValueError(f"need a 1-D tensor of shifts and length >= 1, got shape {tuple(shifts.shape)}, {length}")
    n = torch.arange(length, device=shifts.device)
    source = n[None, :] - shifts[:, None]  # (S, length): the input entry each output entry reads
    if boundary == "cyclic":
        source = source % length
    reads = source[:, :, None] == n[None, None, :]  # (S, m, n): output m reads input n (never when out of range)
    return reads.to(torch.get_default_dtype())


class AugerinoShift(Resettable, nn.Module):
    """Augerino (Benton et al. 2020) over integer shifts of a sequence: a learned distribution over the shift set.

    ``model`` maps (B, K_in) to (B, K_out). Each forward pass draws, for each input, ``n_samples`` shifts ``s`` from
    ``p = softmax(shift_logits)`` over ``shifts`` (default ``-max_shift..max_shift``) and returns the average
    ``mean_s S_{-s} model(S_s x)`` (``equivariant=True``: the output is shifted back, for shift-equivariant targets
    such as §5.3's cross-correlation and App. D.1's denoising) or ``mean_s model(S_s x)`` (``equivariant=False``:
    learned invariance). The samples are straight-through Gumbel-softmax one-hots (``hard=True``: every pass applies
    one shift of the set, the gradient reaches the logits through the relaxed weights at temperature ``tau``;
    ``hard=False`` passes the relaxed mixtures). The logits start at 0, so ``p`` starts uniform over the set.
    :meth:`regularizer` is ``-entropy_weight H(p)``, the Augerino reward for a wide distribution.
    """

    def __init__(
        self,
        model: nn.Module,
        max_shift: int = 2,
        n_samples: int = 5,
        equivariant: bool = True,
        boundary: str = "zero",
        tau: float = 0.5,
        hard: bool = True,
        entropy_weight: float = 1e-2,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"AugerinoShift needs an nn.Module mapping (B, K_in) to (B, K_out), "
                            f"got {type(model).__name__}")
        if isinstance(max_shift, bool) or not isinstance(max_shift, int) or max_shift < 0:
            raise ValueError(f"max_shift must be an int >= 0, got {max_shift!r}")
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples must be an int >= 1, got {n_samples!r}")
        if boundary not in BOUNDARIES:
            raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
        if not tau > 0 or entropy_weight < 0:
            raise ValueError(f"need tau > 0 and entropy_weight >= 0, got tau={tau}, entropy_weight={entropy_weight}")
        self.model, self.n_samples, self.equivariant, self.boundary = model, n_samples, equivariant, boundary
        self.tau, self.hard, self.entropy_weight = tau, hard, entropy_weight
        self.register_buffer("shifts", torch.arange(-max_shift, max_shift + 1), persistent=False)
        self.shift_logits = nn.Parameter(torch.zeros(2 * max_shift + 1))
        self.generator: torch.Generator | None = None
        place(self, device, dtype)

    def shift_probs(self) -> torch.Tensor:
        """The learned distribution over :attr:`shifts`, ``softmax(shift_logits)``; sums to 1."""
        return torch.softmax(self.shift_logits, -1)

    def identity_mass(self) -> float:
        """The probability of the shift 0 (1: the model has learned not to shift)."""
        with torch.no_grad():
            return float(self.shift_probs()[self.shifts == 0].sum())

    def regularizer(self) -> torch.Tensor:
        """``-entropy_weight H(p)``: add to the training loss to reward a wide shift distribution."""
        p = self.shift_probs()
        return self.entropy_weight * (p * torch.log(p + 1e-12)).sum()

    def sample_weights(self, batch: int, n: int | None = None) -> torch.Tensor:
        """Gumbel-softmax samples over :attr:`shifts`, shape (n, batch, len(shifts)), ``n`` defaulting to
        ``n_samples``: one per pass and input, one-hot in the forward direction when ``hard`` (then the Gumbel-max
        sample of ``p``), relaxed otherwise."""
        n = self.n_samples if n is None else n
        logits = self.shift_logits.expand(n, batch, -1)
        u = torch.rand(logits.shape, generator=self.generator, dtype=logits.dtype, device=logits.device)
        soft = torch.softmax((logits - torch.log(-torch.log(u.clamp_min(1e-20)) + 1e-20)) / self.tau, -1)
        if not self.hard:
            return soft
        one_hot = torch.nn.functional.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
        return one_hot + soft - soft.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2:
            raise ValueError(f"AugerinoShift expects inputs (B, K), got shape {tuple(x.shape)}")
        b, k_in = x.shape
        w = self.sample_weights(b)  # (S, B, J): the weights over the J shifts of each pass and input
        every = torch.matmul(shift_matrices(self.shifts, k_in, self.boundary).to(x.dtype), x.T)  # (J, K_in, B)
        shifted = torch.einsum("sbj,jkb->sbk", w, every)  # (S, B, K_in)
        out = self.model(shifted.reshape(-1, k_in)).reshape(self.n_samples, b, -1)  # (S, B, K_out)
        if self.equivariant:  # shift each pass's output back by its own shift
            back = shift_matrices(-self.shifts, out.shape[-1], self.boundary).to(out.dtype)  # (J, K_out, K_out)
            every_out = torch.matmul(back[:, None], out.transpose(1, 2)[None])  # (J, S, K_out, B)
            out = torch.einsum("sbj,jskb->sbk", w, every_out)
        return out.mean(0)
