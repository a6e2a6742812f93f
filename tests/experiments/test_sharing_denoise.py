"""sharing-denoise (Yeh et al. 2022, App. D.1, Fig. A1): the step-signal data, the Toeplitz measure of a tied G, a tiny
run of every method, the claim's ordering checks, and the settings it refuses."""

import math

import numpy as np
import pytest

from symkit.actions.partition import identity_partition, one_cluster
from symkit.lab.experiments import get_experiment
from symkit.lab.experiments.sharing_denoise import claim_checks, step_signals, toeplitz_fraction


def test_data_are_scaled_shifted_steps_with_the_stated_noise():
    K, n = 10, 20000
    d = step_signals(K, n, noise_std=0.7, seed=0)
    assert d.x.shape == d.y.shape == (n, K)
    # the clean part is exactly b + s U(k - t): b before the step, b + s from k = t on (Eq. 51)
    k = np.arange(K)[None, :]
    np.testing.assert_array_equal(d.y, d.b[:, None] + d.s[:, None] * (k >= d.t[:, None]))
    assert d.s.min() >= 1 and d.s.max() <= 50 and d.b.min() >= -5 and d.b.max() <= 5
    # t ~ unif{0, ..., K}: K + 1 positions, each about 1 / 11 of the signals (4 binomial sd is 0.008)
    counts = np.bincount(d.t, minlength=K + 1)
    assert len(counts) == K + 1 and np.abs(counts / n - 1 / (K + 1)).max() < 0.008
    # the noise: zero-mean Gaussian with the stated standard deviation (2e5 entries: within 1%)
    eps = (d.x - d.y).ravel()
    assert abs(eps.mean()) < 0.01 and eps.std() == pytest.approx(0.7, rel=0.01)
    assert abs(((eps / 0.7) ** 4).mean() - 3.0) < 0.1  # Gaussian kurtosis
    clean = step_signals(K, 50, noise_std=0.0, seed=0)
    np.testing.assert_array_equal(clean.x, clean.y)
    with pytest.raises(ValueError, match="noise_std"):
        step_signals(K, 5, noise_std=-1.0)


def test_toeplitz_fraction_counts_the_diagonals_tied_into_one_cluster():
    K = 4
    diagonals = (np.arange(K)[None, :] - np.arange(K)[:, None]).ravel()  # G[m, n] tied by n - m: Toeplitz
    assert toeplitz_fraction(diagonals, K) == 1.0
    assert toeplitz_fraction(one_cluster(K * K), K) == 1.0
    assert toeplitz_fraction(identity_partition(K * K), K) == pytest.approx(2 / 7)  # only the two corner entries
    rows = np.repeat(np.arange(K), K)  # G[m, n] tied by m: no diagonal but the corners is one cluster
    assert toeplitz_fraction(rows, K) == pytest.approx(2 / 7)


def _tiny(**settings):
    exp = get_experiment("sharing-denoise")
    return exp.run(exp.make_config(quick=True, n_runs=2, iters=40, restarts=1, augerino_steps=60, n_test=300,
                                   **settings))


def test_tiny_run_of_every_method_gives_finite_metrics():
    r = _tiny(noise_std=0.5)
    for key in ("mse_no_sharing", "mse_learned", "mse_augerino", "gain_over_no_sharing", "gain_over_augerino",
                "identity_mass", "clusters_found", "toeplitz_fraction", "mse_no_sharing_ci"):
        assert math.isfinite(r[key]), key
    assert r["mse"] == r["mse_learned"]
    assert r["gain_over_no_sharing"] == pytest.approx(r["mse_no_sharing"] - r["mse_learned"], rel=1e-9)
    assert r["gain_over_augerino"] == pytest.approx(r["mse_augerino"] - r["mse_learned"], rel=1e-9)
    assert sum(r["shift_probs"]) == pytest.approx(1.0, abs=1e-6) and 0 <= r["identity_mass"] <= 1
    # the identity denoiser leaves exactly the noise: its MSE estimates noise_std^2 (2 x 300 x 10 entries)
    assert r["mse_identity"] == pytest.approx(0.25, rel=0.08)
    without = _tiny(noise_std=0.5, augerino=False)
    assert "mse_augerino" not in without and "identity_mass" not in without
    assert without["mse_learned"] == r["mse_learned"]  # the same data sets and search


