"""Export a trained symkit model to a standalone PyTorch program that needs no symkit at inference time.

``export(model, example)`` is ``torch.export.export`` of the model in eval mode with a dynamic batch dimension: the
result (an ``ExportedProgram``) holds the graph and the weights; ``torch.export.save`` writes it and
``torch.export.load(path).module()`` runs it in any PyTorch process, with symkit not installed (tested).
The equivariant structure is compiled away: each layer becomes the plain ops that assemble and apply its weights.
"""

from __future__ import annotations

import os

import torch
from torch import nn

__all__ = ["export"]


def export(model: nn.Module, example: torch.Tensor, path: str | os.PathLike | None = None
           ) -> torch.export.ExportedProgram:
    """The exported program of ``model`` (put in eval mode) for inputs shaped like ``example`` with any batch size;
    written to ``path`` when given (``torch.export.save``)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"export: model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(example, torch.Tensor) or example.ndim < 1:
        raise TypeError(f"export: example must be a batched input tensor, got {type(example).__name__}")
    model.eval()
    batch = torch.export.Dim("batch")
    program = torch.export.export(model, (example,), dynamic_shapes=({0: batch},))
    if path is not None:
        torch.export.save(program, path)
    return program
