"""Standard errors and confidence intervals, computed one way everywhere (scipy.stats).

- :func:`standard_error`: ``sd / sqrt(n)`` with the sample standard deviation (``scipy.stats.sem``); ``nan`` for
  fewer than two values or any non-finite value.
- :func:`interval`: the half-width of a two-sided confidence interval around the mean: Student's t with ``n - 1``
  degrees of freedom (``kind="t"``, the default) or the normal approximation (``kind="normal"``, the ``1.96 sd /
  sqrt(n)`` that some papers print).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["interval", "mean_and_error", "standard_error"]


def _values(values: Sequence[float] | np.ndarray | Any, axis: int | None = None) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor
        values = values.detach().cpu().double().numpy()
    arr = np.asarray(values, dtype=np.float64)
    return arr.reshape(-1) if axis is None else arr


def standard_error(values: Sequence[float] | np.ndarray | Any, axis: int | None = None) -> Any:
    """The standard error of the mean (``scipy.stats.sem``, ``ddof=1``); ``nan`` when it is undefined. With
    ``axis``, an array of them."""
    arr = _values(values, axis)
    n = arr.shape[0 if axis is None else axis]
    if n < 2:
        return math.nan if axis is None else np.full(np.delete(arr.shape, axis), np.nan)
    se = stats.sem(arr, axis=0 if axis is None else axis, ddof=1)
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
    factor = stats.t.ppf(q, arr.size - 1) if kind == "t" else stats.norm.ppf(q)
    return float(factor * se)


def mean_and_error(values: Sequence[float] | np.ndarray | Any) -> tuple[float, float]:
    """``(mean, standard error)``; the error is ``nan`` for fewer than two values or non-finite ones."""
    arr = _values(values)
    mean = float(arr.mean()) if arr.size else math.nan
    if arr.size < 2 or not np.all(np.isfinite(arr)):
        return mean, math.nan
    return mean, standard_error(arr)
