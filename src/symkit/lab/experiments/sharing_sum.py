"""Recovering permutation invariance on sum of numbers: Fig. 7 of Yeh et al. 2022 (§5.2, App. F.2).

The §5.2 network (embedding -> per-position FC whose L weight blocks are shared through a learned L x L assignment ->
ReLU -> sum -> linear) is fit by Algorithm 1 with implicit (Neumann) hypergradients: ``inner_steps`` AdamW steps on
T per outer step, then one Adam step on the assignment logits using the validation L1 loss plus
``0.05 (colnorm(A) / L + 0.5 H(A))``. Each of ``inits`` initialisations is hardened and refit on T (early stopping on
V); the best by validation loss is refit on T ∪ V with early stopping on a third split H. Baselines: No sharing,
Oracle (one cluster, or even/odd for the negated variant) and Augerino (Gumbel-Sinkhorn permutations of the
positions, ``augerino_samples`` samples at train and test time), all fit on T ∪ V with early stopping on H.

Budget (documented in docs/discover.md): the paper runs 250 inner steps for up to 500 outer steps with outer learning
rate 1e-2 on a GPU; the defaults here are 20 warm-started inner steps, at most 150 outer steps and outer learning rate
5e-2 (the paper swept 1e-1..1e-3), to fit two CPU cores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from symkit.actions.partition import identity_partition, partition_distance
from symkit.datasets.sharing import sum_of_numbers
from symkit.discover.baselines import AugerinoPermutation
from symkit.discover.bilevel import fit_implicit, fit_model_parameters, harden_
from symkit.discover.groups import implied_group
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, CountOrZero, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, Plot, holding_in_every, register
from symkit.nn.sharing import SumOfNumbersNet, column_group_norm, entropy_penalty


@dataclass
class SumSharingConfig:
    """The settings of one sharing-sum run (seed 004: discovering the permutation invariance of a
    sum-of-numbers network)."""
    length: Count = 4
    variant: str = "standard"  # standard | negated
    n_train: Count = 100
    n_val: CountOrZero = 150
    n_hyper: CountOrZero = 250
    n_test: Count = 20000
    noise: NonNegative = 0.5
    embed: Count = 500
    hidden: Count = 50
    inits: Count = 3
    inner_steps: Count = 20
    outer_steps: Count = 150
    outer_patience: CountOrZero = 50
    inner_lr: Positive = 1e-3
    outer_lr: Positive = 5e-2
    hypergrad: str = "neumann"  # neumann | cg | identity
    neumann_iters: CountOrZero = 20
    refit_steps: CountOrZero = 3000
    refit_patience: CountOrZero = 300
    baselines: bool = True
    augerino_samples: CountOrZero = 3
    seed: Seed = 0


@dataclass
class SumSplits:
    """Standardised splits of one sum-of-numbers run (T, V, H, test) and the label scaling."""

    tokens: dict[str, torch.Tensor]
    y: dict[str, torch.Tensor]
    mean: float
    std: float
    labels_gt: np.ndarray


def make_splits(cfg: SumSharingConfig) -> SumSplits:
    """T and V from one draw (labels noisy), H another (noisy), test clean; labels standardised on T ∪ V."""
    base = 1000 * cfg.seed
    d = sum_of_numbers(cfg.length, cfg.n_train + cfg.n_val, cfg.variant, cfg.noise, seed=base + 1)
    h = sum_of_numbers(cfg.length, cfg.n_hyper, cfg.variant, cfg.noise, seed=base + 2)
    t = sum_of_numbers(cfg.length, cfg.n_test, cfg.variant, 0.0, seed=base + 3)
    mean, std = float(d.y.mean()), float(d.y.std())
    tokens = {"train": d.tokens[: cfg.n_train], "val": d.tokens[cfg.n_train :], "trainval": d.tokens,
              "hyper": h.tokens, "test": t.tokens}
    y = {"train": d.y[: cfg.n_train], "val": d.y[cfg.n_train :], "trainval": d.y, "hyper": h.y, "test": t.y}
    y = {k: (v - mean) / std for k, v in y.items()}
    device = runtime.device()  # seeded data made on the CPU, then placed where the run's models are
    tokens = {k: v.to(device) for k, v in tokens.items()}
    y = {k: v.to(device) for k, v in y.items()}
    return SumSplits(tokens=tokens, y=y, mean=mean, std=std, labels_gt=d.labels_gt)


def l1(model: torch.nn.Module, s: SumSplits, split: str) -> torch.Tensor:
    """The mean absolute error of ``model`` on the ``split`` of ``s``: both levels' loss in the sharing search."""
    return (model(s.tokens[split]) - s.y[split]).abs().mean()


