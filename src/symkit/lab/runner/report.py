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
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symkit.lab._text import count
from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, config_from_json
from symkit.lab.store import RunRecord, canonical_json
from symkit.stats import mean_and_error

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
    fixed = [k for k in experiment.fixed_fields() if k in config]

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
    #: the config as the runs used it: ``config`` with the values the experiment's ``effective`` hook resolves
    shown: dict[str, Any] = field(default_factory=dict)

    def value(self, key: str) -> Any:
        """A config field (its effective value, see ``shown``) or, failing that, the aggregated metric ``key``."""
        if key in self.shown:
            return self.shown[key]
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
        group.shown = _effective(experiment, runs[0].config, config)
        for paper in experiment.paper if group.scale in COMPARABLE else ():
            if all(k in config and _same(config[k], v) for k, v in paper.where.items()):
                group.paper[paper.metric] = paper
        groups.append(group)
    order = experiment.field_names()
    groups.sort(key=lambda g: [_sort_key(g.config.get(k)) for k in order])
    return groups


def _effective(experiment: Experiment, stored: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the values the experiment's ``effective`` hook gives for the run's config (``stored``, seed
    included); ``config`` itself when there is no hook or the stored config no longer makes a config."""
    if experiment.effective is None:
        return dict(config)
    try:
        resolved = experiment.effective(config_from_json(experiment.config, experiment.complete(stored)))
    except (TypeError, ValueError, KeyError):
        return dict(config)
    return {**config, **{k: v for k, v in resolved.items() if k in config}}


def varying_keys(experiment: Experiment, groups: Sequence[Group], shown: bool = False) -> list[str]:
    """Config fields whose value differs between groups, in the config's field order; ``shown``: their effective
    values (:attr:`Group.shown`) rather than the stored ones."""
    keys = []
    for key in experiment.field_names():
        if key == "seed":
            continue
        values = {canonical_json((g.shown or g.config).get(key) if shown else g.config.get(key)) for g in groups}
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
    keys = varying_keys(experiment, groups, shown=True)
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
        cells = [_fmt((group.shown or group.config).get(k)) for k in keys] + [group.scale, str(len(group.seeds))]
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


def _matches(config: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    return all(k in config and _same(config[k], v) for k, v in where.items())


def _without_x(config: Mapping[str, Any], without_x: Mapping[str, Any]) -> bool:
    """Whether ``config`` has the settings ``without_x`` names (a tuple of values: any of them)."""
    return bool(without_x) and all(
        k in config and any(_same(config[k], v) for v in (want if isinstance(want, tuple) else (want,)))
        for k, want in without_x.items())


def _has_y(plot: Plot, group: Group) -> bool:
    y = group.mean.get(plot.y)
    return _is_number(y) or isinstance(y, bool)


def _placed(plot: Plot, group: Group) -> bool:
    """Whether the group has a place on the x axis: it has ``x`` and ``x`` means something for it."""
    return group.value(plot.x) is not None and not _without_x(group.config, plot.without_x)


def _declared_order(experiment: Experiment, key: str) -> list[str]:
    """The values of ``key`` in the order the experiment's sweeps and points list them (canonical JSON)."""
    order: dict[str, None] = {}
    for grid in (experiment.sweep, experiment.quick_sweep or {}, experiment.paper_sweep or {}):
        order.update(dict.fromkeys(canonical_json(v) for v in grid.get(key, ())))
    if experiment.points is not None:
        for quick in (False, True):
            order.update(dict.fromkeys(canonical_json(p[key]) for p in experiment.points(quick) if key in p))
    return list(order)


def _ordered(experiment: Experiment, key: str, values: Sequence[Any]) -> list[Any]:
    """The distinct ``values`` of ``key``: in the order the experiment declares them, the others sorted after."""
    declared = _declared_order(experiment, key)
    distinct = {canonical_json(v): v for v in values}
    return [distinct[c] for c in sorted(distinct, key=lambda c: (declared.index(c) if c in declared else len(declared),
                                                                 _sort_key(distinct[c])))]


def plot_series(experiment: Experiment, plot: Plot, groups: Sequence[Group]) -> dict[str, list[Group]]:
    """The groups that have both ``x`` and a numeric ``y``, split into labelled series (lines, bar colours), in the
    order the experiment declares the ``hue`` values.

    A line (or a row of bars) joins settings that differ only in ``x``: series are split by ``hue`` and by every
    other config field that varies. Scatter plots are split by ``hue`` only. Groups that ``plot.without_x`` names
    are left to :func:`reference_series`.
    """
    rows = [g for g in groups if _has_y(plot, g) and _placed(plot, g)]
    # split by what varies among all the groups drawn, the horizontal lines included, so that labels tell apart
    # what the plot compares
    drawn = [g for g in groups if _has_y(plot, g)]
    split = [k for k in varying_keys(experiment, drawn) if k not in (plot.x, plot.hue)] if plot.kind != "scatter" \
        else []
    series: dict[str, list[Group]] = {}
    hues = _ordered(experiment, plot.hue, [g.config.get(plot.hue) for g in rows]) if plot.hue else []
    rank = {canonical_json(h): i for i, h in enumerate(hues)}
    for group in sorted(rows, key=lambda g: rank.get(canonical_json(g.config.get(plot.hue)), 0) if plot.hue else 0):
        parts = ([f"{plot.hue}={_fmt(group.config.get(plot.hue))}"] if plot.hue else [])
        parts += [f"{k}={_fmt(group.config.get(k))}" for k in split]
        series.setdefault(", ".join(parts), []).append(group)
    return series


def _unplaced(experiment: Experiment, plot: Plot, group: Group) -> bool:
    """A group drawn as a horizontal line: ``x`` is a config field it has no value of, or ``plot.without_x`` names
    its setting (a group without the metric ``x`` has nothing to be drawn against and is left out)."""
    return _has_y(plot, group) and not _placed(plot, group) and (
        plot.x in experiment.field_names() or _without_x(group.config, plot.without_x))


def reference_series(experiment: Experiment, plot: Plot, groups: Sequence[Group]) -> dict[str, list[Group]]:
    """The groups with a numeric ``y`` that have no place on the x axis: a config field ``x`` they have no value of,
    or a setting ``plot.without_x`` names; by label. A plot draws them as horizontal lines rather than at a
    made-up ``x``."""
    rows = [g for g in groups if _unplaced(experiment, plot, g)]
    keys = [*([plot.hue] if plot.hue else []), *(k for k in plot.without_x if k != plot.hue)]
    drawn = [g for g in groups if _has_y(plot, g)]
    keys += [k for k in varying_keys(experiment, drawn) if k not in keys and k != plot.x]
    series: dict[str, list[Group]] = {}
    for group in rows:
        label = ", ".join(f"{k}={_fmt(group.config.get(k))}" for k in keys)
        series.setdefault(label, []).append(group)
    return series


@dataclass
class PaperCurve:
    """The paper's values of a plot's ``y`` along its ``x`` at one setting (``where`` less ``x``)."""

    label: str
    where: dict[str, Any]
    values: list[PaperValue]
    series: list[str]  # the labels of the drawn series run at this setting


def paper_curves(experiment: Experiment, plot: Plot, series: Mapping[str, Sequence[Group]]) -> list[PaperCurve]:
    """The registered paper values that a plot can show beside its runs: those of metric ``y`` whose setting names
    ``x`` (and ``hue``, when the plot has one), one curve per setting that some drawn series was run at. Drawn
    whatever the scale of the runs (the plot says when they are not the paper's setup)."""
    by_setting: dict[str, list[PaperValue]] = {}
    for p in experiment.paper:
        if p.metric == plot.y and plot.x in p.where and (plot.hue is None or plot.hue in p.where):
            by_setting.setdefault(canonical_json({k: v for k, v in p.where.items() if k != plot.x}), []).append(p)
    curves = []
    for values in by_setting.values():
        where = {k: v for k, v in values[0].where.items() if k != plot.x}
        matched = [label for label, members in series.items() if any(_matches(g.config, where) for g in members)]
        if matched:
            curves.append(PaperCurve("", where, values, matched))
    differ = [k for k in dict.fromkeys(k for c in curves for k in c.where)
              if k == plot.hue or len({canonical_json(c.where.get(k)) for c in curves}) > 1]
    for c in curves:
        sources = sorted({p.source for p in c.values if p.source})
        text = ", ".join(f"{k}={_fmt(c.where[k])}" for k in differ if k in c.where)
        c.label = "paper: " + (text or (sources[0] if len(sources) == 1 else plot.y))
    return curves


def plot_figure(experiment: Experiment, plot: Plot, groups: Sequence[Group]) -> Any:
    """The matplotlib figure of ``plot`` drawn from the aggregated groups; ``None`` when no group has a numeric
    ``y``. Runs are filled markers (boxes and every seed's point for ``box``); the paper's values
    (:func:`paper_curves`, and the values matched to a group) hollow squares on dashed lines; runs without a
    place on the x axis (:func:`reference_series`) dotted horizontal lines."""
    from symkit._checks import require

    matplotlib = require("matplotlib", "report plots")

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    series = plot_series(experiment, plot, groups)
    references = reference_series(experiment, plot, groups)
    rows = [g for members in series.values() for g in members]
    if not rows and not references:
        return None

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120, layout="constrained")
    categorical = plot.kind in ("bar", "box") or not all(_is_number(g.value(plot.x)) for g in rows)
    categories = [canonical_json(v) for v in _ordered(experiment, plot.x, [g.value(plot.x) for g in rows])]
    width = 0.8 / max(1, len(series))
    boxes: list[Any] = []  # legend entries drawn by hand: the boxes, the paper's single values
    paper_entry: list[Any] = []
    colours: dict[str, str] = {}
    positions: dict[int, float] = {}  # id(group) -> its x position
    all_x: set[float] = set()
    hidden = 0  # points a log axis cannot show

    def position(x: Any, i: int) -> float | None:
        """Where series ``i`` draws the value ``x``: side by side within a category for bars and boxes."""
        if not categorical:
            return float(x) if _is_number(x) else None
        c = canonical_json(x)
        if c not in categories:
            return None
        return categories.index(c) + (width * (i + 0.5) - 0.4 if plot.kind in ("bar", "box") else 0.0)

    palette = [f"C{i}" for i in range(10)]
    if len(series) > 10:  # more series than the default cycle's colours: tab20's, so no two series share one
        from matplotlib import colormaps

        palette = [colormaps["tab20"](i) for i in range(20)]
    for i, (label, members) in enumerate(series.items()):
        colour = colours[label] = palette[i % len(palette)]
        members = sorted(members, key=lambda g: categories.index(canonical_json(g.value(plot.x))) if categorical
                         else float(g.value(plot.x)))
        ys = [float(g.mean[plot.y]) for g in members]
        errs = [g.stderr.get(plot.y) or 0.0 for g in members]
        xs = [position(g.value(plot.x), i) for g in members]
        positions.update({id(g): x for g, x in zip(members, xs)})
        label = label or "symkit (mean ± s.e.)"
        if plot.kind == "bar":
            bars = ax.bar(xs, ys, width=width * 0.95, yerr=errs if any(errs) else None, color=colour,
                          label=label, capsize=3)
            if len(rows) <= 16:  # small enough to print each value (a zero-height bar is otherwise invisible)
                ax.bar_label(bars, labels=[f"{y:.3g}" for y in ys], fontsize=7, padding=2)
        elif plot.kind == "box":  # the spread over seeds, as the thesis's box plots (Fig. 3.2)
            per_seed = [[float(m[plot.y]) for m in g.metrics_by_seed.values() if _is_number(m.get(plot.y))] or [y]
                        for g, y in zip(members, ys)]
            boxed = [(x, v) for x, v in zip(xs, per_seed) if len(v) > 1]
            if boxed:  # a box needs two values at least; one seed is its point alone
                ax.boxplot([v for _, v in boxed], positions=[x for x, _ in boxed], widths=width * 0.85,
                           patch_artist=True, manage_ticks=False, showfliers=False,
                           boxprops={"facecolor": colour, "alpha": 0.45}, medianprops={"color": "black"})
            for x, values in zip(xs, per_seed):  # every seed's value, so that each setting run shows
                ax.plot([x] * len(values), values, linestyle="none", marker="o", markersize=6, color=colour,
                        markeredgecolor="black", markeredgewidth=0.6, zorder=3)
            boxes.append(Patch(facecolor=colour, edgecolor="black", alpha=0.7, label=label) if boxed else
                         Line2D([], [], linestyle="none", marker="o", markersize=6, color=colour,
                                markeredgecolor="black", markeredgewidth=0.6, label=label))
        elif plot.kind == "scatter":
            ax.errorbar(xs, ys, yerr=errs if any(errs) else None, fmt="o", color=colour, label=label,
                        capsize=3, alpha=0.8, zorder=3)
        else:
            ax.errorbar(xs, ys, yerr=errs if any(errs) else None, fmt="-o", color=colour, label=label,
                        capsize=3, zorder=3)
        hidden += sum((plot.logy and y <= 0) or (plot.logx and not categorical and x <= 0) for x, y in zip(xs, ys))
        all_x.update(xs)

    # the paper's values beside the runs: whole curves along x, or single values matched to a group
    curves = paper_curves(experiment, plot, series)
    dashed = "--" if not categorical else "none"
    for curve in curves:
        i = list(series).index(curve.series[0])
        colour = colours[curve.series[0]] if len(curve.series) == 1 else "0.35"
        points = sorted((x, p) for p in curve.values
                        if (x := position(p.where[plot.x], i)) is not None)
        if points:
            ax.errorbar([x for x, _ in points], [p.value for _, p in points],
                        yerr=[p.stderr or 0.0 for _, p in points] if any(p.stderr for _, p in points) else None,
                        fmt="s", linestyle=dashed, markerfacecolor="none", color=colour, label=curve.label,
                        capsize=2, zorder=2.5)
            all_x.update(x for x, _ in points)
    single = [(positions[id(g)], g.paper[plot.y], colours[label]) for label, members in series.items()
              for g in members if plot.y in g.paper and plot.x not in g.paper[plot.y].where]
    for x, p, colour in single:
        ax.plot([x], [p.value], linestyle="none", marker="s", markerfacecolor="none", color=colour, zorder=2.5)
    if single:  # one neutral legend entry for them, whatever their colour
        sources = sorted({p.source for _, p, _ in single if p.source})
        text = "; ".join(sources) if 0 < len(sources) <= 2 else "value at each run's setting"
        paper_entry.append(Line2D([], [], linestyle="none", marker="s", markerfacecolor="none", color="0.35",
                                  label=f"paper: {text}"))

    # runs with no place on the x axis: a horizontal line each, in the colour of their hue's series
    hue_colour = {canonical_json(members[0].config.get(plot.hue)): colours[label]
                  for label, members in reversed(list(series.items()))} if plot.hue else {}
    for j, (label, members) in enumerate(references.items()):
        for k, g in enumerate(members):
            y, se = float(g.mean[plot.y]), g.stderr.get(plot.y)
            colour = hue_colour.get(canonical_json(g.config.get(plot.hue)), f"C{(len(series) + j) % 10}")
            ax.axhline(y, color=colour, linestyle=":", linewidth=1.6,
                       label=f"{label or 'symkit'} (no {plot.x})" if k == 0 else None)
            if se:
                ax.axhspan(y - se, y + se, color=colour, alpha=0.12, linewidth=0)
            hidden += int(plot.logy and y <= 0)

    if plot.diagonal:
        lo, hi = ax.get_xlim()
        lo2, hi2 = ax.get_ylim()
        a, b = min(lo, lo2), max(hi, hi2)
        ax.plot([a, b], [a, b], color="0.5", linestyle=":", linewidth=1, label="y = x")
    if categorical and categories:
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels([c.strip('"') for c in categories], rotation=30 if len(categories) > 6 else 0,
                           ha="right" if len(categories) > 6 else "center")
        ax.set_xlim(-0.6, len(categories) - 0.4)
    elif not rows:
        ax.set_xticks([])
    if plot.kind == "bar" and not plot.logy and all(float(g.mean[plot.y]) >= 0 for g in rows):
        ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1e-12))
    swept = not categorical and plot.x in experiment.field_names() and 1 < len(all_x) <= 10
    if plot.logx and not categorical and rows:
        ax.set_xscale("log")
        if swept:  # tick the values run, written plainly (log-axis labels of 3x10^2 and 4x10^2 overlap)
            ax.set_xticks(sorted(all_x), [f"{v:g}" for v in sorted(all_x)])
            ax.minorticks_off()
    elif swept:
        ax.set_xticks(sorted(all_x))  # a swept setting: tick exactly the values that were run
    if plot.logy:
        ax.set_yscale("log")
        low = min((float(g.mean[plot.y]) for g in rows if float(g.mean[plot.y]) > 0), default=None)
        if plot.kind == "bar" and low is not None:  # bars start from the axis: a decade below the smallest
            ax.set_ylim(bottom=min(ax.get_ylim()[0], 10 ** math.floor(math.log10(low / 2))))
    ax.set_xlabel(plot.x)
    ax.set_ylabel(plot.y)
    title = plot.title or f"{experiment.name}: {plot.y} against {plot.x}"
    notes = []
    scales = [s for s in SCALES if s not in COMPARABLE and any(g.scale == s for g in rows)]
    if curves and scales:
        notes.append(f"symkit runs at {' / '.join(scales)} scale, not the paper's setup")
    if hidden:
        notes.append(f"{count(hidden, 'point')} at or below 0 not shown on the log axes")
    left_out = sum(_has_y(plot, g) and not _placed(plot, g) and not _unplaced(experiment, plot, g) for g in groups)
    if left_out:
        notes.append(f"{count(left_out, 'setting')} without {plot.x} not shown")
    title = "\n".join(textwrap.wrap(title, 60))  # a long title stays over the axes, beside an outside legend
    ax.set_title(title + "".join(f"\n{n}" for n in notes), fontsize=12 if not notes else 10)
    ax.grid(True, alpha=0.3, which="both")
    handles, labels = ax.get_legend_handles_labels()
    # the runs first, then the paper's values, then the lines of the runs without x
    kinds = [2 if lab.endswith(f"(no {plot.x})") else 1 if lab.startswith("paper: ") else 0 for lab in labels]
    handles = [*boxes, *(h for _, _, h in sorted(zip(kinds, range(len(kinds)), handles))), *paper_entry]
    if handles:
        if len(handles) > 5:  # beside the axes, where it covers no data
            ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
            fig.set_size_inches(8.6, 4.2)
        else:
            ax.legend(handles=handles, fontsize=8)
    return fig


