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


def obey_file_permissions() -> None:
    """``preexec_fn`` for a child that must meet read-only files and folders as a user does: root writes them anyway
    (``CAP_DAC_OVERRIDE``), so a child of root drops that capability and ``CAP_DAC_READ_SEARCH`` from its bounding
    set, which the program it executes then lacks; it stays root, the owner of the test's files, so it reads them
    through their owner bits (folders of mode 0700 included). Other users meet the permission bits anyway."""
    if os.geteuid() != 0:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), f"cannot drop capability {capability} to obey file permissions")


def symkit_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "symkit.lab.cli", *args]


def run_symkit(*args: str, timeout: float = 240, obey_permissions: bool = False,
               **env: str) -> subprocess.CompletedProcess:
    """Run ``symkit ARGS`` in a subprocess and return it (text output); ``obey_permissions``: the subprocess meets
    file permission bits even when the tests run as root (:func:`obey_file_permissions`)."""
    return subprocess.run(symkit_cmd(*args), env=cli_env(**env), capture_output=True, text=True, timeout=timeout,
                          preexec_fn=obey_file_permissions if obey_permissions else None)


def executions(log: Path) -> list[tuple[int, int]]:
    """``(n, seed)`` of every toy run executed, in order."""
    if not log.exists():
        return []
    return [(int(a), int(b)) for a, b, _ in (line.split() for line in log.read_text().splitlines())]
