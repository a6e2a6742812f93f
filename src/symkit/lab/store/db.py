"""The SQLite results store: one row per run, safe when several processes write at once.

A row is keyed by ``(experiment, config_hash, seed)``; ``config_hash`` hashes the run's config without its seed, so
the seeds of one setting share a hash and are aggregated together by ``symkit report``. The database runs in WAL
mode with a busy timeout, and every write is a single ``BEGIN IMMEDIATE`` transaction, so concurrent writers wait
for each other instead of failing, and a killed process leaves either a whole row or nothing.

A run that succeeded is never overwritten: recording it again keeps the first result. A failed run is replaced
when it is recorded again (a retry), and its ``attempts`` count goes up.

Every ``sqlite3`` error surfaces as :class:`StoreError` naming the file. A run that cannot be written (the store is
locked for longer than the timeout, or became read-only) goes to a side file, ``<store>.pending.jsonl``, with
:meth:`Store.keep_pending`; the next writable open of the store records it and deletes the side file, so a
finished run is never lost. :meth:`Store.preflight` checks a store before a sweep starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
APPLICATION = "symkit-results-store"
DEFAULT_STORE = Path("runs") / "symkit.db"
STATUSES = ("ok", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS symkit_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment  TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    seed        INTEGER NOT NULL,
    config      TEXT NOT NULL,
    metrics     TEXT,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error       TEXT,
    started_at  TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    duration    REAL NOT NULL,
    version     TEXT NOT NULL,
    host        TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 1,
    UNIQUE (experiment, config_hash, seed)
);
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs (experiment, status);
"""


_UPSERT = """
INSERT INTO runs (experiment, config_hash, seed, config, metrics, status, error,
                  started_at, finished_at, duration, version, host)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (experiment, config_hash, seed) DO UPDATE SET
    config = excluded.config, metrics = excluded.metrics, status = excluded.status,
    error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at,
    duration = excluded.duration, version = excluded.version, host = excluded.host,
    attempts = runs.attempts + 1
WHERE runs.status != 'ok'
"""


class StoreError(RuntimeError):
    """The store file cannot be used (not a SQLite file, a foreign database, a newer schema, ...)."""


def store_timeout(timeout: float | None = None) -> float:
    """Seconds a write waits for another process's lock: ``timeout``, else ``$SYMKIT_STORE_TIMEOUT``, else 60. A value
    that is not a finite number >= 0 raises ``ValueError`` naming where it came from."""
    where = "the store timeout"
    if timeout is None:
        text = os.environ.get("SYMKIT_STORE_TIMEOUT", "").strip()
        if not text:
            return 60.0
        where = f"SYMKIT_STORE_TIMEOUT={text!r}"
        try:
            timeout = float(text)
        except ValueError:
            raise ValueError(f"{where}: expected a number of seconds >= 0 (how long a write waits for another "
                             "process's lock), e.g. 60") from None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{where} must be a number of seconds, got {type(timeout).__name__} {timeout!r}")
    if not (math.isfinite(timeout) and timeout >= 0):
        raise ValueError(f"{where} must be a finite number of seconds >= 0, got {timeout!r}")
    return float(timeout)


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because the file or its folder cannot be written."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_READONLY") or "readonly database" in str(exc)


