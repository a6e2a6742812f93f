"""docs/reproductions.md: every paper result symkit sets out to reproduce, beside what its stored runs show.

One row per figure or table: each group of an experiment's registered paper values (:class:`PaperValue`, grouped
by the figure or table its ``source`` names), each experiment that registers none (one row for what it
reproduces), and each entry of :data:`symkit.lab.experiments.unreproduced.UNREPRODUCED`. The status is computed from
the numbers (:data:`RULE`); the page is written by ``symkit report --docs`` from a store into which every
``results/*.jsonl`` was imported, and ``make test`` checks that it is current.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symkit.lab._text import count
from symkit.lab.experiments.registry import Experiment, PaperValue, all_experiments, broken_modules
from symkit.lab.experiments.unreproduced import DOCUMENTS, PAPER_SCALE_NEEDS, UNREPRODUCED, document_of
from symkit.lab.runner.report import COMPARABLE, SCALES, Group, aggregate, format_value
from symkit.lab.store import canonical_json

__all__ = ["PAGE", "STATUSES", "RULE", "Comparison", "Row", "builtin_experiments", "compare", "status_of",
           "experiment_rows", "build_reproductions"]

#: where the page lives, under the repository's root
PAGE = Path("docs") / "reproductions.md"
REPRODUCED, ORDERING, CONTRADICTS, MISSING, NEEDS = ("reproduced", "ordering only", "contradicts", "missing",
                                                     "needs data / GPU")
STATUSES = (REPRODUCED, ORDERING, CONTRADICTS, MISSING, NEEDS)
#: how far from the paper a value may lie and still reproduce it, in standard errors (ours plus the paper's)
TOLERANCE = 2.0
#: paper values of a group printed in its row; a larger group is listed value by value below the table
INLINE = 2

RULE = f"""\
Each paper value is compared with the runs at the `paper` or `default` scale whose settings match it (the report's
rule: `symkit report NAME` shows the same pairs). A value is **within** when |symkit - paper| <= {TOLERANCE:g} x
(symkit's standard error + the paper's), each standard error 0 where there is none (one seed; a paper without error
bars). A row's status, from its compared values:

- **reproduced**: every compared value is within (a row that compares only some of its values says how many);
- **ordering only**: some value is not within, but every pair of compared values of one metric whose paper values
  differ is ordered as in the paper (at least one such pair);
- **contradicts**: some value is not within and the ordering does not hold either;
- a result whose paper prints no number but an ordering (curves, boxes, a sentence) is checked by its experiment's
  registered claims, each a named comparison on the runs at the `paper` or `default` scale (`symkit report NAME`
  shows the numbers): **ordering only** when every check holds, **contradicts** when one fails (named in the row);
- **needs data / GPU**: nothing compared, and the paper's scale needs data or hardware this project does not have
  (named in the row; the command runs it where they exist);
- a comparison made with `default`-scale runs of an experiment whose default runs a stand-in for the paper's data
  (bundled digits for MNIST, fewer epochs) says so in its row: its values are not expected within the paper's;
- **missing**: nothing compared otherwise (the row says why, and gives the command that runs it where there is one).
"""


@dataclass(frozen=True)
class Comparison:
    """One paper value beside one stored group of runs that matches it."""

    paper: PaperValue
    ours: float
    stderr: float | None
    seeds: int
    scale: str

    @property
    def tolerance(self) -> float:
        return TOLERANCE * ((self.stderr or 0.0) + (self.paper.stderr or 0.0))

    @property
    def within(self) -> bool:
        return abs(self.ours - self.paper.value) <= self.tolerance


@dataclass
class Row:
    """One row of the page."""

    document: str
    result: str
    experiment: str
    paper: str
    ours: str
    scale: str
    status: str
    why: str
    values: list[tuple[PaperValue, list[Comparison]]] = field(default_factory=list)


def builtin_experiments() -> dict[str, Experiment]:
    """symkit's own experiments (not those that ``SYMKIT_EXPERIMENT_MODULES`` adds), by name; ``ValueError`` when
    one of its modules fails to import (its rows would be missing)."""
    broken = sorted(m for m in broken_modules() if m.startswith("symkit.lab.experiments."))
    if broken:
        raise ValueError(f"experiment modules that fail to import: {', '.join(broken)}; the page needs them all")
    return {name: e for name, e in all_experiments().items() if e.run.__module__.startswith("symkit.lab.experiments.")}


def _result_of(source: str) -> str:
    """The figure or table a paper value's ``source`` names: the text before its first parenthesis."""
    return source.split(" (")[0].strip() or "paper values"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def compare(values: Sequence[PaperValue], groups: Sequence[Group]) -> list[tuple[PaperValue, list[Comparison]]]:
    """Each paper value with the comparable groups (``paper`` and ``default`` scale) that match it and have the
    metric as a number."""
    out = []
    for value in values:
        found = [Comparison(value, float(g.mean[value.metric]), g.stderr.get(value.metric), len(g.seeds), g.scale)
                 for g in groups if g.paper.get(value.metric) is value and _is_number(g.mean.get(value.metric))]
        out.append((value, found))
    return out


