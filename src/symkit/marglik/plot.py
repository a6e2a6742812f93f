"""The plot of which layers became equivariant (paper Fig. 3): relative effective parameters per layer and path."""

from __future__ import annotations

from pathlib import Path


def plot_layer_types(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """Stacked bars of the relative effective number of parameters of each path, one bar per layer.

    ``rows`` come from :func:`symkit.marglik.path_diagnostics`. Writes a PNG to ``path`` and returns it.
    """
    import matplotlib

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
