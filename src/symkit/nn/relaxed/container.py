"""The residual-pathway container and the paper's network (Table 6, corrected as in the research notes §3.2)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from symkit.nn._equivariance import Equivariant
from symkit.nn._factory import Resettable, place
from symkit.nn.relaxed.layers import (
    EquivConv2d,
    FactoredFC2d,
    P4PointwiseConv2d,
    SparseConv2d,
    SparseFC2d,
    SpatialFC2d,
    group_max_pool,
    lift_p4,
)
from symkit.nn.relaxed.record import KLinear

PATHS = {"conv": EquivConv2d, "fc": SpatialFC2d, "ffc": FactoredFC2d, "sconv": SparseConv2d, "sfc": SparseFC2d,
         "gconv": P4PointwiseConv2d}
LAYER_TYPES = ("conv", "fc", "fc+conv", "ffc", "ffc+conv", "sfc", "sconv", "sfc+sconv", "ffc+conv+gconv")


class RelaxedLayer(Equivariant, nn.Module):
    """Combination of parallel paths (Eq. 4 and App. B): ``y = c Σ_i path_i(x)`` over ``n`` paths.

    ``c = 1`` (``'sum'``), ``1/n`` (``'mean'``, the paper's code) or ``1/√n`` (``'rms'``, which keeps the output
    variance of independent paths; the same function class as 'mean' with all prior variances scaled by ``n``).
    Each path has its own Gaussian prior; a path whose prior variance is 0 is identically zero, so the layer
    reduces to the remaining (e.g. equivariant) paths.
    """

    def __init__(self, paths: dict[str, nn.Module], combine: str = "mean") -> None:
        super().__init__()
        if not isinstance(paths, dict) or not paths:
            raise ValueError(f"RelaxedLayer needs a non-empty dict of paths, got {paths!r}")
        if combine not in ("mean", "sum", "rms"):
            raise ValueError(f"combine must be 'mean', 'sum' or 'rms', got {combine!r}")
        for name, p in paths.items():
            if not isinstance(p, nn.Module):
                raise TypeError(f"path {name!r} must be an nn.Module, got {type(p).__name__}")
        self.paths = nn.ModuleDict(paths)
        self.combine = combine

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = [p(x) for p in self.paths.values()]
        y = outs[0]
        for o in outs[1:]:
            if o.shape != y.shape:
                raise ValueError(f"RelaxedLayer: path outputs disagree in shape, {tuple(y.shape)} vs {tuple(o.shape)}")
            y = y + o
        if self.combine == "mean":
            return y / len(outs)
        return y / math.sqrt(len(outs)) if self.combine == "rms" else y

    def declared_symmetry(self) -> tuple[Any, Any]:
        """The symmetry of the layer's equivariant paths: it holds exactly once the other paths are zero
        (:meth:`zero_path`), and :meth:`check_equivariance` measures the departure from it otherwise."""
        found = []
        for p in self.paths.values():
            try:
                found.append(p.declared_symmetry())
            except (TypeError, AttributeError):
                continue
        if not found:
            raise TypeError(f"RelaxedLayer: none of its paths ({', '.join(self.paths)}) declares a symmetry")
        if any((a.group_key, a.shape) != (found[0][0].group_key, found[0][0].shape) for a, _ in found):
            raise TypeError(f"RelaxedLayer: its paths declare different symmetries {found}")
        return found[0]

    def example_input(self, batch: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
        return next(iter(self.paths.values())).example_input(batch, generator)

    def reset_parameters(self) -> None:
        """Re-initialise every path (each as its constructor draws it)."""
        for p in self.paths.values():
            p.reset_parameters()

    @torch.no_grad()
    def zero_path(self, name: str) -> None:
        """Set every parameter of path ``name`` to 0: the limit of zero prior variance (Eq. 8)."""
        if name not in self.paths:
            raise KeyError(f"no path {name!r}; paths: {', '.join(self.paths)}")
        for p in self.paths[name].parameters():
            p.zero_()


def paper_spec(alpha: int, size: int = 32) -> list[tuple[int, int, int]]:
    """Per relaxable layer ``(out_channels, in_size, stride)`` of the paper's network for an input of ``size``.

    For ``size = 32`` this is the corrected Table 6: channels ``α, 2α, 2α, 4α, 4α, 8α, 8α, 16α`` and strides
    ``1, 2, 1, 2, 1, 2, 2, 2``. Smaller powers of two drop trailing layers until the strides reduce to 1×1.
    """
    if size < 2 or size & (size - 1) or size > 32:
        raise ValueError(f"size must be a power of two in [2, 32], got {size!r}")
    chans = [1, 2, 2, 4, 4, 8, 8, 16]
    strides = [1, 2, 1, 2, 1, 2, 2, 2]
    keep = 8 - (5 - int(math.log2(size)))
    spec, s = [], size
    for c, st in zip(chans[:keep], strides[:keep]):
        spec.append((c * alpha, s, st))
        s //= st
    return spec


def _make_path(kind: str, cin: int, cout: int, size: int, stride: int, gen: torch.Generator | None,
               sparse_kwargs: dict) -> nn.Module:
    if kind in ("sconv", "sfc"):
        return PATHS[kind](cin, cout, size, stride, generator=gen, **sparse_kwargs)
    return PATHS[kind](cin, cout, size, stride, generator=gen)


class RelaxedCNN(Resettable, nn.Module):
    """The paper's network with every 3×3 layer replaced by ``layer_type`` (a path or '+'-joined paths).

    ``layer_type`` is one of :data:`LAYER_TYPES`. With 'gconv' among the paths the input is lifted to p4, the
    CONV and FC paths act on all ``4C`` lifted channels, the GCONV path per copy, and the group is max-pooled
    before the head (``Mixer1`` of the paper's code). Head: Linear(16α→64α), ReLU, Linear(64α→C_out).
    """

    def __init__(self, in_channels: int, num_classes: int, alpha: int = 10, size: int = 32,
                 layer_type: str = "conv", combine: str = "mean", seed: int | None = 0,
                 sparse_kwargs: dict | None = None, spec: Sequence[tuple[int, int, int]] | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if layer_type not in LAYER_TYPES:
            raise ValueError(f"layer_type must be one of {LAYER_TYPES}, got {layer_type!r}")
        gen = None
        if seed is not None and torch.get_default_device().type != "meta":
            gen = torch.Generator().manual_seed(seed)
        kinds = layer_type.split("+")
        self.group = "gconv" in kinds
        self.layer_type = layer_type
        self.size = size
        self.in_channels = in_channels
        spec = list(spec) if spec is not None else paper_spec(alpha, size)
        layers = []
        cin = in_channels
        for cout, s, st in spec:
            paths = {}
            for k in kinds:
                mult = 4 if (self.group and k != "gconv") else 1
                paths[k] = _make_path(k, mult * cin, mult * cout, s, st, gen, sparse_kwargs or {})
            layers.append(RelaxedLayer(paths, combine))
            cin = cout
        self.layers = nn.ModuleList(layers)
        hidden = 64 * alpha
        self.head1 = KLinear(cin, hidden)
        self.head2 = KLinear(hidden, num_classes)
        if self.head1.weight.device.type != "meta":
            with torch.no_grad():
                for lin in (self.head1, self.head2):
                    bound = 1.0 / math.sqrt(lin.in_features)
                    lin.weight.uniform_(-bound, bound, generator=gen)
                    lin.bias.zero_()
        place(self, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels or tuple(x.shape[2:]) != (self.size, self.size):
            raise ValueError(f"RelaxedCNN expects (N, {self.in_channels}, {self.size}, {self.size}), "
                             f"got {tuple(getattr(x, 'shape', ()))}")
        h = lift_p4(x) if self.group else x
        for layer in self.layers:
            h = F.relu(layer(h))
        if self.group:
            h = group_max_pool(h)
        h = h.mean(dim=(2, 3))  # spatial size is 1x1 here; the mean keeps the head translation-invariant
        return self.head2(F.relu(self.head1(h)))

    def relaxed_layers(self) -> list[RelaxedLayer]:
        return list(self.layers)


def count_parameters(module: nn.Module) -> int:
    """Number of scalar parameters (anchor locations are buffers and do not count)."""
    return sum(p.numel() for p in module.parameters())


def paper_parameter_count(layer_type: str, in_channels: int = 3, num_classes: int = 10, alpha: int = 10,
                          size: int = 32) -> int:
    """Parameters of :class:`RelaxedCNN` built on the meta device (no memory), e.g. 338,770 for CIFAR CONV."""
    with torch.device("meta"):
        model = RelaxedCNN(in_channels, num_classes, alpha, size, layer_type, seed=None)
    return count_parameters(model)
