"""Recovering shift equivariance from denoising: Fig. A1 of Yeh et al. 2022 (App. D.1).

A linear denoiser ``y_hat = G x`` (G is K x K, Eq. 50) of noisy step signals ``x[k] = s U(k - t) + b + eps``
(Eq. 51): U the unit step (``U(j) = 1`` for ``j >= 0``), ``s ~ unif[1, 50]``, ``b ~ unif[-5, 5]``,
``t ~ unif{0, ..., K}`` (``t = K``: no step inside the signal), ``eps ~ N(0, noise_std^2)`` on every entry; the
target is the clean ``y = s U(k - t) + b``. T / V / test = 50 / 100 / 10000 examples (the test inputs noisy as well,
the MSE taken against their clean signals). One run draws ``n_runs`` data sets (seeds ``seed .. seed + n_runs - 1``)
at one noise level and fits, on the same data:

- **No sharing**: least squares ``G = argmin ||X G^T - Y||^2`` on T ∪ V;
- **Ours** (learned sharing, as sharing-shift applies it): Algorithm 1 over the K^2 entries of G with the
  closed-form lower level (least squares on T, the ``A Abar^T`` projection), Adam with learning rate 0.2 on the
  validation MSE plus ``1e-2 (colnorm + entropy)``, hardened and refit as tied least squares on T ∪ V;
- **Augerino** (Benton et al. 2020): the unshared G averaged over five sampled shifts of each input (the output
  shifted back, zero padding), with a learned distribution over the shifts ``-2..2``, fit on T ∪ V (as in
  sharing-shift, :func:`~symkit.lab.experiments.sharing_shift.fit_augerino_linear`).

Decisions (the paper states neither K nor the noise levels of Fig. A1): K = 10, the longest input sharing-shift
uses (A is 100 x 100); the noise standard deviations 0.1, 0.25, 0.5, 0.75 and 1.0. These noise levels are small
beside the signals' steps (1 to 50), so the best linear denoiser is close to the identity, a Toeplitz matrix, which
is what Fig. A2 shows Ours learn.

The paper's claim (Fig. A1), as checked by :func:`claim_checks` and shown by ``symkit report sharing-denoise``:
Ours' gain over each baseline (the baseline's test MSE minus Ours') is larger at the highest noise level than at
the lowest, and positive there; at the lowest noise level the three methods are comparable: the spread of their
test MSEs is smaller than at the highest level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from symkit.actions.partition import canonical_labels
from symkit.discover.linear import discover_linear_sharing, ols
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, Plot, holding_in_every, register
from symkit.lab.experiments.sharing_shift import check_augerino, fit_augerino_linear
from symkit.stats import interval

#: the methods of one run, under the names their metrics carry
METHODS = ("no_sharing", "learned", "augerino")


@dataclass
class DenoiseSharingConfig:
    """The settings of one sharing-denoise run (seed 004's App. D.1: a linear denoiser of step signals with learned
    sharing, against No sharing and Augerino, at one noise level)."""
    length: Count = 10  # K, the signal length (not stated in the paper)
    noise_std: NonNegative = 0.5  # the standard deviation of eps (Fig. A1's x axis; levels not stated)
    n_train: Count = 50
    n_val: Count = 100
    n_test: Count = 10000
    n_runs: Count = 5
    iters: Count = 1000
    restarts: Count = 3
    lr: Positive = 0.2
    augerino: bool = True
    augerino_samples: Count = 5
    augerino_max_shift: Count = 2
    augerino_steps: Count = 2000
    augerino_lr: Positive = 0.05
    augerino_entropy_weight: NonNegative = 1e-2
    seed: Seed = 0


@dataclass
class StepSignals:
    """Noisy step signals ``x`` (n, K) and their clean versions ``y`` (Eq. 51), with each signal's scale ``s``,
    offset ``b`` and step position ``t``."""

    x: np.ndarray
    y: np.ndarray
    s: np.ndarray
    b: np.ndarray
    t: np.ndarray
    noise_std: float


def step_signals(length: int, n: int, noise_std: float, seed: int = 0) -> StepSignals:
    """``n`` signals ``x[k] = s U(k - t) + b + eps`` of length K (Eq. 51, App. D.1): ``s ~ unif[1, 50]``,
    ``b ~ unif[-5, 5]``, ``t ~ unif{0, ..., K}``, ``eps ~ N(0, noise_std^2)`` i.i.d.; ``y`` is the clean part."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be an int >= 1, got {length!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if not (np.isfinite(noise_std) and noise_std >= 0):
        raise ValueError(f"noise_std must be finite and >= 0, got {noise_std!r}")
    rng = np.random.default_rng(seed)
    s = rng.uniform(1.0, 50.0, n)
    b = rng.uniform(-5.0, 5.0, n)
    t = rng.integers(0, length + 1, n)  # unif{0, ..., K}: K + 1 positions, the last one outside the signal
    y = s[:, None] * (np.arange(length)[None, :] >= t[:, None]) + b[:, None]
    x = y + noise_std * rng.standard_normal((n, length))
    return StepSignals(x=x, y=y, s=s, b=b, t=t, noise_std=float(noise_std))


