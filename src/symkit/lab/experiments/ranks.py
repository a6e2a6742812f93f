"""The ranks of the equivariant bases of the thesis' Tables A.1-A.8, computed by the core solver.

One run computes one cell (a table, a group, a representation) and records our rank, the thesis' value (blank
cells have none) and whether the two agree. ``--quick`` runs the cells that take seconds, the full sweep every cell
the CI budget allows; ``symkit ranks --all`` adds the cells the thesis left blank and the slow ones.

The experiment is registered only when the core's ``symkit.lab.experiments.thesis_tables`` is importable.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from symkit.lab.experiments.fields import Seed
from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, register

TIERS = ("quick", "full", "all")


@dataclass
class RanksConfig:
    """One cell of the thesis' rank tables."""

    table: str = "A.1"
    group: str = ""
    rep: str = ""
    seed: Seed = 0


def _tables() -> Any:
    from symkit.lab.experiments import thesis_tables

    return thesis_tables


def _cells(tier: str = "all") -> list[Any]:
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    return list(_tables().thesis_cells(tier=tier))


def _key(table: str, group: str, rep: str) -> tuple[str, str, str]:
    return (str(table), str(group), str(rep))


def find_cell(table: str, group: str, rep: str) -> Any:
    """The thesis cell with this table, group and representation (a ``ValueError`` listing similar ones if none)."""
    cells = {_key(c.table, c.group, c.rep): c for c in _cells("all")}
    cell = cells.get(_key(table, group, rep))
    if cell is None:
        near = [f"{c.group} {c.rep}" for c in cells.values() if c.table == table][:12]
        tables = ", ".join(sorted({c.table for c in cells.values()}))
        where = f"cells of table {table!r}: {', '.join(near)}" if near else f"tables: {tables}"
        raise ValueError(f"no cell ({table!r}, {group!r}, {rep!r}) in the thesis tables; {where}")
    return cell


def thesis_value(cell: Any) -> int | str | None:
    """The thesis' entry for ``cell`` as an int when it is one, the raw text otherwise, ``None`` when blank."""
    value = cell.thesis
    if value is None:
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text or text in ("-", "—", "?"):
        return None
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return text


def run(config: RanksConfig) -> dict[str, Any]:
    """Compute the rank of one cell: ``{"rank", "thesis", "match"}`` (``match`` is None for blank cells)."""
    cell = find_cell(config.table, config.group, config.rep)
    rank = int(_tables().compute_rank(cell))
    thesis = thesis_value(cell)
    match: bool | None = None
    if isinstance(thesis, int):
        match = rank == thesis
    elif isinstance(thesis, str) and re.fullmatch(r">\d+", thesis):  # the thesis gives a lower bound
        match = rank > int(thesis[1:])
    return {"rank": rank, "thesis": thesis, "match": match}


def tensor_order(rep: str) -> int | None:
    """The tensor order of a representation written as in the thesis tables (``T(p,q)``, ``T3``, ``V**2``,
    ``V⊗V``...); ``None`` when it cannot be read."""
    text = rep.replace(" ", "")
    m = re.fullmatch(r"T\((\d+)(?:,(\d+))?\)", text) or re.fullmatch(r"T_?(\d+)", text)
    if m:
        return sum(int(g) for g in m.groups() if g)
    m = re.fullmatch(r"V\*\*(\d+)|V\^(\d+)", text)
    if m:
        return int(next(g for g in m.groups() if g))
    if re.fullmatch(r"V(\.T)?([⊗*]V(\.T)?)*", text):
        return text.count("V")
    return None


