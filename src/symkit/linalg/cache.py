"""On-disk cache of solved bases: atomic writes, checked reads, private directories.

Location: ``$SYMKIT_CACHE_DIR`` if set, else the user cache directory (platformdirs) / "symkit" / "bases".
``SYMKIT_CACHE=0`` disables it.

Each entry is one ``.npz`` file (no pickles) holding the array and a header: the format version, the dtype, the
shape and the sha256 of the payload. It is written to a temporary file in the same directory and moved into place
with `os.replace` (atomic on POSIX and Windows), so concurrent writers both leave a complete file. A read returns
the array only when the header matches the payload and every value is finite; the caller
(`symkit.reps.solve`) then checks the basis itself: as many columns as a rank counted without solving, orthonormal
and invariant (and stores no block it has no such count for). Anything that fails is deleted and recomputed. A
directory that another user owns or that others can write to is not used (a warning says so): the checks accept any
orthonormal basis of the right subspace, and no one else should choose which one symkit returns.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path

import numpy as np

__all__ = ["cache_dir", "cache_enabled", "cache_get", "cache_put", "cache_discard", "cache_key", "CACHE_VERSION"]

#: bump when the solvers or the entry format change; older entries are misses and are replaced
CACHE_VERSION = "2"
_SUFFIX = ".npz"
_WARNED: set[str] = set()


def cache_enabled() -> bool:
    """Whether bases are cached on disk (``SYMKIT_CACHE=0`` turns it off)."""
    return os.environ.get("SYMKIT_CACHE", "1") != "0"


def cache_dir() -> Path:
    """The folder of cached bases: ``SYMKIT_CACHE_DIR``, else the user's cache folder (``platformdirs``)."""
    env = os.environ.get("SYMKIT_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("symkit")) / "bases"


def cache_key(*parts: object) -> str:
    """A hex key of ``parts`` (and the cache format's version) for a cached basis."""
    h = hashlib.sha256()
    h.update(CACHE_VERSION.encode())
    for p in parts:
        h.update(b"\x00")
        h.update(str(p).encode())
    return h.hexdigest()[:40]


def _private(d: Path) -> bool:
    """True when d is ours and no one else can write to it (always true where there are no POSIX owners)."""
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows
        return True
    try:
        st = d.stat()
    except OSError:
        return False
    if st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return True
    if str(d) not in _WARNED:
        _WARNED.add(str(d))
        warnings.warn(
            f"symkit basis cache {d} is owned by another user or writable by others; not using it "
            f"(run `chmod go-w {d}`, or set SYMKIT_CACHE_DIR to a private directory)",
            RuntimeWarning,
            stacklevel=3,
        )
    return False


def _usable_dir(create: bool) -> Path | None:
    if not cache_enabled():
        return None
    d = cache_dir()
    if create:
        try:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            return None
    if not d.is_dir():
        return None
    return d if _private(d) else None


def _digest(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def cache_discard(key: str) -> None:
    """Delete the entry for `key` (and an entry of an older format), ignoring missing files."""
    d = cache_dir()
    for name in (f"{key}{_SUFFIX}", f"{key}.npy"):
        try:
            (d / name).unlink()
        except OSError:
            pass


def cache_get(key: str) -> np.ndarray | None:
    """The stored array for `key`, or None: missing, disabled, unsafe directory, or failing a check (format
    version, dtype, shape, sha256 of the payload, finite values), in which case the entry is deleted."""
    d = _usable_dir(create=False)
    if d is None:
        return None
    path = d / f"{key}{_SUFFIX}"
    if not path.exists():
        if (d / f"{key}.npy").exists():  # an entry of the first format: no header, so it is recomputed
            cache_discard(key)
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            arr, head = z["payload"], json.loads(z["header"].tobytes().decode())
        ok = (
            head.get("format") == CACHE_VERSION
            and head.get("dtype") == str(arr.dtype)
            and head.get("shape") == list(arr.shape)
            and head.get("sha256") == _digest(arr)
            and np.issubdtype(arr.dtype, np.number)
            and bool(np.all(np.isfinite(arr)))
        )
    except Exception:  # unreadable, truncated, not an npz, missing fields: all mean "recompute"
        ok = False
    if not ok:
        cache_discard(key)
        return None
    return arr


def cache_put(key: str, arr: np.ndarray) -> None:
    """Store `arr` with its header, atomically; failures (read-only or full disk, unsafe directory) are ignored:
    the cache is an optimisation."""
    d = _usable_dir(create=True)
    if d is None:
        return
    arr = np.ascontiguousarray(arr)
    head = {"format": CACHE_VERSION, "dtype": str(arr.dtype), "shape": list(arr.shape), "sha256": _digest(arr)}
    buf = io.BytesIO()
    np.savez(buf, payload=arr, header=np.frombuffer(json.dumps(head).encode(), dtype=np.uint8))
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(buf.getvalue())
            os.replace(tmp, d / f"{key}{_SUFFIX}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass
