"""The bounds of thesis ch. 5 (research notes §6, items 14–17, 20, 23, 24): values, monotonicity and limits."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.pacbayes.bounds import (
    catoni_bound,
    compressible_fraction,
    finite_class_bound,
    hoeffding_holdout_bound,
    hyperparameter_bits,
    kl_inverse,
    label_bits,
    mcallester_bound,
    point_mass_kl_bits,
    random_label_min_bits,
    seeger_bound,
)

errors = st.floats(0.0, 0.9)
kls = st.floats(0.0, 1e5)
sizes = st.integers(100, 10**7)


# ---------------------------------------------------------------------------------------------- the thesis' numbers
@pytest.mark.parametrize("kb, n, floor", [
    (3113 / 8192, 60_000, 0.03601),  # item 15: MNIST's 0.38 KB
    (9830 / 8192, 50_000, 0.1282),   # item 15: CIFAR-10's 1.2 KB
    (0.4, 60_000, 0.0378), (0.8, 60_000, 0.0736), (1.3, 73_257, 0.0964), (4.1, 50_000, 0.3729),
    (46.3, 1_281_167, 0.1856),
])
def test_zero_train_error_floors(kb, n, floor):
    """The Catoni bound at zero training error for the thesis' message lengths (delta = .05, prefix code
    l + 2 log2 l, alpha = 1 + 1e-4), to the printed digits."""
    bound = catoni_bound(0.0, point_mass_kl_bits(kb * 8192), n)
    digits = len(str(floor).split(".")[1])
    assert round(bound, digits) == floor


def test_mnist_row_of_table_a18_is_a_plausible_train_error():
    """Table A.18: 0.4 KB at n = 60,000 and an 11.6% bound; the train error that gives it is about 3.8%."""
    kl = point_mass_kl_bits(0.4 * 8192)
    assert catoni_bound(0.037, kl, 60_000) < 0.116 < catoni_bound(0.040, kl, 60_000)


def test_point_mass_kl_is_the_prefix_code():
    assert point_mass_kl_bits(1024) == 1024 + 20
    assert point_mass_kl_bits(0) == 0
    assert point_mass_kl_bits(3113) == pytest.approx(3113 + 2 * math.log2(3113))


def test_hyperparameter_bits():
    """App. A.4.5.2: 2 x 2 x 2 choices cost 3 bits; the whole grid (4 rates, 18 dimensions, 5 level counts, 2
    initialisations) costs log2 720 = 9.49 bits."""
    assert hyperparameter_bits(2, 2, 2) == 3.0
    assert hyperparameter_bits(4, 18, 5, 2) == pytest.approx(9.4919, abs=1e-4)
    assert hyperparameter_bits() == 0.0


def test_label_sizes():
    """Item 23: CIFAR-10's labels take 20.3 KB, MNIST's 24.3 KB (1 KB = 8192 bits)."""
    assert round(label_bits(50_000, 10) / 8192, 1) == 20.3
    assert round(label_bits(60_000, 10) / 8192, 1) == 24.3


def test_compressible_fraction_by_counting():
    """Item 24: of the 2^n strings of n bits at most 2^{n-c+1} - 1 have a program of n - c bits or fewer, a
    fraction below 2^{1-c}; the function's value is that bound and the count never exceeds it."""
    for n in (8, 12, 20):
        for c in range(1, n):
            programs = sum(2**k for k in range(n - c + 1))  # every bit string of length 0 .. n - c
            assert programs / 2**n < compressible_fraction(c)
            assert compressible_fraction(c) == 2.0 ** (1 - c)


def test_random_labels_need_bits():
    """Eq. A.15: a model that codes 50,000 random CIFAR-10 labels with NLL 1,000 bits needs most of them."""
    data = label_bits(50_000, 10)
    need = random_label_min_bits(data, 1000.0)
    assert need == pytest.approx(data - 1000 - math.log2(20) - 2)


# ---------------------------------------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None)
@given(errors, kls, sizes)
def test_catoni_is_at_least_the_train_error_and_at_most_one(r, kl, n):
    """Item 14 (and the sign of Phi^{-1}: the thesis' printed sign would give values below the training error)."""
    b = catoni_bound(r, kl, n)
    assert r <= b <= 1.0


@settings(max_examples=40, deadline=None)
@given(errors, st.floats(0.0, 3e4), st.floats(1.0, 3e3), st.integers(1000, 10**6))
def test_catoni_grows_with_kl_and_train_error(r, kl, extra, n):
    assert catoni_bound(r, kl + extra, n) >= catoni_bound(r, kl, n) - 1e-12
    assert catoni_bound(min(r + 0.05, 1.0), kl, n) >= catoni_bound(r, kl, n) - 1e-12


