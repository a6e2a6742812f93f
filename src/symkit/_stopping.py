"""Stop requests that a long run honours at a safe point instead of dying mid-step.

Inside :func:`deferred_stop` (in the main thread) SIGTERM, and a first Ctrl-C where Python's own Ctrl-C handler is
installed, set a flag instead of acting at once; the run reads it at its safe points (``stop()`` is True), saves
what it has and returns. When the block ends, the deferred signal is delivered again to the handlers that were
there before, so the process then stops as it would have: a sweep's worker ends (its driver sent the SIGTERM), the
``symkit`` command reports an interrupted sweep, Python code sees ``KeyboardInterrupt``. A second Ctrl-C stops at
once. rl-sac's runs use it to save a checkpoint at the step where they were stopped (docs/rl.md).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["deferred_stop"]


@contextmanager
def deferred_stop() -> Iterator[Callable[[], bool]]:
    """Defer SIGTERM and Ctrl-C to the run's safe points (module docstring); yields ``stop()``, True once asked.
    Outside the main thread signals keep their handlers and ``stop()`` stays False."""
    received: list[int] = []

    def on_term(signum: int, frame: object) -> None:
        received.append(signum)

    def on_int(signum: int, frame: object) -> None:
        if received:  # asked twice: stop now
            raise KeyboardInterrupt
        received.append(signum)

    previous: list[tuple[int, object]] = []
    try:
        previous.append((signal.SIGTERM, signal.signal(signal.SIGTERM, on_term)))
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where Ctrl-C is ignored (workers)
            previous.append((signal.SIGINT, signal.signal(signal.SIGINT, on_int)))
    except ValueError:  # not the main thread
        pass
    try:
        yield lambda: bool(received)
    finally:
        for signum, handler in reversed(previous):
            signal.signal(signum, handler)  # type: ignore[arg-type]
        if received:
            os.kill(os.getpid(), received[0])  # delivered again, to the handlers that were there before
