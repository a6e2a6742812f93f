"""One process at a time per run: an exclusive lock that a second process is refused, with a clear error.

A run whose checkpoint is several files (SAC's policy, replay buffer and curve) would mix two processes' files if
both trained it at once (two overlapping sweeps, a sweep started twice), and then resume from the mixture; a
one-file checkpoint (:class:`symkit.train.Trainer`) would be written by both in turn, each resuming the other's
epochs as its own. :func:`exclusive` holds ``<folder>/.lock`` while the run touches its folder, :func:`exclusive_file`
a lock file of its own (the Trainer's ``<checkpoint>.lock``): released when the run ends or its process dies (a
killed sweep leaves no stale lock), re-entrant within a process (the experiment and :func:`symkit.rl.sac.train_sac`
both take it).

The lock is the operating system's, through ``filelock.FileLock``: ``flock`` on Unix, filelock's msvcrt/LockFileEx
lock on Windows, so runs are guarded on both (never filelock's soft lock, which a killed process leaves behind; where
only that would be available, runs are not guarded). Files, for a lock file ``<lock>``:

- ``<lock>``: the file the lock is taken on (filelock removes it on release on Windows; it stays on Unix);
- ``<lock>.pid``: the holder's process id as decimal text, written once the lock is taken and removed before it is
  let go, for the :class:`RunInUse` message and for :func:`holder` (``symkit runs``). It is a file of its own because
  filelock may truncate the lock file on every attempt to take it (3.x opens it with ``O_TRUNC``), which would erase
  the pid at each probe. A killed holder leaves its ``.pid`` behind: it is read only while the lock is held (so a
  stale one never names a holder), overwritten by the next holder and removed by the next probe that finds the lock
  free.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import time
from collections.abc import Iterator
from pathlib import Path

import filelock

__all__ = ["RunInUse", "exclusive", "exclusive_file", "holder"]

_held: dict[Path, int] = {}  # lock files this process holds, with how many nested holds


#: how long a lock is tried for before it counts as held: :func:`holder` holds one for an instant
PROBE_GRACE = 0.5

_POLL = 0.05  # seconds between attempts within PROBE_GRACE

#: whether filelock's FileLock is an operating-system lock here (not its soft fallback)
_GUARDED = filelock.FileLock in (filelock.UnixFileLock, filelock.WindowsFileLock)
# filelock 4 turns a Unix lock into a soft one where the filesystem lacks flock; refuse that (an OSError instead)
_NATIVE_ONLY = ({"fallback_to_soft": False}
                if "fallback_to_soft" in inspect.signature(filelock.FileLock.__init__).parameters else {})


def _os_lock(path: Path) -> filelock.BaseFileLock:
    """An operating-system lock on ``path``, held by the process (any thread may let it go)."""
    return filelock.FileLock(path, mode=0o644, thread_local=False, **_NATIVE_ONLY)


def _pid_file(lock: Path) -> Path:
    """``<lock>.pid``: where the holder of ``lock`` writes its process id."""
    return lock.with_name(lock.name + ".pid")


def _pid_written(lock: Path) -> str:
    """The text of ``<lock>.pid`` (empty when it is missing or unreadable)."""
    try:
        return _pid_file(lock).read_text(errors="replace").strip()
    except OSError:
        return ""


def holder(lock: str | os.PathLike) -> int | None:
    """The process id of the process that holds the lock file ``lock`` now (from ``<lock>.pid``; -1 when it wrote
    nothing readable there), or None when none does (or there is no such file, or it cannot be opened for locking).
    It probes by taking the lock for an instant, which :func:`exclusive_file` waits out (:data:`PROBE_GRACE`); a
    held lock whose ``.pid`` is not written yet is probed again until it is, the lock is let go or the grace ends.
    Where runs are not guarded, None unless this process holds it."""
    path = Path(lock).resolve()
    if path in _held:
        return os.getpid()
    if not _GUARDED or not path.is_file():
        return None
    probe = _os_lock(path)
    deadline = time.monotonic() + PROBE_GRACE
    while True:
        try:
            probe.acquire(timeout=0)
        except filelock.Timeout:
            text = _pid_written(path)
            if text.isdigit():
                return int(text)
            if text or time.monotonic() >= deadline:
                return -1
            time.sleep(_POLL)
            continue
        except OSError:  # e.g. no write access to another account's lock file: cannot tell
            return None
        try:
            with contextlib.suppress(OSError):  # free: a .pid left here is a killed holder's
                _pid_file(path).unlink(missing_ok=True)
        finally:
            probe.release()
        return None


class RunInUse(RuntimeError):
    """Another process holds the run."""


@contextlib.contextmanager
def exclusive(folder: str | os.PathLike | None, what: str) -> Iterator[None]:
    """Hold ``folder`` (created if missing) for this process, or raise :class:`RunInUse` naming ``what``, the folder
    and the holder's process id. ``None`` (a run without checkpoints) holds nothing."""
    path = None if folder is None else Path(folder).resolve()
    with exclusive_file(None if path is None else path / ".lock", what, held=path):
        yield


@contextlib.contextmanager
def exclusive_file(lock: str | os.PathLike | None, what: str,
                   held: str | os.PathLike | None = None) -> Iterator[None]:
    """Hold the lock file ``lock`` (created with its folder if missing) for this process, writing ``<lock>.pid``, or
    raise :class:`RunInUse` naming ``what``, ``held`` (what the lock guards; default the lock file) and the holder's
    process id, once the lock stayed held for :data:`PROBE_GRACE` seconds. ``None`` holds nothing."""
    if lock is None:
        yield
        return
    path = Path(lock).resolve()
    if path in _held or not _GUARDED:
        _held[path] = _held.get(path, 0) + 1
        try:
            yield
        finally:
            _held[path] -= 1
            if not _held[path]:
                del _held[path]
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    os_lock = _os_lock(path)
    try:
        os_lock.acquire(timeout=PROBE_GRACE, poll_interval=_POLL)
    except filelock.Timeout:
        pid = _pid_written(path) or "unknown"
        guarded = Path(held).resolve() if held is not None else path
        raise RunInUse(f"{what}: {guarded} is in use by another process (pid {pid}); two processes training one "
                       "run would mix their checkpoints. Wait for it to finish (or stop it: the run resumes from its "
                       "last checkpoint), then start this again") from None
    try:
        _pid_file(path).write_text(str(os.getpid()))
        _held[path] = 1
        yield
    finally:
        _held.pop(path, None)
        try:
            with contextlib.suppress(OSError):  # one left behind is stale-safe (read only while the lock is held)
                _pid_file(path).unlink(missing_ok=True)
        finally:
            os_lock.release()
