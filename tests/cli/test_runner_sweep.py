"""Planning and running sweeps in-process: grids, seeds, settings, failures, retries, the process executor."""

from __future__ import annotations

from collections import Counter

import pytest
from symkit_cli_helpers import executions

from symkit.lab.runner.sweep import SweepError, parse_assignments, parse_seeds, plan, run_sweep
from symkit.lab.store import Store


def test_plan_is_the_grid_with_quick_overrides(toy):
    specs = plan(toy, quick=True)
    assert sorted((s.config["n"], s.seed) for s in specs) == [(10, 0), (10, 1), (100, 0), (100, 1)]
    assert all(s.config["scale"] == 0.5 for s in specs)  # the quick override
    assert {s.config["n"] for s in plan(toy)} == {10, 100, 1000} and len(plan(toy)) == 9
    assert all(s.config["scale"] == 1.0 for s in plan(toy))


def test_seeds_and_settings_change_the_plan(toy):
    specs = plan(toy, quick=True, seeds=[5, 6, 7], settings={"tag": ["b"], "n": [3]})
    assert sorted((s.config["n"], s.seed, s.config["tag"]) for s in specs) == [(3, 5, "b"), (3, 6, "b"), (3, 7, "b")]
    swept = plan(toy, quick=True, seeds=[0], settings=parse_assignments(toy, ["n=1,2,4"], "--sweep"))
    assert sorted(s.config["n"] for s in swept) == [1, 2, 4]
    # seeds share a config hash; settings do not
    assert len({s.config_hash for s in specs}) == 1
    assert len({s.config_hash for s in swept}) == 3


def test_parse_seeds():
    assert parse_seeds("0,1,2") == [0, 1, 2]
    assert parse_seeds("0-3,7,2") == [0, 1, 2, 3, 7]
    for bad in ("a", "3-1", ",", "1.5"):
        with pytest.raises(SweepError, match="--seeds"):
            parse_seeds(bad)


def test_bad_settings_name_the_field_and_the_valid_ones(toy):
    with pytest.raises(SweepError, match="no setting 'nn'; valid settings: n, scale"):
        parse_assignments(toy, ["nn=3"])
    with pytest.raises(SweepError, match="'n'.*expected int"):
        parse_assignments(toy, ["n=ten"])
    with pytest.raises(SweepError, match="expected key=value"):
        parse_assignments(toy, ["n"])
    with pytest.raises(SweepError, match="--seeds"):
        parse_assignments(toy, ["seed=3"])
    assert parse_assignments(toy, ["sizes=3,4", "scale=1e-2"]) == {"sizes": [(3, 4)], "scale": [0.01]}
    assert parse_assignments(toy, ["tag=a", "tag=b", "tag=a"]) == {"tag": ["a", "b"]}  # repeated keys sweep
    assert parse_assignments(toy, ["tag=x(1,2),y"], "--sweep") == {"tag": ["x(1,2)", "y"]}


def test_a_sweep_runs_once_and_a_second_call_runs_nothing(toy, toy_log, tmp_path):
    store = Store(tmp_path / "s.db")
    specs = plan(toy, quick=True)
    first = run_sweep(toy, specs, store)
    assert (first.ran, first.failed, first.already_ok) == (4, 0, 0)
    second = run_sweep(toy, specs, store)
    assert (second.ran, second.already_ok) == (0, 4)
    assert sorted(executions(toy_log)) == [(10, 0), (10, 1), (100, 0), (100, 1)]
    rows = store.runs(toy.name)
    assert len(rows) == 4 and all(r.status == "ok" for r in rows)
    # the stored config rebuilds the dataclass, tuples included
    assert all(r.config["sizes"] == [1, 2] and r.metrics["sizes"] == [1, 2] for r in rows)


