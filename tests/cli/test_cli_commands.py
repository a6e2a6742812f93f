"""The ``symkit`` commands through typer's CliRunner: list, reproduce, report, runs, and their errors."""

from __future__ import annotations

import csv
import io
import math
import sqlite3
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from symkit.lab.cli.main import app
from symkit.lab.experiments.registry import all_experiments
from symkit.lab.store import Store


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_list_shows_each_experiment_with_what_it_reproduces(runner, toy):
    result = invoke(runner, "list")
    assert result.exit_code == 0
    for name, exp in all_experiments().items():
        assert name in result.output and exp.description in result.output
    assert "reproduces: the 1/sqrt(n) law" in result.output
    assert "paper values: error=0.08 [Table 0]" in result.output


def test_an_unknown_experiment_lists_the_valid_names(runner, toy, tmp_path):
    for command in (["reproduce", "cli-tyo"], ["report", "cli-tyo"]):
        result = invoke(runner, *command, "--store", str(tmp_path / "s.db"))
        assert result.exit_code == 2
        assert "no experiment named 'cli-tyo'; valid names:" in result.output
        assert "cli-toy" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "n=many"], "bad value 'many' for setting 'n' of experiment 'cli-toy': expected int"),
        (["--set", "colour=red"], "no setting 'colour'; valid settings: n, scale, fail_seed, crash_seed, sleep, tag"),
        (["--set", "n"], "expected key=value; valid keys for 'cli-toy': n, scale"),
        (["--sweep", "scale=1,x"], "bad value 'x' for setting 'scale'"),
        (["--seeds", "1..3"], "bad --seeds value '1..3'"),
        (["--executor", "slurm"], "valid executors: local, process, ray"),
    ],
)
def test_bad_reproduce_options_are_clear_errors(runner, toy, tmp_path, args, message):
    result = invoke(runner, "reproduce", "cli-toy", "--quick", *args, "--store", str(tmp_path / "s.db"))
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "s.db").exists()  # nothing ran


def test_reproduce_then_report_shows_means_stderrs_and_paper_values(runner, toy, tmp_path):
    db, out = tmp_path / "s.db", tmp_path / "report"
    result = invoke(runner, "reproduce", "cli-toy", "--seeds", "0-2", "--store", str(db))
    assert result.exit_code == 0, result.output
    assert "9 runs in the sweep; 0 already stored, ran 9 (0 failed)" in result.output
    again = invoke(runner, "reproduce", "cli-toy", "--seeds", "0-2", "--store", str(db))
    assert "9 already stored, ran 0" in again.output

    result = invoke(runner, "report", "cli-toy", "--store", str(db), "--out", str(out))
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "| n | setup | seeds | error | error (paper) | mean | n_used | positive | label | sizes |" in text
    errors = [r.metrics["error"] for r in Store(db).runs("cli-toy") if r.config["n"] == 100]
    mean, se = np.mean(errors), np.std(errors, ddof=1) / math.sqrt(len(errors))
    [row] = [line for line in text.splitlines() if line.startswith("| 100 | paper | 3 | ")]
    assert row.startswith(f"| 100 | paper | 3 | {mean:.4g} ± {se:.2g} | 0.08 | ")
    assert "error = 0.01 at n=10000 (Table 0)" in text  # a paper value no run of comparable scale matches
    assert "means over seeds ± standard error" in text


def test_quick_and_modified_runs_are_labelled_and_not_set_beside_the_paper(runner, toy, tmp_path):
    db = tmp_path / "s.db"
    assert invoke(runner, "reproduce", "cli-toy", "--quick", "--store", str(db)).exit_code == 0
    modified_run = invoke(runner, "reproduce", "cli-toy", "--set", "scale=2.0", "--seeds", "0", "--store", str(db))
    assert modified_run.exit_code == 0
    text = invoke(runner, "report", "cli-toy", "--store", str(db), "--out", str(tmp_path / "r")).stdout
    quick = [line for line in text.splitlines() if "| quick |" in line]
    modified = [line for line in text.splitlines() if "| modified |" in line]
    assert len(quick) == 2 and len(modified) == 3
    assert "error (paper)" not in text  # no run of comparable scale: no paper column at all
    assert "error = 0.08 at n=100 (Table 0)" in text and "not comparable with the paper" in text
    assert invoke(runner, "reproduce", "cli-toy", "--seeds", "0", "--store", str(db)).exit_code == 0
    text = invoke(runner, "report", "cli-toy", "--store", str(db), "--out", str(tmp_path / "r")).stdout
    header = [c.strip() for c in next(line.split("|") for line in text.splitlines() if "error (paper)" in line)]
    n, setup, paper = (header.index(k) for k in ("n", "setup", "error (paper)"))
    rows = [c for c in (line.split("|") for line in text.splitlines() if line.startswith("|")) if c[n].strip() == "100"]
    assert sorted((r[setup].strip(), r[paper].strip()) for r in rows) == [("modified", "–"), ("paper", "0.08"),
                                                                    ("quick", "–")]


def test_a_dry_run_lists_what_the_sweep_would_do_with_each_run_and_runs_nothing(runner, toy, tmp_path, monkeypatch):
    """``reproduce --dry-run`` prints each planned run in the sweep's order as done, failed (skipped unless
    --retry-failed) or to run, then the counts and the time estimate; it runs nothing, stores nothing and creates
    no store."""
    db, log = tmp_path / "s.db", tmp_path / "toy.log"
    monkeypatch.setenv("SYMKIT_TOY_LOG", str(log))
    first = invoke(runner, "reproduce", "cli-toy", "--seeds", "0-1", "--dry-run", "--store", str(db))
    assert first.exit_code == 0, first.output
    assert not db.exists() and not log.exists()
    assert first.output.splitlines()[0] == "to run  n=10 seed=0"
    assert first.output.splitlines()[-2].startswith("6 runs planned: 0 done, 6 to run (0 from a checkpoint), ")
    assert first.output.splitlines()[-1] == "no estimate: no finished run of cli-toy in the store"
    invoke(runner, "reproduce", "cli-toy", "--seeds", "0-1", "--set", "fail_seed=1", "--store", str(db))
    executed = log.read_text()
    assert len(Store(db).runs("cli-toy")) == 6
    plan = invoke(runner, "reproduce", "cli-toy", "--seeds", "0-2", "--set", "fail_seed=1", "--dry-run",
                  "--store", str(db))
    assert plan.exit_code == 0, plan.output
    *lines, counts, estimate = plan.output.splitlines()
    assert [line.split()[0] for line in lines] == ["done", "failed", "to"] * 3  # the seeds inside each n
    assert lines[1] == "failed  n=10 seed=1  [skipped: --retry-failed runs it again]"
    assert counts == ("9 runs planned: 3 done, 3 to run (0 from a checkpoint), 0 in use by another process, "
                      f"3 failed; store {db}. Nothing was run (--dry-run).")
    assert estimate.startswith("estimate: about ") and " for 3 runs (median times of 3 stored runs: " in estimate
    retry = invoke(runner, "reproduce", "cli-toy", "--seeds", "0-2", "--set", "fail_seed=1", "--dry-run",
                   "--retry-failed", "--store", str(db))
    assert retry.output.splitlines()[-2].startswith("9 runs planned: 3 done, 6 to run ")
    assert log.read_text() == executed and len(Store(db).runs("cli-toy")) == 6  # nothing ran, nothing stored


def test_a_time_limit_stops_the_sweep_as_sigterm_does_and_the_run_in_flight_saves(runner, toy, tmp_path,
                                                                                   monkeypatch):
    """``--time-limit 1s``: the sweep is stopped as SIGTERM stops it (a run that checkpoints saves where it stands),
    nothing unfinished is stored, the exit code is 124 (as GNU timeout's) and the output says how to carry on."""
    import signal

    from symkit_cli_helpers import executions

    db, log, saved = tmp_path / "s.db", tmp_path / "toy.log", tmp_path / "saved.log"
    monkeypatch.setenv("SYMKIT_TOY_LOG", str(log))
    monkeypatch.setenv("SYMKIT_TOY_SAVE", str(saved))
    result = invoke(runner, "reproduce", "cli-toy", "--quick", "--seeds", "0", "--set", "sleep=600",
                    "--time-limit", "1s", "--store", str(db))
    assert result.exit_code == 124, result.output
    assert "symkit: stopping at " in result.output and "(--time-limit 1 s)" in result.output
    assert "Stopped at the time limit (1 s): runs that checkpoint saved where they stood" in result.output
    assert executions(log) == [(10, 0)] and saved.read_text().split()[:2] == ["saved", "0"]
    assert Store(db).runs("cli-toy") == []
    # a sweep that ends first runs every run and exits 0; its timer is gone: no SIGTERM comes later
    received = []
    previous = signal.signal(signal.SIGTERM, lambda *_: received.append(1))
    try:
        done = invoke(runner, "reproduce", "cli-toy", "--quick", "--seeds", "0", "--time-limit", "2s",
                      "--store", str(db))
        assert done.exit_code == 0 and len(Store(db).runs("cli-toy")) == 2, done.output
        time.sleep(2.5)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == []


