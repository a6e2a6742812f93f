"""Mini-batches of ``n`` rows, the one rule every loop in symkit batches by (the Trainer's epochs, the dynamics and
marglik full passes, rollout training, evaluation)."""

from __future__ import annotations

import torch

from symkit._checks import check_int

__all__ = ["batch_indices"]


def batch_indices(n: int, batch_size: int | None, generator: torch.Generator | None = None
                  ) -> list[slice] | list[torch.Tensor]:
    """The batches of ``range(n)``: without ``generator``, consecutive slices of ``batch_size`` rows in order (views
    when indexing a tensor); with it, ``torch.randperm(n, generator=generator)`` split into index tensors of
    ``batch_size`` (a fresh order per call). The last batch may be short; ``batch_size=None`` is one batch of all."""
    n = check_int("n", n, 0)
    size = max(n, 1) if batch_size is None else check_int("batch_size", batch_size, 1)
    if generator is not None:
        return list(torch.randperm(n, generator=generator).split(size))
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]