def default_store_path() -> Path:
    """``$SYMKIT_STORE`` if set, else ``runs/symkit.db`` (relative to the working directory)."""
    return Path(os.environ.get("SYMKIT_STORE") or DEFAULT_STORE)


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON types: numpy/torch scalars become numbers, tuples and arrays become lists."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"JSON keys must be strings, got {k!r} ({type(k).__name__})")
            out[k] = to_jsonable(v)
        return out
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars, 0-d arrays, one-element tensors
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and getattr(value, "ndim", 0) > 0:
        return to_jsonable(tolist())
    if callable(item):
        return to_jsonable(item())
    raise TypeError(f"{value!r} ({type(value).__name__}) is not JSON-serialisable; expected a number, string, "
                    "bool, None, or a list/dict of those")


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces) of ``value`` after :func:`to_jsonable`."""
    return json.dumps(to_jsonable(value), sort_keys=True, separators=(",", ":"))


def config_hash(config: Mapping[str, Any] | Any) -> str:
    """A short stable hash of a config (a dataclass or a dict) without its ``seed`` field."""
    values = to_jsonable(config)
    if not isinstance(values, dict):
        raise TypeError(f"config must be a dataclass instance or a dict, got {type(config).__name__}")
    values = {k: v for k, v in values.items() if k != "seed"}
    return hashlib.sha256(canonical_json(values).encode()).hexdigest()[:16]


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunRecord:
    """One stored run."""

    experiment: str
    config_hash: str
    seed: int
    config: dict[str, Any]
    metrics: dict[str, Any] | None
    status: str
    error: str | None
    started_at: str
    finished_at: str
    duration: float
    version: str
    host: str
    attempts: int = 1

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.experiment, self.config_hash, self.seed)


class Store:
    """A results store backed by one SQLite file (created on first use). ``timeout`` (default
    ``$SYMKIT_STORE_TIMEOUT`` or 60 s) is how long a write waits for another process's lock; ``readonly`` opens an
    existing store for reading only.

    >>> store = Store("runs/symkit.db")            # doctest: +SKIP
    >>> store.record(experiment="toy", config={"n": 3, "seed": 0}, metrics={"err": 0.1})  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        create: bool = True,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self.timeout = store_timeout(timeout)
        self.readonly = bool(readonly)
        if self.path.is_dir():
            raise StoreError(f"store path {str(self.path)!r} is a directory; expected a .db file path")
        if (readonly or not create) and not self.path.exists():
            raise StoreError(f"there is no results store at {str(self.path)!r}; run `symkit reproduce` first or pass "
                             "the right --store")
        if not readonly:
            for parent in [self.path.parent, *self.path.parent.parents]:
                if parent.exists() and not parent.is_dir():
                    raise StoreError(f"cannot create results store {str(self.path)!r}: {str(parent)!r} is a file, "
                                     "not a directory")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the directory of results store {str(self.path)!r}: "
                                 f"{exc.strerror or exc}") from None
        self._conn = self._open()
        if not readonly:
            self.replay_pending()

    # -- opening and checking -------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            if self.readonly:
                conn = self._connect_read_only()
            else:
                conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open results store {str(self.path)!r}: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "symkit_meta" not in tables:
                raise StoreError(
                    f"{str(self.path)!r} is a SQLite database but not a symkit results store (it has tables "
                    f"{', '.join(sorted(tables))}); pass another path with --store"
                )
            if not self.readonly:
                self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
                conn.execute("PRAGMA synchronous = NORMAL")
                if not tables:
                    self._retry(lambda: self._create(conn))
            elif not tables:
                raise StoreError(f"{str(self.path)!r} is an empty file, not a symkit results store")
            self._check_meta(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_read_only_error(exc):
                raise StoreError(self._read_only_message()) from None
            raise StoreError(
                f"{str(self.path)!r} is not a usable symkit results store ({exc}); the file may be corrupt or of "
                "another kind: move it aside or pass another path with --store"
            ) from None
        except StoreError:
            conn.close()
            raise
        return conn

    def _read_only_message(self) -> str:
        return (f"results store {str(self.path)!r} cannot be written: the file or its folder is read-only (`symkit "
                "runs` and `symkit report` can still read it); make it writable or pass another --store")

    def _connect_read_only(self) -> sqlite3.Connection:
        """A read-only connection (SQLite ``mode=ro``). A store in WAL mode needs its ``-shm`` file, which SQLite
        creates beside it; in a folder that cannot be written it is opened ``immutable`` instead, which is exact
        when no ``-wal`` file holds changes (no process can write to such a folder's store)."""
        uri = self.path.resolve().as_uri()
        conn = sqlite3.connect(f"{uri}?mode=ro", timeout=self.timeout, isolation_level=None, uri=True)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()  # opens the WAL index, if there is one
            return conn
        except sqlite3.DatabaseError as exc:
            if not _is_read_only_error(exc):
                return conn  # the checks that follow name what is wrong with the file
            conn.close()
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"cannot read results store {str(self.path)!r}: its folder is read-only and SQLite needs "
                             f"to create {self.path.name}-shm there to read the changes in {wal.name}; make the "
                             "folder writable, or copy the store and its -wal file to a writable folder")
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", timeout=self.timeout, isolation_level=None, uri=True)

    def _create(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # executescript would commit on its own, so run the statements one by one
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO symkit_meta VALUES ('application', ?)", (APPLICATION,))
            conn.execute("INSERT OR IGNORE INTO symkit_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _check_meta(self, conn: sqlite3.Connection) -> None:
        meta = dict(conn.execute("SELECT key, value FROM symkit_meta").fetchall())
        if meta.get("application") != APPLICATION:
            raise StoreError(f"{str(self.path)!r} is not a symkit results store (application tag "
                             f"{meta.get('application')!r}, expected {APPLICATION!r})")
        try:
            version = int(meta.get("schema_version", "0"))
        except ValueError:
            raise StoreError(f"{str(self.path)!r} has a bad schema_version {meta.get('schema_version')!r} (expected "
                             "an integer); the file was not written by symkit") from None
        if version > SCHEMA_VERSION:
            raise StoreError(f"{str(self.path)!r} was written by a newer symkit (store schema {version}, this "
                             f"version reads schema {SCHEMA_VERSION}); upgrade symkit")

    def _retry(self, fn: Any) -> Any:
        """Call ``fn``, retrying while SQLite reports the database locked (beyond the busy timeout)."""
        deadline = time.monotonic() + self.timeout
        delay = 0.01
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """Turn any sqlite3 error into a StoreError naming the file and what was being done."""
        try:
            yield
        except sqlite3.Error as exc:
            hint = ""
            text = str(exc)
            if _is_read_only_error(exc) or "read-only" in text:
                hint = "; the file or its directory is read-only"
            elif "locked" in text or "busy" in text:
                hint = f"; another process held the lock for more than {self.timeout:g} s"
            elif "malformed" in text or "corrupt" in text or "not a database" in text:
                hint = "; the file is corrupt: move it aside or pass another --store"
            raise StoreError(f"results store {str(self.path)!r}: cannot {doing}: {text}{hint}") from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise StoreError(f"results store {str(self.path)!r} was opened read-only")
        with self._guard("write"):
            self._retry(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._retry(lambda: self._conn.execute("COMMIT"))

    def preflight(self) -> None:
        """Check, before a sweep runs anything, that the store can take results: it is not corrupt
        (``PRAGMA quick_check``), and a write transaction can start (lock obtainable within the timeout) and write
        (a row updated, then rolled back: SQLite opens a file it may not write read-only without saying so, and
        only a write finds out). Raises :class:`StoreError` saying which."""
        with self._guard("check the file"):
            rows = [r[0] for r in self._conn.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            raise StoreError(f"results store {str(self.path)!r} is corrupt ({'; '.join(map(str, rows[:3]))}): move "
                             "it aside or pass another --store")
        if self.readonly:
            raise StoreError(f"results store {str(self.path)!r} was opened read-only")
        with self._guard("write"):
            self._retry(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            try:
                self._conn.execute("UPDATE symkit_meta SET value = value WHERE key = 'application'")
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                if _is_read_only_error(exc):
                    raise StoreError(self._read_only_message()) from None
                raise
            self._conn.execute("ROLLBACK")

    # -- runs that could not be written ---------------------------------------------------------------------

    @property
    def pending_path(self) -> Path:
        """The side file of runs recorded while the store could not be written."""
        return self.path.with_name(self.path.name + ".pending.jsonl")

    def keep_pending(self, experiment: str, config: Mapping[str, Any], metrics: Mapping[str, Any] | None,
                     **fields: Any) -> Path:
        """Append one run that could not be written to the side file (flushed and synced); returns its path.
        The next writable :class:`Store` on this path records it."""
        line = json.dumps({"experiment": experiment, "config": to_jsonable(config),
                           "metrics": to_jsonable(dict(metrics)) if metrics is not None else None,
                           **to_jsonable(fields)}, separators=(",", ":"))
        with open(self.pending_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        return self.pending_path

    def replay_pending(self) -> int:
        """Record the runs of the side file, then delete it; returns how many were recorded. A side file that
        cannot be read or written yet is left for the next time."""
        path = self.pending_path
        if not path.exists():
            return 0
        try:
            entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, ValueError):
            return 0
        try:
            for entry in entries:
                self.record(entry.pop("experiment"), entry.pop("config"), entry.pop("metrics"), **entry)
            path.unlink()
        except (StoreError, OSError):
            return 0
        return len(entries)

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------------------------

    def record(
        self,
        experiment: str,
        config: Mapping[str, Any] | Any,
        metrics: Mapping[str, Any] | None = None,
        *,
        error: str | None = None,
        started_at: str | None = None,
        finished_at: str | None = None,
        duration: float = 0.0,
        version: str | None = None,
        host: str | None = None,
    ) -> bool:
        """Store one run in one transaction; ``error`` set means it failed. Returns whether the row was written.

        A run already stored as ``ok`` is kept (returns ``False``); a ``failed`` one is replaced.
        """
        row = self._row(experiment, config, metrics, error=error, started_at=started_at, finished_at=finished_at,
                        duration=duration, version=version, host=host)
        with self._write() as conn:
            return conn.execute(_UPSERT, row).rowcount > 0

    def record_many(self, runs: Iterable[Mapping[str, Any]]) -> list[bool]:
        """Store several runs in one transaction, all or none; each item holds the arguments of :meth:`record`
        (``experiment``, ``config``, ``metrics`` and the keywords). Returns, for each, whether its row was written
        (``False``: the store had it finished already). Every run is checked before any is written."""
        rows = [self._row(**dict(run)) for run in runs]
        with self._write() as conn:
            return [conn.execute(_UPSERT, row).rowcount > 0 for row in rows]

    def _row(
        self,
        experiment: str,
        config: Mapping[str, Any] | Any,
        metrics: Mapping[str, Any] | None = None,
        *,
        error: str | None = None,
        started_at: str | None = None,
        finished_at: str | None = None,
        duration: float = 0.0,
        version: str | None = None,
        host: str | None = None,
    ) -> tuple[Any, ...]:
        """The table row of one run, checked (a seed that SQLite can store, JSON-serialisable values)."""
        cfg = to_jsonable(config)
        if not isinstance(cfg, dict) or "seed" not in cfg:
            raise ValueError(f"config for {experiment!r} must be a dict or dataclass with a 'seed' field, got {cfg!r}")
        seed = cfg["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"config seed for {experiment!r} must be an int, got {seed!r}")
        if not 0 <= seed < 2**63:
            raise ValueError(f"config seed for {experiment!r} must be in [0, 2^63), got {seed}")
        status = "failed" if error is not None else "ok"
        metrics_json = None
        if metrics is not None:  # keys keep the order the run returned them in
            metrics_json = json.dumps(to_jsonable(dict(metrics)), separators=(",", ":"))
        if version is None:
            from symkit import __version__ as version
        now = utc_now()
        return (
            experiment, config_hash(cfg), seed, canonical_json(cfg), metrics_json, status, error,
            started_at or now, finished_at or now, float(duration), version, host or socket.gethostname(),
        )

    def delete(self, experiment: str, status: str | None = None) -> int:
        """Delete the runs of ``experiment`` (only those with ``status`` if given); returns how many."""
        with self._write() as conn:
            if status is None:
                cursor = conn.execute("DELETE FROM runs WHERE experiment = ?", (experiment,))
            else:
                cursor = conn.execute("DELETE FROM runs WHERE experiment = ? AND status = ?", (experiment, status))
            return cursor.rowcount

    # -- reading --------------------------------------------------------------------------------------------

    def status_of(self, experiment: str) -> dict[tuple[str, int], str]:
        """``{(config_hash, seed): status}`` for every stored run of ``experiment``."""
        with self._guard("read"):
            rows = self._conn.execute("SELECT config_hash, seed, status FROM runs WHERE experiment = ?",
                                      (experiment,)).fetchall()
        return {(h, s): status for h, s, status in rows}

    def runs(self, experiment: str | None = None, status: str | None = None) -> list[RunRecord]:
        """Stored runs, oldest first, optionally of one experiment and/or one status."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        query = ("SELECT experiment, config_hash, seed, config, metrics, status, error, started_at, finished_at, "
                 "duration, version, host, attempts FROM runs")
        clauses, params = [], []
        if experiment is not None:
            clauses.append("experiment = ?")
            params.append(experiment)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY id"
        out = []
        with self._guard("read"):
            rows = self._conn.execute(query, params).fetchall()
        for row in rows:
            out.append(RunRecord(
                experiment=row[0], config_hash=row[1], seed=row[2], config=json.loads(row[3]),
                metrics=json.loads(row[4]) if row[4] is not None else None, status=row[5], error=row[6],
                started_at=row[7], finished_at=row[8], duration=row[9], version=row[10], host=row[11],
                attempts=row[12],
            ))
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """``{experiment: {status: count}}`` over the whole store."""
        out: dict[str, dict[str, int]] = {}
        with self._guard("read"):
            rows = self._conn.execute(
                "SELECT experiment, status, COUNT(*) FROM runs GROUP BY experiment, status ORDER BY experiment"
            ).fetchall()
        for name, status, n in rows:
            out.setdefault(name, {})[status] = n
        return out

