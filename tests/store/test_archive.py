"""Runs archives: a store's finished runs survive as JSON lines and load into another store unchanged."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from symkit.lab.cli.main import app
from symkit.lab.experiments.fields import Count, Seed
from symkit.lab.experiments.registry import Experiment, get_experiment
from symkit.lab.store import Store, to_jsonable
from symkit.lab.store.archive import export_runs, import_runs, read_archive


def _fill(store: Store) -> None:
    for seed in range(3):
        store.record("exp", {"n": 3, "seed": seed}, {"err": 0.1 * seed, "curve": [1.0, 2.0, seed]},
                     duration=10.0 + seed, host="lab", version="0.9")
    store.record("exp", {"n": 5, "seed": 0}, {"err": 0.5}, duration=1.0)
    store.record("exp", {"n": 5, "seed": 1}, None, error="Traceback: boom")
    store.record("other", {"m": 1, "seed": 0}, {"x": 1.0})


def _fields(run):
    return (run.experiment, run.config_hash, run.seed, run.config, run.metrics, run.status, run.started_at,
            run.finished_at, run.duration, run.version, run.host)


def test_finished_runs_round_trip_through_an_archive(tmp_path):
    source = Store(tmp_path / "a.db")
    _fill(source)
    total, added = export_runs(source, "exp", tmp_path / "exp.jsonl")
    assert (total, added) == (4, 4)  # the failed run and the other experiment stay out
    target = Store(tmp_path / "b.db")
    assert import_runs(target, tmp_path / "exp.jsonl") == (4, 0)
    assert sorted(map(_fields, target.runs("exp"))) == sorted(map(_fields, source.runs("exp", status="ok")))
    assert import_runs(target, tmp_path / "exp.jsonl") == (0, 4)  # a second import adds nothing
    assert len(target.runs("exp")) == 4


def test_exporting_adds_to_an_archive_and_keeps_what_it_had(tmp_path):
    first = Store(tmp_path / "a.db")
    first.record("exp", {"n": 3, "seed": 0}, {"err": 1.0})
    archive = tmp_path / "exp.jsonl"
    export_runs(first, "exp", archive)
    second = Store(tmp_path / "b.db")  # another machine: the same run again with another result, and a new one
    second.record("exp", {"n": 3, "seed": 0}, {"err": 2.0})
    second.record("exp", {"n": 3, "seed": 1}, {"err": 3.0})
    assert export_runs(second, "exp", archive) == (2, 1)
    assert sorted((e["seed"], e["metrics"]["err"]) for e in read_archive(archive)) == [(0, 1.0), (1, 3.0)]
    lines = archive.read_text().splitlines()
    assert [json.loads(line)["seed"] for line in lines] == [0, 1]  # sorted by setting and seed
    assert not (tmp_path / "exp.jsonl.tmp").exists()


def test_an_import_replaces_a_failed_run_but_never_a_finished_one(tmp_path):
    archive_store = Store(tmp_path / "a.db")
    archive_store.record("exp", {"n": 3, "seed": 0}, {"err": 1.0})
    archive_store.record("exp", {"n": 3, "seed": 1}, {"err": 1.5})
    export_runs(archive_store, "exp", tmp_path / "exp.jsonl")
    target = Store(tmp_path / "b.db")
    target.record("exp", {"n": 3, "seed": 0}, None, error="killed")
    target.record("exp", {"n": 3, "seed": 1}, {"err": 9.0})
    assert import_runs(target, tmp_path / "exp.jsonl") == (1, 1)
    assert {r.seed: (r.status, r.metrics) for r in target.runs("exp")} == {0: ("ok", {"err": 1.0}),
                                                                           1: ("ok", {"err": 9.0})}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        ("[1, 2]", "line 2: expected a JSON object (one run), got list"),
        ('{"format": "other/1"}', "line 2: not a symkit run (format 'other/1', expected 'symkit-runs/1')"),
        ("DROP:seed", "line 2: the run has no 'seed' field"),
        ("SET:seed=\"0\"", "line 2: 'seed' must be int, got '0'"),
        ("SET:duration=true", "line 2: 'duration' must be int or float, got True"),
        ("SET:seed=7", "line 2: the config's seed 0 is not the run's seed 7"),
        ("SEED:18446744073709551616", "line 2: 'seed' must be in [0, 2^63 - 1] (what the results store holds), got "
                                      "18446744073709551616"),
        ('SET:metrics={"err": NaN}', "line 2: metrics.err is not a finite number; a run with nan or infinite metrics "
                                     "is a failed run"),
        ('SET:metrics={"curve": [1.0, -Infinity]}', "line 2: metrics.curve[1] is not a finite number"),
        ("SET:duration=Infinity", "line 2: duration is not a finite number; expected a finite number"),
        ("SET:duration=-1", "line 2: 'duration' must be >= 0 seconds, got -1"),
        ("[" * 200_000 + "]" * 200_000, "line 2: nested more than 32 levels deep"),
        ("SET:metrics=" + '{"x": ' + "[" * 40 + "]" * 40 + "}", "line 2: nested more than 32 levels deep"),
    ],
)
def test_a_bad_archive_line_is_named_and_nothing_is_recorded(tmp_path, line, message):
    store = Store(tmp_path / "a.db")
    store.record("exp", {"n": 3, "seed": 0}, {"err": 1.0})
    store.record("exp", {"n": 4, "seed": 0}, {"err": 1.0})
    archive = tmp_path / "exp.jsonl"
    export_runs(store, "exp", archive)
    good, second = archive.read_text().splitlines()
    if line.startswith(("DROP:", "SET:", "SEED:")):
        entry = json.loads(second)
        if line.startswith("DROP:"):
            del entry[line[5:]]
        elif line.startswith("SEED:"):  # the run's seed and its config's
            entry["seed"] = entry["config"]["seed"] = int(line[5:])
        else:
            key, value = line[4:].split("=", 1)
            entry[key] = json.loads(value)
        line = json.dumps(entry)
    archive.write_text(good + "\n" + line + "\n")
    target = Store(tmp_path / "b.db")
    with pytest.raises(ValueError, match=re.escape("exp.jsonl, " + message)):
        import_runs(target, archive)
    assert target.runs() == []  # the archive is checked whole before a run is recorded


def _stored_config(name: str, **settings) -> dict:
    """The config of experiment ``name`` with ``settings``, as a sweep stores it."""
    exp = get_experiment(name)
    return exp.identity(to_jsonable(dataclasses.asdict(exp.make_config(**settings))))


def test_a_line_that_is_not_utf8_is_named_with_its_file(tmp_path):
    store = Store(tmp_path / "a.db")
    store.record("exp", {"n": 3, "seed": 0}, {"err": 1.0})
    archive = tmp_path / "exp.jsonl"
    export_runs(store, "exp", archive)
    archive.write_bytes(archive.read_bytes() + b'{"host": "caf\xe9"}\n')
    target = Store(tmp_path / "b.db")
    with pytest.raises(ValueError, match=re.escape(f"{archive}, line 2: not UTF-8 text (byte 0xe9 at column 14)")):
        import_runs(target, archive)
    assert target.runs() == []


@dataclass
class _ArchivedConfig:
    n: Count = 3
    lr: float = 0.1
    sizes: tuple[int, ...] = (1, 2)
    width: int = 8  # added after runs were stored with width 4: a legacy field
    seed: Seed = 0


@pytest.fixture
def archived(monkeypatch):
    """An experiment with a legacy field, registered for the test."""
    from symkit.lab.experiments import registry

    exp = Experiment("archived-toy", "archive fixture", "nothing", _ArchivedConfig, lambda config: {"err": 0.0},
                     legacy={"width": 4})
    monkeypatch.setitem(registry._REGISTRY, exp.name, exp)
    return exp


@pytest.mark.parametrize(("config", "message"), [
    ({"n": 3, "lr": 0.1, "seed": 0}, "the config is not one of experiment 'archived-toy': it lacks sizes (its "
                                     "settings: n, lr, sizes, width, seed)"),
    ({"seed": 0, "table": "A.1"}, "it lacks n, lr, sizes and has 'table', not settings of it"),
    ({"n": 0, "lr": 0.1, "sizes": [1], "seed": 0}, "'archived-toy': n: Input should be greater than or equal to 1"),
    ({"n": 3, "lr": 0.1, "sizes": "ab", "seed": 0}, "'archived-toy': sizes: Input should be a valid tuple"),
    ({"n": 3, "lr": 1e400, "sizes": [1], "seed": 0}, "setting lr=inf of experiment 'archived-toy': must be finite"),
    ({"n": "3", "lr": 0.1, "sizes": [1], "seed": 0}, "not written as experiment 'archived-toy' writes it (n='3' "
                                                    "where a sweep writes 3)"),
    ({"n": 3, "lr": 1, "sizes": [1], "seed": 0}, "(lr=1 where a sweep writes 1.0)"),
    ({"n": 3, "lr": 0.1, "sizes": [1], "width": 4, "seed": 0}, "(width=4, which a sweep leaves out (its legacy "
                                                               "value))"),
])
def test_a_config_that_is_not_the_experiments_is_refused(archived, config, message):
    """What a sweep of the experiment would store, and nothing else: every field (a legacy one left out at its
    legacy value), values of the fields' types and ranges, written so that the run gets the key a sweep gives it."""
    from symkit.lab.runner.sweep import check_stored_config

    with pytest.raises(ValueError, match=re.escape(message)):
        check_stored_config(archived, config)
    check_stored_config(archived, {"n": 3, "lr": 0.1, "sizes": [1], "seed": 0})  # width 4, the legacy value
    check_stored_config(archived, {"n": 3, "lr": 0.1, "sizes": [1], "width": 8, "seed": 0})


