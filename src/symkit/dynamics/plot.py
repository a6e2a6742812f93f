"""Figure 1 / Fig. 6 of the paper from ``dynamics-drift`` metrics: distance to E against distance travelled.

Two panels per group, as in the reference figures: left with the y-range of Nom, right zoomed to Aug. Axis limits
follow App. E.2: x up to 1.5 x the largest distance travelled by Equi, left y up to 1.5 x Nom's largest distance to
E, right y up to 1.5 x Aug's. Needs matplotlib (imported on call).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["plot_drift_curves"]

_STYLE = {"nom": ("Nom", "tab:red"), "aug": ("Aug", "tab:blue"), "equi": ("Equi", "tab:green")}


def plot_drift_curves(results: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Write the figure for ``{group: metrics of one dynamics-drift run}`` to ``path`` (PNG/PDF by suffix)."""
    if not results:
        raise ValueError("plot_drift_curves: no results to plot")
    for group, m in results.items():
        missing = [f"{w}_curve_{k}" for k in _STYLE for w in ("to_e", "travelled") if f"{w}_curve_{k}" not in m]
        if missing:
            raise ValueError(f"plot_drift_curves: results[{group!r}] lacks {', '.join(missing)}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(9, 3 * len(results)), squeeze=False)
    for row, (group, m) in enumerate(results.items()):
        xmax = 1.5 * max(max(m["travelled_curve_equi"]), 1e-30)
        for col, zoom in enumerate(("nom", "aug")):
            ax = axes[row, col]
            for key, (label, color) in _STYLE.items():
                ax.plot(m[f"travelled_curve_{key}"], m[f"to_e_curve_{key}"], color=color, label=label)
            ax.set_xlim(0, xmax)
            ax.set_ylim(0, 1.5 * max(max(m[f"to_e_curve_{zoom}"]), 1e-30))
            ax.set_xlabel("||A - A0||")
            ax.set_ylabel("||A - Pi_E A||")
            ax.set_title(f"{group} ({'Nom scale' if zoom == 'nom' else 'Aug scale'})")
            if row == 0 and col == 0:
                ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
