"""Data efficiency of EMLPs (thesis Sec. 2.7.1, Figure 2.5): test MSE against the training-set size for an MLP,
an MLP trained with group augmentation (MLP+Aug) and EMLPs with the special and the full orthogonal group, on the
O(5)-invariant synthetic task and the O(3)-equivariant moment of inertia.

Setup as in the thesis (A.1.9): 3 layers of 384 channels, Adam at 3e-3, batch 500, ``min(900000 / N, 1000)``
epochs, a 5,000-sample test set; the best parameters on a 1,000-sample validation set are kept. Inputs and targets
are scaled by :class:`~symkit.nn.Standardize` (one scale per object, only scalars centred), which keeps every
symmetry. The paper's numbers are the means of 3 runs from the authors' results file behind Figure 2.5 (the thesis
prints only the curves); the Lorentz-scattering panel is not here yet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from symkit.datasets.synthetic import inertia, o5_synthetic
from symkit.experiments.fields import Count, CountOrZero, Positive, Seed
from symkit.experiments.registry import Experiment, PaperValue, Plot, register
from symkit.groups import SO, O
from symkit.nn import EMLP, MLP, GroupAugmented, Standardize
from symkit.reps import Scalar, V
from symkit.train import Trainer

DATASETS = ("o5", "inertia")
MODELS = ("mlp", "mlp-aug", "emlp-so", "emlp-o")
SIZES = (30, 100, 300, 1000, 3000, 10000, 30000)


@dataclass
class DataEfficiencyConfig:
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


def _task(dataset: str) -> tuple:
    """(data function, input rep, output rep, d) of a dataset, for the group of dimension d."""
    if dataset == "o5":
        return o5_synthetic, (lambda G: 2 * V(G)), (lambda G: Scalar), 5
    return inertia, (lambda G: 5 * Scalar + 5 * V(G)), (lambda G: V(G) ** 2), 3


def run(config: DataEfficiencyConfig) -> dict:
    """Train one model at one training-set size; report its test MSE (in the target's own units)."""
    if config.dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {config.dataset!r}")
    if config.model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {config.model!r}")
    data, rep_in_of, rep_out_of, d = _task(config.dataset)
    G = SO(d) if config.model == "emlp-so" else O(d)
    rep_in, rep_out = rep_in_of(G), rep_out_of(G)
    x, y = (t.float() for t in data(config.n_train, seed=3 * config.seed))
    x_val, y_val = (t.float() for t in data(config.n_val, seed=3 * config.seed + 1))
    x_test, y_test = (t.float() for t in data(config.n_test, seed=3 * config.seed + 2))
    torch.manual_seed(config.seed)
    if config.model.startswith("emlp"):
        core = EMLP(rep_in, rep_out, G, ch=config.ch, num_layers=config.num_layers)
    else:
        core = MLP(rep_in.size, rep_out.size, ch=config.ch, num_layers=config.num_layers)
        if config.model == "mlp-aug":
            core = GroupAugmented(core, rep_in, rep_out, G, seed=config.seed)
    model = Standardize(core, rep_in, rep_out, x, y)
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
            ).fit((x, y))
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
}
PAPER = [
    PaperValue("test_mse", value, {"dataset": ds, "model": model, "n_train": n},
               "Figure 2.5 (mean of 3 runs, authors' results file)")
    for (ds, model), values in _FIG25.items() for n, value in zip(SIZES, values)
]

EXPERIMENT = register(
    Experiment(
        name="emlp-data-efficiency",
        description="Test MSE against training-set size: MLP, MLP+Aug, EMLP-SO(d), EMLP-O(d) on O5 and Inertia",
        reproduces="thesis Sec. 2.7.1, Figure 2.5: EMLPs need orders of magnitude less data than MLPs",
        config=DataEfficiencyConfig,
        run=run,
        quick={"n_test": 1000, "n_val": 500, "epochs": 300},
        sweep={"dataset": DATASETS, "model": MODELS, "n_train": SIZES, "seed": (0, 1, 2)},
        quick_sweep={"dataset": ("inertia",), "model": ("mlp", "emlp-o"), "n_train": (1000,), "seed": (0,)},
        paper=PAPER,
        plots=(Plot(x="n_train", y="test_mse", hue="model", logx=True, logy=True,
                    title="Test MSE against training-set size (Fig. 2.5)"),),
    )
)