@torch.no_grad()
def test_errors(model: torch.nn.Module, s: SumSplits, chunk: int = 5000) -> dict[str, float]:
    """Test MSE and MAE in the original (un-standardised) label units."""
    model.eval()
    preds = [model(s.tokens["test"][i : i + chunk]) for i in range(0, len(s.tokens["test"]), chunk)]
    model.train()
    err = (torch.cat(preds) - s.y["test"]) * s.std
    return {"mse": float((err**2).mean()), "mae": float(err.abs().mean())}


def _net(cfg: SumSharingConfig, sharing: Any, seed: int) -> SumOfNumbersNet:
    g = torch.Generator().manual_seed(seed)
    net = SumOfNumbersNet(cfg.length, embed=cfg.embed, hidden=cfg.hidden, sharing=sharing, generator=g)
    return net.to(runtime.device())


def fit_fixed(model: torch.nn.Module, cfg: SumSharingConfig, s: SumSplits, lr: float = 1e-3) -> float:
    """Fit on T ∪ V with early stopping on H (baselines and the final refit, Alg. 1 line 10)."""
    return fit_model_parameters(
        model, lambda m: l1(m, s, "trainval"), lambda m: l1(m, s, "hyper"),
        steps=cfg.refit_steps, lr=lr, patience=cfg.refit_patience,
        max_epochs=runtime.current().max_epochs,
    )


