"""symkit.train.batch_indices: the one batching rule (consecutive slices, or a seeded permutation split)."""

import pytest
import torch

from symkit.train import batch_indices


def test_consecutive_slices_cover_every_row_once_in_order():
    assert batch_indices(7, 3) == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert batch_indices(7, None) == [slice(0, 7)] == batch_indices(7, 100)
    assert batch_indices(0, 4) == []


def test_a_generator_gives_the_permutation_the_trainer_always_drew():
    """The same draws as ``torch.randperm(n, generator=g).split(b)`` (the Trainer's and rollout training's order
    before the helper, so seeded runs keep their batches), each row exactly once."""
    got = batch_indices(10, 4, torch.Generator().manual_seed(3))
    want = torch.randperm(10, generator=torch.Generator().manual_seed(3)).split(4)
    assert [len(b) for b in got] == [4, 4, 2]
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert sorted(torch.cat(got).tolist()) == list(range(10))
    assert not torch.equal(torch.cat(got), torch.arange(10))


@pytest.mark.parametrize("bad, error", [(0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_a_batch_size_that_is_not_a_positive_int_is_named(bad, error):
    with pytest.raises(error, match="batch_size"):
        batch_indices(5, bad)
