"""Helpers for the command-line tests: run ``symkit`` in a subprocess that knows the toy experiment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a ``symkit`` subprocess that knows the toy experiment."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [env.get("PYTHONPATH")])])
    env["SYMKIT_EXPERIMENT_MODULES"] = "symkit_cli_toy"
    env["SYMKIT_PROGRESS"] = "0"
    env.update(extra)
    return env


def default_sigint() -> None:
    """``preexec_fn`` for a child that must react to Ctrl-C: a shell's background job (CI, nohup) ignores SIGINT,
    the child would inherit that, and Python does not install its KeyboardInterrupt handler for an ignored SIGINT."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def symkit_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "symkit.cli", *args]


def run_symkit(*args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run ``symkit ARGS`` in a subprocess and return it (text output)."""
    return subprocess.run(symkit_cmd(*args), env=cli_env(**env), capture_output=True, text=True, timeout=timeout)


def executions(log: Path) -> list[tuple[int, int]]:
    """``(n, seed)`` of every toy run executed, in order."""
    if not log.exists():
        return []
    return [(int(a), int(b)) for a, b, _ in (line.split() for line in log.read_text().splitlines())]