def discover(cfg: SumSharingConfig, s: SumSplits) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Algorithm 1 from ``cfg.inits`` initialisations; returns the best hardened partition and per-init records."""
    L = cfg.length

    def penalty(m: SumOfNumbersNet) -> torch.Tensor:
        A = m.fc.assignment()
        return 0.05 * (column_group_norm(A) / L + 0.5 * entropy_penalty(A))

    records = []
    for i in range(cfg.inits):
        torch.manual_seed(cfg.seed * 100 + i)
        model = _net(cfg, "learned", seed=cfg.seed * 100 + i)
        res = fit_implicit(
            model, lambda m: l1(m, s, "train"), lambda m: l1(m, s, "val"), penalty,
            inner_steps=cfg.inner_steps, outer_steps=cfg.outer_steps, inner_lr=cfg.inner_lr, outer_lr=cfg.outer_lr,
            method=cfg.hypergrad, neumann_iters=cfg.neumann_iters, patience=cfg.outer_patience,
            max_epochs=runtime.current().max_epochs,
        )
        labels = harden_(model)[0]
        val = fit_model_parameters(
            model, lambda m: l1(m, s, "train"), lambda m: l1(m, s, "val"),
            steps=cfg.refit_steps, lr=1e-3, patience=cfg.refit_patience,
            max_epochs=runtime.current().max_epochs,
        )
        records.append({"labels": labels, "val": val, "outer_steps": res.outer_steps,
                        "pd": partition_distance(labels, s.labels_gt)})
    best = min(records, key=lambda r: r["val"])
    return best["labels"], records


def run(cfg: SumSharingConfig) -> dict:
    """One sharing-sum run: discover the sharing, refit the shared network, and its test errors."""
    if cfg.variant not in ("standard", "negated"):
        raise ValueError(f"variant must be 'standard' or 'negated', got {cfg.variant!r}")
    torch.manual_seed(cfg.seed)
    s = make_splits(cfg)
    labels, records = discover(cfg, s)
    final = _net(cfg, labels, seed=cfg.seed + 7)
    fit_fixed(final, cfg, s)
    ours = test_errors(final, s)
    out: dict[str, Any] = {
        "mse": ours["mse"],
        "mae": ours["mae"],
        "pd": partition_distance(labels, s.labels_gt),
        "labels": [int(v) for v in labels],
        "pd_per_init": [int(r["pd"]) for r in records],
        "outer_steps": [int(r["outer_steps"]) for r in records],
        "pd_no_sharing": partition_distance(identity_partition(cfg.length), s.labels_gt),
        "implied_group": implied_group(labels, (cfg.length,)).name,
    }
    if cfg.baselines:
        for name, sharing in (("no_sharing", None), ("oracle", s.labels_gt)):
            net = _net(cfg, sharing, seed=cfg.seed + 11)
            fit_fixed(net, cfg, s)
            out[f"mse_{name}"] = test_errors(net, s)["mse"]
        aug = AugerinoPermutation(_net(cfg, None, seed=cfg.seed + 13), cfg.length, n_samples=cfg.augerino_samples,
                                  device=runtime.device())
        aug.generator = torch.Generator(device=runtime.device()).manual_seed(cfg.seed)
        fit_model_parameters(
            aug, lambda m: l1(m, s, "trainval") + m.regularizer(), lambda m: l1(m, s, "hyper"),
            steps=cfg.refit_steps, lr=1e-3, patience=cfg.refit_patience,
            max_epochs=runtime.current().max_epochs,
        )
        out["mse_augerino"] = test_errors(aug, s)["mse"]
    return out


#: "on par with" / "competitive to" Oracle: Ours' mean test l2 loss at most this factor above Oracle's
ON_PAR = 2.0


def claim_checks(row: Mapping[str, Any]) -> dict[str, bool]:
    """Fig. 7's sentences as checks on one length's runs (means over seeds; the partition distance as the median over
    seeds, a seed that misses the partition aside). Standard task: Ours below No sharing and Augerino, on par with
    Oracle (:data:`ON_PAR`), the permutation invariance recovered (PD 0) at lengths 2 and 4. Negated variant:
    Augerino not competitive (above No sharing), Ours on par with Oracle and below No sharing where No sharing is not
    the target itself (``pd_no_sharing`` > 0; at length 2 it is)."""
    length, variant, m = row["config"].get("length"), row["config"].get("variant"), row["mean"]
    mse, none, augerino, oracle = (float(m[k]) for k in ("mse", "mse_no_sharing", "mse_augerino", "mse_oracle"))
    if variant == "standard":
        checks = {"standard_ours_below_no_sharing_and_augerino": mse < min(none, augerino),
                  "standard_ours_on_par_with_oracle": mse <= ON_PAR * oracle}
        if length in (2, 4):
            pds = [float(s["pd"]) for s in row.get("by_seed", {}).values() if "pd" in s]
            checks["standard_invariance_recovered_at_lengths_2_and_4"] = bool(pds) and float(np.median(pds)) == 0
        return checks
    checks = {"negated_augerino_above_no_sharing": augerino > none,
              "negated_ours_on_par_with_oracle": mse <= ON_PAR * oracle}
    if float(m.get("pd_no_sharing", 1)) > 0:  # at length 2 the even/odd target is No sharing itself: nothing to beat
        checks["negated_ours_below_no_sharing"] = mse < none
    return checks


def claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. 7's claims for docs/reproductions.md (:func:`claim_checks`), a check holding where it holds at every
    length run with the baselines."""
    keys = ("mse", "mse_no_sharing", "mse_augerino", "mse_oracle")
    return holding_in_every(claim_checks(r) for r in rows if all(k in r["mean"] for k in keys))


EXPERIMENT = register(
    Experiment(
        name="sharing-sum",
        description="Discovering permutation invariance (and even/odd invariance) of a sum-of-numbers network by "
        "learned sharing of its per-position weight blocks, with implicit hypergradients.",
        reproduces="Yeh et al. 2022, Fig. 7 (§5.2)",
        config=SumSharingConfig,
        run=run,
        quick={"embed": 32, "hidden": 16, "inits": 1, "inner_steps": 20, "outer_steps": 40, "refit_steps": 600,
               "refit_patience": 100, "n_test": 2000, "baselines": False},
        sweep={"length": (2, 4, 6, 10), "variant": ("standard", "negated"), "seed": (0, 1, 2, 3, 4)},
        quick_sweep={"length": (2,), "variant": ("standard",), "seed": (0,)},
        plots=(
            Plot(x="length", y="pd", hue="variant", title="Partition distance to the invariant sharing (Fig. 7)"),
            Plot(x="length", y="mse", hue="variant", title="Test l2 loss of Ours (Fig. 7)", logy=True),
        ),
        claims=claims,
    )
)