def toeplitz_fraction(labels: Any, length: int) -> float:
    """The share of the ``2K - 1`` diagonals of a K x K matrix whose entries all fall in one cluster of ``labels``
    (over the row-major flattened matrix): 1 when the tied matrix is Toeplitz (Fig. A2)."""
    lab = canonical_labels(labels).reshape(length, length)
    return float(np.mean([len(set(np.diagonal(lab, d).tolist())) == 1 for d in range(1 - length, length)]))


def validate(cfg: DenoiseSharingConfig) -> None:
    """A determined lower level (at least K training signals) and, for Augerino, shifts that fit the signal."""
    if cfg.n_train < cfg.length:
        raise ValueError(f"n_train={cfg.n_train} is below the signal length {cfg.length}: the lower level's least "
                         f"squares needs at least K training signals")
    if cfg.augerino:
        check_augerino("augerino", cfg.length, cfg.augerino_max_shift)


def _mean_ci(prefix: str, values: Sequence[float]) -> dict[str, float]:
    out = {prefix: float(np.mean(values))}
    if len(values) > 1:
        out[f"{prefix}_ci"] = interval(values, 0.95)  # the paper's 95% interval over the five runs
    return out


def run(cfg: DenoiseSharingConfig) -> dict:
    """One sharing-denoise run at ``cfg.noise_std`` on ``n_runs`` data sets: the test MSE to the clean signals of No
    sharing, Ours and Augerino (mean and 95% interval over the data sets), Ours' gains over them, the sharing Ours
    found and Augerino's mass on the shift 0."""
    validate(cfg)
    n = cfg.n_train + cfg.n_val
    data = [step_signals(cfg.length, n, cfg.noise_std, seed=cfg.seed + i) for i in range(cfg.n_runs)]
    tests = [step_signals(cfg.length, cfg.n_test, cfg.noise_std, seed=10_000 + cfg.seed + i)
             for i in range(cfg.n_runs)]

    def test_mse(G: np.ndarray, t: StepSignals) -> float:
        return float(((t.x @ G.T - t.y) ** 2).mean())

    mse: dict[str, list[float]] = {"no_sharing": [test_mse(ols(d.x, d.y), t) for d, t in zip(data, tests)]}
    X, Y = np.stack([d.x for d in data]), np.stack([d.y for d in data])
    res = discover_linear_sharing(
        X[:, : cfg.n_train], Y[:, : cfg.n_train], X[:, cfg.n_train :], Y[:, cfg.n_train :],
        lr=cfg.lr, iters=cfg.iters, restarts=cfg.restarts, seed=cfg.seed,
        max_epochs=runtime.current().max_epochs,
    )
    mse["learned"] = [test_mse(G, t) for G, t in zip(res.W, tests)]
    out: dict[str, Any] = {}
    if cfg.augerino:
        fits = [fit_augerino_linear(d.x, d.y, t.x, t.y, n_samples=cfg.augerino_samples,
                                    max_shift=cfg.augerino_max_shift, steps=cfg.augerino_steps, lr=cfg.augerino_lr,
                                    entropy_weight=cfg.augerino_entropy_weight, seed=cfg.seed + i)
                for i, (d, t) in enumerate(zip(data, tests))]
        mse["augerino"] = [f["mse"] for f in fits]
        out["identity_mass"] = float(np.mean([f["identity_mass"] for f in fits]))
        out["shift_probs"] = [float(p) for p in np.mean([f["shift_probs"] for f in fits], 0)]
    for method, values in mse.items():
        out.update(_mean_ci(f"mse_{method}", values))
    out["mse"] = out["mse_learned"]  # the method's own column, under the paper's name
    out["mse_identity"] = float(np.mean([((t.x - t.y) ** 2).mean() for t in tests]))  # G = I: the noise left in
    learned = np.array(mse["learned"])
    for baseline in (m for m in METHODS if m != "learned" and m in mse):
        gain = np.array(mse[baseline]) - learned  # paired: the same data sets
        out.update(_mean_ci(f"gain_over_{baseline}", gain.tolist()))
        out[f"rel_gain_over_{baseline}"] = float(gain.mean() / np.mean(mse[baseline]))
    out["clusters_found"] = float(np.mean([len(set(lab.tolist())) for lab in res.labels]))
    out["toeplitz_fraction"] = float(np.mean([toeplitz_fraction(lab, cfg.length) for lab in res.labels]))
    return out


