"""Standard errors and intervals: one implementation (scipy.stats), checked against hand values and properties."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from symkit.stats import difference, interval, mean_and_error, standard_error


def test_hand_values():
    v = [1.0, 2.0, 3.0, 4.0]  # sd = sqrt(5/3), se = sd / 2 = 0.6454972...
    assert standard_error(v) == pytest.approx(math.sqrt(5 / 3) / 2, rel=1e-12)
    assert interval(v) == pytest.approx(3.182446305284263 * math.sqrt(5 / 3) / 2, rel=1e-9)  # t(0.975, 3)
    assert interval(v, kind="normal") == pytest.approx(1.959963984540054 * math.sqrt(5 / 3) / 2, rel=1e-9)
    assert mean_and_error(torch.tensor(v)) == pytest.approx((2.5, math.sqrt(5 / 3) / 2))


def test_undefined_cases_are_nan():
    assert math.isnan(standard_error([3.0])) and math.isnan(interval([3.0]))
    assert math.isnan(mean_and_error([1.0, float("inf")])[1])
    per_column = standard_error(np.array([[1.0, 2.0], [3.0, 6.0]]), axis=0)
    np.testing.assert_allclose(per_column, [1.0, 2.0])
    with pytest.raises(ValueError, match="kind must be"):
        interval([1.0, 2.0], kind="z")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=30), st.floats(-10, 10), st.floats(0.1, 10))
def test_affine_equivariance(values, shift, scale):
    se = standard_error(values)
    assert standard_error([scale * v + shift for v in values]) == pytest.approx(scale * se, rel=1e-6, abs=1e-9)


def test_the_difference_of_two_samples_is_welchs_test_by_hand():
    a, b = [5.0, 7.0, 6.0, 8.0], [1.0, 4.0, 2.0]
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3
    t = (6.5 - 7 / 3) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)  # Welch-Satterthwaite
    d = difference(a, b)
    assert d.mean == pytest.approx(6.5 - 7 / 3, rel=1e-12) and d.error == pytest.approx(math.sqrt(va + vb), rel=1e-12)
    assert d.p_greater == pytest.approx(scipy_stats.t.sf(t, dof), rel=1e-9) and d.p_greater < 0.01
    assert d.p_less == pytest.approx(scipy_stats.t.cdf(t, dof), rel=1e-9)


def test_the_difference_is_undefined_or_refused_where_it_should_be():
    one = difference([3.0], [1.0, 2.0])
    assert one.mean == 1.5 and math.isnan(one.error) and math.isnan(one.p_greater)
    constant = difference([2.0, 2.0], [1.0, 1.0])
    assert constant.error == 0 and math.isnan(constant.p_greater)
    with pytest.raises(ValueError, match="sample b must be non-empty and finite"):
        difference([1.0, 2.0], [1.0, float("nan")])
    with pytest.raises(ValueError, match="sample a"):
        difference([], [1.0])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-1000, 1000), min_size=2, max_size=10),
       st.lists(st.integers(-1000, 1000), min_size=2, max_size=10))
def test_swapping_the_samples_negates_the_difference_and_swaps_the_p_values(a, b):
    d, r = difference(a, b), difference(b, a)
    assert r.mean == pytest.approx(-d.mean, abs=1e-9) and r.error == pytest.approx(d.error, rel=1e-9, abs=1e-12)
    if not math.isnan(d.p_greater):
        assert d.p_greater + d.p_less == pytest.approx(1.0, abs=1e-12)
        assert r.p_greater == pytest.approx(d.p_less, abs=1e-9)
