"""``reproduce --dry-run``'s time estimate: medians of the stored runs' measured times, by config, else by scale."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from symkit.lab.cli.main import app
from symkit.lab.runner.sweep import estimate_line, estimate_seconds, plan
from symkit.lab.store import Store


def _record(store: Store, toy, seconds: float, seed: int, failed: bool = False, **settings) -> None:
    """Store one toy run at the quick scale (``scale=0.5``) unless ``settings`` say otherwise."""
    config = {**toy.make_config(quick=True).__dict__, **settings, "seed": seed}
    store.record(toy.name, config, None if failed else {"error": 0.1}, error="boom" if failed else None,
                 duration=seconds)


@pytest.fixture
def timed_store(toy, tmp_path) -> Store:
    """Quick runs: n=10 took 1, 2 and 10 s (median 2 s), n=1000 took 100 and 300 s; all five quick runs' median is
    10 s. Beside them, runs that must not count: a failed n=10 run, a quick run without a measured time, and a run
    at the default scale."""
    store = Store(tmp_path / "s.db")
    for seed, seconds in enumerate((1.0, 2.0, 10.0)):
        _record(store, toy, seconds, seed, n=10)
    _record(store, toy, 5000.0, 3, failed=True, n=10)
    _record(store, toy, 100.0, 0, n=1000)
    _record(store, toy, 300.0, 1, n=1000)
    _record(store, toy, 0.0, 9, n=1000)  # stored without a measured time (an import, say)
    _record(store, toy, 7000.0, 0, n=100, scale=1.0)  # the default scale: another setup
    return store


def test_each_run_takes_its_configs_median_else_its_scales(toy, timed_store):
    specs = plan(toy, quick=True, seeds=[5, 6])  # n=10 (own config stored) and n=100 (only its scale)
    assert sorted({s.config["n"] for s in specs}) == [10, 100]
    one = estimate_seconds(toy, specs, timed_store)
    # n=10: 2 s each; n=100: the quick runs' median, 10 s each
    assert (one.seconds, one.runs, one.missing, one.by_config, one.based_on) == (24.0, 4, 0, 2, 5)
    assert one.longest == 10.0 and one.wall_seconds == 24.0
    three = estimate_seconds(toy, specs, timed_store, jobs=3)
    assert three.wall_seconds == 10.0  # 24 s over 3 jobs is 8 s, but a 10 s run is not split
    assert estimate_line(three) == ("estimate: about 24 s for 4 runs (median times of 5 stored runs: same config, "
                                    "else same scale; 3 jobs: at least 10 s)")
    assert estimate_line(one) == ("estimate: about 24 s for 4 runs (median times of 5 stored runs: same config, "
                                  "else same scale)")
    # the store's records do as well as the store; a run that goes on from its checkpoint counts its part left
    records = timed_store.runs()
    assert estimate_seconds(toy, specs, records, jobs=3) == three
    half = estimate_seconds(toy, specs[:1], records, left={(specs[0].config_hash, specs[0].seed): 0.5})
    assert specs[0].config["n"] == 10 and half.seconds == 1.0


def test_runs_with_no_stored_run_at_their_scale_have_no_estimate(toy, timed_store, tmp_path):
    default = plan(toy, seeds=[0])  # the default scale: one n=100 run is stored there, which all three take
    part = estimate_seconds(toy, default, timed_store, jobs=2)
    assert (part.seconds, part.runs, part.missing, part.by_config, part.based_on) == (21000.0, 3, 0, 1, 1)
    assert part.wall_seconds == 10500.0
    # a --set of a field that no sweep varies is a scale of its own
    slow = plan(toy, quick=True, seeds=[0], settings={"sleep": [0.5]})
    none = estimate_seconds(toy, slow, timed_store)
    assert (none.runs, none.missing, none.seconds) == (0, 2, 0.0)
    assert estimate_line(none) == "no estimate: no finished run of cli-toy at this scale in the store"
    mixed = estimate_seconds(toy, [*slow, *plan(toy, quick=True, seeds=[7], settings={"n": [10]})], timed_store)
    assert estimate_line(mixed) == (
        "estimate: about 2 s for 1 of 3 runs (median times of 3 stored runs: same config, else same scale); no "
        "estimate for 2 runs: no finished run of cli-toy at their scale in the store")
    empty = estimate_seconds(toy, slow, Store(tmp_path / "empty.db"))
    assert estimate_line(empty) == "no estimate: no finished run of cli-toy in the store"
    assert estimate_line(estimate_seconds(toy, [], timed_store)) == ""  # nothing to run: no line


def test_bad_arguments_are_refused_by_name(toy, toy_scaled, timed_store):
    specs = plan(toy, quick=True)
    for jobs in (0, 1.5, True):
        with pytest.raises(ValueError, match="jobs must be an int >= 1"):
            estimate_seconds(toy, specs, timed_store, jobs=jobs)
    with pytest.raises(ValueError, match="estimate_seconds for 'cli-toy' got runs of 'cli-toy-scaled'"):
        estimate_seconds(toy, plan(toy_scaled), timed_store)


def test_the_dry_run_prints_the_estimate_of_the_runs_to_run(toy, timed_store):
    runner = CliRunner()
    common = ["reproduce", "cli-toy", "--quick", "--seeds", "0-2", "--store", str(timed_store.path), "--dry-run"]
    local = runner.invoke(app, common, catch_exceptions=False)
    assert local.exit_code == 0, local.output
    *_, counts, line = local.output.splitlines()
    assert counts.startswith("6 runs planned: 3 done, 3 to run ")
    # the three n=100 runs to run take the quick scale's median, 10 s; n=10's seeds 0-2 are done
    assert line == ("estimate: about 30 s for 3 runs (median times of 5 stored runs: same config, else same scale)")
    parallel = runner.invoke(app, [*common, "--executor", "process", "--jobs", "2"], catch_exceptions=False)
    assert parallel.output.splitlines()[-1] == (
        "estimate: about 30 s for 3 runs (median times of 5 stored runs: same config, else same scale; 2 jobs: at "
        "least 15 s)")