def claim_checks(points: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. A1's claim on runs at several noise levels (each a mapping with ``noise_std`` and the mean metrics of
    :func:`run`), compared at the lowest and the highest level: ``gain_grows_over_<baseline>`` (Ours' gain over the
    baseline is positive at the highest noise and larger than at the lowest), and ``comparable_at_low_noise`` (the
    spread of the methods' test MSEs, largest minus smallest, is smaller at the lowest level than at the highest).
    Empty with fewer than two noise levels."""
    levels = sorted(points, key=lambda p: p["noise_std"])
    if len(levels) < 2 or levels[0]["noise_std"] == levels[-1]["noise_std"]:
        return {}
    low, high = levels[0], levels[-1]
    out = {}
    for baseline in (m for m in METHODS if m != "learned"):
        key = f"gain_over_{baseline}"
        if key in low and key in high:
            out[f"gain_grows_over_{baseline}"] = bool(high[key] > max(low[key], 0.0))

    def spread(p: Mapping[str, Any]) -> float:
        values = [p[f"mse_{m}"] for m in METHODS if f"mse_{m}" in p]
        return max(values) - min(values)

    out["comparable_at_low_noise"] = bool(spread(low) < spread(high))
    return out


def _by_setting(rows: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows' mean metrics with their noise level, one list per setting of the other fields, by noise level."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        rest = {k: v for k, v in r["config"].items() if k not in ("noise_std", "seed")}
        groups.setdefault(repr(sorted(rest.items())), []).append({**r["mean"], "noise_std": r["config"]["noise_std"]})
    return [sorted(points, key=lambda p: p["noise_std"]) for points in groups.values()]


def claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. A1's claim for docs/reproductions.md: :func:`claim_checks` for each setting of the other fields, a
    check holding where it holds in every setting."""
    return holding_in_every(claim_checks(points) for points in _by_setting(rows))


def summarize(rows: Sequence[Mapping[str, Any]]) -> str:
    """Fig. A1 as a table (test MSE of each method per noise level, Ours' gains, Augerino's mass on the shift 0) and
    the claim's checks (:func:`claim_checks`) for each setting of the other fields."""
    lines = []
    for points in _by_setting(rows):
        lines += ["| noise std | No sharing | Ours | Augerino | Ours' gain over No sharing | over Augerino | "
                  "Augerino's mass on shift 0 | Ours' clusters |", "|---|---|---|---|---|---|---|---|"]

        def fmt(p: Mapping[str, Any], key: str, spec: str = ".4g") -> str:
            return format(p[key], spec) if isinstance(p.get(key), (int, float)) else "-"

        for p in points:
            lines.append(f"| {p['noise_std']:g} | {fmt(p, 'mse_no_sharing')} | {fmt(p, 'mse_learned')} | "
                         f"{fmt(p, 'mse_augerino')} | {fmt(p, 'gain_over_no_sharing')} | "
                         f"{fmt(p, 'gain_over_augerino')} | {fmt(p, 'identity_mass', '.3f')} | "
                         f"{fmt(p, 'clusters_found', '.1f')} |")
        checks = claim_checks(points)
        if checks:
            lines += ["", "Fig. A1's claim, lowest against highest noise level: " + "; ".join(
                f"{name.replace('_', ' ')}: {'holds' if ok else 'does not hold'}" for name, ok in checks.items())]
        lines.append("")
    return "\n".join(lines).rstrip()


EXPERIMENT = register(
    Experiment(
        name="sharing-denoise",
        description="A linear denoiser of step signals: learned sharing of its K x K matrix against No sharing and "
        "Augerino over shifts, across noise levels.",
        reproduces="Yeh et al. 2022, Fig. A1 (App. D.1): Ours' gain over No sharing and Augerino is largest at "
        "the highest noise level; at low noise No sharing, Augerino and Ours are comparable",
        config=DenoiseSharingConfig,
        run=run,
        validate=validate,
        summarize=summarize,
        claims=claims,
        quick={"n_runs": 3, "iters": 300, "restarts": 2, "n_test": 2000, "augerino_steps": 500},
        sweep={"noise_std": (0.1, 0.25, 0.5, 0.75, 1.0), "seed": (0,)},
        quick_sweep={"noise_std": (0.1, 1.0), "seed": (0,)},
        plots=(
            Plot(x="noise_std", y="mse", title="Test MSE of Ours (Fig. A1)"),
            Plot(x="noise_std", y="mse_no_sharing", title="Test MSE of No sharing (Fig. A1)"),
            Plot(x="noise_std", y="mse_augerino", title="Test MSE of Augerino (Fig. A1)"),
            Plot(x="noise_std", y="gain_over_no_sharing", title="Ours' gain over No sharing (test MSE)"),
            Plot(x="noise_std", y="identity_mass", title="Augerino: probability of the shift 0"),
        ),
    )
)
