"""Aggregate stored runs over seeds and present them: a markdown or CSV table with the paper's numbers, and plots.

Runs that share a config (all fields but the seed, i.e. one ``config_hash``) form a group. For each numeric metric
the group shows the mean over seeds and its standard error (sample standard deviation over sqrt(n); blank for a
single seed). Booleans count as 0/1 unless all seeds agree; strings and lists are shown when all seeds agree.

Every group is labelled with its setup, the scale it ran at (:func:`scale_of`): ``paper`` (the paper's data, sizes
and epochs), ``default`` (the experiment's defaults, the paper's setup as closely as two CPU cores allow), ``quick``
(the CI size) or ``modified`` (anything else, e.g. a ``--set``). The paper's numbers are shown only beside ``paper``
and ``default`` rows (:data:`COMPARABLE`); a quick or modified run is not comparable with them.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symkit._text import count
from symkit.experiments.registry import Experiment, PaperValue, Plot
from symkit.stats import mean_and_error
from symkit.store import RunRecord, canonical_json

SCALES = ("paper", "default", "quick", "modified")
#: the scales whose rows are shown beside the paper's numbers
COMPARABLE = ("paper", "default")
INTERVALS = ("Values are means over seeds ± standard error (sample standard deviation / sqrt(n); none for one seed). "
             "Paper values are as printed, ± converted to a standard error where the paper gives a 95% interval.")


def scale_of(experiment: Experiment, config: Mapping[str, Any]) -> str:
    """The scale of a run, judged by the settings the sweeps do not vary: ``paper`` when each has its
    ``--scale paper`` value (or its default, for an experiment whose defaults are the paper's setup,
    ``paper_scale=None``), ``default`` when each has its default, ``quick`` when each has its quick value,
    ``modified`` otherwise."""
    swept = {"seed", *experiment.sweep, *(experiment.quick_sweep or {}), *(experiment.paper_sweep or {})}
    if experiment.points is not None:
        swept |= {k for quick in (False, True) for point in experiment.points(quick) for k in point}
    fixed = [k for k in experiment.field_names() if k not in swept and k in config]

    def matches(scale: str) -> bool:
        # the scale's values only: no validation, which may look for data files a report does not read
        reference = experiment.config(**experiment.scale_overrides(scale))
        return all(canonical_json(config[k]) == canonical_json(getattr(reference, k)) for k in fixed)

    if experiment.paper_scale is not None and matches("paper"):
        return "paper"
    if matches("default"):
        return "paper" if experiment.paper_scale is None else "default"
    return "quick" if matches("quick") else "modified"


@dataclass
class Group:
    """The runs of one config, aggregated over seeds."""

    config: dict[str, Any]
    seeds: list[int]
    mean: dict[str, Any] = field(default_factory=dict)
    stderr: dict[str, float | None] = field(default_factory=dict)
    paper: dict[str, PaperValue] = field(default_factory=dict)
    metrics_by_seed: dict[int, dict[str, Any]] = field(default_factory=dict)
    scale: str = "default"

    def value(self, key: str) -> Any:
        """A config field or, failing that, the aggregated metric ``key``."""
        return self.config[key] if key in self.config else self.mean.get(key)

    def as_row(self) -> dict[str, Any]:
        """The plain-dict form handed to an experiment's ``summarize``."""
        return {"config": dict(self.config), "n": len(self.seeds), "mean": dict(self.mean),
                "stderr": dict(self.stderr), "by_seed": {s: dict(m) for s, m in self.metrics_by_seed.items()},
                "scale": self.scale}


@dataclass
class Report:
    """A finished report: its text and the plot files it wrote."""

    text: str
    plots: list[Path]
    groups: list[Group]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b or (not isinstance(a, bool) and not isinstance(b, bool) and str(a) == str(b))


def _aggregate_values(values: list[Any]) -> tuple[Any, float | None]:
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    if all(isinstance(v, bool) for v in present) and all(v == present[0] for v in present):
        return present[0], None
    if all(_is_number(v) or isinstance(v, bool) for v in present):
        mean, se = mean_and_error([float(v) for v in present])
        return mean, None if math.isnan(se) else se
    if all(_same(v, present[0]) for v in present):
        return present[0], None
    # "; " between the values: a value may hold commas itself (a list of library versions)
    return "(varies: " + "; ".join(sorted({str(v) for v in present})) + ")", None