def test_reproduce_keeps_an_archive_of_the_finished_runs_as_it_goes(runner, toy, tmp_path, monkeypatch):
    """``--archive FILE``: each finished run is added to the runs archive as soon as it is stored, so a sweep stopped
    later (here by its time limit, in its second run) leaves the first in the archive; failed runs are not archived;
    the archive imports into an empty store as the runs were stored."""
    from symkit.lab.store.archive import read_archive

    db, archive = tmp_path / "s.db", tmp_path / "results" / "toy.jsonl"
    monkeypatch.setenv("SYMKIT_TOY_SAVE", str(tmp_path / "saved.log"))  # the second run stops when told to
    result = invoke(runner, "reproduce", "cli-toy", "--quick", "--seeds", "0", "--set", "sleep=2", "--time-limit",
                    "3s", "--archive", str(archive), "--store", str(db))
    assert result.exit_code == 124, result.output
    assert f"{archive}: 1 run of cli-toy (1 added)" in result.output
    (entry,) = read_archive(archive)
    (stored,) = Store(db).runs("cli-toy")
    assert (entry["config"], entry["metrics"]) == (stored.config, stored.metrics)
    # carried on with seed 1 too, which fails: seed 0's second run is added, the failed runs are not
    monkeypatch.setenv("SYMKIT_TOY_FAIL_SEEDS", "1")
    result = invoke(runner, "reproduce", "cli-toy", "--quick", "--seeds", "0-1", "--set", "sleep=2",
                    "--archive", str(archive), "--store", str(db))
    assert result.exit_code == 1 and "1 already stored, ran 3 (2 failed)" in result.output, result.output
    assert f"{archive}: 2 runs of cli-toy (1 added)" in result.output
    imported = tmp_path / "imported.db"
    assert invoke(runner, "import", str(archive), "--store", str(imported)).exit_code == 0
    ok = sorted((r.config_hash, r.metrics["mean"]) for r in Store(db).runs("cli-toy", status="ok"))
    assert sorted((r.config_hash, r.metrics["mean"]) for r in Store(imported).runs("cli-toy")) == ok


