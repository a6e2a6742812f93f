"""Results archives: finished runs as JSON lines, a plain-text file to keep beside the code.

A results store (:mod:`symkit.lab.store.db`) is a SQLite file on one machine; a run that took hours is lost with the
machine. ``symkit export NAME --out FILE`` writes an experiment's finished runs to an archive, one JSON object per
line, sorted by setting and seed so that a version-control diff shows only the runs added; ``symkit import FILE``
records them into any store, where ``report`` aggregates them with the runs made there and ``reproduce`` skips them.

Exporting into an existing archive adds to it: a run already in the file is kept as it is there (the first finished
result of a run is kept, as in the store), so exporting a store that lacks some archived runs loses none of them.
Only finished (``ok``) runs are archived; a failed run is not a result.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from symkit.lab.store.db import RunRecord, Store, config_hash, to_jsonable

ARCHIVE_FORMAT = "symkit-runs/1"
_FIELDS: dict[str, tuple[type, ...]] = {
    "experiment": (str,), "seed": (int,), "config": (dict,), "metrics": (dict,), "started_at": (str,),
    "finished_at": (str,), "duration": (int, float), "version": (str,), "host": (str,),
}


def run_to_entry(run: RunRecord) -> dict[str, Any]:
    """One finished run as an archive entry (a JSON-ready dict)."""
    if run.status != "ok":
        raise ValueError(f"only finished runs are archived; run {run.key} has status {run.status!r}")
    return {"format": ARCHIVE_FORMAT, "experiment": run.experiment, "seed": run.seed, "config": run.config,
            "metrics": run.metrics, "started_at": run.started_at, "finished_at": run.finished_at,
            "duration": run.duration, "version": run.version, "host": run.host}


def _entry_key(entry: Mapping[str, Any]) -> tuple[str, str, int]:
    return (entry["experiment"], config_hash(entry["config"]), entry["seed"])


#: the deepest nesting of lists and objects a run may have (a run's config and metrics are flat, with lists of
#: numbers at most a few levels deep); deeper lines are refused before they reach the recursive code that stores them
MAX_DEPTH = 32
#: the seeds SQLite can store (a signed 64-bit integer), as the store and every experiment's ``Seed`` field take them
_SEEDS = range(0, 2**63)
Check = Callable[[dict[str, Any]], None]


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels deep (an iterative walk)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _non_finite(value: Any, where: str) -> str | None:
    """The place (``metrics.loss``, ``config.lr[1]``) of the first float in ``value`` that is nan or infinite."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where
    if isinstance(value, dict):
        items = ((f"{where}.{k}", v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((place for place in (_non_finite(v, w) for w, v in items) if place is not None), None)


def _check_entry(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a JSON object (one run), got {type(entry).__name__}")
    if _depth_over(entry, MAX_DEPTH):
        raise ValueError(f"{where}: nested more than {MAX_DEPTH} levels deep; a run holds a flat config and metrics")
    if entry.get("format") != ARCHIVE_FORMAT:
        raise ValueError(f"{where}: not a symkit run (format {entry.get('format')!r}, expected {ARCHIVE_FORMAT!r})")
    for field, types in _FIELDS.items():
        if field not in entry:
            raise ValueError(f"{where}: the run has no {field!r} field")
        value = entry[field]
        if not isinstance(value, types) or isinstance(value, bool):
            expected = " or ".join(t.__name__ for t in types)
            raise ValueError(f"{where}: {field!r} must be {expected}, got {value!r}")
    if entry["seed"] not in _SEEDS:
        raise ValueError(f"{where}: 'seed' must be in [0, 2^63 - 1] (what the results store holds), got "
                         f"{entry['seed']}")
    if entry["config"].get("seed") != entry["seed"]:
        raise ValueError(f"{where}: the config's seed {entry['config'].get('seed')!r} is not the run's seed "
                         f"{entry['seed']}")
    for field in ("config", "metrics", "duration"):
        place = _non_finite(entry[field], field)
        if place is not None:
            why = ("a run with nan or infinite metrics is a failed run, and archives hold finished runs only"
                   if field == "metrics" else "expected a finite number")
            raise ValueError(f"{where}: {place} is not a finite number; {why}")
    if entry["duration"] < 0:
        raise ValueError(f"{where}: 'duration' must be >= 0 seconds, got {entry['duration']}")
    return entry


def read_archive(path: str | os.PathLike[str], check: Check | None = None) -> list[dict[str, Any]]:
    """The runs of an archive file, every line checked before this returns (a bad line raises ``ValueError`` naming
    the file and the line). ``check(entry)``, if given, checks each run further (``symkit import`` checks that its
    config is one of its experiment's); a ``ValueError`` or ``TypeError`` it raises is named by line too."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; expected a runs archive file (.jsonl)")
    entries = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            where = f"{path}, line {number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where}: not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                                 "expected a runs archive as written by `symkit export`") from None
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except RecursionError:
                raise ValueError(f"{where}: nested more than {MAX_DEPTH} levels deep; a run holds a flat config "
                                 "and metrics") from None
            except ValueError as exc:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                raise ValueError(f"{where}: not JSON ({reason}); expected one run per line as written by "
                                 "`symkit export`") from None
            entry = _check_entry(entry, where)
            if check is not None:
                try:
                    check(entry)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{where}: {exc}") from None
            entries.append(entry)
    return entries


def write_archive(path: str | os.PathLike[str], entries: Iterable[Mapping[str, Any]]) -> int:
    """Write ``entries`` to ``path`` atomically (a temporary file renamed over it), sorted by experiment, setting
    and seed, one per line (its folder created if missing); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ordered = sorted(entries, key=lambda e: (_entry_key(e), e["finished_at"]))
    lines = [json.dumps(to_jsonable(dict(e)), sort_keys=True, separators=(",", ":")) for e in ordered]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(lines)


def export_runs(store: Store, experiment: str, path: str | os.PathLike[str]) -> tuple[int, int]:
    """Add ``experiment``'s finished runs in ``store`` to the archive at ``path`` (created if missing); a run
    already in the archive is kept as it is there. Returns ``(runs in the archive, runs added)``; a store with no
    finished run of ``experiment`` raises ``ValueError`` (nothing to export) and leaves the archive as it was."""
    runs = store.runs(experiment, status="ok")
    if not runs:
        raise ValueError(f"{store.path} has no finished runs of {experiment!r}; nothing to export")
    path = Path(path)
    by_key = {_entry_key(e): e for e in (read_archive(path) if path.exists() else [])}
    added = [run for run in runs if run.key not in by_key]
    by_key.update((run.key, run_to_entry(run)) for run in added)
    return write_archive(path, by_key.values()), len(added)


def _record_arguments(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {"experiment": entry["experiment"], "config": entry["config"], "metrics": entry["metrics"],
            "started_at": entry["started_at"], "finished_at": entry["finished_at"],
            "duration": float(entry["duration"]), "version": entry["version"], "host": entry["host"]}


def import_runs(store: Store, path: str | os.PathLike[str], check: Check | None = None) -> tuple[int, int]:
    """Record the runs of the archive at ``path`` into ``store``, all in one transaction once every line has passed
    :func:`read_archive` (with ``check``): a bad line records nothing. A run the store already has finished is kept
    as it is there (a failed one is replaced). Returns ``(runs recorded, runs already stored)``."""
    written = store.record_many(_record_arguments(entry) for entry in read_archive(path, check))
    return sum(written), len(written) - sum(written)


def import_archives(store: Store, paths: Sequence[str | os.PathLike[str]],
                    check: Check | None = None) -> list[tuple[int, int]]:
    """:func:`import_runs` of several archives: every one is read and checked first, then all their runs are
    recorded in one transaction, so a bad line in any of them records nothing. Returns ``(recorded, already
    stored)`` for each archive."""
    entries = [read_archive(path, check) for path in paths]
    written = store.record_many(_record_arguments(entry) for part in entries for entry in part)
    out, at = [], 0
    for part in entries:
        mine = written[at:at + len(part)]
        at += len(part)
        out.append((sum(mine), len(mine) - sum(mine)))
    return out
