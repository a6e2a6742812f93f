"""Data efficiency of EMLPs (thesis Sec. 2.7.1, Figure 2.5): test MSE against the training-set size for an MLP,
an MLP trained with group augmentation (MLP+Aug) and EMLPs with the special and the full orthogonal group, on the
O(5)-invariant synthetic task and the O(3)-equivariant moment of inertia, and with the three Lorentz groups on the
O(1,3)-invariant e-mu scattering task ("particle", :mod:`symkit.datasets.particle`).

Models per data set (:data:`MODELS_BY_DATASET`): ``mlp``, ``mlp-aug`` (augmented with the data set's full group:
O(5), O(3) or O(1,3)), ``emlp-so`` and ``emlp-o`` (SO(d) and O(d); on particle SO(1,3) and O(1,3)), and on particle
also ``emlp-so+`` (the proper orthochronous SO+(1,3)). The sweep runs the valid (data set, model) pairs only (its
``points``); any other pair is refused with the list of valid models.

Setup as in the thesis (A.1.9): 3 layers of 384 channels, Adam at 3e-3, batch 500, ``min(900000 / N, 1000)``
epochs, a 5,000-sample test set; the best parameters on a 1,000-sample validation set are kept. Inputs and targets
are scaled by :class:`~symkit.nn.Standardize` (one scale per object, the RMS of its entries; only scalars centred),
which keeps every symmetry. On particle the reference divides each 4-vector by ``sqrt(mean |(eta p)_mu p_mu|)``,
which is the same RMS of its entries (the absolute value is taken per component); both are one constant per
object. The paper's numbers are the means of 3 runs from the authors' results file behind Figure 2.5 (the thesis
prints only the curves).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from symkit.datasets.tasks import task
from symkit.groups import O13, SO, SO13, Group, O, SO13p
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, CountOrZero, Positive, Seed
from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, register
from symkit.nn import GroupAugmented, Standardize, network
from symkit.train import Trainer

DATASETS = ("o5", "inertia", "particle")
#: the models that make sense on each data set (the EMLP groups are those of the task's own spaces)
MODELS_BY_DATASET = {
    "o5": ("mlp", "mlp-aug", "emlp-so", "emlp-o"),
    "inertia": ("mlp", "mlp-aug", "emlp-so", "emlp-o"),
    "particle": ("mlp", "mlp-aug", "emlp-so+", "emlp-so", "emlp-o"),
}
MODELS = ("mlp", "mlp-aug", "emlp-so+", "emlp-so", "emlp-o")
SIZES = (30, 100, 300, 1000, 3000, 10000, 30000)


def group_of(dataset: str, model: str) -> Group:
    """The group a model uses on a data set: the EMLP's own group, or for ``mlp-aug`` the augmentation group (the
    data set's full group); ``mlp`` gets the full group too, for its reps only. Raises ``ValueError`` naming the
    valid data sets or models."""
    if dataset not in MODELS_BY_DATASET:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    if model not in MODELS_BY_DATASET[dataset]:
        raise ValueError(f"model {model!r} is not run on dataset {dataset!r}; valid models for {dataset!r}: "
                         f"{MODELS_BY_DATASET[dataset]}")
    if dataset == "particle":
        return {"emlp-so+": SO13p(), "emlp-so": SO13()}.get(model, O13())
    d = 5 if dataset == "o5" else 3
    return SO(d) if model == "emlp-so" else O(d)


@dataclass
class DataEfficiencyConfig:
    """The settings of one emlp-data-efficiency run (one model, data set and training-set size of thesis
    Fig. 2.5); the defaults are the default scale, ``quick`` shrinks them."""
    dataset: str = "inertia"
    model: str = "emlp-o"
    n_train: Count = 1000
    n_val: Count = 1000
    n_test: Count = 5000
    ch: Count = 384
    num_layers: CountOrZero = 3
    epochs: CountOrZero = 0  # 0: the thesis's min(900000 / N, 1000)
    batch_size: Count = 500
    lr: Positive = 3e-3
    seed: Seed = 0


def check_pair(config: DataEfficiencyConfig) -> None:
    """Refuse a (dataset, model) pair that Figure 2.5 does not have (the experiment's ``validate`` hook)."""
    group_of(config.dataset, config.model)


def run(config: DataEfficiencyConfig) -> dict:
    """Train one model at one training-set size; report its test MSE (in the target's own units)."""
    G = group_of(config.dataset, config.model)
    data = task(config.dataset)
    rep_in, rep_out = data.reps(G)
    device = runtime.device()  # data are generated on the CPU (seeded), then placed with the model
    x, y = (t.float().to(device) for t in data.generate(config.n_train, seed=3 * config.seed))
    x_val, y_val = (t.float().to(device) for t in data.generate(config.n_val, seed=3 * config.seed + 1))
    x_test, y_test = (t.float().to(device) for t in data.generate(config.n_test, seed=3 * config.seed + 2))
    torch.manual_seed(config.seed)
    core = network("emlp" if config.model.startswith("emlp") else "mlp", rep_in, rep_out, G, ch=config.ch,
                   num_layers=config.num_layers)
    if config.model == "mlp-aug":
        core = GroupAugmented(core, rep_in, rep_out, G, seed=config.seed)
    model = Standardize(core.to(device), rep_in, rep_out, x, y).to(device)
    epochs = config.epochs or min(900_000 // config.n_train, 1000)
    steps_per_epoch = -(-config.n_train // config.batch_size)

    def val_mse(m: torch.nn.Module) -> float:
        m.eval()
        out = float((m(x_val) - y_val).square().mean())
        m.train()
        return out

    start = time.perf_counter()
    Trainer(model, lambda out, target: (out - target).square().mean(), lr=config.lr, epochs=epochs,
            batch_size=config.batch_size, seed=config.seed, validate=val_mse,
            validate_every=10 * steps_per_epoch, desc=f"{config.model}/{config.dataset}/N={config.n_train}",
            **runtime.trainer_settings()).fit((x, y))
    model.eval()
    with torch.no_grad():
        test_mse = float((model(x_test) - y_test).square().mean())
        constant = float((y_test - y.mean(0)).square().mean())
    return {"test_mse": test_mse, "constant_mse": constant, "epochs": epochs,
            "train_seconds": time.perf_counter() - start}


# Figure 2.5's data (mean of 3 runs, authors' results file): {(dataset, model): [MSE at each of SIZES]}
_FIG25 = {
    ("o5", "mlp"): [28.1, 2.83, 0.248, 0.0892, 0.0623, 0.0616, 0.0622],
    ("o5", "mlp-aug"): [0.476, 0.397, 0.0936, 0.0633, 0.0889, 0.0702, 0.0672],
    ("o5", "emlp-so"): [0.110, 0.0415, 0.0384, 0.0198, 0.0320, 0.0231, 0.0279],
    ("o5", "emlp-o"): [0.152, 0.0408, 0.0344, 0.0170, 0.0310, 0.0130, 0.0273],
    ("inertia", "mlp"): [13.4, 7.91, 4.94, 3.24, 0.840, 0.154, 0.112],
    ("inertia", "mlp-aug"): [4.64, 1.79, 0.464, 0.130, 0.112, 0.112, 0.106],
    ("inertia", "emlp-so"): [6.91, 1.16, 0.316, 0.0604, 0.0291, 0.0185, 0.0153],
    ("inertia", "emlp-o"): [4.11, 1.44, 0.304, 0.136, 0.0282, 0.0180, 0.0141],
    ("particle", "mlp"): [0.733, 0.733, 0.697, 0.364, 0.0504, 0.0166, 0.0120],
    ("particle", "mlp-aug"): [0.627, 0.190, 0.0397, 0.0125, 0.0108, 0.0134, 0.0118],
    ("particle", "emlp-so+"): [0.459, 0.0127, 0.00221, 3.30e-4, 2.24e-4, 1.99e-4, 1.98e-4],
    ("particle", "emlp-so"): [0.511, 0.0147, 0.00258, 3.69e-4, 2.73e-4, 2.12e-4, 1.87e-4],
    ("particle", "emlp-o"): [0.540, 0.00888, 0.00195, 3.30e-4, 2.66e-4, 2.64e-4, 1.58e-4],
}
PAPER = [
    PaperValue("test_mse", value, {"dataset": ds, "model": model, "n_train": n},
               "Figure 2.5 (mean of 3 runs, authors' results file)")
    for (ds, model), values in _FIG25.items() for n, value in zip(SIZES, values)
]


#: the quick scale's overrides: Inertia at N = 1000 and full width, 30 epochs of batches of 50 (600 steps, as many as
#: 300 epochs of the default batch of 500, which ``symkit demo`` runs, at a fifth of the cost)
QUICK = {"n_test": 1000, "n_val": 500, "epochs": 30, "batch_size": 50}


def _points(quick: bool) -> list[dict[str, str]]:
    """The (dataset, model) pairs of the sweep: every valid pair (13), or Inertia's MLP and EMLP-O(3) when quick;
    the sweep's training-set sizes and seeds multiply them."""
    if quick:
        return [{"dataset": "inertia", "model": m} for m in ("mlp", "emlp-o")]
    return [{"dataset": ds, "model": m} for ds in DATASETS for m in MODELS_BY_DATASET[ds]]


EXPERIMENT = register(
    Experiment(
        name="emlp-data-efficiency",
        description="Test MSE against training-set size: MLP, MLP+Aug and EMLPs on O5, Inertia and Particle "
                    "(SO(d)/O(d), SO+(1,3)/SO(1,3)/O(1,3))",
        reproduces="thesis Sec. 2.7.1, Figure 2.5: EMLPs need orders of magnitude less data than MLPs",
        config=DataEfficiencyConfig,
        run=run,
        quick=QUICK,
        points=_points,
        sweep={"n_train": SIZES, "seed": (0, 1, 2)},
        quick_sweep={"n_train": (1000,), "seed": (0,)},
        paper=PAPER,
        plots=(Plot(x="n_train", y="test_mse", hue="model", logx=True, logy=True,
                    title="Test MSE against training-set size (Fig. 2.5)"),),
        validate=check_pair,
    )
)
