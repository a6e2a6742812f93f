"""Gaussian vectors with shared means: Table 1 and Fig. 2 of Yeh et al. 2022 (§5.1, App. F.1).

One run evaluates ``n_runs`` independent data sets (seeds ``seed .. seed + n_runs - 1``, vectorised) and reports the
mean and 95% confidence half-width (1.96 sd / sqrt(n_runs)) of the MSE ``||theta_hat - theta_gt||^2`` and of the
partition distance to the ground truth, for No sharing, Oracle, Ours* (brute force) and Ours (relaxed, with the
penalties named by ``penalties``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from symkit.actions.partition import identity_partition, labels_to_assignment, partition_distance
from symkit.datasets.sharing import gaussian_shared_means
from symkit.discover.bilevel import brute_force_search, relaxed_closed_form
from symkit.discover.theory import cluster_average
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, Positive, Seed
from symkit.lab.experiments.registry import Experiment, FigureClaims, PaperValue, Plot, has_settings, register
from symkit.stats import interval

PENALTIES = {"none": (0.0, 0.0), "entropy": (1e-2, 0.0), "both": (1e-2, 1e-2)}


@dataclass
class GaussianSharingConfig:
    """The settings of one sharing-gaussian run (seed 004's Table 1 and Fig. 2: learned sharing of
    Gaussian vectors with shared means)."""
    dims: Count = 4
    rank: Count = 1
    penalties: str = "both"  # none | entropy | both
    n: Count = 100
    n_train: Count = 30
    n_runs: Count = 200
    iters: Count = 1000
    restarts: Count = 3
    optimizer: str = "rmsprop"
    lr: Positive = 2e-2
    brute_force: bool = True
    legacy_data: bool = True  # the reference generator's RandomState draws (identical samples for rank 1)
    seed: Seed = 0


def _mean_ci(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), interval(x, 0.95, "normal")  # the paper's 1.96 sd / sqrt(n)


def run(cfg: GaussianSharingConfig) -> dict:
    """One sharing-gaussian run on ``n_runs`` data sets: test MSE and partition distance to the true sharing (mean
    and 95% CI) of no sharing, the oracle, brute force (up to 7 dimensions) and the relaxed method."""
    if cfg.penalties not in PENALTIES:
        raise ValueError(f"penalties must be one of {sorted(PENALTIES)}, got {cfg.penalties!r}")
    data = [
        gaussian_shared_means(
            cfg.dims, cfg.rank, n=cfg.n, n_train=cfg.n_train, seed=cfg.seed + i, legacy=cfg.legacy_data
        )
        for i in range(cfg.n_runs)
    ]
    Y = np.stack([d.y for d in data])  # (B, n, K)
    theta_gt = np.stack([d.theta_gt for d in data])
    gt = [d.labels_gt for d in data]
    ybar_T = Y[:, : cfg.n_train].mean(1)
    ybar_D = Y.mean(1)
    V = Y[:, cfg.n_train :]

    def summary(prefix: str, labels: np.ndarray) -> dict:
        theta = np.stack([cluster_average(lab, yb) for lab, yb in zip(labels, ybar_D)])  # refit on D
        mse = ((theta - theta_gt) ** 2).sum(1)
        pd = np.array([partition_distance(lab, g) for lab, g in zip(labels, gt)], dtype=np.float64)
        m, mci = _mean_ci(mse)
        p, pci = _mean_ci(pd)
        return {f"mse_{prefix}": m, f"mse_{prefix}_ci": mci, f"pd_{prefix}": p, f"pd_{prefix}_ci": pci}

    out: dict = {}
    out.update(summary("no_sharing", np.tile(identity_partition(cfg.dims), (cfg.n_runs, 1))))
    out.update(summary("oracle", np.stack(gt)))
    if cfg.brute_force and cfg.dims <= 7:
        lam = PENALTIES[cfg.penalties][1]

        def score(labels: np.ndarray) -> np.ndarray:
            theta = cluster_average(labels, ybar_T)  # (B, K)
            val = ((V - theta[:, None, :]) ** 2).mean((1, 2))
            return val + lam * np.sqrt(labels_to_assignment(labels).sum(0)).sum()

        best, _ = brute_force_search(cfg.dims, score)
        out.update(summary("brute", best))
    ent, rank = PENALTIES[cfg.penalties]
    # mean over (i, k) of (V_ik - theta_k)^2 = mean over k of (theta_k - mean_i V_ik)^2 + var_i V_ik: the validation
    # MSE from two (B, K) statistics, exactly, instead of a (R, B, n_val, K) difference at each of the iterations
    v_mean, v_var = torch.as_tensor(V.mean(1)), torch.as_tensor(V.var(1))
    res = relaxed_closed_form(
        torch.as_tensor(ybar_T),
        lambda theta: ((theta - v_mean) ** 2 + v_var).mean(-1),
        entropy_weight=ent,
        rank_weight=rank,
        optimizer=cfg.optimizer,
        lr=cfg.lr,
        iters=cfg.iters,
        restarts=cfg.restarts,
        seed=cfg.seed,
        max_epochs=runtime.current().max_epochs,
    )
    out.update(summary("ours", res.labels))
    out["mse"], out["pd"] = out["mse_ours"], out["pd_ours"]  # the method's own columns, under the paper's names
    out["mse_ci"], out["pd_ci"] = out["mse_ours_ci"], out["pd_ours_ci"]
    return out


_TABLE1 = [  # (dims, penalties, MSE, MSE CI, PD, PD CI), Table 1 of the paper
    (2, "none", 0.019, 0.003, 0.915, 0.03),
    (2, "entropy", 0.016, 0.003, 0.385, 0.07),
    (2, "both", 0.014, 0.003, 0.145, 0.05),
    (4, "none", 0.035, 0.003, 2.05, 0.069),
    (4, "entropy", 0.033, 0.003, 1.68, 0.070),
    (4, "both", 0.025, 0.003, 0.49, 0.095),
    (6, "none", 0.050, 0.004, 3.35, 0.075),
    (6, "entropy", 0.048, 0.004, 3.36, 0.094),
    (6, "both", 0.028, 0.004, 0.59, 0.132),
]

PAPER = [
    PaperValue(metric, value, {"dims": k, "penalties": pen}, "Table 1 (± is a 95% CI; stderr = CI/1.96)", ci / 1.96)
    for k, pen, mse, mse_ci, pd, pd_ci in _TABLE1
    for metric, value, ci in (("mse", mse, mse_ci), ("pd", pd, pd_ci))
]

#: the settings the figures keep fixed: the config's defaults at the paper's K = 5 (Figs. 3, 4 and 6; Figs. 2 and 5
#: sweep K)
FIGURE_SETTINGS = {k: v for k, v in dataclasses.asdict(GaussianSharingConfig(dims=5)).items() if k != "seed"}


def _figure(rows: Sequence[Mapping[str, Any]], axis: str, **setting: Any) -> list[Mapping[str, Any]]:
    """The rows of one figure: those with ``setting`` and every other setting at :data:`FIGURE_SETTINGS` (every run
    the figure's sweep makes, and no other), sorted along ``axis``; empty unless at least two points lie on the
    axis."""
    defaults = FIGURE_SETTINGS | setting
    defaults.pop(axis)
    chosen = [r for r in rows if has_settings(r["config"], defaults)
              and all(k in r["mean"] for k in ("mse_ours", "mse_no_sharing", "pd_ours", "pd_no_sharing"))]
    return sorted(chosen, key=lambda r: r["config"][axis]) if len(chosen) >= 2 else []


def _below_no_sharing(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> dict[str, bool]:
    """Each method's MSE and PD below No sharing's at every point where No sharing is not the target itself."""
    points = [r["mean"] for r in rows if float(r["mean"]["pd_no_sharing"]) > 0]
    if not points:
        return {}
    return {f"{method}_below_no_sharing_in_{metric}": all(m[f"{metric}_{method}"] < m[f"{metric}_no_sharing"]
                                                          for m in points)
            for method in methods for metric in ("mse", "pd")}


def figure2_claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. 2 (K = 2..6, rk = 1): Ours* (brute force) best, Ours close to it (at most twice its MSE), both below
    No sharing in MSE and partition distance."""
    points = [r for r in _figure(rows, "dims") if 2 <= r["config"]["dims"] <= 6]
    if not points:
        return {}
    means = [r["mean"] for r in points]
    return {"brute_force_at_or_below_ours_in_mse": all(m["mse_brute"] <= m["mse_ours"] for m in means),
            "ours_within_2x_of_brute_force_in_mse": all(m["mse_ours"] <= 2 * m["mse_brute"] for m in means),
            **_below_no_sharing(points, ("ours", "brute"))}


def _grows(values: Sequence[float]) -> bool:
    """A rising trend, not every step: the last value above the first and a positive rank correlation with the
    position."""
    from scipy.stats import spearmanr

    return values[-1] > values[0] and float(spearmanr(range(len(values)), values).statistic) > 0


def figure3_claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. 3 (K = 5, rk = 1, against the number of training samples of 100): the error grows as more samples go
    to training (fewer to validation), as Eq. 15's bound says; for Ours and Ours*."""
    points = _figure(rows, "n_train", rank=1)
    if len(points) < 3:
        return {}
    return {f"{method}_mse_grows_with_the_training_share": _grows([r["mean"][f"mse_{method}"] for r in points])
            for method in ("ours", "brute")}


def figure4_claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. 4 (K = 5, against rk(A_gt) = 1..5): Ours* and Ours below No sharing in MSE and partition distance at
    every rank (where No sharing is not the target: rk = K is no sharing)."""
    return _below_no_sharing(_figure(rows, "rank"), ("ours", "brute"))


def figure5_claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. 5 (K = 10..100, rk = 1, brute force off): Ours below No sharing at every K, in MSE and partition
    distance."""
    points = [r for r in _figure(rows, "dims", brute_force=False) if r["config"]["dims"] >= 10]
    return _below_no_sharing(points, ("ours",))


def figure6_claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. 6 (K = 5, rk = 4, against the number of training samples): the trade-off of Eq. 15's bound, read as
    Ours' error lowest at a share strictly inside the range run, in MSE and in partition distance."""
    points = _figure(rows, "n_train", rank=4)
    if len(points) < 3:
        return {}

    def interior_minimum(values: Sequence[float]) -> bool:
        return min(values) < min(values[0], values[-1])

    return {f"ours_{metric}_lowest_inside_the_range": interior_minimum([r["mean"][f"{metric}_ours"] for r in points])
            for metric in ("mse", "pd")}


_SWEEP_N = "10,20,30,40,50,60,70,80,90"
FIGURES = (
    FigureClaims("Figure 2 (against the number of dimensions)",
                 "rk = 1, K from 2 to 6: Ours* best, Ours close to it, both below No sharing in MSE and partition "
                 "distance", figure2_claims, "symkit reproduce sharing-gaussian --set penalties=both"),
    FigureClaims("Figure 3 (against the share of training data)",
                 "rk = 1, K = 5: the error grows with the share of the 100 samples used for training, as the upper "
                 "bound (Eq. 15) says", figure3_claims,
                 f"symkit reproduce sharing-gaussian --set dims=5 --set penalties=both --sweep n_train={_SWEEP_N}"),
    FigureClaims("Figure 4 (against the rank)",
                 "5 dimensions, rk(A_gt) from 1 to 5: Ours* and Ours below No sharing in MSE and partition distance "
                 "at every rank", figure4_claims,
                 "symkit reproduce sharing-gaussian --set dims=5 --set penalties=both --sweep rank=1,2,3,4,5"),
    FigureClaims("Figure 5 (10 to 100 dimensions)",
                 "rk = 1, K from 10 to 100: the relaxed method below No sharing at every K", figure5_claims,
                 "symkit reproduce sharing-gaussian --set brute_force=false --set penalties=both "
                 "--sweep dims=10,30,50,70,90"),
    FigureClaims("Figure 6 (rank 4, against the share of training data)",
                 "rk = 4: the trade-off of the upper bound, in MSE and in partition distance (K = 5 presumed: the "
                 "paper does not say)", figure6_claims,
                 f"symkit reproduce sharing-gaussian --set dims=5 --set rank=4 --set penalties=both "
                 f"--sweep n_train={_SWEEP_N}"),
)

EXPERIMENT = register(
    Experiment(
        name="sharing-gaussian",
        description="Learned parameter sharing on Gaussian vectors with shared means: penalty ablation (Table 1) "
        "and No sharing / Oracle / brute force / relaxed across dimensions (Fig. 2).",
        reproduces="Yeh et al. 2022, Table 1 and Fig. 2",
        config=GaussianSharingConfig,
        run=run,
        quick={"n_runs": 40, "iters": 300, "restarts": 2},
        sweep={"dims": (2, 3, 4, 5, 6), "penalties": ("none", "entropy", "both"), "seed": (0,)},
        quick_sweep={"dims": (2, 4), "penalties": ("none", "both"), "seed": (0,)},
        paper=PAPER,
        figure_claims=FIGURES,
        plots=(
            Plot(x="dims", y="pd", hue="penalties", title="Partition distance to A_gt (Table 1)"),
            Plot(x="dims", y="mse", hue="penalties", title="MSE of theta_hat (Table 1)"),
            Plot(x="dims", y="mse_brute", title="Ours* (brute force) MSE (Fig. 2)"),
        ),
    )
)
