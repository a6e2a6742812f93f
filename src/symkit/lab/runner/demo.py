"""``symkit demo``: run a few quick experiments end to end and write their reports (with plots).

The list of experiments is :data:`DEMO_EXPERIMENTS` (or ``--experiments``); those not available in this install
are skipped with a note. Results go to their own store, ``OUT/demo.db``, so running the demo again only runs what
is missing (``--fresh`` starts over), and each report to ``OUT/NAME/``; ``OUT/README.md`` links them all.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from symkit.lab._text import count
from symkit.lab.experiments.registry import all_experiments, get_experiment
from symkit.lab.runner.report import write_report
from symkit.lab.runner.sweep import SweepError, plan, run_sweep, summary_lines
from symkit.lab.store import Store

#: The experiments the demo runs with ``--quick``, in order (missing ones are skipped).
DEMO_EXPERIMENTS: tuple[str, ...] = ("emlp-data-efficiency", "ranks", "rpp-levels", "sharing-gaussian", "lee-trends")

#: Fields the demo sets beyond the quick scale: the quick scale is sized to finish in seconds; the demo trains the
#: same quick sweeps for as long as it takes their orderings to show (thesis Fig. 2.5 at N = 1000 and Fig. 3.2's
#: three panels), which ``tests/experiments/test_demo.py`` checks on the demo's own runs.
DEMO_SETTINGS: dict[str, dict[str, Any]] = {
    "emlp-data-efficiency": {"epochs": 300, "batch_size": 500},
    "rpp-levels": {"epochs": 300, "batch_size": 250},
}


def run_demo(
    out: Path,
    names: Sequence[str] | None = None,
    executor: str = "process",
    jobs: int = 2,
    fresh: bool = False,
    echo: Callable[..., object] | None = None,
) -> list[Path]:
    """Run the demo into ``out``; returns the plot files written. Progress lines go to ``echo`` (``err=True``
    marks errors; default: stdout and stderr). Raises ``KeyError`` for an explicitly named experiment that does not
    exist, ``KeyboardInterrupt`` when a sweep is interrupted (finished runs are stored) and ``SweepError`` when
    finished runs could not be stored."""
    echo = echo or _print
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    db_path = out / "demo.db"
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            Path(str(db_path) + suffix).unlink(missing_ok=True)
    available = all_experiments()
    if names is None:
        chosen = [n for n in DEMO_EXPERIMENTS if n in available]
        skipped = [n for n in DEMO_EXPERIMENTS if n not in available]
    else:
        chosen = [get_experiment(n).name for n in names]  # a KeyError lists the valid names
        skipped = []
    for name in skipped:
        echo(f"demo: skipping {name} (not available in this install)")
    if not chosen:
        raise KeyError(f"none of the demo experiments is available; valid names: {', '.join(available) or '(none)'}")

    store = Store(db_path)
    store.preflight()  # a read-only, corrupt or locked store is named before any run
    index = ["# symkit demo", "", "Quick versions of these experiments, run end to end with `symkit demo`:", ""]
    plots: list[Path] = []
    t_start = time.perf_counter()
    for name in chosen:
        exp = get_experiment(name)
        echo(f"demo: {name}: {exp.description}")
        t0 = time.perf_counter()
        specs = plan(exp, quick=True, settings={k: [v] for k, v in DEMO_SETTINGS.get(name, {}).items()})
        result = run_sweep(exp, specs, store, executor=executor, jobs=jobs)
        for line, is_error in summary_lines(exp, specs, result, store.path):
            echo(line, err=is_error)
        if result.interrupted:
            raise KeyboardInterrupt
        if result.pending or result.unsaved:
            raise SweepError(f"{name}: finished runs could not be written to {db_path}: {result.store_error}")
        failed = result.failed + result.already_failed
        text, paths = write_report(exp, store, out / name)
        report_plots = [p for p in paths if p.suffix == ".png"]
        plots += report_plots
        seconds = time.perf_counter() - t0
        index.append(f"- [{name}]({name}/report.md): {exp.reproduces} ({count(len(specs), 'run')}, {seconds:.0f} s"
                     + (f", {failed} failed" if failed else "") + ")")
        index += [f"  - plot: [{p.name}]({name}/{p.name})" for p in report_plots[:3]]
        if len(report_plots) > 3:
            index.append(f"  - and {len(report_plots) - 3} more plots in the report")
        echo(f"demo: {name}: report in {out / name / 'report.md'}"
                   + (f", {len(report_plots)} plot(s)" if report_plots else ""))
    store.close()
    index += ["", f"Total time: {time.perf_counter() - t_start:.0f} s. Results store: `{db_path}`.", ""]
    (out / "README.md").write_text("\n".join(index))
    echo(f"demo: done; open {out / 'README.md'}")
    return plots


def _print(text: str, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout)
