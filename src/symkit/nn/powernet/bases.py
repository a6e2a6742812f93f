"""Base matrices for PowerLayers: permutations (cyclic shifts, rot90) and dense Lie-group steps ``exp(eps G)``.

Conventions (see ``docs/powernet.md``):

- Images of shape ``(h, w)`` are flattened row-major: pixel ``(a, b)`` is entry ``a * w + b``.
- Axis 0 (rows) is the paper's ``x``, axis 1 (columns) is ``y``: ``D_x = D ⊗ I`` and ``D_y = I ⊗ D`` (paper §3.3).
- A base matrix ``M`` acts on the last axis of a tensor: ``(M x)[a] = sum_b M[a, b] x[b]``.
- ``cyclic_shift(n, k)`` is ``(S x)[a] = x[(a + k) mod n]``, so ``S = expm(D)`` for the derivative ``D`` and
  ``sum_i theta_i S^i x`` is the circular cross-correlation ``sum_i theta_i x[a + i]`` (``torch.roll(x, -i)``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from symkit._checks import check_int

__all__ = [
    "Base",
    "DenseBase",
    "PermutationBase",
    "affine_generator",
    "coordinates",
    "cyclic_shift",
    "derivative_2d",
    "expm_base",
    "generator",
    "grid_shift",
    "make_base",
    "rot90_permutation",
    "sw_derivative",
    "sw_derivative_paper",
    "sw_kernel",
    "sw_shift",
    "BASE_NAMES",
    "GENERATOR_NAMES",
    "GridShift",
    "Rot90",
]


def _check_shape(shape: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape), int(shape))
    if not isinstance(shape, Sequence) or len(shape) != 2:
        raise ValueError(f"grid shape must be an int n or a pair (h, w), got {shape!r}")
    h, w = (check_int("grid height", shape[0], 1), check_int("grid width", shape[1], 1))
    return h, w


# ----------------------------------------------------------------------------------------------------------------------
# Base matrix objects
# ----------------------------------------------------------------------------------------------------------------------


class Base(nn.Module):
    """A square invertible matrix ``M`` (``size x size``) applied to the last axis of a tensor.

    ``base(x, power=k)`` computes ``M^k x`` by ``|k|`` repeated applications of ``M`` or ``M^{-1}``; subclasses
    implement one step. ``base.power(k)`` returns ``M^k`` as a new base of the same kind (one matrix, used for
    dilation).
    """

    size: int
    shape: tuple[int, int] | None

    @property
    def is_permutation(self) -> bool:
        return False

    def step(self, x: torch.Tensor, inverse: bool = False) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor, power: int = 1) -> torch.Tensor:
        """``M^power x`` along the last axis of ``x``."""
        if x.shape[-1] != self.size:
            raise ValueError(f"{self!r} acts on vectors of size {self.size}, got a tensor of shape {tuple(x.shape)}")
        power = int(power)
        for _ in range(abs(power)):
            x = self.step(x, inverse=power < 0)
        return x

    def power(self, k: int) -> Base:  # pragma: no cover - abstract
        raise NotImplementedError

    def inverse(self) -> Base:
        return self.power(-1)

    def to_dense(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:  # pragma: no cover - abstract
        """The matrix ``M`` as a dense ``(size, size)`` tensor."""
        raise NotImplementedError


class _Permute(torch.autograd.Function):
    """``x[..., perm]`` whose backward is the gather with the inverse permutation (no scatter-add)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        ctx.save_for_backward(inv)
        return x.index_select(-1, perm)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # noqa: ANN001
        (inv,) = ctx.saved_tensors
        return grad.index_select(-1, inv), None, None