def _per_seed(values: Mapping[int, Any]) -> Any:
    """A run fact (see ``Experiment.facts``) over seeds: its value if every seed has the same, else each seed's
    value after the seed ("0: 0; 1: 10000")."""
    present = {seed: v for seed, v in values.items() if v is not None}
    if not present:
        return None
    first = next(iter(present.values()))
    if len(present) == len(values) and all(_same(v, first) for v in present.values()):
        return first
    return "; ".join(f"{seed}: {_fmt(v) if v is not None else '–'}" for seed, v in sorted(values.items()))


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if _is_number(value) or isinstance(value, bool):
        return (1, float(value))
    return (2, canonical_json(value))


def aggregate(experiment: Experiment, records: Sequence[RunRecord]) -> list[Group]:
    """Group the ``ok`` records by config and aggregate their metrics over seeds; label each group's scale and
    attach the matching paper values to ``paper`` and ``default`` groups only."""
    by_hash: dict[str, list[RunRecord]] = {}
    for record in records:
        if record.status == "ok" and record.metrics is not None:
            by_hash.setdefault(record.config_hash, []).append(record)
    groups = []
    for runs in by_hash.values():
        config = {k: v for k, v in runs[0].config.items() if k != "seed"}
        group = Group(config=config, seeds=sorted(r.seed for r in runs),
                      metrics_by_seed={r.seed: dict(r.metrics or {}) for r in sorted(runs, key=lambda r: r.seed)})
        names: dict[str, None] = {}
        for run in runs:
            names.update(dict.fromkeys(run.metrics or {}))
        for name in names:
            if name in experiment.facts:
                group.mean[name], group.stderr[name] = _per_seed(
                    {seed: m.get(name) for seed, m in group.metrics_by_seed.items()}), None
            else:
                group.mean[name], group.stderr[name] = _aggregate_values([(r.metrics or {}).get(name) for r in runs])
        group.scale = scale_of(experiment, runs[0].config)
        for paper in experiment.paper if group.scale in COMPARABLE else ():
            if all(k in config and _same(config[k], v) for k, v in paper.where.items()):
                group.paper[paper.metric] = paper
        groups.append(group)
    order = experiment.field_names()
    groups.sort(key=lambda g: [_sort_key(g.config.get(k)) for k in order])
    return groups


def varying_keys(experiment: Experiment, groups: Sequence[Group]) -> list[str]:
    """Config fields whose value differs between groups, in the config's field order."""
    keys = []
    for key in experiment.field_names():
        if key == "seed":
            continue
        values = {canonical_json(g.config.get(key)) for g in groups}
        if len(values) > 1:
            keys.append(key)
    return keys