def test_the_import_command_checks_every_archive_whole_then_records_them_at_once(archived, tmp_path):
    """``symkit import good.jsonl bad.jsonl``: a config that is not the experiment's (a report would fail on it
    later) or a run of an experiment this install lacks is named by file and line, and nothing is recorded, not even
    from the good archive; good archives are recorded together."""
    runner = CliRunner()
    source = Store(tmp_path / "a.db")
    for seed in range(3):
        source.record(archived.name, _stored_config(archived.name, seed=seed), {"err": 0.1 * seed})
    good = tmp_path / "good.jsonl"
    export_runs(source, archived.name, good)
    lines = good.read_text().splitlines()
    store = tmp_path / "b.db"
    for name, line, message in [
        ("lacking.jsonl", {"config": {"seed": 1}}, "lacking.jsonl, line 2: the config is not one of experiment "
                                                   "'archived-toy': it lacks n, lr, sizes"),
        ("other.jsonl", {"experiment": "no-such-experiment"}, "other.jsonl, line 2: no experiment named "
                                                              "'no-such-experiment'"),
    ]:
        bad = tmp_path / name
        bad.write_text("\n".join([lines[0], json.dumps({**json.loads(lines[1]), **line}), lines[2]]) + "\n")
        result = runner.invoke(app, ["import", str(good), str(bad), "--store", str(store)])
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output
        assert Store(store).runs() == []
    again = tmp_path / "again.jsonl"
    again.write_text(lines[0] + "\n")
    result = runner.invoke(app, ["import", str(good), str(again), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert f"{good}: 3 runs recorded into" in result.output and f"{again}: 0 runs recorded into" in result.output
    assert f"{again}: 0 runs recorded into {store}, 1 already there" in result.output
    assert sorted(r.seed for r in Store(store).runs(archived.name)) == [0, 1, 2]


def test_the_commands_export_and_import_runs(tmp_path):
    runner = CliRunner()
    source = Store(tmp_path / "a.db")
    _fill(source)
    source.close()
    archive = tmp_path / "results" / "exp.jsonl"  # its folder is made
    result = runner.invoke(app, ["export", "rl-sac", "--out", str(archive), "--store", str(tmp_path / "a.db")])
    assert result.exit_code == 2 and "has no finished runs of 'rl-sac'; nothing to export" in result.output
    assert not archive.exists()
    result = runner.invoke(app, ["export", "no-such", "--out", str(archive), "--store", str(tmp_path / "a.db")])
    assert result.exit_code == 2 and "no experiment named 'no-such'" in result.output

    source = Store(tmp_path / "a.db")
    source.record("rl-sac", _stored_config("rl-sac", seed=0), {"final_return": 100.0})
    source.close()
    result = runner.invoke(app, ["export", "rl-sac", "--out", str(archive), "--store", str(tmp_path / "a.db")])
    assert f"{archive}: 1 run of rl-sac (1 added from" in result.output
    source = Store(tmp_path / "a.db")
    source.record("rl-sac", _stored_config("rl-sac", seed=1), {"final_return": 200.0})
    source.close()
    result = runner.invoke(app, ["export", "rl-sac", "--out", str(archive), "--store", str(tmp_path / "a.db")])
    assert result.exit_code == 0, result.output
    assert f"{archive}: 2 runs of rl-sac (1 added from" in result.output
    result = runner.invoke(app, ["import", str(archive), "--store", str(tmp_path / "b.db")])
    assert result.exit_code == 0, result.output
    assert "2 runs recorded into" in result.output and "0 already there" in result.output
    assert sorted(r.metrics["final_return"] for r in Store(tmp_path / "b.db").runs("rl-sac")) == [100.0, 200.0]

    archive.write_text("{broken\n")
    result = runner.invoke(app, ["import", str(archive), "--store", str(tmp_path / "b.db")])
    assert result.exit_code == 2 and "line 1: not JSON" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["import", str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "b.db")])
    assert result.exit_code == 2 and "missing.jsonl" in result.output


def test_the_archives_kept_in_the_repository_hold_valid_finished_runs_of_their_experiment():
    """results/NAME.jsonl: every line a run of experiment NAME whose config the experiment accepts, with the metrics
    its report reads (for rl-sac, a learning curve)."""
    from pathlib import Path

    from symkit.lab.experiments import get_experiment

    archives = sorted((Path(__file__).resolve().parents[2] / "results").glob("*.jsonl"))
    assert [p.name for p in archives if p.name == "rl-sac.jsonl"], archives
    for path in archives:
        exp = get_experiment(path.stem)
        entries = read_archive(path)
        assert entries and {e["experiment"] for e in entries} == {exp.name}
        for entry in entries:
            config = exp.make_config(**exp.complete(entry["config"]))
            exp.check_config(config)
            if exp.name == "rl-sac":
                metrics = entry["metrics"]
                assert metrics["curve_steps"][-1] == config.steps  # a finished run's curve reaches its budget
                assert len(metrics["curve_returns"]) == len(metrics["curve_steps"])
