"""Small text helpers shared by the command line, reports and figures."""

from __future__ import annotations

__all__ = ["count"]


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``count(1, "run") == "1 run"``, ``count(3, "seed") ==
    "3 seeds"`` (regular plurals only)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