@pytest.mark.parametrize("r", [0.0, 0.05, 0.3])
def test_catoni_tends_to_the_train_error(r):
    """Item 14: with the KL fixed, the bound falls towards the training error as n grows."""
    gaps = [catoni_bound(r, 5000.0, n) - r for n in (10**4, 10**5, 10**6, 10**7, 10**8)]
    assert all(a > b for a, b in zip(gaps, gaps[1:]))
    assert gaps[-1] < 0.005 and gaps[-1] < gaps[0] / 20  # about sqrt(r KL / n) for r > 0, KL / n at r = 0


@pytest.mark.parametrize("kb, n", [(0.38, 60_000), (0.8, 60_000), (1.2, 50_000), (4.1, 50_000)])
def test_mcallester_is_looser_than_catoni_at_low_error(kb, n):
    """Item 16: in the low-error regime of the thesis' settings McAllester's bound is the looser one."""
    kl = point_mass_kl_bits(kb * 8192)
    for r in (0.0, 0.02, 0.05):
        assert mcallester_bound(r, kl, n) > catoni_bound(r, kl, n)


def test_mcallester_and_finite_class_formulas():
    kl = 1000.0
    expected = 0.1 + math.sqrt((kl * math.log(2) + math.log(5000 / 0.05) + 2) / (2 * 5000 - 1))
    assert mcallester_bound(0.1, kl, 5000) == pytest.approx(expected, rel=1e-14)
    # a class of 2^20 hypotheses
    assert finite_class_bound(0.1, 20, 5000) == pytest.approx(
        0.1 + math.sqrt((20 * math.log(2) + math.log(20)) / 10000), rel=1e-14)
    assert mcallester_bound(0.9, 1e6, 100) == 1.0


def test_hoeffding_holdout_formula():
    """Item 17: R <= R_hat + sqrt((ln(D m / delta) + 2) / (2m - 1))."""
    m, D = 30_000, 60_000
    assert hoeffding_holdout_bound(0.01, m, D) == pytest.approx(
        0.01 + math.sqrt((math.log(D * m / 0.05) + 2) / (2 * m - 1)), rel=1e-14)
    assert hoeffding_holdout_bound(0.01, 2 * m, D) < hoeffding_holdout_bound(0.01, m, D)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 0.6), st.floats(1e-6, 2.0))  # p stays 1e-3 from 1, where floats resolve it
def test_kl_inverse_solves_the_equation(q, c):
    p = kl_inverse(q, c)
    assert q <= p <= 1.0
    if p < 1.0:
        kl = (q * math.log(q / p) if q > 0 else 0.0) + (1 - q) * math.log((1 - q) / (1 - p))
        assert kl == pytest.approx(c, rel=1e-6, abs=1e-9)


def test_seeger_bound_is_tight_at_zero_error():
    """At zero training error kl(0 || p) = -ln(1 - p), so the inverse is 1 - exp(-c)."""
    kl_bits, n = 3000.0, 60_000
    c = (kl_bits * math.log(2) + math.log(2 * math.sqrt(n) / 0.05)) / n
    assert seeger_bound(0.0, kl_bits, n) == pytest.approx(-math.expm1(-c), rel=1e-9)


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, message", [
    (lambda: catoni_bound(1.5, 10, 100), "train_error must be an error rate"),
    (lambda: catoni_bound(0.1, -1, 100), "kl_bits must be a finite number >= 0"),
    (lambda: catoni_bound(0.1, float("nan"), 100), "kl_bits must be a finite number >= 0"),
    (lambda: catoni_bound(0.1, 10, 0), "n: expected an int >= 1"),
    (lambda: catoni_bound(0.1, 10, 100, delta=1.0), "delta must be a probability"),
    (lambda: catoni_bound(0.1, 10, 100, alpha=1.0), "alpha must be a number > 1"),
    (lambda: mcallester_bound(0.1, 10, 10.5), "n: expected an int"),
    (lambda: hoeffding_holdout_bound(0.1, 100, 0), "num_params: expected an int >= 1"),
    (lambda: hyperparameter_bits(2, 0), "grid size 1: expected an int >= 1"),
    (lambda: label_bits(10, 1), "num_classes: expected an int >= 2"),
])
def test_bad_input_is_named(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()
