"""Reproduced paper results, one module per experiment, each registered by name (see `registry`)."""

from symkit.lab.experiments.registry import (
    Experiment,
    PaperValue,
    Plot,
    all_experiments,
    get_experiment,
    register,
)

__all__ = ["Experiment", "PaperValue", "Plot", "all_experiments", "get_experiment", "register"]
