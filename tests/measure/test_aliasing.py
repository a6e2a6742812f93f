"""Aliasing (Eq. 4.2) and Theorem 4.1 checked numerically in 1-D (notes §6 items 10-11)."""

import math

import pytest
import torch

from symkit.measure.aliasing import alias, fourier_translate, predicted_aliasing_error

D = torch.float64


def test_alias_map_values_from_the_notes():
    assert [alias(n, 16) for n in (3, 9, 17, -9)] == [3, -7, 1, 7]
    torch.testing.assert_close(alias(torch.tensor([3, 9, 17, -9]), 16), torch.tensor([3, -7, 1, 7]))
    with pytest.raises(ValueError, match="fs"):
        alias(3, 0)


def signal(freqs, M=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    H = torch.complex(torch.randn(len(freqs), generator=g, dtype=D), torch.randn(len(freqs), generator=g, dtype=D))
    k = torch.arange(M, dtype=D)
    x = torch.zeros(M, dtype=D)
    for h, n in zip(H, freqs):  # real signal: H_n e^{2 pi i n x} + conj
        x = x + 2 * (h * torch.exp(2j * math.pi * n * k / M)).real
    coeffs = torch.cat([H, H.conj()])
    all_freqs = torch.tensor(list(freqs) + [-n for n in freqs])
    return x, coeffs, all_freqs


def lie_of_downsampling(x):
    def curve(t):
        return fourier_translate(fourier_translate(x, t)[::2], -t)

    zero = torch.zeros((), dtype=D)
    return torch.func.jvp(curve, (zero,), (torch.ones_like(zero),))[1]


def test_theorem_4_1_downsampling_by_two():
    # M = 32 -> M' = 16; frequencies 9..15 alias (8 is avoided: it maps onto the dropped Nyquist bin)
    x, H, n = signal([1, 3, 5, 9, 11, 14])
    L = lie_of_downsampling(x)
    predicted = 16 * predicted_aliasing_error(H, n, fs=16)  # plain sum over the 16 output samples
    assert float(L.pow(2).sum()) == pytest.approx(float(predicted), rel=1e-8)
    assert predicted > 1.0


def test_band_limited_signal_is_not_aliased():
    x, H, n = signal([1, 2, 5, 7])
    assert float(lie_of_downsampling(x).pow(2).sum()) < 1e-16
    assert float(predicted_aliasing_error(H, n, fs=16)) == 0.0


def test_fourier_translate_is_a_group_action():
    x, _, _ = signal([1, 4, 6])
    torch.testing.assert_close(fourier_translate(fourier_translate(x, 0.13), 0.2), fourier_translate(x, 0.33))
    torch.testing.assert_close(fourier_translate(x, 4 / 32), torch.roll(x, 4))