def test_a_failing_run_is_recorded_and_the_sweep_goes_on(toy, toy_log, tmp_path, monkeypatch):
    store = Store(tmp_path / "s.db")
    specs = plan(toy, quick=True)
    monkeypatch.setenv("SYMKIT_TOY_FAIL_SEEDS", "0")
    result = run_sweep(toy, specs, store)
    assert (result.ran, result.failed) == (4, 2)
    failed = store.runs(toy.name, status="failed")
    assert sorted(r.config["n"] for r in failed) == [10, 100] and all(r.seed == 0 for r in failed)
    assert all("toy failure on purpose (seed 0)" in r.error and r.metrics is None for r in failed)
    assert len(store.runs(toy.name, status="ok")) == 2

    # without --retry-failed the failures are left alone; with it, only they run again
    assert run_sweep(toy, specs, store).ran == 0
    monkeypatch.delenv("SYMKIT_TOY_FAIL_SEEDS")
    before = len(executions(toy_log))
    retry = run_sweep(toy, specs, store, retry_failed=True)
    assert (retry.ran, retry.failed, retry.already_ok) == (2, 0, 2)
    assert sorted(executions(toy_log)[before:]) == [(10, 0), (100, 0)]
    rows = store.runs(toy.name)
    assert len(rows) == 4 and all(r.status == "ok" for r in rows)
    assert sorted(r.attempts for r in rows) == [1, 1, 2, 2]


def test_a_run_returning_a_non_dict_is_a_recorded_failure(tmp_path, monkeypatch):
    from dataclasses import dataclass

    from symkit.lab.experiments import registry

    @dataclass
    class C:
        seed: int = 0

    exp = registry.Experiment("cli-test-bad-return", "returns a list", "nothing", C, run=lambda c: [1, 2])
    monkeypatch.setitem(registry._REGISTRY, exp.name, exp)  # registered for this test only
    store = Store(tmp_path / "s.db")
    result = run_sweep(exp, plan(exp), store)
    assert result.failed == 1
    assert "returned list; expected a dict of metrics" in store.runs(exp.name)[0].error


def test_bad_executor_and_jobs_are_clear_errors(toy, tmp_path):
    store = Store(tmp_path / "s.db")
    with pytest.raises(SweepError, match="valid executors: local, process, ray"):
        run_sweep(toy, plan(toy, quick=True), store, executor="slurm")
    with pytest.raises(SweepError, match="--jobs must be at least 1"):
        run_sweep(toy, plan(toy, quick=True), store, executor="process", jobs=0)


def test_the_process_executor_stores_the_same_results_as_local(toy, toy_log, tmp_path):
    specs = plan(toy, quick=True, seeds=[0, 1, 2])
    local, pool = Store(tmp_path / "local.db"), Store(tmp_path / "pool.db")
    run_sweep(toy, specs, local)
    result = run_sweep(toy, specs, pool, executor="process", jobs=2)
    assert (result.ran, result.failed) == (6, 0)

    def table(store):
        return {(r.config_hash, r.seed): (r.config, r.metrics, r.status) for r in store.runs(toy.name)}

    assert table(pool) == table(local)
    pids = Counter(line.split()[2] for line in toy_log.read_text().splitlines())
    assert len(pids) >= 2  # the pool's runs happened outside this process


def test_progress_lines_show_the_sweep_and_the_run(toy, tmp_path, capsys):
    run_sweep(toy, plan(toy, quick=True), Store(tmp_path / "s.db"), progress=True)
    err = capsys.readouterr().err
    assert "cli-toy: 100%" in err and "4/4" in err
    assert "run: n=10 seed=0" in err or "last: n=" in err


def test_a_run_that_kills_its_worker_is_recorded_and_the_pool_sweep_goes_on(toy, toy_log, tmp_path):
    store = Store(tmp_path / "s.db")
    specs = plan(toy, quick=True, seeds=[0, 1, 2], settings={"crash_seed": [1]})
    result = run_sweep(toy, specs, store, executor="process", jobs=2)
    assert (result.ran, result.failed) == (6, 2)
    failed = store.runs(toy.name, status="failed")
    assert sorted((r.config["n"], r.seed) for r in failed) == [(10, 1), (100, 1)]
    assert all("worker process died while running this run" in r.error for r in failed)
    ok = store.runs(toy.name, status="ok")
    assert sorted((r.config["n"], r.seed) for r in ok) == [(10, 0), (10, 2), (100, 0), (100, 2)]
    assert len(executions(toy_log)) <= 6 + 2 * 2  # only the suspects of a crash ran twice


