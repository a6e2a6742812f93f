"""tqdm progress bars that respect SYMKIT_PROGRESS=0 and stay quiet when not attached to a terminal."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["progress", "progress_enabled"]


def progress_enabled() -> bool:
    return os.environ.get("SYMKIT_PROGRESS", "1") != "0" and sys.stderr.isatty()


class _Null:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass


def progress(desc: str, total: int | None = None, disable_below: bool = False, **kw: Any) -> Any:
    """A tqdm bar, or a no-op object when progress is disabled (or `disable_below` says the job is small)."""
    if disable_below or not progress_enabled():
        return _Null()
    from tqdm.auto import tqdm

    return tqdm(desc=desc, total=total, leave=False, **kw)
