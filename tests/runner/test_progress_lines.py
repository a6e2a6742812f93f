"""A sweep without a terminal writes a progress line at a steady interval while its runs go."""

from __future__ import annotations

import io
import re
import threading
import time

import pytest
from typer.testing import CliRunner

from symkit.lab.cli.main import app
from symkit.lab.runner.sweep import plan, progress_line, run_sweep
from symkit.lab.store import Store

LINE = re.compile(r"progress: (\d+)/(\d+) runs done, (\d+) failed, (\d+) running, \d+ s elapsed(, about .+ left)?")


@pytest.fixture
def toy():
    """The command-line tests' toy experiment (tests/cli/symkit_cli_toy.py), registered for the test only."""
    import symkit_cli_toy

    from symkit.lab.experiments import registry

    registry._REGISTRY[symkit_cli_toy.NAME] = symkit_cli_toy.EXPERIMENT
    yield symkit_cli_toy.EXPERIMENT
    registry._REGISTRY.pop(symkit_cli_toy.NAME, None)


class _Log(io.StringIO):
    """A stderr that is not a terminal and whose lines can be read while it is written to."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            return super().write(text)

    def lines(self) -> list[str]:
        with self.lock:
            return [line for line in self.getvalue().splitlines() if line.startswith("progress:")]


def _capture(monkeypatch) -> _Log:
    """Send stderr to a :class:`_Log` for the rest of the test (pytest sets its own stderr before each test phase,
    so this is called in the test itself) and allow progress output, which the suite turns off."""
    monkeypatch.setenv("SYMKIT_PROGRESS", "1")
    stream = _Log()
    monkeypatch.setattr("sys.stderr", stream)
    return stream


def _parsed(lines: list[str]) -> list[tuple[int, int, int, int, bool]]:
    out = []
    for line in lines:
        match = LINE.fullmatch(line)
        assert match, line
        done, total, failed, running = map(int, match.groups()[:4])
        out.append((done, total, failed, running, match.group(5) is not None))
    return out


def test_a_progress_line_counts_runs_and_the_time_left_from_the_finished_runs_mean():
    assert progress_line(3, 12, 1, 2, 41.0, 30.0, parallel=2) == (
        "progress: 3/12 runs done, 1 failed, 2 running, 41 s elapsed, about 2 min left")  # 9 runs x 30 s / 2
    assert progress_line(11, 12, 0, 1, 700.0, 60.0, parallel=4) == (
        "progress: 11/12 runs done, 0 failed, 1 running, 12 min elapsed, about 60 s left")  # 1 run left: 1 job
    assert progress_line(0, 5, 0, 1, 10.0, None) == "progress: 0/5 runs done, 0 failed, 1 running, 10 s elapsed"
    assert progress_line(5, 5, 1, 0, 10.0, 2.0) == "progress: 5/5 runs done, 1 failed, 0 running, 10 s elapsed"


def test_lines_appear_while_a_local_sweep_runs_and_their_counts_only_grow(toy, tmp_path, monkeypatch):
    log = _capture(monkeypatch)
    monkeypatch.setenv("SYMKIT_TOY_FAIL_SEEDS", "1")
    specs = plan(toy, quick=True, seeds=[0, 1, 2, 3], settings={"n": [10], "sleep": [0.3]})
    seen: dict[int, list[str]] = {}  # the lines written before each finished run was reported

    def snapshot(outcome) -> None:
        seen[outcome.spec.seed] = log.lines()

    result = run_sweep(toy, specs, Store(tmp_path / "s.db"), on_finished=snapshot, progress_interval=0.05)
    assert (result.ran, result.failed) == (4, 1) and sorted(seen) == [0, 2, 3]
    assert len(seen[3]) >= 3, seen[3]  # lines came before the sweep ended
    rows = _parsed(log.lines())
    assert all(total == 4 and running in (0, 1) for _, total, _, running, _ in rows)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows) and [r[2] for r in rows] == sorted(r[2] for r in rows)
    assert any(running == 1 for *_, running, _ in rows)
    assert all(has_left == (done >= 1) for done, _, _, _, has_left in rows)  # a time left once a run has finished
    for position, seed in enumerate((0, 2, 3)):  # before a run is reported, at most the runs before it are done
        assert all(row[0] <= [0, 2, 3][position] for row in _parsed(seen[seed]))
    assert all(failed == (1 if done >= 2 else 0) for done, _, failed, _, _ in rows)  # seed 1, the second, failed
    count = len(log.lines())
    time.sleep(0.3)
    assert len(log.lines()) == count  # none after the sweep


def test_a_process_sweep_counts_the_runs_in_its_workers(toy, tmp_path, monkeypatch):
    log = _capture(monkeypatch)
    specs = plan(toy, quick=True, seeds=[0, 1], settings={"sleep": [0.5]})  # 4 runs on 2 workers
    result = run_sweep(toy, specs, Store(tmp_path / "s.db"), executor="process", jobs=2, progress_interval=0.1)
    assert (result.ran, result.failed) == (4, 0)
    rows = _parsed(log.lines())
    assert len(rows) >= 3, rows
    assert all(total == 4 and running <= 2 and done + running <= 4 for done, total, _, running, _ in rows)
    assert any(running == 2 for *_, running, _ in rows)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)


def test_no_lines_on_request_or_with_a_bar(toy, tmp_path, monkeypatch):
    log = _capture(monkeypatch)
    specs = plan(toy, quick=True, seeds=[0], settings={"n": [10], "sleep": [0.2]})
    for i, options in enumerate(({"progress": False}, {"progress": True}, {"progress_interval": None},
                                 {"progress_interval": 0})):
        run_sweep(toy, specs, Store(tmp_path / f"{i}.db"), **{"progress_interval": 0.02, **options})
    monkeypatch.setenv("SYMKIT_PROGRESS", "0")
    run_sweep(toy, specs, Store(tmp_path / "quiet.db"), progress_interval=0.02)
    assert log.lines() == []
    monkeypatch.setenv("SYMKIT_PROGRESS", "1")  # the same sweep with lines, to show that the above could have any
    run_sweep(toy, specs, Store(tmp_path / "shown.db"), progress_interval=0.02)
    assert log.lines()


def test_a_bad_interval_is_refused(toy, tmp_path):
    specs = plan(toy, quick=True, seeds=[0])
    for bad, kind in ((-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError), ("30", TypeError),
                      (True, TypeError)):
        with pytest.raises(kind, match="progress_interval must be"):
            run_sweep(toy, specs, Store(tmp_path / "s.db"), progress_interval=bad)


def test_the_command_takes_its_interval_from_the_environment(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMKIT_PROGRESS", "1")
    args = ["reproduce", "cli-toy", "--quick", "--seeds", "0", "--set", "sleep=0.3", "--set", "n=10"]
    runner = CliRunner()
    shown = runner.invoke(app, [*args, "--store", str(tmp_path / "a.db")], env={"SYMKIT_PROGRESS_INTERVAL": "0.05"})
    assert shown.exit_code == 0, shown.output
    assert _parsed([line for line in shown.output.splitlines() if line.startswith("progress:")])
    off = runner.invoke(app, [*args, "--store", str(tmp_path / "b.db")], env={"SYMKIT_PROGRESS_INTERVAL": "0"})
    assert off.exit_code == 0 and "progress:" not in off.output, off.output
    bad = runner.invoke(app, [*args, "--store", str(tmp_path / "c.db")], env={"SYMKIT_PROGRESS_INTERVAL": "soon"})
    assert bad.exit_code == 2
    assert "SYMKIT_PROGRESS_INTERVAL 'soon': expected a duration such as 90s" in bad.output