def _ordered(comparisons: Sequence[Comparison]) -> bool:
    """Whether every pair of comparisons of one metric whose paper values differ is ordered as in the paper, with
    at least one such pair."""
    pairs = 0
    for i, a in enumerate(comparisons):
        for b in comparisons[i + 1:]:
            if a.paper.metric != b.paper.metric or a.paper.value == b.paper.value:
                continue
            pairs += 1
            if (a.ours - b.ours) * (a.paper.value - b.paper.value) <= 0:
                return False
    return pairs > 0


def status_of(comparisons: Sequence[Comparison]) -> str | None:
    """The status of a row's compared values (:data:`RULE`); None when nothing is compared."""
    if not comparisons:
        return None
    if all(c.within for c in comparisons):
        return REPRODUCED
    return ORDERING if _ordered(comparisons) else CONTRADICTS


def _where(value: PaperValue) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in value.where.items())


def _scales(groups: Sequence[Group]) -> str:
    runs = {scale: sum(len(g.seeds) for g in groups if g.scale == scale) for scale in SCALES}
    return ", ".join(f"{scale} ({count(n, 'run')})" for scale, n in runs.items() if n) or "–"


def _command(experiment: Experiment) -> str:
    if experiment.paper_scale is not None:  # every such experiment reads its paper-scale data from files
        return f"`symkit reproduce {experiment.name} --scale paper --data-dir DATA`"
    return f"`symkit reproduce {experiment.name}`"


def _paper_scale_only(experiment: Experiment, values: Sequence[PaperValue]) -> bool:
    """Whether some value's settings differ from the defaults in a field the paper scale sets (its data set, say):
    only a paper-scale run can match it."""
    paper = experiment.scale_overrides("paper")
    if not paper:
        return False
    default = experiment.config()
    return any(key in paper and canonical_json(value) != canonical_json(getattr(default, key, None))
               for v in values for key, value in v.where.items())


def _not_compared(experiment: Experiment, groups: Sequence[Group],
                  values: Sequence[PaperValue] | None = None) -> tuple[str, str]:
    """The status and the reason of a row that compares nothing (``values``: the row's paper values, None for a
    result with none registered)."""
    has_values = values is not None
    if not groups:
        why = f"no run in `results/{experiment.name}.jsonl`"
    elif not any(g.scale in COMPARABLE for g in groups):
        why = (f"the archived runs are at the {' and '.join(sorted({g.scale for g in groups}))} scale, not "
               "comparable with the paper")
    elif has_values:
        why = "no archived run at the paper's or default scale has these values' settings"
    else:
        why = f"no paper value registered to compare with (`symkit report {experiment.name}` shows the runs)"
    needs = PAPER_SCALE_NEEDS.get(experiment.name)
    if needs and (not any(g.scale in COMPARABLE for g in groups) or _paper_scale_only(experiment, values or ())):
        return NEEDS, f"{why}; needs {needs}; run: {_command(experiment)}"
    return MISSING, f"{why}; run: {_command(experiment)}"