def test_claim_checks_compare_the_lowest_and_highest_noise():
    low = {"noise_std": 0.1, "mse_no_sharing": 0.0107, "mse_learned": 0.0100, "mse_augerino": 0.0400,
           "gain_over_no_sharing": 0.0007, "gain_over_augerino": 0.0300}
    mid = {**low, "noise_std": 0.5, "gain_over_no_sharing": 5.0}  # between the two ends: not compared
    high = {"noise_std": 1.0, "mse_no_sharing": 1.04, "mse_learned": 1.00, "mse_augerino": 1.07,
            "gain_over_no_sharing": 0.04, "gain_over_augerino": 0.07}
    assert claim_checks([high, mid, low]) == {"gain_grows_over_no_sharing": True, "gain_grows_over_augerino": True,
                                              "comparable_at_low_noise": True}
    flat = {**high, "mse_augerino": 1.01, "gain_over_augerino": 0.01}  # Augerino beaten more at low noise
    assert claim_checks([low, flat])["gain_grows_over_augerino"] is False
    worse = {**high, "mse_learned": 1.05, "gain_over_no_sharing": -0.01, "gain_over_augerino": 0.02}
    checks = claim_checks([low, worse])
    assert checks["gain_grows_over_no_sharing"] is False
    spread = {**low, "mse_augerino": 2.0}  # the methods far apart at low noise
    assert claim_checks([spread, high])["comparable_at_low_noise"] is False
    assert claim_checks([low]) == {}


def test_summary_states_the_claim():
    exp = get_experiment("sharing-denoise")
    base = {"mse_no_sharing": 0.0107, "mse_learned": 0.0100, "mse_augerino": 0.0400, "gain_over_no_sharing": 0.0007,
            "gain_over_augerino": 0.03, "identity_mass": 0.99, "clusters_found": 4.0}
    rows = [{"config": {"noise_std": 0.1, "length": 10, "seed": 0}, "mean": base},
            {"config": {"noise_std": 1.0, "length": 10, "seed": 0},
             "mean": {**base, "mse_no_sharing": 1.04, "mse_learned": 1.0, "mse_augerino": 1.07,
                      "gain_over_no_sharing": 0.04, "gain_over_augerino": 0.07}}]
    text = exp.summarize(rows)
    assert "| 0.1 | 0.0107 | 0.01 | 0.04 | 0.0007 | 0.03 | 0.990 | 4.0 |" in text
    assert ("gain grows over no sharing: holds; gain grows over augerino: holds; comparable at low noise: holds"
            in text)


def test_bad_settings_are_refused():
    exp = get_experiment("sharing-denoise")
    with pytest.raises(ValueError, match="n_train=5 is below the signal length 10"):
        exp.make_config(n_train=5)
    with pytest.raises(ValueError, match="augerino_max_shift=10 shifts an input of length 10"):
        exp.make_config(augerino_max_shift=10)
    exp.make_config(augerino_max_shift=10, augerino=False)  # no Augerino, no shift range to check
    with pytest.raises(ValueError, match="noise_std"):
        exp.make_config(noise_std=-0.1)
    with pytest.raises(ValueError, match="length"):
        exp.make_config(length=0)


def test_the_registered_claims_hold_only_where_every_setting_shows_them():
    exp = get_experiment("sharing-denoise")
    low = {"mse_no_sharing": 0.0107, "mse_learned": 0.0100, "mse_augerino": 0.0400, "gain_over_no_sharing": 0.0007,
           "gain_over_augerino": 0.03}
    high = {"mse_no_sharing": 1.04, "mse_learned": 1.0, "mse_augerino": 1.07, "gain_over_no_sharing": 0.04,
            "gain_over_augerino": 0.07}
    rows = [{"config": {"noise_std": 0.1, "length": 10, "seed": 0}, "mean": low},
            {"config": {"noise_std": 1.0, "length": 10, "seed": 0}, "mean": high}]
    assert exp.claims(rows) == {"gain_grows_over_no_sharing": True, "gain_grows_over_augerino": True,
                                "comparable_at_low_noise": True}
    # a second length where Ours loses at high noise: the check fails overall, the others still hold
    lose = {**high, "mse_learned": 1.05, "gain_over_no_sharing": -0.01}
    other = [{"config": {"noise_std": 0.1, "length": 5, "seed": 0}, "mean": low},
             {"config": {"noise_std": 1.0, "length": 5, "seed": 0}, "mean": lose}]
    assert exp.claims(rows + other) == {"gain_grows_over_no_sharing": False, "gain_grows_over_augerino": True,
                                        "comparable_at_low_noise": True}
    assert exp.claims(rows[:1]) == {}  # one noise level decides nothing
