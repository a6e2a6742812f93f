"""Paths of a relaxed (learnable-equivariance) layer, NCHW on square grids.

Every path is a linear map of the feature map (van der Ouderaa, Immer & van der Wilk 2023, §3):

- :class:`SpatialFC2d`: dense map, Eq. 1, ``C'CX²Y²`` weights (+ a bias per output pixel).
- :class:`EquivConv2d`: circular convolution, Eq. 3, ``C'CS²`` weights; stride 2 is a stride-1 circular convolution
  followed by per-sample polyphase subsampling (APS, App. F.2), so the path stays exactly translation-equivariant.
- :class:`FactoredFC2d` (F-FC, Eq. 5): ``θ(c',c,x',y',x,y) = θ₁(c',c,x',y') θ₂(c',c,x,y)``.
- :class:`SparseConv2d` (S-CONV, Eq. 6) and :class:`SparseFC2d` (S-FC, Eq. 7): weights interpolated from anchor values.
- :class:`P4PointwiseConv2d`: the pointwise p4 group convolution of App. F.3 (one circular convolution shared by
  the four rotated copies of a lifted input).

Each path records, while a :class:`symkit.nn.relaxed.record.SiteRecorder` is active, the layer inputs and outputs its
Kronecker factors need (App. C). The inputs are recorded in the graph (not detached): the input factors of the anchor
layers, ``ΦAΦᵀ``, depend on the length-scale ω, and ``symkit.marglik.omega`` differentiates through them; the curvature
fit detaches them otherwise. ``symmetry`` tags the path ("fc", "conv" or "gconv") for priors and diagnostics.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from symkit._checks import check_int
from symkit.actions.grid import CyclicTranslations2D, PermAction
from symkit.nn._equivariance import Equivariant, standard_normal
from symkit.nn._factory import Resettable, place
from symkit.nn.relaxed.record import record_site


def _check_input(module: nn.Module, x: torch.Tensor, channels: int, size: int | None) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"{type(module).__name__} expects an (N, C, H, W) tensor, got {getattr(x, 'shape', x)!r}")
    if x.shape[1] != channels or (size is not None and tuple(x.shape[2:]) != (size, size)):
        want = f"(N, {channels}, {size}, {size})" if size is not None else f"(N, {channels}, H, W)"
        raise ValueError(f"{type(module).__name__} expects input of shape {want}, got {tuple(x.shape)}")


def aps_subsample(x: torch.Tensor, stride: int = 2, p: float = math.inf) -> torch.Tensor:
    """Adaptive polyphase subsampling (Chaman & Dokmanic 2021), chosen per sample.

    Of the ``stride²`` polyphase components ``x[:, :, i::s, j::s]`` keep, for each sample, the one with the largest
    ℓp norm (ℓ∞ by default, App. F.2). A circular shift of the input then shifts the output circularly (barring ties).
    """
    if stride == 1:
        return x
    h, w = x.shape[-2:]
    if h % stride or w % stride:
        raise ValueError(f"aps_subsample: spatial size {(h, w)} is not divisible by stride {stride}")
    comps = torch.stack([x[:, :, i::stride, j::stride] for i in range(stride) for j in range(stride)], dim=1)
    flat = comps.detach().flatten(2)
    norms = flat.abs().amax(-1) if math.isinf(p) else flat.norm(p=p, dim=-1)
    idx = norms.argmax(dim=1)
    return comps[torch.arange(x.shape[0], device=x.device), idx]


def circular_pad(x: torch.Tensor, k: int) -> torch.Tensor:
    """Pad by ``k // 2`` on each side with wrap-around, so a 'same' convolution commutes with circular shifts."""
    p = k // 2
    return F.pad(x, (p, p, p, p), mode="circular") if p else x


def unfold_circular(x: torch.Tensor, k: int) -> torch.Tensor:
    """Patches ``(N, H*W, C*k*k)`` of a circularly padded input (the KFC input of a stride-1 'same' convolution)."""
    return F.unfold(circular_pad(x, k), kernel_size=k).transpose(1, 2)


