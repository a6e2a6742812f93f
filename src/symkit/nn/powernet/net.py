"""PowerBlock and the PowerNet builder (paper §4.1), plus a CNN of the same block structure for baselines."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from symkit._checks import check_int
from symkit.nn._factory import Resettable, factory
from symkit.nn.powernet.bases import Base, make_base
from symkit.nn.powernet.layer import PowerLayer

__all__ = ["ConvNet", "PowerBlock", "PowerNet"]

BaseFactory = Callable[[tuple[int, int]], Sequence[Base]]


def _norm(kind: str | None, channels: int, **f: Any) -> nn.Module:
    """Batch norm (per channel over batch and pixels) or layer norm (per sample, ``GroupNorm(1, c)``, per-channel
    affine). Both commute with every pixel permutation, so they keep permutation-based layers exactly equivariant."""
    if kind == "batch":
        return nn.BatchNorm1d(channels, **f)
    if kind == "layer":
        return nn.GroupNorm(1, channels, **f)
    if kind is None:
        return nn.Identity()
    raise ValueError(f"norm must be 'batch', 'layer' or None, got {kind!r}")


def _act(nonlinearity: nn.Module | None) -> nn.Module:
    if nonlinearity is None:
        return nn.Identity()
    if not isinstance(nonlinearity, nn.Module):
        raise TypeError(f"nonlinearity must be an nn.Module or None, got {nonlinearity!r}")
    return nonlinearity


class PowerBlock(Resettable, nn.Module):
    """``num_layers`` PowerLayers with norm and non-linearity, and a residual connection of strength ``rho``.

    ``h_1 = s(N(L_1 x)), ..., h_L = N(L_L h_{L-1})``, output ``s(h_L + rho * skip(x))`` with ``s`` the
    non-linearity (default LeakyReLU(0.2), as in all of the paper's experiments) and ``skip`` the identity or, when
    the channel count changes, a 1x1 channel mixing (a PowerLayer with the single power 0). ``rho = 0`` drops it.
    """

    def __init__(
        self,
        bases: Base | Sequence[Base],
        in_channels: int,
        out_channels: int,
        num_layers: int = 2,
        kernel_size: int | Sequence[int] = 5,
        *,
        powers: Sequence[Sequence[int]] | None = None,
        dilation: int | Sequence[int] = 1,
        combine: str = "product",
        rho: float = 1.0,
        nonlinearity: nn.Module | None = None,
        norm: str | None = "batch",
        bias: str | None = "channel",
        generator: torch.Generator | None = None,
        normalize_terms: bool = False,
        init: str = "kaiming",
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        f = factory(device, dtype)
        check_int("num_layers", num_layers, 1)
        bases = [bases] if isinstance(bases, Base) else list(bases)
        self.act = _act(nn.LeakyReLU(0.2) if nonlinearity is None else nonlinearity)
        chans = [in_channels] + [out_channels] * num_layers
        kw = dict(powers=powers, dilation=dilation, combine=combine, bias=bias, generator=generator,
                  normalize_terms=normalize_terms, init=init, **f)
        self.layers = nn.ModuleList(PowerLayer(bases, chans[i], chans[i + 1], kernel_size, **kw)
                                    for i in range(num_layers))
        self.norms = nn.ModuleList(_norm(norm, out_channels, **f) for _ in range(num_layers))
        self.rho = float(rho)
        if self.rho == 0.0:
            self.skip = None
        elif in_channels == out_channels:
            self.skip = nn.Identity()
        else:
            self.skip = PowerLayer(bases, in_channels, out_channels, powers=[(0,) * len(bases)], bias=None,
                                   generator=generator, **f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        trailing = x.shape[2:]
        x = x.flatten(2)  # not reshape(..., -1): a batch of 0 has no inferable size
        h = x
        for i, (layer, norm) in enumerate(zip(self.layers, self.norms)):
            h = norm(layer(h))
            if i < len(self.layers) - 1:
                h = self.act(h)
        if self.skip is not None:
            h = h + self.rho * self.skip(x)
        return self.act(h).unflatten(2, trailing)


def _pool(kind: str | None) -> nn.Module | None:
    if kind == "avg":
        return nn.AvgPool2d(2)
    if kind == "max":
        return nn.MaxPool2d(2)
    if kind is None:
        return None
    raise ValueError(f"pool must be 'avg', 'max' or None, got {kind!r}")


class _Head(nn.Module):
    def __init__(self, kind: str, channels: int, shape: tuple[int, int], out_features: int, **f: Any) -> None:
        super().__init__()
        if kind not in ("flatten", "mean"):
            raise ValueError(f"head must be 'flatten' or 'mean', got {kind!r}")
        self.kind = kind
        n_in = channels * shape[0] * shape[1] if kind == "flatten" else channels
        self.linear = nn.Linear(n_in, out_features, **f)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h.flatten(1) if self.kind == "flatten" else h.flatten(2).mean(-1)
        return self.linear(h)


def _check_in_shape(in_shape: Sequence[int]) -> tuple[int, int, int]:
    if len(in_shape) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in in_shape):
        raise ValueError(f"in_shape must be (channels, height, width) of positive ints, got {in_shape!r}")
    return tuple(in_shape)  # type: ignore[return-value]


class PowerNet(Resettable, nn.Module):
    """A stack of PowerBlocks with 2x2 pooling between them and a linear head (paper §4).

    Pooling halves the grid, so the base matrices are rebuilt for every resolution: ``bases`` is a list of names for
    :func:`~symkit.nn.powernet.bases.make_base` (steps from ``steps``) or a callable ``(h, w) -> [Base, ...]``.
    Block ``i`` has ``channels[i]`` output channels; pooling follows every block but the last. The head is a linear
    map of the flattened final features (``head="flatten"``, position-sensitive, needed to regress a rotation angle)
    or of their per-channel mean (``head="mean"``, invariant to every pixel permutation). ``normalize_terms``
    (default on) divides every term by its RMS gain (:meth:`PowerLayer.term_gains`; a no-op for permutation and
    orthogonal bases such as shifts, rot90 and SW rotations).
    """

    def __init__(
        self,
        bases: Sequence[str] | BaseFactory,
        in_shape: Sequence[int],
        channels: Sequence[int],
        out_features: int,
        *,
        num_layers: int = 2,
        kernel_size: int | Sequence[int] = 5,
        powers: Sequence[Sequence[int]] | None = None,
        dilation: int | Sequence[int] = 1,
        combine: str = "product",
        rho: float = 1.0,
        norm: str | None = "batch",
        pool: str | None = "avg",
        head: str = "flatten",
        steps: Mapping[str, float] | None = None,
        bias: str | None = "channel",
        nonlinearity: nn.Module | None = None,
        generator: torch.Generator | None = None,
        normalize_terms: bool = True,
        init: str = "kaiming",
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        f = factory(device, dtype)
        c, h, w = _check_in_shape(in_shape)
        if callable(bases):
            make_bases = bases
        else:
            names = [bases] if isinstance(bases, str) else list(bases)
            steps = dict(steps or {})
            unknown = set(steps) - set(names)
            if unknown:
                raise ValueError(f"steps given for bases {sorted(unknown)} that are not in bases={names}")

            def make_bases(shape: tuple[int, int]) -> list[Base]:
                return [make_base(name, shape, steps.get(name)) for name in names]

        if not channels:
            raise ValueError("channels must list at least one block width")
        self.factory = make_bases
        blocks: list[nn.Module] = []
        self.shapes: list[tuple[int, int]] = []
        for i, width in enumerate(channels):
            self.shapes.append((h, w))
            blocks.append(
                PowerBlock([b.to(device=device, dtype=dtype) for b in make_bases((h, w))], c, width, num_layers,
                           kernel_size,
                           powers=powers, dilation=dilation, combine=combine, rho=rho, nonlinearity=nonlinearity,
                           norm=norm, bias=bias, generator=generator, normalize_terms=normalize_terms, init=init, **f)
            )
            c = width
            p = _pool(pool)
            if p is not None and i < len(channels) - 1:
                if min(h, w) < 2:
                    raise ValueError(f"cannot pool a {h}x{w} grid after block {i}: use fewer blocks or pool=None")
                blocks.append(p)
                h, w = h // 2, w // 2
        self.blocks = nn.Sequential(*blocks)
        self.head = _Head(head, c, (h, w), out_features, **f)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The final feature maps ``(N, c, h', w')`` before the head."""
        return self.blocks(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class _ConvBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, num_layers: int, kernel_size: int, rho: float,
                 norm: str | None, padding_mode: str, **f: Any) -> None:
        super().__init__()
        chans = [in_channels] + [out_channels] * num_layers
        self.layers = nn.ModuleList(
            nn.Conv2d(chans[i], chans[i + 1], kernel_size, padding=kernel_size // 2, padding_mode=padding_mode, **f)
            for i in range(num_layers)
        )
        norms = {"batch": lambda: nn.BatchNorm2d(out_channels, **f),
                 "layer": lambda: nn.GroupNorm(1, out_channels, **f), None: nn.Identity}
        if norm not in norms:
            raise ValueError(f"norm must be 'batch', 'layer' or None, got {norm!r}")
        self.norms = nn.ModuleList(norms[norm]() for _ in range(num_layers))
        self.act = nn.LeakyReLU(0.2)
        self.rho = float(rho)
        self.skip = (None if self.rho == 0 else nn.Identity() if in_channels == out_channels
                     else nn.Conv2d(in_channels, out_channels, 1, bias=False, **f))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for i, (layer, norm) in enumerate(zip(self.layers, self.norms)):
            h = norm(layer(h))
            if i < len(self.layers) - 1:
                h = self.act(h)
        if self.skip is not None:
            h = h + self.rho * self.skip(x)
        return self.act(h)


class ConvNet(Resettable, nn.Module):
    """The CNN with the block, channel, pooling and head structure of :class:`PowerNet` (``nn.Conv2d`` layers,
    zero padding by default), used as the baseline of the classification experiment."""

    def __init__(
        self,
        in_shape: Sequence[int],
        channels: Sequence[int],
        out_features: int,
        *,
        num_layers: int = 2,
        kernel_size: int = 5,
        rho: float = 1.0,
        norm: str | None = "batch",
        pool: str | None = "max",
        head: str = "flatten",
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        f = factory(device, dtype)
        c, h, w = _check_in_shape(in_shape)
        if not channels:
            raise ValueError("channels must list at least one block width")
        blocks: list[nn.Module] = []
        for i, width in enumerate(channels):
            blocks.append(_ConvBlock(c, width, num_layers, kernel_size, rho, norm, padding_mode, **f))
            c = width
            p = _pool(pool)
            if p is not None and i < len(channels) - 1:
                blocks.append(p)
                h, w = h // 2, w // 2
        self.blocks = nn.Sequential(*blocks)
        self.head = _Head(head, c, (h, w), out_features, **f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))
