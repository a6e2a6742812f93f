"""A small experiment for the command-line and sweep tests (imported by tests and by worker subprocesses).

Subprocesses find it through ``PYTHONPATH`` (this directory) and ``SYMKIT_EXPERIMENT_MODULES=symkit_cli_toy``.
A run fails when its seed is ``fail_seed`` or is listed in ``$SYMKIT_TOY_FAIL_SEEDS`` (comma-separated). Each run
appends ``<n> <seed> <pid>`` to the file named by ``$SYMKIT_TOY_LOG`` (when set), so tests can
count how often each run was executed.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from symkit._stopping import deferred_stop
from symkit.lab.experiments.fields import Count
from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, register
from symkit.progress import progress_bar

NAME = "cli-toy"


@dataclass
class ToyConfig:
    n: Count = 10
    scale: float = 1.0
    fail_seed: int = -1  # the run with this seed raises
    crash_seed: int = -1  # the run with this seed ends its process at once (a crash outside Python)
    sleep: float = 0.0
    tag: str = "a"
    sizes: tuple[int, ...] = (1, 2)
    seed: int = 0


def run(config: ToyConfig) -> dict:
    log = os.environ.get("SYMKIT_TOY_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{config.n} {config.seed} {os.getpid()}\n")
    if config.sleep and os.environ.get("SYMKIT_TOY_SAVE"):  # a run that saves where it stands when stopped
        with deferred_stop() as stop, progress_bar(desc="toy", total=1):  # a bar, as rl-sac's runs have
            end = time.monotonic() + config.sleep
            while time.monotonic() < end and not stop():
                time.sleep(0.05)
            if stop():
                with open(os.environ["SYMKIT_TOY_SAVE"], "a") as f:
                    f.write(f"saved {config.seed} {os.getpid()}\n")
    elif config.sleep:
        time.sleep(config.sleep)
    if config.seed == config.crash_seed:
        os._exit(3)
    fail_seeds = os.environ.get("SYMKIT_TOY_FAIL_SEEDS", "")
    if config.seed == config.fail_seed or str(config.seed) in fail_seeds.split(","):
        raise RuntimeError(f"toy failure on purpose (seed {config.seed})")
    x = np.random.default_rng(config.seed).normal(size=config.n) * config.scale
    return {
        "mean": float(x.mean()),
        "error": float(np.abs(x).mean() / math.sqrt(config.n)),
        "n_used": config.n,
        "positive": bool(x.mean() > 0),
        "label": config.tag,
        "sizes": list(config.sizes),
    }


EXPERIMENT = register(
    Experiment(
        name=NAME,
        description="Mean of n Gaussian samples (a test fixture).",
        reproduces="the 1/sqrt(n) law (Table 0 of no paper)",
        config=ToyConfig,
        run=run,
        quick={"scale": 0.5},
        sweep={"n": (10, 100, 1000), "seed": (0, 1, 2)},
        quick_sweep={"n": (10, 100), "seed": (0, 1)},
        paper=(
            PaperValue("error", 0.08, where={"n": 100}, source="Table 0"),
            PaperValue("error", 0.01, where={"n": 10000}, source="Table 0"),
        ),
        plots=(Plot(x="n", y="error", logx=True, logy=True, title="toy error against n"),),
    )
)

SCALED = "cli-toy-scaled"


def run_scaled(config: ToyConfig) -> dict:
    """The toy's metrics and the run settings this run saw (to check that they reach every executor's workers)."""
    from symkit.lab import runtime
    from symkit.lab.runtime import epochs

    settings = runtime.current()
    return {**run(config), "device": settings.device, "data_dir": settings.data_dir or "", "epochs": epochs(50),
            "precision": settings.precision}


SCALED_EXPERIMENT = register(
    Experiment(
        name=SCALED,
        description="The toy with a paper scale of its own (a test fixture).",
        reproduces="the 1/sqrt(n) law at three scales",
        config=ToyConfig,
        run=run_scaled,
        quick={"scale": 0.5},
        paper_scale={"scale": 3.0, "tag": "paper"},
        sweep={"n": (10, 100), "seed": (0,)},
        paper_sweep={"n": (100, 1000), "seed": (0, 1)},
        paper=(PaperValue("error", 0.08, where={"n": 100}, source="Table 0"),),
    )
)
