"""Evaluating a trained model on held-out data: its outputs in batches (:func:`predict`) and its top-1 accuracy
(:func:`accuracy`), the two every experiment reports."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from symkit.train.batching import batch_indices

__all__ = ["accuracy", "predict"]


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """``model(x)`` in eval mode, in batches of ``batch_size`` (the module is left in eval mode)."""
    model.eval()
    return torch.cat([model(x[b]) for b in batch_indices(x.shape[0], batch_size)])


@torch.no_grad()
def accuracy(model: nn.Module | Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 512) -> float:
    """Top-1 accuracy, the share of rows of ``x`` whose largest output is the class index in ``y``, computed in
    batches of ``batch_size``. A module is evaluated in eval mode and handed back in the mode it came in; a plain
    callable is called as it is."""
    if y.dim() != 1 or y.dtype != torch.long or len(y) != len(x):
        raise ValueError(f"accuracy: y must be a 1-D tensor of class indices (torch.long), one per row of x "
                         f"({len(x)}), got {y.dtype} of shape {tuple(y.shape)}")
    if len(y) == 0:
        raise ValueError("accuracy: no examples (x and y are empty)")
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    try:
        correct = 0
        for b in batch_indices(len(x), batch_size):
            out = model(x[b])
            correct += int((out.argmax(-1) == y[b].to(out.device)).sum())
    finally:
        if was_training:
            model.train()
    return correct / len(y)
