"""Levels of symmetry (thesis Sec. 3.5.1, Figure 3.2): an MLP, an EMLP and an RPP-EMLP when the symmetry built in
is exact, approximate, or misspecified.

Panels (``dataset`` x ``setting``; the data set and the group the EMLP and the RPP's equivariant path use):

| dataset | exact | approximate | misspecified |
|---|---|---|---|
| ``inertia`` | inertia, O(3) | modified inertia, O(3) | inertia, SL(3) |

The thesis replaces the group by a larger one that the data does not respect for the misspecified panels; it does
not say on which variant of the data. symkit uses the exact data, so that the group is the only thing that is
wrong (the former ``rpp-inertia`` experiment used the modified data there).

RPP priors as weight decays on the mean squared error, the authors' inertia settings (``equivariant_wd = 1e-3`` on
the equivariant coefficients, ``basic_wd = 1e2`` on the flexible path): ``loss = MSE + wd_a |beta|^2 + wd_b |B|^2``.
Their ratio is the thesis's ``sigma_a^2 / sigma_b^2 = 1e5``; as a Gaussian prior beside a unit-variance likelihood
summed over ``N`` points, ``sigma^2 = 1 / (N wd)``, i.e. ``sigma_a^2 = 1`` and ``sigma_b^2 = 1e-5`` at N = 1000. The
thesis's absolute values (``sigma_a^2 = 1e5``, ``sigma_b^2 = 1``) penalise the flexible path 1e5 times less; with them
the RPP lets its flexible path fit the exact data and ends far above the EMLP (docs/emlp.md). Inputs and outputs are
scaled by :class:`~symkit.nn.Standardize`, which keeps every symmetry; the loss is in the target's units, as in the
authors' code. The full size is the
thesis's (A.2.3.1 and the authors' code): 1000 training and 1000 test points, 3 layers of 384 channels, 500
epochs, Adam at 3e-3, batch 500, 10 trials. The thesis shows box plots only; its claims are orderings: RPP ~ EMLP
< MLP when exact, RPP below both when approximate, RPP ~ MLP < EMLP when misspecified.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from symkit.datasets.tasks import task
from symkit.experiments.fields import Count, CountOrZero, Positive, Seed
from symkit.experiments.registry import Experiment, Plot, register
from symkit.groups import SL, O
from symkit.nn import EMLP, MLP, Standardize
from symkit.nn.rpp import RPPEMLP, equivariant_fraction, rpp_penalty
from symkit.train import Trainer

DATASETS = ("inertia",)
SETTINGS = ("exact", "approximate", "misspecified")
MODELS = ("mlp", "emlp", "rpp")

#: (dataset, setting) -> (task name, the group the equivariant models use)
PANELS = {
    ("inertia", "exact"): ("inertia", lambda: O(3)),
    ("inertia", "approximate"): ("modified-inertia", lambda: O(3)),
    ("inertia", "misspecified"): ("inertia", lambda: SL(3)),
}


@dataclass
class Config:
    dataset: str = "inertia"
    setting: str = "approximate"
    model: str = "rpp"
    n_train: Count = 1000
    n_test: Count = 1000
    ch: Count = 384
    num_layers: CountOrZero = 3
    epochs: Count = 500
    batch_size: Count = 500
    lr: Positive = 3e-3
    equivariant_wd: Positive = 1e-3
    basic_wd: Positive = 1e2
    seed: Seed = 0


def _check(config: Config) -> None:
    for name, allowed in (("dataset", DATASETS), ("setting", SETTINGS), ("model", MODELS)):
        if getattr(config, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(config, name)!r}")


def build_model(config: Config, rep_in, rep_out, G) -> torch.nn.Module:
    """The MLP, the EMLP or the RPP-EMLP of ``config.model`` for reps of the group ``G``."""
    if config.model == "mlp":
        return MLP(rep_in.size, rep_out.size, ch=config.ch, num_layers=config.num_layers)
    cls = EMLP if config.model == "emlp" else RPPEMLP
    return cls(rep_in, rep_out, G, ch=config.ch, num_layers=config.num_layers)


def run(config: Config) -> dict:
    """Train one model on one panel; report its test MSE (in the target's units) and, for the RPP, the share of
    the linear weights carried by the equivariant path."""
    _check(config)
    task_name, group = PANELS[config.dataset, config.setting]
    data, G = task(task_name), group()
    rep_in, rep_out = data.reps(G)
    x_train, y_train = (t.float() for t in data.generate(config.n_train, seed=2 * config.seed))
    x_test, y_test = (t.float() for t in data.generate(config.n_test, seed=2 * config.seed + 1))
    torch.manual_seed(config.seed)
    model = Standardize(build_model(config, rep_in, rep_out, G), rep_in, rep_out, x_train, y_train)

    def penalty(m: torch.nn.Module) -> torch.Tensor:
        # wd |w|^2 = |w|^2 / (2 sigma^2) with sigma^2 = 1 / (2 wd)
        return rpp_penalty(m, math.sqrt(0.5 / config.equivariant_wd), math.sqrt(0.5 / config.basic_wd))

    start = time.perf_counter()
    Trainer(model, lambda out, y: torch.mean((out - y) ** 2), penalty=penalty if config.model == "rpp" else None,
            lr=config.lr, epochs=config.epochs, batch_size=config.batch_size, seed=config.seed,
            desc=f"{config.model}/{config.dataset}/{config.setting}").fit((x_train, y_train))
    model.eval()
    with torch.no_grad():
        test_mse = float(torch.mean((model(x_test) - y_test) ** 2))
        constant_mse = float(torch.mean((y_test - y_train.mean(0)) ** 2))
    metrics = {"test_mse": test_mse, "constant_mse": constant_mse, "train_seconds": time.perf_counter() - start}
    if config.model == "rpp":
        metrics["equivariant_fraction"] = equivariant_fraction(model)
    return metrics


register(
    Experiment(
        name="rpp-levels",
        description="MLP vs EMLP vs RPP-EMLP under exact, approximate and misspecified symmetry (inertia)",
        reproduces="thesis Sec. 3.5.1, Figure 3.2: RPP ~ EMLP when exact, below both when approximate, ~ MLP when "
                   "misspecified",
        config=Config,
        run=run,
        quick={"n_train": 500, "n_test": 500, "ch": 128, "epochs": 300, "batch_size": 250},
        sweep={"dataset": DATASETS, "setting": SETTINGS, "model": MODELS, "seed": tuple(range(10))},
        quick_sweep={"dataset": ("inertia",), "setting": SETTINGS, "model": MODELS, "seed": (0,)},
        plots=(Plot(x="model", y="test_mse", hue="setting", logy=True, kind="box",
                    title="Levels of symmetry: test MSE (Fig. 3.2)"),),
    )
)
