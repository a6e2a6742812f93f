"""Aliasing and translation equivariance (thesis Sec. 4.2, Eq. 4.2, Theorem 4.1, App. A.3.2.2).

Sampling at frequency ``f_s`` maps content at frequency ``n`` to ``Alias(n)``; translating an aliased signal moves
that component at the wrong speed, so downsampling (and pointwise non-linearities, which create harmonics) break
continuous translation equivariance even when every layer is "equivariant" on the integer grid. Theorem 4.1: for
downsampling a band-limited signal ``h(x) = sum_n H_n exp(2 pi i n x)`` and Fourier (band-limited) translation,

    ||L_v(A) h||^2 = (2 pi)^2 sum_n |H_n|^2 v^2 (Alias(n) - n)^2                      (1-D; unitary norm)

(with an unnormalized sum over the ``M'`` output samples it is ``M'`` times larger; notes §1.4, §6 item 11).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from symkit._checks import check_int


def alias(n: int | Tensor, fs: int) -> int | Tensor:
    """``Alias(n)`` for sampling frequency ``fs`` (Eq. 4.2): ``n mod fs``, minus ``fs`` when above ``fs / 2``.

    The thesis leaves ``n mod fs == fs / 2`` unspecified; here it maps to ``-fs / 2`` (numpy's ``fftfreq``).
    """
    check_int("fs", fs, 1)
    if isinstance(n, Tensor):
        m = torch.remainder(n, fs)
        return torch.where(2 * m >= fs, m - fs, m)
    m = int(n) % fs
    return m - fs if 2 * m >= fs else m


def fourier_translate(x: Tensor, t: Tensor | float, dim: int = -1) -> Tensor:
    """Band-limited translation ``h(x) -> h(x - t)`` of real samples along ``dim`` (``t`` in fractions of the
    period; the Nyquist bin of even lengths is dropped so the result stays real). Differentiable in ``x`` and ``t``
    in forward and reverse mode."""
    n = x.shape[dim]
    X = torch.fft.fft(x, dim=dim)
    freqs = torch.fft.fftfreq(n, d=1.0 / n, dtype=x.dtype, device=x.device)
    if n % 2 == 0:
        X = X * (freqs != -n / 2).to(x.dtype).reshape([-1 if i == dim % x.ndim else 1 for i in range(x.ndim)])
    t = torch.as_tensor(t, dtype=x.dtype, device=x.device)
    phase = torch.exp(-2j * math.pi * freqs * t)
    phase = phase.reshape([-1 if i == dim % x.ndim else 1 for i in range(x.ndim)])
    return torch.fft.ifft(X * phase, dim=dim).real


def predicted_aliasing_error(coeffs: Tensor, freqs: Tensor, fs: int, v: float = 1.0) -> Tensor:
    """Theorem 4.1 in 1-D: ``(2 pi)^2 sum_n |H_n|^2 v^2 (Alias(n) - n)^2`` for components ``H_n`` at ``freqs``
    resampled at ``fs`` (unitary norm; multiply by ``fs`` for a plain sum over the output samples)."""
    diff = (alias(freqs.to(torch.long), fs) - freqs.to(torch.long)).to(coeffs.real.dtype)
    return (2 * math.pi) ** 2 * v**2 * (coeffs.abs() ** 2 * diff**2).sum()
