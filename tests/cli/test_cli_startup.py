"""What a ``symkit`` command imports before it does anything: every command, and every worker a process-pool
sweep spawns, pays for it."""

from __future__ import annotations

import subprocess
import sys

from symkit_cli_helpers import cli_env


def test_the_command_and_sweep_workers_leave_report_only_libraries_unimported():
    """``symkit --help`` needs no torch; a sweep (and each of its spawned workers, which import the same modules)
    needs neither scipy.stats nor matplotlib, which only reports use: scipy.stats alone took 1.5-2 s of each
    ``symkit reproduce`` start (5.3 s -> 3.0 s here)."""
    code = ("import sys; import symkit.lab.cli.main; print('torch' in sys.modules); "
            "import symkit.lab.runner.sweep, symkit.lab.store, symkit.lab.experiments.registry; "
            "print(sorted(m for m in ('scipy.stats', 'matplotlib') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["False", "[]"], proc.stdout
