"""Generalisation bounds for a compressed model (thesis ch. 5, §5.2–5.5 and App. A.4.10).

Every bound here takes the KL divergence in **bits** (``kl_bits``), the unit of a message length, and returns an
upper bound on the expected 0-1 error as a fraction in [0, 1], holding with probability at least ``1 - delta`` over
the draw of the ``n`` training points.

- :func:`point_mass_kl_bits`: the KL of a point mass at a hypothesis coded in ``l`` bits under the universal prior
  ``P(h) = 2^{-K(h)} / Z``: ``KL <= l + 2 log2 l`` (§5.3; the prefix code that delimits the message).
- :func:`finite_class_bound` (Eq. 5.1), :func:`mcallester_bound` (Eq. 5.2), :func:`catoni_bound` (Thm A.3, the bound
  the thesis reports), :func:`hoeffding_holdout_bound` (the data-dependent-prior baseline of §5.5.2) and
  :func:`seeger_bound` (the KL-inverse form, with :func:`kl_inverse`).
- :func:`hyperparameter_bits`: what a search over a pre-specified grid adds to the message (App. A.4.2).
- :func:`label_bits`, :func:`random_label_min_bits`, :func:`compressible_fraction`: the MDL view and why random
  labels cannot be compressed (App. A.4.1.1).

The Catoni bound uses ``Phi^{-1}_gamma(x) = (1 - exp(-gamma x)) / (1 - exp(-gamma))``. The thesis prints the
exponents with a positive sign, which gives values below the training error; the sign here is Catoni's and the
authors' code's, and a test checks the bound never falls below the training error.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from symkit._checks import check_int, check_number

__all__ = [
    "catoni_bound",
    "compressible_fraction",
    "finite_class_bound",
    "hoeffding_holdout_bound",
    "hyperparameter_bits",
    "kl_inverse",
    "label_bits",
    "mcallester_bound",
    "point_mass_kl_bits",
    "random_label_min_bits",
    "seeger_bound",
]

LN2 = math.log(2.0)
#: the ``alpha`` of the union bound over Catoni's ``lambda`` (the authors' code: ``1 + 1e-4``)
CATONI_ALPHA = 1.0 + 1e-4


# ---------------------------------------------------------------------------------------------- argument checks
def _error(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be an error rate in [0, 1], got {value!r}")
    return value


def _nonnegative(name: str, value: object) -> float:
    return check_number(name, value)


def _delta(delta: object) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)):
        raise TypeError(f"delta must be a number in (0, 1), got {type(delta).__name__}")
    if not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be a probability in (0, 1), got {delta!r}")
    return float(delta)


# ---------------------------------------------------------------------------------------------- coding
def point_mass_kl_bits(message_bits: float) -> float:
    """``l + 2 log2 l``: the KL (in bits) of a point mass at a hypothesis whose message takes ``l`` bits, under the
    universal prior (§5.3: ``KL <= K(h) log 2 <= l log 2 + 2 log l``; the ``2 log2 l`` bits delimit the message).
    ``l = 0`` (nothing to send, e.g. the prior's own point) gives 0."""
    bits = _nonnegative("message_bits", message_bits)
    return 0.0 if bits == 0 else bits + 2.0 * math.log2(max(bits, 1.0))


def hyperparameter_bits(*grid_sizes: int) -> float:
    """``log2`` of the number of configurations searched (App. A.4.2): choosing one of ``H`` pre-specified values
    costs ``log2 H`` bits, paid in the message. ``hyperparameter_bits(2, 2, 2) == 3``."""
    total = 0.0
    for i, size in enumerate(grid_sizes):
        total += math.log2(check_int(f"grid size {i}", size, 1))
    return total


def label_bits(n: int, num_classes: int) -> float:
    """``n log2 C``: the raw size of ``n`` labels of ``C`` classes (CIFAR-10's 50,000 labels: 20.3 KB)."""
    return check_int("n", n, 1) * math.log2(check_int("num_classes", num_classes, 2))


def random_label_min_bits(data_bits: float, nll_bits: float, delta: float = 0.05) -> float:
    """Eq. A.15: with probability ``1 - delta`` over uniformly random labels, a model that codes them in
    ``nll_bits`` needs ``K(h|P) >= |D| - NLL(D|h) - log2(1/delta) - 2`` bits: random labels are incompressible."""
    return (_nonnegative("data_bits", data_bits) - _nonnegative("nll_bits", nll_bits)
            - math.log2(1.0 / _delta(delta)) - 2.0)


def compressible_fraction(c: float) -> float:
    """``2^{1-c}``: at most this fraction of bit strings of any length ``n`` has a program of ``n - c`` bits or fewer
    (there are fewer than ``2^{n-c+1}`` such programs; App. A.4.1.1)."""
    return 2.0 ** (1.0 - _nonnegative("c", c))


# ---------------------------------------------------------------------------------------------- bounds
def finite_class_bound(train_error: float, log2_classes: float, n: int, delta: float = 0.05) -> float:
    """Eq. 5.1, Occam's bound for a finite class of ``2^{log2_classes}`` hypotheses:
    ``R <= R_hat + sqrt((ln |H| + ln(1/delta)) / (2n))``, capped at 1."""
    r = _error("train_error", train_error)
    size = _nonnegative("log2_classes", log2_classes) * LN2
    n = check_int("n", n, 1)
    return min(1.0, r + math.sqrt((size + math.log(1.0 / _delta(delta))) / (2 * n)))


def mcallester_bound(train_error: float, kl_bits: float, n: int, delta: float = 0.05) -> float:
    """Eq. 5.2 (McAllester 1999): ``R <= R_hat + sqrt((KL + ln(n/delta) + 2) / (2n - 1))``, KL in nats inside,
    capped at 1."""
    r = _error("train_error", train_error)
    kl = _nonnegative("kl_bits", kl_bits) * LN2
    n = check_int("n", n, 1)
    return min(1.0, r + math.sqrt((kl + math.log(n / _delta(delta)) + 2.0) / (2 * n - 1)))


def hoeffding_holdout_bound(holdout_error: float, m: int, num_params: int, delta: float = 0.05) -> float:
    """§5.5.2: a prior trained on the other part of the data and evaluated on ``m`` held-out points, with the
    posterior at the prior's own point (KL <= ln D for a model of D parameters):
    ``R <= R_hat_m + sqrt((ln(D m / delta) + 2) / (2m - 1))``, capped at 1."""
    r = _error("holdout_error", holdout_error)
    m = check_int("m", m, 1)
    d = check_int("num_params", num_params, 1)
    return min(1.0, r + math.sqrt((math.log(d * m / _delta(delta)) + 2.0) / (2 * m - 1)))


def _phi_inverse(gamma: float, x: float) -> float:
    """Catoni's ``Phi^{-1}_gamma(x) = (1 - e^{-gamma x}) / (1 - e^{-gamma})`` (the correct sign)."""
    return math.expm1(-gamma * x) / math.expm1(-gamma)


def _catoni_at(log_lambda: float, r: float, kl_nats: float, n: int, delta: float, alpha: float) -> float:
    lam = math.exp(log_lambda)
    union = 2.0 * math.log(math.log(alpha ** 2 * lam) / math.log(alpha))
    x = r + alpha / lam * (kl_nats + math.log(1.0 / delta) + union)
    return min(1.0, _phi_inverse(lam / n, x))


def catoni_bound(train_error: float, kl_bits: float, n: int, delta: float = 0.05,
                 alpha: float = CATONI_ALPHA) -> float:
    """Thm A.3 (Catoni 2007, as in Zhou et al. 2019), the bound the thesis reports:

    ``R <= inf_{lambda > 1} Phi^{-1}_{lambda/n}[R_hat + (alpha/lambda)(KL + ln(1/delta)
    + 2 ln(ln(alpha^2 lambda) / ln alpha))]``

    with the union bound over a geometric grid of ``lambda`` (ratio ``alpha``) paid by the last term, so the
    infimum is legitimate. The infimum is taken over ``ln lambda`` in ``(0, 4 + ln n]`` (the authors' bracket),
    by a grid and a bounded refinement. ``catoni_bound(0, point_mass_kl_bits(3113), 60_000) = 0.03601``.
    """
    r = _error("train_error", train_error)
    kl = _nonnegative("kl_bits", kl_bits) * LN2
    n = check_int("n", n, 1)
    d = _delta(delta)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 1.0 < alpha < math.inf:
        raise ValueError(f"alpha must be a number > 1, got {alpha!r}")
    hi = 4.0 + math.log(n)
    grid = np.linspace(1e-6, hi, 400)
    values = [_catoni_at(g, r, kl, n, d, alpha) for g in grid]
    best = int(np.argmin(values))
    lo_g, hi_g = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    refined = minimize_scalar(_catoni_at, bounds=(lo_g, hi_g), args=(r, kl, n, d, alpha), method="bounded",
                              options={"xatol": 1e-10})
    return float(min(values[best], refined.fun))


def kl_inverse(q: float, c: float) -> float:
    """``sup {p in [q, 1] : kl(q || p) <= c}`` (the Langford–Seeger inversion); ``c`` in nats. Solved for
    ``u = -ln(1 - p)`` (Brent's method), which keeps its precision when ``p`` is within 1e-12 of 1."""
    q = _error("q", q)
    c = _nonnegative("c", c)
    if q >= 1.0:
        return 1.0

    def excess(u: float) -> float:  # kl(q || 1 - e^{-u}) - c
        p = -math.expm1(-u)
        return (q * math.log(q / p) if q > 0 else 0.0) + (1 - q) * (math.log1p(-q) + u) - c

    lo = -math.log1p(-q)
    hi = lo + 1.0
    while excess(hi) < 0:
        hi = 2 * hi + 1.0
        if hi > 1e6:
            return 1.0
    return float(-math.expm1(-brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15)))


def seeger_bound(train_error: float, kl_bits: float, n: int, delta: float = 0.05) -> float:
    """The KL-inverse bound (Seeger 2002, Maurer 2004): ``kl(R_hat || R) <= (KL + ln(2 sqrt(n) / delta)) / n``."""
    r = _error("train_error", train_error)
    kl = _nonnegative("kl_bits", kl_bits) * LN2
    n = check_int("n", n, 1)
    return kl_inverse(r, (kl + math.log(2.0 * math.sqrt(n) / _delta(delta))) / n)
