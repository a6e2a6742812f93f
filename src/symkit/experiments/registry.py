"""The experiment registry.

An experiment reproduces one paper result. It is a module in ``symkit/experiments/`` that builds an
:class:`Experiment` and passes it to :func:`register` at import time. The registry imports every module of the
package on first use, so adding a file is all it takes to add an experiment.

Anatomy of an experiment:

- ``config``: a dataclass whose defaults are the full (paper-sized) setup; it must have an ``int`` field ``seed``.
- ``quick``: field overrides that make the run small enough for CI (``symkit reproduce NAME --quick``).
- ``sweep`` / ``quick_sweep``: a grid, ``{field: [values, ...]}``; every combination is one run.
- ``run(config) -> metrics``: a flat dict of JSON-serialisable values (numbers, strings, short lists).
- ``paper``: the paper's numbers, shown beside ours by ``symkit report``.
- ``plots``: what ``symkit report`` draws from the aggregated metrics.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Metrics = dict[str, Any]


@dataclass(frozen=True)
class PaperValue:
    """A number the paper reports, for the run group whose config matches ``where``."""

    metric: str
    value: float
    where: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""  # e.g. "Table 1"
    stderr: float | None = None


@dataclass(frozen=True)
class Plot:
    """A plot of the seed-aggregated ``y`` metric against config field (or metric) ``x``, one line per ``hue``."""

    x: str
    y: str
    hue: str | None = None
    logx: bool = False
    logy: bool = False
    title: str = ""
    kind: str = "line"  # "line" or "bar"


@dataclass(frozen=True)
class Experiment:
    """A registered, reproducible experiment (see the module docstring)."""

    name: str
    description: str
    reproduces: str
    config: type
    run: Callable[[Any], Metrics]
    quick: Mapping[str, Any] = field(default_factory=dict)
    sweep: Mapping[str, Sequence[Any]] = field(default_factory=lambda: {"seed": (0,)})
    quick_sweep: Mapping[str, Sequence[Any]] | None = None
    paper: Sequence[PaperValue] = ()
    plots: Sequence[Plot] = ()

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.config):
            raise TypeError(f"experiment {self.name!r}: config must be a dataclass, got {self.config!r}")
        names = {f.name for f in dataclasses.fields(self.config)}
        if "seed" not in names:
            raise TypeError(f"experiment {self.name!r}: config {self.config.__name__} needs a 'seed' field")
        for key in [*self.quick, *self.sweep, *(self.quick_sweep or {})]:
            if key not in names:
                raise TypeError(
                    f"experiment {self.name!r}: {key!r} is not a field of {self.config.__name__} "
                    f"(fields: {', '.join(sorted(names))})"
                )

    def field_names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.config)]

    def make_config(self, quick: bool = False, **overrides: Any) -> Any:
        """The config for one run: defaults, then the quick overrides, then ``overrides``."""
        values = dict(self.quick) if quick else {}
        values.update(overrides)
        unknown = set(values) - set(self.field_names())
        if unknown:
            raise ValueError(
                f"experiment {self.name!r} has no setting {', '.join(sorted(unknown))}; "
                f"valid settings: {', '.join(self.field_names())}"
            )
        return self.config(**values)

    def grid(self, quick: bool = False) -> list[dict[str, Any]]:
        """The sweep as a list of field overrides, one per run."""
        sweep = self.quick_sweep if (quick and self.quick_sweep is not None) else self.sweep
        keys = list(sweep)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


_REGISTRY: dict[str, Experiment] = {}
_DISCOVERED = False


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry under its name (names are unique)."""
    existing = _REGISTRY.get(experiment.name)
    if existing is not None and existing.run is not experiment.run:
        raise ValueError(f"two experiments are named {experiment.name!r}")
    _REGISTRY[experiment.name] = experiment
    return experiment


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    import symkit.experiments as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "registry" and not info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{info.name}")
    _DISCOVERED = True


def all_experiments() -> dict[str, Experiment]:
    """Every registered experiment, by name, sorted."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; a ``KeyError`` listing the valid names otherwise."""
    experiments = all_experiments()
    if name not in experiments:
        raise KeyError(f"no experiment named {name!r}; valid names: {', '.join(experiments) or '(none)'}")
    return experiments[name]
