"""One small training loop for every model in symkit.

Two ways to feed it:

- **mini-batches**: ``fit((x, y))`` or ``fit(epoch_data)`` with ``epoch_data(e) -> (x, y)`` (fresh augmentations
  every epoch). Each epoch draws one permutation from the trainer's generator and walks it in batches of
  ``batch_size``; ``augment(xb, generator)`` transforms each batch; the step loss is ``loss_fn(model(xb), yb)``
  plus ``penalty(model)``.
- **a full-batch objective**: ``fit()`` with ``objective(model) -> loss``; one epoch is one step.
- **a gradient of its own**: ``fit()`` with ``gradient(model) -> loss value``, which sets ``p.grad`` itself (the
  augmented and projected gradients of seed 002); the trainer takes the optimiser step.

The optimiser (Adam, AdamW, RMSprop, SGD with momentum) and the schedule (constant; cosine over all steps; or 'plateau':
multiply the rate by ``plateau_factor`` when the loss has not improved for ``plateau_patience`` steps, after
``warmup`` steps) come from the arguments; ``clip`` bounds the gradient norm.

Early stopping: ``validate(model) -> float`` runs after the first step, then every ``validate_every`` steps (and
after the last); it drives early stopping (``patience`` in steps) and the best parameters are restored at the end.
``monitor='loss'`` watches the step's own loss instead, measured before its update, so the restored parameters are
the ones that gave the best loss: the outer loop of a bilevel solver, whose loss is the validation objective once
the inner problem is solved. A value counts as better below ``best / (1 + improvement)``.

A smoke run's limits and the precision are arguments like any other: ``max_epochs`` / ``max_batches`` cut the
epochs and each epoch's batches (None: no limit), ``precision="bf16"`` runs the forward pass under a bfloat16
autocast. (``symkit reproduce --smoke`` / ``--precision`` reach a Trainer only through these arguments.)

``checkpoint=path`` saves the model, optimiser, schedule, generator and history after every epoch (atomically) and
``fit`` resumes from it, so an interrupted run loses at most one epoch and a resumed run gives the same numbers as an
uninterrupted one. While it trains, ``fit`` holds ``<checkpoint>.lock`` (:func:`symkit._locks.exclusive_file`): a
second process given the same checkpoint is refused (:class:`symkit._locks.RunInUse`) instead of writing the file in
turn with the first, each resuming the other's epochs as its own.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from symkit._checks import check_int, check_number
from symkit._locks import exclusive_file
from symkit.progress import progress_bar
from symkit.train.batching import batch_indices

__all__ = ["Hook", "TrainResult", "Trainer", "fused_options"]

OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
SCHEDULES = ("constant", "cosine", "plateau")
MONITORS = ("validation", "loss")
#: float32, or a bfloat16 autocast forward pass (no loss scaling needed, unlike float16, which is not offered)
PRECISIONS = ("32", "bf16")


def _autocast(precision: str, device_type: str) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to bfloat16 for the forward pass at ``precision="bf16"``; a no-op context at ``"32"``."""
    if precision == "32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)

Batch = tuple[torch.Tensor, torch.Tensor]


class Hook(Protocol):
    """Called after every epoch with the trainer, the epoch number (from 1) and the epoch's record, which the hook
    may extend (e.g. a marginal-likelihood update adds its value)."""

    def __call__(self, trainer: Trainer, epoch: int, record: dict[str, Any]) -> None: ...


FUSED_DEVICES = ("cpu", "cuda")  # where torch's fused Adam/AdamW kernels run


def fused_options(params: Iterable[torch.Tensor]) -> dict[str, bool]:
    """``{"fused": True}`` where torch's fused Adam/AdamW kernel applies (floating parameters, all on one CPU or
    CUDA device), else ``{}``. The fused kernel does the same update over every parameter in one pass instead of a
    loop of small ops per tensor: 3-6x cheaper steps for models of many small parameter tensors (EMLP, RPP)."""
    params = list(params)
    devices = {q.device for q in params}
    if len(devices) == 1 and next(iter(devices)).type in FUSED_DEVICES and all(q.is_floating_point() for q in params):
        return {"fused": True}
    return {}


