"""Fitting a vector field to trajectory chunks through ODE rollouts (thesis Sec. 2.7.2): :func:`train_dynamics`;
and Table 2.2's rollout metrics of the fitted field on the pendulum's test chunks: :func:`evaluate_dynamics`.

The data are chunks of true trajectories, any object with ``z0`` ``(n, d)`` (the start states), ``times`` ``(T,)``
(from 0) and ``z`` ``(n, T, d)`` (the states at those times; :class:`symkit.datasets.pendulum.PendulumChunks` is
one). The loss of a batch of chunks is the mean square error of the model's rollouts from their starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from symkit.datasets.pendulum import PendulumData, angular_momentum_z, long_trajectories
from symkit.nn.ode import rollout, rollout_error, rollout_or_nan
from symkit.train.batching import batch_indices
from symkit.train.trainer import Hook, Trainer, TrainResult

__all__ = ["evaluate_dynamics", "train_dynamics"]


def _chunk_tensors(chunks: Any, dtype: torch.dtype, device: torch.device,
                   who: str = "train_dynamics") -> tuple[torch.Tensor, ...]:
    try:
        z0, times, z = chunks.z0, chunks.times, chunks.z
    except AttributeError:
        raise TypeError(f"{who}: chunks must have z0, times and z tensors, got {type(chunks).__name__}") from None
    if not (z0.ndim == 2 and times.ndim == 1 and z.shape == (z0.shape[0], times.shape[0], z0.shape[1])):
        raise ValueError(f"{who}: chunks must be z0 (n, d), times (T,) and z (n, T, d); got z0 "
                         f"{tuple(z0.shape)}, times {tuple(times.shape)}, z {tuple(z.shape)}")
    return tuple(t.to(device=device, dtype=dtype) for t in (z0, times, z))


def train_dynamics(dynamics: nn.Module, chunks: Any, *, epochs: int = 2000, lr: float = 3e-3,
                   batch_size: int = 500, method: str = "dopri5", rtol: float = 1e-4, atol: float = 1e-6,
                   step_size: float | None = None, seed: int = 0,
                   penalty: Callable[[nn.Module], torch.Tensor] | None = None, hooks: Sequence[Hook] = (),
                   desc: str = "dynamics", precision: str = "32", max_epochs: int | None = None,
                   max_batches: int | None = None) -> TrainResult:
    """Fit ``dynamics`` (``z -> dz/dt``) to trajectory ``chunks`` through ODE rollouts (Sec. 2.7.2): the loss of a
    batch is ``mean |rollout(dynamics, z0, times) - z|^2`` over its chunks, times and state entries; Adam at ``lr``,
    constant, for ``epochs`` passes over the chunks in seeded random batches of ``batch_size`` (one step per
    epoch when the batch holds every chunk, the thesis's 500 of 500). ``penalty(model)`` is added to the loss (an
    RPP prior, say). The :class:`~symkit.train.Trainer` takes one step per call of its full-batch objective, so its
    "epochs" (in ``hooks``, in ``max_epochs`` and in the returned record) are optimiser steps; ``precision`` and
    the limits go to it. The chunks are cast to the dtype and device of the model's parameters. Returns the
    trainer's record."""
    params = [p for p in dynamics.parameters() if p.is_floating_point()]
    if not params:
        raise ValueError("train_dynamics: the dynamics module has no parameters to train")
    z0, times, z = _chunk_tensors(chunks, params[0].dtype, params[0].device)
    n = z0.shape[0]
    bs = min(batch_size, n)
    steps_per_epoch = math.ceil(n / bs)
    generator = torch.Generator().manual_seed(seed)
    queue: list[torch.Tensor] = []

    def objective(model: nn.Module) -> torch.Tensor:
        if bs == n:
            idx = None
        else:
            if not queue:
                queue.extend(batch_indices(n, bs, generator))
            idx = queue.pop(0).to(z0.device)
        z0b, zb = (z0, z) if idx is None else (z0[idx], z[idx])
        pred = rollout(model, z0b, times, rtol=rtol, atol=atol, method=method, step_size=step_size)
        return (pred - zb).square().mean()

    trainer = Trainer(dynamics, objective=objective, lr=lr, epochs=epochs * steps_per_epoch, seed=seed,
                      penalty=penalty, hooks=hooks, desc=desc, precision=precision, max_epochs=max_epochs,
                      max_batches=max_batches)
    return trainer.fit()


def evaluate_dynamics(dynamics: nn.Module, data: PendulumData, *, n_rollouts: int = 0, rollout_time: float = 30.0,
                      eval_rtol: float = 1e-4, eval_atol: float = 1e-6) -> dict[str, float]:
    """Table 2.2's metrics of a trained vector field on the test chunks of ``data``: ``rollout_error`` (the
    geometric mean over test systems and the 150 times of the relative error of 30 s rollouts, each solved by
    dopri5 at ``eval_rtol``; the truth at the data's tolerance), ``constant_rollout_error`` (the same for
    ``z(t) = z0``), ``test_mse`` (per-step MSE of the model's rollouts on the 5-state test chunks) and ``lz_drift``
    (mean over systems of the largest change of the angular momentum about z along the model's rollout, relative
    to the truth's spread of L_z: 0 when conserved). A model trajectory whose solve diverges
    (:func:`~symkit.nn.ode.rollout_or_nan`) is not finite: ``finite_rollouts`` counts the others, its states enter
    the errors as 1e6 and ``lz_drift`` leaves it out (1e6 when none is finite), so a run that trained is recorded
    whatever its rollouts do."""
    params = [p for p in dynamics.parameters() if p.is_floating_point()]
    dtype, device = (params[0].dtype, params[0].device) if params else (torch.float64, torch.device("cpu"))
    test = data.test
    z0, times, z = _chunk_tensors(test, dtype, device, "evaluate_dynamics")
    dynamics.eval()
    with torch.no_grad():  # a trajectory whose solve diverges counts as not finite; it does not stop the others
        chunk_pred = rollout_or_nan(dynamics, z0, times, rtol=eval_rtol, atol=eval_atol)
        test_mse = float((chunk_pred.nan_to_num(1e6, 1e6, -1e6) - z).square().mean())
        starts = test.z0 if n_rollouts == 0 else test.z0[:n_rollouts]
        long_times, truth = long_trajectories(starts, rollout_time, float(test.times[1] - test.times[0]),
                                              wind=data.wind, spring=data.spring)
        pred = rollout_or_nan(dynamics, starts.to(device=device, dtype=dtype),
                              long_times.to(device=device, dtype=dtype), rtol=eval_rtol,
                              atol=eval_atol).to(truth.dtype).cpu()
    dynamics.train()
    finite = torch.isfinite(pred).all(dim=(-1, -2))
    per_system = rollout_error(pred.nan_to_num(1e6, 1e6, -1e6), truth)
    constant = rollout_error(starts[:, None, :].expand_as(truth), truth)
    lz_pred, lz_true = angular_momentum_z(pred), angular_momentum_z(truth)
    drift = (lz_pred - lz_pred[:, :1]).abs().amax(-1) / lz_true.std().clamp_min(1e-12)
    return {
        "rollout_error": float(per_system.log().mean().exp()),
        "constant_rollout_error": float(constant.log().mean().exp()),
        "test_mse": test_mse,
        "lz_drift": float(drift[finite].mean()) if bool(finite.any()) else 1e6,
        "finite_rollouts": float(finite.double().mean()),
    }
