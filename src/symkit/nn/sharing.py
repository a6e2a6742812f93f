"""Soft parameter-sharing layers (Yeh et al. 2022, §4.2): ``theta = A psi`` with a relaxed assignment matrix.

``A`` is ``K x C`` and row-stochastic. In the relaxation used by the paper's code it is the row softmax of free logits
``S`` (:class:`SoftAssignment`); the logits are the *structure hyperparameters*, and ``psi`` are the *model
parameters*. :func:`hyper_parameters` and :func:`model_parameters` split any module's parameters accordingly, so the
upper- and lower-level optimisers of the bilevel program (Eq. 6) each see only their own.

Also here: the two penalties of §4.2 (entropy, Eq. 20; the reference code's column-group norm, which it calls the
nuclear norm, Eq. 21, and the true nuclear norm), the cluster-averaging projector ``P(A) = A Abar^T`` used by every
closed-form lower level, and :class:`HardSharedLinear`, the exactly tied layer a discovered partition turns into.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from symkit._checks import check_int
from symkit.actions.grid import GroupAction, PermAction
from symkit.groups.base import Group
from symkit.nn._equivariance import Equivariant, standard_normal
from symkit.nn._factory import Resettable, place

__all__ = [
    "soft_projector",
    "column_normalize",
    "entropy_penalty",
    "column_group_norm",
    "nuclear_norm",
    "SoftAssignment",
    "SharedParameter",
    "SharedLinear",
    "BlockSharedLinear",
    "HardSharedLinear",
    "SumOfNumbersNet",
    "hyper_parameters",
    "model_parameters",
]


def _canonical(partition: Any) -> np.ndarray:
    """Labels (renumbered by first appearance) of a label array or a hard/soft assignment matrix (row argmax)."""
    arr = partition.detach().cpu().numpy() if isinstance(partition, torch.Tensor) else np.asarray(partition)
    if arr.ndim == 2:
        arr = arr.argmax(1)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"expected a label array (K,) or an assignment matrix (K, C), got shape {arr.shape}")
    _, first, inv = np.unique(arr, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inv].astype(np.int64)


def _labels_to_assignment(partition: Any, n_columns: int) -> np.ndarray:
    lab = _canonical(partition)
    if lab.max() + 1 > n_columns:
        raise ValueError(f"partition has {lab.max() + 1} clusters but only {n_columns} columns are available")
    A = np.zeros((lab.size, n_columns))
    A[np.arange(lab.size), lab] = 1.0
    return A


def _check_matrix(A: torch.Tensor, name: str = "A") -> None:
    if not isinstance(A, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(A).__name__}")
    if A.ndim < 2:
        raise ValueError(f"{name} must have shape (..., K, C), got {tuple(A.shape)}")


def column_normalize(A: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``Abar``: the columns of ``A`` divided by their sums (+ eps), batched over leading dims (Claim 1)."""
    _check_matrix(A)
    return A / (A.sum(-2, keepdim=True) + eps)