def test_a_field_added_later_keeps_the_stored_runs_as_they_were(tmp_path, monkeypatch):
    """Runs stored before a config gained ``width`` are found again (not rerun) by a sweep at ``width``'s legacy
    value, and a run at another value is a new run; a stored config without the field runs with the legacy value."""
    from dataclasses import dataclass

    from symkit.lab.experiments import registry
    from symkit.lab.runner.sweep import _from_json

    seen = []

    @dataclass
    class Before:
        lr: float = 0.1
        seed: int = 0

    @dataclass
    class After:
        lr: float = 0.1
        width: int = 64  # the new default; runs stored before the field had 32
        seed: int = 0

    def run(config):
        seen.append(getattr(config, "width", None))
        return {"lr": config.lr}

    store = Store(tmp_path / "s.db")
    old = registry.Experiment("cli-test-legacy", "a field added later", "nothing", Before, run=run)
    monkeypatch.setitem(registry._REGISTRY, old.name, old)
    assert run_sweep(old, plan(old, seeds=[0, 1]), store).ran == 2
    new = registry.Experiment("cli-test-legacy", "a field added later", "nothing", After, run=run,
                              legacy={"width": 32})
    monkeypatch.setitem(registry._REGISTRY, new.name, new)
    again = run_sweep(new, plan(new, seeds=[0, 1], settings={"width": [32]}), store)
    assert (again.ran, again.already_ok) == (0, 2)
    wider = run_sweep(new, plan(new, seeds=[0], settings={"width": [64]}), store)
    assert wider.ran == 1 and seen[-1] == 64
    assert sorted(len(r.config) for r in store.runs(new.name)) == [2, 2, 3]  # lr, seed (and width when not 32)
    assert _from_json(new, {"lr": 0.1, "seed": 0}).width == 32
    assert new.identity({"lr": 0.1, "width": 32, "seed": 3}) == {"lr": 0.1, "seed": 3}
    assert new.complete({"lr": 0.1, "seed": 3}) == {"lr": 0.1, "width": 32, "seed": 3}
    with pytest.raises(TypeError, match="'depth' is not a field of After"):
        registry.Experiment("cli-test-legacy", "bad", "nothing", After, run=run, legacy={"depth": 2})


def test_workers_share_out_the_cores_the_sweep_may_use(monkeypatch):
    import os

    import torch

    from symkit.lab.runner import sweep

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert [sweep.threads_per_worker(j) for j in (1, 2, 3, 4, 8)] == [4, 2, 1, 1, 1]
    # a sweep pinned to one core (taskset -c 0, a batch scheduler's allocation) gives each worker one thread,
    # whatever the machine's core count: two such sweeps side by side must not run four threads on two cores
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1})
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert sweep.threads_per_worker(1) == 1
    pool = sweep._new_pool(1)
    try:
        assert pool.submit(torch.get_num_threads).result(timeout=120) == 1
    finally:
        pool.shutdown()


def test_a_stopped_pool_is_wound_down_before_the_sweep_returns():
    """An interrupted sweep stops its pool; the pool's manager thread must be done (its wake-up pipe closed) by the
    time ``_stop_pool`` returns, else Python < 3.12's exit hook can write into that pipe as it closes and print a
    traceback after a clean Ctrl-C."""
    import time

    from symkit.lab.runner import sweep

    pool = sweep._new_pool(1)
    busy = pool.submit(time.sleep, 30)
    deadline = time.monotonic() + 120
    while not any(p.is_alive() for p in (pool._processes or {}).values()):
        assert time.monotonic() < deadline, "the pool started no worker"
        time.sleep(0.01)
    workers = list(pool._processes.values())
    manager, wakeup = pool._executor_manager_thread, pool._executor_manager_thread_wakeup
    sweep._stop_pool(pool, clean=False)
    assert busy.done() and not any(worker.is_alive() for worker in workers)
    assert not manager.is_alive() and wakeup._closed