def test_an_archive_that_cannot_be_read_stops_the_sweep_before_it_runs_and_one_that_cannot_be_written_warns(
        runner, toy, tmp_path, monkeypatch):
    from symkit_cli_helpers import executions

    log = tmp_path / "toy.log"
    monkeypatch.setenv("SYMKIT_TOY_LOG", str(log))
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{broken\n")
    result = invoke(runner, "reproduce", "cli-toy", "--quick", "--archive", str(broken), "--store",
                    str(tmp_path / "s.db"))
    assert result.exit_code == 2 and "broken.jsonl, line 1: not JSON" in result.output, result.output
    assert not log.exists() and not (tmp_path / "s.db").exists()
    (tmp_path / "a-file").write_text("")
    unwritable = tmp_path / "a-file" / "toy.jsonl"  # its folder would be a file
    result = invoke(runner, "reproduce", "cli-toy", "--quick", "--seeds", "0", "--archive", str(unwritable),
                    "--store", str(tmp_path / "s.db"))
    assert result.exit_code == 0, result.output  # the runs are stored; the archive is a warning
    assert f"warning: --archive {unwritable}: not written" in result.output
    assert len(executions(log)) == 2 and len(Store(tmp_path / "s.db").runs("cli-toy", status="ok")) == 2


@pytest.mark.parametrize("value", ["2x", "0", "-5", "h", ""])
def test_a_bad_time_limit_is_a_clear_error_before_anything_runs(runner, toy, tmp_path, value):
    result = invoke(runner, "reproduce", "cli-toy", "--quick", "--time-limit", value, "--store", str(tmp_path / "s.db"))
    assert result.exit_code == 2 and f"--time-limit {value!r}: " in result.output, result.output
    assert not (tmp_path / "s.db").exists()


def test_report_as_csv_has_one_row_per_setting(runner, toy, tmp_path):
    db = tmp_path / "s.db"
    invoke(runner, "reproduce", "cli-toy", "--seeds", "0-1", "--store", str(db))
    result = invoke(runner, "report", "cli-toy", "--format", "csv", "--store", str(db), "--out", str(tmp_path))
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [int(r["n"]) for r in rows] == [10, 100, 1000] and {r["setup"] for r in rows} == {"paper"}
    stored = {(r.config["n"], r.seed): r.metrics["mean"] for r in Store(db).runs("cli-toy")}
    for row in rows:
        n = int(row["n"])
        assert float(row["mean"]) == pytest.approx((stored[(n, 0)] + stored[(n, 1)]) / 2)
    assert rows[1]["error_paper"] == "0.08" and rows[0]["error_paper"] == ""


def test_report_of_chosen_seeds_aggregates_those_runs_alone(runner, toy, tmp_path):
    db = tmp_path / "s.db"
    invoke(runner, "reproduce", "cli-toy", "--seeds", "0-3", "--store", str(db))
    result = invoke(runner, "report", "cli-toy", "--format", "csv", "--seeds", "2-3", "--store", str(db),
                    "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    stored = {(r.config["n"], r.seed): r.metrics["mean"] for r in Store(db).runs("cli-toy")}
    assert [int(r["n"]) for r in rows] == [10, 100, 1000]
    for row in rows:  # the mean of seeds 2 and 3, not of all four
        n = int(row["n"])
        assert float(row["mean"]) == pytest.approx((stored[(n, 2)] + stored[(n, 3)]) / 2)
        assert float(row["mean"]) != pytest.approx(np.mean([stored[(n, s)] for s in range(4)]))
    missing = invoke(runner, "report", "cli-toy", "--seeds", "7-10", "--store", str(db), "--out", str(tmp_path))
    assert missing.exit_code == 2 and "no runs of 'cli-toy' with seeds [7, 8, 9, 10]" in missing.output
    bad = invoke(runner, "report", "cli-toy", "--seeds", "x", "--store", str(db), "--out", str(tmp_path))
    assert bad.exit_code == 2 and "bad --seeds value 'x'" in bad.output


def test_report_without_runs_says_what_to_do(runner, toy, tmp_path):
    missing = tmp_path / "missing.db"
    result = invoke(runner, "report", "cli-toy", "--store", str(missing))
    assert result.exit_code == 1 and "there is no results store at" in result.output
    assert not missing.exists()  # reading does not create a store
    Store(tmp_path / "s.db").record("other", {"seed": 0}, {"x": 1})
    result = invoke(runner, "report", "cli-toy", "--store", str(tmp_path / "s.db"))
    assert result.exit_code == 2
    assert "no runs of 'cli-toy'" in result.output and "symkit reproduce cli-toy" in result.output
    listing = invoke(runner, "runs", "cli-toy", "--store", str(tmp_path / "s.db"))
    assert "No runs of 'cli-toy'" in listing.output and "experiments stored: other" in listing.output
    Store(tmp_path / "s.db").record("other", {"seed": 1}, None, error="E")
    summary = invoke(runner, "runs", "--store", str(tmp_path / "s.db"))
    assert summary.stdout.splitlines()[1:] == ["  other: 1 failed, 1 ok"]


def test_failed_runs_exit_nonzero_and_are_listed_with_their_error(runner, toy, tmp_path, monkeypatch):
    db = tmp_path / "s.db"
    monkeypatch.setenv("SYMKIT_TOY_FAIL_SEEDS", "1")
    result = invoke(runner, "reproduce", "cli-toy", "--quick", "--store", str(db))
    assert result.exit_code == 1
    assert "ran 4 (2 failed)" in result.output and "--retry-failed" in result.output
    listing = invoke(runner, "runs", "cli-toy", "--failed", "--store", str(db))
    assert listing.output.count("failed seed=1") == 2
    # the settings every listed run shares come once, above the runs; each run's line keeps what sets it apart
    shared, *lines = invoke(runner, "runs", "cli-toy", "--store", str(db)).output.splitlines()
    assert shared == ("Settings shared by every run listed: crash_seed=-1, fail_seed=-1, scale=0.5, sizes=[1, 2], "
                      "sleep=0.0, tag=a")
    assert sorted(line.split("  [")[0] for line in lines) == ["failed seed=1 n=10", "failed seed=1 n=100",
                                                              "ok     seed=0 n=10", "ok     seed=0 n=100"]
    assert "RuntimeError: toy failure on purpose (seed 1)" in listing.output
    monkeypatch.delenv("SYMKIT_TOY_FAIL_SEEDS")
    retry = invoke(runner, "reproduce", "cli-toy", "--quick", "--retry-failed", "--store", str(db))
    assert retry.exit_code == 0 and "2 already stored, ran 2 (0 failed)" in retry.output


def test_a_corrupt_or_foreign_store_is_a_clear_error(runner, toy, tmp_path):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(bytes(range(256)) * 64)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE photos (path TEXT)")
    for path, message in ((corrupt, "not a usable symkit results store"), (foreign, "not a symkit results store")):
        for command in (["reproduce", "cli-toy", "--quick"], ["report", "cli-toy"], ["runs", "cli-toy"]):
            result = invoke(runner, *command, "--store", str(path))
            assert result.exit_code == 1, (command, result.output)
            assert message in result.output and str(path) in result.output
            assert "Traceback" not in result.output


def test_help_lists_the_commands(runner):
    result = invoke(runner, "--help")
    assert result.exit_code == 0
    for command in ("list", "reproduce", "report", "runs", "ranks", "demo"):
        assert command in result.output
    from symkit import __version__

    assert invoke(runner, "--version").output.strip() == f"symkit {__version__}"


def test_a_broken_experiment_module_does_not_hide_the_others(runner, toy, monkeypatch):
    from symkit.lab.experiments import registry

    all_experiments()  # the real modules are imported once; discovery below only re-reads them
    monkeypatch.setattr(registry, "_DISCOVERED", False)
    monkeypatch.setattr(registry, "_BROKEN", {})
    monkeypatch.setenv("SYMKIT_EXPERIMENT_MODULES", "symkit_cli_toy,no_such_module_for_symkit")
    result = invoke(runner, "list")
    assert result.exit_code == 0
    assert "cli-toy" in result.stdout
    assert "experiment module no_such_module_for_symkit failed to import: ModuleNotFoundError" in result.stderr
    unknown = invoke(runner, "report", "nope")
    assert "modules that failed to import: no_such_module_for_symkit" in unknown.output


@pytest.mark.parametrize("seconds,text", [(-1.0, "0 s"), (40.4, "40 s"), (12 * 60, "12 min"), (3.5 * 3600, "3.5 h"),
                                          (2 * 86400, "2.0 days")])
def test_ages_of_unfinished_runs_read_in_a_sensible_unit(seconds, text):
    from symkit.lab.cli.main import _ago

    assert _ago(seconds) == text


def test_the_archive_summary_counts_runs_another_sweep_added_meanwhile(tmp_path, capsys):
    """Two sweeps archiving to one file: each one's closing line gives the file's size at its end, not at its start."""
    from symkit.lab.cli.main import _ArchiveKeeper
    from symkit.lab.store import Store
    from symkit.lab.store.archive import export_runs

    archive = tmp_path / "runs.jsonl"
    store = Store(tmp_path / "a.db")
    store.record("cli-toy", {"n": 1, "seed": 0}, {"loss": 1.0})
    export_runs(store, "cli-toy", archive)
    keeper = _ArchiveKeeper(archive, "cli-toy")  # this sweep starts: one run in the archive
    store.record("cli-toy", {"n": 1, "seed": 1}, {"loss": 2.0})
    export_runs(store, "cli-toy", archive)  # another sweep adds one
    keeper.summary()
    assert capsys.readouterr().out.strip() == f"{archive}: 2 runs of cli-toy (0 added)"  # it said 1 run
