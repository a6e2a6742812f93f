"""Standard errors and confidence intervals, computed one way everywhere (scipy.stats).

- :func:`standard_error`: ``sd / sqrt(n)`` with the sample standard deviation (``scipy.stats.sem``); ``nan`` for
  fewer than two values or any non-finite value.
- :func:`interval`: the half-width of a two-sided confidence interval around the mean: Student's t with ``n - 1``
  degrees of freedom (``kind="t"``, the default) or the normal approximation (``kind="normal"``, the ``1.96 sd /
  sqrt(n)`` that some papers print).
- :func:`difference`: two independent samples' difference of means, its standard error and Welch's one-sided
  p-value (``scipy.stats.ttest_ind`` with unequal variances): is the first mean greater?
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Difference", "difference", "interval", "mean_and_error", "standard_error"]


def _values(values: Sequence[float] | np.ndarray | Any, axis: int | None = None) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor
        values = values.detach().cpu().double().numpy()
    arr = np.asarray(values, dtype=np.float64)
    return arr.reshape(-1) if axis is None else arr


def _scipy_stats() -> Any:
    """``scipy.stats``, imported on first use: it takes 1-1.5 s to import, which every ``symkit`` command and
    sweep worker would pay (this module is imported with the report writer)."""
    from scipy import stats

    return stats


def standard_error(values: Sequence[float] | np.ndarray | Any, axis: int | None = None) -> Any:
    """The standard error of the mean (``scipy.stats.sem``, ``ddof=1``); ``nan`` when it is undefined. With
    ``axis``, an array of them."""
    arr = _values(values, axis)
    n = arr.shape[0 if axis is None else axis]
    if n < 2:
        return math.nan if axis is None else np.full(np.delete(arr.shape, axis), np.nan)
    se = _scipy_stats().sem(arr, axis=0 if axis is None else axis, ddof=1)
    return float(se) if axis is None else se


def interval(values: Sequence[float] | np.ndarray | Any, level: float = 0.95, kind: str = "t") -> float:
    """Half-width of the two-sided ``level`` confidence interval of the mean (``nan`` for fewer than two values)."""
    if kind not in ("t", "normal"):
        raise ValueError(f"interval: kind must be 't' or 'normal', got {kind!r}")
    if not 0 < level < 1:
        raise ValueError(f"interval: level must be in (0, 1), got {level!r}")
    arr = _values(values)
    se = standard_error(arr)
    if math.isnan(se):
        return math.nan
    q = 0.5 + level / 2
    stats = _scipy_stats()
    factor = stats.t.ppf(q, arr.size - 1) if kind == "t" else stats.norm.ppf(q)
    return float(factor * se)


def mean_and_error(values: Sequence[float] | np.ndarray | Any) -> tuple[float, float]:
    """``(mean, standard error)``; the error is ``nan`` for fewer than two values or non-finite ones."""
    arr = _values(values)
    mean = float(arr.mean()) if arr.size else math.nan
    if arr.size < 2 or not np.all(np.isfinite(arr)):
        return mean, math.nan
    return mean, standard_error(arr)


@dataclass(frozen=True)
class Difference:
    """``mean(a) - mean(b)``, its standard error ``sqrt(se_a^2 + se_b^2)`` and Welch's one-sided p-value for
    ``mean(a) > mean(b)`` (``p_greater``) and for ``mean(a) < mean(b)`` (``p_less``); ``nan`` where undefined."""

    mean: float
    error: float
    p_greater: float
    p_less: float


def difference(a: Sequence[float] | np.ndarray | Any, b: Sequence[float] | np.ndarray | Any) -> Difference:
    """Two independent samples compared (Welch's t-test, unequal variances: seeds of two methods). The p-values are
    ``nan`` with fewer than two values on a side or when both samples are constant."""
    x, y = _values(a), _values(b)
    for name, v in (("a", x), ("b", y)):
        if not v.size or not np.all(np.isfinite(v)):
            raise ValueError(f"difference: sample {name} must be non-empty and finite, got {v.tolist()!r}")
    mean = float(x.mean() - y.mean())
    if x.size < 2 or y.size < 2:
        return Difference(mean, math.nan, math.nan, math.nan)
    error = math.hypot(standard_error(x), standard_error(y))
    if error == 0:
        return Difference(mean, 0.0, math.nan, math.nan)
    with warnings.catch_warnings():  # scipy warns of precision loss for a constant sample, whose variance is exact
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        greater = _scipy_stats().ttest_ind(x, y, equal_var=False, alternative="greater").pvalue
    return Difference(mean, error, float(greater), float(1.0 - greater))