def draw_plot(experiment: Experiment, plot: Plot, groups: Sequence[Group], path: Path) -> Path | None:
    """Draw ``plot`` from the aggregated groups into ``path`` (PNG, :func:`plot_figure`); ``None`` when no group
    has a numeric ``y``."""
    fig = plot_figure(experiment, plot, groups)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

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
        keys = set(varying_keys(experiment, groups, shown=True))
        first = groups[0].shown or groups[0].config
        fixed = {k: first[k] for k in experiment.field_names() if k in first and k not in keys}
        if fixed:
            parts += ["Settings shared by every row: " + ", ".join(f"{k}={_fmt(v)}" for k, v in fixed.items()), ""]
        resolved: dict[str, list[str]] = {}  # stored value -> the fields shown with the value the runs used
        for k in experiment.field_names():
            stored = [g.config.get(k) for g in groups if k in g.shown and not _same(g.shown[k], g.config.get(k))]
            if stored:
                resolved.setdefault(_fmt(stored[0]), []).append(k)
        if resolved:
            parts += ["Shown as the runs used them (resolved by the experiment): "
                      + "; ".join(f"{', '.join(ks)} (stored as {v})" for v, ks in resolved.items()) + ".", ""]
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


def select_runs(records: Sequence[RunRecord], seeds: Sequence[int] | None = None,
                where: Mapping[str, Sequence[Any]] | None = None) -> list[RunRecord]:
    """The ``records`` of ``seeds`` (all when None) whose config has, for each key of ``where``, one of its values
    (typed values, as :func:`parse_where` gives them; compared in their stored JSON form)."""
    wanted = None if seeds is None else set(seeds)
    allowed = {k: {canonical_json(v) for v in values} for k, values in (where or {}).items()}
    return [r for r in records if (wanted is None or r.seed in wanted)
            and all(k in r.config and canonical_json(r.config[k]) in ok for k, ok in allowed.items())]


