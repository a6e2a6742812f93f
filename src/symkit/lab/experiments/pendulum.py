"""Learning the 3D double spring pendulum with Hamiltonian networks and Neural ODEs (thesis Sec. 2.7.2, Table 2.2).

Models: a Hamiltonian network (``kind="hnn"``, ``dz/dt = J grad H``, ``H`` a scalar network) or a Neural ODE
(``kind="node"``, ``dz/dt = F(z)``), whose network is an MLP or an EMLP for SO(2), O(2) or D6 about the z-axis
(``model``). They are trained, as in the thesis and the authors' code, through ODE rollouts: each training chunk's
start state is integrated over the chunk's five times (0, 0.2, ..., 0.8 s), and the loss is the MSE against the
observed states; Adam at 3e-3, batch 500, 2000 epochs, 3 layers of 128 channels, no early stopping and a constant
rate. The authors integrate with an adaptive solver at rtol 1e-4 (``method="dopri5"`` here); the default is RK4
with one step per 0.2 s, as accurate on these chunks (an MSE of 2e-9 against the data for the true field, far
below any model's) at 16 field evaluations per rollout instead of about 26 (docs/ode.md, Decisions). The metric
is Table 2.2's: from each test chunk's start state, the model's and the true system's 30 s rollouts (150 states
0.2 s apart, the start included as in the authors' code) give the geometric mean over time of the relative error
``|a - b| / (|a| + |b|)`` (clamped at 1e-7); the reported ``rollout_error`` is its geometric mean over the test
systems. Also reported: the per-step MSE on the test chunks,
the same rollout error of the constant prediction ``z(t) = z0`` (a floor any learned model must beat), and the drift
of the angular momentum about z along the model's rollouts (conserved by an HNN with a continuous rotation
symmetry, Figure 2.6).

``wind=True`` runs the same on the windy pendulum of Sec. 3.5.1. The training is the library's
:func:`symkit.train.train_dynamics`, the metrics :func:`symkit.train.evaluate_dynamics` (Table 2.2's, for any
dynamics module, e.g. an RPP-EMLP inside a :class:`~symkit.nn.HamiltonianNet`).
The measured cost and the sizes run are in docs/ode.md.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from symkit.datasets.pendulum import (
    SPRING_FORMS,
    PendulumChunks,
    PendulumData,
    pendulum_data,
)
from symkit.groups import DkeR3, Group, O2eR3, SO2eR3
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, CountOrZero, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, register
from symkit.nn import EMLP, MLP, HamiltonianNet, NeuralODE, rep_statistics, rollout
from symkit.nn.ode import ADAPTIVE_METHODS
from symkit.reps import Scalar, V
from symkit.train import evaluate_dynamics, train_dynamics

__all__ = ["KINDS", "MODELS", "PendulumConfig", "build_dynamics", "cached_data", "run"]

KINDS = ("hnn", "node")
MODELS = ("mlp", "emlp-so2", "emlp-o2", "emlp-d6")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
_GROUPS: dict[str, Callable[[], Group]] = {"emlp-so2": SO2eR3, "emlp-o2": O2eR3, "emlp-d6": lambda: DkeR3(6)}


@dataclass
class PendulumConfig:
    """The settings of one pendulum run (an HNN or Neural ODE on the 3D double spring pendulum, thesis
    Sec. 2.7 and 3.5); the defaults are the default scale, ``quick`` and ``paper`` change them."""
    kind: str = "hnn"  # "hnn" (J grad H) or "node" (F(z))
    model: str = "emlp-o2"  # "mlp", "emlp-so2", "emlp-o2", "emlp-d6"
    wind: bool = False  # the windy pendulum of Sec. 3.5.1
    spring: str = "code"  # the second spring term: "code" k2 (...)^2 (Table 2.2's data) or "thesis" 1/2 k2 (...)^2
    n_train: Count = 500
    n_val: Count = 500
    n_test: Count = 500
    ch: Count = 128
    num_layers: Count = 3
    epochs: Count = 2000
    batch_size: Count = 500
    lr: Positive = 3e-3
    method: str = "rk4"  # the training solver: "rk4" (fixed steps) or an adaptive method such as "dopri5"
    step_size: NonNegative = 0.0  # for fixed-grid methods; 0: the chunk spacing, 0.2 s (docs/ode.md: accuracy)
    rtol: Positive = 1e-4  # adaptive training solves (the authors' code: dopri5-like at rtol 1e-4)
    atol: Positive = 1e-6
    eval_rtol: Positive = 1e-4  # the model's 30 s test rollouts (the authors' code)
    rollout_time: Positive = 30.0
    n_rollouts: CountOrZero = 0  # test systems rolled out for 30 s (0: all)
    dtype: str = "float32"  # the models' dtype (the data are made in float64)
    standardize: bool = True  # divide the state by one RMS scale per 3-vector (docs/ode.md: why)
    seed: Seed = 0


def _validate(config: PendulumConfig) -> None:
    for name, value, allowed in (("kind", config.kind, KINDS), ("model", config.model, MODELS),
                                 ("spring", config.spring, SPRING_FORMS), ("dtype", config.dtype, tuple(DTYPES))):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    if config.method not in (*ADAPTIVE_METHODS, "rk4", "midpoint", "euler"):
        raise ValueError(f"method must be an adaptive method {ADAPTIVE_METHODS} or 'rk4', 'midpoint', 'euler', "
                         f"got {config.method!r}")


def state_scale(chunks: PendulumChunks) -> torch.Tensor:
    """One scale per 3-vector of the state (x1, x2, p1, p2): the RMS of its entries over every state of the chunks
    (:func:`~symkit.nn.rep_statistics`), shape ``(12,)``. Dividing by it keeps every symmetry about the z-axis."""
    return rep_statistics(chunks.z.reshape(-1, chunks.z.shape[-1]), 4 * V(O2eR3()))[1]


def build_dynamics(kind: str, model: str, ch: int = 128, num_layers: int = 3, *,
                   input_scale: torch.Tensor | None = None, device: object = None,
                   dtype: torch.dtype | None = None) -> nn.Module:
    """The vector field of the pendulum's state ``4 V`` (12 numbers): ``HamiltonianNet(h)`` with ``h: 4 V ->
    Scalar`` for ``kind="hnn"``, ``NeuralODE(f)`` with ``f: 4 V -> 4 V`` for ``kind="node"``; ``h`` or ``f`` is an
    MLP or an EMLP of the group ``model`` names (about the z-axis), fed the state divided by ``input_scale``
    (:func:`state_scale`)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    f = {"device": device, "dtype": dtype}
    if model == "mlp":
        net = MLP(12, 1 if kind == "hnn" else 12, ch=ch, num_layers=num_layers, **f)
    else:
        G = _GROUPS[model]()
        net = EMLP(4 * V(G), Scalar if kind == "hnn" else 4 * V(G), G, ch=ch, num_layers=num_layers, **f)
    if input_scale is not None:
        input_scale = input_scale.to(device=device, dtype=dtype or torch.get_default_dtype())
    return HamiltonianNet(net, input_scale) if kind == "hnn" else NeuralODE(net, input_scale)