def _claim_checks(experiment: Experiment, groups: Sequence[Group]) -> dict[str, bool]:
    """The experiment's registered claims checked on its groups at a comparable scale (empty without claims or such
    groups)."""
    comparable = [g.as_row() for g in groups if g.scale in COMPARABLE]
    if experiment.claims is None or not comparable:
        return {}
    return {str(name): bool(holds) for name, holds in experiment.claims(comparable).items()}


def _claims_cells(checks: Mapping[str, bool]) -> tuple[str, str, str]:
    """The cells of a row checked by claims: how many hold, the status (any failing: contradicts) and each check."""
    held = sum(checks.values())
    ours = f"{held} of {count(len(checks), 'check')} " + ("holds" if held == 1 else "hold")
    why = "; ".join(f"{name.replace('_', ' ')}: {'holds' if holds else 'does not hold'}"
                    for name, holds in checks.items())
    return ours, (ORDERING if held == len(checks) else CONTRADICTS), why


def figure_rows(experiment: Experiment, groups: Sequence[Group]) -> list[Row]:
    """One row per :class:`FigureClaims` of the experiment: its checks on the groups not at the quick scale, or
    "missing" with the command when no archived run decides any."""
    document = document_of(experiment.reproduces)
    usable = [g for g in groups if g.scale != "quick"]
    rows = []
    for figure in experiment.figure_claims:
        checks = {str(k): bool(v) for k, v in figure.claims([g.as_row() for g in usable]).items()} if usable else {}
        if checks:
            ours, status, why = _claims_cells(checks)
            runs_ = _scales(usable)
        else:
            ours, status, runs_ = "–", MISSING, "–"
            why = f"no archived run has this figure's settings; run: `{figure.command}`"
        # a figure prints curves, no number; a table's row checked this way compares its numbers' orderings only
        kind = "curves only" if figure.result.startswith("Fig") else "orderings only"
        rows.append(Row(document, figure.result, experiment.name, f"{figure.paper} ({kind})", ours, runs_, status,
                        why))
    return rows


def _inline_paper(values: Sequence[PaperValue]) -> str:
    return "; ".join(f"{v.metric} = {format_value(v.value, v.stderr)}" + (f" ({_where(v)})" if v.where else "")
                     for v in values)


def _inline_ours(comparisons: Sequence[Comparison]) -> str:
    return "; ".join(f"{format_value(c.ours, c.stderr)} ({count(c.seeds, 'seed')})" for c in comparisons) or "–"


def experiment_rows(experiment: Experiment, records: Sequence[Any]) -> list[Row]:
    """The rows of one experiment: one per figure or table of its paper values (or one for what it reproduces when
    it registers none), then one per :class:`FigureClaims`, each with what was decided about it."""
    groups = aggregate(experiment, records) if records else []
    rows = _result_rows(experiment, groups, records) + figure_rows(experiment, groups)
    return [_with_decision(experiment, row) for row in rows]


