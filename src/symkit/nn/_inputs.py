"""Checks of a layer's arguments and inputs, with one-line errors that name what was wrong and what was expected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from symkit.reps.core import Rep

__all__ = ["check_input", "check_rep", "first_floating", "parameter_like"]


def check_rep(what: str, rep: Any) -> Rep:
    """``rep`` if it is a symkit Rep bound to a group; else a one-line error naming ``what`` and the fix."""
    if not isinstance(rep, Rep):
        raise TypeError(f"{what} must be a symkit Rep, got {type(rep).__name__}")
    if not rep.is_bound:
        raise ValueError(f"{what} {rep!r} is not bound to a group; call it with a group, e.g. T(1)(SO(3))")
    return rep


def first_floating(module: nn.Module) -> torch.Tensor | None:
    """The first floating parameter of ``module``, else its first floating buffer, else None. The generators are
    walked only up to that tensor, not gathered whole: every layer's forward pass reads it (:func:`check_input`),
    and gathering all of a network's tensors took 127 us against 7 for the 32-channel RPP-EMLP of docs/rl.md's
    InvertedPendulum example (its SAC updates 2-3% faster in eager mode)."""
    for tensors in (module.parameters(), module.buffers()):
        for t in tensors:
            if t.is_floating_point():
                return t
    return None


def parameter_like(module: nn.Module) -> tuple[torch.device, torch.dtype]:
    """The device and dtype of ``module``'s first floating parameter (else buffer): where and in what precision its
    inputs belong; CPU and the default dtype for a module with no floating tensors."""
    t = first_floating(module)
    return (torch.device("cpu"), torch.get_default_dtype()) if t is None else (t.device, t.dtype)


def _autocast_dtype(x: torch.Tensor) -> bool:
    """Whether ``x`` has the dtype of an autocast region active on its device (mixed precision: a layer's output
    there may be bfloat16 while the parameters stay float32)."""
    kind = x.device.type
    return torch.is_autocast_enabled(kind) and x.dtype == torch.get_autocast_dtype(kind)


def check_input(who: Callable[[], str], module: nn.Module, x: Any, size: int) -> None:
    """One-line errors for inputs a layer cannot take: not a tensor, a dtype other than the parameters', or a
    last dimension other than ``size``. ``who()`` names the layer; it is called only to word an error (so a
    forward pass formats no strings, and ``torch.compile`` traces it without a graph break)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{who()} expects a torch.Tensor of shape (batch, {size}), got {type(x).__name__}; "
            f"convert it with torch.as_tensor(x, dtype=torch.float32)"
        )
    reference = first_floating(module)
    dt = None if reference is None else reference.dtype
    if dt is not None and x.dtype != dt and not _autocast_dtype(x):
        raise TypeError(
            f"{who()} has {str(dt).removeprefix('torch.')} parameters but the input is "
            f"{str(x.dtype).removeprefix('torch.')}; convert it with x.to({dt})"
            + (f" or build the model with dtype={x.dtype}" if x.is_floating_point() else "")
        )
    if x.ndim == 0 or x.shape[-1] != size:
        got = "a scalar" if x.ndim == 0 else f"{x.shape[-1]} features"
        raise ValueError(f"{who()} expects {size} features in the last dimension, got {got}")
