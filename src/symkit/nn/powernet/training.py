"""A small seeded training loop shared by the PowerNet experiments (Adam, cosine schedule, a progress bar)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from symkit.progress import progress_bar

__all__ = ["fit", "predict"]


def fit(
    model: nn.Module,
    epoch_data: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    generator: torch.Generator,
    desc: str = "train",
) -> list[float]:
    """Train ``model`` with Adam (``lr``, ``weight_decay``) and a cosine learning-rate decay.

    ``epoch_data(e)`` returns the inputs and targets of epoch ``e`` (fresh augmentations each epoch); batches are a
    seeded shuffle. Returns the mean training loss of every epoch.
    """
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be positive, got epochs={epochs!r}, batch_size={batch_size!r}")
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    first = epoch_data(0)
    steps_per_epoch = (first[0].shape[0] + batch_size - 1) // batch_size
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps_per_epoch)
    history: list[float] = []
    bar = progress_bar(range(epochs), desc=desc)
    for e in bar:
        x, y = first if e == 0 else epoch_data(e)
        model.train()
        order = torch.randperm(x.shape[0], generator=generator)
        total, count = 0.0, 0
        for start in range(0, x.shape[0], batch_size):
            idx = order[start:start + batch_size]
            if idx.numel() < 2:  # batch norm needs two samples
                continue
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * idx.numel()
            count += idx.numel()
        history.append(total / max(count, 1))
        bar.set_postfix(loss=f"{history[-1]:.4f}")
    return history


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """``model(x)`` in eval mode, in batches."""
    model.eval()
    return torch.cat([model(x[i:i + batch_size]) for i in range(0, x.shape[0], batch_size)])
