"""The one progress bar of symkit: tqdm, shown on a terminal unless ``SYMKIT_PROGRESS=0``, silent otherwise.

Every long loop in symkit (basis solves, training, sweeps, Lie derivative batches) uses :func:`progress_bar`, so one
environment variable controls them all and logs written to a file carry no bar fragments.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["progress_bar", "progress_enabled"]


def progress_enabled() -> bool:
    """Bars are drawn when stderr is a terminal and ``SYMKIT_PROGRESS`` is not ``0``."""
    return os.environ.get("SYMKIT_PROGRESS", "1") != "0" and sys.stderr.isatty()


def progress_bar(iterable: Iterable | None = None, *, desc: str = "", total: int | None = None,
                 show: bool | None = None, **options: Any) -> Any:
    """A ``tqdm`` bar over ``iterable`` (or a manual one when ``iterable`` is None), transient (``leave=False``).

    ``show=None`` follows :func:`progress_enabled`; ``True`` forces the bar (a caller's explicit request), ``False``
    hides it (jobs known to be small). A hidden bar is tqdm's own no-op: ``update``, ``set_postfix`` and ``close``
    still work.
    """
    from tqdm.auto import tqdm

    enabled = progress_enabled() if show is None else bool(show)
    options.setdefault("leave", False)
    options.setdefault("dynamic_ncols", True)
    return tqdm(iterable, desc=desc, total=total, disable=not enabled, **options)
