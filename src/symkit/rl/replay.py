"""A SAC checkpoint's replay buffer, saved as the transitions it holds rather than the space it reserved.

stable-baselines3's ``save_replay_buffer`` pickles the whole preallocated buffer: every one of ``buffer_size`` rows
(10^6, the thesis's) however few are filled, 308 MB for HalfCheetah at any step. :func:`save_replay` writes the
filled rows only (``replay.npz``: 31 MB after 100,000 HalfCheetah steps), with the write position, whether the
buffer has wrapped, and its size; :func:`load_replay` puts them back into a buffer of the same size and spaces,
reading arrays only (``allow_pickle=False``). Checkpoints written by earlier symkit versions hold stable-baselines3's
pickle (``replay.pkl``, found by :func:`replay_file`): :func:`symkit.rl.sac.train_sac` refuses it, and
:func:`symkit.rl.sac.convert_legacy_checkpoint` converts a folder the user trusts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["REPLAY_FILE", "LEGACY_REPLAY_FILE", "replay_file", "save_replay", "load_replay", "buffer_steps",
           "replay_steps"]

REPLAY_FILE = "replay.npz"
LEGACY_REPLAY_FILE = "replay.pkl"  # stable-baselines3's pickle of the whole buffer, as symkit wrote it before
#: the arrays of stable-baselines3's ReplayBuffer, one row per stored step (``next_observations`` is None when the
#: buffer shares it with ``observations``: optimize_memory_usage)
FIELDS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


def replay_file(folder: str | os.PathLike[str]) -> Path | None:
    """The replay buffer file of a checkpoint folder: ``replay.npz``, else an earlier version's ``replay.pkl``, else
    None. Where both are there (a run resumed from an old checkpoint killed before it removed the old file), the
    ``.npz`` is the newer."""
    folder = Path(folder)
    for name in (REPLAY_FILE, LEGACY_REPLAY_FILE):
        if (folder / name).exists():
            return folder / name
    return None


def save_replay(buffer: Any, path: str | os.PathLike[str]) -> None:
    """Write the filled rows of a stable-baselines3 ``ReplayBuffer`` to ``path`` (an uncompressed ``.npz``: float
    transitions do not compress)."""
    n = buffer.size()  # the filled rows: all of them once the buffer has wrapped, else up to its position
    arrays = {name: getattr(buffer, name)[:n] for name in FIELDS if getattr(buffer, name, None) is not None}
    with open(path, "wb") as f:
        np.savez(f, pos=np.int64(buffer.pos), full=np.bool_(buffer.full), buffer_size=np.int64(buffer.buffer_size),
                 **arrays)


def _open(path: Path) -> Any:
    """``np.load`` of a replay file, arrays only: a pickle (not an ``.npz``) raises ``ValueError`` naming the file."""
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:  # a pickle, not an .npz
        raise ValueError(f"{path}: not a replay buffer of arrays ({exc})") from None


def _array(data: Any, name: str, path: Path) -> np.ndarray:
    """``data[name]`` of an open ``.npz``; an object array (pickled objects, which ``allow_pickle=False`` refuses to
    load) raises ``ValueError`` naming the file and the array."""
    try:
        return data[name]
    except ValueError as exc:
        raise ValueError(f"{path}: {name} holds pickled objects, not numbers; symkit loads arrays only "
                         f"({exc})") from None


def load_replay(buffer: Any, path: str | os.PathLike[str]) -> None:
    """Fill ``buffer`` (a new ``ReplayBuffer`` of the run's size and spaces) from a file of :func:`save_replay`. A file
    for another buffer size or other spaces raises ``ValueError`` naming what differs. Arrays only
    (``allow_pickle=False``): a file holding pickled objects is refused, unread."""
    path = Path(path)
    with _open(path) as data:
        size, full, pos = (_array(data, name, path) for name in ("buffer_size", "full", "pos"))
        if int(size) != buffer.buffer_size:
            raise ValueError(f"{path} holds a replay buffer of {int(size)} rows; this run's has {buffer.buffer_size}")
        n = int(size) if bool(full) else int(pos)
        for name in FIELDS:
            target = getattr(buffer, name, None)
            if target is None:
                continue
            rows = _array(data, name, path)
            if rows.shape != (n, *target.shape[1:]):
                raise ValueError(f"{path}: {name} has shape {rows.shape}, expected {(n, *target.shape[1:])} for this "
                                 "run's spaces")
            target[:n] = rows
        buffer.pos, buffer.full = int(pos), bool(full)


def _in_time_order(arrays: dict[str, np.ndarray], pos: int, full: bool) -> dict[str, np.ndarray]:
    """The rows of a ring buffer from the oldest to the newest (a buffer that has wrapped starts at ``pos``), with
    the environment axis of a single-environment buffer dropped."""
    out = {}
    for name, rows in arrays.items():
        if rows.ndim < 2 or rows.shape[1] != 1:
            raise ValueError(f"replay buffer: {name} has shape {rows.shape}; symkit reads buffers of one environment "
                             "(rows, 1, ...)")
        out[name] = (np.roll(rows, -pos, axis=0) if full else rows)[:, 0]
    return out


def buffer_steps(buffer: Any) -> dict[str, np.ndarray]:
    """The transitions a stable-baselines3 ``ReplayBuffer`` of one environment holds, oldest first: ``observations``,
    ``next_observations``, ``actions`` (as the buffer stores them: scaled to [-1, 1] by SAC), ``dones``, each one row
    per step without the environment axis."""
    if getattr(buffer, "next_observations", None) is None:
        raise ValueError("replay buffer: no next_observations (optimize_memory_usage); symkit needs them to end "
                         "episodes where they ended")
    n = buffer.size()
    arrays = {name: getattr(buffer, name)[:n] for name in ("observations", "next_observations", "actions", "dones")}
    return _in_time_order(arrays, int(buffer.pos), bool(buffer.full))


def replay_steps(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """:func:`buffer_steps` of a file of :func:`save_replay` (arrays only: a file holding pickled objects is
    refused, unread)."""
    path = Path(path)
    with _open(path) as data:
        missing = [name for name in ("observations", "next_observations", "actions", "dones", "pos", "full")
                   if name not in data.files]
        if missing:
            raise ValueError(f"{path}: not a replay buffer of symkit's format (no {', '.join(missing)})")
        arrays = {name: _array(data, name, path) for name in ("observations", "next_observations", "actions",
                                                               "dones")}
        pos, full = int(_array(data, "pos", path)), bool(_array(data, "full", path))
    return _in_time_order(arrays, pos, full)