def select_points(tier: str = "full", group: str | None = None, max_rank: int | None = None) -> list[dict[str, Any]]:
    """The ``{table, group, rep}`` of the cells of ``tier``, optionally of one group and of order <= ``max_rank``."""
    cells = _cells(tier)
    if group is not None:
        groups = sorted({c.group for c in cells})
        cells = [c for c in cells if c.group == group]
        if not cells:
            raise ValueError(f"no cells for group {group!r}; groups: {', '.join(groups)}")
    if max_rank is not None:
        if max_rank < 0:
            raise ValueError(f"--max-rank must be >= 0, got {max_rank}")
        cells = [c for c in cells if (tensor_order(c.rep) or 0) <= max_rank]
    return [{"table": c.table, "group": c.group, "rep": c.rep} for c in cells]


def _points(quick: bool) -> list[dict[str, Any]]:
    return select_points("quick" if quick else "full")


def format_results(ranks: Mapping[tuple[str, str, str], int | None], cells: Iterable[Any] | None = None) -> str:
    """The thesis-style tables for the given ``{(table, group, rep): rank}``, over ``cells`` (default: those keys)."""
    index = {_key(c.table, c.group, c.rep): c for c in _cells("all")}
    keys = list(ranks) if cells is None else [_key(c.table, c.group, c.rep) for c in cells]
    results = {index[k]: (None if ranks.get(k) is None else int(ranks[k])) for k in keys if k in index}
    return _tables().format_tables(results)


def tables_from_records(records: Sequence[Any], points: Sequence[Mapping[str, Any]]) -> str:
    """The tables for ``points`` from stored ranks runs (cells not computed yet are left empty)."""
    stored = {}
    for r in records:
        if r.status == "ok" and r.metrics is not None:
            stored[_key(r.config["table"], r.config["group"], r.config["rep"])] = r.metrics.get("rank")
    keys = [_key(p["table"], p["group"], p["rep"]) for p in points]
    index = {_key(c.table, c.group, c.rep): c for c in _cells("all")}
    return format_results({k: stored.get(k) for k in keys}, [index[k] for k in keys if k in index])


def summarize(rows: Sequence[Mapping[str, Any]]) -> str:
    """Report section: the tables as in the thesis, and how many cells agree."""
    ranks = {_key(r["config"]["table"], r["config"]["group"], r["config"]["rep"]): r["mean"].get("rank")
             for r in rows}
    compared = [r["mean"].get("match") for r in rows if r["mean"].get("match") is not None]
    agree = sum(1 for m in compared if m is True or m == 1)
    head = f"{agree} of {len(compared)} cells with a thesis value agree with it; {len(rows) - len(compared)} cells " \
           "have no thesis value."
    return head + "\n\n```\n" + format_results(ranks).rstrip() + "\n```"


def paper_values() -> tuple[PaperValue, ...]:
    """Every rank the thesis prints as a number (Tables A.1-A.8), for the run of its cell; lower bounds (">20") and
    blank cells are not values, nor are the ``extra`` cells (facts beyond the thesis's tables). An exact rank is
    reproduced only by the same integer (no error bars)."""
    out = []
    for c in _cells("all"):
        value = thesis_value(c)
        if c.table == "extra":
            continue
        if isinstance(value, int):
            out.append(PaperValue("rank", float(value), {"table": c.table, "group": c.group, "rep": c.rep},
                                  f"Table {c.table}"))
    return tuple(out)


if importlib.util.find_spec("symkit.lab.experiments.thesis_tables") is not None:
    EXPERIMENT = register(
        Experiment(
            name="ranks",
            description="Ranks of equivariant bases (dimension of the space of equivariant maps) per group and rep.",
            reproduces="Finzi thesis, Tables A.1-A.8 (ranks of the EMLP equivariant bases), with the thesis values",
            config=RanksConfig,
            run=run,
            points=_points,
            sweep={"seed": (0,)},
            plots=(
                Plot(x="thesis", y="rank", hue="table", kind="scatter", diagonal=True, logx=True, logy=True,
                     title="Ranks computed here against the thesis (log axes: zero ranks not shown)"),
            ),
            summarize=summarize,
            paper=paper_values(),
        )
    )
