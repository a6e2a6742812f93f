"""One process at a time per run: an exclusive lock that a second process is refused, with a clear error.

A run whose checkpoint is several files (SAC's policy, replay buffer and curve) would mix two processes' files if
both trained it at once (two overlapping sweeps, a sweep started twice), and then resume from the mixture; a
one-file checkpoint (:class:`symkit.train.Trainer`) would be written by both in turn, each resuming the other's
epochs as its own. :func:`exclusive` holds an advisory lock (``fcntl.flock``) on ``<folder>/.lock`` while the run
touches its folder, :func:`exclusive_file` on a lock file of its own (the Trainer's ``<checkpoint>.lock``): released
when the run ends or its process dies (a killed sweep leaves no stale lock), re-entrant within a process (the
experiment and :func:`symkit.rl.sac.train_sac` both take it). The lock file keeps the holder's process id for the
message, and :func:`holder` reads it back for a run that is training now (``symkit runs``). Where ``fcntl`` is
missing (Windows) runs are not guarded.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["RunInUse", "exclusive", "exclusive_file", "holder"]

_held: dict[Path, int] = {}  # lock files this process holds, with how many nested holds


#: how long a lock is tried for before it counts as held: :func:`holder` holds one for an instant
PROBE_GRACE = 0.5


def _lock_now_or_soon(fd: int) -> None:
    """``flock(fd, LOCK_EX)``, tried for up to :data:`PROBE_GRACE` seconds (a :func:`holder` probe in that instant is
    not another run); ``BlockingIOError`` if it stays held."""
    deadline = time.monotonic() + PROBE_GRACE
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _pid_in(fd: int) -> str:
    """The process id a holder wrote into the open lock file ``fd`` (empty if none was written yet)."""
    return os.read(fd, 32).decode(errors="replace").strip()


def holder(lock: str | os.PathLike) -> int | None:
    """The process id of the process that holds the lock file ``lock`` now (as it wrote there; -1 when it wrote
    nothing readable), or None when none does (or there is no such file). It probes with a shared lock held for an
    instant, which :func:`exclusive_file` waits out. Where ``fcntl`` is missing, always None."""
    path = Path(lock).resolve()
    if path in _held:
        return os.getpid()
    if fcntl is None:  # pragma: no cover - Windows
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = _pid_in(fd)
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


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
    """Hold the lock file ``lock`` (created with its folder if missing) for this process, or raise
    :class:`RunInUse` naming ``what``, ``held`` (what the lock guards; default the lock file) and the holder's
    process id. ``None`` holds nothing."""
    if lock is None:
        yield
        return
    path = Path(lock).resolve()
    if path in _held or fcntl is None:
        _held[path] = _held.get(path, 0) + 1
        try:
            yield
        finally:
            _held[path] -= 1
            if not _held[path]:
                del _held[path]
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _lock_now_or_soon(fd)
    except BlockingIOError:
        pid = _pid_in(fd) or "unknown"
        os.close(fd)
        guarded = Path(held).resolve() if held is not None else path
        raise RunInUse(f"{what}: {guarded} is in use by another process (pid {pid}); two processes training one "
                       "run would mix their checkpoints. Wait for it to finish (or stop it: the run resumes from its "
                       "last checkpoint), then start this again") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        _held[path] = 1
        yield
    finally:
        _held.pop(path, None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
