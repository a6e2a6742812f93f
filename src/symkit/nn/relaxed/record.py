"""Recording the layer inputs and outputs that Kronecker-factored curvature needs.

A layer calls :func:`record_site` in its forward pass for every weight it applies as a (possibly weight-shared)
linear map ``out_r = W a_r (+ b)``. Nothing happens unless a :class:`SiteRecorder` is active, so the cost outside
curvature fits is one global lookup.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Site:
    """One application of a weight ``W`` (viewed as ``(G, D)``) inside a forward pass.

    ``a``: inputs ``(N, R, D')``, one row per weight-sharing index ``r`` (``D' = D`` or, if ``block_diag``, ``D/R``
    and row ``r`` fills only block ``r`` of the input); ``out``: the output tensor in the graph; ``rows``: maps the
    gradient of ``out`` to ``(N, R, G)``.
    """

    module: nn.Module
    name: str
    weight: torch.Tensor
    bias: torch.Tensor | None
    a: torch.Tensor
    out: torch.Tensor
    rows: Callable[[torch.Tensor], torch.Tensor]
    block_diag: bool


class SiteRecorder:
    """Collects :class:`Site` s while active (see :func:`recording`)."""

    def __init__(self) -> None:
        self.sites: list[Site] = []


_ACTIVE: list[SiteRecorder] = []


@contextlib.contextmanager
def recording() -> Iterator[SiteRecorder]:
    """Record every site of the forward passes run inside the block."""
    rec = SiteRecorder()
    _ACTIVE.append(rec)
    try:
        yield rec
    finally:
        _ACTIVE.pop()


def record_site(module: nn.Module, name: str, weight: torch.Tensor, bias: torch.Tensor | None,
                a_fn: Callable[[], torch.Tensor], out: torch.Tensor, rows: Callable[[torch.Tensor], torch.Tensor],
                block_diag: bool = False) -> None:
    """Register a site with the active recorder, if any (``a_fn`` is evaluated only then)."""
    if not _ACTIVE or not torch.is_grad_enabled():
        return
    _ACTIVE[-1].sites.append(Site(module, name, weight, bias, a_fn(), out, rows, block_diag))


class KLinear(nn.Linear):
    """``nn.Linear`` that records its Kronecker site (used for the 1×1 head layers)."""

    symmetry = "fc"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"KLinear expects (N, {self.in_features}), got {tuple(getattr(x, 'shape', ()))}")
        out = F.linear(x, self.weight, self.bias)
        record_site(self, "weight", self.weight, self.bias, lambda: x.detach().unsqueeze(1), out,
                    lambda g: g.unsqueeze(1))
        return out


# ---------------------------------------------------------------------------------------------------------------
# Curvature rules for PyTorch's own layers, registered as forward hooks (any model built from them)
# ---------------------------------------------------------------------------------------------------------------


def _linear_hook(module: nn.Linear, inputs: tuple, out: torch.Tensor) -> None:
    """``nn.Linear`` on ``(N, ..., D)``: one row per leading position (weight shared over them)."""
    x = inputs[0]
    record_site(module, "weight", module.weight, module.bias,
                lambda: x.detach().reshape(x.shape[0], -1, x.shape[-1]),
                out, lambda g: g.reshape(g.shape[0], -1, g.shape[-1]))


def _conv_hook(module: nn.Conv2d, inputs: tuple, out: torch.Tensor) -> None:
    """``nn.Conv2d`` (groups 1, any padding mode): one row per output pixel, the unfolded input patch (App. C)."""
    x = inputs[0]

    def patches() -> torch.Tensor:
        xd = x.detach()
        if module.padding_mode != "zeros":  # circular, reflect, replicate: pad as the layer does, then unfold
            xd = F.pad(xd, module._reversed_padding_repeated_twice, mode=module.padding_mode)
            padding: object = 0
        else:
            padding = module.padding
        return F.unfold(xd, module.kernel_size, dilation=module.dilation, padding=padding,
                        stride=module.stride).transpose(1, 2)

    record_site(module, "weight", module.weight, module.bias, patches, out, lambda g: g.flatten(2).transpose(1, 2))


@contextlib.contextmanager
def torch_layer_rules(model: nn.Module) -> Iterator[int]:
    """Register the curvature rules of ``nn.Linear`` and ``nn.Conv2d`` (groups 1, 2-d inputs) on every such layer of
    ``model`` for the duration of the block (as asdl and BackPACK do); yields how many layers got one. Layers that
    record themselves (:class:`KLinear`, the relaxed paths) are left alone."""
    handles = []
    try:
        for m in model.modules():
            if isinstance(m, KLinear):
                continue
            if isinstance(m, nn.Linear):
                handles.append(m.register_forward_hook(_linear_hook))
            elif isinstance(m, nn.Conv2d):
                if m.groups != 1:
                    raise ValueError(f"{type(m).__name__} with groups={m.groups}: only groups=1 has a curvature rule")
                handles.append(m.register_forward_hook(_conv_hook))
        yield len(handles)
    finally:
        for h in handles:
            h.remove()