class _Path(Resettable, Equivariant, nn.Module):
    """A path: a linear map from ``(N, C, H, W)`` to ``(N, C', H/s, W/s)`` tagged with its symmetry."""

    symmetry: str = "fc"

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int = 1) -> None:
        super().__init__()
        self.in_channels = check_int("in_channels", in_channels, 1)
        self.out_channels = check_int("out_channels", out_channels, 1)
        self.size = check_int("size", size, 1)
        self.stride = check_int("stride", stride, 1)
        if size % stride:
            raise ValueError(f"{type(self).__name__}: size {size} is not divisible by stride {stride}")
        self.out_size = size // stride

    def extra_repr(self) -> str:
        return f"{self.in_channels}->{self.out_channels}, size={self.size}, stride={self.stride}"

    def declared_symmetry(self) -> tuple[PermAction, PermAction]:
        """A stride-1 circular convolution commutes with the cyclic translations of its grid (Eq. 3); other paths
        (dense, factored, sparse, strided) are built to relax that symmetry and declare none."""
        if self.symmetry == "conv" and self.stride == 1:
            shifts = CyclicTranslations2D(self.size)
            return shifts, shifts
        raise TypeError(f"{type(self).__name__} (symmetry {self.symmetry!r}, stride {self.stride}) is not built to "
                        "commute with a group action on its grid")

    def example_input(self, batch: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(batch, in_channels, size, size)`` standard normal features."""
        return standard_normal(self, (batch, self.in_channels, self.size, self.size), generator)


class EquivConv2d(_Path):
    """Circular ``k×k`` convolution (Eq. 3), then APS subsampling if ``stride > 1``; ``C'Ck² + C'`` parameters."""

    symmetry = "conv"

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int = 1, kernel_size: int = 3,
                 bias: bool = True, generator: torch.Generator | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(in_channels, out_channels, size, stride)
        self.kernel_size = check_int("kernel_size", kernel_size, 1)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd for a centred circular convolution, got {kernel_size}")
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        if self.weight.device.type != "meta":
            bound = math.sqrt(6.0 / (in_channels * kernel_size**2))  # Kaiming uniform, ReLU gain
            with torch.no_grad():
                self.weight.uniform_(-bound, bound, generator=generator)
        place(self, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x, self.in_channels, None)
        out = F.conv2d(circular_pad(x, self.kernel_size), self.weight, self.bias)
        record_site(self, "weight", self.weight, self.bias, lambda: unfold_circular(x, self.kernel_size),
                    out, lambda g: g.flatten(2).transpose(1, 2))
        return aps_subsample(out, self.stride)


class SpatialFC2d(_Path):
    """Dense map (Eq. 1) from ``C×H×W`` to ``C'×(H/s)×(W/s)``; ``CHW·C'H'W' + C'H'W'`` parameters."""

    symmetry = "fc"

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int = 1, bias: bool = True,
                 generator: torch.Generator | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(in_channels, out_channels, size, stride)
        d_in = in_channels * size * size
        d_out = out_channels * self.out_size**2
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None
        if self.weight.device.type != "meta":
            bound = 1.0 / math.sqrt(d_in)
            with torch.no_grad():
                self.weight.uniform_(-bound, bound, generator=generator)
        place(self, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x, self.in_channels, self.size)
        a = x.flatten(1)
        out = F.linear(a, self.weight, self.bias)
        record_site(self, "weight", self.weight, self.bias, lambda: a.unsqueeze(1), out,
                    lambda g: g.unsqueeze(1))
        return out.view(x.shape[0], self.out_channels, self.out_size, self.out_size)


class FactoredFC2d(_Path):
    """F-FC (Eq. 5): ``y(c',x') = Σ_c θ₁(c',c,x') Σ_x x(c,x) θ₂(c',c,x)`` plus biases.

    ``theta2`` has shape ``(C', C, HW)`` and bias ``(C',)``; ``theta1`` has shape ``(H'W', C', C)`` and bias
    ``(H'W',)``: ``C'C·HW + C' + H'W'·C'C + H'W'`` parameters, as in the paper's code (App. C.1 layout).
    """

    symmetry = "fc"

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int = 1, bias: bool = True,
                 generator: torch.Generator | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(in_channels, out_channels, size, stride)
        hw, ohw = size * size, self.out_size**2
        self.theta2 = nn.Parameter(torch.empty(out_channels, in_channels, hw))
        self.bias2 = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.theta1 = nn.Parameter(torch.empty(ohw, out_channels, in_channels))
        self.bias1 = nn.Parameter(torch.zeros(ohw)) if bias else None
        if self.theta2.device.type != "meta":
            with torch.no_grad():
                b2, b1 = math.sqrt(3.0 / hw), math.sqrt(3.0 / in_channels)
                self.theta2.uniform_(-b2, b2, generator=generator)
                self.theta1.uniform_(-b1, b1, generator=generator)
        place(self, device, dtype)

    def dense_weight(self) -> torch.Tensor:
        """The equivalent dense FC weight ``(C'H'W', CHW)``: rank 1 for every channel pair (c', c)."""
        w = torch.einsum("odc,dcx->docx", self.theta1, self.theta2)
        return w.reshape(self.out_channels * self.out_size**2, self.in_channels * self.size**2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x, self.in_channels, self.size)
        xf = x.flatten(2)  # (N, C, HW)
        x1 = torch.einsum("bcx,dcx->bdc", xf, self.theta2)
        if self.bias2 is not None:
            x1 = x1 + self.bias2[None, :, None]
        record_site(self, "theta2", self.theta2, self.bias2, lambda: xf, x1, lambda g: g.transpose(1, 2),
                    block_diag=True)
        y = torch.einsum("odc,bdc->bdo", self.theta1, x1)
        if self.bias1 is not None:
            y = y + self.bias1
        record_site(self, "theta1", self.theta1, self.bias1, lambda: x1, y, lambda g: g, block_diag=True)
        return y.reshape(x.shape[0], self.out_channels, self.out_size, self.out_size)


def centred_grid(n: int) -> torch.Tensor:
    """The ``n×n`` pixel coordinates, centred: ``(n², 2)`` from ``-(n-1)/2`` to ``(n-1)/2`` (row-major)."""
    r = torch.arange(n, dtype=torch.float64) - (n - 1) / 2
    return torch.cartesian_prod(r, r)


def n_anchors(n_points: int, factor: float = 0.5) -> int:
    """Number of anchors ``⌈factor·n⌉`` (App. F.4 rounds half the grid upwards: 9 → 5, 1024 → 512)."""
    if not 0 < factor <= 1:
        raise ValueError(f"anchor factor must be in (0, 1], got {factor!r}")
    return max(1, math.ceil(factor * n_points - 1e-9))


class AnchorBasis(Resettable, nn.Module):
    """Kernel-interpolation basis ``Φ = (K_ZZ + σ_n² I)⁻¹ K_ZT`` (App. F.4; the authors' code convention).

    ``k(z, t) = (10⁻⁶ + s²) exp(-½ ω² |z - t|²)`` between ``M`` anchors ``Z`` (random in the grid's bounding box,
    a fixed buffer) and the ``n×n`` grid ``T``. ``omega`` is a per-layer scalar, learnable if ``learn_omega``.
    Weights on the grid are ``u @ Φ`` for anchor values ``u``; with ``plain=True`` Φ is the paper's bare bumps
    ``exp(-ω² |z - t|²)`` instead.
    """

    def __init__(self, n: int, factor: float = 0.5, omega: float = 1.0, learn_omega: bool = False,
                 noise: float = 0.01, scale: float = 1.0, plain: bool = False,
                 generator: torch.Generator | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.n = check_int("n", n, 1)
        self.m = n_anchors(n * n, factor)
        grid = centred_grid(n)
        lo, hi = grid.min(0).values, grid.max(0).values
        if self.m >= n * n:
            z = grid.clone()
        else:
            z = lo + (hi - lo) * torch.rand(self.m, 2, generator=generator, dtype=torch.float64)
        default = torch.get_default_dtype()  # anchors drawn in float64, stored in the default dtype
        self.register_buffer("grid", grid.to(default))
        self.register_buffer("anchors", z.to(default))
        log_omega = torch.tensor(math.log(omega))
        self.log_omega = nn.Parameter(log_omega) if learn_omega else None
        if not learn_omega:
            self.register_buffer("log_omega_fixed", log_omega)
        self.noise, self.scale, self.plain = float(noise), float(scale), bool(plain)
        place(self, device, dtype)

    @property
    def omega(self) -> torch.Tensor:
        return (self.log_omega if self.log_omega is not None else self.log_omega_fixed).exp()

    def forward(self) -> torch.Tensor:
        """Φ, shape ``(M, n²)``."""
        z, t = self.anchors.double(), self.grid.double()
        w2 = self.omega.double() ** 2
        if self.plain:
            return torch.exp(-w2 * torch.cdist(z, t) ** 2).to(self.grid.dtype)
        amp = 1e-6 + self.scale**2
        kzz = amp * torch.exp(-0.5 * w2 * torch.cdist(z, z) ** 2)
        kzt = amp * torch.exp(-0.5 * w2 * torch.cdist(z, t) ** 2)
        eye = torch.eye(self.m, dtype=torch.float64, device=z.device)
        return torch.linalg.solve(kzz + self.noise**2 * eye, kzt).to(self.grid.dtype)


def _fit_anchor_values(dense: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """Least-squares anchor values ``u`` with ``u @ Φ ≈ dense`` (the ``reduce`` initialiser)."""
    sol = torch.linalg.lstsq(phi.T.double(), dense.reshape(-1, dense.shape[-1]).T.double()).solution
    return sol.T.reshape(*dense.shape[:-1], phi.shape[0]).to(dense.dtype)


class SparseConv2d(_Path):
    """S-CONV (Eq. 6): a circular ``k×k`` convolution whose filter is ``u @ Φ`` for ``M = ⌈k²/2⌉`` anchors.

    ``u`` has shape ``(C', C, M)``; ``C'CM + C'`` parameters (anchor locations are fixed buffers).
    """

    symmetry = "conv"

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int = 1, kernel_size: int = 3,
                 factor: float = 0.5, omega: float = 1.0, learn_omega: bool = False, bias: bool = True,
                 generator: torch.Generator | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(in_channels, out_channels, size, stride)
        self.kernel_size = check_int("kernel_size", kernel_size, 1)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd, got {kernel_size}")
        self.basis = AnchorBasis(kernel_size, factor, omega, learn_omega, generator=generator)
        self.u = nn.Parameter(torch.empty(out_channels, in_channels, self.basis.m))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        if self.u.device.type != "meta":
            bound = math.sqrt(6.0 / (in_channels * kernel_size**2))
            dense = torch.empty(out_channels, in_channels, kernel_size**2).uniform_(-bound, bound, generator=generator)
            with torch.no_grad():
                self.u.copy_(_fit_anchor_values(dense, self.basis()))
        place(self, device, dtype)

    def filter(self) -> torch.Tensor:
        """The induced filter ``(C', C, k, k)``."""
        k = self.kernel_size
        return (self.u @ self.basis()).view(self.out_channels, self.in_channels, k, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x, self.in_channels, None)
        phi = self.basis()
        k = self.kernel_size
        w = (self.u @ phi).view(self.out_channels, self.in_channels, k, k)
        out = F.conv2d(circular_pad(x, k), w, self.bias)

        def a_fn() -> torch.Tensor:  # patches projected on the basis: (N, HW, C*M)
            p = unfold_circular(x, k)
            p = p.view(*p.shape[:2], self.in_channels, k * k) @ phi.T
            return p.flatten(2)

        record_site(self, "u", self.u, self.bias, a_fn, out, lambda g: g.flatten(2).transpose(1, 2))
        return aps_subsample(out, self.stride)


class SparseFC2d(_Path):
    """S-FC (Eq. 7): F-FC with ``θ₂ = u₂ @ Φ₂`` (input grid) and ``θ₁ = Φ₁ᵀ u₁`` (output grid).

    ``u2`` is ``(C', C, ⌈HW/2⌉)`` with a bias ``(C',)``; ``u1`` is ``(⌈H'W'/2⌉, C', C)`` without bias, as in the
    paper's code: ``C'C·⌈HW/2⌉ + C' + ⌈H'W'/2⌉·C'C`` parameters.
    """

    symmetry = "fc"

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int = 1, factor: float = 0.5,
                 omega: float = 1.0, learn_omega: bool = False, bias: bool = True,
                 generator: torch.Generator | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(in_channels, out_channels, size, stride)
        self.basis2 = AnchorBasis(size, factor, omega, learn_omega, generator=generator)
        self.basis1 = AnchorBasis(self.out_size, factor, omega, learn_omega, generator=generator)
        self.u2 = nn.Parameter(torch.empty(out_channels, in_channels, self.basis2.m))
        self.bias2 = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.u1 = nn.Parameter(torch.empty(self.basis1.m, out_channels, in_channels))
        if self.u2.device.type != "meta":
            hw, ohw = size * size, self.out_size**2
            b2, b1 = math.sqrt(3.0 / hw), math.sqrt(3.0 / in_channels)
            d2 = torch.empty(out_channels, in_channels, hw).uniform_(-b2, b2, generator=generator)
            d1 = torch.empty(out_channels, in_channels, ohw).uniform_(-b1, b1, generator=generator)
            with torch.no_grad():
                self.u2.copy_(_fit_anchor_values(d2, self.basis2()))
                self.u1.copy_(_fit_anchor_values(d1, self.basis1()).permute(2, 0, 1))
        place(self, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x, self.in_channels, self.size)
        phi2, phi1 = self.basis2(), self.basis1()
        xf = x.flatten(2)
        theta2 = self.u2 @ phi2  # (C', C, HW)
        x1 = torch.einsum("bcx,dcx->bdc", xf, theta2)
        if self.bias2 is not None:
            x1 = x1 + self.bias2[None, :, None]
        record_site(self, "u2", self.u2, self.bias2, lambda: xf @ phi2.T, x1,
                    lambda g: g.transpose(1, 2), block_diag=True)
        z = torch.einsum("mdc,bdc->bdm", self.u1, x1)  # anchor-space output, then onto the grid
        y = z @ phi1
        record_site(self, "u1", self.u1, None, lambda: x1, z, lambda g: g, block_diag=True)
        return y.reshape(x.shape[0], self.out_channels, self.out_size, self.out_size)


def lift_p4(x: torch.Tensor) -> torch.Tensor:
    """Lift ``(N, C, H, W)`` to the p4 group: ``(N, 4C, H, W)``, the 4 copies ``rot90(x, k)`` stacked group-major."""
    if x.dim() != 4 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"lift_p4 expects a square (N, C, H, W) tensor, got {tuple(x.shape)}")
    return torch.cat([torch.rot90(x, k, dims=(2, 3)) for k in range(4)], dim=1)


def group_max_pool(x: torch.Tensor, order: int = 4) -> torch.Tensor:
    """Max over the group axis of a group-major ``(N, G·C, ...)`` tensor: ``(N, C, ...)``."""
    if x.shape[1] % order:
        raise ValueError(f"group_max_pool: {x.shape[1]} channels is not a multiple of the group order {order}")
    return x.unflatten(1, (order, x.shape[1] // order)).amax(dim=1)


class P4PointwiseConv2d(_Path):
    """Pointwise p4 group convolution (App. F.3): one circular conv ``C → C'`` shared by the 4 copies.

    Input and output are group-major ``(N, 4C, H, W)`` / ``(N, 4C', H', W')``. On lifted inputs the path is
    equivariant to 90° rotations (they permute the copies cyclically) and to circular translations.
    ``in_channels``/``out_channels`` count per copy; parameters ``9CC' + C'``.
    """

    symmetry = "gconv"

    def __init__(self, in_channels: int, out_channels: int, size: int, stride: int = 1, kernel_size: int = 3,
                 bias: bool = True, generator: torch.Generator | None = None,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(in_channels, out_channels, size, stride)
        self.conv = EquivConv2d(in_channels, out_channels, size, stride, kernel_size, bias, generator)
        place(self, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x, 4 * self.in_channels, None)
        n = x.shape[0]
        y = self.conv(x.reshape(n * 4, self.in_channels, *x.shape[2:]))
        return y.reshape(n, 4 * self.out_channels, *y.shape[2:])
