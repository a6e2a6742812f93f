"""Sampled generators of image flows: Shannon–Whittaker derivatives on a periodic grid and the six affine
Lie-algebra generators as ``(h w, h w)`` matrices (PowerNet paper §3.3, Eq. 1-2).

These are the matrices through which a continuous action on images (:class:`~symkit.actions.ImageFlow`) becomes a
linear operator on the flattened grid: PowerNet bases are ``expm(step G)`` of them, and the core solver can treat them
as the Lie algebra of a matrix group on ``R^{h w}``.

Conventions: images of shape ``(h, w)`` are flattened row-major; axis 0 (rows) is ``x`` and axis 1 (columns) is
``y``; ``D_x = D ⊗ I`` and ``D_y = I ⊗ D``; ``(expm(t D) x)[a] = x(a + t)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from symkit._checks import check_int

__all__ = [
    "GENERATOR_NAMES",
    "affine_generator",
    "check_grid_shape",
    "coordinates",
    "derivative_2d",
    "generator",
    "sw_derivative",
    "sw_derivative_paper",
    "sw_kernel",
    "sw_shift",
]


def check_grid_shape(shape: int | Sequence[int]) -> tuple[int, int]:
    """``(h, w)`` from an int ``n`` (a square grid) or a pair of positive ints."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape), int(shape))
    if not isinstance(shape, Sequence) or len(shape) != 2:
        raise ValueError(f"grid shape must be an int n or a pair (h, w), got {shape!r}")
    return check_int("grid height", shape[0], 1), check_int("grid width", shape[1], 1)


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
    h, w = check_grid_shape(shape)
    a, b = np.meshgrid(np.arange(h) - (h - 1) / 2, np.arange(w) - (w - 1) / 2, indexing="ij")
    return a.ravel(), b.ravel()


def derivative_2d(shape: int | Sequence[int], axis: int, nyquist: str = "zero") -> np.ndarray:
    """``D_x = D_h ⊗ I_w`` (axis 0) or ``D_y = I_h ⊗ D_w`` (axis 1) on the row-major flattened ``(h, w)`` grid."""
    h, w = check_grid_shape(shape)
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