@functools.lru_cache(maxsize=4)
def cached_data(n_train: int, n_val: int, n_test: int, seed: int, wind: bool, spring: str = "code") -> PendulumData:
    """:func:`~symkit.datasets.pendulum.pendulum_data`, kept for the runs of one process that share it (the
    integration of 1500 systems over 30 s is the costly part)."""
    return pendulum_data(n_train, n_val, n_test, seed, wind=wind, spring=spring)


def run(config: PendulumConfig) -> dict:
    """Train one model (``kind``, ``model``) on the pendulum data of ``seed`` and report Table 2.2's metrics."""
    _validate(config)
    data = cached_data(config.n_train, config.n_val, config.n_test, config.seed, config.wind, config.spring)
    torch.manual_seed(config.seed)
    scale = state_scale(data.train) if config.standardize else None
    dynamics = build_dynamics(config.kind, config.model, config.ch, config.num_layers, input_scale=scale,
                              device=runtime.device(), dtype=DTYPES[config.dtype])
    start = time.perf_counter()
    result = train_dynamics(dynamics, data.train, **runtime.trainer_settings(),
                            epochs=config.epochs, lr=config.lr, batch_size=config.batch_size,
                            method=config.method, rtol=config.rtol, atol=config.atol,
                            step_size=config.step_size or None, seed=config.seed,
                            desc=f"{config.kind}/{config.model}")
    seconds = time.perf_counter() - start
    metrics = evaluate_dynamics(dynamics, data, n_rollouts=config.n_rollouts, rollout_time=config.rollout_time,
                                eval_rtol=config.eval_rtol)
    dyn = dynamics.eval()
    with torch.no_grad():
        z0, times, z = (t.to(device=runtime.device(), dtype=DTYPES[config.dtype])
                        for t in (data.val.z0, data.val.times, data.val.z))
        val_mse = float((rollout(dyn, z0, times, rtol=config.eval_rtol) - z).square().mean())
    return {**metrics, "val_mse": val_mse, "train_loss": result.losses[-1], "train_seconds": seconds,
            "seconds_per_epoch": seconds / config.epochs}


# Table 2.2: geometric-mean rollout error over 30 s, mean (std) of 3 trials (the MLP rows have no std)
_TABLE_2_2 = {
    ("node", "emlp-o2"): (0.019, 0.001), ("node", "emlp-so2"): (0.051, 0.036), ("node", "emlp-d6"): (0.036, 0.025),
    ("node", "mlp"): (0.048, None),
    ("hnn", "emlp-o2"): (0.012, 0.002), ("hnn", "emlp-so2"): (0.015, 0.003), ("hnn", "emlp-d6"): (0.013, 0.002),
    ("hnn", "mlp"): (0.028, None),
}
PAPER = [PaperValue("rollout_error", value, {"kind": kind, "model": model, "wind": False},
                    "Table 2.2 (3 trials; its std / sqrt(3) as the standard error)",
                    None if std is None else std / math.sqrt(3))
         for (kind, model), (value, std) in _TABLE_2_2.items()]

EXPERIMENT = register(
    Experiment(
        name="pendulum",
        description="HNNs and Neural ODEs (MLP, EMLP for SO(2), O(2), D6) on the 3D double spring pendulum: "
                    "30 s rollout error",
        reproduces="thesis Sec. 2.7.2, Table 2.2: EMLP-HNNs with O(2) roll out the pendulum best (0.012 against "
                   "the MLP-HNN's 0.028)",
        config=PendulumConfig,
        run=run,
        validate=_validate,
        quick={"n_train": 100, "n_val": 20, "n_test": 20, "ch": 32, "num_layers": 2, "epochs": 100,
               "batch_size": 100, "n_rollouts": 10, "rollout_time": 10.0},
        sweep={"kind": KINDS, "model": MODELS, "seed": (0, 1, 2)},
        quick_sweep={"kind": ("hnn",), "model": ("mlp", "emlp-o2"), "seed": (0,)},
        paper=PAPER,
        plots=(Plot(x="model", y="rollout_error", hue="kind", kind="bar", logy=True,
                    title="30 s rollout error (Table 2.2)"),),
    )
)