def _command_text(value: Any) -> str | None:
    """A setting's value as the command line writes it in a ``--sweep`` list (None: a sequence, which has its own
    commas)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if isinstance(value, (list, tuple, dict)) else str(value)


def _rest_of_sweep(experiment: Experiment, records: Sequence[Any], scale: str,
                   missing: Sequence[PaperValue]) -> str:
    """The command that runs the paper values a row has no run for (their settings as ``--set``/``--sweep`` at the
    row's ``scale``; a sweep skips the runs its store holds), checked by planning it, and the median time of the
    experiment's archived runs at that scale on the machine that ran them; '' when no such command plans them."""
    from symkit.lab.runner.report import scale_of
    from symkit.lab.runner.sweep import SweepError, format_seconds, plan

    settings: dict[str, list[Any]] = {}
    for value in missing:
        for key, setting in value.where.items():
            if setting not in settings.setdefault(key, []):
                settings[key].append(setting)
    texts = {key: [_command_text(v) for v in values] for key, values in settings.items()}
    if any(t is None for values in texts.values() for t in values):
        return ""
    try:
        planned = [spec.config for spec in plan(experiment, scale=scale, settings=settings)]
    except SweepError:
        return ""
    if not all(any(all(canonical_json(config.get(k)) == canonical_json(v) for k, v in value.where.items())
                   for config in planned) for value in missing):
        return ""
    options = " ".join(f"--{'set' if len(values) == 1 else 'sweep'} {key}={','.join(values)}"
                       for key, values in texts.items())
    command = " ".join(part for part in (f"symkit reproduce {experiment.name}",
                                         "--scale paper" if scale == "paper" and experiment.paper_scale else "",
                                         options) if part)
    durations = [r.duration for r in records if r.status == "ok" and scale_of(experiment, r.config) == scale]
    if not durations:
        return f"; run: `{command}`"
    median = statistics.median(durations)
    return (f"; run: `{command}` after `symkit import results/{experiment.name}.jsonl` (the sweep skips the "
            f"archived runs; {format_seconds(median)} a run, the median of the "
            f"{count(len(durations), 'archived run')} at that scale)")


def _result_rows(experiment: Experiment, groups: Sequence[Group], records: Sequence[Any] = ()) -> list[Row]:
    """The rows of the experiment's paper values, or its claims row when it registers none."""
    document = document_of(experiment.reproduces)
    scale = _scales(groups)
    if not experiment.paper:
        checks = _claim_checks(experiment, groups)
        if checks:
            ours, status, why = _claims_cells(checks)
            return [Row(document, experiment.reproduces, experiment.name, "an ordering (no number printed)", ours,
                        scale, status, why)]
        status, why = _not_compared(experiment, groups)
        runs = sum(len(g.seeds) for g in groups)
        ours = f"{count(runs, 'run')} in {count(len(groups), 'setting')}" if groups else "–"
        return [Row(document, experiment.reproduces, experiment.name, "no number registered", ours, scale, status,
                    why)]
    by_result: dict[str, list[PaperValue]] = {}
    for value in experiment.paper:
        by_result.setdefault(_result_of(value.source), []).append(value)
    rows = []
    for result, values in by_result.items():
        pairs = compare(values, groups)
        comparisons = [c for _, found in pairs for c in found]
        status = status_of(comparisons)
        compared = sum(bool(found) for _, found in pairs)
        if status is None:
            status, why = _not_compared(experiment, groups, values)
        else:
            within = sum(c.within for c in comparisons)
            why = f"{within} of {count(len(comparisons), 'comparison')} within"
            if compared < len(values):
                scales = [c.scale for c in comparisons]
                missing = [value for value, found in pairs if not found]
                why += (f"; {len(values) - compared} of the {len(values)} paper values have no comparable run"
                        + _rest_of_sweep(experiment, records, max(set(scales), key=scales.count), missing))
        if len(values) <= INLINE:
            paper, ours = _inline_paper(values), _inline_ours(comparisons)
        else:
            metrics = ", ".join(dict.fromkeys(v.metric for v in values))
            link = f"[below](#{_anchor(_detail_heading(experiment.name, result))})"
            paper = f"{len(values)} values ({metrics}): {link}"
            ours = (f"{compared} of {len(values)} compared, {sum(c.within for c in comparisons)} within: {link}"
                    if comparisons else "–")
        if experiment.stand_in and any(c.scale == "default" for c in comparisons):
            why += f"; the default scale is a stand-in ({experiment.stand_in}), not the paper's setting"
        elif experiment.stand_in and experiment.paper_scale is None and comparisons:  # its defaults are its paper scale
            why += f"; its runs are a stand-in ({experiment.stand_in}), not the paper's setting"
        rows.append(Row(document, result, experiment.name, paper, ours, scale, status, why, pairs))
    return rows


def _anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _detail_heading(experiment: str, result: str) -> str:
    return f"{experiment}: {result}"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(rows: Sequence[Row]) -> list[str]:
    lines = ["| result | experiment | paper's value | symkit's value | scale | status | why, and how to run it |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        experiment = f"`{r.experiment}`" if r.experiment else "–"
        lines.append("| " + " | ".join(_cell(c) for c in (r.result, experiment, r.paper, r.ours, r.scale,
                                                           f"**{r.status}**", r.why)) + " |")
    return lines


def _details(row: Row) -> list[str]:
    lines = ["", f"### {_detail_heading(row.experiment, row.result)}", "",
             "| metric | setting | paper | symkit | seeds | scale | within |", "|---|---|---|---|---|---|---|"]
    for value, found in row.values:
        setting = _cell(_where(value)) or "every setting"
        paper = format_value(value.value, value.stderr)
        if not found:
            lines.append(f"| {value.metric} | {setting} | {paper} | – | – | – | – |")
        for c in found:
            lines.append(f"| {value.metric} | {setting} | {paper} | {format_value(c.ours, c.stderr)} | {c.seeds} | "
                         f"{c.scale} | {'yes' if c.within else 'no'} |")
    return lines


def _with_decision(experiment: Experiment, row: Row) -> Row:
    """``row`` with what was decided about its departure from the paper (``Experiment.decided``) after its reason."""
    key = "*" if not experiment.paper and row.result == experiment.reproduces else row.result
    decided = experiment.decided.get(key)
    return dataclasses.replace(row, why=f"{row.why}; decided: {decided}") if decided else row


def all_rows(store: Any, experiments: Mapping[str, Experiment] | None = None) -> list[Row]:
    """Every row of the page, documents in :data:`DOCUMENTS` order: the experiments' rows (by name), then the
    results no experiment's paper values cover."""
    experiments = builtin_experiments() if experiments is None else experiments
    rows = []
    for name, experiment in sorted(experiments.items()):
        records = [r for r in store.runs(name) if r.status == "ok"]
        rows += experiment_rows(experiment, records)
    for item in UNREPRODUCED:
        status = NEEDS if item.needs else MISSING
        why = item.reason + (f"; needs {item.needs}" if item.needs else "")
        why += f"; run: `{item.command}`" if item.command else "; no command runs it yet"
        rows.append(Row(item.document, item.result, "", item.paper, "–", "–", status, why))
    order = {d.key: i for i, d in enumerate(DOCUMENTS)}
    return sorted(rows, key=lambda r: order[r.document])  # stable: the order within a document is kept


def build_reproductions(store: Any, experiments: Mapping[str, Experiment] | None = None) -> str:
    """The text of docs/reproductions.md from the runs in ``store`` (every built-in experiment unless
    ``experiments`` is given)."""
    rows = all_rows(store, experiments)
    tally = ", ".join(f"{sum(r.status == s for r in rows)} {s}" for s in STATUSES)
    lines = ["# Reproductions", "",
             "Every paper result symkit sets out to reproduce, one row per figure or table, beside what symkit's "
             "archived runs show. This page is generated: `symkit import results/*.jsonl`, then `symkit report "
             "--docs` writes it from the experiments' registered paper values (`symkit list`), "
             "`src/symkit/lab/experiments/unreproduced.py` (the results no experiment covers, and what the paper "
             "scale needs) and the stored runs; `make test` checks that it is current "
             "(`tests/cli/test_generated_docs.py`). A run counts here once it is in an archive "
             "(`symkit export NAME --out results/NAME.jsonl`).", "",
             f"Of {len(rows)} results: {tally}.", "", "## How a row's status is decided", "", RULE.rstrip(), "",
             "Values are means over seeds ± standard error (sample standard deviation / sqrt(n)); the paper's as "
             "registered (± converted to a standard error where the paper prints a 95% interval). The scale "
             "column counts the archived runs by the scale they ran at (docs/scale.md); only `paper` and "
             "`default` runs are compared. A row some of whose paper values have no run gives the command that "
             "runs them (planned when the page is written) and the median time of the experiment's archived runs "
             "at that scale."]
    for document in DOCUMENTS:
        mine = [r for r in rows if r.document == document.key]
        if mine:
            lines += ["", f"## {document.title}", "", *_table(mine)]
    detailed = [r for r in rows if len(r.values) > INLINE]
    if detailed:
        lines += ["", "## Paper values one by one", "",
                  "The rows above with more values than fit in a cell, each value beside the archived runs that "
                  "match it."]
        for row in detailed:
            lines += _details(row)
    return "\n".join(lines) + "\n"
