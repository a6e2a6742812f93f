"""Argument checks shared by every package: one message format, ``TypeError`` for a wrong type and
``ValueError`` for a value out of range, both naming the argument."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_int"]


def check_int(what: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an ``int >= minimum``; a ``TypeError`` (floats, bools, strings) or ``ValueError`` (too small)
    naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what}: expected an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{what}: expected an int >= {minimum}, got {value}")
    return int(value)
