"""pac-bayes-digits at its quick size (15 epochs): a non-vacuous compression bound on the digits, and the hold-out
bound of a data-dependent prior (§5.5.2) on quarter-turned digits, where the quarter-turn invariant P4CNN's bound is
far below its unconstrained twin's. Measured (seed 0): upright CNN subspace bound 0.727 (test error 0.217, 1,141
bits); hold-out bounds on rot90: P4CNN 0.187 (test error 0.072), CNN 0.723 (0.604). The P4CNN's subspace bound at
this size (0.98) is reported, not asserted: random-subspace training of the P4CNN is slow (docs/pacbayes.md)."""

import math

import pytest
import torch

from symkit.lab.experiments import get_experiment
from symkit.pacbayes import catoni_bound, point_mass_kl_bits

EXP = get_experiment("pac-bayes-digits")
CONSTANT = 0.9  # the most frequent digit is about 10% of the data


@pytest.fixture(scope="module")
def runs():
    out = {}
    for point in EXP.points(True):
        out[point["data"], point["model"], point["method"]] = EXP.run(EXP.make_config(quick=True, seed=0, **point))
    return out


def test_a_non_vacuous_compression_bound_on_digits(runs):
    m = runs["upright", "cnn", "subspace"]
    assert m["bound"] < 0.8 < CONSTANT
    assert m["quantized_test_error"] < 0.3
    # the quick run pays for choosing from its 2 configurations
    assert m["hyperparameter_bits"] == 1.0 and m["n"] == 1438
    assert m["bound"] == catoni_bound(m["quantized_train_error"], point_mass_kl_bits(m["message_bits"]), m["n"])


def test_the_invariant_model_has_the_tighter_hold_out_bound_on_rotated_digits(runs):
    p4, cnn = runs["rot90", "p4cnn", "holdout"], runs["rot90", "cnn", "holdout"]
    assert p4["quantized_test_error"] < 0.15 and p4["bound"] < 0.3
    assert p4["bound"] < cnn["bound"] - 0.2
    assert p4["n"] == cnn["n"] == 719


def test_twins_have_about_the_same_number_of_weights(runs):
    p4, cnn = runs["upright", "p4cnn", "subspace"], runs["upright", "cnn", "subspace"]
    assert 0.9 < p4["num_params"] / cnn["num_params"] < 1.1


def test_quarter_turned_digits_are_the_digits_turned(runs):
    from symkit.lab.experiments.pac_bayes_digits import PacBayesDigitsConfig, digits_data

    (x, _), _ = digits_data(PacBayesDigitsConfig(data="rot90"))
    (u, _), _ = digits_data(PacBayesDigitsConfig(data="upright"))
    turned = [min(float((torch.rot90(u[i], k, dims=(1, 2)) - x[i]).abs().max()) for k in range(4)) for i in range(50)]
    assert max(turned) == 0.0
    assert sum(float((x[i] - u[i]).abs().max()) > 0 for i in range(50)) > 25  # most are turned


def test_settings_are_checked(monkeypatch):
    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    with pytest.raises(ValueError, match="model must be one of"):
        EXP.make_config(quick=True, model="mlp")
    with pytest.raises(ValueError, match="no data directory"):
        EXP.make_config(quick=True, data="mnist", data_dir="")
    assert math.isclose(EXP.make_config().grid_size, 12)


def test_the_claims_compare_the_best_bounds_per_model():
    exp = get_experiment("pac-bayes-digits")

    def row(data, model, method, bound, d=None):
        return {"config": {"data": data, "model": model, "method": method, "intrinsic_dim": d}, "n": 3,
                "mean": {"bound": bound}}

    rows = [row("rot90", "cnn", "subspace", 0.88, 200), row("rot90", "cnn", "subspace", 0.95, 100),
            row("rot90", "p4cnn", "subspace", 0.91, 200), row("rot90", "p4cnn", "subspace", 0.86, 400),
            row("rot90", "cnn", "pruning", 1.0), row("rot90", "p4cnn", "pruning", 0.99)]
    # the best P4CNN setting (d = 400) decides, not the one at the CNN's best d
    assert exp.claims(rows) == {"rot90_p4cnn_subspace_bound_below_cnn": True,
                                "pruning_bound_above_subspace_everywhere": True}
    worse = rows[:3] + rows[4:]
    assert exp.claims(worse)["rot90_p4cnn_subspace_bound_below_cnn"] is False
    assert exp.claims(rows + [row("upright", "cnn", "pruning", 0.5), row("upright", "cnn", "subspace", 0.6)])[
        "pruning_bound_above_subspace_everywhere"] is False
    assert exp.claims([row("upright", "cnn", "holdout", 0.13)]) == {}
