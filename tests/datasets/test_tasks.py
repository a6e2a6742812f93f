"""Every built-in task declares reps and a group that its data respects: exactly (errors at float64 rounding) or,
for the approximate variants, measurably not."""

from __future__ import annotations

import pytest
import torch

from symkit.datasets.tasks import TASKS, SymmetricTask, register_task, task
from symkit.groups import SL, SO
from symkit.reps.errors import relative_error


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_declared_reps_fit_the_data(name):
    t = task(name)
    x, y = t.generate(5, seed=1)
    assert x.dtype == y.dtype == torch.float64
    assert x.shape == (5, t.rep_in.size) and y.shape == (5, t.rep_out.size)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_same_seed_gives_the_same_data_and_another_seed_other_data(name):
    t = task(name)
    a, b, c = t.generate(4, seed=2), t.generate(4, seed=2), t.generate(4, seed=3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("name", sorted(n for n, t in TASKS.items() if t.exact))
def test_exact_tasks_transform_their_targets_with_the_group(name):
    assert task(name).symmetry_error(n=32, num_elements=3) < 1e-10


@pytest.mark.parametrize("name", sorted(n for n, t in TASKS.items() if not t.exact))
def test_approximate_tasks_break_their_group_measurably(name):
    assert task(name).symmetry_error(n=32, num_elements=3) > 1e-3


def test_a_subgroup_keeps_the_symmetry_and_a_larger_group_breaks_it():
    inertia = task("inertia")
    assert inertia.symmetry_error(group=SO(3)) < 1e-10
    assert inertia.symmetry_error(group=SL(3)) > 1e-2


def test_the_approximate_inertia_keeps_rotations_about_its_preferred_axis():
    import numpy as np

    from symkit.groups import SO2eR3
    assert task("modified-inertia").symmetry_error(group=SO2eR3()) < 1e-10
    assert np.isfinite(task("modified-inertia").symmetry_error())


def test_relative_error_is_zero_for_equal_rows_and_one_for_opposite_rows():
    """symmetry_error compares rows with the core's relative error."""
    a = torch.tensor([[1.0, 2.0], [3.0, -1.0]]).numpy()
    assert [relative_error(r, r) for r in a] == [0.0, 0.0]
    assert [relative_error(r, -r) for r in a] == pytest.approx([1.0, 1.0])


def test_unknown_names_bad_sizes_and_duplicate_names_are_refused():
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        task("nope")
    with pytest.raises(ValueError, match="n"):
        task("o5").generate(0)
    with pytest.raises(ValueError, match="already registered"):
        register_task(SymmetricTask("o5", TASKS["o5"].inputs, TASKS["o5"].target, TASKS["o5"].reps,
                                    TASKS["o5"].group))
