"""Small autograd helpers shared by the layers."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["permute_dim", "permute_last"]


class _Permute(torch.autograd.Function):
    """``x[..., perm]`` whose backward is the gather with the inverse permutation (no zero fill, no scatter-add);
    forward-mode AD (``jvp``, used by the Lie derivative) gathers the tangent the same way as the input."""

    @staticmethod
    def forward(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor, dim: int) -> torch.Tensor:
        return x.index_select(dim, perm)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        _, perm, inv, dim = inputs
        ctx.save_for_backward(perm, inv)
        ctx.perm, ctx.dim = perm, dim

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        _, inv = ctx.saved_tensors
        return grad.index_select(ctx.dim, inv), None, None, None

    @staticmethod
    def jvp(ctx: Any, x_tangent: torch.Tensor, *_: Any) -> torch.Tensor:
        return x_tangent.index_select(ctx.dim, ctx.perm)


def permute_last(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """``x[..., perm]`` for a permutation ``perm`` with inverse ``inv`` (differentiable in both modes, gathers both
    ways)."""
    return _Permute.apply(x, perm, inv, -1)


class _PermuteTraced(_Permute):
    """:class:`_Permute` without forward-mode AD, which ``torch.compile`` cannot trace (a custom ``jvp``)."""

    jvp = torch.autograd.Function.jvp


def permute_dim(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor, dim: int) -> torch.Tensor:
    """``x`` permuted along ``dim`` by ``perm`` (inverse ``inv``), a gather both ways, for ``torch.compile`` (where
    autograd's backward of a gather is a scatter-add the compiler writes element by element); reverse mode only."""
    return _PermuteTraced.apply(x, perm, inv, dim)
