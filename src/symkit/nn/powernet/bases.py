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
from typing import Any

import numpy as np
import torch
from torch import nn

from symkit._checks import check_int
from symkit.actions.derivatives import (
    GENERATOR_NAMES,
    affine_generator,
    check_grid_shape,
    coordinates,
    derivative_2d,
    generator,
    sw_derivative,
    sw_derivative_paper,
    sw_kernel,
    sw_shift,
)
from symkit.actions.flows import ImageFlow
from symkit.actions.grid import PermAction
from symkit.nn._factory import Resettable
from symkit.nn._ops import permute_last

__all__ = [
    "Base",
    "bases_for",
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


class PermutationBase(Base):
    """A permutation matrix as an index gather: ``(M x)[a] = x[perm[a]]``, i.e. ``M[a, perm[a]] = 1``.

    Applying it costs ``O(size)`` and it commutes with every pointwise non-linearity, so a PowerLayer built on it is
    exactly equivariant to the cyclic group it generates.
    """

    def __init__(self, perm: torch.Tensor | np.ndarray | Sequence[int], shape: tuple[int, int] | None = None,
                 name: str = "permutation", device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        perm = torch.as_tensor(np.asarray(perm), dtype=torch.long)
        if perm.ndim != 1 or not torch.equal(torch.sort(perm).values, torch.arange(perm.numel())):
            raise ValueError(f"perm must be a permutation of 0..n-1, got {perm.tolist()[:20]}")
        self.size = perm.numel()
        self.shape = shape
        self.name = name
        self.register_buffer("perm", perm.to(device), persistent=False)  # dtype: no floating data to convert
        self.register_buffer("inv_perm", torch.argsort(perm).to(device), persistent=False)

    @property
    def is_permutation(self) -> bool:
        return True

    def step(self, x: torch.Tensor, inverse: bool = False) -> torch.Tensor:
        if inverse:
            return permute_last(x, self.inv_perm, self.perm)
        return permute_last(x, self.perm, self.inv_perm)

    def forward(self, x: torch.Tensor, power: int = 1) -> torch.Tensor:
        if x.shape[-1] != self.size:
            raise ValueError(f"{self!r} acts on vectors of size {self.size}, got a tensor of shape {tuple(x.shape)}")
        if int(power) == 0:
            return x
        idx = self._power_index(int(power))
        return permute_last(x, idx, torch.argsort(idx))

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


class DenseBase(Resettable, Base):
    """A dense matrix ``M`` with its inverse, applied by matrix-vector products (``O(size^2)`` per vector).

    The matrices are buffers, so ``.to(dtype)`` / ``.double()`` of the owning module converts them. A base is exact
    data: it is stored in float64 unless ``dtype`` says otherwise (each step converts it, once and cached, to the
    input's dtype), on ``device``.
    """

    def __init__(self, matrix: torch.Tensor | np.ndarray, inverse: torch.Tensor | np.ndarray | None = None,
                 shape: tuple[int, int] | None = None, name: str = "dense", device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
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
        store = {"device": device, "dtype": torch.float64 if dtype is None else dtype}
        self.register_buffer("MT", m.T.contiguous().to(**store), persistent=False)
        self.register_buffer("MinvT", inv.T.contiguous().to(**store), persistent=False)

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

    def __init__(self, shape: tuple[int, int], axis: int, k: int = 1, device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
        h, w = shape
        idx = np.arange(h * w).reshape(h, w)
        super().__init__(np.roll(idx, -int(k), axis=axis).ravel(), (h, w), f"shift{'xy'[axis]}({h}x{w},{k})",
                         device=device)
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

    def __init__(self, n: int, k: int = 1, device: Any = None, dtype: torch.dtype | None = None) -> None:
        idx = np.arange(n * n).reshape(n, n)
        super().__init__(np.rot90(idx, int(k)).ravel(), (n, n), f"rot90({n},{k})", device=device)
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
    h, w = check_grid_shape(shape)
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 (rows, 'x') or 1 (columns, 'y'), got {axis!r}")
    return GridShift((h, w), axis, k)


def rot90_permutation(n: int, k: int = 1) -> Rot90:
    """Exact rotation by ``k * 90`` degrees of a flattened ``n x n`` image: ``x -> np.rot90(x, k)`` (order 4)."""
    return Rot90(check_int("n", n, 1), k)


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


def bases_for(action: object, shape: int | Sequence[int] | None = None, step: float | None = None) -> list[Base]:
    """The PowerNet bases of an action: one base per generator (seed 003 §3).

    A grid action (:class:`~symkit.actions.PermAction`, e.g. ``Rotations90(n)``) gives the permutation of each of its
    generators, applied to the flattened grid exactly as the action applies it (so a PowerLayer on these bases is
    exactly equivariant to the group they generate). An :class:`~symkit.actions.ImageFlow` gives the dense base
    ``expm(step G)`` of its sampled generator on a grid of ``shape`` (default steps as :func:`make_base`: ``pi/8``
    for rotations, ``0.1`` otherwise, in the flow's units).
    """
    if isinstance(action, PermAction):
        if not action.generators():
            raise ValueError(f"bases_for: {action!r} has no generators, so it gives no base")
        if len(action.shape) not in (1, 2):
            raise ValueError(f"bases_for: {action!r} acts on a grid of shape {action.shape}; bases need 1 or 2 axes")
        grid = tuple(action.shape) if len(action.shape) == 2 else None
        return [PermutationBase(action.perm(g), shape=grid, name=f"{action.name}[{g}]") for g in action.generators()]
    if isinstance(action, ImageFlow):
        if shape is None:
            raise ValueError(f"bases_for: the flow {action.name!r} needs the grid shape (h, w) of its base")
        h, w = check_grid_shape(shape)
        step = (math.pi / 8 if action.name == "rotate" else 0.1) if step is None else float(step)
        return [expm_base(action.grid_generator((h, w)), step, (h, w), name=action.name)]
    raise TypeError(f"bases_for: expected a PermAction or an ImageFlow, got {type(action).__name__}")


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
    h, w = check_grid_shape(shape)
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