def soft_projector(A: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Cluster-averaging projector ``P(A) = A Abar^T`` (K x K), batched.

    For a hard ``A`` it averages each entry over its cluster (``Abar^T = A^+``), which is the least-squares lower level
    ``theta*(A) = A psi*(A)`` of a tied mean or linear model. Unlike ``A A^+`` (the paper's printed form, identity for
    any invertible soft A), it stays informative and differentiable for soft ``A`` (see docs/discover.md).
    """
    return A @ column_normalize(A, eps).transpose(-1, -2)


def entropy_penalty(A: torch.Tensor, reduction: str = "mean_rows", eps: float = 1e-6) -> torch.Tensor:
    """Entropy ``H(A) = -sum_ij A_ij log A_ij`` (Eq. 20), pushing rows of A toward one-hot.

    ``reduction="mean_rows"`` (default, the reference code) averages the row entropies; ``"sum"`` is Eq. 20 as
    printed. ``eps`` is added inside as ``(A + eps) log(A + eps)``. Batched over leading dims.
    """
    _check_matrix(A)
    Ae = A + eps
    rows = -(Ae * torch.log(Ae)).sum(-1)
    if reduction == "mean_rows":
        return rows.mean(-1)
    if reduction == "sum":
        return rows.sum(-1)
    raise ValueError(f"reduction must be 'mean_rows' or 'sum', got {reduction!r}")


def column_group_norm(A: torch.Tensor) -> torch.Tensor:
    """``sum_j ||A[:, j]||_2``, what the reference code computes as ``trace(sqrt(A^T A))`` with element-wise sqrt.

    A group-lasso penalty that switches whole columns off (fewer clusters); for a hard A it equals
    ``sum_clusters sqrt(|C|)``. This is the "rank" penalty with which Table 1 reproduces. Batched.
    """
    _check_matrix(A)
    return torch.sqrt((A * A).sum(-2) + 1e-12).sum(-1)


def nuclear_norm(A: torch.Tensor) -> torch.Tensor:
    """The true nuclear norm ``trace(sqrt(A^T A)) = sum of singular values`` (Eq. 21 as written), batched."""
    _check_matrix(A)
    return torch.linalg.matrix_norm(A, ord="nuc")


class SoftAssignment(Resettable, nn.Module):
    """A relaxed K x C assignment matrix, ``A = softmax(S / temperature, dim=1)`` (rows sum to 1).

    ``init``: ``"normal"`` (S ~ N(0, scale^2), the Gaussian experiments), ``"uniform"`` (S ~ U(-scale, scale), the deep
    net), or a partition (label array / hard matrix) loaded as ``S = 10 A - 5`` (nearly hard). ``mode="projected"``
    stores A itself, to be kept in the simplex by :meth:`project_` after each optimiser step (projected gradient).
    """

    def __init__(
        self,
        k: int,
        c: int | None = None,
        init: Any = "normal",
        scale: float = 0.1,
        temperature: float = 1.0,
        mode: str = "softmax",
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
    ) -> None:
        super().__init__()
        check_int("SoftAssignment: k", k, 1)
        c = k if c is None else check_int("SoftAssignment: c", c, 1)
        if temperature <= 0:
            raise ValueError(f"SoftAssignment: temperature must be positive, got {temperature}")
        if mode not in ("softmax", "projected"):
            raise ValueError(f"SoftAssignment: mode must be 'softmax' or 'projected', got {mode!r}")
        self.k, self.c, self.temperature, self.mode = k, c, float(temperature), mode
        dtype = dtype or torch.get_default_dtype()
        if isinstance(init, str):
            if init == "normal":
                S = torch.randn(k, c, generator=generator, dtype=dtype) * scale
            elif init == "uniform":
                S = (torch.rand(k, c, generator=generator, dtype=dtype) * 2 - 1) * scale
            else:
                raise ValueError(f"SoftAssignment: init must be 'normal', 'uniform' or a partition, got {init!r}")
        else:
            S = self._logits_from_partition(init, dtype)
        if mode == "projected":
            S = torch.softmax(S / self.temperature, dim=1)
        self.logits = nn.Parameter(S)
        place(self, device, dtype)

    def _logits_from_partition(self, partition: Any, dtype: torch.dtype) -> torch.Tensor:
        A = _labels_to_assignment(partition, n_columns=self.c)
        if A.shape[0] != self.k:
            raise ValueError(f"SoftAssignment: init partition has {A.shape[0]} elements, expected k={self.k}")
        return torch.as_tensor(10.0 * A - 5.0, dtype=dtype)

    def forward(self) -> torch.Tensor:
        if self.mode == "projected":
            return self.logits
        return torch.softmax(self.logits / self.temperature, dim=1)

    @torch.no_grad()
    def project_(self) -> None:
        """In projected mode: clamp to [0, 1] and renormalise rows (a no-op in softmax mode)."""
        if self.mode == "projected":
            A = self.logits.clamp_(0.0, 1.0)
            A.div_(A.sum(1, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def load_partition_(self, partition: Any) -> None:
        """Set the logits to ``10 A - 5`` for a hard ``A`` (or A itself in projected mode)."""
        S = self._logits_from_partition(partition, self.logits.dtype)
        self.logits.copy_(torch.softmax(S, 1) if self.mode == "projected" else S)

    @torch.no_grad()
    def hard(self) -> torch.Tensor:
        """Row-argmax hardening ``A_val[i, argmax_j A[i, j]] = 1`` (same shape, 0/1 entries)."""
        A = self.forward()
        return torch.zeros_like(A).scatter_(1, A.argmax(1, keepdim=True), 1.0)

    def labels(self) -> np.ndarray:
        """Cluster labels of the hardened assignment (row argmax)."""
        return self.forward().detach().argmax(1).cpu().numpy()


class SharedParameter(Resettable, nn.Module):
    """``theta = A psi`` (Eq. 5) reshaped to ``shape``; ``psi`` has ``c`` entries (default: as many as theta)."""

    def __init__(
        self,
        shape: Sequence[int] | int,
        c: int | None = None,
        init: Any = "normal",
        scale: float = 0.1,
        psi_std: float | None = None,
        generator: torch.Generator | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        k = int(np.prod(self.shape))
        self.structure = SoftAssignment(k, c, init=init, scale=scale, generator=generator)
        std = (1.0 / np.sqrt(max(self.shape[-1], 1))) if psi_std is None else psi_std
        self.psi = nn.Parameter(torch.randn(self.structure.c, generator=generator) * std)
        place(self, device, dtype)

    def forward(self) -> torch.Tensor:
        return (self.structure() @ self.psi).reshape(self.shape)


class SharedLinear(Resettable, nn.Module):
    """A linear map whose flattened ``out x in`` weight is ``A psi`` (soft sharing over all weight entries)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        c: int | None = None,
        init: Any = "normal",
        generator: torch.Generator | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = SharedParameter((out_features, in_features), c=c, init=init, generator=generator)
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        place(self, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"SharedLinear expects {self.in_features} input features, got shape {tuple(x.shape)}")
        y = x @ self.weight().T
        return y if self.bias is None else y + self.bias


class BlockSharedLinear(Resettable, nn.Module):
    """Per-position linear maps whose weight blocks are mixed by an L x L assignment (§5.2 model).

    ``W_eff[k] = sum_j A[k, j] W[j]`` and likewise the biases; input ``(B, L, in)``, output ``(B, L, out)``.
    ``sharing``: ``"learned"`` (a :class:`SoftAssignment`), or a fixed partition of the L positions (label array),
    or ``None`` for independent blocks.
    """

    def __init__(
        self,
        length: int,
        in_features: int,
        out_features: int,
        sharing: Any = "learned",
        init: Any = "uniform",
        scale: float = 0.1,
        generator: torch.Generator | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.length, self.in_features, self.out_features = length, in_features, out_features
        bound = 1.0 / np.sqrt(in_features)
        self.weight = nn.Parameter((torch.rand(length, out_features, in_features, generator=generator) * 2 - 1) * bound)
        self.bias = nn.Parameter((torch.rand(length, out_features, generator=generator) * 2 - 1) * bound)
        self.structure: SoftAssignment | None = None
        if isinstance(sharing, str) and sharing == "learned":
            self.structure = SoftAssignment(length, length, init=init, scale=scale, generator=generator)
            self.register_buffer("fixed_A", None)
        elif sharing is None:
            self.register_buffer("fixed_A", None)
        else:
            A = _labels_to_assignment(sharing, n_columns=length)
            if A.shape[0] != length:
                raise ValueError(f"BlockSharedLinear: sharing covers {A.shape[0]} positions, expected {length}")
            self.register_buffer("fixed_A", torch.as_tensor(A, dtype=self.weight.dtype))
        place(self, device, dtype)

    def assignment(self) -> torch.Tensor | None:
        """The current L x L assignment matrix (None for independent blocks)."""
        if self.structure is not None:
            return self.structure()
        return self.fixed_A

    def effective(self) -> tuple[torch.Tensor, torch.Tensor]:
        A = self.assignment()
        if A is None:
            return self.weight, self.bias
        L = self.length
        W = (A @ self.weight.reshape(L, -1)).reshape_as(self.weight)
        b = A @ self.bias
        return W, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3 or x.shape[1] != self.length or x.shape[2] != self.in_features:
            raise ValueError(
                f"BlockSharedLinear expects input (B, {self.length}, {self.in_features}), got {tuple(x.shape)}"
            )
        W, b = self.effective()
        return torch.einsum("bli,loi->blo", x, W) + b


#: the largest layer whose symmetry :meth:`HardSharedLinear.declared_symmetry` finds by enumeration (8! = 40320)
MAX_ENUMERATED = 8


class HardSharedLinear(Resettable, Equivariant, nn.Module):
    """An exactly tied ``out x in`` linear layer: ``W.flatten()[j] = psi[labels[j]]`` (an index gather).

    This is how a discovered (hardened) sharing scheme becomes a usable layer: it is equivariant to every permutation
    pair ``(pi_M, pi_N)`` whose orbits the partition respects (Eq. 3), with ``n_clusters`` free parameters.
    """

    def __init__(self, labels: Any, out_features: int, in_features: int, bias: bool = False,
    device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        lab = _canonical(labels)
        if lab.size != out_features * in_features:
            raise ValueError(
                f"HardSharedLinear: labels cover {lab.size} entries, expected out*in = {out_features * in_features}"
            )
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("index", torch.as_tensor(lab, dtype=torch.long))
        n = int(lab.max()) + 1
        self.psi = nn.Parameter(torch.randn(n) / np.sqrt(in_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        place(self, device, dtype)

    @property
    def weight(self) -> torch.Tensor:
        return self.psi[self.index].reshape(self.out_features, self.in_features)

    def declared_symmetry(self) -> tuple[PermAction, PermAction]:
        """The permutations ``pi`` of the ``d`` features that the sharing scheme respects, ``labels[pi(i), pi(j)] =
        labels[i, j]`` (Eq. 3 with the same permutation on both sides), acting on input and output: the group a
        discovered partition implies. Enumerates the ``d!`` permutations, so ``d <= 8``; square layers without a bias
        only (a free bias per output breaks every non-trivial permutation)."""
        d = self.in_features
        if self.out_features != d or self.bias is not None:
            raise TypeError("HardSharedLinear: only a square layer without bias declares a symmetry, got "
                            f"{self.out_features}x{d}{' with a bias' if self.bias is not None else ''}")
        if d > MAX_ENUMERATED:
            raise TypeError(f"HardSharedLinear: finding the symmetry enumerates d! permutations; d={d} > "
                            f"{MAX_ENUMERATED}")
        labels = self.index.reshape(d, d).cpu().numpy()
        keep = [p for p in itertools.permutations(range(d))
                if list(p) != list(range(d)) and np.array_equal(labels[np.ix_(p, p)], labels)]
        if not keep:
            raise TypeError("HardSharedLinear: its sharing scheme respects no permutation but the identity")
        mats = np.stack([np.eye(d)[list(p)] for p in keep])
        action = GroupAction(Group(discrete_generators=mats, name="implied by the sharing"))
        return action, action

    def example_input(self, batch: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(batch, in_features)`` standard normal features."""
        return standard_normal(self, (batch, self.in_features), generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"HardSharedLinear expects {self.in_features} input features, got shape {tuple(x.shape)}")
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias


class SumOfNumbersNet(Resettable, nn.Module):
    """The §5.2 network: embedding -> per-position FC (blocks shared by A) -> ReLU -> sum over positions -> linear.

    With a one-cluster sharing this is a DeepSets network with a shared phi, exactly permutation invariant.
    ``tokens`` are integers in ``0..vocab-1`` of shape ``(B, L)``; the output has shape ``(B,)``.
    """

    def __init__(
        self,
        length: int,
        vocab: int = 11,
        embed: int = 500,
        hidden: int = 50,
        sharing: Any = "learned",
        init: Any = "uniform",
        scale: float = 0.1,
        generator: torch.Generator | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.length, self.vocab = length, vocab
        self.embedding = nn.Embedding(vocab, embed, padding_idx=0)
        if generator is not None:
            with torch.no_grad():
                self.embedding.weight.copy_(torch.randn(vocab, embed, generator=generator))
                self.embedding.weight[0].zero_()
        self.fc = BlockSharedLinear(length, embed, hidden, sharing=sharing, init=init, scale=scale, generator=generator)
        self.out = nn.Linear(hidden, 1)
        if generator is not None:
            with torch.no_grad():
                bound = 1.0 / np.sqrt(hidden)
                self.out.weight.copy_((torch.rand(1, hidden, generator=generator) * 2 - 1) * bound)
                self.out.bias.copy_((torch.rand(1, generator=generator) * 2 - 1) * bound)
        place(self, device, dtype)

    def features(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.ndim != 2 or tokens.shape[1] != self.length:
            raise ValueError(f"SumOfNumbersNet expects tokens (B, {self.length}), got {tuple(tokens.shape)}")
        return self.embedding(tokens)

    def head(self, emb: torch.Tensor) -> torch.Tensor:
        """Everything after the embedding, on ``(B, L, embed)`` features."""
        return self.out(torch.relu(self.fc(emb)).sum(1)).squeeze(-1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(tokens))


def hyper_parameters(module: nn.Module) -> Iterator[nn.Parameter]:
    """The structure hyperparameters: the logits of every :class:`SoftAssignment` inside ``module``."""
    for m in module.modules():
        if isinstance(m, SoftAssignment):
            yield m.logits


def model_parameters(module: nn.Module) -> Iterator[nn.Parameter]:
    """Every parameter of ``module`` that is not a structure hyperparameter (the ``psi`` of the lower level)."""
    hyper = {id(p) for p in hyper_parameters(module)}
    for p in module.parameters():
        if id(p) not in hyper:
            yield p
