"""Recovering shift equivariance from cross-correlation data: Fig. 8 of Yeh et al. 2022 (§5.3, App. F.3).

``y = G x + eps`` with G a valid cross-correlation (Toeplitz) matrix, kernel ``1 + 2 arange(G)``. The flattened G
(``K_out K_in`` entries, so A is 6x6, 15x15, 35x35 or 80x80) is shared through a learned A; the target partition
ties each kernel tap and puts the structural zeros in one cluster. One run covers ``n_runs`` seeds (vectorised)
and reports per-seed partition distances, their median, and test MSE for No sharing, Oracle and Ours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from symkit.actions.partition import partition_distance
from symkit.datasets.sharing import cross_correlation
from symkit.discover.groups import implied_group
from symkit.discover.linear import discover_linear_sharing, ols, tied_least_squares
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, CountOrZero, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, register

SIZES = {6: (3, 2), 15: (5, 3), 35: (7, 3), 80: (10, 3)}  # A size -> (K_in, kernel size); App. E.1 and inferred


@dataclass
class ShiftSharingConfig:
    """The settings of one sharing-shift run (seed 004: discovering the Toeplitz sharing of a
    cross-correlation layer)."""
    a_size: Count = 15  # 6, 15, 35 or 80
    n_train: Count = 50
    n_val: CountOrZero = 100
    n_test: Count = 10000
    noise_std: NonNegative = 0.1**0.5
    n_runs: Count = 5
    iters: Count = 1000
    restarts: Count = 3
    lr: Positive = 0.1
    seed: Seed = 0


def run(cfg: ShiftSharingConfig) -> dict:
    """One sharing-shift run on ``n_runs`` data sets: the learned sharing's partition distance to the Toeplitz
    one and its test MSE, beside least squares without sharing and with the true sharing."""
    if cfg.a_size not in SIZES:
        raise ValueError(f"a_size must be one of {sorted(SIZES)}, got {cfg.a_size}")
    k_in, g = SIZES[cfg.a_size]
    n = cfg.n_train + cfg.n_val
    data = [cross_correlation(k_in, g, n, cfg.noise_std, seed=cfg.seed + i) for i in range(cfg.n_runs)]
    tests = [cross_correlation(k_in, g, cfg.n_test, 0.0, seed=10_000 + cfg.seed + i) for i in range(cfg.n_runs)]
    X = np.stack([d.x for d in data])
    Y = np.stack([d.y for d in data])
    res = discover_linear_sharing(
        X[:, : cfg.n_train], Y[:, : cfg.n_train], X[:, cfg.n_train :], Y[:, cfg.n_train :],
        lr=cfg.lr, iters=cfg.iters, restarts=cfg.restarts, seed=cfg.seed,
        max_epochs=runtime.current().max_epochs,
    )

    def test_mse(W: np.ndarray, t) -> float:
        return float(((t.x @ W.T - t.y) ** 2).mean())

    pd = [partition_distance(lab, d.labels_gt) for lab, d in zip(res.labels, data)]
    ours = [test_mse(W, t) for W, t in zip(res.W, tests)]
    none = [test_mse(ols(d.x, d.y), t) for d, t in zip(data, tests)]
    oracle = [test_mse(tied_least_squares(d.x, d.y, d.labels_gt), t) for d, t in zip(data, tests)]
    return {
        "pd": float(np.mean(pd)),
        "pd_median": float(np.median(pd)),
        "pd_per_seed": [int(p) for p in pd],
        "frac_pd_zero": float(np.mean(np.array(pd) == 0)),
        "pd_no_sharing": partition_distance(np.arange(cfg.a_size), data[0].labels_gt),
        "mse": float(np.mean(ours)),
        "mse_no_sharing": float(np.mean(none)),
        "mse_oracle": float(np.mean(oracle)),
        "clusters_found": float(np.mean([len(set(lab.tolist())) for lab in res.labels])),
        "clusters_true": int(data[0].labels_gt.max() + 1),
        "implied_exact": float(np.mean([implied_group(lab, data[0].W.shape).exact for lab in res.labels])),
    }


EXPERIMENT = register(
    Experiment(
        name="sharing-shift",
        description="Discovering the Toeplitz (shift) sharing of a linear cross-correlation layer from data.",
        reproduces="Yeh et al. 2022, Fig. 8 (§5.3)",
        config=ShiftSharingConfig,
        run=run,
        quick={"n_runs": 3, "iters": 400, "n_test": 1000},
        sweep={"a_size": (6, 15, 35, 80), "seed": (0,)},
        quick_sweep={"a_size": (6, 15), "seed": (0,)},
        paper=[
            PaperValue("pd_median", 0.0, {"a_size": 6}, "Fig. 8 (PD 0 at 6x6)"),
            PaperValue("pd_median", 0.0, {"a_size": 15}, "Fig. 8 (PD 0 at 15x15)"),
        ],
        plots=(
            Plot(x="a_size", y="pd", title="Partition distance to the Toeplitz sharing", kind="bar"),
            Plot(x="a_size", y="mse", title="Test l2 loss (Ours)", kind="bar"),
        ),
    )
)
