"""Nominal, augmented and equivariant training (paper §3.2, §5; notes A.7.2) and drift tracking.

One "epoch" is one full-batch gradient step: the gradient is accumulated over the mini-batches (each loss divided
by the number of batches K) and one plain gradient-descent step ``A <- A - lr * grad`` is taken.

- ``"nominal"``: the gradient of the empirical risk R (Eq. 2).
- ``"augmented"``: N passes; each mini-batch is transformed by one exactly uniform (Haar) group element, inputs and,
  when the output representation is not trivial, targets; loss / (K N). ``exact=True`` averages every mini-batch over
  the whole group instead, which is the gradient of the augmented risk R^aug (Eq. 5) exactly.
- ``"equivariant"``: the nominal gradient projected onto E, i.e. the gradient of R^eqv(A) = R(Pi_E A) at A in E
  (Eq. 4, 21).

``penalty=gamma`` adds gamma ||A - Pi_E A||^2 (§4.2) to the loss of any mode. The tracker records, per layer, the
distance travelled ||A - A^0|| and the distance to E ||A - Pi_E A|| (Frobenius), and their totals as the square root
of the sum of squared layer norms (not the reference code's fourth-power sum, notes A.7.5 item 5).

``max_batches`` (a smoke run's limit) sums the gradient over the first mini-batches only (of all N passes, for
``"augmented"``), and ``max_steps`` cuts the number of steps. Models and data may be on any device; they must be on
the same one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice

import numpy as np
import torch

from symkit.actions.grid import Element, act
from symkit.dynamics.model import ProjectNet
from symkit.train import Trainer, batch_indices

__all__ = ["MODES", "LOSSES", "full_batch_gradient", "train", "Trajectory", "distances",
           "projectnet_equivariance_error"]

MODES = ("nominal", "augmented", "equivariant")

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _bce(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.binary_cross_entropy_with_logits(out, y.to(out.dtype))


def _pixel_bce(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # Eq. 45: sum over the mask channels of the pixel-wise BCE, averaged over pixels and samples
    return torch.nn.functional.binary_cross_entropy_with_logits(out, y.to(out.dtype), reduction="none").mean(
        dim=tuple(range(2, out.ndim))
    ).sum(dim=1).mean()


def _ce(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(out.reshape(out.shape[0], -1), y)


def _mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((out - y.to(out.dtype)) ** 2).mean()


#: invariant losses (Assumption 3): pixel-wise or on trivially acted outputs
LOSSES: dict[str, Loss] = {"bce": _bce, "pixel_bce": _pixel_bce, "ce": _ce, "mse": _mse}


def _loss(loss: str | Loss) -> Loss:
    if callable(loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)} or a callable, got {loss!r}")
    return LOSSES[loss]


def _check_limit(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive int or None, got {value!r}")


def _transform(model: ProjectNet, x: torch.Tensor, y: torch.Tensor, g) -> tuple[torch.Tensor, torch.Tensor]:
    x = act(model.action_in, x, g)
    if not model.action_out.is_trivial and y.ndim >= len(model.action_out.shape) + 1:
        y = act(model.action_out, y, g)
    return x, y


def full_batch_gradient(
    model: ProjectNet,
    X: torch.Tensor,
    Y: torch.Tensor,
    mode: str = "nominal",
    loss: str | Loss = "mse",
    batch_size: int | None = None,
    aug_passes: int = 25,
    exact: bool = False,
    penalty: float = 0.0,
    generator: torch.Generator | None = None,
    max_batches: int | None = None,
) -> float:
    """Set ``p.grad`` of every parameter to the full-batch gradient of ``mode``; returns the (mode's) loss.
    ``max_batches`` keeps the first mini-batches only (a smoke run; None: all)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not isinstance(model, ProjectNet):
        raise TypeError(f"expected a ProjectNet, got {type(model).__name__}")
    if len(X) != len(Y):
        raise ValueError(f"X has {len(X)} samples but Y has {len(Y)}")
    if aug_passes < 1:
        raise ValueError(f"aug_passes must be >= 1, got {aug_passes}")
    _check_limit("max_batches", max_batches)
    fn = _loss(loss)
    model.zero_grad(set_to_none=False)
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    slices = batch_indices(len(X), batch_size)
    K = len(slices)
    total = 0.0
    if mode == "augmented" and exact:
        elements = list(model.action_in.elements())
        for sl in islice(slices, max_batches):
            for g in elements:
                xg, yg = _transform(model, X[sl], Y[sl], g)
                value = fn(model(xg), yg) / (K * len(elements))
                value.backward()
                total += float(value.detach())
    elif mode == "augmented":
        for sl in islice((sl for _ in range(aug_passes) for sl in slices), max_batches):
            g = model.action_in.sample(generator)
            xg, yg = _transform(model, X[sl], Y[sl], g)
            value = fn(model(xg), yg) / (K * aug_passes)
            value.backward()
            total += float(value.detach())
    else:
        for sl in islice(slices, max_batches):
            value = fn(model(X[sl]), Y[sl]) / K
            value.backward()
            total += float(value.detach())
    with torch.no_grad():
        for i, kind, p in model.layer_params():
            if mode == "equivariant":
                p.grad.copy_(model.project_tensor(i, kind, p.grad))
            if penalty:
                perp = p - model.project_tensor(i, kind, p)
                p.grad.add_(perp, alpha=2.0 * penalty)  # grad of gamma ||(I - Pi_E) A||^2
                total += penalty * float((perp**2).sum())
    return total


def distances(model: ProjectNet, start: list[torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """Per parameter: ||A - A^0|| and ||A - Pi_E A|| (Frobenius), in ``model.layer_params()`` order."""
    travelled, to_e = [], []
    with torch.no_grad():
        for (i, kind, p), p0 in zip(model.layer_params(), start):
            travelled.append(float((p - p0).double().norm()))
            to_e.append(float((p - model.project_tensor(i, kind, p)).double().norm()))
    return np.array(travelled), np.array(to_e)


@dataclass
class Trajectory:
    """Per step (row 0 = start) and per parameter: distance travelled and distance to E, with the losses."""

    mode: str
    travelled: np.ndarray  # (steps + 1, params)
    to_e: np.ndarray  # (steps + 1, params)
    loss: list[float] = field(default_factory=list)
    head: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # True for FC-head parameters

    def total(self, what: str = "to_e", include_head: bool = True) -> np.ndarray:
        """sqrt(sum over parameters of the squared norms) per step."""
        if what not in ("to_e", "travelled"):
            raise ValueError(f"what must be 'to_e' or 'travelled', got {what!r}")
        arr = getattr(self, what)
        keep = np.ones(arr.shape[1], dtype=bool) if include_head or not len(self.head) else ~self.head
        return np.sqrt((arr[:, keep] ** 2).sum(axis=1))




def train(
    model: ProjectNet,
    X: torch.Tensor,
    Y: torch.Tensor,
    mode: str = "nominal",
    steps: int = 50,
    lr: float = 1e-3,
    loss: str | Loss = "mse",
    batch_size: int | None = None,
    aug_passes: int = 25,
    exact: bool = False,
    penalty: float = 0.0,
    seed: int = 0,
    max_steps: int | None = None,
    max_batches: int | None = None,
) -> Trajectory:
    """``steps`` full-batch gradient-descent steps of ``mode`` on ``model`` (in place); the tracked trajectory.

    Augmentation draws its group elements from ``torch.Generator().manual_seed(seed)``. A smoke run's limits:
    ``max_steps`` cuts ``steps``, ``max_batches`` the mini-batches summed per step (None: no limit).
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    _check_limit("max_steps", max_steps)
    _check_limit("max_batches", max_batches)
    steps = steps if max_steps is None else min(steps, max_steps)
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    gen = torch.Generator().manual_seed(seed)
    start = [p.detach().clone() for _, _, p in model.layer_params()]
    head = np.array([model.specs[i].is_trivial for i, _, _ in model.layer_params()])
    t, e = distances(model, start)
    travelled, to_e, losses = [t], [e], []

    def track(trainer: Trainer, epoch: int, record: dict) -> None:
        losses.append(record["loss"])
        t, e = distances(model, start)
        travelled.append(t)
        to_e.append(e)

    if steps > 0:  # plain gradient descent, A <- A - lr * grad: SGD without momentum, one full-batch step per epoch
        Trainer(model, gradient=lambda m: full_batch_gradient(m, X, Y, mode, loss, batch_size, aug_passes, exact,
                                                             penalty, generator=gen, max_batches=max_batches),
                optimizer="sgd", momentum=0.0, lr=lr, epochs=steps, hooks=[track], desc=mode).fit()
    return Trajectory(mode, np.array(travelled), np.array(to_e), losses, head)


def projectnet_equivariance_error(model: ProjectNet, X: torch.Tensor,
                                  elements: Iterable[Element] | None = None) -> float:
    """max over samples and g of ||Phi(rho_X(g) x) - rho_Y(g) Phi(x)|| / max ||Phi(x)|| (functional error)."""
    elements = list(model.action_in.elements()) if elements is None else list(elements)
    with torch.no_grad():
        out = model(X)
        scale = float(out.flatten(1).norm(dim=1).max().clamp_min(1e-30))
        worst = 0.0
        for g in elements:
            a = model(act(model.action_in, X, g))
            b = act(model.action_out, out, g)
            worst = max(worst, float((a - b).flatten(1).norm(dim=1).max()))
    return worst / scale
