"""Small autograd helpers shared by the layers."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["permute_last"]


class _Permute(torch.autograd.Function):
    """``x[..., perm]`` whose backward is the gather with the inverse permutation (no zero fill, no scatter-add);
    forward-mode AD (``jvp``, used by the Lie derivative) gathers the tangent the same way as the input."""

    @staticmethod
    def forward(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
        return x.index_select(-1, perm)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        _, perm, inv = inputs
        ctx.save_for_backward(perm, inv)
        ctx.perm = perm

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        _, inv = ctx.saved_tensors
        return grad.index_select(-1, inv), None, None

    @staticmethod
    def jvp(ctx: Any, x_tangent: torch.Tensor, *_: Any) -> torch.Tensor:
        return x_tangent.index_select(-1, ctx.perm)


def permute_last(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """``x[..., perm]`` for a permutation ``perm`` with inverse ``inv`` (differentiable in both modes, gathers both
    ways)."""
    return _Permute.apply(x, perm, inv)
