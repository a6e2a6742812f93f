"""Regression tasks that declare their symmetry: inputs, a target function, the reps and the group.

A :class:`SymmetricTask` bundles what a user needs to train and check an equivariant model on a data set: how the
inputs are drawn, the target ``y = f(x)``, the input and output reps for any group that acts on the same spaces
(``task.reps(G)``), and the group the data respects (``task.group``), exactly or only approximately
(``task.exact``). The symmetry is testable: ``f(rho_in(g) x) = rho_out(g) f(x)`` for sampled ``g`` when the task is
exact (``symmetry_error``), and measurably not otherwise.

The built-in tasks are in :data:`TASKS`, by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from symkit._checks import check_int
from symkit.groups import Group
from symkit.reps.errors import nanmax, relative_error

__all__ = ["SymmetricTask", "TASKS", "task"]

InputSampler = Callable[[int, torch.Generator], torch.Tensor]
Target = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class SymmetricTask:
    """A regression task ``y = target(x)`` with inputs from ``inputs(n, generator)``, equivariant (or, when
    ``exact`` is False, only approximately equivariant) under ``group`` with the reps ``reps(G)``.

    ``reps`` maps a group to ``(rep_in, rep_out)``: any group acting on the same spaces (a subgroup such as SO(3)
    for an O(3) task, or a larger, misspecified one such as SL(3)). Inputs and targets are float64 and flattened
    in the layout of those reps.
    """

    name: str
    inputs: InputSampler
    target: Target
    reps: Callable[[Group], tuple]
    group: Group
    exact: bool = True
    description: str = ""

    @property
    def rep_in(self):
        """The input rep of the task's own group."""
        return self.reps(self.group)[0]

    @property
    def rep_out(self):
        """The output rep of the task's own group."""
        return self.reps(self.group)[1]

    def generate(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` seeded samples ``(x, y)`` (float64, the same numbers for the same seed)."""
        n = check_int("n", n, 1)
        generator = torch.Generator().manual_seed(check_int("seed", seed, 0))
        x = self.inputs(n, generator)
        return x, self.target(x)

    def symmetry_error(self, n: int = 64, num_elements: int = 4, seed: int = 0, group: Group | None = None) -> float:
        """The largest relative error ``|f(rho_in(g) x) - rho_out(g) f(x)| / (|.| + |.|)`` (thesis eq. 3.3, per
        input, :func:`symkit.reps.errors.relative_error`) over ``n`` inputs and ``num_elements`` sampled elements
        of ``group`` (default: the task's group): about 1e-15 in float64 for an exact symmetry, ``nan`` if any
        value is not finite."""
        G = self.group if group is None else group
        rep_in, rep_out = self.reps(G)
        x, y = self.generate(n, seed)
        errors = []
        for g in G.samples(check_int("num_elements", num_elements, 1), seed=seed):
            moved = self.target(x @ torch.as_tensor(np.asarray(rep_in.rho(g)), dtype=x.dtype).T).numpy()
            expected = (y @ torch.as_tensor(np.asarray(rep_out.rho(g)), dtype=y.dtype).T).numpy()
            errors += [relative_error(a, b) for a, b in zip(moved, expected)]
        return nanmax(errors)


TASKS: dict[str, SymmetricTask] = {}


def register_task(t: SymmetricTask) -> SymmetricTask:
    """Add a task to :data:`TASKS` under its name (a name may be registered once)."""
    if t.name in TASKS:
        raise ValueError(f"a task named {t.name!r} is already registered")
    TASKS[t.name] = t
    return t


def task(name: str) -> SymmetricTask:
    """The built-in task of that name (``sorted(TASKS)`` lists them)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    return TASKS[name]


# the built-in tasks register themselves on import
from symkit.datasets import particle as _particle  # noqa: E402,F401
from symkit.datasets import pendulum as _pendulum  # noqa: E402,F401
from symkit.datasets import synthetic as _synthetic  # noqa: E402,F401
