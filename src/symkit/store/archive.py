"""Results archives: finished runs as JSON lines, a plain-text file to keep beside the code.

A results store (:mod:`symkit.store.db`) is a SQLite file on one machine; a run that took hours is lost with the
machine. ``symkit export NAME --out FILE`` writes an experiment's finished runs to an archive, one JSON object per
line, sorted by setting and seed so that a version-control diff shows only the runs added; ``symkit import FILE``
records them into any store, where ``report`` aggregates them with the runs made there and ``reproduce`` skips them.

Exporting into an existing archive adds to it: a run already in the file is kept as it is there (the first finished
result of a run is kept, as in the store), so exporting a store that lacks some archived runs loses none of them.
Only finished (``ok``) runs are archived; a failed run is not a result.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from symkit.store.db import RunRecord, Store, config_hash, to_jsonable

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


def _check_entry(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a JSON object (one run), got {type(entry).__name__}")
    if entry.get("format") != ARCHIVE_FORMAT:
        raise ValueError(f"{where}: not a symkit run (format {entry.get('format')!r}, expected {ARCHIVE_FORMAT!r})")
    for field, types in _FIELDS.items():
        if field not in entry:
            raise ValueError(f"{where}: the run has no {field!r} field")
        value = entry[field]
        if not isinstance(value, types) or isinstance(value, bool):
            expected = " or ".join(t.__name__ for t in types)
            raise ValueError(f"{where}: {field!r} must be {expected}, got {value!r}")
    if entry["config"].get("seed") != entry["seed"]:
        raise ValueError(f"{where}: the config's seed {entry['config'].get('seed')!r} is not the run's seed "
                         f"{entry['seed']}")
    return entry


def read_archive(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The runs of an archive file, checked line by line (a bad line raises ``ValueError`` naming it)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; expected a runs archive file (.jsonl)")
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {number}"
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}: not JSON ({exc.msg}); expected one run per line as written by "
                                 "`symkit export`") from None
            entries.append(_check_entry(entry, where))
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


def import_runs(store: Store, path: str | os.PathLike[str]) -> tuple[int, int]:
    """Record the runs of the archive at ``path`` into ``store``; a run the store already has finished is kept as
    it is there (a failed one is replaced). Returns ``(runs recorded, runs already stored)``."""
    recorded = kept = 0
    for entry in read_archive(path):
        written = store.record(entry["experiment"], entry["config"], entry["metrics"],
                               started_at=entry["started_at"], finished_at=entry["finished_at"],
                               duration=float(entry["duration"]), version=entry["version"], host=entry["host"])
        recorded += written
        kept += not written
    return recorded, kept
