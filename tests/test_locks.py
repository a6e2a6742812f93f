"""A run folder (or a Trainer's checkpoint) is held by one process at a time (symkit._locks): a second process is
refused with the holder's pid (kept in ``<lock>.pid``), the same process may hold it again (nested), and a killed
holder leaves no stale lock (and its stale ``.pid`` names no holder)."""

import multiprocessing
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch

from symkit import _locks
from symkit._locks import RunInUse, exclusive, exclusive_file, holder
from symkit.train import Trainer


def _hold(folder, ready, release, lock_file=False):
    with (exclusive_file if lock_file else exclusive)(folder, "holder"):
        ready.set()
        release.wait(30)


def _holder(folder, lock_file=False):
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(folder), ready, release, lock_file))
    proc.start()
    assert ready.wait(60), "the holder did not take the lock"
    return proc, release


def test_a_second_process_is_refused_and_told_who_holds_the_folder(tmp_path):
    folder = tmp_path / "run"
    proc, release = _holder(folder)
    try:
        with pytest.raises(RunInUse, match=rf"rl-sac: .*run is in use by another process \(pid {proc.pid}\)"):
            with exclusive(folder, "rl-sac"):
                pass
    finally:
        release.set()
        proc.join(30)
    with exclusive(folder, "rl-sac"):  # released: free again
        with exclusive(folder, "train_sac"):  # nested in one process
            assert (folder / ".lock.pid").read_text() == str(os.getpid())
        assert (folder / ".lock.pid").read_text() == str(os.getpid())  # still held by the outer hold
    assert not (folder / ".lock.pid").exists()  # removed on release
    with exclusive(None, "a run without checkpoints"):  # nothing to hold
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    folder = tmp_path / "run"
    proc, _ = _holder(folder)
    proc.kill()  # SIGKILL on Unix
    proc.join(30)
    with exclusive(folder, "rl-sac"):
        assert (folder / ".lock.pid").read_text() == str(os.getpid())


def test_a_trainer_is_refused_a_checkpoint_another_process_trains(tmp_path):
    checkpoint = tmp_path / "runs" / "model.pt"
    x = torch.linspace(-1, 1, 16, dtype=torch.float64)[:, None]

    def fit():
        model = torch.nn.Linear(1, 1, dtype=torch.float64)
        return Trainer(model, torch.nn.functional.mse_loss, epochs=2, checkpoint=checkpoint).fit((x, 2 * x))

    proc, release = _holder(tmp_path / "runs" / "model.pt.lock", lock_file=True)
    try:
        with pytest.raises(RunInUse, match=rf"Trainer: .*model\.pt is in use by another process \(pid {proc.pid}\)"):
            fit()
        assert not checkpoint.exists()  # refused before it trained or wrote anything
    finally:
        release.set()
        proc.join(30)
    assert len(fit().history) == 2 and checkpoint.exists()  # released: trains
    assert not (tmp_path / "runs" / "model.pt.lock.pid").exists()  # and let go


def test_holder_names_the_process_that_holds_a_folder_and_none_when_free(tmp_path):
    folder = tmp_path / "run"
    assert holder(folder / ".lock") is None  # no lock file yet
    with exclusive(folder, "rl-sac"):
        assert holder(folder / ".lock") == os.getpid()
    assert holder(folder / ".lock") is None  # released
    proc, release = _holder(folder)
    try:
        assert holder(folder / ".lock") == proc.pid
    finally:
        release.set()
        proc.join(30)
    assert holder(folder / ".lock") is None
    with exclusive(folder, "rl-sac"):  # a probe's instant does not stand in a run's way afterwards
        pass


def _probe_for(lock, seconds):
    """Hold a shared lock on ``lock`` for ``seconds`` from another open file, as a slow :func:`holder` probe would."""
    fcntl = pytest.importorskip("fcntl")
    fd = os.open(lock, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    timer = threading.Timer(seconds, lambda: (fcntl.flock(fd, fcntl.LOCK_UN), os.close(fd)))
    timer.start()
    return timer


def test_a_run_waits_out_a_probe_but_not_a_holder(tmp_path):
    folder = tmp_path / "run"
    with exclusive(folder, "rl-sac"):
        pass
    timer = _probe_for(folder / ".lock", _locks.PROBE_GRACE / 5)
    with exclusive(folder, "rl-sac"):  # taken once the probe let go, within the grace
        assert (folder / ".lock.pid").read_text() == str(os.getpid())
    timer.join()
    timer = _probe_for(folder / ".lock", 3 * _locks.PROBE_GRACE)
    try:
        with pytest.raises(RunInUse, match="in use by another process"):
            with exclusive(folder, "rl-sac"):
                pass
    finally:
        timer.join()


def test_a_stale_pid_file_without_a_holder_names_no_one(tmp_path):
    """``<lock>.pid`` is trusted only while the lock is held: one a killed holder left (here written by hand, with a
    pid that no process holds the lock with) gives None, and the probe that found the lock free removes it."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / ".lock.pid").write_text("4194304")
    assert holder(folder / ".lock") is None  # no lock file at all
    assert (folder / ".lock.pid").exists()  # nothing probed, nothing removed
    (folder / ".lock").write_text("")
    assert holder(folder / ".lock") is None  # a lock file that no process holds
    assert not (folder / ".lock.pid").exists()
    (folder / ".lock.pid").write_text("4194304")
    with exclusive(folder, "rl-sac"):  # a run takes it, overwriting the stale pid with its own
        assert (folder / ".lock.pid").read_text() == str(os.getpid())
        assert holder(folder / ".lock") == os.getpid()


_HOLD_IN_A_CHILD = """
import sys, time
from symkit._locks import exclusive
with exclusive(sys.argv[1], "child"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_child_process_holding_a_run_is_refused_until_it_is_killed(tmp_path):
    """A plain ``python`` child holding the folder: the parent is refused with the child's pid (probes between do
    not erase it); SIGKILLed, the child leaves its ``.pid`` behind but no lock: the folder is free, no holder named."""
    folder = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-c", _HOLD_IN_A_CHILD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "held\n"
        assert holder(folder / ".lock") == child.pid
        assert holder(folder / ".lock") == child.pid  # a probe does not erase the pid it reads
        with pytest.raises(RunInUse, match=rf"rl-sac: .*run is in use by another process \(pid {child.pid}\)"):
            with exclusive(folder, "rl-sac"):
                pass
    finally:
        child.kill()  # SIGKILL on Unix: no cleanup runs in the child
        returncode = child.wait(30)
        child.stdout.close()
    assert returncode == (-signal.SIGKILL if os.name == "posix" else 1)
    assert (folder / ".lock.pid").read_text() == str(child.pid)  # left stale by the kill
    assert holder(folder / ".lock") is None
    with exclusive(folder, "rl-sac"):  # free again
        assert (folder / ".lock.pid").read_text() == str(os.getpid())
