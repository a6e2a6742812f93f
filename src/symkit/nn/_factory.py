"""PyTorch's factory conventions for symkit modules: ``device=`` and ``dtype=`` keywords, the default dtype when no
dtype is given, and random initial values drawn on the CPU (seeded generators and the global RNG are CPU
generators) and then moved, so a model built on any device, ``meta`` included, starts from the same numbers."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["factory", "on", "place"]


def factory(device: Any = None, dtype: torch.dtype | None = None) -> dict[str, Any]:
    """``{"device": device, "dtype": dtype or torch.get_default_dtype()}`` for ``torch.zeros(..., **f)`` and
    ``nn.Linear(..., **f)``."""
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    return {"device": device, "dtype": torch.get_default_dtype() if dtype is None else dtype}


def on(t: torch.Tensor, f: dict[str, Any]) -> torch.Tensor:
    """A floating tensor made on the CPU, moved to the factory's device and dtype."""
    return t.to(device=f["device"], dtype=f["dtype"])


def place(module: torch.nn.Module, device: Any = None, dtype: torch.dtype | None = None) -> None:
    """Move a module built on the CPU (with the default dtype) to ``device`` and ``dtype`` at the end of its
    ``__init__``: the initial values are those of a CPU build, on every device (``meta`` included)."""
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    if device is not None or dtype is not None:
        module.to(device=device, dtype=dtype)