def parse_where(experiment: Experiment, items: Sequence[str]) -> dict[str, list[Any]]:
    """``key=value`` items (``--where``, a marker's ``where=``) as typed values per config field; a key given twice
    allows either value. ``ValueError`` naming the item and the experiment's valid settings."""
    from symkit.lab.runner.sweep import SweepError, parse_assignments

    try:
        return parse_assignments(experiment, items, option="--where")
    except SweepError as exc:
        raise ValueError(str(exc)) from None


def describe_selection(seeds: Sequence[int] | None = None, where: Sequence[str] = ()) -> str:
    """`` with seeds [..] and size=10`` for an error message: what a selection asked for ('' for none)."""
    parts = ([] if seeds is None else [f"seeds {sorted(set(seeds))}"]) + list(where)
    return "" if not parts else " with " + " and ".join(parts)


def write_report(experiment: Experiment, store: Any, out: Path, fmt: str = "md",
                 seeds: Sequence[int] | None = None, where: Sequence[str] = ()) -> tuple[str, list[Path]]:
    """Build the report of ``experiment`` from the runs in ``store`` into the directory ``out`` (``report.md`` or
    ``report.csv`` and the plots); returns its text and the files written. ``seeds``: only the runs of these seeds
    (a batch of seeds fixed in advance, read on its own); ``where``: only the runs whose config has these
    ``key=value`` settings (:func:`parse_where`). ValueError when there are no runs (so chosen)."""
    records = store.runs(experiment.name)
    if not records:
        raise ValueError(f"no runs of {experiment.name!r} in {store.path}; run `symkit reproduce {experiment.name}` "
                         "first")
    if seeds is not None or where:
        records = select_runs(records, seeds, parse_where(experiment, where))
        if not records:
            raise ValueError(f"no runs of {experiment.name!r}{describe_selection(seeds, where)} in {store.path}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rep = build_report(experiment, records, fmt=fmt, plot_dir=out)
    path = out / ("report.md" if fmt == "md" else "report.csv")
    path.write_text(rep.text)
    return rep.text, [path, *rep.plots]
