"""Run experiments from Python as the ``symkit`` command does: plan sweeps, run them on an executor (local, a process
pool or Ray), record every run in the results store, and build reports.

```python
from symkit.lab.experiments.registry import get_experiment
from symkit.lab.runner import plan, run_sweep, write_report
from symkit.lab.store import Store

exp = get_experiment("rpp-levels")
store = Store("runs/results.db")
result = run_sweep(exp, plan(exp, quick=True), store, executor="process", jobs=2)
text, files = write_report(exp, store, "runs/reports/rpp-levels")
```
"""

from symkit.lab.runner.demo import DEMO_EXPERIMENTS, run_demo
from symkit.lab.runner.report import aggregate, build_report, write_report
from symkit.lab.runner.sweep import (
    EXECUTORS,
    MAX_RUNS,
    RunSpec,
    SweepError,
    SweepResult,
    parse_assignments,
    parse_seeds,
    plan,
    run_sweep,
    summary_lines,
)

__all__ = [
    "DEMO_EXPERIMENTS",
    "EXECUTORS",
    "MAX_RUNS",
    "RunSpec",
    "SweepError",
    "SweepResult",
    "aggregate",
    "build_report",
    "parse_assignments",
    "parse_seeds",
    "plan",
    "run_demo",
    "run_sweep",
    "summary_lines",
    "write_report",
]