@dataclass
class TrainResult:
    """What a fit did: one record per epoch (``loss``: mean step loss over the epoch's samples; ``seconds`` of
    training; ``train_acc`` when asked), the number of optimiser steps, the best validation value and whether early
    stopping ended the run."""

    history: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    best_validation: float | None = None
    stopped_early: bool = False
    resumed_from_epoch: int = 0

    @property
    def losses(self) -> list[float]:
        return [r["loss"] for r in self.history]


class Trainer:
    """Train ``model`` (module docstring). ``params`` restricts the optimiser to some parameters (default: every
    parameter that requires a gradient); gradients are taken only for them."""

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        *,
        objective: Callable[[nn.Module], torch.Tensor] | None = None,
        gradient: Callable[[nn.Module], float] | None = None,
        penalty: Callable[[nn.Module], torch.Tensor] | None = None,
        params: Iterable[nn.Parameter] | None = None,
        optimizer: str = "adam",
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        momentum: float = 0.9,
        schedule: str = "constant",
        lr_min: float = 0.0,
        epochs: int = 1,
        max_steps: int | None = None,
        batch_size: int | None = None,
        min_batch: int = 1,
        augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        seed: int = 0,
        validate: Callable[[nn.Module], float] | None = None,
        validate_every: int = 1,
        patience: int | None = None,
        hooks: Sequence[Hook] = (),
        accuracy: bool = False,
        checkpoint: str | os.PathLike | None = None,
        desc: str = "train",
        monitor: str = "validation",
        improvement: float = 0.0,
        clip: float | None = None,
        plateau_patience: int = 10,
        plateau_factor: float = 0.5,
        warmup: int = 0,
        precision: str = "32",
        max_epochs: int | None = None,
        max_batches: int | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"Trainer: model must be an nn.Module, got {type(model).__name__}")
        if sum(f is not None for f in (loss_fn, objective, gradient)) != 1:
            raise ValueError("Trainer: give exactly one of loss_fn (mini-batches), objective (full batch) and gradient "
                             "(a function that sets the gradients itself)")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"Trainer: optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if schedule not in SCHEDULES:
            raise ValueError(f"Trainer: schedule must be one of {SCHEDULES}, got {schedule!r}")
        if monitor not in MONITORS:
            raise ValueError(f"Trainer: monitor must be one of {MONITORS}, got {monitor!r}")
        if monitor == "loss" and validate is not None:
            raise ValueError("Trainer: monitor='loss' watches the step's own loss; give no validate function")
        for name, value in (("improvement", improvement), ("clip", 1.0 if clip is None else clip)):
            check_number(f"Trainer: {name}", value)
        if not 0 < plateau_factor < 1:
            raise ValueError(f"Trainer: plateau_factor must be in (0, 1), got {plateau_factor!r}")
        for name, value in (("lr", lr), ("weight_decay", weight_decay), ("lr_min", lr_min)):
            check_number(f"Trainer: {name}", value)
        self.model = model
        self.loss_fn, self.objective, self.gradient, self.penalty = loss_fn, objective, gradient, penalty
        self.params = [p for p in (model.parameters() if params is None else params) if p.requires_grad]
        if not self.params:
            raise ValueError("Trainer: nothing to train (no parameter requires a gradient)")
        self.optimizer_name, self.lr, self.weight_decay, self.momentum = optimizer, float(lr), weight_decay, momentum
        self.schedule, self.lr_min = schedule, lr_min
        self.epochs = check_int("Trainer: epochs", epochs, 1)
        if precision not in PRECISIONS:
            raise ValueError(f"Trainer: precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.precision = precision
        self.max_epochs = None if max_epochs is None else check_int("Trainer: max_epochs", max_epochs, 1)
        self.max_batches = None if max_batches is None else check_int("Trainer: max_batches", max_batches, 1)
        self.max_steps = None if max_steps is None else check_int("Trainer: max_steps", max_steps, 1)
        self.batch_size = None if batch_size is None else check_int("Trainer: batch_size", batch_size, 1)
        self.min_batch = check_int("Trainer: min_batch", min_batch, 1)
        self.augment = augment
        self.generator = generator if generator is not None else torch.Generator().manual_seed(seed)
        self.validate, self.patience = validate, None if patience is None else check_int("Trainer: patience",
                                                                                          patience, 1)
        self.validate_every = check_int("Trainer: validate_every", validate_every, 1)
        self.hooks = list(hooks)
        self.accuracy = accuracy
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.desc = desc
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
        self.stop = False  # a hook may set it to end the run after the current epoch
        self.monitor, self.improvement, self.clip = monitor, float(improvement), clip
        self.plateau_patience = check_int("Trainer: plateau_patience", plateau_patience, 0)
        self.plateau_factor, self.warmup = float(plateau_factor), check_int("Trainer: warmup", warmup, 0)
        self._best_state: list[torch.Tensor] | None = None
        self._wait = 0

    # ---------------------------------------------------------------------------------------------- set-up
    def _make_optimizer(self, steps_per_epoch: int) -> None:
        if self.optimizer_name == "adam":
            opt = torch.optim.Adam(self.params, lr=self.lr, weight_decay=self.weight_decay,
                                   **fused_options(self.params))
        elif self.optimizer_name == "adamw":
            opt = torch.optim.AdamW(self.params, lr=self.lr, weight_decay=self.weight_decay,
                                    **fused_options(self.params))
        elif self.optimizer_name == "rmsprop":
            opt = torch.optim.RMSprop(self.params, lr=self.lr, weight_decay=self.weight_decay)
        else:
            opt = torch.optim.SGD(self.params, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay)
        self.optimizer = opt
        self.scheduler = None
        if self.schedule == "cosine":
            self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
                opt, T_max=max(1, self.epochs * steps_per_epoch), eta_min=self.lr_min)
        elif self.schedule == "plateau":
            self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                opt, factor=self.plateau_factor, patience=self.plateau_patience, min_lr=self.lr_min)

    def _data_of(self, data: Any) -> Callable[[int], Batch] | None:
        if data is None:
            if self.loss_fn is not None:
                raise ValueError("Trainer.fit: mini-batch training (loss_fn) needs data: (x, y) or epoch -> (x, y)")
            return None
        if self.loss_fn is None:
            raise ValueError("Trainer.fit: a full-batch objective or gradient takes no data")
        if callable(data):
            return data
        if isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data):
            if len(data[0]) != len(data[1]):
                raise ValueError(f"Trainer.fit: x has {len(data[0])} samples but y has {len(data[1])}")
            return lambda epoch: (data[0], data[1])
        raise TypeError(f"Trainer.fit: data must be (x, y) tensors or a callable epoch -> (x, y), got "
                        f"{type(data).__name__}")

    # ---------------------------------------------------------------------------------------------- the loop
    def fit(self, data: Any = None) -> TrainResult:
        """Train for ``epochs`` (or ``max_steps``); resume from ``checkpoint`` when it exists, holding it meanwhile
        (a second process given the same checkpoint is refused with :class:`symkit._locks.RunInUse`)."""
        epoch_data = self._data_of(data)
        lock = None if self.checkpoint is None else self.checkpoint.with_name(self.checkpoint.name + ".lock")
        with exclusive_file(lock, "Trainer", held=self.checkpoint):
            return self._fit(epoch_data)

    def _fit(self, epoch_data: Callable[[int], Batch] | None) -> TrainResult:
        first = epoch_data(0) if epoch_data is not None else None
        n = len(first[0]) if first is not None else 1
        if first is not None and n == 0:
            raise ValueError("Trainer.fit: no training samples")
        bs = n if self.batch_size is None else min(self.batch_size, n)
        steps_per_epoch = math.ceil(n / bs) if first is not None else 1
        self._make_optimizer(steps_per_epoch)
        result = TrainResult()
        self._best_state, self._wait = None, 0
        start_epoch = self._resume(result)
        epochs = self.epochs if self.max_epochs is None else min(self.epochs, self.max_epochs)  # a smoke run's limit
        total = epochs * steps_per_epoch if self.max_steps is None else min(self.max_steps, epochs * steps_per_epoch)
        bar = progress_bar(desc=self.desc, total=total, initial=min(result.steps, total))
        self.stop = False
        for epoch in range(start_epoch + 1, epochs + 1):
            if result.steps >= total or self.stop:
                break
            self.model.train()
            if epoch_data is None:
                batches: Iterable[Batch | None] = [None]
                n_seen = 1
            else:
                x, y = first if epoch == 1 and first is not None else epoch_data(epoch - 1)
                batches = ((x[idx], y[idx]) for idx in batch_indices(len(x), bs, self.generator)
                           if idx.numel() >= self.min_batch)
                n_seen = 0
            loss_sum, correct = 0.0, 0
            t0 = time.perf_counter()
            for batch in islice(batches, self.max_batches):
                if result.steps >= total:
                    break
                loss, out, count = self._step(batch, result)
                if loss.device.type != "meta":  # meta tensors carry no values to report
                    loss_sum += float(loss.detach()) * count
                if batch is not None:
                    n_seen += count
                    if self.accuracy and out.device.type != "meta":
                        correct += int((out.argmax(-1) == batch[1].to(out.device)).sum())
                if result.stopped_early and self.monitor == "loss":
                    break  # the step's loss ended the run before its update
                result.steps += 1
                bar.update(1)
                if self.validate is not None and ((result.steps - 1) % self.validate_every == 0
                                                  or result.steps == total):
                    with torch.no_grad():
                        value = float(self.validate(self.model))
                    if self._observe(value, result, self.validate_every):
                        break
            record: dict[str, Any] = {"epoch": epoch, "loss": loss_sum / max(n_seen, 1),
                                      "seconds": time.perf_counter() - t0}
            if self.accuracy and epoch_data is not None:
                record["train_acc"] = correct / max(n_seen, 1)
            for hook in self.hooks:
                hook(self, epoch, record)
            result.history.append(record)
            self._save(epoch, result)
        bar.close()
        if self._best_state is not None:
            with torch.no_grad():
                for p, s in zip(self.params, self._best_state):
                    p.copy_(s)
        return result

    def _observe(self, value: float, result: TrainResult, steps: int) -> bool:
        """Keep the best value (and the parameters that gave it) of the monitored quantity; True when ``patience``
        has run out. Better means below ``best / (1 + improvement)``."""
        best = result.best_validation
        if best is None or value < best / (1 + self.improvement):
            result.best_validation, self._wait = value, 0
            self._best_state = [p.detach().clone() for p in self.params]
            return False
        self._wait += steps
        if self.patience is not None and self._wait >= self.patience:
            result.stopped_early = self.stop = True
            return True
        return False

    def _update(self, loss_value: float, result: TrainResult) -> None:
        """Clip, step the optimiser and the schedule (the plateau schedule on the step's loss, after ``warmup``)."""
        if self.clip is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.optimizer.step()
        if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            if result.steps >= self.warmup:
                self.scheduler.step(loss_value)
        elif self.scheduler is not None:
            self.scheduler.step()

    def _step(self, batch: Batch | None, result: TrainResult) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """One optimiser step. With ``monitor='loss'`` the loss is observed before the update (so the best
        parameters are the ones that gave it), and an exhausted patience skips the update."""
        assert self.optimizer is not None
        out = None
        if self.gradient is not None:  # the method fills .grad itself (e.g. projected or augmented gradients)
            value = float(self.gradient(self.model))
            if self.monitor == "loss" and self._observe(value, result, 1):
                return torch.tensor(value, dtype=torch.float64), None, 1
            self._update(value, result)
            return torch.tensor(value, dtype=torch.float64), None, 1
        if batch is None:
            loss = self.objective(self.model)
            count = 1
        else:
            xb, yb = self._to_model(batch)
            if self.augment is not None:
                xb = self.augment(xb, self.generator)
            with _autocast(self.precision, xb.device.type):  # bfloat16 forward at precision="bf16"
                out = self.model(xb)
                loss = self.loss_fn(out, yb)
            count = len(xb)
        if self.penalty is not None:
            loss = loss + self.penalty(self.model)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward(inputs=self.params)
        value = float(loss.detach()) if loss.device.type != "meta" else 0.0
        if self.monitor == "loss" and self._observe(value, result, 1):
            return loss, out, count
        self._update(value, result)
        return loss, out, count

    def _to_model(self, batch: Batch) -> Batch:
        """The batch on the device of the trained parameters (data may stay on the CPU while the model is on a GPU)."""
        device = self.params[0].device if self.params else batch[0].device
        if batch[0].device == device:
            return batch
        return batch[0].to(device, non_blocking=True), batch[1].to(device, non_blocking=True)

    # ---------------------------------------------------------------------------------------------- checkpoints
    def _save(self, epoch: int, result: TrainResult) -> None:
        if self.checkpoint is None:
            return
        state = {
            "epoch": epoch, "steps": result.steps, "history": result.history,
            "best_validation": result.best_validation, "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "generator": self.generator.get_state(),
        }
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.checkpoint.with_name(self.checkpoint.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint)

    def _check_state(self, state: Any) -> None:
        """Raise ``ValueError`` naming the checkpoint file and what it lacks unless ``state`` is what :meth:`_save`
        writes (a file of another program, or of another kind, is refused before any of it is loaded)."""
        where = f"Trainer: cannot resume from {self.checkpoint}"
        hint = "delete it to start over, or pass another checkpoint="
        if not isinstance(state, dict):
            raise ValueError(f"{where}: it holds a {type(state).__name__}, not a Trainer checkpoint (a dict of "
                             f"{', '.join(_CHECKPOINT_FIELDS)}); {hint}")
        missing = [key for key in _CHECKPOINT_FIELDS if key not in state]
        if missing:
            raise ValueError(f"{where}: it lacks {', '.join(map(repr, missing))} of a Trainer checkpoint; {hint}")
        for key, types, expected in _CHECKPOINT_TYPES:
            value = state[key]
            if isinstance(value, bool) or not isinstance(value, types):
                raise ValueError(f"{where}: its {key!r} is {type(value).__name__}, expected {expected}; {hint}")
        if not all(isinstance(record, dict) for record in state["history"]):
            raise ValueError(f"{where}: its 'history' is not a list of per-epoch records (dicts); {hint}")

    def _resume(self, result: TrainResult) -> int:
        if self.checkpoint is None or not self.checkpoint.exists():
            return 0
        import pickle

        try:
            state = torch.load(self.checkpoint, map_location="cpu", weights_only=True)
        except (RuntimeError, KeyError, ValueError, OSError, EOFError, pickle.UnpicklingError) as exc:
            raise ValueError(f"Trainer: cannot resume from {self.checkpoint}: {exc}; delete it to start over") from exc
        self._check_state(state)
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scheduler is not None and state["scheduler"] is not None:
                self.scheduler.load_state_dict(state["scheduler"])
            self.generator.set_state(state["generator"])
        except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as exc:
            raise ValueError(f"Trainer: cannot resume from {self.checkpoint}: {type(exc).__name__}: {exc}; delete it "
                             "to start over") from exc
        result.history = list(state["history"])
        result.steps = int(state["steps"])
        result.best_validation = state["best_validation"]
        result.resumed_from_epoch = int(state["epoch"])
        return result.resumed_from_epoch


#: what a checkpoint of :class:`Trainer` holds, and the types its fields are read as
_CHECKPOINT_FIELDS = ("epoch", "steps", "history", "best_validation", "model", "optimizer", "scheduler", "generator")
_CHECKPOINT_TYPES = (
    ("epoch", (int,), "an int"), ("steps", (int,), "an int"), ("history", (list,), "a list"),
    ("best_validation", (int, float, type(None)), "a number or None"), ("model", (dict,), "a state dict"),
    ("optimizer", (dict,), "a state dict"), ("scheduler", (dict, type(None)), "a state dict or None"),
    ("generator", (torch.Tensor,), "a generator state (tensor)"),
)
