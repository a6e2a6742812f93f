"""Standard errors and intervals: one implementation (scipy.stats), checked against hand values and properties."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.stats import interval, mean_and_error, standard_error


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
