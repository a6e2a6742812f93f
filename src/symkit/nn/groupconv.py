"""Group convolutions for the rotation-translation group p4 (Cohen & Welling 2016): quarter-turn equivariant CNNs.

A p4 feature map has shape ``(N, C * 4, H, W)``, channel-major and rotation-minor: channel ``c * 4 + r`` holds the
response of filter ``c`` rotated by ``r`` quarter turns. Rotating the input by a quarter turn
(``torch.rot90(x, 1, (2, 3))``) rotates every map and shifts the rotation axis by one: ``r -> r + 1 (mod 4)``.

- :class:`P4LiftConv2d`: ``out[c, s] = x ⋆ rot^s(w_c)`` (an image to a p4 map).
- :class:`P4Conv2d`: ``out[c', s] = sum_{c, r} f[c, r] ⋆ rot^s(w[c', c, r - s])`` (p4 map to p4 map).
- :class:`P4BatchNorm2d`: one mean and variance per filter, shared by its 4 rotations.
- :class:`P4CNN`: lift, p4 convolutions with batch norm and ReLU, 2x2 max pooling, a pool over positions *and*
  rotations, and a linear head: its logits are invariant to quarter turns of the input (for square, even-sized
  inputs, where zero padding and 2x2 pooling commute with the rotation).

Each layer builds its whole filter bank once per forward pass and runs one ``conv2d``, so the cost is that of a
plain convolution with 4x the channels, while the weights are 4x (lifting) or 16x (group convolution) fewer.

Every layer has ``check_equivariance(inputs=None)``: the quarter turns act on images by
:class:`~symkit.actions.Rotations90` and on p4 maps by :class:`~symkit.actions.P4Maps`, built for the size of the
checked input (by default a batch of 8 x 8 standard normal inputs); the check runs in ``eval()`` mode, so batch-norm
running statistics are neither used from the batch nor updated, and restores the layer's mode afterwards.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from symkit.actions.grid import P4Maps, PermAction, Rotations90
from symkit.nn._equivariance import Equivariant, standard_normal
from symkit.nn._factory import Resettable, factory, place
from symkit.nn.vision import norm_kind

__all__ = ["P4BatchNorm2d", "P4CNN", "P4Conv2d", "P4LiftConv2d", "rotate_p4"]


def _check_counts(who: str, **values: int) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{who}: {name} must be an int >= 1, got {v!r}")


def _uniform_(param: Tensor, bound: float) -> None:
    """Fill ``param`` with U(-bound, bound) drawn on the CPU from the global generator, whatever its device (so a
    model built on any device starts from the same numbers)."""
    with torch.no_grad():
        param.copy_(torch.empty(param.shape, dtype=torch.float64).uniform_(-bound, bound))


def rotate_p4(f: Tensor, k: int = 1) -> Tensor:
    """The action of ``k`` quarter turns on a p4 map ``(N, C * 4, H, W)``: rotate each map and shift the rotation
    axis by ``k`` (what :class:`P4Conv2d` commutes with)."""
    if f.dim() != 4 or f.shape[1] % 4:
        raise ValueError(f"rotate_p4 expects (N, C * 4, H, W), got {tuple(f.shape)}")
    n, c4, h, w = f.shape
    g = f.reshape(n, c4 // 4, 4, h, w).roll(k, dims=2).reshape(n, c4, h, w)
    return torch.rot90(g, k, dims=(2, 3))


class _QuarterTurns(Equivariant):
    """``check_equivariance`` for layers that take images or p4 maps of any square size: the declared actions are
    built for a grid size (module docstring). Subclasses say what they take and give (``_takes``/``_gives``:
    ``"image"``, ``"p4"`` or ``"invariant"``) and their counts (:meth:`_counts`: image channels or p4 filters)."""

    _takes: str = "p4"
    _gives: str = "p4"
    _default_size: int = 8

    def _counts(self) -> tuple[int, int]:
        """(channels or filters in, filters out)."""
        raise NotImplementedError

    def declared_symmetry(self, size: int | None = None) -> tuple[PermAction, PermAction]:
        """``(action_in, action_out)`` on ``size x size`` grids (default: the size :meth:`example_input` draws)."""
        n = self._default_size if size is None else size
        c_in, c_out = self._counts()
        turns = Rotations90(n)
        action_in = turns if self._takes == "image" else P4Maps(n, c_in)
        action_out = turns.trivial() if self._gives == "invariant" else P4Maps(n, c_out)
        return action_in, action_out

    def example_input(self, batch: int = 4, generator: torch.Generator | None = None) -> Tensor:
        """``(batch, C, n, n)`` standard normal inputs (``C = 4 x filters`` for p4 maps), ``n = _default_size``."""
        c_in = self._counts()[0] * (1 if self._takes == "image" else 4)
        return standard_normal(self, (batch, c_in, self._default_size, self._default_size), generator)

    def check_equivariance(self, inputs: Tensor | None = None, *, tol: float | None = None, n: int = 5,
                           seed: int = 0) -> float:
        """:meth:`Equivariant.check_equivariance` with the actions built for the size of ``inputs`` (square
        ``(N, C, n, n)``), in ``eval()`` mode (the layer's mode is restored afterwards)."""
        from symkit.testing import assert_equivariant

        if inputs is None:
            inputs = self.example_input(generator=torch.Generator().manual_seed(seed))
        if not isinstance(inputs, Tensor) or inputs.dim() != 4 or inputs.shape[-1] != inputs.shape[-2]:
            got = tuple(inputs.shape) if isinstance(inputs, Tensor) else type(inputs).__name__
            raise ValueError(f"{type(self).__name__}.check_equivariance: inputs must be square (N, C, n, n), got {got}")
        action_in, action_out = self.declared_symmetry(int(inputs.shape[-1]))
        was_training = self.training
        self.eval()
        try:
            return assert_equivariant(self, action_in, action_out, tol=tol, n=n, seed=seed, inputs=inputs)
        finally:
            self.train(was_training)


class _P4Conv(_QuarterTurns, nn.Module):
    """What the lifting and the group convolution share: a ``k x k`` kernel (odd ``k``, ``padding = k // 2`` keeps
    the size), one bias per filter shared by its rotations, nn.Conv2d's initialisation for the fan-in, and one
    ``conv2d`` with the filter bank of :meth:`filters`. ``rotations`` is 1 on images, 4 on p4 maps."""

    rotations = 1

    def _counts(self) -> tuple[int, int]:
        return self.in_channels, self.out_channels

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, bias: bool = True,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        who = type(self).__name__
        _check_counts(who, in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size)
        if kernel_size % 2 == 0:
            raise ValueError(f"{who}: kernel_size must be odd (symmetric padding), got {kernel_size}")
        f = factory(device, dtype)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        axis = (self.rotations,) if self.rotations > 1 else ()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, *axis, kernel_size, kernel_size, **f))
        self.bias = nn.Parameter(torch.empty(out_channels, **f)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / (self.rotations * self.in_channels * self.kernel_size**2) ** 0.5  # nn.Conv2d's fan-in rule
        _uniform_(self.weight, bound)
        if self.bias is not None:
            _uniform_(self.bias, bound)

    def filters(self) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        c = self.rotations * self.in_channels
        if x.dim() != 4 or x.shape[1] != c:
            per = f" (= {self.in_channels} filters x 4 rotations)" if self.rotations > 1 else ""
            raise ValueError(f"{type(self).__name__} expects (N, {c}, H, W){per}, got {tuple(x.shape)}")
        bias = None if self.bias is None else self.bias.repeat_interleave(4)
        return F.conv2d(x, self.filters(), bias, padding=self.kernel_size // 2)


class P4LiftConv2d(_P4Conv):
    """Lifting convolution: ``(N, C_in, H, W) -> (N, C_out * 4, H, W)``, ``out[c, s] = x ⋆ rot^s(w_c)``;
    ``C_out C_in k^2`` weights."""

    _takes = "image"

    def filters(self) -> Tensor:
        """The bank ``(C_out * 4, C_in, k, k)``: filter ``c`` rotated by ``s`` quarter turns at row ``c * 4 + s``."""
        bank = torch.stack([torch.rot90(self.weight, s, dims=(2, 3)) for s in range(4)], dim=1)
        return bank.reshape(self.out_channels * 4, self.in_channels, self.kernel_size, self.kernel_size)


class P4Conv2d(_P4Conv):
    """p4 group convolution: ``(N, C_in * 4, H, W) -> (N, C_out * 4, H, W)``,
    ``out[c', s] = sum_{c, r} f[c, r] ⋆ rot^s(w[c', c, (r - s) mod 4])``; ``4 C_out C_in k^2`` weights."""

    rotations = 4

    def filters(self) -> Tensor:
        """The bank ``(C_out * 4, C_in * 4, k, k)``: row ``c' * 4 + s``, column ``c * 4 + r`` holds
        ``rot^s(w[c', c, (r - s) mod 4])``."""
        k = self.kernel_size
        bank = torch.stack([torch.rot90(self.weight.roll(s, dims=2), s, dims=(3, 4)) for s in range(4)], dim=1)
        return bank.reshape(self.out_channels * 4, self.in_channels * 4, k, k)


class P4BatchNorm2d(_QuarterTurns, nn.BatchNorm3d):
    """Batch norm of a p4 map with one mean, variance, scale and shift per filter, shared by its 4 rotations (so it
    commutes with :func:`rotate_p4`)."""

    def _counts(self) -> tuple[int, int]:
        return self.num_features, self.num_features

    def __init__(self, channels: int, device: Any = None, dtype: torch.dtype | None = None) -> None:
        _check_counts("P4BatchNorm2d", channels=channels)
        super().__init__(channels, **factory(device, dtype))

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != 4 * self.num_features:
            raise ValueError(f"P4BatchNorm2d expects (N, {4 * self.num_features}, H, W), got {tuple(x.shape)}")
        n, c4, h, w = x.shape
        return super().forward(x.reshape(n, c4 // 4, 4, h, w)).reshape(n, c4, h, w)


class P4CNN(Resettable, _QuarterTurns, nn.Module):
    """A quarter-turn invariant classifier with the layout of :class:`symkit.nn.vision.SmallCNN`: per stage two
    3x3 p4 convolutions (the first lifts) with batch norm and ReLU, 2x2 max pooling between stages, then the mean
    over positions and rotations and a linear head. ``width`` counts filters (each has 4 rotations), so a
    ``SmallCNN`` of twice the width has about the same number of weights in its hidden convolutions.
    ``norm``: ``"batch"`` (or True) is :class:`P4BatchNorm2d`; ``"group"`` normalises each sample over a filter's
    4 rotations and the positions (``nn.GroupNorm`` with one group per filter, no affine parameters, no running
    statistics); ``"none"`` (or False) drops the norms and gives the convolutions biases."""

    _takes, _gives = "image", "invariant"

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 8, stages: int = 2,
                 norm: bool | str = True, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        _check_counts("P4CNN", in_channels=in_channels, num_classes=num_classes, width=width, stages=stages)
        kind = norm_kind("P4CNN", norm)
        layers: list[nn.Module] = []
        c_in = in_channels
        for i in range(stages):
            c_out = width * 2**i
            bias = kind == "none"
            first = P4LiftConv2d(c_in, c_out, 3, bias=bias) if i == 0 else P4Conv2d(c_in, c_out, 3, bias=bias)
            for conv in (first, P4Conv2d(c_out, c_out, 3, bias=bias)):
                layers.append(conv)
                if kind == "batch":
                    layers.append(P4BatchNorm2d(c_out))
                elif kind == "group":
                    layers.append(nn.GroupNorm(c_out, 4 * c_out, affine=False))
                layers.append(nn.ReLU())
            if i < stages - 1:
                layers.append(nn.MaxPool2d(2))
            c_in = c_out
        self.features = nn.Sequential(*layers)
        self.channels = c_in
        self.head = nn.Linear(c_in, num_classes)
        self.in_channels = in_channels
        self._default_size = 4 * 2 ** (stages - 1)  # even at every stage, so 2x2 pooling commutes with quarter turns
        place(self, device, dtype)

    def _counts(self) -> tuple[int, int]:
        return self.in_channels, self.head.out_features

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"P4CNN expects square images (N, C, H, H), got {tuple(x.shape)}")
        f = self.features(x)
        pooled = f.reshape(f.shape[0], self.channels, -1).mean(dim=-1)  # over rotations and positions
        return self.head(pooled)
