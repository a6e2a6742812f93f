"""Tables in the docs written from the results store: the marked blocks of README.md and docs/*.md.

A marked block is a pair of HTML comments (invisible once rendered) around a table that ``symkit report`` writes::

    <!-- symkit:table rl-sac/comparisons seeds=7-10 -->

    | env | steps | ... |

    <!-- /symkit:table -->

The opening marker names the experiment and one of its report's tables (:func:`report_tables`); ``seeds=LIST``
reads only those seeds' runs, as ``symkit report NAME --seeds LIST`` does; ``where=KEY=VALUE`` (repeatable; a key
given twice allows either value) reads only the runs with that setting, as ``--where`` does (a study archived beside
the experiment's own sweep, e.g. a smaller config, gets its own table); ``columns=a,b,c`` keeps those columns of
the table, in that order (a header with spaces is written with ``_`` for each space: ``mse_(paper)``).
:func:`refresh_docs` rewrites every block from the store (and docs/reproductions.md,
:mod:`symkit.lab.runner.reproductions`), or, with ``check=True``, changes nothing and returns what is out of date.
Markers inside fenced code blocks are text, not blocks.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from symkit.lab.experiments.registry import Experiment, get_experiment
from symkit.lab.runner.report import aggregate, describe_selection, markdown_table, parse_where, select_runs

__all__ = ["TableSpec", "Block", "Change", "NAMED_TABLES", "report_tables", "parse_spec", "select_columns",
           "find_blocks", "render_blocks", "doc_files", "refresh_docs"]

OPEN = "<!-- symkit:table "
CLOSE = "<!-- /symkit:table -->"
_OPEN_LINE = re.compile(r"^<!-- symkit:table (?P<spec>.*?) -->$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")

#: tables of an experiment's report found by their header's first cells, under a name that says what they hold
#: (every report also has ``metrics``, the table of every stored metric, and ``summary-N``, the N-th table of the
#: experiment's own text)
NAMED_TABLES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "rl-sac": {
        "summary": ("env", "steps", "model", "settings", "seeds", "final return"),
        "comparisons": ("env", "steps", "model", "settings", "against"),
        "per-seed": ("env", "steps", "model", "settings", "seed"),
    },
}


@dataclass(frozen=True)
class TableSpec:
    """What a marker asks for: table ``table`` of experiment ``experiment``'s report, from the runs of ``seeds``
    (all when None)."""

    experiment: str
    table: str
    seeds: tuple[int, ...] | None = None
    columns: tuple[str, ...] | None = None  # the columns kept, by header name, in this order (None: all)
    where: tuple[str, ...] = ()  # ``key=value`` settings the runs must have (none: every run)

    def __str__(self) -> str:
        return (f"{self.experiment}/{self.table}" + ("" if self.seeds is None else
                                                     " seeds=" + ",".join(map(str, self.seeds)))
                + "".join(f" where={item}" for item in self.where)
                + ("" if self.columns is None else " columns=" + ",".join(self.columns)))


@dataclass(frozen=True)
class Block:
    """A marked block of a file: its spec, the line of its opening marker (from 1) and the character range of its
    body (between the two markers' lines)."""

    spec: TableSpec
    line: int
    start: int
    end: int
    text: str = ""  # the marker's words, as written


@dataclass(frozen=True)
class Change:
    """A generated file whose text differs from what the store gives: ``path``, its text now (``old``; empty for a
    missing file), the text it should have (``new``) and what is stale in it (``what``)."""

    path: Path
    old: str
    new: str
    what: tuple[str, ...]

    def diff(self, root: Path | None = None) -> str:
        """A unified diff from the file's text to the generated one."""
        name = str(self.path.relative_to(root)) if root is not None and self.path.is_relative_to(root) else str(
            self.path)
        return "".join(difflib.unified_diff(self.old.splitlines(keepends=True), self.new.splitlines(keepends=True),
                                            fromfile=f"{name} (as it is)", tofile=f"{name} (from the store)"))


def _header(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def _tables_in(text: str) -> list[str]:
    """The markdown tables of ``text``: each a run of lines that start with ``|``."""
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append("\n".join(current))
            current = []
    if current:
        tables.append("\n".join(current))
    return tables


def report_tables(experiment: Experiment, records: Sequence) -> dict[str, str]:
    """The named tables of ``experiment``'s report from its stored ``records``: ``metrics`` (every stored metric,
    per setting), ``summary-1``, ``summary-2``, ... (the tables of the experiment's ``summarize`` text, in order) and
    the names :data:`NAMED_TABLES` gives it. ``ValueError`` when no record is a finished run."""
    groups = aggregate(experiment, records)
    if not groups:
        raise ValueError(f"no finished runs of {experiment.name!r} to build its tables from")
    tables = {"metrics": markdown_table(experiment, groups)}
    found = _tables_in(experiment.summarize([g.as_row() for g in groups])) if experiment.summarize else []
    tables.update((f"summary-{i}", table) for i, table in enumerate(found, start=1))
    for name, head in NAMED_TABLES.get(experiment.name, {}).items():
        match = [t for t in found if _header(t.splitlines()[0])[:len(head)] == head]
        if match:
            tables[name] = match[0]
    return tables


def parse_spec(text: str) -> TableSpec:
    """``"rl-sac/comparisons"`` or ``"rl-sac/comparisons seeds=7-10"`` as a :class:`TableSpec`."""
    from symkit.lab.runner.sweep import parse_seeds

    parts = text.split()
    if not parts or not _NAME.match(parts[0]):
        raise ValueError(f"marker {text!r}: expected EXPERIMENT/TABLE first, e.g. 'rl-sac/summary'")
    experiment, table = parts[0].split("/")
    seeds, columns, where = None, None, []
    for option in parts[1:]:
        key, _, value = option.partition("=")
        if key == "where":
            if "=" not in value or not value.partition("=")[0]:
                raise ValueError(f"marker {text!r}: where=KEY=VALUE names a setting and its value, got {option!r}")
            where.append(value)
            continue
        if key == "columns" and value:
            columns = tuple(value.split(","))
            if any(not c for c in columns):
                raise ValueError(f"marker {text!r}: columns=a,b,c names each column once, got {value!r}")
            continue
        if key != "seeds" or not value:
            raise ValueError(f"marker {text!r}: unknown option {option!r}; the options are seeds=LIST (e.g. "
                             "seeds=7-10), where=KEY=VALUE and columns=a,b,c")
        try:
            seeds = tuple(parse_seeds(value))
        except ValueError as exc:
            raise ValueError(f"marker {text!r}: {exc}") from None
    return TableSpec(experiment, table, seeds, columns, tuple(where))


def select_columns(table: str, columns: Sequence[str]) -> str:
    """The markdown ``table`` with only ``columns``, in that order: each a header name, or the name with ``_`` for
    its spaces; ``ValueError`` naming a column it does not have, and the ones it has."""
    rows = [_header(line) for line in table.strip("\n").splitlines()]
    names = [h.replace(" ", "_") for h in rows[0]]
    missing = [c for c in columns if c.replace(" ", "_") not in names]
    if missing:
        raise ValueError(f"no column {', '.join(map(repr, missing))}; its columns: {', '.join(names)}")
    keep = [names.index(c.replace(" ", "_")) for c in columns]
    return "\n".join("| " + " | ".join(row[i] for i in keep) + " |" if n != 1 else
                     "|" + "|".join("---" for _ in keep) + "|" for n, row in enumerate(rows))


def find_blocks(text: str, where: str = "text") -> list[Block]:
    """The marked blocks of ``text`` (markers in fenced code blocks are left alone); ``ValueError`` naming
    ``where`` and the line for a marker that is malformed, unclosed, nested or closes nothing."""
    blocks, fence, opened = [], None, None
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif fence is not None:
            if stripped.startswith(fence):
                fence = None
        elif stripped.startswith(OPEN):
            found = _OPEN_LINE.match(stripped)
            if found is None:
                raise ValueError(f"{where}, line {number}: a table marker is one line, '{OPEN}EXPERIMENT/TABLE -->'")
            if opened is not None:
                raise ValueError(f"{where}, line {number}: a table marker inside the block opened on line "
                                 f"{opened[1]}; close it first with '{CLOSE}'")
            try:
                spec = parse_spec(found.group("spec"))
            except ValueError as exc:
                raise ValueError(f"{where}, line {number}: {exc}") from None
            opened = (spec, number, offset + len(line), found.group("spec").strip())
        elif stripped == CLOSE:
            if opened is None:
                raise ValueError(f"{where}, line {number}: '{CLOSE}' closes no table marker")
            blocks.append(Block(opened[0], opened[1], opened[2], offset, opened[3]))
            opened = None
        offset += len(line)
    if opened is not None:
        raise ValueError(f"{where}, line {opened[1]}: the table marker for {opened[0]} is never closed ('{CLOSE}')")
    return blocks


def body(table: str) -> str:
    """A block's body for ``table``: the table between two blank lines."""
    return "\n" + table.strip("\n") + "\n\n"


def render_blocks(text: str, table_for: Callable[[TableSpec], str], where: str = "text") -> tuple[str, list[str]]:
    """``text`` with every marked block's body written by ``table_for(spec)``, and the specs of the blocks whose
    body changed. A ``ValueError`` of ``table_for`` is named by ``where`` and line."""
    out, at, changed = [], 0, []
    for block in find_blocks(text, where):
        try:
            new = body(table_for(block.spec))
        except (ValueError, KeyError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise ValueError(f"{where}, line {block.line}: table {block.text}: {message}") from None
        if text[block.start:block.end] != new:
            changed.append(block.text)
        out += [text[at:block.start], new]
        at = block.end
    out.append(text[at:])
    return "".join(out), changed


def doc_files(root: str | os.PathLike[str]) -> list[Path]:
    """The files that may hold marked tables: ``README.md`` and ``docs/*.md`` under ``root`` (those that exist)."""
    root = Path(root)
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    return files + sorted(p for p in (root / "docs").glob("*.md") if p.is_file())


class _Tables:
    """The tables of the store's reports, each report built once (per experiment and choice of runs)."""

    def __init__(self, store: object) -> None:
        self.store = store
        self.cache: dict[tuple[str, tuple[int, ...] | None, tuple[str, ...]], dict[str, str]] = {}

    def __call__(self, spec: TableSpec) -> str:
        key = (spec.experiment, spec.seeds, spec.where)
        if key not in self.cache:
            experiment = get_experiment(spec.experiment)
            records = [r for r in self.store.runs(spec.experiment) if r.status == "ok"]  # type: ignore[attr-defined]
            records = select_runs(records, spec.seeds, parse_where(experiment, spec.where))
            if not records:
                raise ValueError(f"no finished runs of {spec.experiment!r}{describe_selection(spec.seeds, spec.where)}"
                                 f" in the store; import its archive first (`symkit import "
                                 f"results/{spec.experiment}.jsonl`)")
            self.cache[key] = report_tables(experiment, records)
        tables = self.cache[key]
        if spec.table not in tables:
            raise ValueError(f"the report of {spec.experiment!r} has no table {spec.table!r}; its tables: "
                             f"{', '.join(tables)}")
        if spec.columns is None:
            return tables[spec.table]
        return select_columns(tables[spec.table], spec.columns)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def refresh_docs(root: str | os.PathLike[str], store: object, check: bool = False) -> list[Change]:
    """Every marked table of README.md and docs/*.md under ``root`` written from the runs in ``store``, and
    docs/reproductions.md (:func:`symkit.lab.runner.reproductions.build_reproductions`). Returns the files whose text
    differs from the generated one; unless ``check``, they are rewritten. Nothing is written when any block fails
    (an unknown table, an experiment without runs): the ``ValueError`` names the file and line."""
    from symkit.lab.runner.reproductions import PAGE, build_reproductions

    root = Path(root)
    tables = _Tables(store)
    changes = []
    for path in doc_files(root):
        if path == root / PAGE:
            continue
        old = path.read_text(encoding="utf-8")
        new, stale = render_blocks(old, tables, where=str(path.relative_to(root)))
        if new != old:
            changes.append(Change(path, old, new, tuple(stale)))
    page = root / PAGE
    old = page.read_text(encoding="utf-8") if page.is_file() else ""
    new = build_reproductions(store)
    if new != old:
        changes.append(Change(page, old, new, ("the page",)))
    if not check:
        for change in changes:
            _write(change.path, change.new)
    return changes
