"""Argument checks shared by every package: one message format, ``TypeError`` for a wrong type and
``ValueError`` for a value out of range, both naming the argument."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["check_bool", "check_int", "check_number", "require"]


def check_bool(what: str, value: Any) -> bool:
    """``value`` if it is a ``bool`` (numpy's too); a ``TypeError`` naming ``what`` otherwise (0, 1, "yes": a switch is
    not guessed from them)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what}: expected True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_int(what: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an ``int >= minimum``; a ``TypeError`` (floats, bools, strings) or ``ValueError`` (too small)
    naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what}: expected an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{what}: expected an int >= {minimum}, got {value}")
    return int(value)


def check_number(what: str, value: Any, minimum: float = 0.0, *, above: bool = False) -> float:
    """``value`` as a finite ``float >= minimum`` (``> minimum`` with ``above``); a ``TypeError`` (bools, strings,
    None) or ``ValueError`` (not finite, too small) naming ``what`` otherwise."""
    bound = f"{'>' if above else '>='} {minimum:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what} must be a number {bound}, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < minimum or (above and value == minimum):
        raise ValueError(f"{what} must be a finite number {bound}, got {value!r}")
    return float(value)


def require(module: str, what: str) -> Any:
    """Import ``module`` (matplotlib, scikit-learn: the ``lab`` extra), or raise an ImportError that says
    what needs it and how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = {"sklearn": "scikit-learn"}.get(module.split(".")[0], module.split(".")[0])
        raise ImportError(
            f"{what} needs {package}, which is not installed; install the lab extra: "
            f"pip install 'symkit[lab]'"
        ) from exc
