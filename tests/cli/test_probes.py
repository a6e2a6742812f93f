"""Probes of the failure modes a user meets in ordinary work: bad configs and arguments, corrupt, locked and
read-only stores, killed sweeps, dying workers. Every probe must end in a correct result or a one-line error
(no traceback), and no finished run may be lost."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import annotated_types
import pydantic
import pytest
from symkit_cli_helpers import cli_env, executions, run_symkit, symkit_cmd

from symkit.lab.experiments.fields import Count
from symkit.lab.experiments.registry import Experiment
from symkit.lab.runner import sweep as sweep_mod
from symkit.lab.store import Store, StoreError


def _assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])


def _stored(db: Path) -> list:
    if not db.exists():
        return []
    with Store(db, readonly=True) as store:
        return store.runs("cli-toy")


# ---------------------------------------------------------------------------------------------- bad configs
@pytest.mark.parametrize("args,fragments", [
    (["--set", "n=-5"], ["n=-5", "must be >=1"]),
    (["--set", "scale=inf"], ["scale=inf", "must be finite"]),
    (["--set", "scale=nan"], ["scale=nan", "must be finite"]),
    (["--set", "n=1", "--sweep", "n=2,3"], ["n given with both --set and --sweep"]),
    (["--seeds", "9223372036854775808"], ["seed=9223372036854775808", "must be [0,9223372036854775807]"]),
    (["--seeds", "0-3000000"], ["more than 100,000 seeds"]),
])
def test_bad_settings_are_refused_before_anything_runs(tmp_path, args, fragments):
    db, log = tmp_path / "s.db", tmp_path / "toy.log"
    proc = run_symkit("reproduce", "cli-toy", "--quick", *args, "--store", str(db), SYMKIT_TOY_LOG=str(log))
    _assert_one_line_error(proc, 2, *fragments)
    assert executions(log) == [] and _stored(db) == []


def test_a_grid_too_big_to_plan_is_refused_before_it_is_built(toy):
    with pytest.raises(sweep_mod.SweepError, match="runs; a sweep plans at most 100,000"):
        sweep_mod.plan(toy, settings={"tag": [f"t{i}" for i in range(60_000)]}, seeds=[0, 1])


@dataclass
class _NanConfig:
    lr: float = 1.0
    seed: int = 0


def _nan_run(config: _NanConfig) -> dict:
    return {"loss": math.nan if config.seed == 1 else 0.5, "curve": [1.0, math.inf] if config.seed == 2 else [1.0]}


def test_a_run_with_non_finite_metrics_is_stored_as_failed(tmp_path, monkeypatch):
    from symkit.lab.experiments import registry

    exp = Experiment("probe-nan", "nan metrics", "nothing", _NanConfig, _nan_run)
    monkeypatch.setitem(registry._REGISTRY, exp.name, exp)
    specs = sweep_mod.plan(exp, seeds=[0, 1, 2])
    with Store(tmp_path / "s.db") as store:
        result = sweep_mod.run_sweep(exp, specs, store, progress=False)
        rows = {r.seed: r for r in store.runs("probe-nan")}
    assert result.ran == 3 and result.failed == 2
    assert rows[0].status == "ok" and rows[0].metrics == {"loss": 0.5, "curve": [1.0]}
    assert rows[1].status == "failed" and "non-finite metrics: loss=nan" in rows[1].error
    assert rows[2].status == "failed" and "curve=[1.0, inf]" in rows[2].error


@dataclass
class _RangedConfig:
    lr: Annotated[float, pydantic.Field(gt=0, le=1)] = 1.0
    steps: tuple[Count, ...] = (1, 2)
    decay: Annotated[float, annotated_types.Ge(0)] = 0.0
    seed: int = 0


def test_configs_made_in_python_are_checked_against_the_ranges_their_fields_declare():
    exp = Experiment("probe-range", "ranges", "nothing", _RangedConfig, _nan_run)
    assert exp.make_config(lr=0.5).lr == 0.5
    assert exp.field_limits() == {"lr": "(0,1]", "steps": ">=1", "decay": ">=0", "seed": f"[0,{2**63 - 1}]"}
    for key, bad, message in [("lr", 2.0, "lr=2.0 .*must be \\(0,1\\]"), ("lr", 0.0, "must be \\(0,1\\]"),
                              ("lr", "x", "expected float, got str"), ("lr", True, "expected float, got bool"),
                              ("lr", math.inf, "must be finite"), ("steps", (1, 0), "must be >=1"),
                              ("decay", -1e-9, "must be >=0"), ("seed", -1, "must be \\[0,")]:
        with pytest.raises(ValueError, match=message):
            exp.make_config(**{key: bad})


# ------------------------------------------------------------------------------------------------ the store
def test_a_corrupt_page_is_found_before_anything_runs(tmp_path):
    db, log = tmp_path / "s.db", tmp_path / "toy.log"
    with Store(db) as store:
        for seed in range(200):
            store.record("other", {"seed": seed, "pad": "x" * 500}, {"v": seed})
        conn = store._conn
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 10 * page
    data[5 * page: 7 * page] = os.urandom(2 * page)  # two pages of the table's b-tree
    db.write_bytes(bytes(data))
    proc = run_symkit("reproduce", "cli-toy", "--quick", "--store", str(db), SYMKIT_TOY_LOG=str(log))
    _assert_one_line_error(proc, 1, str(db))
    assert "corrupt" in proc.stderr or "malformed" in proc.stderr
    assert executions(log) == []


def test_a_store_locked_for_the_whole_sweep_is_refused_before_running(tmp_path):
    db, log = tmp_path / "s.db", tmp_path / "toy.log"
    Store(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        proc = run_symkit("reproduce", "cli-toy", "--quick", "--store", str(db), SYMKIT_TOY_LOG=str(log),
                          SYMKIT_STORE_TIMEOUT="0.5")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    _assert_one_line_error(proc, 1, "locked", "0.5 s")
    assert executions(log) == []


def test_runs_finished_while_the_store_is_locked_are_kept_and_recorded_later(tmp_path, toy):
    db = tmp_path / "s.db"
    specs = sweep_mod.plan(toy, quick=True)
    store = Store(db, timeout=0.2)
    store.preflight()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # taken after the check: every record of the sweep meets the lock
    try:
        result = sweep_mod.run_sweep(toy, specs, store, progress=False)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        store.close()
    assert result.ran == len(specs) == result.pending == 4 and not result.unsaved
    assert "locked" in result.store_error
    assert result.pending_path == store.pending_path and store.pending_path.exists()
    with Store(db) as again:  # the next writable open records the side file and removes it
        rows = again.runs("cli-toy")
    assert len(rows) == 4 and all(r.status == "ok" for r in rows)
    assert not store.pending_path.exists()
    expected = {(r.spec.config["n"], r.spec.seed) for r in [sweep_mod.execute(s) for s in specs]}
    assert {(r.config["n"], r.seed) for r in rows} == expected


def test_a_side_file_that_cannot_be_written_leaves_the_runs_in_the_result(tmp_path, toy, monkeypatch):
    store = Store(tmp_path / "s.db")
    monkeypatch.setattr(store, "record", lambda *a, **k: (_ for _ in ()).throw(StoreError("store gone")))
    monkeypatch.setattr(store, "keep_pending", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    result = sweep_mod.run_sweep(toy, sweep_mod.plan(toy, quick=True), store, progress=False)
    assert len(result.unsaved) == 4 and all(o.metrics is not None for o in result.unsaved)
    assert result.store_error == "store gone"


def test_read_only_commands_open_the_store_read_only(tmp_path, toy):
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.record("cli-toy", {"n": 10, "seed": 0}, {"error": 0.1, "mean": 0.0})
    before = db.read_bytes()
    with Store(db, readonly=True) as ro:
        assert len(ro.runs("cli-toy")) == 1
        with pytest.raises(StoreError, match="read-only"):
            ro.record("cli-toy", {"n": 10, "seed": 1}, {"error": 0.1})
        with pytest.raises(StoreError, match="read-only"):
            ro.preflight()
    assert db.read_bytes() == before
    out = tmp_path / "report"
    proc = run_symkit("report", "cli-toy", "--store", str(db), "--out", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert run_symkit("runs", "cli-toy", "--store", str(db)).returncode == 0
    assert db.read_bytes() == before
    with pytest.raises(StoreError, match="no results store"):
        Store(tmp_path / "absent.db", readonly=True)
    assert not (tmp_path / "absent.db").exists()


def _toy_store(db: Path) -> bytes:
    """A store holding one finished toy run, closed (so its -wal and -shm files are gone); its bytes."""
    with Store(db) as store:
        store.record("cli-toy", {"n": 10, "seed": 0}, {"error": 0.1, "mean": 0.0})
    assert not db.with_name(db.name + "-wal").exists() and not db.with_name(db.name + "-shm").exists()
    return db.read_bytes()


def test_a_read_only_store_file_is_refused_before_anything_runs(tmp_path):
    """SQLite opens a file it may not write read-only without saying so, and starts a write transaction there: only
    a write finds out. The check before the sweep writes (and rolls back), so no run is computed for nothing. The
    child meets the permission bits even as root (``obey_permissions``)."""
    db, log = tmp_path / "s.db", tmp_path / "toy.log"
    before = _toy_store(db)
    db.chmod(0o444)
    try:
        proc = run_symkit("reproduce", "cli-toy", "--quick", "--store", str(db), SYMKIT_TOY_LOG=str(log),
                          obey_permissions=True)
    finally:
        db.chmod(0o644)
    _assert_one_line_error(proc, 1, str(db), "cannot be written", "read-only")
    assert "corrupt" not in proc.stderr
    assert executions(log) == [] and db.read_bytes() == before
    assert not Path(str(db) + ".pending.jsonl").exists()


def test_a_read_only_store_in_a_read_only_folder_is_read_by_runs_and_report(tmp_path):
    """A store in WAL mode needs its -shm file to be read, which SQLite cannot create in a read-only folder: the
    read-only commands read it all the same, and ``reproduce`` says the store is read-only, not corrupt."""
    folder, out = tmp_path / "archive", tmp_path / "report"
    folder.mkdir()
    db = folder / "s.db"
    before = _toy_store(db)
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        summary = run_symkit("runs", "--store", str(db), obey_permissions=True)
        listed = run_symkit("runs", "cli-toy", "--store", str(db), obey_permissions=True)
        report = run_symkit("report", "cli-toy", "--store", str(db), "--out", str(out), obey_permissions=True)
        refused = run_symkit("reproduce", "cli-toy", "--quick", "--store", str(db), obey_permissions=True)
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)
    assert summary.returncode == 0 and "1 run" in summary.stdout and "cli-toy: 1 ok" in summary.stdout, summary
    assert listed.returncode == 0 and "ok     seed=0" in listed.stdout, listed
    assert report.returncode == 0 and "Traceback" not in report.stderr, report
    assert "1 successful run in 1 setting." in (out / "report.md").read_text()
    _assert_one_line_error(refused, 1, "cannot be written", "read-only")
    assert "corrupt" not in refused.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["s.db"] and db.read_bytes() == before


def _sqlite_opens_read_only(monkeypatch) -> None:
    """Every SQLite connection this process opens by path is read-only (``mode=ro``), as SQLite opens a file that its
    process may not write: the in-process view of a read-only store, also for root."""
    real = sqlite3.connect

    def connect(database, *args, uri=False, **kwargs):
        if not uri:
            database, uri = f"{Path(database).resolve().as_uri()}?mode=ro", True
        return real(database, *args, uri=uri, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)


def test_the_demo_checks_its_store_before_it_runs(tmp_path, toy, toy_log, monkeypatch):
    from symkit.lab.runner.demo import run_demo

    _toy_store(tmp_path / "demo.db")
    _sqlite_opens_read_only(monkeypatch)
    with pytest.raises(StoreError, match="cannot be written: the file or its folder is read-only"):
        run_demo(tmp_path, ["cli-toy"], executor="local", echo=lambda *a, **k: None)
    assert executions(toy_log) == []


def test_a_store_timeout_that_is_not_a_number_names_the_variable(tmp_path, toy, monkeypatch):
    from typer.testing import CliRunner

    from symkit.lab.cli.main import app

    _toy_store(tmp_path / "s.db")
    for value, reason in [("abc", "expected a number of seconds"), ("inf", "must be a finite number of seconds"),
                          ("-1", "must be a finite number of seconds >= 0")]:
        monkeypatch.setenv("SYMKIT_STORE_TIMEOUT", value)
        result = CliRunner().invoke(app, ["runs", "--store", str(tmp_path / "s.db")], catch_exceptions=False)
        assert result.exit_code == 2, result.output
        assert f"Error: SYMKIT_STORE_TIMEOUT='{value}'" in result.output and reason in result.output, result.output


def test_the_meta_device_is_refused_before_anything_runs(tmp_path, toy, toy_log):
    """torch's meta device has no values: a run there dies at its first ``.item()``, so ``--device meta`` is refused
    with the devices symkit runs on."""
    from typer.testing import CliRunner

    from symkit.lab.cli.main import app

    result = CliRunner().invoke(app, ["reproduce", "cli-toy", "--quick", "--device", "meta", "--store",
                                      str(tmp_path / "s.db")], catch_exceptions=False)
    assert result.exit_code == 2 and "Error: device 'meta': " in result.output, result.output
    assert "use cpu, cuda, cuda:N or mps" in result.output
    assert executions(toy_log) == [] and not (tmp_path / "s.db").exists()


def _truncated_mnist(folder: Path) -> Path:
    """MNIST's four idx files, gzipped, the training images cut in half (a copy that stopped short)."""
    import gzip

    def idx(shape: tuple[int, ...]) -> bytes:
        header = bytes([0, 0, 8, len(shape)]) + b"".join(n.to_bytes(4, "big") for n in shape)
        return header + bytes(math.prod(shape))

    folder.mkdir()
    for split, n in (("train", 20), ("t10k", 10)):
        (folder / f"{split}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx((n,))))
        (folder / f"{split}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx((n, 28, 28))))
    images = folder / "train-images-idx3-ubyte.gz"
    images.write_bytes(images.read_bytes()[: images.stat().st_size // 2])
    return images


def test_a_smoke_run_that_fails_is_one_line_naming_the_error(tmp_path, monkeypatch):
    """``--smoke`` with a truncated MNIST file: one line naming the file and what is wrong with it, as the sweep's
    summary names a failed run, not the run's traceback (which ``SYMKIT_DEBUG=1`` shows)."""
    from typer.testing import CliRunner

    from symkit.lab.cli.main import app

    images = _truncated_mnist(tmp_path / "data")
    args = ["reproduce", "lee-rotmnist", "--scale", "paper", "--seeds", "0", "--data-dir", str(tmp_path / "data"),
            "--smoke", "--store", str(tmp_path / "s.db")]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and str(images) in errors[0] and "cannot be read" in errors[0], result.output
    assert errors[0].startswith("Error: the smoke run of lee-rotmnist (")
    assert not (tmp_path / "s.db").exists()
    monkeypatch.setenv("SYMKIT_DEBUG", "1")
    debug = CliRunner().invoke(app, args, catch_exceptions=False)
    assert debug.exit_code == 1 and "Traceback (most recent call last)" in debug.output


def test_a_time_limit_that_ends_before_the_first_run_starts_is_reported(tmp_path, toy, toy_log, monkeypatch):
    """The limit's SIGTERM can arrive while the sweep is still being set up (a long plan on a loaded machine): the
    command still stops as at the limit, exit 124 and the line saying how to carry on, not 130 and no message."""
    from typer.testing import CliRunner

    from symkit.lab.cli.main import app

    def setting_up(specs):  # the sweep's set-up, here until the limit's signal interrupts it
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.05)
        raise AssertionError("the time limit never came")

    monkeypatch.setattr(sweep_mod, "varying_fields", setting_up)
    result = CliRunner().invoke(app, ["reproduce", "cli-toy", "--quick", "--time-limit", "1s", "--store",
                                      str(tmp_path / "s.db")], catch_exceptions=False)
    assert result.exit_code == 124, result.output
    assert "Stopped at the time limit (1 s)" in result.output and "run the same command to carry on" in result.output
    assert executions(toy_log) == [] and _stored(tmp_path / "s.db") == []


@pytest.mark.parametrize("value", ["two", "99"])
def test_a_bad_or_newer_schema_version_is_a_one_line_error(tmp_path, value):
    db = tmp_path / "s.db"
    Store(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE symkit_meta SET value = ? WHERE key = 'schema_version'", (value,))
    proc = run_symkit("runs", "--store", str(db))
    _assert_one_line_error(proc, 1, "bad schema_version" if value == "two" else "newer symkit")


def test_paths_that_cannot_be_used_are_one_line_errors(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    _assert_one_line_error(run_symkit("reproduce", "cli-toy", "--quick", "--store", str(a_file / "s.db")), 1,
                    "is a file, not a directory")
    db = tmp_path / "s.db"
    assert run_symkit("reproduce", "cli-toy", "--quick", "--store", str(db)).returncode == 0
    _assert_one_line_error(run_symkit("report", "cli-toy", "--store", str(db), "--out", str(a_file / "r")), 2,
                           "cannot use")
    _assert_one_line_error(run_symkit("ranks", "--group", "SO(99)", "--store", str(db)), 2,
                           "no cells for group 'SO(99)'")
    _assert_one_line_error(run_symkit("ranks", "--max-rank", "-1", "--store", str(db)), 2, "--max-rank must be >= 0")


# ------------------------------------------------------------------------------------------------ processes
def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_workers_of_a_killed_process_sweep_exit(tmp_path):
    db, log = tmp_path / "s.db", tmp_path / "toy.log"
    cmd = symkit_cmd("reproduce", "cli-toy", "--quick", "--seeds", "0-7", "--set", "sleep=2", "-e", "process",
                     "-j", "2", "--store", str(db))
    proc = subprocess.Popen(cmd, env=cli_env(SYMKIT_TOY_LOG=str(log)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not log.exists() or not log.read_text().strip():
            assert proc.poll() is None and time.monotonic() < deadline, "no worker started a run"
            time.sleep(0.05)
        children = _children(proc.pid)
        workers = {int(line.split()[2]) for line in log.read_text().splitlines()}
        assert workers <= children and workers
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in children if _alive(p)], "workers (or the resource tracker) outlived the sweep"
    finally:
        if proc.poll() is None:
            proc.kill()


class _FlakyPool:
    """A pool whose ``submit`` finds it broken once (a worker died since the last result), then runs inline."""

    def __init__(self, state: dict) -> None:
        self.state = state

    def submit(self, fn, spec):
        if not self.state["broken_once"]:
            self.state["broken_once"] = True
            raise BrokenProcessPool("a child process terminated abruptly")
        future: Future = Future()
        future.set_result(fn(spec))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self.state["shutdowns"] += 1


def test_a_pool_found_broken_at_submit_time_loses_no_run(toy, monkeypatch):
    state = {"broken_once": False, "shutdowns": 0}
    monkeypatch.setattr(sweep_mod, "_new_pool", lambda jobs: _FlakyPool(state))
    specs = sweep_mod.plan(toy, quick=True)
    outcomes = list(sweep_mod._process(specs, 2, None))
    assert state["broken_once"] and state["shutdowns"] == 2  # the broken pool was replaced
    assert sorted((o.spec.config["n"], o.spec.seed) for o in outcomes) == sorted(
        (s.config["n"], s.seed) for s in specs)
    assert all(o.error is None for o in outcomes)


def test_pools_that_never_take_a_run_end_the_sweep_with_a_clear_error(toy, monkeypatch):
    class Dead(_FlakyPool):
        def submit(self, fn, spec):
            raise BrokenProcessPool("a child process terminated abruptly")

    monkeypatch.setattr(sweep_mod, "_new_pool", lambda jobs: Dead({"shutdowns": 0}))
    with pytest.raises(sweep_mod.SweepError, match="die before taking a run"):
        list(sweep_mod._process(sweep_mod.plan(toy, quick=True), 2, None))
