"""On-disk cache of solved bases, safe under concurrent writers and self-healing on corrupted entries.

Location: ``$SYMKIT_CACHE_DIR`` if set, else the user cache directory (platformdirs) / "symkit".
``SYMKIT_CACHE=0`` disables it. Entries are .npy files written to a temporary file in the same directory and moved
into place with `os.replace`, which is atomic on POSIX and Windows, so two processes writing the same key both
leave a complete file. An unreadable entry is deleted and recomputed.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["cache_dir", "cache_enabled", "cache_get", "cache_put", "cache_key"]

#: bump when the solvers change in a way that changes stored bases
CACHE_VERSION = "1"


def cache_enabled() -> bool:
    return os.environ.get("SYMKIT_CACHE", "1") != "0"


def cache_dir() -> Path:
    env = os.environ.get("SYMKIT_CACHE_DIR")
    if env:
        return Path(env)
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("symkit")) / "bases"
    except Exception:  # pragma: no cover - platformdirs is a dependency
        return Path.home() / ".cache" / "symkit" / "bases"


def cache_key(*parts: object) -> str:
    h = hashlib.sha256()
    h.update(CACHE_VERSION.encode())
    for p in parts:
        h.update(b"\x00")
        h.update(str(p).encode())
    return h.hexdigest()[:40]


def cache_get(key: str) -> np.ndarray | None:
    """The stored array for `key`, or None (missing, disabled, or corrupted: a corrupted file is removed)."""
    if not cache_enabled():
        return None
    path = cache_dir() / f"{key}.npy"
    if not path.exists():
        return None
    try:
        arr = np.load(path, allow_pickle=False)
        if not isinstance(arr, np.ndarray):
            raise ValueError("not an array")
        return arr
    except Exception:
        try:
            path.unlink()
        except OSError:
            pass
        return None


def cache_put(key: str, arr: np.ndarray) -> None:
    """Store `arr` atomically; failures (read-only disk, full disk) are ignored: the cache is an optimisation."""
    if not cache_enabled():
        return
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, np.asarray(arr), allow_pickle=False)
            os.replace(tmp, d / f"{key}.npy")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass
