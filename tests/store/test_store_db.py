"""The SQLite results store: round trips, the uniqueness key, retries, bad files, concurrent writers."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from symkit.lab.store import Store, StoreError, config_hash, to_jsonable


@dataclass
class Cfg:
    n: int = 3
    sizes: tuple[int, ...] = (1, 2)
    seed: int = 0


def test_round_trip_keeps_every_field(tmp_path):
    store = Store(tmp_path / "s.db")
    wrote = store.record("exp", Cfg(n=5, seed=2), {"err": np.float32(0.25), "hist": np.arange(3), "ok": True},
                         duration=1.5, host="node7")
    assert wrote
    [run] = store.runs("exp")
    assert run.config == {"n": 5, "sizes": [1, 2], "seed": 2}
    assert run.seed == 2 and run.status == "ok" and run.error is None
    assert run.metrics == {"err": 0.25, "hist": [0, 1, 2], "ok": True}
    assert run.duration == 1.5 and run.host == "node7" and run.attempts == 1
    assert run.config_hash == config_hash({"n": 5, "sizes": (1, 2), "seed": 99})
    assert run.version and run.started_at.endswith("+00:00")


def test_config_hash_ignores_seed_and_key_order_but_not_values():
    a = config_hash({"n": 1, "m": [1, 2], "seed": 0})
    assert a == config_hash({"seed": 5, "m": (1, 2), "n": 1})
    assert a != config_hash({"n": 2, "m": [1, 2], "seed": 0})


def test_to_jsonable_rejects_objects_with_a_clear_error():
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        to_jsonable({"model": object()})


def test_an_ok_run_is_never_overwritten_and_a_failed_one_is_retried(tmp_path):
    store = Store(tmp_path / "s.db")
    assert store.record("exp", {"n": 1, "seed": 0}, None, error="Traceback...\nRuntimeError: boom")
    [run] = store.runs("exp", status="failed")
    assert "boom" in run.error and run.metrics is None
    assert store.record("exp", {"n": 1, "seed": 0}, {"x": 1.0})  # the retry replaces the failure
    [run] = store.runs("exp")
    assert (run.status, run.metrics, run.attempts, run.error) == ("ok", {"x": 1.0}, 2, None)
    assert not store.record("exp", {"n": 1, "seed": 0}, {"x": 2.0})  # an ok run stays as it is
    assert store.runs("exp")[0].metrics == {"x": 1.0}
    assert store.status_of("exp") == {(config_hash({"n": 1}), 0): "ok"}


def test_reopening_keeps_the_rows_and_uses_wal(tmp_path):
    path = tmp_path / "nested" / "dir" / "s.db"
    with Store(path) as store:
        store.record("a", {"seed": 0}, {"v": 1})
        store.record("b", {"seed": 1}, None, error="E")
    with Store(path) as store:
        assert store.counts() == {"a": {"ok": 1}, "b": {"failed": 1}}
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_bad_seed_and_status_are_clear_errors(tmp_path):
    store = Store(tmp_path / "s.db")
    with pytest.raises(ValueError, match="'seed' field"):
        store.record("exp", {"n": 1}, {})
    with pytest.raises(TypeError, match="seed .* must be an int"):
        store.record("exp", {"seed": "0"}, {})
    with pytest.raises(ValueError, match="status must be one of"):
        store.runs("exp", status="done")


def test_record_many_writes_every_run_or_none(tmp_path):
    """Several runs in one transaction: a run that cannot be stored (a seed beyond SQLite's int64) is found before
    any is written; otherwise each is written once, and an ok run already stored is kept."""
    store = Store(tmp_path / "s.db")
    store.record("exp", {"n": 1, "seed": 0}, {"x": 1.0})
    good = [{"experiment": "exp", "config": {"n": 1, "seed": s}, "metrics": {"x": 2.0}, "host": "lab"} for s in (0, 1)]
    bad = {"experiment": "exp", "config": {"n": 1, "seed": 2**64}, "metrics": {"x": 3.0}}
    with pytest.raises(ValueError, match=r"must be in \[0, 2\^63\), got 18446744073709551616"):
        store.record_many([*good, bad])
    assert [(r.seed, r.metrics) for r in store.runs("exp")] == [(0, {"x": 1.0})]
    assert store.record_many([*good, good[1]]) == [False, True, False]
    assert sorted((r.seed, r.metrics["x"], r.host) for r in store.runs("exp"))[1] == (1, 2.0, "lab")
    assert len(store.runs("exp")) == 2


@pytest.mark.parametrize(("value", "message"), [
    ("abc", "SYMKIT_STORE_TIMEOUT='abc': expected a number of seconds >= 0"),
    ("inf", "SYMKIT_STORE_TIMEOUT='inf' must be a finite number of seconds >= 0, got inf"),
    ("nan", "SYMKIT_STORE_TIMEOUT='nan' must be a finite number"),
    ("-1", "SYMKIT_STORE_TIMEOUT='-1' must be a finite number of seconds >= 0, got -1.0"),
])
def test_a_bad_store_timeout_names_the_variable(tmp_path, monkeypatch, value, message):
    monkeypatch.setenv("SYMKIT_STORE_TIMEOUT", value)
    with pytest.raises(ValueError, match=re.escape(message)):
        Store(tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists()


def test_the_store_timeout_comes_from_the_argument_the_variable_or_60_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMKIT_STORE_TIMEOUT", " 2.5 ")
    assert Store(tmp_path / "s.db").timeout == 2.5
    assert Store(tmp_path / "s.db", timeout=0).timeout == 0.0
    monkeypatch.setenv("SYMKIT_STORE_TIMEOUT", "")
    assert Store(tmp_path / "s.db").timeout == 60.0
    with pytest.raises(ValueError, match="the store timeout must be a finite number of seconds >= 0, got -3"):
        Store(tmp_path / "s.db", timeout=-3)


def test_the_check_before_a_sweep_finds_a_store_that_sqlite_opened_read_only(tmp_path, monkeypatch):
    """SQLite opens a file its process may not write read-only, silently, and lets a write transaction begin there:
    :meth:`Store.preflight` writes a row and rolls it back, so it finds out before any run. (Every connection is
    made ``mode=ro`` here, which is what SQLite does with such a file, for root too.)"""
    path = tmp_path / "s.db"
    with Store(path) as store:
        store.record("exp", {"seed": 0}, {"x": 1.0})
        store.preflight()  # a writable store passes, and the check writes nothing
        assert store.runs("exp")[0].metrics == {"x": 1.0} and len(store.runs()) == 1
    real = sqlite3.connect

    def connect(database, *args, uri=False, **kwargs):
        if not uri:
            database, uri = f"{Path(database).resolve().as_uri()}?mode=ro", True
        return real(database, *args, uri=uri, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    with Store(path) as store:  # opens: SQLite says nothing yet
        with pytest.raises(StoreError, match="cannot be written: the file or its folder is read-only"):
            store.preflight()
        with pytest.raises(StoreError, match="read-only"):
            store.record("exp", {"seed": 1}, {"x": 1.0})
        assert len(store.runs("exp")) == 1  # reading works


def test_a_corrupt_file_is_a_clear_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database at all\n" * 200)
    with pytest.raises(StoreError, match="not a usable symkit results store"):
        Store(path)


def test_a_foreign_sqlite_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a symkit results store .*customers"):
        Store(path)
    tables = [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["customers"]


def test_a_store_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "s.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE symkit_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer symkit"):
        Store(path)


def test_a_directory_is_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        Store(tmp_path)


_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from symkit.lab.store import Store
    path, first, last, tag, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    store = Store(path, timeout=120)
    open(go + "." + tag, "w").close()
    while not os.path.exists(go):  # start writing together
        time.sleep(0.01)
    for seed in range(first, last):
        store.record("race", {"n": seed % 7, "seed": seed}, {"writer": tag, "value": seed * 0.5})
    """
)


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path, go = tmp_path / "shared.db", tmp_path / "go"
    # overlapping ranges: seeds 200..399 are written by both, and must still appear once each
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "0", "400", "A", str(go)], stderr=subprocess.PIPE),
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "200", "600", "B", str(go)],
                         stderr=subprocess.PIPE),
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"go.{t}").exists() for t in "AB"):  # both have opened the store
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a writer did not start"
        time.sleep(0.02)
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
    rows = Store(path).runs("race")
    keys = [(r.config_hash, r.seed) for r in rows]
    assert len(keys) == len(set(keys)) == 600
    assert sorted(r.seed for r in rows) == list(range(600))
    assert all(r.metrics["value"] == r.seed * 0.5 for r in rows)
    writers = {r.metrics["writer"] for r in rows}
    assert writers == {"A", "B"}