class PermutationBase(Base):
    """A permutation matrix as an index gather: ``(M x)[a] = x[perm[a]]``, i.e. ``M[a, perm[a]] = 1``.

    Applying it costs ``O(size)`` and it commutes with every pointwise non-linearity, so a PowerLayer built on it is
    exactly equivariant to the cyclic group it generates.
    """

    def __init__(self, perm: torch.Tensor | np.ndarray | Sequence[int], shape: tuple[int, int] | None = None,
                 name: str = "permutation") -> None:
        super().__init__()
        perm = torch.as_tensor(np.asarray(perm), dtype=torch.long)
        if perm.ndim != 1 or not torch.equal(torch.sort(perm).values, torch.arange(perm.numel())):
            raise ValueError(f"perm must be a permutation of 0..n-1, got {perm.tolist()[:20]}")
        self.size = perm.numel()
        self.shape = shape
        self.name = name
        self.register_buffer("perm", perm, persistent=False)
        self.register_buffer("inv_perm", torch.argsort(perm), persistent=False)

    @property
    def is_permutation(self) -> bool:
        return True

    def step(self, x: torch.Tensor, inverse: bool = False) -> torch.Tensor:
        if inverse:
            return _Permute.apply(x, self.inv_perm, self.perm)
        return _Permute.apply(x, self.perm, self.inv_perm)

    def forward(self, x: torch.Tensor, power: int = 1) -> torch.Tensor:
        if x.shape[-1] != self.size:
            raise ValueError(f"{self!r} acts on vectors of size {self.size}, got a tensor of shape {tuple(x.shape)}")
        if int(power) == 0:
            return x
        idx = self._power_index(int(power))
        return _Permute.apply(x, idx, torch.argsort(idx))

    def _power_index(self, k: int) -> torch.Tensor:
        idx = torch.arange(self.size, device=self.perm.device)
        step = self.perm if k > 0 else self.inv_perm
        for _ in range(abs(k)):
            idx = idx[step]
        return idx

    def power(self, k: int) -> PermutationBase:
        return PermutationBase(self._power_index(int(k)).cpu(), self.shape, f"{self.name}^{k}").to(self.perm.device)

    def order(self) -> int:
        """The order ``m`` of ``M`` (smallest ``m > 0`` with ``M^m = I``): the lcm of the cycle lengths."""
        perm = self.perm.cpu().numpy()
        seen = np.zeros(self.size, dtype=bool)
        order = 1
        for start in range(self.size):
            length, j = 0, start
            while not seen[j]:
                seen[j] = True
                j = perm[j]
                length += 1
            if length:
                order = math.lcm(order, length)
        return order

    def to_dense(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        m = torch.zeros(self.size, self.size, dtype=dtype, device=self.perm.device)
        m[torch.arange(self.size, device=self.perm.device), self.perm] = 1
        return m

    def extra_repr(self) -> str:
        return f"{self.name}, size={self.size}"


class DenseBase(Base):
    """A dense matrix ``M`` with its inverse, applied by matrix-vector products (``O(size^2)`` per vector).

    The matrices are buffers, so ``.to(dtype)`` / ``.double()`` of the owning module converts them.
    """

    def __init__(self, matrix: torch.Tensor | np.ndarray, inverse: torch.Tensor | np.ndarray | None = None,
                 shape: tuple[int, int] | None = None, name: str = "dense") -> None:
        super().__init__()
        m = torch.as_tensor(np.asarray(matrix) if not isinstance(matrix, torch.Tensor) else matrix)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"base matrix must be square (size, size), got shape {tuple(m.shape)}")
        if m.is_complex():
            raise TypeError(f"base matrix {name!r} must be real, got dtype {m.dtype}")
        m = m.to(torch.float64)
        if inverse is None:
            inv = torch.linalg.inv(m)
        else:
            inv = torch.as_tensor(np.asarray(inverse) if not isinstance(inverse, torch.Tensor) else inverse)
            inv = inv.to(torch.float64)
            if inv.shape != m.shape:
                raise ValueError(f"inverse of {name!r} must have shape {tuple(m.shape)}, got {tuple(inv.shape)}")
        self.size = m.shape[0]
        self.shape = shape
        self.name = name
        # stored transposed so that a step is ``x @ MT``
        self.register_buffer("MT", m.T.contiguous(), persistent=False)
        self.register_buffer("MinvT", inv.T.contiguous(), persistent=False)

    def _matrix(self, inverse: bool, dtype: torch.dtype) -> torch.Tensor:
        """``M^T`` or ``M^-T`` in ``dtype``; a converted copy is cached while the buffer it came from is current."""
        m = self.MinvT if inverse else self.MT
        if m.dtype == dtype:
            return m
        cache = self.__dict__.setdefault("_converted", {})
        hit = cache.get((inverse, dtype))
        if hit is None or hit[0] is not m or hit[1].device != m.device:
            hit = (m, m.to(dtype))
            cache[(inverse, dtype)] = hit
        return hit[1]

    def step(self, x: torch.Tensor, inverse: bool = False) -> torch.Tensor:
        return x @ self._matrix(inverse, x.dtype)

    def power(self, k: int) -> DenseBase:
        k = int(k)
        m = self.MT.T.to(torch.float64)
        mi = self.MinvT.T.to(torch.float64)
        if k < 0:
            m, mi, k = mi, m, -k
        return DenseBase(torch.linalg.matrix_power(m, k), torch.linalg.matrix_power(mi, k), self.shape,
                         f"{self.name}^{k}").to(self.MT.device)

    def to_dense(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return self.MT.T.to(dtype).contiguous()

    def extra_repr(self) -> str:
        return f"{self.name}, size={self.size}"


# ----------------------------------------------------------------------------------------------------------------------
# Permutation bases
# ----------------------------------------------------------------------------------------------------------------------


def cyclic_shift(n: int, k: int = 1) -> PermutationBase:
    """The 1-D cyclic shift ``(S x)[a] = x[(a + k) mod n]`` on ``R^n`` (``S = expm(D)`` for ``k = 1``)."""
    n = check_int("n", n, 1)
    return PermutationBase((np.arange(n) + int(k)) % n, None, f"shift({n},{k})")


class GridShift(PermutationBase):
    """The cyclic shift ``y[a, b] = x[a + k, b]`` (axis 0) or ``y[a, b] = x[a, b + k]`` (axis 1) of a row-major
    flattened ``(h, w)`` image, applied with ``torch.roll`` on the ``(h, w)`` view (a permutation base)."""

    def __init__(self, shape: tuple[int, int], axis: int, k: int = 1) -> None:
        h, w = shape
        idx = np.arange(h * w).reshape(h, w)
        super().__init__(np.roll(idx, -int(k), axis=axis).ravel(), (h, w), f"shift{'xy'[axis]}({h}x{w},{k})")
        self.axis, self.k = axis, int(k)

    def step(self, x: torch.Tensor, inverse: bool = False) -> torch.Tensor:
        h, w = self.shape
        k = self.k if inverse else -self.k
        return torch.roll(x.reshape(*x.shape[:-1], h, w), k, dims=x.ndim - 1 + self.axis).reshape(x.shape)

    def forward(self, x: torch.Tensor, power: int = 1) -> torch.Tensor:
        return Base.forward(self, x, power)

    def power(self, k: int) -> GridShift:
        return GridShift(self.shape, self.axis, self.k * int(k)).to(self.perm.device)


class Rot90(PermutationBase):
    """Exact rotation ``x -> np.rot90(x, k)`` of a flattened ``n x n`` image, applied with ``torch.rot90``."""

    def __init__(self, n: int, k: int = 1) -> None:
        idx = np.arange(n * n).reshape(n, n)
        super().__init__(np.rot90(idx, int(k)).ravel(), (n, n), f"rot90({n},{k})")
        self.k = int(k) % 4

    def step(self, x: torch.Tensor, inverse: bool = False) -> torch.Tensor:
        n = self.shape[0]
        v = x.reshape(*x.shape[:-1], n, n)
        return torch.rot90(v, -self.k if inverse else self.k, dims=(-2, -1)).reshape(x.shape)

    def forward(self, x: torch.Tensor, power: int = 1) -> torch.Tensor:
        return Base.forward(self, x, power)

    def power(self, k: int) -> Rot90:
        return Rot90(self.shape[0], self.k * int(k)).to(self.perm.device)


def grid_shift(shape: int | Sequence[int], axis: int, k: int = 1) -> GridShift:
    """Cyclic shift of a row-major flattened ``(h, w)`` image along ``axis``: ``y[a, b] = x[a + k, b]`` (axis 0).

    As matrices: ``S_h^k ⊗ I_w`` for axis 0 and ``I_h ⊗ S_w^k`` for axis 1 (paper §3.5); the two commute.
    """
    h, w = _check_shape(shape)
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 (rows, 'x') or 1 (columns, 'y'), got {axis!r}")
    return GridShift((h, w), axis, k)


def rot90_permutation(n: int, k: int = 1) -> Rot90:
    """Exact rotation by ``k * 90`` degrees of a flattened ``n x n`` image: ``x -> np.rot90(x, k)`` (order 4)."""
    return Rot90(check_int("n", n, 1), k)


# ----------------------------------------------------------------------------------------------------------------------
# Shannon–Whittaker interpolation and derivative (paper §3.3, Eq. 1)
# ----------------------------------------------------------------------------------------------------------------------


def _freqs(n: int) -> np.ndarray:
    """Signed integer frequencies of ``np.fft.fft`` order; the Nyquist frequency ``n/2`` (even n) is positive."""
    k = np.arange(n)
    return np.where(k <= n // 2, k, k - n)


def sw_kernel(r: np.ndarray | float, n: int, convention: str = "exact") -> np.ndarray:
    """The periodic Shannon–Whittaker kernel ``Q(r)`` on ``n`` samples, ``I(r) = sum_i I(i) Q(r - i)``.

    ``convention="paper"`` is Eq. (1) as printed: ``Q(r) = (1/n)[1 + 2 sum_{p=1}^{n/2-1} cos(2 pi p r / n)]`` (upper
    limit ``(n-1)/2`` for odd n). For even n it misses the Nyquist term, so ``Q(k) = delta_k - (-1)^k / n``
    (``Q(0) = 1 - 1/n``).
    ``convention="exact"`` adds the Nyquist term ``cos(pi r)/n`` for even n, restoring ``Q(k) = delta_k``.
    """
    n = check_int("n", n, 1)
    if convention not in ("exact", "paper"):
        raise ValueError(f"convention must be 'exact' or 'paper', got {convention!r}")
    r = np.asarray(r, dtype=np.float64)
    top = (n - 1) // 2
    p = np.arange(1, top + 1)
    q = 1.0 + 2.0 * np.cos(2 * np.pi * np.multiply.outer(r, p) / n).sum(axis=-1)
    if convention == "exact" and n % 2 == 0:
        q = q + np.cos(np.pi * r)
    return q / n


def sw_derivative_paper(n: int) -> np.ndarray:
    """``[D]_{ab} = Q'(a - b)`` with ``Q`` of Eq. (1) as printed: ``Q'(r) = -(4 pi / n^2) sum_p p sin(2 pi p r / n)``.

    Real, skew-symmetric and circulant. For odd n, ``expm(D)`` is the cyclic shift; for even n it is not (the
    Nyquist mode ``(-1)^a`` has eigenvalue 0 and is left unchanged instead of negated).
    """
    n = check_int("n", n, 1)
    top = (n - 1) // 2
    p = np.arange(1, top + 1)
    r = np.subtract.outer(np.arange(n), np.arange(n)).astype(np.float64)
    return -(4 * np.pi / n**2) * (p * np.sin(2 * np.pi * np.multiply.outer(r, p) / n)).sum(axis=-1)


def sw_derivative(n: int, nyquist: str = "exact") -> np.ndarray:
    """The Shannon–Whittaker derivative on ``n`` periodic samples, built in Fourier space: ``D = F^-1 diag(i w) F``.

    ``w_k = 2 pi k / n`` for the signed frequencies ``k``. ``expm(t D) x`` is ``x`` translated by ``t`` samples,
    ``(expm(D) x)[a] = x[a + 1]``.

    ``nyquist`` decides the Nyquist frequency ``k = n/2`` for even n (odd n has none and the result is real):

    - ``"exact"``: ``w = +pi``. ``D`` is complex, and ``expm(D)`` is exactly the cyclic shift for every n. No real
      matrix can do this for even n: the shift has the simple eigenvalue -1, so it has no real logarithm.
    - ``"zero"``: ``w = 0``. ``D`` is real, skew-symmetric, circulant and equal to the paper's
      :func:`sw_derivative_paper`; ``expm(D)`` is the shift except on the Nyquist mode, which it leaves fixed.
    """
    n = check_int("n", n, 1)
    if nyquist not in ("exact", "zero"):
        raise ValueError(f"nyquist must be 'exact' or 'zero', got {nyquist!r}")
    k = _freqs(n).astype(np.float64)
    if n % 2 == 0 and nyquist == "zero":
        k[n // 2] = 0.0
    w = 2j * np.pi * k / n
    # column j of D is D e_j = ifft(w * fft(e_j)); as a circulant, D = ifft(diag(w) fft(I))
    d = np.fft.ifft(w[:, None] * np.fft.fft(np.eye(n), axis=0), axis=0)
    if n % 2 == 1 or nyquist == "zero":
        return np.ascontiguousarray(d.real)
    return d


def sw_shift(n: int, t: float) -> np.ndarray:
    """The real band-limited translation by ``t`` samples, ``Re expm(t D)`` with the exact ``D`` of
    :func:`sw_derivative`: ``(T_t x)(a) = I(a + t)`` with ``I`` the exact SW interpolant.

    Exact cyclic shift for integer ``t`` and every n; for even n the Nyquist mode is scaled by ``cos(pi t)``.
    """
    n = check_int("n", n, 1)
    k = _freqs(n).astype(np.float64)
    factor = np.exp(2j * np.pi * k * float(t) / n)
    if n % 2 == 0:
        factor[n // 2] = np.cos(np.pi * float(t))
    m = np.fft.ifft(factor[:, None] * np.fft.fft(np.eye(n), axis=0), axis=0)
    return np.ascontiguousarray(m.real)


# ----------------------------------------------------------------------------------------------------------------------
# 2-D generators (paper §3.3, Eq. 2)
# ----------------------------------------------------------------------------------------------------------------------

GENERATOR_NAMES = ("dx", "x_dx", "y_dx", "dy", "x_dy", "y_dy", "rotation", "scaling", "shear_x", "shear_y")


def coordinates(shape: int | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Centred pixel coordinates ``(x, y)`` of the flattened grid: ``x = a - (h-1)/2`` (row), ``y = b - (w-1)/2``."""
    h, w = _check_shape(shape)
    a, b = np.meshgrid(np.arange(h) - (h - 1) / 2, np.arange(w) - (w - 1) / 2, indexing="ij")
    return a.ravel(), b.ravel()


def derivative_2d(shape: int | Sequence[int], axis: int, nyquist: str = "zero") -> np.ndarray:
    """``D_x = D_h ⊗ I_w`` (axis 0) or ``D_y = I_h ⊗ D_w`` (axis 1) on the row-major flattened ``(h, w)`` grid."""
    h, w = _check_shape(shape)
    if axis == 0:
        d = sw_derivative(h, nyquist)
        return np.kron(d, np.eye(w))
    if axis == 1:
        d = sw_derivative(w, nyquist)
        return np.kron(np.eye(h), d)
    raise ValueError(f"axis must be 0 (rows, 'x') or 1 (columns, 'y'), got {axis!r}")


def generator(shape: int | Sequence[int], name: str, nyquist: str = "zero") -> np.ndarray:
    """A Lie-algebra generator as a ``(h w, h w)`` matrix, with ``x`` the row and ``y`` the column coordinate.

    Names: ``dx, x_dx, y_dx, dy, x_dy, y_dy`` (the six ``D_i`` of Eq. 2, ``x_dy = diag(x) D_y``), ``rotation``
    ``= y_dx - x_dy`` (``expm(t G)`` rotates the content counter-clockwise by ``t`` as displayed, like
    ``scipy.ndimage.rotate(img, degrees(t))``; ``t = pi/2`` approximates ``np.rot90``), ``scaling``
    ``= x_dx + y_dy`` (``expm(t G)`` shrinks the content by ``e^-t`` about the centre), ``shear_x = y_dx``,
    ``shear_y = x_dy``. The default real ``nyquist="zero"`` derivative keeps ``rotation`` skew-symmetric.
    """
    if name not in GENERATOR_NAMES:
        raise ValueError(f"unknown generator {name!r}; expected one of {', '.join(GENERATOR_NAMES)}")
    x, y = coordinates(shape)
    dx = derivative_2d(shape, 0, nyquist)
    dy = derivative_2d(shape, 1, nyquist)
    parts = {
        "dx": lambda: dx,
        "dy": lambda: dy,
        "x_dx": lambda: x[:, None] * dx,
        "y_dx": lambda: y[:, None] * dx,
        "x_dy": lambda: x[:, None] * dy,
        "y_dy": lambda: y[:, None] * dy,
        "rotation": lambda: y[:, None] * dx - x[:, None] * dy,
        "scaling": lambda: x[:, None] * dx + y[:, None] * dy,
        "shear_x": lambda: y[:, None] * dx,
        "shear_y": lambda: x[:, None] * dy,
    }
    return parts[name]()


def affine_generator(shape: int | Sequence[int], alpha: Sequence[float], nyquist: str = "zero") -> np.ndarray:
    """``G_alpha = sum_i alpha_i D_i`` over ``(dx, x_dx, y_dx, dy, x_dy, y_dy)`` (paper Eq. 2)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.shape != (6,):
        raise ValueError(f"alpha must hold 6 coefficients (dx, x_dx, y_dx, dy, x_dy, y_dy), got shape {alpha.shape}")
    return sum(a * generator(shape, name, nyquist) for a, name in zip(alpha, GENERATOR_NAMES[:6]))


def expm_base(gen: np.ndarray | torch.Tensor, step: float = 1.0, shape: tuple[int, int] | None = None,
              name: str = "expm") -> DenseBase:
    """The base ``A = expm(step G)`` with exact inverse ``expm(-step G)`` (float64, ``torch.linalg.matrix_exp``)."""
    g = torch.as_tensor(gen) if not isinstance(gen, torch.Tensor) else gen
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise ValueError(f"generator must be a square matrix, got shape {tuple(g.shape)}")
    if g.is_complex():
        raise TypeError("generator must be real to give a real base matrix; use nyquist='zero' for even grids")
    g = g.to(torch.float64)
    step = float(step)
    return DenseBase(torch.linalg.matrix_exp(step * g), torch.linalg.matrix_exp(-step * g), shape,
                     f"{name}({step:.4g})")


BASE_NAMES = ("shift_x", "shift_y", "shift_up", "shift_right", "rot90", "rotation", "scaling", "shear_x", "shear_y")

_DEFAULT_STEPS = {"rotation": math.pi / 8, "scaling": 0.1, "shear_x": 0.1, "shear_y": 0.1}


def make_base(name: str, shape: int | Sequence[int], step: float | None = None) -> Base:
    """A named base for an ``(h, w)`` grid, as used by :class:`~symkit.nn.powernet.PowerNet`.

    ``shift_x`` / ``shift_up`` (content moves up one row), ``shift_y`` (content moves left one column),
    ``shift_right`` (content moves right), ``rot90``: permutations. ``rotation``, ``scaling``, ``shear_x``,
    ``shear_y``: ``expm(step G)`` of the named generator (default steps: rotation ``pi/8``, others ``0.1``).
    """
    if name not in BASE_NAMES:
        raise ValueError(f"unknown base {name!r}; expected one of {', '.join(BASE_NAMES)}")
    h, w = _check_shape(shape)
    if name in ("shift_x", "shift_up"):
        return grid_shift((h, w), 0, 1 if step is None else int(step))
    if name == "shift_y":
        return grid_shift((h, w), 1, 1 if step is None else int(step))
    if name == "shift_right":
        return grid_shift((h, w), 1, -1 if step is None else -int(step))
    if name == "rot90":
        if h != w:
            raise ValueError(f"rot90 needs a square grid, got {(h, w)}")
        return rot90_permutation(h)
    step = _DEFAULT_STEPS[name] if step is None else float(step)
    m, minv = _expm_pair(name, h, w, step)
    return DenseBase(m, minv, (h, w), f"{name}({step:.4g})")


@functools.lru_cache(maxsize=32)
def _expm_pair(name: str, h: int, w: int, step: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``expm(+-step G)`` for a named generator, cached: rebuilding a PowerNet reuses the matrices."""
    g = torch.as_tensor(generator((h, w), name))
    return torch.linalg.matrix_exp(step * g), torch.linalg.matrix_exp(-step * g)
