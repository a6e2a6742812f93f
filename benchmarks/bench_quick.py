"""How long each experiment's ``symkit reproduce NAME --quick`` takes, against the one-minute bound of a quick run.

Each experiment's quick sweep runs in a fresh process, in its own store in a temporary folder, with one thread and
the local executor (one core). The table gives its runs, its wall time and its CPU time (user + system of the
process and its children): on a machine shared with other work the CPU time is the better measure of what one idle
core would take. ``--only a,b`` picks experiments. Nothing is kept.

    .venv/bin/python benchmarks/bench_quick.py
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOUND_S = 60.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_quick(name: str, folder: Path) -> tuple[int, float, float, str]:
    """(return code, wall seconds, CPU seconds, the sweep's summary line or else the last line of output) of one
    experiment's quick sweep."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "symkit.lab.cli", "reproduce", name, "--quick", "-e", "local",
           "--store", str(folder / f"{name}.db")]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    lines = (res.stdout + res.stderr).strip().splitlines()
    summary = [line for line in lines if re.search(r" runs? in the sweep", line)]
    return res.returncode, wall, cpu, (summary or lines or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated experiment names (default: every experiment)")
    args = parser.parse_args()
    from symkit.lab.experiments.registry import all_experiments

    names = [n for n in args.only.split(",") if n] or list(all_experiments())
    print(f"`symkit reproduce NAME --quick`, one thread, local executor; bound {BOUND_S:.0f} s of one core")
    print()
    print("| experiment | runs | wall s | CPU s | CPU / bound | status |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rc, wall, cpu, last = time_quick(name, Path(tmp))
            found = re.search(r"(\d+) runs? in the sweep", last)
            runs = found.group(1) if found else "?"
            status = "ok" if rc == 0 else f"rc {rc}: {last[:80]}"
            worst = max(worst, cpu)
            print(f"| {name} | {runs} | {wall:.1f} | {cpu:.1f} | {cpu / BOUND_S:.2f} | {status} |", flush=True)
    print()
    print(f"slowest: {worst:.1f} CPU s ({worst / BOUND_S:.2f} of the bound)")


if __name__ == "__main__":
    main()