def _fmt(value: Any, stderr: float | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        text = str(int(value)) if value.is_integer() and abs(value) < 1e15 and stderr is None else f"{value:.4g}"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(_fmt(v) for v in value) + "]"
    else:
        text = str(value)
    if stderr is not None and stderr > 0:
        text += f" ± {stderr:.2g}"
    return text.replace("|", "\\|")


def format_value(value: Any, stderr: float | None = None) -> str:
    """A value as the report's tables show it (``12.5 ± 0.31``, ``yes``, ``[1, 2]``), ``|`` escaped for markdown."""
    return _fmt(value, stderr)


def _metric_names(groups: Sequence[Group]) -> list[str]:
    names: dict[str, None] = {}
    for group in groups:
        names.update(dict.fromkeys(group.mean))
    return list(names)


#: a metric whose value in some run is a sequence longer than this is a series (a learning curve): the markdown
#: table leaves it out and names it below (the CSV form and the experiment's own figures keep it)
SERIES_LENGTH = 6


def series_metrics(groups: Sequence[Group]) -> list[str]:
    """The metrics that some run stores as a sequence of more than ``SERIES_LENGTH`` values."""
    return [m for m in _metric_names(groups)
            if any(isinstance(v, (list, tuple)) and len(v) > SERIES_LENGTH
                   for g in groups for v in (run.get(m) for run in g.metrics_by_seed.values()))]


def markdown_table(experiment: Experiment, groups: Sequence[Group]) -> str:
    """The aggregated groups as a markdown table; the metrics the paper reports come first, each followed by a
    '(paper)' column. Series (:func:`series_metrics`) are left out."""
    keys = varying_keys(experiment, groups)
    with_paper = {m for g in groups for m in g.paper}
    # the metrics the paper reports come first, each followed by the paper's number
    series = set(series_metrics(groups))
    metrics = sorted((m for m in _metric_names(groups) if m not in series), key=lambda m: m not in with_paper)
    header = [*keys, "setup", "seeds"]
    for metric in metrics:
        header.append(metric)
        if metric in with_paper:
            header.append(f"{metric} (paper)")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for group in groups:
        cells = [_fmt(group.config.get(k)) for k in keys] + [group.scale, str(len(group.seeds))]
        for metric in metrics:
            cell = _fmt(group.mean.get(metric), group.stderr.get(metric))
            present = sum(run.get(metric) is not None for run in group.metrics_by_seed.values())
            # runs stored before the metric existed, or without it (a fact lists its seeds already)
            if cell and present < len(group.seeds) and metric not in experiment.facts:
                cell += f" ({present} of {len(group.seeds)} seeds)"
            cells.append(cell)
            if metric in with_paper:
                paper = group.paper.get(metric)
                cells.append(_fmt(paper.value, paper.stderr) if paper else ("" if group.scale in COMPARABLE else "–"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def csv_table(experiment: Experiment, groups: Sequence[Group]) -> str:
    """The aggregated groups as CSV: every config field, ``seeds`` (how many), then ``metric``, ``metric_se`` and
    ``metric_paper`` for each metric."""
    keys = [k for k in experiment.field_names() if k != "seed"]
    metrics = _metric_names(groups)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*keys, "setup", "seeds", *[c for m in metrics for c in (m, f"{m}_se", f"{m}_paper")]])
    for group in groups:
        row: list[Any] = [canonical_json(group.config.get(k)) if isinstance(group.config.get(k), (list, dict))
                          else group.config.get(k) for k in keys]
        row += [group.scale, len(group.seeds)]
        for metric in metrics:
            paper = group.paper.get(metric)
            mean = group.mean.get(metric)
            row += [canonical_json(mean) if isinstance(mean, (list, dict)) else mean,
                    group.stderr.get(metric), paper.value if paper else None]
        writer.writerow(["" if v is None else v for v in row])
    return buffer.getvalue()


def _plot_name(experiment: Experiment, plot: Plot, used: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{experiment.name}-{plot.y}-vs-{plot.x}")
    name, i = base, 2
    while name in used:
        name, i = f"{base}-{i}", i + 1
    used.add(name)
    return name + ".png"


def plot_series(experiment: Experiment, plot: Plot, groups: Sequence[Group]) -> dict[str, list[Group]]:
    """The groups that have both ``x`` and a numeric ``y``, split into labelled series (lines, bar colours).

    A line (or a row of bars) joins settings that differ only in ``x``: series are split by ``hue`` and by every
    other config field that varies. Scatter plots are split by ``hue`` only.
    """
    rows = [g for g in groups
            if g.value(plot.x) is not None and (_is_number(g.mean.get(plot.y)) or isinstance(g.mean.get(plot.y), bool))]
    split = [k for k in varying_keys(experiment, rows) if k not in (plot.x, plot.hue)] if plot.kind != "scatter" else []
    series: dict[str, list[Group]] = {}
    for group in rows:
        parts = ([f"{plot.hue}={_fmt(group.config.get(plot.hue))}"] if plot.hue else [])
        parts += [f"{k}={_fmt(group.config.get(k))}" for k in split]
        series.setdefault(", ".join(parts), []).append(group)
    return series


def draw_plot(experiment: Experiment, plot: Plot, groups: Sequence[Group], path: Path) -> Path | None:
    """Draw ``plot`` from the aggregated groups into ``path`` (PNG); ``None`` when no group has both x and y."""
    from symkit._checks import require

    matplotlib = require("matplotlib", "report plots")

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    series = plot_series(experiment, plot, groups)
    rows = [g for members in series.values() for g in members]
    if not rows:
        return None

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    categorical = plot.kind in ("bar", "box") or not all(_is_number(g.value(plot.x)) for g in rows)
    categories = sorted({canonical_json(g.value(plot.x)) for g in rows},
                        key=lambda c: _sort_key(next(g.value(plot.x) for g in rows
                                                     if canonical_json(g.value(plot.x)) == c)))
    width = 0.8 / max(1, len(series))
    paper_labelled = False
    all_x: set[float] = set()
    for i, (label, members) in enumerate(sorted(series.items(), key=lambda kv: kv[0])):
        label = label or "symkit (mean ± s.e.)"
        members = sorted(members, key=lambda g: _sort_key(g.value(plot.x)))
        ys = [float(g.mean[plot.y]) for g in members]
        errs = [g.stderr.get(plot.y) or 0.0 for g in members]
        if categorical:
            xs = [categories.index(canonical_json(g.value(plot.x))) for g in members]
        else:
            xs = [float(g.value(plot.x)) for g in members]
        color = f"C{i % 10}"
        if plot.kind == "bar":
            offsets = [x - 0.4 + width * (i + 0.5) for x in xs]
            bars = ax.bar(offsets, ys, width=width * 0.95, yerr=errs if any(errs) else None, color=color,
                          label=label, capsize=3)
            if len(rows) <= 16:  # small enough to print each value (a zero-height bar is otherwise invisible)
                ax.bar_label(bars, labels=[f"{y:.3g}" for y in ys], fontsize=7, padding=2)
            xs = offsets
        elif plot.kind == "box":  # the spread over seeds, as the thesis's box plots (Fig. 3.2)
            offsets = [x - 0.4 + width * (i + 0.5) for x in xs]
            per_seed = [[float(m[plot.y]) for m in g.metrics_by_seed.values() if _is_number(m.get(plot.y))] or [y]
                        for g, y in zip(members, ys)]
            ax.boxplot(per_seed, positions=offsets, widths=width * 0.85, patch_artist=True, manage_ticks=False,
                       boxprops={"facecolor": color, "alpha": 0.6}, medianprops={"color": "black"})
            ax.plot([], [], color=color, linewidth=6, alpha=0.6, label=label)
            xs = offsets
        elif plot.kind == "scatter":
            ax.errorbar(xs, ys, yerr=errs if any(errs) else None, fmt="o", color=color, label=label,
                        capsize=3, alpha=0.8)
        else:
            ax.errorbar(xs, ys, yerr=errs if any(errs) else None, fmt="-o", color=color, label=label,
                        capsize=3)
        paper = [(x, g.paper[plot.y].value) for x, g in zip(xs, members) if plot.y in g.paper]
        if paper:
            ax.plot([p[0] for p in paper], [p[1] for p in paper], linestyle="--" if plot.kind == "line" else "none",
                    marker="s", markerfacecolor="none", color=color)
            paper_labelled = True
        all_x.update(xs)
    if plot.diagonal:
        lo, hi = ax.get_xlim()
        lo2, hi2 = ax.get_ylim()
        a, b = min(lo, lo2), max(hi, hi2)
        ax.plot([a, b], [a, b], color="0.5", linestyle=":", linewidth=1, label="y = x")
    if categorical:
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels([c.strip('"') for c in categories], rotation=30 if len(categories) > 6 else 0,
                           ha="right" if len(categories) > 6 else "center")
    if plot.kind == "bar" and not plot.logy and all(float(g.mean[plot.y]) >= 0 for g in rows):
        ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1e-12))
    if plot.logx and not categorical:
        ax.set_xscale("log")
    elif not categorical and plot.x in experiment.field_names() and 1 < len(all_x) <= 10:
        ax.set_xticks(sorted(all_x))  # a swept setting: tick exactly the values that were run
    if paper_labelled:  # one neutral legend entry for the paper's points, whatever their colour
        ax.plot([], [], linestyle="--" if plot.kind == "line" else "none", marker="s", markerfacecolor="none",
                color="0.4", label="paper (open squares)")
    if plot.logy:
        ax.set_yscale("log")
    ax.set_xlabel(plot.x)
    ax.set_ylabel(plot.y)
    ax.set_title(plot.title or f"{experiment.name}: {plot.y} against {plot.x}")
    ax.grid(True, alpha=0.3, which="both")
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def build_report(
    experiment: Experiment,
    records: Sequence[RunRecord],
    fmt: str = "md",
    plot_dir: Path | None = None,
) -> Report:
    """The report of ``experiment`` from its stored ``records``: text in ``fmt`` (``md`` or ``csv``), plots in
    ``plot_dir`` (none drawn when it is ``None``)."""
    if fmt not in ("md", "csv"):
        raise ValueError(f"report format must be 'md' or 'csv', got {fmt!r}")
    groups = aggregate(experiment, records)
    failed = sum(1 for r in records if r.status == "failed")
    plots: list[Path] = []
    if plot_dir is not None and groups:
        used: set[str] = set()
        for plot in experiment.plots:
            path = draw_plot(experiment, plot, groups, Path(plot_dir) / _plot_name(experiment, plot, used))
            if path is not None:
                plots.append(path)
        if experiment.figures is not None:
            Path(plot_dir).mkdir(parents=True, exist_ok=True)
            runs = [{"config": dict(r.config), "seed": r.seed, "metrics": dict(r.metrics)}
                    for r in records if r.status == "ok" and r.metrics is not None]
            plots += [Path(p) for p in experiment.figures(runs, Path(plot_dir))]
    if fmt == "csv":
        return Report(csv_table(experiment, groups), plots, groups)

    parts = [f"# {experiment.name}", "", experiment.description, "", f"Reproduces: {experiment.reproduces}", ""]
    n_ok = sum(len(g.seeds) for g in groups)
    failures = f"; {count(failed, 'failed run')} (see `symkit runs {experiment.name} --failed`)" if failed else ""
    parts.append(f"{count(n_ok, 'successful run')} in {count(len(groups), 'setting')}{failures}.")
    parts.append("")
    if groups:
        keys = set(varying_keys(experiment, groups))
        fixed = {k: groups[0].config[k] for k in experiment.field_names() if k in groups[0].config and k not in keys}
        if fixed:
            parts += ["Settings shared by every row: " + ", ".join(f"{k}={_fmt(v)}" for k, v in fixed.items()), ""]
        if experiment.summarize is not None:
            parts += [experiment.summarize([g.as_row() for g in groups]).rstrip(), "",
                      "Every stored metric, per setting:", ""]
        parts += [markdown_table(experiment, groups), ""]
        parts.append(INTERVALS)
        series = series_metrics(groups)
        if series:
            parts.append("Series left out of the table (each run's values are in the results store and "
                         f"`--format csv`): {', '.join(series)}.")
        if any(g.scale not in COMPARABLE for g in groups) and experiment.paper:
            parts.append("Setup: `paper` rows use the paper's data and sizes, `default` rows the experiment's defaults "
                         "(the paper's setup as closely as two CPU cores allow); `quick` and `modified` rows are not "
                         "comparable with the paper, so their paper column shows –.")
        unmatched = [p for p in experiment.paper if not any(p.metric in g.paper and g.paper[p.metric] is p
                                                             for g in groups)]
        if unmatched:
            parts += ["", "Paper values with no matching run at the default or paper scale here (run one to "
                      "compare):", ""]
            for p in unmatched:
                where = ", ".join(f"{k}={_fmt(v)}" for k, v in p.where.items()) or "any setting"
                parts.append(f"- {p.metric} = {_fmt(p.value, p.stderr)} at {where}"
                             + (f" ({p.source})" if p.source else ""))
    if plots:
        parts += ["", "Plots:", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return Report("\n".join(parts).rstrip() + "\n", plots, groups)


def paper_summary(paper: Sequence[PaperValue], limit: int = 3) -> str:
    """A one-line summary of declared paper values (for ``symkit list``)."""
    items = [f"{p.metric}={_fmt(p.value)}" + (f" [{p.source}]" if p.source else "") for p in paper[:limit]]
    more = len(paper) - limit
    return ", ".join(items) + (f", +{more} more" if more > 0 else "")


def group_rows(groups: Sequence[Group]) -> list[Mapping[str, Any]]:
    """The groups as plain dicts (see :meth:`Group.as_row`)."""
    return [g.as_row() for g in groups]


def write_report(experiment: Experiment, store: Any, out: Path, fmt: str = "md",
                 seeds: Sequence[int] | None = None) -> tuple[str, list[Path]]:
    """Build the report of ``experiment`` from the runs in ``store`` into the directory ``out`` (``report.md`` or
    ``report.csv`` and the plots); returns its text and the files written. ``seeds``: only the runs of these seeds
    (a batch of seeds fixed in advance, read on its own). ValueError when there are no runs (of those seeds)."""
    records = store.runs(experiment.name)
    if not records:
        raise ValueError(f"no runs of {experiment.name!r} in {store.path}; run `symkit reproduce {experiment.name}` "
                         "first")
    if seeds is not None:
        wanted = set(seeds)
        records = [r for r in records if r.seed in wanted]
        if not records:
            raise ValueError(f"no runs of {experiment.name!r} with seeds {sorted(wanted)} in {store.path}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rep = build_report(experiment, records, fmt=fmt, plot_dir=out)
    path = out / ("report.md" if fmt == "md" else "report.csv")
    path.write_text(rep.text)
    return rep.text, [path, *rep.plots]
