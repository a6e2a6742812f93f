"""Real ``symkit reproduce`` processes: killed midway and resumed, interrupted with Ctrl-C, run side by side."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from symkit_cli_helpers import cli_env, default_sigint, executions, run_symkit, symkit_cmd

from symkit.lab.store import Store

# 2 sizes x 8 seeds; each run sleeps so that the sweep is still going when the test stops it
SWEEP = ["reproduce", "cli-toy", "--quick", "--seeds", "0-7", "--set", "sleep=0.2"]
ALL_RUNS = {(n, s) for n in (10, 100) for s in range(8)}


def _recorded(db: Path) -> set[tuple[int, int]]:
    if not db.exists():
        return set()
    with Store(db) as store:
        return {(r.config["n"], r.seed) for r in store.runs("cli-toy", status="ok")}


def _wait_for_runs(db: Path, proc: subprocess.Popen, count: int, timeout: float = 180) -> set[tuple[int, int]]:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"the sweep ended before it could be stopped: {proc.communicate()}"
        done = _recorded(db)
        if len(done) >= count:
            return done
        assert time.monotonic() < deadline, "the sweep recorded nothing in time"
        time.sleep(0.05)


def _assert_each_run_once(db: Path) -> None:
    with Store(db) as store:
        rows = store.runs("cli-toy")
    keys = [(r.config["n"], r.seed) for r in rows]
    assert len(keys) == len(set(keys)) == len(ALL_RUNS)
    assert set(keys) == ALL_RUNS and all(r.status == "ok" for r in rows)


def test_a_sweep_killed_by_a_signal_resumes_and_runs_only_what_is_missing(tmp_path):
    db, log = tmp_path / "s.db", tmp_path / "toy.log"
    env = cli_env(SYMKIT_TOY_LOG=str(log))
    proc = subprocess.Popen(symkit_cmd(*SWEEP, "--store", str(db)), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_runs(db, proc, 3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before = _recorded(db)
    assert 3 <= len(before) < len(ALL_RUNS)
    executed_before = len(executions(log))

    resumed = run_symkit(*SWEEP, "--store", str(db), SYMKIT_TOY_LOG=str(log))
    assert resumed.returncode == 0, resumed.stderr
    missing = ALL_RUNS - before
    assert f"{len(before)} already stored, ran {len(missing)} (0 failed)" in resumed.stdout
    assert sorted(executions(log)[executed_before:]) == sorted(missing)  # each missing run ran once, no other
    _assert_each_run_once(db)


def test_ctrl_c_stops_the_process_pool_and_the_sweep_resumes(tmp_path):
    db = tmp_path / "s.db"
    proc = subprocess.Popen(symkit_cmd(*SWEEP, "--executor", "process", "--jobs", "2", "--store", str(db)),
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    try:
        _wait_for_runs(db, proc, 2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Interrupted: the finished runs are stored" in err and "Traceback" not in err
    resumed = run_symkit(*SWEEP, "--executor", "process", "--store", str(db))
    assert resumed.returncode == 0, resumed.stderr
    _assert_each_run_once(db)


@contextmanager
def _killed_if_failing(proc: subprocess.Popen) -> Iterator[None]:
    """Kill the sweep if the block fails, so that no test leaves one running."""
    try:
        yield
    except BaseException:
        proc.kill()
        raise


def _stop(proc: subprocess.Popen, sig: int) -> str:
    """Send ``sig`` to a running sweep, wait up to 60 s for it to end (killing it if not), return its stderr."""
    try:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return err


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an exited child nobody has reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no /proc (not Linux): it exists
        return True


@pytest.mark.parametrize("saving", [False, True], ids=["runs-that-do-not-checkpoint", "runs-that-save-on-stop"])
def test_sigterm_stops_the_process_pool_without_waiting_for_the_runs_in_flight(tmp_path, saving):
    """A scheduler's SIGTERM reaches the sweep process only, not its workers: the sweep stops them rather than
    waiting for the runs they are in (each would take 600 s here). Runs that checkpoint (rl-sac) defer that SIGTERM
    to their next step and save before their worker ends: each run in flight saves. No worker outlives the sweep,
    nothing is recorded."""
    db, log, saved = tmp_path / "s.db", tmp_path / "toy.log", tmp_path / "saved.log"
    proc = subprocess.Popen(symkit_cmd("reproduce", "cli-toy", "--quick", "--seeds", "0", "--set", "sleep=600",
                                       "--executor", "process", "--jobs", "2", "--store", str(db)),
                            env=cli_env(SYMKIT_TOY_LOG=str(log), **({"SYMKIT_TOY_SAVE": str(saved)} if saving else {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with _killed_if_failing(proc):
        deadline = time.monotonic() + 120
        while len(executions(log)) < 2:  # both workers are in a run
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
    runs = [line.split() for line in log.read_text().splitlines()]  # n, seed, worker pid
    err = _stop(proc, signal.SIGTERM)
    assert proc.returncode == 130 and "Interrupted" in err and "Traceback" not in err
    assert "leaked" not in err, err  # the workers' progress bars left no semaphore for the resource tracker
    if saving:
        assert sorted(saved.read_text().splitlines()) == sorted(f"saved {seed} {pid}" for _, seed, pid in runs)
    else:
        assert not saved.exists()
    time.sleep(1)
    alive = [pid for _, _, pid in runs if _running(int(pid))]
    assert not alive, f"workers {alive} outlived the sweep"
    assert _recorded(db) == set()


def test_two_sweeps_on_one_store_at_once_record_every_run_once(tmp_path):
    db = tmp_path / "s.db"
    procs = [
        subprocess.Popen(symkit_cmd(*SWEEP, "--store", str(db)), env=cli_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    _assert_each_run_once(db)


def test_sigterm_stops_the_sweep_cleanly(tmp_path):
    db = tmp_path / "s.db"
    proc = subprocess.Popen(symkit_cmd(*SWEEP, "--store", str(db)), env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with _killed_if_failing(proc):
        _wait_for_runs(db, proc, 1)
    err = _stop(proc, signal.SIGTERM)
    assert proc.returncode == 130 and "Interrupted" in err and "Traceback" not in err
    assert 1 <= len(_recorded(db)) < len(ALL_RUNS)


def test_a_bad_setting_in_a_real_process_is_one_clear_line(tmp_path):
    bad = run_symkit("reproduce", "cli-toy", "--set", "scale=big", "--store", str(tmp_path / "s.db"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == (
        "Error: --set 'scale=big': bad value 'big' for setting 'scale' of experiment 'cli-toy': expected float "
        "(Input should be a valid number, unable to parse string as a number)"
    )


def test_an_unknown_name_in_a_real_process_is_one_clear_line(tmp_path):
    unknown = run_symkit("reproduce", "cli-tyo", "--store", str(tmp_path / "s.db"))
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("Error: no experiment named 'cli-tyo'; valid names:")
    assert "cli-toy" in unknown.stderr and "Traceback" not in unknown.stderr
