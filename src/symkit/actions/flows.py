"""Differentiable one-parameter image transforms (thesis Sec. 4.2, 4.6; notes §1.2).

Conventions (pinned down here, tested in ``tests/measure``):

* **Pixel coordinates.** Pixel ``(row i, column j)`` has its centre at ``(x, y) = (j, i)``; ``y`` points down.
* **Normalized coordinates.** ``u = (p - c) / s`` with ``c = ((W - 1) / 2, (H - 1) / 2)`` the image centre and one
  isotropic scale ``s = (max(H, W) - 1) / 2`` when ``align_corners=True`` (the outer pixel *centres* sit at ±1, as
  with ``F.affine_grid(..., align_corners=True)``), or ``s = max(H, W) / 2`` when ``align_corners=False`` (the
  outer pixel *edges* sit at ±1). Using one scale for both axes keeps rotations true rotations on non-square images.
* **Action.** A flow with generator ``M`` (a 3x3 matrix acting on homogeneous normalized coordinates, last row zero)
  and brightness rate ``beta`` acts by ``(T_t x)(u) = exp(beta t) x(Phi_t(u))`` with ``Phi_t = exp(t M)``: the output
  at ``u`` samples the input at ``Phi_t(u)``. Every flow is an exact one-parameter group, ``T_s T_t = T_{s+t}`` up to
  interpolation, and ``T_0`` is the identity *exactly* (unlike the reference code's stretch).
* **Units.** ``t`` is dimensionless: translation by ``t = 1`` moves by one normalized unit, i.e. ``s`` pixels (see
  :func:`pixels_per_unit`); rotation, shear and hyperbolic rotation are per radian / per unit slope; scale, stretch
  and brightness are logarithmic (factor ``exp(t)``).
* **Interpolation.** Bilinear, written with gathers so it supports ``torch.func.jvp``, reverse mode and higher
  derivatives (``F.grid_sample`` has no forward-mode AD). Padding is ``"reflection"`` (about the outer pixel centres
  for ``align_corners=True``, about the outer edges otherwise, as in ``F.grid_sample``), ``"border"`` or
  ``"zeros"``.
* **Derivative at grid nodes.** At ``t = 0`` every sample lands on a pixel centre, where the bilinear interpolant has
  a kink. The displacement is computed as ``(exp(tM) - I)(p - c) + s b_t`` and added to the integer grid, so at
  ``t = 0`` the sample coordinates are exact integers and ``floor`` selects the same cell everywhere: the derivative
  is always the forward-difference stencil ``x[i + 1] - x[i]`` times the vector field. This makes the Lie derivative
  of a 3x3 convolution under translation vanish in the interior (a naive ``affine_grid`` path lands on ``k - eps``
  for some pixels and mixes forward and backward differences).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
import torch
from torch import Tensor

Padding = Literal["reflection", "border", "zeros"]
_PADDINGS = ("reflection", "border", "zeros")


def _reflect(index: Tensor, n: int, align_corners: bool) -> Tensor:
    """Fold integer indices into ``[0, n)`` by reflection (about centres if ``align_corners`` else edges)."""
    if n == 1:
        return torch.zeros_like(index)
    if align_corners:
        period = 2 * (n - 1)
        m = torch.remainder(index, period)
        return torch.where(m > n - 1, period - m, m)
    period = 2 * n
    m = torch.remainder(index, period)
    return torch.where(m > n - 1, period - 1 - m, m)


def bilinear_sample(
    x: Tensor,
    px: Tensor,
    py: Tensor,
    *,
    padding: Padding = "reflection",
    align_corners: bool = True,
) -> Tensor:
    """Sample images ``x`` (B, C, H, W) at pixel coordinates ``(px, py)`` by bilinear interpolation.

    ``px``/``py`` have shape (H', W') (one grid for the batch) or (B, H', W'); ``px`` is the column and ``py`` the row
    coordinate, pixel centres at integers. The result is (B, C, H', W'). Differentiable in ``x`` and in the
    coordinates to any order in forward and reverse mode; ``floor`` is treated as piecewise constant, so at an
    integer coordinate the derivative is the forward difference.
    """
    if not isinstance(x, Tensor) or x.ndim != 4:
        raise ValueError(
            f"x must be a (B, C, H, W) tensor, got {type(x).__name__} of shape {tuple(getattr(x, 'shape', ()))}"
        )
    if padding not in _PADDINGS:
        raise ValueError(f"padding must be one of {_PADDINGS}, got {padding!r}")
    if px.shape != py.shape or px.ndim not in (2, 3):
        raise ValueError(
            f"px and py must share a (H', W') or (B, H', W') shape, got {tuple(px.shape)} and {tuple(py.shape)}"
        )
    B, C, H, W = x.shape
    if px.ndim == 3 and px.shape[0] != B:
        raise ValueError(f"per-sample grids need batch {B}, got a grid of shape {tuple(px.shape)}")
    x0f = torch.floor(px)
    y0f = torch.floor(py)
    wx = px - x0f
    wy = py - y0f
    x0 = x0f.detach().long()
    y0 = y0f.detach().long()
    x1 = x0 + 1
    y1 = y0 + 1
    masks = None
    if padding == "reflection":
        xs = (_reflect(x0, W, align_corners), _reflect(x1, W, align_corners))
        ys = (_reflect(y0, H, align_corners), _reflect(y1, H, align_corners))
    elif padding == "border":
        xs = (x0.clamp(0, W - 1), x1.clamp(0, W - 1))
        ys = (y0.clamp(0, H - 1), y1.clamp(0, H - 1))
    else:
        xs = (x0.clamp(0, W - 1), x1.clamp(0, W - 1))
        ys = (y0.clamp(0, H - 1), y1.clamp(0, H - 1))
        inx = ((x0 >= 0) & (x0 < W), (x1 >= 0) & (x1 < W))
        iny = ((y0 >= 0) & (y0 < H), (y1 >= 0) & (y1 < H))
        masks = {(a, b): (iny[a] & inx[b]).to(x.dtype) for a in (0, 1) for b in (0, 1)}
    flat = x.reshape(B, C, H * W)
    out_shape = (B, C, *px.shape[-2:])

    def corner(a: int, b: int) -> Tensor:
        idx = (ys[a] * W + xs[b]).reshape(*px.shape[:-2], -1)
        if idx.ndim == 1:
            v = flat.index_select(2, idx)
        else:
            v = torch.gather(flat, 2, idx[:, None, :].expand(B, C, idx.shape[-1]))
        v = v.reshape(out_shape)
        if masks is not None:
            m = masks[(a, b)]
            v = v * (m if m.ndim == 2 else m[:, None])
        return v

    wxb = wx if wx.ndim == 2 else wx[:, None]
    wyb = wy if wy.ndim == 2 else wy[:, None]
    top = corner(0, 0) + wxb * (corner(0, 1) - corner(0, 0))
    bottom = corner(1, 0) + wxb * (corner(1, 1) - corner(1, 0))
    return top + wyb * (bottom - top)


def pixels_per_unit(size: int | tuple[int, int], align_corners: bool = True) -> float:
    """Pixels per normalized unit ``s`` for an image of ``size`` (int or (H, W)); see the module docstring."""
    h, w = (size, size) if isinstance(size, int) else size
    n = max(int(h), int(w))
    if n < 1:
        raise ValueError(f"size must be positive, got {size!r}")
    return (n - 1) / 2 if align_corners else n / 2


def _as_t(t: Tensor | float, like: Tensor) -> Tensor:
    if not isinstance(t, Tensor):
        t = torch.tensor(float(t), dtype=like.dtype, device=like.device)
    elif not t.is_floating_point():
        t = t.to(like.dtype)
    if t.ndim > 1:
        raise ValueError(f"t must be a scalar or a (B,) tensor, got shape {tuple(t.shape)}")
    return t


class ImageFlow:
    """A one-parameter group of image transforms ``(T_t x)(u) = exp(beta t) x(exp(t M) u)`` (module docstring).

    ``generator`` is the 3x3 matrix ``M`` on homogeneous normalized coordinates (last row zero) and ``brightness``
    the rate ``beta``. Flows form a vector space: ``a * f + b * g`` has generator ``a M_f + b M_g`` (thesis App.
    A.3.3.3: all Lie derivatives are linear combinations of the basis ones).
    """

    def __init__(
        self,
        generator: Tensor | list | None = None,
        brightness: float = 0.0,
        *,
        name: str = "flow",
        padding: Padding = "reflection",
        align_corners: bool = True,
    ) -> None:
        M = (
            torch.zeros(3, 3, dtype=torch.float64)
            if generator is None
            else torch.as_tensor(generator, dtype=torch.float64)
        )
        if M.shape == (2, 3):
            M = torch.cat([M, torch.zeros(1, 3, dtype=torch.float64)])
        if M.shape != (3, 3) or bool(M[2].abs().max() > 0):
            raise ValueError(f"generator of {name!r} must be a 2x3 or 3x3 affine generator with last row zero, got {M}")
        if padding not in _PADDINGS:
            raise ValueError(f"padding must be one of {_PADDINGS}, got {padding!r}")
        self.generator = M
        self.brightness = float(brightness)
        self.name = name
        self.padding: Padding = padding
        self.align_corners = bool(align_corners)

    @property
    def is_spatial(self) -> bool:
        return bool(self.generator.abs().max() > 0)

    def __repr__(self) -> str:
        return f"ImageFlow({self.name!r}, padding={self.padding!r}, align_corners={self.align_corners})"

    def _like(self, generator: Tensor, brightness: float, name: str) -> ImageFlow:
        return ImageFlow(generator, brightness, name=name, padding=self.padding, align_corners=self.align_corners)

    def __mul__(self, a: float) -> ImageFlow:
        if not isinstance(a, (int, float)):
            return NotImplemented
        return self._like(self.generator * a, self.brightness * a, f"{a:g}*{self.name}")

    __rmul__ = __mul__

    def __neg__(self) -> ImageFlow:
        return self * -1.0

    def __add__(self, other: ImageFlow) -> ImageFlow:
        if not isinstance(other, ImageFlow):
            return NotImplemented
        if (other.padding, other.align_corners) != (self.padding, self.align_corners):
            raise ValueError(f"cannot add {self!r} and {other!r}: padding / align_corners differ")
        return self._like(
            self.generator + other.generator, self.brightness + other.brightness, f"{self.name}+{other.name}"
        )

    def __sub__(self, other: ImageFlow) -> ImageFlow:
        return self + (-other)

    def with_options(self, *, padding: Padding | None = None, align_corners: bool | None = None) -> ImageFlow:
        """The same flow with other padding / corner conventions."""
        return ImageFlow(
            self.generator,
            self.brightness,
            name=self.name,
            padding=self.padding if padding is None else padding,
            align_corners=self.align_corners if align_corners is None else align_corners,
        )

    def sample_coords(self, t: Tensor, size: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """Pixel coordinates ``Phi_t(p)`` sampled for each output pixel ``p``: (H, W), or (B, H, W) for (B,) ``t``."""
        H, W = size
        dtype = t.dtype
        M = self.generator.to(dtype=dtype, device=t.device)
        E = torch.linalg.matrix_exp(t[..., None, None] * M) - torch.eye(3, dtype=dtype, device=t.device)
        s = pixels_per_unit((H, W), self.align_corners)
        ys = torch.arange(H, dtype=dtype, device=t.device)
        xs = torch.arange(W, dtype=dtype, device=t.device)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        rx, ry = gx - (W - 1) / 2, gy - (H - 1) / 2

        def e(i: int, j: int) -> Tensor:
            return E[..., i, j][..., None, None]

        dx = e(0, 0) * rx + e(0, 1) * ry + s * e(0, 2)
        dy = e(1, 0) * rx + e(1, 1) * ry + s * e(1, 2)
        return gx + dx, gy + dy

    def apply(self, x: Tensor, t: Tensor | float) -> Tensor:
        """``T_t x`` for images (B, C, H, W); ``t`` a scalar or one value per sample (B,)."""
        if not isinstance(x, Tensor) or x.ndim != 4:
            raise ValueError(
                f"{self.name}: expected images of shape (B, C, H, W), got {type(x).__name__} "
                f"of shape {tuple(getattr(x, 'shape', ()))}"
            )
        t = _as_t(t, x)
        if t.ndim == 1 and t.shape[0] != x.shape[0]:
            raise ValueError(f"{self.name}: t has {t.shape[0]} values for a batch of {x.shape[0]}")
        out = x
        if self.is_spatial:
            px, py = self.sample_coords(t, (x.shape[-2], x.shape[-1]))
            out = bilinear_sample(out, px, py, padding=self.padding, align_corners=self.align_corners)
        if self.brightness != 0.0:
            factor = torch.exp(self.brightness * t)
            out = out * (factor if factor.ndim == 0 else factor[:, None, None, None])
        return out

    def __call__(self, x: Tensor, t: Tensor | float) -> Tensor:
        return self.apply(x, t)

    def flows(self) -> tuple[ImageFlow, ...]:
        """A flow is an action with one generator: itself (the protocol shared with the grid actions)."""
        return (self,)

    def grid_generator(self, size: int | tuple[int, int], nyquist: str = "zero") -> np.ndarray:
        """The flow's generator as a ``(H W, H W)`` matrix on the row-major flattened grid (float64).

        With Shannon–Whittaker derivatives ``D_x`` (rows) and ``D_y`` (columns), the pixel velocity
        ``(v_row, v_col)`` of :meth:`velocity` and the brightness rate ``beta``,
        ``G = diag(v_row) D_x + diag(v_col) D_y + beta I``, so ``expm(t G)`` is this flow on band-limited periodic
        images and ``G`` is what a PowerNet base (``expm(step G)``) or the core solver (a Lie algebra element on
        ``R^{H W}``) uses. In the PowerNet paper's Eq. 2 coordinates the six affine coefficients are
        ``(dx, x_dx, y_dx, dy, x_dy, y_dy) = (s M12, M11, M10, s M02, M01, M00)`` with ``s`` pixels per unit.
        """
        from symkit.actions.derivatives import affine_generator, check_grid_shape

        h, w = check_grid_shape(size)
        M = self.generator
        s = pixels_per_unit((h, w), self.align_corners)
        alpha = [s * float(M[1, 2]), float(M[1, 1]), float(M[1, 0]), s * float(M[0, 2]), float(M[0, 1]),
                 float(M[0, 0])]
        G = affine_generator((h, w), alpha, nyquist)
        if self.brightness:
            G = G + self.brightness * np.eye(h * w)
        return G

    def velocity(self, size: tuple[int, int], like: Tensor) -> tuple[Tensor, Tensor]:
        """Pixel velocity ``d/dt Phi_t(p)`` at ``t = 0`` of the sample coordinates, two (H, W) tensors."""
        H, W = size
        M = self.generator.to(dtype=like.dtype, device=like.device)
        s = pixels_per_unit((H, W), self.align_corners)
        ry = (torch.arange(H, dtype=like.dtype, device=like.device) - (H - 1) / 2)[:, None]
        rx = (torch.arange(W, dtype=like.dtype, device=like.device) - (W - 1) / 2)[None, :]
        return M[0, 0] * rx + M[0, 1] * ry + s * M[0, 2], M[1, 0] * rx + M[1, 1] * ry + s * M[1, 2]

    def _next(self, x: Tensor, dim: int) -> Tensor:
        """``x`` shifted by one pixel towards lower indices along ``dim``, the far edge filled by the padding."""
        n = x.shape[dim]
        if self.padding == "zeros":
            edge = torch.zeros_like(x.narrow(dim, 0, 1))
        else:
            j = n - 2 if (self.padding == "reflection" and self.align_corners and n > 1) else n - 1
            edge = x.narrow(dim, j, 1)
        return torch.cat([x.narrow(dim, 1, n - 1), edge], dim=dim)

    def tangent(self, x: Tensor) -> Tensor:
        """``d/dt T_t x`` at ``t = 0``: the generator applied to images ``x`` (B, C, H, W).

        Equals the forward-mode derivative of :meth:`apply` at 0 (tested), computed directly with the
        forward-difference stencil: ``v_x(p) (x[p + e_x] - x[p]) + v_y(p) (x[p + e_y] - x[p]) + beta x[p]``.
        """
        if not isinstance(x, Tensor) or x.ndim != 4:
            raise ValueError(
                f"{self.name}: expected images of shape (B, C, H, W), got {tuple(getattr(x, 'shape', ()))}"
            )
        out = self.brightness * x if self.brightness != 0.0 else torch.zeros_like(x)
        if self.is_spatial:
            vx, vy = self.velocity((x.shape[-2], x.shape[-1]), x)
            out = out + vx * (self._next(x, -1) - x) + vy * (self._next(x, -2) - x)
        return out


def _g(entries: Mapping[tuple[int, int], float]) -> Tensor:
    M = torch.zeros(3, 3, dtype=torch.float64)
    for (i, j), v in entries.items():
        M[i, j] = v
    return M


# Generators on sampling coordinates, matching the reference families at first order (notes §1.2 table).
_BUILTIN: dict[str, tuple[Tensor, float]] = {
    "translate_x": (_g({(0, 2): 1.0}), 0.0),
    "translate_y": (_g({(1, 2): 1.0}), 0.0),
    "rotate": (_g({(0, 1): 1.0, (1, 0): -1.0}), 0.0),
    "scale": (_g({(0, 0): -1.0, (1, 1): -1.0}), 0.0),
    "shear_x": (_g({(0, 1): 1.0}), 0.0),
    "shear_y": (_g({(1, 0): 1.0}), 0.0),
    "stretch_x": (_g({(0, 0): 1.0}), 0.0),
    "stretch_y": (_g({(1, 1): 1.0}), 0.0),
    "hyperbolic_rotate": (_g({(0, 1): 1.0, (1, 0): 1.0}), 0.0),
    "brightness": (_g({}), 1.0),
}
TRANSFORM_NAMES: tuple[str, ...] = tuple(_BUILTIN)
SPATIAL_TRANSFORMS: tuple[str, ...] = tuple(n for n in _BUILTIN if n != "brightness")


def get_transform(
    transform: str | ImageFlow, *, padding: Padding | None = None, align_corners: bool | None = None
) -> ImageFlow:
    """A built-in flow by name (see ``TRANSFORM_NAMES``), an :class:`ImageFlow` passed through, or the single flow
    of an action (any object with ``.flows()``, e.g. ``Rotations90(n)`` gives ``rotate``)."""
    if isinstance(transform, ImageFlow):
        flow = transform
    elif callable(getattr(transform, "flows", None)) and not isinstance(transform, str):
        flows = transform.flows()
        if len(flows) != 1:
            names = ", ".join(f.name for f in flows) or "none"
            raise ValueError(
                f"{transform!r} has {len(flows)} flows ({names}); a Lie derivative needs one: pick one of "
                f"its .flows(), or use lee_table(model, data, {transform!r}) for all of them"
            )
        flow = flows[0]
    elif isinstance(transform, str):
        if transform not in _BUILTIN:
            raise ValueError(f"unknown transform {transform!r}; valid names: {', '.join(TRANSFORM_NAMES)}")
        M, beta = _BUILTIN[transform]
        flow = ImageFlow(M, beta, name=transform)
    else:
        raise TypeError(f"transform must be a name, an ImageFlow or an action, got {type(transform).__name__}")
    if padding is not None or align_corners is not None:
        flow = flow.with_options(padding=padding, align_corners=align_corners)
    return flow


def translate_pixels(
    x: Tensor, dx: Tensor | float, dy: Tensor | float = 0.0, *, padding: Padding = "reflection"
) -> Tensor:
    """Shift images so that content moves by ``(dx, dy)`` pixels (right, down); no wrap-around.

    Integer shifts are exact (no interpolation); out-of-image samples use ``padding``.
    """
    B, _, H, W = x.shape
    dx = _as_t(dx, x)
    dy = _as_t(dy, x)
    gy, gx = torch.meshgrid(
        torch.arange(H, dtype=x.dtype, device=x.device), torch.arange(W, dtype=x.dtype, device=x.device), indexing="ij"
    )
    if dx.ndim == 1 or dy.ndim == 1:
        dx, dy = torch.broadcast_to(dx, (B,)), torch.broadcast_to(dy, (B,))
        px, py = gx - dx[:, None, None], gy - dy[:, None, None]
    else:
        px, py = gx - dx, gy - dy
    return bilinear_sample(x, px, py, padding=padding, align_corners=True)


__all__ = [
    "ImageFlow",
    "SPATIAL_TRANSFORMS",
    "TRANSFORM_NAMES",
    "bilinear_sample",
    "get_transform",
    "pixels_per_unit",
    "translate_pixels",
]
