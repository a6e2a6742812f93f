"""The figures of the reproduced papers, drawn from the results of the algorithm packages (algorithm packages
compute; experiments present). Each function needs matplotlib (the ``experiments`` extra), imported on call.

- :func:`plot_layer_types`: which layers became equivariant (seed 001, Fig. 3).
- :func:`plot_drift_curves`: distance to E against distance travelled (seed 002, Fig. 1 / Fig. 6).
- :func:`plot_cumulative_contributions`: cumulative layer-wise Lie derivative (thesis Fig. 4.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from symkit._checks import require
from symkit.measure.layerwise import LayerwiseResult

__all__ = ["plot_cumulative_contributions", "plot_drift_curves", "plot_layer_types"]

_STYLE = {"nom": ("Nom", "tab:red"), "aug": ("Aug", "tab:blue"), "equi": ("Equi", "tab:green")}


def plot_layer_types(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """Stacked bars of the relative effective number of parameters of each path, one bar per layer.

    ``rows`` come from :func:`symkit.marglik.path_diagnostics`. Writes a PNG to ``path`` and returns it.
    """
    matplotlib = require("matplotlib", "figures")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("plot_layer_types: no rows (the model has no relaxed layers?)")
    layers = sorted({r["layer"] for r in rows})
    paths = sorted({r["path"] for r in rows})
    colours = {"conv": "tab:blue", "fc": "tab:orange", "ffc": "tab:orange", "sfc": "tab:orange",
               "sconv": "tab:blue", "gconv": "tab:green"}
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * len(layers), 3.0))
    bottom = [0.0] * len(layers)
    for p in paths:
        vals = [next((r["relative"] for r in rows if r["layer"] == lay and r["path"] == p), 0.0) for lay in layers]
        ax.bar(layers, vals, bottom=bottom, label=p, color=colours.get(p))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xlabel("layer")
    ax.set_ylabel("relative effective parameters")
    ax.set_ylim(0, 1)
    ax.set_xticks(layers)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_drift_curves(results: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Write the figure for ``{group: metrics of one dynamics-drift run}`` to ``path`` (PNG/PDF by suffix).

    Two panels per group, as in the reference figures: left with the y-range of Nom, right zoomed to Aug. Axis limits
    follow App. E.2: x up to 1.5 x the largest distance travelled by Equi, left y up to 1.5 x Nom's largest distance
    to E, right y up to 1.5 x Aug's.
    """
    if not results:
        raise ValueError("plot_drift_curves: no results to plot")
    for group, m in results.items():
        missing = [f"{w}_curve_{k}" for k in _STYLE for w in ("to_e", "travelled") if f"{w}_curve_{k}" not in m]
        if missing:
            raise ValueError(f"plot_drift_curves: results[{group!r}] lacks {', '.join(missing)}")
    matplotlib = require("matplotlib", "figures")

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


def plot_cumulative_contributions(
    results: LayerwiseResult | dict[str, LayerwiseResult], ax: Any = None, *, normalize: bool = True
) -> Any:
    """Cumulative ``sum_{j<=i} ||C_j||`` against layer index (thesis Fig. 4.4); one line per result. Returns ``ax``."""
    matplotlib = require("matplotlib", "figures")

    if ax is None:
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        # constrained layout: the labels stay inside the figure however it is saved
        _, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    items = results.items() if isinstance(results, dict) else [(results.transform, results)]
    for label, r in items:
        cum = torch.cumsum(r.fractions if normalize else r.norms, 0)
        depth = torch.linspace(0, 1, len(cum)) if isinstance(results, dict) else torch.arange(1, len(cum) + 1)
        ax.step(depth.numpy(), cum.numpy(), where="post", label=label)
    ax.set_xlabel("relative depth" if isinstance(results, dict) else "layer call")
    ax.set_ylabel("cumulative share of sum ||C_i||" if normalize else "cumulative sum ||C_i||")
    ax.legend()
    return ax
