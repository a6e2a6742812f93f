"""Types for experiment config fields that declare their own range (pydantic checks them, strictly, whenever a
config is made: :meth:`symkit.lab.experiments.registry.Experiment.check_config`).

>>> from dataclasses import dataclass
>>> @dataclass
... class MyConfig:
...     epochs: Count = 100          # >= 1
...     lr: Positive = 1e-3          # > 0
...     weight_decay: NonNegative = 0.0
...     seed: Seed = 0

Any ``Annotated[type, pydantic.Field(ge=..., gt=..., le=..., lt=...)]`` (or ``annotated_types`` bounds) works the
same way; these names cover the common cases. Floats must also be finite.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["Count", "CountOrZero", "Fraction", "NonNegative", "Positive", "Seed", "SEED_MAX"]

#: the largest seed the results store can hold (SQLite integers are signed 64-bit)
SEED_MAX = 2**63 - 1

#: sizes, steps, epochs, samples: at least 1
Count = Annotated[int, Field(ge=1)]
#: counts where 0 means "none", "all" or "automatic" (burn-in, threads, subsets)
CountOrZero = Annotated[int, Field(ge=0)]
#: learning rates, scales, prior widths: > 0
Positive = Annotated[float, Field(gt=0)]
#: decays, noise levels, shift ranges: >= 0
NonNegative = Annotated[float, Field(ge=0)]
#: a share strictly between 0 and 1 (test fractions)
Fraction = Annotated[float, Field(gt=0, lt=1)]
#: a run's seed
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
