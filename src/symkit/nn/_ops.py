"""Small autograd helpers shared by the layers."""

from __future__ import annotations

import torch

__all__ = ["permute_last"]


class _Permute(torch.autograd.Function):
    """``x[..., perm]`` whose backward is the gather with the inverse permutation (no zero fill, no scatter-add)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        ctx.save_for_backward(inv)
        return x.index_select(-1, perm)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # noqa: ANN001
        (inv,) = ctx.saved_tensors
        return grad.index_select(-1, inv), None, None


def permute_last(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """``x[..., perm]`` for a permutation ``perm`` with inverse ``inv`` (differentiable, gathers both ways)."""
    return _Permute.apply(x, perm, inv)
